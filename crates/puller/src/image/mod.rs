//! Images pulled in-process from an OCI registry, by digest: catalog images for catalogd
//! (its `image` source), bundle images and Helm chart artifacts for the provisioner.
//!
//! A poll costs one manifest HEAD: when the tag still names the digest whose content is served,
//! nothing else is asked. Otherwise the manifest (an index picks the linux image of this
//! architecture), the config and the layers are fetched, every blob's digest verified, layers
//! streamed into a cache on disk (so a changed image fetches only its changed layers), and the
//! layers applied in order to find the FBC under the directory the image's
//! `operators.operatorframework.io.index.configs.v1` label names.

pub mod auth;
pub mod cache;
pub mod client;
pub mod errors;
pub mod filesystem;
pub mod manifest;
pub mod reference;
pub mod registry;

use std::sync::Arc;
use std::time::{Duration, Instant};

use oci_client::Reference;
use oci_client::manifest::{OciDescriptor, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use prometheus::{IntCounterVec, Opts};
use tokio::sync::Semaphore;

use self::cache::{LayerCache, read_verified};
use self::client::Credentials;
use self::errors::PullError;
use self::filesystem::ImageFs;
use self::manifest::Manifest;
use self::registry::{Access, Registries, RegistryOptions};
use crate::budget::Reserve;
use crate::credentials::opted_in_secret;
use crate::error::{Error, ErrorKind};
use crate::scope;

/// The label that names the FBC directory of a catalog image.
pub const CONFIGS_LABEL: &str = "operators.operatorframework.io.index.configs.v1";
/// Where the FBC is when the label is absent.
pub const DEFAULT_CONFIGS_DIR: &str = "/configs";
/// The largest image config accepted (they are a few kilobytes).
const MAX_CONFIG_BYTES: u64 = 4 * 1024 * 1024;
/// The most layers an image may have (Docker's own limit is 127).
pub const MAX_LAYERS: usize = 128;
/// An image's layers together may be this many times `--max-content-bytes`: each layer is
/// bounded by it, and the layer cache on disk must be too.
pub const MAX_IMAGE_FACTOR: u64 = 4;

/// How the image source runs.
#[derive(Debug, Clone)]
pub struct ImageOptions {
    /// How registries are reached.
    pub registry: RegistryOptions,
    /// The largest layer (compressed and unpacked) and the largest content accepted.
    pub max_bytes: u64,
    /// How long one pull may take in all.
    pub pull_timeout: Duration,
    /// Pulls running at once, across all the manager's objects.
    pub max_concurrent_pulls: usize,
    /// Whether a pull secret may be sent with `insecureSkipTLSVerify`.
    pub allow_credentials_without_tls_verify: bool,
}

/// Counts of the image source.
#[derive(Clone)]
pub struct ImageMetrics {
    /// Layers needed by pulls, by where they came from (`registry`, `cache`).
    pub layers: IntCounterVec,
    /// Bytes of layers downloaded.
    pub layer_bytes: prometheus::IntCounter,
}

impl ImageMetrics {
    /// catalogd's names of the families (layers, bytes).
    pub const CATALOGD: [&'static str; 2] = [
        "catalogd_image_layers_total",
        "catalogd_image_layer_download_bytes_total",
    ];
    /// The provisioner's names of the families (layers, bytes).
    pub const PROVISIONER: [&'static str; 2] = [
        "provisioner_image_layers_total",
        "provisioner_image_layer_download_bytes_total",
    ];

    /// Registers the families in `registry`, under the manager's `names` ([`Self::CATALOGD`],
    /// [`Self::PROVISIONER`]: each manager's metrics carry its prefix).
    pub fn new(
        registry: &prometheus::Registry,
        [layers_name, bytes_name]: [&'static str; 2],
    ) -> Result<Self, prometheus::Error> {
        let layers = IntCounterVec::new(
            Opts::new(
                layers_name,
                "Layers needed by image pulls, by origin (registry: downloaded; cache: reused).",
            ),
            &["origin"],
        )?;
        let layer_bytes = prometheus::IntCounter::new(
            bytes_name,
            "Bytes of image layers downloaded from registries.",
        )?;
        registry.register(Box::new(layers.clone()))?;
        registry.register(Box::new(layer_bytes.clone()))?;
        Ok(Self {
            layers,
            layer_bytes,
        })
    }
}

/// An image to pull, and for whom.
#[derive(Debug, Clone)]
pub struct ImageRequest<'a> {
    /// The reference, by tag or digest.
    pub reference: &'a str,
    /// The field that names it, for messages (`spec.source.image`).
    pub field: &'a str,
    /// A pull secret in the manager's namespace.
    pub pull_secret: Option<&'a str>,
    /// Whether the registry's certificate goes unchecked.
    pub insecure_skip_tls_verify: bool,
    /// The object the image is pulled for (a pull secret's scope may name it).
    pub user: scope::User,
    /// The digest whose content the caller has: nothing is pulled while the reference still
    /// names it.
    pub have: Option<&'a str>,
    /// The directory of the image to read: `None` for the one the image's configs label
    /// names (a catalog), `Some("/")` for all of it (a bundle).
    pub dir: Option<&'a str>,
}

/// What a pull gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pulled {
    /// The reference still names the digest the caller has.
    Unchanged {
        /// The digest.
        digest: String,
        /// The reference by that digest.
        by_digest: String,
    },
    /// The image's files.
    Content {
        /// The digest pulled.
        digest: String,
        /// The reference by that digest.
        by_digest: String,
        /// The directories below the one asked for, by path below it.
        dirs: Vec<String>,
        /// The files of the directory asked for, by path below it.
        files: Vec<(String, Vec<u8>)>,
    },
}

