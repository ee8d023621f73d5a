//! The provisioner's drift watches stop when nothing applied of their kind is left: a
//! BundleDeployment installs a CRD and a custom resource of it, the provisioner watches that
//! kind; once the BundleDeployment is deleted (its CRD kept for a user's custom resource, so
//! the API server has no reason to end the watch), the watch is closed. Read from the API
//! server's audit log, which records each of the provisioner's watches when it opens and when
//! it ends.

use std::time::Duration;

use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use olm_api::bundle_deployment::BundleDeployment;
use olm_e2e::context::TestContext;
use olm_e2e::wait::{wait_for, wait_for_deletion};
use serde_json::json;

use crate::provisioner::widget_crd;
use crate::provisioner_ownership::bundle_image;

const WAIT: Duration = Duration::from_secs(60);

/// Waits until `open` holds for the number of the provisioner's open watches of `path`.
async fn watches(path: &str, what: &str, open: impl Fn(usize) -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (now, ever) = olm_e2e::audit::provisioner_watches(path).unwrap();
        if open(now) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: {now} watches of {path} open ({ever} ever started)"
        );
        // Bounded by the deadline above; the audit log is written as requests start and end.
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test]
async fn a_drift_watch_stops_when_nothing_of_its_kind_is_applied() {
    let ctx = TestContext::new("prov-watches").await.unwrap();
    olm_e2e::manager::provisioner().unwrap();
    let group = format!("{}.e2e.olm-rs.io", ctx.namespace);
    let widget = |name: &str| {
        json!({"apiVersion": format!("{group}/v1"), "kind": "Widget",
            "metadata": {"name": name, "namespace": ctx.namespace}})
    };
    let image = bundle_image(&ctx, "watched", "v1", &[widget_crd(&group), widget("ours")]).await;
    let bds: Api<BundleDeployment> = Api::all(ctx.client.clone());
    let name = ctx.name("watched");
    let bd: BundleDeployment =
        serde_json::from_value(crate::provisioner_bundles::plain_bd(&ctx, &name, &image)).unwrap();
    bds.create(&PostParams::default(), &bd).await.unwrap();
    wait_for(&bds, &name, "installed", WAIT, |bd| {
        crate::provisioner_bundles::condition(bd, "Installed").is_some_and(|(s, _, _)| s == "True")
    })
    .await
    .unwrap();
    let path = format!("/apis/{group}/v1/widgets");
    watches(&path, "the kind is watched", |open| open == 1).await;

    // A user's Widget keeps the CRD (and so the kind) when the BundleDeployment goes.
    let widgets: Api<DynamicObject> = Api::namespaced_with(
        ctx.client.clone(),
        &ctx.namespace,
        &ApiResource::from_gvk(&GroupVersionKind::gvk(&group, "v1", "Widget")),
    );
    let mine: DynamicObject = serde_json::from_value(widget("mine")).unwrap();
    widgets.create(&PostParams::default(), &mine).await.unwrap();
    bds.delete(&name, &Default::default()).await.unwrap();
    wait_for_deletion(&bds, &name, WAIT).await.unwrap();
    assert!(widgets.get_opt("mine").await.unwrap().is_some());
    watches(&path, "the watch stopped", |open| open == 0).await;
    ctx.cleanup().await.unwrap();
}
