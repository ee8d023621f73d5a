//! What tests do with the cluster's node ([`crate::control_plane::node`]): push images to its
//! registry (the managers' own, assembled from the cargo build), and wait for its Pods.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use kube::runtime::{WatchStreamExt, watcher};

use crate::control_plane::supervisor::{NODE_REGISTRY_DIR_ENV, NODE_REGISTRY_ENV};
use crate::registry::Registry;
use crate::{Error, Result};

/// The managers the chart deploys, by image name.
pub const MANAGERS: &[&str] = &[
    "catalogd",
    "operator-controller",
    "catalog-switcher",
    "provisioner",
];

/// The node's registry of this process's cluster: the one `OLM_E2E_NODE_REGISTRY` names (a
/// reused cluster's, as the demo exports it from the cluster's `env`), else the one in the
/// `env` of the cluster this process started.
pub fn registry() -> Result<Registry> {
    if let Ok(host) = std::env::var(NODE_REGISTRY_ENV) {
        let dir = std::env::var_os(NODE_REGISTRY_DIR_ENV).map(PathBuf::from);
        return Ok(Registry::running(&host, &dir.unwrap_or_default()));
    }
    let cluster = crate::cluster::cluster()?;
    let dir = cluster.dir.as_ref().ok_or_else(|| {
        Error::Cluster(format!(
            "a reused cluster and no {NODE_REGISTRY_ENV}: its node registry is unknown"
        ))
    })?;
    let text = std::fs::read_to_string(dir.join("env")).map_err(|source| Error::Io {
        path: dir.join("env").display().to_string(),
        source,
    })?;
    let env: BTreeMap<&str, &str> = text.lines().filter_map(|l| l.split_once('=')).collect();
    let host = env.get(NODE_REGISTRY_ENV).ok_or_else(|| {
        Error::Cluster(format!(
            "{}/env names no {NODE_REGISTRY_ENV}: the cluster runs without a node",
            dir.display()
        ))
    })?;
    let registry_dir = env.get(NODE_REGISTRY_DIR_ENV).map(PathBuf::from);
    Ok(Registry::running(host, &registry_dir.unwrap_or_default()))
}

/// Pushes every manager's image, assembled from this build's binary, as
/// `<registry>/olm-rs/<manager>:<tag>`; the chart's `image.registry` for them.
pub async fn push_managers(registry: &Registry, tag: &str) -> Result<String> {
    for manager in MANAGERS {
        push_manager(registry, manager, tag).await?;
    }
    Ok(format!("{}/olm-rs", registry.host))
}

/// Pushes one manager's image, assembled from this build's binary, as
/// `<registry>/olm-rs/<manager>:<tag>`; its reference.
pub async fn push_manager(registry: &Registry, manager: &str, tag: &str) -> Result<String> {
    let image = assembled(manager)?;
    let repository = format!("olm-rs/{manager}");
    crate::images::push_configured(
        registry,
        &repository,
        tag,
        &[image.layer()],
        image.run_config(),
    )
    .await?;
    Ok(format!("{}/{repository}:{tag}", registry.host))
}

/// The image of `manager` assembled from this build's binary: the Dockerfile target's layout,
/// helm and kustomize (the test binaries) in the provisioner's.
pub fn assembled(manager: &str) -> Result<crate::manager_image::Assembled> {
    let binary = crate::binary(manager)?;
    let image = crate::manager_image::assemble(&binary, manager)?;
    if manager != "provisioner" {
        return Ok(image);
    }
    Ok(image
        .with_tool(&crate::helm::helm()?, "helm")?
        .with_tool(&crate::helm::kustomize()?, "kustomize")?)
}

/// This machine's address on the node's link, where the node's registry listens: a Pod reaches
/// a local process (a test's catalogd) there.
pub fn host_address(registry: &Registry) -> String {
    registry
        .host
        .rsplit_once(':')
        .map_or(registry.host.as_str(), |(host, _)| host)
        .to_owned()
}

/// Waits until every Deployment of `namespace` has all its replicas available and updated;
/// on timeout, the error shows each Pod's phase and its containers' states.
pub async fn wait_deployments_available(
    client: &kube::Client,
    namespace: &str,
    timeout: Duration,
) -> Result<Vec<String>> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let list = deployments
            .list(&ListParams::default())
            .await
            .map_err(crate::kube_err("listing Deployments"))?;
        let names: Vec<String> = list
            .items
            .iter()
            .filter_map(|d| d.metadata.name.clone())
            .collect();
        if !list.items.is_empty() && list.items.iter().all(available) {
            return Ok(names);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(Error::Cluster(format!(
                "the Deployments of {namespace} ({names:?}) were not available within {} s; \
                 its Pods:\n{}",
                timeout.as_secs(),
                pods_report(client, namespace).await
            )));
        }
        // Polling a list of Deployments (a watch per object would not say more), bounded.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn available(d: &Deployment) -> bool {
    let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let status = d.status.clone().unwrap_or_default();
    let generation = d.metadata.generation.unwrap_or(0);
    status.observed_generation.unwrap_or(0) >= generation
        && status.available_replicas.unwrap_or(0) == want
        && status.updated_replicas.unwrap_or(0) == want
        && status.replicas.unwrap_or(0) == want
}

