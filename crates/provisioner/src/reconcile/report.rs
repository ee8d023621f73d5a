//! What a reconcile tells: the status (written by server-side apply, only when it changed),
//! events, and the log.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use olm_api::bundle_deployment::{BundleDeployment, ResolvedSource};
use olm_api::conditions::{clip_message, set_condition};
use olm_runtime::EventType;
use serde_json::json;

use super::{Context, Error};
use crate::apply::FIELD_MANAGER;
use crate::health::Health;
use crate::object::Key;
use crate::set::Kept;
use crate::status::{
    Attempt, Installed, Verdict, healthy, reasons, resolved_after, types, verdict,
};

/// The status of the condition `type_`, if set.
fn condition_status(conditions: &[Condition], type_: &str) -> Option<String> {
    conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.status.clone())
}

/// Applies our status fields, all of them: an apply drops those of ours it leaves out.
async fn apply_status(
    ctx: &Context,
    bd: &BundleDeployment,
    conditions: &[Condition],
    active: Option<&str>,
    resolved: Option<&ResolvedSource>,
    observed_generation: Option<i64>,
) -> Result<BundleDeployment, kube::Error> {
    let patch = json!({
        "apiVersion": "core.rukpak.io/v1alpha1",
        "kind": "BundleDeployment",
        "status": {
            "conditions": conditions,
            "activeBundle": active,
            "resolvedSource": resolved,
            "observedGeneration": observed_generation,
        },
    });
    Api::<BundleDeployment>::all(ctx.client.clone())
        .patch_status(
            &bd.name_any(),
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(patch),
        )
        .await
}

/// Writes the status `attempt` gives (with `installed` what was installed before it, and
/// `fetched` the image by digest this attempt pulled), when it differs from what is there;
/// whether it did.
pub(super) async fn write_status(
    ctx: &Context,
    bd: &BundleDeployment,
    installed: Option<&Installed>,
    wanted: &Installed,
    attempt: &Attempt,
    fetched: Option<&str>,
    health: Option<&Health>,
) -> Result<bool, Error> {
    let status = bd.status.clone().unwrap_or_default();
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let Verdict {
        conditions,
        installed: after,
    } = verdict(
        &status.conditions,
        installed,
        wanted,
        attempt,
        bd.metadata.generation,
        &now,
    );
    let mut conditions = conditions;
    let was_healthy = condition_status(&status.conditions, types::HEALTHY);
    if let Some((state, reason, message)) = healthy(health, after.as_ref()) {
        set_condition(
            &mut conditions,
            Condition {
                type_: types::HEALTHY.to_owned(),
                status: state.to_owned(),
                reason: reason.to_owned(),
                message: clip_message(message),
                observed_generation: bd.metadata.generation,
                last_transition_time: now.clone(),
            },
        );
    }
    let is_healthy = condition_status(&conditions, types::HEALTHY);
    if was_healthy != is_healthy
        && let Some(c) = conditions.iter().find(|c| c.type_ == types::HEALTHY)
        && c.reason != reasons::INSTALLATION_STATUS_FALSE
    {
        let type_ = if c.status == "True" {
            EventType::Normal
        } else {
            EventType::Warning
        };
        ctx.events
            .publish(bd, type_, &c.reason, "Health", c.message.clone())
            .await;
    }
    let active = after.map(|i| i.bundle);
    let recorded = status
        .resolved_source
        .as_ref()
        .and_then(ResolvedSource::image_ref);
    let resolved = resolved_after(attempt, recorded, fetched).map(ResolvedSource::image);
    if conditions == status.conditions
        && active == status.active_bundle
        && resolved == status.resolved_source
        && status.observed_generation == bd.metadata.generation
    {
        return Ok(false);
    }
    apply_status(
        ctx,
        bd,
        &conditions,
        active.as_deref(),
        resolved.as_ref(),
        bd.metadata.generation,
    )
    .await
    .map_err(|source| Error::Write {
        what: "writing the status",
        source,
    })?;
    Ok(true)
}

