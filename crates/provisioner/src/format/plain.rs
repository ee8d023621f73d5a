//! plain+v0 (`core-rukpak-io-plain`): every object of every file directly in `manifests/`.
//! Refusals say what upstream's plain provisioner says (rukpak v0.16 `internal/provisioner/
//! plain`), plus our own for what it let through: an object without `apiVersion`, `kind` or
//! name, and the same object twice.

use std::collections::BTreeMap;

use super::manifests;
use crate::bundle::Tree;
use crate::object::{Key, NotAnObject, Object};

/// The directory of a plain bundle's manifests.
pub const MANIFESTS: &str = "manifests";

/// Why a tree is not a plain+v0 bundle.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlainError {
    /// No `manifests/` directory (upstream: "readdir manifests: file does not exist").
    #[error(
        "readdir manifests: file does not exist: a plain+v0 bundle keeps its objects in a manifests/ directory at its root"
    )]
    NoManifests,
    /// A directory inside `manifests/`.
    #[error(
        "subdirectories are not allowed within the \"manifests\" directory of the bundle image filesystem: found {0:?}"
    )]
    Subdirectory(String),
    /// `manifests/` holds no object.
    #[error(
        "invalid bundle: found zero objects: plain+v0 bundles are required to contain at least one object"
    )]
    NoObjects,
    /// A file cannot be read as manifests.
    #[error("{file}: {message}")]
    Unreadable {
        /// The file.
        file: String,
        /// What is wrong.
        message: String,
    },
    /// A document is not an object with `apiVersion`, `kind` and a name.
    #[error("{file}: document {index}: {problem}")]
    NotAnObject {
        /// The file.
        file: String,
        /// The document's number in the file, from 1 (after `List`s are flattened).
        index: usize,
        /// What is missing.
        problem: NotAnObject,
    },
    /// The same object twice.
    #[error("{key} is defined twice: in {first} and in {second}")]
    Duplicate {
        /// The object.
        key: Box<Key>,
        /// Where it is defined first.
        first: String,
        /// Where again.
        second: String,
    },
}

/// The objects of the plain+v0 bundle `tree`, in file-name order and in order within a file.
pub fn objects(tree: &Tree) -> Result<Vec<Object>, PlainError> {
    if !tree.is_dir(MANIFESTS) {
        return Err(PlainError::NoManifests);
    }
    let entries = tree.read_dir(MANIFESTS);
    if let Some((dir, _)) = entries.iter().find(|(_, content)| content.is_none()) {
        return Err(PlainError::Subdirectory((*dir).to_owned()));
    }
    let mut objects = Vec::new();
    let mut seen: BTreeMap<Key, String> = BTreeMap::new();
    for (file, content) in entries {
        let docs = manifests::documents(content.unwrap_or_default()).map_err(|e| {
            PlainError::Unreadable {
                file: file.to_owned(),
                message: e.0,
            }
        })?;
        for (i, doc) in docs.into_iter().enumerate() {
            let object = Object::from_manifest(doc).map_err(|problem| PlainError::NotAnObject {
                file: file.to_owned(),
                index: i + 1,
                problem,
            })?;
            if let Some(first) = seen.insert(object.key.clone(), file.to_owned()) {
                return Err(PlainError::Duplicate {
                    key: Box::new(object.key),
                    first,
                    second: file.to_owned(),
                });
            }
            objects.push(object);
        }
    }
    if objects.is_empty() {
        return Err(PlainError::NoObjects);
    }
    Ok(objects)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG_MAP: &str =
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: game-demo\ndata:\n  lives: \"3\"\n";

    fn keys(tree: &Tree) -> Vec<String> {
        objects(tree)
            .unwrap_or_else(|e| unreachable!("{e}"))
            .iter()
            .map(|o| o.key.to_string())
            .collect()
    }

    #[test]
    fn every_file_directly_in_manifests_is_read_in_name_order() {
        let tree = Tree::new()
            .file(
                "manifests/b.json",
                r#"{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "game"}}"#,
            )
            .file("manifests/a.yaml", CONFIG_MAP)
            // Other top-level content is ignored, as upstream ignores it.
            .file("README.md", "not a manifest")
            .file("metadata/annotations.yaml", "annotations: {}");
        assert_eq!(keys(&tree), ["ConfigMap game-demo", "Namespace game"]);
    }

    #[test]
    fn a_bundle_without_manifests_is_refused_as_upstream_refuses_it() {
        let tree = Tree::new().file("other/a.yaml", CONFIG_MAP);
        let err = objects(&tree).unwrap_err();
        assert_eq!(err, PlainError::NoManifests);
        assert!(
            err.to_string()
                .starts_with("readdir manifests: file does not exist")
        );
    }

    #[test]
    fn an_empty_manifests_directory_has_zero_objects() {
        let empty = Tree::new().dir("manifests");
        assert_eq!(objects(&empty).unwrap_err(), PlainError::NoObjects);
        // Files with only empty documents are no objects either.
        let blank = Tree::new().file("manifests/a.yaml", "---\n---\n");
        assert_eq!(objects(&blank).unwrap_err(), PlainError::NoObjects);
        assert!(PlainError::NoObjects.to_string().contains(
            "found zero objects: plain+v0 bundles are required to contain at least one object"
        ));
    }

    #[test]
    fn a_subdirectory_is_named_even_when_it_is_empty() {
        // upstream's plain-v0:subdir: manifests/emptydir/ sorts before manifests/subdir/.
        let tree = Tree::new()
            .file("manifests/a.yaml", CONFIG_MAP)
            .file("manifests/subdir/b.yaml", CONFIG_MAP)
            .dir("manifests/emptydir");
        let err = objects(&tree).unwrap_err();
        assert_eq!(err, PlainError::Subdirectory("manifests/emptydir".into()));
        assert_eq!(
            err.to_string(),
            "subdirectories are not allowed within the \"manifests\" directory of the bundle image filesystem: found \"manifests/emptydir\""
        );
    }

    #[test]
    fn a_document_that_is_not_a_whole_object_is_named_by_file_and_number() {
        let tree = Tree::new().file(
            "manifests/a.yaml",
            format!("{CONFIG_MAP}---\napiVersion: v1\nkind: Secret\nmetadata: {{}}\n"),
        );
        let err = objects(&tree).unwrap_err();
        assert_eq!(
            err.to_string(),
            "manifests/a.yaml: document 2: an object has no metadata.name"
        );
    }

    #[test]
    fn the_same_object_twice_is_refused_wherever_it_is() {
        let tree = Tree::new().file("manifests/a.yaml", CONFIG_MAP).file(
            "manifests/b.yaml",
            CONFIG_MAP.replace("lives: \"3\"", "lives: \"4\""),
        );
        assert_eq!(
            objects(&tree).unwrap_err().to_string(),
            "ConfigMap game-demo is defined twice: in manifests/a.yaml and in manifests/b.yaml"
        );
        // Same name, another namespace or kind: two objects.
        let tree = Tree::new().file(
            "manifests/a.yaml",
            format!(
                "{CONFIG_MAP}---\n{}---\n{}",
                CONFIG_MAP.replace("name: game-demo", "name: game-demo\n  namespace: x"),
                CONFIG_MAP.replace("ConfigMap", "Secret")
            ),
        );
        assert_eq!(keys(&tree).len(), 3);
    }

    #[test]
    fn a_broken_file_is_named() {
        let tree = Tree::new().file("manifests/a.yaml", "kind: [");
        let err = objects(&tree).unwrap_err().to_string();
        assert!(err.starts_with("manifests/a.yaml: invalid YAML"), "{err}");
    }
}
