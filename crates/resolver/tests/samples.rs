//! The FBC samples of `tests/data/fbc-samples` (copied from upstream repositories; its README
//! names each origin): rendering matches upstream catalogd byte for byte, every sample
//! validates, and broken copies are rejected with one message per problem.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::path::{Path, PathBuf};

use olm_resolver::cli::load_valid;
use olm_resolver::fbc::{load_files, load_path, validate::validate};

fn samples() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/fbc-samples");
    assert!(dir.is_dir(), "FBC samples not found at {}", dir.display());
    dir
}

#[test]
fn render_reproduces_upstream_catalogd_all_json_byte_for_byte() {
    let dir = samples().join("catalogd-test-catalog");
    let fbc = load_path(&dir.join("catalog.yaml")).unwrap();
    let expected = std::fs::read(dir.join("expected_all.json")).unwrap();
    assert_eq!(
        String::from_utf8(fbc.render()).unwrap(),
        String::from_utf8(expected).unwrap()
    );
}

#[test]
fn every_sample_is_valid() {
    let root = samples();
    let mut dirs = vec![root.join("real")];
    for entry in std::fs::read_dir(&root).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() && path.file_name().unwrap() != "catalogd-test-catalog" {
            dirs.push(path);
        }
    }
    for entry in std::fs::read_dir(root.join("real")).unwrap() {
        dirs.push(entry.unwrap().path());
    }
    // The catalogd sample is YAML next to its expected JSON rendering: validate the YAML alone.
    dirs.push(root.join("catalogd-test-catalog/catalog.yaml"));
    for dir in dirs {
        match load_valid(&dir) {
            Ok(fbc) => assert!(!fbc.bundles.is_empty(), "{} has no bundles", dir.display()),
            Err(problems) => panic!(
                "{} is invalid:\n{}",
                dir.display(),
                problems
                    .iter()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>()
                    .join("\n")
            ),
        }
    }
}

#[test]
fn the_real_catalogs_render_to_the_same_hash_as_json_and_as_yaml() {
    // Equal content gives an equal hash whatever the encoding: render the real catalogs, load
    // the rendering (JSON lines) back, and render again.
    let fbc = load_path(&samples().join("real")).unwrap();
    let rendered = fbc.render();
    let again = load_files([("all.json", rendered.clone())]).unwrap();
    assert_eq!(again.render(), rendered);
    assert_eq!(again.content_hash(), fbc.content_hash());
    assert_eq!(fbc.packages.len(), 12);
    assert_eq!(fbc.bundles.len(), 179);
}

/// Validates `text` (one YAML file) and returns the problems as `file:line: message` strings.
fn problems_of(text: &str) -> Vec<String> {
    match load_files([("catalog.yaml", text.as_bytes())]) {
        Ok(fbc) => validate(&fbc).iter().map(|p| p.to_string()).collect(),
        Err(problems) => problems.iter().map(|p| p.to_string()).collect(),
    }
}

fn sample_text(rel: &str) -> String {
    std::fs::read_to_string(samples().join(rel)).unwrap()
}

#[test]
fn a_broken_copy_gets_one_message_per_problem() {
    let good = sample_text("operator-registry-foo-index-v0.2.0-declcfg/foo/index.yaml");
    assert_eq!(problems_of(&good), Vec::<String>::new());
    // Three independent breakages: an unknown default channel, a bundle whose olm.package
    // version is not semver, and a channel entry naming a bundle that does not exist.
    let broken = good
        .replacen("defaultChannel: beta", "defaultChannel: gamma", 1)
        .replacen("version: 0.1.0", "version: zero.one", 1)
        .replacen(
            "- name: foo.v0.1.0",
            "- name: foo.v0.0.9\n  - name: foo.v0.1.0\n    replaces: foo.v0.0.9",
            1,
        );
    let problems = problems_of(&broken);
    assert_eq!(problems.len(), 3, "{problems:#?}");
    assert!(
        problems
            .iter()
            .any(|p| p.contains("default channel \"gamma\" of package \"foo\" not found")),
        "{problems:#?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.contains("has an invalid version \"zero.one\"")),
        "{problems:#?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.contains("entry \"foo.v0.0.9\" refers to no olm.bundle")),
        "{problems:#?}"
    );
    assert!(
        problems.iter().all(|p| p.starts_with("catalog.yaml:")),
        "{problems:#?}"
    );
}

