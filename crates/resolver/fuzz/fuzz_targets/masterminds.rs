//! Masterminds constraints: parsing arbitrary text never panics, a parsed constraint keeps its
//! text, and matching never panics.
#![no_main]

use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use olm_resolver::range::masterminds::Constraint;
use semver::Version;

static VERSIONS: LazyLock<Vec<Version>> = LazyLock::new(|| {
    [
        "0.0.0",
        "0.0.1-0",
        "1.2.3",
        "1.2.3-rc.1+b",
        "2.0.0-0",
        "18446744073709551615.0.0",
    ]
    .iter()
    .filter_map(|v| Version::parse(v).ok())
    .collect()
});

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(constraint) = Constraint::parse(text) {
        assert_eq!(constraint.to_string(), text);
        for version in VERSIONS.iter() {
            let _ = constraint.matches(version);
        }
    }
});
