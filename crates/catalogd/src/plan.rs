//! What one reconcile of a Catalog does, decided in one place by a pure function: fetch the
//! source or not, conditionally or in full, whether to announce a slow fetch, when to look
//! again, and whether to wait out a recent failure. The reconcile then only carries it out.
//!
//! Inputs are the Catalog (spec and status), what the store serves for it, and what catalogd
//! remembers of it ([`Memory`]: lost on restart, so the plan never needs it to be right, only
//! to save work).

use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use olm_api::catalog::{Catalog, ResolvedSource, Source, SourceType};
use olm_api::conditions::is_true;

use crate::poll::retry_after;
use crate::source::{Facts, Mode, custom, git, http, image};
use crate::status::{Served, UNPACKED};

/// What catalogd remembers of a Catalog between reconciles.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Memory {
    /// The uid of the Catalog this memory is about (a new object under an old name starts
    /// afresh).
    pub uid: String,
    /// The source spec of the served content, what was fetched for it, and its hash.
    pub unpacked: Option<Unpacked>,
    /// The failures of the current spec.
    pub failure: Option<Failure>,
    /// Bumped whenever an object the source reads (a ConfigMap, a Secret, a CA bundle)
    /// changes, so a failure caused by it is retried at once rather than after the backoff.
    pub inputs: u64,
}

/// Content that was unpacked (or confirmed unchanged) for a source spec.
#[derive(Debug, Clone, PartialEq)]
pub struct Unpacked {
    /// The spec it was unpacked for.
    pub source: Source,
    /// What was fetched.
    pub resolved: ResolvedSource,
    /// Its content hash.
    pub hash: String,
}

/// Consecutive failures of one source spec.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// How many in a row.
    pub count: u32,
    /// The spec that failed.
    pub source: Source,
    /// [`Memory::inputs`] when it last failed.
    pub inputs: u64,
    /// When to try again.
    pub retry_at: Instant,
}

impl Memory {
    /// Records a successful unpack (or an unchanged source) of `source`.
    pub fn succeeded(&mut self, source: &Source, resolved: ResolvedSource, hash: String) {
        self.unpacked = Some(Unpacked {
            source: source.clone(),
            resolved,
            hash,
        });
        self.failure = None;
    }

    /// Records a failure of `source` at `now`; returns how long to wait before the retry.
    pub fn failed(&mut self, source: &Source, now: Instant) -> Duration {
        let count = match &self.failure {
            Some(f) if f.source == *source => f.count.saturating_add(1),
            _ => 1,
        };
        let wait = retry_after(count);
        self.failure = Some(Failure {
            count,
            source: source.clone(),
            inputs: self.inputs,
            retry_at: now + wait,
        });
        wait
    }
}

/// The two clocks a plan reads: monotonic for retries, wall for poll times in the status.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    /// Monotonic now.
    pub instant: Instant,
    /// Wall-clock now.
    pub wall: Timestamp,
}

impl Clock {
    /// Now.
    pub fn now() -> Self {
        Self {
            instant: Instant::now(),
            wall: Timestamp::now(),
        }
    }
}

/// A fetch to do.
#[derive(Debug, Clone, PartialEq)]
pub struct Fetch {
    /// How.
    pub mode: Mode,
    /// Write `Unpacking` first: a new spec of a remote source, which may take a while.
    pub announce: bool,
    /// When to poll again after it succeeds.
    pub next_poll: Option<Duration>,
}

/// What a reconcile does.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// The served content is the current spec's and the status says so: nothing to do until
    /// `requeue` (the next poll), or until something changes.
    UpToDate {
        /// When to look again.
        requeue: Option<Duration>,
    },
    /// The current spec failed recently and nothing it reads has changed since: retry after
    /// `wait`.
    Backoff {
        /// How long.
        wait: Duration,
    },
    /// Fetch the source.
    Fetch(Box<Fetch>),
}

impl Plan {
    fn fetch(fetch: Fetch) -> Plan {
        Plan::Fetch(Box::new(fetch))
    }
}

