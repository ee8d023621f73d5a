//! The flags of the network policy and of image pulls, shared by every manager that fetches
//! (catalogd for catalogs, the provisioner for bundles), so that both take the same flags with
//! the same meaning (docs/catalogs.md, "Network policy"; docs/provisioner.md).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::image::cache::LayerCache;
use crate::image::registry::{RegistryOptions, check_ca};
use crate::image::{ImageMetrics, ImageOptions, ImageSource};
use crate::network::NetworkPolicy;

/// Where sources may connect.
#[derive(clap::Args, Debug, Clone)]
pub struct NetworkArgs {
    /// Let sources reach loopback addresses (127.0.0.0/8, ::1): for a machine whose test
    /// servers listen there, never in a cluster.
    #[arg(long, num_args = 0..=1, default_value_t = false, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub allow_loopback_sources: bool,
    /// Let sources reach link-local addresses (169.254.0.0/16, fe80::/10), where clouds serve
    /// instance metadata.
    #[arg(long, num_args = 0..=1, default_value_t = false, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub allow_link_local_sources: bool,
    /// CIDRs sources never reach (comma-separated), such as the cluster's Service and Pod
    /// ranges; the API server's and the manager's own addresses always are.
    #[arg(long, value_delimiter = ',')]
    pub denied_source_cidrs: Vec<ipnet::IpNet>,
    /// The only hosts sources may reach (comma-separated names, `*.domain` or addresses);
    /// empty: any host the other rules allow.
    #[arg(long, value_delimiter = ',')]
    pub allowed_source_hosts: Vec<String>,
    /// Let a pull secret be sent to a registry with insecureSkipTLSVerify (its certificate
    /// unchecked, so anyone in between can take the credentials).
    #[arg(long, num_args = 0..=1, default_value_t = false, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub allow_credentials_without_tls_verify: bool,
}

impl NetworkArgs {
    /// The policy these flags set, with the API server's and this Pod's own addresses denied.
    pub fn policy(&self) -> Arc<NetworkPolicy> {
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

/// How images are pulled.
#[derive(clap::Args, Debug, Clone)]
pub struct ImageArgs {
    /// How long one image pull may take in all, in seconds (connecting and each read are
    /// bounded by --http-timeout-seconds).
    #[arg(long, default_value_t = 300)]
    pub image_timeout_seconds: u64,
    /// Image pulls running at once.
    #[arg(long, default_value_t = 2)]
    pub max_concurrent_pulls: usize,
    /// Registries (`host` or `host:port`, comma-separated) that may be reached over plain
    /// HTTP when they do not speak TLS; loopback registries always may.
    #[arg(long, value_delimiter = ',')]
    pub insecure_registries: Vec<String>,
    /// PEM bundle of CAs trusted for every registry, besides the system's.
    #[arg(long)]
    pub registry_ca_file: Option<PathBuf>,
    /// How many bytes of layers the layer cache keeps; the least recently used go first.
    #[arg(long, default_value_t = 1024 * 1024 * 1024)]
    pub layer_cache_bytes: u64,
}

impl ImageArgs {
    /// The CAs of --registry-ca-file, read and checked (at start, so that a bad file fails
    /// every replica, not only the one that comes to lead).
    ///
    /// # Errors
    ///
    /// What is wrong with the file, naming it.
    pub fn registry_ca(&self) -> Result<Option<Vec<u8>>, String> {
        let Some(path) = &self.registry_ca_file else {
            return Ok(None);
        };
        let pem = std::fs::read(path)
            .map_err(|e| format!("--registry-ca-file {}: {e}", path.display()))?;
        check_ca(&pem).map_err(|e| format!("--registry-ca-file {} {e}", path.display()))?;
        Ok(Some(pem))
    }

    /// The image source's options: `ca` from [`ImageArgs::registry_ca`], `timeout` for
    /// connecting and each read, `max_bytes` the largest layer and content.
    pub fn options(
        &self,
        network: &NetworkArgs,
        ca: Option<Vec<u8>>,
        timeout: Duration,
        max_bytes: u64,
    ) -> ImageOptions {
        ImageOptions {
            registry: RegistryOptions {
                insecure_registries: self.insecure_registries.clone(),
                ca_pem: ca,
                timeout,
                policy: network.policy(),
            },
            max_bytes,
            pull_timeout: Duration::from_secs(self.image_timeout_seconds),
            max_concurrent_pulls: self.max_concurrent_pulls,
            allow_credentials_without_tls_verify: network.allow_credentials_without_tls_verify,
        }
    }

    /// The image source these flags and `network`'s describe, for `setup`, its layer cache
    /// opened (made, and what a killed process left cleared) in `setup.cache_dir`.
    pub fn image_source(
        &self,
        network: &NetworkArgs,
        setup: Setup<'_>,
    ) -> std::io::Result<ImageSource> {
        let cache = LayerCache::open(setup.cache_dir, self.layer_cache_bytes)?;
        let options = self.options(
            network,
            setup.registry_ca,
            setup.request_timeout,
            setup.max_bytes,
        );
        Ok(ImageSource::new(
            setup.client,
            setup.namespace,
            options,
            cache,
            setup.metrics,
        ))
    }
}

/// What a manager tells the puller beside its image and network flags.
pub struct Setup<'a> {
    /// The manager's client: pull secrets are read with it.
    pub client: kube::Client,
    /// The namespace pull secrets are read from (the manager's own).
    pub namespace: String,
    /// The registry CA read from `--registry-ca-file` ([`ImageArgs::registry_ca`]).
    pub registry_ca: Option<Vec<u8>>,
    /// How long one request may take (the manager's `--http-timeout-seconds`).
    pub request_timeout: Duration,
    /// The largest layer and content accepted (`--max-content-bytes`).
    pub max_bytes: u64,
    /// Where the layer cache lives.
    pub cache_dir: &'a Path,
    /// The manager's counters of layers and bytes, if it exports them.
    pub metrics: Option<ImageMetrics>,
}
