//! The provisioner's flags (every one documented in docs/provisioner.md).

use std::path::PathBuf;

use clap::Parser;
use olm_puller::flags::{ImageArgs, NetworkArgs};
use olm_runtime::RuntimeArgs;

use crate::kinds::{Allowed, Pattern};
use crate::namespaces::{NamespacePattern, Namespaces};

/// provisioner: installs the bundles BundleDeployments name.
#[derive(Parser, Debug)]
#[command(version, about, args_override_self = true)]
pub struct Args {
    /// The provisioner's own namespace (the managers'): bundle ConfigMaps and pull secrets are
    /// read here, and no bundle object ever goes here.
    #[arg(long, env = "POD_NAMESPACE", default_value = "olm-system")]
    pub namespace: String,
    /// Where namespaced objects of a bundle that name no namespace go (never the managers'
    /// namespace: such objects are then refused).
    #[arg(long, default_value = "default")]
    pub default_namespace: String,
    /// The namespaces bundles may put objects in (comma-separated names, or prefixes ending in
    /// `*`); an object elsewhere is refused (NamespaceNotAllowed). Empty: every namespace but
    /// the managers'.
    #[arg(long, value_delimiter = ',')]
    pub allowed_namespaces: Vec<NamespacePattern>,
    /// The provisioner may write only in --allowed-namespaces (the chart's
    /// provisioner.rbac.namespaced binds its apply role there alone): cluster-scoped objects
    /// are refused, and drift is watched in those namespaces only. Needs --allowed-namespaces
    /// of names, not prefixes.
    #[arg(long)]
    pub namespaced_rbac: bool,
    /// Where image layers are cached, by digest.
    #[arg(long, default_value = "/var/cache/provisioner")]
    pub cache_dir: PathBuf,
    /// The largest bundle (image layer, unpacked image, ConfigMaps' content) accepted, in
    /// bytes. At most --unpack-budget-bytes.
    #[arg(long, default_value_t = 64 * 1024 * 1024)]
    pub max_content_bytes: u64,
    /// The most bytes of bundle content held at once while being fetched, across all
    /// BundleDeployments.
    #[arg(long, default_value_t = 128 * 1024 * 1024)]
    pub unpack_budget_bytes: u64,
    /// How long connecting to a registry and each read may take, in seconds.
    #[arg(long, default_value_t = 120)]
    pub http_timeout_seconds: u64,
    /// The kinds bundles may hold (comma-separated `Kind` for the core group, `Kind.group`,
    /// `*.group`, or `*`); a bundle with any other kind is refused (KindNotAllowed). Empty:
    /// every kind.
    #[arg(long, value_delimiter = ',')]
    pub allowed_kinds: Vec<Pattern>,
    /// Only BundleDeployments with these labels (a label selector, `key=value,...`); empty:
    /// every BundleDeployment of the plain class. For running one provisioner per shard.
    #[arg(long, default_value = "")]
    pub bundle_deployment_selector: String,
    /// How often an installed BundleDeployment is looked at again without a trigger, in
    /// seconds (drift is caught at once by watches; a resync that finds nothing moved writes
    /// nothing).
    #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..))]
    pub resync_interval_seconds: u64,
    /// BundleDeployments reconciled at once.
    #[arg(long, default_value_t = 4)]
    pub max_concurrent_reconciles: u16,
    /// Who issues the serving certificates of bundles' webhooks and APIServices:
    /// `provisioner` (a CA of its own per BundleDeployment, rotated by itself), `cert-manager`
    /// (an Issuer and a Certificate per Service; cert-manager must be installed) or
    /// `service-ca` (OpenShift's service-ca operator).
    #[arg(long, default_value = "provisioner")]
    pub cert_provider: crate::certs::Provider,
    /// How long the provisioner's own CAs and serving certificates live, in seconds (a CA is
    /// replaced when a third of it is left). Shorter only to watch rotation happen.
    #[arg(long, default_value_t = crate::certs::LIFETIME.as_secs(), value_parser = clap::value_parser!(u64).range(60..))]
    pub cert_lifetime_seconds: u64,
    /// The `helm` program that renders helm+v3 bundles (a path, or a name looked up on
    /// `PATH`; the image ships it at /usr/local/bin/helm).
    #[arg(long, default_value = "helm")]
    pub helm_binary: PathBuf,
    /// The `kustomize` program that builds kustomize bundles (a path, or a name looked up on
    /// `PATH`; the image ships it at /usr/local/bin/kustomize).
    #[arg(long, default_value = "kustomize")]
    pub kustomize_binary: PathBuf,
    /// How long one render (`helm template`, `kustomize build`) may run, in seconds.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub render_timeout_seconds: u64,
    /// The most memory one render may hold, in bytes (its resident set; the kernel's data
    /// limit backs it).
    #[arg(long, default_value_t = 256 * 1024 * 1024)]
    pub render_memory_bytes: u64,
    /// Renders run at once (each may hold --render-memory-bytes, in the provisioner's
    /// container).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    pub render_concurrency: u16,
    #[command(flatten)]
    pub network: NetworkArgs,
    #[command(flatten)]
    pub image: ImageArgs,
    #[command(flatten)]
    pub runtime: RuntimeArgs,
}

impl Args {
    /// What one render may use: its output at most the largest bundle, and no more than the
    /// unpack budget can hold while it is parsed (so a longer one is stopped as it is printed,
    /// with a reason, not refused after it was read whole).
    pub fn render_limits(&self) -> crate::render::limits::Limits {
        let parsable = self.unpack_budget_bytes / crate::fetch::PARSE_FACTOR;
        crate::render::limits::Limits {
            time: std::time::Duration::from_secs(self.render_timeout_seconds),
            memory: self.render_memory_bytes,
            output: self.max_content_bytes.min(parsable),
        }
    }

    /// `--allowed-kinds`.
    pub fn allowed(&self) -> Allowed {
        Allowed(self.allowed_kinds.clone())
    }

    /// `--allowed-namespaces`, and never `--namespace`.
    pub fn namespaces(&self) -> Namespaces {
        Namespaces {
            managers: self.namespace.clone(),
            allowed: self.allowed_namespaces.clone(),
            namespaced_only: self.namespaced_rbac,
        }
    }
}
