//! The Operator controller: Operators, the BundleDeployments they own, and the Catalogs they
//! resolve against. A Catalog change (content hash, labels, priority, serving, deletion)
//! re-queues only the Operators whose catalogSelector matches the Catalog before or after it;
//! reconciles run at most `concurrency` at a time, and failures back off per Operator.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::{StreamExt, future};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use olm_api::bundle_deployment::BundleDeployment;
use olm_api::catalog::Catalog;
use olm_api::operator::Operator;
use olm_runtime::admin::ReadinessHandle;
use olm_runtime::events::EventPublisher;
use olm_runtime::metrics::Metrics;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::inputs::{CatalogFacts, catalog_facts, selects};
use crate::metrics::OperatorMetrics;
use crate::reconcile::{self, Context, Error};
use crate::resolution::Resolver;
use olm_runtime::retry::Retry;

/// Name of this controller in metrics and logs.
pub const CONTROLLER: &str = "operator";

/// The Operators a Catalog change can affect: none when nothing resolution reads changed,
/// otherwise those whose selector matches the Catalog's labels before or after.
pub fn affected(
    operators: &[Arc<Operator>],
    before: Option<&CatalogFacts>,
    after: &CatalogFacts,
) -> Vec<ObjectRef<Operator>> {
    if before == Some(after) {
        return Vec::new();
    }
    operators
        .iter()
        .filter(|o| selects(o, &after.labels) || before.is_some_and(|b| selects(o, &b.labels)))
        .map(|o| ObjectRef::from_obj(o.as_ref()))
        .collect()
}

/// Settings of the controller.
pub struct Settings {
    /// Reconciles at once.
    pub concurrency: u16,
    /// Longest retry delay.
    pub max_backoff: Duration,
    /// How often a resolved Operator is looked at again without a trigger.
    pub resync: Duration,
    /// How often the prober asks catalogd about each serving Catalog.
    pub probe_interval: Duration,
}

