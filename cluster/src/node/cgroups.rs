//! The node's cgroups: one folder named after the node in every cgroup hierarchy of this
//! machine (the kubelet's `cgroupRoot`; it makes `kubepods` and the Pods' cgroups below it).
//! Cgroups outlive the processes in them, so the supervisor removes them once the node's
//! processes are gone, and a node that takes an index first removes what a supervisor killed
//! outright left under it.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::folder::io_error;

/// How long the clean-up waits for the kernel to let go of the node's processes.
pub const RELEASE: Duration = Duration::from_secs(15);

/// Where cgroup hierarchies are mounted.
const CGROUP_FS: &str = "/sys/fs/cgroup";

/// The mount points of the cgroup hierarchies in `mounts` (the text of `/proc/self/mounts`).
pub fn hierarchies(mounts: &str) -> Vec<PathBuf> {
    mounts
        .lines()
        .filter_map(|l| {
            let mut fields = l.split_whitespace();
            let (_, point, kind) = (fields.next()?, fields.next()?, fields.next()?);
            let cgroup = kind == "cgroup" || kind == "cgroup2";
            (cgroup && point.starts_with(CGROUP_FS)).then(|| PathBuf::from(point))
        })
        .collect()
}

fn this_machines_hierarchies() -> Result<Vec<PathBuf>> {
    let mounts = std::fs::read_to_string("/proc/self/mounts")
        .map_err(io_error(Path::new("/proc/self/mounts")))?;
    Ok(hierarchies(&mounts))
}

/// Makes the cgroup `name` in every hierarchy.
pub fn create(name: &str) -> Result<()> {
    for h in this_machines_hierarchies()? {
        let dir = h.join(name);
        std::fs::create_dir_all(&dir).map_err(io_error(&dir))?;
    }
    Ok(())
}

/// Removes the cgroup `name` and everything below it in every hierarchy, deepest first
/// (a cgroup can only be removed once it has no children and no processes). Processes that are
/// being killed take a moment to leave: this retries for up to `patience`.
pub fn remove(name: &str, patience: Duration) -> Result<()> {
    let deadline = Instant::now() + patience;
    loop {
        let mut left = Vec::new();
        for h in this_machines_hierarchies()? {
            let root = h.join(name);
            if root.exists() {
                remove_tree(&root, &mut left);
            }
        }
        if left.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(Error::Cluster(format!(
                "cgroups still in use after {} s: {}",
                patience.as_secs(),
                left.join(", ")
            )));
        }
        // Waiting for killed processes to leave their cgroups, bounded by the deadline.
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Removes the cgroup folders under and at `dir`, deepest first; those that could not be
/// removed are added to `left`.
fn remove_tree(dir: &Path, left: &mut Vec<String>) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&entry.path(), left);
            }
        }
    }
    match std::fs::remove_dir(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            left.push(format!("{} ({e})", dir.display()));
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cgroup_mount_is_a_hierarchy_and_nothing_else_is() {
        let mounts = "\
tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0
cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0
cgroup /sys/fs/cgroup/systemd cgroup rw,relatime,name=systemd 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
proc /proc proc rw 0 0
";
        assert_eq!(
            hierarchies(mounts),
            [
                PathBuf::from("/sys/fs/cgroup/cpu"),
                "/sys/fs/cgroup/systemd".into(),
                "/sys/fs/cgroup/unified".into()
            ]
        );
        // A pure cgroup v2 machine has one.
        assert_eq!(
            hierarchies("cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n"),
            [PathBuf::from("/sys/fs/cgroup")]
        );
    }

    #[test]
    fn a_tree_of_folders_goes_deepest_first() {
        // Plain folders stand in for cgroups here (rmdir works on both the same way).
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let root = dir.path().join("olm-node-1");
        std::fs::create_dir_all(root.join("kubepods/besteffort/pod1/c1")).ok();
        std::fs::create_dir_all(root.join("kubepods/burstable")).ok();
        let mut left = Vec::new();
        remove_tree(&root, &mut left);
        assert!(left.is_empty(), "{left:?}");
        assert!(!root.exists());
    }
}
