//! Where a template's content comes from, and its format: what the template asks for, checked
//! before anything is fetched, and the `configMaps` source's content as a file tree.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use olm_api::bundle_deployment::{
    BundleConfigMapSource, BundleSpec, HELM_PROVISIONER, KUSTOMIZE_PROVISIONER, PLAIN_PROVISIONER,
    REGISTRY_PROVISIONER,
};
use olm_puller::image::reference::same_repository;

use crate::bundle::Tree;

/// Reasons of refusals (the `HasValidBundle` or `Unpacked` condition).
pub mod reasons {
    /// The source type is not one the provisioner fetches.
    pub const UNSUPPORTED_SOURCE: &str = "UnsupportedSource";
    /// The format (the template's class) is not one the provisioner installs.
    pub const UNSUPPORTED_FORMAT: &str = "UnsupportedFormat";
    /// The source is missing what its type needs, or is not allowed.
    pub const INVALID_SOURCE: &str = "InvalidSource";
}

/// A refusal: its reason and sentences a person can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Refusal {
    /// The condition reason.
    pub reason: &'static str,
    /// What is wrong and what to do.
    pub message: String,
}

fn refuse(reason: &'static str, message: impl Into<String>) -> Refusal {
    Refusal {
        reason,
        message: message.into(),
    }
}

/// A bundle format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// plain+v0: the objects of `manifests/`.
    Plain,
    /// registry+v1: the objects OLM makes of the bundle's ClusterServiceVersion.
    Registry,
    /// helm+v3: what `helm template` renders of the bundle's chart.
    Helm,
    /// kustomize: what `kustomize build` makes of the bundle's kustomization.
    Kustomize,
}

/// What the template asks to fetch.
#[derive(Debug, Clone, PartialEq)]
pub enum Wanted {
    /// A bundle image.
    Image {
        /// Its reference.
        reference: String,
        /// A pull secret in the provisioner's namespace.
        pull_secret: Option<String>,
    },
    /// ConfigMaps in the provisioner's namespace.
    ConfigMaps(Vec<BundleConfigMapSource>),
}

/// The format the template's class names.
pub fn format_of(spec: &BundleSpec) -> Result<Format, Refusal> {
    match spec.provisioner_class_name.as_str() {
        PLAIN_PROVISIONER => Ok(Format::Plain),
        REGISTRY_PROVISIONER => Ok(Format::Registry),
        HELM_PROVISIONER => Ok(Format::Helm),
        KUSTOMIZE_PROVISIONER => Ok(Format::Kustomize),
        other => Err(refuse(
            reasons::UNSUPPORTED_FORMAT,
            format!(
                "the template's provisionerClassName {other:?} names no bundle format this provisioner knows (it installs {PLAIN_PROVISIONER}, {REGISTRY_PROVISIONER}, {HELM_PROVISIONER} and {KUSTOMIZE_PROVISIONER})"
            ),
        )),
    }
}

/// What the template's source asks to fetch.
pub fn wanted(spec: &BundleSpec) -> Result<Wanted, Refusal> {
    let source = &spec.source;
    match source.type_.as_str() {
        "image" => {
            let image = source
                .image
                .as_ref()
                .filter(|i| !i.r#ref.trim().is_empty())
                .ok_or_else(|| {
                    refuse(
                        reasons::INVALID_SOURCE,
                        "source type image needs source.image.ref",
                    )
                })?;
            Ok(Wanted::Image {
                reference: image.r#ref.clone(),
                pull_secret: image.pull_secret.clone().filter(|s| !s.is_empty()),
            })
        }
        "configMaps" => {
            let maps = source.config_maps.clone().unwrap_or_default();
            if maps.is_empty() {
                return Err(refuse(
                    reasons::INVALID_SOURCE,
                    "source type configMaps needs at least one entry in source.configMaps",
                ));
            }
            for m in &maps {
                if let Some(path) = &m.path {
                    check_path(path)?;
                }
            }
            Ok(Wanted::ConfigMaps(maps))
        }
        other => Err(refuse(
            reasons::UNSUPPORTED_SOURCE,
            format!(
                "source type {other:?} is not fetched by this provisioner: put the bundle in an image (type image) or in immutable ConfigMaps (type configMaps)"
            ),
        )),
    }
}

/// What to fetch for `wanted` when `recorded` is the by-digest reference the status records
/// for it (`status.resolvedSource`, written when this template was installed): an image is
/// pulled by that digest, so the installed content is fetched exactly again (after a restart,
/// say), never a tag that moved since. A recorded reference of another repository is ignored:
/// the template alone says what may be pulled.
pub fn pinned(wanted: &Wanted, recorded: Option<&str>) -> Wanted {
    match (wanted, recorded) {
        (
            Wanted::Image {
                reference,
                pull_secret,
            },
            Some(by_digest),
        ) if by_digest.contains('@') && same_repository(reference, by_digest) => Wanted::Image {
            reference: by_digest.to_owned(),
            pull_secret: pull_secret.clone(),
        },
        _ => wanted.clone(),
    }
}

/// A `path` must stay inside the bundle: relative, without `..`.
fn check_path(path: &str) -> Result<(), Refusal> {
    if path.starts_with('/') || path.split('/').any(|c| c == "..") {
        return Err(refuse(
            reasons::INVALID_SOURCE,
            format!(
                "configMaps path {path:?} leaves the bundle: it must be relative and must not contain \"..\""
            ),
        ));
    }
    Ok(())
}

/// The bytes of a ConfigMap's content (its `data` and `binaryData` values).
pub fn config_map_bytes(map: &ConfigMap) -> u64 {
    let data: usize = map.data.iter().flatten().map(|(_, v)| v.len()).sum();
    let binary: usize = map
        .binary_data
        .iter()
        .flatten()
        .map(|(_, v)| v.0.len())
        .sum();
    (data + binary) as u64
}

/// The file tree of a `configMaps` source: each ConfigMap's keys (`data` and `binaryData`)
/// become files under its entry's `path`. Every ConfigMap must be immutable: content must not
/// change under an installed bundle without its template changing too.
pub fn config_maps_tree(entries: &[(BundleConfigMapSource, ConfigMap)]) -> Result<Tree, Refusal> {
    let mut files: BTreeMap<String, (String, Vec<u8>)> = BTreeMap::new();
    for (entry, map) in entries {
        let name = &entry.config_map.name;
        if map.immutable != Some(true) {
            return Err(refuse(
                reasons::INVALID_SOURCE,
                format!(
                    "ConfigMap {name} is not immutable: bundle content must not change under an installed bundle; create it with immutable: true"
                ),
            ));
        }
        let dir = entry.path.as_deref().unwrap_or_default().trim_matches('/');
        if !dir.is_empty() {
            check_path(dir)?;
        }
        let data = map
            .data
            .iter()
            .flatten()
            .map(|(k, v)| (k, v.as_bytes().to_vec()));
        let binary = map
            .binary_data
            .iter()
            .flatten()
            .map(|(k, v)| (k, v.0.clone()));
        for (key, content) in data.chain(binary) {
            let path = if dir.is_empty() {
                key.clone()
            } else {
                format!("{dir}/{key}")
            };
            if let Some((first, _)) = files.insert(path.clone(), (name.clone(), content)) {
                return Err(refuse(
                    reasons::INVALID_SOURCE,
                    format!("{path} is given twice: by ConfigMap {first} and by ConfigMap {name}"),
                ));
            }
        }
    }
    let tree = files
        .into_iter()
        .fold(Tree::new(), |tree, (path, (_, content))| {
            tree.file(&path, content)
        });
    Ok(tree)
}

#[cfg(test)]
mod tests;
