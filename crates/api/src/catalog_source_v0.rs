//! A minimal OLM v0 `CatalogSource` (operators.coreos.com/v1alpha1): only the fields the
//! catalog-switcher reads and writes. Every other field is kept as it is, both by the schema
//! (`x-kubernetes-preserve-unknown-fields`) and by the Rust type (`other`), so installing this CRD
//! on a cluster without OLM v0, or reading a real v0 object, loses nothing.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::schema::conditions_schema;

/// The fields of a v0 CatalogSource spec that olm-rs uses.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v1alpha1",
    kind = "CatalogSource",
    plural = "catalogsources",
    shortname = "catsrc",
    namespaced,
    status = "CatalogSourceStatus",
    derive = "PartialEq",
    doc = "A minimal OLM v0 CatalogSource: olm-rs reads and writes spec.image and status.conditions only.",
    printcolumn(name = "Display", type_ = "string", json_path = ".spec.displayName"),
    printcolumn(name = "Type", type_ = "string", json_path = ".spec.sourceType"),
    printcolumn(name = "Image", type_ = "string", json_path = ".spec.image"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct CatalogSourceSpec {
    /// `grpc`, `internal` or `configmap`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_type: Option<String>,
    /// The catalog image; the catalog-switcher writes it from the image template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Name shown to people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// Publisher shown to people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publisher: Option<String>,
    /// Every other field, kept unchanged.
    #[serde(flatten)]
    #[schemars(skip)]
    pub other: serde_json::Map<String, serde_json::Value>,
}

/// The parts of a v0 CatalogSource status that olm-rs uses.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct CatalogSourceStatus {
    /// `TemplatesHaveResolved` and `ResolvedImage` from the catalog-switcher, among others.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,
    /// Every other field, kept unchanged.
    #[serde(flatten)]
    #[schemars(skip)]
    pub other: serde_json::Map<String, serde_json::Value>,
}
