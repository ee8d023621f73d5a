//! The operator the webhook and APIService end-to-end tests install (`olm-test-operator`, run
//! from an image assembled from this build, as the managers' are): one HTTPS server, on the
//! serving certificate OLM mounts (`/tmp/k8s-webhook-server/serving-certs`, reloaded when it
//! changes), answering the API server's calls for
//!
//! * `/validate`: a validating webhook refusing a Widget whose `spec.forbidden` is true;
//! * `/mutate`: a mutating webhook labelling every Widget `webhook.test.olm-rs.io/mutated`;
//! * `/convert`: the conversion of Widgets between `v1` (`spec.size`) and `v2`
//!   (`spec.replicas`);
//! * `/apis/readings.test.olm-rs.io/v1`: an aggregated API with one cluster-scoped resource,
//!   `readings`, always listing one Reading, `current`;
//! * `/healthz`, for its readiness probe.
//!
//! The decisions are pure functions ([`admit`], [`convert`], [`readings`]), tested here.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

/// The Widgets' group.
pub const WIDGETS_GROUP: &str = "webhook.test.olm-rs.io";
/// The label the mutating webhook sets.
pub const MUTATED_LABEL: &str = "webhook.test.olm-rs.io/mutated";
/// The aggregated API's group.
pub const READINGS_GROUP: &str = "readings.test.olm-rs.io";
/// How long it answers after it is asked to stop.
const DRAIN: Duration = Duration::from_secs(5);

/// Where OLM mounts the serving certificate for webhooks.
pub const CERT_DIR: &str = "/tmp/k8s-webhook-server/serving-certs";

/// Which webhook an AdmissionReview is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    /// `/validate`.
    Validate,
    /// `/mutate`.
    Mutate,
}

/// The AdmissionReview answering `review` (its `response`, with the request's uid).
pub fn admit(hook: Hook, review: &Value) -> Value {
    let uid = review.pointer("/request/uid").cloned().unwrap_or(json!(""));
    let object = review
        .pointer("/request/object")
        .cloned()
        .unwrap_or(Value::Null);
    let mut response = json!({"uid": uid, "allowed": true});
    match hook {
        Hook::Validate => {
            if object.pointer("/spec/forbidden") == Some(&Value::Bool(true)) {
                response["allowed"] = json!(false);
                response["status"] = json!({"code": 403,
                    "message": "spec.forbidden is true: refused by the test operator's validating webhook"});
            }
        }
        Hook::Mutate => {
            let patch = if object
                .pointer("/metadata/labels")
                .is_some_and(Value::is_object)
            {
                json!([{"op": "add", "path": format!("/metadata/labels/{}", MUTATED_LABEL.replace('/', "~1")), "value": "true"}])
            } else {
                json!([{"op": "add", "path": "/metadata/labels", "value": {MUTATED_LABEL: "true"}}])
            };
            response["patchType"] = json!("JSONPatch");
            response["patch"] = json!(STANDARD.encode(patch.to_string()));
        }
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
}

/// `object` as `desired` (`webhook.test.olm-rs.io/v1` or `/v2`): v1's `spec.size` is v2's
/// `spec.replicas`.
pub fn convert_object(mut object: Value, desired: &str) -> Value {
    let from = object["apiVersion"].as_str().unwrap_or_default().to_owned();
    if from != desired {
        if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
            let (old, new) = if desired.ends_with("/v2") {
                ("size", "replicas")
            } else {
                ("replicas", "size")
            };
            if let Some(v) = spec.remove(old) {
                spec.insert(new.to_owned(), v);
            }
        }
        object["apiVersion"] = json!(desired);
    }
    object
}

/// The ConversionReview answering `review`.
pub fn convert(review: &Value) -> Value {
    let uid = review.pointer("/request/uid").cloned().unwrap_or(json!(""));
    let desired = review
        .pointer("/request/desiredAPIVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let objects: Vec<Value> = review
        .pointer("/request/objects")
        .and_then(Value::as_array)
        .map(|l| {
            l.iter()
                .map(|o| convert_object(o.clone(), desired))
                .collect()
        })
        .unwrap_or_default();
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "response": {"uid": uid, "convertedObjects": objects, "result": {"status": "Success"}}})
}

