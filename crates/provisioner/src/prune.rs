//! What an upgrade removes: the members of the applied set that the new set lacks, once the
//! whole new set has applied. Deletion removes every member. Either way CRDs come last and
//! are only candidates: one that still has custom resources is kept (unmarked), because
//! deleting a CRD deletes every custom resource of it.

use std::collections::BTreeSet;

use crate::marks::Ownership;
use crate::object::Key;
use crate::order::{Phase, phase};

/// What to remove, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Removal {
    /// Objects to delete, the reverse of apply order (what runs goes before what it needs).
    pub delete: Vec<Key>,
    /// CRDs to delete unless they still have custom resources (then: unmark and keep).
    pub crds: Vec<Key>,
}

impl Removal {
    /// Nothing to remove.
    pub fn is_empty(&self) -> bool {
        self.delete.is_empty() && self.crds.is_empty()
    }
}

/// The members of `live` (found by the set's label, with whose each is) that `keep` lacks.
/// Only objects that are ours are removed: a member label alone, which anyone can write, is
/// no reason to delete an object.
pub fn removal(live: impl IntoIterator<Item = (Key, Ownership)>, keep: &BTreeSet<Key>) -> Removal {
    let mut gone: Vec<Key> = live
        .into_iter()
        .filter(|(key, owner)| *owner == Ownership::Ours && !keep.contains(key))
        .map(|(key, _)| key)
        .collect();
    gone.sort_by(|a, b| phase(b).cmp(&phase(a)).then_with(|| a.cmp(b)));
    gone.dedup();
    let (crds, delete) = gone.into_iter().partition(|k| phase(k) == Phase::Crds);
    Removal { delete, crds }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::object::Key;

    fn key(group: &str, kind: &str, namespace: Option<&str>, name: &str) -> Key {
        Key::new(group, kind, namespace, name)
    }

    #[test]
    fn an_upgrade_removes_what_the_new_set_lacks_workloads_first_crds_apart() {
        let deployment = key("apps", "Deployment", Some("shop"), "web");
        let kept = key("", "ConfigMap", Some("shop"), "settings");
        let dropped = key("", "ConfigMap", Some("shop"), "old");
        let account = key("", "ServiceAccount", Some("shop"), "web");
        let crd = key(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            None,
            "w.example.com",
        );
        let live =
            [&account, &dropped, &kept, &crd, &deployment].map(|k| ((*k).clone(), Ownership::Ours));
        let keep = BTreeSet::from([kept.clone()]);
        let r = removal(live, &keep);
        assert_eq!(r.delete, [dropped, deployment, account]);
        assert_eq!(r.crds, [crd]);
        assert!(!r.is_empty());
    }

    #[test]
    fn objects_that_are_not_ours_are_never_removed() {
        let forged = key("", "Secret", Some("shop"), "forged");
        let other = key("", "Secret", Some("shop"), "other");
        let live = [
            (forged, Ownership::Unowned { managed_by: None }),
            (other, Ownership::Other("billing".into())),
        ];
        assert!(removal(live, &BTreeSet::new()).is_empty());
    }

    #[test]
    fn an_unchanged_set_removes_nothing() {
        let cm = key("", "ConfigMap", Some("shop"), "settings");
        let keep = BTreeSet::from([cm.clone()]);
        assert!(removal([(cm, Ownership::Ours)], &keep).is_empty());
    }
}