/// One line per Pod of `namespace`: its name, phase and each container's state.
pub async fn pods_report(client: &kube::Client, namespace: &str) -> String {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let Ok(list) = pods.list(&ListParams::default()).await else {
        return "(the Pods could not be listed)".into();
    };
    list.items
        .iter()
        .map(|p| {
            let status = p.status.clone().unwrap_or_default();
            let containers: Vec<String> = status
                .container_statuses
                .unwrap_or_default()
                .iter()
                .map(|c| {
                    let state = serde_json::to_string(&c.state).unwrap_or_default();
                    format!("{} restarts={} {state}", c.name, c.restart_count)
                })
                .collect();
            format!(
                "{} {}: {}",
                p.metadata.name.clone().unwrap_or_default(),
                status.phase.unwrap_or_default(),
                containers.join("; ")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Where Debian's busybox-static puts its static busybox (hack/prereqs.sh installs it).
pub const BUSYBOX: &str = "/usr/bin/busybox";

/// Pushes a busybox image (Debian's static busybox at `/bin/busybox`, `/bin/sh` and the other
/// applets a generator script uses linked to it) as `<registry>/library/busybox:<tag>`; its
/// reference.
pub async fn push_busybox(registry: &Registry, tag: &str) -> Result<String> {
    use crate::images::{Entry, tar_layer};
    let path = std::path::Path::new(BUSYBOX);
    let bytes = std::fs::read(path).map_err(|source| Error::Io {
        path: BUSYBOX.into(),
        source,
    })?;
    let mut entries = vec![
        Entry::Dir("bin".into()),
        Entry::Executable("bin/busybox".into(), bytes),
    ];
    for applet in ["sh", "cat", "echo", "printf", "sleep", "ls"] {
        entries.push(Entry::Symlink(format!("bin/{applet}"), "busybox".into()));
    }
    let repository = "library/busybox";
    crate::images::push_configured(
        registry,
        repository,
        tag,
        &[tar_layer(&entries)],
        serde_json::json!({"Entrypoint": ["/bin/sh"], "Env": ["PATH=/bin"]}),
    )
    .await?;
    Ok(format!("{}/{repository}:{tag}", registry.host))
}

/// Kills (SIGKILL) every process of the node's containers whose program is `program` (an
/// image's entrypoint such as `/operator-controller`), as an out-of-memory kill or a crash
/// would end it; how many it killed. A process counts as a container's when its cgroup is
/// under a node's (`/olm-node-<i>/…`), so a local process of the same binary is never hit.
pub fn kill_container_processes(program: &str) -> Result<usize> {
    let mut killed = 0;
    let proc = std::fs::read_dir("/proc").map_err(|source| Error::Io {
        path: "/proc".into(),
        source,
    })?;
    for entry in proc.flatten() {
        let pid = entry.file_name().to_string_lossy().into_owned();
        if !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let first = cmdline.split(|b| *b == 0).next().unwrap_or_default();
        let cgroup = std::fs::read_to_string(entry.path().join("cgroup")).unwrap_or_default();
        if first == program.as_bytes() && cgroup.contains("/olm-node-") {
            let status = std::process::Command::new("kill")
                .args(["-KILL", &pid])
                .status()
                .map_err(|e| Error::Cluster(format!("kill {pid}: {e}")))?;
            if status.success() {
                killed += 1;
            }
        }
    }
    Ok(killed)
}

/// Every version of a generator Pod of `namespace` (catalogd's) seen from now on (catalogd
/// deletes them once collected), until the returned task is aborted.
pub fn watch_generator_pods(
    client: &kube::Client,
    namespace: &str,
) -> (Arc<Mutex<Vec<Pod>>>, tokio::task::JoinHandle<()>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let config = watcher::Config::default().labels("olm-rs.io/catalog-generator=true");
    let into = seen.clone();
    let task = tokio::spawn(async move {
        let mut stream = std::pin::pin!(watcher(pods, config).applied_objects());
        while let Some(Ok(pod)) = stream.next().await {
            into.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(pod);
        }
    });
    (seen, task)
}

/// Whether the Pod's container (or init container) `name` terminated with exit code 0.
pub fn exited_zero(pod: &Pod, name: &str) -> bool {
    let status = pod.status.as_ref();
    let all = status
        .and_then(|s| s.container_statuses.clone())
        .into_iter()
        .chain(status.and_then(|s| s.init_container_statuses.clone()))
        .flatten();
    all.filter(|c| c.name == name).any(|c| {
        c.state
            .and_then(|s| s.terminated)
            .is_some_and(|t| t.exit_code == 0)
    })
}

/// Whether a real kubelet ran `pod`: on the node (its host IP on the node's link), with a Pod
/// IP of the node's Pod range.
pub fn ran_on_the_node(pod: &Pod) -> bool {
    let status = pod.status.as_ref();
    let host = status.and_then(|s| s.host_ip.as_deref());
    let ip = status.and_then(|s| s.pod_ip.as_deref());
    host.is_some_and(|h| h.starts_with("172.30.")) && ip.is_some_and(|p| p.starts_with("10.244."))
}

/// The last `lines` log lines of every Pod of `namespace` labelled
/// `app.kubernetes.io/name=<app>`, through the API server (the kubelet serves them): what a
/// failing test shows of a manager running as a Pod.
pub async fn pod_logs(client: &kube::Client, namespace: &str, app: &str, lines: i64) -> String {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let selector = ListParams::default().labels(&format!("app.kubernetes.io/name={app}"));
    let Ok(list) = pods.list(&selector).await else {
        return format!("(the Pods of {app} could not be listed)");
    };
    let mut out = String::new();
    for pod in list.items {
        let name = pod.metadata.name.unwrap_or_default();
        let params = kube::api::LogParams {
            tail_lines: Some(lines),
            ..Default::default()
        };
        let text = pods
            .logs(&name, &params)
            .await
            .unwrap_or_else(|e| format!("(no log: {e})"));
        out.push_str(&format!("--- {name}\n{text}\n"));
    }
    out
}
