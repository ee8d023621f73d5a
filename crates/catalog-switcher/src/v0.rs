//! OLM v0 `CatalogSource`s are switched too, when their CRD is served: the CRD is watched (by
//! name only), and the CatalogSource controller starts when discovery serves the kind and
//! stops when it no longer does. Without the CRD nothing fails; the switcher says so once.

use std::sync::{Arc, Mutex, PoisonError};

use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use kube::core::GroupVersionKind;
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use olm_api::catalog_source_v0::CatalogSource;
use olm_runtime::metrics::Metrics;
use tokio_util::sync::CancellationToken;

use crate::controller::{self, CATALOG_SOURCES};
use crate::reconcile::Context;
use crate::switched::Switched;
use crate::watches::Requeue;

/// The CRD of OLM v0 CatalogSources.
pub const CRD_NAME: &str = "catalogsources.operators.coreos.com";

/// Whether the API server serves `operators.coreos.com/v1alpha1` CatalogSources.
pub async fn served(client: &kube::Client) -> bool {
    let gvk = GroupVersionKind::gvk("operators.coreos.com", "v1alpha1", "CatalogSource");
    kube::discovery::pinned_kind(client, &gvk).await.is_ok()
}

/// Starts and stops the CatalogSource controller with the CRD, until `shutdown`.
pub async fn supervise(
    ctx: Arc<Context>,
    metrics: Arc<Metrics>,
    requeue: Requeue,
    shutdown: CancellationToken,
) {
    let client = ctx.client.clone();
    // Metadata only: the CRD's schema is of no interest, only its coming and going.
    let crds: Api<PartialObjectMeta<CustomResourceDefinition>> = Api::all(client.clone());
    let mut crd_events = watcher(
        crds,
        watcher::Config::default().fields(&format!("metadata.name={CRD_NAME}")),
    )
    .default_backoff()
    .boxed();
    let mut running: Option<(CancellationToken, tokio::task::JoinHandle<()>)> = None;
    let mut said_absent = false;
    // Whether the CRD object exists: discovery serves a new CRD's kind a moment after the CRD
    // is established, so until it does, discovery is asked again every second (for a minute
    // after each change of the CRD: a CRD that never serves v1alpha1 is not polled forever).
    let mut crd_exists = false;
    let mut retries: u32 = 0;
    loop {
        let is_served = served(&client).await;
        match (is_served, running.is_some()) {
            (true, false) => {
                let stop = shutdown.child_token();
                let (tx, rx) = futures::channel::mpsc::unbounded();
                *lock(&requeue.catalog_sources) = Some(tx);
                let task = tokio::spawn(controller::run(
                    CATALOG_SOURCES,
                    Api::<CatalogSource>::all(client.clone()),
                    ctx.clone(),
                    metrics.clone(),
                    rx,
                    |_| {},
                    stop.clone(),
                ));
                tracing::info!(
                    "CatalogSource (operators.coreos.com/v1alpha1) is served: switching CatalogSources too"
                );
                running = Some((stop, task));
                said_absent = false;
            }
            (false, true) => {
                if let Some((stop, task)) = running.take() {
                    stop.cancel();
                    let _ = task.await;
                }
                *lock(&requeue.catalog_sources) = None;
                // Its objects read nothing any more.
                ctx.watches.retain(|d| !CatalogSource::owns(d));
                tracing::info!(
                    "CatalogSource is no longer served: stopped switching CatalogSources"
                );
            }
            (false, false) if !said_absent => {
                tracing::info!(
                    "CatalogSource (operators.coreos.com/v1alpha1) is not served: switching Catalogs only, until its CRD is installed"
                );
                said_absent = true;
            }
            _ => {}
        }
        // Discovery lags the CRD both ways: ask again while the two disagree.
        if crd_exists == is_served {
            retries = 0;
        }
        let waiting_for_discovery = crd_exists != is_served && retries < 60;
        // Any change of the CRD (created, established, deleted) or of its watch: look again.
        tokio::select! {
            () = shutdown.cancelled() => break,
            () = tokio::time::sleep(std::time::Duration::from_secs(1)), if waiting_for_discovery => {
                retries += 1;
            }
            event = crd_events.next() => match event {
                None => break,
                Some(Ok(watcher::Event::Apply(_) | watcher::Event::InitApply(_))) => {
                    crd_exists = true;
                    retries = 0;
                }
                Some(Ok(watcher::Event::Delete(_))) => crd_exists = false,
                Some(Ok(watcher::Event::Init)) => crd_exists = false,
                Some(Ok(watcher::Event::InitDone)) => {}
                Some(Err(error)) => {
                    tracing::warn!(%error, "the watch of the CatalogSource CRD failed; it retries");
                }
            }
        }
    }
    if let Some((stop, task)) = running {
        stop.cancel();
        let _ = task.await;
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
