//! What the supervisor's start waits for, and how it waits: each wait names its step, so a
//! start that fails says what it was waiting for. Components are asked with olm-testkit's
//! [`Probe`] (any certificate, any 2xx).

use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

pub use olm_testkit::probe::Probe;

/// How often a wait looks again.
const POLL: Duration = Duration::from_millis(200);

/// What the start waits for, for messages.
#[derive(Debug, Default)]
pub struct Step(Mutex<String>);

impl Step {
    /// Says what the start waits for now.
    pub fn set(&self, what: &str) {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = what.to_owned();
    }

    /// What the start waits for now ("the binaries" before anything).
    pub fn current(&self) -> String {
        let what = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if what.is_empty() {
            "the binaries".to_owned()
        } else {
            what.clone()
        }
    }
}

/// Waits until `check` says yes, looking every [`POLL`] for at most `seconds`.
pub async fn wait_until<F, Fut>(step: &Step, what: &str, seconds: u64, check: F) -> Result<()>
where
    F: Fn() -> Fut,
    Fut: Future<Output = bool>,
{
    step.set(what);
    let deadline = Instant::now() + Duration::from_secs(seconds);
    while !check().await {
        if Instant::now() >= deadline {
            return Err(Error::Timeout {
                what: what.to_owned(),
                seconds,
                last_state: String::new(),
            });
        }
        tokio::time::sleep(POLL).await;
    }
    Ok(())
}
