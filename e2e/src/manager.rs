//! Running an olm-rs manager binary as a local process, authenticated as the chart's own
//! ServiceAccount (a token from the TokenRequest API), so its RBAC is what the tests exercise.
//! One process per manager per test run, stopped when the test process exits.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, OnceLock};

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use kube::config::Kubeconfig;

use crate::control_plane::kubeconfig;
use crate::{Error, Result, cluster, kube_err, repo_root};

/// A running manager.
#[derive(Debug, Clone)]
pub struct Manager {
    /// Its process id (for logs; it is stopped through its handle, never by this number).
    pub pid: u32,
    child: crate::process::Kept,
    /// Where its log goes.
    pub log: PathBuf,
    /// Its working folder (storage and such).
    pub dir: PathBuf,
}

pub use olm_testkit::free_port;

/// Two distinct free ports ([`free_port`] never hands one out twice).
pub fn free_ports() -> Result<(u16, u16)> {
    Ok((olm_testkit::free_port()?, olm_testkit::free_port()?))
}

/// Writes a kubeconfig that authenticates as `namespace/service_account` (which must exist)
/// with a one-day token from a TokenRequest.
pub async fn token_kubeconfig(
    client: &kube::Client,
    namespace: &str,
    service_account: &str,
    out: &Path,
) -> Result<PathBuf> {
    let request = TokenRequest {
        spec: TokenRequestSpec {
            expiration_seconds: Some(86_400),
            ..Default::default()
        },
        ..Default::default()
    };
    let token = Api::<ServiceAccount>::namespaced(client.clone(), namespace)
        .create_token_request(service_account, &PostParams::default(), &request)
        .await
        .map_err(kube_err(format!(
            "requesting a token for {namespace}/{service_account}"
        )))?
        .status
        .map(|s| s.token)
        .ok_or_else(|| Error::Cluster("the TokenRequest returned no token".into()))?;
    let admin = Kubeconfig::read_from(&cluster::cluster()?.kubeconfig)
        .map_err(|e| Error::Cluster(e.to_string()))?;
    let server = kubeconfig::current_cluster(&admin)
        .ok_or_else(|| Error::Cluster("the admin kubeconfig names no cluster".into()))?;
    let user = format!("{namespace}-{service_account}");
    kubeconfig::write(&kubeconfig::token(server, &user, &token), out)?;
    Ok(out.to_path_buf())
}

/// Starts `binary` with `args` and `kubeconfig`, logging to `log`; it is stopped when this test
/// process exits (see [`crate::process`]), or earlier with [`Manager::stop`].
pub fn spawn(
    binary: &Path,
    args: &[String],
    kubeconfig: &Path,
    log: &Path,
    dir: &Path,
) -> Result<Manager> {
    let file = std::fs::File::create(log).map_err(|source| Error::Io {
        path: log.display().to_string(),
        source,
    })?;
    let err = file.try_clone().map_err(|source| Error::Io {
        path: log.display().to_string(),
        source,
    })?;
    let child = crate::process::spawn_tethered(binary, args, |c| {
        c.env("KUBECONFIG", kubeconfig)
            .env(
                "RUST_LOG",
                "info,catalogd=debug,operator_controller=debug,provisioner=debug,kube=warn,kube_runtime=debug,olm_runtime=debug",
            )
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(err);
    })?;
    Ok(Manager {
        pid: child.id(),
        child: Arc::new(Mutex::new(child)),
        log: log.to_path_buf(),
        dir: dir.to_path_buf(),
    })
}

impl Manager {
    /// Whether the process still runs.
    pub fn is_running(&self) -> bool {
        self.child
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .try_wait()
            .is_ok_and(|status| status.is_none())
    }

    /// Stops the process (SIGTERM, then SIGKILL after 10 s) and waits until it has exited.
    pub fn stop(&self) -> Result<()> {
        Ok(crate::process::stop(
            &self.child,
            std::time::Duration::from_secs(10),
        )?)
    }

    /// Sends `signal` (as kill(1) names it: `KILL`, `STOP`, `CONT`) to the process, unless it
    /// has exited already.
    pub fn signal(&self, signal: &str) -> Result<()> {
        let mut child = self
            .child
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        crate::process::signal(&mut child, signal)?;
        Ok(())
    }

