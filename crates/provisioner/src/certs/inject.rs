//! The certificates of a bundle's webhooks and APIServices, put into its objects: a pure
//! function of the rendered objects, the [`Serving`] Deployments and the provider's
//! [`Injection`].
//!
//! Whatever the provider, each serving Deployment mounts its Service's certificate Secret
//! where OLM mounts it (upstream's `ensureCorrectDeploymentCertVolumes`): `webhook-cert` at
//! `/tmp/k8s-webhook-server/serving-certs` (`tls.crt`, `tls.key`) and `apiservice-cert` at
//! `/apiserver.local.config/certificates` (`apiserver.crt`, `apiserver.key`), replacing any
//! volume of those names or mounted at those paths. Then:
//!
//! * the provisioner's own CA: the CA bundle in every webhook configuration, CRD conversion
//!   and APIService calling the Service (`caBundle`), the certificate in a Secret of type
//!   `kubernetes.io/tls` (`tls.crt`, `tls.key`, `ca.crt`), a Role and RoleBinding letting the
//!   Deployment's ServiceAccount read it (as OLM v0), and the signing CA's hash on the Pod
//!   template (OLM v0's `olmcahash`), so that Pods roll when it changes;
//! * cert-manager: a self-signed Issuer and a Certificate per Service (upstream's: two years,
//!   renewed a day before expiry) and `cert-manager.io/inject-ca-from` on what calls it;
//! * OpenShift's service-ca: `service.beta.openshift.io/serving-cert-secret-name` on the
//!   Service and `service.beta.openshift.io/inject-cabundle` on what calls it.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::format::registry::{Serving, made};
use crate::object::Object;

/// The Pod-template annotation carrying the signing CA's hash (OLM v0's name).
pub const CA_HASH: &str = "olmcahash";

/// What the chosen provider puts in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Injection {
    /// Nothing (upstream's rendering without a certificate provider).
    Nothing,
    /// The provisioner's own CA.
    Own {
        /// The CA bundle trusted (PEM).
        bundle: String,
        /// The signing CA's certificate (PEM).
        signing: String,
        /// Each Service's certificate and key (PEM), by `<namespace>/<service>`.
        issued: BTreeMap<String, (String, String)>,
    },
    /// cert-manager.
    CertManager,
    /// OpenShift's service-ca.
    ServiceCa,
}

impl Injection {
    /// The provisioner's own CA, as `store` keeps it.
    pub fn own(store: &crate::certs::rotation::Store) -> Injection {
        Injection::Own {
            bundle: store.bundle(),
            signing: store.current.cert.clone(),
            issued: store
                .serving
                .iter()
                .map(|(k, i)| (k.clone(), (i.cert.clone(), i.key.clone())))
                .collect(),
        }
    }
}

/// Where OLM mounts a serving certificate: the volume, its path, and the file names of the
/// certificate and key.
const VOLUMES: [(&str, &str, &str, &str); 2] = [
    (
        "webhook-cert",
        "/tmp/k8s-webhook-server/serving-certs",
        "tls.crt",
        "tls.key",
    ),
    (
        "apiservice-cert",
        "/apiserver.local.config/certificates",
        "apiserver.crt",
        "apiserver.key",
    ),
];

