//! The Prometheus registry every manager exposes on `/metrics`, with controller-runtime's
//! reconcile families under controller-runtime's names and buckets, so dashboards and alerts
//! written for Go OLM work unchanged.
//!
//! Labels stay bounded: a controller name and a result, never an object name. Binaries register
//! their own `catalogd_*`, `operator_controller_*` and `catalog_switcher_*` families on
//! [`Metrics::registry`].

use crate::error::Error;
use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder,
};
use std::time::Instant;

/// controller-runtime's `controller_runtime_reconcile_time_seconds` buckets.
pub const RECONCILE_TIME_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0,
];

/// How a reconcile ended, as controller-runtime labels it in `result`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReconcileOutcome {
    /// Done; nothing scheduled (kube: `Action::await_change()`).
    Success,
    /// The reconcile returned an error.
    Error,
    /// Requeued at once, with rate limiting (Go: `Result{Requeue: true}`).
    Requeue,
    /// Requeued after a delay (kube: `Action::requeue(d)`; Go: `Result{RequeueAfter: d}`).
    RequeueAfter,
}

impl ReconcileOutcome {
    /// Every outcome, in label order.
    pub const ALL: [Self; 4] = [
        Self::Success,
        Self::Error,
        Self::Requeue,
        Self::RequeueAfter,
    ];

    /// How a reconcile that returned `result` ended: an error, nothing scheduled (success), or
    /// a requeue after a delay. Every controller labels its reconciles with this, so the
    /// `result` label means the same thing everywhere (docs/operations.md).
    pub fn of<E>(result: &Result<kube::runtime::controller::Action, E>) -> Self {
        match result {
            Ok(action) if *action == kube::runtime::controller::Action::await_change() => {
                Self::Success
            }
            Ok(_) => Self::RequeueAfter,
            Err(_) => Self::Error,
        }
    }

    /// The `result` label value controller-runtime uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Error => "error",
            Self::Requeue => "requeue",
            Self::RequeueAfter => "requeue_after",
        }
    }
}

impl std::fmt::Display for ReconcileOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A registry plus the controller-runtime families. Share it as `Arc<Metrics>`.
#[derive(Clone, Debug)]
pub struct Metrics {
    /// The registry `/metrics` encodes; register binary-specific families here.
    pub registry: Registry,
    reconcile_total: IntCounterVec,
    reconcile_errors_total: IntCounterVec,
    reconcile_time_seconds: HistogramVec,
    active_workers: IntGaugeVec,
    max_concurrent_reconciles: IntGaugeVec,
}

/// Registers `metric` in `registry` and gives it back, to keep: the one way every manager
/// registers its families.
///
/// # Errors
///
/// When a family of the same name is registered already.
pub fn register<M>(registry: &Registry, metric: M) -> Result<M, prometheus::Error>
where
    M: prometheus::core::Collector + Clone + 'static,
{
    registry.register(Box::new(metric.clone()))?;
    Ok(metric)
}

impl Metrics {
    /// A fresh registry (never the global one, so tests do not share state) with the
    /// controller-runtime families registered.
    ///
    /// # Errors
    ///
    /// [`Error::Metrics`] if a family cannot be built or registered.
    pub fn new() -> Result<Self, Error> {
        let registry = Registry::new();
        let reconcile_total = register(
            &registry,
            IntCounterVec::new(
                Opts::new(
                    "controller_runtime_reconcile_total",
                    "Total number of reconciliations per controller",
                ),
                &["controller", "result"],
            )?,
        )?;
        let reconcile_errors_total = register(
            &registry,
            IntCounterVec::new(
                Opts::new(
                    "controller_runtime_reconcile_errors_total",
                    "Total number of reconciliation errors per controller",
                ),
                &["controller"],
            )?,
        )?;
        let reconcile_time_seconds = register(
            &registry,
            HistogramVec::new(
                HistogramOpts::new(
                    "controller_runtime_reconcile_time_seconds",
                    "Length of time per reconciliation per controller",
                )
                .buckets(RECONCILE_TIME_BUCKETS.to_vec()),
                &["controller"],
            )?,
        )?;
        let active_workers = register(
            &registry,
            IntGaugeVec::new(
                Opts::new(
                    "controller_runtime_active_workers",
                    "Number of currently used workers per controller",
                ),
                &["controller"],
            )?,
        )?;
        let max_concurrent_reconciles = register(
            &registry,
            IntGaugeVec::new(
                Opts::new(
                    "controller_runtime_max_concurrent_reconciles",
                    "Maximum number of concurrent reconciles per controller",
                ),
                &["controller"],
            )?,
        )?;
        Ok(Self {
            registry,
            reconcile_total,
            reconcile_errors_total,
            reconcile_time_seconds,
            active_workers,
            max_concurrent_reconciles,
        })
    }

