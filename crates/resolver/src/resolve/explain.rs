//! Explanations of failed resolutions, as sentences a person can act on: which requests are in
//! conflict (the smallest set), which bundles they allow, and what stops each of them.

use std::collections::{BTreeMap, BTreeSet};

use resolvo::Solver;
use resolvo::conflict::Conflict;

use super::index::Index;
use super::provider::Provider;
use super::request::{Compiled, Filter};
use crate::fbc::property::Gvk;

/// At most this many bundles are named in one list; the rest are counted.
const MAX_LISTED: usize = 5;

/// `a, b and c`, or `a, b, c, d, e and 3 more`.
fn join_limited(items: &[String]) -> String {
    let shown: Vec<&str> = items.iter().take(MAX_LISTED).map(String::as_str).collect();
    let rest = items.len().saturating_sub(MAX_LISTED);
    match (shown.as_slice(), rest) {
        ([], _) => "none".to_owned(),
        ([one], 0) => (*one).to_owned(),
        (many, 0) => format!(
            "{} and {}",
            many[..many.len() - 1].join(", "),
            many[many.len() - 1]
        ),
        (many, n) => format!("{} and {n} more", many.join(", ")),
    }
}

/// Distinct versions of `entries`, ascending.
fn versions(index: &Index, entries: impl IntoIterator<Item = usize>) -> String {
    let set: BTreeSet<&semver::Version> = entries
        .into_iter()
        .map(|e| &index.entries[e].version)
        .collect();
    join_limited(&set.into_iter().map(|v| v.to_string()).collect::<Vec<_>>())
}

/// Bundles by preference, named `name (version)`.
fn bundles(index: &Index, entries: &[usize]) -> String {
    let mut sorted = entries.to_vec();
    sorted.sort_by(|&a, &b| index.preference(a, b));
    sorted.dedup_by(|a, b| index.entries[*a].name == index.entries[*b].name);
    join_limited(&sorted.iter().map(|&e| named(index, e)).collect::<Vec<_>>())
}

/// A bundle's name, with its version when the name does not already say it.
fn named(index: &Index, e: usize) -> String {
    let entry = &index.entries[e];
    let version = entry.version.to_string();
    if entry.name.contains(&version) {
        entry.name.clone()
    } else {
        format!("{} ({version})", entry.name)
    }
}

