#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use serde_json::json;

use super::*;
use crate::object::Object;

fn serving() -> Serving {
    Serving {
        deployment: "manager".into(),
        service: "manager-service".into(),
        secret: "manager-service-cert".into(),
        namespace: "op".into(),
    }
}

fn object(v: Value) -> Object {
    Object::from_manifest(v).unwrap()
}

fn client(name: &str) -> Value {
    json!({"service": {"namespace": "op", "name": name, "port": 443}})
}

/// A webhook configuration with one webhook calling the Service and one calling another, a
/// converted CRD, an APIService, the serving Deployment (with its own volume at OLM's webhook
/// path), and the Service.
fn rendered() -> Vec<Object> {
    vec![
        object(
            json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "v.example.com"},
            "webhooks": [{"name": "a", "clientConfig": client("manager-service")},
                         {"name": "b", "clientConfig": client("someone-else")}]}),
        ),
        object(
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"conversion": {"strategy": "Webhook", "webhook": {"clientConfig": client("manager-service")}}}}),
        ),
        object(
            json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": "v1.metrics.example.com"},
            "spec": {"service": {"namespace": "op", "name": "manager-service", "port": 443}}}),
        ),
        object(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "manager", "namespace": "op"},
            "spec": {"template": {"spec": {"serviceAccountName": "runner",
                "volumes": [{"name": "certs", "secret": {"secretName": "shipped"}}, {"name": "data", "emptyDir": {}}],
                "containers": [{"name": "m", "volumeMounts": [
                    {"name": "certs", "mountPath": "/tmp/k8s-webhook-server/serving-certs"},
                    {"name": "data", "mountPath": "/data"}]}]}}}})),
        object(json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "manager-service", "namespace": "op"}, "spec": {}})),
    ]
}

fn own() -> Injection {
    Injection::Own {
        bundle: "CA-BUNDLE".into(),
        signing: "SIGNING".into(),
        issued: [(
            "op/manager-service".to_owned(),
            ("CERT".to_owned(), "KEY".to_owned()),
        )]
        .into_iter()
        .collect(),
    }
}

fn find<'a>(objects: &'a [Object], kind: &str, name: &str) -> &'a Map<String, Value> {
    &objects
        .iter()
        .find(|o| o.key.kind == kind && o.key.name == name)
        .unwrap_or_else(|| panic!("{kind} {name}"))
        .manifest
}

#[test]
fn the_own_ca_goes_into_what_calls_the_service_and_its_certificate_into_a_secret_the_deployment_mounts()
 {
    let out = inject(rendered(), &[serving()], &own());
    let b64 = STANDARD.encode("CA-BUNDLE");
    let hooks = &find(&out, "ValidatingWebhookConfiguration", "v.example.com")["webhooks"];
    assert_eq!(hooks[0]["clientConfig"]["caBundle"], json!(b64));
    assert!(
        hooks[1]["clientConfig"].get("caBundle").is_none(),
        "another's webhook is left alone"
    );
    let crd = find(&out, "CustomResourceDefinition", "widgets.example.com");
    assert_eq!(
        crd["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"],
        json!(b64)
    );
    let api = find(&out, "APIService", "v1.metrics.example.com");
    assert_eq!(api["spec"]["caBundle"], json!(b64));

    let pod = &find(&out, "Deployment", "manager")["spec"]["template"];
    assert_eq!(
        pod["metadata"]["annotations"][CA_HASH],
        json!(hex(&Sha256::digest(b"SIGNING")))
    );
    let volumes: Vec<&str> = pod["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        volumes,
        ["data", "webhook-cert", "apiservice-cert"],
        "the shipped volume at OLM's path is replaced"
    );
    assert_eq!(
        pod["spec"]["volumes"][2]["secret"],
        json!({"secretName": "manager-service-cert", "items": [
            {"key": "tls.crt", "path": "apiserver.crt"}, {"key": "tls.key", "path": "apiserver.key"}]})
    );
    assert_eq!(
        pod["spec"]["containers"][0]["volumeMounts"],
        json!([{"name": "data", "mountPath": "/data"},
               {"name": "webhook-cert", "mountPath": "/tmp/k8s-webhook-server/serving-certs"},
               {"name": "apiservice-cert", "mountPath": "/apiserver.local.config/certificates"}])
    );

    let secret = find(&out, "Secret", "manager-service-cert");
    assert_eq!(secret["type"], "kubernetes.io/tls");
    assert_eq!(
        secret["data"],
        json!({"tls.crt": STANDARD.encode("CERT"), "tls.key": STANDARD.encode("KEY"), "ca.crt": b64})
    );
    let binding = find(&out, "RoleBinding", "manager-service-cert");
    assert_eq!(binding["subjects"][0]["name"], "runner");
    assert_eq!(out.len(), rendered().len() + 3);
}

#[test]
fn cert_manager_and_service_ca_are_asked_by_annotations() {
    let out = inject(rendered(), &[serving()], &Injection::CertManager);
    for (kind, name) in [
        ("ValidatingWebhookConfiguration", "v.example.com"),
        ("CustomResourceDefinition", "widgets.example.com"),
        ("APIService", "v1.metrics.example.com"),
    ] {
        assert_eq!(
            find(&out, kind, name)["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
            "op/manager-service-cert",
            "{kind}"
        );
    }
    let certificate = find(&out, "Certificate", "manager-service-cert");
    assert_eq!(certificate["spec"]["dnsNames"][1], "manager-service.op.svc");
    assert_eq!(
        certificate["spec"]["issuerRef"]["name"],
        "manager-service-cert-selfsigned-issuer"
    );
    assert!(
        find(&out, "Issuer", "manager-service-cert-selfsigned-issuer")["spec"]["selfSigned"]
            .is_object()
    );

    let out = inject(rendered(), &[serving()], &Injection::ServiceCa);
    assert_eq!(
        find(&out, "Service", "manager-service")["metadata"]["annotations"]["service.beta.openshift.io/serving-cert-secret-name"],
        "manager-service-cert"
    );
    assert_eq!(
        find(&out, "APIService", "v1.metrics.example.com")["metadata"]["annotations"]["service.beta.openshift.io/inject-cabundle"],
        "true"
    );
    assert_eq!(out.len(), rendered().len());
    // Either way the Deployment mounts the Secret the provider fills.
    let pod = &find(&out, "Deployment", "manager")["spec"]["template"]["spec"];
    assert_eq!(
        pod["volumes"][1]["secret"]["secretName"],
        "manager-service-cert"
    );
}

#[test]
fn nothing_is_injected_without_a_provider_or_anything_serving() {
    assert_eq!(
        inject(rendered(), &[serving()], &Injection::Nothing),
        rendered()
    );
    assert_eq!(inject(rendered(), &[], &own()), rendered());
}
