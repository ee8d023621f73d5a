//! CRD upgrade safety on the real API server, through the provisioner binary: a BundleDeployment
//! installs a CRD (and a ConfigMap standing for the operator), then moves to a bundle whose CRD
//! makes one change. Each refused change is one test: `Installed=False`, reason
//! `CRDUpgradeUnsafe`, the message naming `<version>: <field>: <check>`, the live CRD and the
//! old ConfigMap untouched. A safe change applies, and so does an unsafe one on a
//! BundleDeployment that opted out.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use olm_api::bundle_deployment::BundleDeployment;
use olm_e2e::context::TestContext;
use olm_e2e::manager::provisioner;
use olm_e2e::wait::wait_for;
use provisioner::crd_safety::OPT_OUT;
use serde_json::{Value, json};

use crate::provisioner_bundles::condition;
use crate::provisioner_controller::{bundle_config_map, installed, move_to, template};

const WAIT: Duration = Duration::from_secs(60);

/// A version of the Widget CRD whose `spec` has `spec_schema`.
fn version(name: &str, storage: bool, spec_schema: Value) -> Value {
    json!({"name": name, "served": true, "storage": storage,
        "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec_schema}}}})
}

fn crd(group: &str, scope: &str, versions: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("widgets.{group}")},
        "spec": {"group": group, "scope": scope,
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": versions},
    })
}

/// The usual starting point: `v1` with a size, a color and a mode, all optional.
fn spec_v1() -> Value {
    json!({"type": "object", "properties": {
        "size": {"type": "integer"},
        "color": {"type": "string"},
        "mode": {"type": "string", "enum": ["fast", "slow"]},
        "replicas": {"type": "integer", "default": 1},
    }})
}

/// `spec_v1` with `change` made to it.
fn spec_with(change: impl FnOnce(&mut Value)) -> Value {
    let mut spec = spec_v1();
    change(&mut spec);
    spec
}

/// How an upgrade ended.
struct Outcome {
    ctx: TestContext,
    crd_name: String,
    bd: BundleDeployment,
    /// The live CRD's `spec.versions` after it.
    versions: Value,
    /// The operator's ConfigMap's version after it.
    settings: String,
}

/// Installs `old` (a CRD given its group), optionally creates a Widget with `widget` as spec,
/// then moves to `new`; returns once the upgrade applied or was refused.
async fn upgrade(
    test: &str,
    old: impl Fn(&str) -> Value,
    new: impl Fn(&str) -> Value,
    widget: Option<Value>,
    opt_out: bool,
) -> Outcome {
    let ctx = TestContext::new(test).await.unwrap();
    provisioner().unwrap();
    let group = format!("{}.e2e.olm-rs.io", ctx.namespace);
    let settings = |v: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": ctx.namespace}, "data": {"version": v}})
    };
    let (v1, v2) = (ctx.name("crd-v1"), ctx.name("crd-v2"));
    bundle_config_map(&ctx, &v1, &[old(&group), settings("1")]).await;
    bundle_config_map(&ctx, &v2, &[new(&group), settings("2")]).await;
    let name = ctx.name("bd");
    let bds: Api<BundleDeployment> = Api::all(ctx.client.clone());
    let annotations = if opt_out {
        json!({OPT_OUT: "false"})
    } else {
        json!({})
    };
    let bd: BundleDeployment = serde_json::from_value(ctx.labelled(json!({
        "apiVersion": "core.rukpak.io/v1alpha1", "kind": "BundleDeployment",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"provisionerClassName": "core-rukpak-io-plain", "template": template(&v1)},
    })))
    .unwrap();
    bds.create(&PostParams::default(), &bd).await.unwrap();
    let first = wait_for(&bds, &name, "installed", WAIT, |bd| installed(bd).is_some())
        .await
        .unwrap();
    let before = installed(Some(&first)).unwrap();
    if let Some(spec) = widget {
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(&group, "v1", "Widget"));
        let widgets: Api<DynamicObject> =
            Api::namespaced_with(ctx.client.clone(), &ctx.namespace, &resource);
        let w: DynamicObject = serde_json::from_value(json!({
            "apiVersion": format!("{group}/v1"), "kind": "Widget",
            "metadata": {"name": "w", "namespace": ctx.namespace}, "spec": spec}))
        .unwrap();
        widgets.create(&PostParams::default(), &w).await.unwrap();
    }
    move_to(&bds, &name, &v2).await;
    let bd = wait_for(&bds, &name, "upgraded or refused", WAIT, move |bd| {
        installed(bd).is_some_and(|b| b != before)
            || condition(bd, "Installed").is_some_and(|(_, reason, _)| reason == "CRDUpgradeUnsafe")
    })
    .await
    .unwrap();
    let crd_name = format!("widgets.{group}");
    let live = Api::<CustomResourceDefinition>::all(ctx.client.clone())
        .get(&crd_name)
        .await
        .unwrap();
    let versions = serde_json::to_value(&live.spec.versions).unwrap();
    let settings = Api::<ConfigMap>::namespaced(ctx.client.clone(), &ctx.namespace)
        .get("settings")
        .await
        .unwrap()
        .data
        .unwrap()["version"]
        .clone();
    Outcome {
        ctx,
        crd_name,
        bd,
        versions,
        settings,
    }
}

