//! The provisioner as a manager ([`olm_runtime::manager`]): every replica checks its flags and
//! registers the provisioner's metric families; the leader opens the layer cache and runs the
//! BundleDeployment controller.

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::watcher;
use olm_puller::budget::UnpackBudget;
use olm_puller::flags::Setup;
use olm_puller::image::ImageMetrics;
use olm_runtime::manager::{Context as Runtime, Manager};
use olm_runtime::{EventPublisher, StartOptions};

use crate::apply::Applier;
use crate::args::Args;
use crate::controller;
use crate::drift::Drift;
use crate::fetch::Fetcher;
use crate::metrics::ProvisionerMetrics;
use crate::reconcile::Context;
use crate::render::capabilities::Discovered;
use crate::render::{Cluster, Renderer};

/// What stops the provisioner.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The runtime (client, admin server, leader election, logs) failed.
    #[error(transparent)]
    Runtime(#[from] olm_runtime::Error),
    /// The flags contradict each other, or name a file that is not right.
    #[error("{0}")]
    Settings(String),
    /// A metric family could not be registered.
    #[error("registering metrics")]
    Metrics(#[from] prometheus::Error),
    /// The layer cache could not be opened.
    #[error("opening the layer cache {path}")]
    Cache {
        /// Its directory.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// The provisioner, from its flags.
pub struct Provisioner(pub Args);

/// What every replica holds once prepared.
pub struct Prepared {
    metrics: ProvisionerMetrics,
    image_metrics: ImageMetrics,
    registry_ca: Option<Vec<u8>>,
}

impl Manager for Provisioner {
    type Error = Error;
    type Prepared = Prepared;

    fn options(&self) -> StartOptions<'_> {
        StartOptions {
            name: "provisioner",
            runtime: &self.0.runtime,
            advertise: None,
            flags: &self.0,
        }
    }

    async fn prepare(&self, rt: &Runtime) -> Result<Prepared, Error> {
        let args = &self.0;
        // Checked on every replica: a bad flag fails them all, not only the one that leads.
        if args.max_content_bytes > args.unpack_budget_bytes {
            return Err(Error::Settings(format!(
                "--max-content-bytes ({}) must not exceed --unpack-budget-bytes ({}): no bundle that large could ever be fetched",
                args.max_content_bytes, args.unpack_budget_bytes
            )));
        }
        args.namespaces().check().map_err(Error::Settings)?;
        Ok(Prepared {
            metrics: ProvisionerMetrics::new(&rt.metrics.registry)?,
            image_metrics: ImageMetrics::new(&rt.metrics.registry, ImageMetrics::PROVISIONER)?,
            registry_ca: args.image.registry_ca().map_err(Error::Settings)?,
        })
    }

    async fn lead(&self, prepared: &Prepared, rt: &Runtime) -> Result<(), Error> {
        let args = &self.0;
        let client = rt.client.clone();
        let setup = Setup {
            client: client.clone(),
            namespace: args.namespace.clone(),
            registry_ca: prepared.registry_ca.clone(),
            request_timeout: Duration::from_secs(args.http_timeout_seconds),
            max_bytes: args.max_content_bytes,
            cache_dir: &args.cache_dir,
            metrics: Some(prepared.image_metrics.clone()),
        };
        let images = args
            .image
            .image_source(&args.network, setup)
            .map_err(|source| Error::Cache {
                path: args.cache_dir.display().to_string(),
                source,
            })?;
        // Scratch directories a render left when the provisioner was killed: nothing of them
        // is used again.
        let scratch = args.cache_dir.join("render");
        if let Err(e) = std::fs::remove_dir_all(&scratch)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(path = %scratch.display(), error = %e, "could not remove old render directories");
        }
        let (drift, drifted) = Drift::new(client.clone(), rt.shutdown.clone());
        let drift = drift.scoped(
            args.namespaces().only(),
            Some(prepared.metrics.drift_watches.clone()),
        );
        let ctx = Arc::new(
            Context::new(
                client.clone(),
                Applier::new(client.clone(), args.default_namespace.clone())
                    .within(args.namespaces()),
                Fetcher::new(
                    client.clone(),
                    args.namespace.clone(),
                    Arc::new(images),
                    UnpackBudget::new(args.unpack_budget_bytes),
                    args.max_content_bytes,
                ),
                EventPublisher::from_env(client.clone(), "provisioner"),
                args.allowed(),
                prepared.metrics.clone(),
                drift,
                crate::certs::Certs {
                    provider: args.cert_provider,
                    lifetime: Duration::from_secs(args.cert_lifetime_seconds),
                    stores: crate::certs::store::Stores::new(client.clone(), &args.namespace),
                },
                Renderer::new(
                    &args.helm_binary,
                    &args.kustomize_binary,
                    args.render_limits(),
                    usize::from(args.render_concurrency),
                    scratch,
                    Cluster::Discovered(Discovered::new(client.clone())),
                ),
            )
            .resync_every(Duration::from_secs(args.resync_interval_seconds)),
        );
        let mut watch = watcher::Config::default().any_semantic();
        if !args.bundle_deployment_selector.is_empty() {
            watch = watch.labels(&args.bundle_deployment_selector);
        }
        controller::run(
            ctx,
            watch,
            drifted,
            rt.metrics.clone(),
            args.max_concurrent_reconciles,
            rt.readiness.register("bundledeployment-watch"),
            rt.shutdown.clone(),
        )
        .await;
        Ok(())
    }
}
