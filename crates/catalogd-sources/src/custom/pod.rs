//! The generator Pod of a custom source, and the Secret holding its upload token, built from
//! the spec by pure functions. The user's container runs first (an init container) with no
//! ServiceAccount token, as a non-root user with every capability dropped, and writes the
//! catalog to a shared emptyDir; the collector (catalogd's own image, `catalogd collect`)
//! then checks the file and uploads it with a token only it can read.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Capabilities, Container, EmptyDirVolumeSource, EnvVar, EnvVarSource, Pod, PodSecurityContext,
    PodSpec, ResourceRequirements, SeccompProfile, Secret, SecretKeySelector, SecurityContext,
    Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use olm_api::catalog::{Catalog, CustomSource};
use sha2::{Digest, Sha256};

use crate::contract::SourceError;
use crate::poll::parse_duration;

/// Label on every generator Pod and token Secret (value `"true"`): what catalogd watches, and
/// what it deletes at start-up.
pub const GENERATOR_LABEL: &str = "olm-rs.io/catalog-generator";
/// Label with the uid of the Catalog a Pod generates for.
pub const CATALOG_UID_LABEL: &str = "olm-rs.io/catalog-uid";
/// Annotation with the name of that Catalog (names can be longer than label values).
pub const CATALOG_ANNOTATION: &str = "olm-rs.io/catalog";
/// Annotation with the hash of the spec the Pod runs.
pub const SPEC_HASH_ANNOTATION: &str = "olm-rs.io/spec-hash";
/// Name of the user's container.
pub const GENERATOR: &str = "generator";
/// Name of catalogd's collector container.
pub const COLLECTOR: &str = "collector";
/// Environment variable, in the generator, naming the file to write.
pub const OUTPUT_ENV: &str = "CATALOG_OUTPUT_FILE";
/// Environment variable, in the collector, holding the upload token.
pub const TOKEN_ENV: &str = "CATALOGD_UPLOAD_TOKEN";
/// Key of the token in its Secret.
pub const TOKEN_KEY: &str = "token";
/// The user and group both containers run as.
pub const RUN_AS: i64 = 65532;
/// Time the collector (and the kubelet) get after the generator's timeout before the Pod's own
/// deadline ends it, when catalogd is not there to.
pub const COLLECT_GRACE: Duration = Duration::from_secs(120);

/// How long the kubelet waits for a deleted generator Pod's containers to stop before it kills
/// them (`terminationGracePeriodSeconds`).
pub const TERMINATION_GRACE_SECONDS: i64 = 2;

/// Defaults of the spec's optional fields.
pub const DEFAULT_OUTPUT_FILE: &str = "catalog.json";
/// Where the output volume is mounted when `mountPath` is absent.
pub const DEFAULT_MOUNT_PATH: &str = "/output";
/// How long a generator may run when `timeout` is absent.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);
/// The longest timeout honoured.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// How catalogd runs generators.
#[derive(Debug, Clone)]
pub struct PodOptions {
    /// catalogd's namespace, where the Pods run.
    pub namespace: String,
    /// Image of the collector (catalogd's own).
    pub collector_image: String,
    /// Base URL the collector uploads to (catalogd's upload server, as the Pod reaches it).
    pub upload_url: String,
    /// The largest output accepted.
    pub max_bytes: u64,
    /// Resources of a generator container whose spec leaves them open.
    pub defaults: super::resources::Defaults,
}

/// What a spec resolves to, with defaults applied and paths checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// The output file, relative to the mount path.
    pub output_file: String,
    /// The mount path.
    pub mount_path: String,
    /// The generator's timeout.
    pub timeout: Duration,
}

