//! What a BundleDeployment's `spec.config` asks of an install (pure). For a registry+v1
//! bundle: the install namespace (`namespace`), the namespaces its operator watches
//! (`watchNamespace`, upstream v1's word for one; `targetNamespaces`, OLM v0's OperatorGroup
//! word, for several), and the settings of its Deployments (`deploymentConfig`, upstream v1's
//! word for what OLM v0's Subscription `spec.config` held). For a Helm chart: the release
//! namespace (`namespace`) and its values (`values`, YAML text as rukpak's helm provisioner
//! took them, or an object; `valuesFrom`, Secrets and ConfigMaps in the provisioner's
//! namespace, in order, as Flux's HelmRelease names them). For a kustomization: the namespace
//! of namespaced objects that name none (`namespace`) and the directory to build
//! (`directory`, for overlays). As upstream's bundle configuration, anything else is refused
//! (a misspelt key must not be silently ignored); for a plain bundle, whose objects name their
//! own namespaces, these keys are refused and others ignored, as rukpak ignored `spec.config`.
//! Checked before anything is fetched.

use serde_json::{Map, Value};

use olm_api::bundle_deployment::{DEFAULT_VALUES_KEY, ValuesReference};

use crate::format::registry::deployment_config::DeploymentConfig;
use crate::source::{Format, Refusal};

/// The keys a registry+v1 install reads.
pub const KEYS: [&str; 4] = [
    NAMESPACE,
    WATCH_NAMESPACE,
    TARGET_NAMESPACES,
    DEPLOYMENT_CONFIG,
];
/// The keys a Helm chart's install reads.
pub const HELM_KEYS: [&str; 3] = [NAMESPACE, VALUES, VALUES_FROM];
/// The keys a kustomization's install reads.
pub const KUSTOMIZE_KEYS: [&str; 2] = [NAMESPACE, DIRECTORY];
/// The install namespace.
pub const NAMESPACE: &str = "namespace";
/// The one namespace watched (`""`: all).
pub const WATCH_NAMESPACE: &str = "watchNamespace";
/// The namespaces watched.
pub const TARGET_NAMESPACES: &str = "targetNamespaces";
/// The settings of the operator's Deployments.
pub const DEPLOYMENT_CONFIG: &str = "deploymentConfig";
/// A chart's values, given inline.
pub const VALUES: &str = "values";
/// Where more of a chart's values are read.
pub const VALUES_FROM: &str = "valuesFrom";
/// The directory of a kustomization to build.
pub const DIRECTORY: &str = "directory";
/// At most this many target namespaces (an OperatorGroup has no limit; a status message and
/// the Pod annotation must stay readable).
pub const MAX_TARGETS: usize = 256;
/// At most this many `valuesFrom` entries.
pub const MAX_VALUES_FROM: usize = 32;

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
    /// A chart's values.
    pub values: Values,
    /// The kustomization's directory, when named (else the bundle's root).
    pub directory: Option<String>,
}

/// A chart's values, in the order Helm merges them (each later one over the earlier): every
/// `valuesFrom` entry, then the inline `values`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Values {
    /// Secrets and ConfigMaps to read.
    pub from: Vec<ValuesReference>,
    /// The inline values as YAML text (an object is written as JSON, which is YAML).
    pub inline: Option<String>,
}

