//! Drift: a metadata-only watch per applied group-kind (per allowed namespace with namespaced
//! RBAC), while some installed set holds that kind, of our objects only (selected by the
//! owner label on the server, so the provisioner's memory grows with what it applied, not with
//! the cluster), tells a BundleDeployment to reconcile when one of its objects changes or goes.
//! The reconcile then re-applies exactly the objects that moved, and writes nothing when none
//! did (see [`state`]).

pub mod state;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::StreamExt;
use futures::channel::mpsc;
use kube::api::{Api, DynamicObject, PartialObjectMeta};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use olm_api::bundle_deployment::BundleDeployment;
use prometheus::IntGauge;
use tokio_util::sync::CancellationToken;

use self::state::{GroupKind, Part, Seen, State};
use crate::apply::Applied;
use crate::marks::{BUNDLE_DEPLOYMENT, OWNER_KIND, OWNER_NAME};
use crate::object::Key;

/// The drift watches and what they saw.
pub struct Drift {
    client: Client,
    state: Arc<Mutex<State>>,
    /// The running watches, by group-kind: each stops with its token.
    watched: Mutex<HashMap<GroupKind, CancellationToken>>,
    requeue: mpsc::UnboundedSender<ObjectRef<BundleDeployment>>,
    shutdown: CancellationToken,
    /// With namespaced RBAC, the namespaces namespaced kinds are watched in (else all).
    namespaces: Option<Vec<String>>,
    /// `provisioner_drift_watches`: the group-kinds watched.
    gauge: Option<IntGauge>,
}

impl Drift {
    /// No watch yet; BundleDeployments to reconcile come out of the receiver. Watches stop at
    /// `shutdown`.
    pub fn new(
        client: Client,
        shutdown: CancellationToken,
    ) -> (Drift, mpsc::UnboundedReceiver<ObjectRef<BundleDeployment>>) {
        let (requeue, rx) = mpsc::unbounded();
        let drift = Drift {
            client,
            state: Arc::default(),
            watched: Mutex::default(),
            requeue,
            shutdown,
            namespaces: None,
            gauge: None,
        };
        (drift, rx)
    }

    /// These watches, of namespaced kinds in `namespaces` only (`None`: everywhere), counted
    /// by `gauge`.
    pub fn scoped(mut self, namespaces: Option<Vec<String>>, gauge: Option<IntGauge>) -> Drift {
        self.namespaces = namespaces;
        self.gauge = gauge;
        self
    }

    /// The state (applied versions, what the watches see).
    pub fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Watches every group-kind of `applied` not watched yet.
    pub fn watch(&self, applied: &[Applied]) {
        let mut watched = self.watched.lock().unwrap_or_else(PoisonError::into_inner);
        for a in applied {
            let group_kind = (a.key.group.clone(), a.key.kind.clone());
            if watched.contains_key(&group_kind) {
                continue;
            }
            let stop = self.shutdown.child_token();
            watched.insert(group_kind.clone(), stop.clone());
            let apis: Vec<Api<PartialObjectMeta<DynamicObject>>> =
                match (&self.namespaces, &a.key.namespace) {
                    (Some(namespaces), Some(_)) => namespaces
                        .iter()
                        .map(|ns| Api::namespaced_with(self.client.clone(), ns, &a.resource))
                        .collect(),
                    _ => vec![Api::all_with(self.client.clone(), &a.resource)],
                };
            let count = apis.len();
            for api in apis {
                tokio::spawn(run(
                    api,
                    group_kind.clone(),
                    count,
                    self.state.clone(),
                    self.requeue.clone(),
                    stop.clone(),
                ));
            }
        }
        self.count(watched.len());
    }