/// The spec's defaults applied, and its paths checked (the API server checks them too; this
/// guards objects stored before its rules).
pub fn resolve(spec: &CustomSource) -> Result<Resolved, SourceError> {
    let invalid = |what: &str, value: &str| {
        SourceError::new(
            super::INVALID_SPEC,
            format!("custom.{what} {value:?} must be a plain path without . or .. segments"),
        )
    };
    let output_file = spec.output_file.as_deref().unwrap_or(DEFAULT_OUTPUT_FILE);
    if output_file.starts_with('/') || !plain_segments(output_file) {
        return Err(invalid("outputFile", output_file));
    }
    let mount_path = spec.mount_path.as_deref().unwrap_or(DEFAULT_MOUNT_PATH);
    let inner = mount_path.strip_prefix('/').unwrap_or_default();
    if !mount_path.starts_with('/') || !plain_segments(inner) {
        return Err(invalid("mountPath", mount_path));
    }
    let timeout = match spec.timeout.as_deref() {
        None => DEFAULT_TIMEOUT,
        Some(text) => parse_duration(text)
            .filter(|d| !d.is_zero())
            .ok_or_else(|| {
                SourceError::new(
                    super::INVALID_SPEC,
                    format!("custom.timeout {text:?} is not a positive Go duration"),
                )
            })?
            .min(MAX_TIMEOUT),
    };
    Ok(Resolved {
        output_file: output_file.to_owned(),
        mount_path: mount_path.trim_end_matches('/').to_owned(),
        timeout,
    })
}

fn plain_segments(path: &str) -> bool {
    !path.is_empty()
        && path
            .split('/')
            .all(|s| !s.is_empty() && s != "." && s != "..")
}

/// The hash of a spec: a run is for exactly one spec, and a new spec replaces its Pod.
pub fn spec_hash(spec: &CustomSource) -> String {
    let json = serde_json::to_vec(spec).unwrap_or_default();
    let digest = Sha256::digest(&json);
    hex::encode(&digest[..8])
}

/// A Pod name for a run of the Catalog `catalog`: a readable prefix and a random suffix.
pub fn pod_name(catalog: &str, suffix: &str) -> String {
    let prefix: String = catalog.chars().take(40).collect();
    format!(
        "catalog-gen-{}-{suffix}",
        prefix.trim_end_matches(['-', '.'])
    )
}

fn labels(uid: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (GENERATOR_LABEL.to_owned(), "true".to_owned()),
        (CATALOG_UID_LABEL.to_owned(), uid.to_owned()),
    ])
}

fn restricted() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".into()]),
            add: None,
        }),
        run_as_non_root: Some(true),
        ..Default::default()
    }
}

