//! An object of a bundle, and the key that identifies it in the cluster.

use std::fmt;

use serde_json::{Map, Value};

/// What identifies an object in the cluster: its group and kind (not the version: one object
/// is served under every version of its kind), namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    /// API group (`""` for the core group).
    pub group: String,
    /// Kind.
    pub kind: String,
    /// Namespace, as the manifest gives it (`None`: cluster-scoped, or the default namespace).
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

impl Key {
    /// The key of `name` of `kind` in `group`, in `namespace` if namespaced.
    pub fn new(group: &str, kind: &str, namespace: Option<&str>, name: &str) -> Key {
        Key {
            group: group.to_owned(),
            kind: kind.to_owned(),
            namespace: namespace.map(str::to_owned),
            name: name.to_owned(),
        }
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.group.is_empty() {
            self.kind.clone()
        } else {
            format!("{}.{}", self.kind, self.group)
        };
        match &self.namespace {
            Some(ns) => write!(f, "{kind} {ns}/{}", self.name),
            None => write!(f, "{kind} {}", self.name),
        }
    }
}

/// One object of a bundle: the manifest as written, with what identifies it.
#[derive(Debug, Clone, PartialEq)]
pub struct Object {
    /// `apiVersion`, e.g. `apps/v1`.
    pub api_version: String,
    /// Its key.
    pub key: Key,
    /// The whole manifest.
    pub manifest: Map<String, Value>,
}

/// Why a manifest is not an object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotAnObject {
    /// Not a mapping.
    #[error("a document is not an object")]
    NotAMapping,
    /// A required field is missing or empty.
    #[error("an object has no {0}")]
    Missing(&'static str),
}

impl Object {
    /// The object `manifest` describes: it must have `apiVersion`, `kind` and
    /// `metadata.name`, each a non-empty string.
    pub fn from_manifest(manifest: Value) -> Result<Object, NotAnObject> {
        let Value::Object(manifest) = manifest else {
            return Err(NotAnObject::NotAMapping);
        };
        let text = |v: Option<&Value>| {
            v.and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        };
        let api_version =
            text(manifest.get("apiVersion")).ok_or(NotAnObject::Missing("apiVersion"))?;
        let kind = text(manifest.get("kind")).ok_or(NotAnObject::Missing("kind"))?;
        let metadata = manifest.get("metadata");
        let name = text(metadata.and_then(|m| m.get("name")))
            .ok_or(NotAnObject::Missing("metadata.name"))?;
        let namespace = text(metadata.and_then(|m| m.get("namespace")));
        let group = api_version
            .rsplit_once('/')
            .map(|(g, _)| g.to_owned())
            .unwrap_or_default();
        Ok(Object {
            api_version,
            key: Key {
                group,
                kind,
                namespace,
                name,
            },
            manifest,
        })
    }
}

/// An object as it is held between reconciles: what identifies it, and its manifest as compact
/// JSON text. A parsed manifest takes several times its text (a CRD's schema many times), and a
/// provisioner holds every installed bundle; the manifests are parsed again only when they are
/// applied (an upgrade, a retry, a drifted object restored).
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    /// `apiVersion`.
    pub api_version: String,
    /// Its key.
    pub key: Key,
    text: Box<str>,
}

impl Stored {
    /// `object`, held.
    pub fn of(object: &Object) -> Stored {
        Stored {
            api_version: object.api_version.clone(),
            key: object.key.clone(),
            // A map of JSON values always serializes.
            text: serde_json::to_string(&object.manifest)
                .unwrap_or_default()
                .into_boxed_str(),
        }
    }

    /// The bytes of its manifest's text.
    pub fn bytes(&self) -> u64 {
        self.text.len() as u64
    }

    /// The object again.
    pub fn object(&self) -> Result<Object, NotAnObject> {
        let manifest = serde_json::from_str::<Map<String, Value>>(&self.text)
            .map_err(|_| NotAnObject::NotAMapping)?;
        Ok(Object {
            api_version: self.api_version.clone(),
            key: self.key.clone(),
            manifest,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_key_comes_from_group_kind_namespace_and_name() {
        let o = Object::from_manifest(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "shop"}
        }))
        .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(o.key.group, "apps");
        assert_eq!(o.key.to_string(), "Deployment.apps shop/web");
        let core = Object::from_manifest(json!({
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}
        }))
        .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(core.key.group, "");
        assert_eq!(core.key.to_string(), "Namespace shop");
    }

    #[test]
    fn a_stored_object_is_the_object_again_keys_as_placed() {
        let mut o = Object::from_manifest(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "w.example.com"},
            "spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": {"type": "object"}}}]}
        }))
        .unwrap_or_else(|e| unreachable!("{e}"));
        // A format may place an object (its key) apart from its manifest.
        o.key.namespace = Some("moved".into());
        let stored = Stored::of(&o);
        assert_eq!(stored.object(), Ok(o.clone()));
        assert_eq!(stored.key, o.key);
        assert!(stored.bytes() > 0);
    }

    #[test]
    fn an_object_needs_api_version_kind_and_name() {
        let cases = [
            (json!([1]), NotAnObject::NotAMapping),
            (
                json!({"kind": "A", "metadata": {"name": "a"}}),
                NotAnObject::Missing("apiVersion"),
            ),
            (
                json!({"apiVersion": "v1", "metadata": {"name": "a"}}),
                NotAnObject::Missing("kind"),
            ),
            (
                json!({"apiVersion": "v1", "kind": "A"}),
                NotAnObject::Missing("metadata.name"),
            ),
            (
                json!({"apiVersion": "v1", "kind": "A", "metadata": {"name": ""}}),
                NotAnObject::Missing("metadata.name"),
            ),
        ];
        for (manifest, want) in cases {
            assert_eq!(Object::from_manifest(manifest), Err(want));
        }
    }
}
