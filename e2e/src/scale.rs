//! What the scale benchmarks (`olm-scale`, `olm-provisioner-scale`) share: waiting on a
//! whole kind through one watch (not polled lists, so measuring loads the API server no more
//! than a controller would), and counting the changes a watch sees.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::future::Future;
use std::hash::Hash;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;

use crate::{Error, Result};

/// Counts the changes a watch of `api` delivers after its initial list, for objects whose
/// name starts with `prefix` (the count is read while the watch runs on).
pub fn count_changes<K>(api: Api<K>, prefix: String) -> Arc<AtomicUsize>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Default + Clone + Eq + Hash,
{
    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    tokio::spawn(async move {
        let mut listed = false;
        let mut events = watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(Ok(event)) = events.next().await {
            match event {
                watcher::Event::InitDone => listed = true,
                watcher::Event::Apply(o) | watcher::Event::Delete(o)
                    if listed && o.name_any().starts_with(&prefix) =>
                {
                    c.fetch_add(1, Ordering::SeqCst);
                }
                _ => {}
            }
        }
    });
    count
}

/// Watches `api` (for at most `limit`) until `done` holds for all objects seen; how long it
/// took.
pub async fn watch_until<K>(
    api: &Api<K>,
    limit: Duration,
    what: &str,
    done: impl Fn(&[&K]) -> bool,
) -> Result<Duration>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + 'static,
    K::DynamicType: Default + Clone + Eq + Hash,
{
    let started = Instant::now();
    let mut objects: BTreeMap<(String, String), K> = BTreeMap::new();
    let key = |o: &K| (o.namespace().unwrap_or_default(), o.name_any());
    let mut listed = false;
    let mut events = watcher(api.clone(), watcher::Config::default())
        .default_backoff()
        .boxed();
    let deadline = tokio::time::sleep(limit);
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            () = &mut deadline => {
                return Err(Error::Cluster(format!("{what}: not done after {limit:?}")));
            }
            event = events.next() => {
                let event = event
                    .ok_or_else(|| Error::Cluster(format!("{what}: the watch ended")))?
                    .map_err(|e| Error::Cluster(format!("{what}: the watch failed: {e}")))?;
                match event {
                    watcher::Event::Init => objects.clear(),
                    watcher::Event::InitApply(o) | watcher::Event::Apply(o) => {
                        objects.insert(key(&o), o);
                    }
                    watcher::Event::Delete(o) => {
                        objects.remove(&key(&o));
                    }
                    watcher::Event::InitDone => listed = true,
                }
                if listed && done(&objects.values().collect::<Vec<_>>()) {
                    return Ok(started.elapsed());
                }
            }
        }
    }
}

/// Runs `step` for every index of `range`, `concurrency` at a time; the first error stops it.
pub async fn each<F, Fut, E>(
    range: Range<usize>,
    concurrency: usize,
    step: F,
) -> std::result::Result<(), E>
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = std::result::Result<(), E>>,
{
    futures::stream::iter(range)
        .map(step)
        .buffer_unordered(concurrency)
        .try_collect::<Vec<()>>()
        .await
        .map(|_| ())
}
