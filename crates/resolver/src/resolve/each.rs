//! Resolution in which a request that cannot be satisfied never blocks the others: each
//! request gets its own outcome. Requests that are invalid or have no candidate at all are set
//! aside first; then, while the rest conflict, the smallest conflicting set is set aside (each
//! of its requests fails with the explanation) and the others are solved as if it were absent.

use resolvo::Solver;

use super::cluster::ClusterApis;
use super::explain;
use super::index::Index;
use super::provider::Provider;
use super::request::{Compiled, Installed, Request};
use super::{ResolveError, Resolved};

/// What one request resolved to, or why it did not.
pub type Outcome = Result<Resolved, ResolveError>;

/// Resolves the requests jointly, with one outcome per request, in request order.
pub fn resolve_each(index: &Index, requests: &[Request], installed: &[Installed]) -> Vec<Outcome> {
    resolve_each_within(index, requests, installed, None)
}

/// [`resolve_each`], giving up at `deadline`: the requests not decided by then fail with
/// [`ResolveError::TimedOut`].
pub fn resolve_each_within(
    index: &Index,
    requests: &[Request],
    installed: &[Installed],
    deadline: Option<std::time::Instant>,
) -> Vec<Outcome> {
    resolve_each_on(
        index,
        requests,
        installed,
        &ClusterApis::default(),
        deadline,
    )
}

/// [`resolve_each_within`] on a cluster: its APIs satisfy GVK requirements, and a bundle
/// providing an API whose CRD another request's BundleDeployment owns is not chosen.
pub fn resolve_each_on(
    index: &Index,
    requests: &[Request],
    installed: &[Installed],
    apis: &ClusterApis,
    deadline: Option<std::time::Instant>,
) -> Vec<Outcome> {
    let timed_out = || {
        ResolveError::TimedOut(vec![
            "Resolution did not finish in time; it is retried.".to_owned(),
        ])
    };
    let mut outcomes: Vec<Option<Outcome>> = vec![None; requests.len()];
    let mut active: Vec<(usize, Compiled)> = Vec::new();
    for (i, r) in requests.iter().enumerate() {
        match Compiled::new(r, installed, index, apis) {
            Ok(c) => {
                let any = index
                    .package_entries(&r.package_name)
                    .iter()
                    .any(|&e| c.admits(index, e));
                if any {
                    active.push((i, c));
                } else {
                    let why = explain::no_candidates(index, &c);
                    outcomes[i] = Some(Err(ResolveError::Unsatisfiable(vec![why])));
                }
            }
            Err(e) => outcomes[i] = Some(Err(ResolveError::InvalidRequest(vec![e]))),
        }
    }
    while !active.is_empty() {
        // A fresh problem each round: a request set aside must not offer its package's bundles
        // to the others' dependencies.
        let compiled: Vec<Compiled> = active.iter().map(|(_, c)| c.clone()).collect();
        let mut provider = Provider::new(index, &compiled, apis);
        // Requests already failed: a dependency on their package is explained by them.
        provider.set_aside = requests
            .iter()
            .zip(&outcomes)
            .filter(|(_, o)| o.is_some())
            .map(|(r, _)| (r.package_name.clone(), r.display_name()))
            .collect();
        provider.deadline = deadline;
        let mut solver = Solver::new(provider);
        let past = || deadline.is_some_and(|d| std::time::Instant::now() >= d);
        let all: Vec<usize> = (0..compiled.len()).collect();
        match super::solve(&mut solver, &all) {
            Ok(solution) => {
                let chosen = solver.provider().chosen_bundles(&solution);
                for (i, c) in &active {
                    let package = &c.request.package_name;
                    let found = chosen
                        .iter()
                        .copied()
                        .find(|&e| index.entries[e].package == *package);
                    outcomes[*i] = Some(match found {
                        None => Err(ResolveError::Unsatisfiable(vec![format!(
                            "bundle for package {package:?} not found in solution"
                        )])),
                        Some(e) => match explain::tie(index, &compiled, e) {
                            Some(sentence) => Err(ResolveError::Ambiguous(vec![sentence])),
                            None => Ok(Resolved::of(index, *i, e)),
                        },
                    });
                }
                break;
            }
            Err(_) if past() => {
                for (i, _) in active.drain(..) {
                    outcomes[i] = Some(Err(timed_out()));
                }
            }
            Err(conflict) => {
                let (mut core, sentences) = explain::conflict(&mut solver, &compiled, conflict);
                if past() {
                    // The explanation's own solves were cut short: nothing is known.
                    for (i, _) in active.drain(..) {
                        outcomes[i] = Some(Err(timed_out()));
                    }
                    continue;
                }
                if core.is_empty() {
                    // Only a cancelled solve has no conflict, and nothing cancels ours.
                    core = all;
                }
                core.sort_unstable_by(|a, b| b.cmp(a));
                for k in core {
                    let (i, _) = active.remove(k);
                    outcomes[i] = Some(Err(ResolveError::Unsatisfiable(sentences.clone())));
                }
            }
        }
    }
    outcomes
        .into_iter()
        .map(|o| {
            o.unwrap_or_else(|| {
                Err(ResolveError::Unsatisfiable(vec![
                    "the request was not resolved".to_owned(),
                ]))
            })
        })
        .collect()
}
