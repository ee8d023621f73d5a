//! Golden: argocd-operator v0.6.0, a real registry+v1 bundle, converts to the objects
//! operator-controller renders for it in AllNamespaces, OwnNamespace and SingleNamespace modes
//! (its regression test data, copied into tests/data/registry-v1 with its source named there):
//! the same ClusterRoles, Roles and bindings under the same names with the same rules, the same
//! ServiceAccount, Deployment (`olm.targetNamespaces` saying the mode), Service, ConfigMap and
//! CRDs. Given the install namespace, as upstream is, ours makes no Namespace; without one it
//! makes `<package>-system`. For a single namespace ours adds, as OLM v0 does, the Role in the
//! install namespace.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use provisioner::format::registry;
use provisioner::settings::Settings;
use serde_json::Value;

const BUNDLE: &str = "tests/data/registry-v1/argocd-operator.v0.6.0";

/// Go's typed round trip writes `creationTimestamp: null` and empty `status`es; neither is
/// part of what is applied.
fn normal(mut v: Value) -> Value {
    if let Some(map) = v.as_object_mut() {
        map.remove("status");
        if let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("creationTimestamp");
        }
    }
    v
}

fn yaml(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

/// `Kind name`, or `Kind namespace/name`.
fn id(v: &Value) -> String {
    let name = v["metadata"]["name"].as_str().unwrap();
    match v["metadata"]["namespace"].as_str() {
        Some(ns) => format!("{} {ns}/{name}", v["kind"].as_str().unwrap()),
        None => format!("{} {name}", v["kind"].as_str().unwrap()),
    }
}

/// Our objects, by kind and name (namespaced ones with their namespace).
fn ours(settings: &Settings) -> BTreeMap<String, Value> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(BUNDLE);
    registry::objects_for(&common::bundle_tree(&dir), settings)
        .unwrap()
        .into_iter()
        .map(|o| {
            let v = normal(Value::Object(o.manifest));
            (id(&v), v)
        })
        .collect()
}

/// Upstream's rendering: the files of `folder`, those it shares with the all-namespaces
/// rendering (`shared`), and the bundle's CRDs (upstream's expected CRDs are the bundle's,
/// unchanged).
fn upstream(folder: &str, shared: &[&str]) -> BTreeMap<String, Value> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(BUNDLE);
    let mut expected: BTreeMap<String, Value> = BTreeMap::new();
    let mut files: Vec<_> = std::fs::read_dir(dir.join(folder))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.extend(
        shared
            .iter()
            .map(|f| dir.join("expected-all-namespaces").join(f)),
    );
    for path in files {
        for doc in yaml(&path) {
            let v = normal(doc);
            expected.insert(id(&v), v);
        }
    }
    for entry in std::fs::read_dir(dir.join("manifests")).unwrap() {
        for doc in yaml(&entry.unwrap().path()) {
            if doc["kind"] == "CustomResourceDefinition" {
                let v = normal(doc);
                expected.insert(id(&v), v);
            }
        }
    }
    expected
}

fn same(ours: &BTreeMap<String, Value>, expected: &BTreeMap<String, Value>) {
    let names = |m: &BTreeMap<String, Value>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(names(ours), names(expected));
    for (key, want) in expected {
        assert_eq!(&ours[key], want, "{key} differs from upstream's rendering");
    }
}

/// What upstream's renderer is given: the install namespace `argocd-system` (which it does
/// not make), and the namespaces watched.
fn asked(watch: Option<&str>) -> Settings {
    Settings {
        namespace: Some("argocd-system".into()),
        watch: watch.map(|w| vec![w.to_owned()]),
        deployment: None,
        ..Settings::default()
    }
}

/// upstream's files of the OwnNamespace and SingleNamespace renderings that are the same as
/// the all-namespaces rendering's: the metrics-reader ClusterRole, the clusterPermissions
/// ClusterRole and its binding, the ConfigMap, the Service and the ServiceAccount.
const SHARED: [&str; 6] = [
    "00_clusterrole_argocd-operator-metrics-reader.yaml",
    "01_clusterrole_argocd-operator.v0-1dhiybrldl1gyksid1dk2dqjsc72psdybc7iyvse5gpx.yaml",
    "03_clusterrolebinding_argocd-operator.v0-1dhiybrldl1gyksid1dk2dqjsc72psdybc7iyvse5gpx.yaml",
    "05_configmap_argocd-operator-manager-config.yaml",
    "12_service_argocd-operator-controller-manager-metrics-service.yaml",
    "13_serviceaccount_argocd-operator-controller-manager.yaml",
];

