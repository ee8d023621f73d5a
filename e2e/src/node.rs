//! What tests do with the cluster's node ([`crate::control_plane::node`]): push images to its
//! registry (the managers' own, assembled from the cargo build), and wait for its Pods.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;

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
        let binary = crate::binary(manager)?;
        let image = crate::manager_image::assemble(&binary, manager)?;
        crate::images::push_configured(
            registry,
            &format!("olm-rs/{manager}"),
            tag,
            &[image.layer()],
            image.run_config(),
        )
        .await?;
    }
    Ok(format!("{}/olm-rs", registry.host))
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
