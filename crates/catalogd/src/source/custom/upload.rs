//! catalogd's upload endpoint: `PUT /uploads/{pod}` with the Pod's one-time token as a bearer
//! token and the body's sha256 in `X-Content-Sha256`. It listens apart from the content
//! server (`--upload-address`), so that a NetworkPolicy can open it to generator Pods only.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::put;

use super::CustomMetrics;
use super::runs::{Rejected, Runs};

/// The header carrying the sha256 (hex) the collector computed.
pub const SHA256_HEADER: &str = "x-content-sha256";

#[derive(Clone)]
struct Uploads {
    runs: Arc<Runs>,
    max_bytes: u64,
    metrics: Option<CustomMetrics>,
}

/// The upload router, accepting bodies up to `max_bytes`.
pub fn router(runs: Arc<Runs>, max_bytes: u64, metrics: Option<CustomMetrics>) -> Router {
    Router::new()
        .route("/uploads/{pod}", put(upload))
        .with_state(Uploads {
            runs,
            max_bytes,
            metrics,
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
    let limit = usize::try_from(uploads.max_bytes).unwrap_or(usize::MAX);
    let bytes = match axum::body::to_bytes(body, limit).await {
        Ok(b) => b,
        Err(_) => {
            return (
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "the upload is larger than {} bytes (--max-content-bytes), or was cut short",
                    uploads.max_bytes
                ),
            );
        }
    };
    match uploads.runs.accept(pod, token, claimed, bytes.to_vec()) {
        Ok(()) => (StatusCode::NO_CONTENT, String::new()),
        Err(e @ Rejected::Checksum { .. }) => (StatusCode::BAD_REQUEST, e.to_string()),
        Err(e) => (StatusCode::FORBIDDEN, e.to_string()),
    }
}
