//! The provisioner binary, run as its chart ServiceAccount with the chart's RBAC, against the
//! real control plane: a BundleDeployment from ConfigMaps (in the provisioner's namespace) is
//! installed, upgraded (what the new version drops is pruned) and uninstalled. The harness's
//! provisioner reconciles only BundleDeployments with the e2e label, so it leaves those
//! operator-controller writes for other tests alone.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use olm_api::bundle_deployment::BundleDeployment;
use olm_e2e::context::TestContext;
use olm_e2e::manager::{OLM_NAMESPACE, provisioner};
use olm_e2e::wait::{wait_for, wait_for_deletion};
use provisioner::plan::FINALIZER;
use serde_json::json;

pub(crate) fn manifests(ctx: &TestContext, objects: &[serde_json::Value]) -> String {
    objects
        .iter()
        .map(|o| {
            format!(
                "---\n{}",
                serde_saphyr::to_string(&ctx.labelled(o.clone())).unwrap()
            )
        })
        .collect()
}

/// An immutable bundle ConfigMap in the provisioner's namespace, labelled for clean-up.
pub(crate) async fn bundle_config_map(
    ctx: &TestContext,
    name: &str,
    objects: &[serde_json::Value],
) {
    let cm: ConfigMap = serde_json::from_value(ctx.labelled(json!({
        "metadata": {"name": name},
        "immutable": true,
        "data": {"objects.yaml": manifests(ctx, objects)},
    })))
    .unwrap();
    Api::<ConfigMap>::namespaced(ctx.client.clone(), OLM_NAMESPACE)
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
}

pub(crate) fn template(config_map: &str) -> serde_json::Value {
    json!({"spec": {"provisionerClassName": "core-rukpak-io-plain",
        "source": {"type": "configMaps", "configMaps": [{"configMap": {"name": config_map}, "path": "manifests"}]}}})
}

/// Moves `name` to the template of the bundle ConfigMap `bundle`.
pub(crate) async fn move_to(bds: &Api<BundleDeployment>, name: &str, bundle: &str) {
    bds.patch(
        name,
        &PatchParams::apply("olm-rs-e2e").force(),
        &Patch::Apply(
            json!({"apiVersion": "core.rukpak.io/v1alpha1", "kind": "BundleDeployment",
            "metadata": {"name": name},
            "spec": {"provisionerClassName": "core-rukpak-io-plain", "template": template(bundle)}}),
        ),
    )
    .await
    .unwrap();
}

pub(crate) fn installed(bd: Option<&BundleDeployment>) -> Option<String> {
    let status = bd?.status.as_ref()?;
    let c = status.conditions.iter().find(|c| c.type_ == "Installed")?;
    (c.status == "True")
        .then(|| status.active_bundle.clone())
        .flatten()
}

