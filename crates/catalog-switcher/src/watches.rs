//! Watches of the objects templates read, started and stopped as templates change, so that a
//! change to one re-resolves exactly the Catalogs that depend on it, within seconds.
//!
//! [`Dependencies`] is the bookkeeping (pure, tested alone): which Catalog reads which object,
//! and which watches that makes necessary. [`Watches`] runs one watch per object, through the
//! dynamic API with a field selector on the name, and re-queues the dependents of an object
//! when it changes, appears or goes.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::core::GroupVersionKind;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{WatchStreamExt, watcher};
use olm_api::catalog::Catalog;
use olm_api::catalog_source_v0::CatalogSource;
use prometheus::IntGauge;
use tokio::task::JoinHandle;

/// An object a watch follows.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WatchKey {
    /// API group ("" for core).
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Resource (plural).
    pub plural: String,
    /// Namespace, for namespaced kinds.
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

impl WatchKey {
    /// The key of `name` (in `namespace`) of `resource`.
    pub fn new(resource: &ApiResource, namespace: Option<&str>, name: &str) -> Self {
        Self {
            group: resource.group.clone(),
            version: resource.version.clone(),
            kind: resource.kind.clone(),
            plural: resource.plural.clone(),
            namespace: namespace.map(str::to_owned),
            name: name.to_owned(),
        }
    }

    fn resource(&self) -> ApiResource {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(&self.group, &self.version, &self.kind),
            &self.plural,
        )
    }
}

/// An object whose template reads other objects.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dependent {
    /// A Catalog, by name.
    Catalog(String),
    /// An OLM v0 CatalogSource.
    CatalogSource {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
}

/// Which object reads which object.
#[derive(Debug, Default)]
pub struct Dependencies {
    by_catalog: BTreeMap<Dependent, BTreeSet<WatchKey>>,
    by_key: BTreeMap<WatchKey, BTreeSet<Dependent>>,
}

/// Watches to start and stop after a change of dependencies.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Objects newly read by some Catalog.
    pub start: Vec<WatchKey>,
    /// Objects no Catalog reads any more.
    pub stop: Vec<WatchKey>,
}

impl Dependencies {
    /// Records that `catalog` reads exactly `keys` (none: it reads nothing, or is gone).
    pub fn set(&mut self, catalog: &Dependent, keys: BTreeSet<WatchKey>) -> Changes {
        let old = self.by_catalog.remove(catalog).unwrap_or_default();
        let mut changes = Changes::default();
        for key in old.difference(&keys) {
            if let Some(readers) = self.by_key.get_mut(key) {
                readers.remove(catalog);
                if readers.is_empty() {
                    self.by_key.remove(key);
                    changes.stop.push(key.clone());
                }
            }
        }
        for key in keys.difference(&old) {
            let readers = self.by_key.entry(key.clone()).or_default();
            if readers.is_empty() {
                changes.start.push(key.clone());
            }
            readers.insert(catalog.clone());
        }
        if !keys.is_empty() {
            self.by_catalog.insert(catalog.clone(), keys);
        }
        changes
    }

    /// How many objects would be watched if `catalog` read exactly `keys`.
    pub fn watched_after(&self, catalog: &Dependent, keys: &BTreeSet<WatchKey>) -> usize {
        let empty = BTreeSet::new();
        let old = self.by_catalog.get(catalog).unwrap_or(&empty);
        // Keys only this catalog reads go when it stops reading them; new keys nobody reads
        // yet come.
        let going = old
            .difference(keys)
            .filter(|k| self.by_key.get(*k).is_some_and(|r| r.len() == 1))
            .count();
        let coming = keys
            .difference(old)
            .filter(|k| !self.by_key.contains_key(*k))
            .count();
        self.by_key.len() - going + coming
    }