const ROLE: &str = "argocd-operator.v0-22gmilmgp91wu25is5i2ec598hni8owq3l71bbkl7iz3";

#[test]
fn argocd_converts_as_upstream_renders_it_for_all_namespaces() {
    let ours = ours(&asked(None));
    same(&ours, &upstream("expected-all-namespaces", &[]));
    // The two ClusterRoles: clusterPermissions as written, permissions promoted with read
    // access to namespaces; their names are upstream's (the same hash of the same rules).
    let promoted =
        &ours["ClusterRole argocd-operator.v0.-3gkm3u8zfarktdile5wekso69zs9bgzb988mhjm0y6p"];
    let last = promoted["rules"].as_array().unwrap().last().unwrap();
    assert_eq!(last["resources"], serde_json::json!(["namespaces"]));
    assert!(
        ours.keys()
            .all(|k| k.len() <= "ClusterRoleBinding ".len() + 63)
    );
    // `""` asked is all namespaces too.
    assert_eq!(ours, self::ours(&asked(Some(""))));
}

#[test]
fn argocd_converts_as_upstream_renders_it_for_its_own_namespace() {
    let ours = ours(&asked(Some("argocd-system")));
    same(&ours, &upstream("expected-own-namespace", &SHARED));
    assert!(ours.contains_key(&format!("Role argocd-system/{ROLE}")));
}

#[test]
fn argocd_converts_as_upstream_renders_it_for_a_single_namespace_and_as_olm_v0_in_its_own() {
    let ours = ours(&asked(Some("argocd-watch")));
    let expected = upstream("expected-single-namespace", &SHARED);
    // Beyond upstream v1, as OLM v0: the permissions in the install namespace too, where the
    // operator keeps its leader-election lease and writes its events.
    let own = upstream("expected-own-namespace", &SHARED);
    let in_install = |v: &Value| {
        matches!(v["kind"].as_str(), Some("Role" | "RoleBinding"))
            && v["metadata"]["namespace"] == "argocd-system"
    };
    let (install, watched): (BTreeMap<_, _>, BTreeMap<_, _>) =
        ours.into_iter().partition(|(_, v)| in_install(v));
    for kind in ["Role", "RoleBinding"] {
        let key = format!("{kind} argocd-system/{ROLE}");
        assert_eq!(install[&key], own[&key], "{key} in the install namespace");
        assert!(expected.contains_key(&format!("{kind} argocd-watch/{ROLE}")));
    }
    assert_eq!(install.len(), 2);
    same(&watched, &expected);
}

/// upstream's `deploymentConfig` test options (its `generate-manifests.go`).
fn upstream_deployment_config() -> Value {
    serde_json::json!({
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [
            {"key": "some/key", "operator": "Equal", "effect": "NoSchedule"},
            {"key": "someother/key", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 120}],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                      "limits": {"cpu": "500m", "memory": "512Mi"}},
        "env": [{"name": "CUSTOM_ENV_VAR", "value": "custom-value"},
                {"name": "LOG_LEVEL", "value": "debug"}],
        "envFrom": [{"prefix": "test"}, {"configMapRef": {"name": "configmapForTest"}},
                    {"secretRef": {"name": "secretForTest"}}],
        "volumes": [{"name": "test-configmap-volume", "configMap": {"name": "testVolumeConfigMap"}},
                    {"name": "test-emptydir-volume", "emptyDir": {}}],
        "volumeMounts": [{"name": "test-configmap-volume", "mountPath": "/test-volume-mount", "readOnly": true}],
        "affinity": {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{
                "matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}],
                "matchFields": [{"key": "key", "operator": "In", "values": ["val1", "val2"]}]}]}},
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "test-app"}},
                "namespaces": ["test", "test2"], "topologyKey": "topKey"}]},
            "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
                "weight": 100, "podAffinityTerm": {
                    "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "test-app-2"}},
                    "topologyKey": "topKey2"}}]}},
        "annotations": {"foo": "bar", "testkey": "testval"},
    })
}

