//! The `olm-resolve` binary's contract: exit codes, JSON on stdout, sentences on stderr.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::path::Path;
use std::process::Command;

const CATALOG: &str = r#"---
schema: olm.package
name: foo
defaultChannel: stable
---
schema: olm.channel
package: foo
name: stable
entries:
- name: foo.v1.0.0
- name: foo.v1.1.0
  replaces: foo.v1.0.0
---
schema: olm.bundle
package: foo
name: foo.v1.0.0
image: example.com/foo:v1.0.0
properties:
- {type: olm.package, value: {packageName: foo, version: 1.0.0}}
---
schema: olm.bundle
package: foo
name: foo.v1.1.0
image: example.com/foo:v1.1.0
properties:
- {type: olm.package, value: {packageName: foo, version: 1.1.0}}
- {type: olm.package.required, value: {packageName: bar, versionRange: ">=1.0.0"}}
"#;

fn olm_resolve(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_olm-resolve"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn setup(problem: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("catalogs/community")).unwrap();
    std::fs::write(dir.path().join("catalogs/community/foo.yaml"), CATALOG).unwrap();
    std::fs::write(dir.path().join("problem.yaml"), problem).unwrap();
    dir
}

fn path(dir: &tempfile::TempDir, rel: &str) -> String {
    dir.path().join(rel).display().to_string()
}

#[test]
fn a_solvable_problem_prints_the_bundles_as_json() {
    let dir = setup(
        "catalogs:\n- name: community\n  path: ./catalogs/community\n  labels: {tier: community}\noperators:\n- packageName: foo\n  version: \"<1.1.0\"\n  catalogSelector: {matchLabels: {tier: community}}\n",
    );
    let (code, stdout, stderr) = olm_resolve(&[&path(&dir, "problem.yaml")]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        stdout,
        "{\"bundles\":[{\"catalog\":\"community\",\"image\":\"example.com/foo:v1.0.0\",\"name\":\"foo.v1.0.0\",\"package\":\"foo\",\"version\":\"1.0.0\"}]}\n"
    );
}

#[test]
fn an_unsatisfiable_problem_exits_1_with_sentences() {
    let dir = setup(
        "catalogs:\n- name: community\n  path: catalogs/community\noperators:\n- packageName: foo\n  version: \">=1.1.0\"\n",
    );
    let (code, stdout, stderr) = olm_resolve(&[&path(&dir, "problem.yaml")]);
    assert_eq!(code, 1);
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json["error"], "unsatisfiable");
    let sentences: Vec<&str> = json["explanation"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert!(
        sentences
            .iter()
            .any(|s| s.contains("no request asks for \"bar\"")),
        "{sentences:#?}"
    );
    for s in sentences {
        assert!(stderr.contains(s));
    }
}

#[test]
fn an_invalid_problem_exits_2_with_file_and_line() {
    let dir = setup(
        "catalogs:\n- name: community\n  path: catalogs/community\noperators:\n- packageName: foo\n  colour: blue\n",
    );
    let (code, _, stderr) = olm_resolve(&[&path(&dir, "problem.yaml")]);
    assert_eq!(code, 2);
    assert!(stderr.contains("problem.yaml:"), "{stderr}");
    assert!(stderr.contains("colour"), "{stderr}");
}

#[test]
fn an_invalid_catalog_exits_2_with_every_problem() {
    let dir = setup(
        "catalogs:\n- name: community\n  path: catalogs/community\noperators:\n- packageName: foo\n",
    );
    let broken = CATALOG
        .replace("defaultChannel: stable", "defaultChannel: beta")
        .replace("version: 1.0.0}", "version: one}");
    std::fs::write(dir.path().join("catalogs/community/foo.yaml"), broken).unwrap();
    let (code, _, stderr) = olm_resolve(&[&path(&dir, "problem.yaml")]);
    assert_eq!(code, 2);
    assert_eq!(stderr.lines().count(), 2, "{stderr}");
    assert!(stderr.lines().all(|l| l.contains("foo.yaml:")), "{stderr}");
}

#[test]
fn validate_and_render() {
    let dir = setup("");
    let catalog = path(&dir, "catalogs/community");
    let (code, stdout, _) = olm_resolve(&["validate", &catalog]);
    assert_eq!(code, 0);
    assert!(
        stdout.contains("1 packages, 1 channels, 2 bundles"),
        "{stdout}"
    );
    let (code, stdout, _) = olm_resolve(&["render", &catalog]);
    assert_eq!(code, 0);
    assert_eq!(stdout.lines().count(), 4);
    assert!(stdout.starts_with(
        "{\"defaultChannel\":\"stable\",\"name\":\"foo\",\"schema\":\"olm.package\"}\n"
    ));
    std::fs::write(
        Path::new(&catalog).join("zz-bad.json"),
        "{\"schema\": \"olm.bundle\", \"name\": 3}",
    )
    .unwrap();
    let (code, _, stderr) = olm_resolve(&["validate", &catalog]);
    assert_eq!(code, 1);
    assert!(stderr.contains("bad.json:1:"), "{stderr}");
    // Render streams, but checks every file first: nothing is printed for a broken catalog,
    // even though the broken file comes after a good one.
    let (code, stdout, stderr) = olm_resolve(&["render", &catalog]);
    assert_eq!(code, 1);
    assert_eq!(stdout, "");
    assert!(stderr.contains("bad.json:1:"), "{stderr}");
    let (code, _, stderr) = olm_resolve(&["frobnicate"]);
    assert_eq!(code, 2, "{stderr}");
}
