//! A CSV's owned APIServices (`spec.apiservicedefinitions.owned`), as OLM v0 installs them
//! (upstream v1 refuses them): an `apiregistration.k8s.io/v1` APIService `<version>.<group>`
//! (group priority 2000, version priority 15) sending its API to the Service of the Deployment
//! serving it ([`super::services`]), and for that Deployment's ServiceAccount what an
//! aggregated API server needs to authenticate and authorize its callers: a
//! ClusterRoleBinding `<service>-system:auth-delegator` to `system:auth-delegator`, and a
//! RoleBinding `<service>-auth-reader` in `kube-system` to
//! `extension-apiserver-authentication-reader`. The CA bundle the API server trusts the Service
//! by is added when certificates are issued (crate::certs).

use std::collections::BTreeSet;

use serde_json::json;

use super::csv::{Csv, port_or_default};
use super::services::service_name;
use super::{RegistryError, made};
use crate::object::Object;

/// Where the role aggregated API servers read their callers' client CA from lives.
const KUBE_SYSTEM: &str = "kube-system";

/// Every reason the CSV's APIServices cannot be installed.
pub fn check(csv: &Csv) -> Result<(), RegistryError> {
    let deployments = csv.deployment_names();
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for a in &csv.spec.apiservicedefinitions.owned {
        let name = format!("{}.{}", a.version, a.group);
        if a.group.is_empty() || a.version.is_empty() {
            problems.push(format!(
                "owned APIService {name:?} needs both a group and a version"
            ));
        }
        if !deployments.contains(a.deployment_name.as_str()) {
            problems.push(format!(
                "owned APIService {name:?} references non-existent deployment '{}'",
                a.deployment_name
            ));
        }
        if !(0..=65535).contains(&a.container_port) {
            problems.push(format!(
                "owned APIService {name:?} has containerPort {}: a port is 1 to 65535 (0 or none: 443)",
                a.container_port
            ));
        }
        if !seen.insert(name.clone()) {
            problems.push(format!("owned APIService {name:?} is declared twice"));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(RegistryError::InvalidApiServices(problems))
    }
}

/// The APIServices, and the bindings of the ServiceAccounts serving them, for an operator
/// installed in `namespace`.
pub fn objects(csv: &Csv, namespace: &str) -> Vec<Object> {
    let owned = &csv.spec.apiservicedefinitions.owned;
    let mut out: Vec<Object> = owned
        .iter()
        .map(|a| {
            let name = format!("{}.{}", a.version, a.group);
            made(
                "apiregistration.k8s.io/v1",
                "APIService",
                None,
                &name,
                json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                "metadata": {"name": name},
                "spec": {
                    "group": a.group,
                    "version": a.version,
                    "groupPriorityMinimum": 2000,
                    "versionPriority": 15,
                    "service": {
                        "namespace": namespace,
                        "name": service_name(&a.deployment_name),
                        "port": port_or_default(a.container_port),
                    },
                }}),
            )
        })
        .collect();
    let serving: BTreeSet<&str> = owned.iter().map(|a| a.deployment_name.as_str()).collect();
    for d in csv
        .spec
        .install
        .spec
        .deployments
        .iter()
        .filter(|d| serving.contains(d.name.as_str()))
    {
        let service = service_name(&d.name);
        let account = d.service_account();
        let subjects = json!([{"kind": "ServiceAccount", "name": account, "namespace": namespace}]);
        let delegator = format!("{service}-system:auth-delegator");
        out.push(made(
            "rbac.authorization.k8s.io/v1",
            "ClusterRoleBinding",
            None,
            &delegator,
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": delegator},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "system:auth-delegator"},
                "subjects": subjects}),
        ));
        let reader = format!("{service}-auth-reader");
        out.push(made(
            "rbac.authorization.k8s.io/v1",
            "RoleBinding",
            Some(KUBE_SYSTEM),
            &reader,
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": reader, "namespace": KUBE_SYSTEM},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": "extension-apiserver-authentication-reader"},
                "subjects": subjects}),
        ));
    }
    out
}
