//! What the provisioner holds of bundles, in memory (a measurement for docs/performance.md, not
//! a test): argocd-operator v0.6.0's registry+v1 bundle (1.3 MB, its CRDs above all) read into
//! objects and held 10 and 50 times, as parsed objects (what the provisioner held before issue
//! 36) and as compact text (what it holds now), and a 60 MiB JSON bundle parsed (what the unpack
//! budget now refuses). Each figure is the rise of this process's resident memory.
//!
//! ```text
//! cargo build --release -p provisioner --example held_memory
//! for way in parsed text; do for n in 10 50; do target/release/examples/held_memory $way $n; done; done
//! target/release/examples/held_memory huge
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // a measurement

use std::path::Path;

use provisioner::bundle::Tree;
use provisioner::format::{plain, registry};
use provisioner::object::{Object, Stored};

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

fn tree_of(dir: &Path) -> Tree {
    let mut tree = Tree::new();
    for sub in ["manifests", "metadata"] {
        for entry in std::fs::read_dir(dir.join(sub)).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            tree = tree.file(
                &format!("{sub}/{name}"),
                std::fs::read(entry.path()).unwrap(),
            );
        }
    }
    tree
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (what, copies) = match args.as_slice() {
        [what, copies] => (what.as_str(), copies.parse::<usize>().unwrap()),
        [what] => (what.as_str(), 1),
        _ => ("text", 10),
    };
    let dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/registry-v1/argocd-operator.v0.6.0");
    let tree = tree_of(&dir);
    let start = rss_kib();
    match what {
        // Each process measures one way of holding, so that memory freed by another does not
        // hide in the figure.
        "parsed" => {
            let held: Vec<Vec<Object>> = (0..copies)
                .map(|_| registry::objects(&tree).unwrap())
                .collect();
            println!(
                "{copies} argocd-operator bundles ({} bytes of files each) held as parsed objects: +{} MiB",
                tree.bytes(),
                rss_kib().saturating_sub(start) / 1024
            );
            drop(held);
        }
        "text" => {
            let held: Vec<Vec<Stored>> = (0..copies)
                .map(|_| {
                    registry::objects(&tree)
                        .unwrap()
                        .iter()
                        .map(Stored::of)
                        .collect()
                })
                .collect();
            let bytes: u64 = held.iter().flatten().map(Stored::bytes).sum();
            println!(
                "{copies} argocd-operator bundles held as compact text: +{} MiB (the text: {} MiB)",
                rss_kib().saturating_sub(start) / 1024,
                bytes >> 20
            );
        }
        _ => {
            let one = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"ns"},"data":{"k":"v"}}"#;
            let mut array = String::from("[");
            while array.len() < 60 << 20 {
                if array.len() > 1 {
                    array.push(',');
                }
                array.push_str(one);
            }
            array.push(']');
            let huge = Tree::new().file("manifests/all.json", array.into_bytes());
            let start = rss_kib();
            let objects = plain::objects(&huge);
            println!(
                "a 60 MiB JSON bundle parsed into objects: +{} MiB ({} objects)",
                rss_kib().saturating_sub(start) / 1024,
                objects.map(|o| o.len()).unwrap_or(0)
            );
        }
    }
}
