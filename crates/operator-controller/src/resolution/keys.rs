//! The cache keys of resolution, each a hash of exactly what the cached thing depends on:
//!
//! * the **index** key: the contents held (by identity), with each Catalog's priority and
//!   labels; a new key re-indexes and starts a new generation;
//! * the **grouping** key: the set of requested packages (order-independent);
//! * the **snapshot** key: the generation and every Operator's and BundleDeployment's
//!   identity and resourceVersion (order-independent), for the views one burst of reconciles
//!   shares;
//! * a group's **spec** key: the generation and each member's spec; its **answer** key adds
//!   what each member's BundleDeployment deploys ([`Base`]).

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use kube::ResourceExt;
use olm_api::bundle_deployment::BundleDeployment;
use olm_api::operator::Operator;
use olm_resolver::resolve::CatalogContent;

use crate::bundle_deployment::{BUNDLE_LABEL, image_of};
use crate::inputs::CatalogFacts;
use crate::memo::Base;

/// A hash of `value` (stable within one process, which is all a cache needs).
pub fn fingerprint(value: &impl Hash) -> u64 {
    let mut h = DefaultHasher::new();
    value.hash(&mut h);
    h.finish()
}

/// The index key of the contents `available` (in Catalog name order): a content is the same
/// one while it is the same allocation, which the content client keeps per content hash.
pub fn index_key(available: &[(&CatalogFacts, Arc<CatalogContent>)]) -> u64 {
    fingerprint(
        &available
            .iter()
            .map(|(f, c)| (&f.name, Arc::as_ptr(c) as usize, f.priority, &f.labels))
            .collect::<Vec<_>>(),
    )
}

/// The grouping key: an order-independent hash of the requested packages, so the many
/// reconciles of one snapshot neither sort nor collect the Operators.
pub fn groups_key(operators: &[&Arc<Operator>]) -> u64 {
    operators.iter().fold(0u64, |acc, o| {
        acc.wrapping_add(fingerprint(&o.spec.package_name))
    })
}

/// The snapshot key: the generation, and a sum (order-independent, nothing sorted) of each
/// object's identity and version.
pub fn snap_key(
    generation: u64,
    operators: &[&Arc<Operator>],
    bundle_deployments: &[Arc<BundleDeployment>],
) -> u64 {
    let versions = |uid: &Option<String>, rv: &Option<String>| fingerprint(&(uid, rv));
    fingerprint(&(
        generation,
        operators.iter().fold(0u64, |acc, o| {
            acc.wrapping_add(versions(&o.metadata.uid, &o.metadata.resource_version))
        }),
        bundle_deployments.iter().fold(0u64, |acc, b| {
            acc.wrapping_add(versions(&b.metadata.uid, &b.metadata.resource_version))
        }),
    ))
}

/// A group's spec key: the generation and each member's (in name order) identity and spec.
/// The spec is read through its `metadata.generation`, which moves with every spec change;
/// an object without one (never from the API server) is hashed by its spec.
pub fn spec_key<'a>(generation: u64, members: impl IntoIterator<Item = &'a Operator>) -> u64 {
    let mut h = DefaultHasher::new();
    generation.hash(&mut h);
    for op in members {
        (&op.metadata.name, &op.metadata.uid, op.metadata.generation).hash(&mut h);
        if op.metadata.generation.is_none() {
            serde_json::to_string(&op.spec)
                .unwrap_or_default()
                .hash(&mut h);
        }
    }
    h.finish()
}

/// What `bd` (an Operator's BundleDeployment, if it has one) deploys.
pub fn base_of(bd: Option<&BundleDeployment>) -> Base {
    match bd {
        None => Base::Nothing,
        Some(bd) => Base::Deploys {
            bundle: bd.labels().get(BUNDLE_LABEL).cloned(),
            image: image_of(bd).map(str::to_owned),
        },
    }
}

/// A group's answer key: its spec key and each member's base.
pub fn answer_key(spec_key: u64, bases: &[Base]) -> u64 {
    fingerprint(&(spec_key, bases))
}

#[cfg(test)]
mod tests {
    use super::*;
    use olm_api::operator::{OperatorSpec, UpgradeConstraintPolicy};

    fn op(name: &str, package: &str, generation: i64, rv: &str) -> Arc<Operator> {
        let mut o = Operator::new(
            name,
            OperatorSpec {
                package_name: package.into(),
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
        o.metadata.uid = Some(format!("uid-{name}"));
        o.metadata.generation = Some(generation);
        o.metadata.resource_version = Some(rv.into());
        Arc::new(o)
    }

    #[test]
    fn grouping_and_snapshot_keys_ignore_order_and_see_every_change() {
        let (a, b) = (op("a", "p", 1, "1"), op("b", "q", 1, "1"));
        assert_eq!(groups_key(&[&a, &b]), groups_key(&[&b, &a]));
        assert_ne!(groups_key(&[&a]), groups_key(&[&a, &b]));
        assert_eq!(snap_key(1, &[&a, &b], &[]), snap_key(1, &[&b, &a], &[]));
        let a2 = op("a", "p", 1, "2");
        assert_ne!(snap_key(1, &[&a, &b], &[]), snap_key(1, &[&a2, &b], &[]));
        assert_ne!(snap_key(1, &[&a], &[]), snap_key(2, &[&a], &[]));
    }

    #[test]
    fn a_spec_key_moves_with_a_generation_and_not_with_a_status_write() {
        let a = op("a", "p", 1, "1");
        let status_written = op("a", "p", 1, "7");
        let spec_changed = op("a", "p", 2, "8");
        assert_eq!(spec_key(1, [&*a]), spec_key(1, [&*status_written]));
        assert_ne!(spec_key(1, [&*a]), spec_key(1, [&*spec_changed]));
        assert_ne!(spec_key(1, [&*a]), spec_key(2, [&*a]));
    }

    #[test]
    fn an_answer_key_moves_with_what_a_member_deploys() {
        let deploys = |image: &str| Base::Deploys {
            bundle: None,
            image: Some(image.into()),
        };
        assert_ne!(
            answer_key(1, &[deploys("v1")]),
            answer_key(1, &[deploys("v2")])
        );
        assert_ne!(
            answer_key(1, &[Base::Nothing]),
            answer_key(1, &[deploys("v1")])
        );
        assert_eq!(base_of(None), Base::Nothing);
    }
}
