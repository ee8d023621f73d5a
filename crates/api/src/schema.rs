//! Schema helpers shared by several types: durations and condition lists.

use schemars::{Schema, json_schema};

/// Go `time.Duration` string syntax (`30s`, `5m`, `1h30m`), as `metav1.Duration` accepts it.
/// Kept as a pattern so the API server rejects nonsense before any controller sees it.
pub const DURATION_PATTERN: &str = r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$";

/// Schema of an optional duration field: a string in Go duration syntax.
pub fn duration_schema(_: &mut schemars::SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "pattern": DURATION_PATTERN,
        "maxLength": 32,
    })
}

/// Schema of a free-form object kept whole: `x-kubernetes-preserve-unknown-fields` and no
/// `additionalProperties`. With `additionalProperties: true` (what a JSON map's schema says) the
/// API server prunes every key of every object nested in it, as one with no schema: a
/// `deploymentConfig: {env: [...]}` would be stored as `deploymentConfig: {}`.
pub fn free_form_schema(_: &mut schemars::SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "nullable": true,
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// Any JSON value (an object or a string, say): kept as written.
pub fn any_schema(_: &mut schemars::SchemaGenerator) -> Schema {
    json_schema!({
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// The shortest poll interval the API accepts: a shorter one would hammer the source.
pub const MIN_POLL_INTERVAL: &str = "5s";
/// The longest: 7 days (longer is no polling at all, and leave the field out for that).
pub const MAX_POLL_INTERVAL: &str = "168h";

/// Schema of a `pollInterval`: a Go duration between [`MIN_POLL_INTERVAL`] and
/// [`MAX_POLL_INTERVAL`], refused by the API server otherwise (so `0s` is an error, not a
/// silent clamp).
pub fn poll_interval_schema(generator: &mut schemars::SchemaGenerator) -> Schema {
    let mut schema = duration_schema(generator);
    schema.insert(
        "x-kubernetes-validations".into(),
        serde_json::json!([{
            "rule": format!(
                "duration(self) >= duration('{MIN_POLL_INTERVAL}') && duration(self) <= duration('{MAX_POLL_INTERVAL}')"
            ),
            "message": format!(
                "pollInterval must be between {MIN_POLL_INTERVAL} and {MAX_POLL_INTERVAL}; leave it out to not poll"
            ),
        }]),
    );
    schema
}

/// Schema of a `metav1.Condition` list shared by several writers: a map list keyed on `type`, so
/// server-side apply lets each field manager own its own conditions.
pub fn conditions_schema(generator: &mut schemars::SchemaGenerator) -> Schema {
    let mut items =
        generator.subschema_for::<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>();
    // k8s-openapi emits Condition with a description; keep it, just mark the list as a map.
    items.remove("title");
    // The bounds upstream's metav1.Condition carries (its kubebuilder markers), which
    // k8s-openapi's schema lacks: a message built from a remote's words can never make a
    // status write fail or grow an object without bound (writers clip to them).
    if let Some(properties) = items
        .get_mut("properties")
        .and_then(serde_json::Value::as_object_mut)
    {
        let bound = |properties: &mut serde_json::Map<String, serde_json::Value>,
                     field: &str,
                     extra: serde_json::Value| {
            if let (Some(schema), Some(extra)) = (
                properties
                    .get_mut(field)
                    .and_then(serde_json::Value::as_object_mut),
                extra.as_object(),
            ) {
                schema.extend(extra.clone());
            }
        };
        bound(
            properties,
            "message",
            serde_json::json!({"maxLength": crate::conditions::MAX_MESSAGE_LENGTH}),
        );
        bound(
            properties,
            "reason",
            serde_json::json!({
                "maxLength": 1024,
                "minLength": 1,
                "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
            }),
        );
        bound(
            properties,
            "type",
            serde_json::json!({
                "maxLength": 316,
                "pattern": r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
            }),
        );
        bound(
            properties,
            "status",
            serde_json::json!({"enum": ["True", "False", "Unknown"]}),
        );
        bound(
            properties,
            "observedGeneration",
            serde_json::json!({"minimum": 0}),
        );
    }
    json_schema!({
        "type": "array",
        "items": items,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
    })
}
