//! The provisioner's controller, run in this test process against the real control plane
//! (the manager binary, its chart ServiceAccount and RBAC come next): a BundleDeployment from
//! ConfigMaps is installed, upgraded (what the new version drops is pruned) and uninstalled.
//! It watches only this test's BundleDeployments, so it leaves other tests' alone.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use catalogd_sources::budget::UnpackBudget;
use catalogd_sources::image::cache::LayerCache;
use catalogd_sources::image::{ImageOptions, ImageSource};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use olm_api::bundle_deployment::BundleDeployment;
use olm_e2e::context::{E2E_LABEL, TestContext};
use olm_e2e::wait::{wait_for, wait_for_deletion};
use provisioner::apply::Applier;
use provisioner::fetch::Fetcher;
use provisioner::plan::FINALIZER;
use provisioner::reconcile::Context;
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn manifests(ctx: &TestContext, objects: &[serde_json::Value]) -> String {
    objects
        .iter()
        .map(|o| {
            format!(
                "---\n{}",
                serde_saphyr::to_string(&ctx.labelled(o.clone())).unwrap()
            )
        })
        .collect()
}

async fn bundle_config_map(ctx: &TestContext, name: &str, objects: &[serde_json::Value]) {
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": name},
        "immutable": true,
        "data": {"objects.yaml": manifests(ctx, objects)},
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(ctx.client.clone(), &ctx.namespace)
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
}

fn template(config_map: &str) -> serde_json::Value {
    json!({"spec": {"provisionerClassName": "core-rukpak-io-plain",
        "source": {"type": "configMaps", "configMaps": [{"configMap": {"name": config_map}, "path": "manifests"}]}}})
}

fn installed(bd: Option<&BundleDeployment>) -> Option<String> {
    let status = bd?.status.as_ref()?;
    let c = status.conditions.iter().find(|c| c.type_ == "Installed")?;
    (c.status == "True")
        .then(|| status.active_bundle.clone())
        .flatten()
}

#[tokio::test]
async fn a_bundle_deployment_is_installed_upgraded_and_uninstalled() {
    let ctx = TestContext::new("prov-ctl").await.unwrap();
    let cache = tempfile::tempdir().unwrap();
    let images = ImageSource::new(
        ctx.client.clone(),
        ctx.namespace.clone(),
        ImageOptions {
            registry: Default::default(),
            max_bytes: 1 << 20,
            pull_timeout: Duration::from_secs(30),
            max_concurrent_pulls: 1,
            allow_credentials_without_tls_verify: false,
        },
        LayerCache::open(cache.path(), 1 << 20).unwrap(),
        None,
    );
    let context = Arc::new(Context {
        client: ctx.client.clone(),
        applier: Applier::new(ctx.client.clone(), ctx.namespace.clone()),
        fetcher: Fetcher::new(
            ctx.client.clone(),
            ctx.namespace.clone(),
            Arc::new(images),
            UnpackBudget::new(4 << 20),
        ),
        events: olm_runtime::EventPublisher::new(ctx.client.clone(), "provisioner", None),
        contents: Mutex::new(HashMap::new()),
    });
    let shutdown = CancellationToken::new();
    let controller = tokio::spawn(provisioner::controller::run(
        context,
        watcher::Config::default().labels(&format!("{E2E_LABEL}={}", ctx.namespace)),
        Arc::new(olm_runtime::Metrics::new().unwrap()),
        2,
        shutdown.clone(),
    ));

    let settings = |v: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": ctx.namespace}, "data": {"version": v}})
    };
    let extra = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "extra", "namespace": ctx.namespace}});
    bundle_config_map(&ctx, "bundle-v1", &[settings("1"), extra]).await;
    bundle_config_map(&ctx, "bundle-v2", &[settings("2")]).await;

    let name = ctx.name("bd");
    let bds: Api<BundleDeployment> = Api::all(ctx.client.clone());
    let bd: BundleDeployment = serde_json::from_value(ctx.labelled(json!({
        "apiVersion": "core.rukpak.io/v1alpha1", "kind": "BundleDeployment",
        "metadata": {"name": name},
        "spec": {"provisionerClassName": "core-rukpak-io-plain", "template": template("bundle-v1")},
    })))
    .unwrap();
    bds.create(&PostParams::default(), &bd).await.unwrap();
    let first = wait_for(&bds, &name, "installed", Duration::from_secs(60), |bd| {
        installed(bd).is_some()
    })
    .await
    .unwrap();
    let first_bundle = installed(Some(&first)).unwrap();
    assert!(
        first_bundle.starts_with(&format!("{name}-")),
        "{first_bundle}"
    );
    assert!(
        first
            .metadata
            .finalizers
            .unwrap_or_default()
            .contains(&FINALIZER.to_owned())
    );
    let configmaps: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    assert_eq!(
        configmaps.get("settings").await.unwrap().data.unwrap()["version"],
        "1"
    );
    assert!(configmaps.get_opt("extra").await.unwrap().is_some());

    // A new template: the same BundleDeployment moves to it, and what it drops goes.
    bds.patch(
        &name,
        &PatchParams::apply("olm-rs-e2e").force(),
        &Patch::Apply(json!({"apiVersion": "core.rukpak.io/v1alpha1", "kind": "BundleDeployment",
            "metadata": {"name": name},
            "spec": {"provisionerClassName": "core-rukpak-io-plain", "template": template("bundle-v2")}})),
    )
    .await
    .unwrap();
    let before = first_bundle.clone();
    let second = wait_for(
        &bds,
        &name,
        "upgraded",
        Duration::from_secs(60),
        move |bd| installed(bd).is_some_and(|b| b != before),
    )
    .await
    .unwrap();
    assert_eq!(
        configmaps.get("settings").await.unwrap().data.unwrap()["version"],
        "2"
    );
    wait_for_deletion(&configmaps, "extra", Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(
        second.status.unwrap().observed_generation,
        second.metadata.generation
    );

    // Deleting it removes what it installed; the finalizer lets it go once that is done.
    bds.delete(&name, &DeleteParams::default()).await.unwrap();
    wait_for_deletion(&bds, &name, Duration::from_secs(60))
        .await
        .unwrap();
    wait_for_deletion(&configmaps, "settings", Duration::from_secs(30))
        .await
        .unwrap();

    shutdown.cancel();
    controller.await.unwrap();
    ctx.cleanup().await.unwrap();
}
