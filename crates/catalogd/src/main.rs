//! catalogd: turns `Catalog` objects into served, validated catalog content.
//!
//! Wiring only: flags, tracing, client; open the content store and drop content no existing
//! Catalog owns; then run the content server, the admin server (metrics, probes) and the
//! Catalog controller until SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};
use catalogd::collect::{self, CollectArgs};
use catalogd::context::Parts;
use catalogd::follow::{Follower, Peer};
use catalogd::source::custom::pod::PodOptions;
use catalogd::source::custom::resources::{self, Defaults};
use catalogd::source::custom::runs::Runs;
use catalogd::source::custom::{CustomMetrics, CustomOptions, CustomSource, upload};
use catalogd::source::git::{GitMetrics, GitOptions, GitSource};
use catalogd::source::image::registry::RegistryOptions;
use catalogd::source::image::{ImageMetrics, ImageOptions, ImageSource, cache::LayerCache};
use catalogd::source::network::NetworkPolicy;
use catalogd::source::{Sources, configmaps::ConfigMapsSource, http::HttpSource};
use catalogd::{controller, metrics::CatalogdMetrics, server, store::Store};
use clap::Parser;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Api, ListParams};
use olm_api::catalog::Catalog;
use olm_runtime::leader::Role;
use olm_runtime::shutdown::SERVER_DRAIN;
use olm_runtime::{
    Metrics, Readiness, RuntimeArgs, StartOptions, events::EventPublisher, telemetry,
};
use std::collections::BTreeMap;
use tokio_util::sync::CancellationToken;

