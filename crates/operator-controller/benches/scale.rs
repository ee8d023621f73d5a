//! Scale benchmark of operator-controller's decision path (not a timed test): 1,000 Operators
//! over a synthetic catalog calibrated to real ones (300 packages, 5,000 bundles, ~25 MB of
//! FBC), served over HTTP by a local server with ETags as catalogd serves it.
//!
//! It runs what the controller runs for each Operator (the content client, the grouped and
//! memoized resolution, planning), in one process without an API server: the BundleDeployments
//! and statuses a plan would write are applied to the in-memory snapshot, and counted as the
//! API writes the controller would issue. Then 30 packages gain a new head bundle (a content
//! change) and every Operator is decided again, as the controller re-queues every Operator
//! whose selector matches the Catalog. Reports times, writes and peak memory (VmHWM, which
//! includes the benchmark's own copies of the catalog and its server).
//!
//! Run: `cargo bench -p operator-controller --bench scale`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // benchmark code

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::ResourceExt;
use olm_api::catalog::{Catalog, CatalogSpec, CatalogStatus, Source, SourceType};
use olm_api::operator::{Operator, OperatorSpec, UpgradeConstraintPolicy};
use olm_resolver::synth::{SynthConfig, generate, package_name};
use operator_controller::content::{ContentClient, ContentOptions};
use operator_controller::plan::plan;
use operator_controller::resolution::{Resolver, Snapshot};

const OPERATORS: usize = 1_000;
const PACKAGES: usize = 300;
const CHANGED: usize = 30;

struct Served {
    body: Vec<u8>,
    hash: String,
}

