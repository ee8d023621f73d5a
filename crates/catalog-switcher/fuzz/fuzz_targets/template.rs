//! Templates are written by whoever may annotate a Catalog. Properties: parsing never panics;
//! an error points at a column inside the text; a template that parses, written canonically,
//! parses to the same template; and filling it never panics, and yields an image only when
//! every variable resolved.
#![no_main]

use catalog_switcher::render::{Lookup, Outcome, resolve};
use catalog_switcher::template::parse;
use catalog_switcher::version::KubeVersion;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match parse(text) {
        Err(e) => assert!(
            e.column >= 1 && e.column <= text.chars().count() + 1,
            "{e} in {text:?}"
        ),
        Ok(t) => {
            let canonical = t.to_string();
            assert_eq!(parse(&canonical).as_ref(), Ok(&t), "{canonical:?}");
        }
    }
    let version = KubeVersion {
        major: "1".into(),
        minor: "36".into(),
        patch: Some("3".into()),
        git_version: "v1.36.3".into(),
    };
    let object = serde_json::json!({"spec": {"foo": "bar", "n": 1, "list": [1, 2]}, "metadata": {"name": "x"}});
    let outcome = resolve(text, Some(&version), &mut |_| Lookup::Found(object.clone()));
    if let Outcome::Resolved(image) = outcome {
        assert!(!image.contains('{') && !image.contains('}'), "{image:?}");
    }
});
