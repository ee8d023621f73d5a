//! What the provisioner puts on every object it applies, and what it reads back from an
//! object found in the cluster: rukpak's owner labels (upstream's tools select on them), the
//! ApplySet member label and, on every object but CRDs and Namespaces, a controller owner
//! reference to the BundleDeployment. (CRDs and Namespaces get none: garbage collection of
//! one takes every custom resource of it, or everything in it, along; the provisioner decides
//! about them itself, see `deletion` in the docs.)

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Map, Value, json};

use crate::applyset;
use crate::object::Object;
use crate::order::{Phase, phase};

/// rukpak's label naming the owner's kind.
pub const OWNER_KIND: &str = "core.rukpak.io/owner-kind";
/// rukpak's label naming the owner.
pub const OWNER_NAME: &str = "core.rukpak.io/owner-name";
/// The owner kind of everything the provisioner applies.
pub const BUNDLE_DEPLOYMENT: &str = "BundleDeployment";
/// The BundleDeployment's apiVersion, for owner references.
pub const BUNDLE_DEPLOYMENT_API_VERSION: &str = "core.rukpak.io/v1alpha1";

/// The BundleDeployment that owns what is applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// Its name.
    pub name: String,
    /// Its uid (owner references name it).
    pub uid: String,
}

impl Owner {
    /// The id of its ApplySet (the BundleDeployment is cluster-scoped).
    pub fn set_id(&self) -> String {
        applyset::id(&self.name, "", BUNDLE_DEPLOYMENT, "core.rukpak.io")
    }
}

/// The manifest to apply for `object`: as the bundle wrote it, with our labels added (a
/// bundle's own value for one of them is replaced: they are ours) and, but for CRDs, the
/// controller owner reference. `namespace` is set on namespaced objects (the bundle's, or the
/// default the caller chose).
pub fn marked(object: &Object, owner: &Owner, namespace: Option<&str>) -> Map<String, Value> {
    let mut manifest = object.manifest.clone();
    let metadata = manifest
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(metadata) = metadata {
        if let Some(ns) = namespace {
            metadata.insert("namespace".into(), Value::String(ns.to_owned()));
        }
        let labels = metadata
            .entry("labels")
            .or_insert_with(|| Value::Object(Map::new()));
        if !labels.is_object() {
            *labels = Value::Object(Map::new());
        }
        if let Value::Object(labels) = labels {
            labels.insert(OWNER_KIND.into(), BUNDLE_DEPLOYMENT.into());
            labels.insert(OWNER_NAME.into(), owner.name.clone().into());
            labels.insert(applyset::PART_OF.into(), owner.set_id().into());
        }
        if matches!(phase(&object.key), Phase::Crds | Phase::Namespaces) {
            // A CRD's or a Namespace's owner is never a bundle's to choose, nor the
            // BundleDeployment: an owner reference makes the garbage collector delete it, and
            // every custom resource of the CRD or every object in the Namespace, past the
            // upgrade checks and the keep rule (a deletion with foreground propagation runs the
            // collector beside our finalizer). The parent's record proves them ours instead.
            metadata.remove("ownerReferences");
        } else {
            metadata.insert(
                "ownerReferences".into(),
                json!([{
                    "apiVersion": BUNDLE_DEPLOYMENT_API_VERSION,
                    "kind": BUNDLE_DEPLOYMENT,
                    "name": owner.name,
                    "uid": owner.uid,
                    "controller": true,
                    "blockOwnerDeletion": true,
                }]),
            );
        }
    }
    manifest
}

/// Whose an object found in the cluster is, by its labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ownership {
    /// This BundleDeployment's.
    Ours,
    /// Another BundleDeployment's.
    Other(String),
    /// No BundleDeployment's; `managed_by` names its manager when it says
    /// (`app.kubernetes.io/managed-by`).
    Unowned {
        /// Who manages it, if it says.
        managed_by: Option<String>,
    },
}

