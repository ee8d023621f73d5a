//! catalog-switcher as a manager ([`olm_runtime::manager`]): every replica registers the
//! switcher's metric families; the leader polls the API server's version and runs the Catalog
//! controller, and the CatalogSource controller while that CRD is served.

use std::sync::Arc;
use std::time::Duration;

use kube::api::Api;
use kube::runtime::watcher;
use olm_api::catalog::Catalog;
use olm_runtime::manager::{Context as Runtime, Manager};
use olm_runtime::{EventPublisher, StartOptions};
use tokio::sync::{Notify, watch};

use crate::allowlist::Allowlist;
use crate::args::Args;
use crate::controller;
use crate::lookup::Objects;
use crate::metrics::SwitcherMetrics;
use crate::reconcile::Context;
use crate::version;
use crate::watches::{Requeue, Watches};

/// What stops the switcher.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The runtime (client, admin server, leader election, logs) failed.
    #[error(transparent)]
    Runtime(#[from] olm_runtime::Error),
    /// A metric family could not be registered.
    #[error("registering metrics")]
    Metrics(#[from] prometheus::Error),
}

/// The switcher, from its flags.
pub struct CatalogSwitcher(pub Args);

impl Manager for CatalogSwitcher {
    type Error = Error;
    type Prepared = SwitcherMetrics;

    fn options(&self) -> StartOptions<'_> {
        StartOptions {
            name: "catalog-switcher",
            runtime: &self.0.runtime,
            advertise: None,
            flags: &self.0,
        }
    }

    async fn prepare(&self, rt: &Runtime) -> Result<SwitcherMetrics, Error> {
        Ok(SwitcherMetrics::new(&rt.metrics.registry)?)
    }

    async fn lead(&self, metrics: &SwitcherMetrics, rt: &Runtime) -> Result<(), Error> {
        let args = &self.0;
        let catalogs_ready = rt.readiness.register("catalog-watch");
        let client = rt.client.clone();
        let shutdown = rt.shutdown.clone();
        // The version first, so that the first reconciles have it.
        let (version_tx, version_rx) = watch::channel(version::poll(&client).await);
        version::show(&metrics.version_info, version_rx.borrow().as_ref());
        // The Catalog watch restarting (after an error, or a long disconnection) may mean the
        // cluster was upgraded meanwhile: poll at once then too.
        let poll_now = Arc::new(Notify::new());
        let poller = tokio::spawn(version::keep_polling(
            client.clone(),
            Duration::from_secs(args.version_poll_seconds.max(1)),
            poll_now.clone(),
            version_tx,
            metrics.version_info.clone(),
            shutdown.clone(),
        ));
        let (catalogs_tx, catalogs_rx) = futures::channel::mpsc::unbounded();
        let requeue = Requeue {
            catalogs: catalogs_tx,
            catalog_sources: Arc::default(),
        };
        let watches = Watches::new(
            client.clone(),
            requeue.clone(),
            metrics.watched.clone(),
            args.max_watched_objects,
        );
        let ctx = Arc::new(Context {
            client: client.clone(),
            objects: Objects::new(client.clone(), Allowlist(args.allowed_resources.clone())),
            version: version_rx,
            resolutions: metrics.resolutions.clone(),
            watches,
            events: EventPublisher::from_env(client.clone(), "catalog-switcher"),
            max_objects_per_template: args.max_objects_per_template,
        });
        let v0 = args.switch_catalog_sources.then(|| {
            tokio::spawn(crate::v0::supervise(
                ctx.clone(),
                rt.metrics.clone(),
                requeue,
                shutdown.clone(),
            ))
        });
        controller::run(
            controller::CATALOGS,
            Api::<Catalog>::all(client),
            ctx,
            rt.metrics.clone(),
            catalogs_rx,
            move |event| {
                if let Ok(watcher::Event::Init) = event {
                    poll_now.notify_one();
                }
                catalogs_ready.follow("Catalog", event);
            },
            shutdown.clone(),
        )
        .await;
        shutdown.cancel();
        if let Some(v0) = v0 {
            let _ = v0.await;
        }
        let _ = poller.await;
        Ok(())
    }
}
