//! The cluster's APIs as resolution constraints, with operator-controller as a local process
//! (no provisioner acts on its BundleDeployments here): a bundle requiring an API fails to
//! resolve until a hand-applied CRD serves it, then resolves without another bundle; a bundle
//! providing an API whose CRD another BundleDeployment owns is not chosen, with the sentence,
//! and is once the owner is its own. The owned CRD carries the provisioner's owner labels, as a
//! CRD the provisioner installed for that BundleDeployment does.

use kube::api::{Api, Patch, PatchParams};
use olm_e2e::catalogs::unpacked_configmap_catalog;
use olm_e2e::context::TestContext;
use olm_e2e::manager::{catalogd, operator_controller};
use olm_e2e::operators::*;
use serde_json::{Value, json};

type Crd =
    k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

fn crd(ctx: &TestContext, group: &str, kind: &str, owner: Option<&str>) -> Value {
    let plural = format!("{}s", kind.to_lowercase());
    let mut doc = ctx.labelled(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": plural, "kind": kind},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object"}}}]},
    }));
    if let Some(owner) = owner {
        doc["metadata"]["labels"]["core.rukpak.io/owner-kind"] = json!("BundleDeployment");
        doc["metadata"]["labels"]["core.rukpak.io/owner-name"] = json!(owner);
    }
    doc
}

fn gvk(t: &str, group: &str, kind: &str) -> String {
    format!("- type: {t}\n  value: {{group: {group}, version: v1, kind: {kind}}}\n")
}

#[tokio::test]
async fn a_required_api_served_by_a_hand_applied_crd_resolves() {
    let ctx = TestContext::new("op-served").await.unwrap();
    catalogd().unwrap();
    operator_controller().unwrap();
    let group = format!("{}.e2e.olm-rs.io", ctx.namespace);
    let text = [
        package_doc("served-app", "stable"),
        channel_doc("served-app", "stable", &[("1.0.0", None, None)]),
        bundle_doc(
            "served-app",
            "1.0.0",
            "",
            &gvk("olm.gvk.required", &group, "Widget"),
        ),
    ]
    .concat();
    unpacked_configmap_catalog(&ctx, &ctx.name("c"), &ctx.name("c"), &text)
        .await
        .unwrap();
    let name = ctx.name("app");
    let ops = create_operator(&ctx, &name, json!({"packageName": "served-app"}))
        .await
        .unwrap();
    // Nothing serves Widget yet, and no bundle provides it.
    let op = wait_resolved(&ops, &name, "False", "ResolutionFailed")
        .await
        .unwrap();
    let message = cond(Some(&op), "Resolved").2;
    assert!(message.contains(&format!("{group}/v1 Widget")), "{message}");
    // A CRD applied by hand serves it: the CRD watch re-queues the Operator, which resolves.
    ctx.apply(&crd(&ctx, &group, "Widget", None)).await.unwrap();
    wait_bd_image(&ctx, &name, &bundle_image("served-app", "1.0.0", ""))
        .await
        .unwrap();
    wait_resolved(&ops, &name, "True", "Success").await.unwrap();
    ctx.cleanup().await.unwrap();
}

#[tokio::test]
async fn a_bundle_providing_a_crd_another_bundle_deployment_owns_is_not_chosen() {
    let ctx = TestContext::new("op-owned").await.unwrap();
    catalogd().unwrap();
    operator_controller().unwrap();
    let group = format!("{}.e2e.olm-rs.io", ctx.namespace);
    let text = [
        package_doc("owned-gadget", "stable"),
        channel_doc("owned-gadget", "stable", &[("1.0.0", None, None)]),
        bundle_doc(
            "owned-gadget",
            "1.0.0",
            "",
            &gvk("olm.gvk", &group, "Gadget"),
        ),
    ]
    .concat();
    unpacked_configmap_catalog(&ctx, &ctx.name("c"), &ctx.name("c"), &text)
        .await
        .unwrap();
    let owner = ctx.name("first-gadget");
    ctx.apply(&crd(&ctx, &group, "Gadget", Some(&owner)))
        .await
        .unwrap();
    let name = ctx.name("gadget");
    let ops = create_operator(&ctx, &name, json!({"packageName": "owned-gadget"}))
        .await
        .unwrap();
    let op = wait_resolved(&ops, &name, "False", "ResolutionFailed")
        .await
        .unwrap();
    let message = cond(Some(&op), "Resolved").2;
    assert!(
        message.contains(&format!(
            "provides API {group}/v1 Gadget, whose CRD BundleDeployment {owner:?} already owns; an API has one owner"
        )),
        "{message}"
    );
    // The CRD passes to this Operator's own BundleDeployment: no obstacle any more.
    Api::<Crd>::all(ctx.client.clone())
        .patch(
            &format!("gadgets.{group}"),
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"core.rukpak.io/owner-name": name}}})),
        )
        .await
        .unwrap();
    wait_bd_image(&ctx, &name, &bundle_image("owned-gadget", "1.0.0", ""))
        .await
        .unwrap();
    ctx.cleanup().await.unwrap();
}
