//! What went wrong with a pull, in the registry's own words where it gave any, as an `Unpacked`
//! condition reason and message. Messages never carry a credential: registries do not echo
//! them, and URLs in image references have none.

use super::cache::BlobError;
use super::filesystem::LayerError;
use crate::describe::describe;
use crate::error::{Error, ErrorKind};
use crate::network::{NetworkPolicy, Refused};

/// The flag that bounds connecting to a registry and each read, named when one times out.
pub const TIMEOUT_FLAG: &str = "--http-timeout-seconds";

/// What a pull offered the registry as credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Offered {
    /// No pull secret is named.
    Nothing,
    /// The named pull secret has no entry for the registry.
    NoEntry(String),
    /// The pull secret's credentials.
    Credentials,
}

/// Why a pull failed.
#[derive(Debug, thiserror::Error)]
pub enum PullError {
    /// The registry answered with an error: its status, error codes and (clipped) words.
    #[error("the registry answered HTTP {status}: {words}")]
    Registry {
        /// The HTTP status.
        status: u16,
        /// The OCI error codes of its body (`MANIFEST_UNKNOWN`, …).
        codes: Vec<String>,
        /// What it said, at most a line.
        words: String,
    },
    /// The registry (or its token service) refused, or asked for credentials there are none
    /// of.
    #[error("unauthorized")]
    Unauthorized,
    /// A request failed (connecting, TLS, a read, a redirect).
    #[error("{0}")]
    Request(#[from] reqwest::Error),
    /// The network policy refused a destination.
    #[error("{0}")]
    Refused(#[from] Refused),
    /// The pull secret may not be sent where the registry asked for it.
    #[error("{}", .0.message)]
    Credential(Error),
    /// A manifest, error or token larger than catalogd reads.
    #[error("{0}")]
    TooLarge(String),
    /// A blob could not be fetched into the cache.
    #[error("{what}: {source}")]
    Blob {
        /// Which blob.
        what: String,
        /// Why.
        source: BlobError,
    },
    /// A layer could not be applied.
    #[error("{what}: {source}")]
    Layer {
        /// Which layer.
        what: String,
        /// Why.
        source: LayerError,
    },
    /// The manifest or config is not what an image needs.
    #[error("{0}")]
    Invalid(String),
    /// The whole pull took too long.
    #[error("the pull took longer than {0} s (see --image-timeout-seconds)")]
    TimedOut(u64),
}

impl PullError {
    /// Whether the error happened before any byte reached the registry's HTTP server
    /// (refused, unreachable, or a TLS handshake with a server that speaks plain HTTP), so
    /// that the other scheme may be tried.
    pub fn is_connect(&self) -> bool {
        match self {
            PullError::Request(e) => {
                e.is_connect() && !is_certificate_error(e) && NetworkPolicy::refusal_in(e).is_none()
            }
            _ => false,
        }
    }

    /// The condition reason and message; `image` names the reference, `offered` what was
    /// offered as credentials.
    pub fn into_error(self, image: &str, offered: &Offered) -> Error {
        let (reason, why) = match self {
            PullError::Registry {
                status,
                codes,
                words,
            } => {
                let has = |wanted: &[&str]| codes.iter().any(|c| wanted.contains(&c.as_str()));
                // The registry's own words, or (a bodiless answer) its status.
                let answered = if words.is_empty() {
                    format!("the registry answered HTTP {status}")
                } else {
                    format!("the registry answered: {words}")
                };
                if has(&["MANIFEST_UNKNOWN", "NAME_UNKNOWN", "BLOB_UNKNOWN"]) || status == 404 {
                    (ErrorKind::NotFound, answered)
                } else if has(&["UNAUTHORIZED", "DENIED"]) || status == 401 || status == 403 {
                    (
                        ErrorKind::Unauthorized,
                        format!("{}; {answered}", unauthorized(offered)),
                    )
                } else if words.is_empty() {
                    (ErrorKind::Failed, answered)
                } else {
                    (
                        ErrorKind::Failed,
                        format!("the registry answered HTTP {status}: {words}"),
                    )
                }
            }
            PullError::Unauthorized => (ErrorKind::Unauthorized, unauthorized(offered)),
            PullError::Request(e) => match NetworkPolicy::refusal_in(&e) {
                Some(refused) => (ErrorKind::HostNotAllowed, refused.0),
                None => (ErrorKind::Failed, describe(e, TIMEOUT_FLAG)),
            },
            PullError::Refused(refused) => (ErrorKind::HostNotAllowed, refused.0),
            PullError::Credential(e) => (e.kind, e.message),
            PullError::TooLarge(why) => (ErrorKind::TooLarge, why),
            PullError::Blob { what, source } => {
                let reason = match &source {
                    BlobError::Mismatch { .. } => ErrorKind::DigestMismatch,
                    BlobError::TooLarge(_) => ErrorKind::TooLarge,
                    _ => ErrorKind::Failed,
                };
                (reason, format!("{what}: {source}"))
            }
            PullError::Layer { what, source } => {
                let reason = match &source {
                    LayerError::TooLarge(_) => ErrorKind::TooLarge,
                    LayerError::Refused(_) | LayerError::Corrupt(_) | LayerError::TimedOut => {
                        ErrorKind::Failed
                    }
                };
                (reason, format!("{what}: {source}"))
            }
            e @ (PullError::Invalid(_) | PullError::TimedOut(_)) => {
                (ErrorKind::Failed, e.to_string())
            }
        };
        Error::new(reason, format!("pulling {image}: {why}"))
    }
}

/// Whether the TLS handshake failed on the server's certificate: the server speaks TLS, so
/// trying plain HTTP would only hide the real problem.
fn is_certificate_error(e: &reqwest::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        let text = s.to_string();
        if text.contains("certificate") || text.contains("Certificate") {
            return true;
        }
        // io::Error hides its inner error from `source`; look through it.
        source = match s
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
            None => s.source(),
        };
    }
    false
}

