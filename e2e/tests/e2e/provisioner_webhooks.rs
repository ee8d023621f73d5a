//! Webhooks and an APIService, on the cluster's real node: a registry+v1 operator whose CSV
//! declares a validating, a mutating and a conversion webhook and owns an APIService, all
//! served by its one Deployment (olm-test-operator, an image assembled from this build), is
//! installed with certificates the provisioner issues itself. The API server calls it: a
//! forbidden Widget is refused, every Widget is labelled, a Widget stored as v1 reads as v2,
//! and the aggregated API lists its Reading (the real `kubectl get readings` too). `Healthy`
//! waits for the Service to have a ready endpoint and the APIService to be Available. With a
//! short certificate lifetime (`--cert-lifetime-seconds`), the CA rotates while Widgets are
//! created and read without pause, and not one call fails. Removing the BundleDeployment removes what it installed,
//! its certificate store with it.

use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use olm_api::bundle_deployment::BundleDeployment;
use olm_e2e::context::TestContext;
use olm_e2e::manager::{OLM_NAMESPACE, OWN_PROVISIONER_LABEL, start_provisioner_with};
use olm_e2e::node::{push_manager, registry};
use olm_e2e::test_operator::{MUTATED_LABEL, READINGS_GROUP, WIDGETS_GROUP};
use olm_e2e::wait::{wait_for, wait_for_deletion};
use serde_json::{Value, json};

use crate::provisioner_bundles::{bundle_image, condition};
use crate::provisioner_registry::registry_bundle;

const WAIT: Duration = Duration::from_secs(180);
/// The certificate lifetime of this test's provisioner: its CA is succeeded after 80 s, the
/// successor signs from 90 s, and the first CA leaves the bundle at 120 s.
const LIFETIME: u64 = 120;

/// The Widgets CRD: `v1` (`spec.size`, stored) and `v2` (`spec.replicas`), converted by the
/// operator's webhook.
fn widgets_crd() -> Value {
    let schema = |field: &str| {
        json!({"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object",
            "properties": {field: {"type": "integer"}, "forbidden": {"type": "boolean"}}}}}})
    };
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("widgets.{WIDGETS_GROUP}")},
        "spec": {"group": WIDGETS_GROUP, "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [
                {"name": "v1", "served": true, "storage": true, "schema": schema("size")},
                {"name": "v2", "served": true, "storage": false, "schema": schema("replicas")}]}})
}

/// The operator's bundle: its CSV (AllNamespaces only, as conversion webhooks require) with
/// the three webhooks and the owned APIService, and the Widgets CRD.
fn bundle(package: &str, image: &str) -> Vec<olm_e2e::images::Entry> {
    let rules = json!([{"apiGroups": [WIDGETS_GROUP], "apiVersions": ["v1", "v2"],
        "operations": ["CREATE", "UPDATE"], "resources": ["widgets"]}]);
    let hook = |type_: &str, name: &str, path: &str| {
        json!({"type": type_, "generateName": name, "deploymentName": "test-operator",
            "containerPort": 443, "targetPort": 9443, "webhookPath": path,
            "sideEffects": "None", "admissionReviewVersions": ["v1"], "failurePolicy": "Fail",
            "rules": rules})
    };
    let mut conversion = hook(
        "ConversionWebhook",
        &format!("c{WIDGETS_GROUP}"),
        "/convert",
    );
    conversion["conversionCRDs"] = json!([format!("widgets.{WIDGETS_GROUP}")]);
    let modes: Vec<Value> = [
        "OwnNamespace",
        "SingleNamespace",
        "MultiNamespace",
        "AllNamespaces",
    ]
    .iter()
    .map(|m| json!({"type": m, "supported": *m == "AllNamespaces"}))
    .collect();
    let csv = json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": format!("{package}.v1.0.0")},
        "spec": {
            "installModes": modes,
            "customresourcedefinitions": {"owned": [{"name": format!("widgets.{WIDGETS_GROUP}"),
                "version": "v1", "kind": "Widget"}]},
            "webhookdefinitions": [
                hook("ValidatingAdmissionWebhook", &format!("v{WIDGETS_GROUP}"), "/validate"),
                hook("MutatingAdmissionWebhook", &format!("m{WIDGETS_GROUP}"), "/mutate"),
                conversion,
            ],
            "apiservicedefinitions": {"owned": [{"group": READINGS_GROUP, "version": "v1",
                "kind": "Reading", "name": "readings", "deploymentName": "test-operator",
                "containerPort": 9443}]},
            "install": {"strategy": "deployment", "spec": {
                "deployments": [{"name": "test-operator", "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": {"app": "test-operator"}},
                    "template": {"metadata": {"labels": {"app": "test-operator"}}, "spec": {
                        "automountServiceAccountToken": false,
                        "terminationGracePeriodSeconds": 10,
                        "securityContext": {"runAsNonRoot": true, "runAsUser": 65532,
                                            "seccompProfile": {"type": "RuntimeDefault"}},
                        "containers": [{"name": "manager", "image": image,
                            "ports": [{"containerPort": 9443, "name": "https"}],
                            "readinessProbe": {"httpGet": {"path": "/healthz", "port": 9443, "scheme": "HTTPS"},
                                "periodSeconds": 1},
                            "securityContext": {"allowPrivilegeEscalation": false,
                                                "capabilities": {"drop": ["ALL"]}}}]}}}}],
            }},
        },
    });
    registry_bundle(package, &csv, &[("widgets.crd.json", &widgets_crd())])
}

