//! The leader's work: the five sources, the upload endpoint of generator Pods and the Catalog
//! controller, built from the flags, until shutdown.

use std::sync::Arc;
use std::time::Duration;

use olm_runtime::EventPublisher;
use olm_runtime::manager::Context;
use olm_runtime::shutdown::SERVER_DRAIN;

use super::{Error, Prepared};
use crate::args::Args;
use crate::context::Parts;
use crate::metrics::CatalogdMetrics;
use crate::source::configmaps::ConfigMapsSource;
use crate::source::custom::pod::PodOptions;
use crate::source::custom::resources::Defaults;
use crate::source::custom::runs::Runs;
use crate::source::custom::{CustomMetrics, CustomOptions, CustomSource, upload};
use crate::source::git::{GitMetrics, GitOptions, GitSource};
use crate::source::http::HttpSource;
use crate::{controller, namespace, server};
use olm_puller::flags::Setup;
use olm_puller::image::{ImageMetrics, ImageSource};

/// Runs the leader's work until `ctx.shutdown`.
pub async fn lead(args: &Args, prepared: &Prepared, ctx: &Context) -> Result<(), Error> {
    // The leader's own reconciles fill its store (and keep what a follower copied).
    prepared.content_synced.set_ready(true);
    prepared.lag.set(0.0);
    let catalogs_ready = ctx.readiness.register("catalog-watch");
    let client = &ctx.client;
    let policy = args.network.policy();
    let config_maps = ConfigMapsSource::new(
        client.clone(),
        args.namespace.clone(),
        args.allowed_configmap_namespaces.clone(),
        args.max_content_bytes,
    );
    let watched = config_maps.watched_namespaces();
    let http = HttpSource::new(
        client.clone(),
        args.namespace.clone(),
        args.max_content_bytes,
        Duration::from_secs(args.http_timeout_seconds),
        policy.clone(),
    );
    let image = image(args, prepared, ctx)?;
    let git = GitSource::new(
        client.clone(),
        args.namespace.clone(),
        GitOptions {
            max_bytes: args.max_content_bytes,
            timeout: Duration::from_secs(args.git_timeout_seconds),
            max_concurrent: args.max_concurrent_git_fetches,
            // Scratch repositories live beside the content; a name no Catalog can have.
            scratch: args.storage_dir.join(".git-scratch"),
            policy,
        },
        Some(GitMetrics::new(&ctx.metrics.registry)?),
    );
    let runs = Arc::new(Runs::default());
    let custom_metrics = CustomMetrics::new(&ctx.metrics.registry)?;
    let custom = CustomSource::new(
        client.clone(),
        CustomOptions {
            pod: PodOptions {
                namespace: args.namespace.clone(),
                collector_image: args.collector_image.clone(),
                upload_url: args.upload_url.clone(),
                max_bytes: args.max_content_bytes,
                defaults: Defaults {
                    requests: args.generator_default_requests.clone(),
                    limits: args.generator_default_limits.clone(),
                    maximum: args.generator_max_resources.clone(),
                },
            },
            max_concurrent: args.max_concurrent_generators,
        },
        runs.clone(),
        Some(custom_metrics.clone()),
    );
    if let Some(level) = &args.namespace_pod_security {
        namespace::label(client, &args.namespace, level).await;
    }
    let left = custom
        .remove_leftovers()
        .await
        .map_err(|e| Error::kube("removing generator pods of an earlier catalogd", e))?;
    if left > 0 {
        tracing::info!(pods = left, "removed generator pods of an earlier catalogd");
    }
    let upload_listener = Error::bind("the upload endpoint", args.upload_address).await?;
    let uploads = tokio::spawn(server::serve(
        upload_listener,
        upload::router(runs, args.max_content_bytes, Some(custom_metrics)),
        None,
        ctx.shutdown.clone(),
    ));
    let parts = Parts {
        client: client.clone(),
        store: prepared.store.clone(),
        sources: crate::source::Sources {
            config_maps,
            http,
            image,
            git,
            custom,
        },
        metrics: CatalogdMetrics::new(&ctx.metrics.registry)?,
        events: EventPublisher::from_env(client.clone(), "catalogd"),
        external_address: args.external_address.clone(),
        unpack_budget_bytes: args.unpack_budget_bytes,
    };
    let (controller, reconciler) =
        controller::build(parts, &args.namespace, &watched, catalogs_ready);
    controller::run(
        controller,
        reconciler,
        ctx.metrics.clone(),
        ctx.shutdown.clone(),
    )
    .await;
    ctx.shutdown.cancel();
    let _ = tokio::time::timeout(SERVER_DRAIN, uploads).await;
    Ok(())
}

/// The image source, with its layer cache.
fn image(args: &Args, prepared: &Prepared, ctx: &Context) -> Result<ImageSource, Error> {
    let layer_dir = args
        .layer_cache_dir
        .clone()
        .unwrap_or_else(|| args.storage_dir.join(".layers"));
    let setup = Setup {
        client: ctx.client.clone(),
        namespace: args.namespace.clone(),
        registry_ca: prepared.registry_ca.clone(),
        request_timeout: Duration::from_secs(args.http_timeout_seconds),
        max_bytes: args.max_content_bytes,
        cache_dir: &layer_dir,
        metrics: Some(ImageMetrics::new(
            &ctx.metrics.registry,
            ImageMetrics::CATALOGD,
        )?),
    };
    args.image
        .image_source(&args.network, setup)
        .map_err(|source| Error::Io {
            what: format!("opening the layer cache {}", layer_dir.display()),
            source,
        })
}
