//! Who may read `/metrics` when it is secured: a bearer token the API server authenticates
//! (TokenReview) for a user it authorizes to `get` the non-resource URL `/metrics`
//! (SubjectAccessReview), as controller-runtime's `WithAuthenticationAndAuthorization` filter
//! does, so the same ClusterRole (`nonResourceURLs: ["/metrics"]`, `verbs: ["get"]`) grants a
//! Prometheus access to every manager.
//!
//! Decisions are cached by a hash of the token (allowed for a minute, refused for ten
//! seconds), so a scrape every few seconds costs the API server one review pair a minute.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, TokenReviewStatus};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec, SubjectAccessReviewStatus,
};
use kube::api::{Api, PostParams};
use sha2::{Digest as _, Sha256};

/// How long an allowed token is trusted without asking again.
const ALLOWED_TTL: Duration = Duration::from_secs(60);
/// How long a refused token stays refused without asking again.
const REFUSED_TTL: Duration = Duration::from_secs(10);
/// The non-resource URL a scraper must be allowed to `get`.
const PATH: &str = "/metrics";
/// The most decisions cached; past it the cache starts afresh.
const MAX_CACHED: usize = 1024;

/// What was decided for a token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// The user may read `/metrics`.
    Allowed,
    /// The token is not valid (401).
    Unauthenticated(String),
    /// The user may not read `/metrics` (403).
    Forbidden(String),
}

/// Decisions by the sha256 of the token, with when they were made.
type Cache = HashMap<[u8; 32], (Instant, Decision)>;

/// Checks bearer tokens against the API server. Cheap to clone.
#[derive(Clone)]
pub struct MetricsAuth {
    client: kube::Client,
    cache: Arc<Mutex<Cache>>,
}

impl MetricsAuth {
    /// Reviews with `client` (one without the leader election's write guard: the reviews are
    /// `create`s, and followers must answer scrapes too).
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            cache: Arc::default(),
        }
    }

    /// `None` when the request may read `/metrics`; otherwise the response to send.
    pub async fn refusal(&self, headers: &HeaderMap) -> Option<Response> {
        let Some(token) = bearer(headers) else {
            return respond(&Decision::Unauthenticated(
                "send a bearer token (Authorization: Bearer <token>)".into(),
            ));
        };
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(decision) = self.cached(&key) {
            return respond(&decision);
        }
        let decision = match self.review(token).await {
            Ok(decision) => decision,
            Err(error) => {
                tracing::warn!(error = %crate::error_chain(&error), "could not review a metrics token");
                return Some(
                    (
                        StatusCode::SERVICE_UNAVAILABLE,
                        "could not check the token with the API server\n",
                    )
                        .into_response(),
                );
            }
        };
        self.remember(key, decision.clone());
        respond(&decision)
    }

    fn cached(&self, key: &[u8; 32]) -> Option<Decision> {
        let cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        let (at, decision) = cache.get(key)?;
        let ttl = if *decision == Decision::Allowed {
            ALLOWED_TTL
        } else {
            REFUSED_TTL
        };
        (at.elapsed() < ttl).then(|| decision.clone())
    }

    fn remember(&self, key: [u8; 32], decision: Decision) {
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        if cache.len() >= MAX_CACHED {
            cache.clear();
        }
        cache.insert(key, (Instant::now(), decision));
    }

    async fn review(&self, token: &str) -> Result<Decision, kube::Error> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_owned()),
                ..Default::default()
            },
            ..Default::default()
        };
        let reviewed = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await?;
        let access = match access_review(reviewed.status.as_ref(), PATH) {
            Ok(access) => access,
            Err(decision) => return Ok(decision),
        };
        let user = access.spec.user.clone().unwrap_or_default();
        let allowed = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &access)
            .await?;
        Ok(authorized(allowed.status.as_ref(), &user, PATH))
    }
}

/// The token of an `Authorization: Bearer <token>` header.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The SubjectAccessReview asking whether the authenticated user may `get` `path`, or the
/// decision when the token review already decided.
pub fn access_review(
    status: Option<&TokenReviewStatus>,
    path: &str,
) -> Result<SubjectAccessReview, Decision> {
    let status =
        status.ok_or_else(|| Decision::Unauthenticated("the token was not reviewed".into()))?;
    if status.authenticated != Some(true) {
        let why = status
            .error
            .clone()
            .filter(|e| !e.is_empty())
            .unwrap_or_else(|| "the token is not valid".into());
        return Err(Decision::Unauthenticated(why));
    }
    let user = status.user.clone().unwrap_or_default();
    Ok(SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: user.username,
            uid: user.uid,
            groups: user.groups,
            extra: user.extra,
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some(path.to_owned()),
                verb: Some("get".to_owned()),
            }),
            ..Default::default()
        },
        ..Default::default()
    })
}

