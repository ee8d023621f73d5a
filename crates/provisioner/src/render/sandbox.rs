//! A rendering tool run as a sandboxed child: the bundle's files written to a scratch
//! directory of its own (removed after), an environment with nothing of the provisioner's
//! (no cluster address or credentials, no `KUBECONFIG`, no `PATH` to run other programs from,
//! every proxy pointing at a closed port so that no HTTP request leaves, homes and caches in
//! the scratch directory), standard input closed, and the [`Limits`] watched while it runs:
//! the kernel's data, CPU-time and file-size limits set on it as it starts, its resident
//! memory read every [`WATCH`], its output counted as it is read. A child past any limit is
//! killed and the reason kept.

use std::path::{Component, Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;

use super::limits::{Limits, MAX_STDERR, Seen, Stopped, out_of_memory, resident};
use crate::bundle::Tree;

/// How often a running child is looked at.
pub const WATCH: Duration = Duration::from_millis(50);

/// An address nothing listens on: every proxy variable points here, so any HTTP client the
/// tool makes fails at once instead of reaching the network.
pub const NO_PROXY_HERE: &str = "http://127.0.0.1:9";

/// Why a child gave no output.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The scratch directory could not be written, or the tool not started.
    #[error("{0}")]
    Setup(String),
    /// It was stopped at a limit.
    #[error("{0}")]
    Stopped(Stopped),
    /// It failed, saying why on standard error.
    #[error("{stderr}")]
    Failed {
        /// What it printed on standard error (at most [`MAX_STDERR`] bytes of it).
        stderr: String,
    },
}

/// A scratch directory holding a bundle's files, removed when dropped.
pub struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    /// `tree`'s files written below a new directory in `parent`.
    pub fn of(parent: &Path, tree: &Tree) -> Result<Scratch, RunError> {
        std::fs::create_dir_all(parent)
            .map_err(|e| RunError::Setup(format!("creating {}: {e}", parent.display())))?;
        let dir = tempfile::Builder::new()
            .prefix("render-")
            .tempdir_in(parent)
            .map_err(|e| RunError::Setup(format!("creating a scratch directory: {e}")))?;
        let bundle = dir.path().join("bundle");
        let write = |path: &str, content: Option<&[u8]>| -> Result<(), RunError> {
            let at = inside(&bundle, path)?;
            let done = match content {
                None => std::fs::create_dir_all(&at),
                Some(bytes) => at
                    .parent()
                    .map_or(Ok(()), std::fs::create_dir_all)
                    .and_then(|()| std::fs::write(&at, bytes)),
            };
            done.map_err(|e| RunError::Setup(format!("writing {path}: {e}")))
        };
        std::fs::create_dir_all(&bundle)
            .map_err(|e| RunError::Setup(format!("creating the bundle directory: {e}")))?;
        for d in tree.dirs() {
            write(d, None)?;
        }
        for (path, content) in tree.files() {
            write(path, Some(content))?;
        }
        Ok(Scratch { dir })
    }

    /// The directory the bundle's files are in.
    pub fn bundle(&self) -> PathBuf {
        self.dir.path().join("bundle")
    }

    /// Writes `content` to `name` beside the bundle (values files); its path.
    pub fn extra(&self, name: &str, content: &[u8]) -> Result<PathBuf, RunError> {
        let at = inside(self.dir.path(), name)?;
        std::fs::write(&at, content)
            .map_err(|e| RunError::Setup(format!("writing {name}: {e}")))?;
        Ok(at)
    }

    /// Runs `program` with `args` in the bundle's directory, sandboxed, within `limits`; what
    /// it printed on standard output.
    pub async fn run(
        &self,
        program: &Path,
        args: &[String],
        limits: &Limits,
    ) -> Result<Vec<u8>, RunError> {
        let home = self.dir.path().join("home");
        std::fs::create_dir_all(home.join("tmp"))
            .map_err(|e| RunError::Setup(format!("creating the child's home: {e}")))?;
        let at = |sub: &str| home.join(sub).to_string_lossy().into_owned();
        let mut command = Command::new(program);
        command
            .args(args)
            .current_dir(self.bundle())
            .env_clear()
            .env("HOME", at(""))
            .env("XDG_CACHE_HOME", at("cache"))
            .env("XDG_CONFIG_HOME", at("config"))
            .env("XDG_DATA_HOME", at("data"))
            .env("HELM_CACHE_HOME", at("cache/helm"))
            .env("HELM_CONFIG_HOME", at("config/helm"))
            .env("HELM_DATA_HOME", at("data/helm"))
            .env("HELM_PLUGINS", at("plugins"))
            .env("KUBECONFIG", at("no-kubeconfig"))
            .env("TMPDIR", at("tmp"))
            .env("PATH", at("no-programs"))
            .env("HTTP_PROXY", NO_PROXY_HERE)
            .env("HTTPS_PROXY", NO_PROXY_HERE)
            .env("ALL_PROXY", NO_PROXY_HERE)
            .env("http_proxy", NO_PROXY_HERE)
            .env("https_proxy", NO_PROXY_HERE)
            .env("NO_PROXY", "")
            .env("GOMEMLIMIT", limits.go_memory_limit().to_string())
            .env("GOMAXPROCS", "1")
            .env("GOTRACEBACK", "none")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command
            .spawn()
            .map_err(|e| RunError::Setup(format!("starting {}: {e}", program.display())))?;
        let started = Instant::now();
        let pid = child.id();
        if let Some(pid) = pid {
            kernel_limits(pid, limits);
        }
        let printed = Arc::new(AtomicU64::new(0));
        let stdout = child
            .stdout
            .take()
            .map(|out| tokio::spawn(read_capped(out, limits.output, Some(printed.clone()))));
        let stderr = child
            .stderr
            .take()
            .map(|err| tokio::spawn(read_capped(err, MAX_STDERR, None)));
        let mut tick = tokio::time::interval(WATCH);
        let status = loop {
            tokio::select! {
                status = child.wait() => break Ok(status),
                _ = tick.tick() => {
                    let seen = Seen {
                        elapsed: started.elapsed(),
                        memory: pid.and_then(memory_of).unwrap_or(0),
                        output: printed.load(Ordering::Relaxed),
                    };
                    if let Some(stopped) = limits.check(&seen) {
                        let _ = child.start_kill();
                        let _ = child.wait().await;
                        break Err(stopped);
                    }
                }
            }
        };
        let out = match stdout {
            Some(task) => task.await.unwrap_or_default(),
            None => Vec::new(),
        };
        let err = match stderr {
            Some(task) => task.await.unwrap_or_default(),
            None => Vec::new(),
        };
        let status = status.map_err(RunError::Stopped)?;
        let status = status
            .map_err(|e| RunError::Setup(format!("waiting for {}: {e}", program.display())))?;
        let printed = printed.load(Ordering::Relaxed);
        if printed > limits.output {
            // It finished printing between two looks.
            return Err(RunError::Stopped(Stopped::Output(limits.output)));
        }
        if !status.success() {
            let stderr = String::from_utf8_lossy(&err).trim().to_owned();
            if out_of_memory(&stderr) {
                return Err(RunError::Stopped(Stopped::OutOfMemory(limits.memory)));
            }
            return Err(RunError::Failed {
                stderr: if stderr.is_empty() {
                    format!("it exited with {status} and said nothing")
                } else {
                    stderr
                },
            });
        }
        Ok(out)
    }
}