/// Decides what to do for `catalog`, given the content the store serves for it (already
/// checked to be this object's), what catalogd remembers of it, and the content URL its status
/// should show.
pub fn plan(
    catalog: &Catalog,
    served: Option<&Served>,
    memory: &Memory,
    content_url: &str,
    now: Clock,
) -> Plan {
    let spec = &catalog.spec.source;
    let generation = catalog.metadata.generation;
    let status = catalog.status.clone().unwrap_or_default();
    let served_hash = served.map(|s| s.hash.as_str());
    let status_names_served =
        served_hash.is_some() && status.content_hash.as_deref() == served_hash;

    // Which spec produced the served content, and what was fetched for it: catalogd's memory
    // when it has one for this content; after a restart, the status, when it names the served
    // content and was written for the current generation.
    let remembered = memory
        .unpacked
        .as_ref()
        .filter(|u| Some(u.hash.as_str()) == served_hash);
    let (current, previous) = match remembered {
        Some(u) => (u.source == *spec, Some(u.resolved.clone())),
        None if status_names_served => {
            let resolved = status
                .resolved_source
                .clone()
                .filter(|r| r.type_ == Some(spec.type_));
            let current = status.observed_generation == generation
                && is_true(&status.conditions, UNPACKED)
                && resolved.is_some();
            (current, resolved)
        }
        None => (false, None),
    };
    // The status must name the served content, for this generation, at today's URL (the
    // external address may have changed since it was written).
    let status_stale = served.is_some()
        && (!status_names_served
            || status.observed_generation != generation
            || status.content_url.as_deref() != Some(content_url)
            || status.urls.as_ref().map(|u| u.base.as_str())
                != Some(crate::status::base_url(content_url))
            || !is_true(&status.conditions, UNPACKED));

    if let Some(f) = &memory.failure
        && f.source == *spec
        && f.inputs == memory.inputs
        && f.retry_at > now.instant
    {
        return Plan::Backoff {
            wait: f.retry_at - now.instant,
        };
    }

    let previous_ref = previous.as_ref();
    // Each remote source says what the plan needs to know of its spec.
    let facts = match spec.type_ {
        // Reading ConfigMaps is cheap and their versions say whether anything changed.
        SourceType::ConfigMaps => {
            return Plan::fetch(Fetch {
                mode: previous.map_or(Mode::Full, Mode::Conditional),
                announce: false,
                next_poll: None,
            });
        }
        SourceType::Http => http::facts(&spec.http.clone().unwrap_or_default(), previous_ref),
        SourceType::Image => {
            image::facts::facts(&spec.image.clone().unwrap_or_default(), previous_ref)
        }
        SourceType::Git => {
            git::facts::facts(&spec.git.clone().unwrap_or_default(), previous_ref, current)
        }
        SourceType::Custom => {
            custom::facts::facts(&spec.custom.clone().unwrap_or_default(), previous_ref)
        }
    };
    remote(
        facts,
        previous.clone(),
        current,
        status_stale,
        status.observed_generation != generation,
        now,
    )
}

