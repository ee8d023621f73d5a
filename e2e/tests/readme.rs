//! The README and the scripts as a newcomer reads them: every page of docs/ is in the README's
//! documentation list, and every repository path the README, the docs and the scripts name
//! exists (a script that tells you to run a file that is not there is a dead end), every
//! workspace member is a row of the crate tables, and every manager has its pipeline paragraph
//! in docs/architecture.md.
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

/// The workspace members, as the root Cargo.toml lists them.
fn members(cargo_toml: &str) -> Vec<String> {
    let list = cargo_toml
        .split("members = [")
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .unwrap_or_default();
    list.split(',')
        .map(|m| m.trim().trim_matches('"').to_owned())
        .filter(|m| !m.is_empty())
        .collect()
}

/// The text of the section of `doc` under the heading `heading` (to the next heading of the
/// same or a higher level; `#` lines in fenced code are not headings).
fn section<'a>(doc: &'a str, heading: &str) -> &'a str {
    let level = heading.chars().take_while(|c| *c == '#').count();
    let Some(start) = doc.find(&format!("\n{heading}\n")) else {
        return "";
    };
    let body = &doc[start + heading.len() + 2..];
    let (mut fenced, mut end) = (false, 0);
    for line in body.split_inclusive('\n') {
        if line.starts_with("```") {
            fenced = !fenced;
        } else if !fenced
            && line.starts_with('#')
            && line.chars().take_while(|c| *c == '#').count() <= level
        {
            return &body[..end];
        }
        end += line.len();
    }
    body
}

/// The members that are not the first cell of a row of a table in `text`.
fn without_a_row<'a>(members: &'a [String], text: &str) -> Vec<&'a str> {
    members
        .iter()
        .filter(|m| !text.contains(&format!("\n| `{m}` |")))
        .map(String::as_str)
        .collect()
}

/// The crates whose binary is a manager run by the shared runtime.
fn managers(members: &[String]) -> Vec<String> {
    members
        .iter()
        .filter(|m| {
            std::fs::read_to_string(root().join(m).join("src/main.rs"))
                .is_ok_and(|main| main.contains("olm_runtime::manager::run("))
        })
        .map(|m| m.rsplit('/').next().unwrap_or(m).to_owned())
        .collect()
}

/// The managers without a `### <name>` paragraph in `pipelines`.
fn without_a_pipeline<'a>(managers: &'a [String], pipelines: &str) -> Vec<&'a str> {
    managers
        .iter()
        .filter(|m| {
            !section(pipelines, &format!("### {m}"))
                .trim()
                .chars()
                .any(char::is_alphabetic)
        })
        .map(String::as_str)
        .collect()
}

#[test]
fn every_workspace_member_is_a_row_of_the_crate_tables() {
    let members = members(&read("Cargo.toml"));
    assert!(members.len() >= 10, "{members:?}");
    for (doc, heading) in [
        ("docs/architecture.md", "## Crates and their roles"),
        ("docs/development.md", "## Workspace"),
    ] {
        let text = read(doc);
        let missing = without_a_row(&members, section(&text, heading));
        assert!(
            missing.is_empty(),
            "{doc} ({heading}) has no row for {missing:?}"
        );
    }
    let missing = without_a_row(&members, &read("README.md"));
    assert!(
        missing.is_empty(),
        "README.md's crate table has no row for {missing:?}"
    );
}

#[test]
fn every_manager_has_a_pipeline_paragraph_in_the_architecture() {
    let managers = managers(&members(&read("Cargo.toml")));
    assert_eq!(managers.len(), 4, "{managers:?}");
    let architecture = read("docs/architecture.md");
    let pipelines = section(&architecture, "## Each manager's reconcile pipeline");
    let missing = without_a_pipeline(&managers, pipelines);
    assert!(
        missing.is_empty(),
        "docs/architecture.md has no pipeline paragraph for {missing:?}"
    );
}

#[test]
fn a_member_or_a_pipeline_left_out_is_found() {
    let members = members("[workspace]\nmembers = [\n    \"crates/a\",\n    \"e2e\",\n]\n");
    assert_eq!(members, ["crates/a", "e2e"]);
    let table = "| path | what |\n|---|---|\n| `crates/a` | a |\n";
    assert_eq!(without_a_row(&members, table), ["e2e"]);
    let doc = "# T\n\n## Pipelines\n\n### a\n\nIt does:\n```\n# a comment\nrun\n```\n\n### e2e\n\n## Next\n\nmore\n";
    let managers = ["a".to_owned(), "e2e".to_owned(), "b".to_owned()];
    assert_eq!(
        without_a_pipeline(&managers, section(doc, "## Pipelines")),
        ["e2e", "b"]
    );
    assert!(
        section(doc, "### a").ends_with("run\n```\n\n"),
        "fenced # is no heading"
    );
}
