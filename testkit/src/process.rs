//! Child processes that cannot outlive the test process.
//!
//! Every process the harness starts (the control plane's supervisor, the managers) is started
//! through `setpriv --pdeathsig TERM` from one thread that lives as long as the process. The
//! kernel sends the child SIGTERM when that thread's process dies, however it dies (a panic, the
//! end of the test binary, SIGKILL from an impatient user), so nothing leaks and nothing is
//! ever stopped by a PID that might have been reused. (The parent-death signal follows the
//! thread that forked the child, not the process: hence the one long-lived spawning thread,
//! since test threads end early.)
//!
//! A child that must be stopped earlier is stopped through its [`Child`] handle: the harness
//! never reaps a child it may still signal, so its PID cannot have been reused.

use std::process::{Child, Command};
use std::sync::OnceLock;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};

use crate::{Error, Result};

type Request = (Command, Sender<std::io::Result<Child>>);

static SPAWNER: OnceLock<Mutex<Sender<Request>>> = OnceLock::new();

fn spawner() -> Result<Sender<Request>> {
    let sender = SPAWNER.get_or_init(|| {
        let (tx, rx) = channel::<Request>();
        // The thread ends only with the process: the sender lives in a static.
        let started = std::thread::Builder::new()
            .name("olm-e2e-spawner".into())
            .spawn(move || serve(rx));
        if let Err(e) = started {
            // Without the thread, requests fail with a clear error below.
            let _ = std::io::Write::write_fmt(
                &mut std::io::stderr(),
                format_args!("e2e: cannot start the spawner thread: {e}\n"),
            );
        }
        Mutex::new(tx)
    });
    Ok(sender
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone())
}

fn serve(rx: Receiver<Request>) {
    for (mut command, reply) in rx {
        let _ = reply.send(command.spawn());
    }
}

/// Starts `program` with `args`, tethered to this process: it gets SIGTERM when this process
/// exits. `configure` sets up its environment and standard streams.
pub fn spawn_tethered(
    program: &std::path::Path,
    args: &[String],
    configure: impl FnOnce(&mut Command),
) -> Result<Child> {
    let mut command = Command::new("setpriv");
    command
        .args(["--pdeathsig", "TERM", "--"])
        .arg(program)
        .args(args);
    configure(&mut command);
    let (tx, rx) = channel();
    spawner()?
        .send((command, tx))
        .map_err(|_| Error::Fixture("the spawner thread is gone".into()))?;
    rx.recv()
        .map_err(|_| Error::Fixture("the spawner thread is gone".into()))?
        .map_err(|e| Error::Fixture(format!("starting {}: {e}", program.display())))
}

/// The peak resident memory (VmHWM) of process `pid`, in MiB (0 when it cannot be read).
pub fn peak_rss_mib(pid: u32) -> u64 {
    status_kib(pid, "VmHWM:") / 1024
}

/// The resident memory (VmRSS) of process `pid` now, in MiB (0 when it cannot be read).
pub fn rss_mib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS:") / 1024
}

fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0)
}

/// The CPU time (user and system, all threads) process `pid` used so far, in seconds: fields
/// 14 and 15 of `/proc/<pid>/stat`, in clock ticks of 1/100 s (Linux reports them to user
/// space at USER_HZ, 100 on every architecture it supports). 0 when it cannot be read.
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The command name (field 2) may hold spaces; the fields after it follow its `)`.
    let after = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // After `)`: field 3 (state) is index 0, so utime (14) is 11 and stime (15) is 12.
    (ticks(11) + ticks(12)) as f64 / 100.0
}

/// A child kept alive for the rest of the process (its handle must not be dropped and reaped
/// behind our back while we may still signal it).
pub type Kept = Arc<Mutex<Child>>;

/// Sends `signal` (as kill(1) names it: `TERM`, `KILL`, `STOP`, `CONT`) to `child` unless it
/// has exited; `false` when it had.
pub fn signal(child: &mut Child, signal: &str) -> Result<bool> {
    if child
        .try_wait()
        .map_err(|e| Error::Fixture(e.to_string()))?
        .is_some()
    {
        return Ok(false);
    }
    // kill(1) on the PID of a child we have not reaped: it cannot be a stranger.
    let status = Command::new("kill")
        .args([format!("-{signal}"), child.id().to_string()])
        .status()
        .map_err(|e| Error::Fixture(format!("kill -{signal}: {e}")))?;
    if status.success() {
        Ok(true)
    } else {
        Err(Error::Fixture(format!(
            "kill -{signal} {} failed",
            child.id()
        )))
    }
}

/// Stops `child` now: SIGTERM through its handle, then SIGKILL after `grace`.
pub fn stop(child: &Kept, grace: std::time::Duration) -> Result<()> {
    let mut child = child
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    stop_child(&mut child, grace).map(|_| ())
}

/// Stops `child`: SIGTERM through its handle, SIGKILL when it is still running after `grace`;
/// waits until it has exited. Whether it had to be killed.
pub fn stop_child(child: &mut Child, grace: std::time::Duration) -> Result<bool> {
    if !signal(child, "TERM").unwrap_or(true) {
        return Ok(false);
    }
    let deadline = std::time::Instant::now() + grace;
    while std::time::Instant::now() < deadline {
        if child
            .try_wait()
            .map_err(|e| Error::Fixture(e.to_string()))?
            .is_some()
        {
            return Ok(false);
        }
        // Polling our own child's exit, bounded by the deadline.
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.kill().map_err(|e| Error::Fixture(e.to_string()))?;
    child.wait().map_err(|e| Error::Fixture(e.to_string()))?;
    Ok(true)
}

/// The first `name` on `PATH`, if any.
pub fn which(name: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(name))
            .find(|p| p.is_file())
    })
}

/// Removes `path` when this process exits, however it exits: a tethered `sh` waits for its
/// stdin (held by this process until it ends) to close, then removes the folder.
pub fn remove_on_exit(path: &std::path::Path) -> Result<()> {
    static HELD: OnceLock<Mutex<Vec<Child>>> = OnceLock::new();
    let args = [
        "-c".to_owned(),
        // SIGTERM (the parent-death signal) and end of input both end in the removal.
        "trap 'rm -rf -- \"$1\"; exit 0' TERM; cat >/dev/null; rm -rf -- \"$1\"".to_owned(),
        "olm-e2e-janitor".to_owned(),
        path.display().to_string(),
    ];
    let child = spawn_tethered(std::path::Path::new("sh"), &args, |c| {
        c.stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
    })?;
    HELD.get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(child);
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code

    use super::*;

    #[test]
    fn this_process_is_measured_as_it_works() {
        let pid = std::process::id();
        let before = cpu_seconds(pid);
        // Busy for 0.3 s of CPU time (not wall time: the machine may be loaded).
        let mut x = 0u64;
        while cpu_seconds(pid) - before < 0.3 {
            for i in 0..100_000u64 {
                x = x.wrapping_mul(31).wrapping_add(i);
            }
        }
        std::hint::black_box(x);
        assert!(cpu_seconds(pid) - before >= 0.3);
        let held = vec![1u8; 64 << 20];
        std::hint::black_box(&held);
        assert!(rss_mib(pid) >= 64, "{} MiB", rss_mib(pid));
        assert!(peak_rss_mib(pid) >= rss_mib(pid));
        assert_eq!(cpu_seconds(u32::MAX), 0.0);
    }
}