fn widgets(ctx: &TestContext, version: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(WIDGETS_GROUP, version, "Widget");
    Api::namespaced_with(
        ctx.client.clone(),
        &ctx.namespace,
        &ApiResource::from_gvk_with_plural(&gvk, "widgets"),
    )
}

fn widget(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(
        json!({"apiVersion": format!("{WIDGETS_GROUP}/v1"), "kind": "Widget",
        "metadata": {"name": name}, "spec": spec}),
    )
    .unwrap()
}

/// The CA bundle the validating webhook configuration trusts, as certificates (PEM blocks).
async fn trusted(ctx: &TestContext) -> Vec<String> {
    let config = Api::<ValidatingWebhookConfiguration>::all(ctx.client.clone())
        .get(&format!("v{WIDGETS_GROUP}"))
        .await
        .unwrap();
    let bundle = config.webhooks.unwrap()[0]
        .client_config
        .ca_bundle
        .clone()
        .unwrap();
    String::from_utf8(bundle.0)
        .unwrap()
        .split_inclusive("-----END CERTIFICATE-----\n")
        .map(str::to_owned)
        .collect()
}

/// The serving certificate the operator's Pods mount.
async fn serving(ctx: &TestContext) -> Vec<u8> {
    let secret = Api::<Secret>::namespaced(ctx.client.clone(), &ctx.namespace)
        .get("test-operator-service-cert")
        .await
        .unwrap();
    secret.data.unwrap()["tls.crt"].0.clone()
}

/// One round of what the API server calls the operator for: a Widget created (mutated and
/// validated), read back as v2 (converted), deleted; a forbidden one refused. `Err` says which
/// call failed.
async fn round(ctx: &TestContext, n: usize) -> Result<(), String> {
    let name = format!("w-{n}");
    let created = widgets(ctx, "v1")
        .create(&PostParams::default(), &widget(&name, json!({"size": n})))
        .await
        .map_err(|e| format!("create {name}: {e}"))?;
    if created
        .metadata
        .labels
        .unwrap_or_default()
        .get(MUTATED_LABEL)
        != Some(&"true".to_owned())
    {
        return Err(format!("{name} was not mutated"));
    }
    let v2 = widgets(ctx, "v2")
        .get(&name)
        .await
        .map_err(|e| format!("get {name} as v2: {e}"))?;
    if v2.data["spec"]["replicas"] != json!(n) {
        return Err(format!("{name} as v2: {:?}", v2.data));
    }
    match widgets(ctx, "v1")
        .create(
            &PostParams::default(),
            &widget(&format!("bad-{n}"), json!({"forbidden": true})),
        )
        .await
    {
        Err(kube::Error::Api(e)) if e.message.contains("spec.forbidden is true") => {}
        other => return Err(format!("a forbidden Widget: {other:?}")),
    }
    widgets(ctx, "v1")
        .delete(&name, &DeleteParams::default())
        .await
        .map_err(|e| format!("delete {name}: {e}"))?;
    Ok(())
}

