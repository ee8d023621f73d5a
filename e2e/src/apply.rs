//! Server-side apply of CRDs and of arbitrary YAML documents.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::{Scope, pinned_kind};
use kube::{Client, ResourceExt};

use crate::{Error, Result, kube_err};

pub use olm_cluster::crds::FIELD_MANAGER;

/// Applies every CRD of olm-rs and waits until each is established.
pub async fn install_crds(client: &Client) -> Result<()> {
    apply_crds(client, olm_api::crds::all()).await
}

/// Applies `crds` and waits until each is established (as the control plane applies its own).
pub async fn apply_crds(client: &Client, crds: Vec<CustomResourceDefinition>) -> Result<()> {
    olm_cluster::crds::apply(client, crds).await
}

/// Splits a YAML stream into its documents, skipping empty ones.
pub fn parse_documents(text: &str) -> Result<Vec<serde_json::Value>> {
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(text).map_err(|e| Error::Document(e.to_string()))?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// The group, version and kind a document declares.
pub fn gvk_of(doc: &serde_json::Value) -> Result<GroupVersionKind> {
    let api_version = doc["apiVersion"]
        .as_str()
        .ok_or_else(|| Error::Document("a document has no apiVersion".into()))?;
    let kind = doc["kind"]
        .as_str()
        .ok_or_else(|| Error::Document("a document has no kind".into()))?;
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    Ok(GroupVersionKind::gvk(group, version, kind))
}

/// Applies one document; namespaced objects without a namespace go to `default_namespace`.
pub async fn apply_document(
    client: &Client,
    doc: &serde_json::Value,
    default_namespace: &str,
) -> Result<DynamicObject> {
    let gvk = gvk_of(doc)?;
    let (resource, caps) = pinned_kind(client, &gvk)
        .await
        .map_err(kube_err(format!("discovering {}", gvk.kind)))?;
    let obj: DynamicObject = serde_json::from_value(doc.clone())
        .map_err(|e| Error::Document(format!("{} is not an object: {e}", gvk.kind)))?;
    let name = obj.name_any();
    let api: Api<DynamicObject> = match caps.scope {
        Scope::Cluster => Api::all_with(client.clone(), &resource),
        Scope::Namespaced => Api::namespaced_with(
            client.clone(),
            obj.metadata
                .namespace
                .as_deref()
                .unwrap_or(default_namespace),
            &resource,
        ),
    };
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(doc),
    )
    .await
    .map_err(kube_err(format!("applying {} {name}", gvk.kind)))
}
