#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use super::*;

fn review(object: Value) -> Value {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u-1", "object": object}})
}

#[test]
fn the_validating_webhook_refuses_a_forbidden_widget_only() {
    let ok = admit(Hook::Validate, &review(json!({"spec": {"size": 1}})));
    assert_eq!(ok["response"], json!({"uid": "u-1", "allowed": true}));
    let refused = admit(
        Hook::Validate,
        &review(json!({"spec": {"forbidden": true}})),
    );
    assert_eq!(refused["response"]["allowed"], false);
    assert!(
        refused["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .contains("forbidden")
    );
}

#[test]
fn the_mutating_webhook_labels_with_or_without_labels() {
    let patch = |object| {
        let r = admit(Hook::Mutate, &review(object));
        let text = STANDARD
            .decode(r["response"]["patch"].as_str().unwrap())
            .unwrap();
        serde_json::from_slice::<Value>(&text).unwrap()
    };
    assert_eq!(
        patch(json!({"metadata": {"name": "a"}})),
        json!([{"op": "add", "path": "/metadata/labels", "value": {MUTATED_LABEL: "true"}}])
    );
    assert_eq!(
        patch(json!({"metadata": {"labels": {"x": "y"}}}))[0]["path"],
        "/metadata/labels/webhook.test.olm-rs.io~1mutated"
    );
}

#[test]
fn conversion_moves_size_and_replicas_between_versions() {
    let v1 =
        json!({"apiVersion": "webhook.test.olm-rs.io/v1", "kind": "Widget", "spec": {"size": 3}});
    let v2 = convert_object(v1.clone(), "webhook.test.olm-rs.io/v2");
    assert_eq!(v2["spec"], json!({"replicas": 3}));
    assert_eq!(v2["apiVersion"], "webhook.test.olm-rs.io/v2");
    assert_eq!(convert_object(v2, "webhook.test.olm-rs.io/v1"), v1);
    let answer = convert(
        &json!({"request": {"uid": "c", "desiredAPIVersion": "webhook.test.olm-rs.io/v2", "objects": [v1]}}),
    );
    assert_eq!(answer["response"]["uid"], "c");
    assert_eq!(
        answer["response"]["convertedObjects"][0]["spec"]["replicas"],
        3
    );
}

#[test]
fn the_aggregated_api_lists_one_reading() {
    assert_eq!(
        readings("/apis/readings.test.olm-rs.io/v1").unwrap()["resources"][0]["name"],
        "readings"
    );
    assert_eq!(
        readings("/apis/readings.test.olm-rs.io/v1/readings").unwrap()["items"][0]["metadata"]["name"],
        "current"
    );
    assert!(readings("/apis/other/v1").is_none());
}

#[test]
fn kubectl_gets_readings_as_a_table() {
    let list = readings("/apis/readings.test.olm-rs.io/v1/readings").unwrap();
    let table = as_table(&list);
    assert_eq!(table["kind"], "Table");
    assert_eq!(table["rows"][0]["cells"], json!(["current", 42]));
}