/// An event for what changed: an install, an upgrade, or why neither happened.
pub(super) async fn announce(
    ctx: &Context,
    bd: &BundleDeployment,
    before: Option<&Installed>,
    wanted: &Installed,
    attempt: &Attempt,
) {
    let (type_, reason, note) = match (attempt, before) {
        (Attempt::Applied, None) => (
            EventType::Normal,
            "Installed",
            format!("installed {}", wanted.bundle),
        ),
        (Attempt::Applied, Some(old)) if old.bundle != wanted.bundle => (
            EventType::Normal,
            "Upgraded",
            format!("upgraded from {} to {}", old.bundle, wanted.bundle),
        ),
        (Attempt::Applied, Some(_)) => return,
        (Attempt::Conflicts(m), _) => (EventType::Warning, reasons::CONFLICT, m.clone()),
        (Attempt::UnsafeCrdUpgrade(m), _) => {
            (EventType::Warning, reasons::CRD_UPGRADE_UNSAFE, m.clone())
        }
        (Attempt::NamespaceMove(m), _) => (
            EventType::Warning,
            reasons::NAMESPACE_CHANGE_REFUSED,
            m.clone(),
        ),
        (Attempt::InstallMode(m), _) => (
            EventType::Warning,
            reasons::UNSUPPORTED_INSTALL_MODE,
            m.clone(),
        ),
        (Attempt::ApplyFailed(m), _) => (EventType::Warning, reasons::APPLY_FAILED, m.clone()),
        (Attempt::UnpackFailed(m), _) => (EventType::Warning, reasons::UNPACK_FAILED, m.clone()),
        (Attempt::Invalid { reason, message }, _) => (EventType::Warning, *reason, message.clone()),
        (Attempt::Unpacking(_), _) => return,
    };
    ctx.events.publish(bd, type_, reason, "Install", note).await;
}

/// Says (status, event) that deleting `bd` is held up, naming what could not be removed; the
/// finalizer stays, and the removal is retried.
pub(super) async fn uninstall_failed(ctx: &Context, bd: &BundleDeployment, what: &str) {
    let message = format!("uninstalling: {what}; the finalizer stays until it can be removed");
    let status = bd.status.clone().unwrap_or_default();
    let mut conditions = status.conditions;
    olm_api::conditions::set_condition(
        &mut conditions,
        Condition {
            type_: crate::status::types::INSTALLED.to_owned(),
            status: "False".to_owned(),
            reason: reasons::UNINSTALL_FAILED.to_owned(),
            message: olm_api::conditions::clip_message(message.clone()),
            observed_generation: bd.metadata.generation,
            last_transition_time: Time(k8s_openapi::jiff::Timestamp::now()),
        },
    );
    let written = apply_status(
        ctx,
        bd,
        &conditions,
        status.active_bundle.as_deref(),
        status.resolved_source.as_ref(),
        status.observed_generation,
    )
    .await;
    if let Err(error) = written {
        tracing::warn!(bundle_deployment = %bd.name_any(), %error, "could not write why uninstalling is held up");
    }
    ctx.events
        .publish(
            bd,
            EventType::Warning,
            reasons::UNINSTALL_FAILED,
            "Uninstall",
            message,
        )
        .await;
}

/// `keys`, for a message: the first ten, and how many more.
pub(super) fn list(keys: &[Key]) -> String {
    let mut text: Vec<String> = keys.iter().take(10).map(ToString::to_string).collect();
    if keys.len() > 10 {
        text.push(format!("and {} more", keys.len() - 10));
    }
    text.join(", ")
}

/// Tells (log, event) of a Namespace or CRD kept because deleting it would delete what the
/// BundleDeployment did not apply.
pub(super) async fn kept(ctx: &Context, bd: &BundleDeployment, kept: &Kept, action: &str) {
    let note = format!(
        "kept {}: {}; its owner marks were removed",
        kept.key, kept.why
    );
    let reason = if kept.key.kind == "Namespace" {
        "NamespaceKept"
    } else {
        "CRDKept"
    };
    tracing::warn!(bundle_deployment = %bd.name_any(), object = %kept.key, "{note}");
    ctx.events
        .publish(bd, EventType::Warning, reason, action, note)
        .await;
}
