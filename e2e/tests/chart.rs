//! The Helm chart, with the real helm binary and no cluster: `helm lint --strict` is clean; the
//! rendered output for the default values and for a full set of values is pinned by golden
//! files (`UPDATE_GOLDEN=1` rewrites them: review the diff); the managers' rules are exactly
//! config/rbac/ (the chart reads its copy in files/rbac/, which must not drift); the
//! catalog-switcher reads exactly what its allowlist names; bad values are refused with a
//! message naming the value.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn chart() -> PathBuf {
    root().join("charts/olm")
}

fn helm() -> PathBuf {
    olm_e2e::chart::helm().unwrap()
}

fn run(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(helm()).args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn template(extra: &[&str]) -> String {
    let chart = chart().display().to_string();
    let mut args = vec![
        "template",
        "olm",
        chart.as_str(),
        "--namespace",
        "olm-system",
    ];
    args.extend_from_slice(extra);
    let (ok, out, err) = run(&args);
    assert!(ok, "helm template {extra:?}: {err}");
    out
}

fn docs(text: &str) -> Vec<serde_json::Value> {
    serde_saphyr::from_multiple::<serde_json::Value>(text)
        .unwrap()
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

#[test]
fn the_chart_lints_clean() {
    let (ok, out, err) = run(&["lint", "--strict", &chart().display().to_string()]);
    assert!(ok, "{out}{err}");
}

#[test]
fn the_rendered_chart_is_pinned_by_golden_files() {
    let full = chart().join("tests/full-values.yaml").display().to_string();
    for (name, extra) in [("default", vec![]), ("full", vec!["-f", full.as_str()])] {
        let rendered = template(&extra);
        let golden = chart().join(format!("tests/golden/{name}.yaml"));
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::create_dir_all(golden.parent().unwrap()).unwrap();
            std::fs::write(&golden, &rendered).unwrap();
        }
        let pinned = std::fs::read_to_string(&golden).unwrap_or_default();
        assert!(
            pinned == rendered,
            "helm template ({name} values) differs from {}: review, then UPDATE_GOLDEN=1 cargo test -p olm-e2e --test chart",
            golden.display()
        );
    }
}

#[test]
fn the_charts_rbac_is_config_rbac() {
    let config = root().join("config/rbac");
    let copy = chart().join("files/rbac");
    let names = |dir: &Path| {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    assert_eq!(names(&config), names(&copy));
    for name in names(&config) {
        assert_eq!(
            std::fs::read_to_string(config.join(&name)).unwrap(),
            std::fs::read_to_string(copy.join(&name)).unwrap(),
            "charts/olm/files/rbac/{name} drifted: cp config/rbac/*.yaml charts/olm/files/rbac/"
        );
    }
    // And what is rendered grants exactly those rules, under the same names.
    let rendered = docs(&template(&[]));
    for name in names(&config) {
        for doc in docs(&std::fs::read_to_string(config.join(&name)).unwrap()) {
            let kind = doc["kind"].as_str().unwrap_or_default();
            if kind != "ClusterRole" && kind != "Role" {
                continue;
            }
            let found = rendered
                .iter()
                .find(|r| {
                    r["kind"] == doc["kind"] && r["metadata"]["name"] == doc["metadata"]["name"]
                })
                .unwrap_or_else(|| panic!("{kind} {} is not rendered", doc["metadata"]["name"]));
            assert_eq!(found["rules"], doc["rules"], "{name}: {kind}");
        }
    }
}

#[test]
fn the_switcher_reads_exactly_what_its_allowlist_names() {
    let rendered = docs(&template(&[
        "--set",
        "catalogSwitcher.allowedResources={config.openshift.io/v1/clusterversions,v1/configmaps@team-a}",
    ]));
    let reads: Vec<&serde_json::Value> = rendered
        .iter()
        .filter(|d| {
            d["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("olm-catalog-switcher-read-"))
                && (d["kind"] == "ClusterRole" || d["kind"] == "Role")
        })
        .collect();
    assert_eq!(reads.len(), 2);
    let cluster = reads.iter().find(|d| d["kind"] == "ClusterRole").unwrap();
    assert_eq!(
        cluster["rules"],
        serde_json::json!([{"apiGroups": ["config.openshift.io"], "resources": ["clusterversions"], "verbs": ["get", "list", "watch"]}])
    );
    let role = reads.iter().find(|d| d["kind"] == "Role").unwrap();
    assert_eq!(role["metadata"]["namespace"], "team-a");
    assert_eq!(
        role["rules"],
        serde_json::json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}])
    );
    let switcher = rendered
        .iter()
        .find(|d| d["kind"] == "Deployment" && d["metadata"]["name"] == "catalog-switcher")
        .unwrap();
    let args = &switcher["spec"]["template"]["spec"]["containers"][0]["args"];
    assert!(
        args.as_array().unwrap().iter().any(|a| a
            == "--allowed-resources=config.openshift.io/v1/clusterversions,v1/configmaps@team-a"),
        "{args}"
    );
    // With an empty allowlist, the switcher reads nothing beyond its own objects.
    assert!(!docs(&template(&[])).iter().any(|d| {
        d["metadata"]["name"]
            .as_str()
            .is_some_and(|n| n.contains("-read-"))
    }));
}

