//! The memo of joint answers, per group of Operators.
//!
//! An answer is keyed by everything it depends on: the index, each member's spec and what each
//! member's BundleDeployment deploys (the base of its upgrade edges). Writing the answer moves
//! BundleDeployments, which changes that key: re-solving a large group once per write would
//! make one catalog change cost a solve per Operator. So the latest answer of a group (same
//! index, same specs) is reused while every BundleDeployment that moved has moved to exactly
//! what the answer chose: the answer is still a valid choice then. It is confirmed by one fresh
//! solve a short grace later (the group is re-queued for it), which is also when a further step
//! along the upgrade edges, from the newly deployed bundle, is taken.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use olm_resolver::resolve::Outcome;

/// What a member's BundleDeployment deploys, as far as the group's answer depends on it: the
/// base of its upgrade edges.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Base {
    /// The Operator has no BundleDeployment.
    Nothing,
    /// Its BundleDeployment, by its bundle label (ours) and its image.
    Deploys {
        /// The `olm.operatorframework.io/bundle-name` label, when set.
        bundle: Option<String>,
        /// The bundle image, when set.
        image: Option<String>,
    },
}

/// A group's answer, with the bases it was solved from.
#[derive(Debug)]
pub struct GroupAnswers {
    /// Each member's outcome, by Operator name, in name order.
    pub outcomes: Vec<(String, Outcome)>,
    /// Each member's base when solved, in the same order.
    pub bases: Vec<Base>,
    /// Operator name → position.
    by_name: HashMap<String, usize>,
}

impl GroupAnswers {
    /// The answer with these outcomes, solved from these bases.
    pub fn new(outcomes: Vec<(String, Outcome)>, bases: Vec<Base>) -> Self {
        let by_name = outcomes
            .iter()
            .enumerate()
            .map(|(i, (n, _))| (n.clone(), i))
            .collect();
        Self {
            outcomes,
            bases,
            by_name,
        }
    }

    /// The outcome of the Operator `name`.
    pub fn pick(&self, name: &str) -> Option<Outcome> {
        self.by_name
            .get(name)
            .and_then(|&i| self.outcomes.get(i))
            .map(|(_, o)| o.clone())
    }
}

/// A group's latest answer.
#[derive(Debug, Clone)]
pub struct Latest {
    /// The answer.
    pub answers: Arc<GroupAnswers>,
    /// Since when it has been reused for bases it was not solved from.
    pub stale_since: Option<Instant>,
}

/// What to do with a group's latest answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// Reuse it; when `confirm_later`, mark it stale now and re-queue the group after the grace.
    Reuse {
        /// Whether this reuse starts the grace.
        confirm_later: bool,
    },
    /// Solve afresh.
    Solve,
}

/// Whether `bases` (now) differ from the answer's only where a BundleDeployment moved to the
/// bundle the answer chose for it.
pub fn compatible(answers: &GroupAnswers, bases: &[Base]) -> bool {
    bases.len() == answers.bases.len()
        && answers.outcomes.iter().zip(&answers.bases).zip(bases).all(
            |(((_, outcome), then), now)| {
                then == now
                    || matches!(
                        (outcome, now),
                        (Ok(r), Base::Deploys { image: Some(image), .. }) if *image == r.image
                    )
            },
        )
}

/// Decides whether the latest answer serves for `bases` at `now`.
pub fn use_latest(latest: &Latest, bases: &[Base], now: Instant, grace: Duration) -> Use {
    if !compatible(&latest.answers, bases) {
        return Use::Solve;
    }
    match latest.stale_since {
        None => Use::Reuse {
            confirm_later: latest.answers.bases != bases,
        },
        Some(since) if now.saturating_duration_since(since) < grace => Use::Reuse {
            confirm_later: false,
        },
        Some(_) => Use::Solve,
    }
}

/// GroupAnswers by full key, and each group's latest by its spec key; bounded by the number of
/// outcomes held.
#[derive(Debug, Default)]
pub struct Memo {
    by_key: HashMap<u64, Arc<GroupAnswers>>,
    latest: HashMap<u64, Latest>,
    outcomes: usize,
}

/// Outcomes held at most (each a resolved bundle or an explanation, a few hundred bytes);
/// past this the memo starts over.
const MAX_OUTCOMES: usize = 100_000;

