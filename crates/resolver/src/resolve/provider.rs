//! The resolution problem in resolvo's terms.
//!
//! * Every package is a resolvo *name*; its bundles (from every catalog) are its solvables, so
//!   at most one bundle per package is chosen. Packages that no request names offer no
//!   candidates: a dependency must be satisfied by a bundle chosen for another request.
//! * Every GVK is a name too, with one solvable per bundle that provides it. A bundle requires
//!   its own solvable under each GVK it provides, so at most one provider per GVK is chosen, and
//!   an `olm.gvk.required` is a requirement on any solvable of that GVK, which in turn requires
//!   its bundle. A GVK the cluster already serves (a CRD or an aggregated API no
//!   BundleDeployment installed) is no requirement at all.
//! * Each request is a root requirement on its package, with a version set that applies the
//!   request's filters (catalog selector, channel, version range, upgrade edges).

use foldhash::{HashMap, HashMapExt, HashSet};
use std::fmt::{self, Display};

use resolvo::utils::{Pool, VersionSet};
use resolvo::{
    Candidates, Condition, ConditionId, ConditionalRequirement, Dependencies, DependencyProvider,
    HintDependenciesAvailable, Interner, KnownDependencies, NameId, SolvableId, SolverCache,
    StringId, VersionSetId, VersionSetUnionId,
};

use super::cluster::ClusterApis;
use super::index::Index;
use super::request::Compiled;
use crate::fbc::property::Gvk;

/// A resolvo name: a package or a GVK.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Name {
    Package(String),
    Gvk(Gvk),
}

impl Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Name::Package(p) => write!(f, "package {p:?}"),
            Name::Gvk(g) => write!(f, "API {g}"),
        }
    }
}

/// A solvable: a bundle, or a bundle's claim on a GVK it provides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Record {
    Bundle(usize),
    Provides(usize),
}

impl Display for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Record::Bundle(e) | Record::Provides(e) => write!(f, "#{e}"),
        }
    }
}

/// A resolvo version set: which solvables of a name qualify.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Set {
    /// Bundles that satisfy request `i`.
    Request(usize),
    /// Bundles in the range of dependency `dep` of bundle `entry`.
    Dependency { entry: usize, dep: usize },
    /// Exactly bundle `e` (or its claim on a GVK).
    Exactly(usize),
    /// Any provider.
    Any,
}

impl VersionSet for Set {
    type V = Record;
}

pub(crate) struct Provider<'a> {
    pub index: &'a Index,
    pub requests: &'a [Compiled],
    /// What the cluster serves: a required GVK it serves needs no bundle.
    apis: &'a ClusterApis,
    pub pool: Pool<Set, Name>,
    /// Packages some request names: only those offer candidates.
    requested: HashSet<String>,
    bundle_solvables: HashMap<usize, SolvableId>,
    gvk_solvables: HashMap<Gvk, Vec<SolvableId>>,
    /// Requests set aside before this problem (package, display name), for explanations.
    pub set_aside: Vec<(String, String)>,
    /// When the solver gives up (resolvo asks before each propagation round).
    pub deadline: Option<std::time::Instant>,
}

impl<'a> Provider<'a> {
    pub fn new(index: &'a Index, requests: &'a [Compiled], apis: &'a ClusterApis) -> Self {
        let pool = Pool::new();
        let requested: HashSet<String> = requests
            .iter()
            .map(|r| r.request.package_name.clone())
            .collect();
        let mut bundle_solvables = HashMap::new();
        let mut gvk_solvables: HashMap<Gvk, Vec<SolvableId>> = HashMap::new();
        for package in &requested {
            let name = pool.intern_package_name(Name::Package(package.clone()));
            for &e in index.package_entries(package) {
                bundle_solvables.insert(e, pool.intern_solvable(name, Record::Bundle(e)));
                for g in &index.entries[e].provides {
                    let gname = pool.intern_package_name(Name::Gvk(g.clone()));
                    gvk_solvables
                        .entry(g.clone())
                        .or_default()
                        .push(pool.intern_solvable(gname, Record::Provides(e)));
                }
            }
        }
        Self {
            index,
            requests,
            apis,
            pool,
            requested,
            bundle_solvables,
            gvk_solvables,
            set_aside: Vec::new(),
            deadline: None,
        }
    }

    /// The root requirement of request `i`.
    pub fn request_requirement(&self, i: usize) -> ConditionalRequirement {
        let name = self
            .pool
            .intern_package_name(Name::Package(self.requests[i].request.package_name.clone()));
        ConditionalRequirement::from(self.pool.intern_version_set(name, Set::Request(i)))
    }

    /// The bundle a solvable stands for.
    pub fn entry_of(&self, s: SolvableId) -> usize {
        match self.pool.resolve_solvable(s).record {
            Record::Bundle(e) | Record::Provides(e) => e,
        }
    }

    /// The bundles (index entries) of a solution, without the GVK claims.
    pub fn chosen_bundles(&self, solution: &[SolvableId]) -> Vec<usize> {
        solution
            .iter()
            .filter(|&&s| self.is_bundle(s))
            .map(|&s| self.entry_of(s))
            .collect()
    }

    /// Whether a solvable is a bundle (not a GVK claim).
    pub fn is_bundle(&self, s: SolvableId) -> bool {
        matches!(self.pool.resolve_solvable(s).record, Record::Bundle(_))
    }

