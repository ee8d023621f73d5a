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

/// The test binary `name` (`helm`, `kustomize`) that hack/test.sh builds.
pub fn testbin(name: &str) -> std::path::PathBuf {
    olm_testkit::testbin::program(name).unwrap_or_else(|e| panic!("{e}"))
}
