//! A reconcile of a BundleDeployment that asks for a dry run (`olm-rs.io/dry-run: "true"`):
//! the wanted template fetched and converted as an install would, its objects tried against
//! the cluster without a write ([`crate::dry_run`]), and `status.dryRun` written (by a field
//! manager of its own, so that the install's status stays as it is). The installed set is left
//! alone: neither upgraded nor restored while the annotation is on. Without the annotation, a
//! `status.dryRun` left from before is removed.

use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use olm_api::bundle_deployment::{BundleDeployment, DRY_RUN_ANNOTATION, DryRun};
use olm_runtime::EventType;
use serde_json::json;

use crate::marks::Owner;
use crate::settings::Settings;
use crate::source::{Format, Wanted};
use crate::status::{Attempt, Installed};

use super::{Context, Error, Rendering, before_sync, read, values_of};

/// The field manager of `status.dryRun`.
pub const DRY_RUN_MANAGER: &str = "olm-provisioner-dry-run";

/// Whether `bd` asks for a dry run.
pub fn requested(bd: &BundleDeployment) -> bool {
    bd.annotations()
        .get(DRY_RUN_ANNOTATION)
        .is_some_and(|v| v == "true")
}

/// Tries `bd`'s wanted template and writes what it would do.
pub async fn run(
    ctx: &Context,
    bd: &BundleDeployment,
    owner: &Owner,
    format: Format,
    source: &Wanted,
    wanted: &Installed,
    settings: &Settings,
) -> Result<(), Error> {
    let dry_run = match preview(ctx, bd, owner, format, source, settings).await {
        Ok(preview) => preview.status(&wanted.bundle),
        Err(attempt) => DryRun {
            bundle: wanted.bundle.clone(),
            refused: Some(format!("{}: {}", attempt.reason(), attempt.message())),
            ..DryRun::default()
        },
    };
    let before = bd.status.as_ref().and_then(|s| s.dry_run.as_ref());
    if before == Some(&dry_run) {
        return Ok(());
    }
    write(ctx, &owner.name, Some(&dry_run)).await?;
    let note = match &dry_run.refused {
        Some(why) => format!("{} would not install: {why}", dry_run.bundle),
        None => format!(
            "{} would create {}, change {}, prune {} and leave {} as they are",
            dry_run.bundle,
            dry_run.create.len(),
            dry_run.change.len(),
            dry_run.prune.len(),
            dry_run.unchanged
        ),
    };
    tracing::info!(bundle_deployment = %owner.name, "dry run: {note}");
    ctx.events
        .publish(bd, EventType::Normal, "DryRun", "DryRun", note)
        .await;
    Ok(())
}

/// Removes a `status.dryRun` left from an earlier dry run.
pub async fn clear(ctx: &Context, bd: &BundleDeployment) -> Result<(), Error> {
    if bd
        .status
        .as_ref()
        .and_then(|s| s.dry_run.as_ref())
        .is_none()
    {
        return Ok(());
    }
    write(ctx, &bd.name_any(), None).await
}

async fn preview(
    ctx: &Context,
    bd: &BundleDeployment,
    owner: &Owner,
    format: Format,
    source: &Wanted,
    settings: &Settings,
) -> Result<crate::dry_run::Preview, Attempt> {
    let values = values_of(ctx, format, settings).await?;
    let rendering = Rendering {
        format,
        settings,
        values: &values,
        values_hash: crate::values::hash(&values),
    };
    let (rendered, _, _share) = read(ctx, owner, &rendering, source).await?;
    // With the certificates the installed set was synced with, so that they are no change.
    let injection = ctx.memory.synced_with(&owner.name);
    let objects = match injection {
        Some(injection) => crate::certs::inject(rendered.objects, &rendered.serving, &injection),
        None => rendered.objects,
    };
    // What would stop the sync stops the dry run, with the same words.
    before_sync(ctx, bd, owner, format, settings, &objects).await?;
    crate::dry_run::preview(&ctx.applier, owner, &objects)
        .await
        .map_err(Attempt::from)
}

async fn write(ctx: &Context, name: &str, dry_run: Option<&DryRun>) -> Result<(), Error> {
    let status = match dry_run {
        Some(d) => json!({"dryRun": d}),
        None => json!({}),
    };
    let patch = json!({
        "apiVersion": "core.rukpak.io/v1alpha1",
        "kind": "BundleDeployment",
        "status": status,
    });
    Api::<BundleDeployment>::all(ctx.client.clone())
        .patch_status(
            name,
            &PatchParams::apply(DRY_RUN_MANAGER).force(),
            &Patch::Apply(patch),
        )
        .await
        .map_err(|source| Error::Write {
            what: "writing status.dryRun",
            source,
        })?;
    Ok(())
}
