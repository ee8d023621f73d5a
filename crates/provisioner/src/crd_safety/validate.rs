//! Existing custom resources against a CRD version's new schema: the check rukpak's old
//! webhook made. The keyword comparison judges a change in the abstract; this names the object
//! a change would strand, and covers what the comparison does not see: a new served version
//! (no conversion) whose schema the stored objects do not meet, or constraints added under a
//! field that kept unknown fields.
//!
//! The schema is OpenAPI v3 as Kubernetes reads it, validated as JSON Schema draft 4 (the
//! dialect it derives from), with `nullable` turned into draft 4's spelling. Formats are not
//! checked (Kubernetes' set differs from JSON Schema's), nor are `x-kubernetes-validations`
//! (CEL).

use serde_json::{Map, Value};

/// A compiled schema.
pub struct Schema(jsonschema::Validator);

/// Why a schema could not be compiled.
#[derive(Debug, thiserror::Error)]
#[error("the schema cannot be compiled: {0}")]
pub struct BadSchema(String);

impl Schema {
    /// Compiles a version's `openAPIV3Schema`, after refusing the keywords CRDs forbid: the
    /// schema comes from a bundle, before the API server has validated it, and `$ref`, `id` or
    /// `definitions` would have the compiler resolve references the API server never would.
    pub fn compile(openapi: &Value) -> Result<Schema, BadSchema> {
        if let Some((path, keyword)) = forbidden(openapi, "^") {
            return Err(BadSchema(format!(
                "{path}: {keyword} is not allowed in a CRD's schema"
            )));
        }
        jsonschema::draft4::options()
            .should_validate_formats(false)
            .build(&draft4(openapi))
            .map(Schema)
            .map_err(|e| BadSchema(e.to_string()))
    }

    /// The first reason `object` does not validate, as `<path>: <why>` (the path a JSON
    /// pointer, `/` for the root), or `None` when it does.
    pub fn first_error(&self, object: &Value) -> Option<String> {
        self.0.validate(object).err().map(|e| {
            let path = e.instance_path().to_string();
            let path = if path.is_empty() {
                "/".to_owned()
            } else {
                path
            };
            format!("{path}: {e}")
        })
    }
}

/// Keywords the API server refuses in a CRD's `openAPIV3Schema`.
const FORBIDDEN: [&str; 7] = [
    "$ref",
    "$schema",
    "id",
    "definitions",
    "patternProperties",
    "dependencies",
    "additionalItems",
];

/// The first keyword of `schema` (a schema node at `path`) that CRDs forbid, with where it is.
fn forbidden(schema: &Value, path: &str) -> Option<(String, &'static str)> {
    match schema {
        Value::Object(m) => {
            if let Some(keyword) = FORBIDDEN.iter().find(|k| m.contains_key(**k)) {
                return Some((path.to_owned(), keyword));
            }
            m.iter().find_map(|(k, v)| match (k.as_str(), v) {
                ("properties", Value::Object(children)) => children
                    .iter()
                    .find_map(|(name, child)| forbidden(child, &format!("{path}.{name}"))),
                ("items", v) => forbidden(v, &format!("{path}[*]")),
                ("additionalProperties", v) => forbidden(v, &format!("{path}{{*}}")),
                ("not" | "allOf" | "anyOf" | "oneOf", v) => forbidden(v, path),
                _ => None,
            })
        }
        Value::Array(items) => items.iter().find_map(|v| forbidden(v, path)),
        _ => None,
    }
}

/// `schema` in draft 4's spelling: `nullable: true` becomes `null` among the types (or an
/// `anyOf` with `null` where there is no type); everything else is kept.
pub fn draft4(schema: &Value) -> Value {
    match schema {
        Value::Object(m) => {
            let mut out: Map<String, Value> = m
                .iter()
                .filter(|(k, _)| k.as_str() != "nullable")
                .map(|(k, v)| {
                    let v = match k.as_str() {
                        // Maps of schemas.
                        "properties" | "patternProperties" | "definitions" => match v {
                            Value::Object(children) => Value::Object(
                                children
                                    .iter()
                                    .map(|(k, v)| (k.clone(), draft4(v)))
                                    .collect(),
                            ),
                            other => other.clone(),
                        },
                        // A schema, or a list of schemas.
                        "items" | "additionalProperties" | "not" | "allOf" | "anyOf" | "oneOf" => {
                            draft4(v)
                        }
                        _ => v.clone(),
                    };
                    (k.clone(), v)
                })
                .collect();
            if m.get("nullable").and_then(Value::as_bool) == Some(true) {
                match out.remove("type") {
                    Some(Value::String(t)) => {
                        out.insert("type".into(), serde_json::json!([t, "null"]));
                        // An enum must admit null too.
                        if let Some(Value::Array(values)) = out.get_mut("enum")
                            && !values.contains(&Value::Null)
                        {
                            values.push(Value::Null);
                        }
                    }
                    other => {
                        if let Some(t) = other {
                            out.insert("type".into(), t);
                        }
                        let inner = Value::Object(std::mem::take(&mut out));
                        out.insert("anyOf".into(), serde_json::json!([{"type": "null"}, inner]));
                    }
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(draft4).collect()),
        other => other.clone(),
    }
}
