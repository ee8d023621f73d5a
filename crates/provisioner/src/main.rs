//! provisioner: installs what BundleDeployments name.
//!
//! Wiring only: the flags ([`provisioner::args`]) and the manager's steps
//! ([`provisioner::manager`]), run by the shared runtime until SIGTERM.

use anyhow::Result;
use clap::Parser;
use provisioner::args::Args;
use provisioner::manager::Provisioner;

#[tokio::main]
async fn main() -> Result<()> {
    olm_runtime::manager::run(Provisioner(Args::parse())).await?;
    Ok(())
}
