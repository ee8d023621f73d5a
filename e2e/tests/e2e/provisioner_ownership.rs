//! Deleting only what was applied, against the real API server (issue 36): labels anyone can
//! write never get an object deleted; two BundleDeployments racing for one object install
//! exactly once; a bundle cannot choose a CRD's owner; a Namespace holding a user's objects is
//! kept, and taken back with a kept CRD when the same BundleDeployment installs again; a CRD
//! whose custom resources cannot be counted is kept.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use olm_e2e::context::TestContext;
use olm_e2e::wait::wait_for_deletion;
use provisioner::apply::{Applier, ApplyError};
use provisioner::applyset::PART_OF;
use provisioner::bundle::Tree;
use provisioner::format::plain;
use provisioner::marks::{KEPT, OWNER_KIND, OWNER_NAME, Owner};
use provisioner::set::Set;
use serde_json::json;

use crate::provisioner::{config_map, owner, owner_named, widget_crd, yaml};

const GONE: Duration = Duration::from_secs(60);

/// A ConfigMap carrying the three labels of `owner`'s set, made by someone else.
fn forged(ctx: &TestContext, owner: &Owner, namespace: &str, name: &str) -> ConfigMap {
    serde_json::from_value(ctx.labelled(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": {
            OWNER_KIND: "BundleDeployment", OWNER_NAME: owner.name, PART_OF: owner.set_id()}},
        "data": {"precious": "yes"}})))
    .unwrap()
}

