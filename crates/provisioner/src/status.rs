//! What a BundleDeployment's status says after a reconcile: a pure function of what is
//! installed, what is wanted and how this attempt went, with the clock injected.
//!
//! Four conditions, each about one thing:
//! * `Unpacked`: whether the wanted template's content was fetched (Unknown while it is).
//! * `HasValidBundle`: whether that content is an installable bundle of its format.
//! * `Healthy`: whether what is installed works ([`crate::health`]), on by default.
//! * `Installed`: whether the wanted template is what is installed. A failed upgrade says so
//!   (`UpgradeFailed`, naming the object and quoting the API server) while `activeBundle` keeps
//!   naming the version that still runs; a template change that cannot even be unpacked
//!   leaves `Installed` as it was, the failure on `Unpacked`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use olm_api::conditions::{clip_message, set_condition};

/// Condition types.
pub mod types {
    /// The wanted content was fetched.
    pub const UNPACKED: &str = "Unpacked";
    /// The content is a bundle of its format.
    pub const HAS_VALID_BUNDLE: &str = "HasValidBundle";
    /// The wanted template is installed.
    pub const INSTALLED: &str = "Installed";
    /// What is installed works (workloads rolled out and available, APIs established).
    pub const HEALTHY: &str = "Healthy";
}

/// Condition reasons (upstream's where it had one).
pub mod reasons {
    /// Being fetched.
    pub const UNPACK_PENDING: &str = "UnpackPending";
    /// Fetched.
    pub const UNPACK_SUCCESSFUL: &str = "UnpackSuccessful";
    /// Could not be fetched.
    pub const UNPACK_FAILED: &str = "UnpackFailed";
    /// The values of `valuesFrom` are larger than the provisioner accepts (a bundle too large
    /// is `UnpackFailed`, its message saying so).
    pub const CONTENT_TOO_LARGE: &str = "ContentTooLarge";
    /// Fetched, but not a bundle of its format.
    pub const BUNDLE_LOAD_FAILED: &str = "BundleLoadFailed";
    /// Installed.
    pub const INSTALLATION_SUCCEEDED: &str = "InstallationSucceeded";
    /// Nothing installed yet, and the first install failed.
    pub const INSTALL_FAILED: &str = "InstallFailed";
    /// Another version is installed, and this one failed.
    pub const UPGRADE_FAILED: &str = "UpgradeFailed";
    /// Objects of the bundle exist and are not ours.
    pub const CONFLICT: &str = "Conflict";
    /// A CRD of the bundle exists, and its new version could lose or reject existing data.
    pub const CRD_UPGRADE_UNSAFE: &str = "CRDUpgradeUnsafe";
    /// The namespaces asked make an install mode the bundle does not support (or none can be
    /// defaulted to).
    pub const UNSUPPORTED_INSTALL_MODE: &str = "UnsupportedInstallMode";
    /// An upgrade would move the install namespace, and the admin did not allow it.
    pub const NAMESPACE_CHANGE_REFUSED: &str = "InstallNamespaceChangeRefused";
    /// Waiting for the content.
    pub const INSTALL_PENDING: &str = "InstallPending";
    /// The installed version's objects could not all be restored.
    pub const RECONCILE_FAILED: &str = "ReconcileFailed";
    /// Being deleted, and an applied object could not be removed.
    pub const UNINSTALL_FAILED: &str = "UninstallFailed";
    /// An object of the bundle would go to a namespace bundles may not use (the managers',
    /// or one `--allowed-namespaces` does not list).
    pub const NAMESPACE_NOT_ALLOWED: &str = "NamespaceNotAllowed";
    /// The bundle holds a kind the admin did not allow (`--allowed-kinds`).
    pub const KIND_NOT_ALLOWED: &str = "KindNotAllowed";
    /// Applying an object failed (metrics and events; the condition says which install).
    pub const APPLY_FAILED: &str = "ApplyFailed";
    /// A chart's values are not YAML of a map, or do not meet its `values.schema.json`
    /// (the message is Helm's).
    pub const INVALID_VALUES: &str = "InvalidValues";
    /// A `valuesFrom` entry names a Secret, ConfigMap or key that does not exist.
    pub const VALUES_NOT_FOUND: &str = "ValuesNotFound";
    /// A `valuesFrom` entry names a Secret or ConfigMap not labelled `olm-rs.io/values=true`.
    pub const VALUES_NOT_ALLOWED: &str = "ValuesNotAllowed";
    /// Helm or kustomize refused to render the bundle (the message is theirs).
    pub const RENDER_FAILED: &str = "RenderFailed";
    /// Rendering ran past its time, memory or output limit and was stopped.
    pub const RENDER_STOPPED: &str = "RenderStopped";
    /// A chart's dependency is not vendored in its `charts/` directory.
    pub const DEPENDENCY_NOT_VENDORED: &str = "DependencyNotVendored";
    /// A kustomization names a remote base or resource.
    pub const REMOTE_REFERENCE_REFUSED: &str = "RemoteReferenceRefused";
    /// Every workload and API of the installed bundle is ready.
    pub const HEALTHY: &str = "Healthy";
    /// One is not (the message names it).
    pub const UNHEALTHY: &str = "Unhealthy";
    /// Nothing is installed, so nothing can be healthy.
    pub const INSTALLATION_STATUS_FALSE: &str = "InstallationStatusFalse";
}