/// The Pod of one run.
pub fn generator_pod(
    catalog: &Catalog,
    spec: &CustomSource,
    resolved: &Resolved,
    name: &str,
    options: &PodOptions,
) -> Pod {
    let catalog_name = catalog.metadata.name.clone().unwrap_or_default();
    let uid = catalog.metadata.uid.clone().unwrap_or_default();
    let output = format!("{}/{}", resolved.mount_path, resolved.output_file);
    let mut env: Vec<EnvVar> = spec
        .env
        .iter()
        .map(|e| EnvVar {
            name: e.name.clone(),
            value: Some(e.value.clone()),
            value_from: None,
        })
        .collect();
    env.push(EnvVar {
        name: OUTPUT_ENV.into(),
        value: Some(output.clone()),
        value_from: None,
    });
    let mount = |read_only: bool| {
        vec![VolumeMount {
            name: "output".into(),
            mount_path: resolved.mount_path.clone(),
            read_only: Some(read_only),
            ..Default::default()
        }]
    };
    let generator = Container {
        name: GENERATOR.into(),
        image: Some(spec.image.clone()),
        command: (!spec.command.is_empty()).then(|| spec.command.clone()),
        args: (!spec.args.is_empty()).then(|| spec.args.clone()),
        env: Some(env),
        // Never without limits: the admin's defaults fill what the spec leaves open.
        resources: Some(super::resources::with_defaults(
            spec.resources.as_ref(),
            &options.defaults,
        )),
        volume_mounts: Some(mount(false)),
        security_context: Some(restricted()),
        // A failing generator's last lines become its termination message.
        termination_message_policy: Some("FallbackToLogsOnError".into()),
        ..Default::default()
    };
    let quantity = |q: &str| Quantity(q.to_owned());
    let collector = Container {
        name: COLLECTOR.into(),
        image: Some(options.collector_image.clone()),
        args: Some(vec![
            "collect".into(),
            format!("--file={output}"),
            format!(
                "--url={}/uploads/{name}",
                options.upload_url.trim_end_matches('/')
            ),
            format!("--max-bytes={}", options.max_bytes),
        ]),
        env: Some(vec![EnvVar {
            name: TOKEN_ENV.into(),
            value: None,
            value_from: Some(EnvVarSource {
                secret_key_ref: Some(SecretKeySelector {
                    name: name.to_owned(),
                    key: TOKEN_KEY.into(),
                    optional: Some(false),
                }),
                ..Default::default()
            }),
        }]),
        resources: Some(ResourceRequirements {
            requests: Some(BTreeMap::from([
                ("cpu".to_owned(), quantity("10m")),
                ("memory".to_owned(), quantity("16Mi")),
            ])),
            limits: Some(BTreeMap::from([("memory".to_owned(), quantity("64Mi"))])),
            ..Default::default()
        }),
        volume_mounts: Some(mount(true)),
        security_context: Some(SecurityContext {
            read_only_root_filesystem: Some(true),
            ..restricted()
        }),
        ..Default::default()
    };
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(options.namespace.clone()),
            labels: Some(labels(&uid)),
            annotations: Some(BTreeMap::from([
                (CATALOG_ANNOTATION.to_owned(), catalog_name.clone()),
                (SPEC_HASH_ANNOTATION.to_owned(), spec_hash(spec)),
            ])),
            // Deleting the Catalog deletes its Pod, even while catalogd is down.
            owner_references: Some(vec![OwnerReference {
                api_version: "catalogd.operatorframework.io/v1alpha1".into(),
                kind: "Catalog".into(),
                name: catalog_name,
                uid,
                controller: Some(true),
                block_owner_deletion: None,
            }]),
            ..Default::default()
        },
        spec: Some(PodSpec {
            restart_policy: Some("Never".into()),
            automount_service_account_token: Some(false),
            enable_service_links: Some(false),
            active_deadline_seconds: Some(
                i64::try_from((resolved.timeout + COLLECT_GRACE).as_secs()).unwrap_or(i64::MAX),
            ),
            // A run is deleted only once it is over or abandoned (timed out, failed, its spec
            // changed): nothing in it is worth a graceful stop, and a shell as the container's
            // PID 1 ignores SIGTERM, so the default 30 s would keep a dead run's Pod that long.
            termination_grace_period_seconds: Some(TERMINATION_GRACE_SECONDS),
            security_context: Some(PodSecurityContext {
                run_as_non_root: Some(true),
                run_as_user: Some(RUN_AS),
                run_as_group: Some(RUN_AS),
                fs_group: Some(RUN_AS),
                seccomp_profile: Some(SeccompProfile {
                    type_: "RuntimeDefault".into(),
                    localhost_profile: None,
                }),
                ..Default::default()
            }),
            volumes: Some(vec![Volume {
                name: "output".into(),
                empty_dir: Some(EmptyDirVolumeSource {
                    medium: None,
                    size_limit: Some(quantity(&options.max_bytes.to_string())),
                }),
                ..Default::default()
            }]),
            init_containers: Some(vec![generator]),
            containers: vec![collector],
            ..Default::default()
        }),
        status: None,
    }
}

