//! A dry run of a sync: what applying a template's objects would create, change and prune,
//! asked of the API server without writing (server-side apply with `dryRun=All`, so defaults,
//! admission and our own marks are what a real apply would give). Whether an object would
//! change is decided here (pure): the live object and the dry run's answer differ beyond what
//! every write moves (resourceVersion, managedFields, generation, status).

use std::collections::BTreeSet;

use kube::ResourceExt;
use kube::api::{DynamicObject, Patch, PatchParams};
use olm_api::bundle_deployment::DryRun;
use serde_json::Value;

use crate::apply::{Applier, ApplyError, FIELD_MANAGER, Kinds, api_message};
use crate::conflict::Conflict;
use crate::marks::{self, Owner, Ownership};
use crate::object::{Key, Object};
use crate::order::{Phase, phase};
use crate::prune::removal;
use crate::set::Set;

/// What a sync would do, by object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Preview {
    /// Objects that do not exist yet.
    pub create: Vec<Key>,
    /// Objects an apply would change.
    pub change: Vec<Key>,
    /// Objects of the installed set the new one lacks.
    pub prune: Vec<Key>,
    /// Objects an apply would leave as they are.
    pub unchanged: usize,
}

impl Preview {
    /// The status that tells it, for the template `bundle`.
    pub fn status(&self, bundle: &str) -> DryRun {
        let names = |keys: &[Key]| keys.iter().map(Key::to_string).collect();
        DryRun {
            bundle: bundle.to_owned(),
            create: names(&self.create),
            change: names(&self.change),
            prune: names(&self.prune),
            unchanged: i64::try_from(self.unchanged).unwrap_or(i64::MAX),
            refused: None,
        }
    }
}

/// The fields every write moves, whatever it changed.
const VOLATILE_METADATA: [&str; 5] = [
    "resourceVersion",
    "managedFields",
    "generation",
    "creationTimestamp",
    "uid",
];

/// Whether `after` (a dry run's answer) differs from `live` beyond what every write moves.
pub fn differs(live: &Value, after: &Value) -> bool {
    strip(live) != strip(after)
}

fn strip(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(map) = object.as_object_mut() {
        map.remove("status");
        if let Some(Value::Object(meta)) = map.get_mut("metadata") {
            for field in VOLATILE_METADATA {
                meta.remove(field);
            }
        }
    }
    object
}

/// What syncing `objects` as `owner`'s whole set with `applier` would do; nothing is written.
/// An object the API server would refuse, or one that is not ours, fails it as the sync would.
pub async fn preview(
    applier: &Applier,
    owner: &Owner,
    objects: &[Object],
) -> Result<Preview, ApplyError> {
    let mut kinds = Kinds::default();
    let mut preview = Preview::default();
    let mut keep = BTreeSet::new();
    for object in objects {
        // A kind not served yet (a custom resource of a CRD the set brings): created.
        let Some(placed) = applier.place(&mut kinds, object, false).await? else {
            keep.insert(applier.placed_key(&object.key));
            preview.create.push(object.key.clone());
            continue;
        };
        let key = placed.object.key.clone();
        keep.insert(key.clone());
        let api = applier.api(&placed);
        let live = api
            .get_opt(&key.name)
            .await
            .map_err(|source| ApplyError::Read {
                what: format!("reading {key}"),
                source,
            })?;
        let Some(live) = live else {
            preview.create.push(key);
            continue;
        };
        let keepable = matches!(phase(&key), Phase::Crds | Phase::Namespaces);
        let found = marks::ownership_of(&live.metadata, keepable, &owner.name);
        if found != Ownership::Ours {
            return Err(ApplyError::Conflicts(vec![Conflict { key, owner: found }]));
        }
        let mut manifest = marks::marked(&placed.object, owner, key.namespace.as_deref());
        if let Some(Value::Object(meta)) = manifest.get_mut("metadata") {
            meta.insert("uid".into(), live.uid().unwrap_or_default().into());
        }
        let params = PatchParams::apply(FIELD_MANAGER).force().dry_run();
        let after: DynamicObject = api
            .patch(&key.name, &params, &Patch::Apply(Value::Object(manifest)))
            .await
            .map_err(|e| ApplyError::Refused {
                key: Box::new(key.clone()),
                message: api_message(e),
            })?;
        let (live, after) = (
            serde_json::to_value(&live).unwrap_or_default(),
            serde_json::to_value(&after).unwrap_or_default(),
        );
        if differs(&live, &after) {
            preview.change.push(key);
        } else {
            preview.unchanged += 1;
        }
    }
    let set = Set::of(applier, owner);
    let recorded = set.recorded().await?;
    let live = set.members(&recorded).await?;
    let gone = removal(live, &keep);
    preview.prune = gone
        .delete
        .iter()
        .chain(&gone.namespaces)
        .chain(&gone.crds)
        .map(|m| m.key.clone())
        .collect();
    Ok(preview)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn what_every_write_moves_is_no_change_and_anything_else_is() {
        let live = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "resourceVersion": "1", "uid": "u", "generation": 1,
                "managedFields": [{"manager": "x"}], "labels": {"l": "1"}},
            "data": {"k": "v"}, "status": {"s": 1}});
        let mut after = live.clone();
        after["metadata"]["resourceVersion"] = "2".into();
        after["metadata"]["managedFields"] = json!([{"manager": "y"}]);
        after["metadata"]["generation"] = 2.into();
        after["status"] = json!({"s": 2});
        assert!(!differs(&live, &after));
        let mut data = after.clone();
        data["data"]["k"] = "w".into();
        assert!(differs(&live, &data));
        let mut label = after.clone();
        label["metadata"]["labels"]["l"] = "2".into();
        assert!(differs(&live, &label));
    }

    #[test]
    fn the_status_names_each_object() {
        let preview = Preview {
            create: vec![Key::new("", "ConfigMap", Some("shop"), "a")],
            change: vec![Key::new("apps", "Deployment", Some("shop"), "web")],
            prune: vec![Key::new(
                "policy",
                "PodDisruptionBudget",
                Some("shop"),
                "web",
            )],
            unchanged: 3,
        };
        let status = preview.status("shop-abc");
        assert_eq!(status.bundle, "shop-abc");
        assert_eq!(
            status.create,
            [Key::new("", "ConfigMap", Some("shop"), "a").to_string()]
        );
        assert_eq!(status.change.len(), 1);
        assert_eq!(status.prune.len(), 1);
        assert_eq!(status.unchanged, 3);
    }
}