/// On a CRD or Namespace kept because deleting it would delete what the BundleDeployment did
/// not apply: the BundleDeployment that had installed it (which takes it back when it
/// installs it again).
pub const KEPT: &str = "olm-rs.io/kept-from-bundle-deployment";

/// Whose the object with `labels` is, seen from the BundleDeployment `name`.
pub fn ownership(labels: &BTreeMap<String, String>, name: &str) -> Ownership {
    match (
        labels.get(OWNER_KIND).map(String::as_str),
        labels.get(OWNER_NAME),
    ) {
        (Some(BUNDLE_DEPLOYMENT), Some(owner)) if owner == name => Ownership::Ours,
        (Some(BUNDLE_DEPLOYMENT), Some(owner)) => Ownership::Other(owner.clone()),
        _ => Ownership::Unowned {
            managed_by: labels.get("app.kubernetes.io/managed-by").cloned(),
        },
    }
}

/// Whose an object found in the cluster is, seen from the BundleDeployment `name` about to
/// apply it: by its labels, except that a CRD or Namespace (`keepable`) this BundleDeployment
/// kept on an uninstall (its [`KEPT`] annotation names it, our labels are gone) is its own
/// again. Reinstalling the same operator takes back what it kept, with the data, after the
/// CRD upgrade checks.
pub fn ownership_of(metadata: &ObjectMeta, keepable: bool, name: &str) -> Ownership {
    let empty = BTreeMap::new();
    let labels = metadata.labels.as_ref().unwrap_or(&empty);
    let found = ownership(labels, name);
    let kept_by_us = keepable
        && metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(KEPT))
            .is_some_and(|bd| bd == name);
    match found {
        Ownership::Unowned { .. } if kept_by_us => Ownership::Ours,
        found => found,
    }
}

