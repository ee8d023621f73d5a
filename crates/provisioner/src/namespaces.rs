//! The namespaces bundles may put objects in. Never the managers' own namespace: there a
//! bundle's Deployment could run as the provisioner's ServiceAccount (cluster-admin by default)
//! or mount its Secrets (TLS keys, pull credentials), so whoever may write a BundleDeployment
//! would hold the managers' credentials. And, when the admin lists them
//! (`--allowed-namespaces`), only the listed ones. A Namespace object of a bundle counts as
//! an object in the namespace it makes.

use std::fmt;
use std::str::FromStr;

/// One entry of `--allowed-namespaces`: a name, or a prefix ending in `*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NamespacePattern {
    /// Exactly this namespace.
    Exact(String),
    /// Every namespace starting with this.
    Prefix(String),
}

impl FromStr for NamespacePattern {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let (name, prefix) = match s.strip_suffix('*') {
            Some(p) => (p, true),
            None => (s, false),
        };
        let valid = name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && (prefix || !name.is_empty())
            && name.len() <= 63;
        if !valid {
            return Err(format!(
                "{s:?}: expected a namespace name, or a prefix ending in *"
            ));
        }
        Ok(if prefix {
            NamespacePattern::Prefix(name.to_owned())
        } else {
            NamespacePattern::Exact(name.to_owned())
        })
    }
}

impl fmt::Display for NamespacePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NamespacePattern::Exact(n) => f.write_str(n),
            NamespacePattern::Prefix(p) => write!(f, "{p}*"),
        }
    }
}

impl NamespacePattern {
    fn matches(&self, namespace: &str) -> bool {
        match self {
            NamespacePattern::Exact(n) => n == namespace,
            NamespacePattern::Prefix(p) => namespace.starts_with(p.as_str()),
        }
    }
}

/// Where bundles may put objects.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Namespaces {
    /// The managers' namespace (the provisioner's own), never allowed; empty: none.
    pub managers: String,
    /// When not empty, the only namespaces allowed.
    pub allowed: Vec<NamespacePattern>,
    /// The provisioner may write only in the allowed namespaces (`--namespaced-rbac`: the
    /// chart binds its apply role there alone), so cluster-scoped objects are refused up
    /// front rather than forbidden half-way through an install.
    pub namespaced_only: bool,
}

impl Namespaces {
    /// Why a bundle may not hold a cluster-scoped object, or `None` when it may.
    pub fn cluster_refusal(&self) -> Option<String> {
        self.namespaced_only.then(|| {
            "cluster-scoped objects are not installed: the provisioner may write only in its allowed namespaces (--namespaced-rbac)".to_owned()
        })
    }

    /// Whether these settings can hold: with namespaced RBAC the provisioner watches exactly
    /// the allowed namespaces, so they must be named, not matched by prefixes.
    pub fn check(&self) -> Result<(), String> {
        if !self.namespaced_only {
            return Ok(());
        }
        let prefixes: Vec<String> = self
            .allowed
            .iter()
            .filter(|p| matches!(p, NamespacePattern::Prefix(_)))
            .map(ToString::to_string)
            .collect();
        if self.allowed.is_empty() || !prefixes.is_empty() {
            return Err(format!(
                "--namespaced-rbac needs --allowed-namespaces to name the namespaces the apply role is bound in, each by its name{}",
                if prefixes.is_empty() {
                    String::new()
                } else {
                    format!(" (not {})", prefixes.join(", "))
                }
            ));
        }
        Ok(())
    }

    /// The namespaces the provisioner may write in, when it may write nowhere else.
    pub fn only(&self) -> Option<Vec<String>> {
        self.namespaced_only.then(|| {
            self.allowed
                .iter()
                .filter_map(|p| match p {
                    NamespacePattern::Exact(n) => Some(n.clone()),
                    NamespacePattern::Prefix(_) => None,
                })
                .collect()
        })
    }

    /// Why a bundle may not put an object in `namespace`, or `None` when it may.
    pub fn refusal(&self, namespace: &str) -> Option<String> {
        if !self.managers.is_empty() && namespace == self.managers {
            return Some(format!(
                "namespace {namespace:?} is the managers' own: a bundle's objects there could run as their ServiceAccounts or read their Secrets, so bundles never go there"
            ));
        }
        if !self.allowed.is_empty() && !self.allowed.iter().any(|p| p.matches(namespace)) {
            let list: Vec<String> = self.allowed.iter().map(ToString::to_string).collect();
            return Some(format!(
                "namespace {namespace:?} is not one the admin lets bundles use (--allowed-namespaces: {})",
                list.join(", ")
            ));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn patterns(list: &[&str]) -> Vec<NamespacePattern> {
        list.iter()
            .map(|p| p.parse().unwrap_or_else(|e| unreachable!("{e}")))
            .collect()
    }

    #[test]
    fn the_managers_namespace_is_never_allowed() {
        let n = Namespaces {
            managers: "olm-system".into(),
            ..Namespaces::default()
        };
        let why = n.refusal("olm-system").unwrap_or_default();
        assert!(why.contains("the managers' own"), "{why}");
        assert_eq!(n.refusal("shop"), None);
        // Not even when listed.
        let listed = Namespaces {
            managers: "olm-system".into(),
            allowed: patterns(&["olm-*"]),
            namespaced_only: false,
        };
        assert!(listed.refusal("olm-system").is_some());
        assert_eq!(listed.refusal("olm-shop"), None);
    }

    #[test]
    fn a_list_allows_only_its_names_and_prefixes() {
        let n = Namespaces {
            managers: String::new(),
            allowed: patterns(&["shop", "team-*"]),
            namespaced_only: false,
        };
        assert_eq!(n.cluster_refusal(), None);
        assert_eq!(n.only(), None);
        assert_eq!(n.refusal("shop"), None);
        assert_eq!(n.refusal("team-a"), None);
        let why = n.refusal("shopping").unwrap_or_default();
        assert_eq!(
            why,
            "namespace \"shopping\" is not one the admin lets bundles use (--allowed-namespaces: shop, team-*)"
        );
    }

    #[test]
    fn with_namespaced_rbac_cluster_scoped_objects_are_refused_and_only_names_are_watched() {
        let n = Namespaces {
            managers: "olm-system".into(),
            allowed: patterns(&["shop", "team-a"]),
            namespaced_only: true,
        };
        assert!(
            n.cluster_refusal()
                .is_some_and(|m| m.contains("--namespaced-rbac"))
        );
        assert_eq!(n.only(), Some(vec!["shop".to_owned(), "team-a".to_owned()]));
        assert_eq!(n.check(), Ok(()));
        // Prefixes, or no list, cannot be watched namespace by namespace.
        let prefixed = Namespaces {
            allowed: patterns(&["shop", "team-*"]),
            ..n.clone()
        };
        assert!(prefixed.check().is_err_and(|m| m.ends_with("(not team-*)")));
        let none = Namespaces {
            allowed: Vec::new(),
            ..n
        };
        assert!(none.check().is_err());
        assert_eq!(Namespaces::default().check(), Ok(()));
    }

    #[test]
    fn patterns_are_names_or_prefixes() {
        assert_eq!(
            "team-*".parse::<NamespacePattern>(),
            Ok(NamespacePattern::Prefix("team-".into()))
        );
        assert_eq!(
            "*".parse::<NamespacePattern>(),
            Ok(NamespacePattern::Prefix(String::new()))
        );
        assert!("Shop".parse::<NamespacePattern>().is_err());
        assert!("a*b".parse::<NamespacePattern>().is_err());
        assert!("".parse::<NamespacePattern>().is_err());
    }
}
