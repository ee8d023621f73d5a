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
use provisioner::set::Set;
use serde_json::json;

/// A BundleDeployment to own what is applied (owner references must name a real object, or
/// the garbage collector removes what they own).
pub(crate) async fn owner(ctx: &TestContext) -> Owner {
    owner_named(ctx, "bd").await
}

/// A BundleDeployment named `ctx.name(suffix)` to own what is applied.
pub(crate) async fn owner_named(ctx: &TestContext, suffix: &str) -> Owner {
    let bd: BundleDeployment = serde_json::from_value(ctx.labelled(json!({
        "apiVersion": "core.rukpak.io/v1alpha1",
        "kind": "BundleDeployment",
        "metadata": {"name": ctx.name(suffix)},
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

pub(crate) fn yaml(ctx: &TestContext, doc: serde_json::Value) -> String {
    serde_saphyr::to_string(&ctx.labelled(doc)).unwrap()
}

/// A CRD of a group of the test's own.
pub(crate) fn widget_crd(group: &str) -> serde_json::Value {
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
    let kinds: Vec<&str> = applied.iter().map(|a| a.key.kind.as_str()).collect();
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

pub(crate) fn config_map(ctx: &TestContext, name: &str, data: serde_json::Value) -> String {
    yaml(
        ctx,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}),
    )
}

#[tokio::test]
async fn an_upgrade_prunes_what_it_drops_updates_the_rest_and_a_failing_one_changes_nothing() {
    let ctx = TestContext::new("prov-upgrade").await.unwrap();
    let owner = owner(&ctx).await;
    let applier = Applier::new(ctx.client.clone(), ctx.namespace.clone());
    let configmaps: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    let v1 = Tree::new()
        .file(
            "manifests/keep.yaml",
            config_map(&ctx, "keep", json!({"a": "1"})),
        )
        .file(
            "manifests/drop.yaml",
            config_map(&ctx, "drop", json!({"x": "1"})),
        );
    let synced = Set::of(&applier, &owner)
        .sync(plain::objects(&v1).unwrap())
        .await
        .unwrap();
    assert_eq!(synced.applied.len(), 2);
    assert!(synced.removed.is_empty());
    // The BundleDeployment is the ApplySet's parent, as kubectl reads one.
    let bd = Api::<BundleDeployment>::all(ctx.client.clone())
        .get(&owner.name)
        .await
        .unwrap();
    assert_eq!(
        bd.labels().get("applyset.kubernetes.io/id"),
        Some(&owner.set_id())
    );
    let annotations = bd.annotations();
    assert_eq!(
        annotations["applyset.kubernetes.io/contains-group-kinds"],
        "ConfigMap"
    );
    assert_eq!(
        annotations["applyset.kubernetes.io/additional-namespaces"],
        ctx.namespace
    );
    assert_eq!(
        annotations["applyset.kubernetes.io/tooling"],
        "olm-provisioner/v1"
    );

    // Another manager adds a label to an object we applied.
    configmaps
        .patch(
            "keep",
            &kube::api::PatchParams::apply("someone-else"),
            &kube::api::Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "keep", "labels": {"team": "x"}}})),
        )
        .await
        .unwrap();

    let v2 = Tree::new()
        .file(
            "manifests/keep.yaml",
            config_map(&ctx, "keep", json!({"a": "2"})),
        )
        .file(
            "manifests/new.yaml",
            config_map(&ctx, "new", json!({"y": "1"})),
        );
    let synced = Set::of(&applier, &owner)
        .sync(plain::objects(&v2).unwrap())
        .await
        .unwrap();
    let removed: Vec<&str> = synced.removed.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(removed, ["drop"]);
    olm_e2e::wait::wait_for_deletion(&configmaps, "drop", std::time::Duration::from_secs(30))
        .await
        .unwrap();
    let keep = configmaps.get("keep").await.unwrap();
    assert_eq!(keep.data.as_ref().unwrap()["a"], "2");
    assert_eq!(
        keep.labels().get("team").map(String::as_str),
        Some("x"),
        "another manager's field was lost"
    );
    assert!(configmaps.get_opt("new").await.unwrap().is_some());

    // 0.3.0 changes "keep" and brings an object the API server refuses: nothing changes, and
    // nothing of 0.2.0 is removed.
    let v3 = Tree::new()
        .file(
            "manifests/a-keep.yaml",
            config_map(&ctx, "keep", json!({"a": "3"})),
        )
        .file(
            "manifests/b-bad.yaml",
            config_map(&ctx, "bad", json!({"not a valid key!": "1"})),
        );
    let err = Set::of(&applier, &owner)
        .sync(plain::objects(&v3).unwrap())
        .await
        .unwrap_err();
    assert!(matches!(err, ApplyError::Refused { .. }), "{err}");
    assert!(
        err.to_string()
            .contains(&format!("ConfigMap {}/bad", ctx.namespace)),
        "{err}"
    );
    assert_eq!(
        configmaps.get("keep").await.unwrap().data.unwrap()["a"],
        "2"
    );
    assert!(configmaps.get_opt("new").await.unwrap().is_some());
    assert!(configmaps.get_opt("bad").await.unwrap().is_none());
    ctx.cleanup().await.unwrap();
}

