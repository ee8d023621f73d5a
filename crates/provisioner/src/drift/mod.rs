//! Drift: a metadata-only watch per applied group-kind, of our objects only (selected by the
//! owner label on the server, so the provisioner's memory grows with what it applied, not with
//! the cluster), tells a BundleDeployment to reconcile when one of its objects changes or goes.
//! The reconcile then re-applies exactly the objects that moved, and writes nothing when none
//! did (see [`state`]).

pub mod state;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::StreamExt;
use futures::channel::mpsc;
use kube::api::{Api, ApiResource, DynamicObject, PartialObjectMeta};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use olm_api::bundle_deployment::BundleDeployment;
use tokio_util::sync::CancellationToken;

use self::state::{GroupKind, Seen, State};
use crate::apply::Applied;
use crate::marks::{BUNDLE_DEPLOYMENT, OWNER_KIND, OWNER_NAME};
use crate::object::Key;

/// The drift watches and what they saw.
pub struct Drift {
    client: Client,
    state: Arc<Mutex<State>>,
    watched: Mutex<HashMap<GroupKind, ApiResource>>,
    requeue: mpsc::UnboundedSender<ObjectRef<BundleDeployment>>,
    shutdown: CancellationToken,
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
        };
        (drift, rx)
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
            watched.insert(group_kind.clone(), a.resource.clone());
            tokio::spawn(run(
                Api::all_with(self.client.clone(), &a.resource),
                group_kind,
                self.state.clone(),
                self.requeue.clone(),
                self.shutdown.clone(),
            ));
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

/// One group-kind's watch, until `shutdown`.
async fn run(
    api: Api<PartialObjectMeta<DynamicObject>>,
    group_kind: GroupKind,
    state: Arc<Mutex<State>>,
    requeue: mpsc::UnboundedSender<ObjectRef<BundleDeployment>>,
    shutdown: CancellationToken,
) {
    let config = watcher::Config::default().labels(&format!("{OWNER_KIND}={BUNDLE_DEPLOYMENT}"));
    let mut events = std::pin::pin!(watcher(api, config).default_backoff());
    let mut listing: Vec<(Key, Seen)> = Vec::new();
    loop {
        let event = tokio::select! {
            () = shutdown.cancelled() => return,
            event = events.next() => event,
        };
        let Some(event) = event else { return };
        let lock = || state.lock().unwrap_or_else(PoisonError::into_inner);
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
                lock().relisted(group_kind.clone(), std::mem::take(&mut listing))
            }
            Ok(watcher::Event::Apply(o)) => {
                let (key, seen) = seen_of(&group_kind, &o);
                lock().seen(key, seen).into_iter().collect()
            }
            Ok(watcher::Event::Delete(o)) => {
                let (key, _) = seen_of(&group_kind, &o);
                lock().gone(&key).into_iter().collect()
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
