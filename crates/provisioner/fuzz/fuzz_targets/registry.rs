//! Any bytes as the ClusterServiceVersion file of a registry+v1 bundle (beside a CRD and its
//! package annotation): never a panic; and when it converts, the objects agree with each other
//! and with a second path: every namespaced object is in the install Namespace (the first
//! object), every ClusterRoleBinding binds a ClusterRole of the output, and the objects written back as a plain+v0 bundle read as the same objects.
#![no_main]

use libfuzzer_sys::fuzz_target;
use provisioner::bundle::Tree;
use provisioner::format::{plain, registry};

const CRD: &str = r#"{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "widgets.example.com"}}"#;

fuzz_target!(|data: &[u8]| {
    let tree = Tree::new()
        .file(
            registry::ANNOTATIONS,
            "annotations:\n  operators.operatorframework.io.bundle.package.v1: widget\n",
        )
        .file("manifests/a.yaml", data)
        .file("manifests/crd.json", CRD);
    let Ok(objects) = registry::objects(&tree) else {
        return;
    };
    let namespace = &objects[0];
    assert_eq!(namespace.key.kind, "Namespace");
    for o in &objects {
        if let Some(ns) = &o.key.namespace {
            assert_eq!(ns, &namespace.key.name, "{}", o.key);
        }
        if o.key.kind == "ClusterRoleBinding" {
            let role = o.manifest["roleRef"]["name"].as_str().unwrap_or_default();
            assert!(
                objects
                    .iter()
                    .any(|r| r.key.kind == "ClusterRole" && r.key.name == role),
                "{} binds no ClusterRole of the bundle",
                o.key
            );
        }
    }
    let stream: String = objects
        .iter()
        .map(|o| format!("{}\n", serde_json::Value::Object(o.manifest.clone())))
        .collect();
    let again = plain::objects(&Tree::new().file("manifests/all.json", stream))
        .unwrap_or_else(|e| panic!("the objects written back do not read: {e}"));
    assert_eq!(again, objects);
});