impl Memo {
    /// The answer solved for exactly `key`.
    pub fn get(&self, key: u64) -> Option<Arc<GroupAnswers>> {
        self.by_key.get(&key).cloned()
    }

    /// The latest answer of the group with `spec_key`.
    pub fn latest(&self, spec_key: u64) -> Option<Latest> {
        self.latest.get(&spec_key).cloned()
    }

    /// Marks the latest answer of `spec_key` reused for other bases since `now`.
    pub fn mark_stale(&mut self, spec_key: u64, now: Instant) {
        if let Some(l) = self.latest.get_mut(&spec_key) {
            l.stale_since.get_or_insert(now);
        }
    }

    /// Records a fresh answer.
    pub fn insert(&mut self, key: u64, spec_key: u64, answers: Arc<GroupAnswers>) {
        if self.outcomes + answers.outcomes.len() > MAX_OUTCOMES {
            self.clear();
        }
        self.outcomes += answers.outcomes.len();
        self.by_key.insert(key, answers.clone());
        self.latest.insert(
            spec_key,
            Latest {
                answers,
                stale_since: None,
            },
        );
    }

    /// Forgets everything (a new index).
    pub fn clear(&mut self) {
        self.by_key.clear();
        self.latest.clear();
        self.outcomes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use olm_resolver::resolve::{ResolveError, Resolved};

    fn resolved(image: &str) -> Outcome {
        Ok(Resolved {
            request: 0,
            entry: 0,
            package: "p".into(),
            name: "b".into(),
            version: "1.0.0".into(),
            image: image.into(),
            catalog: "c".into(),
            deprecated: false,
            mediatype: None,
        })
    }

    fn base(image: &str) -> Base {
        Base::Deploys {
            bundle: Some("b".into()),
            image: Some(image.into()),
        }
    }

    fn latest(stale: Option<Instant>) -> Latest {
        Latest {
            answers: Arc::new(GroupAnswers::new(
                vec![
                    ("a".into(), resolved("v2")),
                    (
                        "b".into(),
                        Err(ResolveError::Unsatisfiable(vec!["no".into()])),
                    ),
                ],
                vec![base("v1"), base("v1")],
            )),
            stale_since: stale,
        }
    }

    #[test]
    fn an_answer_serves_while_bundle_deployments_only_moved_to_it() {
        let now = Instant::now();
        let grace = Duration::from_secs(2);
        let l = latest(None);
        // Unchanged: reuse, nothing to confirm.
        assert_eq!(
            use_latest(&l, &[base("v1"), base("v1")], now, grace),
            Use::Reuse {
                confirm_later: false
            }
        );
        // a moved to its answer: reuse, and confirm later.
        assert_eq!(
            use_latest(&l, &[base("v2"), base("v1")], now, grace),
            Use::Reuse {
                confirm_later: true
            }
        );
        // a moved elsewhere, or b (which failed) moved at all: solve.
        assert_eq!(
            use_latest(&l, &[base("v3"), base("v1")], now, grace),
            Use::Solve
        );
        assert_eq!(
            use_latest(&l, &[base("v1"), base("v2")], now, grace),
            Use::Solve
        );
        assert_eq!(
            use_latest(&l, &[Base::Nothing, base("v1")], now, grace),
            Use::Solve
        );
        // Within the grace: reuse without starting it again; after it: solve.
        let stale = latest(Some(now));
        assert_eq!(
            use_latest(
                &stale,
                &[base("v2"), base("v1")],
                now + Duration::from_secs(1),
                grace
            ),
            Use::Reuse {
                confirm_later: false
            }
        );
        assert_eq!(
            use_latest(&stale, &[base("v2"), base("v1")], now + grace, grace),
            Use::Solve
        );
    }

    #[test]
    fn the_memo_is_bounded_by_outcomes_held() {
        let mut m = Memo::default();
        let answers = latest(None).answers;
        for k in 0..(MAX_OUTCOMES as u64) {
            m.insert(k, k, answers.clone());
        }
        assert!(m.outcomes <= MAX_OUTCOMES);
        assert!(m.get(0).is_none(), "started over");
        m.mark_stale(MAX_OUTCOMES as u64 - 1, Instant::now());
        assert!(
            m.latest(MAX_OUTCOMES as u64 - 1)
                .unwrap()
                .stale_since
                .is_some()
        );
    }
}