/// Asserts the upgrade was refused with `expected` in the message, the old CRD and operator
/// kept; cleans up.
async fn refused(outcome: Outcome, old_spec: &Value, expected: &str) {
    let (_, reason, message) = condition(Some(&outcome.bd), "Installed").unwrap();
    assert_eq!(reason, "CRDUpgradeUnsafe", "{message}");
    assert!(
        message.contains(&format!(
            "CRD {:?} cannot be upgraded safely",
            outcome.crd_name
        )) && message.contains(expected),
        "{expected:?} not in {message}"
    );
    assert!(message.contains("stays installed"), "{message}");
    assert_eq!(outcome.settings, "1", "the old operator stays");
    let schema = &outcome.versions[0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    assert_eq!(schema, old_spec, "the old CRD stays");
    outcome.ctx.cleanup().await.unwrap();
}

fn one(spec: Value) -> impl Fn(&str) -> Value {
    move |group| {
        crd(
            group,
            "Namespaced",
            json!([version("v1", true, spec.clone())]),
        )
    }
}

#[tokio::test]
async fn crd_safety_refuses_a_scope_change() {
    let o = upgrade(
        "crd-scope",
        one(spec_v1()),
        |g| crd(g, "Cluster", json!([version("v1", true, spec_v1())])),
        None,
        false,
    )
    .await;
    refused(
        o,
        &spec_v1(),
        "*: ^: scope: changed from Namespaced to Cluster",
    )
    .await;
}

#[tokio::test]
async fn crd_safety_refuses_removing_a_stored_version() {
    let o = upgrade(
        "crd-stored",
        one(spec_v1()),
        |g| crd(g, "Namespaced", json!([version("v2", true, spec_v1())])),
        None,
        false,
    )
    .await;
    refused(o, &spec_v1(), "v1: ^: storedVersionRemoval:").await;
}

#[tokio::test]
async fn crd_safety_refuses_removing_a_field() {
    let new = spec_with(|s| {
        s["properties"].as_object_mut().unwrap().remove("color");
    });
    let o = upgrade("crd-removed", one(spec_v1()), one(new), None, false).await;
    refused(o, &spec_v1(), "v1: ^.spec.color: existingFieldRemoval:").await;
}

#[tokio::test]
async fn crd_safety_refuses_a_new_required_field() {
    let new = spec_with(|s| s["required"] = json!(["size"]));
    let o = upgrade("crd-required", one(spec_v1()), one(new), None, false).await;
    refused(
        o,
        &spec_v1(),
        "v1: ^.spec: required: new required fields: size",
    )
    .await;
}

#[tokio::test]
async fn crd_safety_refuses_an_enum_where_there_was_none_or_a_value_removed() {
    let new = spec_with(|s| {
        s["properties"]["color"]["enum"] = json!(["red"]);
        s["properties"]["mode"]["enum"] = json!(["fast"]);
    });
    let o = upgrade("crd-enum", one(spec_v1()), one(new), None, false).await;
    let message = condition(Some(&o.bd), "Installed").unwrap().2;
    assert!(
        message.contains("v1: ^.spec.mode: enum: values removed: [\"slow\"]"),
        "{message}"
    );
    refused(
        o,
        &spec_v1(),
        "v1: ^.spec.color: enum: added where any value was allowed",
    )
    .await;
}

#[tokio::test]
async fn crd_safety_refuses_a_maximum_added() {
    let new = spec_with(|s| s["properties"]["size"]["maximum"] = json!(10));
    let o = upgrade("crd-max", one(spec_v1()), one(new), None, false).await;
    refused(o, &spec_v1(), "v1: ^.spec.size: maximum: added: 10").await;
}

#[tokio::test]
async fn crd_safety_refuses_a_minimum_raised() {
    let old = spec_with(|s| s["properties"]["color"]["minLength"] = json!(1));
    let new = spec_with(|s| s["properties"]["color"]["minLength"] = json!(3));
    let o = upgrade("crd-min", one(old.clone()), one(new), None, false).await;
    refused(
        o,
        &old,
        "v1: ^.spec.color: minLength: increased from 1 to 3",
    )
    .await;
}

#[tokio::test]
async fn crd_safety_refuses_a_changed_default() {
    let new = spec_with(|s| s["properties"]["replicas"]["default"] = json!(3));
    let o = upgrade("crd-default", one(spec_v1()), one(new), None, false).await;
    refused(
        o,
        &spec_v1(),
        "v1: ^.spec.replicas: default: changed from 1 to 3",
    )
    .await;
}

#[tokio::test]
async fn crd_safety_refuses_a_changed_type() {
    let new = spec_with(|s| s["properties"]["size"]["type"] = json!("string"));
    let o = upgrade("crd-type", one(spec_v1()), one(new), None, false).await;
    refused(
        o,
        &spec_v1(),
        "v1: ^.spec.size: type: changed from \"integer\" to \"string\"",
    )
    .await;
}

#[tokio::test]
async fn crd_safety_refuses_a_change_it_cannot_classify() {
    let new = spec_with(|s| s["properties"]["color"]["pattern"] = json!("^[a-z]+$"));
    let o = upgrade("crd-unhandled", one(spec_v1()), one(new), None, false).await;
    refused(
        o,
        &spec_v1(),
        "v1: ^.spec.color: unhandled: \"pattern\" changed",
    )
    .await;
}

#[tokio::test]
async fn crd_safety_names_an_existing_widget_a_new_served_version_would_not_accept() {
    // v2 is new, so no field of it is compared; the Widget stored at v1 is what it must accept.
    let strict = spec_with(|s| s["properties"]["size"]["maximum"] = json!(3));
    let o = upgrade(
        "crd-objects",
        one(spec_v1()),
        move |g| {
            crd(
                g,
                "Namespaced",
                json!([
                    version("v1", true, spec_v1()),
                    version("v2", false, strict.clone())
                ]),
            )
        },
        Some(json!({"size": 5})),
        false,
    )
    .await;
    let who = format!("Widget {}/w would no longer validate", o.ctx.namespace);
    let message = condition(Some(&o.bd), "Installed").unwrap().2;
    assert!(message.contains(&who), "{message}");
    refused(o, &spec_v1(), "v2: ^.spec.size: existingObjects:").await;
}

#[tokio::test]
async fn crd_safety_applies_a_new_optional_field_and_a_new_served_version() {
    let wider = spec_with(|s| s["properties"]["shape"] = json!({"type": "string"}));
    let o = upgrade(
        "crd-safe",
        one(spec_v1()),
        move |g| {
            crd(
                g,
                "Namespaced",
                json!([
                    version("v1", true, wider.clone()),
                    version("v2", false, wider.clone())
                ]),
            )
        },
        Some(json!({"size": 5})),
        false,
    )
    .await;
    assert_eq!(
        condition(Some(&o.bd), "Installed").unwrap().0,
        "True",
        "{:?}",
        condition(Some(&o.bd), "Installed")
    );
    assert_eq!(o.settings, "2");
    assert_eq!(o.versions.as_array().unwrap().len(), 2);
    assert!(
        o.versions[0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["shape"]
            .is_object()
    );
    o.ctx.cleanup().await.unwrap();
}

#[tokio::test]
async fn crd_safety_applies_an_unsafe_change_when_the_bundle_deployment_opts_out() {
    let new = spec_with(|s| s["properties"]["size"]["type"] = json!("string"));
    let o = upgrade("crd-optout", one(spec_v1()), one(new), None, true).await;
    assert_eq!(condition(Some(&o.bd), "Installed").unwrap().0, "True");
    assert_eq!(o.settings, "2");
    assert_eq!(
        o.versions[0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["size"]["type"],
        "string"
    );
    o.ctx.cleanup().await.unwrap();
}
