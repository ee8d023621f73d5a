//! The API server's version as the version variables see it.
//!
//! Like upstream OLM v0, the numbers come from `gitVersion` read as a semantic version
//! (`v1.36.3`, `v1.36.3+abc`, `v1.37.0-rc.1`); when it does not parse, from the `major` and
//! `minor` fields, whose `+` (as in `36+`, written by some distributions) is dropped, and the
//! patch number is then unknown.
//!
//! [`poll`] reads it from the API server; [`keep_polling`] does so every interval (and at once
//! when asked, after the Catalog watch restarted), sending each change to the controllers.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::version::Info;
use prometheus::IntGaugeVec;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use crate::template::KubeVar;

/// The numbers the version variables stand for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeVersion {
    /// Major.
    pub major: String,
    /// Minor.
    pub minor: String,
    /// Patch, when known.
    pub patch: Option<String>,
    /// `gitVersion`, as the server says it.
    pub git_version: String,
}

impl KubeVersion {
    /// The version `info` describes, or `None` when it has no usable numbers.
    pub fn from_info(info: &Info) -> Option<KubeVersion> {
        let git = info.git_version.trim_start_matches('v');
        let core = git.split(['+', '-']).next().unwrap_or_default();
        let numbers: Vec<&str> = core.split('.').collect();
        if let [major, minor, patch] = numbers.as_slice()
            && [major, minor, patch].iter().all(|n| is_number(n))
        {
            return Some(KubeVersion {
                major: (*major).to_owned(),
                minor: (*minor).to_owned(),
                patch: Some((*patch).to_owned()),
                git_version: info.git_version.clone(),
            });
        }
        let major = info.major.trim_end_matches('+');
        let minor = info.minor.trim_end_matches('+');
        (is_number(major) && is_number(minor)).then(|| KubeVersion {
            major: major.to_owned(),
            minor: minor.to_owned(),
            patch: None,
            git_version: info.git_version.clone(),
        })
    }

    /// The value of `var`, when known.
    pub fn get(&self, var: KubeVar) -> Option<&str> {
        match var {
            KubeVar::Major => Some(&self.major),
            KubeVar::Minor => Some(&self.minor),
            KubeVar::Patch => self.patch.as_deref(),
        }
    }
}

fn is_number(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

/// The API server's version, or `None` (logged) when it cannot be read.
pub async fn poll(client: &kube::Client) -> Option<KubeVersion> {
    match client.apiserver_version().await {
        Ok(info) => {
            let version = KubeVersion::from_info(&info);
            if version.is_none() {
                tracing::warn!(git_version = %info.git_version, "the API server's version has no usable numbers");
            }
            version
        }
        Err(error) => {
            tracing::warn!(%error, "could not read the API server's version; keeping the last one");
            None
        }
    }
}

/// Shows `version` (or nothing when unknown) in `catalog_switcher_server_version_info`.
pub fn show(info: &IntGaugeVec, version: Option<&KubeVersion>) {
    info.reset();
    if let Some(v) = version {
        info.with_label_values(&[v.git_version.as_str()]).set(1);
    }
}

/// Polls the version every `interval`, and at once when `now` is notified, until `shutdown`:
/// each change goes to `version` (every controller then re-resolves all its objects) and to
/// the version metric `info`. A failed poll keeps the last version.
pub async fn keep_polling(
    client: kube::Client,
    interval: Duration,
    now: Arc<Notify>,
    version: watch::Sender<Option<KubeVersion>>,
    info: IntGaugeVec,
    shutdown: CancellationToken,
) {
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(interval) => {}
            () = now.notified() => {}
        }
        let polled = poll(&client).await;
        if polled.is_some() && *version.borrow() != polled {
            tracing::info!(version = ?polled, "the API server's version changed");
            show(&info, polled.as_ref());
            version.send_replace(polled);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(major: &str, minor: &str, git: &str) -> Info {
        Info {
            major: major.into(),
            minor: minor.into(),
            git_version: git.into(),
            ..Default::default()
        }
    }

    #[test]
    fn git_versions_with_build_metadata_and_prereleases() {
        let v = KubeVersion::from_info(&info("1", "36+", "v1.36.3+abc")).unwrap();
        assert_eq!(
            (v.major.as_str(), v.minor.as_str(), v.patch.as_deref()),
            ("1", "36", Some("3"))
        );
        assert_eq!(v.git_version, "v1.36.3+abc");
        let rc = KubeVersion::from_info(&info("1", "37", "v1.37.0-rc.1")).unwrap();
        assert_eq!(rc.get(KubeVar::Patch), Some("0"));
    }

    #[test]
    fn without_a_git_version_the_fields_serve_and_the_patch_is_unknown() {
        let v = KubeVersion::from_info(&info("1", "36+", "unknown")).unwrap();
        assert_eq!(
            (v.get(KubeVar::Minor), v.get(KubeVar::Patch)),
            (Some("36"), None)
        );
        assert!(KubeVersion::from_info(&info("", "", "")).is_none());
        assert!(KubeVersion::from_info(&info("one", "36", "v1.x")).is_none());
    }
}
