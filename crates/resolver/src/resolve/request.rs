//! What is asked of the resolver: one request per Operator, plus what is installed now.

use semver::Version;
use serde::{Deserialize, Serialize};

use std::collections::BTreeMap;
use std::sync::Arc;

use super::cluster::ClusterApis;
use super::index::Index;
use super::selector::LabelSelector;
use crate::fbc::property::Gvk;
use crate::range::masterminds;

/// How upgrades of an installed bundle are constrained.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum UpgradeConstraintPolicy {
    /// Only successors along the catalog's upgrade edges, or staying put.
    #[default]
    Enforce,
    /// Any version, up or down.
    Ignore,
}

/// A request for one package (an Operator's spec).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Request {
    /// How messages name the request (an Operator's name); the package name when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The package.
    pub package_name: String,
    /// A Masterminds version range; any version when absent or empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Only bundles in this channel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// `Enforce` (default) or `Ignore`.
    #[serde(default)]
    pub upgrade_constraint_policy: UpgradeConstraintPolicy,
    /// Which catalogs to consider; all when absent or empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog_selector: Option<LabelSelector>,
}

impl Request {
    /// How messages name the request.
    pub fn display_name(&self) -> String {
        match &self.name {
            Some(n) if n != &self.package_name => format!("{n} (package {:?})", self.package_name),
            _ => format!("{:?}", self.package_name),
        }
    }
}

/// A bundle installed now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Installed {
    /// Its package.
    pub package_name: String,
    /// The bundle name.
    pub bundle: String,
    /// Its version, when known; otherwise looked up in the catalogs (needed for skipRange).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// A request checked and compiled against an index.
#[derive(Debug, Clone)]
pub(crate) struct Compiled {
    pub request: Request,
    pub constraint: Option<masterminds::Constraint>,
    /// The installed bundle, when the upgrade edges apply (policy Enforce).
    pub from: Option<(String, Option<Version>)>,
    /// The group and kind of each CRD that a BundleDeployment other than this request's owns,
    /// with its owner: a bundle providing one of them is not chosen.
    pub foreign: Arc<BTreeMap<(String, String), String>>,
}

/// Why a bundle does not satisfy a request, in the order the filters apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Filter {
    Package,
    Catalog,
    Channel,
    Version,
    UpgradeEdge,
    /// It provides an API whose CRD another BundleDeployment owns.
    ApiOwned,
}

impl Compiled {
    pub fn new(
        request: &Request,
        installed: &[Installed],
        index: &Index,
        apis: &ClusterApis,
    ) -> Result<Self, String> {
        let constraint = match request.version.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(v) => Some(masterminds::Constraint::parse(v).map_err(|e| {
                format!(
                    "request {}: invalid version range {v:?}: {e}",
                    request.display_name()
                )
            })?),
        };
        let current = installed
            .iter()
            .find(|i| i.package_name == request.package_name);
        let from = match current {
            Some(i) if request.upgrade_constraint_policy == UpgradeConstraintPolicy::Enforce => {
                let version = match &i.version {
                    Some(v) => Some(crate::range::parse_bundle_version(v).map_err(|e| {
                        format!(
                            "installed bundle {:?} has an invalid version {v:?}: {e}",
                            i.bundle
                        )
                    })?),
                    None => index
                        .package_entries(&i.package_name)
                        .iter()
                        .map(|&e| &index.entries[e])
                        .find(|e| e.name == i.bundle)
                        .map(|e| e.version.clone()),
                };
                Some((i.bundle.clone(), version))
            }
            _ => None,
        };
        let mine = request.name.as_deref();
        let foreign = apis
            .owned
            .iter()
            .filter(|(_, owner)| Some(owner.as_str()) != mine)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Ok(Self {
            request: request.clone(),
            constraint,
            from,
            foreign: Arc::new(foreign),
        })
    }

    /// The first filter `e` fails, or `None` when it satisfies the request.
    pub fn rejects(&self, index: &Index, e: usize) -> Option<Filter> {
        let entry = &index.entries[e];
        let r = &self.request;
        if entry.package != r.package_name {
            return Some(Filter::Package);
        }
        if let Some(sel) = &r.catalog_selector
            && !sel.matches(&index.catalogs[entry.catalog].labels)
        {
            return Some(Filter::Catalog);
        }
        if let Some(ch) = &r.channel
            && !entry.in_channel(ch)
        {
            return Some(Filter::Channel);
        }
        if let Some(c) = &self.constraint
            && !c.matches(&entry.version)
        {
            return Some(Filter::Version);
        }
        if let Some((name, version)) = &self.from
            && entry.name != *name
            && !entry.is_successor_of(name, version.as_ref(), r.channel.as_deref())
        {
            return Some(Filter::UpgradeEdge);
        }
        if self.owned_api(entry).is_some() {
            return Some(Filter::ApiOwned);
        }
        None
    }

    /// The first API `entry` provides whose CRD another BundleDeployment owns, with its owner.
    pub fn owned_api<'a>(&'a self, entry: &'a super::index::Entry) -> Option<(&'a Gvk, &'a str)> {
        if self.foreign.is_empty() {
            return None;
        }
        entry.provides.iter().find_map(|g| {
            self.foreign
                .get(&(g.group.clone(), g.kind.clone()))
                .map(|owner| (g, owner.as_str()))
        })
    }

    /// Whether `e` satisfies the request.
    pub fn admits(&self, index: &Index, e: usize) -> bool {
        self.rejects(index, e).is_none()
    }

    /// The request's constraints as a phrase: `package "foo" in channel "stable" at version ">=1"`.
    pub fn describe_constraints(&self) -> String {
        let r = &self.request;
        let mut s = format!("package {:?}", r.package_name);
        if let Some(c) = &r.channel {
            s.push_str(&format!(" in channel {c:?}"));
        }
        if let Some(v) = &r.version {
            s.push_str(&format!(" at version {v:?}"));
        }
        if let Some(sel) = r.catalog_selector.as_ref().filter(|s| !s.is_empty()) {
            s.push_str(&format!(" from catalogs matching {sel}"));
        }
        s
    }
}