#[tokio::test]
async fn a_bundle_deployment_is_installed_upgraded_and_uninstalled() {
    let ctx = TestContext::new("prov-ctl").await.unwrap();
    provisioner().unwrap();
    let settings = |v: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": ctx.namespace}, "data": {"version": v}})
    };
    let extra = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "extra", "namespace": ctx.namespace}});
    let (v1, v2, v3) = (
        ctx.name("bundle-v1"),
        ctx.name("bundle-v2"),
        ctx.name("bundle-v3"),
    );
    bundle_config_map(&ctx, &v1, &[settings("1"), extra]).await;
    bundle_config_map(&ctx, &v2, &[settings("2")]).await;
    // 0.3.0 changes "settings" and brings an object the API server refuses.
    let bad = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "bad", "namespace": ctx.namespace}, "data": {"not a valid key!": "1"}});
    bundle_config_map(&ctx, &v3, &[settings("3"), bad]).await;

    let name = ctx.name("bd");
    let bds: Api<BundleDeployment> = Api::all(ctx.client.clone());
    let bd: BundleDeployment = serde_json::from_value(ctx.labelled(json!({
        "apiVersion": "core.rukpak.io/v1alpha1", "kind": "BundleDeployment",
        "metadata": {"name": name},
        "spec": {"provisionerClassName": "core-rukpak-io-plain", "template": template(&v1)},
    })))
    .unwrap();
    bds.create(&PostParams::default(), &bd).await.unwrap();
    let first = wait_for(&bds, &name, "installed", Duration::from_secs(60), |bd| {
        installed(bd).is_some()
    })
    .await
    .unwrap();
    let first_bundle = installed(Some(&first)).unwrap();
    assert!(
        first_bundle.starts_with(&format!("{name}-")),
        "{first_bundle}"
    );
    assert!(
        first
            .metadata
            .finalizers
            .unwrap_or_default()
            .contains(&FINALIZER.to_owned())
    );
    let configmaps: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    assert_eq!(
        configmaps.get("settings").await.unwrap().data.unwrap()["version"],
        "1"
    );
    assert!(configmaps.get_opt("extra").await.unwrap().is_some());

    drift_is_undone_and_nothing_else_is_written(&ctx, &bds, &name, &configmaps).await;

    // A new template: the same BundleDeployment moves to it, and what it drops goes.
    move_to(&bds, &name, &v2).await;
    let before = first_bundle.clone();
    let second = wait_for(
        &bds,
        &name,
        "upgraded",
        Duration::from_secs(60),
        move |bd| installed(bd).is_some_and(|b| b != before),
    )
    .await
    .unwrap();
    assert_eq!(
        configmaps.get("settings").await.unwrap().data.unwrap()["version"],
        "2"
    );
    wait_for_deletion(&configmaps, "extra", Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(
        second.status.as_ref().unwrap().observed_generation,
        second.metadata.generation
    );
    let second_bundle = installed(Some(&second)).unwrap();

    // A failing upgrade: 0.2.0 stays installed as it was, nothing is pruned, and status names
    // the refused object, quoting the API server.
    move_to(&bds, &name, &v3).await;
    let failed = wait_for(
        &bds,
        &name,
        "a failed upgrade",
        Duration::from_secs(60),
        |bd| {
            bd.and_then(|b| b.status.as_ref())
                .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Installed"))
                .is_some_and(|c| c.reason == "UpgradeFailed")
        },
    )
    .await
    .unwrap();
    let status = failed.status.unwrap();
    let condition = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Installed")
        .unwrap();
    assert_eq!(condition.status, "False");
    for part in [
        format!("ConfigMap {}/bad", ctx.namespace),
        "not a valid key!".to_owned(),
        format!("{second_bundle} stays installed and nothing was removed"),
    ] {
        assert!(condition.message.contains(&part), "{}", condition.message);
    }
    assert_eq!(
        status.active_bundle.as_deref(),
        Some(second_bundle.as_str())
    );
    assert_eq!(
        configmaps.get("settings").await.unwrap().data.unwrap()["version"],
        "2"
    );
    assert!(configmaps.get_opt("bad").await.unwrap().is_none());

    // Deleting it removes what it installed; the finalizer lets it go once that is done.
    bds.delete(&name, &DeleteParams::default()).await.unwrap();
    wait_for_deletion(&bds, &name, Duration::from_secs(60))
        .await
        .unwrap();
    wait_for_deletion(&configmaps, "settings", Duration::from_secs(30))
        .await
        .unwrap();

    ctx.cleanup().await.unwrap();
}

/// Drift: an applied object deleted by hand comes back, and one changed by hand is changed
/// back, while a field another manager added survives; a reconcile that finds nothing moved
/// writes nothing. The audit log shows it from the server's side: after a reconcile forced by
/// an annotation and the deletion of one object, the provisioner's only writes are that one
/// object's restore (its dry run, its create and apply), not the other objects nor the
/// BundleDeployment (a full re-apply would patch every object and the ApplySet record).
async fn drift_is_undone_and_nothing_else_is_written(
    ctx: &TestContext,
    bds: &Api<BundleDeployment>,
    name: &str,
    configmaps: &Api<ConfigMap>,
) {
    let since = std::time::SystemTime::now();
    // A change that is not drift: the reconcile it causes finds every object as applied.
    bds.patch(
        name,
        &PatchParams::apply("olm-rs-e2e-poke"),
        &Patch::Apply(
            json!({"apiVersion": "core.rukpak.io/v1alpha1", "kind": "BundleDeployment",
            "metadata": {"name": name, "annotations": {"olm-rs.io/e2e-poke": "1"}}}),
        ),
    )
    .await
    .unwrap();
    configmaps
        .delete("extra", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(
        configmaps,
        "extra",
        "restored",
        Duration::from_secs(30),
        |cm| cm.is_some(),
    )
    .await
    .unwrap();
    let writes: Vec<_> = olm_e2e::audit::writes_by("provisioner/", since)
        .unwrap()
        .into_iter()
        // Events (the restore's own) are not objects of the set.
        .filter(|w| !w.uri.contains("/events"))
        .filter(|w| w.uri.contains(&ctx.namespace) || w.uri.contains(name))
        .collect();
    assert!(!writes.is_empty(), "the restore is not in the audit log");
    // A deleted object is created again (a create names its collection; its dry run first),
    // then applied and its create's managedFields entry dropped (patches of it alone).
    let collection = format!("/api/v1/namespaces/{}/configmaps?", ctx.namespace);
    for w in &writes {
        let creates_a_configmap = w.verb == "create" && w.uri.starts_with(&collection);
        assert!(
            creates_a_configmap || (w.verb == "patch" && w.uri.contains("/configmaps/extra")),
            "only the deleted object is written again, not {} {}",
            w.verb,
            w.uri
        );
    }
    assert!(
        writes.iter().filter(|w| w.verb == "create").count() <= 2,
        "{writes:?}"
    );

    // Changed by hand: our field is set back, another manager's new field stays.
    configmaps
        .patch(
            "settings",
            &PatchParams::apply("someone-else").force(),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "settings"}, "data": {"version": "tampered", "theirs": "kept"}})),
        )
        .await
        .unwrap();
    let settings = wait_for(
        configmaps,
        "settings",
        "set back",
        Duration::from_secs(30),
        |cm| {
            cm.and_then(|c| c.data.as_ref())
                .is_some_and(|d| d.get("version").map(String::as_str) == Some("1"))
        },
    )
    .await
    .unwrap();
    assert_eq!(settings.data.unwrap()["theirs"], "kept");

    // Both restores are told, each naming what the re-apply changed.
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(ctx.client.clone(), "default");
    for object in ["extra", "settings"] {
        let named = format!("ConfigMap {}/{object}", ctx.namespace);
        crate::catalogd::wait_for_event_saying(&events, name, "Restored", &named).await;
    }
}

