//! What resolution needs of the API objects, read without I/O: each Catalog's labels, priority
//! and whether it serves content; each Operator as a resolver request; each BundleDeployment's
//! bundle (the base of upgrade edges).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as KubeSelector;
use kube::ResourceExt;
use olm_api::bundle_deployment::BundleDeployment;
use olm_api::catalog::Catalog;
use olm_api::conditions::find_condition;
use olm_api::operator::{Operator, UpgradeConstraintPolicy};
use olm_resolver::resolve::selector::LabelSelectorRequirement;
use olm_resolver::resolve::{self, LabelSelector, Request};

use crate::bundle_deployment::{BUNDLE_LABEL, PACKAGE_LABEL, VERSION_LABEL};

/// Whether a Catalog's content can be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Availability {
    /// catalogd serves content with this hash at this URL.
    Serving {
        /// `status.contentHash`.
        hash: String,
        /// `status.contentURL`.
        url: String,
    },
    /// It serves nothing (yet); the text says why, for messages.
    NotServing(String),
}

/// What resolution needs of a Catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogFacts {
    /// Its name.
    pub name: String,
    /// Its labels (matched by Operators' catalogSelectors).
    pub labels: BTreeMap<String, String>,
    /// `spec.priority`.
    pub priority: i32,
    /// Whether it serves content.
    pub availability: Availability,
}

/// The facts of a Catalog.
pub fn catalog_facts(c: &Catalog) -> CatalogFacts {
    let status = c.status.as_ref();
    let serving = status.and_then(|s| find_condition(&s.conditions, "Serving"));
    let availability = if c.metadata.deletion_timestamp.is_some() {
        Availability::NotServing("it is being deleted".to_owned())
    } else {
        match (
            serving,
            status.and_then(|s| s.content_hash.clone()),
            status.and_then(|s| s.content_url.clone()),
        ) {
            (Some(s), Some(hash), Some(url)) if s.status == "True" => {
                Availability::Serving { hash, url }
            }
            (Some(s), _, _) if s.status != "True" => Availability::NotServing(format!(
                "Serving is {} ({}: {})",
                s.status, s.reason, s.message
            )),
            _ => Availability::NotServing("catalogd has not served its content yet".to_owned()),
        }
    };
    CatalogFacts {
        name: c.name_any(),
        labels: c.labels().clone(),
        priority: c.spec.priority,
        availability,
    }
}

/// An Operator's catalogSelector in the resolver's terms; `None` when absent or empty.
pub fn selector_of(selector: Option<&KubeSelector>) -> Option<LabelSelector> {
    let s = selector?;
    let converted = LabelSelector {
        match_labels: s.match_labels.clone().unwrap_or_default(),
        match_expressions: s
            .match_expressions
            .iter()
            .flatten()
            .map(|e| LabelSelectorRequirement {
                key: e.key.clone(),
                operator: e.operator.clone(),
                values: e.values.clone().unwrap_or_default(),
            })
            .collect(),
    };
    (!converted.is_empty()).then_some(converted)
}

/// Whether the Operator's catalogSelector matches `labels`.
pub fn selects(op: &Operator, labels: &BTreeMap<String, String>) -> bool {
    selector_of(op.spec.catalog_selector.as_ref()).is_none_or(|s| s.matches(labels))
}

/// An Operator as a resolver request, named after it.
pub fn request_of(op: &Operator) -> Request {
    let spec = &op.spec;
    Request {
        name: Some(op.name_any()),
        package_name: spec.package_name.clone(),
        version: spec.version.clone().filter(|v| !v.trim().is_empty()),
        channel: spec.channel.clone().filter(|c| !c.is_empty()),
        upgrade_constraint_policy: match spec.upgrade_constraint_policy {
            UpgradeConstraintPolicy::Enforce => resolve::UpgradeConstraintPolicy::Enforce,
            UpgradeConstraintPolicy::Ignore => resolve::UpgradeConstraintPolicy::Ignore,
        },
        catalog_selector: selector_of(spec.catalog_selector.as_ref()),
    }
}

