//! The components as child processes of the supervisor.
//!
//! Each runs under `setpriv --pdeathsig KILL`, so it dies with the supervisor even when the
//! supervisor is killed outright. (The parent-death signal follows the thread that forked the
//! child: the supervisor starts every component from its main thread, which lives as long as
//! the process.) A component is signalled only through its [`Child`] handle, after
//! `try_wait` says it has not been reaped, so its PID cannot have been reused.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use super::components::Component;
use super::folder::io_error;
use crate::error::{Error, Result};

/// How long a component may take to stop after SIGTERM before it gets SIGKILL.
pub const STOP_GRACE: Duration = Duration::from_secs(10);

/// How often [`Children::first_exit`] looks.
const POLL: Duration = Duration::from_millis(200);

/// The running components, in start order.
#[derive(Debug)]
pub struct Children {
    logs: PathBuf,
    procs: Mutex<Vec<(&'static str, Child)>>,
}

impl Children {
    /// No component yet; each will log to `logs/<name>.log`.
    pub fn new(logs: &Path) -> Children {
        Children {
            logs: logs.to_owned(),
            procs: Mutex::new(Vec::new()),
        }
    }

    fn procs(&self) -> MutexGuard<'_, Vec<(&'static str, Child)>> {
        self.procs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether any component was started.
    pub fn any(&self) -> bool {
        !self.procs().is_empty()
    }

    /// The process id of component `name`, while it runs.
    pub fn pid(&self, name: &str) -> Option<u32> {
        let mut procs = self.procs();
        let (_, child) = procs.iter_mut().find(|(n, _)| *n == name)?;
        matches!(child.try_wait(), Ok(None)).then(|| child.id())
    }

    /// The log file of component `name`.
    pub fn log(&self, name: &str) -> PathBuf {
        self.logs.join(format!("{name}.log"))
    }

    /// Starts `component`, its output in its log.
    pub fn start(&self, component: Component) -> Result<()> {
        let log_path = self.log(component.name);
        let log = std::fs::File::create(&log_path).map_err(io_error(&log_path))?;
        let err = log.try_clone().map_err(io_error(&log_path))?;
        let child = Command::new("setpriv")
            .args(["--pdeathsig", "KILL", "--"])
            .args(&component.argv)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .map_err(|e| Error::Cluster(format!("starting {}: {e}", component.name)))?;
        self.procs().push((component.name, child));
        Ok(())
    }

    /// Waits until some component exits; its name and exit status. Never returns while all
    /// run.
    pub async fn first_exit(&self) -> (&'static str, ExitStatus) {
        loop {
            let exited = self
                .procs()
                .iter_mut()
                .find_map(|(name, child)| Some((*name, child.try_wait().ok()??)));
            if let Some(exited) = exited {
                return exited;
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Stops every component, the last started first: SIGTERM, then SIGKILL after
    /// [`STOP_GRACE`]. Blocks until all have exited.
    pub fn stop_all(&self) {
        for (name, child) in self.procs().iter_mut().rev() {
            match olm_testkit::process::stop_child(child, STOP_GRACE) {
                Ok(true) => crate::log::log(&format!(
                    "{name} ignored SIGTERM for {}s; it was killed",
                    STOP_GRACE.as_secs()
                )),
                Ok(false) => {}
                Err(e) => crate::log::log(&format!("stopping {name}: {e}")),
            }
        }
    }

    /// The last `lines` lines of component `name`'s log.
    pub fn tail(&self, name: &str, lines: usize) -> String {
        let text = std::fs::read_to_string(self.log(name)).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}
