//! Object names of catalog content: readable where the File-Based Catalog's names allow, unique
//! always.
//!
//! An object's name joins its parts with dots: the catalog, then the package, then the
//! channel's or bundle's own name (`operatorhubio.etcd.etcdoperator.v0.9.4`). That plain form is
//! used only when every part but the last is a DNS-1123 label (no dots) and the last a DNS-1123
//! subdomain, so a plain name splits back into its parts one way only. Any other tuple (a
//! catalog or package with a dot, an upper-case or over-long name, a channel called
//! `stable/v1`) gets a hashed name, a DNS-1123 label: its parts with every character that is
//! not `[a-z0-9-]` made a dash, cut to 46 characters, then `-` and 16 hex digits of the sha256
//! of the parts. A hashed name has no dot and a plain name always has one, so the two forms
//! never meet; two hashed names meet only if 64 bits of sha256 do.

use sha2::{Digest as _, Sha256};

/// The longest object name (a DNS-1123 subdomain).
pub const MAX_NAME: usize = 253;
/// Hex digits of the hash suffix.
const HASH_HEX: usize = 16;

/// Whether `s` is a DNS-1123 label: 1 to 63 of `[a-z0-9-]`, starting and ending alphanumeric.
pub fn is_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// Whether `s` is a DNS-1123 subdomain: labels joined by dots, at most 253 characters.
pub fn is_subdomain(s: &str) -> bool {
    s.len() <= MAX_NAME && s.split('.').all(is_label)
}

/// Whether `s` is a valid label value: at most 63 of `[A-Za-z0-9._-]`, starting and ending
/// alphanumeric (or empty).
pub fn is_label_value(s: &str) -> bool {
    let b = s.as_bytes();
    if b.is_empty() {
        return true;
    }
    b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'-' | b'_'))
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
}

/// The object name of `parts` (the catalog first). See the module documentation.
pub fn derive(parts: &[&str]) -> String {
    if let Some((last, leading)) = parts.split_last() {
        let plain = parts.join(".");
        if leading.iter().all(|p| is_label(p)) && is_subdomain(last) && plain.len() <= MAX_NAME {
            return plain;
        }
    }
    hashed(parts)
}

/// The hashed form of `parts` (always a single DNS label).
pub fn hashed(parts: &[&str]) -> String {
    let mut digest = Sha256::new();
    for part in parts {
        // Lengths first, so ("ab", "c") and ("a", "bc") hash apart.
        digest.update((part.len() as u64).to_be_bytes());
        digest.update(part.as_bytes());
    }
    let hash = hex::encode(digest.finalize());
    let suffix = &hash[..HASH_HEX];
    let mut readable = String::new();
    for c in parts.join("-").chars() {
        let c = c.to_ascii_lowercase();
        let c = if c.is_ascii_lowercase() || c.is_ascii_digit() {
            c
        } else {
            '-'
        };
        // One dash for a run of them.
        if !(c == '-' && readable.ends_with('-')) {
            readable.push(c);
        }
    }
    // A hashed name is one DNS label.
    let room = 63 - HASH_HEX - 1;
    readable.truncate(room);
    let readable = readable.trim_matches('-');
    if readable.is_empty() {
        // Hex starts with an alphanumeric: still a valid name.
        suffix.to_owned()
    } else {
        format!("{readable}-{suffix}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn plain_names_read_as_their_parts() {
        assert_eq!(derive(&["ops", "etcd"]), "ops.etcd");
        assert_eq!(
            derive(&["ops", "etcd", "etcdoperator.v0.9.4"]),
            "ops.etcd.etcdoperator.v0.9.4"
        );
    }

    #[test]
    fn names_that_would_be_ambiguous_or_invalid_are_hashed() {
        // A catalog with a dot could be read as catalog "a" and package "b.c".
        let dotted = derive(&["a.b", "c"]);
        let other = derive(&["a", "b.c"]);
        assert_eq!(other, "a.b.c");
        assert_ne!(dotted, other);
        assert!(!dotted.contains('.'), "{dotted}");
        assert!(dotted.starts_with("a-b-c-"), "{dotted}");
        // Not valid object names at all.
        for parts in [
            &["ops", "etcd", "stable/v1"][..],
            &["ops", "Etcd"],
            &["ops", "etcd", "-x"],
            &["ops", ""],
        ] {
            let name = derive(parts);
            assert!(is_subdomain(&name), "{parts:?} -> {name}");
            assert!(!name.contains('.'), "{parts:?} -> {name}");
        }
        assert_ne!(derive(&["ab", "c", "x/"]), derive(&["a", "bc", "x/"]));
    }

    #[test]
    fn long_names_are_cut_and_hashed() {
        let long = "x".repeat(300);
        let name = derive(&["ops", "etcd", &long]);
        assert!(name.len() <= MAX_NAME);
        assert!(is_subdomain(&name));
        let nothing_readable = derive(&["ops", "///"]);
        assert!(is_subdomain(&nothing_readable), "{nothing_readable}");
    }

    #[test]
    fn label_values() {
        assert!(is_label_value("olm.bundle"));
        assert!(is_label_value("Etcd_1"));
        assert!(!is_label_value("-x"));
        assert!(!is_label_value(&"a".repeat(64)));
    }

    proptest! {
        /// Every name is a valid object name, and two different tuples never share one.
        #[test]
        fn names_are_valid_and_distinct(
            a in proptest::collection::vec("[a-z.A-Z0-9/-]{0,12}", 3),
            b in proptest::collection::vec("[a-z.A-Z0-9/-]{0,12}", 3),
        ) {
            let (x, y) = (derive(&[&a[0], &a[1], &a[2]]), derive(&[&b[0], &b[1], &b[2]]));
            prop_assert!(is_subdomain(&x), "{:?} -> {}", a, x);
            if a != b {
                prop_assert_ne!(x, y);
            }
        }
    }
}
