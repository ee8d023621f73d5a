//! The programs tools/testbin/build.sh builds from the Go module proxy (helm, kustomize,
//! kubectl, the control plane), as tests find them: in `$<NAME>_BIN` (their folder, as
//! hack/prereqs.sh exports it) when set, else in the cache (`~/.cache/olm-rs/testbin/<build>/`,
//! or `$OLM_TESTBIN_CACHE`).

use std::path::PathBuf;

use crate::{Error, Result};

/// The cache's folder.
pub fn cache() -> PathBuf {
    std::env::var_os("OLM_TESTBIN_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_default()
                .join(".cache/olm-rs/testbin")
        })
}

/// The program `name` in the cache, if one of its builds holds it.
pub fn cached(name: &str) -> Option<PathBuf> {
    std::fs::read_dir(cache())
        .ok()
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join(name))
        .find(|p| p.is_file())
}

/// The program `name` (`helm`, `kustomize`): `$<NAME>_BIN` (a folder, or the program), else
/// the cached one; missing, an error that says how to build it.
pub fn program(name: &str) -> Result<PathBuf> {
    let var = format!("{}_BIN", name.to_uppercase());
    if let Some(dir) = std::env::var_os(&var) {
        let dir = PathBuf::from(dir);
        return Ok(if dir.is_dir() { dir.join(name) } else { dir });
    }
    cached(name).ok_or_else(|| {
        Error::Fixture(format!(
            "no {var} and no cached {name}: run tools/testbin/build.sh {name} (hack/test.sh does)"
        ))
    })
}