/// Package and channel names are checked as catalogd's store checks Catalog names (one
/// function): `a-.b` has a label ending in '-', which the API server refuses.
#[test]
fn names_with_a_label_ending_in_a_dash_are_refused() {
    let text = "---\nschema: olm.package\nname: a-.b\ndefaultChannel: x-.y\n---\nschema: olm.channel\npackage: a-.b\nname: x-.y\nentries:\n- name: a.v1\n---\nschema: olm.bundle\npackage: a-.b\nname: a.v1\nimage: r.example/a:1\nproperties:\n- type: olm.package\n  value: {packageName: a-.b, version: 1.0.0}\n";
    let problems = problems_of(text);
    assert!(
        problems
            .iter()
            .any(|p| p.contains("package name \"a-.b\" is not a valid DNS-1123 subdomain")),
        "{problems:#?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.contains("channel name \"x-.y\" is not a valid DNS-1123 subdomain")),
        "{problems:#?}"
    );
}

#[test]
fn broken_yaml_is_reported_with_file_and_line() {
    let problems =
        problems_of("---\nschema: olm.package\nname: foo\n---\nschema: olm.channel\nentries: [\n");
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(problems[0].starts_with("catalog.yaml:"), "{problems:#?}");
}

#[test]
fn indexignore_excludes_files() {
    let dir = tempfile::tempdir().unwrap();
    let src = samples().join("operator-registry-foo-index-v0.2.0-declcfg/foo/index.yaml");
    std::fs::create_dir(dir.path().join("foo")).unwrap();
    std::fs::copy(&src, dir.path().join("foo/index.yaml")).unwrap();
    std::fs::write(dir.path().join("README.md"), "# not a catalog: {{ }}").unwrap();
    std::fs::write(dir.path().join("foo/notes.txt"), "not: [valid").unwrap();
    std::fs::write(dir.path().join(".indexignore"), "README.md\n").unwrap();
    std::fs::write(dir.path().join("foo/.indexignore"), "*.txt\n").unwrap();
    let fbc = load_valid(dir.path()).unwrap();
    assert_eq!(fbc.packages.len(), 1);
    assert!(load_valid(Path::new(&src)).is_ok());
}

/// Every sample, broken in two independent ways at the model level, yields exactly one message
/// per breakage, each naming what is wrong.
#[test]
fn broken_copies_of_every_sample_get_one_message_per_problem() {
    let root = samples();
    let mut paths = vec![root.join("catalogd-test-catalog/catalog.yaml")];
    for dir in [
        "operator-controller-v0.6.0-test-catalog",
        "operator-registry-foo-index-v0.2.0-declcfg",
    ] {
        paths.push(root.join(dir));
    }
    for entry in std::fs::read_dir(root.join("real")).unwrap() {
        paths.push(entry.unwrap().path());
    }
    for path in paths {
        let good = load_path(&path).unwrap();
        assert!(
            validate(&good).is_empty(),
            "{} should be valid",
            path.display()
        );

        let mut broken = good.clone();
        broken.packages[0].default_channel = "no-such-channel".into();
        let problems: Vec<String> = validate(&broken).iter().map(|p| p.to_string()).collect();
        assert_eq!(problems.len(), 1, "{}: {problems:#?}", path.display());
        assert!(
            problems[0].contains("default channel \"no-such-channel\""),
            "{problems:#?}"
        );

        let mut broken = good.clone();
        let copy = broken.bundles[0].clone();
        broken.bundles.push(copy);
        let problems: Vec<String> = validate(&broken).iter().map(|p| p.to_string()).collect();
        assert_eq!(problems.len(), 1, "{}: {problems:#?}", path.display());
        assert!(problems[0].contains("duplicate bundle"), "{problems:#?}");
    }
}
