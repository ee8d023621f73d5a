//! What a BundleDeployment's `spec.config` asks of an install (pure): for a registry+v1
//! bundle, the install namespace (`namespace`), the namespaces its operator watches
//! (`watchNamespace`, upstream v1's word for one; `targetNamespaces`, OLM v0's OperatorGroup
//! word, for several), and the settings of its Deployments (`deploymentConfig`, upstream v1's
//! word for what OLM v0's Subscription `spec.config` held). As upstream's bundle configuration, anything else is refused (a
//! misspelt key must not be silently ignored); for a plain bundle, whose objects name their own
//! namespaces, these keys are refused and others ignored, as rukpak ignored `spec.config`.
//! Checked before anything is fetched.

use serde_json::{Map, Value};

use crate::format::registry::deployment_config::DeploymentConfig;
use crate::source::{Format, Refusal};

/// The keys a registry+v1 install reads.
pub const KEYS: [&str; 4] = [
    NAMESPACE,
    WATCH_NAMESPACE,
    TARGET_NAMESPACES,
    DEPLOYMENT_CONFIG,
];
/// The install namespace.
pub const NAMESPACE: &str = "namespace";
/// The one namespace watched (`""`: all).
pub const WATCH_NAMESPACE: &str = "watchNamespace";
/// The namespaces watched.
pub const TARGET_NAMESPACES: &str = "targetNamespaces";
/// The settings of the operator's Deployments.
pub const DEPLOYMENT_CONFIG: &str = "deploymentConfig";
/// At most this many target namespaces (an OperatorGroup has no limit; a status message and
/// the Pod annotation must stay readable).
pub const MAX_TARGETS: usize = 256;

/// The condition reason of a `spec.config` that cannot be used (upstream's).
pub const INVALID_CONFIGURATION: &str = "InvalidConfiguration";

/// What an install is asked.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    /// The install namespace, when named (it must exist: it is the user's, not made).
    pub namespace: Option<String>,
    /// The namespaces to watch, when named (`[""]`: all).
    pub watch: Option<Vec<String>>,
    /// The settings of its Deployments, when given.
    pub deployment: Option<DeploymentConfig>,
}

/// The settings `config` asks of a bundle of `format`.
pub fn of(config: Option<&Map<String, Value>>, format: Format) -> Result<Settings, Refusal> {
    let Some(config) = config else {
        return Ok(Settings::default());
    };
    if format == Format::Plain {
        if let Some(key) = KEYS.iter().find(|k| config.contains_key(**k)) {
            return Err(refuse(format!(
                "{key:?} applies to registry+v1 bundles only: a plain bundle's objects name their own namespaces"
            )));
        }
        return Ok(Settings::default());
    }
    if let Some(key) = config.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(refuse(format!(
            "unknown field {key:?} (a registry+v1 install reads {})",
            KEYS.map(|k| format!("{k:?}")).join(", ")
        )));
    }
    let namespace = match config.get(NAMESPACE) {
        None | Some(Value::Null) => None,
        Some(v) => Some(name(NAMESPACE, v, false)?),
    };
    let watch = match (config.get(WATCH_NAMESPACE), config.get(TARGET_NAMESPACES)) {
        (Some(w), Some(t)) if !w.is_null() && !t.is_null() => {
            return Err(refuse(format!(
                "{WATCH_NAMESPACE:?} and {TARGET_NAMESPACES:?} are both set: name one namespace or a list, not both"
            )));
        }
        (Some(w), _) if !w.is_null() => Some(vec![name(WATCH_NAMESPACE, w, true)?]),
        (_, Some(Value::Array(list))) => {
            if list.is_empty() || list.len() > MAX_TARGETS {
                return Err(refuse(format!(
                    "{TARGET_NAMESPACES:?} must list 1 to {MAX_TARGETS} namespaces (it lists {})",
                    list.len()
                )));
            }
            Some(
                list.iter()
                    .map(|v| name(TARGET_NAMESPACES, v, false))
                    .collect::<Result<Vec<_>, _>>()?,
            )
        }
        (_, Some(t)) if !t.is_null() => {
            return Err(refuse(format!(
                "invalid type for field {TARGET_NAMESPACES:?}: expected a list of namespaces"
            )));
        }
        _ => None,
    };
    let deployment = match config.get(DEPLOYMENT_CONFIG) {
        None | Some(Value::Null) => None,
        Some(v) => {
            let read = serde_json::from_value::<DeploymentConfig>(v.clone())
                .map_err(|e| refuse(format!("{DEPLOYMENT_CONFIG:?}: {e}")))?;
            read.check()
                .map_err(|e| refuse(format!("{DEPLOYMENT_CONFIG:?}: {e}")))?;
            Some(read)
        }
    };
    Ok(Settings {
        namespace,
        watch,
        deployment,
    })
}

/// A namespace name at `field` (`""`, all namespaces, only where `empty_is_all`).
fn name(field: &str, value: &Value, empty_is_all: bool) -> Result<String, Refusal> {
    let Value::String(name) = value else {
        return Err(refuse(format!(
            "invalid type for field {field:?}: expected a namespace name"
        )));
    };
    if name.is_empty() && empty_is_all {
        return Ok(String::new());
    }
    let label = name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if !label {
        return Err(refuse(format!(
            "field {field:?}: {name:?} is not a namespace name (at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit)"
        )));
    }
    Ok(name.clone())
}

fn refuse(message: String) -> Refusal {
    Refusal {
        reason: INVALID_CONFIGURATION,
        message: format!("invalid configuration (spec.config): {message}"),
    }
}

#[cfg(test)]
mod tests;
