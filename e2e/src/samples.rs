//! The sample objects of `config/samples/`, in the order they can be applied.

use std::path::{Path, PathBuf};

use crate::{Error, Result, apply, repo_root};

/// A document of a sample file.
#[derive(Debug, Clone)]
pub struct Sample {
    /// The file it came from.
    pub file: PathBuf,
    /// The document.
    pub doc: serde_json::Value,
}

/// The samples folder of the repository.
pub fn samples_dir() -> PathBuf {
    repo_root().join("config/samples")
}

/// Every document of every `*.yaml` file in `dir`, Namespaces first, then by file name, then in
/// file order.
pub fn load(dir: &Path) -> Result<Vec<Sample>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|source| Error::Io {
            path: dir.display().to_string(),
            source,
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    files.sort();
    let mut samples = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).map_err(|source| Error::Io {
            path: file.display().to_string(),
            source,
        })?;
        let docs = apply::parse_documents(&text)
            .map_err(|e| Error::Document(format!("{}: {e}", file.display())))?;
        samples.extend(docs.into_iter().map(|doc| Sample {
            file: file.clone(),
            doc,
        }));
    }
    // Stable sort: namespaces must exist before what goes in them.
    samples.sort_by_key(|s| s.doc["kind"] != "Namespace");
    Ok(samples)
}
