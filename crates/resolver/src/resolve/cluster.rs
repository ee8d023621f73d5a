//! What the cluster already has, as constraints on resolution (the origin's "runtime
//! constraints"): APIs it serves that no BundleDeployment installed satisfy an
//! `olm.gvk.required` as a chosen bundle would; and an API whose CRD a BundleDeployment owns
//! cannot be provided by the bundle of another (an object has one owner, and the provisioner
//! never takes one over).

use std::collections::{BTreeMap, BTreeSet};

use crate::fbc::property::Gvk;

/// The cluster's APIs, as resolution reads them. Empty (the default) when resolving without a
/// cluster (`olm-resolve`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ClusterApis {
    /// APIs served that no BundleDeployment installed: a CRD's group, each served version and
    /// kind; an aggregated API's group and version with an empty kind (its kinds are known only
    /// by asking it, so any kind of that group and version counts).
    pub served: BTreeSet<Gvk>,
    /// The group and kind of each CRD a BundleDeployment owns, with its name.
    pub owned: BTreeMap<(String, String), String>,
}

impl ClusterApis {
    /// Whether the cluster serves `gvk` without a BundleDeployment.
    pub fn serves(&self, gvk: &Gvk) -> bool {
        self.served.contains(gvk)
            || self.served.contains(&Gvk {
                group: gvk.group.clone(),
                version: gvk.version.clone(),
                kind: String::new(),
            })
    }
}
