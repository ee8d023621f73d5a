//! The provisioner's own metric families (docs/provisioner.md), registered on every replica so
//! that followers show them too; the controller-runtime families come from the shared runtime.

use olm_runtime::metrics::register;
use prometheus::{Histogram, HistogramOpts, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry};

/// `provisioner_*`.
#[derive(Clone)]
pub struct ProvisionerMetrics {
    /// `provisioner_unpack_duration_seconds`: fetching and reading a template's content.
    pub unpack_duration: Histogram,
    /// `provisioner_apply_duration_seconds`: one sync of a set (apply, prune).
    pub apply_duration: Histogram,
    /// `provisioner_render_duration_seconds`: one `helm template` or `kustomize build`.
    pub render_duration: Histogram,
    /// `provisioner_managed_objects{bundle_deployment}`: the objects of each applied set.
    pub managed_objects: IntGaugeVec,
    /// `provisioner_install_results_total{reason}`: attempts, by the Installed condition's
    /// reason (or the reason that stopped them before it).
    pub results: IntCounterVec,
    /// `provisioner_drift_watches`: the group-kinds whose applied objects are watched.
    pub drift_watches: IntGauge,
}

impl ProvisionerMetrics {
    /// The families, registered in `registry`.
    ///
    /// # Errors
    ///
    /// When a family cannot be made or is registered already.
    pub fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let buckets = vec![
            0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
        ];
        let unpack_duration = register(registry, Histogram::with_opts(
            HistogramOpts::new(
                "provisioner_unpack_duration_seconds",
                "How long fetching and reading a template's content took (an image pull, ConfigMaps), successful or not.",
            )
            .buckets(buckets.clone()),
        )?)?;
        let apply_duration = register(registry, Histogram::with_opts(
            HistogramOpts::new(
                "provisioner_apply_duration_seconds",
                "How long applying a bundle's objects and pruning the old set's took, successful or not.",
            )
            .buckets(buckets.clone()),
        )?)?;
        let render_duration = register(registry, Histogram::with_opts(
            HistogramOpts::new(
                "provisioner_render_duration_seconds",
                "How long rendering a Helm chart or a kustomization took (waiting for a render slot included), successful or not.",
            )
            .buckets(buckets),
        )?)?;
        let managed_objects = register(
            registry,
            IntGaugeVec::new(
                Opts::new(
                    "provisioner_managed_objects",
                    "Objects in each BundleDeployment's applied set.",
                ),
                &["bundle_deployment"],
            )?,
        )?;
        let results = register(
            registry,
            IntCounterVec::new(
                Opts::new(
                    "provisioner_install_results_total",
                    "Install attempts, by reason (InstallationSucceeded, Conflict, InstallFailed, UpgradeFailed, UnpackFailed, BundleLoadFailed, KindNotAllowed, ...).",
                ),
                &["reason"],
            )?,
        )?;
        let drift_watches = register(
            registry,
            IntGauge::new(
                "provisioner_drift_watches",
                "Group-kinds watched for drift: those some installed BundleDeployment applies (a watch stops when none does).",
            )?,
        )?;
        Ok(Self {
            unpack_duration,
            apply_duration,
            render_duration,
            managed_objects,
            results,
            drift_watches,
        })
    }
}
