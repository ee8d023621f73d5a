//! catalogd's flags (every one also documented in docs/catalogs.md and docs/install.md).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use olm_runtime::RuntimeArgs;

use crate::budget::MemorySettings;
use crate::source::custom::resources;
pub use olm_puller::flags::{ImageArgs, NetworkArgs};

/// catalogd: unpacks, validates and serves the content of Catalog objects.
#[derive(Parser, Debug)]
#[command(version, about, args_override_self = true)]
pub struct Args {
    /// Where unpacked content is stored.
    #[arg(
        long,
        env = "CATALOGD_STORAGE_DIR",
        default_value = "/var/cache/catalogd"
    )]
    pub storage_dir: PathBuf,
    /// Address of the catalog content server.
    #[arg(long, default_value = "0.0.0.0:8083")]
    pub content_address: SocketAddr,
    /// Base URL clients use to reach the content server; contentURL is
    /// `<this>/catalogs/<name>/all.json`.
    #[arg(
        long,
        env = "CATALOGD_EXTERNAL_ADDRESS",
        default_value = "http://catalogd.olm-system.svc:8083"
    )]
    pub external_address: String,
    /// catalogd's own namespace: ConfigMaps and Secrets are read here.
    #[arg(long, env = "POD_NAMESPACE", default_value = "olm-system")]
    pub namespace: String,
    /// Other namespaces whose ConfigMaps Catalogs may name (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub allowed_configmap_namespaces: Vec<String>,
    /// The largest catalog (HTTP body, unpacked archive, ConfigMaps' content, image layer, git
    /// object) accepted, in bytes. At most --unpack-budget-bytes.
    #[arg(long, default_value_t = 64 * 1024 * 1024)]
    pub max_content_bytes: u64,
    /// The most bytes of content held at once, fetched or being unpacked, across all Catalogs:
    /// what bounds catalogd's memory (docs/install.md gives the formula). Sources take their
    /// share before they read a body.
    #[arg(long, default_value_t = 64 * 1024 * 1024)]
    pub unpack_budget_bytes: u64,
    /// The most memory the in-memory indexes of served catalogs take together (about 44 bytes
    /// per line, i.e. per blob); new content that would exceed it fails with ContentTooLarge.
    #[arg(long, default_value_t = 96 * 1024 * 1024)]
    pub max_served_index_bytes: u64,
    /// How long one HTTP fetch may take, in seconds.
    #[arg(long, default_value_t = 120)]
    pub http_timeout_seconds: u64,
    /// Where image layers are cached, by digest (default: `.layers` in --storage-dir).
    #[arg(long)]
    pub layer_cache_dir: Option<PathBuf>,
    /// How long one git ls-refs or fetch may take in all, in seconds.
    #[arg(long, default_value_t = 300)]
    pub git_timeout_seconds: u64,
    /// Git fetches running at once, across all Catalogs.
    #[arg(long, default_value_t = 2)]
    pub max_concurrent_git_fetches: usize,
    /// Listen address of the upload endpoint, where generator Pods of custom sources upload
    /// their output.
    #[arg(long, default_value = "0.0.0.0:8084")]
    pub upload_address: SocketAddr,
    /// Base URL generator Pods reach the upload endpoint at.
    #[arg(
        long,
        env = "CATALOGD_UPLOAD_URL",
        default_value = "http://catalogd.olm-system.svc:8084"
    )]
    pub upload_url: String,
    /// Image of the collector container of generator Pods: catalogd's own image.
    #[arg(
        long,
        env = "CATALOGD_COLLECTOR_IMAGE",
        default_value = concat!("ghcr.io/olm-rs/catalogd:v", env!("CARGO_PKG_VERSION"))
    )]
    pub collector_image: String,
    /// Generators (custom sources) running at once, across all Catalogs.
    #[arg(long, default_value_t = 2)]
    pub max_concurrent_generators: usize,
    /// Requests of a generator container whose spec sets neither a request nor a limit for a
    /// resource (`cpu=…,memory=…,ephemeral-storage=…`).
    #[arg(long, value_parser = resources::parse_list, default_value = resources::DEFAULT_REQUESTS)]
    pub generator_default_requests: BTreeMap<String, Quantity>,
    /// Limits of a generator container whose spec sets none for a resource (a lone request
    /// becomes the limit).
    #[arg(long, value_parser = resources::parse_list, default_value = resources::DEFAULT_LIMITS)]
    pub generator_default_limits: BTreeMap<String, Quantity>,
    /// The most a generator container's spec may ask for, request or limit, per resource
    /// (`cpu=…,memory=…,ephemeral-storage=…`); a Catalog asking more is refused.
    #[arg(long, value_parser = resources::parse_list, default_value = resources::DEFAULT_MAXIMUM)]
    pub generator_max_resources: BTreeMap<String, Quantity>,
    /// PEM certificate (chain) of the content server: with it, content is served over HTTPS
    /// (reloaded when the file changes). --external-address should then be https.
    #[arg(long, requires = "content_tls_key_file")]
    pub content_tls_cert_file: Option<PathBuf>,
    /// PEM private key of --content-tls-cert-file.
    #[arg(long, requires = "content_tls_cert_file")]
    pub content_tls_key_file: Option<PathBuf>,
    /// Serve the read-only aggregated API `catalogs.olm-rs.io/v1alpha1` (`kubectl get
    /// packages`, docs/catalogs.md) over HTTPS at this address; off when not given.
    #[arg(long)]
    pub catalog_api_address: Option<SocketAddr>,
    /// PEM certificate (chain) of the aggregated API, for the name the APIService's Service
    /// has (reloaded when the file changes); without it, a self-signed one (which the API
    /// server trusts only when the APIService skips TLS verification: tests only).
    #[arg(long, requires = "catalog_api_tls_key_file")]
    pub catalog_api_tls_cert_file: Option<PathBuf>,
    /// PEM private key of --catalog-api-tls-cert-file.
    #[arg(long, requires = "catalog_api_tls_cert_file")]
    pub catalog_api_tls_key_file: Option<PathBuf>,
    /// PEM CAs trusted when a follower copies content from the leader over HTTPS, besides the
    /// system's (the CA of --content-tls-cert-file).
    #[arg(long)]
    pub peer_ca_file: Option<PathBuf>,
    /// Base URL at which other replicas reach this replica's content server (in a Pod:
    /// `http://$(POD_IP):8083`). The leader advertises it on the leader Lease; followers copy
    /// served content from it. Needed with --leader-elect and more than one replica.
    #[arg(long, env = "CATALOGD_PEER_ADDRESS")]
    pub peer_address: Option<String>,
    /// How long a follower may miss content the leader serves before it reports not ready
    /// (`content-sync`), so that the Service stops sending clients to stale content.
    #[arg(long, default_value_t = 60)]
    pub follower_max_lag_seconds: u64,
    /// The Pod Security level (privileged, baseline, restricted) catalogd's namespace should
    /// enforce, where generator Pods run: set as the namespace's
    /// pod-security.kubernetes.io/enforce label when it has none (a label already there is
    /// kept). Unset: the namespace's labels are left alone.
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(crate::namespace::LEVELS))]
    pub namespace_pod_security: Option<String>,
    #[command(flatten)]
    pub network: NetworkArgs,
    #[command(flatten)]
    pub image: ImageArgs,
    #[command(flatten)]
    pub runtime: RuntimeArgs,
}

impl Args {
    /// The settings catalogd's memory bound is computed from.
    pub fn memory(&self) -> MemorySettings {
        MemorySettings {
            max_content_bytes: self.max_content_bytes,
            unpack_budget_bytes: self.unpack_budget_bytes,
            max_concurrent_generators: self.max_concurrent_generators as u64,
            max_concurrent_pulls: self.image.max_concurrent_pulls as u64,
            max_served_index_bytes: self.max_served_index_bytes,
        }
    }
}
