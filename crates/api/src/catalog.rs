//! `Catalog` (catalogd.operatorframework.io/v1alpha1): where an operator catalog lives, and what
//! catalogd made of it.

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::schema::{conditions_schema, duration_schema, poll_interval_schema};

/// API group of `Catalog`.
pub const GROUP: &str = "catalogd.operatorframework.io";

/// Annotation that holds a catalog image template (see the catalog-switcher).
pub const IMAGE_TEMPLATE_ANNOTATION: &str = "olm.catalogImageTemplate";

/// Where a catalog's content comes from, and how it is ranked against other catalogs.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "catalogd.operatorframework.io",
    version = "v1alpha1",
    kind = "Catalog",
    plural = "catalogs",
    shortname = "cat",
    status = "CatalogStatus",
    derive = "PartialEq",
    doc = "Catalog names a source of File-Based Catalog content; catalogd unpacks, validates and serves it.",
    printcolumn(name = "Type", type_ = "string", json_path = ".spec.source.type"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Content",
        type_ = "string",
        json_path = ".status.shortContentHash",
        description = "First 12 hex digits of the served content's sha256"
    ),
    printcolumn(
        name = "Serving",
        type_ = "string",
        json_path = r#".status.conditions[?(@.type=="Serving")].status"#
    ),
    printcolumn(
        name = "Priority",
        type_ = "integer",
        json_path = ".spec.priority",
        priority = 1
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct CatalogSpec {
    /// Where the catalog content comes from.
    pub source: Source,
    /// Breaks ties when several catalogs offer the same package: the higher priority wins.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub priority: i32,
}

fn is_zero(v: &i32) -> bool {
    *v == 0
}

/// The kind of source; exactly the member of [`Source`] with this name must be set.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum SourceType {
    /// An OCI image holding FBC under the directory its index label names.
    #[serde(rename = "image")]
    Image,
    /// FBC stored in one or more ConfigMaps.
    #[serde(rename = "configMaps")]
    ConfigMaps,
    /// FBC (a file or a .tar.gz of a directory) served over HTTP(S).
    #[serde(rename = "http")]
    Http,
    /// FBC in a git repository.
    #[serde(rename = "git")]
    Git,
    /// FBC written by a user-supplied container.
    #[serde(rename = "custom")]
    Custom,
}

impl SourceType {
    /// The name used on the wire and in `spec.source.type`.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceType::Image => "image",
            SourceType::ConfigMaps => "configMaps",
            SourceType::Http => "http",
            SourceType::Git => "git",
            SourceType::Custom => "custom",
        }
    }
}

/// A discriminated union: `type` names exactly one member, and only that member is set.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "self.type == 'image' ? has(self.image) : !has(self.image)",
     "message": "source.image must be set when source.type is image, and only then"},
    {"rule": "self.type == 'configMaps' ? has(self.configMaps) : !has(self.configMaps)",
     "message": "source.configMaps must be set when source.type is configMaps, and only then"},
    {"rule": "self.type == 'http' ? has(self.http) : !has(self.http)",
     "message": "source.http must be set when source.type is http, and only then"},
    {"rule": "self.type == 'git' ? has(self.git) : !has(self.git)",
     "message": "source.git must be set when source.type is git, and only then"},
    {"rule": "self.type == 'custom' ? has(self.custom) : !has(self.custom)",
     "message": "source.custom must be set when source.type is custom, and only then"},
]))]
pub struct Source {
    /// Which member below holds the source.
    #[serde(rename = "type")]
    pub type_: SourceType,
    /// Content from an OCI image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageSource>,
    /// Content from ConfigMaps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub config_maps: Option<Vec<ConfigMapSource>>,
    /// Content from an HTTP(S) URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpSource>,
    /// Content from a git repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git: Option<GitSource>,
    /// Content generated by a user container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom: Option<CustomSource>,
}

/// An OCI image whose FBC lives under the directory named by its
/// `operators.operatorframework.io.index.configs.v1` label.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "!has(self.pollInterval) || !self.ref.contains('@sha256:')",
     "message": "cannot specify PollInterval while using digest-based image"},
]))]
pub struct ImageSource {
    /// Image reference, by tag or by digest.
    #[schemars(length(min = 1, max = 1024))]
    pub r#ref: String,
    /// Name of a `kubernetes.io/dockerconfigjson` Secret in catalogd's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_secret: Option<String>,
    /// How often to check a tag for a new digest (Go duration between 5s and 168h, e.g. `10m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "poll_interval_schema")]
    pub poll_interval: Option<String>,
    /// Skip TLS verification of the registry (for test registries only).
    #[serde(
        rename = "insecureSkipTLSVerify",
        default,
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub insecure_skip_tls_verify: bool,
}

