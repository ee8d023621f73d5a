//! Resolver benchmarks over a synthetic catalog calibrated to real public catalogs (300
//! packages, 5,000 bundles, about 25 MB of FBC): parse, validate, render, index, resolve 1 / 50
//! / 500 requests, and re-resolve after one bundle is added; over the 12 real published
//! packages of `tests/data/fbc-samples/real` (3.4 MB, mostly YAML): parse, validate, render;
//! and the four problems of the paired comparison (index + resolve of 50 and 500 requests on
//! 300 and 600 packages); and hostile YAML files (issue 36). Figures go to docs/performance.md.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // benchmark code

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use olm_resolver::fbc::{Fbc, load_files, validate::validate};
use olm_resolver::resolve::{CatalogContent, CatalogInput, CatalogMeta, Index, Request, resolve};
use olm_resolver::synth::{SynthConfig, generate, package_name};

fn catalog() -> (Vec<u8>, Fbc) {
    let bytes = generate(&SynthConfig::default());
    let fbc = load_files([("synth.json", &bytes)]).unwrap();
    assert!(validate(&fbc).is_empty());
    (bytes, fbc)
}

/// `n` requests: every package once in dependency order, then the first packages again with a
/// version range, so 500 requests over 300 packages still resolve.
fn requests(n: usize, packages: usize) -> Vec<Request> {
    (0..n)
        .map(|i| Request {
            package_name: package_name(i % packages),
            version: (i >= packages).then(|| ">=1.0.0".to_owned()),
            ..Default::default()
        })
        .collect()
}

fn input(fbc: Fbc) -> Vec<CatalogInput> {
    vec![CatalogInput {
        name: "synthetic".into(),
        priority: 0,
        labels: BTreeMap::new(),
        fbc: Arc::new(fbc),
    }]
}

fn benches(c: &mut Criterion) {
    let (bytes, fbc) = catalog();
    println!(
        "synthetic catalog: {} bytes, {} packages, {} bundles",
        bytes.len(),
        fbc.packages.len(),
        fbc.bundles.len()
    );

    let mut g = c.benchmark_group("catalog");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    g.throughput(Throughput::Bytes(bytes.len() as u64));
    g.bench_function("decode_json_only", |b| {
        b.iter(|| olm_resolver::fbc::decode::decode(black_box(&bytes)).unwrap())
    });
    g.bench_function("parse", |b| {
        b.iter(|| load_files([("synth.json", black_box(&bytes))]).unwrap())
    });
    g.bench_function("validate", |b| b.iter(|| validate(black_box(&fbc))));
    g.bench_function("render_and_hash", |b| {
        b.iter(|| black_box(&fbc).content_hash())
    });
    g.finish();

    let catalogs = input(fbc.clone());
    let mut g = c.benchmark_group("resolve");
    g.sample_size(20);
    g.bench_function("index", |b| b.iter(|| Index::build(black_box(&catalogs))));
    let index = Index::build(&catalogs);
    for n in [1, 50, 500] {
        let reqs = requests(n, fbc.packages.len());
        assert_eq!(resolve(&index, &reqs, &[]).unwrap().len(), n);
        g.bench_function(format!("requests_{n}"), |b| {
            b.iter(|| resolve(black_box(&index), &reqs, &[]).unwrap())
        });
    }
    // One new bundle at the head of package 0's stable channel: rebuild the index, resolve 50.
    let mut grown = fbc.clone();
    let extra = load_files([(
        "extra.json",
        br#"{"schema":"olm.bundle","package":"operator-000","name":"operator-000.v99.0.0","image":"quay.io/example/extra","properties":[{"type":"olm.package","value":{"packageName":"operator-000","version":"99.0.0"}}]}"#,
    )])
    .unwrap();
    grown.extend(extra);
    let grown = input(grown);
    let reqs = requests(50, fbc.packages.len());
    g.bench_function("reresolve_after_one_bundle_added_50", |b| {
        b.iter(|| {
            let index = Index::build(black_box(&grown));
            resolve(&index, &reqs, &[]).unwrap()
        })
    });
    g.finish();
}

