//! The kinds an admin lets bundles install (`--allowed-kinds`): a bundle holding any other
//! kind is refused before anything is applied, naming the first such object.
//!
//! The provisioner's RBAC lets it write every kind (a bundle may hold anything), so this flag
//! is what narrows what a BundleDeployment's author can make it create.

use std::fmt;
use std::str::FromStr;

use crate::object::{Key, Object};

/// One entry of `--allowed-kinds`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pattern {
    /// Every kind (`*`).
    Any,
    /// Every kind of a group (`*.apps`; `*.` for the core group).
    Group(String),
    /// One kind of a group (`Deployment.apps`; `ConfigMap` for the core group).
    Kind {
        /// The kind.
        kind: String,
        /// The group (`""`: core).
        group: String,
    },
}

impl FromStr for Pattern {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if s == "*" {
            return Ok(Pattern::Any);
        }
        let (kind, group) = s.split_once('.').unwrap_or((s, ""));
        let valid_kind = |k: &str| {
            k.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && k.chars().all(|c| c.is_ascii_alphanumeric())
        };
        let valid_group = group
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
        if !valid_group {
            return Err(format!("{s:?}: the group must be a DNS name"));
        }
        if kind == "*" {
            return Ok(Pattern::Group(group.to_owned()));
        }
        if !valid_kind(kind) {
            return Err(format!(
                "{s:?}: expected *, *.<group>, <Kind> or <Kind>.<group>"
            ));
        }
        Ok(Pattern::Kind {
            kind: kind.to_owned(),
            group: group.to_owned(),
        })
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pattern::Any => f.write_str("*"),
            Pattern::Group(g) => write!(f, "*.{g}"),
            Pattern::Kind { kind, group } if group.is_empty() => f.write_str(kind),
            Pattern::Kind { kind, group } => write!(f, "{kind}.{group}"),
        }
    }
}

impl Pattern {
    fn allows(&self, key: &Key) -> bool {
        match self {
            Pattern::Any => true,
            Pattern::Group(g) => *g == key.group,
            Pattern::Kind { kind, group } => *kind == key.kind && *group == key.group,
        }
    }
}

/// The kinds bundles may hold: every kind when no pattern is given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allowed(pub Vec<Pattern>);

/// An object of a kind the admin did not allow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{key} is of a kind the admin did not allow (--allowed-kinds {allowed}); nothing of this bundle was applied"
)]
pub struct NotAllowed {
    /// The first such object.
    pub key: Box<Key>,
    /// The flag's value, as given.
    pub allowed: String,
}

impl Allowed {
    /// Whether every object is of an allowed kind; else the first that is not.
    pub fn check(&self, objects: &[Object]) -> Result<(), NotAllowed> {
        if self.0.is_empty() {
            return Ok(());
        }
        match objects
            .iter()
            .find(|o| !self.0.iter().any(|p| p.allows(&o.key)))
        {
            None => Ok(()),
            Some(o) => Err(NotAllowed {
                key: Box::new(o.key.clone()),
                allowed: self
                    .0
                    .iter()
                    .map(Pattern::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object(api_version: &str, kind: &str, name: &str) -> Object {
        Object::from_manifest(
            json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}}),
        )
        .unwrap()
    }

    fn allowed(list: &[&str]) -> Allowed {
        Allowed(list.iter().map(|p| p.parse().unwrap()).collect())
    }

    #[test]
    fn no_patterns_allow_everything() {
        let objects = [object(
            "rbac.authorization.k8s.io/v1",
            "ClusterRoleBinding",
            "x",
        )];
        assert_eq!(Allowed::default().check(&objects), Ok(()));
    }

    #[test]
    fn a_kind_is_matched_with_its_group() {
        let a = allowed(&["ConfigMap", "Deployment.apps"]);
        assert_eq!(
            a.check(&[
                object("v1", "ConfigMap", "c"),
                object("apps/v1", "Deployment", "d")
            ]),
            Ok(())
        );
        // The same kind name in another group is another kind.
        let e = a
            .check(&[object("example.com/v1", "ConfigMap", "c")])
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "ConfigMap.example.com c is of a kind the admin did not allow (--allowed-kinds ConfigMap,Deployment.apps); nothing of this bundle was applied"
        );
    }

    #[test]
    fn a_group_wildcard_allows_its_kinds_only() {
        let a = allowed(&["*.apps", "*."]);
        assert_eq!(
            a.check(&[
                object("apps/v1", "StatefulSet", "s"),
                object("v1", "Secret", "s")
            ]),
            Ok(())
        );
        let e = a
            .check(&[object("rbac.authorization.k8s.io/v1", "ClusterRole", "r")])
            .unwrap_err();
        assert_eq!(e.key.kind, "ClusterRole");
    }

    #[test]
    fn the_first_object_not_allowed_is_named() {
        let a = allowed(&["ConfigMap"]);
        let e = a
            .check(&[
                object("v1", "ConfigMap", "ok"),
                object("v1", "Secret", "first"),
                object("v1", "Pod", "second"),
            ])
            .unwrap_err();
        assert_eq!(e.key.name, "first");
    }

    #[test]
    fn patterns_parse_and_print_back() {
        for p in [
            "*",
            "*.apps",
            "ConfigMap",
            "Deployment.apps",
            "Widget.example.com",
        ] {
            assert_eq!(p.parse::<Pattern>().unwrap().to_string(), p);
        }
        for bad in ["", "config map", "Deployment.Apps", "1Kind"] {
            assert!(bad.parse::<Pattern>().is_err(), "{bad}");
        }
    }
}
