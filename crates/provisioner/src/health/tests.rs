use serde_json::json;

use super::*;

fn key(group: &str, kind: &str) -> Key {
    Key::new(group, kind, Some("ns"), "x")
}

fn deployment(status: Value) -> Value {
    json!({"metadata": {"generation": 2}, "spec": {"replicas": 2}, "status": status})
}

#[test]
fn only_workloads_crds_and_api_services_are_looked_at() {
    assert!(watched(&key("apps", "Deployment")));
    assert!(watched(&key(
        "apiextensions.k8s.io",
        "CustomResourceDefinition"
    )));
    assert!(watched(&key("apiregistration.k8s.io", "APIService")));
    assert!(!watched(&key("", "ConfigMap")));
    assert!(!watched(&key("example.com", "Deployment")));
}

#[test]
fn a_deployment_is_healthy_when_rolled_out_and_available() {
    let d = key("apps", "Deployment");
    let good = deployment(json!({"observedGeneration": 2, "replicas": 2,
        "updatedReplicas": 2, "availableReplicas": 2}));
    assert_eq!(of_object(&d, &good), Ok(()));
    let behind = deployment(json!({"observedGeneration": 1, "replicas": 2,
        "updatedReplicas": 2, "availableReplicas": 2}));
    assert!(of_object(&d, &behind).unwrap_err().contains("generation 2"));
    let rolling = deployment(json!({"observedGeneration": 2, "replicas": 3,
        "updatedReplicas": 2, "availableReplicas": 2}));
    assert_eq!(
        of_object(&d, &rolling),
        Err("1 old replicas are still running".into())
    );
    let unavailable = deployment(json!({"observedGeneration": 2, "replicas": 2,
        "updatedReplicas": 2, "availableReplicas": 1, "conditions": [
            {"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable",
             "message": "Deployment does not have minimum availability."}]}));
    assert_eq!(
        of_object(&d, &unavailable),
        Err("1 of 2 replicas available (MinimumReplicasUnavailable: Deployment does not have minimum availability.)".into())
    );
    let stuck = deployment(json!({"observedGeneration": 2, "conditions": [
        {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
         "message": "ReplicaSet \"x-1\" has timed out progressing."}]}));
    assert_eq!(
        of_object(&d, &stuck),
        Err("ProgressDeadlineExceeded: ReplicaSet \"x-1\" has timed out progressing.".into())
    );
}

#[test]
fn stateful_and_daemon_sets_are_healthy_when_rolled_out_and_ready() {
    let s = key("apps", "StatefulSet");
    let good = json!({"spec": {"replicas": 1}, "status": {"readyReplicas": 1,
        "updatedReplicas": 1, "currentRevision": "a", "updateRevision": "a"}});
    assert_eq!(of_object(&s, &good), Ok(()));
    let mut rolling = good.clone();
    rolling["status"]["updateRevision"] = json!("b");
    assert!(of_object(&s, &rolling).is_err());
    let mut unready = good;
    unready["status"]["readyReplicas"] = json!(0);
    assert_eq!(of_object(&s, &unready), Err("0 of 1 replicas ready".into()));

    let d = key("apps", "DaemonSet");
    let good = json!({"status": {"desiredNumberScheduled": 1, "updatedNumberScheduled": 1,
        "numberAvailable": 1}});
    assert_eq!(of_object(&d, &good), Ok(()));
    let waiting = json!({"status": {"desiredNumberScheduled": 1, "updatedNumberScheduled": 1,
        "numberAvailable": 0}});
    assert_eq!(of_object(&d, &waiting), Err("0 of 1 Pods available".into()));
}

#[test]
fn crds_and_api_services_need_their_condition() {
    let c = key("apiextensions.k8s.io", "CustomResourceDefinition");
    let established =
        json!({"status": {"conditions": [{"type": "Established", "status": "True"}]}});
    assert_eq!(of_object(&c, &established), Ok(()));
    let not = json!({"status": {"conditions": [{"type": "Established", "status": "False",
        "reason": "Installing", "message": "the initial names have not been accepted"}]}});
    assert_eq!(
        of_object(&c, &not),
        Err("Established is False (Installing): the initial names have not been accepted".into())
    );
    let a = key("apiregistration.k8s.io", "APIService");
    assert_eq!(
        of_object(&a, &json!({})),
        Err("no Available condition yet".into())
    );
}

#[test]
fn the_first_unhealthy_object_is_named_and_a_missing_one_counts() {
    let d = key("apps", "Deployment");
    let c = key("apiextensions.k8s.io", "CustomResourceDefinition");
    let good_crd = json!({"status": {"conditions": [{"type": "Established", "status": "True"}]}});
    let held = |objects: &[(Key, Option<Value>)]| {
        of(objects
            .iter()
            .map(|(k, o)| (k.clone(), of_held(k, o.as_ref())))
            .collect())
    };
    assert_eq!(
        held(&[(c.clone(), Some(good_crd.clone()))]),
        Health::Healthy { count: 1 }
    );
    assert_eq!(
        held(&[(c, Some(good_crd)), (d.clone(), None)]),
        Health::Unhealthy {
            key: d,
            message: "not found".into()
        }
    );
    assert_eq!(held(&[]), Health::Healthy { count: 0 });
}

#[test]
fn a_verdict_is_reused_only_while_the_watch_sees_the_version_it_was_read_at() {
    let read = Read {
        version: "7".into(),
        verdict: Err("Established is False".into()),
    };
    assert_eq!(
        reuse(Some(&read), Some("7")),
        Some(Err("Established is False".into()))
    );
    // It changed since: read it again.
    assert_eq!(reuse(Some(&read), Some("8")), None);
    // Gone, or not seen by a watch (not listed yet, or lost): read it.
    assert_eq!(reuse(Some(&read), None), None);
    // Never read.
    assert_eq!(reuse(None, Some("7")), None);
}

#[test]
fn a_webhook_service_is_healthy_once_an_endpoint_is_ready() {
    assert!(endpoints(&[]).is_err());
    let not_ready =
        json!({"endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": false}}]});
    assert!(
        endpoints(std::slice::from_ref(&not_ready))
            .unwrap_err()
            .contains("no ready endpoint")
    );
    let ready = json!({"endpoints": [{"addresses": ["10.0.0.2"], "conditions": {"ready": true}}]});
    assert_eq!(endpoints(&[not_ready, ready]), Ok(()));
}