/// Builds the controller and its context; `ready` follows the Operator watch.
pub fn build(
    client: Client,
    resolver: Arc<Resolver>,
    events: EventPublisher,
    metrics: OperatorMetrics,
    settings: &Settings,
    ready: ReadinessHandle,
) -> (Controller<Operator>, Arc<Context>) {
    let (operators, operators_writer) = reflector::store::<Operator>();
    // Operators re-queued because a member of their group changed or went away.
    let (requeue_tx, requeue_rx) = futures::channel::mpsc::unbounded::<String>();
    resolver.set_requeue(requeue_tx.clone());
    let requeue_tx_for_ctx = requeue_tx.clone();
    let on_delete = {
        let operators = operators.clone();
        let resolver = resolver.clone();
        move |gone: &Operator| {
            let others: Vec<Arc<Operator>> = operators
                .state()
                .into_iter()
                .filter(|o| o.name_any() != gone.name_any())
                .collect();
            for name in resolver.mates(&others, &gone.spec.package_name) {
                let _ = requeue_tx.unbounded_send(name);
            }
        }
    };
    let operator_stream = watcher(
        Api::<Operator>::all(client.clone()),
        watcher::Config::default().any_semantic(),
    )
    .default_backoff()
    .inspect(move |event| {
        ready.follow("Operator", event);
        if let Ok(watcher::Event::Delete(gone)) = event {
            on_delete(gone);
        }
    })
    .reflect(operators_writer)
    .applied_objects();

    let (bundle_deployments, bd_writer) = reflector::store();
    let bd_stream = watcher(
        Api::<BundleDeployment>::all(client.clone()),
        watcher::Config::default().any_semantic(),
    )
    .default_backoff()
    .reflect(bd_writer)
    .touched_objects();

    let (catalogs, catalogs_writer) = reflector::store();
    let catalog_stream = watcher(
        Api::<Catalog>::all(client.clone()),
        watcher::Config::default().any_semantic(),
    )
    .default_backoff()
    .reflect(catalogs_writer)
    .filter_map(|event| {
        future::ready(match event {
            Ok(watcher::Event::Apply(c) | watcher::Event::InitApply(c)) => Some(Ok(c)),
            // A deleted Catalog is passed on marked as deleted, so the mapper sees it go.
            Ok(watcher::Event::Delete(mut c)) => {
                c.metadata
                    .deletion_timestamp
                    .get_or_insert(Time(k8s_openapi::jiff::Timestamp::now()));
                Some(Ok(c))
            }
            Ok(watcher::Event::Init | watcher::Event::InitDone) => None,
            Err(e) => Some(Err(e)),
        })
    });

    let seen: Arc<Mutex<HashMap<String, CatalogFacts>>> = Arc::default();
    let mapper = {
        let operators = operators.clone();
        let content = resolver.content().clone();
        let catalogs = catalogs.clone();
        move |c: Catalog| {
            let facts = catalog_facts(&c);
            let name = c.name_any();
            let mut seen = seen.lock().unwrap_or_else(PoisonError::into_inner);
            let refs = affected(&operators.state(), seen.get(&name), &facts);
            if catalogs.get(&ObjectRef::new(&name)).is_none() {
                // Gone: forget it, and drop its content.
                seen.remove(&name);
                let existing = catalogs.state().iter().map(|c| c.name_any()).collect();
                content.retain(&existing);
            } else {
                seen.insert(name, facts);
            }
            refs
        }
    };

    // The cluster's APIs: a change of what resolution reads of them re-queues every Operator.
    let (crds, crds_writer) = reflector::store();
    let crd_stream = watcher(
        Api::<CustomResourceDefinition>::all(client.clone()),
        watcher::Config::default().any_semantic(),
    )
    .default_backoff()
    // Schemas are most of a CRD and none of what resolution reads: not kept.
    .modify(|crd: &mut CustomResourceDefinition| {
        crd.metadata.managed_fields = None;
        for version in &mut crd.spec.versions {
            version.schema = None;
        }
    })
    .reflect(crds_writer)
    .touched_objects()
    .map(|r| r.map(|_| ()));
    let (api_services, services_writer) = reflector::store();
    let service_stream = watcher(
        Api::<APIService>::all(client.clone()),
        watcher::Config::default().any_semantic(),
    )
    .default_backoff()
    .reflect(services_writer)
    .touched_objects()
    .map(|r| r.map(|_| ()));
    let apis_changed = {
        let (operators, crds, api_services) =
            (operators.clone(), crds.clone(), api_services.clone());
        let last: Arc<Mutex<Option<u64>>> = Arc::default();
        move || {
            let now = crate::resolution::keys::fingerprint(&crate::apis::cluster_apis(
                &crds.state(),
                &api_services.state(),
            ));
            let mut last = last.lock().unwrap_or_else(PoisonError::into_inner);
            if last.replace(now) == Some(now) {
                return Vec::new();
            }
            operators
                .state()
                .iter()
                .map(|o| ObjectRef::from_obj(o.as_ref()))
                .collect()
        }
    };
    // A watch error is retried by the watcher's backoff; only events count.
    let apis_stream = futures::stream::select(crd_stream, service_stream)
        .filter_map(|r| future::ready(r.ok()))
        .flat_map(move |()| futures::stream::iter(apis_changed()));

    let controller = Controller::for_stream(operator_stream, operators.clone())
        .owns_stream(bd_stream)
        .watches_stream(catalog_stream, mapper)
        .reconcile_on(apis_stream)
        .reconcile_on(requeue_rx.map(|name| ObjectRef::new(&name)));
    let ctx = Arc::new(Context {
        client,
        resolver,
        operators,
        bundle_deployments,
        catalogs,
        crds,
        api_services,
        events,
        metrics,
        max_backoff: settings.max_backoff,
        resync: settings.resync,
        written: Default::default(),
        requeue: requeue_tx_for_ctx,
        probe_interval: settings.probe_interval,
    });
    (controller, ctx)
}

