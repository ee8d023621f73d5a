//! registry+v1 (`core-rukpak-io-registry`): the objects OLM makes of a bundle's
//! ClusterServiceVersion, as operator-controller renders them (its `registryv1` generators;
//! rukpak v0.16's conversion before it), in the install mode [`modes`] decides:
//!
//! * the install Namespace, unless the BundleDeployment names one (then it is the user's and
//!   must exist): the CSV's `operatorframework.io/suggested-namespace`, else
//!   `<package>-system` (rukpak v0.16 made it);
//! * a ServiceAccount for each one the permissions and Deployments name (`default`, and one the
//!   bundle ships, excepted);
//! * the RBAC of [`rbac`]: ClusterRoles for `clusterPermissions`, and for `permissions` either
//!   promoted ClusterRoles (all namespaces) or Roles in the install and watched namespaces,
//!   named by [`names::rbac_name`];
//! * the CRDs, as written;
//! * the other objects of [`kinds`], namespaced ones moved to the install namespace (and
//!   cluster-scoped ones out of any);
//! * the Deployments of `spec.install.spec.deployments`, in the install namespace, with the
//!   CSV's annotations (and `olm.targetNamespaces`, `olm.operatorNamespace`) on their Pod
//!   templates and `revisionHistoryLimit: 1`.
//!
//! * the webhook configurations, CRD conversion and APIServices of [`webhooks`] and
//!   [`apiservices`], with the Services of [`services`] in front of the Deployments serving
//!   them (each a [`Serving`] whose certificate crate::certs issues and injects).
//!
//! Refused: an install mode the CSV does not support (see [`modes`]); with upstream's words,
//! webhooks upstream's validators refuse, no package name; beyond upstream, more than one CSV
//! (upstream keeps the last one read), v1beta1 CRDs (no server of 1.22 or later serves them),
//! and the same object twice.

pub mod apiservices;
pub mod csv;
pub mod deployment_config;
pub mod kinds;
pub mod modes;
pub mod names;
pub mod rbac;
pub mod services;
pub mod webhooks;

pub use services::Serving;

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use super::manifests;
use crate::bundle::Tree;
use crate::object::{Key, NotAnObject, Object};
use crate::settings::Settings;
use csv::Csv;
use modes::{Mode, ModeError};

/// Where a registry+v1 bundle keeps its manifests.
pub const MANIFESTS: &str = "manifests";
/// Where it names its package.
pub const ANNOTATIONS: &str = "metadata/annotations.yaml";
/// The annotation of [`ANNOTATIONS`] that names the package.
pub const PACKAGE_ANNOTATION: &str = "operators.operatorframework.io.bundle.package.v1";
/// The CSV annotation that suggests an install namespace.
pub const SUGGESTED_NAMESPACE: &str = "operatorframework.io/suggested-namespace";