/// What the aggregated API answers at `path`, or `None` (404).
pub fn readings(path: &str) -> Option<Value> {
    let version = format!("{READINGS_GROUP}/v1");
    match path.trim_end_matches('/') {
        "/apis" => Some(
            json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [{
            "name": READINGS_GROUP,
            "versions": [{"groupVersion": version, "version": "v1"}],
            "preferredVersion": {"groupVersion": version, "version": "v1"}}]}),
        ),
        p if p == format!("/apis/{version}") => Some(json!({
            "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": version,
            "resources": [{"name": "readings", "singularName": "reading", "namespaced": false,
                "kind": "Reading", "verbs": ["get", "list"]}]})),
        p if p == format!("/apis/{version}/readings") => Some(json!({
            "kind": "ReadingList", "apiVersion": version, "metadata": {},
            "items": [reading()]})),
        p if p == format!("/apis/{version}/readings/current") => Some(reading()),
        _ => None,
    }
}

fn reading() -> Value {
    json!({"kind": "Reading", "apiVersion": format!("{READINGS_GROUP}/v1"),
        "metadata": {"name": "current", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "value": 42})
}

async fn validate(Json(review): Json<Value>) -> Json<Value> {
    Json(admit(Hook::Validate, &review))
}

async fn mutate(Json(review): Json<Value>) -> Json<Value> {
    Json(admit(Hook::Mutate, &review))
}

async fn conversion(Json(review): Json<Value>) -> Json<Value> {
    Json(convert(&review))
}

/// The aggregated API: aggregated discovery (asked of `/apis` by the API server) is not
/// served, so it falls back to each group version's resource list.
async fn api(uri: axum::http::Uri, headers: HeaderMap) -> Response {
    let aggregated = headers
        .get("accept")
        .and_then(|a| a.to_str().ok())
        .is_some_and(|a| a.contains("as=APIGroupDiscoveryList"));
    if aggregated && uri.path().trim_end_matches('/') == "/apis" {
        return StatusCode::NOT_ACCEPTABLE.into_response();
    }
    let table = headers
        .get("accept")
        .and_then(|a| a.to_str().ok())
        .is_some_and(|a| a.contains("as=Table"));
    match readings(uri.path()) {
        Some(body) if table && body["kind"] == "ReadingList" => {
            Json(as_table(&body)).into_response()
        }
        Some(body) => Json(body).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// A list of Readings as the Table `kubectl get` asks for (NAME, VALUE).
pub fn as_table(list: &Value) -> Value {
    let rows: Vec<Value> = list["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|r| {
                    json!({"cells": [r["metadata"]["name"], r["value"]],
                    "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                        "metadata": r["metadata"]}})
                })
                .collect()
        })
        .unwrap_or_default();
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {},
        "columnDefinitions": [
            {"name": "Name", "type": "string", "format": "name", "description": "Name", "priority": 0},
            {"name": "Value", "type": "integer", "format": "", "description": "The reading", "priority": 0}],
        "rows": rows})
}

/// The router.
pub fn router() -> Router {
    Router::new()
        .route("/validate", post(validate))
        .route("/mutate", post(mutate))
        .route("/convert", post(conversion))
        .route("/healthz", get(|| async { "ok" }))
        .fallback(get(api))
}

/// Serves on `port` with the certificate in `dir` until SIGTERM.
pub async fn run(port: u16, dir: PathBuf) -> anyhow::Result<()> {
    olm_runtime::client::install_crypto_provider();
    let tls =
        olm_runtime::tls::server_config(Some((&dir.join("tls.crt"), &dir.join("tls.key"))), &[])?;
    let listener = tokio::net::TcpListener::bind(("0.0.0.0", port)).await?;
    // Asked to stop (a rollout), it drains before it stops: for a few seconds it still
    // answers (the API server may send calls here until the endpoint's removal reaches
    // kube-proxy), each answer closing its connection, so that no kept-alive connection is
    // left for the API server to send a call on as it closes (an `EOF`: a failed admission).
    let signalled = olm_runtime::shutdown::try_shutdown_on_signals()?;
    let shutdown = tokio_util::sync::CancellationToken::new();
    let stop = shutdown.clone();
    let draining = Arc::new(AtomicBool::new(false));
    let drain = draining.clone();
    tokio::spawn(async move {
        signalled.cancelled().await;
        drain.store(true, Ordering::Relaxed);
        tokio::time::sleep(DRAIN).await;
        stop.cancel();
    });
    let router = router().layer(axum::middleware::map_response(move |mut r: Response| {
        let draining = draining.load(Ordering::Relaxed);
        async move {
            if draining {
                r.headers_mut().insert(
                    axum::http::header::CONNECTION,
                    axum::http::HeaderValue::from_static("close"),
                );
            }
            r
        }
    }));
    olm_runtime::admin::serve_router(listener, router, Some(tls), shutdown).await?;
    Ok(())
}

#[cfg(test)]
mod tests;
