//! `olm-cluster run`: the supervisor. It starts the components one after the other, says
//! `ready`, waits until asked to stop, then stops them and removes everything it wrote but
//! the logs. A start that fails half way, or is asked to stop, ends the same way.

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Api;

use super::children::Children;
use super::components::{self, Binaries, Ports};
use super::folder::{self, io_error};
use super::step::{Probe, Step, wait_until};
use super::stop::{Owner, Requests};
use super::{kubeconfig, pki::Pki};
use crate::error::{Error, Result};
use crate::log::log;

/// How lines of a component's log a failure shows.
const TAIL_LINES: usize = 30;

/// Runs the control plane in `dir` until asked to stop; the process's exit code (0 when it
/// was up and stopped as asked).
pub async fn run(dir: &Path, crds: Option<&Path>, node: bool, owner: Owner) -> u8 {
    let lock = match folder::Lock::take(dir) {
        Ok(Some(lock)) => lock,
        Ok(None) => {
            log(&format!(
                "a control plane already runs in {} (stop it with: olm-cluster stop {0})",
                dir.display()
            ));
            return 1;
        }
        Err(e) => {
            log(&e.to_string());
            return 1;
        }
    };
    if matches!(owner, Owner::Stdin) {
        // A control file left by a detached run would make `stop` think this one reads it.
        let _ = std::fs::remove_file(dir.join(folder::CONTROL));
    }
    let logs = dir.join(folder::LOGS);
    let clean_up = CleanUp {
        dir,
        children: Children::new(&logs),
        lock: Some(lock),
    };
    // Clean-up is armed (signals are requests, see `stop`; the guard runs even on a panic)
    // before anything starts.
    match Requests::listen(owner) {
        Ok(mut requests) => supervise(dir, crds, node, &clean_up.children, &mut requests).await,
        Err(e) => {
            log(&e.to_string());
            1
        }
    }
}

/// Stops the components and removes what the supervisor wrote, when dropped: however
/// [`run`] ends.
struct CleanUp<'a> {
    dir: &'a Path,
    children: Children,
    lock: Option<folder::Lock>,
}

impl Drop for CleanUp<'_> {
    fn drop(&mut self) {
        // The node first: its init takes every process of the node with it, and the other
        // components then stop without a kubelet restarting anything.
        super::node::stop(&self.children);
        self.children.stop_all();
        if let Err(e) = super::node::clean_up(self.dir) {
            log(&format!("cleaning up the node: {e}"));
        }
        if let Err(e) = folder::remove_all_but(self.dir, &[folder::LOGS, folder::LOCK]) {
            log(&format!("cleaning up: {e}"));
        }
        if self.children.any() {
            log(&format!(
                "stopped; logs kept in {}",
                self.dir.join(folder::LOGS).display()
            ));
        }
        // Last: a waiting `stop` returns once the lock is gone.
        if let Some(lock) = self.lock.take() {
            lock.release();
        }
    }
}

/// Starts the control plane and waits for a stop request; the exit code.
async fn supervise(
    dir: &Path,
    crds: Option<&Path>,
    node: bool,
    children: &Children,
    requests: &mut Requests,
) -> u8 {
    // Leftovers of an earlier run; `control` is where a detached supervisor is asked to stop.
    let prepared = folder::remove_all_but(dir, &[folder::LOGS, folder::LOCK, folder::CONTROL])
        .and_then(|()| {
            let logs = dir.join(folder::LOGS);
            std::fs::create_dir_all(&logs).map_err(io_error(&logs))
        });
    if let Err(e) = prepared {
        log(&e.to_string());
        return 1;
    }
    let step = Step::default();
    let started = tokio::select! {
        started = start(dir, crds, node, children, &step) => started,
        (name, status) = children.first_exit() => Err(Error::Cluster(format!(
            "{name} exited ({status}) while waiting for {}; last lines of {}:\n{}",
            step.current(),
            children.log(name).display(),
            children.tail(name, TAIL_LINES),
        ))),
        why = requests.requested() => {
            log(&format!("stopping while waiting for {}: {why}", step.current()));
            return 1;
        }
    };
    if let Err(e) = started {
        log(&e.to_string());
        return 1;
    }
    // Not println!: it panics when the owner has closed the pipe, and a panic would skip the
    // clean-up.
    let _ = writeln!(std::io::stdout(), "ready");
    let ready = dir.join(folder::READY);
    if let Err(e) = std::fs::write(&ready, "") {
        log(&format!("{}: {e}", ready.display()));
    }
    let why = requests.requested().await;
    log(&format!("stopping: {why}"));
    0
}

