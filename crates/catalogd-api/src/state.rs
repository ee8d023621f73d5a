//! What the routes share: the store, the summaries worked out from it, the front proxy's
//! settings of the moment, the reviewer, readiness and the request counter.

use std::sync::{Arc, RwLock};

use tokio::sync::Semaphore;

use axum::http::StatusCode;
use catalogd_store::store::Store;

use crate::authn::RequestHeader;
use crate::content::Summaries;
use crate::review::Reviewer;

/// Whether this replica can answer from content it has (catalogd's `content-sync`).
pub type Ready = Arc<dyn Fn() -> bool + Send + Sync>;

/// What the routes share.
#[derive(Clone)]
pub struct ApiState {
    pub(crate) store: Arc<Store>,
    pub(crate) summaries: Arc<Summaries>,
    pub(crate) request_header: Arc<RwLock<Option<RequestHeader>>>,
    pub(crate) reviewer: Reviewer,
    pub(crate) ready: Ready,
    pub(crate) requests: Option<prometheus::IntCounterVec>,
    /// Lists under way, at most [`MAX_LISTS`]: each holds one page's objects in memory.
    pub(crate) lists: Arc<Semaphore>,
    /// Open watches, at most [`MAX_WATCHES`]: each holds the names it was told of.
    pub(crate) watches: Arc<Semaphore>,
}

/// Lists served at once; more are answered 429 (clients retry).
pub const MAX_LISTS: usize = 8;
/// Watches open at once; more are answered 429.
pub const MAX_WATCHES: usize = 64;

impl ApiState {
    /// The state of an API over `store`; `requests` counts requests by resource, verb and code.
    pub fn new(
        store: Arc<Store>,
        reviewer: Reviewer,
        ready: Ready,
        requests: Option<prometheus::IntCounterVec>,
    ) -> Self {
        Self {
            store,
            summaries: Arc::default(),
            request_header: Arc::default(),
            reviewer,
            ready,
            requests,
            lists: Arc::new(Semaphore::new(MAX_LISTS)),
            watches: Arc::new(Semaphore::new(MAX_WATCHES)),
        }
    }

    /// Where the front proxy's settings go when they are read.
    pub fn request_header(&self) -> Arc<RwLock<Option<RequestHeader>>> {
        self.request_header.clone()
    }

    pub(crate) fn count(&self, resource: &str, verb: &str, code: StatusCode) {
        if let Some(requests) = &self.requests {
            requests
                .with_label_values(&[resource, verb, code.as_str()])
                .inc();
        }
    }
}
