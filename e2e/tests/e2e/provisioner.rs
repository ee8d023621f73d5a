//! The provisioner's apply against the real API server: order (a bundle's custom resources
//! install with their CRDs), the marks on every object, conflicts that write nothing, and a
//! kind nobody serves named as upstream names it.

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use olm_api::bundle_deployment::BundleDeployment;
use olm_e2e::context::TestContext;
use provisioner::apply::{Applier, ApplyError, FIELD_MANAGER};
use provisioner::bundle::Tree;
use provisioner::format::plain;
use provisioner::marks::{OWNER_KIND, OWNER_NAME, Owner};
use serde_json::json;

/// A BundleDeployment to own what is applied (owner references must name a real object, or
/// the garbage collector removes what they own).
async fn owner(ctx: &TestContext) -> Owner {
    let bd: BundleDeployment = serde_json::from_value(ctx.labelled(json!({
        "apiVersion": "core.rukpak.io/v1alpha1",
        "kind": "BundleDeployment",
        "metadata": {"name": ctx.name("bd")},
        "spec": {
            "provisionerClassName": "olm-rs-e2e-nobody",
            "template": {"spec": {"provisionerClassName": "core-rukpak-io-plain",
                "source": {"type": "image", "image": {"ref": "example.com/none:1"}}}}
        }
    })))
    .unwrap();
    let bd = Api::<BundleDeployment>::all(ctx.client.clone())
        .create(&PostParams::default(), &bd)
        .await
        .unwrap();
    Owner {
        name: bd.name_any(),
        uid: bd.uid().unwrap(),
    }
}

fn yaml(ctx: &TestContext, doc: serde_json::Value) -> String {
    serde_saphyr::to_string(&ctx.labelled(doc)).unwrap()
}

/// A CRD of a group of the test's own.
fn widget_crd(group: &str) -> serde_json::Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("widgets.{group}")},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    })
}

#[tokio::test]
async fn a_bundle_with_crds_and_their_custom_resources_installs_in_order_with_our_marks() {
    let ctx = TestContext::new("prov-order").await.unwrap();
    let owner = owner(&ctx).await;
    let group = format!("{}.e2e.olm-rs.io", ctx.namespace);
    // File order puts the custom resource first: the apply order, not the file order, counts.
    let tree = Tree::new()
        .file(
            "manifests/a-widget.yaml",
            yaml(
                &ctx,
                json!({"apiVersion": format!("{group}/v1"), "kind": "Widget",
                "metadata": {"name": "w", "namespace": ctx.namespace}, "spec": {"size": 3}}),
            ),
        )
        .file("manifests/b-crd.yaml", yaml(&ctx, widget_crd(&group)))
        .file(
            "manifests/c-configmap.yaml",
            yaml(
                &ctx,
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "settings"}, "data": {"k": "v"}}),
            ),
        );
    let objects = plain::objects(&tree).unwrap();
    let applier = Applier::new(ctx.client.clone(), ctx.namespace.clone());
    let applied = applier.install(&owner, objects).await.unwrap();
    let kinds: Vec<&str> = applied.iter().map(|k| k.kind.as_str()).collect();
    assert_eq!(kinds, ["CustomResourceDefinition", "Widget", "ConfigMap"]);

    // The CRD is marked but owned by no one: garbage collection must never take its data.
    let crd = Api::<CustomResourceDefinition>::all(ctx.client.clone())
        .get(&format!("widgets.{group}"))
        .await
        .unwrap();
    assert_eq!(
        crd.labels().get(OWNER_KIND).map(String::as_str),
        Some("BundleDeployment")
    );
    assert_eq!(crd.labels().get(OWNER_NAME), Some(&owner.name));
    assert!(crd.owner_references().is_empty());

    // The custom resource went in after its CRD, owned by the BundleDeployment.
    let widgets: Api<DynamicObject> = Api::namespaced_with(
        ctx.client.clone(),
        &ctx.namespace,
        &ApiResource::from_gvk(&GroupVersionKind::gvk(&group, "v1", "Widget")),
    );
    let widget = widgets.get("w").await.unwrap();
    let reference = &widget.owner_references()[0];
    assert_eq!(
        (reference.kind.as_str(), reference.uid.as_str()),
        ("BundleDeployment", owner.uid.as_str())
    );
    assert_eq!(reference.controller, Some(true));
    assert_eq!(
        widget.labels().get("applyset.kubernetes.io/part-of"),
        Some(&owner.set_id())
    );

    // A namespaced object without a namespace went to the default one, applied by us.
    let cm = Api::<ConfigMap>::namespaced(ctx.client.clone(), &ctx.namespace)
        .get("settings")
        .await
        .unwrap();
    let managers: Vec<String> = cm
        .managed_fields()
        .iter()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert!(managers.contains(&FIELD_MANAGER.to_owned()), "{managers:?}");
    ctx.cleanup().await.unwrap();
}

