//! Real registry+v1 bundles of public operators (crates/provisioner/tests/data/registry-v1/real,
//! sources in its README: OwnNamespace-only operators, operators with webhooks, an operator
//! owning APIServices) installed by the provisioner binary on a real control plane, each in a
//! namespace of its own with nothing else asked: every one `Installed=True`, its webhook
//! configurations and APIServices applied with the CA bundle of the provisioner's own CA. Their
//! images cannot be pulled here, so `Healthy` is not claimed. In a test binary of its own (its
//! own control plane): webhooks and APIServices with no server behind them would fail other
//! tests' calls and discovery.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::{Api, DeleteParams, PostParams};
use olm_api::bundle_deployment::BundleDeployment;
use olm_e2e::context::TestContext;
use olm_e2e::images::{Entry, layer, push};
use olm_e2e::manager::provisioner;
use olm_e2e::operators::bd_condition as condition;
use olm_e2e::wait::{wait_for, wait_for_deletion};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(240);

fn bundles() -> Vec<PathBuf> {
    let dir = olm_e2e::repo_root().join("crates/provisioner/tests/data/registry-v1/real");
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    out.sort();
    out
}

/// The bundle in `dir` as the entries of an image.
fn entries(dir: &Path) -> Vec<Entry> {
    let mut out = Vec::new();
    for sub in ["manifests", "metadata"] {
        out.push(Entry::Dir(sub.to_owned()));
        for entry in std::fs::read_dir(dir.join(sub)).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            out.push(Entry::File(
                format!("{sub}/{name}"),
                std::fs::read(&path).unwrap(),
            ));
        }
    }
    out
}

/// Every webhook configuration of kind `K`: its metadata and its webhooks' client configs.
async fn client_configs<K>(
    client: &kube::Client,
    parts: impl Fn(K) -> (ObjectMeta, Vec<WebhookClientConfig>),
) -> Vec<(ObjectMeta, Vec<WebhookClientConfig>)>
where
    K: kube::Resource<DynamicType = (), Scope = kube::core::ClusterResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned,
{
    Api::<K>::all(client.clone())
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(parts)
        .collect()
}

