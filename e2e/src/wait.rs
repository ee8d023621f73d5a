//! Waiting on conditions with a deadline. Every wait watches the object, so it returns as soon
//! as the condition holds, and fails with the last state seen when the deadline passes.

use std::fmt::Debug;
use std::time::Duration;

use kube::api::Api;
use kube::runtime::wait::{await_condition, conditions};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::{Error, Result, kube_err};

/// Waits until `cond` holds for the object `name` (it is given `None` while the object does not
/// exist), and returns the object. Fails after `timeout` with the object's last state.
pub async fn wait_for<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    timeout: Duration,
    cond: impl Fn(Option<&K>) -> bool + Send + 'static,
) -> Result<K>
where
    K: Clone + Debug + Send + Sync + DeserializeOwned + Serialize + Resource + 'static,
{
    let describe = format!("{name}: {what}");
    match tokio::time::timeout(timeout, await_condition(api.clone(), name, cond)).await {
        Ok(Ok(Some(obj))) => Ok(obj),
        Ok(Ok(None)) => Err(Error::Document(format!(
            "{describe}: the object does not exist"
        ))),
        Ok(Err(e)) => Err(Error::Cluster(format!("{describe}: watch failed: {e}"))),
        Err(_) => Err(timeout_error(api, name, describe, timeout).await),
    }
}

/// Waits until the object `name` is gone (or replaced by one with another uid).
pub async fn wait_for_deletion<K>(api: &Api<K>, name: &str, timeout: Duration) -> Result<()>
where
    K: Clone + Debug + Send + Sync + DeserializeOwned + Serialize + Resource + 'static,
{
    let uid = match api
        .get_opt(name)
        .await
        .map_err(kube_err(format!("reading {name}")))?
    {
        Some(obj) => obj.uid().unwrap_or_default(),
        None => return Ok(()),
    };
    let describe = format!("{name} to be deleted");
    match tokio::time::timeout(
        timeout,
        await_condition(api.clone(), name, conditions::is_deleted(&uid)),
    )
    .await
    {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(Error::Cluster(format!("{describe}: watch failed: {e}"))),
        Err(_) => Err(timeout_error(api, name, describe, timeout).await),
    }
}

async fn timeout_error<K>(api: &Api<K>, name: &str, what: String, timeout: Duration) -> Error
where
    K: Clone + Debug + DeserializeOwned + Serialize + Resource,
{
    let last_state = match api.get_opt(name).await {
        Ok(Some(obj)) => serde_json::to_string_pretty(&obj).unwrap_or_else(|e| e.to_string()),
        Ok(None) => "absent".to_owned(),
        Err(e) => format!("unreadable: {e}"),
    };
    Error::Timeout {
        what,
        seconds: timeout.as_secs(),
        last_state,
    }
}

/// Whether an APIService's `Available` condition is True.
pub fn apiservice_available(
    a: Option<&k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService>,
) -> bool {
    a.and_then(|a| a.status.as_ref())
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == "Available" && c.status == "True")
        })
}

/// Waits until the APIService `name` is Available (`kubectl wait apiservice NAME
/// --for=condition=Available`).
pub async fn wait_apiservice_available(
    client: &kube::Client,
    name: &str,
    timeout: Duration,
) -> Result<k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService> {
    let api = Api::all(client.clone());
    wait_for(&api, name, "Available", timeout, apiservice_available).await
}
