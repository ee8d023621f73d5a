//! One Operator's reconcile: read the snapshot from the controller's caches, decide (the same
//! code `explain` runs), then write only what changed: the BundleDeployment and the status by
//! server-side apply, and events.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::runtime::reflector::{ObjectRef, Store as Reflector};
use kube::{Client, ResourceExt};
use olm_api::bundle_deployment::BundleDeployment;
use olm_api::catalog::Catalog;
use olm_api::conditions::find_condition;
use olm_api::operator::{Operator, OperatorStatus};
use olm_runtime::events::EventPublisher;

use crate::FIELD_MANAGER;
use crate::metrics::OperatorMetrics;
use crate::plan::{bundle_deployment_not_written, plan};
use crate::resolution::{Resolver, Snapshot};
use crate::status::types;

/// Everything a reconcile needs.
pub struct Context {
    /// API client.
    pub client: Client,
    /// Resolution with its caches.
    pub resolver: Arc<Resolver>,
    /// The controller's cache of Operators.
    pub operators: Reflector<Operator>,
    /// The cache of BundleDeployments.
    pub bundle_deployments: Reflector<BundleDeployment>,
    /// The cache of Catalogs.
    pub catalogs: Reflector<Catalog>,
    /// The cache of CRDs (their schemas dropped).
    pub crds: Reflector<CustomResourceDefinition>,
    /// The cache of APIServices.
    pub api_services: Reflector<APIService>,
    /// Events.
    pub events: EventPublisher,
    /// operator_controller_* families.
    pub metrics: OperatorMetrics,
    /// The longest wait before a failed reconcile is tried again (`--max-backoff-seconds`).
    pub max_backoff: std::time::Duration,
    /// How often a resolved Operator is looked at again without a trigger.
    pub resync: Duration,
    /// What this process last wrote, until the caches catch up.
    pub written: Written,
    /// Names of Operators to re-queue (group mates, the prober's).
    pub requeue: futures::channel::mpsc::UnboundedSender<String>,
    /// How often the prober asks catalogd about each serving Catalog.
    pub probe_interval: Duration,
}

/// The objects this process last wrote, each with the resourceVersion it replaced: until the
/// watch delivers the write, the cache still holds that version, and planning from it would
/// write again (a new transition time, a second event).
#[derive(Default)]
pub struct Written {
    operators: Mutex<HashMap<String, Ours<Operator>>>,
    bundle_deployments: Mutex<HashMap<String, Ours<BundleDeployment>>>,
}

/// An object as we wrote it.
struct Ours<K> {
    /// The resourceVersion it replaced; `None` when we created it.
    replaced: Option<String>,
    object: Arc<K>,
    at: Instant,
}

/// How long a write is trusted over the cache: a watch delivers well within it, and an object
/// deleted before the cache ever saw it is noticed after it.
const CATCH_UP: Duration = Duration::from_secs(30);

/// `cached`, or what we wrote over it when the cache has not seen our write yet.
fn fresher<K: kube::Resource>(
    map: &Mutex<HashMap<String, Ours<K>>>,
    name: &str,
    cached: Option<Arc<K>>,
) -> Option<Arc<K>> {
    let mut map = map.lock().unwrap_or_else(PoisonError::into_inner);
    let Some(ours) = map.get(name).filter(|o| o.at.elapsed() < CATCH_UP) else {
        map.remove(name);
        return cached;
    };
    let behind = match (&cached, &ours.replaced) {
        // The cache still holds the version we wrote over.
        (Some(c), Some(rv)) => {
            c.meta().resource_version.as_ref() == Some(rv) && c.meta().uid == ours.object.meta().uid
        }
        // The cache has not seen the object we created.
        (None, None) => true,
        _ => false,
    };
    if behind {
        return Some(ours.object.clone());
    }
    map.remove(name);
    cached
}

fn remember<K>(
    map: &Mutex<HashMap<String, Ours<K>>>,
    name: &str,
    replaced: Option<String>,
    object: K,
) {
    map.lock().unwrap_or_else(PoisonError::into_inner).insert(
        name.to_owned(),
        Ours {
            replaced,
            object: Arc::new(object),
            at: Instant::now(),
        },
    );
}

/// Why a reconcile failed; it is retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error("{0}: {1}")]
    Kube(&'static str, #[source] kube::Error),
    /// The catalogs the Operator may use could not be read (status says which).
    #[error("catalog content could not be read")]
    CatalogsUnavailable,
    /// The Catalog or BundleDeployment watch stopped (the manager is shutting down).
    #[error("the Catalog or BundleDeployment cache is closed")]
    CachesClosed,
}

impl Context {
    /// The objects resolution reads, from the caches.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            operators: self.operators.state(),
            bundle_deployments: self.bundle_deployments.state(),
            catalogs: self.catalogs.state(),
            apis: Arc::new(crate::apis::cluster_apis(
                &self.crds.state(),
                &self.api_services.state(),
            )),
        }
    }
}

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

