//! The resolver's index over a set of catalogs: every bundle of every catalog as a candidate,
//! with its channel memberships and upgrade edges, deprecation, and dependencies parsed once.

use std::collections::BTreeMap;

// foldhash, seeded per process, instead of SipHash: the keys are names from catalogs of bounded
// size, and hashing them was a tenth of building the index and resolving.
use foldhash::{HashMap, HashMapExt};
use std::sync::Arc;

use semver::Version;

use crate::fbc::Fbc;
use crate::fbc::model::schemas;
use crate::fbc::property::{Gvk, Property};
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

/// An entry in an index: a catalog's entry, shared (never copied) by every index that holds
/// the catalog, and which of the index's catalogs it is from. It reads as the [`Entry`].
#[derive(Debug, Clone)]
pub struct Indexed {
    /// Index into [`Index::catalogs`].
    pub catalog: usize,
    /// The bundle.
    pub entry: Arc<Entry>,
}

impl std::ops::Deref for Indexed {
    type Target = Entry;

    fn deref(&self) -> &Entry {
        &self.entry
    }
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

/// Deprecation notices of one package in one catalog, with the catalog's messages.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PackageDeprecations {
    /// The package-level notice.
    pub package: Option<String>,
    /// Channel name → notice.
    pub channels: HashMap<String, String>,
    /// Bundle name → notice.
    pub bundles: HashMap<String, String>,
}

/// What a deprecation notice is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Deprecated {
    /// The whole package.
    Package,
    /// A channel the request names.
    Channel,
    /// The chosen bundle.
    Bundle,
}

/// A deprecation notice that applies to a resolved bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// What is deprecated.
    pub what: Deprecated,
    /// The catalog's message.
    pub message: String,
}

/// What resolution needs of one catalog's content, without the content itself: built once per
/// content and shared by every index that includes the catalog.
#[derive(Debug, Clone, Default)]
pub struct CatalogContent {
    /// Every bundle with a valid version.
    pub entries: Vec<Arc<Entry>>,
    /// Package name → its deprecation notices.
    pub deprecations: HashMap<String, PackageDeprecations>,
}

impl CatalogContent {
    /// Extracts what resolution needs from a parsed catalog, taking its strings rather than
    /// copying them (the first version copied every name, `skips` list and GVK, and building
    /// the index cost more than deppy's whole problem). Bundles without a valid version are
    /// left out: a validated catalog has none.
    pub fn from_fbc(fbc: Fbc) -> Self {
        let Fbc {
            channels,
            bundles,
            deprecations: notices,
            ..
        } = fbc;
        // package → bundle → its channel entries.
        let mut memberships: HashMap<String, HashMap<String, Vec<Membership>>> = HashMap::new();
        for c in channels {
            let of_package = match memberships.get_mut(c.package.as_str()) {
                Some(m) => m,
                None => memberships.entry(c.package).or_default(),
            };
            for e in c.entries {
                let skip_range = e
                    .skip_range
                    .as_deref()
                    .and_then(|r| blang::Range::parse(r).ok());
                of_package.entry(e.name).or_default().push(Membership {
                    channel: c.name.clone(),
                    replaces: e.replaces.filter(|r| !r.is_empty()),
                    skips: e.skips,
                    skip_range,
                });
            }
        }
        let mut deprecations: HashMap<String, PackageDeprecations> = HashMap::new();
        for d in notices {
            let notices = deprecations.entry(d.package).or_default();
            for e in d.entries {
                match e.schema.as_str() {
                    schemas::PACKAGE => notices.package = Some(e.message),
                    schemas::CHANNEL => {
                        notices.channels.insert(e.name, e.message);
                    }
                    schemas::BUNDLE => {
                        notices.bundles.insert(e.name, e.message);
                    }
                    _ => {}
                }
            }
        }
        let mut entries = Vec::with_capacity(bundles.len());
        for b in bundles {
            let Some(version) = b.version else {
                continue;
            };
            let mut entry = Entry {
                memberships: memberships
                    .get_mut(b.package.as_str())
                    .and_then(|m| m.remove(b.name.as_str()))
                    .unwrap_or_default(),
                deprecated: deprecations
                    .get(b.package.as_str())
                    .is_some_and(|d| d.bundles.contains_key(b.name.as_str())),
                name: b.name,
                package: b.package,
                version,
                image: b.image,
                mediatype: None,
                provides: Vec::new(),
                requires_packages: Vec::new(),
                requires_gvks: Vec::new(),
            };
            for p in b.properties {
                match p {
                    Property::Gvk(g) => entry.provides.push(g),
                    Property::GvkRequired(g) => entry.requires_gvks.push(g),
                    Property::PackageRequired(r) => {
                        entry.requires_packages.push(PackageDependency {
                            range: blang::Range::parse(&r.version_range).ok(),
                            package: r.package_name,
                            range_text: r.version_range,
                        })
                    }
                    // The first, as `Bundle::mediatype` reads it.
                    Property::BundleMediatype(m) if entry.mediatype.is_none() => {
                        entry.mediatype = Some(m)
                    }
                    _ => {}
                }
            }
            entries.push(Arc::new(entry));
        }
        Self {
            entries,
            deprecations,
        }
    }

