//! Which requests can affect each other's resolution. Two requests interact only through a
//! package (the same one, or one a candidate of the other requires) or an API (one a candidate
//! provides or requires), so requests in different groups can be solved apart, and a change to
//! one group (a new spec, a new installed bundle) leaves the others' answers as they were.
//! The grouping looks at every bundle of a package, whatever the requests' filters: coarser than
//! needed, never too fine.

use foldhash::{HashMap, HashMapExt};

use super::index::Index;
use crate::fbc::property::Gvk;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key<'a> {
    Package(&'a str),
    Gvk(&'a Gvk),
}

#[derive(Default)]
struct UnionFind<'a> {
    parent: Vec<usize>,
    ids: HashMap<Key<'a>, usize>,
}

impl<'a> UnionFind<'a> {
    fn id(&mut self, key: Key<'a>) -> usize {
        let next = self.parent.len();
        let id = *self.ids.entry(key).or_insert(next);
        if id == next {
            self.parent.push(next);
        }
        id
    }

    fn find(&mut self, mut x: usize) -> usize {
        while self.parent[x] != x {
            self.parent[x] = self.parent[self.parent[x]];
            x = self.parent[x];
        }
        x
    }

    fn union(&mut self, a: usize, b: usize) {
        let (a, b) = (self.find(a), self.find(b));
        if a != b {
            self.parent[a.max(b)] = a.min(b);
        }
    }
}

/// For each of `packages` (the requested package names), the number of its group: packages
/// with the same number must be solved together. Numbers are dense, from 0, in order of first
/// appearance.
pub fn groups<'a>(index: &'a Index, packages: &[&'a str]) -> Vec<usize> {
    let mut uf = UnionFind::default();
    let mut roots = Vec::with_capacity(packages.len());
    for &p in packages {
        let root = uf.id(Key::Package(p));
        roots.push(root);
        for &e in index.package_entries(p) {
            let entry = &index.entries[e];
            for d in &entry.requires_packages {
                let other = uf.id(Key::Package(&d.package));
                uf.union(root, other);
            }
            for g in entry.provides.iter().chain(&entry.requires_gvks) {
                let other = uf.id(Key::Gvk(g));
                uf.union(root, other);
            }
        }
    }
    let mut numbers: HashMap<usize, usize> = HashMap::new();
    roots
        .into_iter()
        .map(|r| {
            let r = uf.find(r);
            let next = numbers.len();
            *numbers.entry(r).or_insert(next)
        })
        .collect()
}