#[tokio::test]
async fn a_webhook_and_api_service_operator_is_called_by_the_api_server_and_its_ca_rotates_without_a_failed_call()
 {
    let ctx = TestContext::new("prov-hooks").await.unwrap();
    let own = ctx.name("hooks");
    let _provisioner = {
        let args = [
            format!("--bundle-deployment-selector={OWN_PROVISIONER_LABEL}={own}"),
            format!("--cert-lifetime-seconds={LIFETIME}"),
        ];
        tokio::task::spawn_blocking(move || start_provisioner_with("provisioner-hooks", &args))
            .await
            .unwrap()
            .unwrap()
    };
    let operator = push_manager(&registry().unwrap(), "olm-test-operator", "e2e")
        .await
        .unwrap();
    let package = ctx.name("hooks");
    let image = bundle_image(&ctx, "hooks", &bundle(&package, &operator)).await;
    let bds: Api<BundleDeployment> = Api::all(ctx.client.clone());
    let name = ctx.name("hooks");
    let mut doc = ctx.labelled(json!({
        "apiVersion": "core.rukpak.io/v1alpha1", "kind": "BundleDeployment",
        "metadata": {"name": name},
        "spec": {"provisionerClassName": "core-rukpak-io-plain",
            "config": {"namespace": ctx.namespace},
            "template": {"spec": {"provisionerClassName": "core-rukpak-io-registry",
                "source": {"type": "image", "image": {"ref": image}}}}}}));
    doc["metadata"]["labels"][OWN_PROVISIONER_LABEL] = own.clone().into();
    let bd: BundleDeployment = serde_json::from_value(doc).unwrap();
    bds.create(&PostParams::default(), &bd).await.unwrap();
    let done = wait_for(&bds, &name, "installed and healthy", WAIT, |bd| {
        condition(bd, "Installed").is_some_and(|(s, _, _)| s == "True")
            && condition(bd, "Healthy").is_some_and(|(s, _, _)| s == "True")
    })
    .await
    .unwrap();
    let installed_at = Instant::now();
    assert_eq!(
        condition(Some(&done), "Installed").unwrap().1,
        "InstallationSucceeded"
    );

    // The API server calls each webhook.
    round(&ctx, 0).await.unwrap();
    // The aggregated API answers through the API server.
    let apiservice = Api::<APIService>::all(ctx.client.clone())
        .get(&format!("v1.{READINGS_GROUP}"))
        .await
        .unwrap();
    assert!(apiservice.spec.unwrap().ca_bundle.is_some());
    let gvk = GroupVersionKind::gvk(READINGS_GROUP, "v1", "Reading");
    let readings: Api<DynamicObject> = Api::all_with(
        ctx.client.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, "readings"),
    );
    let list = readings.list(&Default::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    assert_eq!(list.items[0].metadata.name.as_deref(), Some("current"));
    // And as a user asks: the real kubectl, its discovery finding the aggregated API.
    let table = tokio::task::spawn_blocking(|| olm_e2e::helm::kubectl(&["get", "readings"]))
        .await
        .unwrap()
        .unwrap();
    assert!(
        table
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["current", "42"]),
        "{table}"
    );
    // Its certificate store is kept where bundles never go, owned by the BundleDeployment.
    let store = Api::<Secret>::namespaced(ctx.client.clone(), OLM_NAMESPACE)
        .get(&format!("{name}-certs"))
        .await
        .unwrap();
    assert_eq!(
        store.metadata.owner_references.unwrap()[0].uid,
        done.metadata.uid.clone().unwrap()
    );

    // Rotation: calls without pause until the first CA has left the bundle, a successor
    // signing the serving certificate.
    let first_ca = trusted(&ctx).await;
    assert_eq!(first_ca.len(), 1);
    let first_cert = serving(&ctx).await;
    let mut seen_two = false;
    let mut n = 1;
    let deadline = installed_at + Duration::from_secs(LIFETIME + 90);
    loop {
        round(&ctx, n)
            .await
            .unwrap_or_else(|e| panic!("a call failed during the rotation: {e}"));
        n += 1;
        let now = trusted(&ctx).await;
        seen_two |= now.len() == 2;
        if seen_two && now.len() == 1 && now != first_ca {
            assert_ne!(
                serving(&ctx).await,
                first_cert,
                "the serving certificate was issued again"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no rotation within {}s: trusted {} CA(s)",
            LIFETIME + 90,
            now.len()
        );
    }
    // And once more after it, with the new CA alone.
    round(&ctx, n).await.unwrap();

    // Removed: the webhook configurations, the APIService, the CRD (no Widget is left) and,
    // with the BundleDeployment, its certificate store.
    bds.delete(&name, &DeleteParams::default()).await.unwrap();
    wait_for_deletion(&bds, &name, WAIT).await.unwrap();
    let hooks: Api<ValidatingWebhookConfiguration> = Api::all(ctx.client.clone());
    assert!(
        hooks
            .get_opt(&format!("v{WIDGETS_GROUP}"))
            .await
            .unwrap()
            .is_none()
    );
    let apis: Api<APIService> = Api::all(ctx.client.clone());
    assert!(
        apis.get_opt(&format!("v1.{READINGS_GROUP}"))
            .await
            .unwrap()
            .is_none()
    );
    let crds: Api<CustomResourceDefinition> = Api::all(ctx.client.clone());
    wait_for_deletion(&crds, &format!("widgets.{WIDGETS_GROUP}"), WAIT)
        .await
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), OLM_NAMESPACE);
    wait_for_deletion(&secrets, &format!("{name}-certs"), WAIT)
        .await
        .unwrap();
}