/// How long a reconcile waits for the caches' first list (Catalogs, BundleDeployments, and
/// the cluster's APIs: an answer without them would fail a requirement the cluster meets).
const CACHE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Reconciles one Operator.
pub async fn reconcile(op: Arc<Operator>, ctx: &Context) -> Result<Action, Error> {
    let name = op.name_any();
    if op.metadata.deletion_timestamp.is_some() {
        // Its BundleDeployment goes with it (the garbage collector follows the owner reference).
        return Ok(Action::await_change());
    }
    let Some(op) = fresher(&ctx.written.operators, &name, Some(op)) else {
        return Ok(Action::await_change());
    };
    // Deciding from half-filled caches would flap status (no Catalogs yet: "no catalog has
    // the package") and rewrite BundleDeployments: wait until each has listed once. Briefly:
    // the watches that fill them stop being polled once a shutdown begins, and a reconcile
    // waiting on them then would hold the shutdown up; it is simply tried again.
    let ready = async {
        ctx.catalogs.wait_until_ready().await.is_ok()
            && ctx.bundle_deployments.wait_until_ready().await.is_ok()
            && ctx.crds.wait_until_ready().await.is_ok()
            && ctx.api_services.wait_until_ready().await.is_ok()
    };
    match tokio::time::timeout(CACHE_WAIT, ready).await {
        Ok(true) => {}
        Ok(false) => return Err(Error::CachesClosed),
        Err(_) => return Ok(Action::requeue(CACHE_WAIT)),
    }
    let snapshot = ctx.snapshot();
    let Some(decision) = ctx.resolver.decide(&snapshot, &name).await else {
        return Ok(Action::await_change());
    };
    let existing = fresher(
        &ctx.written.bundle_deployments,
        &name,
        ctx.bundle_deployments.get(&ObjectRef::new(&name)),
    );
    let plan = plan(&op, existing.as_deref(), &decision, &now());

    if let Some(bd) = &plan.apply {
        let api: Api<BundleDeployment> = Api::all(ctx.client.clone());
        let written = api
            .patch(
                &name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(bd),
            )
            .await;
        if let Ok(after) = &written {
            tracing::info!(
                image = crate::bundle_deployment::image_of(after).unwrap_or_default(),
                "BundleDeployment written"
            );
            let replaced = existing.as_ref().and_then(|b| b.resource_version());
            remember(
                &ctx.written.bundle_deployments,
                &name,
                replaced,
                after.clone(),
            );
        }
        if let Err(e) = written {
            let message = format!("writing the BundleDeployment failed: {e}");
            let (status, event) = bundle_deployment_not_written(&op, &plan.status, message, &now());
            write_status(ctx, &op, &status).await?;
            ctx.events
                .publish(
                    op.as_ref(),
                    if event.warning {
                        EventType::Warning
                    } else {
                        EventType::Normal
                    },
                    event.reason,
                    "Apply",
                    event.note,
                )
                .await;
            return Err(Error::Kube("writing the BundleDeployment", e));
        }
    }
    if plan.status_changed {
        write_status(ctx, &op, &plan.status).await?;
    }
    if !plan.events.is_empty() {
        // Events are best effort, and their publisher serializes requests (to aggregate
        // repeats): published in the background, so a burst of changes is not paced by them.
        let (events, op, planned) = (ctx.events.clone(), op.clone(), plan.events.clone());
        tokio::spawn(async move {
            for e in planned {
                let type_ = if e.warning {
                    EventType::Warning
                } else {
                    EventType::Normal
                };
                events
                    .publish(op.as_ref(), type_, e.reason, "Resolve", e.note)
                    .await;
            }
        });
    }
    update_gauge(ctx, Some((&name, &plan.status)));
    if plan.retry {
        return Err(Error::CatalogsUnavailable);
    }
    Ok(Action::requeue(ctx.resync))
}

async fn write_status(ctx: &Context, op: &Operator, status: &OperatorStatus) -> Result<(), Error> {
    let api: Api<Operator> = Api::all(ctx.client.clone());
    let name = op.name_any();
    let patch = serde_json::json!({
        "apiVersion": "operators.operatorframework.io/v1alpha1",
        "kind": "Operator",
        "status": status,
    });
    let after = api
        .patch_status(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&patch),
        )
        .await
        .map_err(|e| Error::Kube("writing the Operator status", e))?;
    remember(&ctx.written.operators, &name, op.resource_version(), after);
    Ok(())
}

/// The status of condition `type_`: `True`, `False` or `Unknown` (also when absent).
fn state(status: Option<&OperatorStatus>, type_: &str) -> &'static str {
    match status
        .and_then(|s| find_condition(&s.conditions, type_))
        .map(|c| c.status.as_str())
    {
        Some("True") => "True",
        Some("False") => "False",
        _ => "Unknown",
    }
}

/// Recounts Operators by their Resolved and Installed states; `just_written` overrides the
/// cache for an Operator whose new status has not come back through the watch yet.
pub fn update_gauge(ctx: &Context, just_written: Option<(&str, &OperatorStatus)>) {
    let mut counts: HashMap<(&str, &str), i64> = HashMap::new();
    for r in ["True", "False", "Unknown"] {
        for i in ["True", "False", "Unknown"] {
            counts.insert((r, i), 0);
        }
    }
    for op in ctx.operators.state() {
        let status = match just_written {
            Some((name, s)) if op.metadata.name.as_deref() == Some(name) => Some(s),
            _ => op.status.as_ref(),
        };
        *counts
            .entry((
                state(status, types::RESOLVED),
                state(status, types::INSTALLED),
            ))
            .or_default() += 1;
    }
    for ((r, i), n) in counts {
        ctx.metrics.operators.with_label_values(&[r, i]).set(n);
    }
}