#[test]
fn every_manager_runs_restricted_with_probes() {
    for doc in docs(&template(&[])) {
        if doc["kind"] != "Deployment" {
            continue;
        }
        let name = doc["metadata"]["name"].as_str().unwrap().to_owned();
        let pod = &doc["spec"]["template"]["spec"];
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true, "{name}");
        assert_eq!(
            pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault",
            "{name}"
        );
        let c = &pod["containers"][0];
        let sc = &c["securityContext"];
        assert_eq!(sc["allowPrivilegeEscalation"], false, "{name}");
        assert_eq!(sc["readOnlyRootFilesystem"], true, "{name}");
        assert_eq!(
            sc["capabilities"]["drop"],
            serde_json::json!(["ALL"]),
            "{name}"
        );
        assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz", "{name}");
        assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz", "{name}");
        assert!(c["resources"]["requests"].is_object(), "{name}");
    }
    // A PodDisruptionBudget only with more than one replica.
    let pdbs = |extra: &[&str]| {
        docs(&template(extra))
            .iter()
            .filter(|d| d["kind"] == "PodDisruptionBudget")
            .count()
    };
    assert_eq!(pdbs(&[]), 0);
    assert_eq!(pdbs(&["--set", "catalogd.replicas=2"]), 1);
}

#[test]
fn the_bundle_deployment_crd_is_installed_unless_rukpak_owns_it() {
    let crd = |extra: &[&str]| {
        docs(&template(extra)).into_iter().find(|d| {
            d["kind"] == "CustomResourceDefinition"
                && d["metadata"]["name"] == "bundledeployments.core.rukpak.io"
        })
    };
    let installed = crd(&[]).expect("installed by default");
    assert_eq!(
        installed["metadata"]["annotations"]["helm.sh/resource-policy"], "keep",
        "uninstalling the chart must not delete every BundleDeployment"
    );
    assert!(crd(&["--set", "bundleDeploymentCRD.install=false"]).is_none());
}

#[test]
fn bad_values_are_refused_with_a_message_naming_them() {
    let chart = chart().display().to_string();
    for (set, words) in [
        ("catalogd.replicas=0", "/catalogd/replicas"),
        ("catalogd.replica=2", "'replica' not allowed"),
        ("logFormat=yaml", "/logFormat"),
        (
            "catalogSwitcher.allowedResources={configmaps}",
            "/catalogSwitcher/allowedResources/0",
        ),
        ("ports.content=70000", "/ports/content"),
        (
            "operatorController.extraArgs={concurrency}",
            "/operatorController/extraArgs/0",
        ),
    ] {
        let (ok, _, err) = run(&["template", "olm", &chart, "--set", set]);
        assert!(!ok, "{set} was accepted");
        assert!(err.contains(words), "{set}: {err}");
    }
}

/// `helm template` in the release namespace `namespace` (the e2e helper renders in olm-system).
fn template_in(namespace: &str, extra: &[&str]) -> Result<Vec<serde_json::Value>, String> {
    let chart = chart().display().to_string();
    let mut args = vec!["template", "olm", chart.as_str(), "--namespace", namespace];
    args.extend_from_slice(extra);
    let (ok, out, err) = run(&args);
    if ok { Ok(docs(&out)) } else { Err(err) }
}

