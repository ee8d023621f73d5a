//! Golden: argocd-operator v0.6.0, a real registry+v1 bundle, converts to the objects
//! operator-controller renders for it in AllNamespaces mode (its regression test data, copied
//! into tests/data/registry-v1 with its source named there): the same ClusterRoles and
//! ClusterRoleBindings under the same names with the same rules, the same ServiceAccount,
//! Deployment, Service, ConfigMap and CRDs. Ours adds the install Namespace (a
//! BundleDeployment names none; rukpak v0.16 made it too).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::collections::BTreeMap;
use std::path::Path;

use provisioner::bundle::Tree;
use provisioner::format::registry;
use serde_json::Value;

const BUNDLE: &str = "tests/data/registry-v1/argocd-operator.v0.6.0";

fn tree(dir: &Path) -> Tree {
    let mut tree = Tree::new();
    for sub in ["manifests", "metadata"] {
        for entry in std::fs::read_dir(dir.join(sub)).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            tree = tree.file(&format!("{sub}/{name}"), std::fs::read(&path).unwrap());
        }
    }
    tree
}

/// Go's typed round trip writes `creationTimestamp: null` and empty `status`es; neither is
/// part of what is applied.
fn normal(mut v: Value) -> Value {
    if let Some(map) = v.as_object_mut() {
        map.remove("status");
        if let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("creationTimestamp");
        }
    }
    v
}

fn yaml(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

fn id(v: &Value) -> String {
    format!(
        "{} {}",
        v["kind"].as_str().unwrap(),
        v["metadata"]["name"].as_str().unwrap()
    )
}

#[test]
fn argocd_converts_as_upstream_renders_it_for_all_namespaces() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(BUNDLE);
    // Upstream's regression test renders it into `argocd-system`.
    let ours: BTreeMap<String, Value> = registry::objects_in(&tree(&dir), Some("argocd-system"))
        .unwrap()
        .into_iter()
        .map(|o| {
            let v = normal(Value::Object(o.manifest));
            (id(&v), v)
        })
        .collect();

    let mut expected: BTreeMap<String, Value> = BTreeMap::new();
    for entry in std::fs::read_dir(dir.join("expected-all-namespaces")).unwrap() {
        for doc in yaml(&entry.unwrap().path()) {
            let v = normal(doc);
            expected.insert(id(&v), v);
        }
    }
    // Upstream's expected CRDs are the bundle's, unchanged.
    for entry in std::fs::read_dir(dir.join("manifests")).unwrap() {
        for doc in yaml(&entry.unwrap().path()) {
            if doc["kind"] == "CustomResourceDefinition" {
                let v = normal(doc);
                expected.insert(id(&v), v);
            }
        }
    }
    expected.insert(
        "Namespace argocd-system".into(),
        serde_json::json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "argocd-system"}}),
    );

    let names = |m: &BTreeMap<String, Value>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(names(&ours), names(&expected));
    for (key, want) in &expected {
        assert_eq!(&ours[key], want, "{key} differs from upstream's rendering");
    }
    // The two ClusterRoles: clusterPermissions as written, permissions promoted with read
    // access to namespaces; their names are upstream's (the same hash of the same rules).
    let promoted =
        &ours["ClusterRole argocd-operator.v0.-3gkm3u8zfarktdile5wekso69zs9bgzb988mhjm0y6p"];
    let last = promoted["rules"].as_array().unwrap().last().unwrap();
    assert_eq!(last["resources"], serde_json::json!(["namespaces"]));
    assert!(
        ours.keys()
            .all(|k| k.len() <= "ClusterRoleBinding ".len() + 63)
    );
}

#[test]
fn without_a_namespace_given_it_installs_into_package_system() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(BUNDLE);
    let objects = registry::objects(&tree(&dir)).unwrap();
    // argocd-operator suggests none: `<package>-system`.
    assert_eq!(
        objects[0].key.to_string(),
        "Namespace argocd-operator-system"
    );
    assert!(objects.iter().all(|o| {
        o.key
            .namespace
            .as_deref()
            .is_none_or(|n| n == "argocd-operator-system")
    }));
}
