//! What every olm-rs manager binary shares, so the four managers (catalogd,
//! operator-controller, catalog-switcher and provisioner) start, observe and stop the same way.
//!
//! A manager's `main` parses its flags and hands its own steps to [`manager::run`], which
//! runs, in this order ([`start`] does steps 1 to 4 and joins leader election, [`leader`]):
//!
//! 1. [`telemetry::init_tracing`] — logs first, so every later failure is visible;
//! 2. [`shutdown::shutdown_on_signals`] — one [`CancellationToken`](tokio_util::sync::CancellationToken)
//!    that every controller and server stops on;
//! 3. [`client::client`] — installs the rustls `ring` provider, then builds the kube client;
//! 4. [`metrics::Metrics::new`] and [`admin::Readiness`] — shared by the controllers;
//! 5. [`admin::AdminServer::spawn`] — `/metrics`, `/healthz`, `/readyz` on their own port;
//! 6. the manager's preparation, then its leader's work: controllers run by
//!    [`controller::Run`], which times and counts every reconcile, each reporting through
//!    [`events::EventPublisher`].

pub mod admin;
pub mod client;
pub mod controller;
pub mod events;
pub mod leader;
pub mod manager;
pub mod metrics;
pub mod shutdown;
pub mod telemetry;
pub mod tls;

pub use admin::{Readiness, ReadinessHandle, bind_admin, router, serve_admin, serve_admin_on};
pub use client::{client, install_crypto_provider};
pub use events::EventPublisher;
pub use kube::runtime::events::EventType;
pub use metrics::{Metrics, ReconcileOutcome, ReconcileTimer};
pub use shutdown::{ShutdownArgs, drain, shutdown_on_signals, try_shutdown_on_signals};
pub use telemetry::{LogFormat, init_tracing};

use std::net::SocketAddr;
use std::sync::Arc;

/// What every manager sets up first, the same way: logs, the API client, one shutdown token,
/// the metrics registry, the readiness checks and leader election.
pub struct Started {
    /// The Kubernetes client. Its writes pass the leader election's write guard: with
    /// election on, they fail unless this replica leads.
    pub client: kube::Client,
    /// Cancelled on SIGTERM or SIGINT.
    pub shutdown: tokio_util::sync::CancellationToken,
    /// The shared metrics registry, with the controller-runtime families.
    pub metrics: Arc<Metrics>,
    /// `/readyz`'s checks.
    pub readiness: Readiness,
    /// This replica's part in leader election (leading from the start when it is off).
    pub leadership: leader::Leadership,
    /// The admin server (`/metrics`, `/healthz`, `/readyz`), to spawn once the readiness
    /// checks are registered.
    pub admin: admin::AdminServer,
}

/// The flags every manager shares (`#[command(flatten)]`): the admin server, leader
/// election, shutdown.
#[derive(clap::Args, Debug, Clone)]
pub struct RuntimeArgs {
    /// Log format: plain or json.
    #[arg(long, default_value = "plain", global = true)]
    pub log_format: LogFormat,
    /// The admin server's flags.
    #[command(flatten)]
    pub admin: admin::AdminArgs,
    /// The leader election flags.
    #[command(flatten)]
    pub leader_election: leader::LeaderElectionArgs,
    /// The shutdown flags.
    #[command(flatten)]
    pub shutdown: shutdown::ShutdownArgs,
}

/// How [`start`] starts a manager.
pub struct StartOptions<'a> {
    /// The manager's name (`catalogd`, ...): in logs, the user agent and the Lease's name.
    pub name: &'a str,
    /// The shared flags.
    pub runtime: &'a RuntimeArgs,
    /// An address the leader advertises on the Lease for followers.
    pub advertise: Option<String>,
    /// Every flag, logged at start.
    pub flags: &'a dyn std::fmt::Debug,
}

/// Starts a manager: tracing (logging its flags and version), the shutdown token, metrics,
/// readiness, leader election, and the client (guarded by the election).
pub async fn start(options: StartOptions<'_>) -> Result<Started, Error> {
    let StartOptions {
        name,
        runtime,
        advertise,
        flags,
    } = options;
    let election = &runtime.leader_election;
    init_tracing(runtime.log_format, "info,kube=warn")?;
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        ?flags,
        "starting {name}"
    );
    let identity = election
        .leader_election_identity
        .clone()
        .unwrap_or_else(leader::default_identity);
    let config = client::config(name, &identity).await?;
    let unguarded = kube::Client::try_from(config.clone()).map_err(Error::Client)?;
    let metrics = Arc::new(Metrics::new()?);
    let shutdown = shutdown_on_signals();
    let leadership = leader::Leadership::elect(
        unguarded.clone(),
        name,
        election,
        identity,
        advertise,
        &metrics.registry,
    )
    .await?;
    let readiness = Readiness::new();
    Ok(Started {
        client: client::guarded(config, &leadership.guard())?,
        admin: admin::AdminServer {
            args: runtime.admin.clone(),
            metrics: metrics.clone(),
            readiness: readiness.clone(),
            shutdown: shutdown.clone(),
            reviews: unguarded,
        },
        shutdown,
        metrics,
        readiness,
        leadership,
    })
}

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
    LeadershipLost(#[from] leader::Lost),

    /// SIGTERM or SIGINT handlers could not be installed.
    #[error("could not listen for SIGTERM/SIGINT")]
    Signals(#[source] std::io::Error),
}

/// `error: cause: cause…` on one line, for a log field or an event note; `Display` alone
/// shows only the outermost message.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