    /// Announces a controller as controller-runtime does when it starts: sets
    /// `max_concurrent_reconciles` and creates every `reconcile_total` result, the error
    /// counter and the active-worker gauge at zero, so dashboards show 0 rather than no data.
    pub fn register_controller(&self, controller: &str, max_concurrent_reconciles: usize) {
        let max = i64::try_from(max_concurrent_reconciles).unwrap_or(i64::MAX);
        self.max_concurrent_reconciles
            .with_label_values(&[controller])
            .set(max);
        for outcome in ReconcileOutcome::ALL {
            self.reconcile_total
                .with_label_values(&[controller, outcome.as_str()]);
        }
        self.reconcile_errors_total.with_label_values(&[controller]);
        self.active_workers.with_label_values(&[controller]);
    }

    /// Starts timing one reconcile of `controller` and counts it as an active worker until the
    /// returned guard is finished or dropped.
    pub fn reconcile_timer(&self, controller: &str) -> ReconcileTimer {
        let active = self.active_workers.with_label_values(&[controller]);
        active.inc();
        ReconcileTimer {
            start: Instant::now(),
            controller: controller.to_owned(),
            active,
            duration: self.reconcile_time_seconds.with_label_values(&[controller]),
            total: self.reconcile_total.clone(),
            errors: self.reconcile_errors_total.with_label_values(&[controller]),
            finished: false,
        }
    }

    /// The registry in Prometheus text exposition format 0.0.4.
    ///
    /// # Errors
    ///
    /// [`Error::Metrics`] if a family cannot be encoded (e.g. an invalid label set registered
    /// by a binary).
    pub fn encode(&self) -> Result<String, Error> {
        Ok(TextEncoder::new().encode_to_string(&self.registry.gather())?)
    }
}

/// Times one reconcile. Call [`finish`](Self::finish) with how it ended; a guard dropped without
/// `finish` (early return, `?`, panic, cancelled future) counts as an error, so nothing is lost.
#[must_use = "a reconcile timer dropped at once records a zero-length failed reconcile"]
#[derive(Debug)]
pub struct ReconcileTimer {
    start: Instant,
    controller: String,
    active: IntGauge,
    duration: Histogram,
    total: IntCounterVec,
    errors: IntCounter,
    finished: bool,
}

impl ReconcileTimer {
    /// Records the duration and the outcome, and frees the worker.
    pub fn finish(mut self, outcome: ReconcileOutcome) {
        self.record(outcome);
    }

    fn record(&mut self, outcome: ReconcileOutcome) {
        if self.finished {
            return;
        }
        self.finished = true;
        self.duration.observe(self.start.elapsed().as_secs_f64());
        self.active.dec();
        self.total
            .with_label_values(&[self.controller.as_str(), outcome.as_str()])
            .inc();
        if outcome == ReconcileOutcome::Error {
            self.errors.inc();
        }
    }
}

impl Drop for ReconcileTimer {
    fn drop(&mut self) {
        self.record(ReconcileOutcome::Error);
    }
}

#[cfg(test)]
mod tests {
    use super::{Metrics, ReconcileOutcome};
    use prometheus::proto::MetricFamily;

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    #[test]
    fn a_requeue_is_labelled_requeue_after_and_only_await_change_is_success() {
        use kube::runtime::controller::Action;
        use std::time::Duration;
        let ok = |a: Action| ReconcileOutcome::of(&Ok::<_, ()>(a));
        assert_eq!(ok(Action::await_change()), ReconcileOutcome::Success);
        assert_eq!(
            ok(Action::requeue(Duration::from_secs(30))),
            ReconcileOutcome::RequeueAfter
        );
        assert_eq!(
            ReconcileOutcome::of(&Err::<Action, _>("x")),
            ReconcileOutcome::Error
        );
    }

