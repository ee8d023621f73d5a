//! catalogd: turns `Catalog` objects into served, validated catalog content.
//!
//! Wiring only: the flags ([`catalogd::args`]) and the manager's steps
//! ([`catalogd::manager`]), run by the shared runtime until SIGTERM. `catalogd collect` is the
//! collector container of generator Pods instead: no runtime, no API.

use anyhow::{Context as _, Result};
use catalogd::args::Args;
use catalogd::collect::{self, CollectArgs};
use catalogd::manager::Catalogd;
use clap::Parser;

/// Memory freed after an unpack is returned to the system, whatever the C library: catalogd's
/// memory bound (docs/install.md) counts on it. With glibc's allocator every thread that
/// unpacked kept its own arena at its peak.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> Result<()> {
    if std::env::args().nth(1).as_deref() == Some("collect") {
        let args = CollectArgs::parse_from(std::env::args().skip(1));
        std::process::exit(collect::run(&args));
    }
    let args = Args::parse();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?
        .block_on(olm_runtime::manager::run(Catalogd(args)))?;
    Ok(())
}
