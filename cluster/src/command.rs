//! The command line of `olm-cluster` and what each command runs.

use std::path::{Path, PathBuf};

use crate::log::log;
use crate::{detached, folder, node, stop, supervisor};

/// The command line of `olm-cluster`.
#[derive(Debug, clap::Parser)]
#[command(
    name = "olm-cluster",
    about = "A real local Kubernetes control plane for the tests and the demo of olm-rs"
)]
pub enum Command {
    /// Runs the control plane in the foreground until its stdin closes or says `stop`.
    Run {
        /// The folder of this control plane (its logs are kept there).
        dir: PathBuf,
        /// CRDs to apply (every `*.yaml` file) before the controller manager starts.
        #[arg(long)]
        crds: Option<PathBuf>,
        /// Only the control plane: no node (so no Pod runs).
        #[arg(long)]
        no_node: bool,
        /// Stop when `stop` is written to DIR/control instead of reading stdin (how `start`
        /// runs it).
        #[arg(long, hide = true)]
        detached: bool,
    },
    /// Runs the control plane detached and returns once it is ready.
    Start {
        /// The folder of this control plane (its logs are kept there).
        dir: PathBuf,
        /// CRDs to apply (every `*.yaml` file) before the controller manager starts.
        #[arg(long)]
        crds: Option<PathBuf>,
        /// Only the control plane: no node (so no Pod runs).
        #[arg(long)]
        no_node: bool,
    },
    /// Stops the control plane `start` started in DIR, and waits until it has stopped.
    Stop {
        /// The folder of the control plane.
        dir: PathBuf,
    },
    /// Removes node INDEX's cgroups once its supervisor is gone (started by the supervisor;
    /// see `node::reaper`).
    #[command(hide = true)]
    ReapNode {
        /// The node's index.
        index: u8,
        /// The cluster's folder (named so that the process is seen as the cluster's).
        dir: PathBuf,
    },
}

/// Runs `command`; the process's exit code.
pub fn main(command: Command) -> u8 {
    crate::client::install_crypto_provider();
    let (dir, crds) = match &command {
        Command::Run { dir, crds, .. } | Command::Start { dir, crds, .. } => (dir, crds.as_deref()),
        Command::Stop { dir } => (dir, None),
        Command::ReapNode { index, dir } => return node::reaper::reap(*index, dir),
    };
    let crds = crds.map(|c| std::path::absolute(c).map_err(folder::io_error(c)));
    let (dir, crds) = match (folder_of(dir), crds.transpose()) {
        (Ok(dir), Ok(crds)) => (dir, crds),
        (Err(e), _) | (_, Err(e)) => {
            log(&e.to_string());
            return 2;
        }
    };
    match command {
        Command::Run {
            detached, no_node, ..
        } => {
            let owner = if detached {
                stop::Owner::ControlFile(dir.join(folder::CONTROL))
            } else {
                stop::Owner::Stdin
            };
            // Signals and child processes are handled from this one thread (see `children`).
            match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => {
                    runtime.block_on(supervisor::run(&dir, crds.as_deref(), !no_node, owner))
                }
                Err(e) => {
                    log(&format!("a runtime: {e}"));
                    1
                }
            }
        }
        Command::Start { no_node, .. } => detached::start(&dir, crds.as_deref(), !no_node),
        Command::Stop { .. } => detached::stop(&dir),
        Command::ReapNode { .. } => 2,
    }
}

/// The control plane's folder, created if missing, as an absolute path (the components are
/// told where their files are by absolute paths).
fn folder_of(path: &Path) -> crate::error::Result<PathBuf> {
    std::fs::create_dir_all(path).map_err(folder::io_error(path))?;
    std::path::absolute(path).map_err(folder::io_error(path))
}