/// Deleting a BundleDeployment whose CRD still has a user's custom resource: everything else it
/// applied goes, the CRD stays (its owner marks removed), and a `CRDKept` event on the
/// BundleDeployment names it.
#[tokio::test]
async fn deleting_keeps_a_crd_that_still_has_custom_resources_and_says_so_in_an_event() {
    let ctx = TestContext::new("prov-keep").await.unwrap();
    provisioner().unwrap();
    let group = format!("{}.e2e.olm-rs.io", ctx.namespace);
    let crd_name = format!("widgets.{group}");
    let settings = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": ctx.namespace}});
    let bundle = ctx.name("bundle");
    bundle_config_map(
        &ctx,
        &bundle,
        &[crate::provisioner::widget_crd(&group), settings],
    )
    .await;
    let name = ctx.name("bd");
    let bds: Api<BundleDeployment> = Api::all(ctx.client.clone());
    let bd: BundleDeployment = serde_json::from_value(ctx.labelled(json!({
        "apiVersion": "core.rukpak.io/v1alpha1", "kind": "BundleDeployment",
        "metadata": {"name": name},
        "spec": {"provisionerClassName": "core-rukpak-io-plain", "template": template(&bundle)},
    })))
    .unwrap();
    bds.create(&PostParams::default(), &bd).await.unwrap();
    wait_for(&bds, &name, "installed", Duration::from_secs(60), |bd| {
        installed(bd).is_some()
    })
    .await
    .unwrap();
    let resource =
        kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(&group, "v1", "Widget"));
    let widgets: Api<kube::api::DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), &ctx.namespace, &resource);
    let mine: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{group}/v1"), "kind": "Widget",
        "metadata": {"name": "mine", "namespace": ctx.namespace}}))
    .unwrap();
    widgets.create(&PostParams::default(), &mine).await.unwrap();

    bds.delete(&name, &DeleteParams::default()).await.unwrap();
    wait_for_deletion(&bds, &name, Duration::from_secs(60))
        .await
        .unwrap();
    let configmaps: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    assert!(configmaps.get_opt("settings").await.unwrap().is_none());
    let crds: Api<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    > = Api::all(ctx.client.clone());
    let crd = crds.get(&crd_name).await.unwrap();
    assert!(
        !crd.metadata
            .labels
            .unwrap_or_default()
            .contains_key("core.rukpak.io/owner-name"),
        "the kept CRD still names its owner"
    );
    assert!(widgets.get_opt("mine").await.unwrap().is_some());
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(ctx.client.clone(), "default");
    let event = crate::catalogd::wait_for_event(&events, &name, "CRDKept").await;
    assert!(
        event
            .note
            .as_deref()
            .unwrap_or_default()
            .contains(&crd_name),
        "{:?}",
        event.note
    );
    ctx.cleanup().await.unwrap();
}