#[test]
fn argocd_converts_as_upstream_renders_it_with_per_install_deployment_settings() {
    let config = serde_json::json!({
        "namespace": "argocd-system",
        "deploymentConfig": upstream_deployment_config(),
    });
    let settings =
        provisioner::settings::of(config.as_object(), provisioner::source::Format::Registry)
            .unwrap();
    let shared: Vec<String> = std::fs::read_dir(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(BUNDLE)
            .join("expected-all-namespaces"),
    )
    .unwrap()
    .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
    .filter(|f| !f.contains("_deployment_"))
    .collect();
    let shared: Vec<&str> = shared.iter().map(String::as_str).collect();
    same(
        &ours(&settings),
        &upstream("expected-with-deploymentconfig-options", &shared),
    );
}

#[test]
fn argocd_is_refused_for_several_namespaces_naming_what_it_supports() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(BUNDLE);
    let settings = Settings {
        namespace: Some("argocd-system".into()),
        watch: Some(vec!["team-a".into(), "team-b".into()]),
        deployment: None,
        ..Settings::default()
    };
    let refused = registry::objects_for(&common::bundle_tree(&dir), &settings).unwrap_err();
    assert_eq!(
        refused.to_string(),
        "unsupported install mode: MultiNamespace (watching \"team-a\", \"team-b\") is not \
         supported by this bundle's ClusterServiceVersion (it supports OwnNamespace, \
         SingleNamespace, AllNamespaces)"
    );
}

#[test]
fn without_a_namespace_given_it_installs_into_package_system() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(BUNDLE);
    let objects = registry::objects(&common::bundle_tree(&dir)).unwrap();
    // argocd-operator suggests none: `<package>-system`.
    assert_eq!(
        objects[0].key.to_string(),
        "Namespace argocd-operator-system"
    );
    assert!(objects.iter().all(|o| {
        o.key
            .namespace
            .as_deref()
            .is_none_or(|n| n == "argocd-operator-system")
    }));
}

/// Golden: upstream's webhook-operator v0.0.5 (a validating, a mutating and a conversion
/// webhook, served by one Deployment) renders to upstream's objects when no certificate is
/// injected (upstream's rendering with no certificate provider): the webhook configurations
/// calling `webhook-operator-controller-manager-service`, that Service (443 to the container's
/// 9443), and the CRD's conversion calling it at `/convert`. (Upstream writes the
/// cluster-scoped webhook configurations with a namespace, which the API server drops.)
#[test]
fn webhook_operator_converts_as_upstream_renders_it() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/registry-v1/webhook-operator.v0.0.5");
    let settings = Settings {
        namespace: Some("webhook-system".into()),
        watch: None,
        deployment: None,
        ..Settings::default()
    };
    let rendered = registry::render(&common::bundle_tree(&dir), &settings).unwrap();
    let ours: BTreeMap<String, Value> = rendered
        .objects
        .into_iter()
        .map(|o| {
            let v = normal(Value::Object(o.manifest));
            (id(&v), v)
        })
        .collect();
    let mut expected = BTreeMap::new();
    for entry in std::fs::read_dir(dir.join("expected-all-webhook-types")).unwrap() {
        for mut doc in yaml(&entry.unwrap().path()) {
            if doc["kind"]
                .as_str()
                .is_some_and(|k| k.ends_with("WebhookConfiguration"))
            {
                doc["metadata"].as_object_mut().unwrap().remove("namespace");
            }
            let v = normal(doc);
            expected.insert(id(&v), v);
        }
    }
    same(&ours, &expected);
    assert_eq!(
        rendered.serving,
        [registry::Serving {
            deployment: "webhook-operator-controller-manager".into(),
            service: "webhook-operator-controller-manager-service".into(),
            secret: "webhook-operator-controller-manager-service-cert".into(),
            namespace: "webhook-system".into(),
        }]
    );
}
