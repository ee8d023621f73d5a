//! Applying a bundle's objects to the cluster with server-side apply, phase by phase (see
//! [`crate::order`]): every object is placed first (its kind found by discovery, its namespace
//! defaulted), the ones that exist are checked for whose they are (a conflict stops the install
//! before anything is written), then each phase is applied, CRDs waited for until Established
//! so that the custom resources of the same bundle can be placed and applied after them.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::{Scope, pinned_kind};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Map, Value};

use crate::conflict::{self, Conflict};
use crate::fields;
use crate::marks::{self, Owner, Ownership};
use crate::namespaces::Namespaces;
use crate::object::{Key, Object};
use crate::order::{Phase, by_phase, phase};

/// The field manager of everything the provisioner applies.
pub const FIELD_MANAGER: &str = "olm-provisioner";

/// How long a CRD of the bundle may take to be Established.
const ESTABLISHED_TIMEOUT: Duration = Duration::from_secs(60);

/// Why an apply stopped.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The API server serves no such kind (a custom resource whose CRD is neither installed
    /// nor in the bundle); the message is upstream's.
    #[error("{key}: no matches for kind {kind:?} in version {api_version:?}")]
    UnknownKind {
        /// The object.
        key: Box<Key>,
        /// Its kind.
        kind: String,
        /// Its apiVersion.
        api_version: String,
    },
    /// Objects of the bundle exist and are not ours.
    #[error("{}", conflict::message(.0))]
    Conflicts(Vec<Conflict>),
    /// The API server refused an object; its own words.
    #[error("{key}: {message}")]
    Refused {
        /// The object.
        key: Box<Key>,
        /// What the API server said.
        message: String,
    },
    /// A CRD of the bundle did not become Established in time.
    #[error("CustomResourceDefinition {name} was not established within {seconds} s{why}")]
    NotEstablished {
        /// The CRD.
        name: String,
        /// The deadline.
        seconds: u64,
        /// Its conditions' messages, if any.
        why: String,
    },
    /// An object would go to a namespace bundles may not use.
    #[error("{key}: {why}")]
    NamespaceNotAllowed {
        /// The object.
        key: Box<Key>,
        /// Why (the namespace, and the rule).
        why: String,
    },
    /// Reading the cluster failed.
    #[error("{what}: {source}")]
    Read {
        /// What was being read.
        what: String,
        /// The client error.
        source: kube::Error,
    },
}

/// An object with where it goes: its API resource, and its namespace resolved.
#[derive(Debug, Clone)]
pub struct Placed {
    /// The object; `key.namespace` is set for every namespaced object.
    pub object: Object,
    /// The resource it is served as.
    pub resource: ApiResource,
}

/// An object as applied: where it is served and the resourceVersion the apply left it at (what
/// drift is told by).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The object, its namespace resolved.
    pub key: Key,
    /// The resource it is served as.
    pub resource: ApiResource,
    /// Its `metadata.resourceVersion` after the apply.
    pub version: String,
    /// Whether the apply changed it: created it, or set back a field of ours someone else had
    /// changed or removed (see [`crate::fields`]).
    pub changed: bool,
}

/// Applies bundles' objects with one client.
#[derive(Clone)]
pub struct Applier {
    pub(crate) client: Client,
    pub(crate) default_namespace: String,
    pub(crate) namespaces: Namespaces,
}

impl Applier {
    /// Namespaced objects without a namespace go to `default_namespace` (`--default-namespace`);
    /// every namespace is allowed until [`Applier::within`] says otherwise.
    pub fn new(client: Client, default_namespace: impl Into<String>) -> Applier {
        Applier {
            client,
            default_namespace: default_namespace.into(),
            namespaces: Namespaces::default(),
        }
    }

    /// This applier, putting objects only where `namespaces` allows.
    pub fn within(mut self, namespaces: Namespaces) -> Applier {
        self.namespaces = namespaces;
        self
    }

