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
pub type KustomizeError = crate::source::Refusal;

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

/// Every file or directory the kustomization `doc` names, with the field it is written in:
/// the lists of [`REFERENCES`] and `patchesStrategicMerge` (inline patches aside), the `path`
/// of `patches`, `patchesJson6902`, `replacements` and `openapi`, and the `files`, `envs` and
/// `env` of `configMapGenerator` and `secretGenerator` (`key=path` read as the path).
fn references(doc: &Value) -> Vec<(&'static str, String)> {
    let mut found = Vec::new();
    let strings = |v: Option<&Value>| -> Vec<String> {
        match v {
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            Some(Value::String(s)) => vec![s.clone()],
            _ => Vec::new(),
        }
    };
    for field in REFERENCES {
        found.extend(strings(doc.get(field)).into_iter().map(|e| (field, e)));
    }
    found.extend(
        strings(doc.get("patchesStrategicMerge"))
            .into_iter()
            .filter(|e| !e.contains('\n'))
            .map(|e| ("patchesStrategicMerge", e)),
    );
    for field in ["patches", "patchesJson6902", "replacements"] {
        if let Some(Value::Array(items)) = doc.get(field) {
            found.extend(
                items
                    .iter()
                    .filter_map(|i| i.get("path")?.as_str())
                    .map(|p| (field, p.to_owned())),
            );
        }
    }
    if let Some(path) = doc.get("openapi").and_then(|o| o.get("path")?.as_str()) {
        found.push(("openapi", path.to_owned()));
    }
    for field in ["configMapGenerator", "secretGenerator"] {
        let Some(Value::Array(generators)) = doc.get(field) else {
            continue;
        };
        for generator in generators {
            for key in ["files", "envs", "env"] {
                found.extend(strings(generator.get(key)).into_iter().map(|e| {
                    let path = e.split_once('=').map_or(e.as_str(), |(_, p)| p).to_owned();
                    (field, path)
                }));
            }
        }
    }
    found
}

/// The kustomizations of `tree`: each file's path, its directory, and its documents (an
/// unreadable one is kustomize's to refuse, in its words).
fn kustomizations(tree: &Tree) -> impl Iterator<Item = (&str, &str, Vec<Value>)> {
    tree.files().filter_map(|(path, content)| {
        let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
        if !FILES.contains(&name) {
            return None;
        }
        let docs = manifests::documents(content).ok()?;
        Some((path, dir, docs))
    })
}

/// The first reference of any kustomization in `tree` that would be fetched from elsewhere
/// (a URL, a git repository): refused, with where it is written.
pub fn remote(tree: &Tree) -> Option<KustomizeError> {
    for (path, _, docs) in kustomizations(tree) {
        for doc in &docs {
            if let Some((field, entry)) = references(doc).into_iter().find(|(_, e)| is_remote(e)) {
                return Some(KustomizeError {
                    reason: reasons::REMOTE_REFERENCE_REFUSED,
                    message: format!(
                        "{path}: {field} entry {entry:?} is remote: kustomizations are built without network, so every base, component, resource and file must be in the bundle"
                    ),
                });
            }
        }
    }
    None
}

/// The first local reference of any kustomization in `tree` that climbs out of the bundle
/// (`../../..` past its root): refused, with where it is written. kustomize itself lets a
/// base outside the built directory through, and the bundle's directory is not the only one
/// on the provisioner's disk.
pub fn outside(tree: &Tree) -> Option<KustomizeError> {
    for (path, dir, docs) in kustomizations(tree) {
        for doc in &docs {
            let leaves = references(doc)
                .into_iter()
                .find(|(_, e)| !is_remote(e) && climbs_out(dir, e));
            if let Some((field, entry)) = leaves {
                return Some(KustomizeError {
                    reason: reasons::BUNDLE_LOAD_FAILED,
                    message: format!(
                        "{path}: {field} entry {entry:?} leaves the bundle: every base, component, resource and file must be in the bundle"
                    ),
                });
            }
        }
    }
    None
}

/// Whether `entry`, relative to the directory `dir` of the bundle, names a place outside it
/// (an absolute path, or more `..` than there are directories to climb).
fn climbs_out(dir: &str, entry: &str) -> bool {
    let entry = entry.trim();
    if entry.starts_with('/') {
        return true;
    }
    let mut depth: usize = dir.split('/').filter(|c| !c.is_empty()).count();
    for part in entry.split('/') {
        match part {
            "" | "." => {}
            ".." => match depth.checked_sub(1) {
                Some(d) => depth = d,
                None => return true,
            },
            _ => depth += 1,
        }
    }
    false
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

/// `kustomize`'s arguments to build `dir` (as `./<dir>`: a directory is never taken for a flag).
pub fn args(dir: &str) -> Vec<String> {
    let dir = if dir == "." {
        ".".to_owned()
    } else {
        format!("./{dir}")
    };
    [
        "build",
        &dir,
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
    fn references_in_patches_generators_and_openapi_are_checked_too() {
        for (kustomization, field) in [
            ("patches:\n- path: https://example.com/p.yaml\n", "patches"),
            (
                "configMapGenerator:\n- name: c\n  files:\n  - k=https://example.com/x\n",
                "configMapGenerator",
            ),
            (
                "openapi:\n  path: https://example.com/schema.json\n",
                "openapi",
            ),
            (
                "patchesStrategicMerge:\n- github.com/org/repo/p.yaml?ref=v1\n",
                "patchesStrategicMerge",
            ),
        ] {
            let tree = Tree::new().file("kustomization.yaml", kustomization);
            let err = remote(&tree).expect("a remote reference");
            assert!(err.message.contains(&format!(": {field} entry")), "{err}");
        }
        // An inline patch is not a reference.
        let inline = Tree::new().file(
            "kustomization.yaml",
            "patchesStrategicMerge:\n- |-\n  apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: https://x}\n",
        );
        assert_eq!(remote(&inline), None);
    }

    #[test]
    fn a_reference_that_climbs_out_of_the_bundle_is_refused() {
        let tree = Tree::new().file("base/kustomization.yaml", BASE).file(
            "overlays/prod/kustomization.yaml",
            "resources:\n- ../../base\n",
        );
        assert_eq!(outside(&tree), None);
        for bad in ["../../../etc", "/etc/passwd", "../../base/../../x"] {
            let tree = Tree::new().file(
                "overlays/prod/kustomization.yaml",
                format!("resources:\n- {bad}\n"),
            );
            let err = outside(&tree).expect("a reference outside");
            assert_eq!(err.reason, reasons::BUNDLE_LOAD_FAILED);
            assert!(err.message.contains("leaves the bundle"), "{err}");
        }
        let files = Tree::new().file(
            "kustomization.yaml",
            "secretGenerator:\n- name: s\n  envs:\n  - ../.env\n",
        );
        assert!(outside(&files).is_some());
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