/// Pulls images for catalogs (and bundles).
pub struct ImageSource {
    client: kube::Client,
    own_namespace: String,
    options: ImageOptions,
    registries: Registries,
    cache: Arc<LayerCache>,
    pulls: Semaphore,
    metrics: Option<ImageMetrics>,
}

impl ImageSource {
    /// A source reading pull secrets from `own_namespace` and caching layers in `cache`.
    pub fn new(
        client: kube::Client,
        own_namespace: String,
        options: ImageOptions,
        cache: LayerCache,
        metrics: Option<ImageMetrics>,
    ) -> Self {
        Self {
            client,
            own_namespace,
            registries: Registries::new(options.registry.clone()),
            pulls: Semaphore::new(options.max_concurrent_pulls.max(1)),
            cache: Arc::new(cache),
            options,
            metrics,
        }
    }

    /// The credentials of `pull_secret` for `registry`, usable for `user` where the Secret
    /// allows: checked before any request is made.
    async fn credentials(
        &self,
        pull_secret: Option<&str>,
        reference: &Reference,
        user: &scope::User,
    ) -> Result<Credentials, Error> {
        let Some(name) = pull_secret else {
            return Ok(Credentials::Anonymous);
        };
        let registry = reference.resolve_registry();
        let secret =
            opted_in_secret(&self.client, &self.own_namespace, name, "pull secret").await?;
        let auth = auth::registry_auth(&secret, name, registry)?;
        let RegistryAuth::Basic(user_name, password) = auth else {
            return Ok(Credentials::Anonymous);
        };
        let scope = client::scope_of(Arc::new(secret), name.to_owned(), user.clone());
        // The registry's host first; its token service's when it names one.
        let (host, port) = match registry.rsplit_once(':') {
            Some((h, p)) if !h.contains(':') || h.ends_with(']') => (h, p.parse().ok()),
            _ => (registry, None),
        };
        scope(&scope::Target::Host { host, port })?;
        Ok(Credentials::Basic {
            user: user_name,
            password,
            scope,
        })
    }