    /// `key` with the namespace a namespace-less object goes to. For a cluster-scoped object
    /// that names a namespace it has not; only set records and lookups use it.
    pub fn placed_key(&self, key: &Key) -> Key {
        let mut placed = key.clone();
        placed
            .namespace
            .get_or_insert_with(|| self.default_namespace.clone());
        placed
    }

    /// Installs `objects` for `owner`: places, checks, then applies them in order. Returns the
    /// objects applied, in order.
    pub async fn install(
        &self,
        owner: &Owner,
        objects: Vec<Object>,
    ) -> Result<Vec<Applied>, ApplyError> {
        let mut kinds = Kinds::default();
        // Conflicts first, over every object whose kind is already served: a custom resource
        // whose CRD is not served yet cannot exist, so it cannot conflict.
        let mut found = Vec::new();
        // What each existing object was: the uid the apply requires of it, and what our field
        // manager owned of it (to tell what the apply changed).
        let mut before = Found::new();
        for object in &objects {
            let Some(placed) = self.place(&mut kinds, object, false).await? else {
                continue;
            };
            if let Some(metadata) = self.metadata_of(&placed).await? {
                let key = placed.object.key.clone();
                let keepable = matches!(phase(&key), Phase::Crds | Phase::Namespaces);
                found.push((
                    key.clone(),
                    marks::ownership_of(&metadata, keepable, &owner.name),
                ));
                before.insert(
                    key,
                    Before {
                        uid: metadata.uid.clone().unwrap_or_default(),
                        ours: fields::ours(&metadata, FIELD_MANAGER),
                        // Only a mark we wrote ourselves, on what we keep, for this owner.
                        kept: keepable
                            && metadata
                                .annotations
                                .as_ref()
                                .and_then(|a| a.get(marks::KEPT))
                                .is_some_and(|bd| *bd == owner.name),
                    },
                );
            }
        }
        let conflicts = conflict::conflicts(found);
        if !conflicts.is_empty() {
            return Err(ApplyError::Conflicts(conflicts));
        }
        self.dry_run(owner, &mut kinds, &objects, &before).await?;
        let mut applied = Vec::new();
        for (phase, group) in by_phase(objects) {
            let mut placed = Vec::new();
            for object in &group {
                if let Some(p) = self.place(&mut kinds, object, true).await? {
                    placed.push(p);
                }
            }
            for p in placed.iter() {
                let was = before.get(&p.object.key);
                let mut after = self.patch(owner, p, false, was).await?;
                if was.is_some_and(|b| b.kept) {
                    after = self.readopted(p).await?;
                }
                applied.push(Applied {
                    key: p.object.key.clone(),
                    resource: p.resource.clone(),
                    version: after.resource_version.clone().unwrap_or_default(),
                    changed: fields::changed(
                        was.map(|b| b.ours),
                        fields::ours(&after, FIELD_MANAGER),
                    ),
                });
            }
            if phase == Phase::Crds {
                for p in &placed {
                    self.wait_established(&p.object.key.name).await?;
                }
                // Kinds the CRDs serve are found from now on.
                kinds.unknown.clear();
            }
        }
        Ok(applied)
    }

