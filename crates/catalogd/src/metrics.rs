//! catalogd's own metric families (the controller-runtime ones come from olm-runtime, the HTTP
//! server's from the content server).

use olm_runtime::metrics::register;
use prometheus::{HistogramOpts, HistogramVec, IntGaugeVec, Opts, Registry};

/// catalogd_* metrics.
#[derive(Clone)]
pub struct CatalogdMetrics {
    /// Time to fetch, parse, validate and store a catalog, by source type and result.
    pub unpack_duration: HistogramVec,
    /// Size of each catalog's served content.
    pub content_bytes: IntGaugeVec,
    /// Number of catalogs in each phase.
    pub catalogs: IntGaugeVec,
}

impl CatalogdMetrics {
    /// Registers the families in `registry`.
    pub fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let unpack_duration = register(
            registry,
            HistogramVec::new(
                HistogramOpts::new(
                    "catalogd_unpack_duration_seconds",
                    "Time to fetch, parse, validate and store a catalog.",
                )
                .buckets(vec![
                    0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
                ]),
                &["source_type", "result"],
            )?,
        )?;
        let content_bytes = register(
            registry,
            IntGaugeVec::new(
                Opts::new(
                    "catalogd_catalog_content_bytes",
                    "Size in bytes of the content served for each catalog.",
                ),
                &["catalog"],
            )?,
        )?;
        let catalogs = register(
            registry,
            IntGaugeVec::new(
                Opts::new("catalogd_catalogs", "Number of Catalogs in each phase."),
                &["phase"],
            )?,
        )?;
        Ok(Self {
            unpack_duration,
            content_bytes,
            catalogs,
        })
    }
}
