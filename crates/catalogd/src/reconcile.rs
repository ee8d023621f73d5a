//! One reconcile of a Catalog: decide whether to fetch, fetch, parse and validate, store, and
//! write the status (with an event on each transition). Source failures are not reconcile
//! errors: they become the `Unpacked` condition, and the last good content stays served.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::runtime::reflector::Store as Reflector;
use kube::{Client, ResourceExt};
use olm_api::catalog::{Catalog, CatalogStatus, Phase, SourceType};
use olm_resolver::fbc::{Fbc, Problem, load_files, validate::validate};
use olm_runtime::events::EventPublisher;

use crate::metrics::CatalogdMetrics;
use crate::source::{Fetched, Sources};
use crate::status::{Outcome, Served, next_status, reasons, transition_event};
use crate::store::{Store, Stored};

/// Field manager of catalogd's status writes.
pub const FIELD_MANAGER: &str = "catalogd";

/// How many `file:line: problem` lines an InvalidContent message lists before counting the rest.
const MAX_LISTED_PROBLEMS: usize = 5;

/// Everything a reconcile needs.
pub struct Context {
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
    /// Recent failures per catalog, for retry backoff.
    pub failures: Mutex<HashMap<String, Failure>>,
    /// The source spec last unpacked (or found unchanged) per catalog, with its content hash.
    pub unpacked: Mutex<HashMap<String, (serde_json::Value, String)>>,
    /// The controller's cache of Catalogs (for the phase gauge).
    pub catalogs: Option<Reflector<Catalog>>,
}

/// A catalog's recent failures: retry after `retry_at`, unless its spec changes first.
#[derive(Debug, Clone)]
pub struct Failure {
    count: u32,
    generation: Option<i64>,
    retry_at: std::time::Instant,
}

/// Errors that make a reconcile retry with backoff (API and store failures).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A Kubernetes API call failed.
    #[error("{0}: {1}")]
    Kube(&'static str, #[source] kube::Error),
    /// The store failed.
    #[error("content store: {0}")]
    Store(String),
}

impl Error {
    /// A bounded label for metrics and events.
    pub fn category(&self) -> &'static str {
        match self {
            Error::Kube(..) => "KubeApiError",
            Error::Store(_) => "StoreError",
        }
    }
}

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

fn to_time(t: SystemTime) -> Time {
    Time(
        k8s_openapi::jiff::Timestamp::try_from(t)
            .unwrap_or_else(|_| k8s_openapi::jiff::Timestamp::now()),
    )
}

impl Context {
    fn content_url(&self, name: &str) -> String {
        format!(
            "{}/catalogs/{name}/all.json",
            self.external_address.trim_end_matches('/')
        )
    }

    async fn served(&self, name: &str) -> Result<Option<Stored>, Error> {
        let store = self.store.clone();
        let name = name.to_owned();
        tokio::task::spawn_blocking(move || store.current(&name))
            .await
            .map_err(|e| Error::Store(e.to_string()))?
            .map_err(|e| Error::Store(e.to_string()))
    }

    /// Records a failure; the retry waits 5 s, doubling with each consecutive failure up to
    /// 5 min.
    fn backoff(&self, name: &str, generation: Option<i64>) -> Duration {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let count = failures.get(name).map_or(0, |f| f.count).saturating_add(1);
        let wait = Duration::from_secs(5u64.saturating_mul(1 << (count - 1).min(6)).min(300));
        failures.insert(
            name.to_owned(),
            Failure {
                count,
                generation,
                retry_at: std::time::Instant::now() + wait,
            },
        );
        wait
    }

    /// How long to wait before fetching again after a failure. Every status write is a watch
    /// event and so a reconcile; without this, a failing remote source would be fetched in a
    /// tight loop. ConfigMaps are exempt: reading them is cheap, and a change to one must be
    /// picked up at once.
    fn retry_wait(
        &self,
        name: &str,
        generation: Option<i64>,
        type_: SourceType,
    ) -> Option<Duration> {
        if type_ == SourceType::ConfigMaps {
            return None;
        }
        let failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let f = failures.get(name)?;
        let now = std::time::Instant::now();
        (f.generation == generation && f.retry_at > now).then(|| f.retry_at - now)
    }

