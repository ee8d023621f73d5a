//! The field-by-field comparison of one version's schema before and after an upgrade: each
//! keyword a check knows is judged; a change to any other keyword is `unhandled` (refused),
//! except the ones that only document.

use serde_json::{Map, Value};

/// Keywords that describe and never reject: changed freely.
const DOCUMENTATION: [&str; 4] = ["description", "title", "example", "externalDocs"];

/// Keywords the comparison recurses into or judges itself.
const JUDGED: [&str; 14] = [
    "type",
    "enum",
    "required",
    "default",
    "maximum",
    "maxItems",
    "maxLength",
    "maxProperties",
    "minimum",
    "minItems",
    "minLength",
    "minProperties",
    "properties",
    "items",
];

/// Upper bounds: adding one, or lowering it, rejects values that were valid.
const UPPER: [&str; 4] = ["maximum", "maxItems", "maxLength", "maxProperties"];
/// Lower bounds: adding one, or raising it, rejects values that were valid.
const LOWER: [&str; 4] = ["minimum", "minItems", "minLength", "minProperties"];

type Report<'a> = dyn FnMut(String, &'static str, String) + 'a;

fn text(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// Compares the schema node `old` with `new` at `path`, reporting each violation.
pub(super) fn compare(old: &Value, new: &Value, path: &str, report: &mut Report<'_>) {
    let empty = Map::new();
    let o = old.as_object().unwrap_or(&empty);
    let n = new.as_object().unwrap_or(&empty);
    let mut say = |check: &'static str, detail: String| report(path.to_owned(), check, detail);

    if o.get("type") != n.get("type") {
        say(
            "type",
            format!(
                "changed from {} to {}",
                o.get("type").map(text).unwrap_or("none".into()),
                n.get("type").map(text).unwrap_or("none".into())
            ),
        );
    }
    match (
        o.get("enum").and_then(Value::as_array),
        n.get("enum").and_then(Value::as_array),
    ) {
        (None, Some(values)) => say(
            "enum",
            format!(
                "added where any value was allowed: {}",
                text(&Value::Array(values.clone()))
            ),
        ),
        (Some(before), Some(after)) => {
            let removed: Vec<Value> = before
                .iter()
                .filter(|v| !after.contains(v))
                .cloned()
                .collect();
            if !removed.is_empty() {
                say(
                    "enum",
                    format!("values removed: {}", text(&Value::Array(removed))),
                );
            }
        }
        // Removing the enum allows every value: looser.
        _ => {}
    }
    let required = |m: &Map<String, Value>| -> Vec<String> {
        m.get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect()
    };
    let before = required(o);
    let added: Vec<String> = required(n)
        .into_iter()
        .filter(|r| !before.contains(r))
        .collect();
    if !added.is_empty() {
        say(
            "required",
            format!("new required fields: {}", added.join(", ")),
        );
    }
    if o.get("default") != n.get("default") {
        say(
            "default",
            match (o.get("default"), n.get("default")) {
                (None, Some(d)) => format!("added: {}", text(d)),
                (Some(d), None) => format!("removed (was {})", text(d)),
                (Some(a), Some(b)) => format!("changed from {} to {}", text(a), text(b)),
                (None, None) => String::new(),
            },
        );
    }
    for (keywords, tighter) in [(&UPPER, true), (&LOWER, false)] {
        for keyword in keywords {
            let number = |m: &Map<String, Value>| m.get(*keyword).and_then(Value::as_f64);
            match (number(o), number(n)) {
                (None, Some(b)) => say(keyword, format!("added: {}", num(b))),
                (Some(a), Some(b)) if (tighter && b < a) || (!tighter && b > a) => say(
                    keyword,
                    format!(
                        "{} from {} to {}",
                        if tighter { "decreased" } else { "increased" },
                        num(a),
                        num(b)
                    ),
                ),
                _ => {}
            }
        }
    }
    for key in o.keys().chain(n.keys().filter(|k| !o.contains_key(*k))) {
        let key = key.as_str();
        if DOCUMENTATION.contains(&key) || JUDGED.contains(&key) || key == "additionalProperties" {
            continue;
        }
        if o.get(key) != n.get(key) {
            say("unhandled", unhandled(key, o.get(key), n.get(key)));
        }
    }

    // Children: fields, array items, map values.
    let props = |m: &Map<String, Value>| m.get("properties").and_then(Value::as_object).cloned();
    if let (Some(before), after) = (props(o), props(n).unwrap_or_default()) {
        for (field, schema) in &before {
            let child = format!("{path}.{field}");
            match after.get(field) {
                Some(next) => compare(schema, next, &child, report),
                None => report(child, "existingFieldRemoval", "the field is removed".into()),
            }
        }
    }
    for (keyword, suffix) in [("items", "[*]"), ("additionalProperties", "{*}")] {
        match (o.get(keyword), n.get(keyword)) {
            (Some(a @ Value::Object(_)), Some(b @ Value::Object(_))) => {
                compare(a, b, &format!("{path}{suffix}"), report)
            }
            (a, b) if a != b => report(path.to_owned(), "unhandled", unhandled(keyword, a, b)),
            _ => {}
        }
    }
}

fn num(v: f64) -> String {
    // Bounds are integers but for `minimum`/`maximum`; print them as written.
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

fn unhandled(key: &str, before: Option<&Value>, after: Option<&Value>) -> String {
    let shown = |v: Option<&Value>| {
        let s = v.map(text).unwrap_or("absent".into());
        if s.chars().count() > 80 {
            format!("{}...", s.chars().take(77).collect::<String>())
        } else {
            s
        }
    };
    format!(
        "{key:?} changed from {} to {}; a change no check knows is refused, as it cannot be shown safe",
        shown(before),
        shown(after)
    )
}
