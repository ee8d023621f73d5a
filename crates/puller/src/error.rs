//! How a pull fails: a kind, which each manager maps to a condition reason of its own
//! (catalogd's `Unpacked` reasons, the provisioner's), and a message that says what to fix.

/// What kind of failure, in the words a condition reason would use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// What was asked for (an image, a tag, a blob) does not exist.
    NotFound,
    /// The fetch failed (network, registry answer, timeout, a layer that does not unpack).
    Failed,
    /// The content is larger than allowed (`--max-content-bytes`, the unpack budget).
    TooLarge,
    /// The content does not have the digest it was asked by.
    DigestMismatch,
    /// A referenced Secret or CA bundle is missing or malformed.
    InvalidCredentials,
    /// A referenced Secret lacks the opt-in label of credentials.
    SecretNotOptedIn,
    /// The registry refused the request: no credentials, or wrong ones.
    Unauthorized,
    /// The image reference does not parse.
    InvalidReference,
    /// A credential Secret does not allow this use (its hosts, its users, TLS verification
    /// off).
    CredentialNotAllowed,
    /// The host or address is one the admin does not let sources reach.
    HostNotAllowed,
}

impl ErrorKind {
    /// The kind as a word of a condition reason (what messages have always started with).
    pub fn word(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "SourceNotFound",
            ErrorKind::Failed => "UnpackFailed",
            ErrorKind::TooLarge => "ContentTooLarge",
            ErrorKind::DigestMismatch => "ChecksumMismatch",
            ErrorKind::InvalidCredentials => "InvalidCredentials",
            ErrorKind::SecretNotOptedIn => "SecretNotOptedIn",
            ErrorKind::Unauthorized => "Unauthorized",
            ErrorKind::InvalidReference => "InvalidImageReference",
            ErrorKind::CredentialNotAllowed => "CredentialNotAllowed",
            ErrorKind::HostNotAllowed => "HostNotAllowed",
        }
    }
}

/// Why a pull failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", kind.word())]
pub struct Error {
    /// What kind of failure.
    pub kind: ErrorKind,
    /// What happened and what to do.
    pub message: String,
}

impl Error {
    /// A new error.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }
}
