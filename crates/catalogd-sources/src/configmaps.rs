//! The `configMaps` source: every key of each ConfigMap's `data` and `binaryData` becomes a
//! file under the entry's `path`. ConfigMaps live in catalogd's own namespace unless another
//! namespace is named and allowed by `--allowed-configmap-namespaces`.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use olm_api::catalog::{Catalog, ConfigMapSource, ResolvedConfigMap, ResolvedSource, SourceType};

use crate::contract::{Fetched, Mode, SourceError, read_object, reasons, since, too_large};

/// Reads catalog content from ConfigMaps.
pub struct ConfigMapsSource {
    client: Client,
    own_namespace: String,
    allowed_namespaces: Vec<String>,
    max_bytes: u64,
}

impl ConfigMapsSource {
    /// A source that reads ConfigMaps in `own_namespace` and in `allowed_namespaces`, holding
    /// at most `max_bytes` of content.
    pub fn new(
        client: Client,
        own_namespace: String,
        allowed_namespaces: Vec<String>,
        max_bytes: u64,
    ) -> Self {
        Self {
            client,
            own_namespace,
            allowed_namespaces,
            max_bytes,
        }
    }

    /// The namespace an entry reads, when allowed.
    pub fn namespace_of(&self, entry: &ConfigMapSource) -> Result<String, SourceError> {
        let ns = entry
            .config_map
            .namespace
            .clone()
            .unwrap_or_else(|| self.own_namespace.clone());
        if ns == self.own_namespace || self.allowed_namespaces.contains(&ns) {
            Ok(ns)
        } else {
            Err(SourceError::new(
                reasons::NAMESPACE_NOT_ALLOWED,
                format!(
                    "ConfigMap {ns}/{} is in namespace {ns:?}, which catalogd may not read; move it to {:?}, or start catalogd with --allowed-configmap-namespaces={ns} and grant it a Role to read ConfigMaps there",
                    entry.config_map.name, self.own_namespace
                ),
            ))
        }
    }

    /// Namespaces whose ConfigMaps catalogd watches.
    pub fn watched_namespaces(&self) -> Vec<String> {
        let mut all = vec![self.own_namespace.clone()];
        all.extend(
            self.allowed_namespaces
                .iter()
                .filter(|n| **n != self.own_namespace)
                .cloned(),
        );
        all
    }

    /// Reads the catalog's ConfigMaps (see [`super::Sources::fetch`]).
    pub async fn fetch(&self, catalog: &Catalog, mode: &Mode) -> Result<Fetched, SourceError> {
        let entries = catalog.spec.source.config_maps.clone().unwrap_or_default();
        let mut files = Vec::new();
        let mut read = Vec::new();
        let mut total: u64 = 0;
        for entry in &entries {
            let ns = self.namespace_of(entry)?;
            let name = &entry.config_map.name;
            let missing = SourceError::new(
                reasons::SOURCE_NOT_FOUND,
                format!(
                    "ConfigMap {ns}/{name} not found; the catalog unpacks as soon as it exists"
                ),
            );
            let cm: ConfigMap = read_object(&self.client, &ns, name, "ConfigMap", missing).await?;
            let dir = entry
                .path
                .as_deref()
                .map(|p| p.trim_end_matches('/'))
                .filter(|p| !p.is_empty() && *p != ".");
            let file = |key: &str| match dir {
                Some(d) => format!("{ns}/{name}/{d}/{key}"),
                None => format!("{ns}/{name}/{key}"),
            };
            // The same limit as any other source: the content, not the object, is what costs.
            total += cm
                .data
                .iter()
                .flatten()
                .map(|(_, v)| v.len() as u64)
                .sum::<u64>();
            total += cm
                .binary_data
                .iter()
                .flatten()
                .map(|(_, v)| v.0.len() as u64)
                .sum::<u64>();
            if total > self.max_bytes {
                return Err(too_large(
                    &format!("ConfigMap {ns}/{name}"),
                    self.max_bytes,
                    "the content",
                ));
            }
            // BTreeMaps: keys come in a stable order.
            for (key, value) in cm.data.unwrap_or_default() {
                files.push((file(&key), value.into_bytes()));
            }
            for (key, value) in cm.binary_data.unwrap_or_default() {
                files.push((file(&key), value.0));
            }
            read.push(ResolvedConfigMap {
                name: name.clone(),
                namespace: ns,
                uid: cm.metadata.uid.unwrap_or_default(),
                resource_version: cm.metadata.resource_version.unwrap_or_default(),
            });
        }
        let resolved = ResolvedSource {
            type_: Some(SourceType::ConfigMaps),
            config_maps: Some(read),
            ..Default::default()
        };
        // The same ConfigMap versions as the served content's: nothing to parse.
        if since(mode).is_some_and(|p| p.config_maps == resolved.config_maps) {
            return Ok(Fetched::Unchanged { resolved });
        }
        Ok(Fetched::Content { files, resolved })
    }
}