/// `path` (`/`-separated, relative) below `root`; refused when it would leave it.
fn inside(root: &Path, path: &str) -> Result<PathBuf, RunError> {
    let relative = Path::new(path);
    if relative
        .components()
        .any(|c| !matches!(c, Component::Normal(_)))
    {
        return Err(RunError::Setup(format!("{path:?} leaves the bundle")));
    }
    Ok(root.join(relative))
}

/// The kernel's limits on the child `pid`: its data segment (what Go's heap is mapped in)
/// at the memory limit, its CPU time at the time limit, and files it writes at 1 MiB (it has
/// nothing to write). Set as it starts; the resident-memory watch covers the instant before.
fn kernel_limits(pid: u32, limits: &Limits) {
    use rustix::process::{Pid, Resource, Rlimit, prlimit};
    let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
        return;
    };
    let cap = |n: u64| Rlimit {
        current: Some(n),
        maximum: Some(n),
    };
    for (resource, value) in [
        (Resource::Data, limits.memory),
        (Resource::Cpu, limits.time.as_secs().saturating_add(1)),
        (Resource::Fsize, 1024 * 1024),
        (Resource::Core, 0),
    ] {
        if let Err(e) = prlimit(Some(pid), resource, cap(value)) {
            tracing::warn!(?resource, error = %e, "could not limit a rendering child");
        }
    }
}

/// The resident memory of process `pid`, in bytes.
fn memory_of(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    resident(&status)
}

/// Reads `from` to its end, keeping at most `cap` bytes (one more, when there is more, so the
/// caller can tell) and counting everything read into `count`; what is beyond is read and
/// dropped, so that the child never blocks on a full pipe.
async fn read_capped(
    mut from: impl AsyncRead + Unpin,
    cap: u64,
    count: Option<Arc<AtomicU64>>,
) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if let Some(count) = &count {
            count.fetch_add(n as u64, Ordering::Relaxed);
        }
        let room = usize::try_from(cap.saturating_add(1))
            .unwrap_or(usize::MAX)
            .saturating_sub(kept.len());
        kept.extend_from_slice(&buffer[..n.min(room)]);
    }
    kept
}
