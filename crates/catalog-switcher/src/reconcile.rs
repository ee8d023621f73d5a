//! One reconcile of a Catalog or an OLM v0 CatalogSource: fill its template (if it has one),
//! then write the image reference and the switcher's status with server-side apply (field
//! manager `catalog-switcher`), each only when it differs, so a restart rewrites nothing.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use olm_api::catalog::{IMAGE_TEMPLATE_ANNOTATION, ImageTemplateStatus};
use olm_api::conditions::set_condition;
use prometheus::IntCounterVec;
use serde_json::json;
use tokio::sync::watch;

use crate::lookup::Objects;
use crate::render::{self, Lookup, Outcome, UNABLE_TO_RESOLVE};
use crate::status::{self, RESOLVED_IMAGE, SwitcherStatus, TEMPLATES_HAVE_RESOLVED};
use crate::switched::Switched;
use crate::template::{self, Part, Target};
use crate::version::KubeVersion;
use crate::watches::{WatchKey, Watches};

/// The switcher's field manager.
pub const FIELD_MANAGER: &str = "catalog-switcher";

/// What reconciles share.
pub struct Context {
    /// API client.
    pub client: kube::Client,
    /// Reads templates' objects.
    pub objects: Objects,
    /// The API server's version, as last polled.
    pub version: watch::Receiver<Option<KubeVersion>>,
    /// `catalog_switcher_template_resolutions_total{result}`.
    pub resolutions: IntCounterVec,
    /// Watches of the objects templates read.
    pub watches: Arc<Watches>,
    /// Events: a switch, and a template that stopped resolving.
    pub events: olm_runtime::EventPublisher,
    /// The most distinct objects one template may read (`--max-objects-per-template`).
    pub max_objects_per_template: usize,
}

/// A reconcile's failure: an API call.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Writing the object failed.
    #[error("writing {kind} {name}: {source}")]
    Write {
        /// Its kind.
        kind: &'static str,
        /// Its name (`namespace/name` when namespaced).
        name: String,
        /// Why.
        source: kube::Error,
    },
}

/// The outcome of `object`'s template, if it has one, and the objects it reads (to watch).
pub async fn outcome<K: Switched>(
    object: &K,
    ctx: &Context,
) -> (Option<Outcome>, BTreeSet<WatchKey>) {
    let mut keys = BTreeSet::new();
    let Some(text) = object.annotations().get(IMAGE_TEMPLATE_ANNOTATION) else {
        return (None, keys);
    };
    let version = ctx.version.borrow().clone();
    if let Some(message) = object.unsuitable() {
        let outcome = Outcome::Unresolved {
            reason: UNABLE_TO_RESOLVE,
            message,
            partial: text.clone(),
        };
        return (Some(outcome), keys);
    }
    let template = match template::parse(text) {
        Ok(t) => t,
        Err(_) => {
            let outcome = render::resolve(text, version.as_ref(), &mut |_| unreachable_lookup());
            return (Some(outcome), keys);
        }
    };
    // Each object read is a read now and a watch from now on: a template reads few.
    let others: BTreeSet<&template::ObjectRef> = template
        .parts
        .iter()
        .filter_map(|p| match p {
            Part::Object(var) => match &var.target {
                Target::Other(object) => Some(object),
                Target::Itself => None,
            },
            _ => None,
        })
        .collect();
    if others.len() > ctx.max_objects_per_template {
        let outcome = Outcome::Unresolved {
            reason: render::TOO_MANY_OBJECTS,
            message: format!(
                "cannot construct catalog image reference, because the template reads {} objects, more than the {} a template may read (--max-objects-per-template)",
                others.len(),
                ctx.max_objects_per_template
            ),
            partial: text.clone(),
        };
        return (Some(outcome), keys);
    }
    // Read each object once, then fill synchronously.
    let itself = object.itself();
    let confined_to = object.confined_to();
    let mut found: HashMap<Target, Lookup> = HashMap::new();
    for part in &template.parts {
        if let Part::Object(var) = part
            && !found.contains_key(&var.target)
        {
            let looked = ctx
                .objects
                .lookup(&var.target, &itself, confined_to.as_deref())
                .await;
            found.insert(var.target.clone(), looked);
            // Watched even when missing: its creation must re-resolve the template.
            if let Target::Other(object) = &var.target
                && let Some(key) = ctx.objects.watch_key(object, confined_to.as_deref()).await
            {
                keys.insert(key);
            }
        }
    }
    let outcome = render::fill(&template, version.as_ref(), &mut |t| {
        found
            .get(t)
            .cloned()
            .unwrap_or_else(|| Lookup::Missing("not read".into()))
    });
    (Some(outcome), keys)
}