async fn run_one(op: Arc<Operator>, ctx: Arc<Context>) -> Result<Action, Error> {
    let span = tracing::info_span!("reconcile", operator = %op.name_any());
    reconcile::reconcile(op, &ctx).instrument(span).await
}

fn error_policy(op: Arc<Operator>, error: &Error, wait: Duration) -> Action {
    let name = op.name_any();
    match error {
        Error::CatalogsUnavailable => {
            tracing::info!(operator = %name, ?wait, "catalog content unavailable; retrying")
        }
        Error::Kube(..) | Error::CachesClosed => {
            tracing::warn!(operator = %name, error = %olm_runtime::error_chain(error), ?wait, "reconcile failed; retrying")
        }
    }
    Action::requeue(wait)
}

/// Runs the controller until `shutdown` is cancelled.
pub async fn run(
    controller: Controller<Operator>,
    ctx: Arc<Context>,
    metrics: Arc<Metrics>,
    concurrency: u16,
    shutdown: CancellationToken,
) {
    tokio::spawn(crate::probe::run(
        ctx.catalogs.clone(),
        ctx.operators.clone(),
        ctx.resolver.content().clone(),
        ctx.probe_interval,
        ctx.requeue.clone(),
        shutdown.clone(),
    ));
    olm_runtime::controller::Run {
        name: CONTROLLER,
        concurrency,
        metrics,
        shutdown,
        retry: Retry::Doubling {
            max: ctx.max_backoff,
        },
    }
    .run(controller, run_one, error_policy, ctx)
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inputs::Availability;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
    use olm_api::operator::{OperatorSpec, UpgradeConstraintPolicy};
    use std::collections::BTreeMap;

    fn op(name: &str, tier: Option<&str>) -> Arc<Operator> {
        Arc::new(Operator::new(
            name,
            OperatorSpec {
                package_name: "foo".into(),
                version: None,
                channel: None,
                upgrade_constraint_policy: UpgradeConstraintPolicy::Enforce,
                catalog_selector: tier.map(|t| LabelSelector {
                    match_labels: Some(BTreeMap::from([("tier".to_owned(), t.to_owned())])),
                    match_expressions: None,
                }),
                namespace: None,
                watch_namespace: None,
                target_namespaces: None,
                deployment_config: None,
                values: None,
                values_from: None,
            },
        ))
    }

    fn facts(tier: &str, hash: &str) -> CatalogFacts {
        CatalogFacts {
            name: "c".into(),
            labels: BTreeMap::from([("tier".to_owned(), tier.to_owned())]),
            priority: 0,
            availability: Availability::Serving {
                hash: hash.into(),
                url: "u".into(),
            },
        }
    }

    fn names(refs: Vec<ObjectRef<Operator>>) -> Vec<String> {
        refs.into_iter().map(|r| r.name).collect()
    }

    #[test]
    fn a_catalog_change_requeues_only_operators_it_can_affect() {
        let ops = [
            op("any", None),
            op("gold", Some("gold")),
            op("silver", Some("silver")),
        ];
        // New content: everyone whose selector matches.
        assert_eq!(
            names(affected(
                &ops,
                Some(&facts("gold", "a")),
                &facts("gold", "b")
            )),
            ["any", "gold"]
        );
        // Nothing resolution reads changed: nobody.
        assert!(affected(&ops, Some(&facts("gold", "a")), &facts("gold", "a")).is_empty());
        // A label change: those matching before and those matching after.
        assert_eq!(
            names(affected(
                &ops,
                Some(&facts("gold", "a")),
                &facts("silver", "a")
            )),
            ["any", "gold", "silver"]
        );
        // A first sight: those matching.
        assert_eq!(
            names(affected(&ops, None, &facts("silver", "a"))),
            ["any", "silver"]
        );
        // Serving stops.
        let mut stopped = facts("gold", "a");
        stopped.availability = Availability::NotServing("x".into());
        assert_eq!(
            names(affected(&ops, Some(&facts("gold", "a")), &stopped)),
            ["any", "gold"]
        );
    }
}
