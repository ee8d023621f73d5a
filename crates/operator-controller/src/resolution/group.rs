//! One group's answers: from this snapshot's view of the group, from the memo (exact, or
//! reused for a grace after BundleDeployments moved), or from a fresh solve, whose changes
//! re-queue the group's other members. [`Groups`] keeps the views, the solve's time limit and
//! metrics, and the channel re-queues go to.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use futures::channel::mpsc::UnboundedSender;

use kube::ResourceExt;
use olm_api::operator::Operator;
use olm_resolver::resolve::{Outcome, Request, ResolveError, resolve_each_on};

use super::decide::{self, Step};
use super::prepare::Prepared;
use super::{Memo, keys, lock};
use crate::inputs::{Deployed, request_of};
use crate::memo::{Base, GroupAnswers};
use crate::metrics::OperatorMetrics;

/// How long a group's answer is reused for BundleDeployments that moved to it, before one
/// fresh solve confirms it (see [`crate::memo`]).
const GRACE: Duration = Duration::from_secs(2);

/// The answers of each group for one snapshot.
#[derive(Default)]
struct Views {
    snap_key: u64,
    by_group: HashMap<usize, View>,
}

struct View {
    answers: Arc<GroupAnswers>,
    /// Set when the answer is a reuse (see [`crate::memo`]): the view then serves only until
    /// the grace is over, when the group must be solved again.
    reused_since: Option<Instant>,
}

/// The groups' answers as they are found or solved.
pub(super) struct Groups {
    metrics: Option<OperatorMetrics>,
    /// Where to send the names of Operators whose answer may have changed because another
    /// member of their group changed (the controller re-queues them).
    requeue: OnceLock<UnboundedSender<String>>,
    /// How long one group's solve may take.
    pub(super) timeout: Duration,
    views: Mutex<Views>,
}

impl Groups {
    /// No views yet; solves limited to `timeout` each, timed into `metrics`.
    pub(super) fn new(metrics: Option<OperatorMetrics>, timeout: Duration) -> Groups {
        Groups {
            metrics,
            requeue: OnceLock::new(),
            timeout,
            views: Mutex::default(),
        }
    }

    /// Sends the names of Operators to re-queue to `tx` from now on.
    pub(super) fn set_requeue(&self, tx: UnboundedSender<String>) {
        let _ = self.requeue.set(tx);
    }

    /// Re-queues `names` after `delay` (from a task, so the reconcile does not wait).
    fn requeue_after(&self, delay: Duration, names: Vec<String>) {
        let (Some(tx), Ok(runtime)) = (self.requeue.get(), tokio::runtime::Handle::try_current())
        else {
            return;
        };
        let tx = tx.clone();
        runtime.spawn(async move {
            tokio::time::sleep(delay).await;
            for n in names {
                let _ = tx.unbounded_send(n);
            }
        });
    }

    fn requeue(&self, names: impl IntoIterator<Item = String>) {
        if let Some(tx) = self.requeue.get() {
            for n in names {
                let _ = tx.unbounded_send(n);
            }
        }
    }

    /// The outcome of Operator `i`: from the view of its group for this very snapshot (the
    /// many reconciles of one burst share it), else from [`Self::answers`] (`memo` holding
    /// the answers kept across snapshots).
    pub(super) fn outcome(&self, memo: &Mutex<Memo>, p: &Prepared, i: usize) -> Outcome {
        let name = p.operators[i].name_any();
        let group = p.group(i);
        if let Some(g) = group {
            let views = lock(&self.views);
            if views.snap_key == p.snap_key
                && let Some(v) = views.by_group.get(&g)
                && v.reused_since.is_none_or(|t| t.elapsed() < GRACE)
                && let Some(o) = v.answers.pick(&name)
            {
                return o;
            }
        }
        let (answers, reused_since) = self.answers(memo, p, i, &name);
        if let Some(g) = group {
            let mut views = lock(&self.views);
            if views.snap_key != p.snap_key {
                *views = Views {
                    snap_key: p.snap_key,
                    by_group: HashMap::new(),
                };
            }
            views.by_group.insert(
                g,
                View {
                    answers: answers.clone(),
                    reused_since,
                },
            );
        }
        answers.pick(&name).unwrap_or_else(|| {
            Err(ResolveError::Unsatisfiable(vec![format!(
                "Operator {name:?} was not part of its own resolution"
            )]))
        })
    }

