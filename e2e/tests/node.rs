//! The chart for real, on the cluster's node, in a test binary of its own (its own cluster):
//! the managers' images, assembled from this build, pushed to the node's registry; `helm
//! install` with `image.registry` pointing there starts every manager as a Pod with the chart's
//! own securityContext, probes, volumes and downward API; they reach the API server through the
//! `kubernetes` Service and each other through Service DNS names; a catalogd Pod replaced, its
//! emptyDir lost, unpacks and serves again.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Service};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams};
use olm_e2e::catalogs::{example_catalog, status, unpacked_configmap_catalog};
use olm_e2e::context::TestContext;
use olm_e2e::manager::OLM_NAMESPACE;
use olm_e2e::node::{push_managers, registry, wait_deployments_available};
use olm_e2e::operators::{create_operator, wait_bd_image};
use serde_json::json;

/// How long the managers may take to become Ready after `helm install` (measured: about 10 s).
const READY_WITHIN: Duration = Duration::from_secs(120);

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