/// Whether an object found in the cluster was applied by `owner`, proven by its controller
/// owner reference to the BundleDeployment's uid: labels anyone may write are no proof, and
/// deleting is decided on this alone (CRDs and Namespaces, which carry no owner reference, are
/// proven by the BundleDeployment's own record instead).
pub fn applied_by(metadata: &ObjectMeta, owner: &Owner) -> bool {
    !owner.uid.is_empty()
        && metadata.owner_references.as_ref().is_some_and(|refs| {
            refs.iter().any(|r| {
                r.controller == Some(true)
                    && r.uid == owner.uid
                    && r.kind == BUNDLE_DEPLOYMENT
                    && r.api_version == BUNDLE_DEPLOYMENT_API_VERSION
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner() -> Owner {
        Owner {
            name: "shop".into(),
            uid: "u-1".into(),
        }
    }

    fn object(manifest: Value) -> Object {
        Object::from_manifest(manifest).unwrap_or_else(|e| unreachable!("{e}"))
    }

    #[test]
    fn objects_get_the_owner_labels_the_set_label_and_a_controller_reference() {
        let cm = object(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "labels": {"app": "shop", OWNER_NAME: "forged"}}
        }));
        let m = Value::Object(marked(&cm, &owner(), Some("shop-system")));
        assert_eq!(m["metadata"]["namespace"], "shop-system");
        let labels = &m["metadata"]["labels"];
        assert_eq!(labels["app"], "shop");
        assert_eq!(labels[OWNER_KIND], "BundleDeployment");
        assert_eq!(
            labels[OWNER_NAME], "shop",
            "a bundle cannot claim another owner"
        );
        assert_eq!(labels[applyset::PART_OF], owner().set_id());
        let reference = &m["metadata"]["ownerReferences"][0];
        assert_eq!(reference["kind"], "BundleDeployment");
        assert_eq!(reference["uid"], "u-1");
        assert_eq!(reference["controller"], true);
        // The bundle's own manifest is left as it was.
        assert!(cm.manifest["metadata"].get("namespace").is_none());
    }

    #[test]
    fn crds_are_marked_but_not_owned_so_garbage_collection_never_takes_their_data() {
        // The bundle's own owner reference (to an object that does not exist) is dropped too.
        let crd = object(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com", "ownerReferences": [{
                "apiVersion": "v1", "kind": "ConfigMap", "name": "gone", "uid": "no-such-uid"}]}
        }));
        let m = Value::Object(marked(&crd, &owner(), None));
        assert_eq!(m["metadata"]["labels"][OWNER_NAME], "shop");
        assert!(m["metadata"].get("ownerReferences").is_none());
        assert!(m["metadata"].get("namespace").is_none());
        // Nor Namespaces: the collector would take everything in one.
        let ns =
            object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}));
        let m = Value::Object(marked(&ns, &owner(), None));
        assert_eq!(m["metadata"]["labels"][OWNER_NAME], "shop");
        assert!(m["metadata"].get("ownerReferences").is_none());
    }

    #[test]
    fn ownership_is_read_from_the_owner_labels() {
        let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        let ours = labels(&[(OWNER_KIND, "BundleDeployment"), (OWNER_NAME, "shop")]);
        assert_eq!(ownership(&ours, "shop"), Ownership::Ours);
        assert_eq!(ownership(&ours, "other"), Ownership::Other("shop".into()));
        let helm = labels(&[("app.kubernetes.io/managed-by", "Helm")]);
        assert_eq!(
            ownership(&helm, "shop"),
            Ownership::Unowned {
                managed_by: Some("Helm".into())
            }
        );
        // A CRD this BundleDeployment kept is its own again; another's, or a kept other
        // object, is not.
        let kept = |by: &str| ObjectMeta {
            annotations: Some(BTreeMap::from([(KEPT.to_owned(), by.to_owned())])),
            ..ObjectMeta::default()
        };
        assert_eq!(ownership_of(&kept("shop"), true, "shop"), Ownership::Ours);
        assert!(matches!(
            ownership_of(&kept("other"), true, "shop"),
            Ownership::Unowned { .. }
        ));
        assert!(matches!(
            ownership_of(&kept("shop"), false, "shop"),
            Ownership::Unowned { .. }
        ));
        // The owner name alone is not a claim: rukpak writes both.
        let half = labels(&[(OWNER_NAME, "shop")]);
        assert_eq!(
            ownership(&half, "shop"),
            Ownership::Unowned { managed_by: None }
        );
    }

    #[test]
    fn only_a_controller_reference_to_the_uid_proves_an_object_applied() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
        let reference = |uid: &str, controller: bool| OwnerReference {
            api_version: BUNDLE_DEPLOYMENT_API_VERSION.into(),
            kind: BUNDLE_DEPLOYMENT.into(),
            name: "shop".into(),
            uid: uid.into(),
            controller: Some(controller),
            block_owner_deletion: Some(true),
        };
        let with = |refs: Vec<OwnerReference>| ObjectMeta {
            owner_references: Some(refs),
            // Labels anyone can write: no proof.
            labels: Some(BTreeMap::from([
                (OWNER_KIND.to_owned(), BUNDLE_DEPLOYMENT.to_owned()),
                (OWNER_NAME.to_owned(), "shop".to_owned()),
            ])),
            ..ObjectMeta::default()
        };
        assert!(applied_by(&with(vec![reference("u-1", true)]), &owner()));
        assert!(!applied_by(&with(vec![]), &owner()));
        assert!(!applied_by(&with(vec![reference("u-2", true)]), &owner()));
        assert!(!applied_by(&with(vec![reference("u-1", false)]), &owner()));
        let mut other_kind = reference("u-1", true);
        other_kind.kind = "ConfigMap".into();
        assert!(!applied_by(&with(vec![other_kind]), &owner()));
        let no_uid = Owner {
            name: "shop".into(),
            uid: String::new(),
        };
        assert!(!applied_by(&with(vec![reference("", true)]), &no_uid));
    }
}
