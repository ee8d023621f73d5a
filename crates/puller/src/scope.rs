//! Where a credential may go. Opting in ([`super::credentials::CREDENTIAL_LABEL`]) makes a
//! Secret usable, but on its own it would let any Catalog (or BundleDeployment) author send it
//! to any host: the object names both the Secret and the URL. So a credential Secret also names
//! the hosts (or URL prefixes) it may be sent to, and optionally the objects that may use it;
//! both are checked before a byte is sent, for every kind of credential (http bearer and basic,
//! git over https and ssh, registry pull secrets and the token services registries name).

use k8s_openapi::api::core::v1::Secret;

use crate::error::{Error, ErrorKind};

/// The annotation listing where a credential may be sent: host names (`git.example.com`,
/// `registry.example.com:5000`, `*.example.com`) or URL prefixes
/// (`https://git.example.com/team/`), separated by commas or whitespace.
pub const HOSTS_ANNOTATION: &str = "olm-rs.io/credential-hosts";
/// The annotation listing the Catalogs that may use a credential (names, separated by commas
/// or whitespace); without it, any Catalog may, within the hosts.
pub const CATALOGS_ANNOTATION: &str = "olm-rs.io/credential-catalogs";
/// The same for the BundleDeployments whose bundle images the provisioner pulls.
pub const BUNDLE_DEPLOYMENTS_ANNOTATION: &str = "olm-rs.io/credential-bundle-deployments";

/// The object a credential would be used for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum User {
    /// A Catalog (catalogd's sources).
    Catalog(String),
    /// A BundleDeployment (the provisioner's bundle images).
    BundleDeployment(String),
}

impl User {
    /// The annotation that may restrict a credential to some objects of this kind.
    pub fn annotation(&self) -> &'static str {
        match self {
            User::Catalog(_) => CATALOGS_ANNOTATION,
            User::BundleDeployment(_) => BUNDLE_DEPLOYMENTS_ANNOTATION,
        }
    }

    /// The object's name.
    pub fn name(&self) -> &str {
        match self {
            User::Catalog(n) | User::BundleDeployment(n) => n,
        }
    }

    fn kinds(&self) -> &'static str {
        match self {
            User::Catalog(_) => "Catalogs",
            User::BundleDeployment(_) => "BundleDeployments",
        }
    }
}

/// What a credential would be sent to.
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    /// A request URL (http sources, git over https, a registry's token service).
    Url(&'a url::Url),
    /// A host and port reached without a URL path (a registry, an ssh server).
    Host {
        /// The host name or IP address, as written.
        host: &'a str,
        /// The port, when not the protocol's default.
        port: Option<u16>,
    },
}

impl std::fmt::Display for Target<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Url(url) => write!(f, "{}", super::redact::redact(url.as_str())),
            Target::Host { host, port: None } => f.write_str(host),
            Target::Host {
                host,
                port: Some(p),
            } => write!(f, "{host}:{p}"),
        }
    }
}

impl Target<'_> {
    fn host(&self) -> String {
        match self {
            Target::Url(url) => url.host_str().unwrap_or_default().to_ascii_lowercase(),
            Target::Host { host, .. } => host.to_ascii_lowercase(),
        }
    }

    fn port(&self) -> Option<u16> {
        match self {
            Target::Url(url) => url.port_or_known_default(),
            Target::Host { port, .. } => *port,
        }
    }
}

/// One entry of [`HOSTS_ANNOTATION`].
#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    /// `host`, `host:port` or `*.suffix`: any URL or connection to that host.
    Host { host: String, port: Option<u16> },
    /// `https://host/path`: URLs under it (the path ends at a segment boundary).
    Prefix(url::Url),
}

fn entries(text: &str) -> Vec<Entry> {
    text.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|e| !e.is_empty())
        .filter_map(|e| {
            if e.contains("://") {
                return url::Url::parse(e).ok().map(Entry::Prefix);
            }
            let (host, port) = match e.rsplit_once(':') {
                // An IPv6 literal holds colons; a port follows its bracket.
                Some((h, p)) if !h.contains(':') || h.ends_with(']') => (h, p.parse().ok()),
                _ => (e, None),
            };
            Some(Entry::Host {
                host: host.trim_matches(['[', ']']).to_ascii_lowercase(),
                port,
            })
        })
        .collect()
}

