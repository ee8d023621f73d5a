//! The cluster's APIs as resolution reads them ([`ClusterApis`]), a pure function of the CRDs
//! and APIServices the controller watches: a CRD a BundleDeployment owns (the provisioner's
//! owner labels) is that BundleDeployment's; any other Established CRD serves its served
//! versions' kinds; an APIService serves its group and version (every kind of it) when it is
//! Available and no CRD backs its group (an aggregated API, or a built-in group).

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use olm_resolver::fbc::property::Gvk;
use olm_resolver::resolve::ClusterApis;

/// The provisioner's label naming the kind of an applied object's owner.
pub const OWNER_KIND: &str = "core.rukpak.io/owner-kind";
/// The provisioner's label naming an applied object's owner.
pub const OWNER_NAME: &str = "core.rukpak.io/owner-name";

fn condition_true<'a>(
    mut conditions: impl Iterator<Item = (&'a str, &'a str)>,
    type_: &str,
) -> bool {
    conditions.any(|(t, s)| t == type_ && s == "True")
}

/// The cluster's APIs, from every CRD and APIService.
pub fn cluster_apis(
    crds: &[Arc<CustomResourceDefinition>],
    services: &[Arc<APIService>],
) -> ClusterApis {
    let mut apis = ClusterApis::default();
    let mut crd_groups = BTreeSet::new();
    for crd in crds {
        let spec = &crd.spec;
        crd_groups.insert(spec.group.clone());
        let labels = crd.metadata.labels.as_ref();
        let owner = labels
            .filter(|l| l.get(OWNER_KIND).map(String::as_str) == Some("BundleDeployment"))
            .and_then(|l| l.get(OWNER_NAME));
        if let Some(owner) = owner {
            apis.owned
                .insert((spec.group.clone(), spec.names.kind.clone()), owner.clone());
            continue;
        }
        let established = crd.status.as_ref().is_some_and(|s| {
            condition_true(
                s.conditions
                    .iter()
                    .flatten()
                    .map(|c| (c.type_.as_str(), c.status.as_str())),
                "Established",
            )
        });
        if !established {
            continue;
        }
        for version in spec.versions.iter().filter(|v| v.served) {
            apis.served.insert(Gvk {
                group: spec.group.clone(),
                version: version.name.clone(),
                kind: spec.names.kind.clone(),
            });
        }
    }
    for service in services {
        let Some(spec) = &service.spec else { continue };
        let group = spec.group.clone().unwrap_or_default();
        let available = service.status.as_ref().is_some_and(|s| {
            condition_true(
                s.conditions
                    .iter()
                    .flatten()
                    .map(|c| (c.type_.as_str(), c.status.as_str())),
                "Available",
            )
        });
        // A CRD's group has a local APIService too; the CRDs say what it serves, and whose.
        if !available || crd_groups.contains(&group) {
            continue;
        }
        apis.served.insert(Gvk {
            group,
            version: spec.version.clone().unwrap_or_default(),
            kind: String::new(),
        });
    }
    apis
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd(
        group: &str,
        kind: &str,
        owner: Option<&str>,
        established: bool,
    ) -> Arc<CustomResourceDefinition> {
        let labels = owner.map(|o| json!({OWNER_KIND: "BundleDeployment", OWNER_NAME: o}));
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": format!("{}s.{group}", kind.to_lowercase()), "labels": labels},
                "spec": {"group": group, "scope": "Namespaced",
                    "names": {"kind": kind, "plural": format!("{}s", kind.to_lowercase())},
                    "versions": [
                        {"name": "v1", "served": true, "storage": true},
                        {"name": "v0", "served": false, "storage": false}]},
                "status": {"conditions": [{"type": "Established", "status": if established {"True"} else {"False"}}]},
            }))
            .unwrap(),
        )
    }

    fn service(group: &str, version: &str, available: bool) -> Arc<APIService> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": format!("{version}.{group}")},
                "spec": {"group": group, "version": version, "groupPriorityMinimum": 1, "versionPriority": 1},
                "status": {"conditions": [{"type": "Available", "status": if available {"True"} else {"False"}}]},
            }))
            .unwrap(),
        )
    }

    fn gvk(group: &str, version: &str, kind: &str) -> Gvk {
        Gvk {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
        }
    }

    #[test]
    fn an_unowned_established_crd_serves_its_served_versions() {
        let apis = cluster_apis(&[crd("a.io", "Widget", None, true)], &[]);
        assert!(apis.serves(&gvk("a.io", "v1", "Widget")));
        assert!(!apis.serves(&gvk("a.io", "v0", "Widget")), "not served");
        assert!(apis.owned.is_empty());
        let pending = cluster_apis(&[crd("a.io", "Widget", None, false)], &[]);
        assert!(pending.served.is_empty(), "not established yet");
    }

    #[test]
    fn an_owned_crd_is_its_bundle_deployments_and_serves_nothing_alone() {
        let apis = cluster_apis(&[crd("a.io", "Widget", Some("shop"), true)], &[]);
        assert!(apis.served.is_empty());
        assert_eq!(
            apis.owned
                .get(&("a.io".to_owned(), "Widget".to_owned()))
                .map(String::as_str),
            Some("shop")
        );
    }

    #[test]
    fn an_available_apiservice_serves_its_group_version_unless_a_crd_backs_it() {
        let apis = cluster_apis(
            &[crd("a.io", "Widget", Some("shop"), true)],
            &[
                service("metrics.k8s.io", "v1beta1", true),
                service("down.io", "v1", false),
                service("a.io", "v1", true),
            ],
        );
        assert!(apis.serves(&gvk("metrics.k8s.io", "v1beta1", "PodMetrics")));
        assert!(!apis.serves(&gvk("down.io", "v1", "X")), "not available");
        assert!(
            !apis.serves(&gvk("a.io", "v1", "Widget")),
            "the CRD's owner decides"
        );
    }
}