/// Starts every component in order (with `node`, the node's namespaces first and its
/// components last) and writes `env`.
async fn start(
    dir: &Path,
    crds: Option<&Path>,
    node: bool,
    children: &Children,
    step: &Step,
) -> Result<()> {
    let bins = binaries().await?;
    let started = Instant::now();
    let node = match node {
        true => Some(super::node::prepare(dir, &bins, children, step).await?),
        false => None,
    };
    let (names, net) = match &node {
        Some(n) => (
            n.api_server_names(),
            components::ApiNetwork {
                address: n.addresses.host().to_string(),
                services: n.addresses.service_cidr(),
                node: true,
            },
        ),
        None => (Vec::new(), components::ApiNetwork::loopback()),
    };
    let pki = Pki::generate(&names, super::node::config::NODE_NAME)?;
    pki.write(&dir.join("pki"))?;
    let ports = Ports::free()?;
    let policy = dir.join("audit-policy.yaml");
    std::fs::write(&policy, components::AUDIT_POLICY).map_err(io_error(&policy))?;
    let probe = Probe::new()?;

    children.start(components::etcd(&bins, &ports, dir))?;
    let etcd = format!("http://127.0.0.1:{}/health", ports.etcd);
    wait_until(step, "etcd", 30, || probe.ok(&etcd)).await?;

    children.start(components::apiserver(
        &bins,
        &ports,
        dir,
        &net,
        &components::extra_apiserver_args(),
    ))?;
    let server = format!("https://{}:{}", net.address, ports.api);
    let kubeconfig_path = dir.join(folder::KUBECONFIG);
    kubeconfig::write(&kubeconfig::admin(&server, &pki), &kubeconfig_path)?;
    let client = crate::client::client_for(&kubeconfig_path).await?;
    wait_until(step, "kube-apiserver /readyz", 90, || readyz(&client)).await?;
    log(&format!(
        "kube-apiserver ready on {server} after {}s",
        started.elapsed().as_secs()
    ));

    if let Some(crds) = crds {
        step.set("the CRDs to be established");
        crate::crds::apply(&client, crate::crds::read(crds)?).await?;
        log(&format!("the CRDs of {} are established", crds.display()));
    }

    children.start(components::controller_manager(&bins, &ports, dir))?;
    children.start(components::scheduler(&bins, &ports, dir))?;
    let kcm = format!("https://127.0.0.1:{}/healthz", ports.controller_manager);
    wait_until(step, "kube-controller-manager", 60, || probe.ok(&kcm)).await?;
    let sched = format!("https://127.0.0.1:{}/healthz", ports.scheduler);
    wait_until(step, "kube-scheduler", 60, || probe.ok(&sched)).await?;
    // The serviceaccount controller creating `default` shows the controllers really run.
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
    wait_until(step, "serviceaccount default/default", 60, || async {
        accounts
            .get_opt("default")
            .await
            .is_ok_and(|sa| sa.is_some())
    })
    .await?;

    let node = match &node {
        Some(n) => Some(
            n.start(&bins, &pki, &server, &client, children, step)
                .await?,
        ),
        None => None,
    };

    let version = client
        .apiserver_version()
        .await
        .map_err(crate::error::kube_err("reading /version"))?
        .git_version;
    let mut env = env_file(&kubeconfig_path, &server, &version, dir, &bins);
    if let Some(node) = &node {
        env.push_str(&node_env(node));
    }
    let env_path = dir.join(folder::ENV);
    std::fs::write(&env_path, env).map_err(io_error(&env_path))?;
    log(&format!(
        "control plane {version} up in {}s; kubeconfig: {}",
        started.elapsed().as_secs(),
        kubeconfig_path.display()
    ));
    Ok(())
}

async fn readyz(client: &kube::Client) -> bool {
    let Ok(request) = http::Request::get("/readyz").body(Vec::new()) else {
        return false;
    };
    client
        .request_text(request)
        .await
        .is_ok_and(|body| body == "ok")
}

/// The binaries, built (or found in the cache) by `tools/testbin/build.sh`.
async fn binaries() -> Result<Binaries> {
    // This crate lives in the repository's `cluster/`.
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let script = manifest
        .parent()
        .unwrap_or(manifest)
        .join("tools/testbin/build.sh");
    let out = tokio::process::Command::new(&script)
        .arg("all")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        // Its progress goes to the supervisor's log.
        .stderr(std::process::Stdio::inherit())
        // A stop request during a build ends the build too.
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| Error::Cluster(format!("running {}: {e}", script.display())))?
        .wait_with_output()
        .await
        .map_err(|e| Error::Cluster(format!("running {}: {e}", script.display())))?;
    if !out.status.success() {
        return Err(Error::Cluster(format!(
            "{} failed ({})",
            script.display(),
            out.status
        )));
    }
    Binaries::parse(&String::from_utf8_lossy(&out.stdout))
}

/// `DIR/env`: shell assignments for the control plane's users (the demo sources it).
pub fn env_file(
    kubeconfig: &Path,
    server: &str,
    version: &str,
    dir: &Path,
    bins: &Binaries,
) -> String {
    format!(
        "KUBECONFIG={}\nOLM_E2E_API_URL={server}\nOLM_E2E_API_VERSION={version}\n\
         OLM_E2E_CLUSTER_DIR={}\nOLM_E2E_HELM={}\n",
        kubeconfig.display(),
        dir.display(),
        bins.helm.join("helm").display()
    )
}

/// Environment variable naming the node's registry (`host:port`), when a node runs.
pub const NODE_REGISTRY_ENV: &str = "OLM_E2E_NODE_REGISTRY";

/// Environment variable naming the folder of the node's registry.
pub const NODE_REGISTRY_DIR_ENV: &str = "OLM_E2E_NODE_REGISTRY_DIR";

/// The lines of `DIR/env` about the node.
fn node_env(node: &super::node::Started) -> String {
    format!(
        "{NODE_REGISTRY_ENV}={}\n{NODE_REGISTRY_DIR_ENV}={}\n",
        node.registry,
        node.registry_dir.display()
    )
}
