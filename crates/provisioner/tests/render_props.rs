//! Properties of what the provisioner reads of charts and kustomizations, which their authors
//! control (a template prints whatever it likes): any objects a tool prints are read back
//! exactly (round trip, with Helm's `# Source:` comments between them); the remote-base check
//! of a bundle's kustomizations agrees with the entries' own check (a second path); and any
//! bytes at all, deeply nested YAML included, are read or refused on a 2 MiB stack (a tokio
//! worker's) without a panic.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};
use provisioner::bundle::Tree;
use provisioner::format::{helm, kustomize, rendered};
use serde_json::{Value, json};

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(default)
}

/// Runs `work` on a thread with a tokio worker's stack (2 MiB).
fn on_small_stack(work: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(work)
        .unwrap()
        .join()
        .unwrap();
}

/// A value a template could print: strings of any characters (YAML's special ones too),
/// numbers, booleans, lists and maps, a few levels deep.
fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        any::<String>().prop_map(Value::from),
        "[-:#{}\\[\\],&*!|>'\"%@` a-z0-9]{0,12}".prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
        Just(Value::Null),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-zA-Z0-9_.-]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Objects with distinct keys.
fn objects() -> impl Strategy<Value = Vec<Value>> {
    prop::collection::vec(
        (
            prop::sample::select(vec![
                ("v1", "ConfigMap"),
                ("apps/v1", "Deployment"),
                ("example.com/v1", "Widget"),
            ]),
            prop::option::of("[a-z]{1,6}"),
            value(),
        ),
        1..6,
    )
    .prop_map(|drawn| {
        drawn
            .into_iter()
            .enumerate()
            .map(|(i, ((api_version, kind), namespace, data))| {
                let mut meta = json!({"name": format!("o{i}")});
                if let Some(ns) = namespace {
                    meta["namespace"] = ns.into();
                }
                json!({"apiVersion": api_version, "kind": kind, "metadata": meta, "data": data})
            })
            .collect()
    })
}

#[test]
fn what_a_tool_prints_is_read_back_exactly() {
    let check = |objects: Vec<Value>| -> Result<(), TestCaseError> {
        let mut output = String::new();
        for (i, o) in objects.iter().enumerate() {
            output.push_str(&format!("---\n# Source: chart/templates/t{i}.yaml\n"));
            output.push_str(&serde_saphyr::to_string(o).unwrap());
        }
        let read = rendered::objects(output.as_bytes())
            .map_err(|e| TestCaseError::fail(format!("{e}\n{output}")))?;
        prop_assert_eq!(read.len(), objects.len());
        for (got, want) in read.iter().zip(&objects) {
            prop_assert_eq!(&Value::Object(got.manifest.clone()), want);
        }
        Ok(())
    };
    on_small_stack(move || {
        TestRunner::new(ProptestConfig::with_cases(cases(2000)))
            .run(&objects(), check)
            .unwrap();
    });
}

/// A kustomization reference: local paths (some that look like hosts), and remote ones.
fn reference() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "(\\.\\./){0,2}[a-z]{1,6}(/[a-z]{1,6}){0,2}(\\.yaml)?",
        1 => "github/[a-z]{1,6}",
        1 => "https://[a-z]{1,8}\\.com/[a-z]{1,6}\\.yaml",
        1 => "github\\.com/[a-z]{1,6}/[a-z]{1,6}(/[a-z]{1,6})?\\?ref=v[0-9]",
        1 => "git@[a-z]{1,6}\\.com:[a-z]{1,6}/[a-z]{1,6}\\.git",
        1 => "[a-z]{1,6}\\.com/[a-z]{1,6}\\.git//[a-z]{1,6}",
    ]
}

#[test]
fn the_remote_check_of_a_bundle_agrees_with_its_entries() {
    let fields = [
        "resources",
        "bases",
        "components",
        "generators",
        "transformers",
        "crds",
    ];
    let strategy = prop::collection::vec(
        (
            prop::sample::select(vec!["", "base", "overlays/prod", "components/x"]),
            prop::sample::select(fields.to_vec()),
            prop::collection::vec(reference(), 0..4),
        ),
        1..4,
    );
    on_small_stack(move || {
        TestRunner::new(ProptestConfig::with_cases(cases(2000)))
            .run(&strategy, |files| {
                let mut tree = Tree::new();
                let mut any_remote = false;
                for (dir, field, entries) in &files {
                    any_remote |= entries.iter().any(|e| kustomize::is_remote(e));
                    let path = if dir.is_empty() {
                        "kustomization.yaml".to_owned()
                    } else {
                        format!("{dir}/kustomization.yaml")
                    };
                    // Later files of the same directory replace earlier ones: count what stays.
                    let doc = json!({ *field: entries });
                    tree = tree.file(&path, serde_saphyr::to_string(&doc).unwrap());
                }
                let kept_remote = tree.files().any(|(_, content)| {
                    let doc: Value =
                        serde_saphyr::from_str(std::str::from_utf8(content).unwrap()).unwrap();
                    doc.as_object()
                        .into_iter()
                        .flat_map(|m| m.values())
                        .flat_map(|v| v.as_array().cloned().unwrap_or_default())
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .any(|e| kustomize::is_remote(&e))
                });
                prop_assert!(any_remote || !kept_remote);
                let found = kustomize::remote(&tree);
                prop_assert_eq!(found.is_some(), kept_remote, "{:?}", found);
                if let Some(refused) = found {
                    prop_assert!(refused.message.contains("is remote"));
                }
                Ok(())
            })
            .unwrap();
    });
}

#[test]
fn any_bytes_are_read_or_refused_without_a_panic() {
    on_small_stack(|| {
        TestRunner::new(ProptestConfig::with_cases(cases(3000)))
            .run(&prop::collection::vec(any::<u8>(), 0..512), |bytes| {
                let _ = rendered::objects(&bytes);
                let tree = Tree::new().file("kustomization.yaml", bytes.clone());
                let _ = kustomize::remote(&tree);
                let text = String::from_utf8_lossy(&bytes).into_owned();
                let names = [(
                    "/tmp/x/values-0.yaml".to_owned(),
                    "spec.config.values".to_owned(),
                )];
                let _ = helm::refusal(&text, &names);
                Ok(())
            })
            .unwrap();
    });
}

#[test]
fn deeply_nested_output_is_refused_within_a_small_stack() {
    on_small_stack(|| {
        // A template can print this in one line of Go template: 100,000 nested lists.
        let output = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: deep\ndata:\n  x: {}1{}\n",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        assert!(rendered::objects(output.as_bytes()).is_err());
        let block = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: deep\ndata:\n{}x\n",
            "- ".repeat(100_000)
        );
        assert!(rendered::objects(block.as_bytes()).is_err());
        let tree = Tree::new().file(
            "kustomization.yaml",
            format!("resources: {}\n", "[".repeat(100_000)),
        );
        assert_eq!(kustomize::remote(&tree), None);
    });
}