/// One ConfigMap whose keys become files under `path`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapSource {
    /// The ConfigMap to read.
    pub config_map: ConfigMapRef,
    /// Directory (relative to the catalog root) the keys are written under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[^/]"))]
    pub path: Option<String>,
}

/// A ConfigMap by name; the namespace defaults to catalogd's own.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapRef {
    /// ConfigMap name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// ConfigMap namespace; catalogd's own when absent. Other namespaces must be allowed by
    /// catalogd's `--allowed-configmap-namespaces` flag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// A reference to a Secret in catalogd's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretRef {
    /// Secret name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// A CA bundle held in a ConfigMap in catalogd's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CaBundleRef {
    /// ConfigMap name.
    #[schemars(length(min = 1, max = 253))]
    pub config_map: String,
    /// Key holding PEM certificates; `ca.crt` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// A single FBC file (JSON or YAML) or a `.tar.gz` of an FBC directory served over HTTP(S).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "!has(self.authSecret) || self.url.startsWith('https://')",
     "message": "authSecret is sent only to https URLs"},
]))]
pub struct HttpSource {
    /// URL to GET.
    #[schemars(regex(pattern = r"^https?://"), length(max = 2048))]
    pub url: String,
    /// Expected sha256 of the body, lowercase hex; a mismatch fails the unpack.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[a-f0-9]{64}$"))]
    pub sha256: Option<String>,
    /// How often to check the URL for new content (Go duration between 5s and 168h).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "poll_interval_schema")]
    pub poll_interval: Option<String>,
    /// Secret with `username` and `password` (basic auth) or `token` (bearer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_secret: Option<SecretRef>,
    /// Extra CA certificates to trust for this URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_bundle: Option<CaBundleRef>,
}

/// A git repository holding FBC.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "!has(self.authSecret) || !self.repository.startsWith('http://')",
     "message": "authSecret is sent only over https or ssh, not to http:// repositories"},
]))]
pub struct GitSource {
    /// Clone URL: `https://`, `http://` (no credentials), or `ssh://` / `user@host:path`.
    /// Local paths and `file://` are refused: catalogd never reads its own filesystem.
    #[schemars(
        length(min = 1, max = 2048),
        regex(pattern = r"^(https?://|ssh://|[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:)")
    )]
    pub repository: String,
    /// What to check out.
    pub r#ref: GitRef,
    /// Directory of the FBC inside the repository; the root when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub directory: Option<String>,
    /// Secret with `username` and `password`, or `token` (sent as the password of basic
    /// auth), for https; `ssh-privatekey` and `ssh-knownhosts` for ssh. It must carry the
    /// credential opt-in label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_secret: Option<SecretRef>,
    /// Extra CA certificates to trust for an https repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_bundle: Option<CaBundleRef>,
    /// How often to check a branch or tag for new commits (Go duration between 5s and 168h).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "poll_interval_schema")]
    pub poll_interval: Option<String>,
}

/// Exactly one of branch, tag or commit.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "[has(self.branch), has(self.tag), has(self.commit)].filter(x, x).size() == 1",
     "message": "exactly one of git.ref.branch, git.ref.tag and git.ref.commit must be set"},
]))]
pub struct GitRef {
    /// A branch name (without `refs/heads/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 255), regex(pattern = r"^[^\s*?:\[\\^~]+$"))]
    pub branch: Option<String>,
    /// A tag name (without `refs/tags/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 255), regex(pattern = r"^[^\s*?:\[\\^~]+$"))]
    pub tag: Option<String>,
    /// A full commit id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[0-9a-f]{40}([0-9a-f]{24})?$"))]
    pub commit: Option<String>,
}

/// A container that writes FBC to `outputFile`; catalogd runs it in a Pod and collects the file.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "!has(self.outputFile) || !self.outputFile.matches('(^|/)[.][.]?(/|$)')",
     "message": "custom.outputFile may not hold . or .. segments"},
    {"rule": "!has(self.mountPath) || !self.mountPath.matches('(^|/)[.][.]?(/|$)')",
     "message": "custom.mountPath may not hold . or .. segments"},
]))]
pub struct CustomSource {
    /// Image of the generator.
    #[schemars(length(min = 1, max = 1024))]
    pub image: String,
    /// Entrypoint override.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// Arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Environment variables (literal values; `valueFrom` is not supported, so a Catalog never
    /// reads Secrets through its generator).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<CustomEnvVar>,
    /// File, relative to `mountPath`, the container writes the FBC to (JSON or YAML);
    /// `catalog.json` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 255),
        regex(pattern = r"^[A-Za-z0-9._-][A-Za-z0-9._/-]*$")
    )]
    pub output_file: Option<String>,
    /// Where the shared output volume is mounted in the container; `/output` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 2, max = 255),
        regex(pattern = r"^/[A-Za-z0-9._-][A-Za-z0-9._/-]*$")
    )]
    pub mount_path: Option<String>,
    /// How long the container may run (Go duration); `5m` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "duration_schema")]
    pub timeout: Option<String>,
    /// How often to run the generator again (Go duration between 5s and 168h); only on spec
    /// changes when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "poll_interval_schema")]
    pub poll_interval: Option<String>,
    /// Resources of the generator container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
}