/// The decision a SubjectAccessReview's status gives for `user`.
pub fn authorized(status: Option<&SubjectAccessReviewStatus>, user: &str, path: &str) -> Decision {
    match status {
        Some(s) if s.allowed => Decision::Allowed,
        Some(s) => {
            let reason = s.reason.clone().filter(|r| !r.is_empty());
            Decision::Forbidden(match reason {
                Some(reason) => format!("{user} may not get {path}: {reason}"),
                None => format!("{user} may not get {path}"),
            })
        }
        None => Decision::Forbidden(format!("{user} may not get {path}: no decision")),
    }
}

/// The response refusing the request, or `None` when it is allowed.
fn respond(decision: &Decision) -> Option<Response> {
    match decision {
        Decision::Allowed => None,
        Decision::Unauthenticated(why) => Some(
            (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Bearer")],
                format!("unauthorized: {why}\n"),
            )
                .into_response(),
        ),
        Decision::Forbidden(why) => {
            Some((StatusCode::FORBIDDEN, format!("forbidden: {why}\n")).into_response())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Decision, access_review, authorized, bearer};
    use axum::http::{HeaderMap, HeaderValue, header};
    use k8s_openapi::api::authentication::v1::{TokenReviewStatus, UserInfo};
    use k8s_openapi::api::authorization::v1::SubjectAccessReviewStatus;

    #[test]
    fn only_a_bearer_token_is_taken() {
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(
                header::AUTHORIZATION,
                HeaderValue::from_str(value).expect("a header"),
            );
            headers
        };
        assert_eq!(bearer(&with("Bearer abc")), Some("abc"));
        assert_eq!(bearer(&with("bearer  abc ")), Some("abc"));
        assert_eq!(bearer(&with("Basic abc")), None);
        assert_eq!(bearer(&with("Bearer ")), None);
        assert_eq!(bearer(&HeaderMap::new()), None);
    }

    #[test]
    fn an_authenticated_user_is_asked_about_get_on_the_path() {
        let status = TokenReviewStatus {
            authenticated: Some(true),
            user: Some(UserInfo {
                username: Some("system:serviceaccount:monitoring:prometheus".into()),
                groups: Some(vec!["system:serviceaccounts".into()]),
                uid: Some("u1".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let review = access_review(Some(&status), "/metrics").expect("a review");
        let spec = review.spec;
        assert_eq!(
            spec.user.as_deref(),
            Some("system:serviceaccount:monitoring:prometheus")
        );
        assert_eq!(spec.groups, Some(vec!["system:serviceaccounts".to_owned()]));
        assert_eq!(spec.uid.as_deref(), Some("u1"));
        let attributes = spec.non_resource_attributes.expect("non-resource");
        assert_eq!(attributes.path.as_deref(), Some("/metrics"));
        assert_eq!(attributes.verb.as_deref(), Some("get"));
        assert!(spec.resource_attributes.is_none());
    }

    #[test]
    fn an_invalid_token_is_unauthenticated_with_the_servers_reason() {
        let status = TokenReviewStatus {
            authenticated: Some(false),
            error: Some("token has expired".into()),
            ..Default::default()
        };
        assert_eq!(
            access_review(Some(&status), "/metrics").expect_err("refused"),
            Decision::Unauthenticated("token has expired".into())
        );
        assert!(matches!(
            access_review(None, "/metrics"),
            Err(Decision::Unauthenticated(_))
        ));
    }

    #[test]
    fn access_is_what_the_review_allowed() {
        let allowed = SubjectAccessReviewStatus {
            allowed: true,
            ..Default::default()
        };
        assert_eq!(
            authorized(Some(&allowed), "u", "/metrics"),
            Decision::Allowed
        );
        let denied = SubjectAccessReviewStatus {
            allowed: false,
            reason: Some("no RBAC policy matched".into()),
            ..Default::default()
        };
        assert_eq!(
            authorized(Some(&denied), "u", "/metrics"),
            Decision::Forbidden("u may not get /metrics: no RBAC policy matched".into())
        );
    }
}
