//! What a chart is told of the cluster (`.Capabilities`): the Kubernetes version the API
//! server reports and every API it serves (`group/version`, and `group/version/Kind` for
//! charts that ask for one kind), read from discovery, as `helm install` reads them. Kept for
//! [`FRESH`]: a render needs no discovery of its own, and a new API or cluster version is seen
//! within that (a chart is rendered again when what it was told changed).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::Client;
use kube::discovery::Discovery;
use tokio::sync::Mutex;

/// How long capabilities read from discovery are used.
pub const FRESH: Duration = Duration::from_secs(60);

/// What a chart is told of the cluster, and which kinds are namespaced.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Capabilities {
    /// The API server's version (`v1.36.3`).
    pub kube_version: String,
    /// `group/version` and `group/version/Kind` of every served API (`v1` and `v1/Pod` for
    /// the core group), sorted.
    pub api_versions: Vec<String>,
    /// Whether each served kind is namespaced, by `apiVersion/Kind`.
    pub scopes: BTreeMap<String, bool>,
}

/// A served kind: its name and whether it is namespaced.
pub type Served<'a> = (&'a str, bool);

impl Capabilities {
    /// The capabilities of a cluster at `kube_version` serving `served`: (group, version,
    /// kinds) for each group version (the core group's name is empty).
    pub fn of<'a>(
        kube_version: &str,
        served: impl IntoIterator<Item = (&'a str, &'a str, Vec<Served<'a>>)>,
    ) -> Capabilities {
        let mut api_versions = Vec::new();
        let mut scopes = BTreeMap::new();
        for (group, version, kinds) in served {
            let gv = if group.is_empty() {
                version.to_owned()
            } else {
                format!("{group}/{version}")
            };
            for (kind, namespaced) in kinds {
                let gvk = format!("{gv}/{kind}");
                scopes.insert(gvk.clone(), namespaced);
                api_versions.push(gvk);
            }
            api_versions.push(gv);
        }
        api_versions.sort_unstable();
        api_versions.dedup();
        Capabilities {
            kube_version: kube_version.to_owned(),
            api_versions,
            scopes,
        }
    }

    /// A short hash of what a chart is told (the version and the served APIs): equal
    /// capabilities, equal renders.
    pub fn fingerprint(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut digest = Sha256::new();
        digest.update(self.kube_version.as_bytes());
        for api in &self.api_versions {
            digest.update(b"\n");
            digest.update(api.as_bytes());
        }
        digest.finalize()[..8]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// Whether `kind` of `api_version` is namespaced, when it is served.
    pub fn namespaced(&self, api_version: &str, kind: &str) -> Option<bool> {
        self.scopes.get(&format!("{api_version}/{kind}")).copied()
    }

    /// What `provisioner render` tells a chart without a cluster: `kube_version` and the
    /// built-in APIs every supported cluster serves (a chart that tests for another API sees
    /// it missing, as `helm template` without `--api-versions` does).
    pub fn builtin(kube_version: &str) -> Capabilities {
        let ns =
            |kinds: &'static [&'static str]| kinds.iter().map(|k| (*k, true)).collect::<Vec<_>>();
        let cluster =
            |kinds: &'static [&'static str]| kinds.iter().map(|k| (*k, false)).collect::<Vec<_>>();
        let mut core = ns(&[
            "ConfigMap",
            "Endpoints",
            "LimitRange",
            "PersistentVolumeClaim",
            "Pod",
            "ResourceQuota",
            "Secret",
            "Service",
            "ServiceAccount",
        ]);
        core.extend(cluster(&["Namespace", "PersistentVolume"]));
        let mut rbac = ns(&["Role", "RoleBinding"]);
        rbac.extend(cluster(&["ClusterRole", "ClusterRoleBinding"]));
        let mut networking = ns(&["Ingress", "NetworkPolicy"]);
        networking.extend(cluster(&["IngressClass"]));
        Capabilities::of(
            kube_version,
            [
                ("", "v1", core),
                (
                    "apps",
                    "v1",
                    ns(&["DaemonSet", "Deployment", "ReplicaSet", "StatefulSet"]),
                ),
                ("batch", "v1", ns(&["CronJob", "Job"])),
                ("rbac.authorization.k8s.io", "v1", rbac),
                ("networking.k8s.io", "v1", networking),
                ("policy", "v1", ns(&["PodDisruptionBudget"])),
                ("autoscaling", "v2", ns(&["HorizontalPodAutoscaler"])),
                ("coordination.k8s.io", "v1", ns(&["Lease"])),
                ("scheduling.k8s.io", "v1", cluster(&["PriorityClass"])),
                (
                    "storage.k8s.io",
                    "v1",
                    cluster(&["CSIDriver", "StorageClass"]),
                ),
                (
                    "apiextensions.k8s.io",
                    "v1",
                    cluster(&["CustomResourceDefinition"]),
                ),
                ("apiregistration.k8s.io", "v1", cluster(&["APIService"])),
                (
                    "admissionregistration.k8s.io",
                    "v1",
                    cluster(&[
                        "MutatingWebhookConfiguration",
                        "ValidatingWebhookConfiguration",
                    ]),
                ),
            ],
        )
    }
}

