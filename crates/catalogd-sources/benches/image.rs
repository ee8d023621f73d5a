//! Pull and unpack of a catalog image from a real registry on loopback (Debian's
//! docker-registry, started by the e2e harness's helper): a base layer of 8 MiB of
//! incompressible bytes (a binary, as opm is) and a configs layer holding the synthetic catalog
//! (`olm_resolver::synth` defaults: ~25 MB of FBC JSON). For each case: the time, catalogd's
//! peak memory above what it held before (VmHWM, reset before each case), and the requests the
//! registry served (from its access log):
//!
//! * cold: nothing cached;
//! * cached: the same image again, every layer from the layer cache;
//! * changed: a new tag whose configs layer changed and base layer did not;
//! * poll: the unchanged tag polled (one manifest HEAD).
//!
//! A plain binary (`harness = false`), since peak memory is a per-process measure:
//!
//! ```text
//! cargo bench -p catalogd-sources --bench image
//! ```

mod common;
use common::status_kib;
use std::error::Error;
use std::time::{Duration, Instant};

use catalogd_sources::{Fetched, Mode};
use olm_api::catalog::{
    Catalog, CatalogSpec, ImageSource as ImageSpec, ResolvedImageSource, ResolvedSource, Source,
    SourceType,
};
use olm_puller::image::cache::LayerCache;
use olm_puller::image::registry::RegistryOptions;
use olm_puller::image::{ImageOptions, ImageSource};
use olm_resolver::synth::{SynthConfig, generate};
use olm_testkit::images::{Entry, layer, noise, push};
use olm_testkit::registry::Registry;

const AGENT: &str = "olm-rs-catalogd";

fn catalog(reference: &str) -> Catalog {
    Catalog::new(
        "bench",
        CatalogSpec {
            source: Source {
                type_: SourceType::Image,
                image: Some(ImageSpec {
                    r#ref: reference.into(),
                    ..Default::default()
                }),
                config_maps: None,
                http: None,
                git: None,
                custom: None,
            },
            priority: 0,
        },
    )
}

fn main() -> Result<(), Box<dyn Error>> {
    olm_runtime::client::install_crypto_provider();
    let runtime = tokio::runtime::Runtime::new()?;
    let args: Vec<String> = std::env::args().collect();
    // `image --case NAME HOST CACHE`: one case, in a process of its own (see `run`).
    match args.iter().position(|a| a == "--case") {
        Some(i) => runtime.block_on(case(&args[i + 1], &args[i + 2], &args[i + 3])),
        None => runtime.block_on(run()),
    }
}

