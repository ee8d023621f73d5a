//! Leader election on a `coordination.k8s.io` Lease: of several replicas of a manager, only
//! the one holding the lease reconciles.
//!
//! [kube-lease-manager] acquires, renews and releases the lease. Around it, this module:
//!
//! * watches the Lease itself, and keeps the [`WriteGuard`] of the manager's client open only
//!   until the last renewal it saw runs out (less a margin), so a paused or partitioned leader
//!   writes nothing even before it learns that it lost;
//! * tells the manager when it leads ([`Leadership::acquired`]) and stops its work the moment
//!   it no longer does ([`Leadership::lead`]): the lease manager said so, or no renewal was
//!   seen in time. A manager that lost leadership exits, as controller-runtime's do, and
//!   starts again as a follower: nothing half-built survives into a later term;
//! * publishes `leader_election_master_status{name}` (1 while leading), as client-go does, and
//!   `leader_election_writes_refused_total`;
//! * lets the leader advertise an address on the Lease ([`Leadership::leader_address`]), so
//!   followers know whom to copy from (catalogd's content).
//!
//! [kube-lease-manager]: https://docs.rs/kube-lease-manager

mod args;
mod guard;
mod validity;

pub use args::{LeaderElectionArgs, default_identity};
pub use guard::{GuardPredicate, NotLeading, WriteGuard};
pub use validity::write_window;

use crate::error::Error;
pub use crate::error::Lost;
use crate::error_chain::error_chain;
use crate::metrics::register;
use futures::StreamExt as _;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube_lease_manager::{LeaseCreateMode, LeaseManagerBuilder};
use prometheus::{IntCounter, IntGaugeVec, Opts, Registry};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The annotation on the Lease naming the identity that advertised [`ADDRESS_ANNOTATION`].
pub const IDENTITY_ANNOTATION: &str = "olm-rs.io/leader-identity";
/// The annotation on the Lease holding the address its holder advertised.
pub const ADDRESS_ANNOTATION: &str = "olm-rs.io/leader-address";

/// How long releasing the lease at shutdown may take.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);

/// Where this replica stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Another replica leads, or nobody yet.
    Following,
    /// This replica leads and may write.
    Leading,
    /// This replica led and no longer does; it must stop.
    Lost,
}

/// This replica's part in leader election. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Leadership {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    identity: String,
    guard: WriteGuard,
    role: watch::Receiver<Role>,
    lease: watch::Receiver<Option<Lease>>,
    stop: CancellationToken,
    task: Mutex<Option<JoinHandle<()>>>,
    /// With election off, the senders nobody sends on: kept, so the receivers never close.
    _unchanging: Option<(watch::Sender<Role>, watch::Sender<Option<Lease>>)>,
}

impl Leadership {
    /// Leader election is off: this replica leads from the start and never loses.
    pub fn disabled() -> Self {
        let (role_tx, role) = watch::channel(Role::Leading);
        let (lease_tx, lease) = watch::channel(None);
        Self {
            inner: Arc::new(Inner {
                identity: String::new(),
                guard: WriteGuard::open(),
                role,
                lease,
                stop: CancellationToken::new(),
                task: Mutex::new(None),
                _unchanging: Some((role_tx, lease_tx)),
            }),
        }
    }

