//! Events against a fake apiserver on a loopback port: where each Event is written, what it
//! says, that repeats are aggregated, and that a refused Event never fails the caller.

use axum::{
    Router,
    body::Bytes,
    extract::State,
    http::{Method, StatusCode, Uri, header},
    response::{IntoResponse, Response},
};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::ObjectMeta;
use olm_runtime::{EventPublisher, EventType};
use serde_json::Value;
use std::{
    net::SocketAddr,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};
use tokio_util::sync::CancellationToken;

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

const DEADLINE: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
struct Request {
    method: Method,
    path: String,
    body: Value,
}

#[derive(Clone, Default)]
struct FakeApi {
    requests: Arc<Mutex<Vec<Request>>>,
    forbid: Arc<AtomicBool>,
}

impl FakeApi {
    fn requests(&self) -> Vec<Request> {
        self.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

async fn record(State(api): State<FakeApi>, method: Method, uri: Uri, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    api.requests
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(Request {
            method: method.clone(),
            path: uri.path().to_owned(),
            body: body.clone(),
        });
    let json = [(header::CONTENT_TYPE, "application/json")];
    if api.forbid.load(Ordering::SeqCst) {
        let status = serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "events.events.k8s.io is forbidden", "reason": "Forbidden", "code": 403
        });
        return (StatusCode::FORBIDDEN, json, status.to_string()).into_response();
    }
    let status = if method == Method::POST {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    (status, json, body.to_string()).into_response()
}

struct Harness {
    api: FakeApi,
    publisher: EventPublisher,
    _stop: tokio_util::sync::DropGuard,
}

async fn start() -> Result<Harness, Box<dyn std::error::Error + Send + Sync>> {
    olm_runtime::client::install_crypto_provider();
    let api = FakeApi::default();
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
    let addr = listener.local_addr()?;
    let stop = CancellationToken::new();
    let app = Router::new().fallback(record).with_state(api.clone());
    tokio::spawn(
        axum::serve(listener, app)
            .with_graceful_shutdown(stop.clone().cancelled_owned())
            .into_future(),
    );
    let config = kube::Config::new(format!("http://{addr}").parse()?);
    let client = kube::Client::try_from(config)?;
    let publisher = EventPublisher::new(client, "catalogd", Some("catalogd-7d9f".into()));
    Ok(Harness {
        api,
        publisher,
        _stop: stop.drop_guard(),
    })
}

fn namespace(resource_version: &str) -> Namespace {
    Namespace {
        metadata: ObjectMeta {
            name: Some("olm-test".into()),
            uid: Some("0b1c-uid".into()),
            resource_version: Some(resource_version.into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    }
}

async fn publish(
    publisher: &EventPublisher,
    obj: &impl kube::Resource<DynamicType = ()>,
    note: String,
) -> TestResult {
    tokio::time::timeout(
        DEADLINE,
        publisher.publish(obj, EventType::Warning, "UnpackFailed", "Unpack", note),
    )
    .await?;
    Ok(())
}

#[tokio::test]
async fn cluster_scoped_objects_get_events_in_default() -> TestResult {
    let h = start().await?;
    publish(&h.publisher, &namespace("1"), "image not found".into()).await?;

    let requests = h.api.requests();
    let [request] = requests.as_slice() else {
        return Err(format!("expected one request, got {requests:#?}").into());
    };
    assert_eq!(request.method, Method::POST);
    assert_eq!(
        request.path,
        "/apis/events.k8s.io/v1/namespaces/default/events"
    );
    let event = &request.body;
    assert_eq!(event["regarding"]["kind"], "Namespace");
    assert_eq!(event["regarding"]["name"], "olm-test");
    assert_eq!(event["regarding"]["uid"], "0b1c-uid");
    assert!(event["regarding"].get("namespace").is_none(), "{event}");
    assert_eq!(event["type"], "Warning");
    assert_eq!(event["reason"], "UnpackFailed");
    assert_eq!(event["action"], "Unpack");
    assert_eq!(event["note"], "image not found");
    assert_eq!(event["reportingController"], "catalogd");
    assert_eq!(event["reportingInstance"], "catalogd-7d9f");
    Ok(())
}

#[tokio::test]
async fn an_empty_namespace_counts_as_cluster_scoped() -> TestResult {
    let h = start().await?;
    let mut obj = namespace("1");
    obj.metadata.namespace = Some(String::new());
    publish(&h.publisher, &obj, "image not found".into()).await?;

    let requests = h.api.requests();
    let paths: Vec<&str> = requests.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(paths, ["/apis/events.k8s.io/v1/namespaces/default/events"]);
    Ok(())
}

#[tokio::test]
async fn namespaced_objects_get_events_in_their_namespace() -> TestResult {
    let h = start().await?;
    let config_map = ConfigMap {
        metadata: ObjectMeta {
            name: Some("settings".into()),
            namespace: Some("team-a".into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    publish(&h.publisher, &config_map, "loaded".into()).await?;

    let requests = h.api.requests();
    let paths: Vec<&str> = requests.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(paths, ["/apis/events.k8s.io/v1/namespaces/team-a/events"]);
    Ok(())
}

#[tokio::test]
async fn repeats_are_aggregated_into_a_series_even_when_the_object_changed() -> TestResult {
    let h = start().await?;
    publish(&h.publisher, &namespace("1"), "image not found".into()).await?;
    // A status write in between bumps the resourceVersion; it is still the same object.
    publish(&h.publisher, &namespace("2"), "image not found".into()).await?;

    let requests = h.api.requests();
    let methods: Vec<&Method> = requests.iter().map(|r| &r.method).collect();
    assert_eq!(methods, [&Method::POST, &Method::PATCH], "{requests:#?}");
    let name = requests[0].body["metadata"]["name"]
        .as_str()
        .ok_or("created event has no name")?;
    assert_eq!(
        requests[1].path,
        format!("/apis/events.k8s.io/v1/namespaces/default/events/{name}")
    );
    assert_eq!(requests[1].body["series"]["count"], 2);
    Ok(())
}

/// The apiserver refuses a change of an Event's note, so a new note starts a new Event.
#[tokio::test]
async fn a_different_note_is_a_new_event_not_a_series() -> TestResult {
    let h = start().await?;
    publish(&h.publisher, &namespace("1"), "image not found".into()).await?;
    publish(&h.publisher, &namespace("1"), "registry unreachable".into()).await?;
    publish(&h.publisher, &namespace("1"), "image not found".into()).await?;

    let requests = h.api.requests();
    let methods: Vec<&Method> = requests.iter().map(|r| &r.method).collect();
    assert_eq!(
        methods,
        [&Method::POST, &Method::POST, &Method::PATCH],
        "{requests:#?}"
    );
    assert_eq!(requests[1].body["note"], "registry unreachable");
    assert!(
        requests[2]
            .body
            .get("note")
            .is_none_or(|n| n == "image not found")
    );
    Ok(())
}

#[tokio::test]
async fn long_notes_are_cut_to_1024_bytes_on_a_character_boundary() -> TestResult {
    let h = start().await?;
    let note = format!("{}é and more", "x".repeat(1023));
    publish(&h.publisher, &namespace("1"), note).await?;

    let requests = h.api.requests();
    let sent = requests
        .first()
        .and_then(|r| r.body["note"].as_str())
        .ok_or("no note sent")?;
    assert_eq!(sent, "x".repeat(1023));
    Ok(())
}

#[tokio::test]
async fn a_refused_event_does_not_fail_the_caller() -> TestResult {
    let h = start().await?;
    h.api.forbid.store(true, Ordering::SeqCst);
    // Returns (), within the deadline, despite the 403.
    publish(&h.publisher, &namespace("1"), "anything".into()).await?;
    assert_eq!(h.api.requests().len(), 1);

    // And the publisher keeps working once the apiserver accepts events again.
    h.api.forbid.store(false, Ordering::SeqCst);
    publish(&h.publisher, &namespace("1"), "anything".into()).await?;
    let requests = h.api.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].method, Method::POST);
    Ok(())
}
