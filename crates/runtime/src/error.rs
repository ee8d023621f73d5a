//! What can go wrong while a manager is set up ([`Error`]), and the lease lost while it
//! led ([`Lost`]).

use std::net::SocketAddr;

use crate::tls;

/// Everything that can go wrong while setting a manager up. Reconcile errors belong to each
/// controller; these are start-up and infrastructure failures.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Neither KUBECONFIG, `~/.kube/config` nor the in-cluster service account gave a client.
    #[error(
        "could not build a Kubernetes client from KUBECONFIG, ~/.kube/config or the in-cluster \
         service account"
    )]
    Client(#[source] kube::Error),

    /// A metric family could not be created, registered or encoded.
    #[error("metrics registry failed")]
    Metrics(#[from] prometheus::Error),

    /// The admin server's address is taken or not allowed.
    #[error("could not bind the admin server to {addr}")]
    Bind {
        /// The address that was asked for.
        addr: SocketAddr,
        /// Why binding failed.
        #[source]
        source: std::io::Error,
    },

    /// The admin server stopped with an I/O error.
    #[error("the admin server failed")]
    Serve(#[source] std::io::Error),

    /// `--log-format` (or its environment variable) named no known format.
    #[error("unknown log format {0:?}: expected `plain` or `json`")]
    UnknownLogFormat(String),

    /// `RUST_LOG` or the default filter is not a valid tracing filter.
    #[error("invalid log filter {filter:?} (from {origin})")]
    LogFilter {
        /// The filter text.
        filter: String,
        /// Where it came from: `RUST_LOG` or the built-in default.
        origin: &'static str,
        /// The parser's complaint.
        #[source]
        source: tracing_subscriber::filter::ParseError,
    },

    /// `RUST_LOG` is set but is not UTF-8.
    #[error("RUST_LOG is not valid UTF-8")]
    LogFilterEncoding,

    /// A global tracing subscriber (or `log` logger) was already installed.
    #[error("could not install the tracing subscriber; is one already installed?")]
    TracingInit(#[source] Box<dyn std::error::Error + Send + Sync + 'static>),

    /// The leader election's Lease could not be read or created.
    #[error("could not join leader election")]
    LeaderElection(#[source] Box<dyn std::error::Error + Send + Sync + 'static>),

    /// The HTTPS certificate could not be loaded or made.
    #[error("HTTPS setup failed")]
    Tls(#[source] tls::TlsError),

    /// This replica lost the leader lease while it led; its work was stopped.
    #[error(transparent)]
    LeadershipLost(#[from] Lost),

    /// SIGTERM or SIGINT handlers could not be installed.
    #[error("could not listen for SIGTERM/SIGINT")]
    Signals(#[source] std::io::Error),
}

/// Leadership was lost: the work was stopped.
#[derive(Debug, thiserror::Error)]
#[error("lost the leader lease: stopped reconciling")]
pub struct Lost;
