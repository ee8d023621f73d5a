//! One control plane per test process: started on first use, stopped when the process exits.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::{Error, Result, repo_root};

/// Environment variable naming the kubeconfig of an already running cluster to reuse.
pub const REUSE_ENV: &str = "OLM_E2E_KUBECONFIG";

/// A running control plane.
#[derive(Debug, Clone)]
pub struct Cluster {
    /// Admin kubeconfig.
    pub kubeconfig: PathBuf,
    /// Folder holding the logs of every component, when this process started the cluster.
    pub dir: Option<PathBuf>,
}

static CLUSTER: OnceLock<std::result::Result<Cluster, String>> = OnceLock::new();

/// The control plane of this test process, started (or found) on first use.
pub fn cluster() -> Result<&'static Cluster> {
    CLUSTER
        .get_or_init(|| init().map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| Error::Cluster(e.clone()))
}

fn init() -> Result<Cluster> {
    let cluster = match std::env::var_os(REUSE_ENV) {
        Some(path) => {
            let cluster = Cluster {
                kubeconfig: PathBuf::from(path),
                dir: None,
            };
            // A reused cluster may predate our CRDs, or hold older ones.
            run_blocking(install_crds(cluster.clone()))??;
            cluster
        }
        None => start()?,
    };
    let version = run_blocking(server_version(cluster.clone()))??;
    // Written straight to the process's stderr, past the test harness's output capture, so
    // every run names the API server it ran against.
    let _ = writeln!(
        std::io::stderr(),
        "e2e: running against kube-apiserver {version} (kubeconfig {}{})",
        cluster.kubeconfig.display(),
        cluster
            .dir
            .as_ref()
            .map(|d| format!(", logs in {}/logs", d.display()))
            .unwrap_or_default()
    );
    Ok(cluster)
}

fn start() -> Result<Cluster> {
    let root = repo_root();
    let dir = root
        .join("target/e2e")
        .join(format!("cluster-{}", std::process::id()));
    let output = Command::new(root.join("tools/testbin/cluster.sh"))
        .arg("start")
        .arg(&dir)
        .arg("--crds")
        .arg(root.join("config/crd"))
        .arg("--watch-pid")
        .arg(std::process::id().to_string())
        .output()
        .map_err(|e| Error::Cluster(format!("running tools/testbin/cluster.sh: {e}")))?;
    if !output.status.success() {
        return Err(Error::Cluster(format!(
            "tools/testbin/cluster.sh start failed ({}); logs in {}/logs:\n{}",
            output.status,
            dir.display(),
            String::from_utf8_lossy(&output.stderr)
        )));
    }
    let env = read_env(&dir.join("env"))?;
    let kubeconfig = env
        .get("KUBECONFIG")
        .map(PathBuf::from)
        .ok_or_else(|| Error::Cluster(format!("{}/env names no KUBECONFIG", dir.display())))?;
    Ok(Cluster {
        kubeconfig,
        dir: Some(dir),
    })
}

fn read_env(path: &Path) -> Result<BTreeMap<String, String>> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
        path: path.display().to_string(),
        source,
    })?;
    Ok(text
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect())
}

/// Runs a future to completion on a runtime of its own, on a thread of its own, so it can be
/// called from inside any test's runtime. Clients must not outlive the runtime that made them.
pub fn run_blocking<F, T>(fut: F) -> Result<T>
where
    F: std::future::Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map(|rt| rt.block_on(fut))
            .map_err(|e| Error::Cluster(format!("building a runtime: {e}")))
    })
    .join()
    .map_err(|_| Error::Cluster("harness thread panicked".into()))?
}

impl Cluster {
    /// A new client authenticated as the cluster admin. Make one per test: a client belongs to
    /// the runtime it was made in.
    pub async fn client(&self) -> Result<Client> {
        client_for(&self.kubeconfig).await
    }
}

/// A client for the given kubeconfig.
pub async fn client_for(kubeconfig: &Path) -> Result<Client> {
    let kc = Kubeconfig::read_from(kubeconfig)
        .map_err(|e| Error::Cluster(format!("reading {}: {e}", kubeconfig.display())))?;
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .map_err(|e| Error::Cluster(format!("loading {}: {e}", kubeconfig.display())))?;
    Client::try_from(config).map_err(crate::kube_err("building a client"))
}

async fn server_version(cluster: Cluster) -> Result<String> {
    let client = cluster.client().await?;
    let info = client
        .apiserver_version()
        .await
        .map_err(crate::kube_err("reading /version"))?;
    Ok(info.git_version)
}

async fn install_crds(cluster: Cluster) -> Result<()> {
    let client = cluster.client().await?;
    crate::apply::install_crds(&client).await
}
