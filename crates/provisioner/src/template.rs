//! What names an unpacked template: a hash of the template (every field of it: a change of
//! source, class, labels or annotations is new content), and the bundle name shown as
//! `status.activeBundle`, `<bd>-<hash>` within the 52 characters rukpak's Bundle names had.
//! The hash is ours (SHA-256 of the template's JSON with sorted keys, in base 36), not
//! byte-equal to rukpak's (SHA-224 of Go's encoding): nothing outside reads its value.

use sha2::{Digest, Sha256};

/// The longest bundle name (rukpak's Bundle `metadata.name` maxLength).
pub const MAX_BUNDLE_NAME: usize = 52;

/// How many characters of the hash a bundle name keeps at least.
const MIN_HASH: usize = 8;

/// The hash of `template` (as JSON; serde_json's maps keep keys sorted, so equal templates
/// hash equal whatever order their fields were written in).
pub fn hash(template: &serde_json::Value) -> String {
    let digest = Sha256::digest(template.to_string());
    base36(&digest)
}

/// `<bd>-<hash>`, the hash cut to fit [`MAX_BUNDLE_NAME`] (the name is cut too when it is so
/// long that fewer than 8 characters of hash would remain).
pub fn bundle_name(bd: &str, hash: &str) -> String {
    let room = MAX_BUNDLE_NAME.saturating_sub(MIN_HASH + 1);
    let bd: String = bd.chars().take(room).collect();
    let bd = bd.trim_end_matches(['-', '.']);
    let keep = MAX_BUNDLE_NAME - bd.chars().count() - 1;
    format!("{bd}-{}", &hash[..keep.min(hash.len())])
}

/// `bytes` as a big-endian number in base 36 (lower case).
fn base36(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut number: Vec<u8> = bytes.to_vec();
    let mut out = Vec::new();
    while number.iter().any(|&b| b != 0) {
        // Long division by 36, most significant byte first.
        let mut rest = 0u32;
        for byte in number.iter_mut() {
            let value = (rest << 8) | u32::from(*byte);
            *byte = (value / 36) as u8;
            rest = value % 36;
        }
        out.push(DIGITS[rest as usize]);
    }
    if out.is_empty() {
        out.push(b'0');
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn base36_is_the_number_written_in_base_36() {
        assert_eq!(base36(&[0]), "0");
        assert_eq!(base36(&[35]), "z");
        assert_eq!(base36(&[36]), "10");
        assert_eq!(base36(&[1, 0]), "74"); // 256 = 7 * 36 + 4
        assert_eq!(base36(&[0xff; 4]), "1z141z3"); // 4294967295
    }

    #[test]
    fn equal_templates_hash_equal_and_any_change_hashes_otherwise() {
        let a = json!({"spec": {"provisionerClassName": "core-rukpak-io-plain", "source": {"type": "image", "image": {"ref": "r/b:1"}}}});
        let reordered = json!({"spec": {"source": {"image": {"ref": "r/b:1"}, "type": "image"}, "provisionerClassName": "core-rukpak-io-plain"}});
        assert_eq!(hash(&a), hash(&reordered));
        let mut b = a.clone();
        b["metadata"] = json!({"labels": {"x": "y"}});
        assert_ne!(hash(&a), hash(&b));
    }

    #[test]
    fn bundle_names_fit_52_characters_with_at_least_8_of_hash() {
        let h = hash(&json!({}));
        let short = bundle_name("shop", &h);
        assert_eq!(short.len(), MAX_BUNDLE_NAME);
        assert!(short.starts_with("shop-"));
        let long = bundle_name(&"a".repeat(60), &h);
        assert_eq!(long.len(), MAX_BUNDLE_NAME);
        assert!(long.ends_with(&format!("-{}", &h[..8])));
        // A cut that ends on a dash does not leave two.
        let dashy = bundle_name(&format!("{}-b", "a".repeat(42)), &h);
        assert!(!dashy.contains("--"), "{dashy}");
    }
}