/// Why request `c` has no candidate at all: the first filter that leaves nothing.
pub(crate) fn no_candidates(index: &Index, c: &Compiled) -> String {
    let r = &c.request;
    let all = index.package_entries(&r.package_name);
    let who = format!("Request {}", r.display_name());
    if all.is_empty() {
        return format!(
            "{who} cannot be satisfied: no catalog has a package named {:?}.",
            r.package_name
        );
    }
    let passing = |upto: Filter| -> Vec<usize> {
        all.iter()
            .copied()
            .filter(|&e| c.rejects(index, e).is_none_or(|f| f > upto))
            .collect()
    };
    let in_catalogs = passing(Filter::Catalog);
    if in_catalogs.is_empty() {
        let names: BTreeSet<&str> = all
            .iter()
            .map(|&e| index.catalogs[index.entries[e].catalog].name.as_str())
            .collect();
        let selector = r
            .catalog_selector
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default();
        return format!(
            "{who} cannot be satisfied: its catalogSelector ({selector}) matches no catalog that has package {:?}; the package is in catalogs {}.",
            r.package_name,
            join_limited(&names.into_iter().map(str::to_owned).collect::<Vec<_>>())
        );
    }
    let in_channel = passing(Filter::Channel);
    if in_channel.is_empty() {
        let channels: BTreeSet<&str> = in_catalogs
            .iter()
            .flat_map(|&e| {
                index.entries[e]
                    .memberships
                    .iter()
                    .map(|m| m.channel.as_str())
            })
            .collect();
        return format!(
            "{who} cannot be satisfied: package {:?} has no channel {:?}; its channels are {}.",
            r.package_name,
            r.channel.as_deref().unwrap_or_default(),
            join_limited(
                &channels
                    .into_iter()
                    .map(|c| format!("{c:?}"))
                    .collect::<Vec<_>>()
            )
        );
    }
    let in_range = passing(Filter::Version);
    if in_range.is_empty() {
        let place = r
            .channel
            .as_ref()
            .map(|ch| format!(" in channel {ch:?}"))
            .unwrap_or_default();
        return format!(
            "{who} cannot be satisfied: no bundle of package {:?}{place} has a version in {:?}; the versions there are {}.",
            r.package_name,
            r.version.as_deref().unwrap_or_default(),
            versions(index, in_channel)
        );
    }
    let past_edges = passing(Filter::UpgradeEdge);
    if !past_edges.is_empty() {
        return owned_api(index, c, &past_edges);
    }
    let installed = c.from.as_ref().map(|(n, _)| n.as_str()).unwrap_or_default();
    let successors: Vec<usize> = all
        .iter()
        .copied()
        .filter(|&e| {
            let entry = &index.entries[e];
            entry.name != installed
                && entry.is_successor_of(
                    installed,
                    c.from.as_ref().and_then(|(_, v)| v.as_ref()),
                    r.channel.as_deref(),
                )
        })
        .collect();
    let successors = if successors.is_empty() {
        "the catalogs have no successor of it".to_owned()
    } else {
        format!("its successors are {}", bundles(index, &successors))
    };
    format!(
        "{who} cannot be satisfied: {installed} is installed and upgradeConstraintPolicy is Enforce, so only {installed} itself or a bundle that replaces, skips or skipRanges it may be chosen, and none of those matches {}; {successors}. Set upgradeConstraintPolicy to Ignore to allow any version.",
        c.describe_constraints()
    )
}

/// Every bundle left (`candidates`) provides an API whose CRD another BundleDeployment owns:
/// the sentence names the first such API and its owner.
fn owned_api(index: &Index, c: &Compiled, candidates: &[usize]) -> String {
    let r = &c.request;
    let first = candidates.iter().find_map(|&e| {
        c.owned_api(&index.entries[e])
            .map(|(g, owner)| (e, g, owner))
    });
    let Some((e, gvk, owner)) = first else {
        return format!("Request {} cannot be satisfied.", r.display_name());
    };
    format!(
        "Request {} cannot be satisfied: {} provides API {gvk}, whose CRD BundleDeployment {owner:?} already owns; an API has one owner, so no bundle that provides it is chosen, and that leaves none of {} matching {}. Delete the Operator that owns the API, or ask for a package that does not provide it.",
        r.display_name(),
        index.describe(e),
        bundles(index, candidates),
        c.describe_constraints(),
    )
}

/// Names an unbreakable tie: `e` was chosen, but an equally good bundle of the same package is
/// in another catalog of the same priority.
pub(crate) fn tie(index: &Index, requests: &[Compiled], e: usize) -> Option<String> {
    let chosen = &index.entries[e];
    let priority = index.catalogs[chosen.catalog].priority;
    let mut catalogs: BTreeSet<&str> = index
        .package_entries(&chosen.package)
        .iter()
        .map(|&o| (o, &index.entries[o]))
        .filter(|(o, other)| {
            other.catalog != chosen.catalog
                && other.version == chosen.version
                && other.deprecated == chosen.deprecated
                && index.catalogs[other.catalog].priority == priority
                && requests
                    .iter()
                    .filter(|c| c.request.package_name == chosen.package)
                    .all(|c| c.admits(index, *o))
        })
        .map(|(_, other)| index.catalogs[other.catalog].name.as_str())
        .collect();
    if catalogs.is_empty() {
        return None;
    }
    catalogs.insert(&index.catalogs[chosen.catalog].name);
    Some(format!(
        "Package {:?} at version {} is offered by catalogs {} with the same priority ({priority}), so neither can be preferred; give one of them a higher spec.priority, or narrow the request's catalogSelector.",
        chosen.package,
        chosen.version,
        join_limited(
            &catalogs
                .into_iter()
                .map(|c| format!("{c:?}"))
                .collect::<Vec<_>>()
        )
    ))
}

