//! `olm-cluster start` and `stop`: a supervisor that outlives the shell that started it (the
//! demo's `OLM_DEMO_KEEP=1`, or a cluster to poke around in by hand). `start` runs
//! `olm-cluster run --detached` in a process group of its own with no stdin, and returns once
//! the control plane is ready; `stop` writes `stop` to the folder's control file and waits
//! until the supervisor has finished.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use std::os::unix::process::CommandExt;

use super::folder::{self, io_error};
use crate::error::Result;
use crate::log::log;

/// How long `start` waits for the control plane (a cold build of it included).
const START_TIMEOUT: Duration = Duration::from_secs(600);

/// How long `stop` waits for the supervisor to finish.
const STOP_TIMEOUT: Duration = Duration::from_secs(120);

/// How often `start` and `stop` look.
const POLL: Duration = Duration::from_millis(200);

/// Starts a detached supervisor of `dir`; the exit code.
pub fn start(dir: &Path, crds: Option<&Path>, node: bool) -> u8 {
    if folder::is_held(dir) {
        log(&format!(
            "a control plane already runs in {} (stop it with: olm-cluster stop {0})",
            dir.display()
        ));
        return 1;
    }
    match spawn_and_wait(dir, crds, node) {
        Ok(code) => code,
        Err(e) => {
            log(&e.to_string());
            1
        }
    }
}

fn spawn_and_wait(dir: &Path, crds: Option<&Path>, node: bool) -> Result<u8> {
    let logs = dir.join(folder::LOGS);
    std::fs::create_dir_all(&logs).map_err(io_error(&logs))?;
    let control = dir.join(folder::CONTROL);
    std::fs::write(&control, "").map_err(io_error(&control))?;
    let _ = std::fs::remove_file(dir.join(folder::READY));
    let log_path = logs.join("supervisor.log");
    let out = std::fs::File::create(&log_path).map_err(io_error(&log_path))?;
    let err = out.try_clone().map_err(io_error(&log_path))?;
    let exe = std::env::current_exe().map_err(io_error(Path::new("/proc/self/exe")))?;
    let mut command = Command::new(exe);
    command.arg("run").arg(dir).arg("--detached");
    if let Some(crds) = crds {
        command.arg("--crds").arg(crds);
    }
    if !node {
        command.arg("--no-node");
    }
    let mut child = command
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        // Out of the shell's process group: Ctrl-C there does not stop it.
        .process_group(0)
        .spawn()
        .map_err(io_error(Path::new("olm-cluster run")))?;
    let supervisor_log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    let deadline = Instant::now() + START_TIMEOUT;
    while !dir.join(folder::READY).exists() {
        if child.try_wait().ok().flatten().is_some() {
            let _ = write!(std::io::stderr(), "{}", supervisor_log());
            log(&format!(
                "the control plane did not start; logs in {}",
                logs.display()
            ));
            return Ok(1);
        }
        if Instant::now() >= deadline {
            stop(dir);
            log(&format!(
                "the control plane was not ready within {} s",
                START_TIMEOUT.as_secs()
            ));
            return Ok(1);
        }
        // Polling for the supervisor's `ready` file, bounded by the deadline.
        std::thread::sleep(POLL);
    }
    let said: String = supervisor_log()
        .lines()
        .filter(|l| l.trim() != "ready")
        .map(|l| format!("{l}\n"))
        .collect();
    let _ = write!(std::io::stderr(), "{said}");
    Ok(0)
}

/// Asks the detached supervisor of `dir` to stop and waits until it has; the exit code.
pub fn stop(dir: &Path) -> u8 {
    if !folder::is_held(dir) {
        log(&format!("nothing runs in {}", dir.display()));
        return 0;
    }
    let control = dir.join(folder::CONTROL);
    if !control.exists() {
        log(&format!(
            "{} was started with `run`: stop it by closing its stdin",
            dir.display()
        ));
        return 1;
    }
    if let Err(e) = std::fs::write(&control, "stop\n") {
        log(&format!("{}: {e}", control.display()));
        return 1;
    }
    let deadline = Instant::now() + STOP_TIMEOUT;
    while folder::is_held(dir) {
        if Instant::now() >= deadline {
            log(&format!(
                "the control plane in {} did not stop within {} s",
                dir.display(),
                STOP_TIMEOUT.as_secs()
            ));
            return 1;
        }
        // Polling for the supervisor's lock to go, bounded by the deadline.
        std::thread::sleep(POLL);
    }
    log(&format!(
        "stopped; logs kept in {}",
        dir.join(folder::LOGS).display()
    ));
    0
}
