//! Kubernetes names, checked once for every crate: catalogd's store (a Catalog name becomes a
//! directory, so this check is what keeps it inside the storage root) and the FBC validator
//! (package and channel names) must agree, or content one accepts the other refuses.

/// The longest DNS-1123 subdomain.
pub const MAX_SUBDOMAIN: usize = 253;

/// Why `name` is not a DNS-1123 subdomain (a Kubernetes object name, as the API server's
/// `IsDNS1123Subdomain` checks it), or `None` when it is one: at most 253 characters, dot-separated
/// labels of lowercase letters, digits and `-`, each label starting and ending with a letter or
/// digit.
pub fn dns1123_subdomain_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        return Some("must not be empty");
    }
    if name.len() > MAX_SUBDOMAIN {
        return Some("must be no more than 253 characters");
    }
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let label_ok = |label: &str| {
        let bytes = label.as_bytes();
        match (bytes.first(), bytes.last()) {
            (Some(first), Some(last)) => {
                alnum(first) && alnum(last) && bytes.iter().all(|b| alnum(b) || *b == b'-')
            }
            _ => false,
        }
    };
    if name.split('.').all(label_ok) {
        None
    } else {
        Some(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, \
             '-' or '.', and must start and end with an alphanumeric character (each '.'-separated part too)",
        )
    }
}

/// Whether `name` is a DNS-1123 subdomain (see [`dns1123_subdomain_problem`]).
pub fn is_dns1123_subdomain(name: &str) -> bool {
    dns1123_subdomain_problem(name).is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subdomains_as_the_api_server_checks_them() {
        for ok in [
            "a",
            "0",
            "0abc",
            "operatorhubio",
            "my-catalog.v1",
            "a--b",
            "a.b.c",
            "1.2.3",
            &"a".repeat(253),
            // No per-label limit: IsDNS1123Subdomain checks only the whole length.
            &format!("{}.b", "a".repeat(100)),
        ] {
            assert!(is_dns1123_subdomain(ok), "{ok:?} should pass");
        }
        for bad in [
            "",
            ".",
            "..",
            "a-.b",
            "a.-b",
            "-a",
            "a-",
            ".a",
            "a.",
            "a..b",
            "A",
            "a_b",
            "a b",
            "a/b",
            "../etc",
            "é",
            &"a".repeat(254),
        ] {
            assert!(!is_dns1123_subdomain(bad), "{bad:?} should fail");
        }
    }
}