    /// As [`CatalogContent::from_fbc`], with only the packages `keep` accepts: a problem's
    /// requested packages are all its resolution can choose from (see `provider.rs`), so a
    /// one-shot solve need not index the rest.
    pub fn from_fbc_packages(mut fbc: Fbc, keep: &dyn Fn(&str) -> bool) -> Self {
        fbc.channels.retain(|c| keep(&c.package));
        fbc.bundles.retain(|b| keep(&b.package));
        fbc.deprecations.retain(|d| keep(&d.package));
        Self::from_fbc(fbc)
    }

    /// As [`CatalogContent::from_fbc`], from a catalog shared with others: its model is copied
    /// (without its blobs or the properties resolution does not read).
    pub fn from_shared(fbc: &Fbc) -> Self {
        Self::from_fbc(Fbc {
            blobs: Default::default(),
            packages: Vec::new(),
            channels: fbc.channels.clone(),
            bundles: fbc
                .bundles
                .iter()
                .map(|b| crate::fbc::Bundle {
                    name: b.name.clone(),
                    package: b.package.clone(),
                    image: b.image.clone(),
                    properties: b
                        .properties
                        .iter()
                        .filter(|p| !matches!(p, Property::Other { .. }))
                        .cloned()
                        .collect(),
                    version: b.version.clone(),
                    origin: b.origin.clone(),
                })
                .collect(),
            deprecations: fbc.deprecations.clone(),
        })
    }

    /// Roughly the heap bytes it holds (strings and lists), for a cache's accounting.
    pub fn approx_bytes(&self) -> usize {
        let entry = |e: &Entry| {
            std::mem::size_of::<Entry>()
                + e.name.len()
                + e.package.len()
                + e.image.len()
                + e.mediatype.as_ref().map_or(0, String::len)
                + e.memberships
                    .iter()
                    .map(|m| {
                        std::mem::size_of::<Membership>()
                            + m.channel.len()
                            + m.replaces.as_ref().map_or(0, String::len)
                            + m.skips.iter().map(|s| s.len() + 24).sum::<usize>()
                            + if m.skip_range.is_some() { 64 } else { 0 }
                    })
                    .sum::<usize>()
                + (e.provides.len() + e.requires_gvks.len()) * (std::mem::size_of::<Gvk>() + 48)
                + e.requires_packages
                    .iter()
                    .map(|d| {
                        std::mem::size_of::<PackageDependency>()
                            + d.package.len()
                            + d.range_text.len()
                            + 64
                    })
                    .sum::<usize>()
        };
        let notices: usize = self
            .deprecations
            .iter()
            .map(|(p, d)| {
                p.len()
                    + d.package.as_ref().map_or(0, String::len)
                    + d.channels
                        .iter()
                        .chain(&d.bundles)
                        .map(|(k, v)| k.len() + v.len() + 48)
                        .sum::<usize>()
                    + 128
            })
            .sum();
        std::mem::size_of::<Self>() + self.entries.iter().map(|e| entry(e)).sum::<usize>() + notices
    }
}

