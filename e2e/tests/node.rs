//! The chart for real, on the cluster's node, in a test binary of its own (its own cluster):
//! the managers' images, assembled from this build, pushed to the node's registry; `helm
//! install` with `image.registry` pointing there starts every manager as a Pod with the chart's
//! own securityContext, probes, volumes and downward API; they reach the API server through the
//! `kubernetes` Service and each other through Service DNS names; a custom source's generator
//! Pod runs under the kubelet in the sandbox its spec asks for; a catalogd Pod replaced, its
//! emptyDir lost, unpacks and serves again.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams};
use kube::runtime::{WatchStreamExt, watcher};
use olm_e2e::catalogs::{
    EXAMPLE_CATALOG_JSON, create_catalog, example_catalog, status, unpacked_configmap_catalog,
    wait_unpacked,
};
use olm_e2e::context::TestContext;
use olm_e2e::manager::OLM_NAMESPACE;
use olm_e2e::node::{push_busybox, push_managers, registry, wait_deployments_available};
use olm_e2e::operators::{create_operator, wait_bd_image};
use serde_json::json;

/// How long the managers may take to become Ready after `helm install` (measured: about 10 s).
const READY_WITHIN: Duration = Duration::from_secs(120);

/// Every version of a generator Pod of catalogd's namespace seen from now on (catalogd deletes
/// them once collected).
fn watch_generator_pods(client: &kube::Client) -> Arc<Mutex<Vec<Pod>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let pods: Api<Pod> = Api::namespaced(client.clone(), OLM_NAMESPACE);
    let config = watcher::Config::default().labels("olm-rs.io/catalog-generator=true");
    let into = seen.clone();
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(watcher(pods, config).applied_objects());
        while let Some(Ok(pod)) = stream.next().await {
            into.lock().unwrap().push(pod);
        }
    });
    seen
}

