//! What the integration tests share.

#![allow(clippy::unwrap_used, dead_code)] // test code; each test binary uses part of it

use std::path::Path;

use provisioner::bundle::Tree;

/// The registry+v1 bundle in `dir`: every file of its `manifests/` and `metadata/`.
pub fn bundle_tree(dir: &Path) -> Tree {
    let mut tree = Tree::new();
    for sub in ["manifests", "metadata"] {
        for entry in std::fs::read_dir(dir.join(sub)).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            tree = tree.file(&format!("{sub}/{name}"), std::fs::read(&path).unwrap());
        }
    }
    tree
}

/// The test binary `name` (`helm`, `kustomize`) that hack/test.sh builds: in `$<NAME>_BIN`
/// (its directory) when set, else in the test-binary cache (`~/.cache/olm-rs/testbin/*/`,
/// or `$OLM_TESTBIN_CACHE`). Missing, the test fails saying how to build it.
pub fn testbin(name: &str) -> std::path::PathBuf {
    let var = format!("{}_BIN", name.to_uppercase());
    if let Some(dir) = std::env::var_os(&var) {
        let dir = std::path::PathBuf::from(dir);
        return if dir.is_dir() { dir.join(name) } else { dir };
    }
    let cache = std::env::var_os("OLM_TESTBIN_CACHE")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/olm-rs/testbin")
        });
    std::fs::read_dir(&cache)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!("no {name}: set {var} or run tools/testbin/build.sh {name} (hack/test.sh does)")
        })
}