/// What a 401 means, given what was offered.
fn unauthorized(offered: &Offered) -> String {
    let answered = "the registry answered 401 unauthorized";
    match offered {
        Offered::Credentials => {
            format!("{answered}: it refused the credentials of spec.source.image.pullSecret")
        }
        Offered::NoEntry(secret) => format!(
            "{answered}: it requires credentials, and pull secret {secret} has none for this registry (no entry of its .dockerconfigjson auths names the registry's host)"
        ),
        Offered::Nothing => format!(
            "{answered}: it requires credentials; name a pull secret in spec.source.image.pullSecret"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry(status: u16, code: &str, words: &str) -> PullError {
        PullError::Registry {
            status,
            codes: vec![code.into()],
            words: words.into(),
        }
    }

    #[test]
    fn registry_errors_keep_the_registry_words() {
        let e = registry(
            404,
            "MANIFEST_UNKNOWN",
            "manifest unknown (MANIFEST_UNKNOWN)",
        )
        .into_error("r/x:1", &Offered::Nothing);
        assert_eq!(e.kind, ErrorKind::NotFound);
        assert_eq!(
            e.message,
            "pulling r/x:1: the registry answered: manifest unknown (MANIFEST_UNKNOWN)"
        );
        let e = registry(500, "", "oops").into_error("r/x:1", &Offered::Nothing);
        assert_eq!(e.kind, ErrorKind::Failed);
        assert!(e.message.ends_with("HTTP 500: oops"), "{}", e.message);
        let e = registry(403, "DENIED", "no").into_error("r/x:1", &Offered::Credentials);
        assert_eq!(e.kind, ErrorKind::Unauthorized);
    }

    #[test]
    fn unauthorized_says_whether_credentials_were_sent() {
        let without = PullError::Unauthorized.into_error("r/x:1", &Offered::Nothing);
        let no_entry = PullError::Unauthorized.into_error("r/x:1", &Offered::NoEntry("ps".into()));
        assert!(
            no_entry.message.contains("pull secret ps has none"),
            "{}",
            no_entry.message
        );
        assert_eq!(without.kind, ErrorKind::Unauthorized);
        assert!(
            without
                .message
                .contains("unauthorized: it requires credentials")
        );
        let with = PullError::Unauthorized.into_error("r/x:1", &Offered::Credentials);
        assert!(
            with.message.contains("refused the credentials"),
            "{}",
            with.message
        );
    }

    #[test]
    fn refusals_and_bounds_have_their_reasons() {
        let refused = PullError::Refused(Refused("169.254.169.254 is link-local".into()))
            .into_error("r/x:1", &Offered::Nothing);
        assert_eq!(refused.kind, ErrorKind::HostNotAllowed);
        let big = PullError::TooLarge("the manifest is larger than 4194304 bytes".into())
            .into_error("r/x:1", &Offered::Nothing);
        assert_eq!(big.kind, ErrorKind::TooLarge);
    }

    #[test]
    fn blob_and_layer_errors_have_their_reasons() {
        let mismatch = PullError::Blob {
            what: "layer 1 (sha256:aa)".into(),
            source: BlobError::Mismatch {
                expected: "sha256:aa".into(),
                actual: "sha256:bb".into(),
            },
        }
        .into_error("r/x:1", &Offered::Nothing);
        assert_eq!(mismatch.kind, ErrorKind::DigestMismatch);
        assert!(
            mismatch.message.contains("digest mismatch"),
            "{}",
            mismatch.message
        );
        let big = PullError::Layer {
            what: "layer 2".into(),
            source: LayerError::TooLarge("unpacks to more than 5 bytes".into()),
        }
        .into_error("r/x:1", &Offered::Nothing);
        assert_eq!(big.kind, ErrorKind::TooLarge);
    }
}
