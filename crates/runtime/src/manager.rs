//! One way to run a manager binary, so the four managers (catalogd, operator-controller,
//! catalog-switcher and provisioner) start, lead and stop in the same order; each says only
//! what its own steps are ([`Manager`]), and [`run`] does the rest:
//!
//! 1. [`crate::start::start`]: logs, the shutdown token, metrics, readiness, leader election and the
//!    guarded client;
//! 2. [`Manager::prepare`], on every replica: the manager's metric families and readiness
//!    checks, and what every replica serves;
//! 3. the admin server (`/metrics`, `/healthz`, `/readyz`), once every check is registered;
//! 4. [`Manager::follow`], while this replica does not lead (it may serve meanwhile);
//! 5. [`Manager::lead`], while it leads, drained with `--shutdown-grace-seconds` once
//!    shutdown begins; losing the lease ends the process with [`Error::LeadershipLost`] (a
//!    restart joins the election afresh);
//! 6. shutdown: [`Manager::drain`] for what `prepare` started, then the admin server's drain
//!    and the release of the lease, so the next leader takes over at once.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::admin::Readiness;
use crate::error::Error;
use crate::leader::{Leadership, Role};
use crate::metrics::Metrics;
use crate::start::{StartOptions, Started};

/// What every step of a manager is given.
pub struct Context {
    /// The Kubernetes client; its writes fail unless this replica leads (with election on).
    pub client: kube::Client,
    /// The client without the write guard, for reviews every replica creates (TokenReview,
    /// SubjectAccessReview).
    pub reviews: kube::Client,
    /// Cancelled on SIGTERM or SIGINT, and once the leader's work has ended.
    pub shutdown: CancellationToken,
    /// The shared metrics registry, with the controller-runtime families.
    pub metrics: Arc<Metrics>,
    /// `/readyz`'s checks; register them in [`Manager::prepare`] or later.
    pub readiness: Readiness,
    /// This replica's part in leader election.
    pub leadership: Leadership,
}

/// A manager's own steps, run by [`run`] in the order the module documents.
pub trait Manager {
    /// What the manager's steps fail with; start-up failures of the runtime convert into it.
    type Error: From<Error>;
    /// What [`Manager::prepare`] made for the later steps (servers, metric families, stores).
    type Prepared;

    /// How to start: the manager's name, flags and the address it advertises when leading.
    fn options(&self) -> StartOptions<'_>;

    /// Every replica, before the admin server serves: metric families, readiness checks, and
    /// what every replica serves whether it leads or not.
    fn prepare(&self, ctx: &Context) -> impl Future<Output = Result<Self::Prepared, Self::Error>>;

    /// A replica that does not lead yet: returns once it leads or shutdown begins. By default
    /// it waits; the admin server already serves (followers are ready and show metrics).
    fn follow(
        &self,
        prepared: &Self::Prepared,
        ctx: &Context,
    ) -> impl Future<Output = Result<(), Self::Error>> {
        let _ = prepared;
        async {
            ctx.leadership.acquired(&ctx.shutdown).await;
            Ok(())
        }
    }

    /// The leader's work, until `ctx.shutdown` is cancelled.
    fn lead(
        &self,
        prepared: &Self::Prepared,
        ctx: &Context,
    ) -> impl Future<Output = Result<(), Self::Error>>;

    /// Once the work has ended and shutdown begun: waits for what `prepare` started (its
    /// servers) to drain.
    fn drain(&self, prepared: Self::Prepared) -> impl Future<Output = ()> {
        let _ = prepared;
        async {}
    }
}

/// Runs `manager` from start to stop (see the module's steps).
///
/// # Errors
///
/// The first failure of a step, [`Error::LeadershipLost`] when the lease was lost while
/// leading.
pub async fn run<M: Manager>(manager: M) -> Result<(), M::Error> {
    let options = manager.options();
    let name = options.name.to_owned();
    let grace = options.runtime.shutdown.grace();
    let Started {
        client,
        reviews,
        shutdown,
        metrics,
        readiness,
        leadership,
        admin,
    } = crate::start::start(options).await?;
    let ctx = Context {
        client,
        reviews,
        shutdown,
        metrics,
        readiness,
        leadership,
    };
    let prepared = manager.prepare(&ctx).await?;
    let admin = admin.spawn().await?;
    if ctx.leadership.role() == Role::Following {
        manager.follow(&prepared, &ctx).await?;
    }
    let led = ctx
        .leadership
        .run(manager.lead(&prepared, &ctx), &ctx.shutdown, grace)
        .await
        .map_err(Error::LeadershipLost)?;
    if let Some(led) = led {
        led?;
    }
    ctx.shutdown.cancel();
    manager.drain(prepared).await;
    ctx.leadership.finish(&ctx.shutdown, [admin]).await;
    tracing::info!("{name} stopped");
    Ok(())
}
