//! What a Namespace holds that a BundleDeployment did not apply: the reason to keep a
//! Namespace of its set on an uninstall or an upgrade, rather than delete it and everything
//! in it (a user's custom resources, claims and Secrets). Left out, because they go with what
//! made them or are Kubernetes' own: objects with an owner reference (they are deleted with
//! their owner, which is counted itself; but another BundleDeployment's objects are held),
//! objects being deleted, events, endpoints, leases,
//! the namespace's root CA ConfigMaps, its `default` ServiceAccount and service account token
//! Secrets.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::marks::{BUNDLE_DEPLOYMENT, Owner, applied_by};
use crate::object::Key;

/// Kinds that are never a user's data: Kubernetes makes and removes them itself.
const KUBERNETES_OWN_KINDS: &[(&str, &str)] = &[
    ("", "Event"),
    ("events.k8s.io", "Event"),
    ("", "Endpoints"),
    ("discovery.k8s.io", "EndpointSlice"),
    ("coordination.k8s.io", "Lease"),
];

/// Objects every namespace has.
const KUBERNETES_OWN_OBJECTS: &[(&str, &str)] = &[
    ("ConfigMap", "kube-root-ca.crt"),
    ("ConfigMap", "openshift-service-ca.crt"),
    ("ServiceAccount", "default"),
];

/// Whether `key`, found in a namespace with `metadata`, is something `owner` did not apply
/// and that would be lost with the namespace.
pub fn is_held(key: &Key, metadata: &ObjectMeta, owner: &Owner) -> bool {
    if applied_by(metadata, owner) || metadata.deletion_timestamp.is_some() {
        return false;
    }
    let references = metadata.owner_references.as_deref().unwrap_or_default();
    // Another BundleDeployment's object is held: it would go with the namespace.
    let anothers = references
        .iter()
        .any(|r| r.kind == BUNDLE_DEPLOYMENT && r.uid != owner.uid);
    if anothers {
        return true;
    }
    if !references.is_empty() {
        return false;
    }
    if KUBERNETES_OWN_KINDS
        .iter()
        .any(|(g, k)| key.group == *g && key.kind == *k)
    {
        return false;
    }
    if key.group.is_empty()
        && KUBERNETES_OWN_OBJECTS
            .iter()
            .any(|(k, n)| key.kind == *k && key.name == *n)
    {
        return false;
    }
    // The token controller's Secrets for a ServiceAccount.
    let token = key.group.is_empty()
        && key.kind == "Secret"
        && metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key("kubernetes.io/service-account.name"));
    !token
}

/// What a failed list of one kind in the Namespace says about it.
#[derive(Debug, PartialEq, Eq)]
pub enum Unlisted {
    /// The kind is not served at the version listed (404): its CRD was deleted (by anyone:
    /// other installs remove theirs all the time) between discovery and the list, or no longer
    /// serves that version. Discovery is asked again: a kind served at no version holds
    /// nothing (its objects went with its CRD); one still served is listed again.
    Gone,
    /// Whether any of it remains cannot be told: a reason to keep the Namespace.
    Unsure,
}

/// What a list that failed with HTTP status `code` (none: no answer) says.
pub fn unlisted(code: Option<u16>) -> Unlisted {
    match code {
        Some(404) => Unlisted::Gone,
        _ => Unlisted::Unsure,
    }
}

/// The objects among `found` that `owner` did not apply (at most `limit`, in order), and how
/// many there are in all.
pub fn held<'a>(
    found: impl IntoIterator<Item = (&'a Key, &'a ObjectMeta)>,
    owner: &Owner,
    limit: usize,
) -> (Vec<Key>, usize) {
    let mut named = Vec::new();
    let mut count = 0;
    for (key, metadata) in found {
        if is_held(key, metadata, owner) {
            count += 1;
            if named.len() < limit {
                named.push(key.clone());
            }
        }
    }
    (named, count)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};

    use super::*;
    use crate::marks::BUNDLE_DEPLOYMENT_API_VERSION;

    fn owner() -> Owner {
        Owner {
            name: "shop".into(),
            uid: "u-1".into(),
        }
    }

    fn key(group: &str, kind: &str, name: &str) -> Key {
        Key::new(group, kind, Some("shop-system"), name)
    }

    fn reference(kind: &str, uid: &str) -> OwnerReference {
        OwnerReference {
            api_version: if kind == BUNDLE_DEPLOYMENT {
                BUNDLE_DEPLOYMENT_API_VERSION.into()
            } else {
                "apps/v1".into()
            },
            kind: kind.into(),
            name: "x".into(),
            uid: uid.into(),
            controller: Some(true),
            block_owner_deletion: None,
        }
    }

    fn owned_by(r: OwnerReference) -> ObjectMeta {
        ObjectMeta {
            owner_references: Some(vec![r]),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn a_users_objects_are_held_what_the_set_applied_and_kubernetes_made_is_not() {
        let plain = ObjectMeta::default();
        let ours = owned_by(reference(BUNDLE_DEPLOYMENT, "u-1"));
        let pod_of_ours = owned_by(reference("ReplicaSet", "rs-1"));
        let going = ObjectMeta {
            deletion_timestamp: Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)),
            ..ObjectMeta::default()
        };
        let token = ObjectMeta {
            annotations: Some(BTreeMap::from([(
                "kubernetes.io/service-account.name".to_owned(),
                "default".to_owned(),
            )])),
            ..ObjectMeta::default()
        };
        // A label claiming the object is no proof: it is held.
        let forged = ObjectMeta {
            labels: Some(BTreeMap::from([(
                crate::marks::OWNER_NAME.to_owned(),
                "shop".to_owned(),
            )])),
            ..ObjectMeta::default()
        };
        let found = [
            (key("", "ConfigMap", "settings"), ours.clone()),
            (key("", "Pod", "web-1"), pod_of_ours),
            (key("", "ConfigMap", "kube-root-ca.crt"), plain.clone()),
            (key("", "ServiceAccount", "default"), plain.clone()),
            (key("", "Secret", "default-token"), token),
            (key("", "Event", "e.1"), plain.clone()),
            (key("coordination.k8s.io", "Lease", "leader"), plain.clone()),
            (key("", "ConfigMap", "leaving"), going),
            (key("example.com", "Widget", "mine"), plain.clone()),
            (key("", "PersistentVolumeClaim", "data"), plain.clone()),
            (key("", "Secret", "license"), forged),
        ];
        let (named, count) = held(found.iter().map(|(k, m)| (k, m)), &owner(), 2);
        assert_eq!(count, 3);
        assert_eq!(
            named,
            [
                key("example.com", "Widget", "mine"),
                key("", "PersistentVolumeClaim", "data")
            ]
        );
        // Another BundleDeployment's objects are held too: they are not this one's.
        let theirs = owned_by(reference(BUNDLE_DEPLOYMENT, "u-2"));
        assert!(is_held(&key("", "ConfigMap", "c"), &theirs, &owner()));
    }

    #[test]
    fn a_kind_gone_since_discovery_holds_nothing_any_other_failure_is_unsure() {
        assert_eq!(unlisted(Some(404)), Unlisted::Gone);
        for code in [Some(403), Some(500), Some(503), None] {
            assert_eq!(unlisted(code), Unlisted::Unsure, "{code:?}");
        }
    }
}
