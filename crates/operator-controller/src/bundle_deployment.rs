//! The BundleDeployment an Operator's resolved bundle becomes, and whether an existing one
//! already says it (so an unchanged resolution writes nothing).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::{Resource, ResourceExt};
use olm_api::bundle_deployment::{
    BundleDeployment, BundleDeploymentSpec, BundleImageSource, BundleSource, BundleSpec,
    BundleTemplate, HELM_PROVISIONER, KUSTOMIZE_PROVISIONER, PLAIN_PROVISIONER,
    REGISTRY_PROVISIONER,
};
use olm_api::operator::Operator;
use olm_resolver::resolve::Resolved;

/// Label on a BundleDeployment: its bundle's package.
pub const PACKAGE_LABEL: &str = "olm.operatorframework.io/package-name";
/// Label on a BundleDeployment: its bundle's name.
pub const BUNDLE_LABEL: &str = "olm.operatorframework.io/bundle-name";
/// Label on a BundleDeployment: its bundle's version.
pub const VERSION_LABEL: &str = "olm.operatorframework.io/bundle-version";

/// The provisioner of the bundle's media type: `plain+v0`, `helm+v3` and `kustomize` name
/// their own; everything else (`registry+v1`, or no media type) is registry+v1. An unknown
/// media type is an error.
pub fn provisioner_of(mediatype: Option<&str>) -> Result<&'static str, String> {
    match mediatype {
        Some("plain+v0") => Ok(PLAIN_PROVISIONER),
        Some("helm+v3") => Ok(HELM_PROVISIONER),
        Some("kustomize") => Ok(KUSTOMIZE_PROVISIONER),
        None | Some("registry+v1") | Some("") => Ok(REGISTRY_PROVISIONER),
        Some(other) => Err(format!("unknown bundle mediatype: {other}")),
    }
}

/// The BundleDeployment for `op`'s resolved bundle: same name, controlled by `op`.
pub fn desired(op: &Operator, bundle: &Resolved) -> Result<BundleDeployment, String> {
    let provisioner = provisioner_of(bundle.mediatype.as_deref())?;
    let owner = op.controller_owner_ref(&()).map(|mut o| {
        o.block_owner_deletion = Some(true);
        o
    });
    let labels = BTreeMap::from([
        (PACKAGE_LABEL.to_owned(), bundle.package.clone()),
        (BUNDLE_LABEL.to_owned(), label_value(&bundle.name)),
        (VERSION_LABEL.to_owned(), label_value(&bundle.version)),
    ]);
    Ok(BundleDeployment {
        metadata: ObjectMeta {
            name: Some(op.name_any()),
            labels: Some(labels),
            owner_references: owner.map(|o| vec![o]),
            ..Default::default()
        },
        spec: BundleDeploymentSpec {
            provisioner_class_name: PLAIN_PROVISIONER.to_owned(),
            template: BundleTemplate {
                metadata: None,
                spec: BundleSpec {
                    provisioner_class_name: provisioner.to_owned(),
                    source: BundleSource {
                        type_: "image".to_owned(),
                        image: Some(BundleImageSource {
                            r#ref: bundle.image.clone(),
                            pull_secret: None,
                        }),
                        ..Default::default()
                    },
                },
            },
            config: config_of(op),
        },
        status: None,
    })
}

/// What `op` asks of the install, as the provisioner's `spec.config` says it (`namespace`,
/// `watchNamespace`, `targetNamespaces`, `deploymentConfig`, and a chart's `values` and
/// `valuesFrom`); `None` when it asks nothing, so that a BundleDeployment written before these
/// fields existed is unchanged. What a bundle's format does not read, the provisioner refuses
/// with a reason the Operator shows.
pub fn config_of(op: &Operator) -> Option<serde_json::Map<String, serde_json::Value>> {
    let spec = &op.spec;
    let mut config = serde_json::Map::new();
    if let Some(ns) = &spec.namespace {
        config.insert("namespace".into(), ns.clone().into());
    }
    if let Some(watch) = &spec.watch_namespace {
        config.insert("watchNamespace".into(), watch.clone().into());
    }
    if let Some(targets) = &spec.target_namespaces {
        config.insert("targetNamespaces".into(), targets.clone().into());
    }
    if let Some(deployment) = &spec.deployment_config {
        config.insert(
            "deploymentConfig".into(),
            serde_json::Value::Object(deployment.clone()),
        );
    }
    if let Some(values) = &spec.values {
        config.insert("values".into(), values.clone());
    }
    if let Some(from) = spec.values_from.as_ref().filter(|f| !f.is_empty()) {
        config.insert(
            "valuesFrom".into(),
            serde_json::to_value(from).unwrap_or_default(),
        );
    }
    (!config.is_empty()).then_some(config)
}

