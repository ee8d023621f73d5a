//! What to write for one Operator, decided without I/O: the BundleDeployment to apply (none
//! when the existing one already says it, or when nothing was resolved: a correct
//! BundleDeployment is never deleted or downgraded for want of an answer), the whole status,
//! and the events that tell people what changed and why.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::ResourceExt;
use olm_api::bundle_deployment::BundleDeployment;
use olm_api::conditions::{find_condition, set_condition};
use olm_api::operator::{Operator, OperatorStatus, UpgradeConstraintPolicy};
use olm_resolver::resolve::Resolved;

use crate::bundle_deployment::{controlled_by, desired, up_to_date};
use crate::resolution::{Answer, Decision, LeftOut};
use crate::status::{condition, deprecation, healthy_from, installed_from, reasons, types};

/// An event to publish about the Operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedEvent {
    /// Warning (true) or Normal.
    pub warning: bool,
    /// PascalCase reason.
    pub reason: &'static str,
    /// For people.
    pub note: String,
}

/// What to write.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The BundleDeployment to apply, when it must change.
    pub apply: Option<BundleDeployment>,
    /// The status the Operator should have.
    pub status: OperatorStatus,
    /// Whether `status` differs from the Operator's.
    pub status_changed: bool,
    /// Events to publish.
    pub events: Vec<PlannedEvent>,
    /// Whether to retry with backoff (the catalogs could not be read).
    pub retry: bool,
}

/// `name (version)`.
fn bundle_phrase(name: &str, version: Option<&str>) -> String {
    match version {
        Some(v) if !name.contains(v) => format!("{name} ({v})"),
        _ => name.to_owned(),
    }
}

/// Why the resolved bundle changed, for the event.
fn why(op: &Operator, decision: &Decision, bundle: &Resolved) -> String {
    let previous = op.status.as_ref().and_then(|s| s.observed_generation);
    let hash = decision
        .catalog_hash
        .as_deref()
        .map(|h| format!(" (content {})", &h[..h.len().min(12)]))
        .unwrap_or_default();
    if previous.is_some() && previous != op.metadata.generation {
        format!(
            "the Operator's spec changed (generation {})",
            op.metadata.generation.unwrap_or_default()
        )
    } else if decision.via_edge {
        format!(
            "catalog {:?}{hash} offers it as an upgrade along its upgrade edges",
            bundle.catalog
        )
    } else if decision.deployed.is_some()
        && op.spec.upgrade_constraint_policy == UpgradeConstraintPolicy::Ignore
    {
        format!(
            "catalog {:?}{hash} offers it, and upgradeConstraintPolicy is Ignore, so the upgrade edges do not apply",
            bundle.catalog
        )
    } else {
        format!("catalog {:?}{hash} offers it", bundle.catalog)
    }
}

/// A sentence naming the catalogs that took no part, or nothing.
fn left_out_sentence(decision: &Decision) -> String {
    let parts: Vec<String> = decision
        .left_out
        .iter()
        .filter_map(|(name, why)| match why {
            LeftOut::NotServing(m) => Some(format!("{name:?} is not serving ({m})")),
            LeftOut::Invalid(m) => Some(format!("{name:?} has invalid content ({m})")),
            LeftOut::Unreachable(_) => None,
        })
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!(" Catalogs left out of resolution: {}.", parts.join("; "))
    }
}

/// `bd` as it will read once written over `existing`: the status kept, the generation moved
/// on when the spec changes. So a change costs one status write, not two.
fn as_written(bd: &BundleDeployment, existing: Option<&BundleDeployment>) -> BundleDeployment {
    let mut written = bd.clone();
    written.status = existing.and_then(|e| e.status.clone());
    written.metadata.generation = existing.and_then(|e| {
        let bump = i64::from(e.spec != bd.spec);
        e.metadata.generation.map(|g| g + bump)
    });
    written
}