/// A template that does not parse reads nothing.
fn unreachable_lookup() -> Lookup {
    Lookup::Missing("the template does not parse".into())
}

/// Reconciles one Catalog or CatalogSource.
pub async fn reconcile<K: Switched>(object: Arc<K>, ctx: Arc<Context>) -> Result<Action, Error> {
    let name = object.name_any();
    let shown = match object.namespace() {
        Some(ns) => format!("{ns}/{name}"),
        None => name.clone(),
    };
    let (mut outcome, keys) = outcome(object.as_ref(), &ctx).await;
    if let Err(limit) = ctx.watches.set(&object.dependent(), keys) {
        // Not resolved without its watches: the image would silently go stale.
        outcome = Some(Outcome::Unresolved {
            reason: render::WATCH_LIMIT_REACHED,
            message: format!("cannot follow the objects the template reads: {limit}"),
            partial: object
                .annotations()
                .get(IMAGE_TEMPLATE_ANNOTATION)
                .cloned()
                .unwrap_or_default(),
        });
    }
    if let Some(o) = &outcome {
        let result = match o {
            Outcome::Resolved(_) => "resolved",
            Outcome::Unresolved { reason, .. } if *reason == render::NOT_ALLOWED => "not_allowed",
            Outcome::Unresolved { .. } => "unresolved",
        };
        ctx.resolutions.with_label_values(&[result]).inc();
    }
    let current = object.image();
    let template = object.annotations().get(IMAGE_TEMPLATE_ANNOTATION);
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let decision = status::decide(
        template.map(String::as_str),
        outcome.as_ref(),
        current,
        object.meta().generation,
        now,
    );
    let api: Api<K> = object.api(ctx.client.clone());
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let failed = |source| Error::Write {
        kind: K::KIND_NAME,
        name: shown.clone(),
        source,
    };
    if let Some(image) = &decision.write_ref {
        let mut patch = skeleton(object.as_ref());
        patch["spec"] = K::image_patch(image);
        api.patch(&name, &params, &Patch::Apply(&patch))
            .await
            .map_err(failed)?;
        tracing::info!(kind = K::KIND_NAME, object = %shown, %image, from = current.unwrap_or(""), "wrote the image reference its template resolved to");
        ctx.events
            .publish(
                object.as_ref(),
                olm_runtime::EventType::Normal,
                "ImageSwitched",
                "Switch",
                format!(
                    "the image template resolved to {image}; the reference was {}",
                    current.unwrap_or("unset")
                ),
            )
            .await;
    }
    let desired = merged(object.conditions(), decision.status.as_ref());
    let ours = |conditions: &[Condition]| -> Vec<Condition> {
        let mut ours: Vec<Condition> = conditions
            .iter()
            .filter(|c| c.type_ == TEMPLATES_HAVE_RESOLVED || c.type_ == RESOLVED_IMAGE)
            .cloned()
            .collect();
        // In `merged`'s order, whatever order the API server keeps them in.
        ours.sort_by(|a, b| a.type_.cmp(&b.type_).reverse());
        ours
    };
    let desired_template = decision
        .status
        .as_ref()
        .filter(|_| K::HAS_IMAGE_TEMPLATE)
        .map(|s| s.image_template.clone());
    if ours(object.conditions()) != desired || object.image_template() != desired_template.as_ref()
    {
        let mut patch = skeleton(object.as_ref());
        patch["status"] = status_patch(&desired, desired_template.as_ref());
        api.patch_status(&name, &params, &Patch::Apply(&patch))
            .await
            .map_err(failed)?;
        // Said once, when the status changes: a template that cannot resolve keeps the old
        // reference, which must not go unnoticed.
        if let Some(Outcome::Unresolved {
            reason, message, ..
        }) = &outcome
        {
            ctx.events
                .publish(
                    object.as_ref(),
                    olm_runtime::EventType::Warning,
                    reason,
                    "Resolve",
                    message.clone(),
                )
                .await;
        }
    }
    Ok(match outcome {
        // An object that is not there yet, a kind not served yet, a read that failed: watches
        // notice most of these, but not all (a CRD installed after the template), so look again
        // later too.
        Some(Outcome::Unresolved { reason, .. })
            if reason == UNABLE_TO_RESOLVE || reason == render::WATCH_LIMIT_REACHED =>
        {
            Action::requeue(UNRESOLVED_RECHECK)
        }
        _ => Action::await_change(),
    })
}

