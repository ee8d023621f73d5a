//! Start-up clean-up of the content store: content that belongs to no existing Catalog goes.
//! Catalogs deleted while catalogd was down could not run their finalizer, and content of an
//! earlier Catalog of the same name (another uid) must never pass for the new one's.

use std::collections::HashMap;

use kube::api::{Api, ListParams};
use olm_api::catalog::Catalog;

use crate::store::{Store, StoreError};

/// What stops the clean-up (one directory that cannot be removed does not: it is logged).
#[derive(Debug, thiserror::Error)]
pub enum OrphansError {
    /// The Catalogs could not be listed.
    #[error("listing Catalogs (is the CRD installed?)")]
    List(#[source] kube::Error),
    /// The store could not be listed.
    #[error("listing the content store")]
    Store(#[source] StoreError),
}

/// The stored catalogs to delete: those whose recorded owner uid is missing or is not the
/// uid of the existing Catalog of that name (`owners`: name to uid).
pub fn orphans(
    stored: Vec<(String, Option<String>)>,
    owners: &HashMap<String, String>,
) -> Vec<String> {
    stored
        .into_iter()
        .filter(|(name, owner)| owner.is_none() || owners.get(name) != owner.as_ref())
        .map(|(name, _)| name)
        .collect()
}

/// Deletes stored content no existing Catalog owns; best effort per directory, so one that
/// cannot be removed does not keep catalogd from serving.
pub async fn remove_orphans(client: &kube::Client, store: &Store) -> Result<(), OrphansError> {
    let owners: HashMap<String, String> = Api::<Catalog>::all(client.clone())
        .list_metadata(&ListParams::default())
        .await
        .map_err(OrphansError::List)?
        .items
        .into_iter()
        .filter_map(|c| Some((c.metadata.name?, c.metadata.uid?)))
        .collect();
    let stored = store
        .list()
        .map_err(OrphansError::Store)?
        .into_iter()
        .map(|name| {
            let owner = store.owner(&name).ok().flatten();
            (name, owner)
        })
        .collect();
    for name in orphans(stored, &owners) {
        tracing::info!(catalog = %name, "removing content no existing Catalog owns");
        if let Err(e) = store.delete(&name) {
            tracing::warn!(catalog = %name, error = %e, "could not remove orphaned content; continuing");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(entries: &[(&str, Option<&str>)]) -> Vec<(String, Option<String>)> {
        entries
            .iter()
            .map(|(n, o)| (n.to_string(), o.map(str::to_owned)))
            .collect()
    }

    #[test]
    fn content_of_the_existing_catalog_with_its_uid_stays() {
        let owners = HashMap::from([("a".to_owned(), "u1".to_owned())]);
        assert!(orphans(stored(&[("a", Some("u1"))]), &owners).is_empty());
    }

    #[test]
    fn content_of_a_deleted_catalog_goes() {
        assert_eq!(
            orphans(stored(&[("gone", Some("u1"))]), &HashMap::new()),
            ["gone"]
        );
    }

    #[test]
    fn content_of_an_earlier_catalog_of_the_same_name_goes() {
        let owners = HashMap::from([("a".to_owned(), "u2".to_owned())]);
        assert_eq!(orphans(stored(&[("a", Some("u1"))]), &owners), ["a"]);
    }

    #[test]
    fn content_without_a_recorded_owner_goes() {
        let owners = HashMap::from([("a".to_owned(), "u1".to_owned())]);
        assert_eq!(orphans(stored(&[("a", None)]), &owners), ["a"]);
    }
}
