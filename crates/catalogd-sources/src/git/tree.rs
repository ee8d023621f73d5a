//! The catalog files of a fetched commit: the blobs under the spec's directory, read straight
//! from the object database (nothing is checked out, so no file of the repository ever
//! touches catalogd's filesystem). The tree is untrusted, as a server can send any objects:
//! names that could climb out (`..`, `/`), symlinks that point out of the directory,
//! submodules and over-deep trees are refused, and the bytes read are limited.

use std::collections::BTreeMap;

pub use gix::ObjectId;

use crate::archive::resolve_links;
use crate::contract::{SourceError, reasons, too_large};
use olm_puller::paths::{normalize, parent};

/// What a tree entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A directory.
    Tree,
    /// A file (executable or not).
    Blob,
    /// A symbolic link; its blob holds the target.
    Link,
    /// A submodule (a commit of another repository).
    Submodule,
}

/// One entry of a tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// Its name, as stored (any bytes).
    pub name: Vec<u8>,
    /// What it is.
    pub kind: Kind,
    /// Its object.
    pub id: ObjectId,
}

/// Read access to the objects of a fetched repository.
pub trait Objects {
    /// The entries of tree `id`.
    fn tree(&self, id: &ObjectId) -> Result<Vec<Item>, String>;
    /// The size of blob `id`, read from its header alone.
    fn size(&self, id: &ObjectId) -> Result<u64, String>;
    /// The content of blob `id`.
    fn blob(&self, id: &ObjectId) -> Result<Vec<u8>, String>;
}

/// Each entry costs this many bytes of the limit besides its name and content, so a tree of
/// millions of empty files is as "large" as it is costly.
pub const ENTRY_COST: u64 = 64;
/// Directories nested deeper than this are refused.
pub const MAX_DEPTH: usize = 64;
/// A symlink's target longer than this is refused (git's own limit is the path maximum).
pub const MAX_LINK_TARGET: u64 = 4096;

/// The files under `directory` ("" for the root) of the tree `root`, as `(path relative to
/// the directory, content)` in path order. `at` names the commit in messages.
pub fn files(
    objects: &impl Objects,
    root: ObjectId,
    directory: &str,
    max_bytes: u64,
    at: &str,
) -> Result<Vec<(String, Vec<u8>)>, SourceError> {
    let read_failed =
        |e: String| SourceError::new(reasons::UNPACK_FAILED, format!("reading {at}: {e}"));
    let refuse = |path: &str, why: &str| {
        SourceError::new(
            reasons::UNPACK_FAILED,
            format!("{at}: {path:?} {why}; refusing the commit"),
        )
    };
    // Down to the directory, one tree at a time.
    let mut tree = root;
    let mut walked = String::new();
    for component in directory.split('/').filter(|c| !c.is_empty()) {
        walked = join(&walked, component);
        let items = objects.tree(&tree).map_err(read_failed)?;
        let item = items.iter().find(|i| i.name == component.as_bytes());
        match item.map(|i| (i.kind, i.id)) {
            Some((Kind::Tree, id)) => tree = id,
            Some((Kind::Link, _)) => {
                return Err(SourceError::new(
                    super::spec::INVALID_SPEC,
                    format!(
                        "{at}: git.directory component {walked:?} is a symlink; name the directory it points to"
                    ),
                ));
            }
            Some(_) => {
                return Err(SourceError::new(
                    reasons::SOURCE_NOT_FOUND,
                    format!("{at}: {walked:?} is not a directory"),
                ));
            }
            None => {
                return Err(SourceError::new(
                    reasons::SOURCE_NOT_FOUND,
                    format!("{at} has no directory {walked:?}"),
                ));
            }
        }
    }
    let shown = |path: &str| join(directory, path);

    let mut used: u64 = 0;
    let mut charge = |bytes: u64| {
        used = used.saturating_add(bytes);
        if used > max_bytes {
            Err(too_large(at, max_bytes, "the catalog directory"))
        } else {
            Ok(())
        }
    };
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut links: Vec<(String, String)> = Vec::new();
    let mut pending = vec![(String::new(), tree, 0usize)];
    while let Some((prefix, id, depth)) = pending.pop() {
        if depth > MAX_DEPTH {
            return Err(refuse(
                &shown(&prefix),
                &format!("is nested more than {MAX_DEPTH} directories deep"),
            ));
        }
        for item in objects.tree(&id).map_err(read_failed)? {
            let Some(name) = safe_name(&item.name) else {
                return Err(refuse(
                    &shown(&format!("{prefix}/{}", String::from_utf8_lossy(&item.name))),
                    "is not a plain file name",
                ));
            };
            let path = join(&prefix, name);
            charge(ENTRY_COST + path.len() as u64)?;
            match item.kind {
                Kind::Tree => pending.push((path, item.id, depth + 1)),
                Kind::Blob => {
                    charge(objects.size(&item.id).map_err(read_failed)?)?;
                    files.insert(path, objects.blob(&item.id).map_err(read_failed)?);
                }
                Kind::Link => {
                    let size = objects.size(&item.id).map_err(read_failed)?;
                    if size > MAX_LINK_TARGET {
                        return Err(refuse(&shown(&path), "is a symlink with an absurd target"));
                    }
                    let raw = objects.blob(&item.id).map_err(read_failed)?;
                    let target = String::from_utf8_lossy(&raw).into_owned();
                    if target.starts_with('/') {
                        return Err(refuse(
                            &shown(&path),
                            &format!("links to the absolute path {target:?}, outside the catalog"),
                        ));
                    }
                    let Some(resolved) = normalize(parent(&path), &target) else {
                        return Err(refuse(
                            &shown(&path),
                            &format!("links to {target:?}, outside the catalog directory"),
                        ));
                    };
                    links.push((path, resolved));
                }
                Kind::Submodule => {
                    return Err(refuse(
                        &shown(&path),
                        "is a submodule, which catalogd does not fetch",
                    ));
                }
            }
        }
    }
    // Links inside the directory stand for their target's content (a link to a directory, or
    // to nothing, adds nothing); they count towards the limit like any file.
    resolve_links(&mut files, &links, &mut charge)?;
    Ok(files.into_iter().collect())
}

