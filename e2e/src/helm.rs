//! The real helm, run against the test cluster: the chart installed, upgraded, uninstalled
//! and its manifest read. The harness's managers ([`crate::manager`]) and the chart tests
//! ([`crate::chart`]) both use it.

use std::path::PathBuf;
use std::process::Command;

use crate::{Error, Result};

/// The release name the tests install the chart as.
pub const RELEASE: &str = "olm";

/// The helm of the test binaries (`HELM_BIN`, the folder hack/prereqs.sh builds it in), else
/// the cached one.
pub fn helm() -> Result<PathBuf> {
    Ok(olm_testkit::testbin::program("helm")?)
}

/// The kustomize of the test binaries (`KUSTOMIZE_BIN`), else the cached one: what the
/// provisioner runs for kustomize bundles.
pub fn kustomize() -> Result<PathBuf> {
    Ok(olm_testkit::testbin::program("kustomize")?)
}

/// The tool `name` of the cached test binaries (`~/.cache/olm-rs/testbin/<build>/<name>`).
pub fn cached(name: &str) -> Option<PathBuf> {
    olm_testkit::testbin::cached(name)
}

/// Runs the real `kubectl args` (built with the control plane) against the test cluster; its
/// standard output.
pub fn kubectl(args: &[&str]) -> Result<String> {
    let kubectl = cached("kubectl")
        .ok_or_else(|| Error::Cluster("no cached kubectl: run hack/test.sh".into()))?;
    let kubeconfig = crate::cluster::cluster()?.kubeconfig.clone();
    let out = Command::new(kubectl)
        .args(args)
        .env("KUBECONFIG", &kubeconfig)
        .output()
        .map_err(|e| Error::Cluster(format!("running kubectl: {e}")))?;
    if !out.status.success() {
        return Err(Error::Cluster(format!(
            "kubectl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The chart's folder.
pub fn chart_dir() -> PathBuf {
    crate::repo_root().join("charts/olm")
}

/// Runs `helm args` against the test cluster; its standard output.
pub fn helm_run(args: &[&str]) -> Result<String> {
    let kubeconfig = crate::cluster::cluster()?.kubeconfig.clone();
    let out = Command::new(helm()?)
        .args(args)
        .env("KUBECONFIG", &kubeconfig)
        .env(
            "HELM_CACHE_HOME",
            std::env::temp_dir().join("olm-e2e-helm/cache"),
        )
        .env(
            "HELM_CONFIG_HOME",
            std::env::temp_dir().join("olm-e2e-helm/config"),
        )
        .env(
            "HELM_DATA_HOME",
            std::env::temp_dir().join("olm-e2e-helm/data"),
        )
        .output()
        .map_err(|e| Error::Cluster(format!("running helm: {e}")))?;
    if !out.status.success() {
        return Err(Error::Cluster(format!(
            "helm {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `helm install` (or, with `upgrade`, `helm upgrade`) of the chart as [`RELEASE`] in the
/// `default` namespace (the managers' namespace is then the chart's own, olm-system), with
/// `sets`.
pub fn install(upgrade: bool, sets: &[&str]) -> Result<String> {
    let verb = if upgrade { "upgrade" } else { "install" };
    let mut args = vec![verb];
    for set in sets {
        args.extend_from_slice(&["--set", set]);
    }
    install_in("default", &args)
}

/// `helm <args[0]> RELEASE charts/olm --namespace namespace <args[1..]>`: an install or upgrade
/// as a user types it (`install`, `--create-namespace`, `--set …`).
pub fn install_in(namespace: &str, args: &[&str]) -> Result<String> {
    let chart = chart_dir().display().to_string();
    let (verb, rest) = args.split_first().unwrap_or((&"install", &[]));
    let mut all = vec![*verb, RELEASE, chart.as_str(), "--namespace", namespace];
    all.extend_from_slice(rest);
    helm_run(&all)
}

/// `helm uninstall` of the release in `default`.
pub fn uninstall() -> Result<String> {
    uninstall_in("default")
}

/// `helm uninstall` of the release in `namespace`.
pub fn uninstall_in(namespace: &str) -> Result<String> {
    helm_run(&["uninstall", RELEASE, "--namespace", namespace, "--wait"])
}

/// The objects of the release in `default`.
pub fn manifest() -> Result<Vec<serde_json::Value>> {
    manifest_in("default")
}

/// The objects of the release in `namespace`.
pub fn manifest_in(namespace: &str) -> Result<Vec<serde_json::Value>> {
    let text = helm_run(&["get", "manifest", RELEASE, "--namespace", namespace])?;
    Ok(serde_saphyr::from_multiple::<serde_json::Value>(&text)
        .map_err(|e| Error::Document(e.to_string()))?
        .into_iter()
        .filter(|d| !d.is_null())
        .collect())
}
