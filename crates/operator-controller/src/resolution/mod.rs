//! Resolution as the controller and `explain` both run it: the Catalogs' content (through the
//! content client), one index per set of contents, and joint answers for each group of
//! Operators that can affect each other, memoized by everything the answer depends on. A
//! catalog change re-indexes once; an Operator's change or a new BundleDeployment re-solves
//! only its group.
//!
//! [`fetch`] reads the content (I/O), [`keys`] names what each cache depends on, and
//! [`decide`] holds the decisions, pure; the [`Resolver`] keeps the caches and carries out
//! what the decisions ask (solves, re-queues).

pub mod decide;
pub mod fetch;
pub mod keys;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use kube::ResourceExt;
use olm_api::bundle_deployment::BundleDeployment;
use olm_api::catalog::Catalog;
use olm_api::operator::Operator;
use olm_resolver::resolve::{
    CatalogMeta, Index, Notice, Outcome, Request, ResolveError, Resolved, groups,
    resolve_each_within,
};

use crate::content::ContentClient;
use crate::inputs::{CatalogFacts, Deployed, catalog_facts, deployed, request_of, selects};
use crate::memo::{Base, GroupAnswers};
use crate::metrics::OperatorMetrics;

use decide::Step;

/// How long a group's answer is reused for BundleDeployments that moved to it, before one
/// fresh solve confirms it (see [`crate::memo`]).
const GRACE: Duration = Duration::from_secs(2);

/// The objects resolution reads.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Every Operator.
    pub operators: Vec<Arc<Operator>>,
    /// Every BundleDeployment.
    pub bundle_deployments: Vec<Arc<BundleDeployment>>,
    /// Every Catalog.
    pub catalogs: Vec<Arc<Catalog>>,
}

/// Why a Catalog took no part in resolution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeftOut {
    /// catalogd does not serve it (yet).
    NotServing(String),
    /// Its content is not a valid catalog.
    Invalid(String),
    /// catalogd could not be reached for it: Operators that may use it wait.
    Unreachable(String),
}

/// The answer for one Operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// A bundle was chosen.
    Resolved(Resolved),
    /// No bundle can be chosen; the message says why (`invalid_spec`: the spec itself is
    /// wrong, e.g. a version range that does not parse).
    Failed {
        /// Whether the spec is invalid.
        invalid_spec: bool,
        /// Sentences a person can act on.
        message: String,
    },
    /// Catalogs the Operator may use could not be read: nothing is decided.
    Unknown(String),
}

/// Everything decided for one Operator, with what explains it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The answer.
    pub answer: Answer,
    /// Catalogs its selector matches that took no part, and why.
    pub left_out: Vec<(String, LeftOut)>,
    /// Deprecation notices of the resolved bundle (package, requested channel, bundle).
    pub notices: Vec<Notice>,
    /// What its BundleDeployment deploys now, if it has one.
    pub deployed: Option<Deployed>,
    /// Whether the resolved bundle is a successor of the deployed one along the catalog's
    /// upgrade edges.
    pub via_edge: bool,
    /// The content hash of the catalog the bundle came from.
    pub catalog_hash: Option<String>,
}

struct Memo {
    index_key: u64,
    index: Arc<Index>,
    generation: u64,
    groups: HashMap<u64, Arc<HashMap<String, usize>>>,
    answers: crate::memo::Memo,
}

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

/// Resolution with its caches. Share it as `Arc<Resolver>`.
pub struct Resolver {
    content: Arc<ContentClient>,
    metrics: Option<OperatorMetrics>,
    memo: Mutex<Memo>,
    /// Where to send the names of Operators whose answer may have changed because another
    /// member of their group changed (the controller re-queues them).
    requeue: std::sync::OnceLock<futures::channel::mpsc::UnboundedSender<String>>,
    /// How long one group's solve may take.
    timeout: Duration,
    views: Mutex<Views>,
}

/// A snapshot made ready: catalogs read, index built, Operators sorted and grouped. Only what
/// every decision needs is computed here (once per reconcile, over all Operators, so kept
/// cheap); requests and deployed bundles are read for the deciding Operator's group alone.
struct Prepared<'a> {
    index: Arc<Index>,
    generation: u64,
    facts: Vec<CatalogFacts>,
    hashes: HashMap<String, String>,
    left_out: BTreeMap<String, LeftOut>,
    /// The Operators not being deleted, in snapshot order.
    operators: Vec<&'a Arc<Operator>>,
    /// Package → its group.
    group_of: Arc<HashMap<String, usize>>,
    /// Identifies the snapshot: the index, and every Operator's and BundleDeployment's
    /// resourceVersion.
    snap_key: u64,
    snapshot: &'a Snapshot,
    /// Name → BundleDeployment, built when first needed (most reconciles reuse a view).
    bundle_deployments: std::cell::OnceCell<HashMap<&'a str, &'a Arc<BundleDeployment>>>,
}

