//! The Catalog status catalogd writes: phase, the `Unpacked` and `Serving` conditions, and
//! what is served. Pure functions, so every transition is unit-tested.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use olm_api::catalog::{Catalog, CatalogStatus, CatalogUrls, Phase, ResolvedSource};
use olm_api::conditions::{condition, find_condition, set_condition};

/// The `Unpacked` condition type: whether the current spec's content is unpacked.
pub const UNPACKED: &str = "Unpacked";
/// The `Serving` condition type: whether content is served, and which.
pub const SERVING: &str = "Serving";

/// `Unpacked` reasons besides the sources' own (see `source::reasons`).
pub mod reasons {
    /// The content is fetched and waits for other catalogs to finish unpacking (the unpack
    /// budget).
    pub const UNPACK_PENDING: &str = "UnpackPending";
    /// A fetch is under way.
    pub const UNPACKING: &str = "Unpacking";
    /// The current spec's content is unpacked and served.
    pub const UNPACK_SUCCESSFUL: &str = "UnpackSuccessful";
    /// The content is not a valid File-Based Catalog.
    pub const INVALID_CONTENT: &str = "InvalidContent";
    /// The content could not be written to the store.
    pub const FAILED_TO_STORE: &str = "FailedToStore";
    /// `Serving`: content is served.
    pub const AVAILABLE: &str = "Available";
    /// `Serving`: nothing is served yet.
    pub const UNAVAILABLE: &str = "Unavailable";
}

/// What is in the store for a catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    /// sha256 of the content.
    pub hash: String,
    /// Size in bytes.
    pub size: u64,
    /// When it was stored.
    pub since: Time,
}

/// The result of one reconcile's unpack step.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// A fetch is starting (written before slow sources so people see progress).
    Unpacking,
    /// The source's work goes on elsewhere (a generator Pod runs).
    Running {
        /// Where it is.
        message: String,
    },
    /// Fetched content waits for its share of the unpack budget.
    Pending {
        /// What it waits for.
        message: String,
    },
    /// New or re-validated content is stored and served.
    Unpacked {
        /// What was fetched.
        resolved: ResolvedSource,
        /// A sentence on what the content holds.
        summary: String,
    },
    /// The source is unchanged; the stored content stays.
    Unchanged {
        /// What was fetched (with a new poll time).
        resolved: ResolvedSource,
    },
    /// The current spec could not be unpacked.
    Failed {
        /// The `Unpacked` reason.
        reason: &'static str,
        /// What is wrong and what to do.
        message: String,
    },
}

/// The status after `outcome`, given what is served now. Conditions keep their transition time
/// when their status does not change; other managers' conditions are left as they are.
pub fn next_status(
    catalog: &Catalog,
    outcome: &Outcome,
    served: Option<&Served>,
    content_url: &str,
    now: &Time,
) -> CatalogStatus {
    let old = catalog.status.clone().unwrap_or_default();
    let generation = catalog.metadata.generation;
    let mut status = old.clone();
    let cond = |type_: &str, ok: bool, reason: &str, message: String| {
        condition(type_, ok, reason, message, generation, now.clone())
    };
    let unpacked = match outcome {
        Outcome::Unpacking => cond(
            UNPACKED,
            false,
            reasons::UNPACKING,
            "fetching the catalog content".into(),
        ),
        Outcome::Pending { message } => {
            cond(UNPACKED, false, reasons::UNPACK_PENDING, message.clone())
        }
        Outcome::Running { message } => cond(UNPACKED, false, reasons::UNPACKING, message.clone()),
        Outcome::Unpacked { summary, .. } => {
            cond(UNPACKED, true, reasons::UNPACK_SUCCESSFUL, summary.clone())
        }
        Outcome::Unchanged { .. } => match find_condition(&old.conditions, UNPACKED) {
            // An unchanged source keeps the message of the unpack that produced the content.
            Some(c) if c.status == "True" => Condition {
                observed_generation: generation,
                ..c.clone()
            },
            _ => cond(
                UNPACKED,
                true,
                reasons::UNPACK_SUCCESSFUL,
                "the source is unchanged; its content is served".into(),
            ),
        },
        Outcome::Failed { reason, message } => cond(UNPACKED, false, reason, message.clone()),
    };
    set_condition(&mut status.conditions, unpacked);
    let serving = match (served, outcome) {
        (Some(s), Outcome::Failed { .. }) => cond(
            SERVING,
            true,
            reasons::AVAILABLE,
            format!(
                "serving the last good content {} ({} bytes, unpacked {}); the current spec failed to unpack, see the Unpacked condition",
                s.hash, s.size, s.since.0
            ),
        ),
        (Some(s), _) => cond(
            SERVING,
            true,
            reasons::AVAILABLE,
            format!(
                "serving content {} ({} bytes) at {content_url} since {}",
                s.hash, s.size, s.since.0
            ),
        ),
        (None, _) => cond(
            SERVING,
            false,
            reasons::UNAVAILABLE,
            "no content has been unpacked yet".into(),
        ),
    };
    set_condition(&mut status.conditions, serving);
    status.phase = Some(match outcome {
        Outcome::Unpacking | Outcome::Running { .. } | Outcome::Pending { .. } => Phase::Unpacking,
        Outcome::Unpacked { .. } | Outcome::Unchanged { .. } => Phase::Unpacked,
        Outcome::Failed { .. } => Phase::Failing,
    });
    match outcome {
        Outcome::Unpacked { resolved, .. } | Outcome::Unchanged { resolved } => {
            status.resolved_source = Some(resolved.clone());
        }
        // A failure keeps the resolved source of the content still served.
        Outcome::Unpacking
        | Outcome::Running { .. }
        | Outcome::Pending { .. }
        | Outcome::Failed { .. } => {}
    }
    match served {
        Some(s) => {
            status.content_hash = Some(s.hash.clone());
            status.short_content_hash = Some(s.hash.chars().take(12).collect());
            status.content_url = Some(content_url.to_owned());
            status.urls = Some(CatalogUrls {
                base: base_url(content_url).to_owned(),
            });
            status.last_unpacked = Some(s.since.clone());
        }
        None => {
            status.content_hash = None;
            status.short_content_hash = None;
            status.content_url = None;
            status.urls = None;
            status.last_unpacked = None;
            status.resolved_source = match outcome {
                Outcome::Unpacked { resolved, .. } | Outcome::Unchanged { resolved } => {
                    Some(resolved.clone())
                }
                _ => None,
            };
        }
    }
    if !matches!(
        outcome,
        Outcome::Unpacking | Outcome::Running { .. } | Outcome::Pending { .. }
    ) {
        status.observed_generation = generation;
    }
    status
}