/// Why a tree is not a registry+v1 bundle this provisioner installs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// No `metadata/annotations.yaml`.
    #[error(
        "open {ANNOTATIONS}: file does not exist: a registry+v1 bundle names its package there ({PACKAGE_ANNOTATION})"
    )]
    NoAnnotations,
    /// `metadata/annotations.yaml` names no package.
    #[error("package name is empty: {ANNOTATIONS} has no {PACKAGE_ANNOTATION}")]
    NoPackage,
    /// No `manifests/` directory.
    #[error("readdir {MANIFESTS}: file does not exist")]
    NoManifests,
    /// A directory inside `manifests/`.
    #[error(
        "subdirectories are not allowed within the \"manifests\" directory of the bundle image filesystem: found {0:?}"
    )]
    Subdirectory(String),
    /// A file cannot be read.
    #[error("{file}: {message}")]
    Unreadable {
        /// The file.
        file: String,
        /// What is wrong.
        message: String,
    },
    /// A document is not a whole object.
    #[error("{file}: document {index}: {problem}")]
    NotAnObject {
        /// The file.
        file: String,
        /// Its number in the file, from 1.
        index: usize,
        /// What is missing.
        problem: NotAnObject,
    },
    /// No CSV.
    #[error("no ClusterServiceVersion found in \"{MANIFESTS}\"")]
    NoCsv,
    /// More than one CSV.
    #[error(
        "more than one ClusterServiceVersion: {first} and {second}; a registry+v1 bundle has exactly one"
    )]
    SeveralCsvs {
        /// The first.
        first: String,
        /// Another.
        second: String,
    },
    /// The CSV does not read as one.
    #[error("the ClusterServiceVersion {file} is invalid: {message}")]
    InvalidCsv {
        /// Its file.
        file: String,
        /// What is wrong.
        message: String,
    },
    /// The namespaces asked make an install mode the CSV does not support.
    #[error(transparent)]
    Mode(#[from] ModeError),
    /// Its webhooks break upstream's rules.
    #[error("invalid webhook definitions: {}", .0.join("; "))]
    InvalidWebhooks(Vec<String>),
    /// Its owned APIServices are not whole.
    #[error("invalid APIService definitions: {}", .0.join("; "))]
    InvalidApiServices(Vec<String>),
    /// An install strategy other than Deployments.
    #[error("unsupported bundle: install strategy {0:?} is not supported (only \"deployment\")")]
    Strategy(String),
    /// A kind that may not be in a bundle.
    #[error("bundle contains unsupported resource: Name: {name}, Kind: {kind}")]
    UnsupportedKind {
        /// The object's name.
        name: String,
        /// Its kind.
        kind: String,
    },
    /// A CRD of an API version no current server serves.
    #[error(
        "CustomResourceDefinition {0} is apiextensions.k8s.io/v1beta1, which Kubernetes 1.22 and later do not serve; the bundle needs apiextensions.k8s.io/v1"
    )]
    BetaCrd(String),
    /// The CSV owns a CRD the bundle lacks.
    #[error(
        "cluster service definition references owned custom resource definition '{0}' not found in bundle"
    )]
    MissingOwnedCrd(String),
    /// The same object twice.
    #[error("{0} is defined twice")]
    Duplicate(Box<Key>),
}

/// A manifest with where it came from.
struct Found {
    file: String,
    object: Object,
}

/// The objects of the registry+v1 bundle `tree`, installed as nothing asked: in its suggested
/// namespace (else `<package>-system`), watching all namespaces (else its own).
pub fn objects(tree: &Tree) -> Result<Vec<Object>, RegistryError> {
    objects_for(tree, &Settings::default())
}

/// The objects of the registry+v1 bundle `tree`, installed as `settings` ask (see [`render`]).
pub fn objects_for(tree: &Tree, settings: &Settings) -> Result<Vec<Object>, RegistryError> {
    render(tree, settings).map(|r| r.objects)
}

/// A bundle's objects, and the Deployments among them that serve webhooks or APIServices (their
/// certificates are not in the objects: they are issued and injected apart, as they change
/// without the bundle changing).
#[derive(Debug, Clone, Default)]
pub struct Rendered {
    /// The objects.
    pub objects: Vec<Object>,
    /// What needs a serving certificate.
    pub serving: Vec<Serving>,
}