    fn reset_backoff(&self, name: &str) {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
    }

    /// The source spec last unpacked for `name`, and the hash it produced.
    fn remembered(&self, name: &str) -> Option<(serde_json::Value, String)> {
        self.unpacked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }

    /// Recounts catalogs per phase from the controller's cache; `just_written` overrides the
    /// cache for a catalog whose new status has not come back through the watch yet.
    pub fn update_phase_gauge(&self, just_written: Option<(&str, Option<Phase>)>) {
        let Some(reader) = &self.catalogs else { return };
        let mut counts: HashMap<&str, i64> = ["Pending", "Unpacking", "Unpacked", "Failing"]
            .into_iter()
            .map(|p| (p, 0))
            .collect();
        for c in reader.state() {
            let cached = c.status.as_ref().and_then(|s| s.phase);
            let phase = match just_written
                .filter(|(n, _)| *n == c.name_any())
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
            self.metrics.catalogs.with_label_values(&[phase]).set(n);
        }
    }
}

/// Parses and validates fetched files; the error lists the first problems as `file:line: problem`
/// and counts the rest.
pub fn parse_and_validate(files: Vec<(String, Vec<u8>)>) -> Result<Fbc, String> {
    let describe = |problems: Vec<Problem>| {
        let mut lines: Vec<String> = problems
            .iter()
            .take(MAX_LISTED_PROBLEMS)
            .map(|p| p.to_string())
            .collect();
        if problems.len() > MAX_LISTED_PROBLEMS {
            lines.push(format!(
                "and {} more problems",
                problems.len() - MAX_LISTED_PROBLEMS
            ));
        }
        format!(
            "the content is not a valid File-Based Catalog: {}",
            lines.join("; ")
        )
    };
    if files.is_empty() {
        return Err("the source holds no files".into());
    }
    let fbc = load_files(files).map_err(describe)?;
    let problems = validate(&fbc);
    if !problems.is_empty() {
        return Err(describe(problems));
    }
    if fbc.packages.is_empty() {
        return Err("the content holds no olm.package".into());
    }
    Ok(fbc)
}

fn summary(fbc: &Fbc, hash: &str) -> String {
    format!(
        "unpacked {} packages, {} channels and {} bundles; content {}",
        fbc.packages.len(),
        fbc.channels.len(),
        fbc.bundles.len(),
        &hash[..hash.len().min(12)]
    )
}

/// Whether the source must be fetched now, and otherwise when to look again. `unpacked` is the
/// source spec catalogd last unpacked for this catalog (its own memory, which a stale cache
/// cannot contradict); a change of anything else in the spec (the priority, say) does not
/// refetch.
fn due(
    catalog: &Catalog,
    have_content: bool,
    unpacked: Option<&serde_json::Value>,
) -> (bool, Option<Duration>) {
    let status = catalog.status.clone().unwrap_or_default();
    let spec = &catalog.spec.source;
    let unpacked_ok = olm_api::conditions::is_true(&status.conditions, crate::status::UNPACKED)
        || unpacked.is_some();
    let changed = match unpacked {
        Some(last) => serde_json::to_value(spec).ok().as_ref() != Some(last),
        None => {
            status.observed_generation != catalog.metadata.generation
                || status.resolved_source.as_ref().and_then(|r| r.type_) != Some(spec.type_)
        }
    };
    match spec.type_ {
        // Reading ConfigMaps is cheap, and unchanged versions skip parsing.
        SourceType::ConfigMaps => (true, None),
        SourceType::Http => {
            let interval = spec
                .http
                .as_ref()
                .and_then(|h| h.poll_interval.as_deref())
                .and_then(poll_interval);
            if changed || !have_content || !unpacked_ok {
                return (true, interval);
            }
            let Some(interval) = interval else {
                return (false, None);
            };
            let last = status
                .resolved_source
                .and_then(|r| r.http)
                .and_then(|h| h.last_poll_attempt)
                .map(|t| t.0);
            let elapsed = last.map(|t| {
                k8s_openapi::jiff::Timestamp::now()
                    .duration_since(t)
                    .unsigned_abs()
            });
            match elapsed {
                Some(e) if e < interval => (false, Some(interval - e)),
                _ => (true, Some(interval)),
            }
        }
        _ => (true, None),
    }
}

