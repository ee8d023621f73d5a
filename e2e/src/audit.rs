//! The control plane's audit log (`<cluster dir>/audit.log`, written by the kube-apiserver
//! the harness starts: every request that changes something, with its user agent), read by
//! the tests of leader election to learn which replica wrote what, from the server's side, and
//! by the tests of the provisioner's drift watches to learn which it keeps open.

use std::time::SystemTime;

use k8s_openapi::jiff::Timestamp;

use crate::{Error, Result, cluster};

/// A write the API server received.
#[derive(Debug, Clone)]
pub struct Write {
    /// `create`, `update`, `patch`, `delete`, ...
    pub verb: String,
    /// The request's URI.
    pub uri: String,
    /// The client's user agent.
    pub user_agent: String,
    /// When the server received it.
    pub received: SystemTime,
}

/// The provisioner's watches whose URI path starts with `path` that are open: started (the
/// audit log's `ResponseStarted`) and not ended (`ResponseComplete`), and how many were ever
/// started. Only the provisioner's watches are logged (the harness's audit policy).
///
/// # Errors
///
/// As [`writes_by`].
pub fn provisioner_watches(path: &str) -> Result<(usize, usize)> {
    let mut started = std::collections::BTreeSet::new();
    let mut ended = std::collections::BTreeSet::new();
    for event in events()? {
        let field = |name: &str| event.get(name).and_then(|v| v.as_str()).unwrap_or("");
        let uri = field("requestURI");
        if field("verb") != "watch" || !uri.starts_with(path) {
            continue;
        }
        match field("stage") {
            "ResponseStarted" => {
                started.insert(field("auditID").to_owned());
            }
            "ResponseComplete" | "Panic" => {
                ended.insert(field("auditID").to_owned());
            }
            _ => {}
        }
    }
    Ok((started.difference(&ended).count(), started.len()))
}

/// Every event of the audit log.
fn events() -> Result<Vec<serde_json::Value>> {
    let dir = cluster::cluster()?
        .dir
        .clone()
        .ok_or_else(|| Error::Cluster("a reused control plane has no audit log of ours".into()))?;
    let path = dir.join("audit.log");
    let text = std::fs::read_to_string(&path).map_err(|source| Error::Io {
        path: path.display().to_string(),
        source,
    })?;
    Ok(text
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .collect())
}

/// The writes whose user agent contains `agent`, received at or after `since`.
///
/// # Errors
///
/// When the control plane is a reused one (no audit log of ours) or the log is unreadable.
pub fn writes_by(agent: &str, since: SystemTime) -> Result<Vec<Write>> {
    Ok(events()?
        .into_iter()
        .filter_map(|event| {
            let field = |name: &str| event.get(name).and_then(|v| v.as_str()).unwrap_or("");
            let received: Timestamp = field("requestReceivedTimestamp").parse().ok()?;
            Some(Write {
                verb: field("verb").to_owned(),
                uri: field("requestURI").to_owned(),
                user_agent: field("userAgent").to_owned(),
                received: SystemTime::from(received),
            })
        })
        .filter(|w| !matches!(w.verb.as_str(), "get" | "list" | "watch"))
        .filter(|w| w.user_agent.contains(agent) && w.received >= since)
        .collect())
}
