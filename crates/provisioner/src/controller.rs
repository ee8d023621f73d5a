//! The BundleDeployment controller, run with the shared runtime's controller runner (counted
//! by result, bounded, stopped with the manager).

use std::sync::Arc;

use kube::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use olm_api::bundle_deployment::BundleDeployment;
use olm_runtime::Metrics;
use olm_runtime::controller::Run;
use tokio_util::sync::CancellationToken;

use crate::reconcile::{Context, Error, RETRY, reconcile};

/// The controller's name in metrics.
pub const NAME: &str = "bundledeployment";

/// Runs the controller until `shutdown`, over the BundleDeployments `watch` selects (all, by
/// default).
pub async fn run(
    ctx: Arc<Context>,
    watch: watcher::Config,
    metrics: Arc<Metrics>,
    concurrency: u16,
    shutdown: CancellationToken,
) {
    let api: Api<BundleDeployment> = Api::all(ctx.client.clone());
    let controller = Controller::new(api, watch);
    Run {
        name: NAME,
        concurrency,
        metrics,
        shutdown,
    }
    .run(controller, reconcile, error_policy, ctx)
    .await;
}

fn error_policy(bd: Arc<BundleDeployment>, error: &Error, _: Arc<Context>) -> Action {
    tracing::warn!(
        bundle_deployment = bd.metadata.name.as_deref().unwrap_or_default(),
        %error,
        "reconcile failed; retrying"
    );
    Action::requeue(RETRY)
}
