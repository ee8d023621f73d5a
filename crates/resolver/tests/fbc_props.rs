//! No input may panic the FBC parser, validator, renderer or resolver index; and rendering is a
//! fixed point (render, parse the rendering, render again: the same bytes).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use olm_resolver::fbc::{load_files, validate::validate};
use olm_resolver::resolve::{CatalogInput, Index, Request, resolve};
use proptest::prelude::*;
use std::sync::Arc;

/// Arbitrary JSON values, biased towards the shapes of catalog blobs.
fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::Bool),
        any::<i64>().prop_map(|n| serde_json::json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| serde_json::json!(f)),
        prop_oneof![
            Just("olm.package".to_owned()),
            Just("olm.channel".to_owned()),
            Just("olm.bundle".to_owned()),
            Just("olm.deprecations".to_owned()),
            Just("foo".to_owned()),
            Just("1.0.0".to_owned()),
            Just(">=1.0.0 <2.0.0".to_owned()),
            "\\PC{0,12}",
        ]
        .prop_map(serde_json::Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("schema".to_owned()),
                    Just("name".to_owned()),
                    Just("package".to_owned()),
                    Just("entries".to_owned()),
                    Just("properties".to_owned()),
                    Just("type".to_owned()),
                    Just("value".to_owned()),
                    Just("replaces".to_owned()),
                    Just("skips".to_owned()),
                    Just("skipRange".to_owned()),
                    Just("defaultChannel".to_owned()),
                    "[a-zA-Z]{1,6}",
                ],
                inner,
                0..6,
            )
            .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        if let Ok(fbc) = load_files([("f", &bytes)]) {
            let _ = validate(&fbc);
            let _ = fbc.render();
        }
    }

    #[test]
    fn arbitrary_text_never_panics(text in "(---\n|\\{|\\}|\\[|\\]|: |- |\"|schema|olm\\.bundle|\n|  |[a-z0-9.]{1,5}){0,40}") {
        if let Ok(fbc) = load_files([("f", text.as_bytes())]) {
            let _ = validate(&fbc);
        }
    }

    #[test]
    fn arbitrary_blobs_never_panic_and_render_to_a_fixed_point(blobs in prop::collection::vec(json_value(), 0..8)) {
        let text: String = blobs.iter().map(|b| format!("{b}\n")).collect();
        // A stream of JSON values whose first is not an object is read as YAML; both must not panic.
        if let Ok(fbc) = load_files([("f.json", text.as_bytes())]) {
            let _ = validate(&fbc);
            let rendered = fbc.render();
            let again = load_files([("all.json", &rendered)]).unwrap();
            prop_assert_eq!(again.render(), rendered);
            let catalogs = [CatalogInput { name: "c".into(), priority: 0, labels: Default::default(), fbc: Arc::new(fbc) }];
            let index = Index::build(&catalogs);
            let _ = resolve(&index, &[Request { package_name: "foo".into(), ..Default::default() }], &[]);
        }
    }
}
