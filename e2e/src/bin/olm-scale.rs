//! Scale benchmark of operator-controller on a real control plane (a benchmark, not a test):
//! 1,000 Operators over the synthetic catalog of `olm_resolver::synth` (300 packages, 5,000
//! bundles, 25.6 MB), served to catalogd over HTTP. Then 30 packages gain a new head bundle
//! (the 120 Operators of those packages are affected) and it measures the time until every
//! affected BundleDeployment points at its new bundle, the writes operator-controller issued
//! (counted from watches), and the managers' peak memory (VmHWM).
//!
//! Usage, with release builds of the managers:
//!
//! ```text
//! cargo build --release -p catalogd -p operator-controller -p olm-e2e -p olm-cluster --bins
//! OLM_E2E_BIN_DIR=target/release target/release/olm-scale
//! ```
//!
//! It starts its own control plane (or uses the one named by `OLM_E2E_KUBECONFIG`) and deletes
//! what it created.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use futures::{StreamExt, TryStreamExt};
use kube::ResourceExt;
use kube::api::Api;
use olm_api::bundle_deployment::BundleDeployment;
use olm_api::catalog::Catalog;
use olm_api::conditions::find_condition;
use olm_api::operator::Operator;
use olm_e2e::catalogs::{create_catalog, wait_unpacked};
use olm_e2e::context::TestContext;
use olm_e2e::manager::{start_catalogd_with, start_operator_controller_with};
use olm_e2e::operators::{bd_image, create_operator};
use olm_e2e::scale::{count_changes, watch_until};
use olm_e2e::serve::http_file;
use olm_resolver::synth::{SynthConfig, generate, package_name};
use serde_json::json;

const OPERATORS: usize = 1_000;
const PACKAGES: usize = 300;
const CHANGED: usize = 30;

/// `controller_runtime_reconcile_time_seconds` sum and count of the Operator controller.
async fn reconciles(admin_url: &str) -> Result<(f64, f64)> {
    let text = reqwest::get(format!("{admin_url}/metrics"))
        .await?
        .text()
        .await?;
    let value = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name) && l.contains("controller=\"operator\""))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    Ok((
        value("controller_runtime_reconcile_time_seconds_sum"),
        value("controller_runtime_reconcile_time_seconds_count"),
    ))
}

#[tokio::main]
async fn main() -> Result<()> {
    olm_e2e::install_crypto_provider();
    let ctx = TestContext::new("scale").await?;
    let result = run(&ctx).await;
    ctx.cleanup().await?;
    result
}

