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
    /// The namespace its template's objects must be in (namespaced kinds), if any.
    fn confined_to(&self) -> Option<String>;
    /// What `{jsonpath:…}` reads of it: the fields its owner sets (name, namespace, labels,
    /// annotations, spec), without the reference the switcher writes and without what changes
    /// on every write (generation, resourceVersion, managedFields, status), so a template on
    /// itself cannot chase its own writes.
    fn itself(&self) -> serde_json::Value {
        let mut value = serde_json::to_value(self).unwrap_or_default();
        let meta = value.get("metadata").cloned().unwrap_or_default();
        let mut kept = serde_json::Map::new();
        for key in ["name", "namespace", "labels", "annotations"] {
            if let Some(v) = meta.get(key) {
                kept.insert(key.to_owned(), v.clone());
            }
        }
        value["metadata"] = serde_json::Value::Object(kept);
        if let Some(obj) = value.as_object_mut() {
            obj.remove("status");
        }
        Self::forget_image(&mut value);
        value
    }
    /// Removes the reference from its JSON.
    fn forget_image(value: &mut serde_json::Value);
    /// Whether `dependent` is an object of this kind.
    fn owns(dependent: &Dependent) -> bool;
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
        // Only the reference: `source.type` stays its owner's alone (it is `image` already).
        json!({"source": {"image": {"ref": image}}})
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

    fn confined_to(&self) -> Option<String> {
        None
    }

    fn owns(dependent: &Dependent) -> bool {
        matches!(dependent, Dependent::Catalog(_))
    }

    fn forget_image(value: &mut serde_json::Value) {
        if let Some(image) = value
            .pointer_mut("/spec/source/image")
            .and_then(|i| i.as_object_mut())
        {
            image.remove("ref");
        }
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

    fn confined_to(&self) -> Option<String> {
        self.namespace()
    }

    fn owns(dependent: &Dependent) -> bool {
        matches!(dependent, Dependent::CatalogSource { .. })
    }

    fn forget_image(value: &mut serde_json::Value) {
        if let Some(spec) = value.get_mut("spec").and_then(|s| s.as_object_mut()) {
            spec.remove("image");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_template_on_itself_sees_neither_its_own_writes_nor_what_every_write_changes() {
        let catalog: Catalog = serde_json::from_value(json!({
            "apiVersion": "catalogd.operatorframework.io/v1alpha1", "kind": "Catalog",
            "metadata": {"name": "c", "generation": 7, "resourceVersion": "42",
                         "labels": {"channel": "stable"}, "managedFields": [{"manager": "x"}]},
            "spec": {"source": {"type": "image", "image": {"ref": "r/c:1", "pollInterval": "10m"}}},
            "status": {"contentHash": "abc"}
        }))
        .unwrap();
        let seen = catalog.itself();
        assert_eq!(
            seen["metadata"],
            json!({"name": "c", "labels": {"channel": "stable"}})
        );
        assert_eq!(
            seen["spec"]["source"]["image"],
            json!({"pollInterval": "10m"})
        );
        assert!(seen.get("status").is_none());

        let source: CatalogSource = serde_json::from_value(json!({
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
            "metadata": {"name": "s", "namespace": "ns", "generation": 3},
            "spec": {"sourceType": "grpc", "image": "r/c:1", "displayName": "D"}
        }))
        .unwrap();
        let seen = source.itself();
        assert_eq!(seen["metadata"], json!({"name": "s", "namespace": "ns"}));
        assert_eq!(
            seen["spec"],
            json!({"sourceType": "grpc", "displayName": "D"})
        );
        assert_eq!(source.confined_to().as_deref(), Some("ns"));
        assert_eq!(catalog.confined_to(), None);
    }
}
