//! The applied set in the cluster: the parent's record of it (on the BundleDeployment, as
//! KEP-3659 says), its live members, and a sync that installs a new set and then removes
//! what the old one had beyond it.
//!
//! The parent records the union of the old and the new set before anything is applied, and
//! the new set alone once the old members are removed: a run cut short at any point leaves a
//! record that still covers every member, so the next run finds and prunes them.
//!
//! Deleting is proven, never inferred from labels anyone can write: a member is an object whose
//! controller owner reference is the BundleDeployment's uid, found in the namespaces the
//! parent records, or a CRD the parent records by name that still carries our marks; each is
//! deleted with its uid as a precondition.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, ObjectList, PartialObjectMeta,
    Patch, PatchParams, Preconditions,
};
use kube::discovery::{self, Discovery, Scope, verbs};
use kube::{Client, ResourceExt};
use olm_api::bundle_deployment::BundleDeployment;
use serde_json::json;

use crate::apply::{Applied, Applier, ApplyError, FIELD_MANAGER, api_message, status_code};
use crate::applyset::{self, Spans};
use crate::held;
use crate::marks::{self, KEPT, Owner, Ownership};
use crate::object::{Key, Object};
use crate::order::{Phase, phase};
use crate::prune::{Member, Removal, removal};

/// How many of the objects a kept Namespace holds are named.
const NAMED: usize = 5;

/// What a sync did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Synced {
    /// The objects applied, in order.
    pub applied: Vec<Applied>,
    /// The old set's objects removed.
    pub removed: Vec<Key>,
    /// Namespaces and CRDs the new set lacks that were kept, without our marks, and why.
    pub kept: Vec<Kept>,
}

/// A Namespace or CRD of the set that was not deleted, because deleting it would delete what
/// the BundleDeployment did not apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kept {
    /// The object.
    pub key: Key,
    /// Why, in words that end the sentence "kept X: ...".
    pub why: String,
}

/// One BundleDeployment's set of objects in the cluster (its ApplySet): installed, listed and
/// removed through the [`Applier`] that applies each object.
#[derive(Clone, Copy)]
pub struct Set<'a> {
    applier: &'a Applier,
    owner: &'a Owner,
}

/// What a CRD about to be deleted still serves.
enum CustomResources {
    /// None: deleted if the CRD is still at this resourceVersion.
    None {
        /// The CRD's resourceVersion when its custom resources were counted.
        resource_version: String,
    },
    /// Some remain, or whether any do cannot be told: kept, for this reason.
    Keep(String),
}

