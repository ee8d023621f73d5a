//! `olm-cluster run|start|stop DIR`: the local control plane of the tests and the demo (see
//! `olm_e2e::control_plane` and docs/development.md).

use clap::Parser;

fn main() -> std::process::ExitCode {
    let command = olm_e2e::control_plane::Command::parse();
    olm_e2e::control_plane::main(command).into()
}
