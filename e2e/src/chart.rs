//! The Helm chart on the local control plane: install, upgrade and uninstall it with the real
//! helm, and run each manager the way its Deployment would, as a local process (no kubelet runs
//! here): authenticated as the chart's own ServiceAccount (a TokenRequest), with the args of
//! the Deployment that `helm get manifest` returns. Only what differs on this machine is
//! rewritten ([`local_args`]): listen addresses become free loopback ports, URLs the Pods would
//! reach through Services point at them, and storage is a temporary folder. The helm commands
//! themselves are [`crate::helm`]'s (re-exported here).

use std::path::Path;

use crate::manager::{self, Manager};
use crate::{Error, Result};

pub use crate::helm::{
    RELEASE, chart_dir, helm, helm_run, install, install_in, manifest, manifest_in, uninstall,
    uninstall_in,
};

/// Loopback ports a manager listens on here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ports {
    /// Metrics and probes.
    pub admin: u16,
    /// catalogd's content server.
    pub content: u16,
    /// catalogd's upload endpoint.
    pub upload: u16,
}

/// The Deployment's `args` as this machine needs them: addresses on loopback `ports`, URLs to
/// them, and `storage` for `--storage-dir`. Every other flag is the chart's, as it is.
pub fn local_args(args: &[String], ports: Ports, storage: &Path) -> Vec<String> {
    args.iter()
        .map(|arg| {
            let (flag, _) = arg.split_once('=').unwrap_or((arg.as_str(), ""));
            match flag {
                "--admin-address" => format!("{flag}=127.0.0.1:{}", ports.admin),
                "--content-address" => format!("{flag}=127.0.0.1:{}", ports.content),
                "--upload-address" => format!("{flag}=127.0.0.1:{}", ports.upload),
                "--external-address" | "--peer-address" => {
                    format!("{flag}=http://127.0.0.1:{}", ports.content)
                }
                "--upload-url" => format!("{flag}=http://127.0.0.1:{}", ports.upload),
                "--storage-dir" | "--cache-dir" => format!("{flag}={}", storage.display()),
                _ => arg.clone(),
            }
        })
        .collect()
}

/// A manager of the chart running here.
pub struct ChartManager {
    /// The process.
    pub manager: Manager,
    /// Its admin (metrics) URL.
    pub admin_url: String,
    /// Its ports.
    pub ports: Ports,
    /// The args it runs with.
    pub args: Vec<String>,
}

/// Runs the Deployment `name` of `manifest` here, as its ServiceAccount.
pub async fn run_manager(
    client: &kube::Client,
    manifest: &[serde_json::Value],
    name: &str,
) -> Result<ChartManager> {
    let deployment = manifest
        .iter()
        .find(|d| d["kind"] == "Deployment" && d["metadata"]["name"] == name)
        .ok_or_else(|| Error::Cluster(format!("the release has no Deployment {name}")))?;
    let namespace = deployment["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default");
    let pod = &deployment["spec"]["template"]["spec"];
    let account = pod["serviceAccountName"].as_str().unwrap_or("default");
    let args: Vec<String> = pod["containers"][0]["args"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a.as_str().map(str::to_owned))
        .collect();
    let base = manager::run_base()?;
    let dir = base.join(format!("chart-{name}-{}", manager::free_port()?));
    std::fs::create_dir_all(&dir).map_err(|source| Error::Io {
        path: dir.display().to_string(),
        source,
    })?;
    crate::process::remove_on_exit(&dir)?;
    let kubeconfig =
        manager::token_kubeconfig(client, namespace, account, &dir.join("kubeconfig")).await?;
    let (admin, content) = manager::free_ports()?;
    let ports = Ports {
        admin,
        content,
        upload: manager::free_port()?,
    };
    let args = local_args(&args, ports, &dir.join("storage"));
    let log = base.join("logs").join(format!("chart-{name}.log"));
    let admin_url = format!(
        "{}://127.0.0.1:{}",
        manager::admin_scheme(&args),
        ports.admin
    );
    let manager = manager::launch(name, &args, &kubeconfig, &log, &dir, &admin_url)?;
    Ok(ChartManager {
        manager,
        admin_url,
        ports,
        args,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_differs_here_is_rewritten() {
        let args: Vec<String> = [
            "--admin-address=0.0.0.0:8080",
            "--log-format=json",
            "--storage-dir=/var/cache/catalogd",
            "--content-address=0.0.0.0:8083",
            "--upload-address=0.0.0.0:8084",
            "--external-address=http://catalogd.olm-system.svc:8083",
            "--peer-address=http://$(POD_IP):8083",
            "--upload-url=http://$(POD_IP):8084",
            "--leader-elect",
            "--namespace=olm-system",
        ]
        .map(String::from)
        .to_vec();
        let ports = Ports {
            admin: 1,
            content: 2,
            upload: 3,
        };
        assert_eq!(
            local_args(&args, ports, Path::new("/tmp/s")),
            [
                "--admin-address=127.0.0.1:1",
                "--log-format=json",
                "--storage-dir=/tmp/s",
                "--content-address=127.0.0.1:2",
                "--upload-address=127.0.0.1:3",
                "--external-address=http://127.0.0.1:2",
                "--peer-address=http://127.0.0.1:2",
                "--upload-url=http://127.0.0.1:3",
                "--leader-elect",
                "--namespace=olm-system",
            ]
        );
    }
}
