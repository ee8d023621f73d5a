//! The chart on the local control plane, with the real helm, in a test binary of its own (its
//! own control plane, where nothing but the chart grants the managers anything): `helm install`
//! succeeds; every manager runs as a local process under the chart's ServiceAccount with the
//! args of its Deployment (`olm_e2e::chart`: no kubelet runs here); the catalog, operator and
//! switcher scenarios pass that way; a rule removed from a chart Role shows as `forbidden`;
//! `helm upgrade` with changed values works; `helm uninstall` leaves nothing of the chart.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role};
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use olm_e2e::catalogs::{
    configmap_source, create_catalog, example_catalog, put_catalog_configmap, status,
    unpacked_configmap_catalog, unpacked_message, wait_reason,
};
use olm_e2e::chart::{self, run_manager};
use olm_e2e::context::TestContext;
use olm_e2e::manager::OLM_NAMESPACE;
use olm_e2e::operators::{create_operator, wait_bd_image};
use olm_e2e::wait::wait_for;
use serde_json::json;

const INSTANCE: &str = "app.kubernetes.io/instance=olm";

/// The cluster-scoped objects of kind `K` the release labelled (none once it is uninstalled).
async fn chart_objects<K>(client: &kube::Client) -> Vec<String>
where
    K: kube::Resource<Scope = k8s_openapi::ClusterResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    Api::<K>::all(client.clone())
        .list_metadata(&ListParams::default().labels(INSTANCE))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|o| o.metadata.name)
        .collect()
}

/// The tests of this binary install the same release: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chart_runs_every_manager_under_its_own_identity() {
    let _serial = SERIAL.lock().await;
    let ctx = TestContext::new("chart").await.unwrap();
    let client = ctx.client.clone();
    // The harness installed every CRD already, as rukpak would its own: the chart leaves the
    // BundleDeployment CRD to it.
    chart::install(false, &["bundleDeploymentCRD.install=false"]).unwrap();
    let manifest = chart::manifest().unwrap();
    let catalogd = run_manager(&ctx.client, &manifest, "catalogd")
        .await
        .unwrap();
    let operator_controller = run_manager(&ctx.client, &manifest, "operator-controller")
        .await
        .unwrap();
    let switcher = run_manager(&ctx.client, &manifest, "catalog-switcher")
        .await
        .unwrap();

    // catalogd: a ConfigMap catalog, unpacked and served.
    let (name, cm) = (ctx.name("cat"), ctx.name("cat-cm"));
    let (_, unpacked) = unpacked_configmap_catalog(&ctx, &name, &cm, &example_catalog("0.1.0"))
        .await
        .unwrap();
    let url = status(Some(&unpacked)).content_url.unwrap();
    assert!(url.starts_with(&format!("http://127.0.0.1:{}/", catalogd.ports.content)));

    // operator-controller: an Operator resolved to a BundleDeployment.
    let operator = ctx.name("example");
    create_operator(&ctx, &operator, json!({"packageName": "example-operator"}))
        .await
        .unwrap();
    wait_bd_image(
        &ctx,
        &operator,
        "quay.io/olmtest/example-operator-bundle:v0.1.0",
    )
    .await
    .unwrap();

    // catalog-switcher: a kube-version template written into an image Catalog's reference.
    let info = ctx.client.apiserver_version().await.unwrap();
    let minor = info.minor.trim_end_matches('+').to_owned();
    let switched = ctx.name("switched");
    let images = create_catalog(
        &ctx,
        &switched,
        json!({"type": "image", "image": {"ref": "registry.invalid/catalog:placeholder"}}),
    )
    .await
    .unwrap();
    images
        .patch(
            &switched,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {
                "olm.catalogImageTemplate": "registry.invalid/catalog:v{kube_major_version}.{kube_minor_version}"
            }}})),
        )
        .await
        .unwrap();
    let expected = format!("registry.invalid/catalog:v{}.{minor}", info.major);
    wait_for(
        &images,
        &switched,
        "the switched reference",
        Duration::from_secs(60),
        move |c| {
            c.and_then(|c| c.spec.source.image.as_ref())
                .is_some_and(|i| i.r#ref == expected)
        },
    )
    .await
    .unwrap();

    // The chart's RBAC is what catalogd runs with: without the configmaps rule of its Role, a
    // ConfigMap catalog fails with forbidden.
    let roles: Api<Role> = Api::namespaced(ctx.client.clone(), OLM_NAMESPACE);
    let role = roles.get("olm-catalogd").await.unwrap();
    let kept: Vec<_> = role
        .rules
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|r| !r.resources.iter().flatten().any(|x| x == "configmaps"))
        .collect();
    roles
        .patch(
            "olm-catalogd",
            &PatchParams::default(),
            &Patch::Merge(json!({"rules": kept})),
        )
        .await
        .unwrap();
    let (denied, denied_cm) = (ctx.name("denied"), ctx.name("denied-cm"));
    put_catalog_configmap(&ctx, &denied_cm, &example_catalog("0.2.0"))
        .await
        .unwrap();
    let denied_api = create_catalog(&ctx, &denied, configmap_source(&denied_cm))
        .await
        .unwrap();
    let failed = wait_reason(&denied_api, &denied, "UnpackFailed")
        .await
        .unwrap();
    assert!(
        unpacked_message(&failed).contains("forbidden"),
        "{}",
        unpacked_message(&failed)
    );

    // helm upgrade with changed values: the Role is the chart's again (and the Catalog
    // unpacks), and the switcher may now read what its new allowlist names.
    chart::install(
        true,
        &[
            "bundleDeploymentCRD.install=false",
            "catalogSwitcher.allowedResources={v1/configmaps@olm-system}",
        ],
    )
    .unwrap();
    wait_for(
        &denied_api,
        &denied,
        "unpacked after the upgrade",
        Duration::from_secs(120),
        |c| {
            olm_api::conditions::find_condition(&status(c).conditions, "Unpacked")
                .is_some_and(|u| u.status == "True")
        },
    )
    .await
    .unwrap();
    assert!(
        roles
            .get_opt("olm-catalog-switcher-read-0")
            .await
            .unwrap()
            .is_some()
    );

    // Cleaned up while the managers run (finalizers), then the managers stop and the chart
    // goes: nothing of it is left.
    ctx.cleanup().await.unwrap();
    for m in [
        &catalogd.manager,
        &operator_controller.manager,
        &switcher.manager,
    ] {
        m.stop().unwrap();
    }
    chart::uninstall().unwrap();
    assert!(chart_objects::<ClusterRole>(&client).await.is_empty());
    assert!(
        chart_objects::<ClusterRoleBinding>(&client)
            .await
            .is_empty()
    );
    let namespaces: Api<Namespace> = Api::all(client);
    olm_e2e::wait::wait_for_deletion(&namespaces, OLM_NAMESPACE, Duration::from_secs(120))
        .await
        .unwrap();
}

