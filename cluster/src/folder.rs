//! The control plane's folder: what its supervisor writes there, its lock, and its clean-up.

use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Held by the supervisor for its whole life: one supervisor per folder.
pub const LOCK: &str = "supervisor.lock";
/// Every component's log, kept when the control plane stops.
pub const LOGS: &str = "logs";
/// Where `stop` asks a detached supervisor to stop (see [`super::detached`]).
pub const CONTROL: &str = "control";
/// Written once the control plane is up.
pub const READY: &str = "ready";
/// Shell assignments for the control plane's users (`KUBECONFIG`, ...).
pub const ENV: &str = "env";
/// The admin kubeconfig.
pub const KUBECONFIG: &str = "kubeconfig";

/// The supervisor's lock on its folder, released when dropped or when the process ends,
/// however it ends.
#[derive(Debug)]
pub struct Lock {
    _file: File,
    path: PathBuf,
}

impl Lock {
    /// Takes the folder's lock; `None` when another supervisor holds it.
    pub fn take(dir: &Path) -> Result<Option<Lock>> {
        let path = dir.join(LOCK);
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io_error(&path))?;
        match file.try_lock() {
            Ok(()) => Ok(Some(Lock { _file: file, path })),
            Err(TryLockError::WouldBlock) => Ok(None),
            Err(TryLockError::Error(e)) => Err(io_error(&path)(e)),
        }
    }

    /// Removes the lock file, then releases the lock: a waiting `stop` sees the folder free
    /// only once nothing is left to clean.
    pub fn release(self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Whether a supervisor holds the folder's lock.
pub fn is_held(dir: &Path) -> bool {
    is_locked(&dir.join(LOCK))
}

/// Whether some process holds a lock on the file at `path` (a missing file holds none).
pub fn is_locked(path: &Path) -> bool {
    File::open(path).is_ok_and(|f| matches!(f.try_lock_shared(), Err(TryLockError::WouldBlock)))
}

/// Removes every entry of `dir` but those named in `keep`; an entry that is already gone is
/// no error.
pub fn remove_all_but(dir: &Path, keep: &[&str]) -> Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_error(dir)(e)),
    };
    for entry in entries.flatten() {
        if keep.iter().any(|k| entry.file_name() == *k) {
            continue;
        }
        let path = entry.path();
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        let removed = if is_dir {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        match removed {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io_error(&path)(e)),
            _ => {}
        }
    }
    Ok(())
}

pub(crate) fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.display().to_string(),
        source,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn one_lock_per_folder_until_released_and_its_file_goes_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let first = Lock::take(dir.path()).unwrap().unwrap();
        assert!(is_held(dir.path()));
        assert!(Lock::take(dir.path()).unwrap().is_none());
        first.release();
        assert!(!is_held(dir.path()));
        assert!(!dir.path().join(LOCK).exists());
        assert!(Lock::take(dir.path()).unwrap().is_some());
    }

    #[test]
    fn clean_up_keeps_only_what_it_is_told_to() {
        let dir = tempfile::tempdir().unwrap();
        for d in ["logs", "etcd/member", "pki"] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        for f in ["logs/etcd.log", "etcd/member/wal", "kubeconfig", "env"] {
            std::fs::write(dir.path().join(f), "x").unwrap();
        }
        remove_all_but(dir.path(), &[LOGS]).unwrap();
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, ["logs"]);
        assert!(dir.path().join("logs/etcd.log").exists());
        // A folder that is gone already is nothing to clean.
        remove_all_but(&dir.path().join("gone"), &[]).unwrap();
    }
}
