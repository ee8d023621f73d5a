use serde_json::json;

use super::*;

fn config(v: Value) -> DeploymentConfig {
    serde_json::from_value(v).unwrap()
}

/// A Deployment's (metadata, spec): two containers and an init container.
fn deployment() -> (Map<String, Value>, Map<String, Value>) {
    let metadata = json!({"name": "d", "annotations": {"team": "a"}});
    let spec = json!({"template": {
    "metadata": {"annotations": {"team": "a"}},
    "spec": {
        "nodeSelector": {"disk": "ssd"},
        "affinity": {"nodeAffinity": {"x": 1}, "podAffinity": {"y": 2}},
        "volumes": [{"name": "data", "emptyDir": {}}],
        "tolerations": [{"key": "k", "operator": "Exists"}],
        "initContainers": [{"name": "init", "env": [{"name": "A", "value": "init"}]}],
        "containers": [
            {"name": "one", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "1"}],
             "resources": {"limits": {"cpu": "1"}}},
            {"name": "two"},
        ]}}});
    match (metadata, spec) {
        (Value::Object(m), Value::Object(s)) => (m, s),
        _ => unreachable!("objects"),
    }
}

fn applied(c: Value) -> (Value, Value) {
    let (mut metadata, mut spec) = deployment();
    apply(&config(c), &mut metadata, &mut spec);
    (Value::Object(metadata), Value::Object(spec))
}

#[test]
fn env_is_replaced_where_it_stands_and_new_names_come_last_once() {
    let (_, spec) = applied(json!({"env": [
        {"name": "B", "value": "config"}, {"name": "C", "value": "first"},
        {"name": "C", "value": "last"}]}));
    let containers = &spec["template"]["spec"]["containers"];
    assert_eq!(
        containers[0]["env"],
        json!([{"name": "A", "value": "1"}, {"name": "B", "value": "config"},
               {"name": "C", "value": "last"}])
    );
    assert_eq!(
        containers[1]["env"],
        json!([{"name": "B", "value": "config"}, {"name": "C", "value": "last"}])
    );
    // Init containers are left alone, as upstream leaves them.
    assert_eq!(
        spec["template"]["spec"]["initContainers"][0]["env"],
        json!([{"name": "A", "value": "init"}])
    );
}

#[test]
fn volumes_by_name_tolerations_and_env_from_once_resources_and_node_selector_replaced() {
    let (_, spec) = applied(json!({
        "volumes": [{"name": "data", "configMap": {"name": "c"}}, {"name": "more", "emptyDir": {}}],
        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
        "tolerations": [{"key": "k", "operator": "Exists"}, {"key": "new", "operator": "Exists"}],
        "envFrom": [{"prefix": "p"}, {"prefix": "p"}],
        "resources": {"requests": {"memory": "64Mi"}},
        "nodeSelector": {"kubernetes.io/os": "linux"},
    }));
    let pod = &spec["template"]["spec"];
    assert_eq!(
        pod["volumes"],
        json!([{"name": "data", "configMap": {"name": "c"}}, {"name": "more", "emptyDir": {}}])
    );
    assert_eq!(
        pod["tolerations"],
        json!([{"key": "k", "operator": "Exists"}, {"key": "new", "operator": "Exists"}])
    );
    assert_eq!(pod["nodeSelector"], json!({"kubernetes.io/os": "linux"}));
    for c in pod["containers"].as_array().unwrap() {
        assert_eq!(c["envFrom"], json!([{"prefix": "p"}]));
        assert_eq!(c["resources"], json!({"requests": {"memory": "64Mi"}}));
        assert_eq!(
            c["volumeMounts"],
            json!([{"name": "data", "mountPath": "/data"}])
        );
    }
    let (_, cleared) = applied(json!({"nodeSelector": {}}));
    assert!(cleared["template"]["spec"].get("nodeSelector").is_none());
}

#[test]
fn affinity_parts_given_replace_empty_ones_remove_and_an_empty_affinity_removes_it_all() {
    let (_, spec) = applied(json!({"affinity": {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}},
        "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "podAffinityTerm": {"topologyKey": "zone"}}]}}}));
    assert_eq!(
        spec["template"]["spec"]["affinity"],
        json!({"podAffinity": {"y": 2}, "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "podAffinityTerm": {"topologyKey": "zone"}}]}})
    );
    let (_, gone) = applied(json!({"affinity": {}}));
    assert!(gone["template"]["spec"].get("affinity").is_none());
}

#[test]
fn annotations_are_added_where_missing_and_nothing_given_changes_nothing() {
    let (metadata, spec) = applied(json!({"annotations": {"team": "b", "cost": "x"}}));
    assert_eq!(metadata["annotations"], json!({"team": "a", "cost": "x"}));
    assert_eq!(
        spec["template"]["metadata"]["annotations"],
        json!({"team": "a", "cost": "x"})
    );
    let (metadata, spec) = applied(json!({"env": [], "volumes": [], "tolerations": []}));
    let (want_metadata, want_spec) = deployment();
    assert_eq!(metadata, Value::Object(want_metadata));
    assert_eq!(spec, Value::Object(want_spec));
}