/// The plan for a remote source, given what was fetched for the served content, whether the
/// served content is the current spec's, whether the status must be rewritten, and whether
/// the generation is new.
fn remote(
    source: Facts<'_>,
    previous: Option<ResolvedSource>,
    current: bool,
    status_stale: bool,
    new_generation: bool,
    now: Clock,
) -> Plan {
    // Pinned content that is served cannot change: never fetch it again.
    if source.pinned_and_served {
        return match previous {
            Some(previous) if !current || status_stale => Plan::fetch(Fetch {
                mode: Mode::Confirm(previous),
                announce: false,
                next_poll: None,
            }),
            _ => Plan::UpToDate { requeue: None },
        };
    }
    if current && !status_stale {
        let Some(interval) = source.interval else {
            return Plan::UpToDate { requeue: None };
        };
        let elapsed = source
            .last_poll
            .map(|t| now.wall.duration_since(t.0).unsigned_abs());
        return match (elapsed, previous) {
            (Some(e), _) if e < interval => Plan::UpToDate {
                requeue: Some(interval - e),
            },
            (_, Some(previous)) => Plan::fetch(Fetch {
                mode: Mode::Conditional(previous),
                announce: false,
                next_poll: Some(interval),
            }),
            (_, None) => Plan::fetch(Fetch {
                mode: Mode::Full,
                announce: false,
                next_poll: Some(interval),
            }),
        };
    }
    // A new spec, or content whose status must be rewritten.
    let mode = match previous {
        Some(previous) if source.conditional => Mode::Conditional(previous),
        _ => Mode::Full,
    };
    Plan::fetch(Fetch {
        mode,
        announce: new_generation,
        next_poll: source.interval,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use olm_api::catalog::{
        CatalogSpec, CatalogStatus, ConfigMapRef, ConfigMapSource, HttpSource, ResolvedHttpSource,
    };
    use olm_api::conditions::condition;

    const URL: &str = "http://catalogd/catalogs/c/all.json";
    const HASH: &str = "aaaa";

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).unwrap()
    }

    fn clock(secs: i64) -> Clock {
        Clock {
            instant: Instant::now(),
            wall: at(secs),
        }
    }

    fn http_source(pin: Option<&str>, poll: Option<&str>) -> Source {
        Source {
            type_: SourceType::Http,
            image: None,
            config_maps: None,
            http: Some(HttpSource {
                url: "https://example.com/c.json".into(),
                sha256: pin.map(Into::into),
                poll_interval: poll.map(Into::into),
                ..Default::default()
            }),
            git: None,
            custom: None,
        }
    }

    fn configmap_source() -> Source {
        Source {
            type_: SourceType::ConfigMaps,
            image: None,
            config_maps: Some(vec![ConfigMapSource {
                config_map: ConfigMapRef {
                    name: "cm".into(),
                    namespace: None,
                },
                path: None,
            }]),
            http: None,
            git: None,
            custom: None,
        }
    }

    fn resolved_http(sha: &str, polled: i64) -> ResolvedSource {
        ResolvedSource {
            type_: Some(SourceType::Http),
            http: Some(ResolvedHttpSource {
                url: "https://example.com/c.json".into(),
                sha256: sha.into(),
                etag: Some("\"e\"".into()),
                last_modified: None,
                last_poll_attempt: Some(Time(at(polled))),
            }),
            ..Default::default()
        }
    }

    /// A catalog at `generation` whose status (written for `status_generation`) says `hash` is
    /// served at URL, unpacked from `resolved`.
    fn catalog(
        source: Source,
        generation: i64,
        status_generation: i64,
        resolved: Option<ResolvedSource>,
    ) -> Catalog {
        let mut c = Catalog::new(
            "c",
            CatalogSpec {
                source,
                priority: 0,
            },
        );
        c.metadata.generation = Some(generation);
        c.status = Some(CatalogStatus {
            content_hash: Some(HASH.into()),
            content_url: Some(URL.into()),
            urls: Some(olm_api::catalog::CatalogUrls {
                base: crate::status::base_url(URL).into(),
            }),
            observed_generation: Some(status_generation),
            resolved_source: resolved,
            conditions: vec![condition(
                UNPACKED,
                true,
                "UnpackSuccessful",
                "ok",
                Some(status_generation),
                Time(at(0)),
            )],
            ..Default::default()
        });
        c
    }

    fn served(hash: &str) -> Served {
        Served {
            hash: hash.into(),
            size: 10,
            since: Time(at(0)),
        }
    }

    fn fetch(mode: Mode, announce: bool, next_poll: Option<u64>) -> Plan {
        Plan::fetch(Fetch {
            mode,
            announce,
            next_poll: next_poll.map(Duration::from_secs),
        })
    }

    #[test]
    fn a_new_catalog_is_fetched_in_full_and_announced() {
        let mut c = catalog(http_source(None, Some("10m")), 1, 0, None);
        c.status = None;
        assert_eq!(
            plan(&c, None, &Memory::default(), URL, clock(100)),
            fetch(Mode::Full, true, Some(600))
        );
    }

    #[test]
    fn served_content_of_the_current_spec_waits_for_the_next_poll() {
        let c = catalog(
            http_source(None, Some("10m")),
            1,
            1,
            Some(resolved_http("s", 100)),
        );
        assert_eq!(
            plan(&c, Some(&served(HASH)), &Memory::default(), URL, clock(160)),
            Plan::UpToDate {
                requeue: Some(Duration::from_secs(540))
            }
        );
    }

    #[test]
    fn a_due_poll_is_conditional_on_what_was_fetched() {
        let resolved = resolved_http("s", 100);
        let c = catalog(http_source(None, Some("10m")), 1, 1, Some(resolved.clone()));
        assert_eq!(
            plan(&c, Some(&served(HASH)), &Memory::default(), URL, clock(700)),
            fetch(Mode::Conditional(resolved), false, Some(600))
        );
    }

    #[test]
    fn without_a_poll_interval_served_content_is_left_alone() {
        let c = catalog(http_source(None, None), 1, 1, Some(resolved_http("s", 100)));
        assert_eq!(
            plan(
                &c,
                Some(&served(HASH)),
                &Memory::default(),
                URL,
                clock(99_999)
            ),
            Plan::UpToDate { requeue: None }
        );
    }

    #[test]
    fn a_changed_spec_is_fetched_conditionally_and_announced() {
        // Generation 2 (a new poll interval) against a status of generation 1.
        let resolved = resolved_http("s", 100);
        let c = catalog(http_source(None, Some("1h")), 2, 1, Some(resolved.clone()));
        assert_eq!(
            plan(&c, Some(&served(HASH)), &Memory::default(), URL, clock(110)),
            fetch(Mode::Conditional(resolved), true, Some(3600))
        );
    }

    #[test]
    fn a_new_pin_is_checked_against_a_full_download() {
        let c = catalog(
            http_source(Some(&"b".repeat(64)), None),
            2,
            1,
            Some(resolved_http("s", 100)),
        );
        assert_eq!(
            plan(&c, Some(&served(HASH)), &Memory::default(), URL, clock(110)),
            fetch(Mode::Full, true, None)
        );
    }

    #[test]
    fn a_pin_of_the_served_content_is_confirmed_without_asking_the_source() {
        let pin = "c".repeat(64);
        let resolved = resolved_http(&pin, 100);
        // A new generation pinning what is served: confirm, no download.
        let c = catalog(http_source(Some(&pin), None), 2, 1, Some(resolved.clone()));
        assert_eq!(
            plan(&c, Some(&served(HASH)), &Memory::default(), URL, clock(110)),
            fetch(Mode::Confirm(resolved.clone()), false, None)
        );
        // Once the status says so: nothing, ever (pinned content cannot change).
        let c = catalog(http_source(Some(&pin), Some("5m")), 1, 1, Some(resolved));
        assert_eq!(
            plan(
                &c,
                Some(&served(HASH)),
                &Memory::default(),
                URL,
                clock(99_999)
            ),
            Plan::UpToDate { requeue: None }
        );
    }

    #[test]
    fn content_served_without_a_status_naming_it_is_refetched_conditionally() {
        // A lost status write: the store serves new content the status does not name, and
        // catalogd remembers having unpacked it for this spec.
        let source = http_source(None, Some("10m"));
        let resolved = resolved_http("t", 200);
        let c = catalog(source.clone(), 1, 1, Some(resolved_http("s", 100)));
        let mut memory = Memory::default();
        memory.succeeded(&source, resolved.clone(), "bbbb".into());
        assert_eq!(
            plan(&c, Some(&served("bbbb")), &memory, URL, clock(210)),
            fetch(Mode::Conditional(resolved), false, Some(600))
        );
    }

    #[test]
    fn a_new_external_address_rewrites_the_status() {
        let resolved = resolved_http("s", 100);
        let c = catalog(http_source(None, Some("10m")), 1, 1, Some(resolved.clone()));
        assert_eq!(
            plan(
                &c,
                Some(&served(HASH)),
                &Memory::default(),
                "https://new/catalogs/c/all.json",
                clock(110)
            ),
            fetch(Mode::Conditional(resolved), false, Some(600))
        );
    }

    #[test]
    fn a_status_without_upstreams_urls_is_rewritten() {
        // Written by a catalogd from before `status.urls`: the next reconcile adds it.
        let resolved = resolved_http("s", 100);
        let mut c = catalog(http_source(None, Some("10m")), 1, 1, Some(resolved.clone()));
        if let Some(status) = c.status.as_mut() {
            status.urls = None;
        }
        assert_eq!(
            plan(&c, Some(&served(HASH)), &Memory::default(), URL, clock(110)),
            fetch(Mode::Conditional(resolved), false, Some(600))
        );
    }

    #[test]
    fn nothing_served_means_a_full_fetch_whatever_the_status_says() {
        let c = catalog(
            http_source(None, Some("10m")),
            1,
            1,
            Some(resolved_http("s", 100)),
        );
        assert_eq!(
            plan(&c, None, &Memory::default(), URL, clock(110)),
            fetch(Mode::Full, false, Some(600))
        );
    }

    #[test]
    fn configmaps_are_always_read_and_compared_by_version() {
        let resolved = ResolvedSource {
            type_: Some(SourceType::ConfigMaps),
            config_maps: Some(vec![]),
            ..Default::default()
        };
        let c = catalog(configmap_source(), 1, 1, Some(resolved.clone()));
        assert_eq!(
            plan(&c, Some(&served(HASH)), &Memory::default(), URL, clock(1)),
            fetch(Mode::Conditional(resolved), false, None)
        );
        assert_eq!(
            plan(&c, None, &Memory::default(), URL, clock(1)),
            fetch(Mode::Full, false, None)
        );
    }

    #[test]
    fn a_recent_failure_of_the_same_spec_waits_until_its_retry() {
        let source = http_source(None, None);
        let c = catalog(source.clone(), 1, 1, None);
        let now = clock(1);
        let mut memory = Memory::default();
        assert_eq!(memory.failed(&source, now.instant), Duration::from_secs(5));
        assert_eq!(memory.failed(&source, now.instant), Duration::from_secs(10));
        match plan(&c, None, &memory, URL, now) {
            Plan::Backoff { wait } => {
                assert!(wait <= Duration::from_secs(10) && wait > Duration::from_secs(9))
            }
            other => panic!("{other:?}"),
        }
        // Past the retry time: fetch.
        let later = Clock {
            instant: now.instant + Duration::from_secs(11),
            wall: at(12),
        };
        assert!(matches!(
            plan(&c, None, &memory, URL, later),
            Plan::Fetch(_)
        ));
    }

    #[test]
    fn a_changed_input_or_spec_cuts_the_backoff_short() {
        let source = http_source(None, None);
        let now = clock(1);
        let mut memory = Memory::default();
        memory.failed(&source, now.instant);
        // A Secret or ConfigMap the source reads changed.
        memory.inputs += 1;
        let c = catalog(source.clone(), 1, 1, None);
        assert!(matches!(plan(&c, None, &memory, URL, now), Plan::Fetch(_)));
        // The spec changed.
        memory.inputs -= 1;
        let c = catalog(http_source(None, Some("5m")), 2, 1, None);
        assert!(matches!(plan(&c, None, &memory, URL, now), Plan::Fetch(_)));
        // A failure of another spec restarts the count.
        memory.failed(&http_source(None, Some("5m")), now.instant);
        assert_eq!(memory.failure.as_ref().unwrap().count, 1);
    }

    #[test]
    fn success_forgets_failures() {
        let source = configmap_source();
        let mut memory = Memory::default();
        memory.failed(&source, Instant::now());
        memory.succeeded(&source, ResolvedSource::default(), HASH.into());
        assert_eq!(memory.failure, None);
        assert_eq!(memory.unpacked.unwrap().hash, HASH);
    }

    #[test]
    fn a_generator_runs_for_a_new_spec_and_again_at_each_poll() {
        let source = Source {
            type_: SourceType::Custom,
            custom: Some(olm_api::catalog::CustomSource {
                image: "gen:1".into(),
                poll_interval: Some("10m".into()),
                ..Default::default()
            }),
            image: None,
            config_maps: None,
            http: None,
            git: None,
        };
        let mut c = catalog(source.clone(), 1, 0, None);
        c.status = None;
        assert_eq!(
            plan(&c, None, &Memory::default(), URL, clock(1)),
            fetch(Mode::Full, true, Some(600))
        );
        let resolved = ResolvedSource {
            type_: Some(SourceType::Custom),
            custom: Some(olm_api::catalog::ResolvedCustomSource {
                image_digest: None,
                sha256: "s".into(),
                last_poll_attempt: Some(Time(at(100))),
            }),
            ..Default::default()
        };
        polled_every_10_minutes(source, resolved);
    }

    fn image_source(reference: &str, poll: Option<&str>) -> Source {
        Source {
            type_: SourceType::Image,
            image: Some(olm_api::catalog::ImageSource {
                r#ref: reference.into(),
                poll_interval: poll.map(Into::into),
                ..Default::default()
            }),
            config_maps: None,
            http: None,
            git: None,
            custom: None,
        }
    }

    fn resolved_image(reference: &str, digest: &str, polled: i64) -> ResolvedSource {
        ResolvedSource {
            type_: Some(SourceType::Image),
            image: Some(olm_api::catalog::ResolvedImageSource {
                r#ref: reference.into(),
                resolved_ref: Some(format!("r.io/index@{digest}")),
                last_poll_attempt: Some(Time(at(polled))),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_tag_is_checked_for_a_new_digest_at_each_poll() {
        let resolved = resolved_image("r.io/index:1", "sha256:a", 100);
        polled_every_10_minutes(image_source("r.io/index:1", Some("10m")), resolved);
    }

    /// `source` (polled every 10 minutes), served from `resolved` (polled at second 100):
    /// nothing to do until its next poll, then asked whether anything changed.
    fn polled_every_10_minutes(source: Source, resolved: ResolvedSource) {
        let c = catalog(source, 1, 1, Some(resolved.clone()));
        let memory = Memory::default();
        assert_eq!(
            plan(&c, Some(&served(HASH)), &memory, URL, clock(400)),
            Plan::UpToDate {
                requeue: Some(Duration::from_secs(300))
            }
        );
        assert_eq!(
            plan(&c, Some(&served(HASH)), &memory, URL, clock(700)),
            fetch(Mode::Conditional(resolved), false, Some(600))
        );
    }

    #[test]
    fn a_digest_reference_is_never_polled_once_served() {
        let digest = format!("sha256:{}", "a".repeat(64));
        let reference = format!("r.io/index@{digest}");
        let resolved = resolved_image(&reference, &digest, 100);
        let c = catalog(image_source(&reference, None), 1, 1, Some(resolved));
        assert_eq!(
            plan(
                &c,
                Some(&served(HASH)),
                &Memory::default(),
                URL,
                clock(10_000_000)
            ),
            Plan::UpToDate { requeue: None }
        );
        // Another digest is other content: fetched (the source sees the digests differ and
        // pulls without asking the registry for a digest).
        let previous = resolved_image(&reference, &digest, 100);
        let other = catalog(
            image_source(&format!("r.io/index@sha256:{}", "b".repeat(64)), None),
            2,
            1,
            Some(previous.clone()),
        );
        assert_eq!(
            plan(
                &other,
                Some(&served(HASH)),
                &Memory::default(),
                URL,
                clock(200)
            ),
            fetch(Mode::Conditional(previous), true, None)
        );
    }

    #[test]
    fn a_new_reference_asks_the_registry_whether_its_digest_is_served() {
        let resolved = resolved_image("r.io/index:1", "sha256:a", 100);
        let c = catalog(
            image_source("r.io/index:2", Some("1h")),
            2,
            1,
            Some(resolved.clone()),
        );
        assert_eq!(
            plan(&c, Some(&served(HASH)), &Memory::default(), URL, clock(200)),
            fetch(Mode::Conditional(resolved), true, Some(3600))
        );
    }

    fn git_source(
        branch: Option<&str>,
        commit: Option<&str>,
        dir: &str,
        poll: Option<&str>,
    ) -> Source {
        Source {
            type_: SourceType::Git,
            git: Some(olm_api::catalog::GitSource {
                repository: "https://git.example/c.git".into(),
                r#ref: olm_api::catalog::GitRef {
                    branch: branch.map(Into::into),
                    tag: None,
                    commit: commit.map(Into::into),
                },
                directory: Some(dir.into()),
                poll_interval: poll.map(Into::into),
                ..Default::default()
            }),
            image: None,
            config_maps: None,
            http: None,
            custom: None,
        }
    }

    fn resolved_git(commit: &str, polled: i64) -> ResolvedSource {
        ResolvedSource {
            type_: Some(SourceType::Git),
            git: Some(olm_api::catalog::ResolvedGitSource {
                repository: "https://git.example/c.git".into(),
                commit: commit.into(),
                last_poll_attempt: Some(Time(at(polled))),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_branch_is_asked_for_its_commit_at_each_poll() {
        let source = git_source(Some("main"), None, "cat", Some("10m"));
        polled_every_10_minutes(source, resolved_git("c1", 100));
    }

    #[test]
    fn a_repository_with_a_password_is_recorded_without_it_and_still_polled() {
        // Recorded without its user info (spec::redact), and compared that way.
        let mut source = git_source(Some("main"), None, "cat", Some("10m"));
        if let Some(g) = source.git.as_mut() {
            g.repository = "https://me:s3cret@git.example/c.git".into();
        }
        let mut resolved = resolved_git("c1", 100);
        if let Some(g) = resolved.git.as_mut() {
            g.repository = "https://git.example/c.git".into();
        }
        polled_every_10_minutes(source, resolved);
    }

    #[test]
    fn a_new_directory_or_ref_of_the_same_repository_is_fetched_in_full() {
        let resolved = resolved_git("c1", 100);
        for source in [
            git_source(Some("main"), None, "other", Some("10m")),
            git_source(Some("release"), None, "cat", Some("10m")),
        ] {
            let c = catalog(source, 2, 1, Some(resolved.clone()));
            assert_eq!(
                plan(&c, Some(&served(HASH)), &Memory::default(), URL, clock(200)),
                fetch(Mode::Full, true, Some(600))
            );
        }
    }

    #[test]
    fn a_pinned_commit_is_never_polled_once_served() {
        let id = "a".repeat(40);
        let resolved = resolved_git(&id, 100);
        let c = catalog(
            git_source(None, Some(&id), "cat", Some("1m")),
            1,
            1,
            Some(resolved.clone()),
        );
        assert_eq!(
            plan(
                &c,
                Some(&served(HASH)),
                &Memory::default(),
                URL,
                clock(10_000_000)
            ),
            Plan::UpToDate { requeue: None }
        );
        // Under a new generation (a label changed nothing), confirmed without a request.
        let c = catalog(
            git_source(None, Some(&id), "cat", None),
            2,
            1,
            Some(resolved.clone()),
        );
        let mut memory = Memory::default();
        memory.succeeded(&c.spec.source, resolved.clone(), HASH.into());
        assert_eq!(
            plan(&c, Some(&served(HASH)), &memory, URL, clock(200)),
            fetch(Mode::Confirm(resolved), false, None)
        );
    }
}
