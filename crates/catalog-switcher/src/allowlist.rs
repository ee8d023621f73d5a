//! Which resources object variables may read: an allowlist set by the admin
//! (`--allowed-resources`), matched against the resource a template's kind maps to. Anything
//! else is `NotAllowed`, so a template cannot make the switcher read what the admin did not
//! choose (Secrets above all), and the chart's RBAC grants read on exactly this list.

use std::fmt;

/// One allowed resource: `[GROUP/]VERSION/RESOURCE[@NAMESPACE]` (`v1/configmaps@olm-system`,
/// `example.com/v1/samples`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowed {
    /// API group; empty for the core group.
    pub group: String,
    /// API version.
    pub version: String,
    /// Resource (plural, lower case).
    pub resource: String,
    /// The only namespace it may be read in; any namespace (and cluster scope) when `None`.
    pub namespace: Option<String>,
}

impl std::str::FromStr for Allowed {
    type Err = String;

    fn from_str(entry: &str) -> Result<Self, Self::Err> {
        let entry = entry.trim();
        let (gvr, namespace) = match entry.split_once('@') {
            Some((gvr, ns)) if !ns.is_empty() => (gvr, Some(ns.to_owned())),
            Some(_) => return Err(format!("{entry:?}: the namespace after '@' is empty")),
            None => (entry, None),
        };
        let parts: Vec<&str> = gvr.split('/').collect();
        let (group, version, resource) = match parts.as_slice() {
            [version, resource] => ("", *version, *resource),
            ["", version, resource] => ("", *version, *resource),
            [group, version, resource] => (*group, *version, *resource),
            _ => {
                return Err(format!(
                    "{entry:?} is not [GROUP/]VERSION/RESOURCE[@NAMESPACE] (for example v1/configmaps@olm-system or example.com/v1/samples)"
                ));
            }
        };
        if version.is_empty() || resource.is_empty() {
            return Err(format!(
                "{entry:?}: the version and the resource are required"
            ));
        }
        if resource.chars().any(|c| c.is_ascii_uppercase()) {
            return Err(format!(
                "{entry:?}: {resource:?} is a kind; name the resource (plural, lower case)"
            ));
        }
        Ok(Allowed {
            group: group.to_owned(),
            version: version.to_owned(),
            resource: resource.to_owned(),
            namespace,
        })
    }
}

impl fmt::Display for Allowed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.group.is_empty() {
            write!(f, "{}/", self.group)?;
        }
        write!(f, "{}/{}", self.version, self.resource)?;
        if let Some(ns) = &self.namespace {
            write!(f, "@{ns}")?;
        }
        Ok(())
    }
}

/// The allowlist.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allowlist(pub Vec<Allowed>);

impl Allowlist {
    /// Whether the resource `group/version/resource` may be read in `namespace` (`None` for a
    /// cluster-scoped object).
    pub fn allows(
        &self,
        group: &str,
        version: &str,
        resource: &str,
        namespace: Option<&str>,
    ) -> bool {
        self.0.iter().any(|a| {
            a.group == group
                && a.version == version
                && a.resource == resource
                && a.namespace
                    .as_deref()
                    .is_none_or(|ns| Some(ns) == namespace)
        })
    }
}

impl fmt::Display for Allowlist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("empty: no object variables are allowed");
        }
        let entries: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        f.write_str(&entries.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(entries: &[&str]) -> Allowlist {
        Allowlist(entries.iter().map(|e| e.parse().unwrap()).collect())
    }

    #[test]
    fn entries_parse_and_print_back() {
        for entry in [
            "v1/configmaps@olm-system",
            "example.com/v1/samples",
            "apps/v1/deployments@ns",
        ] {
            assert_eq!(entry.parse::<Allowed>().unwrap().to_string(), entry);
        }
        assert_eq!(
            "/v1/configmaps".parse::<Allowed>().unwrap().to_string(),
            "v1/configmaps"
        );
        for bad in [
            "configmaps",
            "v1/ConfigMap",
            "a/b/c/d",
            "v1/configmaps@",
            "/v1/",
        ] {
            assert!(bad.parse::<Allowed>().is_err(), "{bad}");
        }
    }

    #[test]
    fn only_what_is_listed_is_allowed_and_namespaces_narrow_it() {
        let allow = list(&["v1/configmaps@olm-system", "example.com/v1/samples"]);
        assert!(allow.allows("", "v1", "configmaps", Some("olm-system")));
        assert!(!allow.allows("", "v1", "configmaps", Some("default")));
        assert!(!allow.allows("", "v1", "secrets", Some("olm-system")));
        assert!(allow.allows("example.com", "v1", "samples", Some("any")));
        assert!(allow.allows("example.com", "v1", "samples", None));
        assert!(!allow.allows("example.com", "v2", "samples", None));
        assert_eq!(
            allow.to_string(),
            "v1/configmaps@olm-system, example.com/v1/samples"
        );
        assert!(!Allowlist::default().allows("", "v1", "configmaps", None));
    }
}