    fn family(metrics: &Metrics, name: &str) -> Option<MetricFamily> {
        metrics
            .registry
            .gather()
            .into_iter()
            .find(|f| f.name() == name)
    }

    /// The metric in `name` whose labels are exactly `labels`.
    fn find(
        metrics: &Metrics,
        name: &str,
        labels: &[(&str, &str)],
    ) -> Option<prometheus::proto::Metric> {
        family(metrics, name)?.get_metric().iter().find_map(|m| {
            let got: Vec<(&str, &str)> = m
                .get_label()
                .iter()
                .map(|l| (l.name(), l.value()))
                .collect();
            let mut want = labels.to_vec();
            want.sort_unstable();
            let mut got = got;
            got.sort_unstable();
            (got == want).then(|| m.clone())
        })
    }

    fn counter(metrics: &Metrics, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        find(metrics, name, labels).map(|m| m.get_counter().get_value())
    }

    fn gauge(metrics: &Metrics, name: &str, controller: &str) -> Option<f64> {
        find(metrics, name, &[("controller", controller)]).map(|m| m.get_gauge().get_value())
    }

    fn observations(metrics: &Metrics, controller: &str) -> Option<u64> {
        find(
            metrics,
            "controller_runtime_reconcile_time_seconds",
            &[("controller", controller)],
        )
        .map(|m| m.get_histogram().get_sample_count())
    }

    fn total(metrics: &Metrics, controller: &str, result: &str) -> Option<f64> {
        counter(
            metrics,
            "controller_runtime_reconcile_total",
            &[("controller", controller), ("result", result)],
        )
    }

    fn errors(metrics: &Metrics, controller: &str) -> Option<f64> {
        counter(
            metrics,
            "controller_runtime_reconcile_errors_total",
            &[("controller", controller)],
        )
    }

    #[test]
    fn finished_timers_count_each_result_and_free_their_workers() -> TestResult {
        let metrics = Metrics::new()?;
        metrics
            .reconcile_timer("catalog")
            .finish(ReconcileOutcome::Success);
        metrics
            .reconcile_timer("catalog")
            .finish(ReconcileOutcome::Success);
        metrics
            .reconcile_timer("catalog")
            .finish(ReconcileOutcome::Requeue);
        metrics
            .reconcile_timer("catalog")
            .finish(ReconcileOutcome::RequeueAfter);
        metrics
            .reconcile_timer("catalog")
            .finish(ReconcileOutcome::Error);

        assert_eq!(total(&metrics, "catalog", "success"), Some(2.0));
        assert_eq!(total(&metrics, "catalog", "requeue"), Some(1.0));
        assert_eq!(total(&metrics, "catalog", "requeue_after"), Some(1.0));
        assert_eq!(total(&metrics, "catalog", "error"), Some(1.0));
        assert_eq!(errors(&metrics, "catalog"), Some(1.0));
        assert_eq!(observations(&metrics, "catalog"), Some(5));
        assert_eq!(
            gauge(&metrics, "controller_runtime_active_workers", "catalog"),
            Some(0.0)
        );
        Ok(())
    }

    #[test]
    fn running_timers_are_active_workers_until_finished() -> TestResult {
        let metrics = Metrics::new()?;
        let first = metrics.reconcile_timer("operator");
        let second = metrics.reconcile_timer("operator");
        assert_eq!(
            gauge(&metrics, "controller_runtime_active_workers", "operator"),
            Some(2.0)
        );
        // Nothing is counted or observed before a reconcile ends.
        assert_eq!(total(&metrics, "operator", "success"), None);
        assert_eq!(observations(&metrics, "operator"), Some(0));

        first.finish(ReconcileOutcome::Success);
        assert_eq!(
            gauge(&metrics, "controller_runtime_active_workers", "operator"),
            Some(1.0)
        );
        second.finish(ReconcileOutcome::Success);
        assert_eq!(
            gauge(&metrics, "controller_runtime_active_workers", "operator"),
            Some(0.0)
        );
        Ok(())
    }