/// The objects of the registry+v1 bundle `tree`, installed as `settings` ask: in the namespace
/// named (which is the user's, so not made), else its suggested namespace, else
/// `<package>-system` (made); watching the namespaces named, else all, else its own.
pub fn render(tree: &Tree, settings: &Settings) -> Result<Rendered, RegistryError> {
    let package = package(tree)?;
    let found = manifests_of(tree)?;
    let mut csv_file = None;
    let (mut crds, mut others) = (Vec::new(), Vec::new());
    for f in found {
        match f.object.key.kind.as_str() {
            "ClusterServiceVersion" => {
                if let Some((first, _)) = &csv_file {
                    return Err(RegistryError::SeveralCsvs {
                        first: String::clone(first),
                        second: f.file,
                    });
                }
                csv_file = Some((f.file, f.object));
            }
            "CustomResourceDefinition" => crds.push(f.object),
            _ => others.push(f.object),
        }
    }
    let (file, csv_object) = csv_file.ok_or(RegistryError::NoCsv)?;
    let csv: Csv = serde_json::from_value(Value::Object(csv_object.manifest)).map_err(|e| {
        RegistryError::InvalidCsv {
            file: file.clone(),
            message: e.to_string(),
        }
    })?;
    check_supported(&csv)?;
    let namespace = settings
        .namespace
        .clone()
        .or_else(|| {
            csv.metadata
                .annotations
                .get(SUGGESTED_NAMESPACE)
                .filter(|n| !n.is_empty())
                .cloned()
        })
        .unwrap_or_else(|| format!("{package}-system"));

    let others = others
        .into_iter()
        .map(|o| placed(o, &namespace))
        .collect::<Result<Vec<_>, _>>()?;
    let mut out = Vec::new();
    if settings.namespace.is_none() {
        out.push(namespace_object(&namespace));
    }
    // A ServiceAccount the bundle ships (with its annotations or pull secrets) is used as it
    // is, as OLM uses an existing one, rather than made again.
    let shipped: BTreeSet<&Key> = others.iter().map(|o| &o.key).collect();
    out.extend(
        service_accounts(&csv, &namespace)
            .into_iter()
            .filter(|a| !shipped.contains(&a.key)),
    );
    for crd in &crds {
        if crd.api_version == "apiextensions.k8s.io/v1beta1" {
            return Err(RegistryError::BetaCrd(crd.key.name.clone()));
        }
    }
    let names: BTreeSet<&str> = crds.iter().map(|c| c.key.name.as_str()).collect();
    if let Some(missing) = csv
        .spec
        .customresourcedefinitions
        .owned
        .iter()
        .find(|o| !names.contains(o.name.as_str()))
    {
        return Err(RegistryError::MissingOwnedCrd(missing.name.clone()));
    }
    webhooks::check(&csv)?;
    apiservices::check(&csv)?;
    // The mode last: a bundle that is not valid is said to be so first, as upstream says it.
    let mode = modes::decide(&csv, &namespace, settings.watch.as_deref())?;
    out.extend(rbac::objects(&csv, &namespace, &mode));
    out.extend(webhooks::with_conversion(&csv, &namespace, crds)?);
    out.extend(others);
    out.extend(deployments(
        &csv,
        &namespace,
        &mode,
        settings.deployment.as_ref(),
    ));
    out.extend(webhooks::configurations(&csv, &namespace, &mode));
    out.extend(services::objects(&csv, &namespace));
    out.extend(apiservices::objects(&csv, &namespace));
    let mut seen = BTreeSet::new();
    for o in &out {
        if !seen.insert(&o.key) {
            return Err(RegistryError::Duplicate(Box::new(o.key.clone())));
        }
    }
    Ok(Rendered {
        objects: out,
        serving: services::serving(&csv, &namespace),
    })
}

/// The package `metadata/annotations.yaml` names.
fn package(tree: &Tree) -> Result<String, RegistryError> {
    let content = tree.get(ANNOTATIONS).ok_or(RegistryError::NoAnnotations)?;
    let docs = manifests::documents(content).map_err(|e| RegistryError::Unreadable {
        file: ANNOTATIONS.to_owned(),
        message: e.0,
    })?;
    docs.first()
        .and_then(|d| d.pointer("/annotations"))
        .and_then(|a| a.get(PACKAGE_ANNOTATION))
        .and_then(Value::as_str)
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .ok_or(RegistryError::NoPackage)
}

/// Every object of every file directly in `manifests/`, in file-name order.
fn manifests_of(tree: &Tree) -> Result<Vec<Found>, RegistryError> {
    if !tree.is_dir(MANIFESTS) {
        return Err(RegistryError::NoManifests);
    }
    let mut found = Vec::new();
    for (file, content) in tree.read_dir(MANIFESTS) {
        let Some(content) = content else {
            return Err(RegistryError::Subdirectory(file.to_owned()));
        };
        let docs = manifests::documents(content).map_err(|e| RegistryError::Unreadable {
            file: file.to_owned(),
            message: e.0,
        })?;
        for (i, doc) in docs.into_iter().enumerate() {
            let object =
                Object::from_manifest(doc).map_err(|problem| RegistryError::NotAnObject {
                    file: file.to_owned(),
                    index: i + 1,
                    problem,
                })?;
            found.push(Found {
                file: file.to_owned(),
                object,
            });
        }
    }
    Ok(found)
}

/// What the CSV asks for that is not installed here: an install strategy other than OLM's
/// one (`deployment`).
fn check_supported(csv: &Csv) -> Result<(), RegistryError> {
    let strategy = csv.spec.install.strategy.as_str();
    if !strategy.is_empty() && strategy != "deployment" {
        return Err(RegistryError::Strategy(strategy.to_owned()));
    }
    Ok(())
}

