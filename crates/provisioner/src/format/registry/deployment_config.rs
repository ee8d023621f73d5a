//! Per-install settings of a registry+v1 operator's Deployments: what OLM v0's users give a
//! Subscription (`spec.config`) and upstream v1 calls `deploymentConfig`, applied to every
//! Deployment of the CSV as upstream v1 applies them (its `applyCustomConfigToDeployment`; the
//! golden test is its `with-deploymentconfig-options` rendering of argocd-operator):
//!
//! * `env`: in every container, by name: a variable the container has is replaced where it
//!   stands, a new one is added at the end (a name given twice: the last value, once);
//! * `envFrom`: added to every container unless it is already there;
//! * `volumes`: by name: replaced, or added; `volumeMounts`: the same in every container;
//! * `tolerations`: added unless already there;
//! * `resources`: replace every container's; `nodeSelector`: replaces the Pod's (`{}` clears it);
//! * `affinity`: each of node, pod and pod-anti affinity given replaces the Pod's (an empty one
//!   removes it); all three absent (`affinity: {}`) removes the Pod's affinity;
//! * `annotations`: added to the Deployment and its Pod template where the key is not set.
//!
//! Init containers are left alone, as upstream leaves them. Anything else under
//! `deploymentConfig` (upstream v0's `selector`, a misspelt key) is refused.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{
    Affinity, EnvFromSource, EnvVar, ResourceRequirements, Toleration, Volume, VolumeMount,
};
use serde::Deserialize;
use serde_json::{Map, Value};

/// The settings, as `spec.config.deploymentConfig` gives them.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DeploymentConfig {
    /// Environment variables of every container.
    #[serde(default)]
    pub env: Option<Vec<EnvVar>>,
    /// Sources of environment variables of every container.
    #[serde(default)]
    pub env_from: Option<Vec<EnvFromSource>>,
    /// Volumes of the Pod.
    #[serde(default)]
    pub volumes: Option<Vec<Volume>>,
    /// Volume mounts of every container.
    #[serde(default)]
    pub volume_mounts: Option<Vec<VolumeMount>>,
    /// Tolerations of the Pod.
    #[serde(default)]
    pub tolerations: Option<Vec<Toleration>>,
    /// Resources of every container.
    #[serde(default)]
    pub resources: Option<ResourceRequirements>,
    /// The Pod's node selector.
    #[serde(default)]
    pub node_selector: Option<BTreeMap<String, String>>,
    /// The Pod's affinity.
    #[serde(default)]
    pub affinity: Option<Affinity>,
    /// Annotations of the Deployment and its Pod template.
    #[serde(default)]
    pub annotations: Option<BTreeMap<String, String>>,
}

impl DeploymentConfig {
    /// What the schema requires that the types default: a name on every variable, volume and
    /// mount, a path on every mount (upstream's words: `required field "name" is missing`).
    pub fn check(&self) -> Result<(), String> {
        let missing = |what: &str, field: &str, i: usize| {
            format!("{what}[{i}]: required field {field:?} is missing")
        };
        for (i, e) in self.env.iter().flatten().enumerate() {
            if e.name.is_empty() {
                return Err(missing("env", "name", i));
            }
        }
        for (i, v) in self.volumes.iter().flatten().enumerate() {
            if v.name.is_empty() {
                return Err(missing("volumes", "name", i));
            }
        }
        for (i, m) in self.volume_mounts.iter().flatten().enumerate() {
            if m.name.is_empty() {
                return Err(missing("volumeMounts", "name", i));
            }
            if m.mount_path.is_empty() {
                return Err(missing("volumeMounts", "mountPath", i));
            }
        }
        Ok(())
    }
}

