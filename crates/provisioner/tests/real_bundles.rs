//! Real registry+v1 bundles of public operators (tests/data/registry-v1/real, sources in its
//! README): operators that support only OwnNamespace (or Single/MultiNamespace), that serve
//! webhooks, that own APIServices. Each converts, installed as nothing asked, and gets its
//! certificates from the provisioner's own CA: its own namespace watched when it cannot watch
//! all; every webhook configuration, converted CRD and APIService carrying the CA bundle and
//! calling a Service of the bundle that selects the serving Deployment's Pods; that Deployment
//! mounting the certificate's Secret where OLM mounts it. (The e2e test `real_bundles` applies
//! them to a real cluster.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use provisioner::certs::issue::Rcgen;
use provisioner::certs::rotation::advance;
use provisioner::certs::{Injection, inject};
use provisioner::format::registry;
use provisioner::object::Object;
use provisioner::settings::Settings;
use serde_json::Value;

const REAL: &str = "tests/data/registry-v1/real";

fn bundles() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(REAL);
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    out.sort();
    out
}

/// The bundle's objects, as installed with nothing asked and the provisioner's own CA.
fn installed(dir: &Path) -> (Vec<Object>, Vec<registry::Serving>, String) {
    let rendered = registry::render(&common::bundle_tree(dir), &Settings::default())
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let (store, _) = advance(None, &rendered.serving, 1_800_000_000, 3600, &mut Rcgen).unwrap();
    let injection = Injection::own(&store);
    let objects = inject(rendered.objects, &rendered.serving, &injection);
    (objects, rendered.serving, store.bundle())
}

/// The Service a `clientConfig` (or an APIService's spec) calls.
fn called(config: &Value) -> (String, String) {
    let s = &config["service"];
    (
        s["namespace"].as_str().unwrap().to_owned(),
        s["name"].as_str().unwrap().to_owned(),
    )
}

#[test]
fn real_bundles_convert_with_their_install_modes_webhooks_and_api_services_wired() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (mut watching_own, mut with_webhooks, mut with_api_services) = (0, 0, 0);
    let bundles = bundles();
    for dir in &bundles {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let (objects, serving, bundle) = installed(dir);
        let ca = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &bundle);
        let by_key: BTreeMap<(String, String, String), &Object> = objects
            .iter()
            .map(|o| {
                (
                    (
                        o.key.kind.clone(),
                        o.key.namespace.clone().unwrap_or_default(),
                        o.key.name.clone(),
                    ),
                    o,
                )
            })
            .collect();
        let service = |(ns, svc): (String, String)| {
            let found = by_key.get(&("Service".to_owned(), ns.clone(), svc.clone()));
            assert!(found.is_some(), "{name}: no Service {ns}/{svc}");
        };
        let deployments: Vec<&Object> = objects
            .iter()
            .filter(|o| o.key.kind == "Deployment")
            .collect();
        let install = deployments[0].key.namespace.clone().unwrap();
        let targets = deployments[0].manifest["spec"]["template"]["metadata"]["annotations"]
            ["olm.targetNamespaces"]
            .as_str()
            .unwrap()
            .to_owned();
        if targets == install {
            watching_own += 1;
        } else {
            assert_eq!(targets, "", "{name}: watches all namespaces or its own");
        }
        let mut hooks = 0;
        for o in &objects {
            match o.key.kind.as_str() {
                "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration" => {
                    for hook in o.manifest["webhooks"].as_array().unwrap() {
                        assert_eq!(
                            hook["clientConfig"]["caBundle"],
                            ca.as_str(),
                            "{name}: {}",
                            o.key
                        );
                        service(called(&hook["clientConfig"]));
                        hooks += 1;
                    }
                }
                "CustomResourceDefinition" => {
                    let conversion = &o.manifest["spec"]["conversion"];
                    if conversion["strategy"] == "Webhook" {
                        let config = &conversion["webhook"]["clientConfig"];
                        assert_eq!(config["caBundle"], ca.as_str(), "{name}: {}", o.key);
                        service(called(config));
                        hooks += 1;
                    }
                }
                "APIService" => {
                    assert_eq!(
                        o.manifest["spec"]["caBundle"],
                        ca.as_str(),
                        "{name}: {}",
                        o.key
                    );
                    service(called(&o.manifest["spec"]));
                    with_api_services += 1;
                }
                _ => {}
            }
        }
        if hooks > 0 {
            with_webhooks += 1;
        }
        for s in &serving {
            let d = by_key[&(
                "Deployment".to_owned(),
                s.namespace.clone(),
                s.deployment.clone(),
            )];
            let volumes = d.manifest["spec"]["template"]["spec"]["volumes"]
                .as_array()
                .unwrap();
            assert!(
                volumes.iter().any(|v| v["name"] == "webhook-cert"
                    && v["secret"]["secretName"] == s.secret.as_str()),
                "{name}: {} mounts its certificate",
                s.deployment
            );
            assert!(by_key.contains_key(&(
                "Secret".to_owned(),
                s.namespace.clone(),
                s.secret.clone()
            )));
        }
    }
    assert!(bundles.len() >= 10, "{} real bundles", bundles.len());
    assert!(
        watching_own >= 4,
        "{watching_own} watch only their own namespace"
    );
    assert!(with_webhooks >= 4, "{with_webhooks} have webhooks");
    assert!(with_api_services >= 1, "{with_api_services} APIServices");
}