/// An object made here: `manifest` (with `apiVersion`, `kind` and `metadata` as given) and its
/// key.
pub(crate) fn made(
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
    manifest: Value,
) -> Object {
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    Object {
        api_version: api_version.to_owned(),
        key: Key::new(group, kind, namespace, name),
        manifest: match manifest {
            Value::Object(m) => m,
            _ => Map::new(),
        },
    }
}

fn namespace_object(namespace: &str) -> Object {
    made(
        "v1",
        "Namespace",
        None,
        namespace,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
    )
}

/// The ServiceAccount a permission or a Pod names (`default` when empty).
fn account_or_default(name: &str) -> &str {
    if name.is_empty() { "default" } else { name }
}

/// One ServiceAccount per name the permissions and the Deployments use, `default` excepted
/// (every namespace has it), in name order.
fn service_accounts(csv: &Csv, namespace: &str) -> Vec<Object> {
    let strategy = &csv.spec.install.spec;
    let from_permissions = strategy
        .permissions
        .iter()
        .chain(&strategy.cluster_permissions)
        .map(|p| account_or_default(&p.service_account_name).to_owned());
    let from_pods = strategy
        .deployments
        .iter()
        .map(|d| d.service_account().to_owned());
    let names: BTreeSet<String> = from_permissions.chain(from_pods).collect();
    names
        .iter()
        .filter(|n| *n != "default")
        .map(|name| {
            made(
                "v1",
                "ServiceAccount",
                Some(namespace),
                name,
                json!({"apiVersion": "v1", "kind": "ServiceAccount",
                    "metadata": {"name": name, "namespace": namespace}}),
            )
        })
        .collect()
}

/// A bundle's own object: of an allowed kind, in the install namespace if namespaced.
fn placed(mut other: Object, namespace: &str) -> Result<Object, RegistryError> {
    let namespaced =
        kinds::supported(&other.key.kind).ok_or_else(|| RegistryError::UnsupportedKind {
            name: other.key.name.clone(),
            kind: other.key.kind.clone(),
        })?;
    // Namespaced: in the install namespace; cluster-scoped: in none, whatever it says.
    other.key.namespace = namespaced.then(|| namespace.to_owned());
    if let Some(Value::Object(meta)) = other.manifest.get_mut("metadata") {
        match &other.key.namespace {
            Some(ns) => meta.insert("namespace".into(), Value::String(ns.clone())),
            None => meta.remove("namespace"),
        };
    }
    Ok(other)
}

/// The CSV's Deployments, their operators watching as `mode` says, with the per-install
/// settings `config`.
fn deployments(
    csv: &Csv,
    namespace: &str,
    mode: &Mode,
    config: Option<&deployment_config::DeploymentConfig>,
) -> Vec<Object> {
    csv.spec
        .install
        .spec
        .deployments
        .iter()
        .map(|d| {
            let mut spec = d.spec.clone();
            spec.insert("revisionHistoryLimit".into(), json!(1));
            let mut template = take_object(&mut spec, "template");
            let mut meta = take_object(&mut template, "metadata");
            let own = take_object(&mut meta, "annotations");
            // The CSV's annotations, the template's own over them, then OLM's two.
            let mut annotations: BTreeMap<String, Value> = csv
                .metadata
                .annotations
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect();
            annotations.extend(own);
            annotations.insert("olm.targetNamespaces".into(), json!(mode.annotation()));
            annotations.insert("olm.operatorNamespace".into(), json!(namespace));
            meta.insert(
                "annotations".into(),
                Value::Object(annotations.into_iter().collect()),
            );
            template.insert("metadata".into(), Value::Object(meta));
            spec.insert("template".into(), Value::Object(template));
            let mut metadata = json!({"name": d.name, "namespace": namespace});
            if let Some(labels) = &d.label {
                metadata["labels"] = json!(labels);
            }
            if let (Some(config), Value::Object(meta)) = (config, &mut metadata) {
                deployment_config::apply(config, meta, &mut spec);
            }
            made(
                "apps/v1",
                "Deployment",
                Some(namespace),
                &d.name,
                json!({"apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": metadata, "spec": spec}),
            )
        })
        .collect()
}

/// The object at `key` of `map`, taken out (empty if missing or not an object).
fn take_object(map: &mut Map<String, Value>, key: &str) -> Map<String, Value> {
    match map.remove(key) {
        Some(Value::Object(inner)) => inner,
        _ => Map::new(),
    }
}

#[cfg(test)]
mod tests;