    #[test]
    fn a_timer_dropped_without_finish_counts_as_an_error() -> TestResult {
        let metrics = Metrics::new()?;
        {
            let _timer = metrics.reconcile_timer("switcher");
        }
        assert_eq!(total(&metrics, "switcher", "error"), Some(1.0));
        assert_eq!(errors(&metrics, "switcher"), Some(1.0));
        assert_eq!(total(&metrics, "switcher", "success"), None);
        assert_eq!(observations(&metrics, "switcher"), Some(1));
        assert_eq!(
            gauge(&metrics, "controller_runtime_active_workers", "switcher"),
            Some(0.0)
        );
        Ok(())
    }

    #[test]
    fn finishing_records_once_not_again_on_drop() -> TestResult {
        let metrics = Metrics::new()?;
        metrics
            .reconcile_timer("c")
            .finish(ReconcileOutcome::Success);
        assert_eq!(total(&metrics, "c", "success"), Some(1.0));
        assert_eq!(total(&metrics, "c", "error"), None);
        assert_eq!(errors(&metrics, "c"), Some(0.0));
        assert_eq!(observations(&metrics, "c"), Some(1));
        Ok(())
    }

    #[test]
    fn controllers_are_counted_apart() -> TestResult {
        let metrics = Metrics::new()?;
        metrics.reconcile_timer("a").finish(ReconcileOutcome::Error);
        metrics
            .reconcile_timer("b")
            .finish(ReconcileOutcome::Success);
        assert_eq!(errors(&metrics, "a"), Some(1.0));
        assert_eq!(errors(&metrics, "b"), Some(0.0));
        assert_eq!(total(&metrics, "b", "success"), Some(1.0));
        assert_eq!(total(&metrics, "a", "success"), None);
        Ok(())
    }

    #[test]
    fn registering_a_controller_shows_zeroes_and_its_concurrency() -> TestResult {
        let metrics = Metrics::new()?;
        metrics.register_controller("catalog", 4);
        for outcome in ReconcileOutcome::ALL {
            assert_eq!(total(&metrics, "catalog", outcome.as_str()), Some(0.0));
        }
        assert_eq!(errors(&metrics, "catalog"), Some(0.0));
        assert_eq!(
            gauge(&metrics, "controller_runtime_active_workers", "catalog"),
            Some(0.0)
        );
        assert_eq!(
            gauge(
                &metrics,
                "controller_runtime_max_concurrent_reconciles",
                "catalog"
            ),
            Some(4.0)
        );
        Ok(())
    }

    #[test]
    fn reconcile_time_uses_controller_runtime_buckets() -> TestResult {
        let metrics = Metrics::new()?;
        metrics
            .reconcile_timer("c")
            .finish(ReconcileOutcome::Success);
        let histogram = find(
            &metrics,
            "controller_runtime_reconcile_time_seconds",
            &[("controller", "c")],
        )
        .ok_or("no histogram for controller c")?;
        let bounds: Vec<f64> = histogram
            .get_histogram()
            .get_bucket()
            .iter()
            .map(|b| b.upper_bound())
            .collect();
        assert_eq!(bounds.len(), 40);
        assert_eq!(bounds.first(), Some(&0.005));
        assert_eq!(bounds.last(), Some(&60.0));
        assert_eq!(bounds, super::RECONCILE_TIME_BUCKETS);
        Ok(())
    }

    #[test]
    fn text_encoding_names_the_controller_runtime_families() -> TestResult {
        let metrics = Metrics::new()?;
        metrics.register_controller("catalog", 1);
        metrics
            .reconcile_timer("catalog")
            .finish(ReconcileOutcome::Success);
        let text = metrics.encode()?;
        assert!(
            text.contains(
                r#"controller_runtime_reconcile_total{controller="catalog",result="success"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains(r#"controller_runtime_reconcile_errors_total{controller="catalog"} 0"#),
            "{text}"
        );
        assert!(
            text.contains(
                r#"controller_runtime_reconcile_time_seconds_count{controller="catalog"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#"controller_runtime_max_concurrent_reconciles{controller="catalog"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains(r#"controller_runtime_active_workers{controller="catalog"} 0"#),
            "{text}"
        );
        Ok(())
    }
}
