//! Resolution as the controller and `explain` both run it: the Catalogs' content (through the
//! content client), one index per set of contents, and joint answers for each group of
//! Operators that can affect each other, memoized by everything the answer depends on. A
//! catalog change re-indexes once; an Operator's change or a new BundleDeployment re-solves
//! only its group.
//!
//! [`fetch`] reads the content (I/O), [`keys`] names what each cache depends on, and
//! [`decide`] holds the decisions, pure. The [`Resolver`] (here) holds the content client, the
//! memo and the groups, and decides for an Operator; `prepare` (a function of the content and
//! the memo) makes a snapshot ready (content, index, groups); `group`'s `Groups` finds or
//! solves a group's answers, keeps the views a burst of reconciles shares, and re-queues the
//! mates a fresh answer changes. Each type's `impl` is in the file that defines it.

pub mod decide;
pub mod fetch;
mod group;
pub mod keys;
mod prepare;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use kube::ResourceExt;
use olm_api::bundle_deployment::BundleDeployment;
use olm_api::catalog::Catalog;
use olm_api::operator::Operator;
use olm_resolver::resolve::{ClusterApis, Index, Notice, Resolved, groups};

use crate::content::ContentClient;
use crate::inputs::{Deployed, selects};
use crate::metrics::OperatorMetrics;

use group::Groups;
use prepare::{Prepared, prepare};

/// The objects resolution reads.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Every Operator.
    pub operators: Vec<Arc<Operator>>,
    /// Every BundleDeployment.
    pub bundle_deployments: Vec<Arc<BundleDeployment>>,
    /// Every Catalog.
    pub catalogs: Vec<Arc<Catalog>>,
    /// The cluster's APIs: what it serves without a BundleDeployment, and whose CRDs are whose.
    pub apis: Arc<ClusterApis>,
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

/// Resolution with its caches. Share it as `Arc<Resolver>`.
pub struct Resolver {
    content: Arc<ContentClient>,
    memo: Mutex<Memo>,
    groups: Groups,
}

/// The guard of `mutex`, even if a panic poisoned it (the caches stay consistent: every write
/// under a lock is one assignment or insert).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Resolver {
    /// A resolver reading content through `content`.
    pub fn new(content: Arc<ContentClient>, metrics: Option<OperatorMetrics>) -> Self {
        Self {
            content,
            memo: Mutex::new(Memo {
                index_key: 0,
                index: Arc::new(Index::default()),
                generation: 0,
                groups: HashMap::new(),
                answers: crate::memo::Memo::default(),
            }),
            groups: Groups::new(metrics, Duration::from_secs(30)),
        }
    }

    /// The same, with solves limited to `timeout` each (30 s by default).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.groups.timeout = timeout;
        self
    }

    /// Sends the names of Operators to re-queue to `tx` from now on.
    pub fn set_requeue(&self, tx: futures::channel::mpsc::UnboundedSender<String>) {
        self.groups.set_requeue(tx);
    }

    /// The Operators of `operators` whose answers an Operator for `package` can affect (its
    /// group, by the current index), for when that Operator goes away.
    pub fn mates(&self, operators: &[Arc<Operator>], package: &str) -> Vec<String> {
        let index = lock(&self.memo).index.clone();
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

    /// The content client.
    pub fn content(&self) -> &Arc<ContentClient> {
        &self.content
    }

    /// Decides for the Operator `name`; `None` if it is not in the snapshot (or is being
    /// deleted).
    pub async fn decide(&self, snapshot: &Snapshot, name: &str) -> Option<Decision> {
        let p = prepare(&self.content, &self.memo, snapshot).await;
        let i = p
            .operators
            .iter()
            .position(|o| o.metadata.name.as_deref() == Some(name))?;
        Some(self.decide_prepared(&p, i))
    }

    /// Decides for every Operator, by name.
    pub async fn decide_all(&self, snapshot: &Snapshot) -> BTreeMap<String, Decision> {
        let p = prepare(&self.content, &self.memo, snapshot).await;
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
        decision.answer =
            decide::answer(self.groups.outcome(&self.memo, p, i), self.groups.timeout);
        if let Answer::Resolved(resolved) = &decision.answer {
            let explained = decide::explain(&p.index, op, decision.deployed.as_ref(), resolved);
            decision.notices = explained.notices;
            decision.via_edge = explained.via_edge;
            decision.catalog_hash = p.hashes.get(&resolved.catalog).cloned();
        }
        decision
    }
}