/// An environment variable of a generator.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CustomEnvVar {
    /// Name.
    #[schemars(
        length(min = 1, max = 255),
        regex(pattern = r"^[A-Za-z_][A-Za-z0-9_.-]*$")
    )]
    pub name: String,
    /// Value (required: `valueFrom` does not exist here, and a field the API server does not
    /// know would be dropped silently).
    pub value: String,
}

/// Coarse state for people; logic should read the conditions.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum Phase {
    /// Waiting to be unpacked.
    Pending,
    /// Being fetched and validated.
    Unpacking,
    /// The newest spec is unpacked and served.
    Unpacked,
    /// The newest spec failed; earlier content may still be served (see `Serving`).
    Failing,
}

/// What catalogd made of the Catalog.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CatalogStatus {
    /// Coarse state; see the conditions for detail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// `Unpacked`, `Serving` (catalogd), and `TemplatesHaveResolved`, `ResolvedImage` (switcher).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "conditions_schema")]
    pub conditions: Vec<Condition>,
    /// Exactly what was fetched (digest, commit, ConfigMap versions, checksum).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_source: Option<ResolvedSource>,
    /// sha256 (hex) of the canonical served content: equal content gives an equal hash,
    /// whatever the source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_hash: Option<String>,
    /// First 12 hex digits of `contentHash`, for `kubectl get`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub short_content_hash: Option<String>,
    /// Where the served content can be fetched (all.json).
    #[serde(
        rename = "contentURL",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub content_url: Option<String>,
    /// Upstream's URLs of the served content: `base` + `/api/v1/all` is the whole content,
    /// `base` + `/api/v1/metas?…` a query of it (ClusterCatalog's `status.urls`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub urls: Option<CatalogUrls>,
    /// The generation the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// When the served content was last unpacked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_unpacked: Option<Time>,
    /// What the catalog-switcher made of the `olm.catalogImageTemplate` annotation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_template: Option<ImageTemplateStatus>,
}

/// Where a Catalog's content is served, as upstream's ClusterCatalog says it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CatalogUrls {
    /// `<content server>/catalogs/<name>`, without a trailing slash.
    pub base: String,
}

/// The fetched source, pinned.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedSource {
    /// Which kind of source was fetched.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<SourceType>,
    /// Image source, pinned by digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ResolvedImageSource>,
    /// The ConfigMaps read, with their versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_maps: Option<Vec<ResolvedConfigMap>>,
    /// The HTTP response that was used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<ResolvedHttpSource>,
    /// The git commit that was checked out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git: Option<ResolvedGitSource>,
    /// The generator run that produced the content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom: Option<ResolvedCustomSource>,
}

/// An image pinned by digest.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedImageSource {
    /// The reference from the spec.
    pub r#ref: String,
    /// The same image by digest (`repo@sha256:...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_ref: Option<String>,
    /// When the registry was last asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_poll_attempt: Option<Time>,
}

/// A ConfigMap as it was read.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedConfigMap {
    /// ConfigMap name.
    pub name: String,
    /// ConfigMap namespace.
    pub namespace: String,
    /// ConfigMap uid.
    pub uid: String,
    /// ConfigMap resourceVersion.
    pub resource_version: String,
}

/// An HTTP response as it was used.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedHttpSource {
    /// The URL fetched.
    pub url: String,
    /// sha256 (hex) of the body.
    pub sha256: String,
    /// The response's ETag, sent back as If-None-Match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
    /// The response's Last-Modified, sent back as If-Modified-Since.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_modified: Option<String>,
    /// When the URL was last asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_poll_attempt: Option<Time>,
}

/// A git checkout.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedGitSource {
    /// The repository cloned.
    pub repository: String,
    /// The commit checked out.
    pub commit: String,
    /// When the repository was last asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_poll_attempt: Option<Time>,
}

/// A generator run.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedCustomSource {
    /// The generator image by digest, as the node reported it, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_digest: Option<String>,
    /// sha256 (hex) of the output file.
    pub sha256: String,
    /// When the generator last ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_poll_attempt: Option<Time>,
}

/// The catalog-switcher's report on the image template.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageTemplateStatus {
    /// The template, as read from the annotation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// The image the template resolved to, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_image: Option<String>,
    /// Why the template did not resolve, or what was done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}
