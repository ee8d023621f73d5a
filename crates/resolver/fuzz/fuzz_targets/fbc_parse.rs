//! FBC parsing: arbitrary bytes never panic the decoder, the model, the validator or the
//! renderer; whatever parses renders to a fixed point; and the meta fields the model keeps for
//! every blob (what catalogd's metas index serves) agree with a second, independent reading
//! of the blob's text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use olm_resolver::fbc::{blob_meta, load_files, validate::validate};

fuzz_target!(|data: &[u8]| {
    if let Ok(fbc) = load_files([("fuzz", data)]) {
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
