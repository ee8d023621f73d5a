//! The catalog prober: every recheck interval it asks the content client about each serving
//! Catalog (a conditional GET when what is held is older than the interval), and when a
//! Catalog's content becomes readable or unreadable, re-queues the Operators whose selector
//! matches it. So a stopped catalogd is noticed within about one interval, and its return too,
//! without any change in the API to trigger a reconcile.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kube::runtime::reflector::Store as Reflector;
use olm_api::catalog::Catalog;
use olm_api::operator::Operator;
use tokio_util::sync::CancellationToken;

use crate::content::ContentClient;
use crate::inputs::{Availability, catalog_facts, selects};

/// Records each Catalog's readability; returns the Catalogs whose readability changed since
/// the last call (a Catalog seen for the first time has not changed: start-up reconciles every
/// Operator anyway). Catalogs no longer present are forgotten.
pub fn changed(last: &mut HashMap<String, bool>, now: Vec<(String, bool)>) -> Vec<String> {
    let mut flipped = Vec::new();
    let mut next = HashMap::with_capacity(now.len());
    for (name, readable) in now {
        if last.get(&name).is_some_and(|&was| was != readable) {
            flipped.push(name.clone());
        }
        next.insert(name, readable);
    }
    *last = next;
    flipped
}

/// Probes until `shutdown`, sending the names of Operators to re-queue to `requeue`.
pub async fn run(
    catalogs: Reflector<Catalog>,
    operators: Reflector<Operator>,
    content: Arc<ContentClient>,
    interval: Duration,
    requeue: futures::channel::mpsc::UnboundedSender<String>,
    shutdown: CancellationToken,
) {
    let mut last = HashMap::new();
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(interval) => {}
        }
        let mut now = Vec::new();
        let mut labels = HashMap::new();
        for c in catalogs.state() {
            let facts = catalog_facts(&c);
            if let Availability::Serving { hash, url } = &facts.availability {
                let readable = content.content(&facts.name, hash, url).await.is_ok();
                now.push((facts.name.clone(), readable));
                labels.insert(facts.name.clone(), facts.labels.clone());
            }
        }
        for name in changed(&mut last, now) {
            tracing::info!(catalog = %name, "catalog content readability changed; re-queueing the Operators that may use it");
            let Some(l) = labels.get(&name) else { continue };
            for op in operators.state().iter().filter(|o| selects(o, l)) {
                if let Some(n) = &op.metadata.name {
                    let _ = requeue.unbounded_send(n.clone());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(pairs: &[(&str, bool)]) -> Vec<(String, bool)> {
        pairs.iter().map(|(n, r)| (n.to_string(), *r)).collect()
    }

    #[test]
    fn only_a_change_of_readability_counts() {
        let mut last = HashMap::new();
        assert!(changed(&mut last, seen(&[("a", true), ("b", false)])).is_empty());
        assert!(changed(&mut last, seen(&[("a", true), ("b", false)])).is_empty());
        assert_eq!(
            changed(&mut last, seen(&[("a", false), ("b", false)])),
            ["a"]
        );
        assert_eq!(
            changed(&mut last, seen(&[("a", true), ("b", true)])),
            ["a", "b"]
        );
        // Gone and back: a first sight again.
        assert!(changed(&mut last, seen(&[("b", true)])).is_empty());
        assert!(changed(&mut last, seen(&[("a", false), ("b", true)])).is_empty());
    }
}
