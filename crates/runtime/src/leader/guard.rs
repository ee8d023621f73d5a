//! The write guard: a layer of the manager's Kubernetes client that refuses every request
//! that could change something (anything but GET, HEAD and OPTIONS) unless this replica holds
//! the leader lease with time to spare.
//!
//! Stopping the controllers when the lease is lost is not enough on its own: a leader paused
//! (SIGSTOP, a long GC-like stall, a frozen VM) resumes with reconciles half done and a watch
//! full of events, and its tasks run before the election task has even noticed that another
//! replica took over. The guard checks a monotonic deadline, set from the last renewal it saw,
//! on every request, so such a replica writes nothing whatever order its tasks run in.

use http::{Method, Request};
use prometheus::IntCounter;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;
use tower::BoxError;

/// Whether this replica may write now. Cheap to clone; every clone is the same guard.
#[derive(Clone, Debug)]
pub struct WriteGuard {
    state: Arc<State>,
}

#[derive(Debug)]
struct State {
    /// Leader election is off: the only replica always writes.
    always: bool,
    /// Writes are allowed until then.
    deadline: Mutex<Option<Instant>>,
    /// Leadership was lost: nothing is allowed again, whatever the lease says later.
    revoked: AtomicBool,
    /// Requests refused.
    refused: Option<IntCounter>,
}

impl WriteGuard {
    /// A guard that allows every write: leader election is off.
    pub fn open() -> Self {
        Self::new(true, None)
    }

    /// A guard that allows nothing until [`WriteGuard::set_deadline`] says until when.
    pub(crate) fn closed(refused: IntCounter) -> Self {
        Self::new(false, Some(refused))
    }

    fn new(always: bool, refused: Option<IntCounter>) -> Self {
        Self {
            state: Arc::new(State {
                always,
                deadline: Mutex::new(None),
                revoked: AtomicBool::new(false),
                refused,
            }),
        }
    }

    /// Whether a write sent now is allowed.
    pub fn allows(&self) -> bool {
        self.allows_at(Instant::now())
    }

    fn allows_at(&self, now: Instant) -> bool {
        if self.state.always {
            return true;
        }
        !self.state.revoked.load(Ordering::Acquire) && self.deadline().is_some_and(|d| now < d)
    }

    /// Until when writes are allowed (`None`: not at all).
    pub(crate) fn deadline(&self) -> Option<Instant> {
        *self
            .state
            .deadline
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Allows writes until `deadline` (or, with `None`, no longer).
    pub(crate) fn set_deadline(&self, deadline: Option<Instant>) {
        *self
            .state
            .deadline
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = deadline;
    }

    /// Refuses every write from now on.
    pub(crate) fn revoke(&self) {
        self.state.revoked.store(true, Ordering::Release);
    }

    /// The client layer that enforces this guard.
    pub fn layer(&self) -> tower::filter::FilterLayer<GuardPredicate> {
        tower::filter::FilterLayer::new(GuardPredicate(self.clone()))
    }

    /// Lets `request` through, or refuses it when it writes and writing is not allowed.
    fn check<B>(&self, request: Request<B>) -> Result<Request<B>, NotLeading> {
        if !writes(request.method()) || self.allows() {
            return Ok(request);
        }
        if let Some(refused) = &self.state.refused {
            refused.inc();
        }
        let refusal = NotLeading {
            method: request.method().clone(),
            path: request.uri().path().to_owned(),
        };
        tracing::warn!(method = %refusal.method, path = %refusal.path, "refused a write: not leading");
        Err(refusal)
    }
}

/// Whether a request of `method` may change something on the API server.
fn writes(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// The [`tower::filter::Predicate`] of [`WriteGuard::layer`].
#[derive(Clone, Debug)]
pub struct GuardPredicate(WriteGuard);

impl<B> tower::filter::Predicate<Request<B>> for GuardPredicate {
    type Request = Request<B>;

    fn check(&mut self, request: Request<B>) -> Result<Request<B>, BoxError> {
        self.0.check(request).map_err(BoxError::from)
    }
}

/// A write refused because this replica does not lead (or its lease renewal is overdue).
#[derive(Debug, thiserror::Error)]
#[error(
    "refused {method} {path}: this replica does not hold the leader lease (or its renewal is \
     overdue), so it writes nothing"
)]
pub struct NotLeading {
    /// The request's method.
    pub method: Method,
    /// The request's path.
    pub path: String,
}

#[cfg(test)]
mod tests {
    use super::WriteGuard;
    use http::{Method, Request};
    use prometheus::IntCounter;
    use std::time::{Duration, Instant};

    fn request(method: Method) -> Request<()> {
        Request::builder()
            .method(method)
            .uri("https://api/apis/example/v1/things/x/status")
            .body(())
            .expect("a valid request")
    }

    fn counter() -> IntCounter {
        IntCounter::new("refused", "refused").expect("a valid counter")
    }

    #[test]
    fn an_open_guard_lets_everything_through() {
        let guard = WriteGuard::open();
        for method in [
            Method::GET,
            Method::POST,
            Method::PATCH,
            Method::PUT,
            Method::DELETE,
        ] {
            assert!(guard.check(request(method)).is_ok());
        }
    }

    #[test]
    fn reads_always_pass_and_writes_only_before_the_deadline() {
        let refused = counter();
        let guard = WriteGuard::closed(refused.clone());
        assert!(guard.check(request(Method::GET)).is_ok());
        let error = guard
            .check(request(Method::PATCH))
            .expect_err("no deadline yet: refused");
        assert!(
            error
                .to_string()
                .contains("PATCH /apis/example/v1/things/x/status")
        );
        assert_eq!(refused.get(), 1);

        guard.set_deadline(Some(Instant::now() + Duration::from_secs(60)));
        for method in [Method::POST, Method::PATCH, Method::PUT, Method::DELETE] {
            assert!(guard.check(request(method)).is_ok());
        }
        // A deadline that has passed, as a paused process sees it on resuming.
        guard.set_deadline(Some(Instant::now()));
        assert!(guard.check(request(Method::POST)).is_err());
        assert!(guard.check(request(Method::HEAD)).is_ok());
        assert_eq!(refused.get(), 2);
    }

    #[test]
    fn a_revoked_guard_never_allows_a_write_again() {
        let guard = WriteGuard::closed(counter());
        let later = Instant::now() + Duration::from_secs(60);
        guard.set_deadline(Some(later));
        assert!(guard.allows());
        guard.revoke();
        assert!(!guard.allows());
        guard.set_deadline(Some(later));
        assert!(!guard.allows_at(Instant::now()));
    }
}
