//! Who may read `/metrics` when it is secured: a bearer token the API server authenticates
//! (TokenReview) for a user it authorizes to `get` the non-resource URL `/metrics`
//! (SubjectAccessReview), as controller-runtime's `WithAuthenticationAndAuthorization` filter
//! does, so the same ClusterRole (`nonResourceURLs: ["/metrics"]`, `verbs: ["get"]`) grants a
//! Prometheus access to every manager.
//!
//! Decisions are cached by a hash of the token (allowed for a minute, refused for ten
//! seconds), so a scrape every few seconds costs the API server one review pair a minute.
//! A token not yet decided costs a TokenReview, so unknown tokens are reviewed at most
//! [`REVIEW_RATE`] a second (a burst of [`REVIEW_BURST`]); past that a request is answered 429
//! without asking the API server. Requests with the same token wait for one review
//! (single-flight). Allowed and refused decisions are cached apart, so a flood of random tokens
//! never evicts a scraper's.

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
use prometheus::IntCounterVec;
use sha2::{Digest as _, Sha256};
use tokio::sync::OnceCell;

/// How long an allowed token is trusted without asking again.
const ALLOWED_TTL: Duration = Duration::from_secs(60);
/// How long a refused token stays refused without asking again.
const REFUSED_TTL: Duration = Duration::from_secs(10);
/// The non-resource URL a scraper must be allowed to `get`.
const PATH: &str = "/metrics";
/// The most decisions of each kind cached; past it that kind starts afresh.
const MAX_CACHED: usize = 1024;
/// Reviews of unknown tokens per second, at most.
pub const REVIEW_RATE: f64 = 5.0;
/// Reviews of unknown tokens at once, at most.
pub const REVIEW_BURST: f64 = 20.0;

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

/// A token bucket: `rate` a second, at most `burst` at once. Time is given, so it is tested
/// without a clock.
#[derive(Debug, Clone)]
pub struct Bucket {
    tokens: f64,
    at: Instant,
    rate: f64,
    burst: f64,
}

impl Bucket {
    /// A full bucket at `now`.
    pub fn new(rate: f64, burst: f64, now: Instant) -> Self {
        Self {
            tokens: burst,
            at: now,
            rate,
            burst,
        }
    }

    /// Takes one at `now`, if there is one.
    pub fn take(&mut self, now: Instant) -> bool {
        let refill = now.saturating_duration_since(self.at).as_secs_f64() * self.rate;
        self.tokens = (self.tokens + refill).min(self.burst);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// The outcome of asking about a token: a decision, too many reviews, or the API server down.
#[derive(Clone, Debug)]
enum Outcome {
    Decided(Decision),
    Throttled,
    Failed,
}

#[derive(Debug)]
struct State {
    allowed: Cache,
    refused: Cache,
    bucket: Bucket,
    /// Reviews under way, by token hash: later requests with the token wait for them.
    inflight: HashMap<[u8; 32], Arc<OnceCell<Outcome>>>,
}

/// Checks bearer tokens against the API server. Cheap to clone.
#[derive(Clone)]
pub struct MetricsAuth {
    client: kube::Client,
    state: Arc<Mutex<State>>,
    reviews: Option<IntCounterVec>,
}

impl MetricsAuth {
    /// Reviews with `client` (one without the leader election's write guard: the reviews are
    /// `create`s, and followers must answer scrapes too); `reviews` counts them by result.
    pub fn new(client: kube::Client, reviews: Option<IntCounterVec>) -> Self {
        Self {
            client,
            state: Arc::new(Mutex::new(State {
                allowed: Cache::default(),
                refused: Cache::default(),
                bucket: Bucket::new(REVIEW_RATE, REVIEW_BURST, Instant::now()),
                inflight: HashMap::default(),
            })),
            reviews,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn count(&self, result: &str) {
        if let Some(reviews) = &self.reviews {
            reviews.with_label_values(&[result]).inc();
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
        // One review per token at a time: the others wait for its outcome.
        let cell = self.lock().inflight.entry(key).or_default().clone();
        let outcome = cell
            .get_or_init(|| async {
                if !self.lock().bucket.take(Instant::now()) {
                    self.count("throttled");
                    return Outcome::Throttled;
                }
                match self.review(token).await {
                    Ok(decision) => {
                        self.count(match decision {
                            Decision::Allowed => "allowed",
                            Decision::Unauthenticated(_) => "unauthenticated",
                            Decision::Forbidden(_) => "forbidden",
                        });
                        self.remember(key, decision.clone());
                        Outcome::Decided(decision)
                    }
                    Err(error) => {
                        self.count("error");
                        tracing::warn!(error = %crate::error_chain::error_chain(&error), "could not review a metrics token");
                        Outcome::Failed
                    }
                }
            })
            .await
            .clone();
        {
            let mut state = self.lock();
            if state
                .inflight
                .get(&key)
                .is_some_and(|c| Arc::ptr_eq(c, &cell))
            {
                state.inflight.remove(&key);
            }
        }
        match outcome {
            Outcome::Decided(decision) => respond(&decision),
            Outcome::Throttled => Some(
                (
                    StatusCode::TOO_MANY_REQUESTS,
                    [(header::RETRY_AFTER, "1")],
                    "too many unknown tokens to review at once; retry\n",
                )
                    .into_response(),
            ),
            Outcome::Failed => Some(
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "could not check the token with the API server\n",
                )
                    .into_response(),
            ),
        }
    }

    fn cached(&self, key: &[u8; 32]) -> Option<Decision> {
        let state = self.lock();
        let fresh = |cache: &Cache, ttl: Duration| {
            cache
                .get(key)
                .filter(|(at, _)| at.elapsed() < ttl)
                .map(|(_, d)| d.clone())
        };
        fresh(&state.allowed, ALLOWED_TTL).or_else(|| fresh(&state.refused, REFUSED_TTL))
    }

    fn remember(&self, key: [u8; 32], decision: Decision) {
        let mut state = self.lock();
        let cache = if decision == Decision::Allowed {
            &mut state.allowed
        } else {
            &mut state.refused
        };
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
    use super::{Bucket, Decision, access_review, authorized, bearer};

    #[test]
    fn reviews_of_unknown_tokens_are_rate_limited() {
        let start = std::time::Instant::now();
        let at = |ms: u64| start + std::time::Duration::from_millis(ms);
        let mut bucket = Bucket::new(5.0, 20.0, start);
        // A burst of 20, then nothing until time passes.
        let burst = (0..100).filter(|_| bucket.take(at(0))).count();
        assert_eq!(burst, 20);
        assert!(!bucket.take(at(100)), "half a token after 100 ms");
        assert!(bucket.take(at(200)), "one after 200 ms");
        // Over ten seconds of a flood, at most the burst plus 5 a second.
        let mut bucket = Bucket::new(5.0, 20.0, start);
        let taken = (0..10_000u64).filter(|i| bucket.take(at(*i))).count();
        assert!(taken <= 20 + 50 + 1, "{taken}");
        // Idle, it refills to the burst and no further.
        assert_eq!((0..100).filter(|_| bucket.take(at(60_000))).count(), 20);
    }
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