    /// Pulls the image `request` names, unless it still names the digest the caller has:
    /// the files of the directory it asks for, read by digest within the limits.
    pub async fn pull_image(
        &self,
        request: &ImageRequest<'_>,
        reserve: &Reserve,
    ) -> Result<Pulled, Error> {
        let reference: Reference = request.reference.parse().map_err(|e| {
            Error::new(
                ErrorKind::InvalidReference,
                format!(
                    "{}.ref {:?} is not an image reference: {e}",
                    request.field, request.reference
                ),
            )
        })?;
        let credentials = self
            .credentials(request.pull_secret, &reference, &request.user)
            .await?;
        client::check_tls_for_credentials(
            &credentials,
            request.insecure_skip_tls_verify,
            self.options.allow_credentials_without_tls_verify,
        )?;
        let offered = match (&credentials, request.pull_secret) {
            (Credentials::Anonymous, Some(secret)) => errors::Offered::NoEntry(secret.to_owned()),
            (Credentials::Anonymous, None) => errors::Offered::Nothing,
            _ => errors::Offered::Credentials,
        };
        let access = Access {
            reference: &reference,
            credentials: &credentials,
            skip_tls_verify: request.insecure_skip_tls_verify,
        };
        let failed = |e: PullError| e.into_error(request.reference, &offered);
        // Everything that talks to the registry, the digest check included, is bounded by the
        // pull's timeout; unpacking, which runs on a thread a timeout cannot cancel, stops at
        // the pull's deadline.
        let timeout = self.options.pull_timeout;
        let deadline = Instant::now() + timeout;
        let timed_out = || PullError::TimedOut(timeout.as_secs());
        let digest = match reference.digest() {
            Some(d) => d.to_owned(),
            None => tokio::time::timeout_at(deadline.into(), self.registries.digest(&access))
                .await
                .unwrap_or_else(|_| Err(timed_out()))
                .map_err(failed)?,
        };
        let by_digest = reference::by_digest(&reference, &digest);
        if request.have == Some(digest.as_str()) {
            return Ok(Pulled::Unchanged { digest, by_digest });
        }
        let started = Instant::now();
        let _permit = self
            .pulls
            .acquire()
            .await
            .map_err(|_| Error::new(ErrorKind::Failed, "the manager is shutting down"))?;
        // The directory's files are read into memory: the unpack budget's share for the most
        // they may be, before anything is pulled.
        reserve.reserve(self.options.max_bytes).await;
        // The pull's own deadline starts once it may run: waiting for other pulls (or for the
        // budget) is not its time.
        let deadline = Instant::now() + timeout;
        let (dirs, files) = tokio::time::timeout_at(
            deadline.into(),
            self.pull(&access, &digest, request.dir, deadline),
        )
        .await
        .unwrap_or_else(|_| Err(timed_out()))
        .map_err(failed)?;
        tracing::info!(
            user = request.user.name(),
            image = %request.reference,
            %digest,
            files = files.len(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "pulled image"
        );
        Ok(Pulled::Content {
            digest,
            by_digest,
            dirs,
            files,
        })
    }

    /// Pulls the image `digest` names and returns the files of `dir` (by default the configs
    /// directory its label names).
    async fn pull(
        &self,
        access: &Access<'_>,
        digest: &str,
        dir: Option<&str>,
        deadline: Instant,
    ) -> Result<Unpacked, PullError> {
        let (session, bytes) = self
            .registries
            .with_scheme(access, |plain| async move {
                let session = self.registries.session(access, plain)?;
                let (bytes, _) = session.manifest(digest).await?;
                Ok((session, bytes))
            })
            .await?;
        let image = match manifest::parse(&bytes).map_err(PullError::Invalid)? {
            Manifest::Image(image) => *image,
            Manifest::Index(index) => {
                let chosen = manifest::pick(&index.manifests, manifest::running_architecture())
                    .map_err(PullError::Invalid)?;
                let (bytes, _) = session.manifest(&chosen).await?;
                match manifest::parse(&bytes).map_err(PullError::Invalid)? {
                    Manifest::Image(image) => *image,
                    Manifest::Index(_) => {
                        return Err(PullError::Invalid(
                            "the image index names another index, not an image".into(),
                        ));
                    }
                }
            }
        };
        check_image(&image.layers, self.options.max_bytes)?;
        let configs_dir = match dir {
            Some(dir) => dir.to_owned(),
            None => self.configs_dir(&session, &image).await?,
        };
        // Cached layers are this repository's: its manifest was just read with this Catalog's
        // access.
        let repository = format!(
            "{}/{}",
            access.reference.resolve_registry(),
            access.reference.repository()
        );
        let mut layers = Vec::with_capacity(image.layers.len());
        for (i, layer) in image.layers.iter().enumerate() {
            let what = || describe_layer(i, image.layers.len(), &layer.digest);
            check_layer(layer, self.options.max_bytes).map_err(|source| PullError::Layer {
                what: what(),
                source,
            })?;
            let file = match self.cache.get(&repository, &layer.digest) {
                Some(file) => {
                    self.count("cache", 0);
                    file
                }
                None => {
                    let stream = session.blob(&layer.digest).await?;
                    let size = u64::try_from(layer.size).unwrap_or(0);
                    let file = self
                        .cache
                        .fill(
                            &repository,
                            &layer.digest,
                            size,
                            self.options.max_bytes,
                            stream,
                        )
                        .await
                        .map_err(|source| PullError::Blob {
                            what: what(),
                            source,
                        })?;
                    self.count("registry", size);
                    file
                }
            };
            layers.push((what(), file));
        }
        let digests: Vec<String> = image.layers.iter().map(|l| l.digest.clone()).collect();
        let (max, cache) = (self.options.max_bytes, self.cache.clone());
        // Decompressing and untarring is CPU work: off the async workers.
        tokio::task::spawn_blocking(move || {
            let files = unpack(&configs_dir, layers, max, Some(deadline));
            if let Err(e) = cache.trim(&repository, &digests) {
                tracing::warn!(error = %e, dir = %cache.dir().display(), "could not trim the layer cache");
            }
            files
        })
        .await
        .map_err(|e| PullError::Invalid(format!("unpacking was interrupted: {e}")))?
    }

    /// The configs directory the image's config names.
    async fn configs_dir(
        &self,
        session: &client::Session,
        image: &OciImageManifest,
    ) -> Result<String, PullError> {
        let config = &image.config;
        if u64::try_from(config.size).unwrap_or(u64::MAX) > MAX_CONFIG_BYTES {
            return Err(PullError::Invalid(format!(
                "the image config is {} bytes, more than the {MAX_CONFIG_BYTES} allowed",
                config.size
            )));
        }
        let stream = session.blob(&config.digest).await?;
        let bytes = read_verified(stream, &config.digest, MAX_CONFIG_BYTES)
            .await
            .map_err(|source| PullError::Blob {
                what: format!("the image config ({})", config.digest),
                source,
            })?;
        configs_label(&bytes)
    }

    fn count(&self, origin: &str, bytes: u64) {
        if let Some(m) = &self.metrics {
            m.layers.with_label_values(&[origin]).inc();
            m.layer_bytes.inc_by(bytes);
        }
    }
}

/// The configs directory a config blob names (its label, or `/configs`).
pub fn configs_label(config: &[u8]) -> Result<String, PullError> {
    let value: serde_json::Value = serde_json::from_slice(config)
        .map_err(|e| PullError::Invalid(format!("the image config is not JSON: {e}")))?;
    Ok(value
        .pointer("/config/Labels")
        .and_then(|labels| labels.get(CONFIGS_LABEL))
        .and_then(|v| v.as_str())
        .filter(|v| !v.trim().is_empty())
        .unwrap_or(DEFAULT_CONFIGS_DIR)
        .to_owned())
}

/// Applies the cached `layers` (open files, described for messages) in order and returns the
/// files of `configs_dir`, stopping at `deadline`.
pub fn unpack(
    configs_dir: &str,
    layers: Vec<(String, std::fs::File)>,
    max_bytes: u64,
    deadline: Option<Instant>,
) -> Result<Unpacked, PullError> {
    let mut fs = ImageFs::new(configs_dir, max_bytes).map_err(|source| PullError::Layer {
        what: "the image config".into(),
        source,
    })?;
    if let Some(deadline) = deadline {
        fs = fs.with_deadline(deadline);
    }
    for (index, (what, file)) in layers.into_iter().enumerate() {
        fs.apply(index, file, max_bytes)
            .map_err(|source| PullError::Layer { what, source })?;
    }
    fs.into_tree().map_err(|source| PullError::Layer {
        what: "the image".into(),
        source,
    })
}

/// An unpacked directory: its subdirectories and its files, by path below it.
pub type Unpacked = (Vec<String>, Vec<(String, Vec<u8>)>);

fn describe_layer(index: usize, count: usize, digest: &str) -> String {
    format!("layer {} of {count} ({digest})", index + 1)
}

/// Refuses an image whose layers are too many or too large together, before a byte of them is
/// fetched.
fn check_image(layers: &[OciDescriptor], max_bytes: u64) -> Result<(), PullError> {
    if layers.len() > MAX_LAYERS {
        return Err(PullError::Invalid(format!(
            "the image has {} layers, more than the {MAX_LAYERS} allowed",
            layers.len()
        )));
    }
    let total: u64 = layers
        .iter()
        .map(|l| u64::try_from(l.size).unwrap_or(u64::MAX))
        .fold(0, u64::saturating_add);
    let limit = max_bytes.saturating_mul(MAX_IMAGE_FACTOR);
    if total > limit {
        return Err(PullError::Layer {
            what: "the image".into(),
            source: filesystem::LayerError::TooLarge(format!(
                "has {total} bytes of layers, more than the {limit} allowed ({MAX_IMAGE_FACTOR} times --max-content-bytes)"
            )),
        });
    }
    Ok(())
}

/// Refuses a layer by its descriptor, before a byte is fetched.
fn check_layer(layer: &OciDescriptor, max_bytes: u64) -> Result<(), filesystem::LayerError> {
    use filesystem::LayerError;
    let tar = layer.media_type.contains(".tar") || layer.media_type.contains("rootfs.diff");
    if !tar || layer.media_type.contains("nondistributable") || layer.media_type.contains("foreign")
    {
        return Err(LayerError::Refused(format!(
            "has media type {}, which is not a tar layer that can be fetched",
            layer.media_type
        )));
    }
    if layer.size < 0 || layer.size as u64 > max_bytes {
        return Err(LayerError::TooLarge(format!(
            "is {} bytes, more than the {max_bytes} allowed (--max-content-bytes)",
            layer.size
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configs_label_names_the_directory_or_it_is_configs() {
        let labelled = br#"{"config":{"Labels":{"operators.operatorframework.io.index.configs.v1":"/data/fbc"}}}"#;
        assert_eq!(configs_label(labelled).unwrap(), "/data/fbc");
        for config in [
            &br#"{"config":{"Labels":null}}"#[..],
            br#"{}"#,
            br#"{"config":{"Labels":{"operators.operatorframework.io.index.configs.v1":" "}}}"#,
        ] {
            assert_eq!(configs_label(config).unwrap(), DEFAULT_CONFIGS_DIR);
        }
        assert!(configs_label(b"<html>").is_err());
    }

    #[test]
    fn layers_are_refused_by_their_descriptor_before_a_byte_is_fetched() {
        let layer = |media_type: &str, size: i64| OciDescriptor {
            media_type: media_type.into(),
            digest: "sha256:00".into(),
            size,
            ..Default::default()
        };
        for ok in [
            "application/vnd.oci.image.layer.v1.tar",
            "application/vnd.oci.image.layer.v1.tar+gzip",
            "application/vnd.oci.image.layer.v1.tar+zstd",
            "application/vnd.docker.image.rootfs.diff.tar.gzip",
        ] {
            assert!(check_layer(&layer(ok, 10), 100).is_ok(), "{ok}");
        }
        for refused in [
            "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
            "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
            "application/vnd.cncf.helm.chart.content.v1.tar+gzip",
            "application/octet-stream",
        ] {
            let refused_type = check_layer(&layer(refused, 10), 100);
            if refused.contains("helm") {
                // A tar of another artifact type is still a tar: its content decides.
                continue;
            }
            assert!(
                matches!(refused_type, Err(filesystem::LayerError::Refused(_))),
                "{refused}"
            );
        }
        assert!(matches!(
            check_layer(&layer("application/vnd.oci.image.layer.v1.tar", 101), 100),
            Err(filesystem::LayerError::TooLarge(_))
        ));
        assert!(check_layer(&layer("application/vnd.oci.image.layer.v1.tar", -1), 100).is_err());
    }
}
