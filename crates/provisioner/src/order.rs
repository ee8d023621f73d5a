//! The order objects are applied in: CRDs first (the provisioner then waits until each is
//! Established, so custom resources of the same bundle install), then Namespaces, then
//! ServiceAccounts and RBAC (what workloads run as), then everything else. Pruning and
//! deletion go the other way.

use crate::object::{Key, Object};

/// A step of an apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    /// CustomResourceDefinitions.
    Crds,
    /// Namespaces.
    Namespaces,
    /// ServiceAccounts, Roles, ClusterRoles and their bindings.
    Identity,
    /// Everything else (custom resources included).
    Rest,
}

/// The phase `key` is applied in.
pub fn phase(key: &Key) -> Phase {
    match (key.group.as_str(), key.kind.as_str()) {
        ("apiextensions.k8s.io", "CustomResourceDefinition") => Phase::Crds,
        ("", "Namespace") => Phase::Namespaces,
        ("", "ServiceAccount")
        | (
            "rbac.authorization.k8s.io",
            "Role" | "ClusterRole" | "RoleBinding" | "ClusterRoleBinding",
        ) => Phase::Identity,
        _ => Phase::Rest,
    }
}

/// `objects` by phase, in phase order; within a phase, in the bundle's order.
pub fn by_phase(objects: Vec<Object>) -> Vec<(Phase, Vec<Object>)> {
    let mut phases: Vec<(Phase, Vec<Object>)> = Vec::new();
    let mut objects = objects;
    // A stable sort keeps the bundle's order within a phase.
    objects.sort_by_key(|o| phase(&o.key));
    for object in objects {
        let p = phase(&object.key);
        match phases.last_mut() {
            Some((last, group)) if *last == p => group.push(object),
            _ => phases.push((p, vec![object])),
        }
    }
    phases
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object(api_version: &str, kind: &str, name: &str) -> Object {
        Object::from_manifest(
            json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}}),
        )
        .unwrap_or_else(|e| unreachable!("{e}"))
    }

    #[test]
    fn crds_then_namespaces_then_identity_then_the_rest_each_in_bundle_order() {
        let objects = vec![
            object("example.com/v1", "Widget", "w"),
            object("apps/v1", "Deployment", "d"),
            object("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "b"),
            object("v1", "ServiceAccount", "sa"),
            object("v1", "Namespace", "ns"),
            object(
                "apiextensions.k8s.io/v1",
                "CustomResourceDefinition",
                "widgets.example.com",
            ),
            object("v1", "ConfigMap", "c"),
        ];
        let phases: Vec<(Phase, Vec<String>)> = by_phase(objects)
            .into_iter()
            .map(|(p, os)| (p, os.into_iter().map(|o| o.key.name).collect()))
            .collect();
        assert_eq!(
            phases,
            [
                (Phase::Crds, vec!["widgets.example.com".to_owned()]),
                (Phase::Namespaces, vec!["ns".to_owned()]),
                (Phase::Identity, vec!["b".to_owned(), "sa".to_owned()]),
                (
                    Phase::Rest,
                    vec!["w".to_owned(), "d".to_owned(), "c".to_owned()]
                ),
            ]
        );
    }

    #[test]
    fn a_kind_is_placed_by_its_group_too() {
        // A custom "Namespace" or "Role" of another group is not ours to hoist.
        let custom = object("example.com/v1", "Role", "r");
        assert_eq!(phase(&custom.key), Phase::Rest);
        let crd_v1beta1 = object(
            "apiextensions.k8s.io/v1beta1",
            "CustomResourceDefinition",
            "x",
        );
        assert_eq!(phase(&crd_v1beta1.key), Phase::Crds);
        assert!(by_phase(Vec::new()).is_empty());
    }
}