    /// Waits at most `timeout` for the process to exit: its exit status, or `None` while it
    /// still runs.
    pub fn wait_exit(&self, timeout: std::time::Duration) -> Option<std::process::ExitStatus> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let exited = self
                .child
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .try_wait()
                .ok()
                .flatten();
            if exited.is_some() || std::time::Instant::now() > deadline {
                return exited;
            }
            // Polling our own child's exit, bounded by the deadline.
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}

/// Stops a manager when dropped: a test that starts a manager of its own stops it even when
/// it fails, so the next test does not meet it.
pub struct StopOnDrop(pub Manager);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        let _ = self.0.stop();
    }
}

/// catalogd, started once per test process: its content server's base URL and its admin
/// (metrics, probes) URL.
#[derive(Debug, Clone)]
pub struct Catalogd {
    /// The process.
    pub manager: Manager,
    /// Base URL of the content server (`contentURL` starts with it).
    pub content_url: String,
    /// Base URL of the admin server.
    pub admin_url: String,
    /// Where generator Pods upload (`--upload-url`).
    pub upload_url: String,
    /// Its storage folder.
    pub storage: PathBuf,
    /// Its name in logs.
    name: String,
    /// The flags it was started with.
    args: Vec<String>,
    kubeconfig: PathBuf,
    log_dir: PathBuf,
}

impl Catalogd {
    /// Stops this catalogd and starts it again on the same storage, ports and identity, with
    /// `extra_args` added to the flags it had (a later flag wins).
    pub fn restart(&self, extra_args: &[String]) -> Result<Catalogd> {
        self.manager.stop()?;
        let mut args = self.args.clone();
        args.extend(extra_args.iter().cloned());
        let log = restart_log(&self.log_dir, &self.name);
        let manager = launch(
            "catalogd",
            &args,
            &self.kubeconfig,
            &log,
            &self.manager.dir,
            &self.admin_url,
        )?;
        Ok(Catalogd {
            manager,
            args,
            ..self.clone()
        })
    }
}

/// The collector image of the harness's catalogds, in the node's registry (a test that runs
/// generator Pods pushes it: [`crate::node::push_manager`] of `catalogd`, tag `e2e`).
pub const COLLECTOR_IMAGE: &str = "olm-rs/catalogd:e2e";

/// catalogd's namespace in the tests, as in the chart.
pub const OLM_NAMESPACE: &str = "olm-system";

static CATALOGD: OnceLock<std::result::Result<Catalogd, String>> = OnceLock::new();

/// The catalogd of this test process, started on first use as the `catalogd` ServiceAccount.
pub fn catalogd() -> Result<&'static Catalogd> {
    CATALOGD
        .get_or_init(|| start_catalogd().map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| Error::Cluster(e.clone()))
}

fn start_catalogd() -> Result<Catalogd> {
    start_catalogd_with("catalogd", &[])
}

/// The folder this run keeps its managers' logs and working folders in: the control plane's
/// own, or (on a reused cluster) `target/e2e/reuse-<pid>`, held while this process runs.
pub fn run_base() -> Result<PathBuf> {
    let cluster = cluster::cluster()?;
    if let Some(dir) = &cluster.dir {
        return Ok(dir.clone());
    }
    static REUSE: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();
    REUSE
        .get_or_init(|| {
            let base = repo_root()
                .join("target/e2e")
                .join(format!("reuse-{}", std::process::id()));
            std::fs::create_dir_all(base.join("logs")).map_err(|e| e.to_string())?;
            cluster::hold_dir(&base).map_err(|e| e.to_string())?;
            Ok(base)
        })
        .clone()
        .map_err(Error::Cluster)
}

