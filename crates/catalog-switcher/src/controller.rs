//! The switcher's controllers, one per kind it manages, built the same way: a watch of the
//! kind (whose events the caller may observe), re-queues from the object watches, every object
//! again when the API server's version changes, and reconciles counted in the
//! controller-runtime metrics.

use olm_runtime::retry::Retry;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::{Stream, StreamExt};
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{WatchStreamExt, watcher};
use olm_runtime::metrics::Metrics;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::reconcile::{self, Context};
use crate::switched::Switched;
use crate::version::KubeVersion;
use crate::watches::Dependent;

/// The Catalog controller's name in metrics and logs.
pub const CATALOGS: &str = "catalog-image-template";
/// The CatalogSource controller's.
pub const CATALOG_SOURCES: &str = "catalogsource-image-template";
/// Objects reconciled at once, per controller.
pub const CONCURRENCY: u16 = 4;

/// A stream that yields once per change of the API server's version.
pub fn version_changes(
    mut version: watch::Receiver<Option<KubeVersion>>,
) -> impl Stream<Item = ()> + Send + 'static {
    // The current value is not a change.
    version.mark_unchanged();
    futures::stream::unfold(version, |mut rx| async move {
        rx.changed().await.ok()?;
        Some(((), rx))
    })
}

/// Runs the controller of `api`'s kind until `stop`. `observe` sees every event of the kind's
/// watch (readiness, re-lists). Objects deleted, or gone while the watch was down (a re-list
/// does not say which went), stop being readers of the objects their templates read.
pub async fn run<K>(
    name: &'static str,
    api: Api<K>,
    ctx: Arc<Context>,
    metrics: Arc<Metrics>,
    requeue: impl Stream<Item = ObjectRef<K>> + Send + 'static,
    observe: impl Fn(&Result<watcher::Event<K>, watcher::Error>) + Send + 'static,
    stop: CancellationToken,
) where
    K: Switched,
    K::DynamicType: Eq + std::hash::Hash + Clone + Default,
{
    let listed: Mutex<BTreeSet<Dependent>> = Mutex::default();
    let watches = ctx.watches.clone();
    let observe = move |event: &Result<watcher::Event<K>, watcher::Error>| {
        let lock = || listed.lock().unwrap_or_else(PoisonError::into_inner);
        match event {
            Ok(watcher::Event::Init) => lock().clear(),
            Ok(watcher::Event::InitApply(object)) => {
                lock().insert(object.dependent());
            }
            Ok(watcher::Event::InitDone) => {
                let alive = std::mem::take(&mut *lock());
                watches.retain(|d| !K::owns(d) || alive.contains(d));
            }
            Ok(watcher::Event::Delete(object)) => {
                // Reading nothing never passes the limit.
                let _ = watches.set(&object.dependent(), BTreeSet::new());
            }
            Ok(watcher::Event::Apply(_)) | Err(_) => {}
        }
        observe(event);
    };
    let (reader, writer) = reflector::store();
    let objects = watcher(api, watcher::Config::default().any_semantic())
        .default_backoff()
        .inspect(observe)
        .reflect(writer)
        .applied_objects();
    let version = version_changes(ctx.version.clone());
    let controller = Controller::for_stream(objects, reader)
        .reconcile_all_on(version)
        .reconcile_on(requeue);
    olm_runtime::controller::Run {
        name,
        concurrency: CONCURRENCY,
        metrics,
        shutdown: stop,
        retry: Retry::Fixed(Duration::from_secs(10)),
    }
    .run(
        controller,
        reconcile::reconcile,
        |_, error, wait| {
            tracing::warn!(%error, "reconcile failed; retrying in {} s", wait.as_secs());
            Action::requeue(wait)
        },
        ctx,
    )
    .await;
}
