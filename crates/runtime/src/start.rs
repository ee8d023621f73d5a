//! How a manager starts ([`start`]): tracing (its flags and version logged), the shutdown
//! token, metrics, readiness, leader election and the client (guarded by the election), from
//! the flags every manager shares ([`RuntimeArgs`]).

use std::sync::Arc;

use crate::admin::{self, Readiness};
use crate::client;
use crate::error::Error;
use crate::leader;
use crate::metrics::Metrics;
use crate::shutdown::{self, shutdown_on_signals};
use crate::telemetry::{LogFormat, init_tracing};

/// What every manager sets up first, the same way: logs, the API client, one shutdown token,
/// the metrics registry, the readiness checks and leader election.
pub struct Started {
    /// The Kubernetes client. Its writes pass the leader election's write guard: with
    /// election on, they fail unless this replica leads.
    pub client: kube::Client,
    /// The same client without the write guard, for the reviews every replica creates
    /// (TokenReview, SubjectAccessReview) whether it leads or not.
    pub reviews: kube::Client,
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
            reviews: unguarded.clone(),
        },
        reviews: unguarded,
        shutdown,
        metrics,
        readiness,
        leadership,
    })
}
