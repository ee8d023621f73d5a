//! One reconcile of a Catalog: read what is served, [`plan`] (the pure decision), carry the
//! plan out (fetch, unpack under the budget, store), compute the status ([`crate::status`], also
//! pure) and write it, with an event on each transition. A failed unpack keeps the last good
//! content served and is a reconcile error, retried on the plan's backoff.

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use olm_api::catalog::{Catalog, CatalogStatus, SourceType};

use crate::budget::Reserve;
use crate::context::Context;
use crate::plan::{Clock, Fetch, Plan, plan};
use crate::poll::{jitter, jitter_seed};
use crate::source::Fetched;
use crate::source::Mode;
use crate::status::{Outcome, Served, next_status, transition_event};
use crate::store::Stored;
use crate::unpack::unpack;

/// Field manager of catalogd's status writes.
pub const FIELD_MANAGER: &str = "catalogd";

/// Errors of a reconcile. API and store failures are retried by the controller's error
/// policy; an unpack failure has been written to the status already and carries its retry.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A Kubernetes API call failed.
    #[error("{0}: {1}")]
    Kube(&'static str, #[source] kube::Error),
    /// The store failed.
    #[error("content store: {0}")]
    Store(String),
    /// The current spec could not be unpacked (see the `Unpacked` condition).
    #[error("{reason}: {message}")]
    Unpack {
        /// The `Unpacked` reason.
        reason: &'static str,
        /// Its message.
        message: String,
        /// When the plan retries.
        retry: std::time::Duration,
    },
}

impl Error {
    /// A bounded label for metrics and logs.
    pub fn category(&self) -> &'static str {
        match self {
            Error::Kube(..) => "KubeApiError",
            Error::Store(_) => "StoreError",
            Error::Unpack { reason, .. } => reason,
        }
    }
}

fn to_time(t: std::time::SystemTime) -> Time {
    Time(
        k8s_openapi::jiff::Timestamp::try_from(t)
            .unwrap_or_else(|_| k8s_openapi::jiff::Timestamp::now()),
    )
}

fn served_of(s: &Stored) -> Served {
    Served {
        hash: s.hash.clone(),
        size: s.size,
        since: to_time(s.last_modified),
    }
}

/// What the store serves for the Catalog `name` with `uid`. Content another object of the same
/// name left behind (deleted while catalogd was down, then created again) is removed first: it
/// must neither be served for this one nor count as its last good content.
async fn served(ctx: &Context, name: &str, uid: &str) -> Result<Option<Stored>, Error> {
    let store = ctx.parts.store.clone();
    let (name, uid) = (name.to_owned(), uid.to_owned());
    tokio::task::spawn_blocking(move || {
        let Some(stored) = store.current(&name)? else {
            return Ok(None);
        };
        if store.owner(&name)?.as_deref() == Some(uid.as_str()) {
            return Ok(Some(stored));
        }
        tracing::info!(catalog = %name, "removing content left by an earlier Catalog of the same name");
        store.delete(&name)?;
        Ok(None)
    })
    .await
    .map_err(|e| Error::Store(e.to_string()))?
    .map_err(|e: crate::store::StoreError| Error::Store(e.to_string()))
}

