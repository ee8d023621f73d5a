//! One way to run a kube-runtime controller, so every manager's controllers count, bound and
//! stop alike: the concurrency is registered in `controller_runtime_max_concurrent_reconciles`,
//! every reconcile is timed and counted by its result (`Ok(Action)` as success, requeue or
//! requeue_after, `Err` as error: [`ReconcileOutcome::of`]), a failed one is tried again as
//! its [`Retry`] says (the failures of each object in a row counted, a success starting it
//! over), and the controller stops taking new work when `shutdown` is cancelled.

use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::runtime::controller::{Action, Config, Controller};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use crate::metrics::{Metrics, ReconcileOutcome, ReconcileTimer};
use crate::retry::{Retries, Retry};

/// How [`Run::run`] runs a controller.
pub struct Run {
    /// The controller's name: the `controller` label of its metrics.
    pub name: &'static str,
    /// Reconciles at once (at least one).
    pub concurrency: u16,
    /// Where its reconciles are counted.
    pub metrics: Arc<Metrics>,
    /// Cancelled to stop: reconciles under way finish, no new one starts.
    pub shutdown: CancellationToken,
    /// How long a failed reconcile waits.
    pub retry: Retry,
}

impl Run {
    /// Runs `controller` with `reconcile` until `shutdown`, each reconcile counted from its
    /// result. A failed one is handed to `error_policy` with the wait its [`Retry`] gives (to
    /// log, and to return as the action, or another the error calls for).
    pub async fn run<K, Ctx, F, Fut, E>(
        self,
        controller: Controller<K>,
        reconcile: F,
        error_policy: impl Fn(Arc<K>, &E, Duration) -> Action,
        ctx: Arc<Ctx>,
    ) where
        K: Clone + Resource + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Debug + Unpin + Eq + Hash + Clone,
        Ctx: Send + Sync + 'static,
        F: Fn(Arc<K>, Arc<Ctx>) -> Fut,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: std::error::Error + Send + 'static,
    {
        let Run {
            name,
            concurrency,
            metrics,
            shutdown,
            retry,
        } = self;
        let retries = Arc::new(Retries::new(retry));
        let succeeded = retries.clone();
        let concurrency = concurrency.max(1);
        metrics.register_controller(name, usize::from(concurrency));
        controller
            .with_config(Config::default().concurrency(concurrency))
            .graceful_shutdown_on(shutdown.cancelled_owned())
            .run(
                move |object, ctx| {
                    let key = key_of(object.as_ref());
                    let retries = succeeded.clone();
                    let counted = counted(metrics.reconcile_timer(name), reconcile(object, ctx));
                    async move {
                        let result = counted.await;
                        if result.is_ok() {
                            retries.succeeded(&key);
                        }
                        result
                    }
                },
                move |object, error, _| {
                    let wait = retries.failed(&key_of(object.as_ref()));
                    error_policy(object, error, wait)
                },
                ctx,
            )
            .for_each(|result| async move {
                // Reconcile errors were counted and logged by the error policy; what is left
                // here is the controller's own (a missing object, a closed queue).
                if let Err(error) = result {
                    tracing::debug!(controller = name, %error, "controller event");
                }
            })
            .await;
    }
}

/// The key an object's failures are counted under.
fn key_of<K: Resource>(object: &K) -> String {
    format!(
        "{}/{}",
        object.namespace().unwrap_or_default(),
        object.name_any()
    )
}

/// `reconcile`, timed by `timer` (started when the reconcile was made) and counted by its
/// result when it ends (or as an error when it is dropped unfinished).
async fn counted<E>(
    timer: ReconcileTimer,
    reconcile: impl Future<Output = Result<Action, E>>,
) -> Result<Action, E> {
    let result = reconcile.await;
    timer.finish(ReconcileOutcome::of(&result));
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn total(metrics: &Metrics, result: &str) -> f64 {
        metrics
            .registry
            .gather()
            .iter()
            .filter(|f| f.name() == "controller_runtime_reconcile_total")
            .flat_map(|f| f.get_metric().iter())
            .filter(|m| {
                m.get_label()
                    .iter()
                    .any(|l| l.name() == "result" && l.value() == result)
            })
            .map(|m| m.get_counter().get_value())
            .sum()
    }

    #[derive(Debug, thiserror::Error)]
    #[error("failed")]
    struct Failed;

    #[tokio::test]
    async fn each_result_is_counted_as_what_it_asks_for() {
        let metrics = Metrics::new().unwrap();
        let outcomes = [
            Ok(Action::await_change()),
            Ok(Action::requeue(Duration::from_secs(5))),
            Ok(Action::requeue(Duration::from_secs(5))),
            Err(Failed),
        ];
        for outcome in outcomes {
            let _ = counted(metrics.reconcile_timer("c"), async move { outcome }).await;
        }
        assert_eq!(total(&metrics, "success"), 1.0);
        assert_eq!(total(&metrics, "requeue_after"), 2.0);
        assert_eq!(total(&metrics, "error"), 1.0);
    }

    #[tokio::test]
    async fn a_reconcile_is_active_until_it_ends() {
        let metrics = Metrics::new().unwrap();
        let pending = counted(metrics.reconcile_timer("c"), async {
            Ok::<_, Failed>(Action::await_change())
        });
        let active = |m: &Metrics| {
            m.registry
                .gather()
                .iter()
                .filter(|f| f.name() == "controller_runtime_active_workers")
                .flat_map(|f| f.get_metric().iter())
                .map(|m| m.get_gauge().get_value())
                .sum::<f64>()
        };
        assert_eq!(active(&metrics), 1.0);
        let _ = pending.await;
        assert_eq!(active(&metrics), 0.0);
    }
}
