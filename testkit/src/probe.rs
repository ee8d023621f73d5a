//! Asks a server over HTTP(S) whether it is up, as a kubelet's probe does: any certificate is
//! taken (the servers probed serve with certificates of their own), and only the status
//! matters. The local control plane's start, the managers' readiness and the test registry's
//! start all wait with it; no test runs curl.

use std::time::Duration;

use crate::{Error, Result};

/// How long one probe waits for an answer.
const TIMEOUT: Duration = Duration::from_secs(5);

/// An HTTP client for probes.
#[derive(Debug, Clone)]
pub struct Probe(reqwest::Client);

impl Probe {
    /// A probe that takes any certificate and waits at most 5 s for an answer.
    pub fn new() -> Result<Probe> {
        crate::install_crypto_provider();
        reqwest::Client::builder()
            .tls_danger_accept_invalid_certs(true)
            // Probed servers are on loopback or the node's own network: never via a proxy.
            .no_proxy()
            .timeout(TIMEOUT)
            .build()
            .map(Probe)
            .map_err(|e| Error::Fixture(format!("an HTTP client: {e}")))
    }

    /// The status `url` answers a GET with; `None` when it does not answer.
    pub async fn status(&self, url: &str) -> Option<u16> {
        self.0
            .get(url)
            .send()
            .await
            .ok()
            .map(|r| r.status().as_u16())
    }

    /// Whether `url` answers 2xx.
    pub async fn ok(&self, url: &str) -> bool {
        self.status(url)
            .await
            .is_some_and(|s| (200..300).contains(&s))
    }
}

/// [`Probe::status`] for synchronous code: run on a thread of its own with a small runtime of
/// its own, so that it may be called from inside a test's async runtime as well (where
/// blocking on that runtime would panic).
pub fn status(url: &str) -> Option<u16> {
    let url = url.to_owned();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .ok()?;
        runtime.block_on(async { Probe::new().ok()?.status(&url).await })
    })
    .join()
    .ok()
    .flatten()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A server answering `status` to every GET, on a thread and runtime of its own (so that
    /// a test blocking its own runtime cannot stall it); it lives as long as the test process.
    fn serve(status: u16) -> String {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                tx.send(listener.local_addr().unwrap()).unwrap();
                let app = axum::Router::new().route(
                    "/",
                    axum::routing::get(move || async move {
                        http::StatusCode::from_u16(status).unwrap()
                    }),
                );
                axum::serve(listener, app).await.unwrap();
            });
        });
        format!("http://{}/", rx.recv().unwrap())
    }

    #[tokio::test]
    async fn a_probe_reads_the_status_and_ok_is_2xx_only() {
        let probe = Probe::new().unwrap();
        let up = serve(200);
        let refusing = serve(401);
        assert_eq!(probe.status(&up).await, Some(200));
        assert!(probe.ok(&up).await);
        assert_eq!(probe.status(&refusing).await, Some(401));
        assert!(!probe.ok(&refusing).await);
        // Nobody listening: no answer.
        let port = crate::free_port().unwrap();
        let nobody = format!("http://127.0.0.1:{port}/");
        assert_eq!(probe.status(&nobody).await, None);
    }

    #[test]
    fn the_blocking_status_reads_the_status() {
        assert_eq!(status(&serve(503)), Some(503));
    }

    #[tokio::test]
    async fn the_blocking_status_works_inside_a_runtime() {
        // Called on a runtime's thread, as the harness's waits may be: a blocking HTTP client
        // (or a block_on) would panic here.
        assert_eq!(status(&serve(200)), Some(200));
    }
}