    fn matches(&self, set: &Set, record: Record) -> bool {
        match (set, record) {
            (Set::Request(i), Record::Bundle(e)) => self.requests[*i].admits(self.index, e),
            (Set::Dependency { entry, dep }, Record::Bundle(e)) => {
                let d = &self.index.entries[*entry].requires_packages[*dep];
                let candidate = &self.index.entries[e];
                candidate.package == d.package
                    && d.range
                        .as_ref()
                        .is_some_and(|r| r.matches(&candidate.version))
            }
            (Set::Exactly(x), Record::Bundle(e) | Record::Provides(e)) => *x == e,
            (Set::Any, _) => true,
            _ => false,
        }
    }
}

impl Interner for Provider<'_> {
    type NameId = NameId;
    type SolvableId = SolvableId;

    fn display_solvable(&self, solvable: SolvableId) -> impl Display + '_ {
        let e = self.entry_of(solvable);
        match self.pool.resolve_solvable(solvable).record {
            Record::Bundle(_) => self.index.describe(e),
            Record::Provides(_) => format!("provided by {}", self.index.describe(e)),
        }
    }

    fn display_name(&self, name: NameId) -> impl Display + '_ {
        self.pool.resolve_package_name(name).to_string()
    }

    fn display_version_set(&self, version_set: VersionSetId) -> impl Display + '_ {
        match self.pool.resolve_version_set(version_set) {
            Set::Request(i) => self.requests[*i].describe_constraints(),
            Set::Dependency { entry, dep } => {
                format!(
                    "{:?}",
                    self.index.entries[*entry].requires_packages[*dep].range_text
                )
            }
            Set::Exactly(e) => self.index.entries[*e].name.clone(),
            Set::Any => "*".to_owned(),
        }
    }

    fn display_string(&self, string_id: StringId) -> impl Display + '_ {
        self.pool.resolve_string(string_id).to_owned()
    }

    fn version_set_name(&self, version_set: VersionSetId) -> NameId {
        self.pool.resolve_version_set_package_name(version_set)
    }

    fn solvable_name(&self, solvable: SolvableId) -> NameId {
        self.pool.resolve_solvable(solvable).name
    }

    fn version_sets_in_union(
        &self,
        union: VersionSetUnionId,
    ) -> impl Iterator<Item = VersionSetId> {
        self.pool.resolve_version_set_union(union)
    }

    fn resolve_condition(&self, condition: ConditionId) -> Condition {
        self.pool.resolve_condition(condition).clone()
    }
}

impl DependencyProvider for Provider<'_> {
    fn should_cancel_with_value(&self) -> Option<Box<dyn std::any::Any>> {
        self.deadline
            .filter(|d| std::time::Instant::now() >= *d)
            .map(|_| Box::new(()) as Box<dyn std::any::Any>)
    }

    async fn filter_candidates(
        &self,
        candidates: &[SolvableId],
        version_set: VersionSetId,
        inverse: bool,
    ) -> Vec<SolvableId> {
        let set = self.pool.resolve_version_set(version_set);
        candidates
            .iter()
            .copied()
            .filter(|&s| self.matches(set, self.pool.resolve_solvable(s).record) != inverse)
            .collect()
    }

    async fn get_candidates(&self, name: NameId) -> Option<Candidates> {
        let candidates = match self.pool.resolve_package_name(name) {
            Name::Package(p) if self.requested.contains(p) => self
                .index
                .package_entries(p)
                .iter()
                .filter_map(|e| self.bundle_solvables.get(e).copied())
                .collect(),
            Name::Package(_) => Vec::new(),
            Name::Gvk(g) => self.gvk_solvables.get(g).cloned().unwrap_or_default(),
        };
        Some(Candidates {
            candidates,
            hint_dependencies_available: HintDependenciesAvailable::All,
            ..Default::default()
        })
    }

    async fn sort_candidates(&self, _solver: &SolverCache<Self>, solvables: &mut [SolvableId]) {
        solvables.sort_by(|&a, &b| self.index.preference(self.entry_of(a), self.entry_of(b)));
    }

    async fn get_dependencies(&self, solvable: SolvableId) -> Dependencies {
        let mut requirements = Vec::new();
        match self.pool.resolve_solvable(solvable).record {
            Record::Bundle(e) => {
                let entry = &self.index.entries[e];
                for (dep, d) in entry.requires_packages.iter().enumerate() {
                    let name = self
                        .pool
                        .intern_package_name(Name::Package(d.package.clone()));
                    requirements.push(
                        self.pool
                            .intern_version_set(name, Set::Dependency { entry: e, dep })
                            .into(),
                    );
                }
                for g in entry.requires_gvks.iter().filter(|g| !self.apis.serves(g)) {
                    let name = self.pool.intern_package_name(Name::Gvk(g.clone()));
                    requirements.push(self.pool.intern_version_set(name, Set::Any).into());
                }
                for g in &entry.provides {
                    let name = self.pool.intern_package_name(Name::Gvk(g.clone()));
                    requirements.push(self.pool.intern_version_set(name, Set::Exactly(e)).into());
                }
            }
            Record::Provides(e) => {
                let name = self
                    .pool
                    .intern_package_name(Name::Package(self.index.entries[e].package.clone()));
                requirements.push(self.pool.intern_version_set(name, Set::Exactly(e)).into());
            }
        }
        Dependencies::Known(KnownDependencies {
            requirements,
            constrains: Vec::new(),
        })
    }
}
