//! The node of generator Pods. No kubelet runs on our machines, so for the custom source the
//! harness plays the node for these Pods only: it watches the generator Pods of one test's
//! Catalogs, runs the generator container's command locally in a temporary folder that stands
//! for the Pod's emptyDir (the mount path in its command, arguments and environment is replaced
//! by that folder), with the Pod's environment and its deadline; then runs the real `catalogd
//! collect` with the collector container's arguments and the token the Pod would get (read
//! from the Secret its environment names); and writes what a kubelet would into the Pod's
//! status through the API. Everything else (catalogd, the API server, the upload) is real.
//!
//! A generator whose environment sets [`FORGE_TOKEN_ENV`] gets its collector that token
//! instead of the Pod's, as a compromised node would: the way a test makes a forged upload.

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Container, Pod, Secret};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::io::AsyncReadExt;

use crate::manager::OLM_NAMESPACE;

/// An environment variable of a generator that makes this node hand its collector a forged
/// token (the value).
pub const FORGE_TOKEN_ENV: &str = "OLM_E2E_FORGED_TOKEN";

/// The bytes of a failing generator's output kept as its termination message (a kubelet's
/// `FallbackToLogsOnError` keeps the last 2048 bytes or 80 lines).
const LOG_TAIL: usize = 2048;

/// A running fake node; it stops (and kills what it runs) when dropped.
pub struct FakeKubelet {
    task: tokio::task::JoinHandle<()>,
    /// The Pods it ran, by name, in order.
    ran: Arc<Mutex<Vec<String>>>,
}

impl Drop for FakeKubelet {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeKubelet {
    /// Starts playing the node for generator Pods of Catalogs whose names start with
    /// `catalog_prefix`, collecting with the catalogd binary `catalogd`.
    pub fn start(client: Client, catalog_prefix: &str, catalogd: PathBuf) -> FakeKubelet {
        let ran = Arc::new(Mutex::new(Vec::new()));
        let node = Node {
            client,
            prefix: catalog_prefix.to_owned(),
            catalogd,
            ran: ran.clone(),
        };
        FakeKubelet {
            task: tokio::spawn(node.watch()),
            ran,
        }
    }

    /// The Pods run so far.
    pub fn ran(&self) -> Vec<String> {
        self.ran
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[derive(Clone)]
struct Node {
    client: Client,
    prefix: String,
    catalogd: PathBuf,
    ran: Arc<Mutex<Vec<String>>>,
}

impl Node {
    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), OLM_NAMESPACE)
    }

    async fn watch(self) {
        let mut seen: HashSet<String> = HashSet::new();
        let config = watcher::Config::default().labels("olm-rs.io/catalog-generator=true");
        let mut events = watcher(self.pods(), config)
            .default_backoff()
            .applied_objects()
            .boxed();
        let mut running = tokio::task::JoinSet::new();
        while let Some(event) = events.next().await {
            let Ok(pod) = event else { continue };
            let mine = pod
                .annotations()
                .get("olm-rs.io/catalog")
                .is_some_and(|c| c.starts_with(&self.prefix));
            // The API server sets `Pending` itself; a node has not reported yet.
            let fresh = pod
                .status
                .as_ref()
                .and_then(|s| s.init_container_statuses.as_ref())
                .is_none()
                && pod.metadata.deletion_timestamp.is_none();
            if mine && fresh && seen.insert(pod.uid().unwrap_or_default()) {
                self.ran
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(pod.name_any());
                let node = self.clone();
                running.spawn(async move { node.run(pod).await });
            }
        }
    }

