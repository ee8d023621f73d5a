//! Scale of catalogd's aggregated API on the real node (a benchmark, not a test): the
//! synthetic catalog of `olm_resolver::synth` at 10,000 bundles, served from a catalog image in
//! the node's registry by the chart's catalogd Pod, once with `catalogApi.enabled=false` and
//! once with it on (one replica each, so the two readings are of one process). It reports the
//! time from the Catalog's creation until it serves, catalogd's memory (VmRSS and VmHWM, read
//! from this machine's /proc: the node's processes are in a child PID namespace), the
//! kube-apiserver's memory before and after, and, with the API on, the latency of lists
//! through the API server (medians of five), beside the HTTP download of the whole
//! catalog through catalogd's Service.
//!
//! Usage, with release builds of the managers:
//!
//! ```text
//! cargo build --release -p catalogd -p operator-controller -p catalog-switcher -p provisioner -p olm-e2e -p olm-cluster --bins
//! OLM_E2E_BIN_DIR=target/release target/release/olm-catalog-api-scale
//! ```

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, DeleteParams};
use olm_e2e::catalogs::{create_catalog, wait_unpacked};
use olm_e2e::context::TestContext;
use olm_e2e::manager::OLM_NAMESPACE;
use olm_e2e::node::{push_managers, registry, wait_deployments_available};
use olm_e2e::process::{peak_rss_mib, rss_mib};
use olm_resolver::synth::{SynthConfig, generate};
use serde_json::json;

const BUNDLES: usize = 10_000;
const PACKAGES: usize = 600;
const ROUNDS: usize = 5;
/// How long memory readings wait after the work they follow.
const SETTLE: Duration = Duration::from_secs(10);
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

/// The pid of the one process whose command line holds every one of `parts`.
fn pid_of(parts: &[&str]) -> Option<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if parts.iter().all(|p| cmdline.contains(p)) {
            found.push(pid);
        }
    }
    (found.len() == 1).then(|| found[0])
}

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

/// GETs `path` through the API server `ROUNDS` times; the median time and the last body's
/// length.
async fn timed(client: &kube::Client, path: &str, accept: &str) -> Result<(Duration, usize)> {
    let mut times = Vec::new();
    let mut len = 0;
    for _ in 0..ROUNDS {
        let request = http::Request::get(path)
            .header("Accept", accept)
            .body(Vec::new())?;
        let started = Instant::now();
        let body = client.request_text(request).await?;
        times.push(started.elapsed());
        len = body.len();
    }
    Ok((median(times), len))
}

