//! `BundleDeployment` (core.rukpak.io/v1alpha1), as rukpak v0.13 defines it. rukpak owns this
//! API; the chart can install its CRD so olm-rs works on a cluster without rukpak.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::schema::conditions_schema;

/// Provisioner class of plain bundles (`olm.bundle.mediatype: plain+v0`).
pub const PLAIN_PROVISIONER: &str = "core-rukpak-io-plain";
/// Provisioner class of registry+v1 bundles (the default media type).
pub const REGISTRY_PROVISIONER: &str = "core-rukpak-io-registry";
/// Provisioner class of Helm charts (`olm.bundle.mediatype: helm+v3`; rukpak's name).
pub const HELM_PROVISIONER: &str = "core-rukpak-io-helm";
/// Provisioner class of kustomizations (`olm.bundle.mediatype: kustomize`; olm-rs's own:
/// rukpak's kustomize provisioner was proposed and never merged).
pub const KUSTOMIZE_PROVISIONER: &str = "core-rukpak-io-kustomize";
/// The label on a CRD that lets tools of the ApplySet convention (KEP-3659, `kubectl apply
/// --prune --applyset`) take its objects as ApplySet parents: the provisioner makes every
/// BundleDeployment the parent of the set it applied.
pub const APPLYSET_PARENT_TYPE_LABEL: &str = "applyset.kubernetes.io/is-parent-type";

/// The annotation that asks the provisioner for a dry run of a BundleDeployment's template
/// instead of installing it: `status.dryRun` then says what would be created, changed and
/// pruned, and the installed set is left as it is.
pub const DRY_RUN_ANNOTATION: &str = "olm-rs.io/dry-run";

/// What a sync of the wanted template would do (olm-rs's, additive: rukpak has no dry run).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DryRun {
    /// The template it is about (`<bd>-<hash>`, as `activeBundle` would name it).
    pub bundle: String,
    /// Objects it would create (`Kind[.group] [namespace/]name`).
    #[serde(default)]
    pub create: Vec<String>,
    /// Objects it would change.
    #[serde(default)]
    pub change: Vec<String>,
    /// Objects of the installed set it would delete.
    #[serde(default)]
    pub prune: Vec<String>,
    /// How many objects it would leave as they are.
    #[serde(default)]
    pub unchanged: i64,
    /// Why it cannot be installed, when it cannot (a reason and its message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

/// A Secret or ConfigMap in the provisioner's namespace whose key holds Helm values (YAML),
/// as a BundleDeployment's `spec.config.valuesFrom` and an Operator's `spec.valuesFrom` name it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ValuesReference {
    /// `Secret` or `ConfigMap`.
    pub kind: ValuesKind,
    /// Its name, in the provisioner's namespace.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// The key holding the values; `values.yaml` when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub key: Option<String>,
    /// When true, a missing object or key is skipped; otherwise it stops the install with a
    /// reason.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
}

/// The kinds values are read from.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ValuesKind {
    /// A Secret (`data`, base64).
    Secret,
    /// A ConfigMap (`data`).
    ConfigMap,
}

impl ValuesReference {
    /// The key read: `key`, or `values.yaml`.
    pub fn key(&self) -> &str {
        self.key.as_deref().unwrap_or(DEFAULT_VALUES_KEY)
    }
}

/// The label a Secret or ConfigMap of the managers' namespace carries, with the value
/// `"true"`, to be read as a chart's values: that namespace also holds credentials and the
/// provisioner's CA keys, which a `valuesFrom` must not be able to render into a chart's objects.
pub const VALUES_LABEL: &str = "olm-rs.io/values";

/// The key a [`ValuesReference`] reads when it names none (Flux's HelmRelease default).
pub const DEFAULT_VALUES_KEY: &str = "values.yaml";