/// Memory freed after an unpack is returned to the system, whatever the C library: catalogd's
/// memory bound (docs/install.md) counts on it. With glibc's allocator every thread that
/// unpacked kept its own arena at its peak.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// catalogd: unpacks, validates and serves the content of Catalog objects.
#[derive(Parser, Debug)]
#[command(version, about, args_override_self = true)]
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
    /// The largest catalog (HTTP body, unpacked archive, ConfigMaps' content, image layer, git
    /// object) accepted, in bytes. At most --unpack-budget-bytes.
    #[arg(long, default_value_t = 64 * 1024 * 1024)]
    max_content_bytes: u64,
    /// The most bytes of content held at once, fetched or being unpacked, across all Catalogs:
    /// what bounds catalogd's memory (docs/install.md gives the formula). Sources take their
    /// share before they read a body.
    #[arg(long, default_value_t = 64 * 1024 * 1024)]
    unpack_budget_bytes: u64,
    /// The most memory the in-memory indexes of served catalogs take together (about 44 bytes
    /// per line, i.e. per blob); new content that would exceed it fails with ContentTooLarge.
    #[arg(long, default_value_t = 96 * 1024 * 1024)]
    max_served_index_bytes: u64,
    /// How long one HTTP fetch may take, in seconds.
    #[arg(long, default_value_t = 120)]
    http_timeout_seconds: u64,
    /// How long one image pull may take in all, in seconds (connecting and each read are
    /// bounded by --http-timeout-seconds).
    #[arg(long, default_value_t = 300)]
    image_timeout_seconds: u64,
    /// Image pulls running at once, across all Catalogs.
    #[arg(long, default_value_t = 2)]
    max_concurrent_pulls: usize,
    /// Registries (`host` or `host:port`, comma-separated) that may be reached over plain
    /// HTTP when they do not speak TLS; loopback registries always may.
    #[arg(long, value_delimiter = ',')]
    insecure_registries: Vec<String>,
    /// PEM bundle of CAs trusted for every registry, besides the system's.
    #[arg(long)]
    registry_ca_file: Option<PathBuf>,
    /// Where image layers are cached, by digest (default: `.layers` in --storage-dir).
    #[arg(long)]
    layer_cache_dir: Option<PathBuf>,
    /// How many bytes of layers the cache keeps; the least recently used go first.
    #[arg(long, default_value_t = 1024 * 1024 * 1024)]
    layer_cache_bytes: u64,
    /// How long one git ls-refs or fetch may take in all, in seconds.
    #[arg(long, default_value_t = 300)]
    git_timeout_seconds: u64,
    /// Git fetches running at once, across all Catalogs.
    #[arg(long, default_value_t = 2)]
    max_concurrent_git_fetches: usize,
    /// Listen address of the upload endpoint, where generator Pods of custom sources upload
    /// their output.
    #[arg(long, default_value = "0.0.0.0:8084")]
    upload_address: SocketAddr,
    /// Base URL generator Pods reach the upload endpoint at.
    #[arg(
        long,
        env = "CATALOGD_UPLOAD_URL",
        default_value = "http://catalogd.olm-system.svc:8084"
    )]
    upload_url: String,
    /// Image of the collector container of generator Pods: catalogd's own image.
    #[arg(
        long,
        env = "CATALOGD_COLLECTOR_IMAGE",
        default_value = concat!("ghcr.io/olm-rs/catalogd:v", env!("CARGO_PKG_VERSION"))
    )]
    collector_image: String,
    /// Generators (custom sources) running at once, across all Catalogs.
    #[arg(long, default_value_t = 2)]
    max_concurrent_generators: usize,
    /// Requests of a generator container whose spec sets neither a request nor a limit for a
    /// resource (`cpu=…,memory=…,ephemeral-storage=…`).
    #[arg(long, value_parser = resources::parse_list, default_value = resources::DEFAULT_REQUESTS)]
    generator_default_requests: BTreeMap<String, Quantity>,
    /// Limits of a generator container whose spec sets none for a resource (a lone request
    /// becomes the limit).
    #[arg(long, value_parser = resources::parse_list, default_value = resources::DEFAULT_LIMITS)]
    generator_default_limits: BTreeMap<String, Quantity>,
    /// Log format: plain or json.
    #[arg(long, default_value = "plain")]
    log_format: telemetry::LogFormat,
    /// PEM certificate (chain) of the content server: with it, content is served over HTTPS
    /// (reloaded when the file changes). --external-address should then be https.
    #[arg(long, requires = "content_tls_key_file")]
    content_tls_cert_file: Option<PathBuf>,
    /// PEM private key of --content-tls-cert-file.
    #[arg(long, requires = "content_tls_cert_file")]
    content_tls_key_file: Option<PathBuf>,
    /// PEM CAs trusted when a follower copies content from the leader over HTTPS, besides the
    /// system's (the CA of --content-tls-cert-file).
    #[arg(long)]
    peer_ca_file: Option<PathBuf>,
    /// Base URL at which other replicas reach this replica's content server (in a Pod:
    /// `http://$(POD_IP):8083`). The leader advertises it on the leader Lease; followers copy
    /// served content from it. Needed with --leader-elect and more than one replica.
    #[arg(long, env = "CATALOGD_PEER_ADDRESS")]
    peer_address: Option<String>,
    /// How long a follower may miss content the leader serves before it reports not ready
    /// (`content-sync`), so that the Service stops sending clients to stale content.
    #[arg(long, default_value_t = 60)]
    follower_max_lag_seconds: u64,
    /// The Pod Security level (privileged, baseline, restricted) catalogd's namespace should
    /// enforce, where generator Pods run: set as the namespace's
    /// pod-security.kubernetes.io/enforce label when it has none (a label already there is
    /// kept). Unset: the namespace's labels are left alone.
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(catalogd::namespace::LEVELS))]
    namespace_pod_security: Option<String>,
    #[command(flatten)]
    network: NetworkArgs,
    #[command(flatten)]
    runtime: RuntimeArgs,
}

/// Where sources may connect (docs/catalogs.md, "Network policy").
#[derive(clap::Args, Debug)]
struct NetworkArgs {
    /// Let sources reach loopback addresses (127.0.0.0/8, ::1): for a machine whose test
    /// servers listen there, never in a cluster.
    #[arg(long, num_args = 0..=1, default_value_t = false, default_missing_value = "true", action = clap::ArgAction::Set)]
    allow_loopback_sources: bool,
    /// Let sources reach link-local addresses (169.254.0.0/16, fe80::/10), where clouds serve
    /// instance metadata.
    #[arg(long, num_args = 0..=1, default_value_t = false, default_missing_value = "true", action = clap::ArgAction::Set)]
    allow_link_local_sources: bool,
    /// CIDRs sources never reach (comma-separated), such as the cluster's Service and Pod
    /// ranges; the API server's and catalogd's own addresses always are.
    #[arg(long, value_delimiter = ',')]
    denied_source_cidrs: Vec<ipnet::IpNet>,
    /// The only hosts sources may reach (comma-separated names, `*.domain` or addresses);
    /// empty: any host the other rules allow.
    #[arg(long, value_delimiter = ',')]
    allowed_source_hosts: Vec<String>,
    /// Let a Catalog send a pull secret to a registry with insecureSkipTLSVerify (its
    /// certificate unchecked, so anyone in between can take the credentials).
    #[arg(long, num_args = 0..=1, default_value_t = false, default_missing_value = "true", action = clap::ArgAction::Set)]
    allow_credentials_without_tls_verify: bool,
}

