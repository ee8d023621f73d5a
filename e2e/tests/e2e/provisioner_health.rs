//! `Healthy`, on the cluster's real node: a plain bundle whose Deployment runs (busybox from
//! the node's registry) becomes `Healthy=True` once its Pod is available; one whose image does
//! not exist becomes `Healthy=False` with the Deployment's own `ProgressDeadlineExceeded`
//! message after its deadline, while `Installed` stays True (it is applied); moving it to a
//! template with a good image makes it healthy again.

use std::time::Duration;

use kube::api::{Api, Patch, PatchParams, PostParams};
use olm_api::bundle_deployment::BundleDeployment;
use olm_e2e::context::TestContext;

use crate::provisioner_bundles::condition;
use olm_e2e::images::{Entry, layer, push};
use olm_e2e::manager::provisioner;
use olm_e2e::node::{push_busybox, registry};
use olm_e2e::wait::{wait_for, wait_for_deletion};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(120);

fn deployment(ctx: &TestContext, image: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "worker", "namespace": ctx.namespace},
        "spec": {
            "replicas": 1,
            "progressDeadlineSeconds": 10,
            "selector": {"matchLabels": {"app": "worker"}},
            "template": {"metadata": {"labels": {"app": "worker"}}, "spec": {
                "automountServiceAccountToken": false,
                "terminationGracePeriodSeconds": 1,
                "securityContext": {"runAsNonRoot": true, "runAsUser": 65532,
                                    "seccompProfile": {"type": "RuntimeDefault"}},
                "containers": [{"name": "w", "image": image,
                    "command": ["/bin/sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"],
                    "securityContext": {"allowPrivilegeEscalation": false,
                                        "capabilities": {"drop": ["ALL"]}}}]}}}})
}

async fn bundle(ctx: &TestContext, tag: &str, object: &Value) -> String {
    let registry = olm_e2e::registry::plain().unwrap();
    let repository = format!("{}/health", ctx.namespace);
    let entries = [
        Entry::Dir("manifests".into()),
        Entry::File(
            "manifests/worker.json".into(),
            serde_json::to_vec(object).unwrap(),
        ),
    ];
    push(
        registry,
        &repository,
        tag,
        &[layer(&entries)],
        &Default::default(),
    )
    .await
    .unwrap();
    format!("{}/{repository}:{tag}", registry.host)
}

fn spec(image: &str) -> Value {
    json!({"provisionerClassName": "core-rukpak-io-plain", "template": {"spec": {
        "provisionerClassName": "core-rukpak-io-plain",
        "source": {"type": "image", "image": {"ref": image}}}}})
}

#[tokio::test]
async fn healthy_follows_the_workload_on_the_node() {
    let ctx = TestContext::new("prov-health").await.unwrap();
    provisioner().unwrap();
    let bds: Api<BundleDeployment> = Api::all(ctx.client.clone());
    let busybox = push_busybox(&registry().unwrap(), "1.36").await.unwrap();
    let missing = format!("{}/library/nothing-here:1", registry().unwrap().host);
    let good = bundle(&ctx, "good", &deployment(&ctx, &busybox)).await;
    let bad = bundle(&ctx, "bad", &deployment(&ctx, &missing)).await;

    let name = ctx.name("health");
    let bd: BundleDeployment = serde_json::from_value(ctx.labelled(json!({
        "apiVersion": "core.rukpak.io/v1alpha1", "kind": "BundleDeployment",
        "metadata": {"name": name}, "spec": spec(&bad)})))
    .unwrap();
    bds.create(&PostParams::default(), &bd).await.unwrap();
    let sick = wait_for(&bds, &name, "unhealthy past the deadline", WAIT, |bd| {
        condition(bd, "Healthy")
            .is_some_and(|(s, _, m)| s == "False" && m.contains("ProgressDeadlineExceeded"))
    })
    .await
    .unwrap();
    let (_, reason, message) = condition(Some(&sick), "Healthy").unwrap();
    assert_eq!(reason, "Unhealthy");
    assert!(
        message.starts_with(&format!("Deployment.apps {}/worker: ", ctx.namespace)),
        "{message}"
    );
    let (installed, _, _) = condition(Some(&sick), "Installed").unwrap();
    assert_eq!(installed, "True");

    // The next version names an image that exists: healthy once its Pod is available.
    bds.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": spec(&good)})),
    )
    .await
    .unwrap();
    let well = wait_for(&bds, &name, "healthy", WAIT, |bd| {
        condition(bd, "Healthy").is_some_and(|(s, _, _)| s == "True")
    })
    .await
    .unwrap();
    let (_, reason, message) = condition(Some(&well), "Healthy").unwrap();
    assert_eq!(reason, "Healthy");
    assert!(
        message.contains("1 workloads and APIs are ready"),
        "{message}"
    );

    // The Deployment's status moved many times on the way (each a new resourceVersion the
    // drift watch saw); none was a drift restored, so none is announced as one.
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(ctx.client.clone(), "default");
    let restored: Vec<String> = events
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name.as_str()))
        .filter(|e| e.reason.as_deref() == Some("Restored"))
        .filter_map(|e| e.note)
        .collect();
    assert!(restored.is_empty(), "{restored:?}");

    bds.delete(&name, &Default::default()).await.unwrap();
    wait_for_deletion(&bds, &name, WAIT).await.unwrap();
    ctx.cleanup().await.unwrap();
}