/// Explains an unsatisfiable joint problem: finds the smallest set of requests that still
/// conflict (removing any one of them resolves the conflict), then says for each of their
/// bundles what stops it. Returns that set (indices into `requests`) and the sentences.
pub(crate) fn conflict(
    solver: &mut Solver<Provider<'_>>,
    requests: &[Compiled],
    first: Option<Conflict>,
) -> (Vec<usize>, Vec<String>) {
    // Deletion filter: drop every request whose removal leaves the rest unsatisfiable.
    let mut core: Vec<usize> = (0..requests.len()).collect();
    let mut last_conflict = first;
    let mut i = 0;
    while i < core.len() {
        let mut without = core.clone();
        without.remove(i);
        match super::solve(solver, &without) {
            Err(c) => {
                core = without;
                last_conflict = c;
            }
            Ok(_) => i += 1,
        }
    }
    let index = solver.provider().index;
    let mut sentences = Vec::new();
    let names: Vec<String> = core
        .iter()
        .map(|&i| requests[i].request.display_name())
        .collect();
    sentences.push(if core.len() == 1 {
        format!("Request {} cannot be satisfied by itself.", names[0])
    } else {
        format!(
            "Requests {} cannot all be satisfied together; without any one of them, the rest could be.",
            join_limited(&names)
        )
    });
    // When no bundle of any request has a reason of its own, the conflict is deeper than one
    // step; resolvo's own account is then added.
    let mut explained = false;
    for &r in &core {
        let set_aside = &solver.provider().set_aside;
        let (lines, complete) = explain_request(index, requests, set_aside, &core, r);
        explained |= complete;
        sentences.extend(lines);
    }
    if !explained && let Some(c) = last_conflict {
        let detail = c.display_user_friendly(solver).to_string();
        sentences.push(format!(
            "The solver's account of the conflict: {}",
            detail.split_whitespace().collect::<Vec<_>>().join(" ")
        ));
    }
    (core, sentences)
}

/// Sentences about request `r` of the conflicting `core`: the bundles it allows, grouped by what
/// stops them. The flag says whether any bundle got a concrete reason.
fn explain_request(
    index: &Index,
    requests: &[Compiled],
    set_aside: &[(String, String)],
    core: &[usize],
    r: usize,
) -> (Vec<String>, bool) {
    let c = &requests[r];
    let mut candidates: Vec<usize> = index
        .package_entries(&c.request.package_name)
        .iter()
        .copied()
        .filter(|&e| c.admits(index, e))
        .collect();
    candidates.sort_by(|&a, &b| index.preference(a, b));
    // Bundles with no reason of their own are left unexplained here: they are excluded by what
    // the other requests' bundles need, which those requests' lines say.
    let mut by_reason: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    let mut complete = false;
    for &e in &candidates {
        let reasons = blockers(index, requests, set_aside, core, r, e);
        if !reasons.is_empty() {
            complete = true;
            by_reason.entry(reasons.join("; and ")).or_default().push(e);
        }
    }
    let mut lines = vec![format!(
        "Request {} ({}) allows {}.",
        c.request.display_name(),
        c.describe_constraints(),
        bundles(index, &candidates)
    )];
    for (reason, entries) in by_reason {
        let subject = if entries.len() == 1 {
            bundles(index, &entries)
        } else {
            format!("Each of {}", bundles(index, &entries))
        };
        lines.push(format!("{subject} {reason}."));
    }
    (lines, complete)
}

/// Whether some request names `package`.
fn requested(requests: &[Compiled], package: &str) -> bool {
    requests.iter().any(|c| c.request.package_name == package)
}

/// Whether bundle `e` is allowed by every request of the core that names its package.
fn allowed_by_core(index: &Index, requests: &[Compiled], core: &[usize], e: usize) -> bool {
    core.iter()
        .map(|&i| &requests[i])
        .filter(|c| c.request.package_name == index.entries[e].package)
        .all(|c| c.admits(index, e))
}