/// A label value: at most 63 characters of `[A-Za-z0-9._-]`, starting and ending with an
/// alphanumeric. Bundle names and versions almost always fit; one that does not is cut (and the
/// spec's image still says exactly which bundle it is).
pub fn label_value(text: &str) -> String {
    let cleaned: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(63)
        .collect();
    cleaned
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_owned()
}

/// Whether `existing` already says everything `desired` does: spec, our labels and our
/// controller reference. Anything else (other labels, status) is not ours to compare.
pub fn up_to_date(existing: &BundleDeployment, desired: &BundleDeployment) -> bool {
    let labels_ok = desired
        .labels()
        .iter()
        .all(|(k, v)| existing.labels().get(k) == Some(v));
    let owner_ok = desired
        .owner_references()
        .iter()
        .all(|o| existing.owner_references().iter().any(|e| same_owner(e, o)));
    labels_ok && owner_ok && existing.spec == desired.spec
}

fn same_owner(a: &OwnerReference, b: &OwnerReference) -> bool {
    a.uid == b.uid
        && a.controller == b.controller
        && a.kind == b.kind
        && a.api_version == b.api_version
}

/// The image of a BundleDeployment's source, if it has an image source.
pub fn image_of(bd: &BundleDeployment) -> Option<&str> {
    bd.spec
        .template
        .spec
        .source
        .image
        .as_ref()
        .map(|i| i.r#ref.as_str())
}

/// Whether `bd` is controlled by the Operator with `uid`.
pub fn controlled_by(bd: &BundleDeployment, uid: &str) -> bool {
    bd.owner_references()
        .iter()
        .any(|o| o.controller == Some(true) && o.uid == uid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use olm_api::operator::{OperatorSpec, UpgradeConstraintPolicy};

    pub(crate) fn operator() -> Operator {
        let mut op = Operator::new(
            "my-op",
            OperatorSpec {
                package_name: "foo".into(),
                version: None,
                channel: None,
                upgrade_constraint_policy: UpgradeConstraintPolicy::Enforce,
                catalog_selector: None,
                namespace: None,
                watch_namespace: None,
                target_namespaces: None,
                deployment_config: None,
                values: None,
                values_from: None,
            },
        );
        op.metadata.uid = Some("uid-1".into());
        op
    }

    fn resolved(mediatype: Option<&str>) -> Resolved {
        Resolved {
            request: 0,
            entry: 0,
            package: "foo".into(),
            name: "foo.v1.0.0".into(),
            version: "1.0.0".into(),
            image: "quay.io/x/foo:1".into(),
            catalog: "c".into(),
            deprecated: false,
            mediatype: mediatype.map(Into::into),
        }
    }

    #[test]
    fn the_media_type_picks_the_provisioner() {
        let bd = desired(&operator(), &resolved(None)).unwrap();
        assert_eq!(bd.spec.provisioner_class_name, PLAIN_PROVISIONER);
        assert_eq!(
            bd.spec.template.spec.provisioner_class_name,
            REGISTRY_PROVISIONER
        );
        let plain = desired(&operator(), &resolved(Some("plain+v0"))).unwrap();
        assert_eq!(
            plain.spec.template.spec.provisioner_class_name,
            PLAIN_PROVISIONER
        );
        for (mediatype, class) in [
            ("helm+v3", HELM_PROVISIONER),
            ("kustomize", KUSTOMIZE_PROVISIONER),
        ] {
            let bd = desired(&operator(), &resolved(Some(mediatype))).unwrap();
            assert_eq!(bd.spec.template.spec.provisioner_class_name, class);
        }
        assert_eq!(
            desired(&operator(), &resolved(Some("helm"))).unwrap_err(),
            "unknown bundle mediatype: helm"
        );
    }

    #[test]
    fn an_operators_values_go_to_the_bundle_deployments_config() {
        let mut op = operator();
        op.spec.values = Some(serde_json::json!({"replicaCount": 2}));
        op.spec.values_from = Some(vec![olm_api::bundle_deployment::ValuesReference {
            kind: olm_api::bundle_deployment::ValuesKind::Secret,
            name: "shop-values".into(),
            key: None,
            optional: false,
        }]);
        let config = config_of(&op).unwrap();
        assert_eq!(config["values"], serde_json::json!({"replicaCount": 2}));
        assert_eq!(
            config["valuesFrom"],
            serde_json::json!([{"kind": "Secret", "name": "shop-values"}])
        );
        // Text stays text.
        op.spec.values = Some("replicaCount: 2\n".into());
        assert_eq!(config_of(&op).unwrap()["values"], "replicaCount: 2\n");
    }

    #[test]
    fn the_bundle_deployment_is_named_labelled_and_controlled_by_its_operator() {
        let bd = desired(&operator(), &resolved(None)).unwrap();
        assert_eq!(bd.name_any(), "my-op");
        assert_eq!(bd.labels()[PACKAGE_LABEL], "foo");
        assert_eq!(bd.labels()[BUNDLE_LABEL], "foo.v1.0.0");
        assert_eq!(bd.labels()[VERSION_LABEL], "1.0.0");
        assert!(controlled_by(&bd, "uid-1"));
        assert_eq!(bd.owner_references()[0].block_owner_deletion, Some(true));
        let source = bd.spec.template.spec.source.image.as_ref().unwrap();
        assert_eq!(source.r#ref, "quay.io/x/foo:1");
    }

    #[test]
    fn where_the_operator_installs_and_watches_is_carried_in_the_config() {
        let plain = desired(&operator(), &resolved(None)).unwrap();
        assert_eq!(plain.spec.config, None, "nothing asked, nothing written");
        let mut op = operator();
        op.spec.namespace = Some("ops".into());
        op.spec.target_namespaces = Some(vec!["a".into(), "b".into()]);
        let bd = desired(&op, &resolved(None)).unwrap();
        assert_eq!(
            serde_json::Value::Object(bd.spec.config.clone().unwrap()),
            serde_json::json!({"namespace": "ops", "targetNamespaces": ["a", "b"]})
        );
        assert!(!up_to_date(&plain, &bd), "a changed config is written");
        op.spec.target_namespaces = None;
        op.spec.deployment_config = serde_json::json!({"nodeSelector": {"disk": "ssd"}})
            .as_object()
            .cloned();
        op.spec.watch_namespace = Some(String::new());
        let all = desired(&op, &resolved(None)).unwrap();
        let config = all.spec.config.unwrap();
        assert_eq!(config.get("watchNamespace"), Some(&serde_json::json!("")));
        assert_eq!(
            config.get("deploymentConfig"),
            Some(&serde_json::json!({"nodeSelector": {"disk": "ssd"}}))
        );
    }

    #[test]
    fn only_our_fields_decide_whether_a_write_is_needed() {
        let want = desired(&operator(), &resolved(None)).unwrap();
        let mut have = want.clone();
        have.metadata
            .labels
            .get_or_insert_default()
            .insert("team".into(), "a".into());
        have.metadata.resource_version = Some("7".into());
        assert!(up_to_date(&have, &want));
        have.spec.template.spec.source.image = Some(BundleImageSource {
            r#ref: "other".into(),
            pull_secret: None,
        });
        assert!(!up_to_date(&have, &want));
        let mut unowned = want.clone();
        unowned.metadata.owner_references = None;
        assert!(!up_to_date(&unowned, &want));
    }

    #[test]
    fn label_values_are_valid() {
        assert_eq!(label_value("1.0.0+build.1"), "1.0.0_build.1");
        assert_eq!(label_value(&"a".repeat(70)).len(), 63);
        assert_eq!(label_value("-x-"), "x");
    }
}