/// A bundle to deploy and the provisioner that deploys it.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "core.rukpak.io",
    version = "v1alpha1",
    kind = "BundleDeployment",
    plural = "bundledeployments",
    shortname = "bd",
    shortname = "bds",
    status = "BundleDeploymentStatus",
    derive = "PartialEq",
    doc = "BundleDeployment is the Schema for the bundledeployments API",
    printcolumn(
        name = "Active Bundle",
        type_ = "string",
        json_path = ".status.activeBundle"
    ),
    printcolumn(
        name = "Install State",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Installed")].reason"#
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Provisioner",
        type_ = "string",
        json_path = ".spec.provisionerClassName",
        priority = 1
    )
)]
#[serde(rename_all = "camelCase")]
pub struct BundleDeploymentSpec {
    /// Name of the provisioner that reconciles this BundleDeployment.
    #[schemars(regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"))]
    pub provisioner_class_name: String,
    /// The Bundle this deployment manages.
    pub template: BundleTemplate,
    /// Provisioner-specific configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::free_form_schema")]
    pub config: Option<serde_json::Map<String, serde_json::Value>>,
}

/// Desired state of the generated Bundle.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BundleTemplate {
    /// Labels and annotations of the generated Bundle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateMetadata>,
    /// The Bundle's spec.
    pub spec: BundleSpec,
}

/// The parts of object metadata a template may set.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateMetadata {
    /// Labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// A Bundle: its provisioner and where its content comes from.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BundleSpec {
    /// Name of the provisioner that unpacks this Bundle.
    pub provisioner_class_name: String,
    /// Where the bundle content comes from.
    pub source: BundleSource,
}

/// Where bundle content comes from; `type` names the member that is set.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BundleSource {
    /// `image`, `git`, `configMaps`, `upload` or `http`.
    #[serde(rename = "type")]
    pub type_: String,
    /// A bundle image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<BundleImageSource>,
    /// A git repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git: Option<BundleGitSource>,
    /// ConfigMaps holding the manifests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_maps: Option<Vec<BundleConfigMapSource>>,
    /// Content uploaded to rukpak's upload service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upload: Option<serde_json::Map<String, serde_json::Value>>,
    /// An HTTP URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<BundleHttpSource>,
}

/// A bundle image.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BundleImageSource {
    /// Image reference.
    pub r#ref: String,
    /// Pull secret name in rukpak's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_secret: Option<String>,
}

/// A git repository.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BundleGitSource {
    /// Repository URL.
    pub repository: String,
    /// Directory of the manifests; `./manifests` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directory: Option<String>,
    /// Exactly one of branch, tag or commit.
    pub r#ref: BundleGitRef,
    /// Credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<BundleAuthorization>,
}

/// A git ref.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BundleGitRef {
    /// Branch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// Tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// Commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
}

/// Credentials for a git or HTTP source.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BundleAuthorization {
    /// Secret holding the credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<BundleLocalRef>,
    /// Skip TLS verification.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure_skip_verify: bool,
}

/// A reference by name.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BundleLocalRef {
    /// Name.
    pub name: String,
}

/// A ConfigMap holding manifests.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BundleConfigMapSource {
    /// The ConfigMap.
    pub config_map: BundleLocalRef,
    /// Directory the keys are written under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// An HTTP URL.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BundleHttpSource {
    /// URL.
    pub url: String,
    /// Credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<BundleAuthorization>,
}

/// What the provisioner made of the BundleDeployment.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BundleDeploymentStatus {
    /// `HasValidBundle`, `Installed`, `Healthy`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,
    /// Name of the Bundle currently deployed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_bundle: Option<String>,
    /// Exactly what is installed, as rukpak's later API records it: for an image, the
    /// reference by the digest that was pulled (a tag is resolved once per template, and the
    /// installed content is pulled by this digest again after a restart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_source: Option<ResolvedSource>,
    /// What a sync of the wanted template would do, while the BundleDeployment carries the
    /// `olm-rs.io/dry-run` annotation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<DryRun>,
    /// The generation the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// The installed content's source, resolved.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedSource {
    /// `image`.
    #[serde(rename = "type")]
    pub type_: String,
    /// The image, by digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ResolvedImage>,
}

/// An image by digest.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedImage {
    /// `<repository>@sha256:<digest>`.
    pub r#ref: String,
}

impl ResolvedSource {
    /// An image pulled as `by_digest`.
    pub fn image(by_digest: impl Into<String>) -> ResolvedSource {
        ResolvedSource {
            type_: "image".into(),
            image: Some(ResolvedImage {
                r#ref: by_digest.into(),
            }),
        }
    }

    /// The image reference by digest, when this is an image.
    pub fn image_ref(&self) -> Option<&str> {
        self.image.as_ref().map(|i| i.r#ref.as_str())
    }
}