/// The Secret holding the upload token of the Pod `pod` (owned by it, so it goes with it).
pub fn token_secret(pod: &Pod, token: &str) -> Secret {
    let name = pod.metadata.name.clone().unwrap_or_default();
    Secret {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: pod.metadata.namespace.clone(),
            // Only the generator label: never the credential opt-in label.
            labels: Some(BTreeMap::from([(
                GENERATOR_LABEL.to_owned(),
                "true".to_owned(),
            )])),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Pod".into(),
                name,
                uid: pod.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: None,
            }]),
            ..Default::default()
        },
        string_data: Some(BTreeMap::from([(TOKEN_KEY.to_owned(), token.to_owned())])),
        type_: Some("Opaque".into()),
        ..Default::default()
    }
}

/// Whether the Secret with `meta` is the token Secret of the generator Pod `pod` (whose uid is
/// `pod_uid`, when known): it carries the generator label and that Pod owns it. Anything else
/// in catalogd's namespace is someone else's, whatever its name.
pub fn is_token_secret_of(meta: &ObjectMeta, pod: &str, pod_uid: Option<&str>) -> bool {
    let labelled = meta
        .labels
        .as_ref()
        .and_then(|l| l.get(GENERATOR_LABEL))
        .is_some_and(|v| v == "true");
    let owned = meta.owner_references.iter().flatten().any(|o| {
        o.api_version == "v1"
            && o.kind == "Pod"
            && o.name == pod
            && pod_uid.is_none_or(|uid| o.uid == uid)
    });
    labelled && owned
}

#[cfg(test)]
mod tests {
    use super::*;
    use olm_api::catalog::{CatalogSpec, CustomEnvVar, Source, SourceType};

    fn spec() -> CustomSource {
        CustomSource {
            image: "registry.example/gen:1".into(),
            command: vec!["/bin/sh".into(), "-c".into()],
            args: vec!["echo '{}' > /output/catalog.json".into()],
            env: vec![CustomEnvVar {
                name: "LEVEL".into(),
                value: "info".into(),
            }],
            ..Default::default()
        }
    }

    fn catalog() -> Catalog {
        let mut c = Catalog::new(
            "gen",
            CatalogSpec {
                source: Source {
                    type_: SourceType::Custom,
                    custom: Some(spec()),
                    image: None,
                    config_maps: None,
                    http: None,
                    git: None,
                },
                priority: 0,
            },
        );
        c.metadata.uid = Some("uid-1".into());
        c
    }

    fn options() -> PodOptions {
        PodOptions {
            namespace: "olm-system".into(),
            collector_image: "catalogd:dev".into(),
            upload_url: "http://catalogd.olm-system.svc:8084/".into(),
            max_bytes: 1024,
            defaults: super::super::resources::Defaults::standard(),
        }
    }

    #[test]
    fn defaults_apply_and_paths_stay_inside_the_volume() {
        let r = resolve(&spec()).unwrap();
        assert_eq!(
            r,
            Resolved {
                output_file: "catalog.json".into(),
                mount_path: "/output".into(),
                timeout: DEFAULT_TIMEOUT,
            }
        );
        for (file, mount) in [
            ("../x", "/output"),
            ("/etc/x", "/output"),
            ("a", "/"),
            ("a", "/o/../x"),
            ("a", "rel"),
        ] {
            let bad = CustomSource {
                output_file: Some(file.into()),
                mount_path: Some(mount.into()),
                ..spec()
            };
            assert!(resolve(&bad).is_err(), "{file} {mount}");
        }
        let zero = CustomSource {
            timeout: Some("0s".into()),
            ..spec()
        };
        assert!(resolve(&zero).is_err());
    }

