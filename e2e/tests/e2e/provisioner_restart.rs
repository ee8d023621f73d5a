//! A tag is resolved once per template: the digest installed is recorded in
//! `status.resolvedSource`, and a provisioner that restarts (its layer cache lost too) pulls
//! the installed template's image by that digest, so a tag moved since installs nothing new.
//! Its own provisioner (restarted here), over BundleDeployments the shared one leaves alone.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use olm_api::bundle_deployment::BundleDeployment;
use olm_e2e::catalogs::wait_metric;
use olm_e2e::context::TestContext;
use olm_e2e::images::{Entry, layer, push};
use olm_e2e::manager::{OWN_PROVISIONER_LABEL, start_provisioner_with};
use olm_e2e::wait::wait_for;
use serde_json::json;

fn bundle(ctx: &TestContext, version: &str) -> Vec<Entry> {
    let settings = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": ctx.namespace}, "data": {"version": version}});
    vec![Entry::File(
        "manifests/settings.json".into(),
        serde_json::to_vec(&settings).unwrap(),
    )]
}

fn installed_digest(bd: Option<&BundleDeployment>) -> Option<String> {
    let status = bd?.status.as_ref()?;
    status
        .conditions
        .iter()
        .any(|c| c.type_ == "Installed" && c.status == "True")
        .then(|| {
            status
                .resolved_source
                .as_ref()?
                .image_ref()
                .map(str::to_owned)
        })
        .flatten()
}

#[tokio::test]
async fn after_a_restart_the_installed_image_is_pulled_by_its_digest_not_its_moved_tag() {
    let ctx = TestContext::new("prov-restart").await.unwrap();
    let own = ctx.name("own");
    let provisioner = {
        let selector = format!("--bundle-deployment-selector={OWN_PROVISIONER_LABEL}={own}");
        tokio::task::spawn_blocking(move || {
            start_provisioner_with("provisioner-restart", &[selector])
        })
        .await
        .unwrap()
        .unwrap()
    };
    let registry = olm_e2e::registry::plain().unwrap();
    let repository = format!("{}/bundle", ctx.namespace);
    let push_version = |version: &'static str| {
        let (ctx, repository) = (&ctx, &repository);
        async move {
            push(
                registry,
                repository,
                "latest",
                &[layer(&bundle(ctx, version))],
                &Default::default(),
            )
            .await
            .unwrap()
        }
    };
    let first = push_version("1").await;

    let name = ctx.name("bd");
    let mut doc = ctx.labelled(json!({
        "apiVersion": "core.rukpak.io/v1alpha1", "kind": "BundleDeployment",
        "metadata": {"name": name},
        "spec": {"provisionerClassName": "core-rukpak-io-plain", "template": {"spec": {
            "provisionerClassName": "core-rukpak-io-plain",
            "source": {"type": "image", "image": {"ref": format!("{}/{repository}:latest", registry.host)}}}}},
    }));
    doc["metadata"]["labels"][OWN_PROVISIONER_LABEL] = own.clone().into();
    let bds: Api<BundleDeployment> = Api::all(ctx.client.clone());
    bds.create(
        &PostParams::default(),
        &serde_json::from_value(doc).unwrap(),
    )
    .await
    .unwrap();
    let bd = wait_for(&bds, &name, "installed", Duration::from_secs(60), |bd| {
        installed_digest(bd).is_some()
    })
    .await
    .unwrap();
    let pinned = format!("{}/{repository}@{first}", registry.host);
    assert_eq!(installed_digest(Some(&bd)).unwrap(), pinned);

    // The tag moves; the provisioner restarts with an empty layer cache.
    let second = push_version("2").await;
    assert_ne!(first, second);
    let before = registry.requests("").len();
    std::fs::remove_dir_all(provisioner.manager.dir.join("cache")).unwrap();
    let restarted = provisioner.restart().unwrap();
    // Its first reconcile of the installed BundleDeployment (installed, so requeued to resync).
    wait_metric(
        &restarted.admin_url,
        "controller_runtime_reconcile_total",
        &[
            "controller=\"bundledeployment\"",
            "result=\"requeue_after\"",
        ],
        "the restarted provisioner's first reconcile",
        |n| n >= 1.0,
    )
    .await
    .unwrap();
    let manifests: Vec<String> = registry
        .requests("")
        .into_iter()
        .skip(before)
        .filter(|r| r.contains(&format!("/v2/{repository}/manifests/")))
        .collect();
    assert!(
        manifests
            .iter()
            .all(|r| r.ends_with(&format!("/manifests/{first}")))
            && !manifests.is_empty(),
        "after the restart the image is pulled by its installed digest only: {manifests:?}"
    );
    let configmaps: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    assert_eq!(
        configmaps.get("settings").await.unwrap().data.unwrap()["version"],
        "1"
    );
    let bd = bds.get(&name).await.unwrap();
    assert_eq!(installed_digest(Some(&bd)).unwrap(), pinned);

    // Deleting it uninstalls through the restarted provisioner (the finalizer is its to drop).
    bds.delete(&name, &Default::default()).await.unwrap();
    olm_e2e::wait::wait_for_deletion(&bds, &name, Duration::from_secs(60))
        .await
        .unwrap();
    restarted.manager.stop().unwrap();
    ctx.cleanup().await.unwrap();
}
