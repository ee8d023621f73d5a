//! What outlives the supervisor: the node's cgroups stay when the supervisor dies outright
//! (SIGKILL during its start), since the kernel removes a dead node's processes, mounts and
//! links but not its cgroup folders. So before it makes them, the supervisor starts a reaper,
//! `olm-cluster reap-node INDEX DIR`: a process of its own group (a signal to the supervisor's
//! group leaves it be) whose stdin is a pipe the supervisor holds open for its whole life. When
//! the supervisor ends, however it ends, the pipe closes and the reaper removes the node's
//! cgroups, waiting for the kernel to let go of the node's processes, and the cluster's files
//! but its logs (what the supervisor's own clean-up does), then exits.
//!
//! The reaper holds the node's index while it lives (an abstract Unix socket named after it,
//! which the kernel releases with the process and which leaves no file), and the supervisor
//! makes the cgroups only once its reaper holds it: a new run that takes the index of a
//! killed one waits until the old reaper has cleaned up, rather than have it remove the new
//! node's cgroups.

use std::io::{BufRead, BufReader, Read};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::cgroups::{self, RELEASE};
use super::config;
use super::network::Addresses;
use crate::error::{Error, Result};
use crate::folder::{self, io_error};
use crate::log::log;

/// How long a reaper waits for the index (an old run's reaper cleaning up).
const HOLD: Duration = Duration::from_secs(30);

/// The line a reaper writes once it holds the index.
const READY: &str = "holding";

/// The abstract socket name that holds node `index`.
fn hold_name(index: u8) -> String {
    format!("olm-rs-node-{index}")
}

/// Starts the reaper of node `index` (of the cluster in `dir`) and waits until it holds the
/// index. Its stdin is left open for the rest of this process's life.
pub fn spawn(index: u8, dir: &Path) -> Result<()> {
    let exe = std::env::current_exe().map_err(io_error(Path::new("/proc/self/exe")))?;
    let mut child = Command::new(&exe)
        .args(["reap-node", &index.to_string()])
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .process_group(0)
        .spawn()
        .map_err(io_error(&exe))?;
    let said = child
        .stdout
        .take()
        .map(|out| {
            let mut line = String::new();
            let _ = BufReader::new(out).read_line(&mut line);
            line
        })
        .unwrap_or_default();
    if said.trim() != READY {
        return Err(Error::Cluster(format!(
            "the reaper of node {index} did not take hold of it (see the log)"
        )));
    }
    // Kept open until this process ends, however it ends: its close is the reaper's signal.
    std::mem::forget(child.stdin.take());
    Ok(())
}

/// The reaper's whole life (`olm-cluster reap-node INDEX DIR`); its exit code. Once the
/// supervisor is gone it does what the supervisor's own clean-up would have: the node's
/// cgroups, then, if no other supervisor has taken the folder meanwhile, everything of the
/// folder but its logs.
pub fn reap(index: u8, dir: &Path) -> u8 {
    let deadline = Instant::now() + HOLD;
    let name = hold_name(index);
    let held = loop {
        let bound = SocketAddr::from_abstract_name(name.as_bytes())
            .and_then(|addr| UnixListener::bind_addr(&addr));
        match bound {
            Ok(listener) => break listener,
            Err(e) if Instant::now() < deadline && e.kind() == std::io::ErrorKind::AddrInUse => {
                // An old run's reaper is cleaning this index up; bounded by the deadline.
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => {
                log(&format!(
                    "reaper of node {index}: cannot hold the index: {e}"
                ));
                return 1;
            }
        }
    };
    println!("{READY}");
    // Until the supervisor is gone: its end of the pipe closes with it.
    let _ = std::io::copy(
        &mut std::io::stdin().lock().take(u64::MAX),
        &mut std::io::sink(),
    );
    let mut code = 0;
    let cgroup = config::cgroup_root(&Addresses { index });
    if let Err(e) = cgroups::remove(&cgroup, RELEASE) {
        log(&format!("reaper of node {index}: {e}"));
        code = 1;
    }
    // The folder, unless a new supervisor holds it (it cleans up leftovers itself). The dead
    // supervisor's lock may outlive its stdin by a moment (the kernel closes a dying process's
    // files one by one): a lock held for longer than that is another supervisor's.
    let deadline = Instant::now() + Duration::from_secs(10);
    let lock = loop {
        match folder::Lock::take(dir) {
            Ok(None) if Instant::now() < deadline => {
                // Bounded by the deadline above.
                std::thread::sleep(Duration::from_millis(100));
            }
            other => break other,
        }
    };
    match lock {
        Ok(Some(lock)) => {
            wait_for_processes_naming(dir, RELEASE);
            if let Err(e) = super::clean_up(dir)
                .and_then(|()| folder::remove_all_but(dir, &[folder::LOGS, folder::LOCK]))
            {
                log(&format!(
                    "reaper of node {index}: cleaning up {}: {e}",
                    dir.display()
                ));
                code = 1;
            }
            lock.release();
        }
        Ok(None) => log(&format!(
            "reaper of node {index}: another supervisor holds {}; it cleans up",
            dir.display()
        )),
        Err(e) => {
            log(&format!("reaper of node {index}: {e}"));
            code = 1;
        }
    }
    drop(held);
    code
}

/// Waits (up to `patience`) until no other process names `dir` on its command line: the
/// components the supervisor started stop when it dies, and their files go only once they
/// have.
fn wait_for_processes_naming(dir: &Path, patience: Duration) {
    let needle = dir.as_os_str().as_encoded_bytes().to_vec();
    let me = std::process::id().to_string();
    let deadline = Instant::now() + patience;
    loop {
        let others = std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| {
                let name = e.file_name();
                name.to_str()
                    .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()) && n != me)
            })
            .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
            .any(|cmdline| cmdline.windows(needle.len()).any(|w| w == needle));
        if !others || Instant::now() >= deadline {
            return;
        }
        // The components are being killed; bounded by the deadline.
        std::thread::sleep(Duration::from_millis(100));
    }
}