/// Go duration syntax (`90s`, `10m`, `1h30m`, `1.5h`); `None` when it does not parse (the API
/// server's pattern makes that rare).
pub fn parse_duration(text: &str) -> Option<Duration> {
    let mut total = 0f64;
    let mut rest = text;
    while !rest.is_empty() {
        let num_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let value: f64 = rest[..num_len].parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += value * scale;
        rest = &rest[unit_len..];
    }
    // Beyond what a Duration holds is "forever": saturate rather than panic.
    (total > 0.0).then(|| Duration::try_from_secs_f64(total).unwrap_or(Duration::MAX))
}

/// The shortest and longest poll intervals catalogd honours: a shorter one would hammer the
/// source, a longer one is no poll at all (and huge values must not overflow timers).
pub const MIN_POLL_INTERVAL: Duration = Duration::from_secs(5);
/// See [`MIN_POLL_INTERVAL`].
pub const MAX_POLL_INTERVAL: Duration = Duration::from_secs(7 * 24 * 3600);

/// A catalog's `pollInterval`, parsed and clamped to [`MIN_POLL_INTERVAL`, `MAX_POLL_INTERVAL`].
pub fn poll_interval(text: &str) -> Option<Duration> {
    parse_duration(text).map(|d| d.clamp(MIN_POLL_INTERVAL, MAX_POLL_INTERVAL))
}

/// Up to +5% of `d`, varied per catalog and time, so many catalogs don't poll in lockstep.
fn jitter(d: Duration, name: &str) -> Duration {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    name.hash(&mut h);
    SystemTime::now().hash(&mut h);
    let fraction = (h.finish() % 1000) as f64 / 1000.0 * 0.05;
    d.saturating_add(d.mul_f64(fraction))
}