/// An event for the change from `old` to `new`, if it is worth one: (warning?, reason, note).
pub fn transition_event(
    old: Option<&CatalogStatus>,
    new: &CatalogStatus,
) -> Option<(bool, String, String)> {
    let before = old.and_then(|s| find_condition(&s.conditions, UNPACKED));
    let after = find_condition(&new.conditions, UNPACKED)?;
    let same = before.is_some_and(|b| {
        b.status == after.status && b.reason == after.reason && b.message == after.message
    });
    let hash_changed = old.and_then(|s| s.content_hash.as_ref()) != new.content_hash.as_ref();
    match after.status.as_str() {
        "True" if !same || hash_changed => {
            Some((false, after.reason.clone(), after.message.clone()))
        }
        // Progress (Unpacking, UnpackPending) is no event; failures are.
        "False"
            if !same
                && after.reason != reasons::UNPACKING
                && after.reason != reasons::UNPACK_PENDING =>
        {
            Some((true, after.reason.clone(), after.message.clone()))
        }
        _ => None,
    }
}

/// Upstream's `status.urls.base` of a `contentURL`: the content URL is always
/// `<base>/all.json` (`Context::content_url`), and `<base>/api/v1/all` serves the same content.
pub fn base_url(content_url: &str) -> &str {
    content_url.strip_suffix("/all.json").unwrap_or(content_url)
}

#[cfg(test)]
mod tests {
    use super::*;
    use olm_api::catalog::{CatalogSpec, Source, SourceType};

