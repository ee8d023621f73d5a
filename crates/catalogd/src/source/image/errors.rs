//! What went wrong with a pull, in the registry's own words where it gave any, as an `Unpacked`
//! condition reason and message. Messages never carry a credential: registries do not echo
//! them, and URLs in image references have none.

use oci_client::errors::{OciDistributionError, OciErrorCode};

use super::cache::BlobError;
use super::filesystem::LayerError;
use crate::source::http::describe;
use crate::source::{SourceError, reasons};

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
    /// The registry client failed.
    #[error("{0}")]
    Oci(#[from] OciDistributionError),
    /// A request of catalogd's own (the cheap digest check) failed.
    #[error("{0}")]
    Request(#[from] reqwest::Error),
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
            PullError::Request(e) | PullError::Oci(OciDistributionError::RequestError(e)) => {
                e.is_connect() && !is_certificate_error(e)
            }
            _ => false,
        }
    }

    /// The condition reason and message; `image` names the reference, `offered` what was
    /// offered as credentials.
    pub fn into_source_error(self, image: &str, offered: &Offered) -> SourceError {
        let (reason, why) = match self {
            PullError::Oci(e) => oci(e, offered),
            PullError::Request(e) => (reasons::UNPACK_FAILED, describe(e, TIMEOUT_FLAG)),
            PullError::Blob { what, source } => {
                let reason = match &source {
                    BlobError::Mismatch { .. } => reasons::CHECKSUM_MISMATCH,
                    BlobError::TooLarge(_) => reasons::CONTENT_TOO_LARGE,
                    _ => reasons::UNPACK_FAILED,
                };
                (reason, format!("{what}: {source}"))
            }
            PullError::Layer { what, source } => {
                let reason = match &source {
                    LayerError::TooLarge(_) => reasons::CONTENT_TOO_LARGE,
                    LayerError::Refused(_) | LayerError::Corrupt(_) | LayerError::TimedOut => {
                        reasons::UNPACK_FAILED
                    }
                };
                (reason, format!("{what}: {source}"))
            }
            e @ (PullError::Invalid(_) | PullError::TimedOut(_)) => {
                (reasons::UNPACK_FAILED, e.to_string())
            }
        };
        SourceError::new(reason, format!("pulling {image}: {why}"))
    }
}

fn oci(e: OciDistributionError, offered: &Offered) -> (&'static str, String) {
    match e {
        OciDistributionError::UnauthorizedError { .. }
        | OciDistributionError::AuthenticationFailure(_) => {
            (reasons::UNAUTHORIZED, unauthorized(offered))
        }
        OciDistributionError::RegistryError { envelope, .. } => {
            let unknown = envelope.errors.iter().any(|e| {
                matches!(
                    e.code,
                    OciErrorCode::ManifestUnknown
                        | OciErrorCode::NameUnknown
                        | OciErrorCode::BlobUnknown
                )
            });
            let denied = envelope
                .errors
                .iter()
                .any(|e| matches!(e.code, OciErrorCode::Unauthorized | OciErrorCode::Denied));
            let words: Vec<String> = envelope
                .errors
                .iter()
                .map(|e| {
                    let code = serde_json::to_value(&e.code)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default();
                    format!("{} ({code})", e.message)
                })
                .collect();
            let reason = if unknown {
                reasons::SOURCE_NOT_FOUND
            } else if denied {
                reasons::UNAUTHORIZED
            } else {
                reasons::UNPACK_FAILED
            };
            (
                reason,
                format!("the registry answered: {}", words.join("; ")),
            )
        }
        OciDistributionError::ServerError { code, message, .. } => (
            if code == 404 {
                reasons::SOURCE_NOT_FOUND
            } else {
                reasons::UNPACK_FAILED
            },
            format!(
                "the registry answered HTTP {code}: {}",
                first_line(&message)
            ),
        ),
        OciDistributionError::RequestError(e) => {
            (reasons::UNPACK_FAILED, describe(e, TIMEOUT_FLAG))
        }
        OciDistributionError::DigestError(e) => (reasons::CHECKSUM_MISMATCH, e.to_string()),
        other => (reasons::UNPACK_FAILED, other.to_string()),
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

/// The first line of a body, shortened: enough to say what a server said.
fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default().trim();
    line.chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use oci_client::errors::{OciEnvelope, OciError};

    fn envelope(code: OciErrorCode, message: &str) -> OciDistributionError {
        OciDistributionError::RegistryError {
            envelope: OciEnvelope {
                errors: vec![OciError {
                    code,
                    message: message.into(),
                    detail: serde_json::Value::Null,
                }],
            },
            url: "http://r/v2/x/manifests/1".into(),
        }
    }

    #[test]
    fn registry_errors_keep_the_registry_words() {
        let e = PullError::Oci(envelope(OciErrorCode::ManifestUnknown, "manifest unknown"))
            .into_source_error("r/x:1", &Offered::Nothing);
        assert_eq!(e.reason, reasons::SOURCE_NOT_FOUND);
        assert_eq!(
            e.message,
            "pulling r/x:1: the registry answered: manifest unknown (MANIFEST_UNKNOWN)"
        );
    }

    #[test]
    fn unauthorized_says_whether_credentials_were_sent() {
        let e = || OciDistributionError::UnauthorizedError { url: "u".into() };
        let without = PullError::Oci(e()).into_source_error("r/x:1", &Offered::Nothing);
        let no_entry =
            PullError::Oci(e()).into_source_error("r/x:1", &Offered::NoEntry("ps".into()));
        assert!(
            no_entry.message.contains("pull secret ps has none"),
            "{}",
            no_entry.message
        );
        assert_eq!(without.reason, reasons::UNAUTHORIZED);
        assert!(
            without
                .message
                .contains("unauthorized: it requires credentials")
        );
        let with = PullError::Oci(e()).into_source_error("r/x:1", &Offered::Credentials);
        assert!(
            with.message.contains("refused the credentials"),
            "{}",
            with.message
        );
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
        .into_source_error("r/x:1", &Offered::Nothing);
        assert_eq!(mismatch.reason, reasons::CHECKSUM_MISMATCH);
        assert!(
            mismatch.message.contains("digest mismatch"),
            "{}",
            mismatch.message
        );
        let big = PullError::Layer {
            what: "layer 2".into(),
            source: LayerError::TooLarge("unpacks to more than 5 bytes".into()),
        }
        .into_source_error("r/x:1", &Offered::Nothing);
        assert_eq!(big.reason, reasons::CONTENT_TOO_LARGE);
    }
}
