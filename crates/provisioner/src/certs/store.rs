//! Where the provisioner keeps a BundleDeployment's CA and certificates: a Secret
//! `<bd>-certs` in the managers' namespace (where no bundle may put anything, nor run), owned
//! by the BundleDeployment (so the garbage collector removes it with it, by uid). A Secret
//! of that name that the BundleDeployment does not own is never read or written: the
//! install fails, saying so.

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use super::rotation::Store;
use crate::marks::Owner;

/// The field manager of the store's writes.
pub const MANAGER: &str = "olm-provisioner-certs";

/// The key the store is kept under.
const KEY: &str = "state.json";

/// Why the store could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Reading or writing the Secret failed.
    #[error("certificate store Secret {namespace}/{name}: {source}")]
    Client {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The client error.
        source: kube::Error,
    },
    /// A Secret of its name is not the BundleDeployment's.
    #[error(
        "certificate store Secret {namespace}/{name} exists but is not owned by this BundleDeployment (uid {uid}); it is left alone: delete it, or rename the BundleDeployment"
    )]
    NotOurs {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The BundleDeployment's uid.
        uid: String,
    },
}

/// The name of `bd`'s store: `<bd>-certs`, cut (with a hash of the whole name) to fit a
/// Secret's 253 characters.
pub fn name_for(bd: &str) -> String {
    const SUFFIX: &str = "-certs";
    if bd.len() + SUFFIX.len() <= 253 {
        return format!("{bd}{SUFFIX}");
    }
    let hash = crate::template::hash(&json!(bd));
    let keep = 253 - SUFFIX.len() - 9;
    let mut cut = keep;
    while !bd.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}-{}{SUFFIX}", &bd[..cut], &hash[..8])
}

/// The stores of a namespace.
#[derive(Clone)]
pub struct Stores {
    api: Api<Secret>,
    namespace: String,
}

impl Stores {
    /// The stores in `namespace` (the managers').
    pub fn new(client: Client, namespace: &str) -> Stores {
        Stores {
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_owned(),
        }
    }

    fn client_error(&self, name: &str, source: kube::Error) -> StoreError {
        StoreError::Client {
            namespace: self.namespace.clone(),
            name: name.to_owned(),
            source,
        }
    }

    /// `bd`'s store; none when there is none yet, or it cannot be read (then a new CA is
    /// made, as for a first install).
    pub async fn load(&self, bd: &Owner) -> Result<Option<Store>, StoreError> {
        let name = name_for(&bd.name);
        let Some(secret) = self
            .api
            .get_opt(&name)
            .await
            .map_err(|e| self.client_error(&name, e))?
        else {
            return Ok(None);
        };
        if !secret.owner_references().iter().any(|o| o.uid == bd.uid) {
            return Err(StoreError::NotOurs {
                namespace: self.namespace.clone(),
                name,
                uid: bd.uid.clone(),
            });
        }
        let state = secret
            .data
            .as_ref()
            .and_then(|d| d.get(KEY))
            .and_then(|b| serde_json::from_slice::<Store>(&b.0).ok());
        if state.is_none() {
            tracing::warn!(bundle_deployment = %bd.name, secret = %name, "certificate store unreadable; a new CA is made");
        }
        Ok(state)
    }

    /// Writes `bd`'s store.
    pub async fn save(&self, bd: &Owner, store: &Store) -> Result<(), StoreError> {
        let name = name_for(&bd.name);
        // Serializing strings and numbers cannot fail.
        let state = serde_json::to_vec(store).unwrap_or_default();
        use base64::Engine;
        let secret = json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "ownerReferences": [{
                    "apiVersion": "core.rukpak.io/v1alpha1",
                    "kind": "BundleDeployment",
                    "name": bd.name,
                    "uid": bd.uid,
                }],
            },
            "type": "Opaque",
            "data": {KEY: base64::engine::general_purpose::STANDARD.encode(state)},
        });
        self.api
            .patch(
                &name,
                &PatchParams::apply(MANAGER).force(),
                &Patch::Apply(secret),
            )
            .await
            .map_err(|e| self.client_error(&name, e))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

    use super::*;

    #[test]
    fn a_store_is_named_for_its_bundle_deployment_within_a_secrets_length() {
        assert_eq!(name_for("shop"), "shop-certs");
        let long = "a".repeat(253);
        let name = name_for(&long);
        assert_eq!(name.len(), 253);
        assert!(name.ends_with("-certs"));
        assert_ne!(name, name_for(&format!("{}b", "a".repeat(252))));
    }
}