    /// Stops the watches of group-kinds no remembered set holds any more (the last
    /// BundleDeployment applying them went, or dropped them), so watches do not pile up over
    /// the provisioner's life.
    pub fn stop_unused(&self) {
        // The watches first, then the state (the order `watch` keeps too): what is in use is
        // read while no watch can start, and a watch is cancelled and forgotten under the state
        // lock, under which its task checks for cancellation before it writes.
        let mut watched = self.watched.lock().unwrap_or_else(PoisonError::into_inner);
        let mut state = self.state();
        let in_use = state.group_kinds();
        let unused: Vec<GroupKind> = watched
            .keys()
            .filter(|gk| !in_use.contains(*gk))
            .cloned()
            .collect();
        for group_kind in unused {
            if let Some(stop) = watched.remove(&group_kind) {
                stop.cancel();
            }
            state.unwatched(&group_kind);
            tracing::debug!(group = %group_kind.0, kind = %group_kind.1, "a drift watch stopped: nothing applied of its kind");
        }
        drop(state);
        self.count(watched.len());
    }

    fn count(&self, watches: usize) {
        if let Some(g) = &self.gauge {
            g.set(i64::try_from(watches).unwrap_or(i64::MAX));
        }
    }
}

/// The key and what was seen of a watched object.
fn seen_of(group_kind: &GroupKind, object: &PartialObjectMeta<DynamicObject>) -> (Key, Seen) {
    let key = Key {
        group: group_kind.0.clone(),
        kind: group_kind.1.clone(),
        namespace: object.namespace(),
        name: object.name_any(),
    };
    let seen = Seen {
        owner: object.labels().get(OWNER_NAME).cloned().unwrap_or_default(),
        version: object.resource_version().unwrap_or_default(),
    };
    (key, seen)
}

/// One group-kind's watch (one of `parts`, one per namespace with namespaced RBAC), until
/// `shutdown`.
async fn run(
    api: Api<PartialObjectMeta<DynamicObject>>,
    group_kind: GroupKind,
    parts: usize,
    state: Arc<Mutex<State>>,
    requeue: mpsc::UnboundedSender<ObjectRef<BundleDeployment>>,
    shutdown: CancellationToken,
) {
    let scope = api.namespace().map(str::to_owned);
    let config = watcher::Config::default().labels(&format!("{OWNER_KIND}={BUNDLE_DEPLOYMENT}"));
    let mut events = std::pin::pin!(watcher(api, config).default_backoff());
    let mut listing: Vec<(Key, Seen)> = Vec::new();
    loop {
        let event = tokio::select! {
            () = shutdown.cancelled() => return,
            event = events.next() => event,
        };
        let Some(event) = event else { return };
        // A stopped watch writes nothing more (see `Drift::stop_unused`).
        let lock = || {
            let guard = state.lock().unwrap_or_else(PoisonError::into_inner);
            (!shutdown.is_cancelled()).then_some(guard)
        };
        let affected: BTreeSet<String> = match event {
            Ok(watcher::Event::Init) => {
                listing.clear();
                BTreeSet::new()
            }
            Ok(watcher::Event::InitApply(o)) => {
                listing.push(seen_of(&group_kind, &o));
                BTreeSet::new()
            }
            Ok(watcher::Event::InitDone) => {
                let Some(mut state) = lock() else { return };
                state.relisted(
                    group_kind.clone(),
                    Part {
                        namespace: scope.clone(),
                        of: parts,
                    },
                    std::mem::take(&mut listing),
                )
            }
            Ok(watcher::Event::Apply(o)) => {
                let (key, seen) = seen_of(&group_kind, &o);
                let Some(mut state) = lock() else { return };
                state.seen(key, seen).into_iter().collect()
            }
            Ok(watcher::Event::Delete(o)) => {
                let (key, _) = seen_of(&group_kind, &o);
                let Some(mut state) = lock() else { return };
                state.gone(&key).into_iter().collect()
            }
            Err(error) => {
                tracing::warn!(group = %group_kind.0, kind = %group_kind.1, %error, "a drift watch failed; it starts again");
                BTreeSet::new()
            }
        };
        for bd in affected {
            tracing::debug!(bundle_deployment = %bd, kind = %group_kind.1, "an applied object drifted");
            let _ = requeue.unbounded_send(ObjectRef::new(&bd));
        }
    }
}
