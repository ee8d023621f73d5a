//! `load_model` (what operator-controller uses) keeps the same model as `load_files`, without
//! the blobs' text and the properties resolution does not read, on real and synthetic catalogs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::path::PathBuf;

use olm_resolver::fbc::property::Property;
use olm_resolver::fbc::{Fbc, load_files, load_model, load_path};
use olm_resolver::synth::{SynthConfig, generate};

fn assert_same_model(full: &Fbc, model: &Fbc) {
    assert_eq!(full.packages, model.packages);
    assert_eq!(full.channels, model.channels);
    assert_eq!(full.deprecations, model.deprecations);
    assert_eq!(full.bundles.len(), model.bundles.len());
    for (f, m) in full.bundles.iter().zip(&model.bundles) {
        let kept: Vec<&Property> = f
            .properties
            .iter()
            .filter(|p| !matches!(p, Property::Other { .. }))
            .collect();
        assert_eq!(kept, m.properties.iter().collect::<Vec<_>>(), "{}", f.name);
        assert_eq!((&f.image, &f.version), (&m.image, &m.version));
    }
    assert!(model.blobs.is_empty());
}

#[test]
fn the_model_of_every_sample_catalog_is_the_full_loads() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/fbc-samples");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if !path.is_dir() {
            continue;
        }
        // Rendered as catalogd serves it: one file.
        let Ok(fbc) = load_path(&path) else { continue };
        let served = fbc.render();
        let full = load_files([("all.json", &served)]).unwrap();
        let model = load_model("all.json", &served).unwrap();
        assert_same_model(&full, &model);
        seen += 1;
    }
    assert!(seen >= 3, "only {seen} samples loaded");
}

#[test]
fn the_model_of_a_synthetic_catalog_is_the_full_loads_and_invalid_input_fails_both() {
    let bytes = generate(&SynthConfig {
        packages: 20,
        bundles: 300,
        description_bytes: 500,
        ..Default::default()
    });
    let full = load_files([("synth.json", &bytes)]).unwrap();
    let model = load_model("synth.json", &bytes).unwrap();
    assert_same_model(&full, &model);
    assert!(full.bundles.iter().any(|b| {
        b.properties
            .iter()
            .any(|p| matches!(p, Property::Other { .. }))
    }));
    let broken = b"{\"schema\":\"olm.bundle\",\"name\":\"x\",\"properties\":7}\n";
    let a = load_files([("b.json", &broken[..])]).unwrap_err();
    let b = load_model("b.json", broken).unwrap_err();
    let text = |p: &olm_resolver::fbc::Problems| {
        p.into_iter().map(ToString::to_string).collect::<Vec<_>>()
    };
    assert_eq!(text(&a), text(&b));
}
