//! Resolution's decisions, as pure functions of what was read and what is cached (the
//! [`super::Resolver`] does the reading, the caching and the re-queueing they ask for):
//!
//! * [`waiting`]: an Operator whose Catalogs could not be read waits (`Unknown`);
//! * [`step`]: whether a group's answer comes from the memo, is reused while its
//!   BundleDeployments move to it (one upgrade edge at a time), or is solved afresh;
//! * [`installed`]: what the group's BundleDeployments deploy, as the solver's `installed`;
//! * [`answer`] and [`explain`]: an Operator's [`Outcome`] read as its [`Answer`], and what
//!   explains a resolved bundle;
//! * [`to_requeue`]: which other members a fresh answer re-queues: only those whose status
//!   does not already say it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use olm_api::operator::Operator;
use olm_resolver::resolve::{Index, Installed, Notice, Outcome, Request, ResolveError, Resolved};

use crate::inputs::Deployed;
use crate::memo::{Base, GroupAnswers, Latest, Use, use_latest};

use super::{Answer, LeftOut};

/// Why an Operator must wait, if it must: Catalogs its selector matches could not be read
/// (`left_out` holds those that took no part), so nothing is decided and its
/// BundleDeployment is kept.
pub fn waiting(left_out: &[(String, LeftOut)]) -> Option<String> {
    let unreachable: Vec<String> = left_out
        .iter()
        .filter_map(|(n, l)| match l {
            LeftOut::Unreachable(m) => Some(format!("catalog {n:?}: {m}")),
            _ => None,
        })
        .collect();
    (!unreachable.is_empty()).then(|| {
        format!(
            "the content of catalogs this Operator may use could not be read, so nothing was decided and its BundleDeployment is kept: {}",
            unreachable.join("; ")
        )
    })
}

/// Where a group's answer comes from.
#[derive(Debug, Clone)]
pub enum Step {
    /// The answer solved for exactly these specs and bases.
    Memoized(Arc<GroupAnswers>),
    /// The latest answer, reused for bases it was not solved from (BundleDeployments that
    /// moved to what it chose) since `since`; `confirm_later`: this reuse starts the grace, so
    /// the group is to be marked stale and re-queued when it ends, for one fresh solve.
    Reuse {
        /// The answer.
        answers: Arc<GroupAnswers>,
        /// Since when it has been reused.
        since: Instant,
        /// Whether to mark it stale and re-queue after the grace.
        confirm_later: bool,
    },
    /// A fresh solve.
    Solve,
}

/// The step for a group with memoized answer `exact` (for these very bases) and latest
/// answer `latest` (same specs), its members now deploying `bases`, at `now`.
pub fn step(
    exact: Option<Arc<GroupAnswers>>,
    latest: Option<Latest>,
    bases: &[Base],
    now: Instant,
    grace: Duration,
) -> Step {
    if let Some(answers) = exact {
        return Step::Memoized(answers);
    }
    match latest {
        Some(latest) => match use_latest(&latest, bases, now, grace) {
            Use::Reuse { confirm_later } => Step::Reuse {
                since: latest.stale_since.unwrap_or(now),
                answers: latest.answers,
                confirm_later,
            },
            Use::Solve => Step::Solve,
        },
        None => Step::Solve,
    }
}

/// What the members deploy, as the solver's installed bundles: one per package (the first
/// member's), found by label or else by image in `index`. `members` pairs each member's
/// request with its deployed bundle.
pub fn installed(index: &Index, members: &[(&Request, Option<Deployed>)]) -> Vec<Installed> {
    let mut out: Vec<Installed> = Vec::new();
    for (request, deployed) in members {
        let Some(d) = deployed else { continue };
        let package = d
            .package
            .clone()
            .unwrap_or_else(|| request.package_name.clone());
        if out.iter().any(|x| x.package_name == package) {
            continue;
        }
        if let Some((bundle, version)) = installed_bundle(index, d) {
            out.push(Installed {
                package_name: package,
                bundle,
                version: version.map(|v| v.to_string()),
            });
        }
    }
    out
}

/// The bundle a BundleDeployment deploys, by name and version: from our labels, or else found
/// by its image in the catalogs (BundleDeployments written by upstream carry no labels).
pub fn installed_bundle(index: &Index, d: &Deployed) -> Option<(String, Option<semver::Version>)> {
    let version = d
        .version
        .as_deref()
        .and_then(|v| olm_resolver::range::parse_bundle_version(v).ok());
    if let Some(bundle) = &d.bundle {
        return Some((bundle.clone(), version));
    }
    let image = d.image.as_deref()?;
    let entry = index
        .entries
        .iter()
        .find(|e| e.image == image && d.package.as_ref().is_none_or(|p| *p == e.package))?;
    Some((entry.name.clone(), Some(entry.version.clone())))
}

/// An Operator's outcome read as its answer: a solve that ran out of `timeout` decides
/// nothing; an unparsable request is an invalid spec.
pub fn answer(outcome: Outcome, timeout: Duration) -> Answer {
    match outcome {
        Ok(resolved) => Answer::Resolved(resolved),
        Err(ResolveError::TimedOut(s)) => Answer::Unknown(format!(
            "{} (--resolution-timeout-seconds: {timeout:?})",
            s.join(" ")
        )),
        Err(e) => Answer::Failed {
            invalid_spec: matches!(e, ResolveError::InvalidRequest(_)),
            message: e.sentences().join(" "),
        },
    }
}

/// What explains `resolved` for `op`, deploying `deployed`.
pub struct Explained {
    /// Deprecation notices (package, requested channel, bundle).
    pub notices: Vec<Notice>,
    /// Whether it is a successor of the deployed bundle along the catalog's upgrade edges.
    pub via_edge: bool,
}

/// The notices of `resolved`, and whether it follows an upgrade edge from what is deployed.
pub fn explain(
    index: &Index,
    op: &Operator,
    deployed: Option<&Deployed>,
    resolved: &Resolved,
) -> Explained {
    let channel = op.spec.channel.as_deref();
    let entry = &index.entries[resolved.entry];
    let via_edge = deployed
        .and_then(|d| installed_bundle(index, d))
        .is_some_and(|(name, version)| {
            name != resolved.name && entry.is_successor_of(&name, version.as_ref(), channel)
        });
    Explained {
        notices: index.notices(resolved.entry, channel),
        via_edge,
    }
}

/// The members (other than `me`) a fresh answer re-queues: those whose status does not
/// already report their outcome. `members` pairs each member with its outcome.
pub fn to_requeue(me: &str, members: &[(&Operator, &(String, Outcome))]) -> Vec<String> {
    members
        .iter()
        .filter(|(_, (name, _))| name != me)
        .filter(|(op, (_, outcome))| !status_agrees(op, outcome))
        .map(|(_, (name, _))| name.clone())
        .collect()
}

/// Whether the Operator's status already reports `outcome`: resolved, to the same image. A
/// failure always counts as news (its explanation may have changed).
fn status_agrees(op: &Operator, outcome: &Outcome) -> bool {
    let Ok(r) = outcome else { return false };
    op.status.as_ref().is_some_and(|s| {
        s.resolved_bundle_resource.as_deref() == Some(r.image.as_str())
            && olm_api::conditions::is_true(&s.conditions, crate::status::types::RESOLVED)
    })
}

#[cfg(test)]
mod tests;
