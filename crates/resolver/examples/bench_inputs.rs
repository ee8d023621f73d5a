//! Writes the inputs of the paired comparison (`bench/compare/compare.sh`): a synthetic
//! catalog of `PACKAGES` packages (`olm_resolver::synth`, the benchmarks' shape) as
//! `OUT/catalog/catalog.json`, and for each `N` an `olm-resolve` problem `OUT/problem-N.yaml`
//! with the same requests as `OUT/requests-N.txt` (one `package [range]` a line, for the deppy
//! harness): every package once in dependency order, then the first ones again with a range.
//!
//! Usage: `cargo run --release -p olm-resolver --example bench_inputs -- PACKAGES OUT N...`

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{Context, bail};
use olm_resolver::synth::{SynthConfig, generate, package_name};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [packages, out, counts @ ..] = args.as_slice() else {
        bail!("usage: bench_inputs PACKAGES OUT N...");
    };
    let packages: usize = packages.parse().context("PACKAGES")?;
    let out = PathBuf::from(out);
    // The default shape (300 packages, 5,000 bundles), scaled with the package count.
    let defaults = SynthConfig::default();
    let config = SynthConfig {
        packages,
        bundles: defaults.bundles * packages / defaults.packages,
        ..defaults
    };
    std::fs::create_dir_all(out.join("catalog"))?;
    std::fs::write(out.join("catalog/catalog.json"), generate(&config))?;
    for n in counts {
        let n: usize = n.parse().context("N")?;
        let (mut problem, mut lines) = (
            String::from("catalogs:\n- name: synthetic\n  path: catalog\noperators:\n"),
            String::new(),
        );
        for i in 0..n {
            let package = package_name(i % packages);
            if i >= packages {
                writeln!(problem, "- packageName: {package}\n  version: \">=1.0.0\"")?;
                writeln!(lines, "{package} >=1.0.0")?;
            } else {
                writeln!(problem, "- packageName: {package}")?;
                writeln!(lines, "{package}")?;
            }
        }
        std::fs::write(out.join(format!("problem-{n}.yaml")), problem)?;
        std::fs::write(out.join(format!("requests-{n}.txt")), lines)?;
    }
    Ok(())
}
