//! Kubernetes Events for the objects a controller manages, published best-effort: an Event
//! that cannot be written is logged and dropped, never turned into a reconcile failure.
//!
//! One [`EventPublisher`] per controller, shared by every reconcile, so kube's [`Recorder`]
//! can aggregate repeats into one Event with a growing `series.count` (which needs RBAC
//! `create` *and* `patch` on `events.k8s.io/events`).
//!
//! Events about cluster-scoped objects (all olm-rs APIs are cluster-scoped) are written to
//! the `default` namespace: the apiserver accepts only `default` or `kube-system` there for
//! `events.k8s.io/v1`, and `kubectl describe` looks them up by the regarding object, not by
//! namespace.

use kube::{
    Resource,
    runtime::events::{Event, EventType, Recorder, Reporter},
};

/// The apiserver's limit on `note`, in bytes.
pub const MAX_NOTE_BYTES: usize = 1024;
/// The apiserver's limit on `reason` and `action`.
pub const MAX_REASON_BYTES: usize = 128;

/// Publishes Events as one reporting controller (e.g. `catalogd`), optionally one instance of
/// it (its pod). Cloning is cheap and clones share the aggregation cache.
#[derive(Clone)]
pub struct EventPublisher {
    recorder: Recorder,
    controller: String,
}

impl std::fmt::Debug for EventPublisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventPublisher")
            .field("controller", &self.controller)
            .finish_non_exhaustive()
    }
}

impl EventPublisher {
    /// Events reported by `controller`, from `instance` (usually the pod name; without one the
    /// controller name is used).
    pub fn new(
        client: kube::Client,
        controller: impl Into<String>,
        instance: Option<String>,
    ) -> Self {
        let controller = controller.into();
        let reporter = Reporter {
            controller: controller.clone(),
            instance,
        };
        Self {
            recorder: Recorder::new(client, reporter),
            controller,
        }
    }

    /// Like [`new`](Self::new), with the instance from the `POD_NAME` environment variable
    /// (set by the chart through the downward API).
    pub fn from_env(client: kube::Client, controller: impl Into<String>) -> Self {
        let instance = std::env::var("POD_NAME")
            .ok()
            .filter(|name| !name.trim().is_empty());
        Self::new(client, controller, instance)
    }

    /// The reporting controller's name.
    pub fn controller(&self) -> &str {
        &self.controller
    }

    /// Publishes an Event about `obj`. Never fails: if the apiserver refuses it, a warning is
    /// logged. `reason` and `action` are short PascalCase words (cut to 128 bytes), `note` is
    /// for people (cut to 1024 bytes on a character boundary).
    pub async fn publish<K>(
        &self,
        obj: &K,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
    ) where
        K: Resource<DynamicType = ()>,
    {
        let mut regarding = obj.object_ref(&());
        // An empty namespace would make the Recorder post to `namespaces//events`, which the
        // apiserver rejects; `None` sends it to `default`.
        if regarding.namespace.as_deref().is_some_and(str::is_empty) {
            regarding.namespace = None;
        }

        let event = Event {
            type_,
            reason: truncate(reason, MAX_REASON_BYTES).to_owned(),
            action: truncate(action, MAX_REASON_BYTES).to_owned(),
            note: Some(truncate_owned(note, MAX_NOTE_BYTES)),
            secondary: None,
        };
        if let Err(error) = self.recorder.publish(&event, &regarding).await {
            tracing::warn!(
                controller = %self.controller,
                kind = regarding.kind.as_deref().unwrap_or_default(),
                name = regarding.name.as_deref().unwrap_or_default(),
                namespace = regarding.namespace.as_deref().unwrap_or_default(),
                reason,
                error = %crate::error_chain(&error),
                "could not publish event"
            );
        }
    }
}

/// The longest prefix of `text` of at most `max` bytes that ends on a character boundary.
pub fn truncate(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.get(..end).unwrap_or_default()
}

fn truncate_owned(mut text: String, max: usize) -> String {
    let keep = truncate(&text, max).len();
    text.truncate(keep);
    text
}

#[cfg(test)]
mod tests {
    use super::{truncate, truncate_owned};

    #[test]
    fn short_text_is_kept_whole() {
        assert_eq!(truncate("ready", 1024), "ready");
        assert_eq!(truncate("", 0), "");
    }

    #[test]
    fn long_text_is_cut_to_the_limit() {
        let text = "a".repeat(2000);
        assert_eq!(truncate(&text, 1024).len(), 1024);
        assert_eq!(truncate_owned(text, 1024).len(), 1024);
    }

    #[test]
    fn cuts_never_split_a_character() {
        // 'é' is two bytes: 1023 ASCII bytes then 'é' would straddle the 1024 limit.
        let text = format!("{}é tail", "a".repeat(1023));
        let cut = truncate(&text, 1024);
        assert_eq!(cut.len(), 1023);
        assert!(cut.chars().all(|c| c == 'a'));

        let emoji = "🦀".repeat(300); // four bytes each
        assert_eq!(truncate(&emoji, 1023).len(), 1020);
        assert_eq!(truncate_owned(emoji, 1024).len(), 1024);
    }
}
