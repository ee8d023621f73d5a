//! `operator-controller explain`: reads Operators, Catalogs and BundleDeployments from the
//! cluster, runs the controller's own resolution and planning code, and prints what the
//! controller would write and why, writing nothing.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use olm_api::operator::OperatorStatus;
use serde::Serialize;

use crate::inputs::deployed;
use crate::plan::plan;
use crate::resolution::{Answer, LeftOut, Resolver, Snapshot};

/// What would be done for one Operator.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The Operator.
    pub name: String,
    /// Its package.
    pub package: String,
    /// The resolved bundle, if any.
    pub resolved: Option<ResolvedBundle>,
    /// What would happen to its BundleDeployment: `create`, `update`, `unchanged`, `keep`
    /// (nothing resolved; the existing one stays) or `none`.
    pub bundle_deployment: String,
    /// The image the BundleDeployment has now, if it exists.
    pub current_image: Option<String>,
    /// The status that would be written.
    pub status: OperatorStatus,
    /// Whether that differs from the status it has.
    pub status_changes: bool,
    /// Events that would be published.
    pub events: Vec<String>,
    /// Catalogs its selector matches that take no part, and why.
    pub left_out: Vec<String>,
}

/// A resolved bundle.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedBundle {
    /// Bundle name.
    pub bundle: String,
    /// Version.
    pub version: String,
    /// Image.
    pub image: String,
    /// Catalog.
    pub catalog: String,
}

/// Reads the cluster and explains the Operators named (all when `names` is empty).
pub async fn explain(
    client: &Client,
    resolver: &Resolver,
    names: &[String],
) -> Result<Vec<Report>, kube::Error> {
    let snapshot = Snapshot {
        operators: list(client).await?,
        bundle_deployments: list(client).await?,
        catalogs: list(client).await?,
        apis: Arc::new(crate::apis::cluster_apis(
            &list(client).await?,
            &list(client).await?,
        )),
    };
    Ok(reports(resolver, &snapshot, names).await)
}

/// Every object of a cluster-scoped kind.
async fn list<K>(client: &Client) -> Result<Vec<Arc<K>>, kube::Error>
where
    K: kube::Resource<Scope = kube::core::ClusterResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let items = Api::<K>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items;
    Ok(items.into_iter().map(Arc::new).collect())
}

/// Explains the Operators of `snapshot` named (all when `names` is empty).
pub async fn reports(resolver: &Resolver, snapshot: &Snapshot, names: &[String]) -> Vec<Report> {
    let decisions = resolver.decide_all(snapshot).await;
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let mut out = Vec::new();
    for (name, decision) in decisions {
        if !names.is_empty() && !names.contains(&name) {
            continue;
        }
        let Some(op) = snapshot.operators.iter().find(|o| o.name_any() == name) else {
            continue;
        };
        let existing = snapshot
            .bundle_deployments
            .iter()
            .find(|b| b.name_any() == name);
        let p = plan(op, existing.map(|b| b.as_ref()), &decision, &now);
        let resolved = match &decision.answer {
            Answer::Resolved(r) => Some(ResolvedBundle {
                bundle: r.name.clone(),
                version: r.version.clone(),
                image: r.image.clone(),
                catalog: r.catalog.clone(),
            }),
            _ => None,
        };
        let bundle_deployment = match (&p.apply, existing, &resolved) {
            (Some(_), None, _) => "create",
            (Some(_), Some(_), _) => "update",
            (None, Some(_), Some(_)) => "unchanged",
            (None, Some(_), None) => "keep",
            (None, None, _) => "none",
        };
        out.push(Report {
            name: name.clone(),
            package: op.spec.package_name.clone(),
            resolved,
            bundle_deployment: bundle_deployment.to_owned(),
            current_image: existing.and_then(|b| deployed(b).image),
            status_changes: p.status_changed,
            status: p.status,
            events: p
                .events
                .iter()
                .map(|e| format!("{}: {}", e.reason, e.note))
                .collect(),
            left_out: decision
                .left_out
                .iter()
                .map(|(c, why)| match why {
                    LeftOut::NotServing(m) => format!("{c}: not serving ({m})"),
                    LeftOut::Invalid(m) => format!("{c}: invalid content ({m})"),
                    LeftOut::Unreachable(m) => format!("{c}: unreachable ({m})"),
                })
                .collect(),
        });
    }
    out
}

/// The reports as text for people.
pub fn text(reports: &[Report]) -> String {
    let mut s = String::new();
    for r in reports {
        s.push_str(&format!("Operator {} (package {})\n", r.name, r.package));
        match &r.resolved {
            Some(b) => s.push_str(&format!(
                "  resolves to {} {} from catalog {} ({})\n",
                b.bundle, b.version, b.catalog, b.image
            )),
            None => s.push_str("  resolves to nothing\n"),
        }
        let bd = match (r.bundle_deployment.as_str(), &r.current_image, &r.resolved) {
            ("create", _, Some(b)) => format!("would be created for {}", b.image),
            ("update", Some(cur), Some(b)) => format!("would change from {cur} to {}", b.image),
            ("unchanged", _, _) => "is up to date".to_owned(),
            ("keep", Some(cur), _) => format!("is kept as it is ({cur})"),
            _ => "does not exist and would not be created".to_owned(),
        };
        s.push_str(&format!("  BundleDeployment {}: {bd}\n", r.name));
        for c in &r.status.conditions {
            s.push_str(&format!(
                "  {}={} {}: {}\n",
                c.type_, c.status, c.reason, c.message
            ));
        }
        for c in &r.left_out {
            s.push_str(&format!("  left out: {c}\n"));
        }
        for e in &r.events {
            s.push_str(&format!("  event: {e}\n"));
        }
        if !r.status_changes {
            s.push_str("  status: unchanged\n");
        }
    }
    if reports.is_empty() {
        s.push_str("no Operators\n");
    }
    s
}
