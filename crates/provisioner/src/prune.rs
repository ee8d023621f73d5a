//! What an upgrade removes: the members of the applied set that the new set lacks, once the
//! whole new set has applied. Deletion removes every member. Members are proven, never
//! inferred from labels (see [`crate::marks::applied_by`] and the parent's record of CRDs), and
//! each is deleted by its uid. Namespaces and CRDs come last and are only candidates: one that
//! still holds what the BundleDeployment did not apply (a user's objects in the Namespace, the
//! custom resources of the CRD) is kept, unmarked, because deleting it would delete them.

use std::collections::BTreeSet;

use crate::object::Key;
use crate::order::{Phase, phase};

/// An object proven to be a member of the set, with the uid it is deleted by (a precondition:
/// an object replaced meanwhile by someone else's of the same name is not deleted).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Member {
    /// The object.
    pub key: Key,
    /// Its uid, as found.
    pub uid: String,
}

/// What to remove, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Removal {
    /// Objects to delete, the reverse of apply order (what runs goes before what it needs).
    pub delete: Vec<Member>,
    /// Namespaces to delete unless they hold what the set did not apply (then: unmark, keep).
    pub namespaces: Vec<Member>,
    /// CRDs to delete unless they still have custom resources (then: unmark and keep).
    pub crds: Vec<Member>,
}

impl Removal {
    /// Nothing to remove.
    pub fn is_empty(&self) -> bool {
        self.delete.is_empty() && self.namespaces.is_empty() && self.crds.is_empty()
    }
}

/// The members of `live` that `keep` lacks.
pub fn removal(live: impl IntoIterator<Item = Member>, keep: &BTreeSet<Key>) -> Removal {
    let mut gone: Vec<Member> = live
        .into_iter()
        .filter(|m| !keep.contains(&m.key))
        .collect();
    gone.sort_by(|a, b| {
        phase(&b.key)
            .cmp(&phase(&a.key))
            .then_with(|| a.key.cmp(&b.key))
    });
    gone.dedup_by(|a, b| a.key == b.key);
    let mut removal = Removal::default();
    for member in gone {
        match phase(&member.key) {
            Phase::Crds => removal.crds.push(member),
            Phase::Namespaces => removal.namespaces.push(member),
            Phase::Identity | Phase::Rest => removal.delete.push(member),
        }
    }
    removal
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::object::Key;

    fn member(group: &str, kind: &str, namespace: Option<&str>, name: &str) -> Member {
        Member {
            key: Key::new(group, kind, namespace, name),
            uid: format!("uid-{name}"),
        }
    }

    #[test]
    fn an_upgrade_removes_what_the_new_set_lacks_workloads_first_namespaces_and_crds_apart() {
        let deployment = member("apps", "Deployment", Some("shop"), "web");
        let kept = member("", "ConfigMap", Some("shop"), "settings");
        let dropped = member("", "ConfigMap", Some("shop"), "old");
        let account = member("", "ServiceAccount", Some("shop"), "web");
        let namespace = member("", "Namespace", None, "shop");
        let crd = member(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            None,
            "w.example.com",
        );
        let live = [&account, &dropped, &kept, &crd, &namespace, &deployment].map(|m| m.clone());
        let keep = BTreeSet::from([kept.key.clone()]);
        let r = removal(live, &keep);
        assert_eq!(r.delete, [dropped, deployment, account]);
        assert_eq!(r.namespaces, [namespace]);
        assert_eq!(r.crds, [crd]);
        assert!(!r.is_empty());
    }

    #[test]
    fn an_unchanged_set_removes_nothing() {
        let cm = member("", "ConfigMap", Some("shop"), "settings");
        let keep = BTreeSet::from([cm.key.clone()]);
        assert!(removal([cm], &keep).is_empty());
    }
}