/// `name` when it is one plain path component (git itself never stores others, but a server
/// can send any tree).
fn safe_name(name: &[u8]) -> Option<&str> {
    let name = std::str::from_utf8(name).ok()?;
    let plain =
        !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\', '\0']);
    plain.then_some(name)
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_owned()
    } else if name.is_empty() {
        prefix.to_owned()
    } else {
        format!("{prefix}/{name}")
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::collections::HashMap;

    /// An object database in memory: trees and blobs by id.
    #[derive(Default)]
    pub(crate) struct Memory {
        trees: HashMap<ObjectId, Vec<Item>>,
        blobs: HashMap<ObjectId, Vec<u8>>,
        next: u8,
    }

    impl Memory {
        fn id(&mut self) -> ObjectId {
            self.next += 1;
            ObjectId::from_bytes_or_panic(&[self.next; 20])
        }
        pub(crate) fn add_blob(&mut self, content: &[u8]) -> ObjectId {
            let id = self.id();
            self.blobs.insert(id, content.to_vec());
            id
        }
        pub(crate) fn add_tree(&mut self, items: Vec<(&str, Kind, ObjectId)>) -> ObjectId {
            let id = self.id();
            let items = items
                .into_iter()
                .map(|(n, kind, id)| Item {
                    name: n.as_bytes().to_vec(),
                    kind,
                    id,
                })
                .collect();
            self.trees.insert(id, items);
            id
        }
    }

    impl Objects for Memory {
        fn tree(&self, id: &ObjectId) -> Result<Vec<Item>, String> {
            self.trees
                .get(id)
                .cloned()
                .ok_or_else(|| format!("no tree {id}"))
        }
        fn size(&self, id: &ObjectId) -> Result<u64, String> {
            self.blobs
                .get(id)
                .map(|b| b.len() as u64)
                .ok_or_else(|| format!("no blob {id}"))
        }
        fn blob(&self, id: &ObjectId) -> Result<Vec<u8>, String> {
            self.blobs
                .get(id)
                .cloned()
                .ok_or_else(|| format!("no blob {id}"))
        }
    }

    /// A repository: README.md at the root, catalogs/ops/{catalog.yaml, more/x.json}.
    fn repo() -> (Memory, ObjectId) {
        let mut m = Memory::default();
        let readme = m.add_blob(b"# hello");
        let catalog = m.add_blob(b"catalog");
        let x = m.add_blob(b"{}");
        let more = m.add_tree(vec![("x.json", Kind::Blob, x)]);
        let ops = m.add_tree(vec![
            ("catalog.yaml", Kind::Blob, catalog),
            ("more", Kind::Tree, more),
        ]);
        let catalogs = m.add_tree(vec![("ops", Kind::Tree, ops)]);
        let root = m.add_tree(vec![
            ("README.md", Kind::Blob, readme),
            ("catalogs", Kind::Tree, catalogs),
        ]);
        (m, root)
    }

    fn names(files: &[(String, Vec<u8>)]) -> Vec<&str> {
        files.iter().map(|(n, _)| n.as_str()).collect()
    }

    #[test]
    fn the_directory_is_read_recursively_in_path_order() {
        let (m, root) = repo();
        let files = files(&m, root, "catalogs/ops", 1 << 20, "c").unwrap();
        assert_eq!(names(&files), ["catalog.yaml", "more/x.json"]);
        let all = super::files(&m, root, "", 1 << 20, "c").unwrap();
        assert_eq!(
            names(&all),
            [
                "README.md",
                "catalogs/ops/catalog.yaml",
                "catalogs/ops/more/x.json"
            ]
        );
    }

    #[test]
    fn a_missing_directory_or_a_file_is_not_found() {
        let (m, root) = repo();
        let err = files(&m, root, "catalogs/nope", 1 << 20, "c").unwrap_err();
        assert_eq!(err.reason, reasons::SOURCE_NOT_FOUND);
        assert!(err.message.contains("\"catalogs/nope\""), "{err}");
        let err = files(&m, root, "README.md", 1 << 20, "c").unwrap_err();
        assert!(err.message.contains("is not a directory"), "{err}");
    }

    #[test]
    fn links_inside_stand_for_their_target_and_links_out_are_refused() {
        let mut m = Memory::default();
        let content = m.add_blob(b"abc");
        let inside = m.add_blob(b"../real.json");
        let dir = m.add_tree(vec![("link.json", Kind::Link, inside)]);
        let ok = m.add_tree(vec![
            ("real.json", Kind::Blob, content),
            ("sub", Kind::Tree, dir),
        ]);
        let files = files(&m, ok, "", 1 << 20, "c").unwrap();
        assert_eq!(files[1], ("sub/link.json".to_owned(), b"abc".to_vec()));

        for target in [&b"../../secret"[..], b"/etc/passwd", b"../../../x"] {
            let out = m.add_blob(target);
            let sub = m.add_tree(vec![("l", Kind::Link, out)]);
            let root = m.add_tree(vec![("cat", Kind::Tree, sub)]);
            let err = super::files(&m, root, "cat", 1 << 20, "c").unwrap_err();
            assert!(err.message.contains("outside the catalog"), "{err}");
        }
        // A link out of the directory but inside the repository is refused too.
        let readme = m.add_blob(b"x");
        let up = m.add_blob(b"../README.md");
        let sub = m.add_tree(vec![("l", Kind::Link, up)]);
        let root = m.add_tree(vec![
            ("README.md", Kind::Blob, readme),
            ("cat", Kind::Tree, sub),
        ]);
        assert!(super::files(&m, root, "cat", 1 << 20, "c").is_err());
        // The directory itself may not be a symlink.
        let to_cat = m.add_blob(b"cat");
        let root = m.add_tree(vec![
            ("cat", Kind::Tree, sub),
            ("alias", Kind::Link, to_cat),
        ]);
        let err = super::files(&m, root, "alias", 1 << 20, "c").unwrap_err();
        assert_eq!(err.reason, super::super::spec::INVALID_SPEC);
    }

    #[test]
    fn hostile_names_and_submodules_are_refused() {
        for name in ["..", ".", "a/b", "", "a\\b"] {
            let mut m = Memory::default();
            let b = m.add_blob(b"x");
            let root = m.add_tree(vec![(name, Kind::Blob, b)]);
            let err = files(&m, root, "", 1 << 20, "c").unwrap_err();
            assert!(
                err.message.contains("not a plain file name"),
                "{name:?}: {err}"
            );
        }
        let mut m = Memory::default();
        let c = m.add_blob(b"");
        let root = m.add_tree(vec![("vendor", Kind::Submodule, c)]);
        let err = files(&m, root, "", 1 << 20, "c").unwrap_err();
        assert!(err.message.contains("submodule"), "{err}");
    }

    #[test]
    fn content_entries_and_links_count_towards_the_limit() {
        let mut m = Memory::default();
        let big = m.add_blob(&[b'x'; 1000]);
        let root = m.add_tree(vec![("a", Kind::Blob, big)]);
        assert!(files(&m, root, "", 1100, "c").is_ok());
        let err = files(&m, root, "", 999, "c").unwrap_err();
        assert_eq!(err.reason, reasons::CONTENT_TOO_LARGE);
        // A link doubles what it points at.
        let target = m.add_blob(b"a");
        let root = m.add_tree(vec![("a", Kind::Blob, big), ("b", Kind::Link, target)]);
        assert!(files(&m, root, "", 1300, "c").is_err());
        // Many empty files are not free.
        let empty = m.add_blob(b"");
        let many: Vec<String> = (0..100).map(|i| format!("f{i}")).collect();
        let root = m.add_tree(
            many.iter()
                .map(|n| (n.as_str(), Kind::Blob, empty))
                .collect(),
        );
        assert!(files(&m, root, "", 100 * ENTRY_COST, "c").is_err());
    }

    #[test]
    fn trees_nested_too_deep_are_refused() {
        let mut m = Memory::default();
        let b = m.add_blob(b"x");
        let mut t = m.add_tree(vec![("f", Kind::Blob, b)]);
        for _ in 0..=MAX_DEPTH {
            t = m.add_tree(vec![("d", Kind::Tree, t)]);
        }
        let err = files(&m, t, "", 1 << 20, "c").unwrap_err();
        assert!(err.message.contains("nested"), "{err}");
    }
}
