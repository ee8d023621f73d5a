//! Image references as the puller reads them: which registries may be reached over plain HTTP,
//! and the by-digest form recorded in `status.resolvedSource.image.resolvedRef`.

use std::net::IpAddr;

use oci_client::Reference;

/// Whether `registry` (`host` or `host:port`, as in a reference) may be reached over plain
/// HTTP: loopback registries (a registry on the node itself), and the registries an admin named
/// with `--insecure-registries`. Every other registry is reached over TLS only.
pub fn plain_http_allowed(registry: &str, insecure_registries: &[String]) -> bool {
    if insecure_registries
        .iter()
        .any(|r| r == registry || r == host(registry))
    {
        return true;
    }
    let host = host(registry);
    host.eq_ignore_ascii_case("localhost")
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The host of `host:port` (`[::1]:5000` is `[::1]`).
fn host(registry: &str) -> &str {
    if registry.starts_with('[') {
        return registry.split_inclusive(']').next().unwrap_or(registry);
    }
    match registry.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => registry,
    }
}

/// The image `reference` names, by `digest`: `registry/repository@digest`, as upstream writes
/// `resolvedRef`.
pub fn by_digest(reference: &Reference, digest: &str) -> String {
    format!(
        "{}/{}@{}",
        reference.registry(),
        reference.repository(),
        digest
    )
}

/// Whether two references name the same repository of the same registry (`busybox` and
/// `docker.io/library/busybox@sha256:…` do); `false` when either does not parse.
pub fn same_repository(a: &str, b: &str) -> bool {
    match (a.parse::<Reference>(), b.parse::<Reference>()) {
        (Ok(a), Ok(b)) => a.registry() == b.registry() && a.repository() == b.repository(),
        _ => false,
    }
}

/// The digest of a by-digest reference (`...@sha256:...`).
pub fn digest_of(resolved_ref: &str) -> Option<&str> {
    resolved_ref.rsplit_once('@').map(|(_, d)| d)
}

/// The hex of a `sha256:` or `sha512:` digest, checked (it becomes a file name), with its
/// algorithm.
pub fn parse_digest(digest: &str) -> Option<(&str, &str)> {
    let (algorithm, hex) = digest.split_once(':')?;
    let len = match algorithm {
        "sha256" => 64,
        "sha512" => 128,
        _ => return None,
    };
    (hex.len() == len && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
        .then_some((algorithm, hex))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_and_named_registries_may_use_plain_http() {
        let named = vec!["registry.lab:5000".to_owned(), "mirror.lab".to_owned()];
        for (registry, allowed) in [
            ("127.0.0.1:5000", true),
            ("127.1.2.3", true),
            ("localhost:5000", true),
            ("[::1]:5000", true),
            ("registry.lab:5000", true),
            ("mirror.lab:443", true),
            ("registry.lab:6000", false),
            ("quay.io", false),
            ("10.0.0.1:5000", false),
            ("localhost.example.com", false),
        ] {
            assert_eq!(plain_http_allowed(registry, &named), allowed, "{registry}");
        }
    }

    #[test]
    fn resolved_refs_name_the_registry_as_written() {
        let r: Reference = "127.0.0.1:5000/ns/index:0.1.0".parse().unwrap();
        assert_eq!(
            by_digest(&r, "sha256:ab"),
            "127.0.0.1:5000/ns/index@sha256:ab"
        );
        let hub: Reference = "busybox".parse().unwrap();
        assert_eq!(
            by_digest(&hub, "sha256:ab"),
            "docker.io/library/busybox@sha256:ab"
        );
        assert_eq!(digest_of("r/x@sha256:ab"), Some("sha256:ab"));
        let digest = format!("sha256:{}", "a".repeat(64));
        assert!(same_repository(
            "busybox:1",
            &format!("docker.io/library/busybox@{digest}")
        ));
        assert!(same_repository(
            "127.0.0.1:5000/ns/index:0.1.0",
            &format!("127.0.0.1:5000/ns/index@{digest}")
        ));
        assert!(!same_repository(
            "127.0.0.1:5000/ns/index:0.1.0",
            &format!("127.0.0.1:5000/ns/other@{digest}")
        ));
        assert!(!same_repository(
            "127.0.0.1:5000/ns/index:0.1.0",
            &format!("127.0.0.2:5000/ns/index@{digest}")
        ));
        assert!(!same_repository("r/x:1", "not a reference!"));
        assert_eq!(digest_of("r/x:1"), None);
    }

    #[test]
    fn digests_are_checked_before_they_name_files() {
        let hex = "a".repeat(64);
        assert_eq!(
            parse_digest(&format!("sha256:{hex}")),
            Some(("sha256", hex.as_str()))
        );
        assert!(parse_digest("sha256:../../etc").is_none());
        assert!(parse_digest(&format!("md5:{hex}")).is_none());
        assert!(parse_digest(&format!("sha256:{}", "A".repeat(64))).is_none());
    }
}