    /// The answers of Operator `i`'s group: memoized, reused (with the time since when), or
    /// solved afresh.
    fn answers(
        &self,
        memo: &Mutex<Memo>,
        p: &Prepared,
        i: usize,
        name: &str,
    ) -> (Arc<GroupAnswers>, Option<Instant>) {
        p.index_bundle_deployments();
        let group = p.group(i);
        let mut members: Vec<usize> = (0..p.operators.len())
            .filter(|&k| k == i || (group.is_some() && p.group(k) == group))
            .collect();
        // Requests in name order: the memo key and the solve do not depend on cache order.
        members.sort_by(|&a, &b| {
            p.operators[a]
                .metadata
                .name
                .cmp(&p.operators[b].metadata.name)
        });
        // The memo keys, from what the answer depends on, without building requests.
        // The cluster's APIs are part of every answer: a change of them is a new spec key.
        let spec_key = keys::fingerprint(&(
            keys::spec_key(p.generation, members.iter().map(|&k| &**p.operators[k])),
            p.apis_key,
        ));
        let bases: Vec<Base> = members
            .iter()
            .map(|&k| {
                keys::base_of(
                    p.operators[k]
                        .metadata
                        .name
                        .as_deref()
                        .and_then(|n| p.bundle_deployment(n))
                        .map(|bd| &**bd),
                )
            })
            .collect();
        let key = keys::answer_key(spec_key, &bases);
        let (exact, latest) = {
            let memo = lock(memo);
            (memo.answers.get(key), memo.answers.latest(spec_key))
        };
        let now = Instant::now();
        match decide::step(exact, latest, &bases, now, GRACE) {
            Step::Memoized(answers) => return (answers, None),
            Step::Reuse {
                answers,
                since,
                confirm_later,
            } => {
                if confirm_later {
                    lock(memo).answers.mark_stale(spec_key, now);
                    // One reconcile after the grace re-solves the group; its fresh answer then
                    // re-queues the members it changes.
                    self.requeue_after(GRACE, vec![name.to_owned()]);
                }
                return (answers, Some(since));
            }
            Step::Solve => {}
        }
        let requests: Vec<Request> = members
            .iter()
            .map(|&k| request_of(p.operators[k]))
            .collect();
        let deployed: Vec<(&Request, Option<Deployed>)> = members
            .iter()
            .zip(&requests)
            .map(|(&k, r)| (r, p.deployed(&p.operators[k].name_any())))
            .collect();
        let installed = decide::installed(&p.index, &deployed);
        let started = Instant::now();
        let outcomes = resolve_each_on(
            &p.index,
            &requests,
            &installed,
            &p.snapshot.apis,
            Some(started + self.timeout),
        );
        let elapsed = started.elapsed();
        if let Some(m) = &self.metrics {
            m.resolution_duration.observe(elapsed.as_secs_f64());
        }
        tracing::debug!(operator = %name, operators = requests.len(), ?elapsed, "group resolved");
        let answers = Arc::new(GroupAnswers::new(
            members
                .iter()
                .zip(outcomes)
                .map(|(&k, o)| (p.operators[k].name_any(), o))
                .collect(),
            bases,
        ));
        // A fresh answer may change the other members' answers too.
        let mates: Vec<(&Operator, &(String, Outcome))> = members
            .iter()
            .map(|&k| &**p.operators[k])
            .zip(&answers.outcomes)
            .collect();
        self.requeue(decide::to_requeue(name, &mates));
        {
            let mut memo = lock(memo);
            if memo.generation == p.generation {
                memo.answers.insert(key, spec_key, answers.clone());
            }
        }
        (answers, None)
    }
}
