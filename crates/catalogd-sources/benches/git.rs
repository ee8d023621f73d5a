//! Fetch of a catalog kept in git, from a real git server on loopback (git's own smart HTTP
//! backend behind the e2e harness's CGI bridge): a repository whose `catalog/` directory holds
//! the synthetic catalog (`olm_resolver::synth` defaults: ~25 MB of FBC JSON) beside 8 MiB of
//! incompressible bytes outside it, with a history of three commits. For each case: the time,
//! the process's peak memory above what it held before (VmHWM), the pack bytes received, and
//! the requests the server served:
//!
//! * fetch: the branch's commit, depth 1, and its `catalog/` directory read from the objects;
//! * changed: the same after a commit that changed one file of the catalog (nothing is kept
//!   between fetches, so this costs a full fetch too);
//! * poll: the unchanged branch asked for its commit (`ls-refs`).
//!
//! A plain binary (`harness = false`), since peak memory is a per-process measure:
//!
//! ```text
//! cargo bench -p catalogd-sources --bench git
//! ```

mod common;
use common::status_kib;
use std::error::Error;
use std::time::{Duration, Instant};

use catalogd_sources::git::remote::{self, Remote};
use catalogd_sources::git::spec::Want;
use catalogd_sources::git::tree;
use olm_resolver::synth::{SynthConfig, generate};
use olm_testkit::git::GitServer;
use olm_testkit::images::noise;

const MAX: u64 = 256 << 20;

fn main() -> Result<(), Box<dyn Error>> {
    olm_runtime::client::install_crypto_provider();
    let runtime = tokio::runtime::Runtime::new()?;
    let args: Vec<String> = std::env::args().collect();
    // `git --case NAME URL SCRATCH`: one case, in a process of its own (see `run`).
    match args.iter().position(|a| a == "--case") {
        Some(i) => runtime.block_on(case(&args[i + 1], &args[i + 2], &args[i + 3])),
        None => runtime.block_on(run()),
    }
}

/// Sets up the server and the repository, then runs each case in a fresh process, so that its
/// peak memory is its own.
async fn run() -> Result<(), Box<dyn Error>> {
    let dir = tempfile::tempdir()?;
    let server = GitServer::start(&dir.path().join("repos"), None).await?;
    let repo = server.create("catalogs")?;
    let fbc = String::from_utf8(generate(&SynthConfig::default()))?;
    let blob = String::from_utf8_lossy(&noise(8 << 20, b"opm")).into_owned();
    repo.commit("main", &[("README.md", "# catalogs\n")], "one")?;
    repo.commit(
        "main",
        &[
            ("tools/opm", blob.as_str()),
            ("catalog/catalog.json", fbc.as_str()),
        ],
        "two",
    )?;
    println!(
        "repository: {:.1} MB of FBC JSON in catalog/, 8 MiB outside it, 2 commits",
        fbc.len() as f64 / 1e6
    );
    println!(
        "{:<8} {:>10} {:>16} {:>12}  requests",
        "case", "time", "peak above start", "pack"
    );
    let url = server.repo_url("catalogs");
    let scratch = dir.path().join("scratch");
    let exe = std::env::current_exe()?;
    for name in ["fetch", "changed", "poll"] {
        if name == "changed" {
            let mut changed = fbc.clone();
            changed.push_str("{\"schema\":\"olm.package\",\"name\":\"bench-extra\"}\n");
            repo.commit(
                "main",
                &[("catalog/catalog.json", changed.as_str())],
                "three",
            )?;
        }
        let before = server.requests().len();
        let out = tokio::process::Command::new(&exe)
            .args(["--case", name, &url, &scratch.display().to_string()])
            .output()
            .await?;
        if !out.status.success() {
            return Err(format!("case {name}: {}", String::from_utf8_lossy(&out.stderr)).into());
        }
        let requests = server.requests().len() - before;
        print!(
            "{name:<8} {}",
            String::from_utf8_lossy(&out.stdout).trim_end()
        );
        println!("  {requests}");
    }
    Ok(())
}

async fn case(name: &str, url: &str, scratch: &str) -> Result<(), Box<dyn Error>> {
    let remote = Remote {
        url: url.to_owned(),
        account: None,
        ssh: None,
        ca: Vec::new(),
        timeout: Duration::from_secs(300),
        shown: url.to_owned(),
        // The benchmark's git server listens on loopback.
        policy: std::sync::Arc::new(olm_puller::network::NetworkPolicy {
            allow_loopback: true,
            ..Default::default()
        }),
    };
    let scratch = std::path::PathBuf::from(scratch);
    let start_kib = status_kib("VmRSS").unwrap_or(0);
    common::reset_peak();
    let started = Instant::now();
    let want = Want::Branch("main".into());
    let poll = name == "poll";
    let (pack, files) = tokio::task::spawn_blocking(move || -> Result<(u64, usize), String> {
        if poll {
            remote::ls_ref(&remote, &want, &scratch).map_err(|e| e.to_string())?;
            return Ok((0, 0));
        }
        let fetched = remote::fetch(&remote, &want, &scratch, MAX).map_err(|e| e.to_string())?;
        let files = tree::files(&fetched.objects(MAX), fetched.tree, "catalog", MAX, "bench")
            .map_err(|e| e.to_string())?;
        Ok((fetched.bytes, files.len()))
    })
    .await??;
    let elapsed = started.elapsed();
    let peak_kib = status_kib("VmHWM").unwrap_or(0);
    let _ = files;
    println!(
        "{:>7.1} ms {:>12.1} MiB {:>9.1} MB",
        elapsed.as_secs_f64() * 1e3,
        peak_kib.saturating_sub(start_kib) as f64 / 1024.0,
        pack as f64 / 1e6,
    );
    Ok(())
}
