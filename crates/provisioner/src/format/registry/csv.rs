//! The parts of a ClusterServiceVersion (`operators.coreos.com/v1alpha1`) that the conversion
//! reads; the rest of the CSV (descriptions, icons, owned CRD descriptors) is for catalogs and
//! consoles, and is ignored, as upstream ignores it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A CSV.
#[derive(Debug, Clone, Deserialize)]
pub struct Csv {
    /// Its metadata.
    pub metadata: Metadata,
    /// Its spec.
    pub spec: Spec,
}

/// A CSV's metadata.
#[derive(Debug, Clone, Deserialize)]
pub struct Metadata {
    /// Its name (`<package>.v<version>` by convention).
    pub name: String,
    /// Its annotations; copied onto every Deployment's Pod template, as OLM does.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

/// A CSV's spec.
#[derive(Debug, Clone, Deserialize)]
pub struct Spec {
    /// The install modes it declares.
    #[serde(default, rename = "installModes")]
    pub install_modes: Vec<InstallMode>,
    /// How it is installed.
    pub install: Install,
    /// Admission and conversion webhooks, served by the CSV's Deployments.
    #[serde(default)]
    pub webhookdefinitions: Vec<Webhook>,
    /// Aggregated API servers: the owned ones are served by the CSV's Deployments.
    #[serde(default)]
    pub apiservicedefinitions: ApiServices,
    /// The CRDs it owns and requires.
    #[serde(default)]
    pub customresourcedefinitions: Crds,
}

/// One install mode.
#[derive(Debug, Clone, Deserialize)]
pub struct InstallMode {
    /// `OwnNamespace`, `SingleNamespace`, `MultiNamespace` or `AllNamespaces`.
    #[serde(rename = "type")]
    pub type_: String,
    /// Whether the operator supports it.
    #[serde(default)]
    pub supported: bool,
}

/// `spec.apiservicedefinitions`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ApiServices {
    /// The APIServices the operator serves.
    #[serde(default)]
    pub owned: Vec<ApiService>,
}

/// One owned APIService (OLM's `APIServiceDescription`): `<version>.<group>`, served by a
/// Deployment of the CSV on a port.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiService {
    /// The API group.
    #[serde(default)]
    pub group: String,
    /// Its version.
    #[serde(default)]
    pub version: String,
    /// The Deployment serving it.
    #[serde(default)]
    pub deployment_name: String,
    /// The port its container serves on (0: 443).
    #[serde(default)]
    pub container_port: i32,
}

/// One webhook (OLM's `WebhookDescription`). The fields copied into the webhook
/// configuration are kept as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Webhook {
    /// Its name (a trailing `-` is dropped).
    #[serde(default)]
    pub generate_name: String,
    /// `ValidatingAdmissionWebhook`, `MutatingAdmissionWebhook` or `ConversionWebhook`.
    #[serde(default, rename = "type")]
    pub type_: String,
    /// The Deployment serving it.
    #[serde(default)]
    pub deployment_name: String,
    /// The port its Service exposes (0: 443).
    #[serde(default)]
    pub container_port: i32,
    /// The container's port, when not `container_port` (a number or a port name).
    #[serde(default)]
    pub target_port: Option<Value>,
    /// The path it is served at.
    #[serde(default)]
    pub webhook_path: Option<String>,
    /// Admission rules.
    #[serde(default)]
    pub rules: Vec<Value>,
    /// `Fail` or `Ignore`.
    #[serde(default)]
    pub failure_policy: Option<Value>,
    /// `Exact` or `Equivalent`.
    #[serde(default)]
    pub match_policy: Option<Value>,
    /// Which objects it sees.
    #[serde(default)]
    pub object_selector: Option<Value>,
    /// `None` or `NoneOnDryRun`.
    #[serde(default)]
    pub side_effects: Option<Value>,
    /// How long the API server waits for it.
    #[serde(default)]
    pub timeout_seconds: Option<Value>,
    /// The review versions it accepts.
    #[serde(default)]
    pub admission_review_versions: Option<Value>,
    /// Mutating only: `Never` or `IfNeeded`.
    #[serde(default)]
    pub reinvocation_policy: Option<Value>,
    /// Conversion only: the CRDs it converts.
    #[serde(default, rename = "conversionCRDs")]
    pub conversion_crds: Vec<String>,
}