impl NetworkArgs {
    fn policy(&self) -> Arc<NetworkPolicy> {
        Arc::new(
            NetworkPolicy {
                allow_loopback: self.allow_loopback_sources,
                allow_link_local: self.allow_link_local_sources,
                denied: self.denied_source_cidrs.clone(),
                allowed_hosts: self.allowed_source_hosts.clone(),
            }
            .deny_own_addresses(|v| std::env::var(v).ok()),
        )
    }
}

fn main() -> Result<()> {
    // `catalogd collect` is the collector container of generator Pods: no runtime, no API.
    if std::env::args().nth(1).as_deref() == Some("collect") {
        let args = CollectArgs::parse_from(std::env::args().skip(1));
        std::process::exit(collect::run(&args));
    }
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?
        .block_on(manager(Flags::parse()))
}

async fn manager(flags: Flags) -> Result<()> {
    let olm_runtime::Started {
        client,
        shutdown,
        metrics,
        readiness,
        leadership,
        admin,
    } = olm_runtime::start(StartOptions {
        name: "catalogd",
        log_format: flags.log_format,
        runtime: &flags.runtime,
        advertise: flags.peer_address.clone(),
        flags: &flags,
    })
    .await
    .context("starting")?;
    if flags.runtime.leader_election.leader_elect && flags.peer_address.is_none() {
        tracing::warn!("--leader-elect without --peer-address: followers cannot copy content");
    }
    // Checked at start, not when this replica comes to lead: a bad flag fails every replica.
    let memory = catalogd::budget::MemorySettings {
        max_content_bytes: flags.max_content_bytes,
        unpack_budget_bytes: flags.unpack_budget_bytes,
        max_concurrent_generators: flags.max_concurrent_generators as u64,
        max_concurrent_pulls: flags.max_concurrent_pulls as u64,
        max_served_index_bytes: flags.max_served_index_bytes,
    };
    catalogd::budget::check_settings(memory).map_err(anyhow::Error::msg)?;
    tracing::info!(
        bound_mib = catalogd::budget::memory_bound(memory) >> 20,
        "memory is bounded by the unpack budget (docs/install.md): set the container's limit at or above this"
    );
    let ca_pem = match &flags.registry_ca_file {
        Some(path) => {
            let pem = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
            catalogd::source::image::registry::check_ca(&pem)
                .map_err(|e| anyhow::anyhow!("--registry-ca-file {} {e}", path.display()))?;
            Some(pem)
        }
        None => None,
    };
    let content_ready = readiness.register("content-server");
    let content_synced = readiness.register("content-sync");
    let lag = prometheus::Gauge::new(
        "catalogd_follower_lag_seconds",
        "How long this follower has been missing content the leader serves (its oldest out-of-step Catalog); zero when in step, and on the leader.",
    )?;
    metrics.registry.register(Box::new(lag.clone()))?;

    let store = Arc::new(
        Store::open_with_index_budget(&flags.storage_dir, flags.max_served_index_bytes)
            .with_context(|| format!("opening {}", flags.storage_dir.display()))?,
    );
    remove_orphans(&client, &store).await?;

    let server_metrics = server::ServerMetrics::new(&metrics.registry)?;
    let router = server::router(store.clone(), server_metrics);
    let listener = tokio::net::TcpListener::bind(flags.content_address)
        .await
        .with_context(|| format!("binding the content server to {}", flags.content_address))?;
    tracing::info!(address = %listener.local_addr()?, "content server listening");
    let content_tls = match (&flags.content_tls_cert_file, &flags.content_tls_key_file) {
        (Some(cert), Some(key)) => Some(
            olm_runtime::tls::server_config(Some((cert, key)), &[])
                .context("loading the content server's certificate")?,
        ),
        _ => None,
    };
    let content = tokio::spawn(server::serve(
        listener,
        router,
        content_tls,
        shutdown.clone(),
    ));
    content_ready.set_ready(true);

    let admin = admin.spawn().await?;

    // Every replica serves content; until it leads, a replica copies the leader's.
    if leadership.role() == Role::Following {
        let stop = shutdown.child_token();
        let follower = Follower {
            client: client.clone(),
            store: store.clone(),
            leadership: leadership.clone(),
            peer: Peer {
                ca_pem: match &flags.peer_ca_file {
                    Some(path) => Some(
                        std::fs::read(path)
                            .with_context(|| format!("reading {}", path.display()))?,
                    ),
                    None => None,
                },
                server_name: url::Url::parse(&flags.external_address)
                    .ok()
                    .and_then(|u| u.host_str().map(str::to_owned)),
                timeout: Duration::from_secs(flags.http_timeout_seconds),
                client: std::sync::Mutex::default(),
            },
            // Canonical content is about the size of what was fetched; leave room for layout.
            max_bytes: flags.max_content_bytes.saturating_mul(2),
            ready: content_synced.clone(),
            max_lag: Duration::from_secs(flags.follower_max_lag_seconds),
            lag_gauge: lag.clone(),
        };
        let following = tokio::spawn(follower.run(stop.clone()));
        let leading = leadership.acquired(&shutdown).await;
        stop.cancel();
        let _ = following.await;
        if leading {
            tracing::info!("leading: reconciling Catalogs");
        }
    }
    // The leader's own reconciles fill its store (and keep what was copied).
    content_synced.set_ready(true);
    lag.set(0.0);
    let work = lead(
        &flags,
        client,
        store,
        metrics,
        &readiness,
        ca_pem,
        shutdown.clone(),
    );
    if let Some(led) = leadership
        .run(work, &shutdown, flags.runtime.shutdown.grace())
        .await?
    {
        led?;
    }
    shutdown.cancel();
    let _ = tokio::time::timeout(SERVER_DRAIN, content).await;
    leadership.finish(&shutdown, [admin]).await;
    tracing::info!("catalogd stopped");
    Ok(())
}

