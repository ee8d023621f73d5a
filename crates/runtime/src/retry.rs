//! How long a failed reconcile waits before it is tried again, said one way by every manager
//! and kept by [`crate::controller::Run`]: a fixed wait (catalogd's API and storage errors,
//! the catalog-switcher's, the provisioner's) or one that doubles for each failure of the same
//! object in a row, from 1 s up to a cap (operator-controller's `--max-backoff-seconds`); a
//! reconcile that succeeds starts the object over.
//!
//! A catalogd source's fetch backoff is not this: it is kept per source spec, in the Catalog's
//! status, and holds the fetch back whatever wakes the Catalog (its own status writes too), so
//! it stays with the source (`catalogd-sources`' `poll.rs`).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// How long a failed reconcile waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// The same wait after every failure.
    Fixed(Duration),
    /// 1 s after the first failure in a row, twice the wait before after each next one, at
    /// most `max`.
    Doubling {
        /// The longest wait.
        max: Duration,
    },
}

/// The wait before retry number `attempt` (0-based) of a doubling retry: 1 s, 2 s, 4 s, ...
/// at most `max`.
pub fn doubling(attempt: u32, max: Duration) -> Duration {
    Duration::from_secs(1u64 << attempt.min(20)).min(max)
}

/// Failures in a row, per object.
#[derive(Debug)]
pub struct Retries {
    retry: Retry,
    attempts: Mutex<HashMap<String, u32>>,
}

impl Retries {
    /// Waits as `retry` says.
    pub fn new(retry: Retry) -> Self {
        Self {
            retry,
            attempts: Mutex::default(),
        }
    }

    /// Records a failure of `key`; returns how long to wait before trying it again.
    pub fn failed(&self, key: &str) -> Duration {
        match self.retry {
            Retry::Fixed(wait) => wait,
            Retry::Doubling { max } => {
                let mut all = self.attempts.lock().unwrap_or_else(PoisonError::into_inner);
                let attempt = all.entry(key.to_owned()).or_default();
                let wait = doubling(*attempt, max);
                *attempt = attempt.saturating_add(1);
                wait
            }
        }
    }

    /// Records a success of `key`: its next failure waits the least again.
    pub fn succeeded(&self, key: &str) {
        if matches!(self.retry, Retry::Doubling { .. }) {
            self.attempts
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(key);
        }
    }

    /// How many objects have failures in a row.
    pub fn failing(&self) -> usize {
        self.attempts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubling_waits_double_up_to_the_cap_and_a_success_starts_over() {
        let retries = Retries::new(Retry::Doubling {
            max: Duration::from_secs(5),
        });
        let waits: Vec<u64> = (0..5).map(|_| retries.failed("a").as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 5, 5]);
        assert_eq!(retries.failed("other").as_secs(), 1);
        retries.succeeded("a");
        assert_eq!(retries.failed("a").as_secs(), 1);
        assert_eq!(doubling(u32::MAX, Duration::from_secs(60)).as_secs(), 60);
    }

    #[test]
    fn a_fixed_wait_is_the_same_every_time_and_remembers_nothing() {
        let retries = Retries::new(Retry::Fixed(Duration::from_secs(30)));
        for _ in 0..3 {
            assert_eq!(retries.failed("a"), Duration::from_secs(30));
        }
        retries.succeeded("a");
        assert_eq!(retries.failing(), 0);
    }
}