/// `objects` with the certificates of `serving` put in as `injection` says, and the objects
/// the provider adds (Secrets, Issuers, Certificates, Roles).
pub fn inject(mut objects: Vec<Object>, serving: &[Serving], injection: &Injection) -> Vec<Object> {
    if serving.is_empty() || *injection == Injection::Nothing {
        return objects;
    }
    let calls = |service: &Value| -> Option<&Serving> {
        serving.iter().find(|s| {
            service.get("namespace").and_then(Value::as_str) == Some(s.namespace.as_str())
                && service.get("name").and_then(Value::as_str) == Some(s.service.as_str())
        })
    };
    let mut added = Vec::new();
    for o in &mut objects {
        let kind = o.key.kind.as_str();
        let targets: Vec<Serving> = match kind {
            "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration" => {
                let mut hit = Vec::new();
                if let Some(hooks) = o.manifest.get_mut("webhooks").and_then(Value::as_array_mut) {
                    for hook in hooks {
                        let service = hook.pointer("/clientConfig/service").cloned();
                        if let Some(s) = service.as_ref().and_then(calls) {
                            set_ca(hook.pointer_mut("/clientConfig"), injection);
                            hit.push(s.clone());
                        }
                    }
                }
                hit
            }
            "CustomResourceDefinition" => {
                let config = o
                    .manifest
                    .get_mut("spec")
                    .and_then(|s| s.pointer_mut("/conversion/webhook/clientConfig"));
                let service = config.as_ref().and_then(|c| c.get("service")).cloned();
                match service.as_ref().and_then(calls) {
                    Some(s) => {
                        set_ca(config, injection);
                        vec![s.clone()]
                    }
                    None => Vec::new(),
                }
            }
            "APIService" => {
                let service = o
                    .manifest
                    .get("spec")
                    .and_then(|s| s.get("service"))
                    .cloned();
                match service.as_ref().and_then(calls) {
                    Some(s) => {
                        set_ca(o.manifest.get_mut("spec"), injection);
                        vec![s.clone()]
                    }
                    None => Vec::new(),
                }
            }
            "Service" if *injection == Injection::ServiceCa => serving
                .iter()
                .filter(|s| {
                    o.key.namespace.as_deref() == Some(s.namespace.as_str())
                        && o.key.name == s.service
                })
                .cloned()
                .collect(),
            "Deployment" => {
                if let Some(s) = serving.iter().find(|s| {
                    o.key.group == "apps"
                        && o.key.namespace.as_deref() == Some(s.namespace.as_str())
                        && o.key.name == s.deployment
                }) {
                    mount(&mut o.manifest, &s.secret);
                    if let Injection::Own { signing, .. } = injection {
                        annotate(
                            &mut o.manifest,
                            &TEMPLATE_META,
                            CA_HASH,
                            &hex(&Sha256::digest(signing.as_bytes())),
                        );
                    }
                    if let Injection::Own { .. } = injection {
                        added.extend(own_secret_access(o, s));
                    }
                }
                Vec::new()
            }
            _ => Vec::new(),
        };
        if targets.is_empty() {
            continue;
        }
        match injection {
            Injection::CertManager if kind != "Service" => {
                let s = &targets[0];
                annotate(
                    &mut o.manifest,
                    &["metadata"],
                    "cert-manager.io/inject-ca-from",
                    &format!("{}/{}", s.namespace, s.secret),
                );
            }
            Injection::ServiceCa if kind == "Service" => annotate(
                &mut o.manifest,
                &["metadata"],
                "service.beta.openshift.io/serving-cert-secret-name",
                &targets[0].secret,
            ),
            Injection::ServiceCa => annotate(
                &mut o.manifest,
                &["metadata"],
                "service.beta.openshift.io/inject-cabundle",
                "true",
            ),
            _ => {}
        }
    }
    for s in serving {
        match injection {
            Injection::Own { bundle, issued, .. } => {
                if let Some((cert, key)) = issued.get(&format!("{}/{}", s.namespace, s.service)) {
                    added.push(tls_secret(s, cert, key, bundle));
                }
            }
            Injection::CertManager => added.extend(cert_manager(s)),
            _ => {}
        }
    }
    objects.extend(added);
    objects
}

/// Puts the CA bundle into `config` (a `clientConfig`, or an APIService's spec).
fn set_ca(config: Option<&mut Value>, injection: &Injection) {
    if let (Some(Value::Object(config)), Injection::Own { bundle, .. }) = (config, injection) {
        config.insert("caBundle".into(), json!(STANDARD.encode(bundle)));
    }
}

/// Calls `f` with the object at `path` below `map`, made (an empty object) where missing or
/// not an object.
fn within(map: &mut Map<String, Value>, path: &[&str], f: &mut dyn FnMut(&mut Map<String, Value>)) {
    match path.split_first() {
        None => f(map),
        Some((first, rest)) => {
            let mut inner = match map.remove(*first) {
                Some(Value::Object(m)) => m,
                _ => Map::new(),
            };
            within(&mut inner, rest, f);
            map.insert((*first).to_owned(), Value::Object(inner));
        }
    }
}

/// Sets the annotation `key` of the object at `path` (`metadata`, or a Pod template's).
fn annotate(manifest: &mut Map<String, Value>, path: &[&str], key: &str, value: &str) {
    let mut path = path.to_vec();
    path.push("annotations");
    within(manifest, &path, &mut |a| {
        a.insert(key.to_owned(), json!(value));
    });
}

/// A Deployment's Pod template metadata.
const TEMPLATE_META: [&str; 3] = ["spec", "template", "metadata"];

/// Lower-case hex.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Mounts `secret` where OLM mounts serving certificates, in every container of the
/// Deployment, replacing volumes of OLM's names or at OLM's paths.
fn mount(manifest: &mut Map<String, Value>, secret: &str) {
    within(manifest, &["spec", "template", "spec"], &mut |pod| {
        mount_in(pod, secret);
    });
}