/// A namespace of the test's own besides its namespace (deleted by the clean-up).
pub(crate) async fn extra_namespace(ctx: &TestContext, suffix: &str) -> String {
    let name = ctx.name(suffix);
    let ns = Namespace {
        metadata: kube::api::ObjectMeta {
            name: Some(name.clone()),
            labels: Some(ctx.namespace_labels()),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<Namespace>::all(ctx.client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    name
}

#[tokio::test]
async fn labels_anyone_can_write_never_get_an_object_deleted() {
    let ctx = TestContext::new("prov-forged").await.unwrap();
    let owner = owner(&ctx).await;
    let applier = Applier::new(ctx.client.clone(), ctx.namespace.clone());
    let elsewhere = extra_namespace(&ctx, "elsewhere").await;
    let v1 = Tree::new()
        .file(
            "manifests/a.yaml",
            config_map(&ctx, "a", json!({"v": "1", "dropped": "x"})),
        )
        .file("manifests/b.yaml", config_map(&ctx, "b", json!({"v": "1"})));
    Set::of(&applier, &owner)
        .sync(plain::objects(&v1).unwrap())
        .await
        .unwrap();
    // Created (so that a race for it is lost, not won twice), then owned as an apply owns it:
    // one entry of our manager, an Apply.
    let configmaps: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    let a = configmaps.get("a").await.unwrap();
    let ours: Vec<_> = a
        .managed_fields()
        .iter()
        .filter(|e| e.manager.as_deref() == Some(provisioner::apply::FIELD_MANAGER))
        .map(|e| e.operation.clone().unwrap_or_default())
        .collect();
    assert_eq!(ours, ["Apply"]);
    // Objects that carry the set's labels but were never applied by it: one in a namespace
    // of the set, one in a namespace the set never had.
    for (ns, name) in [
        (ctx.namespace.as_str(), "forged"),
        (elsewhere.as_str(), "forged"),
    ] {
        Api::<ConfigMap>::namespaced(ctx.client.clone(), ns)
            .create(&PostParams::default(), &forged(&ctx, &owner, ns, name))
            .await
            .unwrap();
    }
    // An upgrade that drops b prunes b alone.
    let v2 = Tree::new().file("manifests/a.yaml", config_map(&ctx, "a", json!({"v": "2"})));
    let synced = Set::of(&applier, &owner)
        .sync(plain::objects(&v2).unwrap())
        .await
        .unwrap();
    let removed: Vec<&str> = synced.removed.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(removed, ["b"]);
    // A field the new version drops is gone: nothing else owns it.
    let a = configmaps.get("a").await.unwrap().data.unwrap();
    assert_eq!(a.get("dropped"), None, "{a:?}");
    // Deleting the set deletes a alone.
    let all = Set::of(&applier, &owner).remove_all().await.unwrap();
    let removed: Vec<&str> = all.removed.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(removed, ["a"]);
    for ns in [ctx.namespace.as_str(), elsewhere.as_str()] {
        let cm = Api::<ConfigMap>::namespaced(ctx.client.clone(), ns)
            .get("forged")
            .await
            .unwrap();
        assert_eq!(cm.data.unwrap()["precious"], "yes");
    }
    ctx.cleanup().await.unwrap();
}

#[tokio::test]
async fn two_bundle_deployments_racing_for_one_object_install_exactly_once() {
    let ctx = TestContext::new("prov-race").await.unwrap();
    let applier = Applier::new(ctx.client.clone(), ctx.namespace.clone());
    let configmaps: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    let first = owner_named(&ctx, "first").await;
    let second = owner_named(&ctx, "second").await;
    let tree = Tree::new().file(
        "manifests/shared.yaml",
        config_map(&ctx, "shared", json!({"v": "1"})),
    );
    let objects = plain::objects(&tree).unwrap();
    for round in 0..50 {
        let (a, b) = tokio::join!(
            Set::of(&applier, &first).sync(objects.clone()),
            Set::of(&applier, &second).sync(objects.clone())
        );
        let (winner, loser) = match (&a, &b) {
            (Ok(_), Err(e)) => (&first, e),
            (Err(e), Ok(_)) => (&second, e),
            _ => panic!("round {round}: both or neither installed: {a:?} {b:?}"),
        };
        assert!(
            matches!(loser, ApplyError::Conflicts(_)),
            "round {round}: {loser}"
        );
        let shared = configmaps.get("shared").await.unwrap();
        assert_eq!(shared.labels()[OWNER_NAME], winner.name, "round {round}");
        let reference = &shared.owner_references()[0];
        assert_eq!(reference.uid, winner.uid, "round {round}");
        // The loser has nothing to remove; the winner removes the object.
        for owner in [&first, &second] {
            Set::of(&applier, owner).remove_all().await.unwrap();
        }
        wait_for_deletion(&configmaps, "shared", GONE)
            .await
            .unwrap();
    }
    ctx.cleanup().await.unwrap();
}

#[tokio::test]
async fn a_bundle_cannot_choose_a_crds_owner() {
    let ctx = TestContext::new("prov-crd-owner").await.unwrap();
    let owner = owner(&ctx).await;
    let group = format!("{}.e2e.olm-rs.io", ctx.namespace);
    let mut crd = widget_crd(&group);
    // An owner that does not exist: the garbage collector would delete the CRD and its data.
    crd["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "ConfigMap",
        "name": "nobody", "uid": "3f0d5e1c-0000-4000-8000-000000000000"}]);
    let tree = Tree::new().file("manifests/crd.yaml", yaml(&ctx, crd));
    let applier = Applier::new(ctx.client.clone(), ctx.namespace.clone());
    Set::of(&applier, &owner)
        .sync(plain::objects(&tree).unwrap())
        .await
        .unwrap();
    let live = Api::<CustomResourceDefinition>::all(ctx.client.clone())
        .get(&format!("widgets.{group}"))
        .await
        .unwrap();
    assert!(
        live.owner_references().is_empty(),
        "{:?}",
        live.owner_references()
    );
    Set::of(&applier, &owner).remove_all().await.unwrap();
    ctx.cleanup().await.unwrap();
}

#[tokio::test]
async fn a_namespace_holding_a_users_objects_is_kept_and_taken_back_on_reinstall() {
    let ctx = TestContext::new("prov-keep-ns").await.unwrap();
    let owner = owner(&ctx).await;
    let applier = Applier::new(ctx.client.clone(), ctx.namespace.clone());
    let (install, empty) = (ctx.name("install"), ctx.name("empty"));
    let namespace = |name: &str| {
        json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": ctx.namespace_labels()}})
    };
    let settings = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": install}, "data": {"a": "1"}});
    let tree = Tree::new()
        .file("manifests/ns.yaml", yaml(&ctx, namespace(&install)))
        .file("manifests/empty.yaml", yaml(&ctx, namespace(&empty)))
        .file("manifests/cm.yaml", yaml(&ctx, settings));
    let objects = plain::objects(&tree).unwrap();
    Set::of(&applier, &owner)
        .sync(objects.clone())
        .await
        .unwrap();
    // A user's Secret in the install namespace.
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &install);
    let license: Secret = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "license"}, "stringData": {"key": "k"}}))
    .unwrap();
    secrets
        .create(&PostParams::default(), &license)
        .await
        .unwrap();

    let removed = Set::of(&applier, &owner).remove_all().await.unwrap();
    let mut names: Vec<&str> = removed.removed.iter().map(|k| k.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, [empty.as_str(), "settings"]);
    assert_eq!(removed.kept.len(), 1, "{:?}", removed.kept);
    let kept = &removed.kept[0];
    assert_eq!(kept.key.name, install);
    assert!(
        kept.why.contains(&format!("Secret {install}/license")),
        "{}",
        kept.why
    );
    let namespaces: Api<Namespace> = Api::all(ctx.client.clone());
    let live = namespaces.get(&install).await.unwrap();
    assert!(live.metadata.deletion_timestamp.is_none());
    assert!(
        !live.labels().contains_key(OWNER_NAME),
        "{:?}",
        live.labels()
    );
    // No owner reference is left to the BundleDeployment: deleting it cannot take the
    // namespace along through the garbage collector.
    assert!(
        live.owner_references().iter().all(|r| r.uid != owner.uid),
        "{:?}",
        live.owner_references()
    );
    assert_eq!(live.annotations().get(KEPT), Some(&owner.name));
    assert!(secrets.get_opt("license").await.unwrap().is_some());
    wait_for_deletion(&namespaces, &empty, GONE).await.unwrap();

    // Installing again takes the namespace back (it was a conflict for ever before).
    Set::of(&applier, &owner).sync(objects).await.unwrap();
    let live = namespaces.get(&install).await.unwrap();
    assert_eq!(live.labels().get(OWNER_NAME), Some(&owner.name));
    assert_eq!(live.annotations().get(KEPT), None);
    assert!(live.owner_references().is_empty());
    assert!(secrets.get_opt("license").await.unwrap().is_some());

    // An upgrade that no longer makes the namespace but still puts objects in it keeps it
    // (deleting it would delete what the upgrade just applied).
    let only_settings = Tree::new().file(
        "manifests/cm.yaml",
        yaml(
            &ctx,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "settings", "namespace": install}, "data": {"a": "2"}}),
        ),
    );
    let synced = Set::of(&applier, &owner)
        .sync(plain::objects(&only_settings).unwrap())
        .await
        .unwrap();
    assert_eq!(synced.kept.len(), 1, "{:?}", synced.kept);
    assert!(
        synced.kept[0]
            .why
            .contains("the new version puts objects in it"),
        "{}",
        synced.kept[0].why
    );
    let settings = Api::<ConfigMap>::namespaced(ctx.client.clone(), &install)
        .get("settings")
        .await
        .unwrap();
    assert_eq!(settings.data.unwrap()["a"], "2");
    assert!(
        namespaces
            .get(&install)
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_none()
    );
    Set::of(&applier, &owner).remove_all().await.unwrap();
    ctx.cleanup().await.unwrap();
}