/// Capabilities read from the cluster, kept for [`FRESH`].
pub struct Discovered {
    client: Client,
    kept: Mutex<Option<(Instant, Arc<Capabilities>)>>,
}

impl Discovered {
    /// Reads `client`'s cluster when asked.
    pub fn new(client: Client) -> Discovered {
        Discovered {
            client,
            kept: Mutex::new(None),
        }
    }

    /// The cluster's capabilities, read again when those kept are older than [`FRESH`].
    pub async fn get(&self) -> Result<Arc<Capabilities>, kube::Error> {
        let mut kept = self.kept.lock().await;
        if let Some((at, caps)) = kept.as_ref()
            && at.elapsed() < FRESH
        {
            return Ok(caps.clone());
        }
        let version = self.client.apiserver_version().await?.git_version;
        let discovery = Discovery::new(self.client.clone()).run_aggregated().await?;
        let mut served = Vec::new();
        for group in discovery.groups() {
            for version in group.versions() {
                let kinds: Vec<(String, bool)> = group
                    .versioned_resources(version)
                    .into_iter()
                    .map(|(r, caps)| (r.kind, caps.scope == kube::discovery::Scope::Namespaced))
                    .collect();
                served.push((group.name().to_owned(), version.to_owned(), kinds));
            }
        }
        let caps = Arc::new(Capabilities::of(
            &version,
            served.iter().map(|(g, v, k)| {
                let kinds = k.iter().map(|(kind, n)| (kind.as_str(), *n)).collect();
                (g.as_str(), v.as_str(), kinds)
            }),
        ));
        *kept = Some((Instant::now(), caps.clone()));
        Ok(caps)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_versions_and_kinds_are_listed_as_helm_takes_them() {
        let caps = Capabilities::of(
            "v1.36.3",
            [
                ("", "v1", vec![("Pod", true), ("ConfigMap", true)]),
                ("apps", "v1", vec![("Deployment", true)]),
                ("monitoring.coreos.com", "v1", vec![]),
            ],
        );
        assert_eq!(
            caps.api_versions,
            [
                "apps/v1",
                "apps/v1/Deployment",
                "monitoring.coreos.com/v1",
                "v1",
                "v1/ConfigMap",
                "v1/Pod"
            ]
        );
        assert_eq!(caps.kube_version, "v1.36.3");
        assert_eq!(caps.namespaced("apps/v1", "Deployment"), Some(true));
        assert_eq!(caps.namespaced("apps/v1", "Widget"), None);
        let builtin = Capabilities::builtin("v1.36.0");
        assert_eq!(builtin.namespaced("v1", "Namespace"), Some(false));
        assert_eq!(builtin.namespaced("apps/v1", "Deployment"), Some(true));
        assert!(builtin.api_versions.contains(&"policy/v1".to_owned()));
        assert_eq!(caps.fingerprint(), caps.clone().fingerprint());
        assert_ne!(caps.fingerprint(), builtin.fingerprint());
    }
}
