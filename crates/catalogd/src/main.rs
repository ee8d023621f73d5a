//! catalogd: turns `Catalog` objects into served, validated catalog content.
//!
//! Start-up: flags, tracing, client; open the content store and drop content of Catalogs that
//! were deleted while catalogd was down; then run the admin server (metrics, probes), the
//! content server and the Catalog controller until SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, Result};
use catalogd::reconcile::Context;
use catalogd::source::{Sources, configmaps::ConfigMapsSource, http::HttpSource};
use catalogd::{controller, metrics::CatalogdMetrics, server, store::Store};
use clap::Parser;
use kube::api::{Api, ListParams};
use olm_api::catalog::Catalog;
use olm_runtime::{admin, events::EventPublisher, metrics::Metrics, shutdown, telemetry};

/// catalogd: unpacks, validates and serves the content of Catalog objects.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Flags {
    /// Where unpacked content is stored.
    #[arg(
        long,
        env = "CATALOGD_STORAGE_DIR",
        default_value = "/var/cache/catalogd"
    )]
    storage_dir: PathBuf,
    /// Address of the catalog content server.
    #[arg(long, default_value = "0.0.0.0:8083")]
    content_address: SocketAddr,
    /// Address of the metrics and health endpoints.
    #[arg(long, default_value = "0.0.0.0:8080")]
    admin_address: SocketAddr,
    /// Base URL clients use to reach the content server; contentURL is
    /// `<this>/catalogs/<name>/all.json`.
    #[arg(
        long,
        env = "CATALOGD_EXTERNAL_ADDRESS",
        default_value = "http://catalogd.olm-system.svc:8083"
    )]
    external_address: String,
    /// catalogd's own namespace: ConfigMaps and Secrets are read here.
    #[arg(long, env = "POD_NAMESPACE", default_value = "olm-system")]
    namespace: String,
    /// Other namespaces whose ConfigMaps Catalogs may name (comma-separated).
    #[arg(long, value_delimiter = ',')]
    allowed_configmap_namespaces: Vec<String>,
    /// The largest catalog (HTTP body, or unpacked archive) accepted, in bytes.
    #[arg(long, default_value_t = 256 * 1024 * 1024)]
    max_content_bytes: u64,
    /// How long one HTTP fetch may take, in seconds.
    #[arg(long, default_value_t = 120)]
    http_timeout_seconds: u64,
    /// Log format: plain or json.
    #[arg(long, default_value = "plain")]
    log_format: telemetry::LogFormat,
}

#[tokio::main]
async fn main() -> Result<()> {
    let flags = Flags::parse();
    telemetry::init_tracing(flags.log_format, "info,kube=warn")?;
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        ?flags,
        "starting catalogd"
    );
    let client = olm_runtime::client::client()
        .await
        .context("connecting to the Kubernetes API")?;
    let shutdown = shutdown::shutdown_on_signals();

    let metrics = Arc::new(Metrics::new()?);
    let readiness = admin::Readiness::new();
    let catalogs_ready = readiness.register("catalog-api");
    let content_ready = readiness.register("content-server");

    let store = Arc::new(
        Store::open(&flags.storage_dir)
            .with_context(|| format!("opening {}", flags.storage_dir.display()))?,
    );
    // Listing the Catalogs proves the API and the CRD are there; that is readiness. (Waiting on
    // the controller's cache instead would steal its one wake-up: kube-runtime's store readiness
    // wakes a single waiter.)
    remove_orphans(&client, &store).await?;
    catalogs_ready.set_ready(true);

    let server_metrics = server::ServerMetrics::new(&metrics.registry)?;
    let router = server::router(store.clone(), server_metrics);
    let listener = tokio::net::TcpListener::bind(flags.content_address)
        .await
        .with_context(|| format!("binding the content server to {}", flags.content_address))?;
    tracing::info!(address = %listener.local_addr()?, "content server listening");
    let content = tokio::spawn(server::serve(listener, router, shutdown.clone()));
    content_ready.set_ready(true);

    let (admin_listener, admin_addr) = admin::bind_admin(flags.admin_address).await?;
    tracing::info!(address = %admin_addr, "admin server listening");
    let admin = tokio::spawn(admin::serve_admin_on(
        admin_listener,
        metrics.clone(),
        readiness.clone(),
        shutdown.clone(),
    ));

    let config_maps = ConfigMapsSource::new(
        client.clone(),
        flags.namespace.clone(),
        flags.allowed_configmap_namespaces.clone(),
    );
    let watched = config_maps.watched_namespaces();
    let http = HttpSource::new(
        client.clone(),
        flags.namespace.clone(),
        flags.max_content_bytes,
        Duration::from_secs(flags.http_timeout_seconds),
    );
    let mut ctx = Context {
        client: client.clone(),
        store,
        sources: Sources { config_maps, http },
        metrics: CatalogdMetrics::new(&metrics.registry)?,
        events: EventPublisher::from_env(client.clone(), "catalogd"),
        external_address: flags.external_address.clone(),
        failures: Mutex::new(Default::default()),
        unpacked: Mutex::new(Default::default()),
        catalogs: None,
    };
    let controller = controller::build(&mut ctx, &flags.namespace, &watched);
    metrics.register_controller(controller::CONTROLLER, usize::from(controller::CONCURRENCY));
    controller::run(controller, ctx, metrics, shutdown.clone()).await;
    shutdown.cancel();
    let _ = content.await;
    let _ = admin.await;
    tracing::info!("catalogd stopped");
    Ok(())
}

/// Deletes stored content of Catalogs that no longer exist (deleted while catalogd was down,
/// so their finalizer could not run).
async fn remove_orphans(client: &kube::Client, store: &Arc<Store>) -> Result<()> {
    let names: Vec<String> = Api::<Catalog>::all(client.clone())
        .list_metadata(&ListParams::default())
        .await
        .context("listing Catalogs (is the CRD installed?)")?
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    // Best effort: one directory that cannot be removed must not keep catalogd from serving.
    for stored in store.list()? {
        if !names.contains(&stored) {
            tracing::info!(catalog = %stored, "removing content of a Catalog that no longer exists");
            if let Err(e) = store.delete(&stored) {
                tracing::warn!(catalog = %stored, error = %e, "could not remove orphaned content; continuing");
            }
        }
    }
    Ok(())
}