/// The port a webhook's or APIService's Service exposes: the one declared, else 443 (OLM's
/// default).
pub fn port_or_default(port: i32) -> i32 {
    if port > 0 { port } else { 443 }
}

/// `spec.customresourcedefinitions`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Crds {
    /// The CRDs the operator owns: each must be in the bundle.
    #[serde(default)]
    pub owned: Vec<CrdDescription>,
}

/// One owned CRD.
#[derive(Debug, Clone, Deserialize)]
pub struct CrdDescription {
    /// The CRD's name (`<plural>.<group>`).
    pub name: String,
}

/// `spec.install`.
#[derive(Debug, Clone, Deserialize)]
pub struct Install {
    /// The strategy (`deployment`, the only one OLM knows).
    #[serde(default)]
    pub strategy: String,
    /// What it installs.
    #[serde(default)]
    pub spec: StrategySpec,
}

/// `spec.install.spec`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct StrategySpec {
    /// Namespaced permissions (cluster-wide in AllNamespaces mode).
    #[serde(default)]
    pub permissions: Vec<Permission>,
    /// Cluster-wide permissions.
    #[serde(default, rename = "clusterPermissions")]
    pub cluster_permissions: Vec<Permission>,
    /// The operator's Deployments.
    #[serde(default)]
    pub deployments: Vec<DeploymentSpec>,
}

/// The rules a ServiceAccount is granted. Serialized as OLM's Go type
/// (`StrategyDeploymentPermissions`) is, field for field, so that its hash (and the RBAC names
/// made from it) are upstream's.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Permission {
    /// The ServiceAccount (empty: `default`).
    #[serde(default, rename = "serviceAccountName")]
    pub service_account_name: String,
    /// Its rules (`null` when absent, as Go encodes a nil slice).
    #[serde(default)]
    pub rules: Option<Vec<PolicyRule>>,
}

/// An RBAC rule, in the field order and with the omissions of Kubernetes' Go type.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct PolicyRule {
    /// Verbs (`null` when absent: the Go field has no `omitempty`).
    #[serde(default)]
    pub verbs: Option<Vec<String>>,
    /// API groups.
    #[serde(default, rename = "apiGroups", skip_serializing_if = "empty")]
    pub api_groups: Option<Vec<String>>,
    /// Resources.
    #[serde(default, skip_serializing_if = "empty")]
    pub resources: Option<Vec<String>>,
    /// Resource names.
    #[serde(default, rename = "resourceNames", skip_serializing_if = "empty")]
    pub resource_names: Option<Vec<String>>,
    /// Non-resource URLs.
    #[serde(default, rename = "nonResourceURLs", skip_serializing_if = "empty")]
    pub non_resource_urls: Option<Vec<String>>,
}

/// Go's `omitempty` on a slice: nil or empty.
fn empty(list: &Option<Vec<String>>) -> bool {
    list.as_ref().is_none_or(Vec::is_empty)
}

/// One of `spec.install.spec.deployments`.
#[derive(Debug, Clone, Deserialize)]
pub struct DeploymentSpec {
    /// The Deployment's name.
    pub name: String,
    /// Its labels.
    #[serde(default)]
    pub label: Option<BTreeMap<String, String>>,
    /// Its spec, as written.
    pub spec: Map<String, Value>,
}

impl Csv {
    /// The names of its Deployments.
    pub fn deployment_names(&self) -> std::collections::BTreeSet<&str> {
        self.spec
            .install
            .spec
            .deployments
            .iter()
            .map(|d| d.name.as_str())
            .collect()
    }

    /// Whether it declares `mode` supported.
    pub fn supports(&self, mode: &str) -> bool {
        self.spec
            .install_modes
            .iter()
            .any(|m| m.type_ == mode && m.supported)
    }
}

impl DeploymentSpec {
    /// The ServiceAccount its Pods run as (`default` when none is named).
    pub fn service_account(&self) -> &str {
        self.spec
            .get("template")
            .and_then(|t| t.pointer("/spec/serviceAccountName"))
            .and_then(Value::as_str)
            .filter(|a| !a.is_empty())
            .unwrap_or("default")
    }
}