/// [`mount`], in a Pod spec.
fn mount_in(pod: &mut Map<String, Value>, secret: &str) {
    let mut replaced: Vec<String> = VOLUMES.iter().map(|v| v.0.to_owned()).collect();
    if let Some(Value::Array(containers)) = pod.get("containers") {
        for c in containers {
            for m in c
                .get("volumeMounts")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let path = m.get("mountPath").and_then(Value::as_str);
                if VOLUMES.iter().any(|v| Some(v.1) == path)
                    && let Some(name) = m.get("name").and_then(Value::as_str)
                {
                    replaced.push(name.to_owned());
                }
            }
        }
    }
    let named = |v: &Value| {
        v.get("name")
            .and_then(Value::as_str)
            .is_some_and(|n| replaced.iter().any(|r| r == n))
    };
    let mut volumes: Vec<Value> = match pod.remove("volumes") {
        Some(Value::Array(v)) => v.into_iter().filter(|v| !named(v)).collect(),
        _ => Vec::new(),
    };
    volumes.extend(VOLUMES.iter().map(|(name, _, cert, key)| {
        json!({"name": name, "secret": {"secretName": secret, "items": [
            {"key": "tls.crt", "path": cert}, {"key": "tls.key", "path": key}]}})
    }));
    pod.insert("volumes".into(), Value::Array(volumes));
    if let Some(Value::Array(containers)) = pod.get_mut("containers") {
        for c in containers.iter_mut().filter_map(Value::as_object_mut) {
            let mut mounts: Vec<Value> = match c.remove("volumeMounts") {
                Some(Value::Array(m)) => m.into_iter().filter(|m| !named(m)).collect(),
                _ => Vec::new(),
            };
            mounts.extend(
                VOLUMES
                    .iter()
                    .map(|(name, path, _, _)| json!({"name": name, "mountPath": path})),
            );
            c.insert("volumeMounts".into(), Value::Array(mounts));
        }
    }
}

/// The Secret of a Service's certificate from the provisioner's CA.
fn tls_secret(s: &Serving, cert: &str, key: &str, bundle: &str) -> Object {
    made(
        "v1",
        "Secret",
        Some(&s.namespace),
        &s.secret,
        json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": s.secret, "namespace": s.namespace},
        "type": "kubernetes.io/tls",
        "data": {
            "tls.crt": STANDARD.encode(cert),
            "tls.key": STANDARD.encode(key),
            "ca.crt": STANDARD.encode(bundle),
        }}),
    )
}

/// OLM v0's Role and RoleBinding letting the serving Deployment's ServiceAccount read its
/// certificate's Secret.
fn own_secret_access(deployment: &Object, s: &Serving) -> [Object; 2] {
    let account = deployment
        .manifest
        .get("spec")
        .and_then(|s| s.pointer("/template/spec/serviceAccountName"))
        .and_then(Value::as_str)
        .filter(|a| !a.is_empty())
        .unwrap_or("default");
    let role = made(
        "rbac.authorization.k8s.io/v1",
        "Role",
        Some(&s.namespace),
        &s.secret,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": s.secret, "namespace": s.namespace},
            "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"],
                "resourceNames": [s.secret]}]}),
    );
    let binding = made(
        "rbac.authorization.k8s.io/v1",
        "RoleBinding",
        Some(&s.namespace),
        &s.secret,
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": s.secret, "namespace": s.namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": s.secret},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": s.namespace}]}),
    );
    [role, binding]
}

/// Upstream's cert-manager objects for a Service: a self-signed Issuer and a Certificate.
fn cert_manager(s: &Serving) -> [Object; 2] {
    let issuer = crate::format::registry::names::with_suffix(&s.secret, "selfsigned-issuer");
    let hosts = s.hosts();
    [
        made(
            "cert-manager.io/v1",
            "Issuer",
            Some(&s.namespace),
            &issuer,
            json!({"apiVersion": "cert-manager.io/v1", "kind": "Issuer",
                "metadata": {"name": issuer, "namespace": s.namespace},
                "spec": {"selfSigned": {}}}),
        ),
        made(
            "cert-manager.io/v1",
            "Certificate",
            Some(&s.namespace),
            &s.secret,
            json!({"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
            "metadata": {"name": s.secret, "namespace": s.namespace},
            "spec": {
                "secretName": s.secret,
                "commonName": hosts[0],
                "usages": ["server auth"],
                "isCA": false,
                "dnsNames": hosts,
                "issuerRef": {"name": issuer},
                "duration": "17520h0m0s",
                "renewBefore": "24h0m0s",
            }}),
        ),
    ]
}

#[cfg(test)]
mod tests;
