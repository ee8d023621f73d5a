//! `Operator` (operators.operatorframework.io/v1alpha1): a request to install one package.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::schema::conditions_schema;

/// API group of `Operator`.
pub const GROUP: &str = "operators.operatorframework.io";

/// Upstream's `spec.version` pattern (operator-controller v0.6–v0.8), verbatim, typos included:
/// what passes it but fails the range parser is reported as an invalid spec by the controller.
pub const VERSION_PATTERN: &str = r"^(\s*(=||!=|>|<|>=|=>|<=|=<|~|~>|\^)\s*(v?(0|[1-9]\d*|[x|X|\*])(\.(0|[1-9]\d*|x|X|\*]))?(\.(0|[1-9]\d*|x|X|\*))?(-([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?(\+([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?)\s*)((?:\s+|,\s*|\s*\|\|\s*)(=||!=|>|<|>=|=>|<=|=<|~|~>|\^)\s*(v?(0|[1-9]\d*|x|X|\*])(\.(0|[1-9]\d*|x|X|\*))?(\.(0|[1-9]\d*|x|X|\*]))?(-([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?(\+([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?)\s*)*$";

/// Which package to install, and which versions are acceptable.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "operators.operatorframework.io",
    version = "v1alpha1",
    kind = "Operator",
    plural = "operators",
    status = "OperatorStatus",
    derive = "PartialEq",
    doc = "Operator asks for one package from the catalogs; operator-controller resolves it to a bundle and a BundleDeployment.",
    printcolumn(name = "Package", type_ = "string", json_path = ".spec.packageName"),
    printcolumn(
        name = "Resolved",
        type_ = "string",
        json_path = ".status.resolvedVersion"
    ),
    printcolumn(
        name = "Installed",
        type_ = "string",
        json_path = ".status.installedVersion"
    ),
    printcolumn(
        name = "Resolution",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Resolved")].status"#
    ),
    printcolumn(
        name = "Install",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Installed")].status"#
    ),
    printcolumn(
        name = "Healthy",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Healthy")].status"#
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "!has(self.watchNamespace) || !has(self.targetNamespaces)",
     "message": "watchNamespace and targetNamespaces are both set: name one namespace or a list, not both"},
]))]
pub struct OperatorSpec {
    /// Name of the package to install.
    #[schemars(length(max = 48), regex(pattern = r"^[a-z0-9]+(-[a-z0-9]+)*$"))]
    pub package_name: String,
    /// Acceptable versions, as a Masterminds/semver constraint (`1.2.3` is exactly that version;
    /// `>=1.0.0 <2.0.0`, `1.2.x`, `~1.2`, `^1.2`, `||` are ranges). Empty means any version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64), regex(pattern = VERSION_PATTERN))]
    pub version: Option<String>,
    /// Only bundles in this channel are considered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 48), regex(pattern = r"^[a-z0-9]+([\.-][a-z0-9]+)*$"))]
    pub channel: Option<String>,
    /// `Enforce` (default): upgrades follow the catalog's upgrade edges. `Ignore`: any version,
    /// up or down.
    #[serde(default)]
    pub upgrade_constraint_policy: UpgradeConstraintPolicy,
    /// Which Catalogs to consider, by label; all when empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog_selector: Option<LabelSelector>,
    /// The namespace a registry+v1 operator is installed in (ClusterExtension's
    /// `spec.namespace`); it must exist. Unset: the bundle's suggested namespace, else
    /// `<package>-system`, which the provisioner makes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63), regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"))]
    pub namespace: Option<String>,
    /// The one namespace the operator watches (upstream v1's `watchNamespace`): the install
    /// namespace is OwnNamespace, another SingleNamespace, `""` all namespaces. Unset: all
    /// namespaces when the bundle supports it, else its install namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(max = 63),
        regex(pattern = r"^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    )]
    pub watch_namespace: Option<String>,
    /// The namespaces the operator watches, for MultiNamespace (OLM v0's OperatorGroup
    /// `targetNamespaces`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 256),
        inner(length(max = 63), regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")),
        extend("x-kubernetes-list-type" = "set")
    )]
    pub target_namespaces: Option<Vec<String>>,
    /// Settings of the operator's Deployments (OLM v0's Subscription `spec.config`, upstream
    /// v1's `deploymentConfig`): `env`, `envFrom`, `resources`, `nodeSelector`, `tolerations`,
    /// `affinity`, `volumes`, `volumeMounts`, `annotations`. Checked by the provisioner
    /// (docs/provisioner.md, "Per-install settings").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::free_form_schema")]
    pub deployment_config: Option<serde_json::Map<String, serde_json::Value>>,
    /// A Helm chart's values (helm+v3 bundles): an object, or YAML text as rukpak's helm
    /// provisioner took it. Merged over `valuesFrom`; checked against the chart's
    /// `values.schema.json` when it renders.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::any_schema")]
    pub values: Option<serde_json::Value>,
    /// Secrets and ConfigMaps in the managers' namespace whose keys hold more of a chart's
    /// values, merged in order (Flux's HelmRelease `valuesFrom`); each must carry the label
    /// `olm-rs.io/values=true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    pub values_from: Option<Vec<crate::bundle_deployment::ValuesReference>>,
}

/// How upgrades of an installed bundle are constrained.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
pub enum UpgradeConstraintPolicy {
    /// Only successors along the catalog's upgrade edges (or staying put).
    #[default]
    Enforce,
    /// Any version, up or down.
    Ignore,
}

/// What operator-controller resolved and installed.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperatorStatus {
    /// Image of the resolved bundle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_bundle_resource: Option<String>,
    /// Image of the installed bundle; set only while the BundleDeployment is installed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub installed_bundle_resource: Option<String>,
    /// Version of the resolved bundle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_version: Option<String>,
    /// Version of the installed bundle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub installed_version: Option<String>,
    /// `Resolved`, `Installed` and `Deprecated`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,
    /// The generation the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}