#[tokio::test]
async fn a_kept_crd_is_taken_back_and_one_no_version_serves_is_kept() {
    let ctx = TestContext::new("prov-keep-crd").await.unwrap();
    let owner = owner(&ctx).await;
    let applier = Applier::new(ctx.client.clone(), ctx.namespace.clone());
    let group = format!("{}.e2e.olm-rs.io", ctx.namespace);
    let crd_name = format!("widgets.{group}");
    let crds: Api<CustomResourceDefinition> = Api::all(ctx.client.clone());
    let v1 = Tree::new().file("manifests/crd.yaml", yaml(&ctx, widget_crd(&group)));
    Set::of(&applier, &owner)
        .sync(plain::objects(&v1).unwrap())
        .await
        .unwrap();
    let widgets: Api<DynamicObject> = Api::namespaced_with(
        ctx.client.clone(),
        &ctx.namespace,
        &ApiResource::from_gvk(&GroupVersionKind::gvk(&group, "v1", "Widget")),
    );
    let mine: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{group}/v1"), "kind": "Widget",
        "metadata": {"name": "mine", "namespace": ctx.namespace}}))
    .unwrap();
    widgets.create(&PostParams::default(), &mine).await.unwrap();
    let kept = Set::of(&applier, &owner).remove_all().await.unwrap();
    assert_eq!(kept.kept.len(), 1);
    assert_eq!(
        crds.get(&crd_name).await.unwrap().annotations().get(KEPT),
        Some(&owner.name)
    );

    // The same BundleDeployment installs it again: the kept CRD is its own again, with the
    // user's data (it was a conflict for ever before, whose message said to delete it).
    Set::of(&applier, &owner)
        .sync(plain::objects(&v1).unwrap())
        .await
        .unwrap();
    let crd = crds.get(&crd_name).await.unwrap();
    assert_eq!(crd.labels().get(OWNER_NAME), Some(&owner.name));
    assert_eq!(crd.annotations().get(KEPT), None);
    assert!(widgets.get_opt("mine").await.unwrap().is_some());

    // A version that no longer serves: the custom resources cannot be counted, so the CRD is
    // kept (it was deleted with them before, as if it had none).
    let mut unserved = widget_crd(&group);
    unserved["spec"]["versions"][0]["served"] = json!(false);
    let v2 = Tree::new().file("manifests/crd.yaml", yaml(&ctx, unserved));
    Set::of(&applier, &owner)
        .sync(plain::objects(&v2).unwrap())
        .await
        .unwrap();
    let removed = Set::of(&applier, &owner).remove_all().await.unwrap();
    assert!(removed.removed.is_empty(), "{:?}", removed.removed);
    assert_eq!(removed.kept.len(), 1);
    assert!(
        removed.kept[0].why.contains("no version of it is served"),
        "{}",
        removed.kept[0].why
    );
    let crd = crds.get(&crd_name).await.unwrap();
    assert!(crd.metadata.deletion_timestamp.is_none());
    ctx.cleanup().await.unwrap();
}

