//! What a git source asks for, decided from the spec alone: which ref (as a refspec), which
//! transport, which directory. Pure, so every refusal is tested without a server.

use gix::ObjectId;
use gix::bstr::ByteSlice;
use olm_api::catalog::{GitRef, GitSource};

use crate::contract::{SourceError, reasons};
use olm_puller::paths::normalize;

/// The condition reason for a spec catalogd cannot act on (a bad ref name, directory or URL).
pub const INVALID_SPEC: &str = "InvalidSpec";

/// The one ref of the spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Want {
    /// `refs/heads/NAME`.
    Branch(String),
    /// `refs/tags/NAME`, peeled to its commit.
    Tag(String),
    /// A commit, by id: pinned, never polled.
    Commit(ObjectId),
}

impl Want {
    /// The ref of `r`, checked as git checks ref names (no globs, no `..`, no control
    /// characters), so a name can never become a pattern that matches other refs.
    pub fn from_spec(r: &GitRef) -> Result<Want, SourceError> {
        let checked = |prefix: &str, name: &str, what: &str| {
            let full = format!("{prefix}{name}");
            match gix::validate::reference::name(full.as_bytes().as_bstr()) {
                Ok(_) if !name.contains('*') => Ok(name.to_owned()),
                _ => Err(SourceError::new(
                    INVALID_SPEC,
                    format!("git.ref.{what} {name:?} is not a valid git {what} name"),
                )),
            }
        };
        match (&r.branch, &r.tag, &r.commit) {
            (Some(branch), None, None) => {
                checked("refs/heads/", branch, "branch").map(Want::Branch)
            }
            (None, Some(tag), None) => checked("refs/tags/", tag, "tag").map(Want::Tag),
            (None, None, Some(commit)) => ObjectId::from_hex(commit.as_bytes())
                .map(Want::Commit)
                .map_err(|_| {
                    SourceError::new(
                        INVALID_SPEC,
                        format!("git.ref.commit {commit:?} is not a full commit id"),
                    )
                }),
            _ => Err(SourceError::new(
                INVALID_SPEC,
                "exactly one of git.ref.branch, git.ref.tag and git.ref.commit must be set",
            )),
        }
    }

    /// The fetch refspec (source only: nothing is written to local refs).
    pub fn refspec(&self) -> String {
        match self {
            Want::Branch(b) => format!("refs/heads/{b}"),
            Want::Tag(t) => format!("refs/tags/{t}"),
            Want::Commit(id) => id.to_string(),
        }
    }

    /// The ref's full name on the remote, for a branch or tag.
    pub fn ref_name(&self) -> Option<String> {
        match self {
            Want::Commit(_) => None,
            _ => Some(self.refspec()),
        }
    }

    /// How messages name it.
    pub fn describe(&self) -> String {
        match self {
            Want::Branch(b) => format!("branch {b:?}"),
            Want::Tag(t) => format!("tag {t:?}"),
            Want::Commit(id) => format!("commit {id}"),
        }
    }
}

/// How the repository is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// `https://`.
    Https,
    /// `http://`: no credentials are ever sent.
    Http,
    /// `ssh://` or `user@host:path`.
    Ssh,
}

/// The transport of `repository`; local paths, `file://` and `git://` are refused (catalogd
/// must never read its own filesystem, and `git://` is unauthenticated and unencrypted).
pub fn transport(repository: &str) -> Result<Transport, SourceError> {
    let lower = repository.to_ascii_lowercase();
    if lower.starts_with("https://") {
        Ok(Transport::Https)
    } else if lower.starts_with("http://") {
        Ok(Transport::Http)
    } else if lower.starts_with("ssh://") || scp_like(repository) {
        Ok(Transport::Ssh)
    } else {
        Err(SourceError::new(
            INVALID_SPEC,
            format!(
                "git.repository {} is not an https, http or ssh URL; local paths, file:// and git:// are refused",
                redact(repository)
            ),
        ))
    }
}

/// `user@host:path`, as git reads it (no scheme, a colon before any slash).
fn scp_like(repository: &str) -> bool {
    match (
        repository.find(':'),
        repository.find('/'),
        repository.find('@'),
    ) {
        (Some(colon), slash, Some(at)) => at < colon && slash.is_none_or(|s| colon < s),
        _ => false,
    }
}

/// `repository` as messages, logs and `resolvedSource.git.repository` show it. An http(s) URL
/// loses all its user info (a token is often placed in the user part, `https://TOKEN@host/…`),
/// its query and its fragment, exactly as the http source shows URLs. An ssh URL keeps its
/// user (an account name such as `git`; ssh authenticates with the key), never a password.
pub fn redact(repository: &str) -> String {
    let lower = repository.to_ascii_lowercase();
    if lower.starts_with("https://") || lower.starts_with("http://") {
        return olm_puller::redact::redact(repository);
    }
    match url::Url::parse(repository) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        _ => repository.to_owned(),
    }
}