    /// Joins the election `args` describe for `manager`, with `client` (one without the write
    /// guard: the lease must be renewed whatever the guard says). `advertise`, when given, is
    /// written on the Lease while this replica leads. Registers the election's metrics.
    ///
    /// # Errors
    ///
    /// [`Error::LeaderElection`] if the Lease cannot be read or created,
    /// [`Error::Metrics`] if the metrics cannot be registered.
    pub async fn elect(
        client: kube::Client,
        manager: &str,
        args: &LeaderElectionArgs,
        identity: String,
        advertise: Option<String>,
        registry: &Registry,
    ) -> Result<Self, Error> {
        if !args.leader_elect {
            return Ok(Self::disabled());
        }
        let name = args.lease_name(manager);
        let namespace = args.leader_election_namespace.clone();
        let (duration, grace) = args.timings();
        let status = register(
            registry,
            IntGaugeVec::new(
                Opts::new(
                    "leader_election_master_status",
                    "1 while this replica holds the leader lease `name`, else 0.",
                ),
                &["name"],
            )?,
        )?;
        let refused = register(
            registry,
            IntCounter::new(
                "leader_election_writes_refused_total",
                "Writes to the API server refused because this replica did not lead.",
            )?,
        )?;
        status.with_label_values(&[name.as_str()]).set(0);

        let manager = LeaseManagerBuilder::new(client.clone(), name.clone())
            .with_namespace(namespace.clone())
            .with_identity(identity.clone())
            .with_duration(duration)
            .with_grace(grace)
            .with_create_mode(LeaseCreateMode::AutoCreate)
            .build()
            .await
            .map_err(|e| Error::LeaderElection(Box::new(e)))?;
        tracing::info!(lease = %name, %namespace, %identity, duration, grace, "joined leader election");
        let (is_leader, manager_task) = manager.watch().await;

        let guard = WriteGuard::closed(refused);
        let (role_tx, role) = watch::channel(Role::Following);
        let (lease_tx, lease) = watch::channel(None);
        let stop = CancellationToken::new();
        let api = Api::<Lease>::namespaced(client, &namespace);
        let observer = tokio::spawn(observe(api.clone(), name.clone(), lease_tx, stop.clone()));
        let election_stop = stop.clone();
        let election = Election {
            api,
            name,
            identity: identity.clone(),
            advertise,
            margin: args.write_margin(),
            guard: guard.clone(),
            role: role_tx,
            lease: lease.clone(),
            status,
        };
        let task = tokio::spawn(async move {
            election.run(is_leader, manager_task, election_stop).await;
            // Only now: the guard follows renewals until the election has ended.
            observer.abort();
        });
        Ok(Self {
            inner: Arc::new(Inner {
                identity,
                guard,
                role,
                lease,
                stop,
                task: Mutex::new(Some(task)),
                _unchanging: None,
            }),
        })
    }

    /// The guard the manager's client must carry.
    pub fn guard(&self) -> WriteGuard {
        self.inner.guard.clone()
    }

    /// This replica's identity in the Lease (empty with leader election off).
    pub fn identity(&self) -> &str {
        &self.inner.identity
    }

    /// Where this replica stands now.
    pub fn role(&self) -> Role {
        *self.inner.role.borrow()
    }

    /// Waits until this replica leads. `false` when `shutdown` came first (or leadership was
    /// lost before this was asked).
    pub async fn acquired(&self, shutdown: &CancellationToken) -> bool {
        let mut role = self.inner.role.clone();
        tokio::select! {
            () = shutdown.cancelled() => false,
            reached = role.wait_for(|r| *r != Role::Following) => {
                matches!(reached.as_deref(), Ok(Role::Leading))
            }
        }
    }