fn host_matches(pattern: &str, host: &str) -> bool {
    let host = host.trim_matches(['[', ']']);
    match pattern.strip_prefix("*.") {
        Some(suffix) => host.len() > suffix.len() + 1 && host.ends_with(&format!(".{suffix}")),
        None => pattern == host,
    }
}

impl Entry {
    fn allows(&self, target: &Target<'_>) -> bool {
        match self {
            Entry::Host { host, port } => {
                host_matches(host, &target.host()) && port.is_none_or(|p| Some(p) == target.port())
            }
            Entry::Prefix(prefix) => {
                let same_origin = prefix.scheme().eq_ignore_ascii_case(match target {
                    Target::Url(url) => url.scheme(),
                    Target::Host { .. } => prefix.scheme(),
                }) && prefix
                    .host_str()
                    .is_some_and(|h| host_matches(&h.to_ascii_lowercase(), &target.host()))
                    && prefix.port_or_known_default()
                        == target.port().or(prefix.port_or_known_default());
                if !same_origin {
                    return false;
                }
                match target {
                    // A host without a path: only a prefix that is the whole host.
                    Target::Host { .. } => prefix.path() == "/",
                    Target::Url(url) => {
                        let (want, path) = (prefix.path(), url.path());
                        path.starts_with(want)
                            && (want.ends_with('/')
                                || path.len() == want.len()
                                || path[want.len()..].starts_with('/'))
                    }
                }
            }
        }
    }
}

