//! The README and the scripts as a newcomer reads them: every page of docs/ is in the README's
//! documentation list, and every repository path the README, the docs and the scripts name
//! exists (a script that tells you to run a file that is not there is a dead end).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap()
}

#[test]
fn every_page_of_docs_is_in_the_readmes_documentation_list() {
    let readme = read("README.md");
    let list = readme
        .split("## Documentation")
        .nth(1)
        .expect("the README has a Documentation section");
    let list = list.split("\n## ").next().unwrap_or_default();
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(root().join("docs")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".md") && !list.contains(&format!("](docs/{name})")) {
            missing.push(name);
        }
    }
    assert!(
        missing.is_empty(),
        "README.md's Documentation list lacks {missing:?}"
    );
}

/// Paths such as `tools/testbin/regen.sh` or `hack/demo.sh` named in the README, the docs and
/// the scripts.
fn named_paths(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for prefix in ["tools/testbin/", "hack/", ".ci/"] {
        for (at, _) in text.match_indices(prefix) {
            // A path starts the word it is in.
            let before = text[..at].chars().last();
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '/' || c == '.') {
                continue;
            }
            let path: String = text[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || "/._-".contains(*c))
                .collect();
            let path = path.trim_end_matches(['.', '/']).to_owned();
            // Only files: a folder mention ("tools/testbin/") is not a dead end.
            if path
                .rsplit('/')
                .next()
                .is_some_and(|last| last.contains('.'))
            {
                found.push(path);
            }
        }
    }
    found
}

#[test]
fn every_script_and_path_the_docs_name_exists() {
    let mut sources = vec!["README.md".to_owned()];
    for dir in ["docs", "tools/testbin", "hack"] {
        for entry in std::fs::read_dir(root().join(dir)).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            if name.ends_with(".md") || name.ends_with(".sh") || name.ends_with(".py") {
                sources.push(format!("{dir}/{name}"));
            }
        }
    }
    let mut dead = Vec::new();
    for source in &sources {
        for path in named_paths(&read(source)) {
            if !root().join(&path).exists() {
                dead.push(format!("{source} names {path}"));
            }
        }
    }
    assert!(dead.is_empty(), "{dead:#?}");
}

#[test]
fn paths_are_found_in_prose() {
    assert_eq!(
        named_paths("run `tools/testbin/regen.sh` and hack/demo.sh, not mytools/testbin/x.sh"),
        ["tools/testbin/regen.sh", "hack/demo.sh"]
    );
}
