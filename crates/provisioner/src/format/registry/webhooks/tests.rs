#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use serde_json::{Value, json};

use super::*;

/// A CSV of one Deployment `manager`, supporting `modes`, with `hooks` and owning `owned` CRDs.
fn csv(modes: &[&str], hooks: Value, owned: &[&str]) -> Csv {
    let modes: Vec<Value> = modes
        .iter()
        .map(|m| json!({"type": m, "supported": true}))
        .collect();
    let owned: Vec<Value> = owned.iter().map(|n| json!({"name": n})).collect();
    serde_json::from_value(json!({
        "metadata": {"name": "op.v1.0.0"},
        "spec": {
            "installModes": modes,
            "install": {"strategy": "deployment", "spec": {"deployments": [
                {"name": "manager", "spec": {"selector": {"matchLabels": {"app": "op"}},
                    "template": {"spec": {"containers": [{"name": "m", "image": "i"}]}}}}
            ]}},
            "webhookdefinitions": hooks,
            "customresourcedefinitions": {"owned": owned},
        }
    }))
    .unwrap()
}

fn hook(type_: &str, name: &str) -> Value {
    json!({"type": type_, "generateName": name, "deploymentName": "manager",
        "containerPort": 443, "targetPort": 9443, "sideEffects": "None",
        "admissionReviewVersions": ["v1"], "failurePolicy": "Fail",
        "webhookPath": format!("/{name}"),
        "rules": [{"apiGroups": ["example.com"], "apiVersions": ["v1"],
            "operations": ["CREATE"], "resources": ["widgets"]}]})
}

fn problems(csv: &Csv) -> Vec<String> {
    match check(csv) {
        Ok(()) => Vec::new(),
        Err(RegistryError::InvalidWebhooks(p)) => p,
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn valid_webhooks_pass_and_each_rule_upstream_has_refuses() {
    let ok = csv(
        &["AllNamespaces"],
        json!([
            hook(VALIDATING, "v.example.com"),
            hook(MUTATING, "m.example.com")
        ]),
        &[],
    );
    assert!(problems(&ok).is_empty());

    let mut dangling = hook(VALIDATING, "v.example.com");
    dangling["deploymentName"] = json!("nowhere");
    assert_eq!(
        problems(&csv(&["AllNamespaces"], json!([dangling]), &[])),
        [
            "webhook of type 'ValidatingAdmissionWebhook' with name 'v.example.com' references non-existent deployment 'nowhere'"
        ]
    );
    let twice = json!([
        hook(VALIDATING, "v.example.com"),
        hook(VALIDATING, "v.example.com")
    ]);
    assert_eq!(
        problems(&csv(&["AllNamespaces"], twice, &[])),
        ["duplicate webhook 'v.example.com' of type 'ValidatingAdmissionWebhook'"]
    );
    let bad_name = problems(&csv(
        &["AllNamespaces"],
        json!([hook(MUTATING, "Bad_Name")]),
        &[],
    ));
    assert!(
        bad_name[0]
            .starts_with("webhook of type 'MutatingAdmissionWebhook' has invalid name 'Bad_Name'"),
        "{bad_name:?}"
    );

    let mut ours = hook(VALIDATING, "v.example.com");
    ours["rules"] = json!([{"apiGroups": ["core.rukpak.io"], "resources": ["bundledeployments"]},
        {"apiGroups": ["admissionregistration.k8s.io"], "resources": ["ValidatingWebhookConfigurations"]}]);
    assert_eq!(
        problems(&csv(&["AllNamespaces"], json!([ours]), &[])),
        [
            "webhook \"v.example.com\" contains forbidden rule: admission webhook rules cannot reference API group \"core.rukpak.io\"",
            "webhook \"v.example.com\" contains forbidden rule: admission webhook rules cannot reference resource \"ValidatingWebhookConfigurations\" for API group \"admissionregistration.k8s.io\"",
        ]
    );
}

#[test]
fn conversion_webhooks_need_all_namespaces_alone_and_owned_crds_each_converted_once() {
    let mut conv = hook(CONVERSION, "c.example.com");
    conv["conversionCRDs"] = json!(["widgets.example.com"]);
    assert!(
        problems(&csv(
            &["AllNamespaces"],
            json!([conv.clone()]),
            &["widgets.example.com"]
        ))
        .is_empty()
    );
    assert_eq!(
        problems(&csv(
            &["AllNamespaces", "OwnNamespace"],
            json!([conv.clone()]),
            &["widgets.example.com"]
        )),
        [
            "bundle contains conversion webhook \"c.example.com\" and supports install modes [AllNamespaces OwnNamespace] - conversion webhooks are only supported for bundles that only support AllNamespaces install mode"
        ]
    );
    assert_eq!(
        problems(&csv(&["AllNamespaces"], json!([conv.clone()]), &[])),
        [
            "conversion webhook 'c.example.com' references custom resource definition 'widgets.example.com' not owned bundle"
        ]
    );
    let mut other = conv.clone();
    other["generateName"] = json!("b.example.com");
    assert_eq!(
        problems(&csv(
            &["AllNamespaces"],
            json!([conv, other]),
            &["widgets.example.com"]
        )),
        [
            "conversion webhooks [b.example.com,c.example.com] reference same custom resource definition 'widgets.example.com'"
        ]
    );
}

#[test]
fn admission_webhooks_call_the_service_and_see_only_the_watched_namespaces() {
    let c = csv(
        &["AllNamespaces", "SingleNamespace"],
        json!([hook(VALIDATING, "v.example.com-")]),
        &[],
    );
    let all = configurations(&c, "op-system", &Mode::All);
    assert_eq!(all.len(), 1);
    let o = &all[0];
    assert_eq!(o.key.kind, "ValidatingWebhookConfiguration");
    assert_eq!(o.key.name, "v.example.com", "the trailing dash is dropped");
    assert_eq!(o.key.namespace, None);
    let w = &o.manifest["webhooks"][0];
    assert_eq!(
        w["clientConfig"],
        json!({"service": {"namespace": "op-system", "name": "manager-service", "port": 443, "path": "/v.example.com-"}})
    );
    assert!(w.get("namespaceSelector").is_none());
    let single = configurations(&c, "op-system", &Mode::Single("team".into()));
    assert_eq!(
        single[0].manifest["webhooks"][0]["namespaceSelector"],
        json!({"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team"]}]})
    );
}

