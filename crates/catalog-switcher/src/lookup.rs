//! Reading the objects that templates name: the kind is mapped to its resource through
//! discovery, the resource checked against the allowlist before anything is read, and the
//! object read as JSON. A kind the API server does not serve, an object that is not there,
//! and a read the RBAC refuses are each a [`Lookup::Missing`] with the reason.

use std::collections::HashMap;
use std::sync::Mutex;

use kube::api::{Api, ApiResource, DynamicObject};
use kube::core::GroupVersionKind;
use kube::discovery::{ApiCapabilities, Scope, pinned_kind};

use crate::allowlist::Allowlist;
use crate::render::Lookup;
use crate::template::{ObjectRef, Target};

/// Reads templates' objects.
pub struct Objects {
    client: kube::Client,
    allowlist: Allowlist,
    /// Kinds mapped to their resources, so discovery is asked once per kind.
    kinds: Mutex<HashMap<GroupVersionKind, (ApiResource, ApiCapabilities)>>,
}

impl Objects {
    /// Objects read with `client`, limited to `allowlist`.
    pub fn new(client: kube::Client, allowlist: Allowlist) -> Self {
        Self {
            client,
            allowlist,
            kinds: Mutex::default(),
        }
    }

    /// The allowlist.
    pub fn allowlist(&self) -> &Allowlist {
        &self.allowlist
    }

    /// The resource of `object`'s kind, and whether it is namespaced.
    pub async fn resource(&self, object: &ObjectRef) -> Result<(ApiResource, bool), String> {
        let gvk = GroupVersionKind::gvk(&object.group, &object.version, &object.kind);
        let cached = self
            .kinds
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&gvk)
            .cloned();
        let (resource, caps) = match cached {
            Some(found) => found,
            None => {
                let found = pinned_kind(&self.client, &gvk).await.map_err(|e| {
                    format!(
                        "the API server does not serve kind {} ({e})",
                        describe_gvk(&gvk)
                    )
                })?;
                self.kinds
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .insert(gvk, found.clone());
                found
            }
        };
        Ok((resource, caps.scope == Scope::Namespaced))
    }

    /// The key of the watch that follows `object`, when its kind is served and the allowlist
    /// lets the switcher read it (a not-allowed object is never watched).
    pub async fn watch_key(
        &self,
        object: &ObjectRef,
        confined_to: Option<&str>,
    ) -> Option<crate::watches::WatchKey> {
        let (resource, namespaced) = self.resource(object).await.ok()?;
        let namespace = if namespaced {
            Some(object.namespace.as_deref()?)
        } else {
            None
        };
        if confined_to.is_some() && namespace != confined_to {
            return None;
        }
        self.allowlist
            .allows(
                &resource.group,
                &resource.version,
                &resource.plural,
                namespace,
            )
            .then(|| crate::watches::WatchKey::new(&resource, namespace, &object.name))
    }

    /// Looks `target` up; `itself` is the annotated object, as JSON. A namespaced object (a v0
    /// CatalogSource) is `confined_to` its namespace: whoever may create one there must not
    /// read, through it, what lives in other namespaces.
    pub async fn lookup(
        &self,
        target: &Target,
        itself: &serde_json::Value,
        confined_to: Option<&str>,
    ) -> Lookup {
        let object = match target {
            Target::Itself => return Lookup::Found(itself.clone()),
            Target::Other(object) => object,
        };
        let (resource, namespaced) = match self.resource(object).await {
            Ok(found) => found,
            Err(why) => return Lookup::Missing(why),
        };
        let namespace = if namespaced {
            match &object.namespace {
                Some(ns) => Some(ns.as_str()),
                None => {
                    return Lookup::Missing(format!(
                        "{} is namespaced; the variable needs a namespace",
                        resource.kind
                    ));
                }
            }
        } else {
            None
        };
        if let Some(own) = confined_to
            && namespace != Some(own)
        {
            return Lookup::NotAllowed(format!(
                "{object} is outside namespace {own}; a template on a namespaced object reads only objects of its own namespace"
            ));
        }
        if !self.allowlist.allows(
            &resource.group,
            &resource.version,
            &resource.plural,
            namespace,
        ) {
            return Lookup::NotAllowed(format!(
                "{object} is a {}{}/{} object{}, which is not on the allowlist (--allowed-resources: {})",
                if resource.group.is_empty() {
                    String::new()
                } else {
                    format!("{}/", resource.group)
                },
                resource.version,
                resource.plural,
                namespace.map(|ns| format!(" in {ns}")).unwrap_or_default(),
                self.allowlist
            ));
        }
        let api: Api<DynamicObject> = match namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &resource),
            None => Api::all_with(self.client.clone(), &resource),
        };
        match api.get_opt(&object.name).await {
            Ok(Some(found)) => match serde_json::to_value(found) {
                Ok(value) => Lookup::Found(value),
                Err(e) => Lookup::Missing(format!("{object} cannot be read as JSON: {e}")),
            },
            Ok(None) => Lookup::Missing(format!("{object} not found")),
            Err(e) => Lookup::Missing(format!("reading {object}: {e}")),
        }
    }
}

fn describe_gvk(gvk: &GroupVersionKind) -> String {
    if gvk.group.is_empty() {
        format!("{} {}", gvk.version, gvk.kind)
    } else {
        format!("{}/{} {}", gvk.group, gvk.version, gvk.kind)
    }
}
