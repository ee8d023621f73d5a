//! Asking the API server: TokenReview (who a bearer token is) and SubjectAccessReview (may
//! this user get, list or watch this resource), so ordinary RBAC says who may browse. Answers
//! are cached for ten seconds (the API server's own delegated-authorization default), refusals
//! and allowances alike. At most [`MAX_REVIEWS`] access reviews are under way at once, and
//! apart from them at most [`MAX_REVIEWS`] token reviews, past which a new token is answered
//! 429 at once: a flood of made-up tokens never queues the front proxy's users behind it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use tokio::sync::Semaphore;

use crate::authn::User;
use crate::kinds::{GROUP, VERSION};

/// How long an answer is reused.
const TTL: Duration = Duration::from_secs(10);
/// The most answers cached of each kind; past it that cache starts afresh.
const MAX_CACHED: usize = 4096;
/// Reviews under way at once, at most.
pub const MAX_REVIEWS: usize = 16;

/// What authorization said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Access {
    /// Allowed.
    Allowed,
    /// Refused, with the authorizer's reason (may be empty).
    Denied(String),
}

/// One access question.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Question {
    /// Who.
    pub user: User,
    /// `get`, `list` or `watch`.
    pub verb: &'static str,
    /// The resource.
    pub resource: &'static str,
    /// The object, for `get`.
    pub name: Option<String>,
}

type Cache<K, V> = Mutex<HashMap<K, (Instant, V)>>;

/// Reviews tokens and access with the API server. Cheap to clone.
#[derive(Clone)]
pub struct Reviewer {
    client: kube::Client,
    tokens: Arc<Cache<String, Option<User>>>,
    access: Arc<Cache<Question, Access>>,
    token_reviews: Arc<Semaphore>,
    access_reviews: Arc<Semaphore>,
}

/// Why a review could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// The API server did not answer.
    #[error("asking the API server: {0}")]
    Api(#[from] kube::Error),
    /// Too many new tokens at once.
    #[error("{MAX_REVIEWS} token reviews are under way")]
    Throttled,
}

impl ReviewError {
    /// The answer to the request: 429 when throttled, else 503 saying `what`.
    pub fn failure(&self, what: &str) -> crate::status::Failure {
        match self {
            ReviewError::Throttled => {
                crate::status::Failure::too_many("too many new tokens to review at once; retry")
            }
            ReviewError::Api(_) => crate::status::Failure::unavailable(what),
        }
    }
}

impl Reviewer {
    /// Reviews with `client` (catalogd's ServiceAccount, bound to `system:auth-delegator`).
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            tokens: Arc::default(),
            access: Arc::default(),
            token_reviews: Arc::new(Semaphore::new(MAX_REVIEWS)),
            access_reviews: Arc::new(Semaphore::new(MAX_REVIEWS)),
        }
    }

    /// The user a bearer token belongs to; `None` when the API server does not accept it.
    ///
    /// # Errors
    ///
    /// When the API server cannot be asked.
    pub async fn token(&self, token: &str) -> Result<Option<User>, ReviewError> {
        let key = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(token.as_bytes()));
        if let Some(user) = cached(&self.tokens, &key) {
            return Ok(user);
        }
        let _permit = self
            .token_reviews
            .try_acquire()
            .map_err(|_| ReviewError::Throttled)?;
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
        let user = reviewed
            .status
            .filter(|s| s.authenticated == Some(true))
            .and_then(|s| s.user)
            .and_then(|u| {
                Some(User {
                    name: u.username?,
                    uid: u.uid,
                    groups: u.groups.unwrap_or_default(),
                    extra: u.extra.unwrap_or_default().into_iter().collect(),
                })
            });
        remember(&self.tokens, key, user.clone());
        Ok(user)
    }

    /// Whether the question's user may do what it asks.
    ///
    /// # Errors
    ///
    /// When the API server cannot be asked.
    pub async fn access(&self, question: &Question) -> Result<Access, ReviewError> {
        if let Some(access) = cached(&self.access, question) {
            return Ok(access);
        }
        let _permit = self.access_reviews.acquire().await.ok();
        let user = &question.user;
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.name.clone()),
                uid: user.uid.clone(),
                groups: Some(user.groups.clone()),
                extra: Some(user.extra.clone().into_iter().collect()),
                resource_attributes: Some(ResourceAttributes {
                    group: Some(GROUP.into()),
                    version: Some(VERSION.into()),
                    resource: Some(question.resource.into()),
                    verb: Some(question.verb.into()),
                    name: question.name.clone(),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let reviewed = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await?;
        let access = match reviewed.status {
            Some(s) if s.allowed => Access::Allowed,
            Some(s) => Access::Denied(s.reason.unwrap_or_default()),
            None => Access::Denied(String::new()),
        };
        remember(&self.access, question.clone(), access.clone());
        Ok(access)
    }
}

fn cached<K: std::hash::Hash + Eq, V: Clone>(cache: &Cache<K, V>, key: &K) -> Option<V> {
    let cache = cache.lock().unwrap_or_else(PoisonError::into_inner);
    cache
        .get(key)
        .filter(|(at, _)| at.elapsed() < TTL)
        .map(|(_, v)| v.clone())
}

fn remember<K: std::hash::Hash + Eq, V>(cache: &Cache<K, V>, key: K, value: V) {
    let mut cache = cache.lock().unwrap_or_else(PoisonError::into_inner);
    if cache.len() >= MAX_CACHED {
        cache.clear();
    }
    cache.insert(key, (Instant::now(), value));
}
