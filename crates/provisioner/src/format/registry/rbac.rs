//! The RBAC OLM makes of a CSV's `permissions` and `clusterPermissions`, by install mode:
//!
//! * `clusterPermissions`: a ClusterRole and ClusterRoleBinding each, in every mode;
//! * `permissions`, all namespaces watched: promoted to a ClusterRole and ClusterRoleBinding
//!   each, with `get`, `list` and `watch` on namespaces added, as OLM adds it;
//! * `permissions`, some namespaces watched: a Role and RoleBinding each in every watched
//!   namespace and, as OLM v0 gives it (upstream v1 does not), in the install namespace, where
//!   the operator keeps its leases and events.
//!
//! Subjects are the ServiceAccounts in the install namespace; every name is
//! [`names::rbac_name`] of the permission as written (promoted: with the added rule), so the
//! same in every namespace and upstream's exactly.

use serde_json::{Value, json};

use super::csv::{Csv, Permission, PolicyRule};
use super::modes::Mode;
use super::{account_or_default, made, names};
use crate::object::Object;

const RBAC: &str = "rbac.authorization.k8s.io/v1";

/// The RBAC of `csv`'s operator, installed in `install` and watching as `mode` says.
pub fn objects(csv: &Csv, install: &str, mode: &Mode) -> Vec<Object> {
    let strategy = &csv.spec.install.spec;
    let mut cluster: Vec<Permission> = strategy.cluster_permissions.clone();
    let mut namespaced = Vec::new();
    match mode {
        Mode::All => cluster.extend(strategy.permissions.iter().map(promoted)),
        watching => {
            let mut namespaces = vec![install];
            namespaces.extend(watching.targets().into_iter().filter(|n| *n != install));
            for namespace in namespaces {
                for permission in &strategy.permissions {
                    namespaced.extend(pair(csv, install, permission, Some(namespace)));
                }
            }
        }
    }
    let mut roles = Vec::new();
    let mut bindings = Vec::new();
    for object in namespaced
        .into_iter()
        .chain(cluster.iter().flat_map(|p| pair(csv, install, p, None)))
    {
        if object.key.kind.ends_with("Binding") {
            bindings.push(object);
        } else {
            roles.push(object);
        }
    }
    roles.extend(bindings);
    roles
}

/// A permission for all namespaces: its rules and read access to namespaces.
fn promoted(permission: &Permission) -> Permission {
    let mut rules = permission.rules.clone().unwrap_or_default();
    rules.push(PolicyRule {
        verbs: Some(vec!["get".into(), "list".into(), "watch".into()]),
        api_groups: Some(vec![String::new()]),
        resources: Some(vec!["namespaces".into()]),
        resource_names: None,
        non_resource_urls: None,
    });
    Permission {
        service_account_name: permission.service_account_name.clone(),
        rules: Some(rules),
    }
}

/// The role of `permission` and its binding: in `namespace`, or cluster-wide (`None`).
fn pair(csv: &Csv, install: &str, permission: &Permission, namespace: Option<&str>) -> [Object; 2] {
    let account = account_or_default(&permission.service_account_name);
    let name = names::rbac_name(&csv.metadata.name, account, permission);
    let rules = serde_json::to_value(&permission.rules).unwrap_or(Value::Null);
    let (role_kind, binding_kind) = match namespace {
        Some(_) => ("Role", "RoleBinding"),
        None => ("ClusterRole", "ClusterRoleBinding"),
    };
    let mut metadata = json!({"name": name});
    if let Some(ns) = namespace {
        metadata["namespace"] = json!(ns);
    }
    [
        made(
            RBAC,
            role_kind,
            namespace,
            &name,
            json!({"apiVersion": RBAC, "kind": role_kind, "metadata": metadata, "rules": rules}),
        ),
        made(
            RBAC,
            binding_kind,
            namespace,
            &name,
            json!({
                "apiVersion": RBAC, "kind": binding_kind,
                "metadata": metadata,
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name},
                "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": install}],
            }),
        ),
    ]
}
