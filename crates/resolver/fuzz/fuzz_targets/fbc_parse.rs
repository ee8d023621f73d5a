//! FBC parsing: arbitrary bytes never panic the decoder, the model, the validator or the
//! renderer; whatever parses renders to a fixed point; the meta fields the model keeps for
//! every blob (what catalogd's metas index serves) agree with a second, independent reading
//! of the blob's text; and the model-only load (what operator-controller uses) accepts exactly
//! what the full load accepts and keeps the same model, less the properties it drops.
#![no_main]

use libfuzzer_sys::fuzz_target;
use olm_resolver::fbc::property::Property;
use olm_resolver::fbc::{blob_meta, load_files, load_model, validate::validate};

fuzz_target!(|data: &[u8]| {
    let full = load_files([("fuzz", data)]);
    let model = load_model("fuzz", data);
    assert_eq!(full.is_ok(), model.is_ok(), "the two loads disagree on validity");
    if let (Ok(full), Ok(model)) = (&full, &model) {
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
            assert_eq!(kept, m.properties.iter().collect::<Vec<_>>());
            assert_eq!((&f.name, &f.package, &f.image, &f.version), (&m.name, &m.package, &m.image, &m.version));
        }
        assert!(model.blobs.is_empty());
    }
    if let Ok(fbc) = full {
        let _ = validate(&fbc);
        for blob in fbc.blobs.iter() {
            let meta = blob_meta(blob.raw).expect("a kept blob's meta fields read again");
            assert_eq!(meta.schema.as_deref().unwrap_or_default(), blob.schema);
            assert_eq!(meta.package.as_deref().unwrap_or_default(), blob.package);
            assert_eq!(meta.name.as_deref().unwrap_or_default(), blob.name);
        }
        let rendered = fbc.render();
        let again = load_files([("all.json", &rendered)]).expect("a rendering loads again");
        assert_eq!(again.render(), rendered);
        assert_eq!(again.blobs.len(), fbc.blobs.len());
    }
});
