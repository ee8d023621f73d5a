//! `/readyz`'s checks: named checks a manager's subsystems register and mark ready, and the
//! one rule by which a watch marks its check ([`ReadinessHandle::follow`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use kube::runtime::watcher;

/// Named readiness checks shared by a manager's subsystems. Cloning is cheap and every clone
/// sees the same checks.
#[derive(Clone, Debug, Default)]
pub struct Readiness {
    checks: Arc<Mutex<Vec<ReadinessHandle>>>,
}

/// One readiness check, as returned by [`Readiness::register`]. Starts not ready. Cloning
/// gives another handle to the same check.
#[derive(Clone, Debug)]
pub struct ReadinessHandle {
    name: Arc<str>,
    ready: Arc<AtomicBool>,
}

impl Readiness {
    /// No checks yet: ready until something registers.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a check named `name` (e.g. `catalog-watch`) that is not ready until its handle says
    /// so. Registering a name twice adds two independent checks.
    pub fn register(&self, name: impl Into<String>) -> ReadinessHandle {
        let handle = ReadinessHandle {
            name: Arc::from(name.into()),
            ready: Arc::new(AtomicBool::new(false)),
        };
        self.lock().push(handle.clone());
        handle
    }

    /// The names of the checks that are not ready, in registration order.
    pub fn not_ready(&self) -> Vec<String> {
        self.lock()
            .iter()
            .filter(|check| !check.is_ready())
            .map(|check| check.name.to_string())
            .collect()
    }

    /// Whether every registered check is ready.
    pub fn is_ready(&self) -> bool {
        self.lock().iter().all(ReadinessHandle::is_ready)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<ReadinessHandle>> {
        // The list is only ever pushed to, so a panic elsewhere cannot leave it inconsistent.
        self.checks.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl ReadinessHandle {
    /// Marks the check ready or, e.g. after a watch lost its connection, not ready again.
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Release);
    }

    /// Whether this check is ready.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// Follows a watch: ready once it has (re)listed or delivers any change (an `Apply` or a
    /// `Delete`: either proves it is live, and after an error kube's watcher resumes without
    /// listing again, so a `Delete` may be the first sign it recovered); not ready on an
    /// error, saying so (`what` names the watched kind); unchanged while it lists.
    pub fn follow<K>(&self, what: &str, event: &Result<watcher::Event<K>, watcher::Error>) {
        if let Err(error) = event {
            tracing::warn!(%error, "the {what} watch failed; not ready until it recovers");
        }
        if let Some(ready) = after_event(event) {
            self.set_ready(ready);
        }
    }

    /// The name the check was registered under.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// What a watch event says of the watch's health: healthy once its (re)list is done or a
/// change arrives, broken on an error (until it has re-listed or a change arrives), nothing
/// while re-listing.
pub fn after_event<K>(event: &Result<watcher::Event<K>, watcher::Error>) -> Option<bool> {
    match event {
        Ok(watcher::Event::InitDone | watcher::Event::Apply(_) | watcher::Event::Delete(_)) => {
            Some(true)
        }
        Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => None,
        Err(_) => Some(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_without_checks_is_ready() {
        assert!(Readiness::new().is_ready());
    }

    #[test]
    fn readiness_waits_for_every_check_and_names_the_missing_ones() {
        let readiness = Readiness::new();
        let watch = readiness.register("catalog-watch");
        let cache = readiness.clone().register("cache-warm");
        assert!(!readiness.is_ready());
        assert_eq!(readiness.not_ready(), ["catalog-watch", "cache-warm"]);

        watch.set_ready(true);
        assert_eq!(readiness.not_ready(), ["cache-warm"]);
        cache.set_ready(true);
        assert!(readiness.is_ready());

        watch.set_ready(false);
        assert_eq!(readiness.not_ready(), ["catalog-watch"]);
        assert_eq!(watch.name(), "catalog-watch");
    }

    #[test]
    fn a_watch_is_ready_after_its_list_or_any_change_and_not_after_an_error() {
        use k8s_openapi::api::core::v1::ConfigMap;
        let ok = |e: watcher::Event<ConfigMap>| after_event(&Ok(e));
        assert_eq!(ok(watcher::Event::Init), None);
        assert_eq!(ok(watcher::Event::InitApply(ConfigMap::default())), None);
        assert_eq!(ok(watcher::Event::InitDone), Some(true));
        assert_eq!(ok(watcher::Event::Apply(ConfigMap::default())), Some(true));
        assert_eq!(ok(watcher::Event::Delete(ConfigMap::default())), Some(true));
        let broken: Result<watcher::Event<ConfigMap>, _> = Err(watcher::Error::NoResourceVersion);
        assert_eq!(after_event(&broken), Some(false));
        let check = Readiness::new().register("watch");
        check.follow("ConfigMap", &broken);
        assert!(!check.is_ready());
        check.follow(
            "ConfigMap",
            &Ok(watcher::Event::Delete(ConfigMap::default())),
        );
        assert!(
            check.is_ready(),
            "a change after an error proves the watch is back"
        );
    }
}
