//! Rendering with the real tools, no cluster: `helm` and `kustomize` as hack/test.sh builds
//! them (the versions the image ships), run through the provisioner's sandbox. A real public
//! chart (headlamp, tests/data/helm/headlamp/README.md names its source) renders as `helm
//! template` renders it; hostile charts are stopped with a reason; kustomize builds a base and
//! an overlay and remote bases are refused before it runs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::testbin;
use provisioner::bundle::Tree;
use provisioner::render::capabilities::Capabilities;
use provisioner::render::limits::Limits;
use provisioner::render::{Cluster, Failure, Renderer};
use provisioner::status::reasons;
use provisioner::values::Layer;
use serde_json::Value;

fn data(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(path)
}

fn renderer(limits: Limits) -> Renderer {
    Renderer::new(
        &testbin("helm"),
        &testbin("kustomize"),
        limits,
        2,
        std::env::temp_dir(),
        Cluster::Fixed(Arc::new(Capabilities::builtin("v1.36.0"))),
    )
}

const LIMITS: Limits = Limits {
    time: Duration::from_secs(30),
    memory: 512 * 1024 * 1024,
    output: 16 * 1024 * 1024,
};

fn chart(templates: &[(&str, &str)]) -> Tree {
    let tree = Tree::new().file(
        "hostile/Chart.yaml",
        "apiVersion: v2\nname: hostile\nversion: 0.1.0\n",
    );
    templates.iter().fold(tree, |t, (name, body)| {
        t.file(&format!("hostile/templates/{name}"), *body)
    })
}

async fn helm(renderer: &Renderer, tree: &Tree, values: &[Layer]) -> Result<String, Failure> {
    renderer
        .helm(tree, "demo", "shop", values)
        .await
        .map(|out| String::from_utf8(out).unwrap())
}

/// `provisioner render <chart> --format helm+v3` with the test's helm and `extra`.
fn render_command(chart: &Path, extra: &[&std::ffi::OsStr]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_provisioner"))
        .arg("render")
        .arg(chart)
        .args(["--format", "helm+v3", "--helm-binary"])
        .arg(testbin("helm"))
        .args(extra)
        .output()
        .unwrap()
}

/// The documents of a YAML stream, as JSON values sorted by kind and name (comparable
/// whatever order they were printed in).
fn documents(yaml: &str) -> Vec<Value> {
    let mut docs: Vec<Value> = serde_saphyr::from_multiple::<Value>(yaml)
        .unwrap()
        .into_iter()
        .filter(|d| !d.is_null())
        .collect();
    docs.sort_by_key(|d| format!("{}/{}", d["kind"], d["metadata"]["name"]));
    docs
}

#[test]
fn provisioner_render_prints_what_helm_template_prints() {
    let chart = data("helm/headlamp/0.42.0");
    let values = std::env::temp_dir().join(format!("render-values-{}.yaml", std::process::id()));
    std::fs::write(&values, "replicaCount: 3\nconfig:\n  baseURL: /headlamp\n").unwrap();
    let api_versions = Capabilities::builtin("v1.36.0").api_versions.join(",");
    let helm = Command::new(testbin("helm"))
        .args([
            "template",
            "shop",
            chart.to_str().unwrap(),
            "--include-crds",
            "--no-hooks",
        ])
        .args(["--kube-version", "v1.36.0", "--api-versions", &api_versions])
        .arg("--values")
        .arg(&values)
        .output()
        .unwrap();
    assert!(
        helm.status.success(),
        "{}",
        String::from_utf8_lossy(&helm.stderr)
    );
    let ours = render_command(
        &chart,
        &[
            "--name".as_ref(),
            "shop".as_ref(),
            "--values".as_ref(),
            values.as_os_str(),
        ],
    );
    std::fs::remove_file(&values).unwrap();
    assert!(
        ours.status.success(),
        "{}",
        String::from_utf8_lossy(&ours.stderr)
    );
    let expected = documents(&String::from_utf8(helm.stdout).unwrap());
    let got = documents(&String::from_utf8(ours.stdout).unwrap());
    assert_eq!(got.len(), 5, "{got:#?}");
    assert_eq!(got, expected);
    // The values took: three replicas, the base URL in the container's arguments.
    let deployment = got.iter().find(|d| d["kind"] == "Deployment").unwrap();
    assert_eq!(deployment["spec"]["replicas"], 3);
    assert!(deployment.to_string().contains("/headlamp"));
}

