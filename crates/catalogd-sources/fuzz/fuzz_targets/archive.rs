//! Archives from an http source: arbitrary bytes (used raw, and wrapped in gzip so the fuzzer
//! reaches the tar reader) never panic, and whatever is accepted stays inside the catalog:
//! every path is relative, normalized (no `.`, `..` or empty segment), sorted and unique, and
//! the total size is within the limit.
#![no_main]

use std::io::Write;

use libfuzzer_sys::fuzz_target;

const MAX: u64 = 64 * 1024;

fn check(body: Vec<u8>) {
    let Ok(files) = catalogd_sources::archive::files("https://h/c.tar.gz", body, MAX) else {
        return;
    };
    let mut total = 0u64;
    let mut previous: Option<&str> = None;
    for (path, content) in &files {
        assert!(!path.starts_with('/'), "{path:?}");
        assert!(
            path.split('/').all(|s| !s.is_empty() && s != "." && s != ".."),
            "{path:?}"
        );
        if let Some(p) = previous {
            assert!(p < path.as_str(), "{p:?} then {path:?}");
        }
        previous = Some(path);
        total += content.len() as u64;
    }
    // A single (non-archive) file is the body itself, limited by the download's own check.
    if files.len() > 1 || files.first().is_some_and(|(p, _)| p.contains('/')) {
        assert!(total <= MAX, "{total} bytes");
    }
}

fuzz_target!(|data: &[u8]| {
    check(data.to_vec());
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    if gz.write_all(data).is_ok()
        && let Ok(wrapped) = gz.finish()
    {
        check(wrapped);
    }
});
