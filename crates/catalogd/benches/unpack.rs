//! One unpack of the synthetic catalog (`olm_resolver::synth` defaults: 300 packages, 5,000
//! bundles, ~25 MB of FBC JSON) in a fresh process: parse (`load_files`), `validate`, and
//! store (render + sha256, then write all.json, all.json.gz and index.json, fsync, swap).
//! Prints the time of each step and the memory: RSS before the unpack (the input is already
//! in memory, as a fetched source's bytes are) and the peak RSS (VmHWM) during it.
//!
//! Criterion cannot measure peak memory, and a process's peak only says something about one
//! unpack if that process did nothing else; hence a plain binary (`harness = false`):
//!
//! ```text
//! cargo bench -p catalogd --bench unpack
//! ```

use std::error::Error;
use std::time::{Duration, Instant};

use catalogd::store::{ALL_JSON_GZ, Rendered, Store};
use olm_resolver::fbc::load_files;
use olm_resolver::fbc::validate::validate;
use olm_resolver::synth::{SynthConfig, generate};

/// A field of /proc/self/status, in KiB.
fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

fn mib(kib: Option<u64>) -> String {
    kib.map_or_else(|| "n/a".into(), |k| format!("{:.1} MiB", k as f64 / 1024.0))
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn main() -> Result<(), Box<dyn Error>> {
    // `cargo bench` passes `--bench`; there is nothing to select.
    let input = generate(&SynthConfig::default());
    let dir = tempfile::tempdir()?;
    let store = Store::open(dir.path())?;

    // Writing 5 to clear_refs resets VmHWM to the current RSS (Linux >= 4.0), so the peak
    // below is the unpack's alone and not the generator's.
    let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
    let rss_before = status_kib("VmRSS");

    let start = Instant::now();
    let fbc = load_files([("catalog.json", input.as_slice())]).map_err(|problems| {
        format!("{} problems, first: {:?}", problems.len(), problems.first())
    })?;
    let parsed = start.elapsed();

    let start = Instant::now();
    let problems = validate(&fbc);
    let validated = start.elapsed();
    if !problems.is_empty() {
        return Err(format!(
            "{} validation problems: {:?}",
            problems.len(),
            problems.first()
        )
        .into());
    }

    let start = Instant::now();
    let rendered = Rendered::from_fbc(&fbc);
    let render_time = start.elapsed();
    let start = Instant::now();
    let stored = store.put_rendered("synthetic", &rendered)?;
    let write_time = start.elapsed();
    let total = parsed + validated + render_time + write_time;
    let peak = status_kib("VmHWM");

    // The steady-state case: the source changed but the content did not (same hash).
    let start = Instant::now();
    let again = store.put("synthetic", &fbc)?;
    let noop = start.elapsed();
    if again != stored {
        return Err("putting the same content again changed it".into());
    }

    let gz = std::fs::metadata(
        dir.path()
            .join("synthetic")
            .join(&stored.hash)
            .join(ALL_JSON_GZ),
    )?
    .len();
    println!(
        "input: {} bytes of FBC JSON, {} blobs ({} packages, {} bundles)",
        input.len(),
        fbc.blobs.len(),
        fbc.packages.len(),
        fbc.bundles.len()
    );
    println!(
        "stored: all.json {} bytes, all.json.gz {gz} bytes ({:.1}%)",
        stored.size,
        gz as f64 * 100.0 / stored.size as f64
    );
    println!("parse (load_files):           {}", ms(parsed));
    println!("validate:                     {}", ms(validated));
    println!("render + sha256 + index:      {}", ms(render_time));
    println!("write, gzip, fsync, swap:     {}", ms(write_time));
    println!("unpack total:                 {}", ms(total));
    println!("put of unchanged content:     {}", ms(noop));
    println!("RSS before unpack:            {}", mib(rss_before));
    println!(
        "peak RSS during unpack:       {}{}",
        mib(peak),
        if reset {
            ""
        } else {
            " (VmHWM could not be reset: includes generating the input)"
        }
    );
    Ok(())
}
