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

mod common;
use common::status_kib;
use std::error::Error;
use std::time::{Duration, Instant};

use catalogd::store::{ALL_JSON_GZ, Rendered, Store};
use olm_resolver::fbc::load_files;
use olm_resolver::fbc::validate::validate;
use olm_resolver::synth::{SynthConfig, generate};

fn mib(kib: Option<u64>) -> String {
    kib.map_or_else(|| "n/a".into(), |k| format!("{:.1} MiB", k as f64 / 1024.0))
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

/// The input of a case: FBC files as a fetched source hands them over.
fn input(case: &str, n: usize) -> Vec<u8> {
    // One valid package, so that a catalog of otherwise meaningless blobs is valid.
    let head = concat!(
        r#"{"schema":"olm.package","name":"p","defaultChannel":"s"}"#,
        r#"{"schema":"olm.channel","package":"p","name":"s","entries":[{"name":"b"}]}"#,
        r#"{"schema":"olm.bundle","package":"p","name":"b","image":"i","properties":"#,
        r#"[{"type":"olm.package","value":{"packageName":"p","version":"1.0.0"}}]}"#
    );
    match case {
        // Valid: a million blobs of an unknown schema, 14 bytes each.
        "tiny-json" => format!("{head}{}", r#"{"schema":"x"}"#.repeat(n)).into_bytes(),
        // The same as YAML documents.
        "tiny-yaml" => format!(
            "{}schema: olm.package\nname: p\ndefaultChannel: s\n---\nschema: olm.channel\npackage: p\nname: s\nentries: [{{name: b}}]\n---\nschema: olm.bundle\npackage: p\nname: b\nimage: i\nproperties: [{{type: olm.package, value: {{packageName: p, version: 1.0.0}}}}]\n",
            "schema: x\n---\n".repeat(n)
        )
        .into_bytes(),
        // Invalid: blobs without a schema, 2 bytes each.
        "invalid-json" => "{}".repeat(n).into_bytes(),
        _ => generate(&SynthConfig::default()),
    }
}

fn main() -> Result<(), Box<dyn Error>> {
    // `cargo bench` passes `--bench`; the case comes from OLM_BENCH_CASE (synthetic, tiny-json,
    // tiny-yaml, invalid-json) and its blob count from OLM_BENCH_BLOBS.
    let case = std::env::var("OLM_BENCH_CASE").unwrap_or_else(|_| "synthetic".into());
    let n: usize = std::env::var("OLM_BENCH_BLOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let input = input(&case, n);
    let input_len = input.len();
    let dir = tempfile::tempdir()?;
    let store = Store::open(dir.path())?;

    // Writing 5 to clear_refs resets VmHWM to the current RSS (Linux >= 4.0), so the peak
    // below is the unpack's alone and not the generator's.
    let reset = common::reset_peak();
    let rss_before = status_kib("VmRSS");

    // The files are handed over by value, as catalogd does, so each is freed once parsed.
    let start = Instant::now();
    let loaded = load_files(vec![("catalog.json".to_owned(), input)]);
    let parsed = start.elapsed();
    let fbc = match loaded {
        Ok(fbc) => fbc,
        Err(problems) => {
            let peak = status_kib("VmHWM");
            println!("case {case}: {input_len} bytes of input");
            println!(
                "refused in {}: {} problems ({} listed), first: {}",
                ms(parsed),
                problems.total(),
                problems.len(),
                problems
                    .first()
                    .map(ToString::to_string)
                    .unwrap_or_default()
            );
            println!("RSS before unpack:            {}", mib(rss_before));
            println!("peak RSS during unpack:       {}", mib(peak));
            return Ok(());
        }
    };

    let start = Instant::now();
    let problems = validate(&fbc);
    let validated = start.elapsed();
    if !problems.is_empty() {
        return Err(format!(
            "{} validation problems: {:?}",
            problems.total(),
            problems.first()
        )
        .into());
    }

    let start = Instant::now();
    let rendered = Rendered::from_fbc(&fbc)?;
    let render_time = start.elapsed();
    let start = Instant::now();
    let stored = store.put_rendered("synthetic", "uid", rendered)?;
    let write_time = start.elapsed();
    let total = parsed + validated + render_time + write_time;
    let peak = status_kib("VmHWM");
    // all.json.gz is written in the background once the content is live.
    let start = Instant::now();
    store.flush();
    let gzip_time = start.elapsed();

    // The steady-state case: the source changed but the content did not (same hash).
    let start = Instant::now();
    let again = store.put("synthetic", "uid", &fbc)?;
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
        "case {case}: {input_len} bytes of FBC, {} blobs ({} packages, {} bundles)",
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
    println!("write, fsync, swap:           {}", ms(write_time));
    println!("unpack total (content live):  {}", ms(total));
    println!("gzip, in the background:      {}", ms(gzip_time));
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
    if let (Some(peak), Some(before)) = (peak, rss_before) {
        println!(
            "peak over RSS before, per byte of input: {:.1}",
            (peak.saturating_sub(before) * 1024) as f64 / input_len as f64
        );
    }
    Ok(())
}
