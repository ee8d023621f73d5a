//! Fetching a template's content as a file tree: bundle images pulled in process with the
//! image code catalogd uses (one OCI client, one set of limits, whiteout and link rules, and
//! credential rules: a pull secret must opt in and name the hosts it may go to, and may name
//! the BundleDeployments that may use it), and immutable ConfigMaps in the provisioner's
//! namespace.

use std::sync::Arc;

use catalogd_sources::SourceError;
use catalogd_sources::budget::{Reserve, UnpackBudget};
use catalogd_sources::image::{ImageRequest, ImageSource, Pulled};
use catalogd_sources::scope::User;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client};

use crate::bundle::Tree;
use crate::source::{self, Wanted};

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
    /// The source failed: an unreachable registry, a refused credential, a missing image.
    #[error("{}", .0.message)]
    Source(SourceError),
    /// The source's content is not allowed (a mutable ConfigMap, a key given twice).
    #[error("{0}")]
    Refused(source::Refusal),
}

/// Fetches templates' content.
#[derive(Clone)]
pub struct Fetcher {
    client: Client,
    namespace: String,
    images: Arc<ImageSource>,
    budget: UnpackBudget,
}

impl Fetcher {
    /// Reads ConfigMaps and pull secrets in `namespace`; pulls with `images` within `budget`.
    pub fn new(
        client: Client,
        namespace: String,
        images: Arc<ImageSource>,
        budget: UnpackBudget,
    ) -> Fetcher {
        Fetcher {
            client,
            namespace,
            images,
            budget,
        }
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
                    .map_err(FetchError::Source)?;
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
                    Pulled::Unchanged { by_digest, .. } => {
                        Err(FetchError::Source(SourceError::new(
                            catalogd_sources::reasons::UNPACK_FAILED,
                            format!(
                                "{by_digest} was reported unchanged, but no content of it is held"
                            ),
                        )))
                    }
                }
            }
            Wanted::ConfigMaps(entries) => {
                let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.namespace);
                let mut maps = Vec::new();
                for entry in entries {
                    let name = &entry.config_map.name;
                    let found = api.get_opt(name).await.map_err(|e| {
                        FetchError::Source(SourceError::new(
                            catalogd_sources::reasons::UNPACK_FAILED,
                            format!("reading ConfigMap {}/{name}: {e}", self.namespace),
                        ))
                    })?;
                    let Some(map) = found else {
                        return Err(FetchError::Source(SourceError::new(
                            catalogd_sources::reasons::UNPACK_FAILED,
                            format!(
                                "ConfigMap {}/{name} does not exist: bundle ConfigMaps live in the provisioner's namespace",
                                self.namespace
                            ),
                        )));
                    };
                    maps.push((entry.clone(), map));
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