/// Sets up the registry and the images, then runs each case in a fresh process, so that its
/// peak memory is its own (an allocator keeps what an earlier case freed).
async fn run() -> Result<(), Box<dyn Error>> {
    let dir = tempfile::tempdir()?;
    let registry = Registry::start_in(&dir.path().join("registry"), None)?;
    let fbc = generate(&SynthConfig::default());
    let mut changed = fbc.clone();
    changed.extend_from_slice(br#"{"schema":"olm.package","name":"bench-extra"}"#);
    let base = layer(&[Entry::File("bin/opm".into(), noise(8 << 20, b"opm"))]);
    let configs =
        |bytes: &[u8]| layer(&[Entry::File("configs/catalog.json".into(), bytes.to_vec())]);
    let labels = [(
        "operators.operatorframework.io.index.configs.v1".to_owned(),
        "/configs".to_owned(),
    )]
    .into();
    let (first, second) = (configs(&fbc), configs(&changed));
    let image_bytes = base.data.len() + first.data.len();
    push(
        &registry,
        "bench/index",
        "1",
        &[base.clone(), first],
        &labels,
    )
    .await?;
    push(&registry, "bench/index", "2", &[base, second], &labels).await?;
    println!(
        "catalog image: {:.1} MB compressed ({:.1} MB of FBC JSON, 8 MiB base layer)",
        image_bytes as f64 / 1e6,
        fbc.len() as f64 / 1e6
    );
    println!(
        "{:<8} {:>10} {:>16} {:>9}  requests",
        "case", "time", "peak above start", "files"
    );
    let cache = dir.path().join("layers");
    let exe = std::env::current_exe()?;
    for name in ["cold", "cached", "changed", "poll"] {
        let before = registry.requests(AGENT).len();
        let out = std::process::Command::new(&exe)
            .args(["--case", name, &registry.host, &cache.display().to_string()])
            .output()?;
        if !out.status.success() {
            return Err(format!("case {name}: {}", String::from_utf8_lossy(&out.stderr)).into());
        }
        let requests: Vec<String> = registry
            .requests(AGENT)
            .into_iter()
            .skip(before)
            .map(|r| {
                // Shortened to their kind: manifests/<tag or digest>, blobs/<digest>, v2/.
                let (method, path) = r.split_once(' ').unwrap_or((&r, ""));
                let kind = path
                    .trim_end_matches('/')
                    .split('/')
                    .rev()
                    .nth(1)
                    .unwrap_or(path);
                format!("{method} {}", if path == "/v2/" { "/v2/" } else { kind })
            })
            .collect();
        println!(
            "{name:<8} {}  {} ({})",
            String::from_utf8_lossy(&out.stdout).trim_end(),
            requests.len(),
            requests.join(", ")
        );
    }
    registry.stop()?;
    Ok(())
}

/// One case: `cold` (empty cache), `cached` (the same image again), `changed` (a new tag with
/// one new layer), `poll` (the unchanged tag asked for its digest). Prints time, peak memory
/// above the process's start, and files.
async fn case(name: &str, host: &str, cache: &str) -> Result<(), Box<dyn Error>> {
    if name == "cold" {
        let _ = std::fs::remove_dir_all(cache);
    }
    // No API server is contacted: without a pull secret, the source never reads a Secret.
    let client = kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse()?))?;
    let source = ImageSource::new(
        client,
        "olm-system".into(),
        ImageOptions {
            registry: RegistryOptions {
                timeout: Duration::from_secs(60),
                // The benchmark's registry listens on loopback.
                policy: std::sync::Arc::new(olm_puller::network::NetworkPolicy {
                    allow_loopback: true,
                    ..Default::default()
                }),
                ..Default::default()
            },
            max_bytes: 256 << 20,
            pull_timeout: Duration::from_secs(300),
            max_concurrent_pulls: 1,
            allow_credentials_without_tls_verify: false,
        },
        LayerCache::open(cache, 1 << 30)?,
        None,
    );
    let tag = if matches!(name, "cold" | "cached") {
        "1"
    } else {
        "2"
    };
    let catalog = catalog(&format!("{host}/bench/index:{tag}"));
    let mode = if name == "poll" {
        // What was served: the digest the tag names now (read without catalogd's client).
        let reference: oci_client::Reference = format!("{host}/bench/index:{tag}").parse()?;
        let digest = oci_client::Client::new(oci_client::client::ClientConfig {
            protocol: oci_client::client::ClientProtocol::Http,
            ..Default::default()
        })
        .fetch_manifest_digest(&reference, &oci_client::secrets::RegistryAuth::Anonymous)
        .await?;
        Mode::Conditional(ResolvedSource {
            type_: Some(SourceType::Image),
            image: Some(ResolvedImageSource {
                r#ref: reference.whole(),
                resolved_ref: Some(format!("{host}/bench/index@{digest}")),
                last_poll_attempt: None,
            }),
            ..Default::default()
        })
    } else {
        Mode::Full
    };
    let start_kib = status_kib("VmRSS").unwrap_or(0);
    common::reset_peak();
    let started = Instant::now();
    // A budget of its own, as large as a pull may need.
    let (reserve, _) =
        olm_puller::budget::Reserve::new(olm_puller::budget::UnpackBudget::new(256 << 20));
    let fetched = catalogd_sources::image::fetch(&source, &catalog, &mode, &reserve).await?;
    let elapsed = started.elapsed();
    let peak_kib = status_kib("VmHWM").unwrap_or(0);
    let files = match fetched {
        Fetched::Content { files, .. } => files.len(),
        Fetched::Unchanged { .. } | Fetched::Running { .. } => 0,
    };
    println!(
        "{:>7.1} ms {:>12.1} MiB {files:>9}",
        elapsed.as_secs_f64() * 1e3,
        peak_kib.saturating_sub(start_kib) as f64 / 1024.0,
    );
    Ok(())
}
