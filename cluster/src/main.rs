//! `olm-cluster run|start|stop DIR`: the local control plane of the tests and the demo (see
//! the `olm_cluster` library and docs/development.md).

use clap::Parser;

fn main() -> std::process::ExitCode {
    let command = olm_cluster::Command::parse();
    olm_cluster::main(command).into()
}