    /// Runs `work` while this replica leads: its output, or [`Lost`] the moment leadership is
    /// lost, `work` being dropped where it stands (the write guard already refuses its writes).
    ///
    /// # Errors
    ///
    /// [`Lost`] when leadership was lost before `work` finished.
    pub async fn lead<F: Future>(&self, work: F) -> Result<F::Output, Lost> {
        let mut role = self.inner.role.clone();
        let lost = async {
            if role.wait_for(|r| *r == Role::Lost).await.is_err() {
                // The election ended without losing (it was released): nothing to wait for.
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            output = work => Ok(output),
            () = lost => Err(Lost),
        }
    }

    /// Waits until this replica leads, then runs `work` while it leads ([`Leadership::lead`]),
    /// drained as [`crate::shutdown::drain`] does: once `shutdown` is cancelled it gets
    /// `grace`, then is abandoned. `Ok(None)` when `shutdown` came first or `work` was
    /// abandoned.
    ///
    /// # Errors
    ///
    /// [`Lost`] when leadership was lost before `work` finished.
    pub async fn run<F: Future>(
        &self,
        work: F,
        shutdown: &CancellationToken,
        grace: Duration,
    ) -> Result<Option<F::Output>, Lost> {
        if !self.acquired(shutdown).await {
            return Ok(None);
        }
        self.lead(crate::shutdown::drain(work, shutdown, grace))
            .await
    }

    /// A manager's last steps: cancels `shutdown`, gives each of `servers`
    /// [`crate::shutdown::SERVER_DRAIN`] to finish its requests, then releases the lease.
    pub async fn finish<T>(
        &self,
        shutdown: &CancellationToken,
        servers: impl IntoIterator<Item = JoinHandle<T>>,
    ) {
        shutdown.cancel();
        for server in servers {
            let _ = tokio::time::timeout(crate::shutdown::SERVER_DRAIN, server).await;
        }
        self.release().await;
    }

    /// The address the current leader advertised, if it did and still holds the lease.
    pub fn leader_address(&self) -> Option<String> {
        advertised(self.inner.lease.borrow().as_ref())
    }

    /// A receiver that sees every change of the Lease (for followers that track the leader).
    pub fn lease_changes(&self) -> watch::Receiver<Option<Lease>> {
        self.inner.lease.clone()
    }

    /// Releases the lease (if held) and stops electing; the manager calls it last, once its
    /// work has drained, so the next leader takes over at once rather than after the lease
    /// runs out.
    pub async fn release(&self) {
        self.inner.stop.cancel();
        let task = self
            .inner
            .task
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(task) = task
            && tokio::time::timeout(RELEASE_TIMEOUT, task).await.is_err()
        {
            tracing::warn!("releasing the leader lease timed out");
        }
    }
}

/// The address advertised on `lease`, if its advertiser still holds it.
fn advertised(lease: Option<&Lease>) -> Option<String> {
    let lease = lease?;
    let holder = lease.spec.as_ref()?.holder_identity.as_deref()?;
    let annotations = lease.metadata.annotations.as_ref()?;
    (annotations.get(IDENTITY_ANNOTATION).map(String::as_str) == Some(holder))
        .then(|| annotations.get(ADDRESS_ANNOTATION).cloned())
        .flatten()
}

/// Whether `identity`, leading, must (again) advertise `address` on `lease`: the Lease as last
/// seen does not carry it for this holder (the write failed, or was undone).
fn needs_advertising(lease: Option<&Lease>, identity: &str, address: &str) -> bool {
    let holder = lease
        .and_then(|l| l.spec.as_ref())
        .and_then(|s| s.holder_identity.as_deref());
    holder == Some(identity) && advertised(lease).as_deref() != Some(address)
}

/// Watches the Lease and publishes every version of it.
async fn observe(
    api: Api<Lease>,
    name: String,
    lease: watch::Sender<Option<Lease>>,
    stop: CancellationToken,
) {
    let stream = watcher::watch_object(api, &name).default_backoff();
    let mut stream = std::pin::pin!(stream);
    loop {
        let next = tokio::select! {
            () = stop.cancelled() => return,
            next = stream.next() => next,
        };
        match next {
            Some(Ok(object)) => {
                lease.send_replace(object);
            }
            Some(Err(error)) => {
                tracing::warn!(error = %error_chain(&error), lease = %name, "watching the leader lease failed; retrying");
            }
            None => return,
        }
    }
}

/// The election task's state.
struct Election {
    api: Api<Lease>,
    name: String,
    identity: String,
    advertise: Option<String>,
    margin: Duration,
    guard: WriteGuard,
    role: watch::Sender<Role>,
    lease: watch::Receiver<Option<Lease>>,
    status: IntGaugeVec,
}

impl Election {
    async fn run(
        mut self,
        mut is_leader: watch::Receiver<bool>,
        manager_task: JoinHandle<
            Result<kube_lease_manager::LeaseManager, kube_lease_manager::LeaseManagerError>,
        >,
        stop: CancellationToken,
    ) {
        let mut elected = false;
        loop {
            self.update_guard();
            // Leading needs both: the lease manager says so, and the Lease shows the renewal.
            if *self.role.borrow() == Role::Following && elected && self.guard.allows() {
                self.lead().await;
            }
            let leading = *self.role.borrow() == Role::Leading;
            let deadline = self.guard.deadline();
            tokio::select! {
                () = stop.cancelled() => break,
                changed = is_leader.changed() => {
                    if changed.is_err() {
                        tracing::error!(lease = %self.name, "the lease manager stopped");
                        self.lose("the lease manager stopped");
                        break;
                    }
                    elected = *is_leader.borrow_and_update();
                    if !elected && leading {
                        self.lose("another replica holds the lease");
                        break;
                    }
                }
                changed = self.lease.changed() => {
                    if changed.is_err() {
                        break;
                    }
                    if leading && self.held_by_another() {
                        // Another replica took the lease (ours had run out, or it was
                        // taken by hand): stop now, not at the lease manager's next renewal.
                        self.lose("the lease shows another holder");
                        break;
                    }
                    if leading {
                        // Each renewal is a chance to put a failed advertisement right:
                        // followers find the leader only through it.
                        self.advertise().await;
                    }
                }
                () = sleep_until(deadline), if leading => {
                    self.update_guard();
                    if !self.guard.allows() {
                        self.lose("no renewal of the lease was seen in time");
                        break;
                    }
                }
            }
        }
        // Dropping the last receiver makes the lease manager release the lease and end.
        drop(is_leader);
        match tokio::time::timeout(RELEASE_TIMEOUT, manager_task).await {
            Ok(Ok(Ok(_))) => tracing::info!(lease = %self.name, "left leader election"),
            Ok(Ok(Err(error))) => {
                tracing::warn!(error = %error_chain(&error), lease = %self.name, "leaving leader election failed")
            }
            Ok(Err(error)) => tracing::warn!(%error, "the lease manager task failed"),
            Err(_) => tracing::warn!(lease = %self.name, "releasing the lease timed out"),
        }
        self.guard.revoke();
        self.status.with_label_values(&[self.name.as_str()]).set(0);
    }

