//! Any JSON as a pair of CRDs (`[old, new]`, or one CRD as both): never a panic; a CRD
//! compared with itself has no violation whatever it holds (given a stored version is one of
//! its versions, as the API server ensures) (a check that fires on no change
//! would refuse every resync); the message of any comparison stays bounded; and every
//! schema of the new CRD compiles or is refused, never a panic, and validates an object
//! without one.
#![no_main]

use libfuzzer_sys::fuzz_target;
use provisioner::crd_safety::validate::Schema;
use provisioner::crd_safety::{check, message, schema_of, served};
use serde_json::Value;

fn stored_versions_kept(crd: &Value) -> bool {
    let names: Vec<&str> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.get("name").and_then(Value::as_str))
        .collect();
    crd.pointer("/status/storedVersions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .all(|v| v.as_str().is_some_and(|s| names.contains(&s)))
}

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let (old, new) = match &value {
        Value::Array(pair) if pair.len() == 2 => (pair[0].clone(), pair[1].clone()),
        other => (other.clone(), other.clone()),
    };
    for crd in [&old, &new] {
        // The API server keeps every stored version in spec.versions; a CRD that breaks that
        // is not one the cluster can hold.
        if stored_versions_kept(crd) {
            let same = check(crd, crd);
            assert!(same.is_empty(), "a CRD against itself: {same:?}");
        }
    }
    let violations = check(&old, &new);
    let text = message("x", &violations);
    assert!(text.len() < 4096 + 1024, "{} bytes", text.len());
    for version in served(&new) {
        if let Some(schema) = schema_of(&new, &version)
            && let Ok(compiled) = Schema::compile(schema)
        {
            let _ = compiled.first_error(&old);
        }
    }
});
