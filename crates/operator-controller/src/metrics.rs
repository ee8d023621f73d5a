//! operator-controller's own metric families (the controller-runtime ones come from
//! olm-runtime). Labels stay bounded: no object names.

use olm_runtime::metrics::register;
use prometheus::{Histogram, HistogramOpts, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry};

/// The content client's families.
#[derive(Clone, Debug)]
pub struct ContentMetrics {
    /// Bytes of catalog content held in memory (each hash once).
    pub cache_bytes: IntGauge,
    /// Content fetches by result: `downloaded`, `not_modified`, `error`.
    pub fetches: IntCounterVec,
}

/// The resolver's and the controller's families.
#[derive(Clone, Debug)]
pub struct OperatorMetrics {
    /// Time of one joint solve of a group of Operators.
    pub resolution_duration: Histogram,
    /// Operators by the status of their `Resolved` and `Installed` conditions.
    pub operators: IntGaugeVec,
}

/// Every family, registered.
#[derive(Clone, Debug)]
pub struct AllMetrics {
    /// Content client.
    pub content: ContentMetrics,
    /// Resolution and Operators.
    pub operators: OperatorMetrics,
}

impl AllMetrics {
    /// Registers the families in `registry`.
    pub fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let cache_bytes = register(
            registry,
            IntGauge::new(
                "operator_controller_catalog_cache_bytes",
                "Bytes of catalog content held in memory for resolution (each content hash once).",
            )?,
        )?;
        let fetches = register(
            registry,
            IntCounterVec::new(
                Opts::new(
                    "operator_controller_catalog_fetches_total",
                    "Catalog content fetches from catalogd, by result (downloaded, not_modified, error).",
                ),
                &["result"],
            )?,
        )?;
        let resolution_duration = register(registry, Histogram::with_opts(
            HistogramOpts::new(
                "operator_controller_resolution_duration_seconds",
                "Time of one joint resolution of a group of Operators that can affect each other.",
            )
            .buckets(vec![
                0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0,
            ]),
        )?)?;
        let operators = register(
            registry,
            IntGaugeVec::new(
                Opts::new(
                    "operator_controller_operators",
                    "Operators by the status (True, False, Unknown) of their Resolved and Installed conditions.",
                ),
                &["resolved", "installed"],
            )?,
        )?;
        for result in ["downloaded", "not_modified", "error"] {
            fetches.with_label_values(&[result]);
        }
        Ok(Self {
            content: ContentMetrics {
                cache_bytes,
                fetches,
            },
            operators: OperatorMetrics {
                resolution_duration,
                operators,
            },
        })
    }
}
