//! Git trees are untrusted: a server can send any objects. Structured input (entries of a few
//! kinds over a small alphabet of names and link targets, hostile ones included) builds a
//! tree; two properties:
//!
//! 1. What comes out is safe: relative, normalized paths, within the size limit.
//! 2. Reading the directory `catalog` directly agrees with reading the whole tree and cutting
//!    it down to `catalog/`, whenever both succeed: the second path resolves the directory
//!    and its links with different bases.
#![no_main]

use std::collections::{BTreeMap, HashMap};

use catalogd_sources::git::tree::{Item, Kind, ObjectId, Objects, files};
use libfuzzer_sys::fuzz_target;

const MAX: u64 = 1 << 20;
const NAMES: [&str; 8] = ["catalog", "a.json", "b", "..", "sub", ".", "x/y", "c.yaml"];
const TARGETS: [&str; 8] = ["a.json", "../a.json", "/etc/passwd", "sub", "../../b", "sub/c.yaml", "b", "./a.json"];

enum Node {
    Dir(BTreeMap<String, Node>),
    Blob(Vec<u8>),
    Link(String),
    Submodule,
}

#[derive(Default)]
struct Memory {
    trees: HashMap<ObjectId, Vec<Item>>,
    blobs: HashMap<ObjectId, Vec<u8>>,
    next: u32,
}

impl Memory {
    fn id(&mut self) -> ObjectId {
        self.next += 1;
        let mut bytes = [0u8; 20];
        bytes[..4].copy_from_slice(&self.next.to_be_bytes());
        ObjectId::from_bytes_or_panic(&bytes)
    }

    fn store(&mut self, node: &Node) -> (Kind, ObjectId) {
        let id = self.id();
        match node {
            Node::Dir(entries) => {
                let items = entries
                    .iter()
                    .map(|(name, child)| {
                        let (kind, id) = self.store(child);
                        Item { name: name.as_bytes().to_vec(), kind, id }
                    })
                    .collect();
                self.trees.insert(id, items);
                (Kind::Tree, id)
            }
            Node::Blob(content) => {
                self.blobs.insert(id, content.clone());
                (Kind::Blob, id)
            }
            Node::Link(target) => {
                self.blobs.insert(id, target.as_bytes().to_vec());
                (Kind::Link, id)
            }
            Node::Submodule => (Kind::Submodule, id),
        }
    }
}

impl Objects for Memory {
    fn tree(&self, id: &ObjectId) -> Result<Vec<Item>, String> {
        self.trees.get(id).cloned().ok_or_else(|| format!("no tree {id}"))
    }
    fn size(&self, id: &ObjectId) -> Result<u64, String> {
        self.blobs.get(id).map(|b| b.len() as u64).ok_or_else(|| format!("no blob {id}"))
    }
    fn blob(&self, id: &ObjectId) -> Result<Vec<u8>, String> {
        self.blobs.get(id).cloned().ok_or_else(|| format!("no blob {id}"))
    }
}

/// Puts `leaf` at `path`, making directories on the way; a path through a non-directory is
/// skipped.
fn insert(root: &mut BTreeMap<String, Node>, path: &[&str], leaf: Node) {
    let Some((last, dirs)) = path.split_last() else { return };
    let mut dir = root;
    for part in dirs {
        let entry = dir.entry((*part).to_owned()).or_insert_with(|| Node::Dir(BTreeMap::new()));
        match entry {
            Node::Dir(children) => dir = children,
            _ => return,
        }
    }
    dir.insert((*last).to_owned(), leaf);
}

fn safe(out: &[(String, Vec<u8>)]) {
    let total: u64 = out.iter().map(|(_, c)| c.len() as u64).sum();
    assert!(total <= MAX, "{total} bytes past the limit");
    for (path, _) in out {
        assert!(!path.starts_with('/'), "{path}");
        assert!(path.split('/').all(|p| !p.is_empty() && p != "." && p != ".."), "{path:?}");
    }
}

// Entries of 4 bytes each: kind, depth and names, content or link target.
fuzz_target!(|data: &[u8]| {
    let mut root = BTreeMap::new();
    for chunk in data.chunks_exact(4) {
        let depth = 1 + (chunk[1] as usize % 3);
        let names: Vec<&str> = (0..depth)
            .map(|i| NAMES[(chunk[2] as usize >> (i * 3)) % NAMES.len()])
            .collect();
        let leaf = match chunk[0] % 4 {
            0 | 1 => Node::Blob(vec![chunk[3]; (chunk[3] % 5) as usize]),
            2 => Node::Link(TARGETS[chunk[3] as usize % TARGETS.len()].to_owned()),
            _ => Node::Submodule,
        };
        insert(&mut root, &names, leaf);
    }
    let mut memory = Memory::default();
    let (_, tree) = memory.store(&Node::Dir(root));

    let whole = files(&memory, tree, "", MAX, "fuzz");
    let direct = files(&memory, tree, "catalog", MAX, "fuzz");
    if let Ok(out) = &whole {
        safe(out);
    }
    if let Ok(out) = &direct {
        safe(out);
    }
    if let (Ok(whole), Ok(direct)) = (whole, direct) {
        let cut: Vec<(String, Vec<u8>)> = whole
            .into_iter()
            .filter_map(|(p, c)| p.strip_prefix("catalog/").map(|p| (p.to_owned(), c)))
            .collect();
        assert_eq!(cut, direct, "reading catalog/ directly disagrees with cutting the whole tree");
    }
});