/// Lists every bundle in pages of 500 (kubectl's chunk size) through the API server.
async fn paged(client: &kube::Client) -> Result<(Duration, usize)> {
    let mut times = Vec::new();
    let mut items = 0;
    for _ in 0..ROUNDS {
        let started = Instant::now();
        let mut token = String::new();
        items = 0;
        loop {
            let path =
                format!("/apis/catalogs.olm-rs.io/v1alpha1/bundles?limit=500&continue={token}");
            let request = http::Request::get(path.as_str())
                .header("Accept", TABLE)
                .body(Vec::new())?;
            let page: serde_json::Value = client.request(request).await?;
            items += page["rows"].as_array().map_or(0, Vec::len);
            token = page["metadata"]["continue"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            if token.is_empty() {
                break;
            }
        }
        times.push(started.elapsed());
    }
    Ok((median(times), items))
}

#[tokio::main]
async fn main() -> Result<()> {
    olm_e2e::install_crypto_provider();
    let ctx = TestContext::new("api-scale").await?;
    let result = run(&ctx).await;
    let _ = olm_e2e::chart::uninstall();
    ctx.cleanup().await?;
    result
}

async fn run(ctx: &TestContext) -> Result<()> {
    let client = ctx.client.clone();
    let registry = registry()?;
    let images = push_managers(&registry, "api-scale").await?;
    let fbc = String::from_utf8(generate(&SynthConfig {
        packages: PACKAGES,
        bundles: BUNDLES,
        ..SynthConfig::default()
    }))?;
    olm_e2e::images::push_catalog(
        &registry,
        "olm-rs/synth-catalog",
        "10k",
        &[("catalog.json", fbc.as_str())],
    )
    .await?;
    let image = format!("{}/olm-rs/synth-catalog:10k", registry.host);
    println!(
        "catalog: {BUNDLES} bundles in {PACKAGES} packages, {} bytes of FBC JSON, as {image}",
        fbc.len()
    );
    let cluster = olm_e2e::cluster::cluster()?;
    let dir = cluster
        .dir
        .as_ref()
        .context("run it on a control plane of its own (not OLM_E2E_KUBECONFIG)")?
        .display()
        .to_string();
    let apiserver = pid_of(&["kube-apiserver", &format!("--cert-dir={dir}")])
        .context("finding the kube-apiserver process")?;
    for api in [false, true] {
        let insecure = format!(
            "catalogd.extraArgs[0]=--insecure-registries={}",
            registry.host
        );
        let enabled = format!("catalogApi.enabled={api}");
        olm_e2e::chart::install(
            false,
            &[
                &format!("image.registry={images}"),
                "image.tag=api-scale",
                "bundleDeploymentCRD.install=false",
                "catalogApi.replicas=1",
                &insecure,
                &enabled,
            ],
        )?;
        wait_deployments_available(&client, OLM_NAMESPACE, Duration::from_secs(120)).await?;
        let catalogd = pid_of(&["catalogd", "--storage-dir=/var/cache/catalogd"])
            .context("finding catalogd's process")?;
        let apiserver_before = rss_mib(apiserver);
        let idle = rss_mib(catalogd);
        let name = ctx.name(if api { "synth-on" } else { "synth-off" });
        let started = Instant::now();
        let catalogs = create_catalog(
            ctx,
            &name,
            json!({"type": "image", "image": {"ref": image}}),
        )
        .await?;
        wait_unpacked(&catalogs, &name, None).await?;
        let served_in = started.elapsed();
        // Memory freed after the unpack goes back to the system a moment later (mimalloc).
        tokio::time::sleep(SETTLE).await;
        let served = rss_mib(catalogd);
        println!(
            "\nAPI {}: serving after {served_in:?}; catalogd VmRSS {idle} MiB idle, {served} MiB serving (10 s later)",
            if api { "on" } else { "off" }
        );
        // The whole catalog over HTTP, through catalogd's Service (the baseline).
        let service = Api::<Service>::namespaced(client.clone(), OLM_NAMESPACE)
            .get("catalogd")
            .await?;
        let ip = service
            .spec
            .and_then(|s| s.cluster_ip)
            .context("catalogd's Service has no ClusterIP")?;
        let url = format!("http://{ip}:8083/catalogs/{name}/api/v1/all");
        let mut times = Vec::new();
        for _ in 0..ROUNDS {
            let t = Instant::now();
            let body = reqwest::get(&url).await?.bytes().await?;
            anyhow::ensure!(body.len() > 1000, "the download is empty");
            times.push(t.elapsed());
        }
        println!("  HTTP api/v1/all (whole catalog): {:?}", median(times));
        if api {
            olm_e2e::wait::wait_apiservice_available(
                &client,
                "v1alpha1.catalogs.olm-rs.io",
                Duration::from_secs(120),
            )
            .await?;
            let base = "/apis/catalogs.olm-rs.io/v1alpha1";
            for (what, path, accept) in [
                (
                    "kubectl get packages (Table, 600 rows)",
                    format!("{base}/packages"),
                    TABLE,
                ),
                (
                    "list of every bundle (JSON objects)",
                    format!("{base}/bundles"),
                    "application/json",
                ),
                (
                    "list of every bundle (Table)",
                    format!("{base}/bundles"),
                    TABLE,
                ),
                (
                    "one package's bundles (-l package=…, Table)",
                    format!(
                        "{base}/bundles?labelSelector=package%3D{}",
                        olm_resolver::synth::package_name(0)
                    ),
                    TABLE,
                ),
                (
                    "kubectl get channels (Table)",
                    format!("{base}/channels"),
                    TABLE,
                ),
            ] {
                let (time, len) = timed(&client, &path, accept).await?;
                println!("  {what}: {time:?} ({len} bytes)");
            }
            let (time, items) = paged(&client).await?;
            println!(
                "  every bundle in pages of 500 (kubectl's --chunk-size): {time:?} ({items} rows)"
            );
        }
        tokio::time::sleep(SETTLE).await;
        let after = rss_mib(catalogd);
        let peak = peak_rss_mib(catalogd);
        let apiserver_after = rss_mib(apiserver);
        println!(
            "  catalogd VmRSS {after} MiB 10 s after (VmHWM {peak} MiB); kube-apiserver VmRSS {apiserver_before} MiB before, {apiserver_after} MiB after"
        );
        catalogs.delete(&name, &DeleteParams::default()).await?;
        olm_e2e::wait::wait_for_deletion(&catalogs, &name, Duration::from_secs(120)).await?;
        olm_e2e::chart::uninstall()?;
        let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
        olm_e2e::wait::wait_for_deletion(&namespaces, OLM_NAMESPACE, Duration::from_secs(120))
            .await?;
    }
    Ok(())
}
