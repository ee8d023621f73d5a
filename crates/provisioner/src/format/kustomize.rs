//! kustomize (`core-rukpak-io-kustomize`): a kustomization, built by kustomize itself
//! (`kustomize build`, run by [`crate::render`]). What is decided here, without running
//! anything: which directory is built, which reference would leave the bundle (a remote base:
//! refused before kustomize runs, since the build has no network), and the command line.
//! kustomize runs without plugins, exec functions, containers or Helm (`--enable-helm`,
//! `--enable-alpha-plugins`, `--enable-exec`, `--network` are never passed), and loads no
//! file outside the built directory but through another kustomization.

use serde_json::Value;

use super::manifests;
use crate::bundle::Tree;
use crate::status::reasons;

/// The names kustomize reads a kustomization from, in its order.
pub const FILES: [&str; 3] = ["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// The fields of a kustomization that name other files, directories or kustomizations.
const REFERENCES: [&str; 8] = [
    "resources",
    "bases",
    "components",
    "generators",
    "transformers",
    "validators",
    "crds",
    "configurations",
];

/// Why a kustomization is not built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct KustomizeError {
    /// The condition reason.
    pub reason: &'static str,
    /// What is wrong.
    pub message: String,
}

/// The directory to build: `directory`, or the bundle's root; it must hold a kustomization.
pub fn root(tree: &Tree, directory: Option<&str>) -> Result<String, KustomizeError> {
    let dir = directory.unwrap_or(".");
    let has = |name: &str| {
        let path = if dir == "." {
            name.to_owned()
        } else {
            format!("{dir}/{name}")
        };
        tree.get(&path).is_some()
    };
    if FILES.iter().any(|f| has(f)) {
        return Ok(dir.to_owned());
    }
    let whose = match directory {
        Some(d) => format!("in directory {d:?} (spec.config.directory)"),
        None => "at the bundle's root".to_owned(),
    };
    Err(KustomizeError {
        reason: reasons::BUNDLE_LOAD_FAILED,
        message: format!(
            "no kustomization.yaml {whose}: a kustomize bundle is a kustomization (name an overlay's directory with spec.config.directory)"
        ),
    })
}

/// The first reference of any kustomization in `tree` that would be fetched from elsewhere
/// (a URL, a git repository): refused, with where it is written.
pub fn remote(tree: &Tree) -> Option<KustomizeError> {
    for (path, content) in tree.files() {
        let name = path.rsplit('/').next().unwrap_or(path);
        if !FILES.contains(&name) {
            continue;
        }
        // An unreadable kustomization is kustomize's to refuse, in its words.
        let Ok(docs) = manifests::documents(content) else {
            continue;
        };
        for doc in docs {
            for field in REFERENCES {
                let Some(Value::Array(entries)) = doc.get(field) else {
                    continue;
                };
                if let Some(entry) = entries
                    .iter()
                    .filter_map(Value::as_str)
                    .find(|e| is_remote(e))
                {
                    return Some(KustomizeError {
                        reason: reasons::REMOTE_REFERENCE_REFUSED,
                        message: format!(
                            "{path}: {field} entry {entry:?} is remote: kustomizations are built without network, so every base, component and resource must be in the bundle"
                        ),
                    });
                }
            }
        }
    }
    None
}

/// Whether a kustomization's reference is fetched from elsewhere, as kustomize's loader would
/// take it: a URL, an scp-like git address, or a path that starts with a git host.
pub fn is_remote(entry: &str) -> bool {
    let entry = entry.trim();
    entry.contains("://")
        || entry.starts_with("git@")
        || entry.starts_with("git::")
        || entry.contains("?ref=")
        || entry.contains(".git//")
        || ["github.com/", "gitlab.com/", "bitbucket.org/"]
            .iter()
            .any(|host| entry.starts_with(host))
}

/// `kustomize`'s arguments to build `dir`.
pub fn args(dir: &str) -> Vec<String> {
    [
        "build",
        dir,
        "--load-restrictor",
        "LoadRestrictionsRootOnly",
    ]
    .map(str::to_owned)
    .into()
}

/// What kustomize's error `stderr` means.
pub fn refusal(stderr: &str) -> KustomizeError {
    KustomizeError {
        reason: reasons::RENDER_FAILED,
        message: stderr.trim().trim_start_matches("Error: ").to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "resources:\n- deployment.yaml\n";

    #[test]
    fn the_root_or_the_named_directory_is_built() {
        let tree = Tree::new()
            .file("kustomization.yaml", BASE)
            .file("overlays/prod/kustomization.yml", "resources: [../../]\n");
        assert_eq!(root(&tree, None), Ok(".".into()));
        assert_eq!(
            root(&tree, Some("overlays/prod")),
            Ok("overlays/prod".into())
        );
        let err = root(&tree, Some("overlays/dev")).unwrap_err();
        assert!(
            err.message.contains("in directory \"overlays/dev\""),
            "{err}"
        );
        let err = root(&Tree::new().file("a.yaml", ""), None).unwrap_err();
        assert!(
            err.message
                .starts_with("no kustomization.yaml at the bundle's root")
        );
    }

    #[test]
    fn remote_bases_are_refused_wherever_they_are_written() {
        let tree = Tree::new()
            .file("kustomization.yaml", BASE)
            .file(
                "overlays/prod/kustomization.yaml",
                "resources:\n- ../../\n- https://github.com/kubernetes-sigs/kustomize//examples/multibases?ref=v1.0.6\n",
            );
        let err = remote(&tree).expect("a remote reference");
        assert_eq!(err.reason, reasons::REMOTE_REFERENCE_REFUSED);
        assert!(
            err.message
                .starts_with("overlays/prod/kustomization.yaml: resources entry"),
            "{err}"
        );
        assert_eq!(remote(&Tree::new().file("kustomization.yaml", BASE)), None);
    }

    #[test]
    fn what_kustomize_would_fetch_is_remote_and_local_paths_are_not() {
        for remote in [
            "https://example.com/deploy.yaml",
            "github.com/org/repo/base?ref=v1",
            "git@github.com:org/repo.git",
            "ssh://git@example.com/repo.git",
            "example.com/repo.git//base",
        ] {
            assert!(is_remote(remote), "{remote}");
        }
        for local in [
            "../base",
            "deployment.yaml",
            "./components/x",
            "github/base",
        ] {
            assert!(!is_remote(local), "{local}");
        }
    }
}