async fn run(ctx: &TestContext) -> Result<()> {
    let catalogd = tokio::task::spawn_blocking(|| {
        start_catalogd_with("catalogd-scale", &["--max-content-bytes=268435456".into()])
    })
    .await??;
    let oc =
        tokio::task::spawn_blocking(|| start_operator_controller_with("oc-scale", &[])).await??;

    let v1 = generate(&SynthConfig::default());
    let v2 = generate(&SynthConfig {
        new_heads: CHANGED,
        ..SynthConfig::default()
    });
    let (server, url) = http_file("/synth.json", v1.clone()).await?;
    let name = ctx.name("synth");
    let catalogs = create_catalog(
        ctx,
        &name,
        json!({"type": "http", "http": {"url": url, "pollInterval": "5s"}}),
    )
    .await?;
    let first = wait_unpacked(&catalogs, &name, None).await?;
    let hash = first
        .status
        .and_then(|s| s.content_hash)
        .context("no content hash")?;
    println!("catalog: {} bytes, served as {}", v1.len(), &hash[..12]);

    let prefix = ctx.name("op-");
    let started = Instant::now();
    futures::stream::iter(0..OPERATORS)
        .map(|i| {
            let op = format!("{prefix}{i:04}");
            let mut spec = json!({"packageName": package_name(i % PACKAGES)});
            if i >= PACKAGES {
                spec["version"] = ">=1.0.0".into();
            }
            async move { create_operator(ctx, &op, spec).await.map(|_| ()) }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await?;
    println!("{OPERATORS} Operators created in {:?}", started.elapsed());
    let bds: Api<BundleDeployment> = Api::all(ctx.client.clone());
    let ops: Api<Operator> = Api::all(ctx.client.clone());
    let p = prefix.clone();
    let all = watch_until(
        &bds,
        Duration::from_secs(600),
        "initial BundleDeployments",
        move |items| {
            items
                .iter()
                .filter(|b| b.name_any().starts_with(&p))
                .count()
                == OPERATORS
        },
    )
    .await?;
    println!(
        "every BundleDeployment written {:?} after the last Operator was created",
        all
    );
    let p = prefix.clone();
    watch_until(
        &ops,
        Duration::from_secs(600),
        "initial Resolved=True",
        move |items| {
            items
                .iter()
                .filter(|o| o.name_any().starts_with(&p))
                .filter(|o| {
                    o.status
                        .as_ref()
                        .and_then(|s| find_condition(&s.conditions, "Resolved"))
                        .is_some_and(|c| c.status == "True")
                })
                .count()
                == OPERATORS
        },
    )
    .await?;

    let bd_writes = count_changes(bds.clone(), prefix.clone());
    let status_writes = count_changes(ops.clone(), prefix.clone());
    // Let the watches list, and the first resolution's confirmations settle.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (bd_before, status_before) = (
        bd_writes.load(Ordering::SeqCst),
        status_writes.load(Ordering::SeqCst),
    );

    let before = reconciles(&oc.admin_url).await?;
    server.set_body(v2);
    let changed_at = Instant::now();
    let n = name.clone();
    let h = hash.clone();
    watch_until(
        &catalogs,
        Duration::from_secs(120),
        "new contentHash",
        move |items: &[&Catalog]| {
            items
                .iter()
                .find(|c| c.name_any() == n)
                .and_then(|c| c.status.as_ref()?.content_hash.clone())
                .is_some_and(|now| now != h)
        },
    )
    .await?;
    let unpacked = changed_at.elapsed();
    let p = prefix.clone();
    let moved = watch_until(
        &bds,
        Duration::from_secs(600),
        "affected BundleDeployments",
        move |items| {
            let affected: Vec<&BundleDeployment> = items
                .iter()
                .copied()
                .filter(|b| b.name_any().starts_with(&p))
                .filter(|b| {
                    let i: usize = b.name_any()[p.len()..].parse().unwrap_or(usize::MAX);
                    i % PACKAGES < CHANGED
                })
                .collect();
            affected.len() == CHANGED * OPERATORS.div_ceil(PACKAGES)
                && affected
                    .iter()
                    .all(|b| bd_image(Some(b)).is_some_and(|i| i.ends_with(":v99.0.0")))
        },
    )
    .await?;
    println!(
        "content change: catalogd served the new content {unpacked:?} after the file changed; every affected BundleDeployment was updated {moved:?} after that"
    );
    let after = reconciles(&oc.admin_url).await?;
    println!(
        "reconciles until then: {} taking {:.2} ms each on average",
        after.1 - before.1,
        (after.0 - before.0) * 1000.0 / (after.1 - before.1).max(1.0)
    );
    // Writes settle: the confirmation after the grace (2 s) and any re-queues.
    tokio::time::sleep(Duration::from_secs(10)).await;
    println!(
        "writes after the change: {} BundleDeployments, {} Operator statuses",
        bd_writes.load(Ordering::SeqCst) - bd_before,
        status_writes.load(Ordering::SeqCst) - status_before
    );
    println!(
        "peak memory (VmHWM): operator-controller {} MiB, catalogd {} MiB",
        olm_e2e::process::peak_rss_mib(oc.manager.pid),
        olm_e2e::process::peak_rss_mib(catalogd.manager.pid)
    );
    println!(
        "operator-controller metrics:\n{}",
        reqwest::get(format!("{}/metrics", oc.admin_url))
            .await?
            .text()
            .await?
            .lines()
            .filter(|l| (l.starts_with("operator_controller_")
                || l.starts_with("controller_runtime_reconcile"))
                && !l.contains("_bucket"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    oc.manager.stop()?;
    catalogd.manager.stop()?;
    Ok(())
}