#[tokio::test]
async fn removing_a_set_keeps_a_crd_that_still_has_custom_resources_without_our_marks() {
    let ctx = TestContext::new("prov-remove").await.unwrap();
    let owner = owner(&ctx).await;
    let group = format!("{}.e2e.olm-rs.io", ctx.namespace);
    let crd_name = format!("widgets.{group}");
    let widget = |name: &str| {
        json!({"apiVersion": format!("{group}/v1"), "kind": "Widget",
            "metadata": {"name": name, "namespace": ctx.namespace}})
    };
    let tree = Tree::new()
        .file("manifests/crd.yaml", yaml(&ctx, widget_crd(&group)))
        .file("manifests/widget.yaml", yaml(&ctx, widget("ours")))
        .file("manifests/cm.yaml", config_map(&ctx, "settings", json!({})));
    let applier = Applier::new(ctx.client.clone(), ctx.namespace.clone());
    Set::of(&applier, &owner)
        .sync(plain::objects(&tree).unwrap())
        .await
        .unwrap();
    // A user's own custom resource of the bundle's CRD.
    let widgets: Api<DynamicObject> = Api::namespaced_with(
        ctx.client.clone(),
        &ctx.namespace,
        &ApiResource::from_gvk(&GroupVersionKind::gvk(&group, "v1", "Widget")),
    );
    let mine: DynamicObject = serde_json::from_value(widget("mine")).unwrap();
    widgets.create(&PostParams::default(), &mine).await.unwrap();

    let removed = Set::of(&applier, &owner).remove_all().await.unwrap();
    let mut names: Vec<&str> = removed.removed.iter().map(|k| k.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["ours", "settings"]);
    assert_eq!(
        removed
            .kept
            .iter()
            .map(|k| k.key.name.as_str())
            .collect::<Vec<_>>(),
        [crd_name.as_str()]
    );
    let crds: Api<CustomResourceDefinition> = Api::all(ctx.client.clone());
    let crd = crds.get(&crd_name).await.unwrap();
    assert!(!crd.labels().contains_key(OWNER_NAME), "{:?}", crd.labels());
    assert!(!crd.labels().contains_key("applyset.kubernetes.io/part-of"));
    assert_eq!(
        crd.annotations().get(provisioner::marks::KEPT),
        Some(&owner.name)
    );
    assert_eq!(
        crd.spec.names.kind, "Widget",
        "the definition itself was changed"
    );
    assert!(
        widgets.get_opt("mine").await.unwrap().is_some(),
        "a user's data was deleted"
    );

    ctx.cleanup().await.unwrap();
}