/// Reconciles a Catalog that is not being deleted.
pub async fn apply(catalog: Arc<Catalog>, ctx: &Context) -> Result<Action, Error> {
    let name = catalog.name_any();
    let type_ = catalog.spec.source.type_;
    let served_before = ctx.served(&name).await?;
    let generation = catalog.metadata.generation;
    // Content counts as ours only if it is what the status says is served; after a lost status
    // write they differ, and the source is then fetched in full rather than trusted.
    let status_hash = catalog.status.as_ref().and_then(|s| s.content_hash.clone());
    let remembered = ctx.remembered(&name);
    let have_content = served_before.as_ref().is_some_and(|s| {
        Some(&s.hash) == status_hash.as_ref()
            || remembered.as_ref().is_some_and(|(_, h)| *h == s.hash)
    });
    let unpacked = remembered
        .as_ref()
        .filter(|(_, h)| served_before.as_ref().is_some_and(|s| s.hash == *h))
        .map(|(spec, _)| spec);
    let (fetch, next_poll) = due(&catalog, have_content, unpacked);
    if !fetch {
        if let Some(s) = &served_before {
            ctx.metrics
                .content_bytes
                .with_label_values(&[&name])
                .set(i64::try_from(s.size).unwrap_or(i64::MAX));
        }
        ctx.update_phase_gauge(None);
        return Ok(
            next_poll.map_or_else(Action::await_change, |d| Action::requeue(jitter(d, &name)))
        );
    }
    if let Some(wait) = ctx.retry_wait(&name, generation, type_) {
        return Ok(Action::requeue(wait));
    }
    let old_status = catalog.status.clone();
    // What the API server holds, as far as this reconcile knows.
    let mut known = old_status.clone();
    // A slow source shows progress when it fetches a new spec (not on every poll).
    let new_spec = unpacked.is_none()
        && old_status
            .as_ref()
            .is_none_or(|s| s.observed_generation != generation);
    if type_ == SourceType::Http && new_spec {
        let served = served_before.as_ref().map(served_of);
        let status = next_status(
            &catalog,
            &Outcome::Unpacking,
            served.as_ref(),
            &ctx.content_url(&name),
            &now(),
        );
        write_status(ctx, &name, known.as_ref(), &status).await?;
        known = Some(status);
    }

    let started = std::time::Instant::now();
    let previous = old_status
        .as_ref()
        .and_then(|s| s.resolved_source.as_ref())
        .filter(|r| r.type_ == Some(type_));
    let fetched = match ctx.sources.get(type_) {
        Ok(source) => source.fetch(&catalog, previous, have_content).await,
        Err(e) => Err(e),
    };
    let outcome = match fetched {
        Ok(Fetched::Unchanged { resolved }) => Outcome::Unchanged { resolved },
        Ok(Fetched::Content { files, resolved }) => {
            let parsed = tokio::task::spawn_blocking(move || parse_and_validate(files))
                .await
                .unwrap_or_else(|e| Err(format!("parsing panicked: {e}")));
            match parsed {
                Err(message) => Outcome::Failed {
                    reason: reasons::INVALID_CONTENT,
                    message,
                },
                Ok(fbc) => {
                    let store = ctx.store.clone();
                    let key = name.clone();
                    let put = tokio::task::spawn_blocking(move || {
                        store.put(&key, &fbc).map(|s| (s, fbc))
                    })
                    .await
                    .map_err(|e| e.to_string())
                    .and_then(|r| r.map_err(|e| e.to_string()));
                    match put {
                        Ok((stored, fbc)) => Outcome::Unpacked {
                            resolved,
                            summary: summary(&fbc, &stored.hash),
                        },
                        Err(e) => Outcome::Failed {
                            reason: reasons::FAILED_TO_STORE,
                            message: format!("failed to store the content: {e}"),
                        },
                    }
                }
            }
        }
        Err(e) => Outcome::Failed {
            reason: e.reason,
            message: e.message,
        },
    };
    let result = if matches!(outcome, Outcome::Failed { .. }) {
        "failure"
    } else {
        "success"
    };
    ctx.metrics
        .unpack_duration
        .with_label_values(&[type_.as_str(), result])
        .observe(started.elapsed().as_secs_f64());

    let served = ctx.served(&name).await?;
    match &served {
        Some(s) => ctx
            .metrics
            .content_bytes
            .with_label_values(&[&name])
            .set(i64::try_from(s.size).unwrap_or(i64::MAX)),
        None => {
            let _ = ctx.metrics.content_bytes.remove_label_values(&[&name]);
        }
    }
    let served = served.as_ref().map(served_of);
    let status = next_status(
        &catalog,
        &outcome,
        served.as_ref(),
        &ctx.content_url(&name),
        &now(),
    );
    write_status(ctx, &name, known.as_ref(), &status).await?;
    if let Some((warning, reason, note)) = transition_event(old_status.as_ref(), &status) {
        let type_ = if warning {
            EventType::Warning
        } else {
            EventType::Normal
        };
        ctx.events
            .publish(catalog.as_ref(), type_, &reason, "Unpack", note)
            .await;
    }
    ctx.update_phase_gauge(Some((&name, status.phase)));
    if let (Outcome::Unpacked { .. } | Outcome::Unchanged { .. }, Some(hash)) =
        (&outcome, status.content_hash.clone())
        && let Ok(spec) = serde_json::to_value(&catalog.spec.source)
    {
        ctx.unpacked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.clone(), (spec, hash));
    }
    Ok(match outcome {
        Outcome::Failed { .. } => {
            let backoff = ctx.backoff(&name, generation);
            tracing::info!(catalog = %name, retry_in = ?backoff, "unpack failed; will retry");
            Action::requeue(backoff)
        }
        _ => {
            ctx.reset_backoff(&name);
            next_poll.map_or_else(Action::await_change, |d| Action::requeue(jitter(d, &name)))
        }
    })
}