/// A plain bundle image of `objects` (each a file of `manifests/`, labelled for the test),
/// pushed as `<ns>/<name>:<tag>`.
pub(crate) async fn bundle_image(
    ctx: &TestContext,
    name: &str,
    tag: &str,
    objects: &[serde_json::Value],
) -> String {
    use olm_e2e::images::{Entry, layer, push};
    let registry = olm_e2e::registry::plain().unwrap();
    let repository = format!("{}/{name}", ctx.namespace);
    let mut entries = vec![Entry::Dir("manifests".into())];
    for (i, object) in objects.iter().enumerate() {
        entries.push(Entry::File(
            format!("manifests/{i}.json"),
            serde_json::to_vec(&ctx.labelled(object.clone())).unwrap(),
        ));
    }
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

#[tokio::test]
async fn an_upgrade_that_moves_the_install_namespace_is_refused_until_allowed() {
    use kube::api::{Patch, PatchParams};
    use olm_api::bundle_deployment::BundleDeployment;
    use olm_e2e::wait::wait_for;

    let ctx = TestContext::new("prov-ns-move").await.unwrap();
    olm_e2e::manager::provisioner().unwrap();
    let (old, new) = (ctx.name("old"), ctx.name("new"));
    let objects = |ns: &str| {
        vec![
            json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": ns, "labels": ctx.namespace_labels()}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "settings", "namespace": ns}, "data": {"a": "1"}}),
        ]
    };
    let v1 = bundle_image(&ctx, "moving", "v1", &objects(&old)).await;
    let v2 = bundle_image(&ctx, "moving", "v2", &objects(&new)).await;
    let spec = |image: &str| {
        json!({"provisionerClassName": "core-rukpak-io-plain", "template": {"spec": {
            "provisionerClassName": "core-rukpak-io-plain",
            "source": {"type": "image", "image": {"ref": image}}}}})
    };
    let bds: Api<BundleDeployment> = Api::all(ctx.client.clone());
    let name = ctx.name("moving");
    let bd: BundleDeployment = serde_json::from_value(ctx.labelled(json!({
        "apiVersion": "core.rukpak.io/v1alpha1", "kind": "BundleDeployment",
        "metadata": {"name": name}, "spec": spec(&v1)})))
    .unwrap();
    bds.create(&PostParams::default(), &bd).await.unwrap();
    let installed = |reason: &'static str| {
        move |bd: Option<&BundleDeployment>| {
            crate::provisioner_bundles::condition(bd, "Installed")
                .is_some_and(|(_, r, _)| r == reason)
        }
    };
    let wait = Duration::from_secs(60);
    wait_for(
        &bds,
        &name,
        "installed",
        wait,
        installed("InstallationSucceeded"),
    )
    .await
    .unwrap();

    bds.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": spec(&v2)})),
    )
    .await
    .unwrap();
    let refused = wait_for(
        &bds,
        &name,
        "the move refused",
        wait,
        installed("InstallNamespaceChangeRefused"),
    )
    .await
    .unwrap();
    let (_, _, message) =
        crate::provisioner_bundles::condition(Some(&refused), "Installed").unwrap();
    assert!(
        message.contains(&format!("would move from {old:?} to {new:?}")),
        "{message}"
    );
    assert!(
        message.contains("olm-rs.io/allow-namespace-change=\"true\""),
        "{message}"
    );
    let namespaces: Api<Namespace> = Api::all(ctx.client.clone());
    assert!(namespaces.get_opt(&new).await.unwrap().is_none());
    assert!(
        Api::<ConfigMap>::namespaced(ctx.client.clone(), &old)
            .get_opt("settings")
            .await
            .unwrap()
            .is_some()
    );

    // Allowed: it moves, and the old namespace, which held nothing else, goes.
    bds.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {
            provisioner::namespace_move::ALLOW: "true"}}})),
    )
    .await
    .unwrap();
    wait_for(
        &bds,
        &name,
        "moved",
        wait,
        installed("InstallationSucceeded"),
    )
    .await
    .unwrap();
    wait_for_deletion(&namespaces, &old, GONE).await.unwrap();
    assert!(namespaces.get_opt(&new).await.unwrap().is_some());

    bds.delete(&name, &Default::default()).await.unwrap();
    wait_for_deletion(&bds, &name, GONE).await.unwrap();
    wait_for_deletion(&namespaces, &new, GONE).await.unwrap();
    ctx.cleanup().await.unwrap();
}

