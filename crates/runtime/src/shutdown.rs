//! Graceful shutdown: one [`CancellationToken`] that SIGTERM (from the kubelet) or SIGINT
//! (Ctrl-C) cancels. Controllers pass it to `graceful_shutdown_on`, servers to axum's
//! `with_graceful_shutdown`, so every task drains through the same path.
//!
//! A second signal while draining exits the process at once (status 130), for a person who
//! does not want to wait; the kubelet's grace period ends in SIGKILL anyway.

use crate::error::Error;
use std::time::Duration;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio_util::sync::CancellationToken;

/// How long servers may take to finish their requests once the work has drained.
pub const SERVER_DRAIN: Duration = Duration::from_secs(5);

/// The shutdown flags every manager takes (`#[command(flatten)]`).
#[derive(clap::Args, Debug, Clone)]
pub struct ShutdownArgs {
    /// How long in-flight reconciles may take to finish after SIGTERM, in seconds; past it
    /// they are abandoned where they stand. Keep it under the Pod's
    /// terminationGracePeriodSeconds (30 by default), which ends in SIGKILL.
    #[arg(long, default_value_t = 20)]
    pub shutdown_grace_seconds: u64,
}

impl ShutdownArgs {
    /// The grace as a duration.
    pub fn grace(&self) -> Duration {
        Duration::from_secs(self.shutdown_grace_seconds)
    }
}

/// Waits for `work`; once `shutdown` is cancelled, for at most `grace` more, then abandons it
/// (drops it where it stands: nothing half-written survives, as every write is one request)
/// and says so. `None` when it was abandoned.
pub async fn drain<F: Future>(
    work: F,
    shutdown: &CancellationToken,
    grace: Duration,
) -> Option<F::Output> {
    let mut work = std::pin::pin!(work);
    tokio::select! {
        output = &mut work => return Some(output),
        () = shutdown.cancelled() => {}
    }
    match tokio::time::timeout(grace, work).await {
        Ok(output) => Some(output),
        Err(_) => {
            tracing::warn!(
                grace_seconds = grace.as_secs(),
                "in-flight work did not finish in time after the shutdown signal: abandoned"
            );
            None
        }
    }
}

/// Exit status after a second signal: 128 + SIGINT, what shells report for Ctrl-C.
const FORCED_EXIT_STATUS: i32 = 130;

/// Returns a token cancelled on the first SIGTERM or SIGINT.
///
/// Must be called inside a tokio runtime. If the handlers cannot be installed, the error is
/// logged and the signals keep their default action (the process exits without draining).
pub fn shutdown_on_signals() -> CancellationToken {
    match try_shutdown_on_signals() {
        Ok(token) => token,
        Err(error) => {
            tracing::error!(
                error = %crate::error_chain::error_chain(&error),
                "graceful shutdown disabled: SIGTERM and SIGINT will end the process at once"
            );
            CancellationToken::new()
        }
    }
}

/// Like [`shutdown_on_signals`], but reports a failure to install the handlers.
///
/// Must be called inside a tokio runtime.
///
/// # Errors
///
/// [`Error::Signals`] if SIGTERM or SIGINT cannot be listened for.
pub fn try_shutdown_on_signals() -> Result<CancellationToken, Error> {
    // Installed here, not in the task, so that once this returns a signal can no longer take
    // its default action and kill the process before it drains.
    let mut terminate = signal(SignalKind::terminate()).map_err(Error::Signals)?;
    let mut interrupt = signal(SignalKind::interrupt()).map_err(Error::Signals)?;
    let token = CancellationToken::new();
    let cancel = token.clone();
    tokio::spawn(async move {
        let Some(name) = next_signal(&mut terminate, &mut interrupt).await else {
            return;
        };
        tracing::info!(
            signal = name,
            "shutting down: draining controllers and servers"
        );
        cancel.cancel();
        if let Some(name) = next_signal(&mut terminate, &mut interrupt).await {
            tracing::warn!(signal = name, "second signal while draining: exiting now");
            std::process::exit(FORCED_EXIT_STATUS);
        }
    });
    Ok(token)
}

/// The name of the next signal, or `None` once the runtime no longer delivers them.
async fn next_signal(terminate: &mut Signal, interrupt: &mut Signal) -> Option<&'static str> {
    tokio::select! {
        received = terminate.recv() => received.map(|()| "SIGTERM"),
        received = interrupt.recv() => received.map(|()| "SIGINT"),
    }
}

#[cfg(test)]
mod tests {
    use super::drain;
    use std::time::Duration;
    use tokio_util::sync::CancellationToken;

    #[tokio::test(start_paused = true)]
    async fn work_that_ends_is_waited_for() {
        let shutdown = CancellationToken::new();
        let work = async {
            tokio::time::sleep(Duration::from_secs(100)).await;
            7
        };
        assert_eq!(
            drain(work, &shutdown, Duration::from_secs(1)).await,
            Some(7)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn after_the_signal_work_gets_the_grace_and_no_more() {
        let shutdown = CancellationToken::new();
        shutdown.cancel();
        let finishes = async {
            tokio::time::sleep(Duration::from_secs(3)).await;
            "done"
        };
        assert_eq!(
            drain(finishes, &shutdown, Duration::from_secs(5)).await,
            Some("done")
        );
        let started = tokio::time::Instant::now();
        let hangs = std::future::pending::<()>();
        assert_eq!(drain(hangs, &shutdown, Duration::from_secs(5)).await, None);
        assert_eq!(started.elapsed(), Duration::from_secs(5));
    }
}