/// The Operator's `Healthy` condition: the BundleDeployment's, when there is one to read.
fn healthy(
    bd: Option<&BundleDeployment>,
    install_failed: bool,
    generation: Option<i64>,
    now: &Time,
) -> Condition {
    let (state, reason, message) = match bd {
        Some(bd) => healthy_from(bd),
        None if install_failed => (
            "Unknown",
            reasons::HEALTH_STATUS_UNKNOWN,
            "health is not known: the bundledeployment could not be written (see Installed)"
                .to_owned(),
        ),
        None => (
            "False",
            reasons::NOT_INSTALLED,
            "nothing is installed (see Installed)".to_owned(),
        ),
    };
    condition(types::HEALTHY, state, reason, message, generation, now)
}

/// Events for a change of health: a warning each time a workload is newly named as not
/// ready, and a note when the operator becomes healthy.
fn health_events(old: &OperatorStatus, new: &Condition) -> Vec<PlannedEvent> {
    let before = find_condition(&old.conditions, types::HEALTHY);
    let changed = before.is_none_or(|c| c.status != new.status || c.message != new.message);
    if !changed {
        return Vec::new();
    }
    match (new.status.as_str(), new.reason.as_str()) {
        ("False", reasons::UNHEALTHY) => vec![PlannedEvent {
            warning: true,
            reason: "Unhealthy",
            note: new.message.clone(),
        }],
        ("True", _) if before.is_none_or(|c| c.status != "True") => vec![PlannedEvent {
            warning: false,
            reason: "Healthy",
            note: new.message.clone(),
        }],
        _ => Vec::new(),
    }
}

