//! The CRDs a control plane starts with (`olm-cluster run --crds DIR`): read from a folder,
//! applied before the controller manager starts (so its garbage collector knows their kinds
//! from its first discovery) and waited for until established. The e2e harness installs the
//! workspace's CRDs with the same [`apply`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, ResourceExt};

use crate::error::{Error, Result};
use crate::folder::io_error;

/// The field manager of everything the harness and the demo apply.
pub const FIELD_MANAGER: &str = "olm-rs-e2e";

/// How long a CRD may take to be established.
const ESTABLISHED_WITHIN: Duration = Duration::from_secs(30);

/// Every CRD in the YAML files of `dir`, in file-name order.
pub fn read(dir: &Path) -> Result<Vec<CustomResourceDefinition>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io_error(dir))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let mut crds = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).map_err(io_error(&file))?;
        let docs: Vec<CustomResourceDefinition> = serde_saphyr::from_multiple(&text)
            .map_err(|e| Error::Document(format!("{}: {e}", file.display())))?;
        crds.extend(docs);
    }
    Ok(crds)
}

/// Applies `crds` (server-side, forced) and waits until each is established.
pub async fn apply(client: &Client, crds: Vec<CustomResourceDefinition>) -> Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds {
        let name = crd.name_any();
        api.patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&crd),
        )
        .await
        .map_err(crate::error::kube_err(format!("applying CRD {name}")))?;
        let established = await_condition(api.clone(), &name, conditions::is_crd_established());
        match tokio::time::timeout(ESTABLISHED_WITHIN, established).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                return Err(Error::Cluster(format!(
                    "waiting for CRD {name} to be established: {e}"
                )));
            }
            Err(_) => {
                return Err(Error::Cluster(format!(
                    "CRD {name} was not established within {} s",
                    ESTABLISHED_WITHIN.as_secs()
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_committed_crds_are_read_from_their_folder() {
        let crds = read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/crd")).unwrap();
        let names: Vec<_> = crds.iter().map(ResourceExt::name_any).collect();
        assert_eq!(names.len(), olm_api::crds::all().len(), "{names:?}");
        assert!(names.contains(&"catalogs.catalogd.operatorframework.io".to_owned()));
    }
}
