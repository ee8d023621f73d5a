//! The managers' Dockerfile, checked by parsing it (no Docker engine runs here, so it cannot be
//! built): every base image is pinned by digest; each manager has a target whose final stage
//! copies exactly its binary from the build stage, runs as a non-root user, and starts the
//! binary directly (exec form: no shell is needed, and distroless has none); the build stage
//! builds every binary a target copies. The images the harness assembles without a daemon
//! (`olm_e2e::manager_image`) are checked against the same targets.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::collections::BTreeMap;

/// One `FROM` stage: its base, its name, its instructions (keyword, rest).
#[derive(Debug)]
struct Stage {
    base: String,
    name: String,
    instructions: Vec<(String, String)>,
}

/// The stages of `text`, with `ARG` defaults substituted into `FROM` lines and continuation
/// lines joined.
fn parse(text: &str) -> Vec<Stage> {
    let mut joined = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') || trimmed.is_empty() {
            continue;
        }
        match trimmed.strip_suffix('\\') {
            Some(head) => {
                joined.push_str(head);
                joined.push(' ');
            }
            None => {
                joined.push_str(trimmed);
                joined.push('\n');
            }
        }
    }
    let mut args: BTreeMap<String, String> = BTreeMap::new();
    let mut stages: Vec<Stage> = Vec::new();
    for line in joined.lines() {
        let (keyword, rest) = line.split_once(' ').unwrap_or((line, ""));
        let keyword = keyword.to_ascii_uppercase();
        match keyword.as_str() {
            "ARG" if stages.is_empty() => {
                let (name, value) = rest.split_once('=').unwrap();
                args.insert(name.to_owned(), value.to_owned());
            }
            "FROM" => {
                let mut words = rest.split_whitespace();
                let mut base = words.next().unwrap().to_owned();
                for (name, value) in &args {
                    base = base.replace(&format!("${{{name}}}"), value);
                }
                let name = match (words.next(), words.next()) {
                    (Some(a), Some(n)) if a.eq_ignore_ascii_case("as") => n.to_owned(),
                    _ => String::new(),
                };
                stages.push(Stage {
                    base,
                    name,
                    instructions: Vec::new(),
                });
            }
            _ => stages
                .last_mut()
                .unwrap()
                .instructions
                .push((keyword, rest.trim().to_owned())),
        }
    }
    stages
}

fn dockerfile() -> Vec<Stage> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../Dockerfile");
    parse(&std::fs::read_to_string(path).unwrap())
}

#[test]
fn every_base_image_is_pinned_by_digest() {
    for stage in dockerfile() {
        let (_, digest) = stage
            .base
            .split_once("@sha256:")
            .unwrap_or_else(|| panic!("{} is not pinned by digest", stage.base));
        assert!(
            digest.len() == 64 && digest.bytes().all(|b| b.is_ascii_hexdigit()),
            "{}",
            stage.base
        );
        assert!(
            stage.base.contains(':'),
            "{}: keep the tag beside the digest",
            stage.base
        );
    }
}

#[test]
fn each_manager_runs_its_own_binary_as_a_non_root_user_without_a_shell() {
    let stages = dockerfile();
    let build = stages.iter().find(|s| s.name == "build").unwrap();
    let built: String = build
        .instructions
        .iter()
        .filter(|(k, _)| k == "RUN")
        .map(|(_, r)| r.as_str())
        .collect();
    for manager in [
        "catalogd",
        "operator-controller",
        "catalog-switcher",
        "provisioner",
    ] {
        let stage = stages
            .iter()
            .find(|s| s.name == manager)
            .unwrap_or_else(|| panic!("no target {manager}"));
        assert!(
            stage.base.starts_with("gcr.io/distroless/static"),
            "{manager}: {}",
            stage.base
        );
        let of = |keyword: &str| -> Vec<&str> {
            stage
                .instructions
                .iter()
                .filter(|(k, _)| k == keyword)
                .map(|(_, r)| r.as_str())
                .collect()
        };
        assert_eq!(
            of("RUN"),
            Vec::<&str>::new(),
            "{manager}: a final stage runs nothing"
        );
        let mut copies = vec![format!("--from=build /out/{manager} /{manager}")];
        if manager == "provisioner" {
            // What it runs for helm+v3 and kustomize bundles, where --helm-binary and
            // --kustomize-binary find them on distroless's PATH.
            copies.push("--from=tools /out/helm /out/kustomize /usr/local/bin/".into());
        }
        assert_eq!(of("COPY"), copies, "{manager}");
        let user = of("USER");
        assert_eq!(user.len(), 1, "{manager}: USER");
        let uid: u32 = user[0].split(':').next().unwrap().parse().unwrap();
        assert_ne!(uid, 0, "{manager} runs as root");
        assert_eq!(
            of("ENTRYPOINT"),
            [format!("[\"/{manager}\"]").as_str()],
            "{manager}"
        );
        assert!(of("CMD").is_empty(), "{manager}: flags come from the chart");
        assert!(
            built.contains(&format!("-p {manager}"))
                && built.contains(&format!("target/release/{manager}")),
            "the build stage does not build and copy out {manager}"
        );
    }
}

