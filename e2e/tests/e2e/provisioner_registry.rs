//! registry+v1 bundles through the provisioner binary on the real control plane and registry:
//! argocd-operator v0.6.0 (a real public operator's CSV and CRDs, the bundle of upstream's
//! conversion regression test, in crates/provisioner/tests/data/registry-v1) installs its
//! Namespace, ServiceAccount, ClusterRoles and bindings (upstream's names, upstream's rules),
//! CRDs, ConfigMap, Service and Deployment; a SingleNamespace-only bundle asked for nothing, and
//! one whose webhook names a Deployment it lacks, are refused with upstream's words and apply
//! nothing; deleting the BundleDeployment removes what it installed.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, PostParams};
use olm_api::bundle_deployment::BundleDeployment;
use olm_e2e::context::TestContext;

use crate::provisioner_bundles::{bundle_image, condition};
use olm_e2e::images::Entry;
use olm_e2e::manager::provisioner;
use olm_e2e::wait::{wait_for, wait_for_deletion};
use serde_json::{Value, json};

const ARGOCD: &str = "crates/provisioner/tests/data/registry-v1/argocd-operator.v0.6.0";
const WAIT: Duration = Duration::from_secs(90);

/// The files of a bundle directory (`manifests/`, `metadata/`) as image entries.
fn bundle_entries(dir: &Path) -> Vec<Entry> {
    let mut entries = Vec::new();
    for sub in ["manifests", "metadata"] {
        entries.push(Entry::Dir(sub.into()));
        let mut paths: Vec<_> = std::fs::read_dir(dir.join(sub))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        paths.sort();
        for path in paths {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            entries.push(Entry::File(
                format!("{sub}/{name}"),
                std::fs::read(&path).unwrap(),
            ));
        }
    }
    entries
}

/// A small registry+v1 bundle of package `package` whose CSV has `spec` merged over a valid one.
fn small_bundle(package: &str, spec: Value) -> Vec<Entry> {
    let mut csv = json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": format!("{package}.v1.0.0")},
        "spec": {"installModes": [{"type": "AllNamespaces", "supported": true}],
                 "install": {"strategy": "deployment", "spec": {"deployments": []}}},
    });
    if let (Some(base), Value::Object(extra)) = (csv["spec"].as_object_mut(), spec) {
        base.extend(extra);
    }
    let config = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}});
    registry_bundle(package, &csv, &[("cm.json", &config)])
}

/// A registry+v1 bundle of package `package`: `csv` and `others` (file name, object) in
/// `manifests/`, the package named in `metadata/annotations.yaml`.
pub(crate) fn registry_bundle(package: &str, csv: &Value, others: &[(&str, &Value)]) -> Vec<Entry> {
    let mut entries = vec![
        Entry::Dir("manifests".into()),
        Entry::File("manifests/csv.json".into(), csv.to_string().into_bytes()),
    ];
    entries.extend(others.iter().map(|(file, object)| {
        Entry::File(format!("manifests/{file}"), object.to_string().into_bytes())
    }));
    entries.extend([
        Entry::Dir("metadata".into()),
        Entry::File(
            "metadata/annotations.yaml".into(),
            format!(
                "annotations:\n  operators.operatorframework.io.bundle.package.v1: {package}\n"
            )
            .into_bytes(),
        ),
    ]);
    entries
}

/// A BundleDeployment of the registry+v1 bundle image `image`, labelled for this test.
async fn deploy(ctx: &TestContext, name: &str, image: &str) -> String {
    let name = ctx.name(name);
    let bd: BundleDeployment = serde_json::from_value(ctx.labelled(json!({
        "apiVersion": "core.rukpak.io/v1alpha1", "kind": "BundleDeployment",
        "metadata": {"name": name},
        "spec": {"provisionerClassName": "core-rukpak-io-plain", "template": {"spec": {
            "provisionerClassName": "core-rukpak-io-registry",
            "source": {"type": "image", "image": {"ref": image}}}}},
    })))
    .unwrap();
    Api::<BundleDeployment>::all(ctx.client.clone())
        .create(&PostParams::default(), &bd)
        .await
        .unwrap();
    name
}

/// The documents of a golden YAML file.
fn golden(dir: &Path, file: &str) -> Value {
    let text = std::fs::read_to_string(dir.join("expected-all-namespaces").join(file)).unwrap();
    serde_saphyr::from_str(&text).unwrap()
}