/// What most charts' users type: `helm install olm charts/olm -n olm-system
/// --create-namespace`. helm creates the namespace (without labels), the chart puts everything
/// in it, and catalogd, once it leads, gives it the Pod Security label; catalogd works there.
/// Asking the chart to create that namespace as well is refused before anything is applied,
/// with what to type instead. Uninstalling leaves helm's namespace, as helm always does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_install_into_its_own_namespace_with_create_namespace() {
    let _serial = SERIAL.lock().await;
    let ctx = TestContext::new("chart-ns").await.unwrap();
    let namespaces: Api<Namespace> = Api::all(ctx.client.clone());
    // The other test of this binary removes olm-system at its end.
    olm_e2e::wait::wait_for_deletion(&namespaces, OLM_NAMESPACE, Duration::from_secs(120))
        .await
        .unwrap();
    chart::install_in(
        OLM_NAMESPACE,
        &[
            "install",
            "--create-namespace",
            "--set",
            "bundleDeploymentCRD.install=false",
        ],
    )
    .unwrap();
    let created = namespaces.get(OLM_NAMESPACE).await.unwrap();
    let enforce = "pod-security.kubernetes.io/enforce";
    assert!(
        !created.labels().contains_key(enforce),
        "helm's --create-namespace sets no Pod Security label: {:?}",
        created.labels()
    );
    let manifest = chart::manifest_in(OLM_NAMESPACE).unwrap();
    assert!(!manifest.iter().any(|d| d["kind"] == "Namespace"));
    let catalogd = run_manager(&ctx.client, &manifest, "catalogd")
        .await
        .unwrap();
    wait_for(
        &namespaces,
        OLM_NAMESPACE,
        "catalogd labels its namespace",
        Duration::from_secs(60),
        |ns| {
            ns.is_some_and(|ns| ns.labels().get(enforce).map(String::as_str) == Some("restricted"))
        },
    )
    .await
    .unwrap();
    let (name, cm) = (ctx.name("cat"), ctx.name("cat-cm"));
    unpacked_configmap_catalog(&ctx, &name, &cm, &example_catalog("0.1.0"))
        .await
        .unwrap();

    // The conflicting combination, refused by the chart with the commands to use.
    let err = chart::install_in(
        OLM_NAMESPACE,
        &["upgrade", "--set", "namespace.create=true"],
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("helm install olm charts/olm -n olm-system --create-namespace"),
        "{err}"
    );

    let client = ctx.client.clone();
    ctx.cleanup().await.unwrap();
    catalogd.manager.stop().unwrap();
    chart::uninstall_in(OLM_NAMESPACE).unwrap();
    assert!(chart_objects::<ClusterRole>(&client).await.is_empty());
    // helm leaves the namespace it created; the test removes it, as a user would.
    namespaces
        .delete(OLM_NAMESPACE, &Default::default())
        .await
        .unwrap();
    olm_e2e::wait::wait_for_deletion(&namespaces, OLM_NAMESPACE, Duration::from_secs(120))
        .await
        .unwrap();
}