/// Reconciles a Catalog that is not being deleted.
pub async fn apply(catalog: Arc<Catalog>, ctx: &Context) -> Result<Action, Error> {
    let name = catalog.name_any();
    let uid = catalog.uid().unwrap_or_default();
    if catalog.spec.source.type_ != SourceType::Custom {
        // A Catalog that stopped being custom leaves no generator running.
        ctx.parts.sources.custom.forget(&uid).await;
    }
    let content_url = ctx.content_url(&name);
    let served_before = served(ctx, &name, &uid).await?;
    let memory = ctx.memory.get(&name, &uid);
    let served = served_before.as_ref().map(served_of);
    let fetch = match plan(
        &catalog,
        served.as_ref(),
        &memory,
        &content_url,
        Clock::now(),
    ) {
        Plan::UpToDate { requeue } => {
            set_content_bytes(ctx, &name, served_before.as_ref());
            ctx.update_phase_gauge(None);
            return Ok(requeue_after(requeue, &name));
        }
        Plan::Backoff { wait } => return Ok(Action::requeue(wait)),
        Plan::Fetch(fetch) => *fetch,
    };
    let old_status = catalog.status.clone();
    // What the API server holds, as far as this reconcile knows.
    let mut known = old_status.clone();
    // A generator reports its own progress (Fetched::Running); "fetching" before each look
    // at it would make every reconcile write twice, and each write is the next reconcile.
    let generator = catalog.spec.source.type_ == SourceType::Custom;
    if fetch.announce && !generator {
        let status = next_status(
            &catalog,
            &Outcome::Unpacking,
            served.as_ref(),
            &content_url,
            &now(),
        );
        write_status(ctx, &name, known.as_ref(), &status).await?;
        known = Some(status);
    }

    let started = Instant::now();
    let (outcome, stored, recheck) = carry_out(
        &catalog,
        ctx,
        &fetch,
        served.as_ref(),
        &content_url,
        &mut known,
    )
    .await?;
    if let Some(recheck) = recheck {
        // Work under way elsewhere: said in the status of a new spec (a poll of served content
        // leaves the status alone, so Unpacked does not flap), and looked at again.
        if fetch.announce {
            let status = next_status(&catalog, &outcome, served.as_ref(), &content_url, &now());
            write_status(ctx, &name, known.as_ref(), &status).await?;
            ctx.update_phase_gauge(Some((&name, status.phase)));
        }
        return Ok(Action::requeue(recheck));
    }
    let type_ = catalog.spec.source.type_;
    let result = if matches!(outcome, Outcome::Failed { .. }) {
        "failure"
    } else {
        "success"
    };
    ctx.parts
        .metrics
        .unpack_duration
        .with_label_values(&[type_.as_str(), result])
        .observe(started.elapsed().as_secs_f64());

    let served_now = stored.or(served_before);
    set_content_bytes(ctx, &name, served_now.as_ref());
    let served_now = served_now.as_ref().map(served_of);
    let status = next_status(
        &catalog,
        &outcome,
        served_now.as_ref(),
        &content_url,
        &now(),
    );
    write_status(ctx, &name, known.as_ref(), &status).await?;
    if let Some((warning, reason, note)) = transition_event(old_status.as_ref(), &status) {
        let type_ = if warning {
            EventType::Warning
        } else {
            EventType::Normal
        };
        ctx.parts
            .events
            .publish(catalog.as_ref(), type_, &reason, "Unpack", note)
            .await;
    }
    ctx.update_phase_gauge(Some((&name, status.phase)));
    let source = &catalog.spec.source;
    match outcome {
        Outcome::Failed { reason, message } => {
            let retry = ctx
                .memory
                .update(&name, &uid, |m| m.failed(source, Instant::now()));
            tracing::info!(catalog = %name, reason, retry_in = ?retry, "unpack failed; will retry");
            Err(Error::Unpack {
                reason,
                message,
                retry,
            })
        }
        Outcome::Unpacked { resolved, .. } | Outcome::Unchanged { resolved } => {
            if let Some(hash) = status.content_hash.clone() {
                ctx.memory
                    .update(&name, &uid, |m| m.succeeded(source, resolved, hash));
            }
            Ok(requeue_after(fetch.next_poll, &name))
        }
        Outcome::Unpacking | Outcome::Running { .. } | Outcome::Pending { .. } => {
            Ok(requeue_after(fetch.next_poll, &name))
        }
    }
}

/// Fetches and unpacks as `fetch` says; returns the outcome, what was stored when new content
/// was, and when to look again when the work goes on elsewhere.
async fn carry_out(
    catalog: &Catalog,
    ctx: &Context,
    fetch: &Fetch,
    served: Option<&Served>,
    content_url: &str,
    known: &mut Option<CatalogStatus>,
) -> Result<(Outcome, Option<Stored>, Option<std::time::Duration>), Error> {
    let name = catalog.name_any();
    let uid = catalog.uid().unwrap_or_default();
    // Sources reserve their share of the unpack budget before they read a body; while one
    // waits for it, the status says so.
    let (reserve, mut waiting) = Reserve::new(ctx.budget.clone());
    let fetched = match &fetch.mode {
        Mode::Confirm(resolved) => Ok(Fetched::Unchanged {
            resolved: resolved.clone(),
        }),
        mode => {
            let fetching = ctx.parts.sources.fetch(catalog, mode, &reserve);
            tokio::pin!(fetching);
            loop {
                tokio::select! {
                    fetched = &mut fetching => break fetched,
                    Ok(()) = waiting.changed() => {
                        let bytes = *waiting.borrow_and_update();
                        if let Some(bytes) = bytes {
                            pending(catalog, ctx, served, content_url, known, bytes).await?;
                        }
                    }
                }
            }
        }
    };
    let (files, resolved) = match fetched {
        Ok(Fetched::Unchanged { resolved }) => {
            return Ok((Outcome::Unchanged { resolved }, None, None));
        }
        Ok(Fetched::Running { message, recheck }) => {
            return Ok((Outcome::Running { message }, None, Some(recheck)));
        }
        Ok(Fetched::Content { files, resolved }) => (files, resolved),
        Err(e) => {
            return Ok((
                Outcome::Failed {
                    reason: e.reason,
                    message: e.message,
                },
                None,
                None,
            ));
        }
    };
    let bytes: u64 = files.iter().map(|(_, b)| b.len() as u64).sum();
    // Parsing and storing cost memory in proportion to the content: its share of the budget.
    // The source's reservation covers it (then shrinks to it), unless the source read
    // nothing it had to reserve for (ConfigMaps, read through the API) or got more than it
    // reserved (an archive unpacks larger): then the share is taken now, waiting if need be.
    let share = match reserve.take() {
        Some(mut share) if share.bytes() >= bytes => {
            share.shrink_to(bytes);
            Some(share)
        }
        held => {
            drop(held);
            match ctx.budget.try_acquire(bytes) {
                Some(share) => Some(share),
                None => {
                    pending(catalog, ctx, served, content_url, known, bytes).await?;
                    ctx.budget.acquire(bytes).await
                }
            }
        }
    };
    let store = ctx.parts.store.clone();
    let result = tokio::task::spawn_blocking(move || {
        let result = unpack(&store, &name, &uid, files);
        drop(share);
        result
    })
    .await
    .map_err(|e| Error::Store(format!("the unpack task failed: {e}")))?;
    Ok(match result {
        Ok(unpacked) => (
            Outcome::Unpacked {
                resolved,
                summary: unpacked.summary,
            },
            Some(unpacked.stored),
            None,
        ),
        Err(failed) => (
            Outcome::Failed {
                reason: failed.reason,
                message: failed.message,
            },
            None,
            None,
        ),
    })
}

