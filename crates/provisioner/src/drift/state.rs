//! What drift is told by, as pure state: for each BundleDeployment, the resourceVersion each
//! applied object had when we applied it; for each watched group-kind, what its watch last saw
//! of our objects. An object whose version moved, or that is gone, has drifted.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::object::Key;

/// A group-kind, as `(group, kind)`.
pub type GroupKind = (String, String);

/// An object as a watch saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// The BundleDeployment its owner label names.
    pub owner: String,
    /// Its resourceVersion.
    pub version: String,
}

/// The applied versions and what the watches see.
#[derive(Debug, Default)]
pub struct State {
    applied: HashMap<String, BTreeMap<Key, String>>,
    /// Which BundleDeployment applied each object (the reverse of `applied`).
    owner_of: HashMap<Key, String>,
    live: HashMap<Key, Seen>,
    /// For each group-kind, the parts of its watch (namespaces, or `None`: everywhere) that
    /// have listed at least once, and how many parts it has.
    synced: HashMap<GroupKind, (BTreeSet<Option<String>>, usize)>,
}

/// The part of a group-kind's watch that listed: its namespace (`None`: everywhere), and how
/// many parts the watch has (one per namespace with namespaced RBAC).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// The namespace it watches, if only one.
    pub namespace: Option<String>,
    /// How many parts the group-kind's watch has.
    pub of: usize,
}

fn group_kind(key: &Key) -> GroupKind {
    (key.group.clone(), key.kind.clone())
}

impl State {
    /// `bd`'s objects were applied at these versions (its whole set, after a sync).
    pub fn remember(&mut self, bd: &str, applied: impl IntoIterator<Item = (Key, String)>) {
        self.forget(bd);
        let record: BTreeMap<Key, String> = applied.into_iter().collect();
        for key in record.keys() {
            self.owner_of.insert(key.clone(), bd.to_owned());
        }
        self.applied.insert(bd.to_owned(), record);
    }

    /// Some of `bd`'s objects were applied again (restored) at these versions.
    pub fn update(&mut self, bd: &str, applied: impl IntoIterator<Item = (Key, String)>) {
        if let Some(record) = self.applied.get_mut(bd) {
            for (key, version) in applied {
                self.owner_of.insert(key.clone(), bd.to_owned());
                record.insert(key, version);
            }
        }
    }

    /// `bd` is gone: nothing of it is remembered.
    pub fn forget(&mut self, bd: &str) {
        for key in self.applied.remove(bd).unwrap_or_default().into_keys() {
            if self.owner_of.get(&key).is_some_and(|o| o == bd) {
                self.owner_of.remove(&key);
            }
        }
    }

    /// `bd`'s objects that drifted since they were applied; `None` when that cannot be told
    /// (nothing remembered, or a watch that has not listed yet), so that everything is synced.
    pub fn drifted(&self, bd: &str) -> Option<Vec<Key>> {
        let record = self.applied.get(bd)?;
        let mut drifted = Vec::new();
        for (key, version) in record {
            let listed = self
                .synced
                .get(&group_kind(key))
                .is_some_and(|(parts, of)| parts.len() >= *of);
            if !listed {
                return None;
            }
            match self.live.get(key) {
                Some(seen) if seen.version == *version && seen.owner == bd => {}
                _ => drifted.push(key.clone()),
            }
        }
        Some(drifted)
    }

    /// A watch saw `key` created or changed: the BundleDeployment to look at again, when the
    /// object is not as we left it.
    pub fn seen(&mut self, key: Key, seen: Seen) -> Option<String> {
        let recorded = self.recorded(&key);
        let moved = match &recorded {
            Some((bd, version)) => *version != seen.version || *bd != seen.owner,
            None => false,
        };
        self.live.insert(key, seen);
        moved.then(|| recorded.map(|(bd, _)| bd)).flatten()
    }

    /// A watch saw `key` deleted (or lose our labels): its BundleDeployment, if it is ours.
    pub fn gone(&mut self, key: &Key) -> Option<String> {
        self.live.remove(key);
        self.recorded(key).map(|(bd, _)| bd)
    }

    /// A watch of `group_kind` (its `part`) listed what it holds (at start, or after it lost
    /// its place): what it saw replaces what was seen before in that part, and every
    /// BundleDeployment with an object there that is not as we left it is to be looked at
    /// again.
    pub fn relisted(
        &mut self,
        group_kind: GroupKind,
        part: Part,
        listed: impl IntoIterator<Item = (Key, Seen)>,
    ) -> BTreeSet<String> {
        let in_part = |k: &Key| {
            (k.group.as_str(), k.kind.as_str()) == (group_kind.0.as_str(), group_kind.1.as_str())
                && part
                    .namespace
                    .as_ref()
                    .is_none_or(|ns| k.namespace.as_ref() == Some(ns))
        };
        self.live.retain(|k, _| !in_part(k));
        self.live.extend(listed);
        let entry = self
            .synced
            .entry(group_kind.clone())
            .or_insert_with(|| (BTreeSet::new(), part.of));
        entry.0.insert(part.namespace.clone());
        entry.1 = part.of;
        let mut affected = BTreeSet::new();
        for (bd, record) in &self.applied {
            let drifted = record.iter().any(|(key, version)| {
                in_part(key)
                    && self
                        .live
                        .get(key)
                        .is_none_or(|s| s.version != *version || s.owner != *bd)
            });
            if drifted {
                affected.insert(bd.clone());
            }
        }
        affected
    }

    /// The group-kinds some remembered set holds (the watches still needed).
    pub fn group_kinds(&self) -> BTreeSet<GroupKind> {
        self.applied
            .values()
            .flat_map(|record| record.keys().map(group_kind))
            .collect()
    }

    /// The watch of `group_kind` stopped: nothing it saw is kept, and it must list again
    /// before drift of that kind can be told.
    pub fn unwatched(&mut self, group_kind: &GroupKind) {
        self.live.retain(|k, _| {
            (k.group.as_str(), k.kind.as_str()) != (group_kind.0.as_str(), group_kind.1.as_str())
        });
        self.synced.remove(group_kind);
    }

    /// The resourceVersion a watch last saw `key` at (`None`: not seen, or gone).
    pub fn live_version(&self, key: &Key) -> Option<&str> {
        self.live.get(key).map(|s| s.version.as_str())
    }

    /// How many objects are remembered and seen (for the memory figures).
    pub fn sizes(&self) -> (usize, usize) {
        (
            self.applied.values().map(BTreeMap::len).sum(),
            self.live.len(),
        )
    }

    fn recorded(&self, key: &Key) -> Option<(String, String)> {
        let bd = self.owner_of.get(key)?;
        let version = self.applied.get(bd)?.get(key)?;
        Some((bd.clone(), version.clone()))
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
