//! End-to-end harness of olm-rs. Its modules, one line each:
//!
//! * [`apply`]: server-side apply of CRDs and of arbitrary YAML documents.
//! * [`audit`]: the control plane's audit log, read to learn which replica wrote what and
//!   which drift watches the provisioner keeps open.
//! * [`catalogs`]: helpers for tests of catalogd (catalogs, ConfigMaps, waits, metrics).
//! * [`chart`]: the Helm chart installed, upgraded and uninstalled with the real helm, and each
//!   manager run as its Deployment would run it, as a local process.
//! * [`cluster`]: one real control plane per test process, started on first use (or the one
//!   named by `OLM_E2E_KUBECONFIG`, reused), stopped when the process exits.
//! * [`context`]: [`context::TestContext`], a client and a namespace of a test's own, and the
//!   clean-up of everything the test created.
//! * [`control_plane`]: the local control plane and its node (the `olm-cluster` crate and
//!   binary, re-exported).
//! * [`demo`]: what the demo (`olm-demo`) prints and pushes.
//! * [`helm`]: the real helm run against the test cluster (install, upgrade, uninstall,
//!   manifest).
//! * [`manager`]: a manager binary run as a local process, as the chart's ServiceAccount.
//! * [`node`]: the cluster's node as tests use it (images pushed to its registry, its Pods
//!   waited for).
//! * [`operators`]: helpers for tests of operator-controller (small catalogs, Operators, waits).
//! * [`prometheus`]: a real Prometheus on loopback, and its query API.
//! * [`samples`]: the sample objects of `config/samples/`, in the order they can be applied.
//! * [`scale`]: what the scale benchmarks share (waits over a whole kind, change counts).
//! * [`table`]: `kubectl get`-style tables, rendered by the API server (used by the demo).
//! * [`test_operator`]: the webhook and APIService operator the e2e tests install
//!   (`olm-test-operator`).
//! * [`wait`]: waits on conditions with a deadline; nothing here sleeps and hopes.
//! * [`git`], [`images`], [`manager_image`], [`memory`], [`pki`], [`probe`], [`process`],
//!   [`registry`], [`serve`], [`ssh`] and [`tls`]: olm-testkit's fixtures (no cluster needed),
//!   re-exported.

pub mod apply;
pub mod audit;
pub mod catalogs;
pub mod chart;
pub mod cluster;
pub mod context;
pub mod demo;
pub mod helm;
pub mod manager;
pub mod node;
pub mod operators;
pub mod prometheus;
pub mod samples;
pub mod scale;
pub mod table;
pub mod test_operator;
pub mod wait;

// The local control plane is a program of its own (olm-cluster); re-exported so the harness
// and its tests name it as before.
pub use olm_cluster as control_plane;

// The fixtures that need no cluster live in olm-testkit (catalogd's tests use them too);
// re-exported so the harness and its tests name them as before.
pub use olm_testkit::{
    git, images, manager_image, memory, pki, probe, process, registry, serve, ssh, tls,
};

use std::path::PathBuf;

/// Installs rustls's `ring` provider for the process (tests' own TLS servers and clients).
pub fn install_crypto_provider() {
    olm_runtime::client::install_crypto_provider();
}

/// The repository root (this crate lives in `e2e/`).
pub fn repo_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(PathBuf::from).unwrap_or(manifest)
}

/// Names a folder holding the manager binaries to run instead of `target/debug`.
pub const BIN_DIR_ENV: &str = "OLM_E2E_BIN_DIR";

/// The binary of a workspace package, built by `cargo build --workspace` (hack/test.sh does it
/// before the tests).
pub fn binary(name: &str) -> Result<PathBuf> {
    // OLM_E2E_BIN_DIR: another build of the managers (the scale benchmark runs release ones).
    let dir = std::env::var_os(BIN_DIR_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| repo_root().join("target"))
                .join("debug")
        });
    let path = dir.join(name);
    if path.is_file() {
        Ok(path)
    } else {
        Err(Error::Cluster(format!(
            "{} is not built; run `cargo build --workspace --bins` first",
            path.display()
        )))
    }
}

// One error type for the test infrastructure: the control plane's (its Timeout is the
// harness's waits').
pub(crate) use olm_cluster::kube_err;
pub use olm_cluster::{Error, Result};
