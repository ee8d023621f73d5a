//! Label and field selectors, as the API server reads them (`-l`, `--field-selector`).
//!
//! Label selectors: `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k` and `!k`, joined
//! by commas, all of which must hold. Field selectors: `f=v`, `f==v` and `f!=v` over the
//! fields each kind supports, with `\,`, `\=` and `\\` escaping a value's characters.

use std::collections::{BTreeMap, BTreeSet};

/// The longest selector read; a longer one is refused before it is parsed.
pub const MAX_SELECTOR: usize = 4096;

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    /// The label is set to one of the values.
    In(String, BTreeSet<String>),
    /// The label is unset or set to none of the values.
    NotIn(String, BTreeSet<String>),
    /// The label is set.
    Exists(String),
    /// The label is unset.
    DoesNotExist(String),
}

impl Requirement {
    fn matches(&self, labels: &BTreeMap<&str, &str>) -> bool {
        match self {
            Requirement::In(k, vs) => labels.get(k.as_str()).is_some_and(|v| vs.contains(*v)),
            Requirement::NotIn(k, vs) => labels.get(k.as_str()).is_none_or(|v| !vs.contains(*v)),
            Requirement::Exists(k) => labels.contains_key(k.as_str()),
            Requirement::DoesNotExist(k) => !labels.contains_key(k.as_str()),
        }
    }
}

/// A parsed label selector; the empty one selects everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector(pub Vec<Requirement>);

impl LabelSelector {
    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<&str, &str>) -> bool {
        self.0.iter().all(|r| r.matches(labels))
    }

    /// The value the selector requires of `key` when it names exactly one (`key=value`), so
    /// that a list can start from the index's sorted order instead of scanning.
    pub fn required(&self, key: &str) -> Option<&str> {
        self.0.iter().find_map(|r| match r {
            Requirement::In(k, vs) if k == key && vs.len() == 1 => {
                vs.iter().next().map(String::as_str)
            }
            _ => None,
        })
    }
}

/// Parses a label selector.
///
/// # Errors
///
/// What is wrong with it, in the API server's words where it has them.
pub fn labels(text: &str) -> Result<LabelSelector, String> {
    if text.len() > MAX_SELECTOR {
        return Err(format!(
            "label selector longer than {MAX_SELECTOR} characters"
        ));
    }
    let mut out = Vec::new();
    for term in split_terms(text)? {
        let term = term.trim();
        if term.is_empty() {
            continue;
        }
        out.push(requirement(term)?);
    }
    Ok(LabelSelector(out))
}

/// Splits at commas outside parentheses.
fn split_terms(text: &str) -> Result<Vec<&str>, String> {
    let mut terms = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| format!("unbalanced ')' in label selector {text:?}"))?;
            }
            ',' if depth == 0 => {
                terms.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(format!("unbalanced '(' in label selector {text:?}"));
    }
    terms.push(&text[start..]);
    Ok(terms)
}

fn requirement(term: &str) -> Result<Requirement, String> {
    if let Some(key) = term.strip_prefix('!') {
        return Ok(Requirement::DoesNotExist(key_of(key.trim())?));
    }
    for (op, negate) in [("!=", true), ("==", false), ("=", false)] {
        if let Some((k, v)) = term.split_once(op) {
            let value = value_of(v.trim())?;
            let set = BTreeSet::from([value]);
            let key = key_of(k.trim())?;
            return Ok(if negate {
                Requirement::NotIn(key, set)
            } else {
                Requirement::In(key, set)
            });
        }
    }
    if term.contains('<') || term.contains('>') {
        return Err(format!(
            "label selector {term:?}: the operators < and > are not served by this API"
        ));
    }
    let words: Vec<&str> = term.splitn(2, char::is_whitespace).collect();
    if let [key, rest] = words[..] {
        let rest = rest.trim_start();
        let (negate, list) = if let Some(list) = rest.strip_prefix("notin") {
            (true, list)
        } else if let Some(list) = rest.strip_prefix("in") {
            (false, list)
        } else {
            return Err(format!("unable to parse requirement {term:?}"));
        };
        let list = list
            .trim()
            .strip_prefix('(')
            .and_then(|l| l.strip_suffix(')'))
            .ok_or_else(|| format!("{term:?}: expected a parenthesised list of values"))?;
        if list.trim().is_empty() {
            return Err(format!(
                "{term:?}: for 'in' and 'notin', a set of values is required"
            ));
        }
        let values = list
            .split(',')
            .map(|v| value_of(v.trim()))
            .collect::<Result<BTreeSet<_>, _>>()?;
        let key = key_of(key)?;
        return Ok(if negate {
            Requirement::NotIn(key, values)
        } else {
            Requirement::In(key, values)
        });
    }
    Ok(Requirement::Exists(key_of(term)?))
}

fn key_of(key: &str) -> Result<String, String> {
    let (prefix, name) = key.rsplit_once('/').unwrap_or(("", key));
    let name_ok = crate::names::is_label_value(name) && !name.is_empty();
    let prefix_ok = prefix.is_empty() || crate::names::is_subdomain(prefix);
    if name_ok && prefix_ok {
        Ok(key.to_owned())
    } else {
        Err(format!("invalid label key {key:?}"))
    }
}

fn value_of(value: &str) -> Result<String, String> {
    if crate::names::is_label_value(value) {
        Ok(value.to_owned())
    } else {
        Err(format!("invalid label value {value:?}"))
    }
}

