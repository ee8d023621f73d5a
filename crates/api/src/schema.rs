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
    json_schema!({
        "type": "array",
        "items": items,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
    })
}
