//! An upgrade that would move the install namespace: the installed set has a Namespace (or a
//! recorded install namespace) the new one lacks, and the new one brings one of its own (a
//! registry+v1 bundle whose CSV suggests another namespace, or whose `spec.config` names
//! another, a plain bundle that renames its own). Moving would leave the
//! old namespace, and whatever users put there for the operator (its custom resources, claims,
//! Secrets), behind the operator's back, or delete it with them; so it is refused before
//! anything is applied, unless the admin says so on the BundleDeployment.

use std::collections::BTreeSet;

/// The annotation on a BundleDeployment that lets an upgrade move its install namespace.
pub const ALLOW: &str = "olm-rs.io/allow-namespace-change";

/// Why the upgrade from the Namespaces `installed` to `wanted` is refused, if it is: it drops
/// one and brings another, and `allowed` (the annotation is `"true"`) is false.
pub fn refusal(
    installed: &BTreeSet<String>,
    wanted: &BTreeSet<String>,
    allowed: bool,
) -> Option<String> {
    let dropped: Vec<&str> = installed.difference(wanted).map(String::as_str).collect();
    let brought: Vec<&str> = wanted.difference(installed).map(String::as_str).collect();
    if allowed || dropped.is_empty() || brought.is_empty() {
        return None;
    }
    Some(format!(
        "the install namespace would move from {} to {}: what the operator and its users keep in {} would be left behind, or deleted with it; nothing was applied (to move it anyway, annotate the BundleDeployment {ALLOW}=\"true\")",
        quoted(&dropped),
        quoted(&brought),
        if dropped.len() == 1 { "it" } else { "them" },
    ))
}

fn quoted(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("{n:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether the BundleDeployment's annotations allow moving its install namespace.
pub fn allowed(annotations: &std::collections::BTreeMap<String, String>) -> bool {
    annotations.get(ALLOW).is_some_and(|v| v == "true")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn a_new_install_namespace_in_place_of_the_old_is_refused_unless_allowed() {
        let message = refusal(&set(&["shop-system"]), &set(&["shop"]), false);
        let message = message.unwrap_or_else(|| unreachable!());
        assert!(
            message
                .starts_with("the install namespace would move from \"shop-system\" to \"shop\": "),
            "{message}"
        );
        assert!(message.ends_with(&format!("annotate the BundleDeployment {ALLOW}=\"true\")")));
        assert_eq!(refusal(&set(&["shop-system"]), &set(&["shop"]), true), None);
    }

    #[test]
    fn the_same_namespace_a_first_install_or_one_only_added_or_dropped_moves_nothing() {
        assert_eq!(refusal(&set(&["a"]), &set(&["a"]), false), None);
        assert_eq!(refusal(&set(&[]), &set(&["a"]), false), None);
        assert_eq!(refusal(&set(&["a"]), &set(&["a", "b"]), false), None);
        assert_eq!(refusal(&set(&["a", "b"]), &set(&["a"]), false), None);
        assert_eq!(refusal(&set(&["a"]), &set(&[]), false), None);
    }

    #[test]
    fn only_true_allows() {
        let with = |v: &str| std::collections::BTreeMap::from([(ALLOW.to_owned(), v.to_owned())]);
        assert!(allowed(&with("true")));
        assert!(!allowed(&with("yes")));
        assert!(!allowed(&std::collections::BTreeMap::new()));
    }
}