/// A template by its bundle name, `<bd>-<hash>` (`status.activeBundle`): the name is all a
/// status keeps, so it is what identifies a template (its hash cut as the name cuts it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    /// `<bd>-<hash>`.
    pub bundle: String,
}

/// How this attempt at the wanted template went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// Its content is being fetched.
    Unpacking(String),
    /// Its content could not be fetched.
    UnpackFailed(String),
    /// Its content is not an installable bundle (`reason` says which rule it broke).
    Invalid {
        /// The condition reason.
        reason: &'static str,
        /// Sentences a person can act on.
        message: String,
    },
    /// Objects of it exist and are not ours (the message names them and their owners).
    Conflicts(String),
    /// A CRD change is unsafe (the message lists each violation).
    UnsafeCrdUpgrade(String),
    /// The upgrade would move the install namespace (the message says from where to where).
    NamespaceMove(String),
    /// The install mode asked is not one the bundle supports (the message names both).
    InstallMode(String),
    /// Applying an object failed (the message names it and quotes the API server).
    ApplyFailed(String),
    /// Every object applied, and what the old set had beyond it was removed.
    Applied,
}

impl Attempt {
    /// What it says, in sentences (empty for an attempt that applied).
    pub fn message(&self) -> String {
        match self {
            Attempt::Invalid { message, .. } => message.clone(),
            Attempt::Unpacking(m)
            | Attempt::UnpackFailed(m)
            | Attempt::Conflicts(m)
            | Attempt::UnsafeCrdUpgrade(m)
            | Attempt::NamespaceMove(m)
            | Attempt::InstallMode(m)
            | Attempt::ApplyFailed(m) => m.clone(),
            Attempt::Applied => String::new(),
        }
    }

    /// The reason this attempt is counted and announced under.
    pub fn reason(&self) -> &'static str {
        match self {
            Attempt::Unpacking(_) => reasons::UNPACK_PENDING,
            Attempt::UnpackFailed(_) => reasons::UNPACK_FAILED,
            Attempt::Invalid { reason, .. } => reason,
            Attempt::Conflicts(_) => reasons::CONFLICT,
            Attempt::UnsafeCrdUpgrade(_) => reasons::CRD_UPGRADE_UNSAFE,
            Attempt::NamespaceMove(_) => reasons::NAMESPACE_CHANGE_REFUSED,
            Attempt::InstallMode(_) => reasons::UNSUPPORTED_INSTALL_MODE,
            Attempt::ApplyFailed(_) => reasons::APPLY_FAILED,
            Attempt::Applied => reasons::INSTALLATION_SUCCEEDED,
        }
    }
}

/// The status to write.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// The conditions, updated in place (unchanged ones keep their transition time).
    pub conditions: Vec<Condition>,
    /// What is installed after this attempt.
    pub installed: Option<Installed>,
}