fn catalogd_args(rendered: &[serde_json::Value]) -> Vec<String> {
    manager_args(rendered, "catalogd")
}

/// The flags the chart gives the manager `name`.
fn manager_args(rendered: &[serde_json::Value], name: &str) -> Vec<String> {
    let manager = rendered
        .iter()
        .find(|d| d["kind"] == "Deployment" && d["metadata"]["name"] == name)
        .unwrap();
    manager["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect()
}

/// `helm install olm charts/olm -n team --create-namespace`: everything in the release's
/// namespace, which helm creates (the chart must not template it, or the install fails with
/// "already exists"), and which catalogd labels for Pod Security (the chart cannot: it may
/// name only the objects it owns).
#[test]
fn a_release_namespace_holds_the_managers_and_is_not_templated() {
    let rendered = template_in("team", &[]).unwrap();
    assert!(
        !rendered.iter().any(|d| d["kind"] == "Namespace"),
        "the release's namespace is helm's (--create-namespace), not the chart's"
    );
    for d in &rendered {
        if let Some(ns) = d["metadata"]["namespace"].as_str() {
            assert_eq!(ns, "team", "{} {}", d["kind"], d["metadata"]["name"]);
        }
    }
    let args = catalogd_args(&rendered);
    assert!(args.contains(&"--namespace=team".to_owned()), "{args:?}");
    assert!(
        args.contains(&"--namespace-pod-security=restricted".to_owned()),
        "{args:?}"
    );
    // catalogd may label its own namespace and no other.
    let role = rendered
        .iter()
        .find(|d| d["kind"] == "ClusterRole" && d["metadata"]["name"] == "olm-catalogd")
        .unwrap();
    let rule = role["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resources"] == serde_json::json!(["namespaces"]))
        .unwrap();
    assert_eq!(rule["resourceNames"], serde_json::json!(["team"]));
    assert_eq!(rule["verbs"], serde_json::json!(["get", "patch"]));
    // Pod Security left alone on request.
    let args = catalogd_args(&template_in("team", &["--set", "namespace.podSecurity="]).unwrap());
    assert!(
        !args
            .iter()
            .any(|a| a.starts_with("--namespace-pod-security")),
        "{args:?}"
    );
}

/// `helm install olm charts/olm` (the release in `default`): the chart creates olm-system,
/// labelled, as before.
#[test]
fn a_release_in_default_creates_olm_system_with_its_label() {
    let rendered = template_in("default", &[]).unwrap();
    let ns = rendered
        .iter()
        .find(|d| d["kind"] == "Namespace")
        .expect("the chart creates olm-system");
    assert_eq!(ns["metadata"]["name"], "olm-system");
    assert_eq!(
        ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
        "restricted"
    );
    for d in &rendered {
        if let Some(n) = d["metadata"]["namespace"].as_str() {
            assert_eq!(n, "olm-system", "{} {}", d["kind"], d["metadata"]["name"]);
        }
    }
    // namespace.create=false: it exists already, the chart leaves it alone.
    let rendered = template_in("default", &["--set", "namespace.create=false"]).unwrap();
    assert!(!rendered.iter().any(|d| d["kind"] == "Namespace"));
    // Another namespace than the release's, by name: the chart creates that one.
    let rendered = template_in("team", &["--set", "namespace.name=operators"]).unwrap();
    let ns = rendered.iter().find(|d| d["kind"] == "Namespace").unwrap();
    assert_eq!(ns["metadata"]["name"], "operators");
}

/// Asking the chart to create the release's own namespace cannot work (helm creates it, or it
/// exists): refused, saying what to type instead.
#[test]
fn creating_the_release_namespace_is_refused_with_what_to_type() {
    for extra in [
        vec!["--set", "namespace.create=true"],
        vec![
            "--set",
            "namespace.create=true",
            "--set",
            "namespace.name=olm-system",
        ],
    ] {
        let err = template_in("olm-system", &extra).unwrap_err();
        assert!(
            err.contains("helm install olm charts/olm -n olm-system --create-namespace"),
            "{err}"
        );
        assert!(err.contains("`helm install olm charts/olm`"), "{err}");
    }
}

