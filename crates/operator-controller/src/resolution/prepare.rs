//! A snapshot made ready for deciding: the Catalogs' content read, the index built (or
//! kept, when the content is unchanged), the Operators sorted and grouped.

use std::cell::OnceCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use olm_api::bundle_deployment::BundleDeployment;
use olm_api::operator::Operator;
use olm_resolver::resolve::{CatalogMeta, Index, groups};

use super::{LeftOut, Memo, Snapshot, fetch, keys, lock};
use crate::content::ContentClient;
use crate::inputs::{CatalogFacts, Deployed, catalog_facts, deployed};

/// A snapshot made ready: catalogs read, index built, Operators sorted and grouped. Only what
/// every decision needs is computed here (once per reconcile, over all Operators, so kept
/// cheap); requests and deployed bundles are read for the deciding Operator's group alone.
pub(super) struct Prepared<'a> {
    pub(super) index: Arc<Index>,
    pub(super) generation: u64,
    pub(super) facts: Vec<CatalogFacts>,
    pub(super) hashes: HashMap<String, String>,
    pub(super) left_out: BTreeMap<String, LeftOut>,
    /// The Operators not being deleted, in snapshot order.
    pub(super) operators: Vec<&'a Arc<Operator>>,
    /// Package → its group.
    pub(super) group_of: Arc<HashMap<String, usize>>,
    /// Identifies the snapshot: the index, and every Operator's and BundleDeployment's
    /// resourceVersion.
    pub(super) snap_key: u64,
    /// Identifies the cluster's APIs, which every answer depends on.
    pub(super) apis_key: u64,
    pub(super) snapshot: &'a Snapshot,
    /// Name → BundleDeployment, built when first needed (most reconciles reuse a view).
    pub(super) bundle_deployments: OnceCell<HashMap<&'a str, &'a Arc<BundleDeployment>>>,
}

impl<'a> Prepared<'a> {
    /// The BundleDeployment `name`: by the index once built, else by a scan (one lookup is
    /// cheaper than building the index, which only a solve needs).
    pub(super) fn bundle_deployment(&self, name: &str) -> Option<&'a Arc<BundleDeployment>> {
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
    pub(super) fn index_bundle_deployments(&self) {
        let snapshot = self.snapshot;
        self.bundle_deployments.get_or_init(|| {
            snapshot
                .bundle_deployments
                .iter()
                .filter_map(|bd| Some((bd.metadata.name.as_deref()?, bd)))
                .collect()
        });
    }

    pub(super) fn deployed(&self, name: &str) -> Option<Deployed> {
        self.bundle_deployment(name).map(|bd| deployed(bd))
    }

    pub(super) fn group(&self, k: usize) -> Option<usize> {
        self.group_of
            .get(&self.operators[k].spec.package_name)
            .copied()
    }
}

/// `snapshot` made ready: the Catalogs' content read through `content`, the index and the
/// grouping taken from `memo` when their inputs are unchanged, else built and kept there.
pub(super) async fn prepare<'a>(
    content: &ContentClient,
    memo: &Mutex<Memo>,
    snapshot: &'a Snapshot,
) -> Prepared<'a> {
    let mut facts: Vec<CatalogFacts> = snapshot.catalogs.iter().map(|c| catalog_facts(c)).collect();
    facts.sort_by(|a, b| a.name.cmp(&b.name));
    let got = fetch::fetch(content, &facts).await;
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
        let mut memo = lock(memo);
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
    let cached = lock(memo).groups.get(&groups_key).cloned();
    let group_of = match cached {
        Some(g)
            if operators
                .iter()
                .all(|o| g.contains_key(&o.spec.package_name)) =>
        {
            g
        }
        _ => {
            let packages: BTreeSet<&str> = operators
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
            let mut memo = lock(memo);
            if memo.generation == generation {
                memo.groups.insert(groups_key, g.clone());
            }
            g
        }
    };
    let apis_key = keys::fingerprint(&*snapshot.apis);
    let snap_key = keys::fingerprint(&(
        keys::snap_key(generation, &operators, &snapshot.bundle_deployments),
        apis_key,
    ));
    Prepared {
        index,
        generation,
        facts,
        hashes,
        left_out,
        operators,
        group_of,
        snap_key,
        apis_key,
        snapshot,
        bundle_deployments: OnceCell::new(),
    }
}
