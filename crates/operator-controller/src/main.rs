//! operator-controller: resolves `Operator` objects to bundles and writes `BundleDeployment`s.
//!
//! Wiring only: the flags ([`operator_controller::args`]) and the manager's steps
//! ([`operator_controller::manager`]), run by the shared runtime until SIGTERM; `explain`
//! runs the same resolution once against the cluster and prints it.

use anyhow::Result;
use clap::Parser;
use operator_controller::args::{Args, Command};
use operator_controller::manager::{OperatorController, explain_command};

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    match &args.command {
        Some(Command::Explain { names, output }) => explain_command(&args, names, *output).await?,
        None => olm_runtime::manager::run(OperatorController(args)).await?,
    }
    Ok(())
}