/// The spec's directory as a path inside the repository ("" for its root), or why it is
/// refused.
pub fn directory(spec: &GitSource) -> Result<String, SourceError> {
    let raw = spec.directory.as_deref().unwrap_or_default();
    if raw.starts_with('/') {
        return Err(SourceError::new(
            INVALID_SPEC,
            format!("git.directory {raw:?} must be relative to the repository's root"),
        ));
    }
    normalize("", raw).ok_or_else(|| {
        SourceError::new(
            INVALID_SPEC,
            format!("git.directory {raw:?} climbs out of the repository"),
        )
    })
}

/// The error for a repository that cannot be reached with the credentials the spec names.
pub(crate) fn credentials_need_tls(secret: &str, repository: &str) -> SourceError {
    SourceError::new(
        reasons::INVALID_CREDENTIALS,
        format!(
            "authSecret {secret} is sent only over https or ssh, and {} is neither",
            redact(repository)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec_ref(branch: Option<&str>, tag: Option<&str>, commit: Option<&str>) -> GitRef {
        GitRef {
            branch: branch.map(Into::into),
            tag: tag.map(Into::into),
            commit: commit.map(Into::into),
        }
    }

    #[test]
    fn refs_become_exact_refspecs() {
        let b = Want::from_spec(&spec_ref(Some("release/4.16"), None, None)).unwrap();
        assert_eq!(b.refspec(), "refs/heads/release/4.16");
        let t = Want::from_spec(&spec_ref(None, Some("v1.0.0"), None)).unwrap();
        assert_eq!(t.ref_name().as_deref(), Some("refs/tags/v1.0.0"));
        let id = "0123456789abcdef0123456789abcdef01234567";
        let c = Want::from_spec(&spec_ref(None, None, Some(id))).unwrap();
        assert_eq!(c.refspec(), id);
        assert_eq!(c.ref_name(), None);
    }

    #[test]
    fn names_that_are_patterns_or_invalid_are_refused() {
        for bad in [
            "*", "main*", "a..b", "a b", "x:y", "a~1", "a^", "", "a/", "@{1}",
        ] {
            let err = Want::from_spec(&spec_ref(Some(bad), None, None));
            assert!(err.is_err(), "{bad:?} accepted");
        }
        assert!(Want::from_spec(&spec_ref(None, None, Some("abc"))).is_err());
        assert!(Want::from_spec(&spec_ref(Some("a"), Some("b"), None)).is_err());
        assert!(Want::from_spec(&spec_ref(None, None, None)).is_err());
    }

    #[test]
    fn only_network_transports_are_accepted() {
        assert_eq!(transport("https://h/r.git").unwrap(), Transport::Https);
        assert_eq!(transport("HTTP://h/r.git").unwrap(), Transport::Http);
        assert_eq!(transport("ssh://git@h/r.git").unwrap(), Transport::Ssh);
        assert_eq!(transport("git@github.com:o/r.git").unwrap(), Transport::Ssh);
        for bad in [
            "file:///etc",
            "/var/lib/catalogd",
            "../x",
            "git://h/r",
            "h/r:x@y",
        ] {
            let err = transport(bad).unwrap_err();
            assert_eq!(err.reason, INVALID_SPEC, "{bad}");
        }
    }

    #[test]
    fn credentials_in_the_url_never_appear() {
        assert_eq!(redact("https://me:secret@h/r.git"), "https://h/r.git");
        // A token in the user part is as secret as a password.
        assert_eq!(redact("https://TOKEN@h/r.git"), "https://h/r.git");
        assert_eq!(redact("HTTP://tok@h:8080/r.git"), "http://h:8080/r.git");
        assert_eq!(redact("https://h/r.git"), "https://h/r.git");
        // ssh keeps its account name, never a password.
        assert_eq!(redact("ssh://git@h/r.git"), "ssh://git@h/r.git");
        assert_eq!(redact("ssh://git:pw@h/r.git"), "ssh://git:***@h/r.git");
        assert_eq!(redact("git@github.com:o/r.git"), "git@github.com:o/r.git");
    }

    #[test]
    fn directories_stay_inside_the_repository() {
        let dir = |d: &str| {
            directory(&GitSource {
                directory: Some(d.into()),
                ..Default::default()
            })
        };
        assert_eq!(dir("catalogs/./x/").unwrap(), "catalogs/x");
        assert_eq!(dir("").unwrap(), "");
        assert_eq!(dir("a/../b").unwrap(), "b");
        assert!(dir("../x").is_err());
        assert!(dir("/etc").is_err());
    }
}
