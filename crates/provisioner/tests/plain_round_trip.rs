//! Property: any set of distinct objects, written into manifest files as YAML documents or
//! JSON streams (some inside `List`s), reads back as exactly those objects, in file order.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use proptest::prelude::*;
use provisioner::bundle::Tree;
use provisioner::format::plain;
use serde_json::{Value, json};

fn name() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9-]{0,12}"
}

/// Values a manifest may hold, YAML's tricky strings among them.
fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i32>().prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
        prop::sample::select(vec![
            "yes", "no", "null", "~", "1.0", "0x1F", ": x", "- y", "#z", ""
        ])
        .prop_map(Value::from),
        "[ -~]{0,20}".prop_map(Value::from),
    ]
}

fn object() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(vec!["v1", "apps/v1", "example.com/v1alpha1"]),
        prop::sample::select(vec!["ConfigMap", "Deployment", "Widget"]),
        proptest::option::of(name()),
        name(),
        prop::collection::btree_map("[a-z]{1,6}", scalar(), 0..4),
    )
        .prop_map(|(api_version, kind, namespace, name, data)| {
            let mut metadata = json!({"name": name});
            if let Some(ns) = namespace {
                metadata["namespace"] = json!(ns);
            }
            json!({"apiVersion": api_version, "kind": kind, "metadata": metadata, "data": data})
        })
}

/// How one file is written.
#[derive(Debug, Clone, Copy)]
enum Style {
    Yaml,
    YamlList,
    Json,
}

fn write(docs: &[Value], style: Style) -> String {
    match style {
        Style::Yaml => docs
            .iter()
            .map(|d| format!("---\n{}", serde_saphyr::to_string(d).unwrap()))
            .collect(),
        Style::YamlList => {
            serde_saphyr::to_string(&json!({"apiVersion": "v1", "kind": "List", "items": docs}))
                .unwrap()
        }
        Style::Json => docs.iter().map(|d| format!("{d}\n")).collect(),
    }
}

proptest! {
    #[test]
    fn written_objects_read_back_in_file_order(
        objects in prop::collection::vec(object(), 1..12),
        files in prop::collection::vec((0usize..4, prop::sample::select(vec![Style::Yaml, Style::YamlList, Style::Json])), 12),
    ) {
        // Distinct objects only (a duplicate is refused, tested on its own).
        let mut seen = std::collections::BTreeSet::new();
        let objects: Vec<Value> = objects
            .into_iter()
            .filter(|o| seen.insert((o["apiVersion"].to_string(), o["kind"].to_string(), o["metadata"]["namespace"].to_string(), o["metadata"]["name"].to_string())))
            .collect();
        let mut by_file: Vec<Vec<Value>> = vec![Vec::new(); 4];
        for (i, o) in objects.iter().enumerate() {
            by_file[files[i].0].push(o.clone());
        }
        let mut tree = Tree::new().dir("manifests");
        let mut expected = Vec::new();
        for (f, docs) in by_file.iter().enumerate() {
            if docs.is_empty() {
                continue;
            }
            tree = tree.file(&format!("manifests/{f}.yaml"), write(docs, files[f].1));
            expected.extend(docs.iter().cloned());
        }
        let read: Vec<Value> = plain::objects(&tree)
            .unwrap()
            .into_iter()
            .map(|o| Value::Object(o.manifest))
            .collect();
        prop_assert_eq!(read, expected);
    }
}