/// Starts a catalogd of its own, named `name` in logs (`<run>/logs/<name>.log`), as the
/// `catalogd` ServiceAccount, with the harness's flags and then `extra_args` (a later flag
/// wins). Its working folder (storage, kubeconfig) is removed when this process exits.
pub fn start_catalogd_with(name: &str, extra_args: &[String]) -> Result<Catalogd> {
    let (base, dir, kubeconfig) = working_dir(name, "catalogd")?;
    let (content_port, admin_port) = free_ports()?;
    let upload_port = free_port()?;
    let storage = dir.join("storage");
    // HTTPS when the test gives the content server a certificate.
    let content_scheme = if extra_args
        .iter()
        .any(|a| a.starts_with("--content-tls-cert-file"))
    {
        "https"
    } else {
        "http"
    };
    let content_url = format!("{content_scheme}://127.0.0.1:{content_port}");
    let (upload_host, collector_image) = match crate::node::registry() {
        Ok(registry) => (
            crate::node::host_address(&registry),
            format!("{}/{COLLECTOR_IMAGE}", registry.host),
        ),
        // A reused cluster without a node: its generator Pods never run.
        Err(_) => ("127.0.0.1".to_owned(), COLLECTOR_IMAGE.to_owned()),
    };
    let mut args = vec![
        format!("--storage-dir={}", storage.display()),
        format!("--content-address=127.0.0.1:{content_port}"),
        format!("--admin-address=127.0.0.1:{admin_port}"),
        format!("--external-address={content_url}"),
        // With --leader-elect, followers copy content from here (the leader's).
        format!("--peer-address={content_url}"),
        format!("--namespace={OLM_NAMESPACE}"),
        "--http-timeout-seconds=10".into(),
        "--max-content-bytes=1048576".into(),
        "--git-timeout-seconds=30".into(),
        // Generator Pods run on the cluster's node: they upload to this machine's address on
        // the node's link, and pull the collector from the node's registry.
        format!("--upload-address={upload_host}:{upload_port}"),
        format!("--upload-url=http://{upload_host}:{upload_port}"),
        format!("--collector-image={collector_image}"),
        // Every test server (registry, git, http) listens on loopback: allowed, as an admin
        // of such a machine would (sources are refused loopback by default).
        "--allow-loopback-sources".into(),
        format!(
            "--registry-ca-file={}",
            crate::tls::ca()?.cert_file().display()
        ),
    ];
    args.extend(extra_args.iter().cloned());
    let admin_url = format!("{}://127.0.0.1:{admin_port}", admin_scheme(&args));
    let log = base.join("logs").join(format!("{name}.log"));
    let manager = launch("catalogd", &args, &kubeconfig, &log, &dir, &admin_url)?;
    Ok(Catalogd {
        manager,
        content_url,
        admin_url,
        upload_url: format!("http://{upload_host}:{upload_port}"),
        storage,
        name: name.to_owned(),
        args,
        kubeconfig,
        log_dir: base.join("logs"),
    })
}

/// A fresh working folder `<run>/<name>` for a manager (removed when this process exits), and a
/// kubeconfig in it for the chart's ServiceAccount `service_account` (the chart installed
/// first).
/// Returns the run's base folder, the working folder and the kubeconfig.
fn working_dir(name: &str, service_account: &'static str) -> Result<(PathBuf, PathBuf, PathBuf)> {
    let base = run_base()?;
    let dir = base.join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|source| Error::Io {
        path: dir.display().to_string(),
        source,
    })?;
    crate::process::remove_on_exit(&dir)?;
    let kubeconfig = dir.join("kubeconfig");
    let kc = kubeconfig.clone();
    chart_installed()?;
    crate::cluster::run_blocking(async move {
        let client = cluster::cluster()?.client().await?;
        token_kubeconfig(&client, OLM_NAMESPACE, service_account, &kc).await
    })??;
    Ok((base, dir, kubeconfig))
}

/// The chart, installed once per test process (with the real helm): every manager the
/// harness starts runs as the chart's ServiceAccount, with the chart's RBAC. The harness
/// installs the CRDs with the control plane, so the chart leaves the BundleDeployment CRD
/// alone, as it would where rukpak owns it.
pub fn chart_installed() -> Result<()> {
    static INSTALLED: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    INSTALLED
        .get_or_init(|| {
            let chart = crate::helm::chart_dir().display().to_string();
            crate::helm::helm_run(&[
                "upgrade",
                "--install",
                crate::helm::RELEASE,
                &chart,
                "--namespace",
                "default",
                "--set",
                "bundleDeploymentCRD.install=false",
            ])
            .map(|_| ())
            .map_err(|e| e.to_string())
        })
        .clone()
        .map_err(Error::Cluster)
}