    /// The objects that read `key`.
    pub fn readers(&self, key: &WatchKey) -> Vec<Dependent> {
        self.by_key
            .get(key)
            .map(|r| r.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// How many objects are watched.
    pub fn watched(&self) -> usize {
        self.by_key.len()
    }

    /// Every object that reads something.
    pub fn dependents(&self) -> impl Iterator<Item = &Dependent> {
        self.by_catalog.keys()
    }
}

/// Starting the watches a template needs would pass the limit of objects watched in all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "watching the {needed} objects the templates would then read is more than the {max} the catalog-switcher watches at most (--max-watched-objects)"
)]
pub struct WatchLimit {
    /// Objects that would be watched.
    pub needed: usize,
    /// The limit.
    pub max: usize,
}

/// The running watches.
pub struct Watches {
    client: kube::Client,
    /// The most objects watched at once.
    max_watched: usize,
    /// The bookkeeping and the running watches, under one lock: two readers changing at once
    /// must not start, replace or abort each other's watch.
    state: Mutex<State>,
    requeue: Requeue,
    gauge: IntGauge,
}

/// Where a change re-queues its readers: one channel per controller.
#[derive(Clone)]
pub struct Requeue {
    /// The Catalog controller's.
    pub catalogs: futures::channel::mpsc::UnboundedSender<ObjectRef<Catalog>>,
    /// The CatalogSource controller's, while it runs (it starts and stops with the
    /// CatalogSource CRD).
    pub catalog_sources:
        Arc<Mutex<Option<futures::channel::mpsc::UnboundedSender<ObjectRef<CatalogSource>>>>>,
}

#[derive(Default)]
struct State {
    deps: Dependencies,
    running: HashMap<WatchKey, JoinHandle<()>>,
}

impl Watches {
    /// Watches (at most `max_watched` at once) that re-queue dependents through `requeue`,
    /// counted in `gauge`.
    pub fn new(
        client: kube::Client,
        requeue: Requeue,
        gauge: IntGauge,
        max_watched: usize,
    ) -> Arc<Self> {
        Arc::new(Self {
            client,
            max_watched,
            state: Mutex::default(),
            requeue,
            gauge,
        })
    }

