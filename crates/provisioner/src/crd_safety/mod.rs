//! CRD upgrade safety: before a new version of a CRD that exists is applied, the changes that
//! can lose or reject existing data are refused, as upstream's `crdupgradesafety` preflight
//! does, and what cannot be classified is refused too (fail closed). Beyond upstream, the
//! existing custom resources are validated against every served version whose schema changed
//! ([`validate`], carried out by [`preflight`]).
//!
//! A violation reads `<version>: <field>: <check>: <detail>`; `*` as the version is the CRD as
//! a whole, `^` the root of a version's schema (`^.spec.size`, `[*]` an array's items, `{*}` a
//! map's values). The checks and their names are crdify's (upstream's checker since v1.11).

use serde_json::Value;

pub mod preflight;
mod schema;
#[cfg(test)]
mod tests;
pub mod validate;

/// The BundleDeployment annotation that turns the check off for its bundle's CRDs: set to
/// `"false"`, unsafe changes are applied (rukpak's CRD annotation, kept on the BundleDeployment,
/// which the admin who wrote it controls).
pub const OPT_OUT: &str = "core.rukpak.io/safe-crd-upgrade-validation";

/// One change that can lose or reject existing data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The version (`*`: the CRD as a whole).
    pub version: String,
    /// The field (`^`: the schema's root).
    pub field: String,
    /// The check it fails (`type`, `enum`, `required`, …).
    pub check: &'static str,
    /// What changed.
    pub detail: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {}: {}: {}",
            self.version, self.field, self.check, self.detail
        )
    }
}

/// Whether `annotations` (a BundleDeployment's) opt out of the check.
pub fn opted_out(annotations: &std::collections::BTreeMap<String, String>) -> bool {
    annotations.get(OPT_OUT).is_some_and(|v| v == "false")
}

/// The versions of `crd`, the first of each name (the API server refuses a CRD that repeats
/// one; the fuzzer found that comparing a repeat against the first flags a CRD against itself).
fn versions(crd: &Value) -> Vec<&Value> {
    let mut seen = std::collections::BTreeSet::new();
    crd.pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|v| seen.insert(name_of(v)))
        .collect()
}

fn name_of(version: &Value) -> &str {
    version.get("name").and_then(Value::as_str).unwrap_or("")
}

/// The schema of `version` of `crd` (`openAPIV3Schema`), if it has one.
pub fn schema_of<'a>(crd: &'a Value, version: &str) -> Option<&'a Value> {
    versions(crd)
        .into_iter()
        .find(|v| name_of(v) == version)
        .and_then(|v| v.pointer("/schema/openAPIV3Schema"))
}

/// The versions `crd` serves.
pub fn served(crd: &Value) -> Vec<String> {
    versions(crd)
        .into_iter()
        .filter(|v| v.get("served").and_then(Value::as_bool).unwrap_or(false))
        .map(|v| name_of(v).to_owned())
        .collect()
}

/// Every violation of changing the live CRD `old` into `new` (both as JSON), CRD-wide ones
/// first, then each version in `new`'s order.
pub fn check(old: &Value, new: &Value) -> Vec<Violation> {
    let mut found = Vec::new();
    let crd_wide = |check, detail| Violation {
        version: "*".into(),
        field: "^".into(),
        check,
        detail,
    };
    let scope = |crd: &Value| {
        crd.pointer("/spec/scope")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    if scope(old) != scope(new) {
        found.push(crd_wide(
            "scope",
            format!(
                "changed from {} to {}: every existing object would be lost",
                scope(old),
                scope(new)
            ),
        ));
    }
    let kept: Vec<&str> = versions(new).into_iter().map(name_of).collect();
    let stored = old
        .pointer("/status/storedVersions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str);
    for version in stored {
        if !kept.contains(&version) {
            found.push(Violation {
                version: version.to_owned(),
                field: "^".into(),
                check: "storedVersionRemoval",
                detail:
                    "the version is removed, and objects are stored at it (status.storedVersions)"
                        .into(),
            });
        }
    }
    for version in versions(new) {
        let name = name_of(version);
        let (Some(before), Some(after)) = (
            schema_of(old, name),
            version.pointer("/schema/openAPIV3Schema"),
        ) else {
            continue;
        };
        schema::compare(before, after, "^", &mut |field, check, detail| {
            found.push(Violation {
                version: name.to_owned(),
                field,
                check,
                detail,
            });
        });
    }
    found
}

/// The versions whose existing objects must validate against `new`'s schema: each served by
/// `new` whose schema changed, or that `new` adds.
pub fn changed_served(old: &Value, new: &Value) -> Vec<String> {
    served(new)
        .into_iter()
        .filter(|v| match (schema_of(old, v), schema_of(new, v)) {
            (Some(before), Some(after)) => before != after,
            (None, Some(_)) => true,
            (_, None) => false,
        })
        .collect()
}

/// The longest message the violations of one CRD get: the condition's limit is 32768 bytes,
/// and a bundle may bring several CRDs.
const MESSAGE_LIMIT: usize = 4096;

/// One sentence for `crd`'s violations: as many as fit, the rest counted, and how to opt out.
pub fn message(crd: &str, violations: &[Violation]) -> String {
    let mut text = format!("CRD {crd:?} cannot be upgraded safely: ");
    let mut shown = 0;
    for v in violations {
        let item = v.to_string();
        if shown > 0 && text.len() + item.len() > MESSAGE_LIMIT {
            break;
        }
        if shown > 0 {
            text.push_str("; ");
        }
        text.push_str(&item);
        shown += 1;
    }
    if shown < violations.len() {
        text.push_str(&format!("; and {} more", violations.len() - shown));
    }
    text.push_str(&format!(
        " (to apply it anyway, annotate the BundleDeployment {OPT_OUT}=\"false\")"
    ));
    text
}
