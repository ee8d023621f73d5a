//! The Catalog controller: watches Catalogs and the ConfigMaps they reference (a change to a
//! ConfigMap re-unpacks exactly the Catalogs that use it), keeps a finalizer that removes stored
//! content on deletion, and counts every reconcile in the controller-runtime metrics.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{Event as Finalizer, finalizer};
use kube::runtime::reflector::{ObjectRef, Store as Reflector};
use kube::runtime::watcher;
use olm_api::catalog::Catalog;
use olm_runtime::metrics::{Metrics, ReconcileOutcome};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::reconcile::{self, Context, Error};

/// The finalizer upstream catalogd uses, so either can take over the other's objects.
pub const FINALIZER: &str = "catalogd.operatorframework.io/delete-server-cache";

/// Name of this controller in metrics and logs.
pub const CONTROLLER: &str = "catalog";

/// Catalogs reconciled at once: enough that one slow source does not hold up the others, few
/// enough that a restart with many large catalogs does not unpack them all at once.
pub const CONCURRENCY: u16 = 4;

/// The Catalogs whose `configMaps` source reads `namespace/name`.
fn referencing(
    reader: &Reflector<Catalog>,
    own_namespace: &str,
    namespace: &str,
    name: &str,
) -> Vec<ObjectRef<Catalog>> {
    reader
        .state()
        .iter()
        .filter(|c| {
            c.spec.source.config_maps.iter().flatten().any(|e| {
                e.config_map.name == name
                    && e.config_map.namespace.as_deref().unwrap_or(own_namespace) == namespace
            })
        })
        .map(|c| ObjectRef::from_obj(c.as_ref()))
        .collect()
}

/// Builds the controller; its cache is stored in the context before it runs.
pub fn build(
    ctx: &mut Context,
    own_namespace: &str,
    watched_namespaces: &[String],
) -> Controller<Catalog> {
    let catalogs: Api<Catalog> = Api::all(ctx.client.clone());
    let mut controller = Controller::new(catalogs, watcher::Config::default().any_semantic());
    let reader = controller.store();
    ctx.catalogs = Some(reader.clone());
    for ns in watched_namespaces {
        let reader = reader.clone();
        let own = own_namespace.to_owned();
        let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), ns);
        controller = controller.watches(api, watcher::Config::default(), move |cm: ConfigMap| {
            referencing(
                &reader,
                &own,
                cm.namespace().as_deref().unwrap_or_default(),
                &cm.name_any(),
            )
        });
    }
    controller
}

async fn reconcile(
    catalog: Arc<Catalog>,
    ctx: Arc<(Context, Arc<Metrics>)>,
) -> Result<Action, kube::runtime::finalizer::Error<Error>> {
    let (ctx, metrics) = (&ctx.0, &ctx.1);
    let timer = metrics.reconcile_timer(CONTROLLER);
    let api: Api<Catalog> = Api::all(ctx.client.clone());
    let span = tracing::info_span!("reconcile", catalog = %catalog.name_any());
    let result = finalizer(&api, FINALIZER, catalog, |event| async move {
        match event {
            Finalizer::Apply(c) => reconcile::apply(c, ctx).await,
            Finalizer::Cleanup(c) => reconcile::cleanup(c, ctx).await,
        }
    })
    .instrument(span)
    .await;
    timer.finish(match &result {
        Ok(a) if *a == Action::await_change() => ReconcileOutcome::Success,
        Ok(_) => ReconcileOutcome::RequeueAfter,
        Err(_) => ReconcileOutcome::Error,
    });
    result
}

fn error_policy(
    catalog: Arc<Catalog>,
    error: &kube::runtime::finalizer::Error<Error>,
    _ctx: Arc<(Context, Arc<Metrics>)>,
) -> Action {
    tracing::warn!(catalog = %catalog.name_any(), %error, "reconcile failed; retrying in 10s");
    Action::requeue(Duration::from_secs(10))
}

/// Runs the controller until `shutdown` is cancelled.
pub async fn run(
    controller: Controller<Catalog>,
    ctx: Context,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) {
    let ctx = Arc::new((ctx, metrics));
    controller
        .with_config(kube::runtime::controller::Config::default().concurrency(CONCURRENCY))
        .graceful_shutdown_on(async move { shutdown.cancelled().await })
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %e, "controller event");
            }
        })
        .await;
}
