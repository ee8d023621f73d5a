//! The applied set as a Kubernetes ApplySet (KEP-3659, the convention `kubectl apply --prune
//! --applyset` reads): the BundleDeployment is the parent; every member carries
//! `applyset.kubernetes.io/part-of: <id>`; the parent records which group-kinds and
//! namespaces the set spans, so what to prune is found by listing those alone.

use std::collections::BTreeSet;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

use crate::object::Key;
use crate::order::{Phase, phase};

/// The member label; its value is the parent's id.
pub const PART_OF: &str = "applyset.kubernetes.io/part-of";
/// The parent's id label.
pub const ID: &str = "applyset.kubernetes.io/id";
/// The parent's tooling annotation (`<tool>/<version>`): tools leave others' sets alone.
pub const TOOLING: &str = "applyset.kubernetes.io/tooling";
/// The parent's annotation listing the members' group-kinds (`Kind.group`, `Kind` for core).
pub const GROUP_KINDS: &str = "applyset.kubernetes.io/contains-group-kinds";
/// The parent's annotation listing namespaces of members beyond its own (a cluster-scoped
/// parent has none of its own, so every member namespace is listed).
pub const NAMESPACES: &str = "applyset.kubernetes.io/additional-namespaces";
/// The parent's annotation listing the CRDs of the set by name (ours, beyond KEP-3659): a CRD
/// carries no owner reference, so this record, not its labels, proves it was applied.
pub const CRDS: &str = "olm-rs.io/applied-crds";
/// The parent's annotation listing the Namespaces of the set by name (ours, as for CRDs: a
/// Namespace carries no owner reference, so that no garbage collection deletes it and what it
/// holds past the keep rule).
pub const NAMESPACE_OBJECTS: &str = "olm-rs.io/applied-namespaces";
/// The parent's annotation naming the install namespace of a registry+v1 set (ours): a
/// namespace the user named is no Namespace of the set, yet moving away from it leaves what
/// users keep there behind, so the move check needs it recorded.
pub const INSTALL_NAMESPACE: &str = "olm-rs.io/install-namespace";
/// Our tooling value.
pub const OUR_TOOLING: &str = "olm-provisioner/v1";
/// The label on a CRD that lets kubectl take its custom resources as ApplySet parents (the
/// chart's BundleDeployment CRD carries it).
pub use olm_api::bundle_deployment::APPLYSET_PARENT_TYPE_LABEL as PARENT_TYPE;

/// The id of the set whose parent is `name` in `namespace` (`""` when cluster-scoped) of
/// `kind` in `group`: `applyset-<base64url(sha256("name.namespace.kind.group"))>-v1`.
pub fn id(name: &str, namespace: &str, kind: &str, group: &str) -> String {
    let digest = Sha256::digest(format!("{name}.{namespace}.{kind}.{group}"));
    format!("applyset-{}-v1", URL_SAFE_NO_PAD.encode(digest))
}

/// A group-kind as the annotation writes it.
pub fn group_kind(group: &str, kind: &str) -> String {
    if group.is_empty() {
        kind.to_owned()
    } else {
        format!("{kind}.{group}")
    }
}

/// What the parent records of a set: its group-kinds and its members' namespaces.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Spans {
    /// `Kind.group` of every member.
    pub group_kinds: BTreeSet<String>,
    /// Every namespace a member is in.
    pub namespaces: BTreeSet<String>,
    /// The name of every CRD member.
    pub crds: BTreeSet<String>,
    /// The name of every Namespace member.
    pub namespace_objects: BTreeSet<String>,
    /// The install namespace, for a set that has one (registry+v1).
    pub install_namespace: Option<String>,
}