#[tokio::test]
async fn an_object_that_exists_without_our_marks_blocks_the_install_until_it_is_gone() {
    let ctx = TestContext::new("prov-conflict").await.unwrap();
    let owner = owner(&ctx).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    let taken: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "taken", "labels": {"app.kubernetes.io/managed-by": "Helm"}},
        "data": {"mine": "yes"}
    }))
    .unwrap();
    configmaps
        .create(&PostParams::default(), &taken)
        .await
        .unwrap();
    let tree = Tree::new().file(
        "manifests/objects.yaml",
        format!(
            "{}---\n{}",
            yaml(&ctx, json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "fresh"}})),
            yaml(&ctx, json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "taken"}, "data": {"ours": "1"}})),
        ),
    );
    let applier = Applier::new(ctx.client.clone(), ctx.namespace.clone());
    let err = applier
        .install(&owner, plain::objects(&tree).unwrap())
        .await
        .unwrap_err();
    assert!(matches!(err, ApplyError::Conflicts(_)), "{err}");
    assert_eq!(
        err.to_string(),
        format!(
            "ConfigMap {}/taken already exists and no BundleDeployment owns it (it is managed by \
             Helm); objects are never adopted: delete it, or leave it out of the bundle",
            ctx.namespace
        )
    );
    // Nothing was written: not the other object, not the taken one.
    assert!(configmaps.get_opt("fresh").await.unwrap().is_none());
    let still = configmaps.get("taken").await.unwrap();
    assert!(!still.labels().contains_key(OWNER_NAME));

    // Once the object is gone, the same install goes through.
    configmaps
        .delete("taken", &Default::default())
        .await
        .unwrap();
    olm_e2e::wait::wait_for_deletion(&configmaps, "taken", std::time::Duration::from_secs(30))
        .await
        .unwrap();
    applier
        .install(&owner, plain::objects(&tree).unwrap())
        .await
        .unwrap();
    let taken = configmaps.get("taken").await.unwrap();
    assert_eq!(taken.labels().get(OWNER_NAME), Some(&owner.name));
    ctx.cleanup().await.unwrap();
}

#[tokio::test]
async fn a_custom_resource_whose_crd_nobody_serves_is_named_as_upstream_names_it() {
    let ctx = TestContext::new("prov-nokind").await.unwrap();
    let owner = owner(&ctx).await;
    let tree = Tree::new().file(
        "manifests/cr.yaml",
        yaml(&ctx, json!({"apiVersion": "missing.e2e.olm-rs.io/v1", "kind": "Gadget", "metadata": {"name": "g"}})),
    );
    let applier = Applier::new(ctx.client.clone(), ctx.namespace.clone());
    let err = applier
        .install(&owner, plain::objects(&tree).unwrap())
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "Gadget.missing.e2e.olm-rs.io g: no matches for kind \"Gadget\" in version \"missing.e2e.olm-rs.io/v1\""
    );
    ctx.cleanup().await.unwrap();
}
