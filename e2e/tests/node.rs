//! The chart for real, on the cluster's node, in a test binary of its own (its own cluster):
//! the managers' images, assembled from this build, pushed to the node's registry; `helm
//! install` with `image.registry` pointing there starts every manager as a Pod with the chart's
//! own securityContext, probes, volumes and downward API; they reach the API server through the
//! `kubernetes` Service and each other through Service DNS names; a custom source's generator
//! Pod runs under the kubelet in the sandbox its spec asks for; a catalogd Pod replaced, its
//! emptyDir lost, unpacks and serves again; operator-controller's container killed is
//! restarted by the kubelet and converges; with two replicas, the leader's Pod deleted, the
//! other takes over.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Pod, Secret, Service};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use olm_e2e::catalogs::{
    EXAMPLE_CATALOG_JSON, create_catalog, example_catalog, status, unpacked_configmap_catalog,
    wait_unpacked,
};
use olm_e2e::context::TestContext;
use olm_e2e::manager::OLM_NAMESPACE;
use olm_e2e::node::{
    MANAGERS, exited_zero, kill_container_processes, pod_logs, push_busybox, push_managers,
    ran_on_the_node, registry, wait_deployments_available, watch_generator_pods,
};
use olm_e2e::operators::{create_operator, wait_bd_image};
use olm_e2e::prometheus::{self, Job};
use serde_json::json;

#[path = "node/catalog_api.rs"]
mod catalog_api;

/// The tests of this binary install the same release: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The managers' images, pushed once for every test of this binary.
static IMAGES: tokio::sync::OnceCell<String> = tokio::sync::OnceCell::const_new();

/// The chart's `image.registry` for the managers' images (pushed on first use, tag `e2e`).
async fn images() -> String {
    IMAGES
        .get_or_init(|| async { push_managers(&registry().unwrap(), "e2e").await.unwrap() })
        .await
        .clone()
}

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
    let _serial = SERIAL.lock().await;
    let ctx = TestContext::new("node").await.unwrap();
    let client = ctx.client.clone();
    let registry = registry().unwrap();
    let images = images().await;
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
    let (seen, watch) = watch_generator_pods(&client, OLM_NAMESPACE);
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
    watch.abort();
    // A real kubelet ran it: on the node, with a Pod IP of the node's range.
    assert!(ran_on_the_node(ran), "{:?}", ran.status);
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
    // Two Catalogs offering the same bundle would make the Operator's resolution ambiguous.
    catalogs
        .delete(&generated, &DeleteParams::default())
        .await
        .unwrap();
    olm_e2e::wait::wait_for_deletion(&catalogs, &generated, READY_WITHIN)
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

    // operator-controller's container killed outright: the kubelet restarts it, and the
    // restarted manager converges (a BundleDeployment deleted behind its back comes back).
    assert_eq!(kill_container_processes("/operator-controller").unwrap(), 1);
    wait_restarted(&client, "app.kubernetes.io/name=operator-controller").await;
    wait_deployments_available(&client, OLM_NAMESPACE, READY_WITHIN)
        .await
        .unwrap();
    recreated_by_operator_controller(&ctx, &operator).await;

    // Two replicas of operator-controller as Pods: the leader's Pod deleted, the other replica
    // takes the Lease and converges.
    olm_e2e::chart::install(
        true,
        &[
            &format!("image.registry={images}"),
            "image.tag=e2e",
            "bundleDeploymentCRD.install=false",
            "logFormat=plain",
            "operatorController.replicas=2",
        ],
    )
    .unwrap();
    wait_deployments_available(&client, OLM_NAMESPACE, READY_WITHIN)
        .await
        .unwrap();
    let leader = leader_pod(&client, "operator-controller").await;
    Api::<Pod>::namespaced(client.clone(), OLM_NAMESPACE)
        .delete(&leader, &DeleteParams::default())
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + READY_WITHIN;
    loop {
        let now = leader_pod(&client, "operator-controller").await;
        if now != leader && !now.is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{leader} still holds the Lease {} s after its Pod was deleted",
            READY_WITHIN.as_secs()
        );
        // Polling the Lease until another replica holds it, bounded by the deadline.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    recreated_by_operator_controller(&ctx, &operator).await;

    ctx.cleanup().await.unwrap();
    olm_e2e::chart::uninstall().unwrap();
}

/// Waits until a Pod selected by `selector` shows a container restarted by the kubelet.
async fn wait_restarted(client: &kube::Client, selector: &str) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), OLM_NAMESPACE);
    let deadline = tokio::time::Instant::now() + READY_WITHIN;
    loop {
        let list = pods
            .list(&ListParams::default().labels(selector))
            .await
            .unwrap();
        let restarted = list.items.iter().any(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.restart_count >= 1))
        });
        if restarted {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no container of {selector} restarted:\n{}",
            olm_e2e::node::pods_report(client, OLM_NAMESPACE).await
        );
        // Polling the Pods until the kubelet reports the restart, bounded by the deadline.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Deletes the Operator's BundleDeployment and waits until operator-controller has written it
