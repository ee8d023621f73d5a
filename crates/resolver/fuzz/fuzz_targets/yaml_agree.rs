//! The property both YAML fuzz targets check: wherever the fast path reads a file, saphyr
//! reads it too and gives the same documents, the same JSON values starting on the same lines.

use olm_resolver::fbc::decode::{Documents, yaml_both};
use serde_json::Value;

pub fn check(text: &str) {
    let (fast, saphyr) = yaml_both(text);
    let Some(fast) = fast else {
        return;
    };
    let saphyr = match saphyr {
        Ok(docs) => docs,
        Err(e) => panic!("the fast path read what saphyr refuses ({e:?}): {text:?}"),
    };
    let values = |docs: &Documents| -> Vec<(Value, usize)> {
        docs.iter()
            .map(|(json, line)| (serde_json::from_str(json).expect("valid JSON"), line))
            .collect()
    };
    assert_eq!(values(&fast), values(&saphyr), "{text:?}");
}