#[test]
fn provisioner_render_prints_in_apply_order_and_says_why_it_cannot() {
    let chart = data("helm/headlamp/0.42.0");
    let config = std::env::temp_dir().join(format!("render-config-{}.json", std::process::id()));
    std::fs::write(
        &config,
        r#"{"namespace": "shop", "values": {"replicaCount": 0}}"#,
    )
    .unwrap();
    let refused = render_command(&chart, &["--config".as_ref(), config.as_os_str()]);
    std::fs::write(&config, r#"{"namespace": "shop"}"#).unwrap();
    let placed = render_command(&chart, &["--config".as_ref(), config.as_os_str()]);
    std::fs::remove_file(&config).unwrap();
    assert_eq!(refused.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains(
            "InvalidValues: helm template: values don't meet the specifications of the schema"
        ) && stderr.contains("/replicaCount"),
        "{stderr}"
    );
    assert!(placed.status.success());
    let yaml = String::from_utf8(placed.stdout).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple::<Value>(&yaml)
        .unwrap()
        .into_iter()
        .filter(|d| !d.is_null())
        .collect();
    let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    // Identities first, then the rest; namespaced objects in the named namespace.
    assert_eq!(
        kinds,
        [
            "ServiceAccount",
            "ClusterRoleBinding",
            "Secret",
            "Service",
            "Deployment"
        ]
    );
    for doc in &docs {
        let ns = doc["metadata"]["namespace"].as_str();
        let expected = (doc["kind"] != "ClusterRoleBinding").then_some("shop");
        assert_eq!(ns, expected, "{}", doc["kind"]);
    }
}

#[tokio::test]
async fn values_are_merged_in_order_and_checked_against_the_schema() {
    let renderer = renderer(LIMITS);
    let tree = provisioner::preview::read_dir(&data("helm/headlamp/0.42.0"), 1 << 26).unwrap();
    let layer = |name: &str, yaml: &str| Layer {
        name: name.into(),
        content: yaml.as_bytes().to_vec(),
    };
    let out = helm(
        &renderer,
        &tree,
        &[
            layer(
                "valuesFrom[0] (Secret a, key values.yaml)",
                "replicaCount: 2\n",
            ),
            layer("spec.config.values", "replicaCount: 4\n"),
        ],
    )
    .await
    .unwrap();
    assert!(out.contains("replicas: 4"), "the later layer wins");
    let bad = helm(
        &renderer,
        &tree,
        &[layer("spec.config.values", "replicaCount: zero\n")],
    )
    .await
    .unwrap_err();
    assert_eq!(bad.reason, reasons::INVALID_VALUES);
    assert!(bad.message.contains("/replicaCount"), "{}", bad.message);
    let broken = helm(
        &renderer,
        &tree,
        &[layer(
            "valuesFrom[0] (Secret a, key values.yaml)",
            "replicaCount: [\n",
        )],
    )
    .await
    .unwrap_err();
    assert_eq!(broken.reason, reasons::INVALID_VALUES);
    assert!(
        broken
            .message
            .contains("valuesFrom[0] (Secret a, key values.yaml)"),
        "the file is named as the user named it: {}",
        broken.message
    );
}

#[tokio::test]
async fn lookup_and_dns_return_nothing() {
    let tree = chart(&[(
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: probe\ndata:\n  namespaces: {{ lookup \"v1\" \"Namespace\" \"\" \"\" | toJson | quote }}\n  host: {{ getHostByName \"localhost\" | quote }}\n",
    )]);
    let out = helm(&renderer(LIMITS), &tree, &[]).await.unwrap();
    assert!(out.contains("namespaces: \"{}\""), "{out}");
    assert!(out.contains("host: \"\""), "{out}");
}

#[tokio::test]
async fn a_dependency_that_is_not_vendored_is_refused_without_reaching_a_repository() {
    let tree = Tree::new()
        .file(
            "Chart.yaml",
            "apiVersion: v2\nname: app\nversion: 0.1.0\ndependencies:\n- name: common\n  version: 2.x.x\n  repository: https://charts.bitnami.com/bitnami\n",
        )
        .file("templates/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n");
    let err = helm(&renderer(LIMITS), &tree, &[]).await.unwrap_err();
    assert_eq!(
        err.reason,
        reasons::DEPENDENCY_NOT_VENDORED,
        "{}",
        err.message
    );
    assert!(err.message.contains("common"), "{}", err.message);
    // Vendored, it renders (the dependency's objects too).
    let vendored = tree
        .file(
            "charts/common/Chart.yaml",
            "apiVersion: v2\nname: common\nversion: 2.1.0\n",
        )
        .file(
            "charts/common/templates/cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-common\n",
        );
    let out = helm(&renderer(LIMITS), &vendored, &[]).await.unwrap();
    assert!(out.contains("name: from-common"), "{out}");
}

#[tokio::test]
async fn a_template_that_loops_is_stopped_at_its_time() {
    let limits = Limits {
        time: Duration::from_secs(2),
        ..LIMITS
    };
    let tree = chart(&[(
        "loop.yaml",
        // 10^12 steps over small lists: time, not memory.
        "{{- range $i := until 10000 }}{{- range $j := until 10000 }}{{- range $k := until 10000 }}{{- end }}{{- end }}{{- end }}",
    )]);
    let started = Instant::now();
    let err = helm(&renderer(limits), &tree, &[]).await.unwrap_err();
    assert_eq!(err.reason, reasons::RENDER_STOPPED, "{}", err.message);
    assert!(
        err.message.contains("ran for more than 2s"),
        "{}",
        err.message
    );
    // Stopped, not waited for (a generous bound: the machine may be busy).
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[tokio::test]
async fn a_chart_that_prints_too_much_or_eats_memory_is_stopped() {
    // 20 objects of 1 MB each: more output than allowed, little memory.
    let many = chart(&[(
        "many.yaml",
        "{{- range $i := until 20 }}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big-{{ $i }}\ndata:\n  x: {{ repeat 1000000 \"x\" }}\n{{- end }}\n",
    )]);
    let small_output = Limits {
        output: 4 * 1024 * 1024,
        ..LIMITS
    };
    let err = helm(&renderer(small_output), &many, &[]).await.unwrap_err();
    assert_eq!(err.reason, reasons::RENDER_STOPPED, "{}", err.message);
    assert!(
        err.message.contains("printed more than 4194304 bytes"),
        "{}",
        err.message
    );
    // A 100 MB manifest: more memory than allowed long before it is printed.
    let huge = chart(&[(
        "huge.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: huge\ndata:\n  x: {{ repeat 100000000 \"x\" }}\n",
    )]);
    let small_memory = Limits {
        memory: 128 * 1024 * 1024,
        ..LIMITS
    };
    let err = helm(&renderer(small_memory), &huge, &[]).await.unwrap_err();
    assert_eq!(err.reason, reasons::RENDER_STOPPED, "{}", err.message);
    assert!(err.message.contains("memory"), "{}", err.message);
}

#[tokio::test]
async fn kustomize_builds_a_base_and_its_overlay() {
    let renderer = renderer(LIMITS);
    let tree = provisioner::preview::read_dir(&data("kustomize"), 1 << 20).unwrap();
    let base = renderer.kustomize(&tree, Some("base")).await.unwrap();
    let base = documents(&String::from_utf8(base).unwrap());
    let names: Vec<&str> = base
        .iter()
        .map(|d| d["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 3);
    assert!(names.contains(&"web") && names.iter().any(|n| n.starts_with("greeting-")));
    let prod = renderer
        .kustomize(&tree, Some("overlays/prod"))
        .await
        .unwrap();
    let prod = String::from_utf8(prod).unwrap();
    assert!(
        prod.contains("name: prod-web") && prod.contains("message: bonjour"),
        "{prod}"
    );
    assert!(prod.contains("port: 8443"));
    // No kustomization where it is asked for.
    let err = renderer.kustomize(&tree, None).await.unwrap_err();
    assert_eq!(err.reason, reasons::BUNDLE_LOAD_FAILED);
}

#[tokio::test]
async fn remote_bases_and_helm_inflation_are_refused() {
    let renderer = renderer(LIMITS);
    let remote = Tree::new().file(
        "kustomization.yaml",
        "resources:\n- github.com/kubernetes-sigs/kustomize/examples/multibases?ref=v1.0.6\n",
    );
    let err = renderer.kustomize(&remote, None).await.unwrap_err();
    assert_eq!(
        err.reason,
        reasons::REMOTE_REFERENCE_REFUSED,
        "{}",
        err.message
    );
    // One our check does not know is still not fetched: kustomize finds no git, no network.
    let unknown_host = Tree::new().file(
        "kustomization.yaml",
        "resources:\n- example.com/org/repo/base?timeout=1s\n",
    );
    let err = renderer.kustomize(&unknown_host, None).await.unwrap_err();
    assert!(
        err.reason == reasons::RENDER_FAILED || err.reason == reasons::REMOTE_REFERENCE_REFUSED,
        "{err:?}"
    );
    let inflate = Tree::new().file(
        "kustomization.yaml",
        "helmCharts:\n- name: x\n  repo: https://charts.example.com\n  version: 1.0.0\n",
    );
    let err = renderer.kustomize(&inflate, None).await.unwrap_err();
    assert_eq!(err.reason, reasons::RENDER_FAILED);
    assert!(err.message.contains("enable-helm"), "{}", err.message);
}
