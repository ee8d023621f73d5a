//! How many bundles of the real catalogs in the repository's test data
//! (crates/resolver/tests/data/fbc-samples/real: 12 packages, 179 bundles) the provisioner
//! installs, against what it installed before install modes, webhooks and APIServices
//! (AllNamespaces only, no owned APIService, no webhook): the figures docs/provisioner.md
//! reports, checked here with the provisioner's own code.
//!
//! A bundle's catalog entry says its install modes and owned APIServices
//! (`olm.csv.metadata`), not its webhooks; where the catalog carries the bundle's objects
//! (`olm.bundle.object`), the whole bundle is converted.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::path::Path;

use base64::Engine;
use provisioner::bundle::Tree;
use provisioner::format::registry::{self, csv::Csv, modes};
use provisioner::settings::Settings;
use serde_json::{Value, json};

/// Every document of every file of `dir`, recursively (YAML streams and JSON streams).
fn documents(dir: &Path) -> Vec<Value> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(documents(&path));
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        if path.extension().is_some_and(|e| e == "json") {
            out.extend(
                serde_json::Deserializer::from_str(&text)
                    .into_iter::<Value>()
                    .map(Result::unwrap),
            );
        } else {
            let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
            out.extend(docs.into_iter().filter(|d| !d.is_null()));
        }
    }
    out
}

fn property<'a>(bundle: &'a Value, type_: &str) -> Vec<&'a Value> {
    bundle["properties"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["type"] == type_)
        .map(|p| &p["value"])
        .collect()
}

/// What a bundle's catalog entry tells: installed before, installed now (`None`: the entry
/// says too little).
fn verdicts(bundle: &Value) -> Option<(bool, bool)> {
    let package = property(bundle, "olm.package")[0]["packageName"]
        .as_str()
        .unwrap()
        .to_owned();
    if let Some(meta) = property(bundle, "olm.csv.metadata").first() {
        let csv: Csv = serde_json::from_value(json!({
            "metadata": {"name": bundle["name"]},
            "spec": {"installModes": meta["installModes"], "install": {"strategy": "deployment"},
                "apiservicedefinitions": meta.get("apiServiceDefinitions").cloned().unwrap_or(json!({}))},
        }))
        .unwrap();
        let before =
            csv.supports("AllNamespaces") && csv.spec.apiservicedefinitions.owned.is_empty();
        let now = modes::decide(&csv, &format!("{package}-system"), None).is_ok();
        return Some((before, now));
    }
    let objects: Vec<Value> = property(bundle, "olm.bundle.object")
        .iter()
        .map(|o| {
            let data = base64::engine::general_purpose::STANDARD
                .decode(o["data"].as_str().unwrap())
                .unwrap();
            serde_json::from_slice(&data).unwrap()
        })
        .collect();
    if objects.is_empty() {
        return None;
    }
    let mut tree = Tree::new().file(
        registry::ANNOTATIONS,
        format!(
            "annotations:\n  {}: {package}\n",
            registry::PACKAGE_ANNOTATION
        ),
    );
    for (i, o) in objects.iter().enumerate() {
        tree = tree.file(&format!("manifests/{i}.json"), o.to_string());
    }
    let csv = objects
        .iter()
        .find(|o| o["kind"] == "ClusterServiceVersion")
        .unwrap();
    let spec = &csv["spec"];
    let supports_all = spec["installModes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["type"] == "AllNamespaces" && m["supported"] == true);
    let none = |v: &Value| v.as_array().is_none_or(Vec::is_empty);
    let before = supports_all
        && none(&spec["webhookdefinitions"])
        && none(&spec["apiservicedefinitions"]["owned"]);
    let now = registry::render(&tree, &Settings::default()).is_ok();
    Some((before, now))
}

#[test]
fn every_bundle_of_the_real_catalogs_installs_where_137_of_179_did() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../resolver/tests/data/fbc-samples/real");
    let bundles: Vec<Value> = documents(&dir)
        .into_iter()
        .filter(|d| d["schema"] == "olm.bundle")
        .collect();
    let verdicts: Vec<(String, Option<(bool, bool)>)> = bundles
        .iter()
        .map(|b| (b["name"].as_str().unwrap().to_owned(), verdicts(b)))
        .collect();
    let unknown: Vec<&String> = verdicts
        .iter()
        .filter(|(_, v)| v.is_none())
        .map(|(n, _)| n)
        .collect();
    assert!(
        unknown.is_empty(),
        "entries that say too little: {unknown:?}"
    );
    let before = verdicts
        .iter()
        .filter(|(_, v)| v.is_some_and(|v| v.0))
        .count();
    let not_now: Vec<&String> = verdicts
        .iter()
        .filter(|(_, v)| v.is_some_and(|v| !v.1))
        .map(|(n, _)| n)
        .collect();
    assert_eq!(bundles.len(), 179);
    assert_eq!(before, 137, "installed before");
    assert!(not_now.is_empty(), "not installed now: {not_now:?}");
}
