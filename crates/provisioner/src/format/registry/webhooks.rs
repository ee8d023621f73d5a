//! A CSV's webhooks (`spec.webhookdefinitions`), as operator-controller renders them (its
//! `BundleValidatingWebhookResourceGenerator`, `BundleMutatingWebhookResourceGenerator` and
//! `BundleCRDGenerator`) and OLM v0 installs them: one Validating- or
//! MutatingWebhookConfiguration per admission webhook, named for it, calling the Service of
//! the Deployment serving it ([`super::services`]) and, unless the operator watches all
//! namespaces, only for objects of the namespaces it watches; a conversion webhook wired into
//! the `spec.conversion` of each CRD it converts. The CA bundle that lets the API server trust
//! the Service is added when certificates are issued (crate::certs), not here.
//!
//! Refused first, with upstream's words ([`check`]): a webhook of a Deployment the CSV lacks,
//! two of one name and type, a name that is not a DNS subdomain, rules on OLM's own groups or
//! on webhook configurations, and conversion webhooks that are not for owned CRDs, share a
//! CRD, or come with install modes other than AllNamespaces alone.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::csv::{Csv, Webhook, port_or_default};
use super::modes::Mode;
use super::services;
use super::{RegistryError, made};
use crate::object::Object;

/// A validating admission webhook.
pub const VALIDATING: &str = "ValidatingAdmissionWebhook";
/// A mutating admission webhook.
pub const MUTATING: &str = "MutatingAdmissionWebhook";
/// A conversion webhook.
pub const CONVERSION: &str = "ConversionWebhook";

/// API groups no admission webhook of a bundle may intercept: every group, OLM v1's, and
/// olm-rs's own (a bundle's webhook could otherwise refuse or rewrite the objects that install
/// and remove it).
const FORBIDDEN_GROUPS: [&str; 6] = [
    "*",
    "olm.operatorframework.io",
    "operators.operatorframework.io",
    "operators.coreos.com",
    "catalogd.operatorframework.io",
    "core.rukpak.io",
];

/// Resources of `admissionregistration.k8s.io` no webhook may intercept (it could keep its own
/// configuration, or another's, from being changed or removed).
const FORBIDDEN_ADMISSION_RESOURCES: [&str; 5] = [
    "*",
    "mutatingwebhookconfiguration",
    "mutatingwebhookconfigurations",
    "validatingwebhookconfiguration",
    "validatingwebhookconfigurations",
];