#[tokio::test]
async fn real_operators_with_their_install_modes_webhooks_and_api_services_install() {
    let ctx = TestContext::new("real-bundles").await.unwrap();
    provisioner().unwrap();
    // The monitoring kinds real bundles ship (ServiceMonitor, PodMonitor, PrometheusRule) are
    // served where prometheus-operator is installed, as real bundles expect (OLM v0 too fails
    // an install without them): their CRDs, standing in for prometheus-operator's, any schema.
    let crds: Api<CustomResourceDefinition> = Api::all(ctx.client.clone());
    for (kind, plural) in [
        ("ServiceMonitor", "servicemonitors"),
        ("PodMonitor", "podmonitors"),
        ("PrometheusRule", "prometheusrules"),
    ] {
        let name = format!("{plural}.monitoring.coreos.com");
        let crd: CustomResourceDefinition = serde_json::from_value(ctx.labelled(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": name},
            "spec": {"group": "monitoring.coreos.com", "scope": "Namespaced",
                "names": {"kind": kind, "plural": plural},
                "versions": [{"name": "v1", "served": true, "storage": true, "schema": {
                    "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}})))
        .unwrap();
        crds.create(&PostParams::default(), &crd).await.unwrap();
        wait_for(&crds, &name, "Established", WAIT, |c| {
            c.and_then(|c| c.status.as_ref())
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c.type_ == "Established" && c.status == "True")
                })
        })
        .await
        .unwrap();
    }
    let registry = olm_e2e::registry::plain().unwrap();
    let bds: Api<BundleDeployment> = Api::all(ctx.client.clone());
    let mut names = Vec::new();
    for (i, dir) in bundles().iter().enumerate() {
        let repository = format!("{}/real-{i}", ctx.namespace);
        push(
            registry,
            &repository,
            "v1",
            &[layer(&entries(dir))],
            &Default::default(),
        )
        .await
        .unwrap();
        // A namespace of its own: real bundles name their objects alike (a metrics Service, a
        // manager ServiceAccount), and two sets may not own one object.
        let namespace = ctx.name(&format!("real-{i}"));
        let ns: Namespace = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": namespace, "labels": ctx.namespace_labels()}}))
        .unwrap();
        Api::<Namespace>::all(ctx.client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .unwrap();
        let name = ctx.name(&format!("real-{i}"));
        let bd: BundleDeployment = serde_json::from_value(ctx.labelled(json!({
            "apiVersion": "core.rukpak.io/v1alpha1", "kind": "BundleDeployment",
            "metadata": {"name": name},
            "spec": {"provisionerClassName": "core-rukpak-io-plain",
                "config": {"namespace": namespace},
                "template": {"spec": {"provisionerClassName": "core-rukpak-io-registry",
                    "source": {"type": "image", "image": {"ref": format!("{}/{repository}:v1", registry.host)}}}}}})))
        .unwrap();
        bds.create(&PostParams::default(), &bd).await.unwrap();
        names.push((
            name,
            dir.file_name().unwrap().to_string_lossy().into_owned(),
        ));
    }
    for (name, bundle) in &names {
        let done = wait_for(&bds, name, "installed", WAIT, |bd| {
            condition(bd, "Installed").is_some_and(|(s, _, _)| s == "True")
                || condition(bd, "HasValidBundle").is_some_and(|(s, _, _)| s == "False")
        })
        .await
        .unwrap();
        let installed = condition(Some(&done), "Installed");
        assert_eq!(
            installed.as_ref().map(|c| c.0.as_str()),
            Some("True"),
            "{bundle}: {:?} {:?}",
            installed,
            condition(Some(&done), "HasValidBundle")
        );
    }
    // Every webhook configuration and APIService the provisioner applied trusts its CA.
    let owned = |labels: Option<&std::collections::BTreeMap<String, String>>| {
        labels
            .and_then(|l| l.get("core.rukpak.io/owner-name"))
            .is_some_and(|o| names.iter().any(|(n, _)| n == o))
    };
    let validating = client_configs::<ValidatingWebhookConfiguration>(&ctx.client, |c| {
        let hooks = c.webhooks.unwrap_or_default();
        (
            c.metadata,
            hooks.into_iter().map(|h| h.client_config).collect(),
        )
    })
    .await;
    let mutating = client_configs::<MutatingWebhookConfiguration>(&ctx.client, |c| {
        let hooks = c.webhooks.unwrap_or_default();
        (
            c.metadata,
            hooks.into_iter().map(|h| h.client_config).collect(),
        )
    })
    .await;
    let mut hooks = 0;
    for (meta, configs) in validating
        .into_iter()
        .chain(mutating)
        .filter(|(m, _)| owned(m.labels.as_ref()))
    {
        for config in configs {
            assert!(config.ca_bundle.is_some(), "{:?}", meta.name);
            hooks += 1;
        }
    }
    assert!(hooks >= 3, "{hooks} admission webhooks applied");
    let apis: Vec<APIService> = Api::<APIService>::all(ctx.client.clone())
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|a| owned(a.metadata.labels.as_ref()))
        .collect();
    assert!(!apis.is_empty(), "no APIService applied");
    for a in &apis {
        assert!(
            a.spec.as_ref().unwrap().ca_bundle.is_some(),
            "{:?}",
            a.metadata.name
        );
    }
    // Removed again: each BundleDeployment and what it applied.
    for (name, _) in &names {
        bds.delete(name, &DeleteParams::default()).await.unwrap();
    }
    for (name, _) in &names {
        wait_for_deletion(&bds, name, WAIT).await.unwrap();
    }
    ctx.cleanup().await.unwrap();
}