/// The leader's work: the sources, the upload endpoint and the Catalog controller, until
/// `shutdown`.
async fn lead(
    flags: &Flags,
    client: kube::Client,
    store: Arc<Store>,
    metrics: Arc<Metrics>,
    readiness: &Readiness,
    ca_pem: Option<Vec<u8>>,
    shutdown: CancellationToken,
) -> Result<()> {
    let catalogs_ready = readiness.register("catalog-watch");
    let config_maps = ConfigMapsSource::new(
        client.clone(),
        flags.namespace.clone(),
        flags.allowed_configmap_namespaces.clone(),
        flags.max_content_bytes,
    );
    let watched = config_maps.watched_namespaces();
    let policy = flags.network.policy();
    let http = HttpSource::new(
        client.clone(),
        flags.namespace.clone(),
        flags.max_content_bytes,
        Duration::from_secs(flags.http_timeout_seconds),
        policy.clone(),
    );
    let layer_dir = flags
        .layer_cache_dir
        .clone()
        .unwrap_or_else(|| flags.storage_dir.join(".layers"));
    let image = ImageSource::new(
        client.clone(),
        flags.namespace.clone(),
        ImageOptions {
            registry: RegistryOptions {
                insecure_registries: flags.insecure_registries.clone(),
                ca_pem,
                timeout: Duration::from_secs(flags.http_timeout_seconds),
                policy: policy.clone(),
            },
            max_bytes: flags.max_content_bytes,
            pull_timeout: Duration::from_secs(flags.image_timeout_seconds),
            max_concurrent_pulls: flags.max_concurrent_pulls,
            allow_credentials_without_tls_verify: flags
                .network
                .allow_credentials_without_tls_verify,
        },
        LayerCache::open(&layer_dir, flags.layer_cache_bytes)
            .with_context(|| format!("opening the layer cache {}", layer_dir.display()))?,
        Some(ImageMetrics::new(&metrics.registry)?),
    );
    let git = GitSource::new(
        client.clone(),
        flags.namespace.clone(),
        GitOptions {
            max_bytes: flags.max_content_bytes,
            timeout: Duration::from_secs(flags.git_timeout_seconds),
            max_concurrent: flags.max_concurrent_git_fetches,
            // Scratch repositories live beside the content; a name no Catalog can have.
            scratch: flags.storage_dir.join(".git-scratch"),
            policy: policy.clone(),
        },
        Some(GitMetrics::new(&metrics.registry)?),
    );
    let runs = Arc::new(Runs::default());
    let custom_metrics = CustomMetrics::new(&metrics.registry)?;
    let custom = CustomSource::new(
        client.clone(),
        CustomOptions {
            pod: PodOptions {
                namespace: flags.namespace.clone(),
                collector_image: flags.collector_image.clone(),
                upload_url: flags.upload_url.clone(),
                max_bytes: flags.max_content_bytes,
                defaults: Defaults {
                    requests: flags.generator_default_requests.clone(),
                    limits: flags.generator_default_limits.clone(),
                },
            },
            max_concurrent: flags.max_concurrent_generators,
        },
        runs.clone(),
        Some(custom_metrics.clone()),
    );
    if let Some(level) = &flags.namespace_pod_security {
        label_namespace(&client, &flags.namespace, level).await;
    }
    let left = custom
        .remove_leftovers()
        .await
        .context("removing generator pods of an earlier catalogd")?;
    if left > 0 {
        tracing::info!(pods = left, "removed generator pods of an earlier catalogd");
    }
    let upload_listener = tokio::net::TcpListener::bind(flags.upload_address)
        .await
        .with_context(|| format!("binding the upload endpoint to {}", flags.upload_address))?;
    tracing::info!(address = %upload_listener.local_addr()?, "upload endpoint listening");
    let uploads = tokio::spawn(server::serve(
        upload_listener,
        upload::router(runs, flags.max_content_bytes, Some(custom_metrics)),
        None,
        shutdown.clone(),
    ));
    let parts = Parts {
        client: client.clone(),
        store,
        sources: Sources {
            config_maps,
            http,
            image,
            git,
            custom,
        },
        metrics: CatalogdMetrics::new(&metrics.registry)?,
        events: EventPublisher::from_env(client.clone(), "catalogd"),
        external_address: flags.external_address.clone(),
        unpack_budget_bytes: flags.unpack_budget_bytes,
    };
    let (controller, ctx) = controller::build(parts, &flags.namespace, &watched, catalogs_ready);
    metrics.register_controller(controller::CONTROLLER, usize::from(controller::CONCURRENCY));
    controller::run(controller, ctx, metrics, shutdown.clone()).await;
    shutdown.cancel();
    let _ = tokio::time::timeout(SERVER_DRAIN, uploads).await;
    Ok(())
}