/// Says in the status that the catalog waits for `bytes` of the unpack budget.
async fn pending(
    catalog: &Catalog,
    ctx: &Context,
    served: Option<&Served>,
    content_url: &str,
    known: &mut Option<CatalogStatus>,
    bytes: u64,
) -> Result<(), Error> {
    let name = catalog.name_any();
    let pending = Outcome::Pending {
        message: format!(
            "{bytes} bytes of content to fetch or unpack; waiting for other catalogs to finish unpacking (--unpack-budget-bytes)"
        ),
    };
    let status = next_status(catalog, &pending, served, content_url, &now());
    write_status(ctx, &name, known.as_ref(), &status).await?;
    *known = Some(status);
    tracing::info!(catalog = %name, bytes, "waiting for the unpack budget");
    Ok(())
}

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

fn requeue_after(poll: Option<std::time::Duration>, name: &str) -> Action {
    poll.map_or_else(Action::await_change, |d| {
        Action::requeue(jitter(d, jitter_seed(name)))
    })
}

fn set_content_bytes(ctx: &Context, name: &str, served: Option<&Stored>) {
    match served {
        Some(s) => ctx
            .parts
            .metrics
            .content_bytes
            .with_label_values(&[name])
            .set(i64::try_from(s.size).unwrap_or(i64::MAX)),
        None => {
            let _ = ctx.parts.metrics.content_bytes.remove_label_values(&[name]);
        }
    }
}

/// Writes `status` unless it equals `known` (what the API server holds, as far as we know): each
/// write is a watch event and so another reconcile.
async fn write_status(
    ctx: &Context,
    name: &str,
    known: Option<&CatalogStatus>,
    status: &CatalogStatus,
) -> Result<(), Error> {
    if known.is_some_and(|old| owned_status(old) == owned_status(status)) {
        return Ok(());
    }
    let api: Api<Catalog> = Api::all(ctx.parts.client.clone());
    let patch = serde_json::json!({
        "apiVersion": Catalog::api_version(&()),
        "kind": Catalog::kind(&()),
        "status": owned_status(status),
    });
    api.patch_status(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await
    .map_err(|e| Error::Kube("writing the Catalog status", e))?;
    Ok(())
}

/// The part of the status catalogd owns: everything but other managers' conditions and the
/// switcher's `imageTemplate`, so server-side apply leaves those alone.
fn owned_status(status: &CatalogStatus) -> serde_json::Value {
    let mut owned = status.clone();
    owned
        .conditions
        .retain(|c| c.type_ == crate::status::UNPACKED || c.type_ == crate::status::SERVING);
    owned.image_template = None;
    serde_json::to_value(owned).unwrap_or_default()
}

/// Removes a deleted Catalog's content.
pub async fn cleanup(catalog: Arc<Catalog>, ctx: &Context) -> Result<Action, Error> {
    let name = catalog.name_any();
    let store = ctx.parts.store.clone();
    let key = name.clone();
    tokio::task::spawn_blocking(move || store.delete(&key))
        .await
        .map_err(|e| Error::Store(e.to_string()))?
        .map_err(|e| Error::Store(e.to_string()))?;
    let _ = ctx
        .parts
        .metrics
        .content_bytes
        .remove_label_values(&[&name]);
    ctx.memory.forget(&name);
    ctx.parts
        .sources
        .custom
        .forget(&catalog.uid().unwrap_or_default())
        .await;
    tracing::info!(catalog = %name, "deleted the catalog's content");
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::reasons;
    use olm_api::conditions::condition;

    #[test]
    fn only_catalogds_own_status_is_applied() {
        let mut status = CatalogStatus::default();
        status.conditions.push(condition(
            "ResolvedImage",
            true,
            "AllTemplatesResolved",
            "img",
            Some(1),
            now(),
        ));
        status.conditions.push(condition(
            crate::status::UNPACKED,
            true,
            reasons::UNPACK_SUCCESSFUL,
            "ok",
            Some(1),
            now(),
        ));
        status.image_template = Some(Default::default());
        let owned = owned_status(&status);
        let types: Vec<&str> = owned["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["type"].as_str().unwrap())
            .collect();
        assert_eq!(types, ["Unpacked"]);
        assert!(owned.get("imageTemplate").is_none());
    }
}
