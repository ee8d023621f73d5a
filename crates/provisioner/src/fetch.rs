//! Fetching a template's content as a file tree: bundle images pulled in process with the
//! puller catalogd shares (one OCI client, one set of limits, whiteout and link rules, and
//! credential rules: a pull secret must opt in and name the hosts it may go to, and may name
//! the BundleDeployments that may use it), and immutable ConfigMaps in the provisioner's
//! namespace; and a chart's values from Secrets and ConfigMaps there.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::{Api, Client};
use olm_api::bundle_deployment::{ValuesKind, ValuesReference};
use olm_puller::budget::{Reserve, Share, UnpackBudget};
use olm_puller::image::{ImageRequest, ImageSource, Pulled};
use olm_puller::scope::User;

use crate::bundle::Tree;
use crate::source::{self, Wanted};
use crate::status::reasons;
use crate::values::{Found, Layer, ValuesError};

/// A template's content.
#[derive(Debug, Clone)]
pub struct Content {
    /// The bundle's files.
    pub tree: Tree,
    /// For an image, the reference by the digest pulled (what is installed, exactly).
    pub resolved: Option<String>,
}

/// Why content could not be fetched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    /// The source failed: an unreachable registry, a refused credential, a missing image,
    /// content too large. The `Unpacked` condition says `UnpackFailed` with its message,
    /// whatever the reason carried here (`UnpackFailed`, or `ContentTooLarge` for tests and
    /// logs to tell apart).
    #[error("{}", .0.message)]
    Source(source::Refusal),
    /// The source's content is not allowed (a mutable ConfigMap, a key given twice).
    #[error("{0}")]
    Refused(source::Refusal),
}

/// A failure of the puller, under the provisioner's reason: content too large is
/// `ContentTooLarge`; anything else (a missing image, a refused credential, a registry that
/// cannot be reached) is `UnpackFailed`. Either way the condition says `UnpackFailed` and the
/// fetch is tried again, as rukpak's image source did.
fn pulling(e: olm_puller::Error) -> source::Refusal {
    let reason = match e.kind {
        olm_puller::ErrorKind::TooLarge => reasons::CONTENT_TOO_LARGE,
        _ => reasons::UNPACK_FAILED,
    };
    failed(reason, e.message)
}

/// A failure of fetching, with its reason.
fn failed(reason: &'static str, message: String) -> source::Refusal {
    source::Refusal { reason, message }
}

/// What reading a byte of bundle files into objects may cost (the parsed manifests, a CRD's
/// schema above all, take several times their text; the puller's unpack factor).
pub const PARSE_FACTOR: u64 = olm_puller::budget::UNPACK_FACTOR;

/// Fetches templates' content.
#[derive(Clone)]
pub struct Fetcher {
    client: Client,
    namespace: String,
    images: Arc<ImageSource>,
    budget: UnpackBudget,
    max_content_bytes: u64,
}

impl Fetcher {
    /// Reads ConfigMaps and pull secrets in `namespace`; pulls with `images` within `budget`;
    /// no bundle larger than `max_content_bytes`, however it comes.
    pub fn new(
        client: Client,
        namespace: String,
        images: Arc<ImageSource>,
        budget: UnpackBudget,
        max_content_bytes: u64,
    ) -> Fetcher {
        Fetcher {
            client,
            namespace,
            images,
            budget,
            max_content_bytes,
        }
    }

    /// The namespace ConfigMaps, pull secrets and values are read in.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// A share of the unpack budget for reading `bytes` of bundle files into objects
    /// ([`PARSE_FACTOR`] times them), waited for while other bundles are read; refused when
    /// even the whole budget would not hold it: such a bundle would take the provisioner's
    /// memory, and a provisioner killed for it would pull it again at start.
    pub async fn parse_share(&self, bytes: u64) -> Result<Share, FetchError> {
        let need = bytes.saturating_mul(PARSE_FACTOR);
        let whole = self.budget.bytes();
        let too_large = || {
            FetchError::Source(failed(
                reasons::CONTENT_TOO_LARGE,
                format!(
                    "the bundle's {bytes} bytes of files would take about {need} bytes of memory to read ({PARSE_FACTOR} times their size), more than the whole unpack budget ({whole} bytes, --unpack-budget-bytes)"
                ),
            ))
        };
        if need > whole {
            return Err(too_large());
        }
        self.budget.acquire(need).await.ok_or_else(too_large)
    }

