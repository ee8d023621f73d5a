//! Where catalog content comes from: one source per member of the `spec.source` union,
//! dispatched by [`Sources::fetch`] over that closed set. A source fetches files (name, bytes); parsing, validation and storing
//! are the pipeline's, the same for every source.

pub mod archive;
pub mod budget;
pub mod configmaps;
pub mod credentials;
pub mod custom;
pub mod flags;
pub mod git;
pub mod http;
pub mod image;
pub mod network;
pub mod paths;
pub mod poll;
pub mod redact;
pub mod scope;
pub mod tar_walk;
#[cfg(test)]
pub(crate) mod test_tar;

use k8s_openapi::NamespaceResourceScope;
use kube::api::Api;
use olm_api::catalog::{Catalog, ResolvedSource, SourceType};

use crate::budget::Reserve;
use serde::de::DeserializeOwned;
use std::sync::Arc;

/// How to fetch: the planner's ask of a source (catalogd's `plan` decides which).
#[derive(Debug, Clone, PartialEq)]
pub enum Mode {
    /// Everything, as if for the first time.
    Full,
    /// Relative to what was fetched last (the content of which is served): the source may
    /// answer that nothing changed (HTTP 304, the same ConfigMap versions).
    Conditional(ResolvedSource),
    /// Nothing: the spec pins content that is already served (an http `sha256`), so the source
    /// need not be asked; the status is rewritten from what was fetched.
    Confirm(ResolvedSource),
}

/// What the planner needs to know of a remote source's spec, against what was fetched for
/// the served content (`previous`): each source says it of its own spec (its `facts`,
/// tested beside it), and catalogd's `plan` decides from it.
#[derive(Debug, Clone, PartialEq)]
pub struct Facts<'a> {
    /// How often to poll, if at all.
    pub interval: Option<std::time::Duration>,
    /// The spec pins content (a sha256, a digest, a commit) that is the served content.
    pub pinned_and_served: bool,
    /// The source may be asked whether the served content is still current.
    pub conditional: bool,
    /// When the source was last asked, for the current spec.
    pub last_poll: Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
}

/// What a fetch produced.
#[derive(Debug)]
pub enum Fetched {
    /// New (or possibly new) content, as named files, and exactly what was fetched.
    Content {
        /// The files, in a deterministic order.
        files: Vec<(String, Vec<u8>)>,
        /// What was fetched (versions, digests, checksums).
        resolved: ResolvedSource,
    },
    /// The source says nothing changed since `previous`; the stored content stays. The
    /// resolved source may carry a new poll time.
    Unchanged {
        /// The resolved source to record.
        resolved: ResolvedSource,
    },
    /// The work goes on elsewhere (a generator Pod): nothing to unpack yet. A change of that
    /// work brings the next reconcile; `recheck` is the latest it comes.
    Running {
        /// Where the work is.
        message: String,
        /// When to look again at the latest.
        recheck: std::time::Duration,
    },
}

/// Condition reasons a source can fail with (the `Unpacked` condition's reason).
pub mod reasons {
    /// The referenced object (ConfigMap, URL) does not exist.
    pub const SOURCE_NOT_FOUND: &str = "SourceNotFound";
    /// The fetch failed (network, HTTP status, timeout, archive).
    pub const UNPACK_FAILED: &str = "UnpackFailed";
    /// The content is larger than catalogd accepts.
    pub const CONTENT_TOO_LARGE: &str = "ContentTooLarge";
    /// The content does not have the pinned sha256.
    pub const CHECKSUM_MISMATCH: &str = "ChecksumMismatch";
    /// The source reads a namespace catalogd may not read.
    pub const NAMESPACE_NOT_ALLOWED: &str = "NamespaceNotAllowed";
    /// A referenced Secret or CA bundle is missing or malformed.
    pub const INVALID_CREDENTIALS: &str = "InvalidCredentials";
    /// A referenced Secret lacks the opt-in label of credentials (see `credentials`).
    pub const SECRET_NOT_OPTED_IN: &str = "SecretNotOptedIn";
    /// The registry refused the request: no credentials, or wrong ones.
    pub const UNAUTHORIZED: &str = "Unauthorized";
    /// The image reference does not parse.
    pub const INVALID_REFERENCE: &str = "InvalidImageReference";
    /// A credential Secret does not allow this use: the hosts or Catalogs it names (see
    /// `scope`), or credentials with TLS verification off.
    pub const CREDENTIAL_NOT_ALLOWED: &str = "CredentialNotAllowed";
    /// The source's host or address is one catalogd's admin does not let sources reach (see
    /// `network`).
    pub const HOST_NOT_ALLOWED: &str = "HostNotAllowed";
}

/// Why a fetch failed: a condition reason and a message that says what to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}: {message}")]
pub struct SourceError {
    /// The `Unpacked` condition reason.
    pub reason: &'static str,
    /// What happened and what to do.
    pub message: String,
}

impl SourceError {
    /// A new error.
    pub fn new(reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
        }
    }
}

/// What a conditional fetch is conditional on.
pub(crate) fn since(mode: &Mode) -> Option<&ResolvedSource> {
    match mode {
        Mode::Conditional(previous) => Some(previous),
        Mode::Full | Mode::Confirm(_) => None,
    }
}

/// The error for content over `--max-content-bytes`.
pub(crate) fn too_large(what: &str, max_bytes: u64, part: &str) -> SourceError {
    SourceError::new(
        reasons::CONTENT_TOO_LARGE,
        format!(
            "{part} of {what} is larger than {max_bytes} bytes, the most allowed (--max-content-bytes)"
        ),
    )
}

/// The sources of this catalogd, by type.
pub struct Sources {
    /// `configMaps`.
    pub config_maps: configmaps::ConfigMapsSource,
    /// `http`.
    pub http: http::HttpSource,
    /// `image`.
    pub image: image::ImageSource,
    /// `git`.
    pub git: git::GitSource,
    /// `custom`.
    pub custom: custom::CustomSource,
}

impl Sources {
    /// Fetches `catalog`'s content from the source its spec names, as the plan says: in full,
    /// or conditionally on what was fetched last (whose content is served), in which case the
    /// source may answer [`Fetched::Unchanged`]. Before a source reads a body into memory, it
    /// reserves its size (or the most it may be) on `reserve`: content is held only within
    /// the unpack budget.
    pub async fn fetch(
        &self,
        catalog: &Catalog,
        mode: &Mode,
        reserve: &Arc<Reserve>,
    ) -> Result<Fetched, SourceError> {
        match catalog.spec.source.type_ {
            SourceType::ConfigMaps => self.config_maps.fetch(catalog, mode).await,
            SourceType::Http => self.http.fetch(catalog, mode, reserve).await,
            SourceType::Image => self.image.fetch(catalog, mode, reserve).await,
            SourceType::Git => self.git.fetch(catalog, mode, reserve).await,
            SourceType::Custom => self.custom.fetch(catalog, mode, reserve).await,
        }
    }
}

/// Reads the object `namespace/name` that a source refers to (`what` names it in messages). An
/// API error is `UnpackFailed`; a missing object is the `missing` error the caller chose.
pub(crate) async fn read_object<K>(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    what: &str,
    missing: SourceError,
) -> Result<K, SourceError>
where
    K: kube::Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    Api::<K>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(|e| {
            SourceError::new(
                reasons::UNPACK_FAILED,
                format!("reading {what} {namespace}/{name}: {e}"),
            )
        })?
        .ok_or(missing)
}
