//! The kinds whose image reference the switcher keeps in step with a template: `Catalog`
//! (`spec.source.image.ref`) and OLM v0's `CatalogSource` (`spec.image`). Each says where its
//! reference and its status live; the reconcile is the same for both.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::Resource;
use kube::ResourceExt;
use olm_api::catalog::{Catalog, ImageTemplateStatus, SourceType};
use olm_api::catalog_source_v0::CatalogSource;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::watches::Dependent;

/// A kind the switcher manages.
pub trait Switched:
    Resource<DynamicType = ()>
    + Clone
    + Serialize
    + DeserializeOwned
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
    /// Its kind, in logs and errors.
    const KIND_NAME: &'static str;
    /// Whether its status has `imageTemplate` (a v0 CatalogSource has only conditions).
    const HAS_IMAGE_TEMPLATE: bool;
    /// The image reference in its spec.
    fn image(&self) -> Option<&str>;
    /// Why a template cannot apply to it (it does not hold an image), if so.
    fn unsuitable(&self) -> Option<String>;
    /// The spec part of an apply patch that sets the reference.
    fn image_patch(image: &str) -> serde_json::Value;
    /// Its status conditions.
    fn conditions(&self) -> &[Condition];
    /// Its `status.imageTemplate`, if it has one.
    fn image_template(&self) -> Option<&ImageTemplateStatus>;
    /// It, as a reader of other objects.
    fn dependent(&self) -> Dependent;
    /// The API of its kind where it lives.
    fn api(&self, client: kube::Client) -> kube::Api<Self>;
}

impl Switched for Catalog {
    const KIND_NAME: &'static str = "Catalog";
    const HAS_IMAGE_TEMPLATE: bool = true;

    fn image(&self) -> Option<&str> {
        self.spec.source.image.as_ref().map(|i| i.r#ref.as_str())
    }

    fn unsuitable(&self) -> Option<String> {
        (self.spec.source.type_ != SourceType::Image).then(|| {
            format!(
                "spec.source.type is {}; the catalog-switcher writes image references only, so a template needs an image source",
                self.spec.source.type_.as_str()
            )
        })
    }

    fn image_patch(image: &str) -> serde_json::Value {
        json!({"source": {"type": "image", "image": {"ref": image}}})
    }

    fn conditions(&self) -> &[Condition] {
        self.status
            .as_ref()
            .map_or(&[], |s| s.conditions.as_slice())
    }

    fn image_template(&self) -> Option<&ImageTemplateStatus> {
        self.status.as_ref().and_then(|s| s.image_template.as_ref())
    }

    fn dependent(&self) -> Dependent {
        Dependent::Catalog(self.name_any())
    }

    fn api(&self, client: kube::Client) -> kube::Api<Self> {
        kube::Api::all(client)
    }
}

impl Switched for CatalogSource {
    const KIND_NAME: &'static str = "CatalogSource";
    const HAS_IMAGE_TEMPLATE: bool = false;

    fn image(&self) -> Option<&str> {
        self.spec.image.as_deref()
    }

    fn unsuitable(&self) -> Option<String> {
        // A v0 CatalogSource serves an image only as a grpc source (the default type).
        match self.spec.source_type.as_deref() {
            None | Some("grpc") => None,
            Some(other) => Some(format!(
                "spec.sourceType is {other}; the catalog-switcher writes spec.image, which only grpc sources use"
            )),
        }
    }

    fn image_patch(image: &str) -> serde_json::Value {
        json!({"image": image})
    }

    fn conditions(&self) -> &[Condition] {
        self.status
            .as_ref()
            .map_or(&[], |s| s.conditions.as_slice())
    }

    fn image_template(&self) -> Option<&ImageTemplateStatus> {
        None
    }

    fn dependent(&self) -> Dependent {
        Dependent::CatalogSource {
            namespace: self.namespace().unwrap_or_default(),
            name: self.name_any(),
        }
    }

    fn api(&self, client: kube::Client) -> kube::Api<Self> {
        kube::Api::namespaced(client, &self.namespace().unwrap_or_default())
    }
}
