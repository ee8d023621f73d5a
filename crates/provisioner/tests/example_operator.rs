//! The demo's example-operator bundles (config/samples/example-operator) are registry+v1
//! bundles the conversion accepts, giving what its README says: the suggested install
//! Namespace, the ServiceAccount, a ClusterRole and binding from `clusterPermissions`, the
//! CRD, the ConfigMaps in the install namespace, and the Deployment; 0.2.0 without the legacy
//! ConfigMap, its CRD unchanged (so the upgrade passes CRD upgrade safety).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::path::Path;

use provisioner::crd_safety::check;
use provisioner::format::registry;
use provisioner::object::Object;
use serde_json::Value;

fn objects(version: &str) -> Vec<Object> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../config/samples/example-operator")
        .join(format!("bundle-{version}"));
    registry::objects(&common::bundle_tree(&dir)).unwrap()
}

fn keys(objects: &[Object]) -> Vec<String> {
    let mut keys: Vec<String> = objects.iter().map(|o| o.key.to_string()).collect();
    keys.sort();
    keys
}

fn crd(objects: &[Object]) -> Value {
    let found = objects
        .iter()
        .find(|o| o.key.kind == "CustomResourceDefinition")
        .unwrap();
    Value::Object(found.manifest.clone())
}

#[test]
fn the_example_operator_bundles_convert_as_their_readme_says() {
    let v1 = objects("0.1.0");
    let keys1 = keys(&v1);
    for expected in [
        "Namespace example-operator-system",
        "ServiceAccount example-operator-system/example-operator",
        "Deployment.apps example-operator-system/example-operator",
        "ConfigMap example-operator-system/example-operator-settings",
        "ConfigMap example-operator-system/example-operator-legacy",
        "CustomResourceDefinition.apiextensions.k8s.io examples.example.olm-rs.io",
    ] {
        assert!(
            keys1.contains(&expected.to_owned()),
            "{expected} not in {keys1:#?}"
        );
    }
    for kind in ["ClusterRole.", "ClusterRoleBinding."] {
        assert_eq!(
            keys1.iter().filter(|k| k.starts_with(kind)).count(),
            1,
            "{keys1:#?}"
        );
    }
    let v2 = objects("0.2.0");
    assert!(!keys(&v2).iter().any(|k| k.contains("legacy")));
    assert!(check(&crd(&v1), &crd(&v2)).is_empty());
}
