//! Properties of a CSV's webhooks and APIServices, for any definitions a bundle may write
//! (names, types, Deployments, ports, rules, conversion CRDs, install modes drawn at random):
//! the conversion never panics; a bundle it accepts has every webhook configuration, converted
//! CRD and APIService calling a Service the bundle has, on one of that Service's ports, which
//! selects the serving Deployment's Pods and mounts its certificate; and with the
//! provisioner's own CA every one of them carries the CA bundle.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::atomic::{AtomicU32, Ordering};

use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};
use provisioner::bundle::Tree;
use provisioner::certs::{Injection, inject};
use provisioner::format::registry;
use provisioner::settings::Settings;
use serde_json::{Value, json};

/// One of `values`, each drawn as often as its weight says.
fn weighted(values: Vec<(u32, &'static str)>) -> impl Strategy<Value = &'static str> {
    let choices: Vec<_> = values.into_iter().map(|(w, v)| (w, Just(v))).collect();
    prop::strategy::Union::new_weighted(choices)
}

/// A webhook definition: mostly valid (so that many bundles are accepted), sometimes each
/// thing a bundle may get wrong.
fn hook() -> impl Strategy<Value = Value> {
    (
        weighted(vec![
            (3, "ValidatingAdmissionWebhook"),
            (3, "MutatingAdmissionWebhook"),
            (2, "ConversionWebhook"),
            (1, "Bogus"),
        ]),
        prop_oneof![
            8 => "[a-z]{1,8}\\.example\\.com",
            1 => prop::sample::select(vec!["m.example.com-", "Bad_Name", ""]).prop_map(str::to_owned),
        ],
        weighted(vec![(6, "manager"), (2, "other"), (1, "missing")]),
        prop_oneof![
            4 => Just(None),
            8 => (1i32..65536).prop_map(Some),
            1 => Just(Some(0)),
            1 => (65536i32..70000).prop_map(Some),
        ],
        prop::option::of(prop_oneof![
            (1i32..65536).prop_map(Value::from),
            Just(json!("https"))
        ]),
        weighted(vec![
            (8, "example.com"),
            (1, "*"),
            (1, "core.rukpak.io"),
            (1, "admissionregistration.k8s.io"),
        ]),
        weighted(vec![(8, "widgets"), (1, "validatingwebhookconfigurations"), (1, "*")]),
        prop::collection::vec(
            weighted(vec![(4, "widgets.example.com"), (1, "gadgets.example.com")]),
            0..2,
        ),
    )
        .prop_map(|(type_, name, deployment, port, target, group, resource, crds)| {
            let mut h = json!({"type": type_, "generateName": name, "deploymentName": deployment,
                "sideEffects": "None", "admissionReviewVersions": ["v1"],
                "rules": [{"apiGroups": [group], "apiVersions": ["v1"], "operations": ["CREATE"],
                    "resources": [resource]}],
                "conversionCRDs": crds});
            if let Some(p) = port {
                h["containerPort"] = json!(p);
            }
            if let Some(t) = target {
                h["targetPort"] = t;
            }
            h
        })
}

fn bundle(hooks: Vec<Value>, apis: Vec<(String, i32)>, modes: Vec<&'static str>) -> Tree {
    let install_modes: Vec<Value> = modes
        .iter()
        .map(|m| json!({"type": m, "supported": true}))
        .collect();
    let owned: Vec<Value> = apis
        .iter()
        .map(|(d, p)| json!({"group": "metrics.example.com", "version": "v1", "deploymentName": d, "containerPort": p}))
        .collect();
    let deployment = |name: &str| {
        json!({"name": name, "spec": {"selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "i"}]}}}})
    };
    let csv = json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": "op.v1.0.0"},
        "spec": {"installModes": install_modes,
            "customresourcedefinitions": {"owned": [{"name": "widgets.example.com"}]},
            "webhookdefinitions": hooks,
            "apiservicedefinitions": {"owned": owned},
            "install": {"strategy": "deployment", "spec": {"deployments": [deployment("manager"), deployment("other")]}}}});
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"}, "spec": {"group": "example.com"}});
    Tree::new()
        .file(
            "metadata/annotations.yaml",
            "annotations:\n  operators.operatorframework.io.bundle.package.v1: op\n",
        )
        .file("manifests/csv.json", csv.to_string())
        .file("manifests/crd.json", crd.to_string())
}

/// The property for one drawn bundle: `Ok(true)` when it was accepted with something to
/// serve (webhooks or APIServices) and every one of them checked out.
fn check(
    hooks: Vec<Value>,
    apis: Vec<(String, i32)>,
    modes: Vec<&'static str>,
) -> Result<bool, TestCaseError> {
    let Ok(rendered) = registry::render(&bundle(hooks, apis, modes), &Settings::default()) else {
        return Ok(false);
    };
    let injection = Injection::Own {
        bundle: "CA".into(),
        signing: "CA".into(),
        issued: rendered
            .serving
            .iter()
            .map(|s| {
                (
                    format!("{}/{}", s.namespace, s.service),
                    ("C".into(), "K".into()),
                )
            })
            .collect(),
    };
    let objects = inject(rendered.objects, &rendered.serving, &injection);
    let service = |config: &Value| -> (String, i64) {
        let s = &config["service"];
        let name = s["name"].as_str().unwrap().to_owned();
        let port = s["port"].as_i64().unwrap();
        let found = objects
            .iter()
            .find(|o| o.key.kind == "Service" && o.key.name == name);
        let found = found.unwrap_or_else(|| panic!("no Service {name}"));
        let ports: Vec<i64> = found.manifest["spec"]["ports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["port"].as_i64().unwrap())
            .collect();
        assert!(
            ports.contains(&port),
            "{name} has no port {port}: {ports:?}"
        );
        assert!((1..=65535).contains(&port));
        (name, port)
    };
    for o in &objects {
        match o.key.kind.as_str() {
            "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration" => {
                for h in o.manifest["webhooks"].as_array().unwrap() {
                    service(&h["clientConfig"]);
                    prop_assert!(h["clientConfig"]["caBundle"].is_string());
                }
            }
            "CustomResourceDefinition" if o.manifest["spec"].get("conversion").is_some() => {
                let config = &o.manifest["spec"]["conversion"]["webhook"]["clientConfig"];
                service(config);
                prop_assert!(config["caBundle"].is_string());
            }
            "APIService" => {
                service(&o.manifest["spec"]);
                prop_assert!(o.manifest["spec"]["caBundle"].is_string());
            }
            _ => {}
        }
    }
    for s in &rendered.serving {
        let d = objects
            .iter()
            .find(|o| o.key.kind == "Deployment" && o.key.name == s.deployment)
            .unwrap();
        let volumes = d.manifest["spec"]["template"]["spec"]["volumes"]
            .as_array()
            .unwrap();
        prop_assert!(
            volumes
                .iter()
                .any(|v| v["secret"]["secretName"] == s.secret.as_str())
        );
        let svc = objects
            .iter()
            .find(|o| o.key.kind == "Service" && o.key.name == s.service)
            .unwrap();
        prop_assert_eq!(
            &svc.manifest["spec"]["selector"],
            &json!({"app": s.deployment})
        );
    }
    Ok(!rendered.serving.is_empty())
}

/// Draws bundles (5,000 by default; PROPTEST_CASES asks for more, a longer fuzzing run) and
/// checks the property on each; at least one in twenty must be accepted with webhooks or
/// APIServices, or the property would hold of a conversion that refused them all.
#[test]
fn accepted_webhooks_call_services_the_bundle_has() {
    let cases: u32 = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(5000);
    let strategy = (
        prop::collection::vec(hook(), 0..5),
        prop::collection::vec(
            (
                prop::sample::select(vec!["manager".to_owned(), "missing".to_owned()]),
                0i32..10000,
            ),
            0..3,
        ),
        prop::sample::subsequence(
            vec![
                "OwnNamespace",
                "SingleNamespace",
                "MultiNamespace",
                "AllNamespaces",
            ],
            1..4,
        ),
    );
    let served = AtomicU32::new(0);
    TestRunner::new(ProptestConfig::with_cases(cases))
        .run(&strategy, |(hooks, apis, modes)| {
            if check(hooks, apis, modes)? {
                served.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        })
        .unwrap();
    let served = served.into_inner();
    assert!(
        served >= cases / 20,
        "only {served} of {cases} bundles served anything"
    );
}
