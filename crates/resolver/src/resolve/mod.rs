//! Joint resolution: every request gets exactly one bundle of its package, at most one bundle
//! per package and at most one provider per GVK, dependencies satisfied by bundles chosen for
//! other requests. Solved with resolvo (CDCL); an unsatisfiable problem is explained in
//! sentences that name the smallest set of requests in conflict.

pub mod cluster;
mod each;
mod explain;
pub mod groups;
pub mod index;
mod provider;
pub mod request;
pub mod selector;

use resolvo::{Problem, Solver, UnsolvableOrCancelled};
use serde::Serialize;

pub use cluster::ClusterApis;
pub use each::{Outcome, resolve_each, resolve_each_on, resolve_each_within};
pub use groups::groups;
pub use index::{CatalogContent, CatalogInput, CatalogMeta, Deprecated, Index, Notice};
pub use request::{Installed, Request, UpgradeConstraintPolicy};
pub use selector::LabelSelector;

use provider::Provider;
use request::Compiled;

/// The bundle chosen for a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Resolved {
    /// Index of the request in the input.
    #[serde(skip)]
    pub request: usize,
    /// The chosen entry of the index.
    #[serde(skip)]
    pub entry: usize,
    /// Package name.
    pub package: String,
    /// Bundle name.
    pub name: String,
    /// Bundle version.
    pub version: String,
    /// Bundle image.
    pub image: String,
    /// The catalog it came from.
    pub catalog: String,
    /// Whether the catalog deprecates it (chosen only when nothing else fits).
    #[serde(skip)]
    pub deprecated: bool,
    /// Its `olm.bundle.mediatype`, when set.
    #[serde(skip)]
    pub mediatype: Option<String>,
}

impl Resolved {
    /// Entry `e` of `index`, chosen for request `request`.
    pub(crate) fn of(index: &Index, request: usize, e: usize) -> Self {
        let entry = &index.entries[e];
        Resolved {
            request,
            entry: e,
            package: entry.package.clone(),
            name: entry.name.clone(),
            version: entry.version.to_string(),
            image: entry.image.clone(),
            catalog: index.catalogs[entry.catalog].name.clone(),
            deprecated: entry.deprecated,
            mediatype: entry.mediatype.clone(),
        }
    }
}

/// Why no bundles were chosen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// A request is malformed (e.g. its version range does not parse).
    #[error("invalid request: {}", .0.join("; "))]
    InvalidRequest(Vec<String>),
    /// No choice of bundles satisfies every request; the sentences say why.
    #[error("unsatisfiable: {}", .0.join(" "))]
    Unsatisfiable(Vec<String>),
    /// Equally good bundles were found in catalogs of the same priority.
    #[error("ambiguous: {}", .0.join(" "))]
    Ambiguous(Vec<String>),
    /// The solve did not finish before its deadline: nothing was decided.
    #[error("timed out: {}", .0.join(" "))]
    TimedOut(Vec<String>),
}

impl ResolveError {
    /// The sentences of the error.
    pub fn sentences(&self) -> &[String] {
        match self {
            ResolveError::InvalidRequest(s)
            | ResolveError::Unsatisfiable(s)
            | ResolveError::Ambiguous(s)
            | ResolveError::TimedOut(s) => s,
        }
    }
}

/// Resolves every request jointly. The result has one entry per request, in request order.
pub fn resolve(
    index: &Index,
    requests: &[Request],
    installed: &[Installed],
) -> Result<Vec<Resolved>, ResolveError> {
    let mut compiled = Vec::new();
    let mut invalid = Vec::new();
    let apis = ClusterApis::default();
    for r in requests {
        match Compiled::new(r, installed, index, &apis) {
            Ok(c) => compiled.push(c),
            Err(e) => invalid.push(e),
        }
    }
    if !invalid.is_empty() {
        return Err(ResolveError::InvalidRequest(invalid));
    }
    // A request nothing satisfies needs no solver, and its explanation is the most precise.
    let empty: Vec<String> = compiled
        .iter()
        .filter(|c| {
            index
                .package_entries(&c.request.package_name)
                .iter()
                .all(|&e| !c.admits(index, e))
        })
        .map(|c| explain::no_candidates(index, c))
        .collect();
    if !empty.is_empty() {
        return Err(ResolveError::Unsatisfiable(empty));
    }

    let provider = Provider::new(index, &compiled, &apis);
    let mut solver = Solver::new(provider);
    let all: Vec<usize> = (0..compiled.len()).collect();
    let solution = match solve(&mut solver, &all) {
        Ok(s) => s,
        Err(conflict) => {
            return Err(ResolveError::Unsatisfiable(
                explain::conflict(&mut solver, &compiled, conflict).1,
            ));
        }
    };
    let chosen = solver.provider().chosen_bundles(&solution);
    let mut resolved = Vec::new();
    let mut ties = Vec::new();
    for (i, c) in compiled.iter().enumerate() {
        let Some(&e) = chosen
            .iter()
            .find(|&&e| index.entries[e].package == c.request.package_name)
        else {
            return Err(ResolveError::Unsatisfiable(vec![format!(
                "bundle for package {:?} not found in solution",
                c.request.package_name
            )]));
        };
        if let Some(sentence) = explain::tie(index, &compiled, e)
            && !ties.contains(&sentence)
        {
            ties.push(sentence);
        }
        resolved.push(Resolved::of(index, i, e));
    }
    if !ties.is_empty() {
        return Err(ResolveError::Ambiguous(ties));
    }
    Ok(resolved)
}

/// Solves with the root requirements of the given requests. The error carries resolvo's
/// conflict, absent only if the solve was cancelled (we never cancel).
pub(crate) fn solve(
    solver: &mut Solver<Provider<'_>>,
    requests: &[usize],
) -> Result<Vec<resolvo::SolvableId>, Option<resolvo::conflict::Conflict>> {
    let requirements = requests
        .iter()
        .map(|&i| solver.provider().request_requirement(i))
        .collect();
    match solver.solve(Problem::new().requirements(requirements)) {
        Ok(s) => Ok(s),
        Err(UnsolvableOrCancelled::Unsolvable(c)) => Err(Some(c)),
        Err(UnsolvableOrCancelled::Cancelled(_)) => Err(None),
    }
}
