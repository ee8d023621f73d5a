//! A bundle's file tree as a source unpacked it: files with their contents, and directories
//! (an empty directory matters: plain+v0 refuses any subdirectory of `manifests/`).

use std::collections::{BTreeMap, BTreeSet};

/// Files and directories by their path relative to the bundle's root, `/`-separated, without
/// a leading `/` or `.` components.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tree {
    files: BTreeMap<String, Vec<u8>>,
    dirs: BTreeSet<String>,
}

impl Tree {
    /// An empty tree.
    pub fn new() -> Tree {
        Tree::default()
    }

    /// Adds a file (and its parent directories).
    pub fn file(mut self, path: &str, content: impl Into<Vec<u8>>) -> Tree {
        let path = normal(path);
        self.add_parents(&path);
        self.files.insert(path, content.into());
        self
    }

    /// Adds a directory (and its parents).
    pub fn dir(mut self, path: &str) -> Tree {
        let path = normal(path);
        self.add_parents(&path);
        if !path.is_empty() {
            self.dirs.insert(path);
        }
        self
    }

    fn add_parents(&mut self, path: &str) {
        let mut end = 0;
        while let Some(i) = path[end..].find('/') {
            self.dirs.insert(path[..end + i].to_owned());
            end += i + 1;
        }
    }

    /// The bytes of every file together.
    pub fn bytes(&self) -> u64 {
        self.files.values().map(|c| c.len() as u64).sum()
    }

    /// The content of the file at `path`, if there is one.
    pub fn get(&self, path: &str) -> Option<&[u8]> {
        self.files.get(&normal(path)).map(Vec::as_slice)
    }

    /// Whether `path` is a directory.
    pub fn is_dir(&self, path: &str) -> bool {
        self.dirs.contains(&normal(path))
    }

    /// Every file, by path, in path order.
    pub fn files(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.files.iter().map(|(p, c)| (p.as_str(), c.as_slice()))
    }

    /// Every directory, by path, in path order.
    pub fn dirs(&self) -> impl Iterator<Item = &str> {
        self.dirs.iter().map(String::as_str)
    }

    /// The entries directly inside directory `dir`, in name order: each name, and the file's
    /// content (`None` for a directory).
    pub fn read_dir(&self, dir: &str) -> Vec<(&str, Option<&[u8]>)> {
        let dir = normal(dir);
        let prefix = if dir.is_empty() {
            String::new()
        } else {
            format!("{dir}/")
        };
        let direct = |p: &&String| {
            p.strip_prefix(prefix.as_str())
                .is_some_and(|rest| !rest.is_empty() && !rest.contains('/'))
        };
        let mut entries: Vec<(&str, Option<&[u8]>)> = self
            .dirs
            .iter()
            .filter(direct)
            .map(|d| (d.as_str(), None))
            .chain(
                self.files
                    .iter()
                    .filter(|(p, _)| direct(p))
                    .map(|(p, c)| (p.as_str(), Some(c.as_slice()))),
            )
            .collect();
        entries.sort_by(|a, b| a.0.cmp(b.0));
        entries
    }
}

/// `path` without leading `/`, `./` or trailing `/`, and with empty and `.` components dropped.
fn normal(path: &str) -> String {
    path.split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_are_implied_by_files_and_listed_one_level_at_a_time() {
        let tree = Tree::new()
            .file("manifests/a.yaml", "a")
            .file("/manifests/sub/b.yaml", "b")
            .dir("./manifests/empty/")
            .file("metadata/annotations.yaml", "m");
        assert!(tree.is_dir("manifests") && tree.is_dir("manifests/sub"));
        assert!(!tree.is_dir("manifests/a.yaml"));
        let names: Vec<_> = tree.read_dir("manifests").iter().map(|e| e.0).collect();
        assert_eq!(
            names,
            ["manifests/a.yaml", "manifests/empty", "manifests/sub"]
        );
        let root: Vec<_> = tree.read_dir("").iter().map(|e| e.0).collect();
        assert_eq!(root, ["manifests", "metadata"]);
        assert_eq!(tree.read_dir("manifests")[0].1, Some(&b"a"[..]));
        assert!(tree.read_dir("nothing").is_empty());
        assert_eq!(tree.get("/metadata/annotations.yaml"), Some(&b"m"[..]));
        assert_eq!(tree.get("metadata"), None);
    }
}