impl<'a> Set<'a> {
    /// The set of `owner` (its BundleDeployment), as `applier` applies it.
    pub fn of(applier: &'a Applier, owner: &'a Owner) -> Set<'a> {
        Set { applier, owner }
    }

    /// Installs `objects` as the whole set of its owner, then removes what its set had beyond
    /// them (nothing when the install fails: the old version stays as it was).
    pub async fn sync(self, objects: Vec<Object>) -> Result<Synced, ApplyError> {
        self.sync_in(objects, None).await
    }

    /// [`Set::sync`], recording `install_namespace` as the set's (registry+v1).
    pub async fn sync_in(
        self,
        objects: Vec<Object>,
        install_namespace: Option<&str>,
    ) -> Result<Synced, ApplyError> {
        let recorded = self.recorded().await?;
        // Where a namespace-less object may go; for a cluster-scoped one this adds a namespace
        // to the record for nothing, which is harmless.
        let keys: Vec<Key> = objects
            .iter()
            .map(|o| self.applier.placed_key(&o.key))
            .collect();
        let wanted = Spans::of(&keys).installed_in(install_namespace);
        self.record(&recorded.union(&wanted)).await?;
        let applied = self.applier.install(self.owner, objects).await?;
        let keep: BTreeSet<Key> = applied.iter().map(|a| a.key.clone()).collect();
        let live = self.members(&recorded.union(&wanted)).await?;
        let gone = removal(live, &keep);
        let (removed, kept) = self.remove(&gone, &keep).await?;
        self.record(&Spans::of(applied.iter().map(|a| &a.key)).installed_in(install_namespace))
            .await?;
        Ok(Synced {
            applied,
            removed,
            kept,
        })
    }

    /// Removes every member of the set (its BundleDeployment is being deleted).
    pub async fn remove_all(self) -> Result<Synced, ApplyError> {
        let recorded = self.recorded().await?;
        let live = self.members(&recorded).await?;
        let (removed, kept) = self
            .remove(&removal(live, &BTreeSet::new()), &BTreeSet::new())
            .await?;
        Ok(Synced {
            applied: Vec::new(),
            removed,
            kept,
        })
    }

    /// The Namespaces the owner applied, by name: those the parent records that still carry our
    /// marks; and the install namespace it recorded, if any (one the user named is no
    /// Namespace of the set).
    pub async fn applied_namespaces(self) -> Result<BTreeSet<String>, ApplyError> {
        let recorded = self.recorded().await?;
        let mut namespaces: BTreeSet<String> = recorded.install_namespace.iter().cloned().collect();
        if !recorded.group_kinds.contains("Namespace") {
            return Ok(namespaces);
        }
        namespaces.extend(
            self.members_of(&recorded, "", "Namespace")
                .await?
                .into_iter()
                .map(|m| m.key.name),
        );
        Ok(namespaces)
    }

    /// What the parent records of the set.
    pub async fn recorded(self) -> Result<Spans, ApplyError> {
        let api: Api<BundleDeployment> = Api::all(self.applier.client.clone());
        let bd = api
            .get_metadata_opt(&self.owner.name)
            .await
            .map_err(|source| ApplyError::Read {
                what: format!("reading BundleDeployment {}", self.owner.name),
                source,
            })?;
        let annotations = bd.map(|m| m.annotations().clone()).unwrap_or_default();
        let get = |key: &str| annotations.get(key).map(String::as_str);
        Ok(Spans::parse(
            get(applyset::GROUP_KINDS),
            get(applyset::NAMESPACES),
            get(applyset::CRDS),
            get(applyset::NAMESPACE_OBJECTS),
            get(applyset::INSTALL_NAMESPACE),
        ))
    }

    /// Writes `spans` as the parent's record (with its id label and our tooling).
    async fn record(self, spans: &Spans) -> Result<(), ApplyError> {
        let annotations: BTreeMap<&str, String> = spans
            .annotations()
            .into_iter()
            .chain([(applyset::TOOLING, applyset::OUR_TOOLING.to_owned())])
            .collect();
        let patch = json!({
            "apiVersion": marks::BUNDLE_DEPLOYMENT_API_VERSION,
            "kind": marks::BUNDLE_DEPLOYMENT,
            "metadata": {
                "name": self.owner.name,
                "labels": {applyset::ID: self.owner.set_id()},
                "annotations": annotations,
            },
        });
        Api::<BundleDeployment>::all(self.applier.client.clone())
            .patch(
                &self.owner.name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(patch),
            )
            .await
            .map_err(|e| ApplyError::Refused {
                key: Box::new(Key::new(
                    "core.rukpak.io",
                    marks::BUNDLE_DEPLOYMENT,
                    None,
                    &self.owner.name,
                )),
                message: api_message(e),
            })?;
        Ok(())
    }

    /// The live members of the set within `spans`: of each recorded group-kind, the objects in
    /// the recorded namespaces (cluster-wide for cluster-scoped kinds) that the owner applied,
    /// proven by their controller owner reference; of CRDs and Namespaces, those the parent
    /// records by name that still carry our marks. The member label only narrows the lists.
    pub(crate) async fn members(self, spans: &Spans) -> Result<Vec<Member>, ApplyError> {
        let mut members = Vec::new();
        for group_kind in &spans.group_kinds {
            let (kind, group) = group_kind
                .split_once('.')
                .unwrap_or((group_kind.as_str(), ""));
            members.extend(self.members_of(spans, group, kind).await?);
        }
        Ok(members)
    }

    /// The live members of `kind` in `group` (see [`Set::members`]).
    async fn members_of(
        self,
        spans: &Spans,
        group: &str,
        kind: &str,
    ) -> Result<Vec<Member>, ApplyError> {
        let selector =
            ListParams::default().labels(&format!("{}={}", applyset::PART_OF, self.owner.set_id()));
        // A kind no longer served (its CRD gone) has no members left.
        let Some((resource, scope)) = served(&self.applier.client, group, kind).await? else {
            return Ok(Vec::new());
        };
        let key_of = |meta: &ObjectMeta| Key {
            group: group.to_owned(),
            kind: kind.to_owned(),
            namespace: meta.namespace.clone(),
            name: meta.name.clone().unwrap_or_default(),
        };
        let read = |source| ApplyError::Read {
            what: format!("listing {} of the set", applyset::group_kind(group, kind)),
            source,
        };
        let mut members = Vec::new();
        let by_record = match phase(&Key::new(group, kind, None, "")) {
            Phase::Crds => Some(&spans.crds),
            Phase::Namespaces => Some(&spans.namespace_objects),
            Phase::Identity | Phase::Rest => None,
        };
        if let Some(names) = by_record {
            let api: Api<DynamicObject> = Api::all_with(self.applier.client.clone(), &resource);
            let ours = |m: &ObjectMeta| {
                marks::ownership(
                    m.labels.as_ref().unwrap_or(&BTreeMap::new()),
                    &self.owner.name,
                ) == Ownership::Ours
            };
            if names.is_empty() {
                // A set recorded before CRDs and Namespaces were recorded by name (its kinds
                // say it has some): found by our marks, as they were then, until its next
                // apply records them.
                for item in api.list_metadata(&selector).await.map_err(read)?.items {
                    if ours(&item.metadata) {
                        members.push(Member {
                            key: key_of(&item.metadata),
                            uid: item.uid().unwrap_or_default(),
                        });
                    }
                }
                return Ok(members);
            }
            for name in names {
                let Some(found) = api.get_metadata_opt(name).await.map_err(read)? else {
                    continue;
                };
                if ours(&found.metadata) {
                    members.push(Member {
                        key: key_of(&found.metadata),
                        uid: found.uid().unwrap_or_default(),
                    });
                }
            }
            return Ok(members);
        }
        let apis: Vec<Api<DynamicObject>> = match scope {
            Scope::Cluster => vec![Api::all_with(self.applier.client.clone(), &resource)],
            Scope::Namespaced => spans
                .namespaces
                .iter()
                .map(|ns| Api::namespaced_with(self.applier.client.clone(), ns, &resource))
                .collect(),
        };
        for api in apis {
            let listed = api.list_metadata(&selector).await.map_err(read)?;
            for item in listed.items {
                if marks::applied_by(&item.metadata, self.owner) {
                    members.push(Member {
                        key: key_of(&item.metadata),
                        uid: item.uid().unwrap_or_default(),
                    });
                }
            }
        }
        Ok(members)
    }

    /// Carries out `removal`; what was deleted, and the Namespaces and CRDs kept.
    /// `keep` is the new set: a Namespace it dropped but still puts objects in is kept.
    async fn remove(
        self,
        removal: &Removal,
        keep: &BTreeSet<Key>,
    ) -> Result<(Vec<Key>, Vec<Kept>), ApplyError> {
        let mut served = Served::default();
        let mut removed = Vec::new();
        for member in &removal.delete {
            if self.delete(&mut served, member, None).await? {
                removed.push(member.key.clone());
            }
        }
        let mut kept = Vec::new();
        for namespace in &removal.namespaces {
            let still_used = keep
                .iter()
                .any(|k| k.namespace.as_deref() == Some(namespace.key.name.as_str()));
            let why = if still_used {
                Some(
                    "the new version puts objects in it, though it no longer makes it, and deleting it would delete them".to_owned(),
                )
            } else {
                self.namespace_holds(&namespace.key.name).await?
            };
            match why {
                Some(why) => {
                    self.unmark(&mut served, namespace).await?;
                    kept.push(Kept {
                        key: namespace.key.clone(),
                        why,
                    });
                }
                None => {
                    if self.delete(&mut served, namespace, None).await? {
                        removed.push(namespace.key.clone());
                    }
                }
            }
        }
        for crd in &removal.crds {
            match self.custom_resources(crd).await? {
                CustomResources::Keep(why) => {
                    self.unmark(&mut served, crd).await?;
                    kept.push(Kept {
                        key: crd.key.clone(),
                        why,
                    });
                }
                CustomResources::None { resource_version } => {
                    if self
                        .delete(&mut served, crd, Some(resource_version))
                        .await?
                    {
                        removed.push(crd.key.clone());
                    }
                }
            }
        }
        Ok((removed, kept))
    }

    /// The Api of `key`'s kind, placed in its namespace.
    async fn api_of(
        self,
        served: &mut Served,
        key: &Key,
    ) -> Result<Option<Api<DynamicObject>>, ApplyError> {
        let Some((resource, scope)) = served
            .get(&self.applier.client, &key.group, &key.kind)
            .await?
        else {
            return Ok(None);
        };
        Ok(Some(match (&scope, &key.namespace) {
            (Scope::Namespaced, Some(ns)) => {
                Api::namespaced_with(self.applier.client.clone(), ns, &resource)
            }
            _ => Api::all_with(self.applier.client.clone(), &resource),
        }))
    }

    /// Deletes `member` if it still has its uid (and, when given, this resourceVersion); false
    /// when it was gone already, or is another object now.
    async fn delete(
        self,
        served: &mut Served,
        member: &Member,
        resource_version: Option<String>,
    ) -> Result<bool, ApplyError> {
        let key = &member.key;
        let Some(api) = self.api_of(served, key).await? else {
            return Ok(false);
        };
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(member.uid.clone()),
                resource_version,
            }),
            ..DeleteParams::background()
        };
        match api.delete(&key.name, &params).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
            // A precondition that failed: the object was replaced, or (a CRD) changed since its
            // custom resources were counted; the next reconcile looks again.
            Err(kube::Error::Api(status)) if status.code == 409 => Err(ApplyError::Refused {
                key: Box::new(key.clone()),
                message: format!(
                    "not deleted: it changed since it was found ({}); it is looked at again",
                    status.message
                ),
            }),
            Err(e) => Err(ApplyError::Refused {
                key: Box::new(key.clone()),
                message: api_message(e),
            }),
        }
    }

    /// Why the Namespace `name` must be kept: it holds objects the owner did not apply (named),
    /// or what it holds cannot be told. `None`: it may be deleted.
    async fn namespace_holds(self, name: &str) -> Result<Option<String>, ApplyError> {
        let discovery = Discovery::new(self.applier.client.clone())
            .run_aggregated()
            .await
            .map_err(|source| ApplyError::Read {
                what: format!("discovering the kinds Namespace {name} may hold"),
                source,
            })?;
        let mut found: Vec<(Key, ObjectMeta)> = Vec::new();
        for group in discovery.groups() {
            for (resource, caps) in group.recommended_resources() {
                if caps.scope != Scope::Namespaced || !caps.supports_operation(verbs::LIST) {
                    continue;
                }
                let listed = match self.list_in(name, &resource).await {
                    Ok(Some(listed)) => listed,
                    Ok(None) => continue,
                    // Unsure is a reason to keep it, never to delete it.
                    Err(why) => {
                        return Ok(Some(format!(
                            "what it holds cannot be told ({} could not be listed: {why}), and deleting it would delete everything in it",
                            applyset::group_kind(&resource.group, &resource.kind),
                        )));
                    }
                };
                for item in listed.items {
                    let key = Key::new(
                        &resource.group,
                        &resource.kind,
                        Some(name),
                        &item.name_any(),
                    );
                    found.push((key, item.metadata));
                }
            }
        }
        let (named, count) = held::held(found.iter().map(|(k, m)| (k, m)), self.owner, NAMED);
        if count == 0 {
            return Ok(None);
        }
        let mut list: Vec<String> = named.iter().map(ToString::to_string).collect();
        if count > named.len() {
            list.push(format!("and {} more", count - named.len()));
        }
        Ok(Some(format!(
            "it holds objects the BundleDeployment did not apply ({}), and deleting it would delete them",
            list.join(", ")
        )))
    }

    /// The objects of the kind `resource` in the Namespace `name`. `Ok(None)`: the kind is
    /// served at no version any more (its CRD was deleted since discovery, by anyone: its
    /// objects went with it). A kind that answers 404 but is still served (at another version
    /// now, say) is listed again at that one. `Err` says why what it holds cannot be told.
    async fn list_in(
        self,
        name: &str,
        resource: &ApiResource,
    ) -> Result<Option<ObjectList<PartialObjectMeta<DynamicObject>>>, String> {
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.applier.client.clone(), name, resource);
        let error = match api.list_metadata(&ListParams::default()).await {
            Ok(listed) => return Ok(Some(listed)),
            Err(e) => e,
        };
        if held::unlisted(status_code(&error)) == held::Unlisted::Unsure {
            return Err(api_message(error));
        }
        // Not at this version: whether the kind is served at all is asked again.
        let now = match discovery::group(&self.applier.client, &resource.group).await {
            Ok(group) => group
                .recommended_kind(&resource.kind)
                .map(|(resource, _)| resource),
            Err(kube::Error::Discovery(kube::error::DiscoveryError::MissingApiGroup(_))) => None,
            Err(e) => return Err(api_message(e)),
        };
        let Some(now) = now else {
            tracing::debug!(namespace = name, kind = %resource.kind, "a kind went away while the namespace was looked through");
            return Ok(None);
        };
        Api::<DynamicObject>::namespaced_with(self.applier.client.clone(), name, &now)
            .list_metadata(&ListParams::default())
            .await
            .map(Some)
            .map_err(api_message)
    }

    /// Whether the CRD `crd` may be deleted: it is still the member found (its uid, our marks)
    /// and none of its custom resources remain, counted at its storage version (else a served
    /// one: the same objects). When no version is served they cannot be counted, and the CRD is
    /// kept: unsure is a reason to keep, never to delete.
    async fn custom_resources(self, crd: &Member) -> Result<CustomResources, ApplyError> {
        let name = &crd.key.name;
        let read = |source| ApplyError::Read {
            what: format!("reading CustomResourceDefinition {name}"),
            source,
        };
        let crds: Api<CustomResourceDefinition> = Api::all(self.applier.client.clone());
        let Some(live) = crds.get_opt(name).await.map_err(read)? else {
            // Gone already: deleting it is a no-op the precondition turns into 404.
            return Ok(CustomResources::None {
                resource_version: String::new(),
            });
        };
        let resource_version = live.resource_version().unwrap_or_default();
        let spec = &live.spec;
        let version = spec
            .versions
            .iter()
            .find(|v| v.served && v.storage)
            .or_else(|| spec.versions.iter().find(|v| v.served));
        let Some(version) = version else {
            return Ok(CustomResources::Keep(
                "no version of it is served, so whether custom resources of it remain cannot be told, and deleting it would delete them".to_owned(),
            ));
        };
        let resource = ApiResource {
            group: spec.group.clone(),
            version: version.name.clone(),
            api_version: format!("{}/{}", spec.group, version.name),
            kind: spec.names.kind.clone(),
            plural: spec.names.plural.clone(),
        };
        let api: Api<DynamicObject> = Api::all_with(self.applier.client.clone(), &resource);
        let found = match api.list_metadata(&ListParams::default().limit(1)).await {
            Ok(found) => found,
            // Unsure is a reason to keep, never to delete (nor to hold up the uninstall: a
            // conversion webhook gone with the operator cannot answer).
            Err(e) => {
                return Ok(CustomResources::Keep(format!(
                    "its custom resources could not be counted ({}), and deleting it would delete them",
                    api_message(e)
                )));
            }
        };
        if found.items.is_empty() {
            Ok(CustomResources::None { resource_version })
        } else {
            Ok(CustomResources::Keep(
                "custom resources of it remain, and deleting it would delete them".to_owned(),
            ))
        }
    }

    /// Takes our marks off `member` (our labels, and our owner reference, so that deleting the
    /// BundleDeployment does not have the garbage collector delete it) and says why it is
    /// still there. A merge patch with the member's uid and resourceVersion: nothing else is
    /// changed, and a changed object is looked at again rather than guessed at.
    async fn unmark(self, served: &mut Served, member: &Member) -> Result<(), ApplyError> {
        let key = &member.key;
        let Some(api) = self.api_of(served, key).await? else {
            return Ok(());
        };
        let refused = |e| ApplyError::Refused {
            key: Box::new(key.clone()),
            message: api_message(e),
        };
        let Some(live) = api.get_metadata_opt(&key.name).await.map_err(refused)? else {
            return Ok(());
        };
        let references: Vec<_> = live
            .metadata
            .owner_references
            .clone()
            .unwrap_or_default()
            .into_iter()
            .filter(|r| r.uid != self.owner.uid)
            .collect();
        let patch = json!({
            "metadata": {
                "uid": member.uid,
                "resourceVersion": live.resource_version(),
                "labels": {
                    marks::OWNER_KIND: null,
                    marks::OWNER_NAME: null,
                    applyset::PART_OF: null,
                },
                "annotations": {KEPT: self.owner.name},
                "ownerReferences": references,
            },
        });
        api.patch(&key.name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map_err(refused)?;
        Ok(())
    }
}

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
    ) -> Result<Option<(ApiResource, Scope)>, ApplyError> {
        let key = (group.to_owned(), kind.to_owned());
        if let Some(found) = self.0.get(&key) {
            return Ok(found.clone());
        }
        let found = served(client, group, kind).await?;
        self.0.insert(key, found.clone());
        Ok(found)
    }
}

/// The resource and scope of `kind` in `group` (its preferred version), or `None` when the
/// API server serves no such group or kind. Any other failure is an error: a kind that cannot
/// be looked up is no reason to forget its objects.
async fn served(
    client: &Client,
    group: &str,
    kind: &str,
) -> Result<Option<(ApiResource, Scope)>, ApplyError> {
    match discovery::group(client, group).await {
        Ok(found) => Ok(found
            .recommended_kind(kind)
            .map(|(resource, caps)| (resource, caps.scope))),
        Err(kube::Error::Discovery(_)) => Ok(None),
        Err(source) => Err(ApplyError::Read {
            what: format!("discovering {}", applyset::group_kind(group, kind)),
            source,
        }),
    }
}
