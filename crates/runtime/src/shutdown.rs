//! Graceful shutdown: one [`CancellationToken`] that SIGTERM (from the kubelet) or SIGINT
//! (Ctrl-C) cancels. Controllers pass it to `graceful_shutdown_on`, servers to axum's
//! `with_graceful_shutdown`, so every task drains through the same path.
//!
//! A second signal while draining exits the process at once (status 130), for a person who
//! does not want to wait; the kubelet's grace period ends in SIGKILL anyway.

use crate::Error;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio_util::sync::CancellationToken;

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
                error = %crate::error_chain(&error),
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