/// The settings `config` asks of a bundle of `format`.
pub fn of(config: Option<&Map<String, Value>>, format: Format) -> Result<Settings, Refusal> {
    let Some(config) = config else {
        return Ok(Settings::default());
    };
    let (keys, what): (&[&str], &str) = match format {
        Format::Plain => {
            let read = KEYS.iter().chain(&HELM_KEYS).chain(&KUSTOMIZE_KEYS);
            if let Some(key) = read.into_iter().find(|k| config.contains_key(**k)) {
                return Err(refuse(format!(
                    "{key:?} does not apply to plain bundles: a plain bundle's objects name their own namespaces and have no values"
                )));
            }
            return Ok(Settings::default());
        }
        Format::Registry => (&KEYS, "a registry+v1 install"),
        Format::Helm => (&HELM_KEYS, "a Helm chart's install"),
        Format::Kustomize => (&KUSTOMIZE_KEYS, "a kustomization's install"),
    };
    if let Some(key) = config.keys().find(|k| !keys.contains(&k.as_str())) {
        return Err(refuse(format!(
            "unknown field {key:?} ({what} reads {})",
            keys.iter()
                .map(|k| format!("{k:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let namespace = match config.get(NAMESPACE) {
        None | Some(Value::Null) => None,
        Some(v) => Some(name(NAMESPACE, v, false)?),
    };
    let mut settings = Settings {
        namespace,
        ..Settings::default()
    };
    match format {
        Format::Registry => {
            settings.watch = watch(config)?;
            settings.deployment = deployment(config)?;
        }
        Format::Helm => settings.values = values(config)?,
        Format::Kustomize => settings.directory = directory(config)?,
        Format::Plain => {}
    }
    Ok(settings)
}

/// The namespaces a registry+v1 install watches, when named.
fn watch(config: &Map<String, Value>) -> Result<Option<Vec<String>>, Refusal> {
    Ok(
        match (config.get(WATCH_NAMESPACE), config.get(TARGET_NAMESPACES)) {
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
        },
    )
}

/// The settings of a registry+v1 install's Deployments, when given.
fn deployment(config: &Map<String, Value>) -> Result<Option<DeploymentConfig>, Refusal> {
    match config.get(DEPLOYMENT_CONFIG) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => {
            let read = serde_json::from_value::<DeploymentConfig>(v.clone())
                .map_err(|e| refuse(format!("{DEPLOYMENT_CONFIG:?}: {e}")))?;
            read.check()
                .map_err(|e| refuse(format!("{DEPLOYMENT_CONFIG:?}: {e}")))?;
            Ok(Some(read))
        }
    }
}

/// A chart's values: `valuesFrom` (a list of references) and `values` (YAML text, or an
/// object). Whether the text is YAML of a map is Helm's to say, in its words, when it renders.
fn values(config: &Map<String, Value>) -> Result<Values, Refusal> {
    let inline = match config.get(VALUES) {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(text.clone()),
        Some(object @ Value::Object(_)) => Some(object.to_string()),
        Some(_) => {
            return Err(refuse(format!(
                "invalid type for field {VALUES:?}: expected the values as an object or as YAML text"
            )));
        }
    };
    let from = match config.get(VALUES_FROM) {
        None | Some(Value::Null) => Vec::new(),
        Some(v) => serde_json::from_value::<Vec<ValuesReference>>(v.clone()).map_err(|e| {
            refuse(format!(
                "{VALUES_FROM:?}: {e} (each entry is {{kind: Secret or ConfigMap, name, key (default {DEFAULT_VALUES_KEY}), optional}})"
            ))
        })?,
    };
    if from.len() > MAX_VALUES_FROM {
        return Err(refuse(format!(
            "{VALUES_FROM:?} lists {} entries, more than the {MAX_VALUES_FROM} allowed",
            from.len()
        )));
    }
    Ok(Values { from, inline })
}

/// The kustomization's directory: relative, inside the bundle.
fn directory(config: &Map<String, Value>) -> Result<Option<String>, Refusal> {
    match config.get(DIRECTORY) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(dir)) => {
            if dir.starts_with('/') || dir.split('/').any(|c| c == ".." || c.starts_with('-')) {
                return Err(refuse(format!(
                    "{DIRECTORY:?} {dir:?} is not a directory of the bundle: it must be a relative path without \"..\" or a part starting with \"-\""
                )));
            }
            let dir = dir.trim_end_matches('/').trim_start_matches("./");
            Ok((!dir.is_empty() && dir != ".").then(|| dir.to_owned()))
        }
        Some(_) => Err(refuse(format!(
            "invalid type for field {DIRECTORY:?}: expected a path inside the bundle"
        ))),
    }
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