#[tokio::test]
async fn a_real_registry_v1_bundle_installs_and_unsupported_ones_are_refused() {
    let ctx = TestContext::new("prov-registry").await.unwrap();
    provisioner().unwrap();
    let client = ctx.client.clone();
    let bds: Api<BundleDeployment> = Api::all(client.clone());
    let dir = olm_e2e::repo_root().join(ARGOCD);

    let argocd = bundle_image(&ctx, "argocd", &bundle_entries(&dir)).await;
    let single_only = bundle_image(
        &ctx,
        "single-only",
        &small_bundle(
            "e2e-single-only",
            json!({"installModes": [{"type": "SingleNamespace", "supported": true},
                                    {"type": "AllNamespaces", "supported": false}]}),
        ),
    )
    .await;
    let webhooks = bundle_image(
        &ctx,
        "webhooks",
        &small_bundle(
            "e2e-webhooks",
            json!({"webhookdefinitions": [{"type": "ValidatingAdmissionWebhook",
                "generateName": "vwidget.example.com", "deploymentName": "widget"}]}),
        ),
    )
    .await;
    let installed = deploy(&ctx, "argocd", &argocd).await;
    // (BundleDeployment, package, condition, reason, the message's start)
    let refused = [
        (
            deploy(&ctx, "single-only", &single_only).await,
            "e2e-single-only",
            "Installed",
            "UnsupportedInstallMode",
            "no install mode to default to: this bundle's ClusterServiceVersion supports SingleNamespace, neither AllNamespaces nor OwnNamespace",
        ),
        (
            deploy(&ctx, "webhooks", &webhooks).await,
            "e2e-webhooks",
            "HasValidBundle",
            "BundleLoadFailed",
            "convert registry+v1 bundle to plain+v0 bundle: invalid webhook definitions: webhook of type 'ValidatingAdmissionWebhook' with name 'vwidget.example.com' references non-existent deployment 'widget'",
        ),
    ];

    let done = wait_for(&bds, &installed, "installed", WAIT, |bd| {
        condition(bd, "Installed").is_some_and(|(s, _, _)| s == "True")
    })
    .await
    .unwrap();
    let (_, reason, _) = condition(Some(&done), "Installed").unwrap();
    assert_eq!(reason, "InstallationSucceeded");

    // What the golden files say, in the package's namespace (argocd suggests none).
    let ns = "argocd-operator-system";
    Api::<Namespace>::all(client.clone()).get(ns).await.unwrap();
    Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .get("argocd-operator-controller-manager")
        .await
        .unwrap();
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .get("argocd-operator-manager-config")
        .await
        .unwrap();
    Api::<Service>::namespaced(client.clone(), ns)
        .get("argocd-operator-controller-manager-metrics-service")
        .await
        .unwrap();
    let roles: Api<ClusterRole> = Api::all(client.clone());
    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    for (role_file, binding_file) in [
        (
            "01_clusterrole_argocd-operator.v0-1dhiybrldl1gyksid1dk2dqjsc72psdybc7iyvse5gpx.yaml",
            "03_clusterrolebinding_argocd-operator.v0-1dhiybrldl1gyksid1dk2dqjsc72psdybc7iyvse5gpx.yaml",
        ),
        (
            "02_clusterrole_argocd-operator.v0.-3gkm3u8zfarktdile5wekso69zs9bgzb988mhjm0y6p.yaml",
            "04_clusterrolebinding_argocd-operator.v0.-3gkm3u8zfarktdile5wekso69zs9bgzb988mhjm0y6p.yaml",
        ),
    ] {
        let want = golden(&dir, role_file);
        let name = want["metadata"]["name"].as_str().unwrap();
        let role = roles.get(name).await.unwrap();
        assert_eq!(
            serde_json::to_value(&role.rules).unwrap(),
            want["rules"],
            "{name}"
        );
        let want = golden(&dir, binding_file);
        let binding = bindings.get(name).await.unwrap();
        assert_eq!(
            serde_json::to_value(&binding.role_ref).unwrap(),
            want["roleRef"]
        );
        let subjects = serde_json::to_value(&binding.subjects).unwrap();
        assert_eq!(
            subjects,
            json!([{"kind": "ServiceAccount", "name": "argocd-operator-controller-manager", "namespace": ns}])
        );
    }
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in [
        "applications.argoproj.io",
        "applicationsets.argoproj.io",
        "appprojects.argoproj.io",
        "argocdexports.argoproj.io",
        "argocds.argoproj.io",
    ] {
        crds.get(crd).await.unwrap();
    }
    let deployment = Api::<Deployment>::namespaced(client.clone(), ns)
        .get("argocd-operator-controller-manager")
        .await
        .unwrap();
    let want = golden(
        &dir,
        "11_deployment_argocd-operator-controller-manager.yaml",
    );
    let spec = deployment.spec.unwrap();
    assert_eq!(spec.revision_history_limit, Some(1));
    let annotations = spec.template.metadata.unwrap().annotations.unwrap();
    let mut expected = want["spec"]["template"]["metadata"]["annotations"].clone();
    expected["olm.operatorNamespace"] = json!(ns);
    assert_eq!(serde_json::to_value(&annotations).unwrap(), expected);

    // The refused ones: upstream's words where it has them, and nothing of theirs applied.
    for (bd, package, type_, why, words) in refused {
        let seen = wait_for(&bds, &bd, "refused", WAIT, move |bd| {
            condition(bd, type_).is_some_and(|(s, r, _)| s == "False" && r == why)
        })
        .await
        .unwrap();
        let (_, _, message) = condition(Some(&seen), type_).unwrap();
        assert!(message.contains(words), "{bd}: {message}");
        let namespace = format!("{package}-system");
        assert!(
            Api::<Namespace>::all(client.clone())
                .get_opt(&namespace)
                .await
                .unwrap()
                .is_none(),
            "{bd} applied its Namespace"
        );
    }

    // Deleting the BundleDeployments removes what they installed.
    for bd in [&installed] {
        bds.delete(bd, &DeleteParams::default()).await.unwrap();
        wait_for_deletion(&bds, bd, WAIT).await.unwrap();
    }
    if let Err(e) = wait_for_deletion(&Api::<Namespace>::all(client.clone()), ns, WAIT).await {
        // Why it was kept, in the provisioner's words.
        let events: Api<Event> = Api::namespaced(client.clone(), "default");
        let kept: Vec<String> = events
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| e.involved_object.name.as_deref() == Some(installed.as_str()))
            .filter_map(|e| e.message)
            .collect();
        panic!("{e}; the BundleDeployment's events: {kept:#?}");
    }
    assert!(crds.get_opt("argocds.argoproj.io").await.unwrap().is_none());
    ctx.cleanup().await.unwrap();
}