    /// Records what `catalog` reads now, and starts and stops watches to match. When that
    /// would watch more objects than allowed (and more than now), `catalog` is recorded as
    /// reading nothing (its watches stop) and the limit is the error: each watch is a
    /// connection to the API server, and templates are written by whoever may annotate a
    /// Catalog.
    pub fn set(
        self: &Arc<Self>,
        catalog: &Dependent,
        keys: BTreeSet<WatchKey>,
    ) -> Result<(), WatchLimit> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let needed = state.deps.watched_after(catalog, &keys);
        let refused = needed > self.max_watched && needed > state.deps.watched();
        let keys = if refused { BTreeSet::new() } else { keys };
        let changes = state.deps.set(catalog, keys);
        for key in changes.stop {
            if let Some(handle) = state.running.remove(&key) {
                handle.abort();
                tracing::debug!(?key, "stopped watching");
            }
        }
        for key in changes.start {
            let this = self.clone();
            let watched_key = key.clone();
            let handle = tokio::spawn(async move { this.watch(watched_key).await });
            tracing::debug!(?key, "watching");
            if let Some(replaced) = state.running.insert(key, handle) {
                replaced.abort();
            }
        }
        self.gauge
            .set(i64::try_from(state.deps.watched()).unwrap_or(i64::MAX));
        if refused {
            return Err(WatchLimit {
                needed,
                max: self.max_watched,
            });
        }
        Ok(())
    }

    /// Forgets every reader for which `alive` is false (objects deleted while no event said
    /// so, or whose controller stopped), stopping the watches only they needed.
    pub fn retain(self: &Arc<Self>, alive: impl Fn(&Dependent) -> bool) {
        let gone: Vec<Dependent> = {
            let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            state
                .deps
                .dependents()
                .filter(|d| !alive(d))
                .cloned()
                .collect()
        };
        for dependent in gone {
            // Reading nothing never passes the limit.
            let _ = self.set(&dependent, BTreeSet::new());
        }
    }

    async fn watch(self: Arc<Self>, key: WatchKey) {
        let resource = key.resource();
        let api: Api<DynamicObject> = match &key.namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &resource),
            None => Api::all_with(self.client.clone(), &resource),
        };
        let config = watcher::Config::default().fields(&format!("metadata.name={}", key.name));
        // Backed off like every other watch: a read the RBAC refuses, or a kind that went, must
        // not become a tight loop of requests.
        let mut events = watcher::watcher(api, config).default_backoff().boxed();
        while let Some(event) = events.next().await {
            let changed = match event {
                // The initial list is done (the object may have changed between the template's
                // read and the watch's start), or the object changed or went.
                Ok(
                    watcher::Event::InitDone | watcher::Event::Apply(_) | watcher::Event::Delete(_),
                ) => true,
                Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => false,
                Err(error) => {
                    tracing::warn!(?key, %error, "watch of a template's object failed; it retries");
                    false
                }
            };
            if changed {
                let readers = self
                    .state
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .deps
                    .readers(&key);
                for reader in readers {
                    let _ = match reader {
                        Dependent::Catalog(name) => self
                            .requeue
                            .catalogs
                            .unbounded_send(ObjectRef::new(&name))
                            .is_ok(),
                        Dependent::CatalogSource { namespace, name } => self
                            .requeue
                            .catalog_sources
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .as_ref()
                            .is_some_and(|tx| {
                                tx.unbounded_send(ObjectRef::new(&name).within(&namespace))
                                    .is_ok()
                            }),
                    };
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> WatchKey {
        WatchKey {
            group: String::new(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
            plural: "configmaps".into(),
            namespace: Some("ns".into()),
            name: name.into(),
        }
    }

    fn c(name: &str) -> Dependent {
        Dependent::Catalog(name.into())
    }

    fn keys(names: &[&str]) -> BTreeSet<WatchKey> {
        names.iter().map(|n| key(n)).collect()
    }

    #[test]
    fn what_would_be_watched_counts_shared_keys_once() {
        let mut deps = Dependencies::default();
        deps.set(&c("a"), keys(&["x", "y"]));
        deps.set(&c("b"), keys(&["y"]));
        assert_eq!(deps.watched(), 2);
        // b moving to z: y stays (a reads it), z comes.
        assert_eq!(deps.watched_after(&c("b"), &keys(&["z"])), 3);
        // a dropping x and y: x goes, y stays for b.
        assert_eq!(deps.watched_after(&c("a"), &keys(&[])), 1);
        // A new reader of what is watched already adds nothing.
        assert_eq!(deps.watched_after(&c("c"), &keys(&["x", "y"])), 2);
        assert_eq!(deps.watched_after(&c("c"), &keys(&["p", "q", "x"])), 4);
    }

    #[test]
    fn a_watch_starts_with_its_first_reader_and_stops_with_its_last() {
        let mut deps = Dependencies::default();
        assert_eq!(
            deps.set(&c("a"), keys(&["x", "y"])),
            Changes {
                start: vec![key("x"), key("y")],
                stop: vec![]
            }
        );
        assert_eq!(deps.set(&c("b"), keys(&["x"])), Changes::default());
        assert_eq!(deps.readers(&key("x")), [c("a"), c("b")]);
        assert_eq!(
            deps.set(&c("a"), keys(&["z"])),
            Changes {
                start: vec![key("z")],
                stop: vec![key("y")]
            }
        );
        assert_eq!(deps.readers(&key("x")), [c("b")]);
        assert_eq!(
            deps.set(&c("b"), BTreeSet::new()),
            Changes {
                start: vec![],
                stop: vec![key("x")]
            }
        );
        assert_eq!(deps.watched(), 1);
        assert!(deps.readers(&key("x")).is_empty());
    }
}