/// Every candidate bundle of a set of catalogs.
#[derive(Debug, Clone, Default)]
pub struct Index {
    /// The catalogs, in the order given.
    pub catalogs: Vec<CatalogMeta>,
    /// Every bundle of every catalog.
    pub entries: Vec<Indexed>,
    /// Package name → entries of that package.
    pub by_package: HashMap<String, Vec<usize>>,
    /// GVK → entries that provide it.
    pub providers: HashMap<Gvk, Vec<usize>>,
    /// Each catalog's content, in the order of `catalogs` (for deprecation notices).
    pub contents: Vec<Arc<CatalogContent>>,
}

impl Index {
    /// Indexes the catalogs. Bundles without a valid version are left out: a validated catalog
    /// has none.
    pub fn build(catalogs: &[CatalogInput]) -> Self {
        let parts: Vec<(CatalogMeta, Arc<CatalogContent>)> = catalogs
            .iter()
            .map(|c| {
                (
                    CatalogMeta {
                        name: c.name.clone(),
                        priority: c.priority,
                        labels: c.labels.clone(),
                    },
                    Arc::new(CatalogContent::from_shared(&c.fbc)),
                )
            })
            .collect();
        Self::from_contents(parts)
    }

    /// Indexes catalogs whose content was extracted already (and may be shared with other
    /// indexes).
    pub fn from_contents(
        catalogs: impl IntoIterator<Item = (CatalogMeta, Arc<CatalogContent>)>,
    ) -> Self {
        let mut index = Index::default();
        for (ci, (meta, content)) in catalogs.into_iter().enumerate() {
            index.catalogs.push(meta);
            index.entries.reserve(content.entries.len());
            for entry in &content.entries {
                let id = index.entries.len();
                // Keys are cloned only when new: most entries share their package's key.
                match index.by_package.get_mut(entry.package.as_str()) {
                    Some(ids) => ids.push(id),
                    None => {
                        index.by_package.insert(entry.package.clone(), vec![id]);
                    }
                }
                for g in &entry.provides {
                    match index.providers.get_mut(g) {
                        Some(ids) => ids.push(id),
                        None => {
                            index.providers.insert(g.clone(), vec![id]);
                        }
                    }
                }
                index.entries.push(Indexed {
                    catalog: ci,
                    entry: entry.clone(),
                });
            }
            index.contents.push(content);
        }
        index
    }

    /// The deprecation notices that apply to bundle `e` when requested in `channel`: its
    /// package's, the channel's (only a channel the request names, as upstream) and its own.
    pub fn notices(&self, e: usize, channel: Option<&str>) -> Vec<Notice> {
        let entry = &self.entries[e];
        let Some(d) = self
            .contents
            .get(entry.catalog)
            .and_then(|c| c.deprecations.get(&entry.package))
        else {
            return Vec::new();
        };
        let mut notices = Vec::new();
        if let Some(m) = &d.package {
            notices.push(Notice {
                what: Deprecated::Package,
                message: m.clone(),
            });
        }
        if let Some(m) = channel.and_then(|c| d.channels.get(c)) {
            notices.push(Notice {
                what: Deprecated::Channel,
                message: m.clone(),
            });
        }
        if let Some(m) = d.bundles.get(&entry.name) {
            notices.push(Notice {
                what: Deprecated::Bundle,
                message: m.clone(),
            });
        }
        notices
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