/// Generator Pods run a Catalog author's image: a NetworkPolicy keeps them to DNS, catalogd's
/// upload endpoint and what the admin lists, minus the denied CIDRs (each excepted only from an
/// allowed CIDR that holds it, as the API server requires).
#[test]
fn generator_pods_get_a_network_policy_and_default_limits() {
    let policy = |extra: &[&str]| {
        docs(&template(extra)).into_iter().find(|d| {
            d["kind"] == "NetworkPolicy" && d["metadata"]["name"] == "olm-catalog-generators"
        })
    };
    let default = policy(&[]).expect("on by default");
    let spec = &default["spec"];
    assert_eq!(
        spec["podSelector"]["matchLabels"]["olm-rs.io/catalog-generator"],
        "true"
    );
    assert_eq!(
        spec["policyTypes"],
        serde_json::json!(["Ingress", "Egress"])
    );
    assert_eq!(spec["ingress"], serde_json::json!([]));
    let egress = spec["egress"].as_array().unwrap();
    assert_eq!(
        egress.len(),
        2,
        "DNS and the upload endpoint only: {egress:?}"
    );
    assert_eq!(egress[0]["ports"][0]["port"], 53);
    assert_eq!(egress[1]["ports"][0]["port"], 8084);

    let full = chart().join("tests/full-values.yaml").display().to_string();
    let spec = policy(&["-f", full.as_str()]).unwrap()["spec"].clone();
    let blocks: Vec<(String, serde_json::Value)> = spec["egress"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| {
            let block = &r["to"][0]["ipBlock"];
            block["cidr"]
                .as_str()
                .map(|c| (c.to_owned(), block["except"].clone()))
        })
        .collect();
    assert_eq!(
        blocks,
        [
            (
                "0.0.0.0/0".to_owned(),
                serde_json::json!([
                    "169.254.0.0/16",
                    "10.96.0.1/32",
                    "10.100.0.0/16",
                    "10.200.0.0/16",
                    "192.0.2.10/32"
                ])
            ),
            (
                "::/0".to_owned(),
                serde_json::json!(["fe80::/10", "fd10::/56"])
            ),
            (
                "10.0.0.0/8".to_owned(),
                serde_json::json!(["10.96.0.1/32", "10.100.0.0/16", "10.200.0.0/16"])
            ),
        ]
    );
    assert!(policy(&["--set", "catalogd.generators.networkPolicy.enabled=false"]).is_none());

    let args = catalogd_args(&docs(&template(&[])));
    assert!(
        args.contains(
            &"--generator-default-limits=cpu=1,ephemeral-storage=1Gi,memory=1Gi".to_owned()
        ),
        "{args:?}"
    );
}

