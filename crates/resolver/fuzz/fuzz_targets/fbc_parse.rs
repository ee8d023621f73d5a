//! FBC parsing: arbitrary bytes never panic the decoder, the model, the validator or the
//! renderer, and whatever parses renders to a fixed point.
#![no_main]

use libfuzzer_sys::fuzz_target;
use olm_resolver::fbc::{load_files, validate::validate};

fuzz_target!(|data: &[u8]| {
    if let Ok(fbc) = load_files([("fuzz", data)]) {
        let _ = validate(&fbc);
        let rendered = fbc.render();
        if let Ok(again) = load_files([("all.json", &rendered)]) {
            assert_eq!(again.render(), rendered);
        }
    }
});