/// `config` applied to a Deployment's `metadata` and `spec`.
pub fn apply(
    config: &DeploymentConfig,
    metadata: &mut Map<String, Value>,
    spec: &mut Map<String, Value>,
) {
    let Some(template) = object(spec, "template") else {
        return;
    };
    if let Some(annotations) = config.annotations.as_ref().filter(|a| !a.is_empty()) {
        if let Some(on) = object(metadata, "annotations") {
            add_missing(on, annotations);
        }
        if let Some(on) = object(template, "metadata").and_then(|m| object(m, "annotations")) {
            add_missing(on, annotations);
        }
    }
    let Some(pod) = object(template, "spec") else {
        return;
    };
    if let Some(volumes) = non_empty(&config.volumes)
        && let Some(l) = list(pod, "volumes")
    {
        by_name(l, &values(volumes));
    }
    if let Some(tolerations) = non_empty(&config.tolerations)
        && let Some(l) = list(pod, "tolerations")
    {
        add_absent(l, &values(tolerations));
    }
    if let Some(selector) = &config.node_selector {
        if selector.is_empty() {
            pod.remove("nodeSelector");
        } else {
            pod.insert("nodeSelector".into(), value(selector));
        }
    }
    if let Some(affinity) = &config.affinity {
        affinity_of(pod, affinity);
    }
    let Some(Value::Array(containers)) = pod.get_mut("containers") else {
        return;
    };
    for container in containers.iter_mut().filter_map(Value::as_object_mut) {
        if let Some(env) = non_empty(&config.env)
            && let Some(l) = list(container, "env")
        {
            by_name(l, &values(env));
        }
        if let Some(env_from) = non_empty(&config.env_from)
            && let Some(l) = list(container, "envFrom")
        {
            add_absent(l, &values(env_from));
        }
        if let Some(resources) = &config.resources {
            container.insert("resources".into(), value(resources));
        }
        if let Some(mounts) = non_empty(&config.volume_mounts)
            && let Some(l) = list(container, "volumeMounts")
        {
            by_name(l, &values(mounts));
        }
    }
}

fn non_empty<T>(list: &Option<Vec<T>>) -> Option<&[T]> {
    list.as_deref().filter(|l| !l.is_empty())
}

/// The Pod's affinity after `config`'s.
fn affinity_of(pod: &mut Map<String, Value>, config: &Affinity) {
    let given = [
        ("nodeAffinity", config.node_affinity.as_ref().map(value)),
        ("podAffinity", config.pod_affinity.as_ref().map(value)),
        (
            "podAntiAffinity",
            config.pod_anti_affinity.as_ref().map(value),
        ),
    ];
    if given.iter().all(|(_, v)| v.is_none()) {
        pod.remove("affinity");
        return;
    }
    let Some(affinity) = object(pod, "affinity") else {
        return;
    };
    for (key, part) in given {
        match part {
            None => {}
            Some(part) if is_empty(&part) => {
                affinity.remove(key);
            }
            Some(part) => {
                affinity.insert(key.into(), part);
            }
        }
    }
    if affinity.values().all(is_empty) {
        pod.remove("affinity");
    }
}

/// Whether `v` says nothing: null, or objects and lists holding only what says nothing.
fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(map) => map.values().all(is_empty),
        Value::Array(list) => list.iter().all(is_empty),
        _ => false,
    }
}

/// `new` entries in `list` by their `name`: one already there is replaced where it stands, a
/// new one is added at the end.
fn by_name(list: &mut Vec<Value>, new: &[Value]) {
    let name = |v: &Value| v.get("name").and_then(Value::as_str).map(str::to_owned);
    let mut at: HashMap<String, usize> = list
        .iter()
        .enumerate()
        .filter_map(|(i, v)| Some((name(v)?, i)))
        .collect();
    for entry in new {
        match name(entry).and_then(|n| at.get(&n).copied().map(|i| (n, i))) {
            Some((_, i)) => list[i] = entry.clone(),
            None => {
                if let Some(n) = name(entry) {
                    at.insert(n, list.len());
                }
                list.push(entry.clone());
            }
        }
    }
}

/// `new` entries added to `list` unless an equal one is there.
fn add_absent(list: &mut Vec<Value>, new: &[Value]) {
    for entry in new {
        if !list.contains(entry) {
            list.push(entry.clone());
        }
    }
}

fn add_missing(map: &mut Map<String, Value>, new: &BTreeMap<String, String>) {
    for (k, v) in new {
        map.entry(k.clone())
            .or_insert_with(|| Value::String(v.clone()));
    }
}

fn value<T: serde::Serialize>(t: &T) -> Value {
    serde_json::to_value(t).unwrap_or(Value::Null)
}

fn values<T: serde::Serialize>(list: &[T]) -> Vec<Value> {
    list.iter().map(value).collect()
}

/// The object at `key` of `map`, made if missing (or not an object); always `Some`.
fn object<'a>(map: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Map<String, Value>> {
    if !map.get(key).is_some_and(Value::is_object) {
        map.insert(key.to_owned(), Value::Object(Map::new()));
    }
    map.get_mut(key).and_then(Value::as_object_mut)
}

/// The list at `key` of `map`, made if missing (or not a list); always `Some`.
fn list<'a>(map: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Vec<Value>> {
    if !map.get(key).is_some_and(Value::is_array) {
        map.insert(key.to_owned(), Value::Array(Vec::new()));
    }
    map.get_mut(key).and_then(Value::as_array_mut)
}

#[cfg(test)]
mod tests;
