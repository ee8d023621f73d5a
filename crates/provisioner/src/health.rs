//! Whether an installed bundle works, from its objects as the cluster holds them: a pure
//! function of their `status`, so that `Healthy` tells the truth rather than "applied".
//!
//! Looked at, in the bundle's order: Deployments (the new ReplicaSet rolled out and available,
//! no old replicas left, the controller caught up), StatefulSets and DaemonSets (rolled out
//! and ready), CRDs (`Established`), APIServices (`Available`), and the Services in front of
//! webhooks and APIServices (a ready endpoint). Everything else is healthy once applied. The first object that is not names itself with its own words: the Deployment's
//! `ProgressDeadlineExceeded` message, the CRD's `Established` message.

use serde_json::Value;

use crate::object::Key;

/// Whether `key` is of a kind whose health is looked at.
pub fn watched(key: &Key) -> bool {
    matches!(
        (key.group.as_str(), key.kind.as_str()),
        ("apps", "Deployment" | "StatefulSet" | "DaemonSet")
            | ("apiextensions.k8s.io", "CustomResourceDefinition")
            | ("apiregistration.k8s.io", "APIService")
    )
}

/// One object's verdict: `Err` says why it is not healthy.
pub type Verdict = Result<(), String>;

/// A verdict as read at an object's resourceVersion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Read {
    /// The resourceVersion the object was read at.
    pub version: String,
    /// What it said then.
    pub verdict: Verdict,
}

/// The verdict read before, when the object is still at the version it was read at as the
/// drift watches see it (`live`); `None`: read it again. A verdict is a function of the object
/// alone, so an object that has not changed has not changed its health; one that changes
/// moves its version, which the watch reports, and its BundleDeployment is looked at again. A
/// resync of a set that did not move then reads nothing (a real operator's CRDs are a megabyte).
pub fn reuse(read: Option<&Read>, live: Option<&str>) -> Option<Verdict> {
    let read = read?;
    (live? == read.version).then(|| read.verdict.clone())
}

/// What the objects say, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// Every looked-at object is healthy (`count` of them).
    Healthy {
        /// How many were looked at.
        count: usize,
    },
    /// The first one that is not.
    Unhealthy {
        /// It.
        key: Key,
        /// Why, in its own words where it has them.
        message: String,
    },
}

/// The health of the looked-at objects, from their verdicts in order: the first that is not
/// healthy names itself.
pub fn of(verdicts: Vec<(Key, Verdict)>) -> Health {
    let count = verdicts.len();
    for (key, verdict) in verdicts {
        if let Err(message) = verdict {
            return Health::Unhealthy { key, message };
        }
    }
    Health::Healthy { count }
}

/// The verdict of an object as the cluster holds it (`None`: it is gone).
pub fn of_held(key: &Key, object: Option<&Value>) -> Verdict {
    match object {
        None => Err("not found".to_owned()),
        Some(object) => of_object(key, object),
    }
}

/// One object's health: `Err` with why it is not.
pub fn of_object(key: &Key, object: &Value) -> Result<(), String> {
    match key.kind.as_str() {
        "Deployment" => deployment(object),
        "StatefulSet" => stateful_set(object),
        "DaemonSet" => daemon_set(object),
        "CustomResourceDefinition" => condition_true(object, "Established"),
        "APIService" => condition_true(object, "Available"),
        _ => Ok(()),
    }
}

/// The verdict of a Service in front of webhooks or APIServices, from its EndpointSlices: it
/// answers once one endpoint is ready (the API server calls it; until then every call would
/// fail).
pub fn endpoints(slices: &[Value]) -> Verdict {
    let ready = slices
        .iter()
        .flat_map(|s| {
            s.get("endpoints")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
        })
        .any(|e| e.pointer("/conditions/ready") != Some(&Value::Bool(false)));
    if ready {
        Ok(())
    } else {
        Err("no ready endpoint yet: the API server's calls to the webhooks or APIServices it serves would fail".to_owned())
    }
}

fn int(object: &Value, pointer: &str) -> i64 {
    object.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

/// The condition `type_` of `object`'s status: (status, reason, message).
fn condition<'a>(object: &'a Value, type_: &str) -> Option<(&'a str, &'a str, &'a str)> {
    let list = object.pointer("/status/conditions")?.as_array()?;
    let c = list.iter().find(|c| c["type"] == type_)?;
    let text = |f: &str| c.get(f).and_then(Value::as_str).unwrap_or_default();
    Some((text("status"), text("reason"), text("message")))
}

fn condition_true(object: &Value, type_: &str) -> Result<(), String> {
    match condition(object, type_) {
        Some(("True", _, _)) => Ok(()),
        Some((status, reason, message)) => Err(format!(
            "{type_} is {status} ({reason}){}",
            if message.is_empty() {
                String::new()
            } else {
                format!(": {message}")
            }
        )),
        None => Err(format!("no {type_} condition yet")),
    }
}

/// The controller has seen the latest spec.
fn caught_up(object: &Value) -> Result<(), String> {
    let generation = int(object, "/metadata/generation");
    let observed = int(object, "/status/observedGeneration");
    if observed < generation {
        return Err(format!(
            "its controller has not seen generation {generation} yet (observed {observed})"
        ));
    }
    Ok(())
}

fn deployment(object: &Value) -> Result<(), String> {
    // A rollout past its deadline says so itself (kstatus: Failed).
    if let Some((_, "ProgressDeadlineExceeded", message)) = condition(object, "Progressing") {
        return Err(format!("ProgressDeadlineExceeded: {message}"));
    }
    caught_up(object)?;
    let want = object
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let (replicas, updated, available) = (
        int(object, "/status/replicas"),
        int(object, "/status/updatedReplicas"),
        int(object, "/status/availableReplicas"),
    );
    if updated < want {
        return Err(format!("{updated} of {want} replicas updated"));
    }
    if replicas > updated {
        return Err(format!(
            "{} old replicas are still running",
            replicas - updated
        ));
    }
    if available < want {
        let why = condition(object, "Available")
            .filter(|(status, _, _)| *status != "True")
            .map(|(_, reason, message)| format!(" ({reason}: {message})"))
            .unwrap_or_default();
        return Err(format!("{available} of {want} replicas available{why}"));
    }
    Ok(())
}

fn stateful_set(object: &Value) -> Result<(), String> {
    caught_up(object)?;
    let want = object
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let ready = int(object, "/status/readyReplicas");
    let updated = int(object, "/status/updatedReplicas");
    let current = object.pointer("/status/currentRevision");
    let update = object.pointer("/status/updateRevision");
    if updated < want || (update.is_some() && current != update) {
        return Err(format!("{updated} of {want} replicas updated"));
    }
    if ready < want {
        return Err(format!("{ready} of {want} replicas ready"));
    }
    Ok(())
}

fn daemon_set(object: &Value) -> Result<(), String> {
    caught_up(object)?;
    let desired = int(object, "/status/desiredNumberScheduled");
    let updated = int(object, "/status/updatedNumberScheduled");
    let available = int(object, "/status/numberAvailable");
    if updated < desired {
        return Err(format!("{updated} of {desired} nodes run the new Pods"));
    }
    if available < desired {
        return Err(format!("{available} of {desired} Pods available"));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
