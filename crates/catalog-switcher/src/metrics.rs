//! The switcher's own metric families (docs/operations.md), registered on every replica so
//! that followers show them too.

use olm_runtime::metrics::register;
use prometheus::{IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry};

/// `catalog_switcher_*`.
#[derive(Clone)]
pub struct SwitcherMetrics {
    /// `catalog_switcher_template_resolutions_total{result}`.
    pub resolutions: IntCounterVec,
    /// `catalog_switcher_server_version_info{git_version}`.
    pub version_info: IntGaugeVec,
    /// `catalog_switcher_watched_objects`.
    pub watched: IntGauge,
}

impl SwitcherMetrics {
    /// The families, registered in `registry`.
    ///
    /// # Errors
    ///
    /// When a family cannot be made or is registered already.
    pub fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let resolutions = register(
            registry,
            IntCounterVec::new(
                Opts::new(
                    "catalog_switcher_template_resolutions_total",
                    "Templates filled, by result (resolved, unresolved, not_allowed).",
                ),
                &["result"],
            )?,
        )?;
        let version_info = register(
            registry,
            IntGaugeVec::new(
                Opts::new(
                    "catalog_switcher_server_version_info",
                    "The API server's version, as last polled (value 1).",
                ),
                &["git_version"],
            )?,
        )?;
        let watched = register(
            registry,
            IntGauge::new(
                "catalog_switcher_watched_objects",
                "Objects watched because a template reads them.",
            )?,
        )?;
        Ok(Self {
            resolutions,
            version_info,
            watched,
        })
    }
}
