//! What every reconcile shares: clients, the store, the sources, metrics, events, and what
//! catalogd remembers of each Catalog. Built in one step by [`Context::new`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use kube::Client;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::reflector::Store as Reflector;
use olm_api::catalog::{Catalog, Phase};
use olm_runtime::events::EventPublisher;

use crate::budget::UnpackBudget;
use crate::metrics::CatalogdMetrics;
use crate::plan::Memory;
use crate::source::Sources;
use crate::store::Store;

/// Everything a reconcile needs: the [`Parts`] it is built from, and what the controller
/// adds.
pub struct Context {
    /// Clients, store, sources, metrics, events.
    pub parts: Parts,
    /// What catalogd remembers of each Catalog, shared with the watches that bump its inputs.
    pub memory: Arc<Memories>,
    /// The budget of bytes being unpacked at once.
    pub budget: UnpackBudget,
    /// The controller's cache of Catalogs (for the phase gauge).
    pub catalogs: Reflector<Catalog>,
}

/// The parts of a [`Context`] that are not set up by the controller.
pub struct Parts {
    /// API client.
    pub client: Client,
    /// The content store.
    pub store: Arc<Store>,
    /// The sources.
    pub sources: Sources,
    /// catalogd_* metrics.
    pub metrics: CatalogdMetrics,
    /// Events.
    pub events: EventPublisher,
    /// Base URL of the content server as clients reach it (for `contentURL`).
    pub external_address: String,
    /// Bytes that may be unpacked at once.
    pub unpack_budget_bytes: u64,
}

impl Context {
    /// The context of a controller whose Catalog cache is `catalogs` and whose watches share
    /// `memory`.
    pub fn new(parts: Parts, catalogs: Reflector<Catalog>, memory: Arc<Memories>) -> Self {
        Self {
            budget: UnpackBudget::new(parts.unpack_budget_bytes),
            parts,
            memory,
            catalogs,
        }
    }

    /// The `contentURL` of the catalog `name`.
    pub fn content_url(&self, name: &str) -> String {
        format!(
            "{}/catalogs/{name}/all.json",
            self.parts.external_address.trim_end_matches('/')
        )
    }

    /// Recounts catalogs per phase from the controller's cache; `just_written` overrides the
    /// cache for a catalog whose new status has not come back through the watch yet.
    pub fn update_phase_gauge(&self, just_written: Option<(&str, Option<Phase>)>) {
        let mut counts: HashMap<&str, i64> = ["Pending", "Unpacking", "Unpacked", "Failing"]
            .into_iter()
            .map(|p| (p, 0))
            .collect();
        for c in self.catalogs.state() {
            let cached = c.status.as_ref().and_then(|s| s.phase);
            let name = c.metadata.name.as_deref().unwrap_or_default();
            let phase = match just_written
                .filter(|(n, _)| *n == name)
                .map_or(cached, |(_, p)| p)
            {
                Some(Phase::Unpacking) => "Unpacking",
                Some(Phase::Unpacked) => "Unpacked",
                Some(Phase::Failing) => "Failing",
                Some(Phase::Pending) | None => "Pending",
            };
            *counts.entry(phase).or_default() += 1;
        }
        for (phase, n) in counts {
            self.parts
                .metrics
                .catalogs
                .with_label_values(&[phase])
                .set(n);
        }
    }
}

/// What catalogd remembers of each Catalog, by name.
#[derive(Debug, Default)]
pub struct Memories {
    by_name: Mutex<HashMap<String, Memory>>,
}

impl Memories {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Memory>> {
        self.by_name.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The memory of the Catalog `name` with `uid` (empty for a new object under an old name).
    pub fn get(&self, name: &str, uid: &str) -> Memory {
        match self.lock().get(name) {
            Some(m) if m.uid == uid => m.clone(),
            _ => Memory {
                uid: uid.to_owned(),
                ..Memory::default()
            },
        }
    }

    /// Changes the memory of the Catalog `name` with `uid`.
    pub fn update<R>(&self, name: &str, uid: &str, f: impl FnOnce(&mut Memory) -> R) -> R {
        let mut all = self.lock();
        let memory = all.entry(name.to_owned()).or_default();
        if memory.uid != uid {
            *memory = Memory {
                uid: uid.to_owned(),
                ..Memory::default()
            };
        }
        f(memory)
    }

    /// Notes that an object the Catalogs `refs` read has changed (a watch event), so their
    /// failures are retried at once.
    pub fn inputs_changed(&self, refs: &[ObjectRef<Catalog>]) {
        let mut all = self.lock();
        for r in refs {
            if let Some(m) = all.get_mut(&r.name) {
                m.inputs = m.inputs.wrapping_add(1);
            }
        }
    }

    /// Forgets the Catalog `name` (deleted).
    pub fn forget(&self, name: &str) {
        self.lock().remove(name);
    }
}
