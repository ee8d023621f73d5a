//! The Operator's conditions, as pure functions of what was decided and what the
//! BundleDeployment reports. Reasons are upstream's where upstream has one.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use olm_api::bundle_deployment::BundleDeployment;
use olm_api::conditions::find_condition;
use olm_resolver::resolve::{Deprecated, Notice};

/// Condition types.
pub mod types {
    /// Whether a bundle was resolved.
    pub const RESOLVED: &str = "Resolved";
    /// Whether the BundleDeployment installed it.
    pub const INSTALLED: &str = "Installed";
    /// Whether the catalog deprecates the package, the requested channel or the bundle.
    pub const DEPRECATED: &str = "Deprecated";
    /// Whether what is installed works: the BundleDeployment's own `Healthy` condition.
    pub const HEALTHY: &str = "Healthy";
}

/// Condition reasons.
pub mod reasons {
    /// Resolved or installed.
    pub const SUCCESS: &str = "Success";
    /// No bundle satisfies the spec (with the others).
    pub const RESOLUTION_FAILED: &str = "ResolutionFailed";
    /// The catalogs could not be read; nothing was decided.
    pub const RESOLUTION_UNKNOWN: &str = "ResolutionUnknown";
    /// The spec cannot be acted on (a version range that does not parse).
    pub const INVALID_SPEC: &str = "InvalidSpec";
    /// The BundleDeployment failed, or could not be written.
    pub const INSTALLATION_FAILED: &str = "InstallationFailed";
    /// The BundleDeployment has not reported (yet).
    pub const INSTALLATION_STATUS_UNKNOWN: &str = "InstallationStatusUnknown";
    /// The package is deprecated.
    pub const PACKAGE_DEPRECATED: &str = "PackageDeprecated";
    /// The requested channel is deprecated.
    pub const CHANNEL_DEPRECATED: &str = "ChannelDeprecated";
    /// The resolved bundle is deprecated.
    pub const BUNDLE_DEPRECATED: &str = "BundleDeprecated";
    /// Nothing is deprecated.
    pub const NOT_DEPRECATED: &str = "NotDeprecated";
    /// Nothing was resolved, so deprecation is not known.
    pub const NOT_RESOLVED: &str = "NotResolved";
    /// Every workload and API of the installed bundle is ready.
    pub const HEALTHY: &str = "Healthy";
    /// A workload or API of the installed bundle is not ready; the message names it.
    pub const UNHEALTHY: &str = "Unhealthy";
    /// Nothing is installed, so nothing can be healthy (see `Installed`).
    pub const NOT_INSTALLED: &str = "NotInstalled";
    /// The provisioner has not reported on the current BundleDeployment (yet).
    pub const HEALTH_STATUS_UNKNOWN: &str = "HealthStatusUnknown";
}

/// A condition; `status` is `True`, `False` or `Unknown`.
pub fn condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: impl Into<String>,
    generation: Option<i64>,
    now: &Time,
) -> Condition {
    Condition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message: message.into(),
        observed_generation: generation,
        last_transition_time: now.clone(),
    }
}

/// Why the BundleDeployment's conditions do not describe its current spec, if they do not:
/// the provisioner has not observed its latest generation.
fn stale(bd: &BundleDeployment) -> Option<String> {
    let seen = bd.status.as_ref().and_then(|s| s.observed_generation)?;
    let current = bd.metadata.generation?;
    (seen < current).then(|| {
        format!(
            "waiting for the provisioner to observe generation {current} of the bundledeployment (it reported on {seen})"
        )
    })
}

/// What the BundleDeployment says of the installation: the `Installed` condition's status,
/// reason and message, and the installed image when it is installed.
pub fn installed_from(
    bd: &BundleDeployment,
) -> (&'static str, &'static str, String, Option<String>) {
    if let Some(message) = stale(bd) {
        return (
            "Unknown",
            reasons::INSTALLATION_STATUS_UNKNOWN,
            message,
            None,
        );
    }
    let status = bd.status.as_ref();
    match status.and_then(|s| find_condition(&s.conditions, types::INSTALLED)) {
        None => (
            "Unknown",
            reasons::INSTALLATION_STATUS_UNKNOWN,
            "bundledeployment status is unknown".to_owned(),
            None,
        ),
        Some(c) if c.status == "True" => {
            let image = crate::bundle_deployment::image_of(bd)
                .unwrap_or_default()
                .to_owned();
            (
                "True",
                reasons::SUCCESS,
                format!("installed from {image:?}"),
                Some(image),
            )
        }
        Some(c) => (
            "False",
            reasons::INSTALLATION_FAILED,
            format!("bundledeployment not ready: {}", c.message),
            None,
        ),
    }
}

/// What the BundleDeployment says of the installed operator's health: the `Healthy`
/// condition's status, reason and message, its message carried over word for word (it names
/// the first workload that is not ready, in that workload's words).
pub fn healthy_from(bd: &BundleDeployment) -> (&'static str, &'static str, String) {
    if let Some(message) = stale(bd) {
        return ("Unknown", reasons::HEALTH_STATUS_UNKNOWN, message);
    }
    let found = bd
        .status
        .as_ref()
        .and_then(|s| find_condition(&s.conditions, types::HEALTHY));
    match found {
        Some(c) if c.status == "True" => ("True", reasons::HEALTHY, c.message.clone()),
        // The provisioner's reason for a workload that is not ready; any other False reason
        // means nothing is installed to look at.
        Some(c) if c.status == "False" && c.reason == reasons::UNHEALTHY => {
            ("False", reasons::UNHEALTHY, c.message.clone())
        }
        Some(c) if c.status == "False" => ("False", reasons::NOT_INSTALLED, c.message.clone()),
        _ => (
            "Unknown",
            reasons::HEALTH_STATUS_UNKNOWN,
            "the provisioner has not reported the bundledeployment's health".to_owned(),
        ),
    }
}

/// The `Deprecated` condition's status, reason and message for a resolved bundle's notices:
/// the reason names the widest notice (package, then channel, then bundle); the message has
/// them all.
pub fn deprecation(notices: &[Notice]) -> (&'static str, &'static str, String) {
    let Some(first) = notices.iter().min_by_key(|n| n.what) else {
        return ("False", reasons::NOT_DEPRECATED, String::new());
    };
    let reason = match first.what {
        Deprecated::Package => reasons::PACKAGE_DEPRECATED,
        Deprecated::Channel => reasons::CHANNEL_DEPRECATED,
        Deprecated::Bundle => reasons::BUNDLE_DEPRECATED,
    };
    let message = notices
        .iter()
        .map(|n| n.message.trim())
        .collect::<Vec<_>>()
        .join("; ");
    ("True", reason, message)
}
