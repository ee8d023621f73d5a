//! YAML to JSON: wherever the fast path reads a file (it gives up on anything it does not
//! handle exactly as saphyr does), saphyr reads it too and gives the same documents: the same
//! JSON values, starting on the same lines.
#![no_main]

use libfuzzer_sys::fuzz_target;
use olm_resolver::fbc::decode::yaml_both;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (fast, saphyr) = yaml_both(text);
    let Some(fast) = fast else {
        return;
    };
    let saphyr = match saphyr {
        Ok(docs) => docs,
        Err(e) => panic!("the fast path read what saphyr refuses ({e:?}): {text:?}"),
    };
    let values = |docs: &olm_resolver::fbc::decode::Documents| -> Vec<(Value, usize)> {
        docs.iter()
            .map(|(json, line)| (serde_json::from_str(json).expect("valid JSON"), line))
            .collect()
    };
    assert_eq!(values(&fast), values(&saphyr), "{text:?}");
});
