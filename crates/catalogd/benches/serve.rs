//! The content server under concurrent load, over loopback: the server runs in-process with
//! the synthetic catalog (`olm_resolver::synth` defaults, ~25 MB) stored, and N client tasks
//! (one shared reqwest client, HTTP/1.1 keep-alive) send requests back to back for a bounded
//! time and count. Scenarios:
//!
//! * `all.json gzip`: the whole catalog, precompressed (`Accept-Encoding: gzip`);
//! * `all.json 304`: a conditional request with the current ETag;
//! * `metas package`: `?package=<one package>` (its channels and bundles, 15 KB);
//! * `metas package gzip`: the same, compressed per request.
//!
//! Client and server share the machine's cores, so the figures are a lower bound for the
//! server alone. Bounded: `OLM_BENCH_SECS` seconds (default 10) and at most 1,000,000
//! requests per run.
//!
//! ```text
//! cargo bench -p catalogd --bench serve
//! ```

mod common;
use common::status_kib;
use std::error::Error;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use catalogd::server::{ServerMetrics, router, serve};
use catalogd::store::Store;
use olm_resolver::fbc::load_files;
use olm_resolver::synth::{SynthConfig, generate, package_name};
use reqwest::StatusCode;
use reqwest::header::{ACCEPT_ENCODING, HeaderMap, HeaderValue, IF_NONE_MATCH};
use tokio_util::sync::CancellationToken;

const MAX_REQUESTS: u64 = 1_000_000;
/// Set in the child process that stores the catalog into this directory.
const SETUP_DIR_ENV: &str = "OLM_BENCH_SERVE_SETUP_DIR";
const CONCURRENCY: [usize; 2] = [16, 64];

struct Scenario {
    name: &'static str,
    path: String,
    headers: HeaderMap,
    status: StatusCode,
}

struct Outcome {
    requests: u64,
    bytes: u64,
    elapsed: Duration,
    /// Sorted latencies, microseconds.
    latencies: Vec<u64>,
    errors: u64,
}

impl Outcome {
    fn percentile(&self, p: f64) -> Duration {
        if self.latencies.is_empty() {
            return Duration::ZERO;
        }
        let i = ((self.latencies.len() as f64 * p).ceil() as usize)
            .saturating_sub(1)
            .min(self.latencies.len() - 1);
        Duration::from_micros(self.latencies[i])
    }
}

fn fmt_latency(d: Duration) -> String {
    if d >= Duration::from_millis(10) {
        format!("{:.0} ms", d.as_secs_f64() * 1e3)
    } else {
        format!("{:.2} ms", d.as_secs_f64() * 1e3)
    }
}

async fn run(
    client: &reqwest::Client,
    base: &str,
    scenario: &Scenario,
    concurrency: usize,
    duration: Duration,
) -> Outcome {
    let issued = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let deadline = start + duration;
    let mut tasks = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        let client = client.clone();
        let url = format!("{base}{}", scenario.path);
        let headers = scenario.headers.clone();
        let want = scenario.status;
        let issued = issued.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let (mut bytes, mut errors) = (0u64, 0u64);
            while Instant::now() < deadline && issued.fetch_add(1, Ordering::Relaxed) < MAX_REQUESTS
            {
                let t = Instant::now();
                let ok = match client.get(&url).headers(headers.clone()).send().await {
                    Ok(mut res) if res.status() == want => loop {
                        match res.chunk().await {
                            Ok(Some(chunk)) => bytes += chunk.len() as u64,
                            Ok(None) => break true,
                            Err(_) => break false,
                        }
                    },
                    _ => false,
                };
                if ok {
                    latencies.push(t.elapsed().as_micros() as u64);
                } else {
                    errors += 1;
                }
            }
            (latencies, bytes, errors)
        }));
    }
    let mut outcome = Outcome {
        requests: 0,
        bytes: 0,
        elapsed: Duration::ZERO,
        latencies: Vec::new(),
        errors: 0,
    };
    for task in tasks {
        match task.await {
            Ok((latencies, bytes, errors)) => {
                outcome.latencies.extend(latencies);
                outcome.bytes += bytes;
                outcome.errors += errors;
            }
            Err(_) => outcome.errors += 1,
        }
    }
    outcome.elapsed = start.elapsed();
    outcome.requests = outcome.latencies.len() as u64;
    outcome.latencies.sort_unstable();
    outcome
}