/// again: the manager that runs now converges.
async fn recreated_by_operator_controller(ctx: &TestContext, operator: &str) {
    let bds: Api<olm_api::bundle_deployment::BundleDeployment> = Api::all(ctx.client.clone());
    let old = bds.get(operator).await.unwrap().uid().unwrap();
    bds.delete(operator, &DeleteParams::foreground())
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + READY_WITHIN;
    loop {
        let now = bds.get_opt(operator).await.unwrap();
        if now.and_then(|bd| bd.uid()).is_some_and(|uid| uid != old) {
            return;
        }
        if tokio::time::Instant::now() >= deadline {
            let bd = bds.get_opt(operator).await.unwrap();
            let mut logs = String::new();
            for app in ["operator-controller", "provisioner"] {
                logs.push_str(&pod_logs(&ctx.client, OLM_NAMESPACE, app, 40).await);
            }
            let ops: Api<olm_api::operator::Operator> = Api::all(ctx.client.clone());
            let status = ops.get(operator).await.unwrap().status;
            panic!(
                "operator-controller did not write the BundleDeployment {operator} again; now: \
                 {}\nthe Operator's status: {}\n{logs}",
                serde_json::to_string(&bd.map(|b| b.metadata)).unwrap(),
                serde_json::to_string(&status).unwrap()
            );
        }
        // Polling until the BundleDeployment is back, bounded by the deadline.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The Pod whose replica holds the Lease of `manager` (its identity is the Pod's name and a
/// random suffix).
async fn leader_pod(client: &kube::Client, manager: &str) -> String {
    use k8s_openapi::api::coordination::v1::Lease;
    let lease = Api::<Lease>::namespaced(client.clone(), OLM_NAMESPACE)
        .get(&format!("olm-rs-{manager}"))
        .await
        .unwrap();
    let holder = lease
        .spec
        .and_then(|s| s.holder_identity)
        .unwrap_or_default();
    holder
        .rsplit_once('_')
        .map(|(pod, _)| pod.to_owned())
        .unwrap_or(holder)
}

/// A real Prometheus on this machine scrapes every manager's Pod through its metrics Service
/// (at the ClusterIP, which this machine routes; the certificate checked for the Service's DNS
/// name), over HTTPS with a token of a ServiceAccount bound to the chart's reader role; the
/// chart's certificate comes from a Secret of ours (`tls.source=existingSecret`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_every_manager_pod_through_its_service() {
    let _serial = SERIAL.lock().await;
    olm_e2e::install_crypto_provider();
    let ctx = TestContext::new("node-prometheus").await.unwrap();
    let client = ctx.client.clone();
    let images = images().await;
    let names: Vec<String> = MANAGERS
        .iter()
        .map(|m| format!("{m}-metrics.{OLM_NAMESPACE}.svc"))
        .chain([format!("catalogd.{OLM_NAMESPACE}.svc")])
        .collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let dir = tempfile::tempdir().unwrap();
    let ca = olm_e2e::tls::ca().unwrap();
    let issued = ca.issue_for(dir.path(), &names).unwrap();
    // The managers' namespace is ours here, so that the Secret exists before their Pods.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": OLM_NAMESPACE}})).unwrap(),
        )
        .await
        .unwrap();
    let read = |p: &std::path::Path| std::fs::read_to_string(p).unwrap();
    Api::<Secret>::namespaced(client.clone(), OLM_NAMESPACE)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "olm-tls"},
                "type": "kubernetes.io/tls",
                "stringData": {
                    "tls.crt": read(&issued.cert),
                    "tls.key": read(&issued.key),
                    "ca.crt": ca.pem,
                },
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    olm_e2e::chart::install(
        false,
        &[
            &format!("image.registry={images}"),
            "image.tag=e2e",
            "bundleDeploymentCRD.install=false",
            "namespace.create=false",
            "tls.source=existingSecret",
            "tls.existingSecret=olm-tls",
        ],
    )
    .unwrap();
    wait_deployments_available(&client, OLM_NAMESPACE, READY_WITHIN)
        .await
        .unwrap();

    ctx.apply(&json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "prometheus", "namespace": ctx.namespace}}))
        .await
        .unwrap();
    ctx.apply(&json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": ctx.name("metrics-reader")},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "olm-metrics-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": ctx.namespace}]
    }))
    .await
    .unwrap();
    let token = olm_e2e::demo::token(&client, &ctx.namespace, "prometheus")
        .await
        .unwrap();
    let mut jobs = Vec::new();
    for manager in MANAGERS {
        let service = format!("{manager}-metrics");
        let url = service_address(&client, &service).await;
        jobs.push(Job {
            name: (*manager).to_owned(),
            target: url,
            server_name: Some(format!("{service}.{OLM_NAMESPACE}.svc")),
        });
    }
    let prometheus = prometheus::start("node-prometheus", &jobs, &ca.cert_file(), &token).unwrap();
    let up = prometheus
        .wait("up == 1", Duration::from_secs(60), |r| {
            r.len() == MANAGERS.len()
        })
        .await;
    let _ = prometheus.manager.stop();
    let up = up.unwrap();
    let mut scraped: Vec<String> = up
        .iter()
        .filter_map(|s| s["metric"]["job"].as_str().map(str::to_owned))
        .collect();
    scraped.sort();
    let mut expected: Vec<String> = MANAGERS.iter().map(|m| (*m).to_owned()).collect();
    expected.sort();
    assert_eq!(scraped, expected);

    ctx.cleanup().await.unwrap();
    olm_e2e::chart::uninstall().unwrap();
    namespaces
        .delete(OLM_NAMESPACE, &DeleteParams::default())
        .await
        .unwrap();
    olm_e2e::wait::wait_for_deletion(&namespaces, OLM_NAMESPACE, READY_WITHIN)
        .await
        .unwrap();
}

/// `ClusterIP:port` of the Service `name` of the managers' namespace.
async fn service_address(client: &kube::Client, name: &str) -> String {
    let spec = Api::<Service>::namespaced(client.clone(), OLM_NAMESPACE)
        .get(name)
        .await
        .unwrap()
        .spec
        .unwrap();
    format!(
        "{}:{}",
        spec.cluster_ip.unwrap(),
        spec.ports.unwrap()[0].port
    )
}