/// One requirement of a field selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRequirement {
    /// The field (`metadata.name`, `spec.package` …).
    pub field: String,
    /// The value.
    pub value: String,
    /// `!=` rather than `=`.
    pub negate: bool,
}

/// A parsed field selector.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector(pub Vec<FieldRequirement>);

impl FieldSelector {
    /// Whether `get(field)` satisfies every requirement (an unknown field never does).
    pub fn matches<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.0.iter().all(|r| match get(&r.field) {
            Some(v) => (v == r.value) != r.negate,
            None => false,
        })
    }

    /// The value the selector requires of `field`, if it requires one.
    pub fn required(&self, field: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|r| r.field == field && !r.negate)
            .map(|r| r.value.as_str())
    }
}

/// Parses a field selector, refusing fields not in `supported`.
///
/// # Errors
///
/// What is wrong with it, in the API server's words (`field label not supported: …`).
pub fn fields(text: &str, supported: &[&str]) -> Result<FieldSelector, String> {
    if text.len() > MAX_SELECTOR {
        return Err(format!(
            "field selector longer than {MAX_SELECTOR} characters"
        ));
    }
    let mut out = Vec::new();
    for term in split_unescaped(text, ',') {
        if term.trim().is_empty() {
            continue;
        }
        let Some((field, value, negate)) = split_op(&term) else {
            return Err(format!(
                "invalid selector: '{text}'; can't understand '{term}'"
            ));
        };
        let field = field.trim().to_owned();
        if !supported.contains(&field.as_str()) {
            return Err(format!("field label not supported: {field}"));
        }
        out.push(FieldRequirement {
            field,
            value: unescape(value.trim()),
            negate,
        });
    }
    Ok(FieldSelector(out))
}

/// Splits at `sep` not preceded by a backslash, keeping escapes for [`unescape`].
fn split_unescaped(text: &str, sep: char) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut escaped = false;
    for c in text.chars() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == sep {
            parts.push(String::new());
            continue;
        }
        if let Some(last) = parts.last_mut() {
            last.push(c);
        }
    }
    parts
}

/// The leftmost unescaped operator (`!=`, `==` or `=`) splits field from value, as the API
/// server reads it; whether it is `!=`.
fn split_op(term: &str) -> Option<(&str, &str, bool)> {
    let mut escaped = false;
    for (i, c) in term.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        if c == '\\' {
            escaped = true;
            continue;
        }
        for (op, negate) in [("!=", true), ("==", false), ("=", false)] {
            if term[i..].starts_with(op) {
                return Some((&term[..i], &term[i + op.len()..], negate));
            }
        }
    }
    None
}

fn unescape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut escaped = false;
    for c in value.chars() {
        if escaped || c != '\\' {
            out.push(c);
            escaped = false;
        } else {
            escaped = true;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn map<'a>(pairs: &[(&'a str, &'a str)]) -> BTreeMap<&'a str, &'a str> {
        pairs.iter().copied().collect()
    }

    #[test]
    fn label_selectors_as_kubectl_writes_them() {
        let labels = map(&[("package", "etcd"), ("schema", "olm.bundle")]);
        for (selector, expected) in [
            ("", true),
            ("package=etcd", true),
            ("package==etcd", true),
            ("package!=etcd", false),
            ("package in (etcd, prometheus)", true),
            ("package notin (etcd)", false),
            ("package", true),
            ("!package", false),
            ("catalog", false),
            ("!catalog", true),
            ("package=etcd,schema=olm.bundle", true),
            ("package=etcd,schema=olm.channel", false),
            ("catalog!=x", true),
        ] {
            let parsed = super::labels(selector).map_err(|e| format!("{selector}: {e}"));
            assert_eq!(
                parsed.map(|s| s.matches(&labels)),
                Ok(expected),
                "{selector}"
            );
        }
        assert_eq!(
            super::labels("package=etcd").map(|s| s.required("package").map(str::to_owned)),
            Ok(Some("etcd".into()))
        );
    }

    #[test]
    fn bad_label_selectors_are_refused() {
        for selector in [
            "package in (a",
            "x=(",
            "a b c",
            "x>1",
            "=x",
            "p=-bad-",
            "p in ()",
        ] {
            assert!(super::labels(selector).is_err(), "{selector}");
        }
    }

    #[test]
    fn field_selectors_with_escapes() {
        let supported = ["metadata.name", "spec.package"];
        let parsed = fields(r"spec.package=a\,b,metadata.name!=x", &supported);
        let parsed = parsed.map_err(|e| e.to_string());
        let Ok(selector) = parsed else {
            unreachable!("{parsed:?}")
        };
        assert_eq!(selector.0[0].value, "a,b");
        let get = |f: &str| match f {
            "spec.package" => Some("a,b"),
            "metadata.name" => Some("y"),
            _ => None,
        };
        assert!(selector.matches(get));
        assert_eq!(
            fields("spec.icon=x", &supported),
            Err("field label not supported: spec.icon".into())
        );
        assert!(fields("nonsense", &supported).is_err());
        // The leftmost operator splits: the value is "a!=b".
        let leftmost = fields("spec.package=a!=b", &supported).unwrap();
        assert_eq!(leftmost.0[0].value, "a!=b");
        assert!(!leftmost.0[0].negate);
    }

    proptest! {
        /// Any text is parsed or refused, never a panic.
        #[test]
        fn any_selector_text(text in ".{0,64}") {
            let _ = super::labels(&text);
            let _ = fields(&text, &["metadata.name"]);
        }
    }
}