fn main() -> Result<(), Box<dyn Error>> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let secs: u64 = std::env::var("OLM_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10)
        .clamp(1, 120);
    let duration = Duration::from_secs(secs);

    // The catalog is generated, parsed and stored by a child process (this binary again), so
    // the memory the set-up needs is not counted in this process's RSS while serving.
    if let Some(dir) = std::env::var_os(SETUP_DIR_ENV) {
        let input = generate(&SynthConfig::default());
        let fbc = load_files([("catalog.json", input.as_slice())])
            .map_err(|p| format!("{} problems: {:?}", p.len(), p.first()))?;
        let store = Store::open(dir)?;
        store.put("synthetic", "uid", &fbc)?;
        // all.json.gz is made in the background: wait for it before this process exits.
        store.flush();
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let setup = std::process::Command::new(std::env::current_exe()?)
        .env(SETUP_DIR_ENV, dir.path())
        .status()?;
    if !setup.success() {
        return Err(format!("storing the synthetic catalog failed: {setup}").into());
    }
    let store = Arc::new(Store::open(dir.path())?);
    let stored = store
        .current("synthetic")?
        .ok_or("the set-up process stored nothing")?;
    let package = package_name(150);

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let registry = prometheus::Registry::new();
        let metrics = ServerMetrics::new(&registry)?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let base = format!("http://{}", listener.local_addr()?);
        let shutdown = CancellationToken::new();
        let server = tokio::spawn(serve(
            listener,
            router(store, metrics),
            None,
            shutdown.clone(),
        ));

        let gzip = HeaderMap::from_iter([(ACCEPT_ENCODING, HeaderValue::from_static("gzip"))]);
        let etag = HeaderValue::from_str(&format!("\"{}\"", stored.hash))?;
        let scenarios = [
            Scenario {
                name: "all.json gzip",
                path: "/catalogs/synthetic/all.json".into(),
                headers: gzip.clone(),
                status: StatusCode::OK,
            },
            Scenario {
                name: "all.json 304",
                path: "/catalogs/synthetic/all.json".into(),
                headers: HeaderMap::from_iter([(IF_NONE_MATCH, etag)]),
                status: StatusCode::NOT_MODIFIED,
            },
            Scenario {
                name: "metas package",
                path: format!("/catalogs/synthetic/api/v1/metas?package={package}"),
                headers: HeaderMap::new(),
                status: StatusCode::OK,
            },
            Scenario {
                name: "metas package gzip",
                path: format!("/catalogs/synthetic/api/v1/metas?package={package}"),
                headers: gzip,
                status: StatusCode::OK,
            },
        ];

        println!(
            "catalog: all.json {} bytes; {secs} s per run; RSS after setup {:.1} MiB",
            stored.size,
            status_kib("VmRSS").unwrap_or_default() as f64 / 1024.0
        );
        println!(
            "| scenario | clients | requests | req/s | MB/s | p50 | p99 | errors | peak RSS |"
        );
        println!("|---|---|---|---|---|---|---|---|---|");
        // Writing 5 to clear_refs resets VmHWM (Linux >= 4.0), so each run's peak is its own.
        // It is the whole process's: client included.
        let mut max_peak = 0f64;
        for scenario in &scenarios {
            for concurrency in CONCURRENCY {
                let client = reqwest::Client::builder()
                    .no_proxy()
                    .http1_only()
                    .pool_max_idle_per_host(concurrency)
                    .tcp_nodelay(true)
                    .build()?;
                // Warm up: open connections and page in the files.
                let _ = run(
                    &client,
                    &base,
                    scenario,
                    concurrency,
                    Duration::from_millis(300),
                )
                .await;
                common::reset_peak();
                let o = run(&client, &base, scenario, concurrency, duration).await;
                let peak = status_kib("VmHWM").unwrap_or_default() as f64 / 1024.0;
                max_peak = max_peak.max(peak);
                let elapsed = o.elapsed.as_secs_f64();
                println!(
                    "| {} | {concurrency} | {} | {:.0} | {:.0} | {} | {} | {} | {peak:.0} MiB |",
                    scenario.name,
                    o.requests,
                    o.requests as f64 / elapsed,
                    o.bytes as f64 / elapsed / 1e6,
                    fmt_latency(o.percentile(0.50)),
                    fmt_latency(o.percentile(0.99)),
                    o.errors
                );
            }
        }
        println!("peak RSS while serving (client included): {max_peak:.0} MiB");
        shutdown.cancel();
        server.await??;
        Ok::<(), Box<dyn Error>>(())
    })
}