/// The log of a restarted manager: `<logs>/<name>-<unix millis>.log`, beside its first one.
fn restart_log(log_dir: &Path, name: &str) -> PathBuf {
    log_dir.join(format!(
        "{name}-{}.log",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or_default()
    ))
}

/// Starts the workspace binary `binary_name` (see [`spawn`]) and waits until its admin server
/// at `admin_url` says ready.
pub(crate) fn launch(
    binary_name: &str,
    args: &[String],
    kubeconfig: &Path,
    log: &Path,
    dir: &Path,
    admin_url: &str,
) -> Result<Manager> {
    let manager = spawn(&crate::binary(binary_name)?, args, kubeconfig, log, dir)?;
    wait_ready(&format!("{admin_url}/readyz"), &manager)?;
    Ok(manager)
}

/// `https` when `args` make the admin server serve HTTPS, else `http`.
pub fn admin_scheme(args: &[String]) -> &'static str {
    let secure = args
        .iter()
        .any(|a| a == "--metrics-secure" || a.starts_with("--metrics-tls-cert-file"));
    if secure { "https" } else { "http" }
}

/// Waits (up to 60 s) until `url` (a readiness endpoint of `manager`) answers 2xx; fails early
/// if the process exits.
pub fn wait_ready(url: &str, manager: &Manager) -> Result<()> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        // A probe, like the kubelet's, does not check the admin server's certificate.
        let ok = olm_testkit::probe::status(url).is_some_and(|s| (200..300).contains(&s));
        if ok {
            return Ok(());
        }
        let alive = manager.is_running();
        if !alive || std::time::Instant::now() > deadline {
            let log = std::fs::read_to_string(&manager.log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(30).collect();
            return Err(Error::Cluster(format!(
                "{} did not become ready ({}); last lines of {}:\n{}",
                manager.log.display(),
                if alive { "timed out" } else { "it exited" },
                manager.log.display(),
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            )));
        }
        // Polling a probe endpoint, bounded by the deadline above.
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// An operator-controller process: its admin (metrics, probes) URL.
#[derive(Debug, Clone)]
pub struct Running {
    /// The process.
    pub manager: Manager,
    /// Base URL of the admin server.
    pub admin_url: String,
    /// The kubeconfig it runs with (its ServiceAccount).
    pub kubeconfig: PathBuf,
    binary: &'static str,
    name: String,
    args: Vec<String>,
    log_dir: PathBuf,
}

/// A running operator-controller.
pub type OperatorController = Running;
/// A running catalog-switcher.
pub type CatalogSwitcher = Running;

impl Running {
    /// Stops it and starts it again with the same flags, identity and admin port.
    pub fn restart(&self) -> Result<Running> {
        self.manager.stop()?;
        let log = restart_log(&self.log_dir, &self.name);
        let manager = launch(
            self.binary,
            &self.args,
            &self.kubeconfig,
            &log,
            &self.manager.dir,
            &self.admin_url,
        )?;
        Ok(Running {
            manager,
            ..self.clone()
        })
    }
}

static OPERATOR_CONTROLLER: OnceLock<std::result::Result<OperatorController, String>> =
    OnceLock::new();

/// The operator-controller of this test process, started on first use as the
/// `operator-controller` ServiceAccount.
pub fn operator_controller() -> Result<&'static OperatorController> {
    OPERATOR_CONTROLLER
        .get_or_init(|| {
            start_operator_controller_with("operator-controller", &[]).map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| Error::Cluster(e.clone()))
}

/// Starts an operator-controller of its own, named `name` in logs, as the
/// `operator-controller` ServiceAccount, with the harness's flags (short recheck and backoff,
/// so tests see changes quickly) and then `extra_args`.
pub fn start_operator_controller_with(
    name: &str,
    extra_args: &[String],
) -> Result<OperatorController> {
    let flags = [
        "--catalog-recheck-seconds=2",
        "--max-backoff-seconds=4",
        "--fetch-timeout-seconds=10",
    ];
    start_running("operator-controller", name, &flags, extra_args)
}

/// Starts a catalog-switcher of its own, named `name` in logs, with `extra_args`.
pub fn start_catalog_switcher_with(name: &str, extra_args: &[String]) -> Result<CatalogSwitcher> {
    start_running("catalog-switcher", name, &[], extra_args)
}

/// A running provisioner.
pub type Provisioner = Running;

static PROVISIONER: OnceLock<std::result::Result<Provisioner, String>> = OnceLock::new();

/// The label of BundleDeployments that a test's own provisioner reconciles (selected by
/// `--bundle-deployment-selector=<label>=<value>`), which the shared one leaves alone.
pub const OWN_PROVISIONER_LABEL: &str = "olm-rs.io/e2e-provisioner";

/// The provisioner of this test process, started on first use as the `provisioner`
/// ServiceAccount. It reconciles only BundleDeployments with the e2e label (every test's own,
/// see [`crate::context::TestContext::labelled`]), so those operator-controller writes for
/// other tests are left alone, and not those of a test's own provisioner
/// ([`OWN_PROVISIONER_LABEL`]).
pub fn provisioner() -> Result<&'static Provisioner> {
    PROVISIONER
        .get_or_init(|| {
            let selector = format!(
                "--bundle-deployment-selector={},!{OWN_PROVISIONER_LABEL}",
                crate::context::E2E_LABEL
            );
            start_provisioner_with("provisioner", &[selector]).map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| Error::Cluster(e.clone()))
}

/// Starts a provisioner of its own, named `name` in logs, as the `provisioner` ServiceAccount,
/// with the harness's flags (the loopback registry allowed and trusted, the layer cache in its
/// working folder) and then `extra_args` (a later flag wins).
pub fn start_provisioner_with(name: &str, extra_args: &[String]) -> Result<Provisioner> {
    let flags = [
        format!("--namespace={OLM_NAMESPACE}"),
        "--http-timeout-seconds=10".to_owned(),
        // Real registry+v1 bundles carry large CRDs (argocd-operator's: 1.3 MB).
        "--max-content-bytes=8388608".to_owned(),
        "--allow-loopback-sources".to_owned(),
        format!(
            "--registry-ca-file={}",
            crate::tls::ca()?.cert_file().display()
        ),
        // The tools of helm+v3 and kustomize bundles, as the image ships them.
        format!("--helm-binary={}", crate::helm::helm()?.display()),
        format!("--kustomize-binary={}", crate::helm::kustomize()?.display()),
    ];
    let mut args: Vec<String> = flags.to_vec();
    args.extend(extra_args.iter().cloned());
    let flags: Vec<&str> = args.iter().map(String::as_str).collect();
    start_running("provisioner", name, &flags, &[])
}

/// Starts `binary` as its chart ServiceAccount (named like it), named `name` in logs, on a
/// free admin port, with `flags` and then `extra_args`.
fn start_running(
    binary: &'static str,
    name: &str,
    flags: &[&str],
    extra_args: &[String],
) -> Result<Running> {
    let (base, dir, kubeconfig) = working_dir(name, binary)?;
    let admin_port = free_port()?;
    let mut args = vec![format!("--admin-address=127.0.0.1:{admin_port}")];
    if binary == "provisioner" {
        // Its layer cache, in its working folder (removed when this process exits).
        args.push(format!("--cache-dir={}", dir.join("cache").display()));
    }
    args.extend(flags.iter().map(|f| (*f).to_owned()));
    args.extend(extra_args.iter().cloned());
    let admin_url = format!("{}://127.0.0.1:{admin_port}", admin_scheme(&args));
    let log = base.join("logs").join(format!("{name}.log"));
    let manager = launch(binary, &args, &kubeconfig, &log, &dir, &admin_url)?;
    Ok(Running {
        manager,
        admin_url,
        kubeconfig,
        binary,
        name: name.to_owned(),
        args,
        log_dir: base.join("logs"),
    })
}