    /// The values files `from` names, in order (Secrets' and ConfigMaps' keys in the
    /// provisioner's namespace), together no larger than the largest bundle.
    pub async fn values(&self, from: &[ValuesReference]) -> Result<Vec<Layer>, ValuesError> {
        let mut layers = Vec::with_capacity(from.len());
        let mut bytes = 0u64;
        for (index, reference) in from.iter().enumerate() {
            let read_error = |e: kube::Error| ValuesError {
                reason: reasons::UNPACK_FAILED,
                message: format!(
                    "reading {:?} {}/{}: {e}",
                    reference.kind, self.namespace, reference.name
                ),
            };
            let found: Option<Found> = match reference.kind {
                ValuesKind::Secret => {
                    let api: Api<Secret> = Api::namespaced(self.client.clone(), &self.namespace);
                    api.get_opt(&reference.name)
                        .await
                        .map_err(read_error)?
                        .map(|s| {
                            let data = s.data.unwrap_or_default();
                            Found::of(
                                s.metadata.labels.as_ref(),
                                data.into_iter().map(|(k, v)| (k, v.0)).collect(),
                            )
                        })
                }
                ValuesKind::ConfigMap => {
                    let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.namespace);
                    api.get_opt(&reference.name)
                        .await
                        .map_err(read_error)?
                        .map(|m| {
                            let data = m.data.unwrap_or_default();
                            Found::of(
                                m.metadata.labels.as_ref(),
                                data.into_iter().map(|(k, v)| (k, v.into_bytes())).collect(),
                            )
                        })
                }
            };
            if let Some(layer) =
                crate::values::layer(index, reference, &self.namespace, found.as_ref())?
            {
                bytes = bytes.saturating_add(layer.content.len() as u64);
                if bytes > self.max_content_bytes {
                    return Err(ValuesError {
                        reason: reasons::CONTENT_TOO_LARGE,
                        message: format!(
                            "the values of valuesFrom hold more than {} bytes (--max-content-bytes)",
                            self.max_content_bytes
                        ),
                    });
                }
                layers.push(layer);
            }
        }
        Ok(layers)
    }

    /// The content `wanted` names, for the BundleDeployment `bd`.
    pub async fn fetch(&self, bd: &str, wanted: &Wanted) -> Result<Content, FetchError> {
        match wanted {
            Wanted::Image {
                reference,
                pull_secret,
            } => {
                let request = ImageRequest {
                    reference,
                    field: "spec.template.spec.source.image",
                    pull_secret: pull_secret.as_deref(),
                    insecure_skip_tls_verify: false,
                    user: User::BundleDeployment(bd.to_owned()),
                    have: None,
                    // A bundle is the whole image (its manifests/ and metadata/).
                    dir: Some("/"),
                };
                let (reserve, _) = Reserve::new(self.budget.clone());
                let pulled = self
                    .images
                    .pull_image(&request, &reserve)
                    .await
                    .map_err(|e| FetchError::Source(pulling(e)))?;
                match pulled {
                    Pulled::Content {
                        by_digest,
                        dirs,
                        files,
                        ..
                    } => Ok(Content {
                        // Directories too: an empty manifests/ is not the same as none.
                        tree: files.into_iter().fold(
                            dirs.iter().fold(Tree::new(), |t, d| t.dir(d)),
                            |t, (path, content)| t.file(&path, content),
                        ),
                        resolved: Some(by_digest),
                    }),
                    // Nothing was held, so nothing can be unchanged.
                    Pulled::Unchanged { by_digest, .. } => Err(FetchError::Source(failed(
                        reasons::UNPACK_FAILED,
                        format!("{by_digest} was reported unchanged, but no content of it is held"),
                    ))),
                }
            }
            Wanted::ConfigMaps(entries) => {
                let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.namespace);
                let mut maps = Vec::new();
                for entry in entries {
                    let name = &entry.config_map.name;
                    let found = api.get_opt(name).await.map_err(|e| {
                        FetchError::Source(failed(
                            reasons::UNPACK_FAILED,
                            format!("reading ConfigMap {}/{name}: {e}", self.namespace),
                        ))
                    })?;
                    let Some(map) = found else {
                        return Err(FetchError::Source(failed(
                            reasons::UNPACK_FAILED,
                            format!(
                                "ConfigMap {}/{name} does not exist: bundle ConfigMaps live in the provisioner's namespace",
                                self.namespace
                            ),
                        )));
                    };
                    maps.push((entry.clone(), map));
                }
                let bytes: u64 = maps.iter().map(|(_, m)| source::config_map_bytes(m)).sum();
                if bytes > self.max_content_bytes {
                    return Err(FetchError::Source(failed(
                        reasons::CONTENT_TOO_LARGE,
                        format!(
                            "the bundle's ConfigMaps hold {bytes} bytes, more than the largest bundle accepted ({} bytes, --max-content-bytes)",
                            self.max_content_bytes
                        ),
                    )));
                }
                let tree = source::config_maps_tree(&maps).map_err(FetchError::Refused)?;
                Ok(Content {
                    tree,
                    resolved: None,
                })
            }
        }
    }
}
