//! The BundleDeployment controller, run with the shared runtime's controller runner (counted
//! by result, bounded, stopped with the manager); `/readyz` follows its watch.

use std::time::Duration;

use olm_runtime::retry::Retry;
use std::sync::Arc;

use futures::StreamExt;
use futures::channel::mpsc;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;
use kube::ResourceExt;
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use olm_api::bundle_deployment::BundleDeployment;
use olm_api::bundle_deployment::{VALUES_LABEL, ValuesKind};
use olm_runtime::controller::Run;
use olm_runtime::{Metrics, ReadinessHandle};
use tokio_util::sync::CancellationToken;

use crate::reconcile::{Context, Error, RETRY, reconcile};

/// The controller's name in metrics.
pub const NAME: &str = "bundledeployment";

/// Runs the controller until `shutdown`, over the BundleDeployments `watch` selects (all, by
/// default), and those `drifted` names (see [`crate::drift`]); `ready` is set while the watch
/// works.
pub async fn run(
    ctx: Arc<Context>,
    watch: watcher::Config,
    drifted: mpsc::UnboundedReceiver<ObjectRef<BundleDeployment>>,
    metrics: Arc<Metrics>,
    concurrency: u16,
    ready: ReadinessHandle,
    shutdown: CancellationToken,
) {
    let api: Api<BundleDeployment> = Api::all(ctx.client.clone());
    let (store, writer) = reflector::store();
    let bds = store.clone();
    let stream = watcher(api, watch)
        .default_backoff()
        .inspect(move |event| ready.follow("BundleDeployment", event))
        .reflect(writer)
        .touched_objects();
    // A chart's values read from a Secret or ConfigMap of the managers' namespace: a change
    // of one renders again what names it (the metadata of those that opted in is watched,
    // never their content; one labelled later enters the watch, which is a change too).
    let namespace = ctx.fetcher.namespace().to_owned();
    let opted_in = watcher::Config::default().labels(&format!("{VALUES_LABEL}=true"));
    let secrets = watcher(
        Api::<PartialObjectMeta<Secret>>::namespaced(ctx.client.clone(), &namespace),
        opted_in.clone(),
    )
    .default_backoff()
    .touched_objects();
    let config_maps = watcher(
        Api::<PartialObjectMeta<ConfigMap>>::namespaced(ctx.client.clone(), &namespace),
        opted_in,
    )
    .default_backoff()
    .touched_objects();
    let (secret_bds, config_map_bds) = (bds.clone(), bds);
    let controller = Controller::for_stream(stream, store)
        .reconcile_on(drifted)
        .watches_stream(secrets, move |s| {
            naming(&secret_bds, ValuesKind::Secret, &s.name_any())
        })
        .watches_stream(config_maps, move |m| {
            naming(&config_map_bds, ValuesKind::ConfigMap, &m.name_any())
        });
    Run {
        name: NAME,
        concurrency,
        metrics,
        shutdown,
        retry: Retry::Fixed(RETRY),
    }
    .run(controller, reconcile, error_policy, ctx)
    .await;
}

/// The BundleDeployments in `bds` whose values are read from the `kind` `name`.
fn naming(
    bds: &reflector::Store<BundleDeployment>,
    kind: ValuesKind,
    name: &str,
) -> Vec<ObjectRef<BundleDeployment>> {
    bds.state()
        .iter()
        .filter(|bd| crate::values::reads(bd, kind, name))
        .map(|bd| ObjectRef::from_obj(bd.as_ref()))
        .collect()
}

fn error_policy(bd: Arc<BundleDeployment>, error: &Error, wait: Duration) -> Action {
    tracing::warn!(
        bundle_deployment = bd.metadata.name.as_deref().unwrap_or_default(),
        %error,
        "reconcile failed; retrying"
    );
    Action::requeue(wait)
}
