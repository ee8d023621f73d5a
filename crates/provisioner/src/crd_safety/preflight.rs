//! The check carried out against the cluster: each CRD of a bundle that exists and is this
//! BundleDeployment's is compared with its new version, and the existing custom resources are
//! read (a page at a time, so memory stays bounded whatever their number) and validated
//! against each served version whose schema changed.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::core::GroupVersionKind;
use kube::{Client, ResourceExt};
use serde_json::Value;

use super::validate::Schema;
use super::{Violation, changed_served, check, message, schema_of, served};
use crate::marks::{Ownership, ownership_of};
use crate::object::Object;

/// How many custom resources a list page holds.
const PAGE: u32 = 200;

/// Why the preflight stopped the upgrade.
#[derive(Debug, thiserror::Error)]
pub enum PreflightError {
    /// A CRD change is unsafe; the message names each violation.
    #[error("{0}")]
    Unsafe(String),
    /// Reading the cluster failed.
    #[error("{what}: {source}")]
    Read {
        /// What was being read.
        what: String,
        /// The client error.
        source: kube::Error,
    },
}

fn is_crd(object: &Object) -> bool {
    object.key.group == "apiextensions.k8s.io" && object.key.kind == "CustomResourceDefinition"
}

/// Checks every CRD among `objects` that the BundleDeployment `owner` installed before.
pub async fn preflight(
    client: &Client,
    owner: &str,
    objects: &[Object],
) -> Result<(), PreflightError> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut refused = Vec::new();
    for object in objects.iter().filter(|o| is_crd(o)) {
        let name = &object.key.name;
        let live = crds
            .get_opt(name)
            .await
            .map_err(|source| PreflightError::Read {
                what: format!("reading CustomResourceDefinition {name}"),
                source,
            })?;
        // Absent: a first install. Not ours: the conflict check refuses it. One this
        // BundleDeployment kept on an uninstall is compared before it is taken back.
        let Some(live) = live.filter(|l| ownership_of(&l.metadata, true, owner) == Ownership::Ours)
        else {
            continue;
        };
        let old = serde_json::to_value(&live).unwrap_or(Value::Null);
        let new = Value::Object(object.manifest.clone());
        let mut violations = check(&old, &new);
        for version in changed_served(&old, &new) {
            if let Some(v) = existing_objects(client, &old, &new, &version).await? {
                violations.push(v);
            }
        }
        if !violations.is_empty() {
            refused.push(message(name, &violations));
        }
    }
    if refused.is_empty() {
        Ok(())
    } else {
        Err(PreflightError::Unsafe(refused.join(" ")))
    }
}

/// `/spec/size` as `^.spec.size`.
fn field(pointer: &str) -> String {
    format!("^{}", pointer.replace('/', "."))
        .trim_end_matches('.')
        .to_owned()
}

/// The first existing custom resource that `version`'s new schema would refuse, as a
/// violation, or none.
async fn existing_objects(
    client: &Client,
    old: &Value,
    new: &Value,
    version: &str,
) -> Result<Option<Violation>, PreflightError> {
    let violation = |field: String, detail: String| Violation {
        version: version.to_owned(),
        field,
        check: "existingObjects",
        detail,
    };
    let Some(openapi) = schema_of(new, version) else {
        return Ok(None);
    };
    let schema = match Schema::compile(openapi) {
        Ok(s) => s,
        Err(e) => return Ok(Some(violation("^".into(), e.to_string()))),
    };
    // Read at the version itself when the live CRD serves it; a version the upgrade adds is
    // read at one the live CRD serves, which without a conversion webhook is the same object.
    let webhook = new
        .pointer("/spec/conversion/strategy")
        .and_then(Value::as_str)
        == Some("Webhook");
    let old_served = served(old);
    let read_at = if old_served.iter().any(|v| v == version) {
        version.to_owned()
    } else if webhook {
        return Ok(None);
    } else {
        match old_served.into_iter().next() {
            Some(v) => v,
            None => return Ok(None),
        }
    };
    let text = |p: &str| {
        old.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let (group, kind, plural) = (
        text("/spec/group"),
        text("/spec/names/kind"),
        text("/spec/names/plural"),
    );
    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, &read_at, &kind), &plural);
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let mut params = ListParams::default().limit(PAGE);
    loop {
        let page = api
            .list(&params)
            .await
            .map_err(|source| PreflightError::Read {
                what: format!("listing {plural}.{group} at {read_at}"),
                source,
            })?;
        for item in &page.items {
            let mut value = serde_json::to_value(item).unwrap_or(Value::Null);
            // Only the name and namespace of metadata are the schema's business (the API server
            // validates the rest itself); the version is the one the schema is for.
            if let Some(map) = value.as_object_mut() {
                map.insert(
                    "apiVersion".into(),
                    Value::String(format!("{group}/{version}")),
                );
                let mut metadata = serde_json::json!({"name": item.name_any()});
                if let (Some(ns), Some(m)) = (item.namespace(), metadata.as_object_mut()) {
                    m.insert("namespace".into(), Value::String(ns));
                }
                map.insert("metadata".into(), metadata);
            }
            if let Some(error) = schema.first_error(&value) {
                let (pointer, why) = error.split_once(": ").unwrap_or(("/", error.as_str()));
                let who = match item.namespace() {
                    Some(ns) => format!("{ns}/{}", item.name_any()),
                    None => item.name_any(),
                };
                return Ok(Some(violation(
                    field(pointer),
                    format!("{kind} {who} would no longer validate: {why}"),
                )));
            }
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(None),
        }
    }
}
