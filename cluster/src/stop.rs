//! What asks the supervisor to stop: its owner (end of its stdin, or a `stop` line; for a
//! detached supervisor, `stop` written to its control file) or SIGTERM, SIGINT or SIGHUP.
//!
//! Every request arrives as a message on one channel, never as an interruption: a signal that
//! comes while the supervisor cleans up (the parent-death SIGTERM and the end of stdin arrive
//! together when the owner dies) is just another message, and the clean-up runs to its end.

use std::io::BufRead;
use std::path::PathBuf;
use std::time::Duration;

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;

use crate::error::{Error, Result};

/// Who owns the supervisor, and so what asks it to stop besides signals.
#[derive(Debug, Clone)]
pub enum Owner {
    /// Whoever holds the write end of its stdin: end of file or a `stop` line.
    Stdin,
    /// `olm-cluster stop`, which writes `stop` to this file (the supervisor was started
    /// detached, with no stdin).
    ControlFile(PathBuf),
}

/// How often a detached supervisor reads its control file.
const CONTROL_POLL: Duration = Duration::from_millis(200);

/// Whether `text` (what the owner wrote) asks to stop: a line that says `stop`.
pub fn says_stop(text: &str) -> bool {
    text.lines().any(|l| l.trim() == "stop")
}

type Sender = watch::Sender<Option<String>>;

/// Records `why` unless an earlier request came first (its reason is the one to tell).
fn first(tx: &Sender, why: String) {
    tx.send_if_modified(|current| {
        let unset = current.is_none();
        if unset {
            *current = Some(why);
        }
        unset
    });
}

/// The stop requests of one supervisor.
#[derive(Debug)]
pub struct Requests(watch::Receiver<Option<String>>);

impl Requests {
    /// Starts listening: signal handlers are installed before this returns, so a signal from
    /// then on is a request, never the end of the process.
    pub fn listen(owner: Owner) -> Result<Requests> {
        let (requests, tx) = Self::from_owner(owner)?;
        for (kind, name) in [
            (SignalKind::terminate(), "SIGTERM"),
            (SignalKind::interrupt(), "SIGINT"),
            (SignalKind::hangup(), "SIGHUP"),
        ] {
            let mut stream =
                signal(kind).map_err(|e| Error::Cluster(format!("handling {name}: {e}")))?;
            let tx = tx.clone();
            tokio::spawn(async move {
                while stream.recv().await.is_some() {
                    first(&tx, format!("signal {name}"));
                }
            });
        }
        Ok(requests)
    }

    /// Listens to the owner only (the tests: signals stay with the test process).
    fn from_owner(owner: Owner) -> Result<(Requests, Sender)> {
        let (tx, rx) = watch::channel(None);
        let sender = tx.clone();
        match owner {
            Owner::Stdin => {
                // A thread of its own: a blocked read of stdin must not hold up the runtime,
                // and the thread ends with the process.
                std::thread::Builder::new()
                    .name("stdin".into())
                    .spawn(move || {
                        let mut lines = std::io::stdin().lock().lines();
                        let why = loop {
                            match lines.next() {
                                Some(Ok(line)) if says_stop(&line) => break "asked to stop",
                                Some(Ok(_)) => {}
                                Some(Err(_)) | None => break "its stdin closed",
                            }
                        };
                        first(&tx, why.into());
                    })
                    .map_err(|e| Error::Cluster(format!("reading stdin: {e}")))?;
            }
            Owner::ControlFile(path) => {
                tokio::spawn(async move {
                    loop {
                        let text = tokio::fs::read_to_string(&path).await.unwrap_or_default();
                        if says_stop(&text) {
                            first(&tx, "asked to stop".into());
                            return;
                        }
                        tokio::time::sleep(CONTROL_POLL).await;
                    }
                });
            }
        }
        Ok((Requests(rx), sender))
    }

    /// Waits for the first request; why it came.
    pub async fn requested(&mut self) -> String {
        match self.0.wait_for(Option::is_some).await {
            Ok(why) => why.clone().unwrap_or_default(),
            // Every sender gone: nothing can ask any more, so wait for ever, as asked.
            Err(_) => std::future::pending().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_line_that_says_stop_stops() {
        assert!(says_stop("stop"));
        assert!(says_stop("hello\nstop\n"));
        assert!(says_stop(" stop \n"));
        assert!(!says_stop(""));
        assert!(!says_stop("stopped"));
        assert!(!says_stop("don't stop"));
    }

    #[tokio::test]
    async fn the_first_request_is_the_reason_told() {
        let (tx, rx) = watch::channel(None);
        first(&tx, "its stdin closed".into());
        first(&tx, "signal SIGTERM".into());
        assert_eq!(Requests(rx).requested().await, "its stdin closed");
    }

    #[tokio::test]
    async fn stop_written_to_the_control_file_is_a_request() {
        #![allow(clippy::unwrap_used)]
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("control");
        std::fs::write(&path, "").unwrap();
        let (mut requests, _tx) = Requests::from_owner(Owner::ControlFile(path.clone())).unwrap();
        let waited = tokio::time::timeout(Duration::from_millis(500), requests.requested()).await;
        assert!(waited.is_err(), "an empty control file asked to stop");
        std::fs::write(&path, "stop\n").unwrap();
        let why = tokio::time::timeout(Duration::from_secs(10), requests.requested())
            .await
            .unwrap();
        assert_eq!(why, "asked to stop");
    }
}