/// Decides what to write for `op`, whose BundleDeployment is `existing`.
pub fn plan(
    op: &Operator,
    existing: Option<&BundleDeployment>,
    decision: &Decision,
    now: &Time,
) -> Plan {
    let generation = op.metadata.generation;
    let old = op.status.clone().unwrap_or_default();
    let mut status = old.clone();
    status.observed_generation = generation;
    let mut events = Vec::new();
    let left_out = left_out_sentence(decision);
    let uid = op.uid().unwrap_or_default();
    // A BundleDeployment of this name that another object controls is not ours to change.
    let foreign = existing.filter(|bd| {
        !controlled_by(bd, &uid)
            && bd
                .owner_references()
                .iter()
                .any(|o| o.controller == Some(true))
    });

    let mut apply = None;
    let mut install_error = None;
    let mut retry = false;
    let resolved_condition = match &decision.answer {
        Answer::Resolved(bundle) => {
            status.resolved_bundle_resource = Some(bundle.image.clone());
            status.resolved_version = Some(bundle.version.clone());
            match (desired(op, bundle), foreign) {
                (Err(e), _) => install_error = Some(e),
                (Ok(_), Some(bd)) => {
                    install_error = Some(format!(
                        "BundleDeployment {:?} exists and is controlled by another object; delete it, or give the Operator another name",
                        bd.name_any()
                    ))
                }
                (Ok(want), None) => {
                    if existing.is_none_or(|have| !up_to_date(have, &want)) {
                        let from = existing.map(|bd| {
                            let d = crate::inputs::deployed(bd);
                            bundle_phrase(
                                d.bundle.as_deref().or(d.image.as_deref()).unwrap_or("?"),
                                d.version.as_deref(),
                            )
                        });
                        let to = bundle_phrase(&bundle.name, Some(&bundle.version));
                        let note = match from {
                            Some(from) if from != to => format!(
                                "Resolved bundle changed from {from} to {to}: {}.",
                                why(op, decision, bundle)
                            ),
                            Some(_) => format!("BundleDeployment brought back in line with {to}."),
                            None => format!("Resolved to {to}: {}.", why(op, decision, bundle)),
                        };
                        events.push(PlannedEvent {
                            warning: false,
                            reason: "BundleResolved",
                            note,
                        });
                        apply = Some(want);
                    }
                }
            }
            condition(
                types::RESOLVED,
                "True",
                reasons::SUCCESS,
                format!(
                    "resolved to {:?} (bundle {}, version {}, from catalog {:?}).{left_out}",
                    bundle.image, bundle.name, bundle.version, bundle.catalog
                ),
                generation,
                now,
            )
        }
        Answer::Failed {
            invalid_spec,
            message,
        } => {
            status.resolved_bundle_resource = None;
            status.resolved_version = None;
            let reason = if *invalid_spec {
                reasons::INVALID_SPEC
            } else {
                reasons::RESOLUTION_FAILED
            };
            let kept = if existing.is_some() {
                " The existing BundleDeployment is kept."
            } else {
                ""
            };
            condition(
                types::RESOLVED,
                "False",
                reason,
                format!("{message}{left_out}{kept}"),
                generation,
                now,
            )
        }
        Answer::Unknown(message) => {
            retry = true;
            condition(
                types::RESOLVED,
                "Unknown",
                reasons::RESOLUTION_UNKNOWN,
                message.clone(),
                generation,
                now,
            )
        }
    };
    let resolved_changed = find_condition(&old.conditions, types::RESOLVED).is_none_or(|c| {
        c.status != resolved_condition.status
            || c.reason != resolved_condition.reason
            || c.message != resolved_condition.message
    });
    if resolved_changed && resolved_condition.status != "True" {
        events.push(PlannedEvent {
            warning: true,
            reason: if resolved_condition.reason == reasons::RESOLUTION_UNKNOWN {
                "ResolutionUnknown"
            } else {
                "ResolutionFailed"
            },
            note: resolved_condition.message.clone(),
        });
    }
    set_condition(&mut status.conditions, resolved_condition);

    // Installed and Healthy: from the BundleDeployment as the next reconcile will read it.
    let view = match (&install_error, &apply) {
        (Some(_), _) => None,
        (None, Some(bd)) => Some(Cow::Owned(as_written(bd, existing))),
        (None, None) => existing.map(Cow::Borrowed),
    };
    let (state, reason, message, image) = if let Some(e) = &install_error {
        ("False", reasons::INSTALLATION_FAILED, e.clone(), None)
    } else if let Some(bd) = &view {
        installed_from(bd)
    } else {
        let why = match decision.answer {
            Answer::Unknown(_) => "resolution is unknown",
            _ => "resolution failed",
        };
        (
            "Unknown",
            reasons::INSTALLATION_STATUS_UNKNOWN,
            format!("installation has not been attempted as {why}"),
            None,
        )
    };
    let installed_version = image
        .as_ref()
        .and_then(|_| existing.and_then(|bd| crate::inputs::deployed(bd).version));
    status.installed_bundle_resource = image;
    status.installed_version = installed_version;
    if state == "False"
        && find_condition(&old.conditions, types::INSTALLED).is_none_or(|c| c.message != message)
        && install_error.is_some()
    {
        events.push(PlannedEvent {
            warning: true,
            reason: "InstallationFailed",
            note: message.clone(),
        });
    }
    set_condition(
        &mut status.conditions,
        condition(types::INSTALLED, state, reason, message, generation, now),
    );

    let health = healthy(view.as_deref(), install_error.is_some(), generation, now);
    events.extend(health_events(&old, &health));
    set_condition(&mut status.conditions, health);

    let (state, reason, message) = match &decision.answer {
        Answer::Resolved(_) => deprecation(&decision.notices),
        _ => (
            "Unknown",
            reasons::NOT_RESOLVED,
            "deprecation is known once a bundle is resolved".to_owned(),
        ),
    };
    set_condition(
        &mut status.conditions,
        condition(types::DEPRECATED, state, reason, message, generation, now),
    );

    Plan {
        status_changed: status != old,
        apply,
        status,
        events,
        retry,
    }
}

/// The status to write when the BundleDeployment `planned` could not be written (`message`
/// says why): not installed and nothing named as installed, the rest as planned; and the
/// event that says so.
pub fn bundle_deployment_not_written(
    op: &Operator,
    planned: &OperatorStatus,
    message: String,
    now: &Time,
) -> (OperatorStatus, PlannedEvent) {
    let mut status = planned.clone();
    set_condition(
        &mut status.conditions,
        condition(
            types::INSTALLED,
            "False",
            reasons::INSTALLATION_FAILED,
            message.clone(),
            op.metadata.generation,
            now,
        ),
    );
    status.installed_bundle_resource = None;
    status.installed_version = None;
    let event = PlannedEvent {
        warning: true,
        reason: reasons::INSTALLATION_FAILED,
        note: message,
    };
    (status, event)
}