impl<'a> Prepared<'a> {
    /// The BundleDeployment `name`: by the index once built, else by a scan (one lookup is
    /// cheaper than building the index, which only a solve needs).
    fn bundle_deployment(&self, name: &str) -> Option<&'a Arc<BundleDeployment>> {
        match self.bundle_deployments.get() {
            Some(index) => index.get(name).copied(),
            None => self
                .snapshot
                .bundle_deployments
                .iter()
                .find(|bd| bd.metadata.name.as_deref() == Some(name)),
        }
    }

    /// Builds the name → BundleDeployment index, before many lookups.
    fn index_bundle_deployments(&self) {
        let snapshot = self.snapshot;
        self.bundle_deployments.get_or_init(|| {
            snapshot
                .bundle_deployments
                .iter()
                .filter_map(|bd| Some((bd.metadata.name.as_deref()?, bd)))
                .collect()
        });
    }

    fn deployed(&self, name: &str) -> Option<Deployed> {
        self.bundle_deployment(name).map(|bd| deployed(bd))
    }

    fn group(&self, k: usize) -> Option<usize> {
        self.group_of
            .get(&self.operators[k].spec.package_name)
            .copied()
    }
}

impl Resolver {
    /// A resolver reading content through `content`.
    pub fn new(content: Arc<ContentClient>, metrics: Option<OperatorMetrics>) -> Self {
        Self {
            content,
            metrics,
            memo: Mutex::new(Memo {
                index_key: 0,
                index: Arc::new(Index::default()),
                generation: 0,
                groups: HashMap::new(),
                answers: crate::memo::Memo::default(),
            }),
            requeue: std::sync::OnceLock::new(),
            timeout: Duration::from_secs(30),
            views: Mutex::default(),
        }
    }

    /// The same, with solves limited to `timeout` each (30 s by default).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sends the names of Operators to re-queue to `tx` from now on.
    pub fn set_requeue(&self, tx: futures::channel::mpsc::UnboundedSender<String>) {
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

    /// The Operators of `operators` whose answers an Operator for `package` can affect (its
    /// group, by the current index), for when that Operator goes away.
    pub fn mates(&self, operators: &[Arc<Operator>], package: &str) -> Vec<String> {
        let index = self.memo().index.clone();
        let mut packages: Vec<&str> = operators
            .iter()
            .map(|o| o.spec.package_name.as_str())
            .collect();
        packages.push(package);
        let g = groups(&index, &packages);
        let mine = g[g.len() - 1];
        operators
            .iter()
            .zip(&g)
            .filter(|(_, x)| **x == mine)
            .map(|(o, _)| o.name_any())
            .collect()
    }

    fn views(&self) -> std::sync::MutexGuard<'_, Views> {
        self.views.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn memo(&self) -> std::sync::MutexGuard<'_, Memo> {
        self.memo.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The content client.
    pub fn content(&self) -> &Arc<ContentClient> {
        &self.content
    }

    async fn prepare<'a>(&self, snapshot: &'a Snapshot) -> Prepared<'a> {
        let mut facts: Vec<CatalogFacts> =
            snapshot.catalogs.iter().map(|c| catalog_facts(c)).collect();
        facts.sort_by(|a, b| a.name.cmp(&b.name));
        let got = fetch::fetch(&self.content, &facts).await;
        let fetch::Sorted {
            available,
            left_out,
            hashes,
        } = fetch::sort_out(&facts, got);
        let index_key = keys::index_key(&available);

        let operators: Vec<&Arc<Operator>> = snapshot
            .operators
            .iter()
            .filter(|o| o.metadata.deletion_timestamp.is_none())
            .collect();

