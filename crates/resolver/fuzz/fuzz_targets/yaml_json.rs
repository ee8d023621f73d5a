//! YAML to JSON: wherever the fast path reads a file (it gives up on anything it does not
//! handle exactly as saphyr does), saphyr reads it too and gives the same documents: the same
//! JSON values, starting on the same lines.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "yaml_agree.rs"]
mod agree;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        agree::check(text);
    }
});