/// What stops bundle `e` of request `r`, as clauses ("requires ..., but ..."). `set_aside`
/// names the requests (package, display name) that already failed on their own.
fn blockers(
    index: &Index,
    requests: &[Compiled],
    set_aside: &[(String, String)],
    core: &[usize],
    r: usize,
    e: usize,
) -> Vec<String> {
    let entry = &index.entries[e];
    let mut reasons = Vec::new();
    for d in &entry.requires_packages {
        let Some(range) = &d.range else {
            reasons.push(format!(
                "requires package {:?} with an invalid versionRange {:?}",
                d.package, d.range_text
            ));
            continue;
        };
        if !requested(requests, &d.package) {
            reasons.push(match set_aside.iter().find(|(p, _)| *p == d.package) {
                Some((_, who)) => format!(
                    "requires package {:?} ({}), but the request {who} for it cannot be satisfied itself; fix that one first",
                    d.package, d.range_text
                ),
                None => format!(
                    "requires package {:?} ({}), but no request asks for {:?}; add an Operator for it",
                    d.package, d.range_text, d.package
                ),
            });
            continue;
        }
        let in_range: Vec<usize> = index
            .package_entries(&d.package)
            .iter()
            .copied()
            .filter(|&o| range.matches(&index.entries[o].version))
            .collect();
        if in_range.is_empty() {
            reasons.push(format!(
                "requires package {:?} ({}), but the catalogs have no such version; they have {}",
                d.package,
                d.range_text,
                versions(index, index.package_entries(&d.package).iter().copied())
            ));
        } else if !in_range
            .iter()
            .any(|&o| allowed_by_core(index, requests, core, o))
        {
            let allowed: Vec<usize> = index
                .package_entries(&d.package)
                .iter()
                .copied()
                .filter(|&o| allowed_by_core(index, requests, core, o))
                .collect();
            reasons.push(format!(
                "requires package {:?} ({}), but the request for {:?} allows only versions {}",
                d.package,
                d.range_text,
                d.package,
                versions(index, allowed)
            ));
        }
    }
    for g in &entry.requires_gvks {
        let providers: Vec<usize> = index.providers.get(g).cloned().unwrap_or_default();
        let from_requested: Vec<usize> = providers
            .iter()
            .copied()
            .filter(|&p| requested(requests, &index.entries[p].package))
            .collect();
        if from_requested.is_empty() {
            let packages: BTreeSet<&str> = providers
                .iter()
                .map(|&p| index.entries[p].package.as_str())
                .collect();
            reasons.push(if packages.is_empty() {
                format!("requires API {g}, which no bundle in the catalogs provides")
            } else {
                format!(
                    "requires API {g}, which only packages no request asks for provide ({}); add an Operator for one of them",
                    join_limited(&packages.into_iter().map(|p| format!("{p:?}")).collect::<Vec<_>>())
                )
            });
        } else if !from_requested
            .iter()
            .any(|&p| allowed_by_core(index, requests, core, p))
        {
            reasons.push(format!(
                "requires API {g}, but the requests exclude every bundle that provides it ({})",
                bundles(index, &from_requested)
            ));
        }
    }
    for g in &entry.provides {
        if let Some(rival) = rival_provider(index, requests, core, r, g) {
            reasons.push(format!(
                "provides API {g}, as does every bundle the request {} allows, and at most one installed bundle may provide an API",
                requests[rival].request.display_name()
            ));
        }
    }
    reasons
}

/// Another request of the core whose every allowed bundle also provides `g`.
fn rival_provider(
    index: &Index,
    requests: &[Compiled],
    core: &[usize],
    r: usize,
    g: &Gvk,
) -> Option<usize> {
    core.iter().copied().find(|&o| {
        let c = &requests[o];
        o != r
            && c.request.package_name != requests[r].request.package_name
            && index
                .package_entries(&c.request.package_name)
                .iter()
                .filter(|&&e| c.admits(index, e))
                .all(|&e| index.entries[e].provides.contains(g))
    })
}
