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
    /// Group-kinds whose watch has listed them at least once.
    synced: BTreeSet<GroupKind>,
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
            if !self.synced.contains(&group_kind(key)) {
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

    /// A watch of `group_kind` listed what it holds (at start, or after it lost its place):
    /// what it saw replaces what was seen before, and every BundleDeployment with an object of
    /// that group-kind that is not as we left it is to be looked at again.
    pub fn relisted(
        &mut self,
        group_kind: GroupKind,
        listed: impl IntoIterator<Item = (Key, Seen)>,
    ) -> BTreeSet<String> {
        self.live
            .retain(|k, _| (k.group.as_str(), k.kind.as_str()) != (&group_kind.0, &group_kind.1));
        self.live.extend(listed);
        self.synced.insert(group_kind.clone());
        let mut affected = BTreeSet::new();
        for (bd, record) in &self.applied {
            let drifted = record.iter().any(|(key, version)| {
                group_kind == self::group_kind(key)
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