/// Whether the Pod's container `name` terminated with exit code 0.
fn exited_zero(pod: &Pod, name: &str) -> bool {
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

async fn catalogd_pods(client: &kube::Client) -> Vec<Pod> {
    Api::<Pod>::namespaced(client.clone(), OLM_NAMESPACE)
        .list(&ListParams::default().labels("app.kubernetes.io/name=catalogd"))
        .await
        .unwrap()
        .items
}

/// GETs `path` of catalogd's content Service at its ClusterIP (this machine routes the node's
/// Service range; `.svc` names resolve only inside the cluster).
async fn content(client: &kube::Client, path: &str) -> reqwest::Result<reqwest::Response> {
    let service = Api::<Service>::namespaced(client.clone(), OLM_NAMESPACE)
        .get("catalogd")
        .await
        .unwrap();
    let spec = service.spec.unwrap();
    let ip = spec.cluster_ip.unwrap();
    let port = spec.ports.unwrap()[0].port;
    reqwest::Client::new()
        .get(format!("http://{ip}:{port}{path}"))
        .timeout(Duration::from_secs(5))
        .send()
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chart_runs_every_manager_as_a_pod_that_reaches_the_others_by_service_name() {
    let ctx = TestContext::new("node").await.unwrap();
    let client = ctx.client.clone();
    let registry = registry().unwrap();
    let images = push_managers(&registry, "e2e").await.unwrap();
    olm_e2e::chart::install(
        false,
        &[
            &format!("image.registry={images}"),
            "image.tag=e2e",
            "bundleDeploymentCRD.install=false",
            "logFormat=plain",
        ],
    )
    .unwrap();
    let ready = wait_deployments_available(&client, OLM_NAMESPACE, READY_WITHIN).await;
    let deployments = ready.unwrap();
    assert!(deployments.len() >= 3, "{deployments:?}");

    // Every manager Pod runs its image from the node's registry, as the chart's non-root user.
    let pods = Api::<Pod>::namespaced(client.clone(), OLM_NAMESPACE)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    for pod in &pods {
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(
            spec.node_name.as_deref(),
            Some("olm-node"),
            "{}",
            pod.name_any()
        );
        for c in &spec.containers {
            assert!(
                c.image.as_deref().unwrap_or_default().starts_with(&images),
                "{}: {:?}",
                pod.name_any(),
                c.image
            );
        }
    }

    // catalogd in its Pod: a ConfigMap catalog unpacked, and served through its Service by the
    // name the chart gives it.
    let (name, cm) = (ctx.name("cat"), ctx.name("cat-cm"));
    let (_, unpacked) = unpacked_configmap_catalog(&ctx, &name, &cm, &example_catalog("0.1.0"))
        .await
        .unwrap();
    let url = status(Some(&unpacked)).content_url.unwrap();
    assert!(
        url.starts_with(&format!("http://catalogd.{OLM_NAMESPACE}.svc:")),
        "{url}"
    );
    let path = format!("/catalogs/{name}/all.json");
    let served = content(&client, &path).await.unwrap();
    assert!(served.status().is_success(), "{}", served.status());

    // operator-controller in its Pod resolves from that content: it reached catalogd by the
    // Service's DNS name (CoreDNS) and its ClusterIP (kube-proxy).
    let operator = ctx.name("example");
    create_operator(&ctx, &operator, json!({"packageName": "example-operator"}))
        .await
        .unwrap();
    wait_bd_image(
        &ctx,
        &operator,
        "quay.io/olmtest/example-operator-bundle:v0.1.0",
    )
    .await
    .unwrap();

    // A custom source: its generator Pod runs under the kubelet (busybox from the node's
    // registry writes the catalog; catalogd's own image collects and uploads it to the catalogd
    // Pod), with the sandbox its spec asks for, and what it wrote is served.
    let busybox = push_busybox(&registry, "1.36").await.unwrap();
    let seen = watch_generator_pods(&client);
    let generated = ctx.name("gen");
    let catalogs = create_catalog(
        &ctx,
        &generated,
        json!({"type": "custom", "custom": {
            "image": busybox,
            "command": ["/bin/sh", "-c"],
            "args": [format!("echo '{EXAMPLE_CATALOG_JSON}' > /output/catalog.json")],
            "outputFile": "catalog.json",
            "mountPath": "/output",
            "timeout": "60s",
        }}),
    )
    .await
    .unwrap();
    let catalog = wait_unpacked(&catalogs, &generated, None).await.unwrap();
    let uid = catalog.uid().unwrap();
    let pods: Vec<Pod> = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|p| p.labels().get("olm-rs.io/catalog-uid") == Some(&uid))
        .cloned()
        .collect();
    let ran = pods
        .iter()
        .find(|p| exited_zero(p, "generator") && exited_zero(p, "collector"))
        .unwrap_or_else(|| panic!("no generator Pod of {generated} ran to its end: {pods:#?}"));
    let status = ran.status.as_ref().unwrap();
    // A real kubelet ran it: on the node, with a Pod IP of the node's range.
    assert!(
        status
            .host_ip
            .as_deref()
            .is_some_and(|ip| ip.starts_with("172.30.")),
        "{status:?}"
    );
    assert!(
        status
            .pod_ip
            .as_deref()
            .is_some_and(|ip| ip.starts_with("10.244.")),
        "{status:?}"
    );
    let spec = ran.spec.as_ref().unwrap();
    assert_eq!(spec.automount_service_account_token, Some(false));
    let security = spec.security_context.as_ref().unwrap();
    assert_eq!(security.run_as_non_root, Some(true));
    for c in &spec.containers {
        let limits = c.resources.as_ref().and_then(|r| r.limits.as_ref());
        assert!(
            limits.is_some_and(|l| l.contains_key("memory")),
            "{}: {limits:?}",
            c.name
        );
        let sc = c.security_context.as_ref().unwrap();
        assert_eq!(sc.allow_privilege_escalation, Some(false), "{}", c.name);
    }
    let served = content(&client, &format!("/catalogs/{generated}/all.json"))
        .await
        .unwrap();
    assert!(served.status().is_success(), "{}", served.status());
    assert!(
        served
            .text()
            .await
            .unwrap()
            .contains("example-operator.v0.1.0")
    );

    // The catalogd Pod replaced: its emptyDir is gone with it, and the new one unpacks the
    // catalog again and serves it.
    let before = catalogd_pods(&client).await;
    assert_eq!(before.len(), 1);
    let old = before[0].name_any();
    Api::<Pod>::namespaced(client.clone(), OLM_NAMESPACE)
        .delete(&old, &DeleteParams::default())
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + READY_WITHIN;
    loop {
        let now = catalogd_pods(&client).await;
        let replaced = now.iter().all(|p| p.name_any() != old) && !now.is_empty();
        let serves = replaced
            && content(&client, &path)
                .await
                .is_ok_and(|r| r.status().is_success());
        if serves {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the replaced catalogd did not serve {path} again within {} s:\n{}",
            READY_WITHIN.as_secs(),
            olm_e2e::node::pods_report(&client, OLM_NAMESPACE).await
        );
        // Polling the Service until the new Pod serves, bounded by the deadline.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    ctx.cleanup().await.unwrap();
    olm_e2e::chart::uninstall().unwrap();
}
