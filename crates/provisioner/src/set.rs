//! The applied set in the cluster: the parent's record of it (on the BundleDeployment, as
//! KEP-3659 says), its live members, and a sync that installs a new set and then removes
//! what the old one had beyond it.
//!
//! The parent records the union of the old and the new set before anything is applied, and
//! the new set alone once the old members are removed: a run cut short at any point leaves a
//! record that still covers every member, so the next run finds and prunes them.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::discovery::{self, Scope};
use kube::{Client, ResourceExt};
use olm_api::bundle_deployment::BundleDeployment;
use serde_json::json;

use crate::apply::{Applied, Applier, ApplyError, FIELD_MANAGER, api_message};
use crate::applyset::{self, Spans};
use crate::marks::{self, Owner, Ownership};
use crate::object::{Key, Object};
use crate::prune::{Removal, removal};

/// What a sync did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Synced {
    /// The objects applied, in order.
    pub applied: Vec<Applied>,
    /// The old set's objects removed.
    pub removed: Vec<Key>,
    /// CRDs the new set lacks that still have custom resources: kept, without our marks.
    pub kept: Vec<Key>,
}

impl Applier {
    /// Installs `objects` as the whole set of `owner`, then removes what its set had beyond
    /// them (nothing when the install fails: the old version stays as it was).
    pub async fn sync(&self, owner: &Owner, objects: Vec<Object>) -> Result<Synced, ApplyError> {
        let recorded = self.recorded(owner).await?;
        // Where a namespace-less object may go; for a cluster-scoped one this adds a namespace
        // to the record for nothing, which is harmless.
        let keys: Vec<Key> = objects.iter().map(|o| self.placed_key(&o.key)).collect();
        let wanted = Spans::of(&keys);
        self.record(owner, &recorded.union(&wanted)).await?;
        let applied = self.install(owner, objects).await?;
        let keep: BTreeSet<Key> = applied.iter().map(|a| a.key.clone()).collect();
        let live = self.members(owner, &recorded.union(&wanted)).await?;
        let gone = removal(live, &keep);
        let (removed, kept) = self.remove(owner, &gone).await?;
        self.record(owner, &Spans::of(applied.iter().map(|a| &a.key)))
            .await?;
        Ok(Synced {
            applied,
            removed,
            kept,
        })
    }

    /// Removes every member of `owner`'s set (its BundleDeployment is being deleted).
    pub async fn remove_all(&self, owner: &Owner) -> Result<Synced, ApplyError> {
        let recorded = self.recorded(owner).await?;
        let live = self.members(owner, &recorded).await?;
        let (removed, kept) = self.remove(owner, &removal(live, &BTreeSet::new())).await?;
        Ok(Synced {
            applied: Vec::new(),
            removed,
            kept,
        })
    }

    /// What the parent records of the set.
    pub async fn recorded(&self, owner: &Owner) -> Result<Spans, ApplyError> {
        let api: Api<BundleDeployment> = Api::all(self.client.clone());
        let bd = api
            .get_metadata_opt(&owner.name)
            .await
            .map_err(|source| ApplyError::Read {
                what: format!("reading BundleDeployment {}", owner.name),
                source,
            })?;
        let annotations = bd.map(|m| m.annotations().clone()).unwrap_or_default();
        Ok(Spans::parse(
            annotations.get(applyset::GROUP_KINDS).map(String::as_str),
            annotations.get(applyset::NAMESPACES).map(String::as_str),
        ))
    }

    /// Writes `spans` as the parent's record (with its id label and our tooling).
    async fn record(&self, owner: &Owner, spans: &Spans) -> Result<(), ApplyError> {
        let annotations: BTreeMap<&str, String> = spans
            .annotations()
            .into_iter()
            .chain([(applyset::TOOLING, applyset::OUR_TOOLING.to_owned())])
            .collect();
        let patch = json!({
            "apiVersion": marks::BUNDLE_DEPLOYMENT_API_VERSION,
            "kind": marks::BUNDLE_DEPLOYMENT,
            "metadata": {
                "name": owner.name,
                "labels": {applyset::ID: owner.set_id()},
                "annotations": annotations,
            },
        });
        Api::<BundleDeployment>::all(self.client.clone())
            .patch(
                &owner.name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(patch),
            )
            .await
            .map_err(|e| ApplyError::Refused {
                key: Box::new(Key::new(
                    "core.rukpak.io",
                    marks::BUNDLE_DEPLOYMENT,
                    None,
                    &owner.name,
                )),
                message: api_message(e),
            })?;
        Ok(())
    }

