//! Kubernetes Events for the objects a controller manages, published best-effort: an Event
//! that cannot be written is logged and dropped, never turned into a reconcile failure.
//!
//! One [`EventPublisher`] per controller, shared by every reconcile, so repeats are aggregated
//! into one Event with a growing `series.count` (which needs RBAC `create` *and* `patch` on
//! `events.k8s.io/events`), as kube's `Recorder` does. Unlike kube's `Recorder`, whose Event
//! names are `<object name>.<timestamp>` and so are refused for objects with names near the
//! 253-character limit, the name's object part is shortened to fit.
//!
//! Events about cluster-scoped objects (all olm-rs APIs are cluster-scoped) are written to
//! the `default` namespace: the apiserver accepts only `default` or `kube-system` there for
//! `events.k8s.io/v1`, and `kubectl describe` looks them up by the regarding object, not by
//! namespace.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event as K8sEvent, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Resource, runtime::events::EventType};
use tokio::sync::Mutex;

/// The apiserver's limit on `note`, in bytes.
pub const MAX_NOTE_BYTES: usize = 1024;
/// The apiserver's limit on `reason` and `action`.
pub const MAX_REASON_BYTES: usize = 128;
/// The longest object name (a DNS-1123 subdomain), and so the longest Event name.
pub const MAX_NAME_BYTES: usize = 253;
/// How long a published Event is kept for aggregating repeats, as kube and client-go do.
const CACHE_TTL: SignedDuration = SignedDuration::from_mins(6);

/// What makes two Events repeats of one another: the same object, type, reason and action.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    api_version: Option<String>,
    kind: Option<String>,
    namespace: Option<String>,
    name: Option<String>,
    uid: Option<String>,
    type_: &'static str,
    reason: String,
    action: String,
    /// An Event's note is immutable (events.k8s.io/v1): only identical notes make a series,
    /// as in client-go's aggregation.
    note: String,
}

/// Publishes Events as one reporting controller (e.g. `catalogd`), optionally one instance of
/// it (its pod). Cloning is cheap and clones share the aggregation cache.
#[derive(Clone)]
pub struct EventPublisher {
    client: kube::Client,
    controller: String,
    instance: String,
    cache: Arc<Mutex<HashMap<Key, K8sEvent>>>,
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
        Self {
            client,
            instance: instance.unwrap_or_else(|| controller.clone()),
            controller,
            cache: Arc::default(),
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
        // An empty namespace would post to `namespaces//events`, which the apiserver rejects;
        // `None` sends it to `default`.
        if regarding.namespace.as_deref().is_some_and(str::is_empty) {
            regarding.namespace = None;
        }
        let reason = truncate(reason, MAX_REASON_BYTES);
        let action = truncate(action, MAX_REASON_BYTES);
        let note = truncate_owned(note, MAX_NOTE_BYTES);
        if let Err(error) = self.send(&regarding, type_, reason, action, note).await {
            tracing::warn!(
                controller = %self.controller,
                kind = regarding.kind.as_deref().unwrap_or_default(),
                name = regarding.name.as_deref().unwrap_or_default(),
                namespace = regarding.namespace.as_deref().unwrap_or_default(),
                reason,
                error = %crate::error_chain::error_chain(&error),
                "could not publish event"
            );
        }
    }

    async fn send(
        &self,
        regarding: &ObjectReference,
        type_: EventType,
        reason: &str,
        action: &str,
        note: String,
    ) -> Result<(), kube::Error> {
        let now = Timestamp::now();
        let type_ = match type_ {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        };
        let key = Key {
            api_version: regarding.api_version.clone(),
            kind: regarding.kind.clone(),
            namespace: regarding.namespace.clone(),
            name: regarding.name.clone(),
            uid: regarding.uid.clone(),
            type_,
            reason: reason.to_owned(),
            action: action.to_owned(),
            note: note.clone(),
        };
        // Held across the request, so two repeats published at once make one series.
        let mut cache = self.cache.lock().await;
        cache.retain(|_, e| last_seen(e).is_some_and(|t| t + CACHE_TTL > now));
        let namespace = regarding
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let events: Api<K8sEvent> = Api::namespaced(self.client.clone(), &namespace);
        let event = match cache.get(&key) {
            Some(previous) => {
                let count = previous.series.as_ref().map_or(2, |s| s.count + 1);
                let mut event = previous.clone();
                event.series = Some(EventSeries {
                    count,
                    last_observed_time: MicroTime(now),
                });
                events
                    .patch(
                        event.metadata.name.as_deref().unwrap_or_default(),
                        &PatchParams::default(),
                        &Patch::Merge(&event),
                    )
                    .await?;
                event
            }
            None => {
                let event = K8sEvent {
                    action: Some(action.to_owned()),
                    reason: Some(reason.to_owned()),
                    event_time: Some(MicroTime(now)),
                    regarding: Some(regarding.clone()),
                    note: Some(note),
                    metadata: ObjectMeta {
                        namespace: Some(namespace.clone()),
                        name: Some(event_name(
                            regarding.name.as_deref().unwrap_or(&self.controller),
                            now,
                        )),
                        ..Default::default()
                    },
                    reporting_controller: Some(self.controller.clone()),
                    reporting_instance: Some(self.instance.clone()),
                    type_: Some(type_.to_owned()),
                    ..Default::default()
                };
                events.create(&PostParams::default(), &event).await?;
                event
            }
        };
        cache.insert(key, event);
        Ok(())
    }
}

fn last_seen(event: &K8sEvent) -> Option<Timestamp> {
    event
        .series
        .as_ref()
        .map(|s| s.last_observed_time.0)
        .or(event.event_time.as_ref().map(|t| t.0))
}

/// The name of a new Event about the object `object` at `now`: `<object>.<nanoseconds, hex>`,
/// as kube and client-go name them, with the object part shortened (never splitting a
/// character, never ending on `.` or `-`) so the whole is a valid name of at most 253 bytes.
pub fn event_name(object: &str, now: Timestamp) -> String {
    let suffix = format!(".{:x}", now.as_nanosecond());
    let room = MAX_NAME_BYTES.saturating_sub(suffix.len());
    let prefix = truncate(object, room).trim_end_matches(['.', '-']);
    let prefix = if prefix.is_empty() { "event" } else { prefix };
    format!("{prefix}{suffix}")
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
    use super::{MAX_NAME_BYTES, event_name, truncate, truncate_owned};
    use k8s_openapi::jiff::Timestamp;

    #[test]
    fn event_names_fit_whatever_the_object_name() {
        let now = Timestamp::from_second(1_800_000_000).unwrap();
        assert_eq!(
            event_name("small", now),
            format!("small.{:x}", now.as_nanosecond())
        );
        let long = format!("{}-x", "a".repeat(250));
        let name = event_name(&long, now);
        assert!(name.len() <= MAX_NAME_BYTES, "{} bytes", name.len());
        assert!(name.starts_with(&"a".repeat(200)));
        // A cut that would end on a dash or dot drops it: labels must end alphanumeric.
        let dashed = format!("{}-{}", "b".repeat(235), "c".repeat(17));
        let name = event_name(&dashed, now);
        assert!(!name.contains("-."), "{name}");
        assert!(name.len() <= MAX_NAME_BYTES);
    }

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