    fn at(secs: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(secs).unwrap())
    }

    fn catalog(generation: i64, status: Option<CatalogStatus>) -> Catalog {
        let mut c = Catalog::new(
            "c",
            CatalogSpec {
                source: Source {
                    type_: SourceType::ConfigMaps,
                    image: None,
                    config_maps: Some(vec![]),
                    http: None,
                    git: None,
                    custom: None,
                },
                priority: 0,
            },
        );
        c.metadata.generation = Some(generation);
        c.status = status;
        c
    }

    fn served(hash: &str) -> Served {
        Served {
            hash: hash.into(),
            size: 10,
            since: at(100),
        }
    }

    /// The status after a first successful unpack of content `hash` at `secs`.
    fn good(hash: &str, secs: i64) -> CatalogStatus {
        next_status(
            &catalog(1, None),
            &unpacked(),
            Some(&served(hash)),
            "u",
            &at(secs),
        )
    }

    fn unpacked() -> Outcome {
        Outcome::Unpacked {
            resolved: ResolvedSource {
                type_: Some(SourceType::ConfigMaps),
                ..Default::default()
            },
            summary: "unpacked 1 package".into(),
        }
    }

    #[test]
    fn a_successful_unpack_serves_the_content() {
        let s = next_status(
            &catalog(1, None),
            &unpacked(),
            Some(&served("abcdef0123456789")),
            "http://x/catalogs/c/all.json",
            &at(200),
        );
        assert_eq!(s.phase, Some(Phase::Unpacked));
        assert_eq!(s.content_hash.as_deref(), Some("abcdef0123456789"));
        assert_eq!(s.short_content_hash.as_deref(), Some("abcdef012345"));
        // Upstream's base URL, beside our contentURL.
        assert_eq!(
            s.urls.as_ref().map(|u| u.base.as_str()),
            Some("http://x/catalogs/c")
        );
        assert_eq!(s.observed_generation, Some(1));
        let u = find_condition(&s.conditions, UNPACKED).unwrap();
        assert_eq!(
            (u.status.as_str(), u.reason.as_str()),
            ("True", "UnpackSuccessful")
        );
        let sv = find_condition(&s.conditions, SERVING).unwrap();
        assert_eq!(sv.status, "True");
        assert!(sv.message.contains("abcdef0123456789"));
        assert_eq!(transition_event(None, &s).map(|e| e.0), Some(false));
    }

    #[test]
    fn a_failure_keeps_serving_the_last_good_content_and_says_so() {
        let good = good("aaa", 200);
        let failed = Outcome::Failed {
            reason: "InvalidContent",
            message: "c.yaml:3: bad".into(),
        };
        let s = next_status(
            &catalog(2, Some(good.clone())),
            &failed,
            Some(&served("aaa")),
            "u",
            &at(300),
        );
        assert_eq!(s.phase, Some(Phase::Failing));
        assert_eq!(s.content_hash.as_deref(), Some("aaa"));
        assert_eq!(s.resolved_source, good.resolved_source);
        assert_eq!(s.observed_generation, Some(2));
        let u = find_condition(&s.conditions, UNPACKED).unwrap();
        assert_eq!(
            (u.status.as_str(), u.reason.as_str(), u.message.as_str()),
            ("False", "InvalidContent", "c.yaml:3: bad")
        );
        let sv = find_condition(&s.conditions, SERVING).unwrap();
        assert_eq!(sv.status, "True");
        assert!(
            sv.message.contains("last good content aaa"),
            "{}",
            sv.message
        );
        // Serving stayed True, so its transition time did not move.
        assert_eq!(sv.last_transition_time, at(200));
        assert_eq!(
            transition_event(Some(&good), &s),
            Some((true, "InvalidContent".into(), "c.yaml:3: bad".into()))
        );
        // The same failure again is no new event.
        let again = next_status(
            &catalog(2, Some(s.clone())),
            &failed,
            Some(&served("aaa")),
            "u",
            &at(400),
        );
        assert_eq!(transition_event(Some(&s), &again), None);
    }

    #[test]
    fn without_content_a_failure_is_not_serving() {
        let failed = Outcome::Failed {
            reason: "SourceNotFound",
            message: "ConfigMap x not found".into(),
        };
        let s = next_status(&catalog(1, None), &failed, None, "u", &at(1));
        let sv = find_condition(&s.conditions, SERVING).unwrap();
        assert_eq!(
            (sv.status.as_str(), sv.reason.as_str()),
            ("False", "Unavailable")
        );
        assert_eq!(s.content_hash, None);
        assert_eq!(s.content_url, None);
        assert_eq!(s.urls, None);
    }

    #[test]
    fn waiting_for_the_budget_is_progress_not_a_failure() {
        let good = good("h", 10);
        let pending = Outcome::Pending {
            message: "fetched 10 bytes; waiting".into(),
        };
        let s = next_status(
            &catalog(2, Some(good.clone())),
            &pending,
            Some(&served("h")),
            "u",
            &at(20),
        );
        let u = find_condition(&s.conditions, UNPACKED).unwrap();
        assert_eq!(
            (u.status.as_str(), u.reason.as_str()),
            ("False", reasons::UNPACK_PENDING)
        );
        assert_eq!(s.phase, Some(Phase::Unpacking));
        // Not yet an answer for generation 2, and the served content is still described.
        assert_eq!(s.observed_generation, Some(1));
        assert_eq!(s.content_hash.as_deref(), Some("h"));
        assert_eq!(transition_event(Some(&good), &s), None);
    }

    #[test]
    fn other_managers_conditions_are_kept() {
        let mut st = CatalogStatus::default();
        st.conditions.push(condition(
            "ResolvedImage",
            true,
            "AllTemplatesResolved",
            "img",
            Some(1),
            at(5),
        ));
        let s = next_status(
            &catalog(1, Some(st)),
            &unpacked(),
            Some(&served("h")),
            "u",
            &at(10),
        );
        assert!(find_condition(&s.conditions, "ResolvedImage").is_some());
    }

    #[test]
    fn an_unchanged_source_keeps_the_unpack_message_and_makes_no_event() {
        let good = good("h", 10);
        let resolved = good.resolved_source.clone().unwrap();
        let s = next_status(
            &catalog(1, Some(good.clone())),
            &Outcome::Unchanged { resolved },
            Some(&served("h")),
            "u",
            &at(20),
        );
        assert_eq!(
            find_condition(&s.conditions, UNPACKED),
            find_condition(&good.conditions, UNPACKED)
        );
        assert_eq!(transition_event(Some(&good), &s), None);
    }
}