/// Whether the credential Secret `secret_name` (`secret`) may be used for `user` and sent to
/// `target`; the error says which annotation to set, and that nothing was sent.
pub fn check(
    secret: &Secret,
    secret_name: &str,
    user: &User,
    target: &Target<'_>,
) -> Result<(), Error> {
    let annotations = secret.metadata.annotations.as_ref();
    let denied = |message: String| Err(Error::new(ErrorKind::CredentialNotAllowed, message));
    let annotation = user.annotation();
    if let Some(users) = annotations.and_then(|a| a.get(annotation)) {
        let allowed: Vec<&str> = users
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|c| !c.is_empty())
            .collect();
        let name = user.name();
        if !allowed.contains(&name) {
            return denied(format!(
                "Secret {secret_name} may be used only by the {} {} ({annotation}), not by {name}; nothing was sent",
                user.kinds(),
                allowed.join(", ")
            ));
        }
    }
    let Some(hosts) = annotations
        .and_then(|a| a.get(HOSTS_ANNOTATION))
        .filter(|h| !h.trim().is_empty())
    else {
        return denied(format!(
            "Secret {secret_name} does not say where it may be sent, so nothing was sent: annotate it with {HOSTS_ANNOTATION}, listing hosts or URL prefixes (here: kubectl annotate secret {secret_name} {HOSTS_ANNOTATION}={})",
            target.host()
        ));
    };
    if entries(hosts).iter().any(|e| e.allows(target)) {
        return Ok(());
    }
    denied(format!(
        "Secret {secret_name} may be sent only to {} ({HOSTS_ANNOTATION}), not to {target}; nothing was sent",
        hosts.trim()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn secret(annotations: &[(&str, &str)]) -> Secret {
        Secret {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                annotations: Some(
                    annotations
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect::<BTreeMap<_, _>>(),
                ),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn url_ok(hosts: &str, url: &str) -> bool {
        let url = url::Url::parse(url).unwrap();
        check(
            &secret(&[(HOSTS_ANNOTATION, hosts)]),
            "s",
            &User::Catalog("c".into()),
            &Target::Url(&url),
        )
        .is_ok()
    }

    fn host_ok(hosts: &str, host: &str, port: Option<u16>) -> bool {
        check(
            &secret(&[(HOSTS_ANNOTATION, hosts)]),
            "s",
            &User::Catalog("c".into()),
            &Target::Host { host, port },
        )
        .is_ok()
    }

    #[test]
    fn a_secret_that_names_no_hosts_is_sent_nowhere() {
        let url = url::Url::parse("https://git.example/r.git").unwrap();
        for s in [secret(&[]), secret(&[(HOSTS_ANNOTATION, "  ")])] {
            let err = check(&s, "tok", &User::Catalog("c".into()), &Target::Url(&url)).unwrap_err();
            assert_eq!(err.kind, ErrorKind::CredentialNotAllowed);
            assert!(err.message.contains(HOSTS_ANNOTATION), "{}", err.message);
            assert!(err.message.contains("git.example"), "{}", err.message);
        }
    }

    #[test]
    fn hosts_match_exactly_by_wildcard_and_by_port() {
        assert!(url_ok("git.example", "https://git.example/r.git"));
        assert!(url_ok("GIT.example", "https://git.Example:8443/r.git"));
        assert!(!url_ok("git.example", "https://evil.example/r.git"));
        assert!(!url_ok("git.example", "https://git.example.evil.com/r.git"));
        assert!(url_ok("*.example.com", "https://a.b.example.com/x"));
        assert!(!url_ok("*.example.com", "https://example.com/x"));
        assert!(!url_ok("*.example.com", "https://badexample.com/x"));
        assert!(url_ok("h.example:8443", "https://h.example:8443/x"));
        assert!(!url_ok("h.example:8443", "https://h.example/x"));
        assert!(url_ok("a.example, b.example", "https://b.example/x"));
        assert!(url_ok("a.example\nb.example", "https://b.example/x"));
        assert!(url_ok("10.0.0.5", "https://10.0.0.5/x"));
        assert!(url_ok("[::1]:8443", "https://[::1]:8443/x"));
    }

    #[test]
    fn prefixes_match_at_path_segment_boundaries() {
        let p = "https://git.example/team";
        assert!(url_ok(p, "https://git.example/team/repo.git"));
        assert!(url_ok(p, "https://git.example/team"));
        assert!(!url_ok(p, "https://git.example/teammates/repo.git"));
        assert!(!url_ok(p, "https://git.example/other/repo.git"));
        assert!(url_ok(
            "https://git.example/team/",
            "https://git.example/team/r"
        ));
        // Scheme and port are part of the prefix.
        assert!(!url_ok(p, "http://git.example/team/repo.git"));
        assert!(!url_ok(p, "https://git.example:8443/team/repo.git"));
        assert!(!url_ok(p, "https://evil.example/team/repo.git"));
    }

    #[test]
    fn hosts_without_a_path_match_host_entries_and_whole_host_prefixes() {
        assert!(host_ok("registry.example", "registry.example", None));
        assert!(host_ok(
            "registry.example:5000",
            "registry.example",
            Some(5000)
        ));
        assert!(!host_ok("registry.example:5000", "registry.example", None));
        assert!(host_ok(
            "https://registry.example",
            "registry.example",
            Some(443)
        ));
        assert!(!host_ok(
            "https://registry.example/team/",
            "registry.example",
            Some(443)
        ));
        assert!(!host_ok("registry.example", "other.example", None));
    }

    #[test]
    fn a_secret_may_name_the_catalogs_that_use_it() {
        let url = url::Url::parse("https://git.example/r.git").unwrap();
        let s = secret(&[
            (HOSTS_ANNOTATION, "git.example"),
            (CATALOGS_ANNOTATION, "prod, staging"),
        ]);
        let catalog = |n: &str| User::Catalog(n.into());
        assert!(check(&s, "s", &catalog("prod"), &Target::Url(&url)).is_ok());
        assert!(check(&s, "s", &catalog("staging"), &Target::Url(&url)).is_ok());
        let err = check(&s, "s", &catalog("mine"), &Target::Url(&url)).unwrap_err();
        assert!(err.message.contains(CATALOGS_ANNOTATION), "{}", err.message);
        assert!(
            err.message.contains("the Catalogs prod, staging"),
            "{}",
            err.message
        );
        assert!(err.message.contains("not by mine"), "{}", err.message);
        // The Catalogs' list says nothing of BundleDeployments: each kind has its own.
        let bd = |n: &str| User::BundleDeployment(n.into());
        assert!(check(&s, "s", &bd("mine"), &Target::Url(&url)).is_ok());
        let only = secret(&[
            (HOSTS_ANNOTATION, "git.example"),
            (BUNDLE_DEPLOYMENTS_ANNOTATION, "shop"),
        ]);
        assert!(check(&only, "s", &bd("shop"), &Target::Url(&url)).is_ok());
        let err = check(&only, "s", &bd("other"), &Target::Url(&url)).unwrap_err();
        assert!(
            err.message.contains("only by the BundleDeployments shop"),
            "{}",
            err.message
        );
    }
}
