//! What an apply changed, told by what our field manager owns of the object before and after
//! it (server-side apply's `managedFields`), not by its resourceVersion: an object's status
//! moves its resourceVersion many times (a Deployment's rollout), and a re-apply that changed
//! nothing can return a newer version than the watch had seen, which was once announced as a
//! restore. Another manager that changes or removes a field of ours takes it from our entry
//! (an update takes ownership of what it changes, a forced apply too); our apply takes it
//! back. So the entry differs before and after exactly when our apply changed something of
//! ours, whatever happened to the status meanwhile.

use std::hash::{DefaultHasher, Hash, Hasher};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta};

/// What the field manager `manager`'s apply entry holds of an object, as a hash; `None` when
/// it has no entry (the object was created by someone else, or everything of ours was taken).
pub fn ours(metadata: &ObjectMeta, manager: &str) -> Option<u64> {
    let entry = metadata.managed_fields.as_ref()?.iter().find(|e| {
        e.manager.as_deref() == Some(manager)
            && e.operation.as_deref() == Some("Apply")
            && e.subresource.as_deref().unwrap_or_default().is_empty()
    })?;
    let mut hasher = DefaultHasher::new();
    entry.api_version.hash(&mut hasher);
    // The timestamp is left out: it says when, not what.
    serde_json::to_string(&entry.fields_v1)
        .unwrap_or_default()
        .hash(&mut hasher);
    Some(hasher.finish())
}

/// The object's `managedFields` without the entry its create left (an `Update` of `manager`),
/// or `None` when it has none. An object created by a POST and then applied would
/// otherwise keep that entry, which owns every field the create set, so a field a later version
/// of the bundle drops would never be removed.
pub fn without_create_entry(
    metadata: &ObjectMeta,
    manager: &str,
) -> Option<Vec<ManagedFieldsEntry>> {
    let entries = metadata.managed_fields.as_ref()?;
    let is_create = |e: &ManagedFieldsEntry| {
        e.manager.as_deref() == Some(manager)
            && e.operation.as_deref() == Some("Update")
            && e.subresource.as_deref().unwrap_or_default().is_empty()
    };
    entries
        .iter()
        .any(is_create)
        .then(|| entries.iter().filter(|e| !is_create(e)).cloned().collect())
}

/// Whether an apply changed the object: it did not exist before (`before` is `None`), or what
/// our manager owns of it is not what it owned before.
pub fn changed(before: Option<Option<u64>>, after: Option<u64>) -> bool {
    before.is_none_or(|b| b != after)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry, Time};
    use serde_json::json;

    use super::*;

    const FIELD_MANAGER: &str = "olm-provisioner";

    fn ours_of(metadata: &ObjectMeta) -> Option<u64> {
        ours(metadata, FIELD_MANAGER)
    }

    fn entry(manager: &str, operation: &str, fields: serde_json::Value) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            manager: Some(manager.into()),
            operation: Some(operation.into()),
            api_version: Some("v1".into()),
            fields_type: Some("FieldsV1".into()),
            fields_v1: Some(FieldsV1(fields)),
            subresource: None,
            time: Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)),
        }
    }

    fn meta(entries: Vec<ManagedFieldsEntry>, version: &str) -> ObjectMeta {
        ObjectMeta {
            managed_fields: Some(entries),
            resource_version: Some(version.into()),
            ..ObjectMeta::default()
        }
    }

    fn our_fields() -> serde_json::Value {
        json!({"f:data": {"f:version": {}}, "f:metadata": {"f:labels": {"f:a": {}}}})
    }

    #[test]
    fn a_status_change_meanwhile_is_no_change_of_ours() {
        // Before: ours and the controller's status entry; after a no-op apply the status moved
        // again (a newer resourceVersion), our entry did not.
        let status = |n: i32| {
            let mut e = entry(
                "kube-controller-manager",
                "Update",
                json!({"f:status": {"f:n": n}}),
            );
            e.subresource = Some("status".into());
            e
        };
        let before = meta(
            vec![entry(FIELD_MANAGER, "Apply", our_fields()), status(1)],
            "10",
        );
        let after = meta(
            vec![entry(FIELD_MANAGER, "Apply", our_fields()), status(2)],
            "12",
        );
        assert_eq!(ours(&before, FIELD_MANAGER), ours(&after, FIELD_MANAGER));
        assert!(!changed(
            Some(ours(&before, FIELD_MANAGER)),
            ours(&after, FIELD_MANAGER)
        ));
    }

    #[test]
    fn a_field_taken_by_someone_else_and_taken_back_is_a_change() {
        let taken = meta(
            vec![
                entry(
                    FIELD_MANAGER,
                    "Apply",
                    json!({"f:metadata": {"f:labels": {"f:a": {}}}}),
                ),
                entry(
                    "kubectl-edit",
                    "Update",
                    json!({"f:data": {"f:version": {}}}),
                ),
            ],
            "11",
        );
        let back = meta(vec![entry(FIELD_MANAGER, "Apply", our_fields())], "12");
        assert!(changed(
            Some(ours(&taken, FIELD_MANAGER)),
            ours(&back, FIELD_MANAGER)
        ));
    }

    #[test]
    fn an_object_created_by_the_apply_or_found_without_our_entry_is_a_change() {
        let after = meta(vec![entry(FIELD_MANAGER, "Apply", our_fields())], "3");
        assert!(changed(None, ours(&after, FIELD_MANAGER)));
        let foreign = meta(vec![entry("helm", "Update", our_fields())], "2");
        assert_eq!(ours(&foreign, FIELD_MANAGER), None);
        assert!(changed(
            Some(ours(&foreign, FIELD_MANAGER)),
            ours(&after, FIELD_MANAGER)
        ));
        // Only our Apply entry counts, not an Update of ours nor a subresource's.
        let mut status = entry(FIELD_MANAGER, "Apply", our_fields());
        status.subresource = Some("status".into());
        assert_eq!(ours_of(&meta(vec![status], "1")), None);
        assert_eq!(
            ours_of(&meta(
                vec![entry(FIELD_MANAGER, "Update", our_fields())],
                "1"
            )),
            None
        );
    }

    #[test]
    fn the_entry_a_create_left_is_dropped_and_only_that_one() {
        let applied = meta(
            vec![
                entry(FIELD_MANAGER, "Update", our_fields()),
                entry(FIELD_MANAGER, "Apply", our_fields()),
                entry("kubectl", "Update", json!({"f:metadata": {}})),
            ],
            "2",
        );
        let kept = without_create_entry(&applied, FIELD_MANAGER).unwrap_or_else(|| unreachable!());
        let kinds: Vec<_> = kept
            .iter()
            .map(|e| (e.manager.as_deref(), e.operation.as_deref()))
            .collect();
        assert_eq!(
            kinds,
            [
                (Some(FIELD_MANAGER), Some("Apply")),
                (Some("kubectl"), Some("Update"))
            ]
        );
        let clean = meta(vec![entry(FIELD_MANAGER, "Apply", our_fields())], "3");
        assert!(without_create_entry(&clean, FIELD_MANAGER).is_none());
    }

    #[test]
    fn the_time_of_the_entry_is_not_what_it_holds() {
        let a = meta(vec![entry(FIELD_MANAGER, "Apply", our_fields())], "1");
        let mut later = entry(FIELD_MANAGER, "Apply", our_fields());
        later.time = Some(Time(
            k8s_openapi::jiff::Timestamp::from_second(60).unwrap_or_else(|_| unreachable!()),
        ));
        assert_eq!(ours(&a, FIELD_MANAGER), ours_of(&meta(vec![later], "2")));
    }
}