    /// The live members of the set within `spans`, with whose each is (one list per
    /// group-kind, by the member label).
    async fn members(
        &self,
        owner: &Owner,
        spans: &Spans,
    ) -> Result<Vec<(Key, Ownership)>, ApplyError> {
        let selector =
            ListParams::default().labels(&format!("{}={}", applyset::PART_OF, owner.set_id()));
        let mut members = Vec::new();
        for group_kind in &spans.group_kinds {
            let (kind, group) = group_kind
                .split_once('.')
                .unwrap_or((group_kind.as_str(), ""));
            // A kind no longer served (its CRD gone) has no members left.
            let Some((resource, _)) = served(&self.client, group, kind).await else {
                continue;
            };
            let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &resource);
            let listed = api
                .list_metadata(&selector)
                .await
                .map_err(|source| ApplyError::Read {
                    what: format!("listing {group_kind} of the set"),
                    source,
                })?;
            for item in listed.items {
                let key = Key {
                    group: group.to_owned(),
                    kind: kind.to_owned(),
                    namespace: item.namespace(),
                    name: item.name_any(),
                };
                members.push((key, marks::ownership(item.labels(), &owner.name)));
            }
        }
        Ok(members)
    }

    /// Carries out `removal`; what was deleted, and the CRDs kept for their custom resources.
    async fn remove(
        &self,
        owner: &Owner,
        removal: &Removal,
    ) -> Result<(Vec<Key>, Vec<Key>), ApplyError> {
        let mut served = Served::default();
        let mut removed = Vec::new();
        for key in &removal.delete {
            if self.delete(&mut served, key).await? {
                removed.push(key.clone());
            }
        }
        let mut kept = Vec::new();
        for crd in &removal.crds {
            if self.has_custom_resources(&crd.name).await? {
                self.unmark(crd, owner).await?;
                kept.push(crd.clone());
            } else if self.delete(&mut served, crd).await? {
                removed.push(crd.clone());
            }
        }
        Ok((removed, kept))
    }

    /// Deletes `key`; false when it was gone already.
    async fn delete(&self, served: &mut Served, key: &Key) -> Result<bool, ApplyError> {
        let Some((resource, scope)) = served.get(&self.client, &key.group, &key.kind).await else {
            return Ok(false);
        };
        let api: Api<DynamicObject> = match (&scope, &key.namespace) {
            (Scope::Namespaced, Some(ns)) => {
                Api::namespaced_with(self.client.clone(), ns, &resource)
            }
            _ => Api::all_with(self.client.clone(), &resource),
        };
        match api.delete(&key.name, &DeleteParams::background()).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
            Err(e) => Err(ApplyError::Refused {
                key: Box::new(key.clone()),
                message: api_message(e),
            }),
        }
    }

    /// Whether the CRD `name` still has a custom resource anywhere.
    async fn has_custom_resources(&self, name: &str) -> Result<bool, ApplyError> {
        let read = |source| ApplyError::Read {
            what: format!("reading CustomResourceDefinition {name}"),
            source,
        };
        let crds: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        let Some(crd) = crds.get_opt(name).await.map_err(read)? else {
            return Ok(false);
        };
        let spec = &crd.spec;
        // Every served version lists the same objects: one is enough.
        let Some(version) = spec.versions.iter().find(|v| v.served) else {
            return Ok(false);
        };
        let resource = ApiResource {
            group: spec.group.clone(),
            version: version.name.clone(),
            api_version: format!("{}/{}", spec.group, version.name),
            kind: spec.names.kind.clone(),
            plural: spec.names.plural.clone(),
        };
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &resource);
        let found = api
            .list_metadata(&ListParams::default().limit(1))
            .await
            .map_err(|source| ApplyError::Read {
                what: format!("listing the custom resources of {name}"),
                source,
            })?;
        Ok(!found.items.is_empty())
    }

    /// Takes our marks off `crd` and says why it is still there (a merge patch: the
    /// definition itself is left exactly as it is).
    async fn unmark(&self, crd: &Key, owner: &Owner) -> Result<(), ApplyError> {
        let api: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        let patch = json!({
            "metadata": {
                "labels": {
                    marks::OWNER_KIND: null,
                    marks::OWNER_NAME: null,
                    applyset::PART_OF: null,
                },
                "annotations": {KEPT: owner.name},
            },
        });
        api.patch(&crd.name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map_err(|e| ApplyError::Refused {
                key: Box::new(crd.clone()),
                message: api_message(e),
            })?;
        Ok(())
    }
}

/// On a CRD kept because custom resources of it remained: the BundleDeployment that had
/// installed it.
pub const KEPT: &str = "olm-rs.io/kept-from-bundle-deployment";

/// Discovery answers of one removal: each group-kind is looked up once, however many of its
/// objects go.
#[derive(Default)]
struct Served(std::collections::HashMap<(String, String), Option<(ApiResource, Scope)>>);

impl Served {
    async fn get(
        &mut self,
        client: &Client,
        group: &str,
        kind: &str,
    ) -> Option<(ApiResource, Scope)> {
        let key = (group.to_owned(), kind.to_owned());
        if let Some(found) = self.0.get(&key) {
            return found.clone();
        }
        let found = served(client, group, kind).await;
        self.0.insert(key, found.clone());
        found
    }
}

/// The resource and scope of `kind` in `group` (its preferred version), if served.
async fn served(client: &Client, group: &str, kind: &str) -> Option<(ApiResource, Scope)> {
    let group = discovery::group(client, group).await.ok()?;
    group
        .recommended_kind(kind)
        .map(|(resource, caps)| (resource, caps.scope))
}