    #[test]
    fn the_pod_is_restricted_and_only_the_collector_sees_the_token() {
        let r = resolve(&spec()).unwrap();
        let pod = generator_pod(&catalog(), &spec(), &r, "catalog-gen-gen-1234", &options());
        let s = pod.spec.clone().unwrap();
        assert_eq!(s.automount_service_account_token, Some(false));
        assert_eq!(s.restart_policy.as_deref(), Some("Never"));
        assert_eq!(s.active_deadline_seconds, Some(300 + 120));
        assert_eq!(s.termination_grace_period_seconds, Some(2));
        let psc = s.security_context.unwrap();
        assert_eq!(psc.run_as_non_root, Some(true));
        assert_eq!(psc.seccomp_profile.unwrap().type_, "RuntimeDefault");
        let generator = &s.init_containers.unwrap()[0];
        let env = generator.env.clone().unwrap();
        assert!(env.iter().all(|e| e.value_from.is_none()));
        assert!(env.iter().any(|e| e.name == OUTPUT_ENV
            && e.value.as_deref() == Some("/output/catalog.json")));
        let sc = generator.security_context.clone().unwrap();
        assert_eq!(sc.allow_privilege_escalation, Some(false));
        assert_eq!(sc.capabilities.unwrap().drop.unwrap(), ["ALL"]);
        let collector = &s.containers[0];
        let args = collector.args.clone().unwrap();
        assert_eq!(args[0], "collect");
        assert!(args.contains(
            &"--url=http://catalogd.olm-system.svc:8084/uploads/catalog-gen-gen-1234".to_owned()
        ));
        assert!(args.contains(&"--file=/output/catalog.json".to_owned()));
        let token = &collector.env.clone().unwrap()[0];
        assert_eq!(token.name, TOKEN_ENV);
        assert_eq!(
            token
                .value_from
                .clone()
                .unwrap()
                .secret_key_ref
                .unwrap()
                .name,
            "catalog-gen-gen-1234"
        );
        assert_eq!(
            collector.volume_mounts.clone().unwrap()[0].read_only,
            Some(true)
        );
        let owner = &pod.metadata.owner_references.unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("Catalog", "uid-1")
        );
    }

    #[test]
    fn only_a_labelled_secret_owned_by_the_pod_is_its_token_secret() {
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some("catalog-gen-abc".into()),
                uid: Some("pod-uid".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let ours = token_secret(&pod, "t").metadata;
        assert!(is_token_secret_of(
            &ours,
            "catalog-gen-abc",
            Some("pod-uid")
        ));
        assert!(
            is_token_secret_of(&ours, "catalog-gen-abc", None),
            "the pod is gone"
        );
        assert!(!is_token_secret_of(
            &ours,
            "catalog-gen-abc",
            Some("other-uid")
        ));
        assert!(!is_token_secret_of(&ours, "other-pod", None));
        // A user's Secret of the same name: no label, no owner.
        let users = ObjectMeta {
            name: Some("catalog-gen-abc".into()),
            ..Default::default()
        };
        assert!(!is_token_secret_of(&users, "catalog-gen-abc", None));
        // Labelled but owned by nothing, or owned but not labelled.
        let unowned = ObjectMeta {
            owner_references: None,
            ..ours.clone()
        };
        assert!(!is_token_secret_of(&unowned, "catalog-gen-abc", None));
        let unlabelled = ObjectMeta {
            labels: None,
            ..ours
        };
        assert!(!is_token_secret_of(&unlabelled, "catalog-gen-abc", None));
    }

    #[test]
    fn the_token_secret_is_owned_by_its_pod_and_never_a_credential() {
        let r = resolve(&spec()).unwrap();
        let mut pod = generator_pod(&catalog(), &spec(), &r, "p", &options());
        pod.metadata.uid = Some("pod-uid".into());
        let secret = token_secret(&pod, "t0ken");
        let labels = secret.metadata.labels.unwrap();
        assert!(!labels.contains_key(crate::credentials::CREDENTIAL_LABEL));
        assert_eq!(secret.metadata.owner_references.unwrap()[0].uid, "pod-uid");
    }

    #[test]
    fn names_and_hashes_are_short_and_stable() {
        let long = "x".repeat(253);
        assert!(pod_name(&long, "abcd1234").len() < 63);
        assert_eq!(spec_hash(&spec()), spec_hash(&spec()));
        let other = CustomSource {
            args: vec!["other".into()],
            ..spec()
        };
        assert_ne!(spec_hash(&spec()), spec_hash(&other));
    }
}
