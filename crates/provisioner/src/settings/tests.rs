use serde_json::json;

use super::*;

fn registry(config: Value) -> Result<Settings, Refusal> {
    match config {
        Value::Object(map) => of(Some(&map), Format::Registry),
        _ => unreachable!("an object"),
    }
}

fn refused(config: Value) -> String {
    let refusal = registry(config).unwrap_err();
    assert_eq!(refusal.reason, INVALID_CONFIGURATION);
    refusal.message
}

#[test]
fn no_config_asks_nothing() {
    assert_eq!(of(None, Format::Registry), Ok(Settings::default()));
    assert_eq!(registry(json!({})), Ok(Settings::default()));
    assert_eq!(
        registry(json!({"namespace": null, "watchNamespace": null})),
        Ok(Settings::default())
    );
}

#[test]
fn the_install_namespace_and_the_watched_ones_are_read() {
    assert_eq!(
        registry(json!({"namespace": "ops", "watchNamespace": "team-a"})),
        Ok(Settings {
            namespace: Some("ops".into()),
            watch: Some(vec!["team-a".into()]),
            deployment: None,
            ..Settings::default()
        })
    );
    // "" is all namespaces, as upstream's watchNamespace says it.
    assert_eq!(
        registry(json!({"watchNamespace": ""})),
        Ok(Settings {
            namespace: None,
            watch: Some(vec![String::new()]),
            deployment: None,
            ..Settings::default()
        })
    );
    assert_eq!(
        registry(json!({"targetNamespaces": ["a", "b"]})),
        Ok(Settings {
            namespace: None,
            watch: Some(vec!["a".into(), "b".into()]),
            deployment: None,
            ..Settings::default()
        })
    );
}

#[test]
fn what_cannot_be_used_is_refused_saying_why() {
    assert_eq!(
        refused(json!({"watchNamespaces": ["a"]})),
        "invalid configuration (spec.config): unknown field \"watchNamespaces\" (a registry+v1 \
         install reads \"namespace\", \"watchNamespace\", \"targetNamespaces\", \
         \"deploymentConfig\")"
    );
    assert!(
        refused(json!({"watchNamespace": "a", "targetNamespaces": ["b"]})).contains("are both set")
    );
    assert!(refused(json!({"targetNamespaces": []})).contains("must list 1 to 256 namespaces"));
    assert!(refused(json!({"targetNamespaces": "a"})).contains("expected a list of namespaces"));
    assert!(refused(json!({"targetNamespaces": [""]})).contains("\"\" is not a namespace name"));
    assert!(refused(json!({"namespace": ""})).contains("\"\" is not a namespace name"));
    assert!(refused(json!({"namespace": 3})).contains("expected a namespace name"));
    assert!(refused(json!({"watchNamespace": "Team_A"})).contains("\"Team_A\" is not a namespace"));
    assert!(refused(json!({"namespace": "-a"})).contains("is not a namespace name"));
    assert!(refused(json!({"namespace": "a".repeat(64)})).contains("is not a namespace name"));
}

#[test]
fn the_deployment_settings_are_read_and_what_they_cannot_hold_is_refused() {
    let read = registry(json!({"deploymentConfig": {
        "env": [{"name": "LOG_LEVEL", "value": "debug"}],
        "nodeSelector": {"kubernetes.io/os": "linux"}}}))
    .unwrap();
    let deployment = read.deployment.unwrap();
    assert_eq!(deployment.env.unwrap()[0].name, "LOG_LEVEL");
    assert_eq!(
        deployment.node_selector.unwrap()["kubernetes.io/os"],
        "linux"
    );
    // OLM v0's `selector` was never used; upstream v1 refuses it too.
    let selector = refused(json!({"deploymentConfig": {"selector": {}}}));
    assert!(
        selector.starts_with(
            "invalid configuration (spec.config): \"deploymentConfig\": unknown field `selector`"
        ),
        "{selector}"
    );
    let wrong = refused(json!({"deploymentConfig": {"env": "LOG_LEVEL=debug"}}));
    assert!(wrong.contains("invalid type"), "{wrong}");
    let nameless = refused(json!({"deploymentConfig": {"env": [{"value": "x"}]}}));
    assert!(
        nameless.ends_with("\"deploymentConfig\": env[0]: required field \"name\" is missing"),
        "{nameless}"
    );
    let pathless = refused(json!({"deploymentConfig": {"volumeMounts": [{"name": "v"}]}}));
    assert!(pathless.contains("mountPath"), "{pathless}");
}

