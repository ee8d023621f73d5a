//! The resolver's index over a set of catalogs: every bundle of every catalog as a candidate,
//! with its channel memberships and upgrade edges, deprecation, and dependencies parsed once.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use semver::Version;

use crate::fbc::Fbc;
use crate::fbc::property::Gvk;
use crate::range::blang;

/// A catalog given to the resolver.
#[derive(Debug, Clone)]
pub struct CatalogInput {
    /// Catalog name.
    pub name: String,
    /// Higher wins a tie between catalogs.
    pub priority: i32,
    /// Labels, matched by requests' catalog selectors.
    pub labels: BTreeMap<String, String>,
    /// Its content.
    pub fbc: Arc<Fbc>,
}

/// A catalog as the index keeps it.
#[derive(Debug, Clone)]
pub struct CatalogMeta {
    /// Catalog name.
    pub name: String,
    /// Priority.
    pub priority: i32,
    /// Labels.
    pub labels: BTreeMap<String, String>,
}

/// A bundle's place in one channel, with the upgrade edges of that entry.
#[derive(Debug, Clone)]
pub struct Membership {
    /// Channel name.
    pub channel: String,
    /// The bundle the entry replaces.
    pub replaces: Option<String>,
    /// Bundles the entry skips.
    pub skips: Vec<String>,
    /// Versions the entry upgrades from; `None` when absent or unparsable.
    pub skip_range: Option<blang::Range>,
}

/// A package dependency of a bundle.
#[derive(Debug, Clone)]
pub struct PackageDependency {
    /// The package needed.
    pub package: String,
    /// The acceptable versions (as written, for messages).
    pub range_text: String,
    /// The parsed range; `None` when unparsable, which no bundle satisfies.
    pub range: Option<blang::Range>,
}

/// One bundle of one catalog: a candidate for resolution.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Index into [`Index::catalogs`].
    pub catalog: usize,
    /// Bundle name.
    pub name: String,
    /// Package name.
    pub package: String,
    /// Bundle version.
    pub version: Version,
    /// Bundle image.
    pub image: String,
    /// `olm.bundle.mediatype`, when set.
    pub mediatype: Option<String>,
    /// Channels it is in, with their edges.
    pub memberships: Vec<Membership>,
    /// Whether an `olm.deprecations` entry names this bundle.
    pub deprecated: bool,
    /// GVKs it provides.
    pub provides: Vec<Gvk>,
    /// Packages it needs.
    pub requires_packages: Vec<PackageDependency>,
    /// GVKs it needs.
    pub requires_gvks: Vec<Gvk>,
}

impl Entry {
    /// Whether it is in `channel`.
    pub fn in_channel(&self, channel: &str) -> bool {
        self.memberships.iter().any(|m| m.channel == channel)
    }

    /// Whether it upgrades from `installed` (by name and, when known, version) along an edge of
    /// one of its channels (all of them, or only `channel` when given).
    pub fn is_successor_of(
        &self,
        name: &str,
        version: Option<&Version>,
        channel: Option<&str>,
    ) -> bool {
        self.memberships
            .iter()
            .filter(|m| channel.is_none_or(|c| m.channel == c))
            .any(|m| {
                m.replaces.as_deref() == Some(name)
                    || m.skips.iter().any(|s| s == name)
                    || version.is_some_and(|v| m.skip_range.as_ref().is_some_and(|r| r.matches(v)))
            })
    }
}

/// Every candidate bundle of a set of catalogs.
#[derive(Debug, Clone, Default)]
pub struct Index {
    /// The catalogs, in the order given.
    pub catalogs: Vec<CatalogMeta>,
    /// Every bundle of every catalog.
    pub entries: Vec<Entry>,
    /// Package name → entries of that package.
    pub by_package: HashMap<String, Vec<usize>>,
    /// GVK → entries that provide it.
    pub providers: HashMap<Gvk, Vec<usize>>,
}

impl Index {
    /// Indexes the catalogs. Bundles without a valid version are left out: a validated catalog
    /// has none.
    pub fn build(catalogs: &[CatalogInput]) -> Self {
        let mut index = Index::default();
        for (ci, catalog) in catalogs.iter().enumerate() {
            index.catalogs.push(CatalogMeta {
                name: catalog.name.clone(),
                priority: catalog.priority,
                labels: catalog.labels.clone(),
            });
            index.add_catalog(ci, &catalog.fbc);
        }
        index
    }

    fn add_catalog(&mut self, ci: usize, fbc: &Fbc) {
        let mut memberships: HashMap<(&str, &str), Vec<Membership>> = HashMap::new();
        for c in &fbc.channels {
            for e in &c.entries {
                memberships
                    .entry((c.package.as_str(), e.name.as_str()))
                    .or_default()
                    .push(Membership {
                        channel: c.name.clone(),
                        replaces: e.replaces.clone().filter(|r| !r.is_empty()),
                        skips: e.skips.clone(),
                        skip_range: e
                            .skip_range
                            .as_deref()
                            .and_then(|r| blang::Range::parse(r).ok()),
                    });
            }
        }
        let deprecated: HashSet<(&str, &str)> = fbc
            .deprecations
            .iter()
            .flat_map(|d| {
                d.entries
                    .iter()
                    .filter(|e| e.schema == crate::fbc::model::schemas::BUNDLE)
                    .map(move |e| (d.package.as_str(), e.name.as_str()))
            })
            .collect();
        for b in &fbc.bundles {
            let Some(version) = b.version.clone() else {
                continue;
            };
            let key = (b.package.as_str(), b.name.as_str());
            let entry = Entry {
                catalog: ci,
                name: b.name.clone(),
                package: b.package.clone(),
                version,
                image: b.image.clone(),
                mediatype: b.mediatype().map(str::to_owned),
                memberships: memberships.remove(&key).unwrap_or_default(),
                deprecated: deprecated.contains(&key),
                provides: b.provided_gvks().cloned().collect(),
                requires_packages: b
                    .required_packages()
                    .map(|r| PackageDependency {
                        package: r.package_name.clone(),
                        range_text: r.version_range.clone(),
                        range: blang::Range::parse(&r.version_range).ok(),
                    })
                    .collect(),
                requires_gvks: b.required_gvks().cloned().collect(),
            };
            let id = self.entries.len();
            self.by_package
                .entry(entry.package.clone())
                .or_default()
                .push(id);
            for g in &entry.provides {
                self.providers.entry(g.clone()).or_default().push(id);
            }
            self.entries.push(entry);
        }
    }

    /// The entries of `package` (empty when no catalog has it).
    pub fn package_entries(&self, package: &str) -> &[usize] {
        self.by_package
            .get(package)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }

    /// Preference order of candidates, best first: not deprecated, then highest version, then
    /// higher catalog priority; then catalog and bundle name, so the order is total.
    pub fn preference(&self, a: usize, b: usize) -> std::cmp::Ordering {
        let (ea, eb) = (&self.entries[a], &self.entries[b]);
        let (ca, cb) = (&self.catalogs[ea.catalog], &self.catalogs[eb.catalog]);
        ea.deprecated
            .cmp(&eb.deprecated)
            .then_with(|| eb.version.cmp(&ea.version))
            .then_with(|| cb.priority.cmp(&ca.priority))
            .then_with(|| ca.name.cmp(&cb.name))
            .then_with(|| ea.name.cmp(&eb.name))
    }

    /// `name (version, catalog)`, how messages name a bundle.
    pub fn describe(&self, e: usize) -> String {
        let entry = &self.entries[e];
        format!(
            "{} ({}, catalog {})",
            entry.name, entry.version, self.catalogs[entry.catalog].name
        )
    }
}