#[tokio::test]
async fn bundles_never_reach_the_managers_namespace_nor_one_not_allowed() {
    use provisioner::namespaces::{NamespacePattern, Namespaces};
    let ctx = TestContext::new("prov-ns-allowed").await.unwrap();
    let owner = owner(&ctx).await;
    let managers = extra_namespace(&ctx, "managers").await;
    let other = extra_namespace(&ctx, "other").await;
    // Namespace-less objects would go to the managers' namespace.
    let applier = Applier::new(ctx.client.clone(), managers.clone()).within(Namespaces {
        managers: managers.clone(),
        allowed: vec![NamespacePattern::Exact(ctx.namespace.clone())],
        namespaced_only: false,
    });
    let cm = |ns: Option<&str>| {
        let mut doc = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "settings"}, "data": {"a": "1"}});
        if let Some(ns) = ns {
            doc["metadata"]["namespace"] = json!(ns);
        }
        Tree::new().file("manifests/cm.yaml", yaml(&ctx, doc))
    };
    for (tree, words) in [
        (cm(None), "is the managers' own"),
        (cm(Some(&managers)), "is the managers' own"),
        (cm(Some(&other)), "--allowed-namespaces"),
    ] {
        let err = Set::of(&applier, &owner)
            .sync(plain::objects(&tree).unwrap())
            .await
            .unwrap_err();
        assert!(
            matches!(err, ApplyError::NamespaceNotAllowed { .. }),
            "{err}"
        );
        assert!(err.to_string().contains(words), "{err}");
    }
    for ns in [&managers, &other] {
        let written = Api::<ConfigMap>::namespaced(ctx.client.clone(), ns)
            .get_opt("settings")
            .await
            .unwrap();
        assert!(written.is_none(), "a refused object was written in {ns}");
    }
    Set::of(&applier, &owner)
        .sync(plain::objects(&cm(Some(&ctx.namespace))).unwrap())
        .await
        .unwrap();

    // The provisioner the chart runs refuses its own namespace with a reason.
    olm_e2e::manager::provisioner().unwrap();
    let image = bundle_image(
        &ctx,
        "managers",
        "v1",
        &[json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": ctx.name("sneaky"), "namespace": olm_e2e::manager::OLM_NAMESPACE}})],
    )
    .await;
    let bds: Api<olm_api::bundle_deployment::BundleDeployment> = Api::all(ctx.client.clone());
    let name = ctx.name("sneaky");
    let bd =
        serde_json::from_value(crate::provisioner_bundles::plain_bd(&ctx, &name, &image)).unwrap();
    bds.create(&PostParams::default(), &bd).await.unwrap();
    let refused = olm_e2e::wait::wait_for(&bds, &name, "refused", GONE, |bd| {
        crate::provisioner_bundles::condition(bd, "HasValidBundle")
            .is_some_and(|(_, r, _)| r == "NamespaceNotAllowed")
    })
    .await
    .unwrap();
    let (_, _, message) =
        crate::provisioner_bundles::condition(Some(&refused), "Installed").unwrap();
    assert!(message.contains("is the managers' own"), "{message}");
    bds.delete(&name, &Default::default()).await.unwrap();
    wait_for_deletion(&bds, &name, GONE).await.unwrap();
    Set::of(&applier, &owner).remove_all().await.unwrap();
    ctx.cleanup().await.unwrap();
}