fn served_of(s: &Stored) -> Served {
    Served {
        hash: s.hash.clone(),
        size: s.size,
        since: to_time(s.last_modified),
    }
}

/// Writes `status` unless it equals `known` (what the API server holds, as far as we know): each
/// write is a watch event and so another reconcile.
async fn write_status(
    ctx: &Context,
    name: &str,
    known: Option<&CatalogStatus>,
    status: &CatalogStatus,
) -> Result<(), Error> {
    if known.is_some_and(|old| owned_status(old) == owned_status(status)) {
        return Ok(());
    }
    let api: Api<Catalog> = Api::all(ctx.client.clone());
    let patch = serde_json::json!({
        "apiVersion": "catalogd.operatorframework.io/v1alpha1",
        "kind": "Catalog",
        "status": owned_status(status),
    });
    api.patch_status(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await
    .map_err(|e| Error::Kube("writing the Catalog status", e))?;
    Ok(())
}

/// The part of the status catalogd owns: everything but other managers' conditions and the
/// switcher's `imageTemplate`, so server-side apply leaves those alone.
fn owned_status(status: &CatalogStatus) -> serde_json::Value {
    let mut owned = status.clone();
    owned
        .conditions
        .retain(|c| c.type_ == crate::status::UNPACKED || c.type_ == crate::status::SERVING);
    owned.image_template = None;
    serde_json::to_value(owned).unwrap_or_default()
}

/// Removes a deleted Catalog's content.
pub async fn cleanup(catalog: Arc<Catalog>, ctx: &Context) -> Result<Action, Error> {
    let name = catalog.name_any();
    let store = ctx.store.clone();
    let key = name.clone();
    tokio::task::spawn_blocking(move || store.delete(&key))
        .await
        .map_err(|e| Error::Store(e.to_string()))?
        .map_err(|e| Error::Store(e.to_string()))?;
    let _ = ctx.metrics.content_bytes.remove_label_values(&[&name]);
    ctx.reset_backoff(&name);
    ctx.unpacked
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&name);
    tracing::info!(catalog = %name, "deleted the catalog's content");
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse() {
        assert_eq!(parse_duration("90s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("1h30m"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_duration("1.5h"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_duration("often"), None);
        assert_eq!(parse_duration("10"), None);
        assert_eq!(parse_duration(""), None);
    }

    #[test]
    fn invalid_content_lists_the_first_problems_with_file_and_line() {
        let bad = b"---\nschema: olm.package\nname: foo\ndefaultChannel: stable\n".to_vec();
        let err = parse_and_validate(vec![("ns/cm/catalog.yaml".into(), bad)]).unwrap_err();
        assert!(
            err.contains("ns/cm/catalog.yaml:2: package \"foo\" must contain at least one channel"),
            "{err}"
        );
        let many: String = (0..8)
            .map(|i| format!("---\nschema: olm.package\nname: p{i}\n"))
            .collect();
        let err = parse_and_validate(vec![("f".into(), many.into_bytes())]).unwrap_err();
        assert!(err.ends_with("more problems"), "{err}");
        assert!(parse_and_validate(vec![]).is_err());
    }

    #[test]
    fn poll_intervals_are_clamped_and_huge_ones_do_not_panic() {
        assert_eq!(poll_interval("1ms"), Some(MIN_POLL_INTERVAL));
        assert_eq!(
            poll_interval("9999999999999999999h"),
            Some(MAX_POLL_INTERVAL)
        );
        assert_eq!(poll_interval("10m"), Some(Duration::from_secs(600)));
        assert_eq!(jitter(Duration::MAX, "x"), Duration::MAX);
    }

    #[test]
    fn jitter_adds_at_most_five_percent() {
        let d = Duration::from_secs(100);
        let j = jitter(d, "x");
        assert!(j >= d && j <= Duration::from_secs(105));
    }
}
