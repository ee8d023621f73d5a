//! `olm-resolve`: resolve, validate or render File-Based Catalogs without a cluster.
//! See `docs/resolver.md`; the logic is in `olm_resolver::cli`.

use std::io::Write;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let stdout = std::io::stdout();
    let mut lock = stdout.lock();
    let out = olm_resolver::cli::run_to(&args, &mut lock);
    // A closed pipe (e.g. `| head`) is not an error worth reporting.
    let _ = lock.write_all(&out.stdout);
    let _ = lock.flush();
    let _ = std::io::stderr().write_all(out.stderr.as_bytes());
    std::process::exit(out.code);
}
