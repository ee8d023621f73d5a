//! catalogd's upload endpoint: `PUT /uploads/{pod}` with the Pod's one-time token as a bearer
//! token and the body's sha256 in `X-Content-Sha256`. It listens apart from the content
//! server (`--upload-address`), so that a NetworkPolicy can open it to generator Pods only.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::put;
use tokio::sync::Semaphore;

use super::CustomMetrics;
use super::runs::{Rejected, Runs};

/// The header carrying the sha256 (hex) the collector computed.
pub const SHA256_HEADER: &str = "x-content-sha256";

/// Uploads read at once; more wait their turn (a collector retries nothing, but generators
/// run few at a time, so only a flood from elsewhere ever waits).
const CONCURRENT_UPLOADS: usize = 4;
/// The longest an upload's body may take to arrive.
const BODY_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Clone)]
struct Uploads {
    runs: Arc<Runs>,
    max_bytes: u64,
    metrics: Option<CustomMetrics>,
    reading: Arc<Semaphore>,
}

/// The upload router, accepting bodies up to `max_bytes`.
pub fn router(runs: Arc<Runs>, max_bytes: u64, metrics: Option<CustomMetrics>) -> Router {
    Router::new()
        .route("/uploads/{pod}", put(upload))
        .with_state(Uploads {
            runs,
            max_bytes,
            metrics,
            reading: Arc::new(Semaphore::new(CONCURRENT_UPLOADS)),
        })
}

async fn upload(
    State(uploads): State<Uploads>,
    Path(pod): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> (StatusCode, String) {
    let answer = accept(&uploads, &pod, &headers, body).await;
    let result = if answer.0.is_success() {
        "accepted"
    } else {
        "rejected"
    };
    if let Some(m) = &uploads.metrics {
        m.uploads.with_label_values(&[result]).inc();
    }
    if !answer.0.is_success() {
        tracing::warn!(%pod, status = %answer.0, reason = %answer.1, "refused an upload");
    } else {
        tracing::info!(%pod, "accepted an upload");
    }
    answer
}

async fn accept(
    uploads: &Uploads,
    pod: &str,
    headers: &HeaderMap,
    body: Body,
) -> (StatusCode, String) {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let Some(token) = header("authorization").and_then(|v| v.strip_prefix("Bearer ")) else {
        return (
            StatusCode::UNAUTHORIZED,
            "an upload needs the pod's token as a bearer token".into(),
        );
    };
    let Some(claimed) = header(SHA256_HEADER) else {
        return (
            StatusCode::BAD_REQUEST,
            format!("an upload needs its sha256 in {SHA256_HEADER}"),
        );
    };
    // The token first: without one, not a byte of the body is read.
    if let Err(e) = uploads.runs.admit(pod, token) {
        return (StatusCode::FORBIDDEN, e.to_string());
    }
    let Ok(_reading) = uploads.reading.clone().acquire_owned().await else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "catalogd is shutting down".into(),
        );
    };
    let limit = usize::try_from(uploads.max_bytes).unwrap_or(usize::MAX);
    let bytes = match tokio::time::timeout(BODY_TIMEOUT, axum::body::to_bytes(body, limit)).await {
        Ok(Ok(b)) => b,
        Ok(Err(_)) => {
            return (
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "the upload is larger than {} bytes (--max-content-bytes), or was cut short",
                    uploads.max_bytes
                ),
            );
        }
        Err(_) => {
            return (
                StatusCode::REQUEST_TIMEOUT,
                format!("the upload took longer than {}s", BODY_TIMEOUT.as_secs()),
            );
        }
    };
    // Hashing a large body is CPU work: off the async threads.
    let (runs, pod, token, claimed) = (
        uploads.runs.clone(),
        pod.to_owned(),
        token.to_owned(),
        claimed.to_owned(),
    );
    let accepted =
        tokio::task::spawn_blocking(move || runs.accept(&pod, &token, &claimed, bytes.to_vec()))
            .await;
    match accepted {
        Ok(Ok(())) => (StatusCode::NO_CONTENT, String::new()),
        Ok(Err(e @ Rejected::Checksum { .. })) => (StatusCode::BAD_REQUEST, e.to_string()),
        Ok(Err(e)) => (StatusCode::FORBIDDEN, e.to_string()),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("checking the upload: {e}"),
        ),
    }
}
