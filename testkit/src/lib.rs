//! Test fixtures of olm-rs that need no cluster: real servers and builders the tests of
//! catalogd (and the e2e harness, which re-exports them) run against. Nothing here is
//! product code, and no product crate depends on it except as a dev-dependency.
//!
//! * [`process`] starts processes that cannot outlive the test process, and removes folders
//!   when it exits.
//! * [`pki`]: the tests' one PKI (rcgen): CAs, server and client certificates, key pairs;
//!   [`tls`]: the harness's CA, one per test process, and certificates from it as files.
//! * [`probe`]: the HTTP status a URL answers, for readiness waits (no curl).
//! * [`serve`]: HTTP(S) file servers that count and remember requests.
//! * [`git`]: a git server (smart HTTP, `git http-backend`) with repositories built from files;
//!   [`ssh`]: sshd in front of it.
//! * [`registry`]: the distribution registry (Debian `docker-registry`), plain or secured;
//!   [`images`]: catalog images and layers pushed to it; [`manager_image`]: the managers'
//!   images assembled from the cargo build, with no daemon.
//! * [`memory`]: this process's RSS and peak (memory-bound tests, benchmarks).
//! * [`tar_archive`]: tar archives written header by header, hostile paths and links included.
//! * [`testbin`]: the programs tools/testbin/build.sh builds (helm, kustomize, kubectl).

pub mod git;
pub mod images;
pub mod manager_image;
pub mod memory;
pub mod pki;
pub mod probe;
pub mod process;
pub mod registry;
pub mod serve;
pub mod ssh;
pub mod tar_archive;
pub mod testbin;
pub mod tls;

use std::path::PathBuf;
use std::sync::OnceLock;

/// Installs rustls's `ring` provider for the process (tests' own TLS servers and clients);
/// a provider already installed is kept.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A free TCP port (released again; the server binds it a moment later), on any address.
///
/// It is found on the wildcard address, which the kernel refuses a port that any one address
/// holds: found on 127.0.0.1, the port the API server holds on the node's link passed for
/// free, and the node's registry was given it (seen: "bind: address already in use"). And it
/// is never one this process handed out before: a port released here may come back from the
/// kernel before its first user has bound it.
pub fn free_port() -> Result<u16> {
    static GIVEN: std::sync::Mutex<std::collections::BTreeSet<u16>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    for _ in 0..1000 {
        let listener = std::net::TcpListener::bind("0.0.0.0:0")
            .map_err(|e| Error::Fixture(format!("finding a free port: {e}")))?;
        let port = listener
            .local_addr()
            .map(|a| a.port())
            .map_err(|e| Error::Fixture(e.to_string()))?;
        if GIVEN
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(port)
        {
            return Ok(port);
        }
    }
    Err(Error::Fixture(
        "finding a free port: every port the kernel offered was handed out already".into(),
    ))
}

/// This process's scratch folder for fixtures (registries' storage), removed when it exits.
pub fn scratch_dir() -> Result<PathBuf> {
    static DIR: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("olm-testkit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        process::remove_on_exit(&dir).map_err(|e| e.to_string())?;
        Ok(dir)
    })
    .clone()
    .map_err(Error::Fixture)
}

/// Errors of the fixtures.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A fixture could not be started, built or reached.
    #[error("{0}")]
    Fixture(String),
    /// A document (an image reference, a manifest) could not be read.
    #[error("{0}")]
    Document(String),
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
}

/// Result of the fixtures.
pub type Result<T, E = Error> = std::result::Result<T, E>;