/// Every reason the CSV's webhooks cannot be installed, in upstream's order and words.
pub fn check(csv: &Csv) -> Result<(), RegistryError> {
    let hooks = &csv.spec.webhookdefinitions;
    let mut problems = Vec::new();
    let conversions: Vec<&Webhook> = hooks.iter().filter(|w| w.type_ == CONVERSION).collect();
    if !conversions.is_empty() {
        let supported: BTreeSet<&str> = csv
            .spec
            .install_modes
            .iter()
            .filter(|m| m.supported)
            .map(|m| m.type_.as_str())
            .collect();
        if supported.len() != 1 || !supported.contains("AllNamespaces") {
            let modes: Vec<&str> = supported.into_iter().collect();
            for w in &conversions {
                problems.push(format!(
                    "bundle contains conversion webhook {:?} and supports install modes [{}] - conversion webhooks are only supported for bundles that only support AllNamespaces install mode",
                    w.generate_name,
                    modes.join(" ")
                ));
            }
        }
    }
    let deployments = csv.deployment_names();
    let mut dangling: Vec<&Webhook> = hooks
        .iter()
        .filter(|w| !deployments.contains(w.deployment_name.as_str()))
        .collect();
    dangling.sort_by(|a, b| {
        (&a.deployment_name, &a.type_, &a.generate_name).cmp(&(
            &b.deployment_name,
            &b.type_,
            &b.generate_name,
        ))
    });
    for w in dangling {
        problems.push(format!(
            "webhook of type '{}' with name '{}' references non-existent deployment '{}'",
            w.type_, w.generate_name, w.deployment_name
        ));
    }
    let mut seen = BTreeSet::new();
    let mut twice = BTreeSet::new();
    for w in hooks {
        if !seen.insert((&w.type_, &w.generate_name)) {
            twice.insert((&w.type_, &w.generate_name));
        }
    }
    for (type_, name) in twice {
        problems.push(format!("duplicate webhook '{name}' of type '{type_}'"));
    }
    let mut invalid: Vec<&Webhook> = hooks
        .iter()
        .filter(|w| !is_dns_subdomain(&w.generate_name))
        .collect();
    invalid.sort_by(|a, b| (&a.type_, &a.generate_name).cmp(&(&b.type_, &b.generate_name)));
    for w in invalid {
        problems.push(format!(
            "webhook of type '{}' has invalid name '{}': a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (at most 253 characters)",
            w.type_, w.generate_name
        ));
    }
    let mut converted: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for w in &conversions {
        for crd in &w.conversion_crds {
            converted.entry(crd).or_default().push(&w.generate_name);
        }
    }
    for (crd, names) in &mut converted {
        if names.len() > 1 {
            names.sort_unstable();
            problems.push(format!(
                "conversion webhooks [{}] reference same custom resource definition '{crd}'",
                names.join(",")
            ));
        }
    }
    let owned: BTreeSet<&str> = csv
        .spec
        .customresourcedefinitions
        .owned
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    let mut by_name = conversions.clone();
    by_name.sort_by(|a, b| a.generate_name.cmp(&b.generate_name));
    for w in by_name {
        let mut crds: Vec<&String> = w.conversion_crds.iter().collect();
        crds.sort_unstable();
        for crd in crds.into_iter().filter(|c| !owned.contains(c.as_str())) {
            problems.push(format!(
                "conversion webhook '{}' references custom resource definition '{crd}' not owned bundle",
                w.generate_name
            ));
        }
    }
    for w in hooks.iter().filter(|w| w.type_ != CONVERSION) {
        problems.extend(forbidden_rules(w));
    }
    // Beyond upstream (the API server would refuse the Service, after other objects were
    // applied): ports a Service can have.
    for w in hooks {
        if !(0..=65535).contains(&w.container_port) {
            problems.push(format!(
                "webhook '{}' has containerPort {}: a port is 1 to 65535 (0 or none: 443)",
                w.generate_name, w.container_port
            ));
        }
        if let Some(n) = w.target_port.as_ref().and_then(Value::as_i64)
            && !(1..=65535).contains(&n)
        {
            problems.push(format!(
                "webhook '{}' has targetPort {n}: a port is 1 to 65535",
                w.generate_name
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(RegistryError::InvalidWebhooks(problems))
    }
}

/// What of `webhook`'s rules reaches what no bundle's webhook may.
fn forbidden_rules(webhook: &Webhook) -> Vec<String> {
    let mut out = Vec::new();
    for rule in &webhook.rules {
        for group in strings(rule.get("apiGroups")) {
            if FORBIDDEN_GROUPS.contains(&group) {
                out.push(format!(
                    "webhook {:?} contains forbidden rule: admission webhook rules cannot reference API group {group:?}",
                    webhook.generate_name
                ));
            }
            if group == "admissionregistration.k8s.io" {
                for resource in strings(rule.get("resources")) {
                    if FORBIDDEN_ADMISSION_RESOURCES.contains(&resource.to_lowercase().as_str()) {
                        out.push(format!(
                            "webhook {:?} contains forbidden rule: admission webhook rules cannot reference resource {resource:?} for API group {group:?}",
                            webhook.generate_name
                        ));
                    }
                }
            }
        }
    }
    out
}

/// The strings of a JSON list (none when it is not one).
fn strings(list: Option<&Value>) -> Vec<&str> {
    list.and_then(Value::as_array)
        .map(|l| l.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// Kubernetes' `IsDNS1123Subdomain`.
pub fn is_dns_subdomain(name: &str) -> bool {
    name.len() <= 253
        && !name.is_empty()
        && name.split('.').all(|label| {
            let bytes = label.as_bytes();
            !bytes.is_empty()
                && bytes[0].is_ascii_alphanumeric()
                && bytes[bytes.len() - 1].is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        })
}

/// The webhook configurations of the CSV's admission webhooks, for an operator installed in
/// `namespace` watching as `mode` says.
pub fn configurations(csv: &Csv, namespace: &str, mode: &Mode) -> Vec<Object> {
    let selector = namespace_selector(mode);
    csv.spec
        .webhookdefinitions
        .iter()
        .filter_map(|w| {
            let (kind, mutating) = match w.type_.as_str() {
                VALIDATING => ("ValidatingWebhookConfiguration", false),
                MUTATING => ("MutatingWebhookConfiguration", true),
                _ => return None,
            };
            let name = w.generate_name.trim_end_matches('-');
            let mut hook = json!({
                "name": name,
                "clientConfig": {"service": client_service(w, namespace, w.webhook_path.as_deref())},
            });
            if !w.rules.is_empty() {
                hook["rules"] = json!(w.rules);
            }
            let copied = [
                ("failurePolicy", &w.failure_policy),
                ("matchPolicy", &w.match_policy),
                ("objectSelector", &w.object_selector),
                ("sideEffects", &w.side_effects),
                ("timeoutSeconds", &w.timeout_seconds),
                ("admissionReviewVersions", &w.admission_review_versions),
            ];
            for (field, value) in copied {
                if let Some(v) = value {
                    hook[field] = v.clone();
                }
            }
            if let (true, Some(v)) = (mutating, &w.reinvocation_policy) {
                hook["reinvocationPolicy"] = v.clone();
            }
            if let Some(s) = &selector {
                hook["namespaceSelector"] = s.clone();
            }
            Some(made(
                "admissionregistration.k8s.io/v1",
                kind,
                None,
                name,
                json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
                    "metadata": {"name": name}, "webhooks": [hook]}),
            ))
        })
        .collect()
}

/// Where the API server calls `webhook`: its Deployment's Service in `namespace`, at `path`.
/// The port is the Service's (upstream writes the declared port even when it is unset, which
/// the API server refuses; the Service listens on 443 then).
fn client_service(webhook: &Webhook, namespace: &str, path: Option<&str>) -> Value {
    let mut service = json!({
        "namespace": namespace,
        "name": services::service_name(&webhook.deployment_name),
        "port": port_or_default(webhook.container_port),
    });
    if let Some(p) = path {
        service["path"] = json!(p);
    }
    service
}

/// Namespaces whose objects an admission webhook sees: those watched (all: no selector).
fn namespace_selector(mode: &Mode) -> Option<Value> {
    let targets = mode.targets();
    (!targets.is_empty()).then(|| {
        json!({"matchExpressions": [{
            "key": "kubernetes.io/metadata.name",
            "operator": "In",
            "values": targets,
        }]})
    })
}

/// `crds` with each one a conversion webhook converts calling it (`spec.conversion`), as OLM
/// v0 wires it; a CRD that keeps unknown fields cannot be converted by a webhook, and is
/// refused.
pub fn with_conversion(
    csv: &Csv,
    namespace: &str,
    mut crds: Vec<Object>,
) -> Result<Vec<Object>, RegistryError> {
    let mut by_crd: BTreeMap<&str, &Webhook> = BTreeMap::new();
    for w in csv
        .spec
        .webhookdefinitions
        .iter()
        .filter(|w| w.type_ == CONVERSION)
    {
        for crd in &w.conversion_crds {
            by_crd.insert(crd, w);
        }
    }
    for crd in &mut crds {
        let Some(w) = by_crd.get(crd.key.name.as_str()) else {
            continue;
        };
        let spec = crd.manifest.get_mut("spec").and_then(Value::as_object_mut);
        let Some(spec) = spec else { continue };
        if spec.get("preserveUnknownFields") == Some(&Value::Bool(true)) {
            return Err(RegistryError::InvalidWebhooks(vec![format!(
                "custom resource definition '{}' must have .spec.preserveUnknownFields set to false to let API Server call webhook to do the conversion",
                crd.key.name
            )]));
        }
        let mut webhook = json!({
            "clientConfig": {"service": client_service(w, namespace, Some(w.webhook_path.as_deref().unwrap_or("/")))},
        });
        if let Some(v) = &w.admission_review_versions {
            webhook["conversionReviewVersions"] = v.clone();
        }
        spec.insert(
            "conversion".into(),
            json!({"strategy": "Webhook", "webhook": webhook}),
        );
    }
    Ok(crds)
}

#[cfg(test)]
mod tests;