#[test]
fn a_converted_crd_calls_its_webhook_unless_it_keeps_unknown_fields() {
    let mut conv = hook(CONVERSION, "c.example.com");
    conv["conversionCRDs"] = json!(["widgets.example.com"]);
    conv.as_object_mut().unwrap().remove("webhookPath");
    let c = csv(&["AllNamespaces"], json!([conv]), &["widgets.example.com"]);
    let crd = |preserve: bool| {
        Object::from_manifest(json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"}, "spec": {"group": "example.com", "preserveUnknownFields": preserve}}))
        .unwrap()
    };
    let out = with_conversion(&c, "op-system", vec![crd(false)]).unwrap();
    assert_eq!(
        out[0].manifest["spec"]["conversion"],
        json!({"strategy": "Webhook", "webhook": {
            "clientConfig": {"service": {"namespace": "op-system", "name": "manager-service", "port": 443, "path": "/"}},
            "conversionReviewVersions": ["v1"]}})
    );
    let refused = with_conversion(&c, "op-system", vec![crd(true)]).unwrap_err();
    assert!(
        refused.to_string().contains("preserveUnknownFields"),
        "{refused}"
    );
}

#[test]
fn ports_a_service_cannot_have_are_refused() {
    let mut wide = hook(VALIDATING, "v.example.com");
    wide["containerPort"] = json!(70000);
    wide["targetPort"] = json!(0);
    assert_eq!(
        problems(&csv(&["AllNamespaces"], json!([wide]), &[])),
        [
            "webhook 'v.example.com' has containerPort 70000: a port is 1 to 65535 (0 or none: 443)",
            "webhook 'v.example.com' has targetPort 0: a port is 1 to 65535",
        ]
    );
}