#[test]
fn the_build_is_locked_and_static() {
    let stages = dockerfile();
    let build = stages.iter().find(|s| s.name == "build").unwrap();
    assert!(
        build.base.contains("-alpine@"),
        "musl, so the binaries are static: {}",
        build.base
    );
    let run: String = build
        .instructions
        .iter()
        .filter(|(k, _)| k == "RUN")
        .map(|(_, r)| r.clone())
        .collect();
    assert!(run.contains("cargo build --release --locked"), "{run}");
    // The build's Rust is the one the workspace is tested with.
    let rust = build
        .base
        .split(':')
        .nth(1)
        .unwrap()
        .split('-')
        .next()
        .unwrap()
        .to_owned();
    let version = std::process::Command::new("rustc")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    assert!(
        version.starts_with(&format!("rustc {rust}")) || version.is_empty(),
        "the image builds with Rust {rust}, the workspace is tested with {version}"
    );
}

#[test]
fn the_parser_sees_stages_args_and_continuations() {
    let stages = parse(
        "ARG B=img:1@sha256:aa\n# c\nFROM ${B} AS one\nRUN a \\\n  b\nFROM x AS two\nUSER 1\n",
    );
    assert_eq!(stages.len(), 2);
    assert_eq!(stages[0].base, "img:1@sha256:aa");
    assert_eq!(
        stages[0].instructions,
        [("RUN".to_owned(), "a  b".to_owned())]
    );
    assert_eq!(stages[1].name, "two");
}

/// The images the harness assembles from the cargo build (no Docker engine runs here) have
/// each Dockerfile target's layout: the binary at the path the target copies it to, as the
/// entrypoint, run as the target's user. They differ only in what a glibc build needs and the
/// Dockerfile's static musl build does not: the shared libraries and the loader, which are
/// shown to suffice by running the binary from the unpacked image with them alone. Each is
/// pushed to the loopback registry and its config read back.
#[tokio::test]
async fn assembled_images_have_the_dockerfiles_layout_and_run_from_their_own_files() {
    olm_e2e::install_crypto_provider();
    let stages = dockerfile();
    let registry = olm_e2e::registry::plain().unwrap();
    let client = olm_e2e::images::client(registry).unwrap();
    for manager in [
        "catalogd",
        "operator-controller",
        "catalog-switcher",
        "provisioner",
    ] {
        let stage = stages.iter().find(|s| s.name == manager).unwrap();
        let of = |keyword: &str| -> String {
            stage
                .instructions
                .iter()
                .find(|(k, _)| k == keyword)
                .map(|(_, r)| r.clone())
                .unwrap()
        };
        let image = olm_e2e::node::assembled(manager).unwrap();
        // The target's entrypoint, user and binary path.
        let entrypoint: Vec<String> = serde_json::from_str(&of("ENTRYPOINT")).unwrap();
        assert_eq!(image.entrypoint, entrypoint, "{manager}");
        assert_eq!(image.user, of("USER"), "{manager}");
        let copied_to = of("COPY").rsplit(' ').next().unwrap().to_owned();
        let tools: &[&str] = if manager == "provisioner" {
            &["usr/local/bin/helm", "usr/local/bin/kustomize"]
        } else {
            &[]
        };
        assert_eq!(copied_to, entrypoint[0], "{manager}");
        let files = image.files();
        assert!(files.contains(&manager), "{manager}: {files:?}");
        // Beyond the Dockerfile's layout: libraries, the loader, and the system files
        // distroless has (users, the CA bundle).
        for tool in tools {
            assert!(files.contains(tool), "{manager}: {tool} in {files:?}");
        }
        for extra in files
            .iter()
            .filter(|f| **f != manager && !tools.contains(f))
        {
            assert!(
                extra.starts_with("lib") || extra.starts_with("etc/"),
                "{manager}: {extra}"
            );
        }

        let layer = image.layer();
        let repository = format!("olm-rs/{manager}");
        let digest = olm_e2e::images::push_configured(
            registry,
            &repository,
            "e2e",
            std::slice::from_ref(&layer),
            image.run_config(),
        )
        .await
        .unwrap();
        let reference: oci_client::Reference = format!("{}/{repository}@{digest}", registry.host)
            .parse()
            .unwrap();
        let (_, _, config) = client
            .pull_manifest_and_config(&reference, &oci_client::secrets::RegistryAuth::Anonymous)
            .await
            .unwrap();
        let config: serde_json::Value = serde_json::from_str(&config).unwrap();
        assert_eq!(
            config["config"]["Entrypoint"],
            serde_json::json!(entrypoint)
        );
        assert_eq!(config["config"]["User"], of("USER").as_str());

        // Run it from the unpacked layer, with the image's loader and libraries only.
        let root = tempfile::tempdir().unwrap();
        tar::Archive::new(layer.data.as_slice())
            .unpack(root.path())
            .unwrap();
        let loader = files
            .iter()
            .find(|f| f.contains("ld-linux"))
            .unwrap_or_else(|| panic!("{manager}: no loader in {files:?}"));
        let lib_dirs: Vec<String> = files
            .iter()
            .filter(|f| f.contains(".so"))
            .filter_map(|f| std::path::Path::new(f).parent())
            .map(|d| root.path().join(d).display().to_string())
            .collect();
        let out = std::process::Command::new(root.path().join(loader))
            .arg("--inhibit-cache")
            .arg("--library-path")
            .arg(lib_dirs.join(":"))
            .arg(root.path().join(manager))
            .arg("--version")
            .env_clear()
            .output()
            .unwrap();
        assert!(out.status.success(), "{manager}: {out:?}");
        assert!(
            String::from_utf8_lossy(&out.stdout).starts_with(&format!("{manager} ")),
            "{out:?}"
        );
    }
}