/// The real catalogs' files, read into memory (the benchmark measures decoding, not the disk).
fn real_files() -> Vec<(String, Vec<u8>)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fbc-samples/real");
    olm_resolver::fbc::load::catalog_files(&dir)
        .unwrap()
        .into_iter()
        .map(|f| (f.display().to_string(), std::fs::read(&f).unwrap()))
        .collect()
}

fn real(c: &mut Criterion) {
    let files = real_files();
    let bytes: usize = files.iter().map(|(_, b)| b.len()).sum();
    let fbc = load_files(files.iter().map(|(n, b)| (n.as_str(), b))).unwrap();
    let mut g = c.benchmark_group("real");
    g.sample_size(20);
    g.throughput(Throughput::Bytes(bytes as u64));
    g.bench_function("parse", |b| {
        b.iter(|| load_files(black_box(&files).iter().map(|(n, b)| (n.as_str(), b))).unwrap())
    });
    g.bench_function("validate", |b| b.iter(|| validate(black_box(&fbc))));
    g.bench_function("render", |b| b.iter(|| black_box(&fbc).render()));
    g.finish();
}

/// The paired comparison's problems: index + resolve of 50 and 500 requests on 300 and 600
/// packages (the catalogs of `examples/bench_inputs.rs`).
fn problems(c: &mut Criterion) {
    let mut g = c.benchmark_group("problems");
    g.sample_size(20);
    for packages in [300, 600] {
        let defaults = SynthConfig::default();
        let config = SynthConfig {
            packages,
            bundles: defaults.bundles * packages / defaults.packages,
            ..defaults
        };
        // As `olm-resolve` loads it: the model only, taken by the index.
        let fbc = olm_resolver::fbc::load_model("synth.json", &generate(&config)).unwrap();
        let meta = CatalogMeta {
            name: "synthetic".into(),
            priority: 0,
            labels: BTreeMap::new(),
        };
        for n in [50, 500] {
            let reqs = requests(n, packages);
            let wanted: std::collections::HashSet<String> =
                reqs.iter().map(|r| r.package_name.clone()).collect();
            g.bench_function(format!("index_and_resolve_{n}_on_{packages}"), |b| {
                b.iter_batched(
                    || fbc.clone(),
                    |fbc| {
                        // Only the requested packages, as `olm-resolve` indexes a problem.
                        let content = Arc::new(CatalogContent::from_fbc_packages(fbc, &|p| {
                            wanted.contains(p)
                        }));
                        let index = Index::from_contents([(meta.clone(), content)]);
                        resolve(&index, &reqs, &[]).unwrap()
                    },
                    BatchSize::LargeInput,
                )
            });
        }
    }
    g.finish();
}

/// Hostile YAML files (issue 36): what reading each costs, whether it is refused (too deep) or
/// read. Each once took a crash, 2.1 GB or hours; the figures bound their time.
fn hostile(c: &mut Criterion) {
    let keys: Vec<String> = (0..200_000).map(|i| format!("k{i}: {i}")).collect();
    let mut newlines = String::from("schema: olm.package\nname: p\n");
    newlines.extend(std::iter::repeat_n('\n', 64 << 20));
    let files = [
        // 200 KB nested 100,000 deep: refused by saphyr's depth limit.
        ("deep_sequences", format!("a:\n{}x\n", "- ".repeat(100_000))),
        // 2.3 MB: one flow mapping of 200,000 keys.
        ("flow_keys_200k", format!("a: {{{}}}\n", keys.join(", "))),
        // 64 MiB: one document, then newlines.
        ("newlines_64mib", newlines),
    ];
    let mut g = c.benchmark_group("hostile");
    g.sample_size(10);
    for (name, text) in &files {
        g.throughput(Throughput::Bytes(text.len() as u64));
        g.bench_function(*name, |b| {
            b.iter(|| olm_resolver::fbc::decode::yaml_documents(black_box(text.as_bytes())).is_ok())
        });
    }
    g.finish();
}

criterion_group!(resolver, benches, real, problems, hostile);
criterion_main!(resolver);
