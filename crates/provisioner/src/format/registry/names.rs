//! The names of the RBAC objects made from a CSV's permissions: upstream's, byte for byte.
//! operator-controller names each ClusterRole (and its binding) `<csv>-<serviceAccount>`, cut
//! to fit, then `-` and the base-36 SHA-224 of the permission as Go's `json.Encoder` writes it
//! (fields in struct order, `omitempty`, `<`, `>` and `&` escaped, a final newline). The same
//! rules therefore get the same name on every install, and any change of the rules a new one.

use sha2::{Digest, Sha224};

use super::csv::Permission;

/// The longest name made (a label value's limit, so that a name can also label).
pub const MAX_NAME: usize = 63;

/// The name for `permission` of the CSV `csv_name`, for its ServiceAccount `service_account`.
pub fn rbac_name(csv_name: &str, service_account: &str, permission: &Permission) -> String {
    with_suffix(
        &format!("{csv_name}-{service_account}"),
        &base36(&Sha224::digest(go_json(permission))),
    )
}

/// `base-suffix`, `base` cut so that the whole fits [`MAX_NAME`]. (Upstream cuts only when
/// `base` and `suffix` alone exceed it, so a name one longer than the limit can come out; ours
/// never does, and differs from upstream's only then.)
pub fn with_suffix(base: &str, suffix: &str) -> String {
    let room = MAX_NAME.saturating_sub(suffix.len() + 1);
    let mut cut = base.len().min(room);
    while !base.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}-{suffix}", &base[..cut])
}

/// `permission` as Go's `json.Encoder` writes OLM's `StrategyDeploymentPermissions`.
fn go_json(permission: &Permission) -> Vec<u8> {
    // Serializing plain strings and lists cannot fail; an empty string is never a valid
    // encoding, so a failure would only change the hash.
    let text = serde_json::to_string(permission).unwrap_or_default();
    let mut out = String::with_capacity(text.len() + 1);
    for c in text.chars() {
        match c {
            // Go escapes these for HTML safety (they occur only inside strings).
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", u32::from(c)));
            }
            _ => out.push(c),
        }
    }
    out.push('\n');
    out.into_bytes()
}

/// `bytes` as an unsigned big-endian number, in base 36 (Go's `big.Int.Text(36)`).
fn base36(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut number: Vec<u8> = bytes.iter().copied().skip_while(|b| *b == 0).collect();
    let mut digits = Vec::new();
    while !number.is_empty() {
        let mut remainder = 0u32;
        let mut quotient = Vec::with_capacity(number.len());
        for byte in &number {
            let value = remainder * 256 + u32::from(*byte);
            let q = value / 36;
            remainder = value % 36;
            if !(quotient.is_empty() && q == 0) {
                quotient.push(u8::try_from(q).unwrap_or(u8::MAX));
            }
        }
        digits.push(DIGITS[remainder as usize]);
        number = quotient;
    }
    if digits.is_empty() {
        digits.push(b'0');
    }
    digits.reverse();
    String::from_utf8(digits).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::super::csv::PolicyRule;
    use super::*;

    fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> PolicyRule {
        let list = |l: &[&str]| Some(l.iter().map(|s| (*s).to_owned()).collect());
        PolicyRule {
            verbs: list(verbs),
            api_groups: list(groups),
            resources: list(resources),
            resource_names: None,
            non_resource_urls: None,
        }
    }

    #[test]
    fn base36_is_gos_big_int_text() {
        assert_eq!(base36(&[]), "0");
        assert_eq!(base36(&[0, 0, 35]), "z");
        assert_eq!(base36(&[1, 0]), "74");
        assert_eq!(base36(&[0xff; 4]), "1z141z3");
    }

    #[test]
    fn the_permission_is_written_as_go_writes_it() {
        let permission = Permission {
            service_account_name: "a<b>&c".into(),
            rules: Some(vec![rule(&["get"], &[""], &[]), rule(&[], &[], &["x"])]),
        };
        assert_eq!(
            String::from_utf8(go_json(&permission)).unwrap_or_default(),
            concat!(
                r#"{"serviceAccountName":"a\u003cb\u003e\u0026c","rules":["#,
                r#"{"verbs":["get"],"apiGroups":[""]},{"verbs":[],"resources":["x"]}]}"#,
                "\n"
            )
        );
        let none = Permission {
            service_account_name: String::new(),
            rules: None,
        };
        assert_eq!(
            go_json(&none),
            b"{\"serviceAccountName\":\"\",\"rules\":null}\n"
        );
    }

    #[test]
    fn a_name_fits_63_characters_and_keeps_its_whole_hash() {
        let suffix = "1dhiybrldl1gyksid1dk2dqjsc72psdybc7iyvse5gpx";
        let name = with_suffix(
            "argocd-operator.v0.6.0-argocd-operator-controller-manager",
            suffix,
        );
        assert_eq!(name, format!("argocd-operator.v0-{suffix}"));
        assert_eq!(name.len(), MAX_NAME);
        assert_eq!(with_suffix("short", "abc"), "short-abc");
        // Where upstream would make 64 characters, ours cuts one more.
        let base = "b".repeat(MAX_NAME - suffix.len());
        assert_eq!(with_suffix(&base, suffix).len(), MAX_NAME);
        // Never inside a character.
        let wide = "é".repeat(40);
        assert!(with_suffix(&wide, "x").len() <= MAX_NAME);
    }
}
