//! The contract every source keeps with catalogd's pipeline: how it is asked to fetch
//! ([`Mode`], from the plan), what it says of its spec ([`Facts`]), what it answers
//! ([`Fetched`]) and how it fails ([`SourceError`], with a condition reason of [`reasons`]).

use k8s_openapi::NamespaceResourceScope;
use kube::api::Api;
use olm_api::catalog::ResolvedSource;
use serde::de::DeserializeOwned;

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

/// A failure of the puller every manager shares, under catalogd's reason of the same word
/// (the puller's words were catalogd's reasons first; the test below holds them together).
impl From<olm_puller::Error> for SourceError {
    fn from(e: olm_puller::Error) -> Self {
        SourceError {
            reason: e.kind.word(),
            message: e.message,
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

#[cfg(test)]
mod tests {
    use olm_puller::ErrorKind;

    use super::reasons;

    #[test]
    fn every_kind_of_pull_failure_is_one_of_catalogds_reasons() {
        let ours = [
            reasons::SOURCE_NOT_FOUND,
            reasons::UNPACK_FAILED,
            reasons::CONTENT_TOO_LARGE,
            reasons::CHECKSUM_MISMATCH,
            reasons::INVALID_CREDENTIALS,
            reasons::SECRET_NOT_OPTED_IN,
            reasons::UNAUTHORIZED,
            reasons::INVALID_REFERENCE,
            reasons::CREDENTIAL_NOT_ALLOWED,
            reasons::HOST_NOT_ALLOWED,
        ];
        let kinds = [
            ErrorKind::NotFound,
            ErrorKind::Failed,
            ErrorKind::TooLarge,
            ErrorKind::DigestMismatch,
            ErrorKind::InvalidCredentials,
            ErrorKind::SecretNotOptedIn,
            ErrorKind::Unauthorized,
            ErrorKind::InvalidReference,
            ErrorKind::CredentialNotAllowed,
            ErrorKind::HostNotAllowed,
        ];
        for (kind, reason) in kinds.into_iter().zip(ours) {
            assert_eq!(kind.word(), reason);
        }
    }
}
