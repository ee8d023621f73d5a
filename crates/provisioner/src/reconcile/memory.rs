//! What the provisioner remembers of each BundleDeployment between reconciles, in one place:
//! its template's objects (a resync applies them again without fetching), the objects whose
//! health its `Healthy` tells and what each said when last read, and the certificates its set
//! was last synced with. An uninstall forgets all of it at once ([`Memory::forget`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::apply::Applied;
use crate::certs::Injection;
use crate::format::registry::Serving;
use crate::health::Read;
use crate::object::{Key, Stored};

/// A template's objects, by its bundle name.
#[derive(Debug, Clone)]
pub struct Held {
    /// The template's bundle name (`<bd>-<hash>`).
    pub bundle: String,
    /// Its objects, as held between reconciles (without certificates).
    pub objects: Arc<Vec<Stored>>,
    /// The Deployments among them serving webhooks or APIServices.
    pub serving: Arc<Vec<Serving>>,
    /// For an image, the reference by the digest pulled.
    pub resolved: Option<String>,
    /// The hash of the values a chart was rendered with (every value, `valuesFrom`'s too) and
    /// of the capabilities it was told: other ones render again; the same never do.
    pub values: String,
}

/// What is remembered of one BundleDeployment.
#[derive(Default)]
struct Remembered {
    /// The objects of its last fetched template.
    held: Option<Held>,
    /// The applied objects whose health its `Healthy` tells.
    health_targets: Vec<Applied>,
    /// What each looked-at object said, at the version it was read at.
    health_reads: HashMap<Key, Read>,
    /// The certificates its objects were last synced with: while they are the ones to put in,
    /// a reconcile restores only what drifted; otherwise (a rotation step, a sync that failed
    /// after one) it syncs the whole set.
    synced: Option<Injection>,
}

/// What is remembered of every BundleDeployment, by name.
#[derive(Default)]
pub struct Memory(Mutex<HashMap<String, Remembered>>);

impl Memory {
    fn all(&self) -> MutexGuard<'_, HashMap<String, Remembered>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What is held of `bd`'s template `bundle`, rendered with the values of hash `values`.
    pub fn held(&self, bd: &str, bundle: &str, values: &str) -> Option<Held> {
        self.all()
            .get(bd)
            .and_then(|r| r.held.as_ref())
            .filter(|h| h.bundle == bundle && h.values == values)
            .cloned()
    }

    /// For an image, the reference by digest `bd`'s template `bundle` was pulled by.
    pub fn resolved(&self, bd: &str, bundle: &str) -> Option<String> {
        self.all()
            .get(bd)
            .and_then(|r| r.held.as_ref())
            .filter(|h| h.bundle == bundle)
            .and_then(|h| h.resolved.clone())
    }

    /// Holds `held` as `bd`'s template's objects.
    pub fn hold(&self, bd: &str, held: Held) {
        self.all().entry(bd.to_owned()).or_default().held = Some(held);
    }

    /// The objects whose health `bd`'s `Healthy` tells.
    pub fn health_targets(&self, bd: &str) -> Vec<Applied> {
        self.all()
            .get(bd)
            .map(|r| r.health_targets.clone())
            .unwrap_or_default()
    }

    /// Sets the objects whose health `bd`'s `Healthy` tells.
    pub fn set_health_targets(&self, bd: &str, targets: Vec<Applied>) {
        self.all().entry(bd.to_owned()).or_default().health_targets = targets;
    }

    /// What `bd`'s objects said when their health was last read, taken out to be read again.
    pub fn take_health_reads(&self, bd: &str) -> HashMap<Key, Read> {
        self.all()
            .get_mut(bd)
            .map(|r| std::mem::take(&mut r.health_reads))
            .unwrap_or_default()
    }

    /// Puts back what `bd`'s objects said when their health was read.
    pub fn put_health_reads(&self, bd: &str, reads: HashMap<Key, Read>) {
        self.all().entry(bd.to_owned()).or_default().health_reads = reads;
    }

    /// Forgets what `bd`'s objects (those in `keys`, or all) said when their health was read.
    pub fn forget_health_reads(&self, bd: &str, keys: Option<&[Key]>) {
        if let Some(remembered) = self.all().get_mut(bd) {
            match keys {
                None => remembered.health_reads.clear(),
                Some(keys) => remembered.health_reads.retain(|k, _| !keys.contains(k)),
            }
        }
    }

    /// Remembers what `bd`'s set was synced with (`None`: forgets it).
    pub fn synced(&self, bd: &str, injection: Option<Injection>) {
        match injection {
            Some(i) => self.all().entry(bd.to_owned()).or_default().synced = Some(i),
            None => {
                if let Some(remembered) = self.all().get_mut(bd) {
                    remembered.synced = None;
                }
            }
        }
    }

    /// The certificates `bd`'s set was last synced with.
    pub fn synced_with(&self, bd: &str) -> Option<Injection> {
        self.all().get(bd).and_then(|r| r.synced.clone())
    }

    /// Forgets everything of `bd`.
    pub fn forget(&self, bd: &str) {
        self.all().remove(bd);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(bundle: &str, values: &str) -> Held {
        Held {
            bundle: bundle.into(),
            objects: Arc::default(),
            serving: Arc::default(),
            resolved: Some(format!("{bundle}@sha256:00")),
            values: values.into(),
        }
    }

    #[test]
    fn what_is_held_is_found_by_bundle_and_values_and_an_uninstall_forgets_it_all() {
        let memory = Memory::default();
        memory.hold("shop", held("shop-1", "v1"));
        memory.put_health_reads("shop", HashMap::new());
        assert!(memory.held("shop", "shop-1", "v1").is_some());
        assert!(memory.held("shop", "shop-1", "v2").is_none());
        assert!(memory.held("shop", "shop-2", "v1").is_none());
        assert_eq!(
            memory.resolved("shop", "shop-1").as_deref(),
            Some("shop-1@sha256:00")
        );
        memory.forget("shop");
        assert!(memory.held("shop", "shop-1", "v1").is_none());
        assert!(memory.all().is_empty(), "nothing of shop is left");
        // Reading what is not there remembers nothing.
        assert!(memory.health_targets("other").is_empty());
        assert!(memory.take_health_reads("other").is_empty());
        memory.synced("other", None);
        memory.forget_health_reads("other", None);
        assert!(memory.all().is_empty());
    }
}