    /// Whether the Lease as last seen names a holder other than this replica.
    fn held_by_another(&self) -> bool {
        let lease = self.lease.borrow();
        let holder = lease
            .as_ref()
            .and_then(|l| l.spec.as_ref())
            .and_then(|s| s.holder_identity.as_deref());
        holder.is_some_and(|h| h != self.identity)
    }

    /// Sets the guard's deadline from the Lease as last seen.
    fn update_guard(&self) {
        let window = write_window(
            self.lease.borrow().as_ref().and_then(|l| l.spec.as_ref()),
            &self.identity,
            SystemTime::now(),
            self.margin,
        );
        self.guard
            .set_deadline(window.map(|left| Instant::now() + left));
    }

    async fn lead(&mut self) {
        tracing::info!(lease = %self.name, identity = %self.identity, "became the leader");
        self.status.with_label_values(&[self.name.as_str()]).set(1);
        self.advertise().await;
        self.role.send_replace(Role::Leading);
    }

    /// Advertises this leader's address on the Lease unless the Lease as last seen carries it
    /// already; a failure is retried at the next renewal.
    async fn advertise(&self) {
        let Some(address) = &self.advertise else {
            return;
        };
        if !needs_advertising(self.lease.borrow().as_ref(), &self.identity, address) {
            return;
        }
        let patch = serde_json::json!({
            "metadata": {"annotations": {
                IDENTITY_ANNOTATION: self.identity,
                ADDRESS_ANNOTATION: address,
            }}
        });
        match self
            .api
            .patch(&self.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                tracing::info!(lease = %self.name, %address, "advertised this leader's address on the lease")
            }
            Err(error) => {
                tracing::warn!(error = %error_chain(&error), "could not advertise this leader's address on the lease; retrying at the next renewal")
            }
        }
    }

    fn lose(&self, why: &str) {
        self.guard.revoke();
        self.status.with_label_values(&[self.name.as_str()]).set(0);
        if *self.role.borrow() == Role::Leading {
            tracing::error!(lease = %self.name, identity = %self.identity, "lost leadership: {why}");
        }
        self.role.send_replace(Role::Lost);
    }
}

/// Sleeps until `deadline`, or forever without one.
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::{ADDRESS_ANNOTATION, IDENTITY_ANNOTATION, advertised, needs_advertising};
    use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
    use kube::api::ObjectMeta;

    fn lease(holder: Option<&str>, annotated: Option<(&str, &str)>) -> Lease {
        Lease {
            metadata: ObjectMeta {
                annotations: annotated.map(|(identity, address)| {
                    [
                        (IDENTITY_ANNOTATION.to_owned(), identity.to_owned()),
                        (ADDRESS_ANNOTATION.to_owned(), address.to_owned()),
                    ]
                    .into()
                }),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: holder.map(str::to_owned),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn only_the_holders_own_address_counts() {
        let url = "http://10.0.0.7:8083";
        assert_eq!(
            advertised(Some(&lease(Some("a"), Some(("a", url))))).as_deref(),
            Some(url)
        );
        // b took over and has not advertised yet: a's address is stale.
        assert_eq!(advertised(Some(&lease(Some("b"), Some(("a", url))))), None);
        assert_eq!(advertised(Some(&lease(None, Some(("a", url))))), None);
        assert_eq!(advertised(Some(&lease(Some("a"), None))), None);
        assert_eq!(advertised(None), None);
    }

    #[test]
    fn a_leader_advertises_again_until_the_lease_carries_its_address() {
        let url = "http://10.0.0.7:8083";
        // Missing (the write failed, or someone removed it), stale, or another address.
        assert!(needs_advertising(Some(&lease(Some("a"), None)), "a", url));
        assert!(needs_advertising(
            Some(&lease(Some("a"), Some(("b", url)))),
            "a",
            url
        ));
        assert!(needs_advertising(
            Some(&lease(Some("a"), Some(("a", "http://10.0.0.9:8083")))),
            "a",
            url
        ));
        // There: nothing to write.
        assert!(!needs_advertising(
            Some(&lease(Some("a"), Some(("a", url)))),
            "a",
            url
        ));
        // Not (yet) the holder as far as the Lease says: not its to write.
        assert!(!needs_advertising(Some(&lease(Some("b"), None)), "a", url));
        assert!(!needs_advertising(None, "a", url));
    }
}