    /// Applies every object whose kind is served with `dryRun=All` first: the API server
    /// validates each one (schema, admission) and nothing is written, so an invalid object in
    /// an upgrade leaves the installed version exactly as it was. Objects that cannot be tried
    /// yet are left to the real apply: custom resources of CRDs the bundle brings, and objects
    /// in namespaces the bundle creates.
    async fn dry_run(
        &self,
        owner: &Owner,
        kinds: &mut Kinds,
        objects: &[Object],
        before: &Found,
    ) -> Result<(), ApplyError> {
        let mut missing_namespaces = std::collections::BTreeSet::new();
        for object in objects {
            if object.key.group.is_empty() && object.key.kind == "Namespace" {
                let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(self.client.clone());
                let exists = api
                    .get_metadata_opt(&object.key.name)
                    .await
                    .map_err(|source| ApplyError::Read {
                        what: format!("reading Namespace {}", object.key.name),
                        source,
                    })?
                    .is_some();
                if !exists {
                    missing_namespaces.insert(object.key.name.clone());
                }
            }
        }
        for object in objects {
            let Some(placed) = self.place(kinds, object, false).await? else {
                continue;
            };
            if placed
                .object
                .key
                .namespace
                .as_ref()
                .is_some_and(|ns| missing_namespaces.contains(ns))
            {
                continue;
            }
            let was = before.get(&placed.object.key);
            self.patch(owner, &placed, true, was).await?;
        }
        Ok(())
    }

    /// Where `object` goes; `None` when its kind is not served and `required` is false.
    pub(crate) async fn place(
        &self,
        kinds: &mut Kinds,
        object: &Object,
        required: bool,
    ) -> Result<Option<Placed>, ApplyError> {
        let (group, version) = match object.api_version.rsplit_once('/') {
            Some((g, v)) => (g.to_owned(), v.to_owned()),
            None => (String::new(), object.api_version.clone()),
        };
        let gvk = GroupVersionKind::gvk(&group, &version, &object.key.kind);
        let found = kinds.find(&self.client, &gvk).await;
        let Some((resource, scope)) = found else {
            if !required {
                return Ok(None);
            }
            return Err(ApplyError::UnknownKind {
                key: Box::new(object.key.clone()),
                kind: object.key.kind.clone(),
                api_version: object.api_version.clone(),
            });
        };
        let mut object = object.clone();
        object.key.namespace = match scope {
            Scope::Cluster => None,
            Scope::Namespaced => Some(
                object
                    .key
                    .namespace
                    .clone()
                    .unwrap_or_else(|| self.default_namespace.clone()),
            ),
        };
        // Where it goes: a namespaced object's namespace; a Namespace makes one; any other
        // cluster-scoped object is refused only when the provisioner may write nowhere else.
        let why = match scope {
            Scope::Namespaced => object
                .key
                .namespace
                .as_deref()
                .and_then(|ns| self.namespaces.refusal(ns)),
            Scope::Cluster => self.namespaces.cluster_refusal().or_else(|| {
                (object.key.group.is_empty() && object.key.kind == "Namespace")
                    .then(|| self.namespaces.refusal(&object.key.name))
                    .flatten()
            }),
        };
        if let Some(why) = why {
            return Err(ApplyError::NamespaceNotAllowed {
                key: Box::new(object.key.clone()),
                why,
            });
        }
        Ok(Some(Placed { object, resource }))
    }