/// The status after `attempt` at the template `wanted` (with its bundle name), given what
/// was `installed` and the `previous` conditions.
pub fn verdict(
    previous: &[Condition],
    installed: Option<&Installed>,
    wanted: &Installed,
    attempt: &Attempt,
    generation: Option<i64>,
    now: &Time,
) -> Verdict {
    let mut conditions = previous.to_vec();
    let mut set = |type_: &str, status: &str, reason: &str, message: String| {
        set_condition(
            &mut conditions,
            Condition {
                type_: type_.to_owned(),
                status: status.to_owned(),
                reason: reason.to_owned(),
                message: clip_message(message),
                observed_generation: generation,
                last_transition_time: now.clone(),
            },
        );
    };
    let bundle = &wanted.bundle;
    let upgrading = installed.filter(|i| *i != wanted);
    let current = installed.filter(|i| *i == wanted);
    // How an install that did not happen is told: first install, upgrade, or the installed
    // version itself.
    let failed = |what: &str| -> (&'static str, String) {
        match (current, upgrading) {
            (Some(_), _) => (
                reasons::RECONCILE_FAILED,
                format!("{bundle} is installed, but restoring its objects failed: {what}"),
            ),
            (None, Some(old)) => (
                reasons::UPGRADE_FAILED,
                format!(
                    "{bundle} could not be installed: {what}; {} stays installed and nothing was removed",
                    old.bundle
                ),
            ),
            (None, None) => (
                reasons::INSTALL_FAILED,
                format!("{bundle} could not be installed: {what}"),
            ),
        }
    };
    let mut installed_after = installed.cloned();
    let waiting = || format!("waiting for {bundle} to be unpacked");
    let unpacked = || {
        (
            "True",
            reasons::UNPACK_SUCCESSFUL,
            format!("unpacked {bundle}"),
        )
    };
    // `Unpacked` and `HasValidBundle` say how far the attempt got.
    let (fetched, valid) = match attempt {
        Attempt::Unpacking(m) => (
            ("Unknown", reasons::UNPACK_PENDING, m.clone()),
            ("Unknown", reasons::UNPACK_PENDING, waiting()),
        ),
        Attempt::UnpackFailed(m) => (
            ("False", reasons::UNPACK_FAILED, m.clone()),
            (
                "False",
                reasons::UNPACK_FAILED,
                format!("{bundle} could not be unpacked"),
            ),
        ),
        Attempt::Invalid { reason, message } => (unpacked(), ("False", *reason, message.clone())),
        Attempt::Conflicts(_)
        | Attempt::UnsafeCrdUpgrade(_)
        | Attempt::NamespaceMove(_)
        | Attempt::InstallMode(_)
        | Attempt::ApplyFailed(_)
        | Attempt::Applied => (
            unpacked(),
            (
                "True",
                reasons::UNPACK_SUCCESSFUL,
                format!("{bundle} is a valid bundle"),
            ),
        ),
    };
    set(types::UNPACKED, fetched.0, fetched.1, fetched.2);
    set(types::HAS_VALID_BUNDLE, valid.0, valid.1, valid.2);
    // `Installed` says whether the wanted template is what is installed; content that could
    // not even be fetched changes nothing about an installed version.
    match attempt {
        Attempt::Unpacking(_) if installed.is_none() => {
            set(
                types::INSTALLED,
                "False",
                reasons::INSTALL_PENDING,
                waiting(),
            );
        }
        Attempt::UnpackFailed(m) if installed.is_none() => set(
            types::INSTALLED,
            "False",
            reasons::INSTALL_FAILED,
            format!("{bundle} could not be unpacked: {m}"),
        ),
        Attempt::Unpacking(_) | Attempt::UnpackFailed(_) => {}
        Attempt::Invalid { message, .. } | Attempt::ApplyFailed(message) => {
            let (why, text) = failed(message);
            set(types::INSTALLED, "False", why, text);
        }
        Attempt::Conflicts(message) => {
            let (_, text) = failed(message);
            set(types::INSTALLED, "False", reasons::CONFLICT, text);
        }
        Attempt::UnsafeCrdUpgrade(message) => {
            let (_, text) = failed(message);
            set(types::INSTALLED, "False", reasons::CRD_UPGRADE_UNSAFE, text);
        }
        Attempt::NamespaceMove(message) => {
            let (_, text) = failed(message);
            set(
                types::INSTALLED,
                "False",
                reasons::NAMESPACE_CHANGE_REFUSED,
                text,
            );
        }
        Attempt::InstallMode(message) => {
            let (_, text) = failed(message);
            set(
                types::INSTALLED,
                "False",
                reasons::UNSUPPORTED_INSTALL_MODE,
                text,
            );
        }
        Attempt::Applied => {
            set(
                types::INSTALLED,
                "True",
                reasons::INSTALLATION_SUCCEEDED,
                format!("installed {bundle}"),
            );
            installed_after = Some(wanted.clone());
        }
    }
    Verdict {
        conditions,
        installed: installed_after,
    }
}

/// The `Healthy` condition (status, reason, message) after a reconcile: what `health` found of
/// the installed `bundle`; when it was not looked at, `False` if nothing is installed, else
/// unchanged (`None`).
pub fn healthy(
    health: Option<&crate::health::Health>,
    installed: Option<&Installed>,
) -> Option<(&'static str, &'static str, String)> {
    use crate::health::Health;
    match (health, installed) {
        (Some(Health::Healthy { count }), Some(i)) => Some((
            "True",
            reasons::HEALTHY,
            if *count == 0 {
                format!(
                    "{} is healthy: it has no workload or API to wait for",
                    i.bundle
                )
            } else {
                format!(
                    "{} is healthy: its {count} workloads and APIs are ready",
                    i.bundle
                )
            },
        )),
        (Some(Health::Unhealthy { key, message }), Some(_)) => {
            Some(("False", reasons::UNHEALTHY, format!("{key}: {message}")))
        }
        (_, None) => Some((
            "False",
            reasons::INSTALLATION_STATUS_FALSE,
            "nothing is installed (see Installed)".to_owned(),
        )),
        (None, Some(_)) => None,
    }
}

/// The by-digest reference `status.resolvedSource` records after `attempt`, `recorded`
/// being what it recorded before and `fetched` what this attempt pulled: it describes the
/// installed content, so it changes only when an attempt installed the content fetched.
pub fn resolved_after<'a>(
    attempt: &Attempt,
    recorded: Option<&'a str>,
    fetched: Option<&'a str>,
) -> Option<&'a str> {
    match attempt {
        Attempt::Applied => fetched,
        _ => recorded,
    }
}

#[cfg(test)]
mod tests;