impl Spans {
    /// The spans of a set of members (their namespaces as they will be applied).
    pub fn of<'a>(members: impl IntoIterator<Item = &'a Key>) -> Spans {
        let mut spans = Spans::default();
        for key in members {
            spans.group_kinds.insert(group_kind(&key.group, &key.kind));
            if let Some(ns) = &key.namespace {
                spans.namespaces.insert(ns.clone());
            }
            match phase(key) {
                Phase::Crds => {
                    spans.crds.insert(key.name.clone());
                }
                Phase::Namespaces => {
                    spans.namespace_objects.insert(key.name.clone());
                }
                Phase::Identity | Phase::Rest => {}
            }
        }
        spans
    }

    /// These spans, of a set installed in `namespace`.
    pub fn installed_in(mut self, namespace: Option<&str>) -> Spans {
        self.install_namespace = namespace.map(str::to_owned);
        self
    }

    /// The annotation values (sorted, comma-separated).
    pub fn annotations(&self) -> [(&'static str, String); 5] {
        let join = |set: &BTreeSet<String>| set.iter().cloned().collect::<Vec<_>>().join(",");
        [
            (GROUP_KINDS, join(&self.group_kinds)),
            (NAMESPACES, join(&self.namespaces)),
            (CRDS, join(&self.crds)),
            (NAMESPACE_OBJECTS, join(&self.namespace_objects)),
            (
                INSTALL_NAMESPACE,
                self.install_namespace.clone().unwrap_or_default(),
            ),
        ]
    }

    /// The spans a parent's annotations record (missing ones: empty).
    pub fn parse(
        group_kinds: Option<&str>,
        namespaces: Option<&str>,
        crds: Option<&str>,
        namespace_objects: Option<&str>,
        install_namespace: Option<&str>,
    ) -> Spans {
        let split = |v: Option<&str>| {
            v.unwrap_or_default()
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        };
        Spans {
            group_kinds: split(group_kinds),
            namespaces: split(namespaces),
            crds: split(crds),
            namespace_objects: split(namespace_objects),
            install_namespace: install_namespace
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(str::to_owned),
        }
    }

    /// Both spans together: what must be listed to find every member of an old set and a new
    /// one (pruning lists the union, so that nothing recorded by either is missed).
    pub fn union(&self, other: &Spans) -> Spans {
        Spans {
            group_kinds: self
                .group_kinds
                .union(&other.group_kinds)
                .cloned()
                .collect(),
            namespaces: self.namespaces.union(&other.namespaces).cloned().collect(),
            crds: self.crds.union(&other.crds).cloned().collect(),
            namespace_objects: self
                .namespace_objects
                .union(&other.namespace_objects)
                .cloned()
                .collect(),
            install_namespace: other
                .install_namespace
                .clone()
                .or_else(|| self.install_namespace.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::object::Key;

    fn key(group: &str, kind: &str, namespace: Option<&str>, name: &str) -> Key {
        Key::new(group, kind, namespace, name)
    }

    #[test]
    fn the_id_is_kubectls() {
        // kubectl's own test (k8s.io/kubectl pkg/cmd/apply/apply_test.go, the ApplySet parent
        // Secret "my-set" in namespace "test") expects this id.
        assert_eq!(
            id("my-set", "test", "Secret", ""),
            "applyset-0eFHV8ySqp7XoShsGvyWFQD3s96yqwHmzc4e0HR1dsY-v1"
        );
        let bd = id("example", "", "BundleDeployment", "core.rukpak.io");
        assert!(bd.starts_with("applyset-") && bd.ends_with("-v1"));
        // A label value: at most 63 characters, alphanumerics at both ends.
        assert!(bd.len() <= 63, "{bd}");
    }

    #[test]
    fn spans_list_sorted_group_kinds_and_namespaces_and_read_back() {
        let members = [
            key("apps", "Deployment", Some("shop"), "web"),
            key("", "ConfigMap", Some("shop"), "a"),
            key("", "ConfigMap", Some("audit"), "b"),
            key(
                "apiextensions.k8s.io",
                "CustomResourceDefinition",
                None,
                "x.example.com",
            ),
        ];
        let spans = Spans::of(&members);
        let [
            (gk_key, gks),
            (ns_key, nss),
            (crd_key, crds),
            (nso_key, nsos),
            (home_key, home),
        ] = spans.annotations();
        assert_eq!(home_key, INSTALL_NAMESPACE);
        assert_eq!(home, "");
        assert_eq!(gk_key, GROUP_KINDS);
        assert_eq!(
            gks,
            "ConfigMap,CustomResourceDefinition.apiextensions.k8s.io,Deployment.apps"
        );
        assert_eq!(ns_key, NAMESPACES);
        assert_eq!(nss, "audit,shop");
        assert_eq!(crd_key, CRDS);
        assert_eq!(crds, "x.example.com");
        assert_eq!(nso_key, NAMESPACE_OBJECTS);
        assert_eq!(nsos, "");
        assert_eq!(
            Spans::parse(
                Some(&gks),
                Some(&nss),
                Some(&crds),
                Some(&nsos),
                Some(&home)
            ),
            spans
        );
        assert_eq!(
            Spans::parse(None, Some(""), None, None, None),
            Spans::default()
        );
        let home = spans.clone().installed_in(Some("shop"));
        let [.., (_, recorded)] = home.annotations();
        assert_eq!(recorded, "shop");
        assert_eq!(
            Spans::parse(None, None, None, None, Some("shop")).install_namespace,
            Some("shop".into())
        );
        // The new set's install namespace wins over the old one's.
        assert_eq!(
            Spans::default()
                .installed_in(Some("old"))
                .union(&home)
                .install_namespace,
            Some("shop".into())
        );
        let ns = Spans::of(&[key("", "Namespace", None, "shop")]);
        assert_eq!(ns.namespace_objects, BTreeSet::from(["shop".to_owned()]));
        let other = Spans::of(&[key("", "Secret", Some("x"), "s")]);
        let both = spans.union(&other);
        assert!(both.group_kinds.contains("Secret") && both.namespaces.contains("x"));
        assert_eq!(both.group_kinds.len(), 4);
    }
}