    pub(crate) fn api(&self, placed: &Placed) -> Api<DynamicObject> {
        match &placed.object.key.namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &placed.resource),
            None => Api::all_with(self.client.clone(), &placed.resource),
        }
    }

    /// The metadata of the object in the cluster, if it exists.
    async fn metadata_of(&self, placed: &Placed) -> Result<Option<ObjectMeta>, ApplyError> {
        let key = &placed.object.key;
        let found = self
            .api(placed)
            .get_metadata_opt(&key.name)
            .await
            .map_err(|source| ApplyError::Read {
                what: format!("reading {key}"),
                source,
            })?;
        Ok(found.map(|m| m.metadata))
    }

    /// Server-side apply of `placed` (force: our manifest's fields are ours, and drift on them
    /// is undone; fields others set that the manifest lacks are left alone). Returns the
    /// object's metadata after it.
    ///
    /// The write is conditional on what the conflict check found (`was`): an object that
    /// existed is applied with its uid as a precondition (one deleted and made again by
    /// someone else meanwhile is not taken); one that did not exist is created, which fails if
    /// it exists by then. Two BundleDeployments that ship the same object and are reconciled
    /// at once both find it absent; the second create fails instead of taking the first's
    /// object, and is told as a conflict.
    async fn patch(
        &self,
        owner: &Owner,
        placed: &Placed,
        dry_run: bool,
        was: Option<&Before>,
    ) -> Result<ObjectMeta, ApplyError> {
        let key = &placed.object.key;
        let manifest = marks::marked(&placed.object, owner, key.namespace.as_deref());
        let written = match was {
            Some(before) => self.apply(placed, manifest, &before.uid, dry_run).await,
            None => self.create(placed, manifest, dry_run).await,
        };
        match written {
            Ok(metadata) => Ok(metadata),
            Err(e) => Err(self.refusal(owner, placed, was, e).await),
        }
    }

    /// Server-side apply of `manifest`, on the object whose uid is `uid`.
    async fn apply(
        &self,
        placed: &Placed,
        mut manifest: Map<String, Value>,
        uid: &str,
        dry_run: bool,
    ) -> Result<ObjectMeta, kube::Error> {
        if let Some(Value::Object(metadata)) = manifest.get_mut("metadata") {
            metadata.insert("uid".into(), uid.into());
        }
        let mut params = PatchParams::apply(FIELD_MANAGER).force();
        if dry_run {
            params = params.dry_run();
        }
        let applied = self
            .api(placed)
            .patch(
                &placed.object.key.name,
                &params,
                &Patch::Apply(Value::Object(manifest)),
            )
            .await?;
        Ok(applied.metadata)
    }

    /// Creates `manifest` (failing if the object exists), then applies it, so that its fields
    /// are owned as every apply owns them: the create's own entry in `managedFields` (an
    /// `Update` of our manager) is dropped, or it would keep fields a later version of the
    /// bundle removes.
    async fn create(
        &self,
        placed: &Placed,
        manifest: Map<String, Value>,
        dry_run: bool,
    ) -> Result<ObjectMeta, kube::Error> {
        let object: DynamicObject = serde_json::from_value(Value::Object(manifest.clone()))
            .map_err(kube::Error::SerdeError)?;
        let params = PostParams {
            dry_run,
            field_manager: Some(FIELD_MANAGER.to_owned()),
        };
        let created = self.api(placed).create(&params, &object).await?;
        if dry_run {
            return Ok(created.metadata);
        }
        let uid = created.metadata.uid.clone().unwrap_or_default();
        let mut metadata = self.apply(placed, manifest, &uid, false).await?;
        // The entry is dropped with the resourceVersion as a precondition; a write in between
        // is read again (a few times: it is only ever a status or a label another manager set).
        for _ in 0..3 {
            let Some(entries) = fields::without_create_entry(&metadata, FIELD_MANAGER) else {
                return Ok(metadata);
            };
            let patch = serde_json::json!({"metadata": {
                "resourceVersion": metadata.resource_version,
                "managedFields": entries,
            }});
            let api = self.api(placed);
            let name = &placed.object.key.name;
            match api
                .patch(name, &PatchParams::default(), &Patch::Merge(patch))
                .await
            {
                Ok(patched) => return Ok(patched.metadata),
                Err(kube::Error::Api(status)) if status.code == 409 => {
                    metadata = api.get_metadata(name).await?.metadata;
                }
                Err(e) => return Err(e),
            }
        }
        tracing::warn!(object = %placed.object.key, "the create's managedFields entry could not be dropped; fields a later version removes may stay");
        Ok(metadata)
    }

    /// What a refused apply means: an object that did not exist at the conflict check and
    /// exists now, not ours, is a conflict (a race lost to another BundleDeployment or to a
    /// user); anything else is the API server's refusal, in its words.
    async fn refusal(
        &self,
        owner: &Owner,
        placed: &Placed,
        was: Option<&Before>,
        error: kube::Error,
    ) -> ApplyError {
        let key = &placed.object.key;
        let refused = |e| ApplyError::Refused {
            key: Box::new(key.clone()),
            message: api_message(e),
        };
        if was.is_some() {
            return refused(error);
        }
        // Created meanwhile by someone else (409 AlreadyExists): whose it is.
        match self.metadata_of(placed).await {
            Ok(Some(metadata)) => {
                let keepable = matches!(phase(key), Phase::Crds | Phase::Namespaces);
                match marks::ownership_of(&metadata, keepable, &owner.name) {
                    Ownership::Ours => refused(error),
                    other => ApplyError::Conflicts(vec![Conflict {
                        key: key.clone(),
                        owner: other,
                    }]),
                }
            }
            _ => refused(error),
        }
    }

    /// Takes the kept mark off an object this BundleDeployment has taken back; its metadata
    /// after that (the version drift is told by).
    async fn readopted(&self, placed: &Placed) -> Result<ObjectMeta, ApplyError> {
        let key = &placed.object.key;
        let patch = serde_json::json!({"metadata": {"annotations": {marks::KEPT: Value::Null}}});
        let patched = self
            .api(placed)
            .patch(&key.name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map_err(|e| ApplyError::Refused {
                key: Box::new(key.clone()),
                message: api_message(e),
            })?;
        Ok(patched.metadata)
    }

    async fn wait_established(&self, name: &str) -> Result<(), ApplyError> {
        let api: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        let deadline = Instant::now() + ESTABLISHED_TIMEOUT;
        loop {
            let crd = api.get_opt(name).await.map_err(|source| ApplyError::Read {
                what: format!("reading CustomResourceDefinition {name}"),
                source,
            })?;
            let conditions = crd
                .and_then(|c| c.status)
                .and_then(|s| s.conditions)
                .unwrap_or_default();
            if conditions
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
            {
                return Ok(());
            }
            if Instant::now() >= deadline {
                let why: Vec<String> = conditions
                    .iter()
                    .filter_map(|c| c.message.clone())
                    .filter(|m| !m.is_empty())
                    .collect();
                return Err(ApplyError::NotEstablished {
                    name: name.to_owned(),
                    seconds: ESTABLISHED_TIMEOUT.as_secs(),
                    why: if why.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", why.join("; "))
                    },
                });
            }
            // The API server establishes a CRD within a second or two; polling is bounded by
            // the deadline.
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

/// What the conflict check found of an existing object.
#[derive(Debug, Clone)]
struct Before {
    /// Its uid, which the apply requires.
    uid: String,
    /// What our field manager owned of it ([`fields::ours`]).
    ours: Option<u64>,
    /// Whether it carries the kept mark (a Namespace or CRD an uninstall kept).
    kept: bool,
}

type Found = HashMap<Key, Before>;

/// The API server's own words for a failed request.
pub(crate) fn api_message(error: kube::Error) -> String {
    match error {
        kube::Error::Api(status) => status.message,
        other => other.to_string(),
    }
}

/// The HTTP status of a failed request the API server answered.
pub(crate) fn status_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

/// Kinds found by discovery during one install (and those not served, until CRDs apply).
#[derive(Default)]
pub(crate) struct Kinds {
    found: HashMap<GroupVersionKind, (ApiResource, Scope)>,
    unknown: std::collections::HashSet<GroupVersionKind>,
}

impl Kinds {
    async fn find(
        &mut self,
        client: &Client,
        gvk: &GroupVersionKind,
    ) -> Option<(ApiResource, Scope)> {
        if let Some(found) = self.found.get(gvk) {
            return Some(found.clone());
        }
        if self.unknown.contains(gvk) {
            return None;
        }
        match pinned_kind(client, gvk).await {
            Ok((resource, caps)) => {
                let found = (resource, caps.scope);
                self.found.insert(gvk.clone(), found.clone());
                Some(found)
            }
            Err(_) => {
                self.unknown.insert(gvk.clone());
                None
            }
        }
    }
}
