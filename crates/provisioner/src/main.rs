//! provisioner: installs what BundleDeployments name.
//!
//! Wiring only: the flags ([`provisioner::args`]) and the manager's steps
//! ([`provisioner::manager`]), run by the shared runtime until SIGTERM.

use anyhow::Result;
use clap::Parser;
use provisioner::args::Args;
use provisioner::manager::Provisioner;

/// Memory freed after a bundle is parsed and applied goes back to the system, whatever the C
/// library: with glibc's allocator each worker thread kept its arena at its peak (50
/// BundleDeployments of a real operator's CRDs: 138 MiB steady, 81 MiB with this; see
/// docs/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> Result<()> {
    olm_runtime::manager::run(Provisioner(Args::parse())).await?;
    Ok(())
}
