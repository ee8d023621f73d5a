//! Errors as the API server writes them: a `Status` object, which kubectl prints as
//! `Error from server (Reason): message`.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::kinds::GROUP;

/// A failed request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The HTTP status.
    pub code: StatusCode,
    /// The Status reason (`NotFound`, `Forbidden` …).
    pub reason: &'static str,
    /// The message.
    pub message: String,
    /// The resource, for `details`.
    pub resource: Option<String>,
    /// The object's name, for `details`.
    pub name: Option<String>,
}

impl Failure {
    fn new(code: StatusCode, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            resource: None,
            name: None,
        }
    }

    /// 400.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "BadRequest", message)
    }

    /// 401.
    pub fn unauthorized() -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized")
    }

    /// 403, in the API server's words.
    pub fn forbidden(user: &str, verb: &str, resource: &str, reason: &str) -> Self {
        let mut message = format!(
            "{resource}.{GROUP} is forbidden: User \"{user}\" cannot {verb} resource \"{resource}\" in API group \"{GROUP}\" at the cluster scope"
        );
        if !reason.is_empty() {
            message.push_str(": ");
            message.push_str(reason);
        }
        let mut f = Self::new(StatusCode::FORBIDDEN, "Forbidden", message);
        f.resource = Some(resource.to_owned());
        f
    }

    /// 404 of an object.
    pub fn not_found(resource: &str, name: &str) -> Self {
        let mut f = Self::new(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("{resource}.{GROUP} \"{name}\" not found"),
        );
        f.resource = Some(resource.to_owned());
        f.name = Some(name.to_owned());
        f
    }

    /// 404 of a path.
    pub fn no_route() -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "NotFound",
            "the server could not find the requested resource",
        )
    }

    /// 405: the API is read-only.
    pub fn read_only(method: &str) -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            format!(
                "{method} is not supported: catalog content is read-only; change the Catalog's source instead"
            ),
        )
    }

    /// 410: a continue token or resourceVersion of content no longer served.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(StatusCode::GONE, "Expired", message)
    }

    /// 429.
    pub fn too_many(message: impl Into<String>) -> Self {
        Self::new(StatusCode::TOO_MANY_REQUESTS, "TooManyRequests", message)
    }

    /// 503.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            message,
        )
    }

    /// 500.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", message)
    }

    /// The `Status` object.
    pub fn body(&self) -> serde_json::Value {
        let mut details = serde_json::Map::new();
        if let Some(resource) = &self.resource {
            details.insert("group".into(), json!(GROUP));
            details.insert("kind".into(), json!(resource));
        }
        if let Some(name) = &self.name {
            details.insert("name".into(), json!(name));
        }
        json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "details": details,
            "code": self.code.as_u16(),
        })
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let mut response = (self.code, self.body().to_string()).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        response
    }
}
