//! Per-Operator retry delays: each failed reconcile of the same Operator waits twice as long as
//! the one before, from 1 s up to a cap; a success starts over.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// The delay before retry number `attempt` (0-based): 1 s, 2 s, 4 s, ... at most `max`.
pub fn delay(attempt: u32, max: Duration) -> Duration {
    Duration::from_secs(1u64 << attempt.min(20)).min(max)
}

/// Failed attempts per Operator.
#[derive(Debug)]
pub struct Backoffs {
    attempts: Mutex<HashMap<String, u32>>,
    max: Duration,
}

impl Backoffs {
    /// Delays capped at `max`.
    pub fn new(max: Duration) -> Self {
        Self {
            attempts: Mutex::default(),
            max,
        }
    }

    /// Records a failure of `name`; returns how long to wait before retrying.
    pub fn failed(&self, name: &str) -> Duration {
        let mut all = self.attempts.lock().unwrap_or_else(PoisonError::into_inner);
        let attempt = all.entry(name.to_owned()).or_default();
        let wait = delay(*attempt, self.max);
        *attempt = attempt.saturating_add(1);
        wait
    }

    /// Records a success (or deletion) of `name`.
    pub fn reset(&self, name: &str) {
        self.attempts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_the_cap_and_reset_on_success() {
        let b = Backoffs::new(Duration::from_secs(5));
        let waits: Vec<u64> = (0..5).map(|_| b.failed("a").as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 5, 5]);
        assert_eq!(b.failed("other").as_secs(), 1);
        b.reset("a");
        assert_eq!(b.failed("a").as_secs(), 1);
        assert_eq!(delay(u32::MAX, Duration::from_secs(60)).as_secs(), 60);
    }
}