/// catalogd's memory is bounded by its unpack budget: the chart refuses values with which the
/// bound (128Mi + 10 × unpackBudgetBytes + maxConcurrentGenerators × maxContentBytes + 16Mi +
/// maxServedIndexBytes,
/// the formula of docs/install.md and catalogd::budget::memory_bound) exceeds the memory
/// limit, and a maximum catalog larger than the budget. The defaults fit the default limit.
#[test]
fn the_memory_limit_holds_catalogd_at_its_budget() {
    let chart = chart().display().to_string();
    let render = |sets: &[String]| {
        let mut args = vec!["template".to_owned(), "olm".into(), chart.clone()];
        for set in sets {
            args.extend(["--set".to_owned(), set.clone()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (ok, _, err) = run(&args);
        (ok, err)
    };
    // The defaults: 128 + 10 × 64 + 2 × 64 + 16 + 96 = 1008 MiB, within 1Gi.
    assert!(render(&[]).0, "the default values fit their own limit");
    let at = |mib: u64| format!("catalogd.resources.limits.memory={mib}Mi");
    assert!(render(&[at(1008)]).0, "the bound itself");
    let (ok, err) = render(&[at(1007)]);
    assert!(
        !ok && err.contains("1008 MiB") && err.contains("docs/install.md"),
        "{err}"
    );
    // Another shape: 256 MiB catalogs, 4 generators: 128 + 2560 + 1024 + 16 + 96 = 3824 MiB.
    let big = [
        "catalogd.maxContentBytes=268435456".to_owned(),
        "catalogd.unpackBudgetBytes=268435456".to_owned(),
        "catalogd.maxConcurrentGenerators=4".to_owned(),
    ];
    let with = |limit: &str| {
        let mut v = big.to_vec();
        v.push(format!("catalogd.resources.limits.memory={limit}"));
        render(&v)
    };
    assert!(with("3824Mi").0);
    assert!(!with("3823Mi").0);
    assert!(with("4Gi").0);
    let (ok, err) = render(&["catalogd.maxContentBytes=134217728".to_owned()]);
    assert!(!ok && err.contains("unpackBudgetBytes"), "{err}");
    // The flags follow the values.
    let args = catalogd_args(&docs(&template(&[])));
    for flag in [
        "--max-content-bytes=67108864",
        "--unpack-budget-bytes=67108864",
        "--max-served-index-bytes=100663296",
    ] {
        assert!(args.contains(&flag.to_owned()), "{args:?}");
    }
}

fn provisioner_args(rendered: &[serde_json::Value]) -> Vec<String> {
    manager_args(rendered, "provisioner")
}

/// The provisioner's apply role is bound cluster-wide by default; `provisioner.rbac.namespaced`
/// binds it in each allowed namespace alone (names only, never the managers' own), and tells
/// the provisioner so. Bundle objects never go to the managers' namespace either way.
#[test]
fn the_provisioner_can_be_bound_to_its_allowed_namespaces_alone() {
    let apply_bindings = |rendered: &[serde_json::Value]| -> Vec<(String, String)> {
        rendered
            .iter()
            .filter(|d| d["metadata"]["name"] == "olm-provisioner-apply")
            .filter(|d| d["kind"] != "ClusterRole")
            .map(|d| {
                (
                    d["kind"].as_str().unwrap().to_owned(),
                    d["metadata"]["namespace"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect()
    };
    let default = docs(&template(&[]));
    assert_eq!(
        apply_bindings(&default),
        [("ClusterRoleBinding".to_owned(), String::new())]
    );
    let args = provisioner_args(&default);
    assert!(
        args.contains(&"--default-namespace=default".to_owned()),
        "{args:?}"
    );
    assert!(!args.iter().any(|a| a == "--namespaced-rbac"), "{args:?}");

    let namespaced = docs(&template(&[
        "--set",
        "provisioner.rbac.namespaced=true",
        "--set",
        "provisioner.allowedNamespaces={shop,team-a}",
    ]));
    assert_eq!(
        apply_bindings(&namespaced),
        [
            ("RoleBinding".to_owned(), "shop".to_owned()),
            ("RoleBinding".to_owned(), "team-a".to_owned())
        ]
    );
    let args = provisioner_args(&namespaced);
    assert!(args.contains(&"--namespaced-rbac".to_owned()), "{args:?}");
    assert!(
        args.contains(&"--allowed-namespaces=shop,team-a".to_owned()),
        "{args:?}"
    );

    let chart = chart().display().to_string();
    for (allowed, words) in [
        (None, "needs provisioner.allowedNamespaces"),
        (Some("{team-*}"), "must be a name, not a prefix"),
        (
            Some("{olm-system}"),
            "cannot hold the managers' own namespace",
        ),
    ] {
        let mut args = vec![
            "template",
            "olm",
            chart.as_str(),
            "--namespace",
            "olm-system",
            "--set",
            "provisioner.rbac.namespaced=true",
        ];
        let set = allowed.map(|a| format!("provisioner.allowedNamespaces={a}"));
        if let Some(set) = &set {
            args.extend_from_slice(&["--set", set]);
        }
        let (ok, _, err) = run(&args);
        assert!(!ok, "{allowed:?} was accepted");
        assert!(err.contains(words), "{allowed:?}: {err}");
    }
}

/// `catalogApi.enabled` renders the aggregated API whole: an APIService whose caBundle is the CA
/// that signed the certificate catalogd serves for the Service's name, the bindings delegated
/// authentication needs, two catalogd replicas with a PodDisruptionBudget, and the flags;
/// off (the default), none of it.
#[test]
fn the_catalog_api_value_renders_an_apiservice_trusting_what_catalogd_serves() {
    use base64::Engine as _;
    let of = |rendered: &[serde_json::Value], kind: &str, name: &str| {
        rendered
            .iter()
            .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
            .cloned()
    };
    let off = docs(&template(&[]));
    assert!(of(&off, "APIService", "v1alpha1.catalogs.olm-rs.io").is_none());
    assert!(of(&off, "Service", "catalogd-api").is_none());
    assert!(
        !catalogd_args(&off)
            .iter()
            .any(|a| a.starts_with("--catalog-api"))
    );

    let on = docs(&template(&["--set", "catalogApi.enabled=true"]));
    let apiservice = of(&on, "APIService", "v1alpha1.catalogs.olm-rs.io").unwrap();
    assert_eq!(apiservice["spec"]["service"]["name"], "catalogd-api");
    let secret = of(&on, "Secret", "catalogd-api-tls").unwrap();
    let decode = |v: &serde_json::Value| {
        String::from_utf8(
            base64::engine::general_purpose::STANDARD
                .decode(v.as_str().unwrap())
                .unwrap(),
        )
        .unwrap()
    };
    let ca = decode(&apiservice["spec"]["caBundle"]);
    assert_eq!(ca, decode(&secret["data"]["ca.crt"]));
    let cert = decode(&secret["data"]["tls.crt"]);
    assert!(olm_testkit::pki::serves(
        &ca,
        &cert,
        "catalogd-api.olm-system.svc"
    ));
    assert!(!olm_testkit::pki::serves(
        &ca,
        &cert,
        "catalogd.olm-system.svc"
    ));
    let delegator = of(&on, "ClusterRoleBinding", "olm-catalogd-auth-delegator").unwrap();
    assert_eq!(delegator["roleRef"]["name"], "system:auth-delegator");
    let reader = of(&on, "RoleBinding", "olm-catalogd-auth-reader").unwrap();
    assert_eq!(reader["metadata"]["namespace"], "kube-system");
    let viewer = of(&on, "ClusterRole", "olm-catalog-viewer").unwrap();
    assert_eq!(
        viewer["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"],
        "true"
    );
    let catalogd = of(&on, "Deployment", "catalogd").unwrap();
    assert_eq!(catalogd["spec"]["replicas"], 2);
    assert!(of(&on, "PodDisruptionBudget", "catalogd").is_some());
    let args = catalogd_args(&on);
    assert!(
        args.contains(&"--catalog-api-address=0.0.0.0:8443".to_owned()),
        "{args:?}"
    );
    // More replicas asked for catalogd are kept; cert-manager's CA injector fills the bundle.
    let more = docs(&template(&[
        "--set",
        "catalogApi.enabled=true",
        "--set",
        "catalogd.replicas=3",
        "--set",
        "tls.source=certManager",
        "--set",
        "tls.certManager.issuerRef.name=ca",
    ]));
    assert_eq!(
        of(&more, "Deployment", "catalogd").unwrap()["spec"]["replicas"],
        3
    );
    let injected = of(&more, "APIService", "v1alpha1.catalogs.olm-rs.io").unwrap();
    assert_eq!(
        injected["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
        "olm-system/catalogd-api-tls"
    );
    assert!(injected["spec"].get("caBundle").is_none());
    assert!(of(&more, "Certificate", "catalogd-api-tls").is_some());
    // A release made before catalogApi existed, upgraded with --reuse-values, has none of its
    // values: the defaults apply.
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("old.yaml");
    std::fs::write(
        &old,
        "catalogApi:\n  enabled: true\n  replicas: null\n  aggregateToView: null\nports:\n  catalogApi: null\n",
    )
    .unwrap();
    let reused = docs(&template(&["-f", old.to_str().unwrap()]));
    assert_eq!(
        of(&reused, "Deployment", "catalogd").unwrap()["spec"]["replicas"],
        2
    );
    assert!(catalogd_args(&reused).contains(&"--catalog-api-address=0.0.0.0:8443".to_owned()));
    // One PersistentVolumeClaim for two replicas is refused.
    let shared = template_in(
        "olm-system",
        &[
            "--set",
            "catalogApi.enabled=true",
            "--set",
            "catalogd.storage.persistentVolumeClaim.claimName=catalogd",
        ],
    );
    assert!(shared.is_err_and(|e| e.contains("share one store")));
}
