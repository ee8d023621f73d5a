//! provisioner: installs what BundleDeployments name.
//!
//! Wiring only: the flags ([`provisioner::args`]) and the manager's steps
//! ([`provisioner::manager`]), run by the shared runtime until SIGTERM. `provisioner render`
//! prints what a bundle would install instead ([`provisioner::preview`]): no runtime, no API.

use anyhow::Result;
use clap::Parser;
use provisioner::args::Args;
use provisioner::manager::Provisioner;
use provisioner::preview::{self, RenderArgs};

/// Memory freed after a bundle is parsed and applied goes back to the system, whatever the C
/// library: with glibc's allocator each worker thread kept its arena at its peak (50
/// BundleDeployments of a real operator's CRDs: 138 MiB steady, 81 MiB with this; see
/// docs/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> Result<()> {
    if std::env::args().nth(1).as_deref() == Some("render") {
        let args = RenderArgs::parse_from(std::env::args().skip(1));
        std::process::exit(preview::print(&args).await);
    }
    olm_runtime::manager::run(Provisioner(Args::parse())).await?;
    Ok(())
}