/// How soon an unresolved template is tried again even if nothing it watches changes.
pub const UNRESOLVED_RECHECK: std::time::Duration = std::time::Duration::from_secs(60);

/// The apply patch's identity: apiVersion, kind, name (and namespace).
fn skeleton<K: Switched>(object: &K) -> serde_json::Value {
    let mut metadata = json!({"name": object.name_any()});
    if let Some(ns) = object.namespace() {
        metadata["namespace"] = json!(ns);
    }
    json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "metadata": metadata,
    })
}

/// The switcher's conditions as they should be: the existing ones updated (their transition
/// times kept when their status does not change), or none.
fn merged(existing: &[Condition], desired: Option<&SwitcherStatus>) -> Vec<Condition> {
    let Some(desired) = desired else {
        return Vec::new();
    };
    let mut conditions: Vec<Condition> = existing
        .iter()
        .filter(|c| c.type_ == TEMPLATES_HAVE_RESOLVED || c.type_ == RESOLVED_IMAGE)
        .cloned()
        .collect();
    for c in &desired.conditions {
        set_condition(&mut conditions, c.clone());
    }
    conditions.sort_by(|a, b| a.type_.cmp(&b.type_).reverse());
    conditions
}

/// The status the switcher applies: only its own fields (an applied object without them
/// removes the ones it owned).
fn status_patch(
    conditions: &[Condition],
    image_template: Option<&ImageTemplateStatus>,
) -> serde_json::Value {
    let mut status = serde_json::Map::new();
    if !conditions.is_empty() {
        status.insert("conditions".into(), json!(conditions));
    }
    if let Some(t) = image_template {
        status.insert("imageTemplate".into(), json!(t));
    }
    serde_json::Value::Object(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond(type_: &str, status: bool, message: &str, at: i64) -> Condition {
        olm_api::conditions::condition(
            type_,
            status,
            "R",
            message,
            Some(1),
            Time(k8s_openapi::jiff::Timestamp::from_second(at).unwrap()),
        )
    }

    #[test]
    fn transition_times_are_kept_while_the_status_does_not_change() {
        let existing = vec![
            cond("Unpacked", true, "catalogd's", 1),
            cond(TEMPLATES_HAVE_RESOLVED, true, "old", 5),
            cond(RESOLVED_IMAGE, true, "r/c:1", 5),
        ];
        let desired = SwitcherStatus {
            conditions: vec![
                cond(TEMPLATES_HAVE_RESOLVED, true, "old", 9),
                cond(RESOLVED_IMAGE, true, "r/c:2", 9),
            ],
            image_template: ImageTemplateStatus::default(),
        };
        let merged = merged(&existing, Some(&desired));
        assert_eq!(
            merged.len(),
            2,
            "catalogd's conditions are not the switcher's"
        );
        assert!(
            merged
                .iter()
                .all(|c| c.last_transition_time.0.as_second() == 5)
        );
        assert_eq!(
            merged
                .iter()
                .find(|c| c.type_ == RESOLVED_IMAGE)
                .unwrap()
                .message,
            "r/c:2"
        );
        assert!(super::merged(&existing, None).is_empty());
    }

    #[test]
    fn the_status_patch_holds_only_the_switchers_fields() {
        assert_eq!(status_patch(&[], None), json!({}));
        let patch = status_patch(
            &[cond(RESOLVED_IMAGE, true, "r/c:2", 1)],
            Some(&ImageTemplateStatus {
                template: Some("t".into()),
                ..Default::default()
            }),
        );
        assert_eq!(patch["imageTemplate"], json!({"template": "t"}));
        assert_eq!(patch["conditions"][0]["type"], RESOLVED_IMAGE);
    }
}