/// The bundle a BundleDeployment deploys, as far as it says.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Deployed {
    /// Package (our label).
    pub package: Option<String>,
    /// Bundle name (our label).
    pub bundle: Option<String>,
    /// Bundle version (our label).
    pub version: Option<String>,
    /// The image of its source.
    pub image: Option<String>,
}

/// What a BundleDeployment deploys: our labels, and its image (all upstream's BDs have).
pub fn deployed(bd: &BundleDeployment) -> Deployed {
    let label = |k: &str| bd.labels().get(k).cloned().filter(|v| !v.is_empty());
    Deployed {
        package: label(PACKAGE_LABEL),
        bundle: label(BUNDLE_LABEL),
        version: label(VERSION_LABEL),
        image: crate::bundle_deployment::image_of(bd).map(str::to_owned),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelectorRequirement};
    use olm_api::catalog::{CatalogSpec, CatalogStatus, Source, SourceType};
    use olm_api::operator::OperatorSpec;

    fn catalog(conditions: Vec<Condition>, hash: Option<&str>) -> Catalog {
        let mut c = Catalog::new(
            "c",
            CatalogSpec {
                source: Source {
                    type_: SourceType::Http,
                    image: None,
                    config_maps: None,
                    http: None,
                    git: None,
                    custom: None,
                },
                priority: 3,
            },
        );
        c.status = Some(CatalogStatus {
            conditions,
            content_hash: hash.map(Into::into),
            content_url: hash.map(|_| "http://x/catalogs/c/all.json".to_owned()),
            ..Default::default()
        });
        c
    }

    fn serving(status: &str) -> Condition {
        Condition {
            type_: "Serving".into(),
            status: status.into(),
            reason: "Available".into(),
            message: "m".into(),
            observed_generation: None,
            last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ),
        }
    }

    #[test]
    fn a_catalog_serves_only_with_serving_true_and_a_hash_and_url() {
        let facts = catalog_facts(&catalog(vec![serving("True")], Some("abc")));
        assert_eq!(facts.priority, 3);
        assert_eq!(
            facts.availability,
            Availability::Serving {
                hash: "abc".into(),
                url: "http://x/catalogs/c/all.json".into()
            }
        );
        let not = catalog_facts(&catalog(vec![serving("False")], Some("abc")));
        assert!(
            matches!(not.availability, Availability::NotServing(m) if m.contains("Serving is False"))
        );
        let new = catalog_facts(&catalog(vec![], None));
        assert!(
            matches!(new.availability, Availability::NotServing(m) if m.contains("not served"))
        );
        let mut deleted = catalog(vec![serving("True")], Some("abc"));
        deleted.metadata.deletion_timestamp = Some(serving("True").last_transition_time);
        assert!(
            matches!(catalog_facts(&deleted).availability, Availability::NotServing(m) if m.contains("deleted"))
        );
    }

    #[test]
    fn an_operator_becomes_a_request_and_empty_fields_mean_any() {
        let mut op = Operator::new(
            "my-op",
            OperatorSpec {
                package_name: "foo".into(),
                version: Some(" ".into()),
                channel: Some("".into()),
                upgrade_constraint_policy: UpgradeConstraintPolicy::Ignore,
                catalog_selector: Some(KubeSelector::default()),
                namespace: None,
                watch_namespace: None,
                target_namespaces: None,
                deployment_config: None,
                values: None,
                values_from: None,
            },
        );
        let r = request_of(&op);
        assert_eq!(r.name.as_deref(), Some("my-op"));
        assert_eq!(r.version, None);
        assert_eq!(r.channel, None);
        assert_eq!(r.catalog_selector, None);
        assert_eq!(
            r.upgrade_constraint_policy,
            resolve::UpgradeConstraintPolicy::Ignore
        );
        op.spec.catalog_selector = Some(KubeSelector {
            match_labels: Some([("tier".to_owned(), "a".to_owned())].into()),
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "env".into(),
                operator: "In".into(),
                values: Some(vec!["prod".into()]),
            }]),
        });
        let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert!(selects(&op, &labels(&[("tier", "a"), ("env", "prod")])));
        assert!(!selects(&op, &labels(&[("tier", "a")])));
    }
}