/// Makes catalogd's namespace enforce the Pod Security `level` unless it enforces one; a
/// failure is logged, not fatal (generator Pods meet the restricted level by themselves).
async fn label_namespace(client: &kube::Client, namespace: &str, level: &str) {
    use catalogd::namespace::{ENFORCE_LABEL, Labelling, ensure_pod_security};
    match ensure_pod_security(client, namespace, level).await {
        Ok(Labelling::Add) => {
            tracing::info!(%namespace, label = ENFORCE_LABEL, %level, "labelled the namespace for Pod Security")
        }
        Ok(Labelling::Present) => {}
        Ok(Labelling::Other(current)) => tracing::warn!(
            %namespace,
            label = ENFORCE_LABEL,
            %current,
            wanted = %level,
            "the namespace enforces another Pod Security level, set by someone else; left as it is"
        ),
        Err(error) => tracing::warn!(
            %namespace,
            error = %olm_runtime::error_chain(&error),
            "could not set the namespace's Pod Security label (--namespace-pod-security); generator Pods still run restricted"
        ),
    }
}

/// Deletes stored content that belongs to no existing Catalog: Catalogs deleted while catalogd
/// was down (their finalizer could not run), and content of an earlier Catalog of the same
/// name (a different uid), which must never pass for the new one's.
async fn remove_orphans(client: &kube::Client, store: &Arc<Store>) -> Result<()> {
    let owners: std::collections::HashMap<String, String> = Api::<Catalog>::all(client.clone())
        .list_metadata(&ListParams::default())
        .await
        .context("listing Catalogs (is the CRD installed?)")?
        .items
        .into_iter()
        .filter_map(|c| Some((c.metadata.name?, c.metadata.uid?)))
        .collect();
    // Best effort: one directory that cannot be removed must not keep catalogd from serving.
    for stored in store.list()? {
        let owner = store.owner(&stored).ok().flatten();
        if owner.is_some() && owners.get(&stored) == owner.as_ref() {
            continue;
        }
        tracing::info!(catalog = %stored, "removing content no existing Catalog owns");
        if let Err(e) = store.delete(&stored) {
            tracing::warn!(catalog = %stored, error = %e, "could not remove orphaned content; continuing");
        }
    }
    Ok(())
}