        let (index, generation) = {
            let mut memo = self.memo();
            if memo.index_key != index_key || memo.generation == 0 {
                let index = Index::from_contents(available.iter().map(|(f, c)| {
                    (
                        CatalogMeta {
                            name: f.name.clone(),
                            priority: f.priority,
                            labels: f.labels.clone(),
                        },
                        c.clone(),
                    )
                }));
                memo.index = Arc::new(index);
                memo.index_key = index_key;
                memo.generation += 1;
                memo.groups.clear();
                memo.answers.clear();
            }
            (memo.index.clone(), memo.generation)
        };
        // The grouping depends only on the set of requested packages.
        let groups_key = keys::groups_key(&operators);
        let cached = self.memo().groups.get(&groups_key).cloned();
        let group_of = match cached {
            Some(g)
                if operators
                    .iter()
                    .all(|o| g.contains_key(&o.spec.package_name)) =>
            {
                g
            }
            _ => {
                let packages: std::collections::BTreeSet<&str> = operators
                    .iter()
                    .map(|o| o.spec.package_name.as_str())
                    .collect();
                let packages: Vec<&str> = packages.into_iter().collect();
                let numbers = groups(&index, &packages);
                let g: Arc<HashMap<String, usize>> = Arc::new(
                    packages
                        .iter()
                        .zip(numbers)
                        .map(|(p, n)| ((*p).to_owned(), n))
                        .collect(),
                );
                let mut memo = self.memo();
                if memo.generation == generation {
                    memo.groups.insert(groups_key, g.clone());
                }
                g
            }
        };
        let snap_key = keys::snap_key(generation, &operators, &snapshot.bundle_deployments);
        Prepared {
            index,
            generation,
            facts,
            hashes,
            left_out,
            operators,
            group_of,
            snap_key,
            snapshot,
            bundle_deployments: std::cell::OnceCell::new(),
        }
    }

    /// Decides for the Operator `name`; `None` if it is not in the snapshot (or is being
    /// deleted).
    pub async fn decide(&self, snapshot: &Snapshot, name: &str) -> Option<Decision> {
        let p = self.prepare(snapshot).await;
        let i = p
            .operators
            .iter()
            .position(|o| o.metadata.name.as_deref() == Some(name))?;
        Some(self.decide_prepared(&p, i))
    }

    /// Decides for every Operator, by name.
    pub async fn decide_all(&self, snapshot: &Snapshot) -> BTreeMap<String, Decision> {
        let p = self.prepare(snapshot).await;
        (0..p.operators.len())
            .map(|i| (p.operators[i].name_any(), self.decide_prepared(&p, i)))
            .collect()
    }

    fn decide_prepared(&self, p: &Prepared, i: usize) -> Decision {
        let op = &p.operators[i];
        let name = op.name_any();
        let deployed = p.deployed(&name);
        let matching: Vec<(String, LeftOut)> = p
            .facts
            .iter()
            .filter(|f| selects(op, &f.labels))
            .filter_map(|f| p.left_out.get(&f.name).map(|l| (f.name.clone(), l.clone())))
            .collect();
        let mut decision = Decision {
            answer: Answer::Unknown(String::new()),
            left_out: matching,
            notices: Vec::new(),
            deployed,
            via_edge: false,
            catalog_hash: None,
        };
        if let Some(why) = decide::waiting(&decision.left_out) {
            decision.answer = Answer::Unknown(why);
            return decision;
        }
        decision.answer = decide::answer(self.group_outcome(p, i), self.timeout);
        if let Answer::Resolved(resolved) = &decision.answer {
            let explained = decide::explain(&p.index, op, decision.deployed.as_ref(), resolved);
            decision.notices = explained.notices;
            decision.via_edge = explained.via_edge;
            decision.catalog_hash = p.hashes.get(&resolved.catalog).cloned();
        }
        decision
    }

    /// The outcome of request `i`, from its group's memoized answer or a fresh solve.
    /// The outcome of Operator `i`: from the view of its group for this very snapshot (the
    /// many reconciles of one burst share it), else from [`Self::group_answers`].
    fn group_outcome(&self, p: &Prepared, i: usize) -> Outcome {
        let name = p.operators[i].name_any();
        let group = p.group(i);
        if let Some(g) = group {
            let views = self.views();
            if views.snap_key == p.snap_key
                && let Some(v) = views.by_group.get(&g)
                && v.reused_since.is_none_or(|t| t.elapsed() < GRACE)
                && let Some(o) = v.answers.pick(&name)
            {
                return o;
            }
        }
        let (answers, reused_since) = self.group_answers(p, i, &name);
        if let Some(g) = group {
            let mut views = self.views();
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
    fn group_answers(
        &self,
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
        let spec_key = keys::spec_key(p.generation, members.iter().map(|&k| &**p.operators[k]));
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
            let memo = self.memo();
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
                    self.memo().answers.mark_stale(spec_key, now);
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
        let outcomes = resolve_each_within(
            &p.index,
            &requests,
            &installed,
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
            let mut memo = self.memo();
            if memo.generation == p.generation {
                memo.answers.insert(key, spec_key, answers.clone());
            }
        }
        (answers, None)
    }
}