#[test]
fn a_plain_bundle_refuses_the_install_keys_and_ignores_others() {
    let config = |v: Value| match v {
        Value::Object(map) => of(Some(&map), Format::Plain),
        _ => unreachable!("an object"),
    };
    assert_eq!(config(json!({"anything": 1})), Ok(Settings::default()));
    let refusal = config(json!({"watchNamespace": "a"})).unwrap_err();
    assert_eq!(refusal.reason, INVALID_CONFIGURATION);
    assert!(refusal.message.contains("does not apply to plain bundles"));
}

#[test]
fn a_charts_values_are_read_inline_as_text_or_object_and_from_references_in_order() {
    let helm = |v: Value| match v {
        Value::Object(map) => of(Some(&map), Format::Helm),
        _ => unreachable!("an object"),
    };
    let text = helm(json!({"values": "replicaCount: 2\n", "namespace": "shop"})).unwrap();
    assert_eq!(text.values.inline.as_deref(), Some("replicaCount: 2\n"));
    assert_eq!(text.namespace.as_deref(), Some("shop"));
    let object = helm(json!({"values": {"replicaCount": 2}})).unwrap();
    assert_eq!(
        object.values.inline.as_deref(),
        Some("{\"replicaCount\":2}")
    );
    let from = helm(json!({"valuesFrom": [
        {"kind": "Secret", "name": "a"},
        {"kind": "ConfigMap", "name": "b", "key": "prod.yaml", "optional": true}
    ]}))
    .unwrap();
    let names: Vec<(&str, &str, bool)> = from
        .values
        .from
        .iter()
        .map(|r| (r.name.as_str(), r.key(), r.optional))
        .collect();
    assert_eq!(
        names,
        [("a", "values.yaml", false), ("b", "prod.yaml", true)]
    );
    for (bad, says) in [
        (
            json!({"values": 3}),
            "expected the values as an object or as YAML text",
        ),
        (
            json!({"valuesFrom": [{"kind": "Pod", "name": "a"}]}),
            "unknown variant `Pod`",
        ),
        (
            json!({"valuesFrom": [{"kind": "Secret"}]}),
            "missing field `name`",
        ),
        (
            json!({"watchNamespace": "a"}),
            "a Helm chart's install reads \"namespace\", \"values\", \"valuesFrom\"",
        ),
    ] {
        let refusal = helm(bad).unwrap_err();
        assert_eq!(refusal.reason, INVALID_CONFIGURATION);
        assert!(refusal.message.contains(says), "{refusal}");
    }
}

#[test]
fn a_kustomizations_directory_stays_inside_the_bundle() {
    let kustomize = |v: Value| match v {
        Value::Object(map) => of(Some(&map), Format::Kustomize),
        _ => unreachable!("an object"),
    };
    let read = kustomize(json!({"directory": "overlays/prod/"})).unwrap();
    assert_eq!(read.directory.as_deref(), Some("overlays/prod"));
    assert_eq!(
        kustomize(json!({"directory": "."})).unwrap().directory,
        None
    );
    for bad in [
        "../elsewhere",
        "/etc",
        "a/../../b",
        "--output=/tmp/x",
        "a/-b",
    ] {
        let refusal = kustomize(json!({"directory": bad})).unwrap_err();
        assert!(
            refusal.message.contains("is not a directory of the bundle"),
            "{refusal}"
        );
    }
    let refusal = kustomize(json!({"values": {}})).unwrap_err();
    assert!(
        refusal.message.contains("a kustomization's install reads"),
        "{refusal}"
    );
}