async fn serve(state: Arc<Mutex<Arc<Served>>>) -> String {
    let app = Router::new().route(
        "/catalogs/synth/all.json",
        get(move |headers: HeaderMap| {
            let s = state.lock().unwrap().clone();
            async move {
                let etag = format!("\"{}\"", s.hash);
                if headers
                    .get(header::IF_NONE_MATCH)
                    .and_then(|v| v.to_str().ok())
                    == Some(etag.as_str())
                {
                    return (StatusCode::NOT_MODIFIED, [(header::ETAG, etag)], Vec::new())
                        .into_response();
                }
                (StatusCode::OK, [(header::ETAG, etag)], s.body.clone()).into_response()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}/catalogs/synth/all.json")
}

fn catalog(url: &str, hash: &str) -> Arc<Catalog> {
    let mut c = Catalog::new(
        "synth",
        CatalogSpec {
            source: Source {
                type_: SourceType::Http,
                image: None,
                config_maps: None,
                http: None,
                git: None,
                custom: None,
            },
            priority: 0,
        },
    );
    c.status = Some(CatalogStatus {
        conditions: vec![Condition {
            type_: "Serving".into(),
            status: "True".into(),
            reason: "Available".into(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: Time(k8s_openapi::jiff::Timestamp::now()),
        }],
        content_hash: Some(hash.into()),
        content_url: Some(url.into()),
        ..Default::default()
    });
    Arc::new(c)
}

/// 1,000 Operators over 300 packages: every package once, then the first packages again with
/// a version range (two Operators of one package must agree on one bundle, so they resolve
/// alike), as the resolver's own benchmark does.
fn operators() -> Vec<Arc<Operator>> {
    (0..OPERATORS)
        .map(|i| {
            let mut op = Operator::new(
                &format!("op-{i:04}"),
                OperatorSpec {
                    package_name: package_name(i % PACKAGES),
                    version: (i >= PACKAGES).then(|| ">=1.0.0".to_owned()),
                    channel: None,
                    upgrade_constraint_policy: UpgradeConstraintPolicy::Enforce,
                    catalog_selector: None,
                    namespace: None,
                    watch_namespace: None,
                    target_namespaces: None,
                    deployment_config: None,
                    values: None,
                    values_from: None,
                },
            );
            op.metadata.uid = Some(format!("uid-{i}"));
            op.metadata.generation = Some(1);
            Arc::new(op)
        })
        .collect()
}

fn vm_hwm_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn next_version() -> String {
    static VERSION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    VERSION
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        .to_string()
}

/// Decides and plans every Operator once, applying what would be written to the snapshot.
/// Returns (BundleDeployment writes, status writes).
async fn round(resolver: &Resolver, snapshot: &mut Snapshot) -> (usize, usize) {
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let (mut bd_writes, mut status_writes) = (0, 0);
    for i in 0..snapshot.operators.len() {
        let op = snapshot.operators[i].clone();
        let name = op.name_any();
        let decision = resolver.decide(snapshot, &name).await.unwrap();
        let existing = snapshot
            .bundle_deployments
            .iter()
            .position(|b| b.metadata.name.as_deref() == Some(name.as_str()));
        let p = plan(
            &op,
            existing.map(|e| snapshot.bundle_deployments[e].as_ref()),
            &decision,
            &now,
        );
        // Each write gets a new resourceVersion, as the API server gives it.
        if let Some(mut bd) = p.apply {
            bd_writes += 1;
            bd.metadata.uid = Some(format!("bd-{name}"));
            bd.metadata.resource_version = Some(next_version());
            match existing {
                Some(e) => snapshot.bundle_deployments[e] = Arc::new(bd),
                None => snapshot.bundle_deployments.push(Arc::new(bd)),
            }
        }
        if p.status_changed {
            status_writes += 1;
            let mut o = (*op).clone();
            o.status = Some(p.status);
            o.metadata.resource_version = Some(next_version());
            snapshot.operators[i] = Arc::new(o);
        }
    }
    (bd_writes, status_writes)
}

#[tokio::main]
async fn main() {
    let v1 = generate(&SynthConfig::default());
    let v2 = generate(&SynthConfig {
        new_heads: CHANGED,
        ..SynthConfig::default()
    });
    let h1 = olm_resolver::fbc::canonical::sha256_hex(&v1);
    let h2 = olm_resolver::fbc::canonical::sha256_hex(&v2);
    println!(
        "catalog: {} bytes; after the change {} bytes",
        v1.len(),
        v2.len()
    );
    let state = Arc::new(Mutex::new(Arc::new(Served {
        body: v1.clone(),
        hash: h1.clone(),
    })));
    let url = serve(state.clone()).await;
    let before = vm_hwm_kib();

    let content = Arc::new(
        ContentClient::new(
            ContentOptions {
                ca_pem: None,
                max_bytes: 1 << 30,
                recheck: Duration::from_secs(30),
                timeout: Duration::from_secs(60),
            },
            None,
        )
        .unwrap(),
    );
    let resolver = Resolver::new(content.clone(), None);
    let mut snapshot = Snapshot {
        operators: operators(),
        bundle_deployments: Vec::new(),
        catalogs: vec![catalog(&url, &h1)],
        apis: Default::default(),
    };

    let started = Instant::now();
    let (bds, statuses) = round(&resolver, &mut snapshot).await;
    let first = started.elapsed();
    println!(
        "first resolution of {OPERATORS} Operators (fetch + parse + index + solve + plan): {first:?}; {bds} BundleDeployments and {statuses} statuses written"
    );
    let started = Instant::now();
    let (bds, statuses) = round(&resolver, &mut snapshot).await;
    println!(
        "steady state (every Operator re-queued, nothing changed): {:?}; {bds} + {statuses} writes",
        started.elapsed()
    );

    *state.lock().unwrap() = Arc::new(Served {
        body: v2,
        hash: h2.clone(),
    });
    snapshot.catalogs = vec![catalog(&url, &h2)];
    let started = Instant::now();
    let (bds, statuses) = round(&resolver, &mut snapshot).await;
    let changed = started.elapsed();
    println!(
        "after {CHANGED} packages gain a new head: every Operator decided in {changed:?}; {bds} BundleDeployments and {statuses} statuses written"
    );
    let started = Instant::now();
    let (bds, statuses) = round(&resolver, &mut snapshot).await;
    println!(
        "the writes' own re-queues (BundleDeployments now at the new heads): {:?}; {bds} + {statuses} writes",
        started.elapsed()
    );
    // After the grace, one fresh solve per group confirms the reused answers.
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let started = Instant::now();
    let (bds, statuses) = round(&resolver, &mut snapshot).await;
    println!(
        "the confirmation after the grace (one fresh solve per group): {:?}; {bds} + {statuses} writes",
        started.elapsed()
    );
    println!(
        "content cache: {} bytes; peak RSS (VmHWM) {} MiB, of which {} MiB before the controller code ran (the catalog bytes and the server)",
        content.bytes(),
        vm_hwm_kib() / 1024,
        before / 1024
    );
}
