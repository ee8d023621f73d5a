//! The objects a rendering tool printed (Helm's or kustomize's output: YAML documents), read
//! as plain+v0 files are read (the same object twice refused), and the install namespace
//! given to the namespaced ones that name none, as `helm install` and `kubectl apply -n` place
//! them (pure: whether a kind is namespaced is asked of the caller).

use std::collections::BTreeSet;

use serde_json::Value;

use super::manifests;
use crate::object::{Key, Object};

/// Why a tool's output is not a set of objects.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderedError {
    /// It is not YAML.
    #[error("its output cannot be read: {0}")]
    Unreadable(String),
    /// A document is not an object.
    #[error("its output's document {index}: {problem}")]
    NotAnObject {
        /// The document's number, from 1.
        index: usize,
        /// What is missing.
        problem: crate::object::NotAnObject,
    },
    /// The same object twice.
    #[error("it rendered {0} twice")]
    Duplicate(Box<Key>),
    /// Nothing.
    #[error("it rendered no object")]
    Empty,
}

/// The objects of `output`, in its order.
pub fn objects(output: &[u8]) -> Result<Vec<Object>, RenderedError> {
    let docs = manifests::documents(output).map_err(|e| RenderedError::Unreadable(e.0))?;
    let mut seen = BTreeSet::new();
    let mut objects = Vec::with_capacity(docs.len());
    for (i, doc) in docs.into_iter().enumerate() {
        let object = Object::from_manifest(doc).map_err(|problem| RenderedError::NotAnObject {
            index: i + 1,
            problem,
        })?;
        if !seen.insert(object.key.clone()) {
            return Err(RenderedError::Duplicate(Box::new(object.key)));
        }
        objects.push(object);
    }
    if objects.is_empty() {
        return Err(RenderedError::Empty);
    }
    Ok(objects)
}

/// Whether a kind is namespaced: `Some(true)` or `Some(false)` when known, `None` when not.
pub type Scope<'a> = dyn Fn(&str, &str) -> Option<bool> + 'a;

/// `objects` with `namespace` set on every namespaced one that names none. Whether a kind is
/// namespaced is what a CRD among `objects` says (`spec.scope`), else what `served` says (the
/// cluster's discovery); a kind neither knows keeps no namespace (its apply then says the kind
/// is not served).
pub fn in_namespace(objects: Vec<Object>, namespace: &str, served: &Scope<'_>) -> Vec<Object> {
    // group/kind of the CRDs among the objects, and whether each is namespaced.
    let own: Vec<(String, String, bool)> = objects
        .iter()
        .filter(|o| {
            o.key.group == "apiextensions.k8s.io" && o.key.kind == "CustomResourceDefinition"
        })
        .filter_map(|o| {
            let spec = o.manifest.get("spec")?;
            let group = spec.get("group")?.as_str()?.to_owned();
            let kind = spec.get("names")?.get("kind")?.as_str()?.to_owned();
            let namespaced = spec.get("scope").and_then(Value::as_str) == Some("Namespaced");
            Some((group, kind, namespaced))
        })
        .collect();
    objects
        .into_iter()
        .map(|mut object| {
            if object.key.namespace.is_some() {
                return object;
            }
            let namespaced = own
                .iter()
                .find(|(g, k, _)| *g == object.key.group && *k == object.key.kind)
                .map(|(_, _, n)| *n)
                .or_else(|| served(&object.api_version, &object.key.kind));
            if namespaced == Some(true) {
                object.key.namespace = Some(namespace.to_owned());
                if let Some(meta) = object
                    .manifest
                    .get_mut("metadata")
                    .and_then(Value::as_object_mut)
                {
                    meta.insert("namespace".into(), namespace.into());
                }
            }
            object
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUTPUT: &str = "---\n# Source: demo/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n---\n# Source: demo/templates/role.yaml\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: demo\n---\napiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.com\nspec:\n  group: example.com\n  scope: Namespaced\n  names: {kind: Widget, plural: widgets}\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n  namespace: elsewhere\n";

    #[test]
    fn the_output_is_read_in_order_and_a_twice_rendered_object_refused() {
        let read = objects(OUTPUT.as_bytes()).unwrap();
        let keys: Vec<String> = read.iter().map(|o| o.key.to_string()).collect();
        assert_eq!(keys.len(), 5);
        assert!(keys[0].starts_with("ConfigMap demo"), "{keys:?}");
        let twice =
            format!("{OUTPUT}---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n");
        assert!(matches!(
            objects(twice.as_bytes()),
            Err(RenderedError::Duplicate(_))
        ));
        assert_eq!(objects(b"---\n# nothing\n"), Err(RenderedError::Empty));
        assert!(matches!(
            objects(b"kind: ConfigMap\n"),
            Err(RenderedError::NotAnObject { index: 1, .. })
        ));
    }

    #[test]
    fn namespaced_objects_without_a_namespace_go_to_the_install_namespace() {
        let served = |api_version: &str, kind: &str| match (api_version, kind) {
            ("v1", "ConfigMap" | "Secret") => Some(true),
            ("rbac.authorization.k8s.io/v1", "ClusterRole") => Some(false),
            _ => None,
        };
        let placed = in_namespace(objects(OUTPUT.as_bytes()).unwrap(), "shop", &served);
        let ns: Vec<Option<&str>> = placed.iter().map(|o| o.key.namespace.as_deref()).collect();
        // The ConfigMap (served), the Widget (its CRD in the set says Namespaced) get it; the
        // ClusterRole and the CRD do not; the Secret keeps its own.
        assert_eq!(
            ns,
            [Some("shop"), None, Some("shop"), None, Some("elsewhere")]
        );
        assert_eq!(placed[0].manifest["metadata"]["namespace"], "shop");
    }
}