    /// Runs one Pod to its end, or until it is deleted.
    async fn run(&self, pod: Pod) {
        let name = pod.name_any();
        let Ok(dir) = tempfile::Builder::new().prefix("olm-e2e-node-").tempdir() else {
            return;
        };
        let volume = dir.path().join("volume");
        let _ = std::fs::create_dir_all(&volume);
        let spec = pod.spec.clone().unwrap_or_default();
        let Some(generator) = spec.init_containers.iter().flatten().next().cloned() else {
            return;
        };
        let Some(collector) = spec.containers.first().cloned() else {
            return;
        };
        let deadline = Duration::from_secs(
            spec.active_deadline_seconds
                .and_then(|s| u64::try_from(s).ok())
                .unwrap_or(600),
        );
        let started = tokio::time::Instant::now();
        let mount = mount_path(&generator);
        let local = |text: &str| match &mount {
            Some(m) => text.replace(m.as_str(), &volume.display().to_string()),
            None => text.to_owned(),
        };
        let now = || k8s_openapi::jiff::Timestamp::now().to_string();

        self.status(
            &name,
            json!({"phase": "Pending",
                "conditions": [{"type": "PodScheduled", "status": "True"}],
                "initContainerStatuses": [status(&generator, json!({"running": {"startedAt": now()}}))]}),
        )
        .await;
        let argv: Vec<String> = generator
            .command
            .iter()
            .flatten()
            .chain(generator.args.iter().flatten())
            .map(|a| local(a))
            .collect();
        let env: Vec<(String, String)> = generator
            .env
            .iter()
            .flatten()
            .filter_map(|e| e.value.as_ref().map(|v| (e.name.clone(), local(v))))
            .collect();
        let forged = env
            .iter()
            .find(|(n, _)| n == FORGE_TOKEN_ENV)
            .map(|(_, v)| v.clone());
        let Some((program, rest)) = argv.split_first() else {
            // The harness cannot run an image's own entrypoint: it needs a command.
            self.status(&name, json!({"phase": "Pending", "initContainerStatuses": [status(&generator, json!({"waiting": {"reason": "CreateContainerError", "message": "the harness node needs custom.command to run a generator"}}))]})).await;
            return;
        };
        let mut command = tokio::process::Command::new(program);
        command
            .args(rest)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", dir.path())
            .envs(env)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let Ok(mut child) = command.spawn() else {
            self.status(&name, json!({"phase": "Failed", "initContainerStatuses": [status(&generator, json!({"terminated": {"exitCode": 127, "reason": "StartError", "message": format!("cannot run {program}")}}))]})).await;
            return;
        };
        let mut stdout = child.stdout.take();
        let mut stderr = child.stderr.take();
        // Both pipes at once: a generator that fills stderr must not block on it.
        let output = async {
            let mut out = Vec::new();
            let mut err = Vec::new();
            let read_out = async {
                if let Some(s) = stdout.as_mut() {
                    let _ = s.read_to_end(&mut out).await;
                }
            };
            let read_err = async {
                if let Some(s) = stderr.as_mut() {
                    let _ = s.read_to_end(&mut err).await;
                }
            };
            tokio::join!(read_out, read_err);
            out.extend(err);
            out
        };
        let waited = tokio::select! {
            result = async { let out = output.await; (child.wait().await, out) } => Some(result),
            () = tokio::time::sleep_until(started + deadline) => None,
            () = self.gone(&name) => return,
        };
        let Some((exit, out)) = waited else {
            // The Pod's activeDeadlineSeconds: the kubelet kills it and says why.
            self.status(
                &name,
                json!({"phase": "Failed", "reason": "DeadlineExceeded",
                "message": "Pod was active on the node longer than the specified deadline"}),
            )
            .await;
            return;
        };
        let code = exit.ok().and_then(|s| s.code()).unwrap_or(137);
        if code != 0 {
            let tail =
                String::from_utf8_lossy(&out[out.len().saturating_sub(LOG_TAIL)..]).into_owned();
            self.status(&name, json!({"phase": "Failed",
                "initContainerStatuses": [status(&generator, json!({"terminated": {"exitCode": code, "reason": "Error", "message": tail}}))]})).await;
            return;
        }
        let generator_done = status(
            &generator,
            json!({"terminated": {"exitCode": 0, "reason": "Completed"}}),
        );
        self.status(
            &name,
            json!({"phase": "Running",
            "initContainerStatuses": [generator_done.clone()],
            "containerStatuses": [status(&collector, json!({"running": {"startedAt": now()}}))]}),
        )
        .await;

        // The collector: the real `catalogd collect`, with the token the Pod would get.
        let token = match forged {
            Some(t) => Some(t),
            None => self.token(&collector).await,
        };
        let termination = dir.path().join("termination-log");
        let args: Vec<String> = collector
            .args
            .iter()
            .flatten()
            .map(|a| local(a))
            .chain([format!("--termination-log={}", termination.display())])
            .collect();
        let mut collect = tokio::process::Command::new(&self.catalogd);
        collect
            .args(&args)
            .env_clear()
            .env("CATALOGD_UPLOAD_TOKEN", token.unwrap_or_default())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        let code = tokio::select! {
            s = collect.status() => s.ok().and_then(|s| s.code()).unwrap_or(137),
            () = self.gone(&name) => return,
        };
        let message = std::fs::read_to_string(&termination).unwrap_or_default();
        let phase = if code == 0 { "Succeeded" } else { "Failed" };
        self.status(&name, json!({"phase": phase,
            "initContainerStatuses": [generator_done],
            "containerStatuses": [status(&collector, json!({"terminated": {"exitCode": code, "reason": if code == 0 {"Completed"} else {"Error"}, "message": message}}))]})).await;
    }

    /// The upload token the collector's environment names, from its Secret (created by
    /// catalogd just after the Pod: waited for, as a kubelet would).
    async fn token(&self, collector: &Container) -> Option<String> {
        let selector = collector
            .env
            .iter()
            .flatten()
            .find_map(|e| e.value_from.as_ref()?.secret_key_ref.clone())?;
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), OLM_NAMESPACE);
        for _ in 0..100 {
            if let Ok(Some(secret)) = secrets.get_opt(&selector.name).await
                && let Some(value) = secret.data.and_then(|d| d.get(&selector.key).cloned())
            {
                return String::from_utf8(value.0).ok();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        None
    }

    /// Resolves once the Pod is deleted (or being deleted).
    async fn gone(&self, name: &str) {
        loop {
            match self.pods().get_opt(name).await {
                Ok(None) => return,
                Ok(Some(p)) if p.metadata.deletion_timestamp.is_some() => return,
                _ => tokio::time::sleep(Duration::from_millis(300)).await,
            }
        }
    }

    async fn status(&self, name: &str, status: serde_json::Value) {
        let _ = self
            .pods()
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": status})),
            )
            .await;
    }
}

fn mount_path(container: &Container) -> Option<String> {
    container
        .volume_mounts
        .iter()
        .flatten()
        .next()
        .map(|m| m.mount_path.clone())
}

fn status(container: &Container, state: serde_json::Value) -> serde_json::Value {
    json!({
        "name": container.name,
        "image": container.image.clone().unwrap_or_default(),
        "imageID": "",
        "ready": false,
        "restartCount": 0,
        "state": state,
    })
}
