//! One control plane per test process: started on first use, stopped when the process exits
//! (however it exits: see [`crate::process`] and [`crate::control_plane`]).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use kube::Client;

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

/// Environment variable choosing the folder of the control plane this process starts (default
/// `target/e2e/cluster-<pid>`); the harness's own tests use it to find what a run leaves.
pub const DIR_ENV: &str = "OLM_E2E_DIR";

/// How long the control plane may take to start (the binaries are built beforehand by
/// hack/test.sh, so this is start-up only).
const START_TIMEOUT: Duration = Duration::from_secs(300);

/// The supervisor of the control plane this process started. Its stdin is never closed by the
/// harness: it closes when this process exits, however it exits, and the supervisor then stops
/// the control plane and removes everything it wrote but its logs.
struct Supervisor {
    _stdin: ChildStdin,
    _child: Child,
}

static SUPERVISOR: OnceLock<Mutex<Option<Supervisor>>> = OnceLock::new();

fn run_dir() -> PathBuf {
    std::env::var_os(DIR_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            repo_root()
                .join("target/e2e")
                .join(format!("cluster-{}", std::process::id()))
        })
}

fn start() -> Result<Cluster> {
    let root = repo_root();
    let dir = run_dir();
    prune_old_runs(&root.join("target/e2e"), &dir);
    let logs = dir.join("logs");
    std::fs::create_dir_all(&logs).map_err(|source| Error::Io {
        path: logs.display().to_string(),
        source,
    })?;
    let stderr_path = logs.join("supervisor.log");
    let stderr = std::fs::File::create(&stderr_path).map_err(|source| Error::Io {
        path: stderr_path.display().to_string(),
        source,
    })?;
    let args = [
        "run".to_owned(),
        dir.display().to_string(),
        "--crds".to_owned(),
        root.join("config/crd").display().to_string(),
    ];
    let supervisor = crate::binary("olm-cluster")?;
    let mut child = crate::process::spawn_tethered(&supervisor, &args, |c| {
        c.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr);
    })?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(Error::Cluster(
            "the supervisor has no stdin or stdout".into(),
        ));
    };
    // Its stdout says `ready` once up, and closes when it gives up.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let ready = BufReader::new(stdout)
            .lines()
            .map_while(std::result::Result::ok)
            .any(|line| line == "ready");
        let _ = tx.send(ready);
    });
    let failed = |why: &str| {
        let log = std::fs::read_to_string(&stderr_path).unwrap_or_default();
        Error::Cluster(format!(
            "the control plane {why}; logs in {}:\n{log}",
            logs.display()
        ))
    };
    match rx.recv_timeout(START_TIMEOUT) {
        Ok(true) => {}
        Ok(false) | Err(RecvTimeoutError::Disconnected) => {
            // It stopped what it had started before closing its stdout.
            let _ = child.wait();
            return Err(failed("did not start"));
        }
        Err(RecvTimeoutError::Timeout) => {
            // Closing its stdin stops a half-started control plane; a supervisor that does not
            // react is killed through its handle (its components die with it).
            drop(stdin);
            let kept: crate::process::Kept = Arc::new(Mutex::new(child));
            crate::process::stop(&kept, Duration::from_secs(60))?;
            return Err(failed(&format!(
                "was not ready within {}s",
                START_TIMEOUT.as_secs()
            )));
        }
    }
    let env = read_env(&dir.join("env"))?;
    let kubeconfig = env
        .get("KUBECONFIG")
        .map(PathBuf::from)
        .ok_or_else(|| Error::Cluster(format!("{}/env names no KUBECONFIG", dir.display())))?;
    *SUPERVISOR
        .get_or_init(|| Mutex::new(None))
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Supervisor {
        _stdin: stdin,
        _child: child,
    });
    Ok(Cluster {
        kubeconfig,
        dir: Some(dir),
    })
}

/// How many earlier runs' logs to keep in `target/e2e`.
const KEPT_RUNS: usize = 3;

/// Removes the folders of earlier runs but the newest few (their logs help debugging). A run
/// that is still going holds its folder's supervisor lock and is left alone.
fn prune_old_runs(base: &Path, current: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    let mut runs: Vec<(std::time::SystemTime, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_dir() && p != current)
        .filter(|p| !is_running(p))
        .filter_map(|p| Some((p.metadata().ok()?.modified().ok()?, p)))
        .collect();
    runs.sort();
    let stale = runs.len().saturating_sub(KEPT_RUNS);
    for (_, path) in runs.into_iter().take(stale) {
        let _ = std::fs::remove_dir_all(path);
    }
}

/// Whether a supervisor (or a test process, see [`hold_dir`]) still holds the folder's lock.
pub fn is_running(dir: &Path) -> bool {
    crate::control_plane::folder::is_held(dir)
        || crate::control_plane::folder::is_locked(&dir.join(HARNESS_LOCK))
}

/// Held by a test process that uses a folder of `target/e2e` (see [`hold_dir`]).
const HARNESS_LOCK: &str = "harness.lock";

/// Marks `dir` as in use by this process for as long as it runs (a lock released when the
/// process exits), so [`prune_old_runs`] leaves it alone.
pub fn hold_dir(dir: &Path) -> Result<()> {
    static HELD: OnceLock<Mutex<Vec<std::fs::File>>> = OnceLock::new();
    let path = dir.join(HARNESS_LOCK);
    let file = std::fs::File::create(&path).map_err(|source| Error::Io {
        path: path.display().to_string(),
        source,
    })?;
    file.lock_shared().map_err(|source| Error::Io {
        path: path.display().to_string(),
        source,
    })?;
    HELD.get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(file);
    Ok(())
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
    olm_cluster::client_for(kubeconfig).await
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
