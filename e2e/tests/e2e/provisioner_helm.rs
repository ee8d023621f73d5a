//! helm+v3 bundles through the provisioner binary on the real control plane and registry: a
//! real public chart (headlamp 0.42.0 and 0.43.0, vendored in crates/provisioner/tests/data/
//! helm/headlamp, its README names the source) packaged and pushed by the real `helm` as a Helm
//! OCI chart artifact, installed with values from the BundleDeployment and from a Secret (a
//! change of the Secret renders again), a schema-invalid value refused in the schema's words
//! with nothing applied, an upgrade to the next version that prunes what it no longer renders,
//! and deletion. Hostile charts (one that would `lookup` the cluster, one with a remote
//! dependency, one that loops, one that prints 100 MB) end as reasons, the provisioner alive.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use olm_api::bundle_deployment::BundleDeployment;
use olm_e2e::context::TestContext;
use olm_e2e::images::Entry;
use olm_e2e::manager::{OLM_NAMESPACE, OWN_PROVISIONER_LABEL, provisioner, start_provisioner_with};
use olm_e2e::wait::{wait_for, wait_for_deletion};
use serde_json::{Value, json};

use crate::provisioner_bundles::{bundle_image, condition};

const HEADLAMP: &str = "crates/provisioner/tests/data/helm/headlamp";
const WAIT: Duration = Duration::from_secs(90);

/// Packages the chart at `dir` with the real helm and pushes it to the test registry as a Helm
/// OCI chart artifact under `<namespace>/charts`; its reference (`…/charts/<name>:<version>`).
fn push_chart(ctx: &TestContext, dir: &Path, name: &str, version: &str) -> String {
    let registry = olm_e2e::registry::plain().unwrap();
    let out = tempfile::tempdir().unwrap();
    let out = out.path().to_str().unwrap();
    olm_e2e::helm::helm_run(&["package", dir.to_str().unwrap(), "-d", out]).unwrap();
    let package = format!("{out}/{name}-{version}.tgz");
    let target = format!("oci://{}/{}/charts", registry.host, ctx.namespace);
    olm_e2e::helm::helm_run(&["push", &package, &target, "--plain-http"]).unwrap();
    format!(
        "{}/{}/charts/{name}:{version}",
        registry.host, ctx.namespace
    )
}

/// A helm+v3 BundleDeployment of the chart image `image` with `config`, labelled for this test.
fn helm_bd(ctx: &TestContext, name: &str, image: &str, config: Value) -> BundleDeployment {
    serde_json::from_value(ctx.labelled(json!({
        "apiVersion": "core.rukpak.io/v1alpha1", "kind": "BundleDeployment",
        "metadata": {"name": name},
        "spec": {"provisionerClassName": "core-rukpak-io-plain",
            "config": config,
            "template": {"spec": {"provisionerClassName": "core-rukpak-io-helm",
                "source": {"type": "image", "image": {"ref": image}}}}},
    })))
    .unwrap()
}

fn args_of(deployment: &Deployment) -> Vec<String> {
    deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|p| p.containers.first())
        .and_then(|c| c.args.clone())
        .unwrap_or_default()
}

#[tokio::test]
async fn a_real_chart_from_an_oci_artifact_installs_with_values_upgrades_and_is_removed() {
    let ctx = TestContext::new("prov-helm").await.unwrap();
    provisioner().unwrap();
    let client = ctx.client.clone();
    let root = olm_e2e::repo_root().join(HEADLAMP);
    let v42 = push_chart(&ctx, &root.join("0.42.0"), "headlamp", "0.42.0");
    let v43 = push_chart(&ctx, &root.join("0.43.0"), "headlamp", "0.43.0");
    // The preview of the artifact, pulled as the provisioner pulls it, is the directory's.
    let render = |source: &[&str]| {
        let out = Command::new(olm_e2e::binary("provisioner").unwrap())
            .arg("render")
            .args(source)
            .args([
                "--format",
                "helm+v3",
                "--name",
                "web",
                "--allow-loopback-sources",
            ])
            .arg("--helm-binary")
            .arg(olm_e2e::helm::helm().unwrap())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let from_image = render(&["--image", &v42]);
    assert!(from_image.contains("kind: Deployment"), "{from_image}");
    assert_eq!(from_image, render(&[root.join("0.42.0").to_str().unwrap()]));
    // Values from a Secret in the managers' namespace: read only once it opts in.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), OLM_NAMESPACE);
    let values_secret = ctx.name("values");
    let secret: Secret = serde_json::from_value(ctx.labelled(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": values_secret, "namespace": OLM_NAMESPACE},
        "stringData": {"values.yaml": "config:\n  baseURL: /from-secret\n"},
    })))
    .unwrap();
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();

    let bds: Api<BundleDeployment> = Api::all(client.clone());
    let name = ctx.name("web");
    let config = |image_values: Value| {
        json!({"namespace": ctx.namespace, "values": image_values,
               "valuesFrom": [{"kind": "Secret", "name": values_secret}]})
    };
    let first = config(json!({"replicaCount": 2,
        "podDisruptionBudget": {"enabled": true, "minAvailable": 1, "maxUnavailable": null}}));
    bds.create(&PostParams::default(), &helm_bd(&ctx, &name, &v42, first))
        .await
        .unwrap();
    let unlabelled = wait_for(&bds, &name, "refused", WAIT, |bd| {
        condition(bd, "HasValidBundle").is_some_and(|(_, r, _)| r == "ValuesNotAllowed")
    })
    .await
    .unwrap();
    let (_, _, message) = condition(Some(&unlabelled), "HasValidBundle").unwrap();
    assert!(
        message.contains(&format!(
            "kubectl label secret -n {OLM_NAMESPACE} {values_secret} olm-rs.io/values=true"
        )),
        "{message}"
    );
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ctx.namespace);
    assert!(
        deployments
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    // Labelled, it is read: the Secret's watch brings the BundleDeployment back at once.
    let label = json!({"metadata": {"labels": {"olm-rs.io/values": "true"}}});
    secrets
        .patch(
            &values_secret,
            &PatchParams::default(),
            &Patch::Merge(&label),
        )
        .await
        .unwrap();
    let installed = wait_for(&bds, &name, "installed", WAIT, |bd| {
        condition(bd, "Installed").is_some_and(|(s, _, _)| s == "True")
    })
    .await
    .unwrap();
    let resolved = installed.status.as_ref().unwrap().resolved_source.clone();
    assert!(
        serde_json::to_string(&resolved)
            .unwrap()
            .contains("@sha256:"),
        "the chart is pulled by digest: {resolved:?}"
    );
    // What the chart renders, where it renders it: the release is the BundleDeployment.
    let fullname = format!("{name}-headlamp");
    let deployment = deployments.get(&fullname).await.unwrap();
    assert_eq!(deployment.spec.as_ref().unwrap().replicas, Some(2));
    assert!(
        args_of(&deployment).contains(&"-base-url=/from-secret".to_owned()),
        "{:?}",
        args_of(&deployment)
    );
    Api::<Service>::namespaced(client.clone(), &ctx.namespace)
        .get(&fullname)
        .await
        .unwrap();
    Api::<ServiceAccount>::namespaced(client.clone(), &ctx.namespace)
        .get(&fullname)
        .await
        .unwrap();
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), &ctx.namespace);
    pdbs.get(&fullname).await.unwrap();
    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    let binding = format!("{fullname}-admin");
    bindings.get(&binding).await.unwrap();
    // No Helm release Secret: the applied set is the record.
    let releases = Api::<Secret>::namespaced(client.clone(), &ctx.namespace)
        .list(&kube::api::ListParams::default().labels("owner=helm"))
        .await
        .unwrap();
    assert!(releases.items.is_empty());

    // The Secret changes: rendered again, applied again.
    let patch = json!({"stringData": {"values.yaml": "config:\n  baseURL: /changed\n"}});
    secrets
        .patch(
            &values_secret,
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .unwrap();
    wait_for(&deployments, &fullname, "the new base URL", WAIT, |d| {
        d.is_some_and(|d| args_of(d).contains(&"-base-url=/changed".to_owned()))
    })
    .await
    .unwrap();

    // A value the chart's schema refuses: its words, and nothing applied.
    let bad = json!({"spec": {"config": config(json!({"replicaCount": 0}))}});
    bds.patch(&name, &PatchParams::default(), &Patch::Merge(&bad))
        .await
        .unwrap();
    let refused = wait_for(&bds, &name, "refused", WAIT, |bd| {
        condition(bd, "HasValidBundle")
            .is_some_and(|(s, r, _)| s == "False" && r == "InvalidValues")
    })
    .await
    .unwrap();
    let (_, _, message) = condition(Some(&refused), "HasValidBundle").unwrap();
    assert!(
        message.contains("values don't meet the specifications of the schema")
            && message.contains("/replicaCount"),
        "{message}"
    );
    let kept = deployments.get(&fullname).await.unwrap();
    assert_eq!(
        kept.spec.as_ref().unwrap().replicas,
        Some(2),
        "the last good state is kept"
    );

    // The next version, without the PodDisruptionBudget, asked first as a dry run: what it
    // would create, change and prune, and nothing done.
    // (A merge patch: the earlier values' keys stay unless the patch drops them.)
    let installed_bundle = refused.status.as_ref().unwrap().active_bundle.clone();
    let upgrade = json!({
        "metadata": {"annotations": {"olm-rs.io/dry-run": "true"}},
        "spec": {
        "config": config(json!({"replicaCount": 1, "podDisruptionBudget": null})),
        "template": {"spec": {"source": {"image": {"ref": v43}}}}}});
    bds.patch(&name, &PatchParams::default(), &Patch::Merge(&upgrade))
        .await
        .unwrap();
    let previewed = wait_for(&bds, &name, "a dry run", WAIT, |bd| {
        bd.and_then(|b| b.status.as_ref())
            .and_then(|s| s.dry_run.as_ref())
            .is_some_and(|d| d.refused.is_none() && !d.prune.is_empty())
    })
    .await
    .unwrap();
    let status = previewed.status.clone().unwrap();
    let dry_run = status.dry_run.unwrap();
    assert_eq!(
        dry_run.prune,
        [format!(
            "PodDisruptionBudget.policy {}/{fullname}",
            ctx.namespace
        )],
        "{dry_run:?}"
    );
    let deployment_key = format!("Deployment.apps {}/{fullname}", ctx.namespace);
    assert!(dry_run.change.contains(&deployment_key), "{dry_run:?}");
    assert!(dry_run.create.is_empty(), "{dry_run:?}");
    assert!(dry_run.unchanged > 0, "{dry_run:?}");
    assert_eq!(status.active_bundle, installed_bundle, "nothing installed");
    pdbs.get(&fullname).await.unwrap();
    let still = deployments.get(&fullname).await.unwrap();
    assert_eq!(
        still.spec.as_ref().unwrap().replicas,
        Some(2),
        "nothing applied"
    );

    // The annotation off: the upgrade happens; the PodDisruptionBudget is pruned.
    let go = json!({"metadata": {"annotations": {"olm-rs.io/dry-run": null}}});
    bds.patch(&name, &PatchParams::default(), &Patch::Merge(&go))
        .await
        .unwrap();
    wait_for(&bds, &name, "upgraded", WAIT, |bd| {
        condition(bd, "Installed").is_some_and(|(s, _, _)| s == "True")
            && condition(bd, "HasValidBundle").is_some_and(|(s, _, _)| s == "True")
    })
    .await
    .unwrap();
    wait_for_deletion(&pdbs, &fullname, WAIT).await.unwrap();
    let done = wait_for(&bds, &name, "the dry run cleared", WAIT, |bd| {
        bd.and_then(|b| b.status.as_ref())
            .is_some_and(|s| s.dry_run.is_none())
    })
    .await
    .unwrap();
    assert_ne!(done.status.unwrap().active_bundle, installed_bundle);
    let upgraded = deployments.get(&fullname).await.unwrap();
    assert_eq!(upgraded.spec.as_ref().unwrap().replicas, Some(1));
    let labels = upgraded.metadata.labels.unwrap_or_default();
    assert_eq!(
        labels.get("helm.sh/chart").map(String::as_str),
        Some("headlamp-0.43.0")
    );

    // Deleting the BundleDeployment removes what it installed.
    bds.delete(&name, &DeleteParams::default()).await.unwrap();
    wait_for_deletion(&bds, &name, WAIT).await.unwrap();
    assert!(deployments.get_opt(&fullname).await.unwrap().is_none());
    assert!(bindings.get_opt(&binding).await.unwrap().is_none());
    ctx.cleanup().await.unwrap();
}

/// A chart at the root of a bundle image whose one template is `template`.
fn chart_image(template: &str) -> Vec<Entry> {
    vec![
        Entry::File(
            "Chart.yaml".into(),
            b"apiVersion: v2\nname: hostile\nversion: 0.1.0\n".to_vec(),
        ),
        Entry::Dir("templates".into()),
        Entry::File("templates/t.yaml".into(), template.as_bytes().to_vec()),
    ]
}

#[tokio::test]
async fn hostile_charts_end_as_reasons_and_the_provisioner_carries_on() {
    let ctx = TestContext::new("prov-helm-hostile").await.unwrap();
    // A provisioner of its own, with a short render time and a small render memory, so that a
    // loop and a 100 MB manifest end quickly.
    let own = ctx.name("hostile");
    let provisioner = {
        let args = [
            format!("--bundle-deployment-selector={OWN_PROVISIONER_LABEL}={own}"),
            "--render-timeout-seconds=5".to_owned(),
            "--render-memory-bytes=268435456".to_owned(),
        ];
        tokio::task::spawn_blocking(move || start_provisioner_with("provisioner-hostile", &args))
            .await
            .unwrap()
            .unwrap()
    };
    let cm = |data: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: probe\ndata:\n{data}\n")
    };
    let cases = [
        // (name, template, expected reason or None for installed)
        (
            "lookup",
            cm("  found: {{ if lookup \"v1\" \"Namespace\" \"\" \"default\" }}\"yes\"{{ else }}\"no\"{{ end }}"),
            None,
        ),
        (
            "loop",
            "{{- range until 10000 }}{{- range until 10000 }}{{- range until 10000 }}{{- end }}{{- end }}{{- end }}".to_owned(),
            Some(("RenderStopped", "ran for more than 5s")),
        ),
        (
            "huge",
            cm("  x: {{ repeat 100000000 \"x\" }}"),
            Some(("RenderStopped", "memory")),
        ),
    ];
    let bds: Api<BundleDeployment> = Api::all(ctx.client.clone());
    let mut names = Vec::new();
    for (case, template, _) in &cases {
        let image = bundle_image(&ctx, case, &chart_image(template)).await;
        let name = ctx.name(case);
        let mut bd = helm_bd(&ctx, &name, &image, json!({"namespace": ctx.namespace}));
        bd.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(OWN_PROVISIONER_LABEL.to_owned(), own.clone());
        bds.create(&PostParams::default(), &bd).await.unwrap();
        names.push(name);
    }
    // A dependency in a repository, not vendored: refused, no repository reached.
    let remote = bundle_image(
        &ctx,
        "remote",
        &[
            Entry::File(
                "Chart.yaml".into(),
                b"apiVersion: v2\nname: remote\nversion: 0.1.0\ndependencies:\n- name: redis\n  version: 20.x.x\n  repository: https://charts.bitnami.com/bitnami\n".to_vec(),
            ),
            Entry::Dir("templates".into()),
        ],
    )
    .await;
    let remote_name = ctx.name("remote");
    let mut bd = helm_bd(&ctx, &remote_name, &remote, json!({}));
    bd.metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert(OWN_PROVISIONER_LABEL.to_owned(), own.clone());
    bds.create(&PostParams::default(), &bd).await.unwrap();

    for ((_, _, expected), name) in cases.iter().zip(&names) {
        match expected {
            None => {
                wait_for(&bds, name, "installed", WAIT, |bd| {
                    condition(bd, "Installed").is_some_and(|(s, _, _)| s == "True")
                })
                .await
                .unwrap();
            }
            Some((reason, says)) => {
                let want = (*reason).to_owned();
                let done = wait_for(&bds, name, reason, WAIT, move |bd| {
                    condition(bd, "HasValidBundle").is_some_and(|(_, r, _)| r == want)
                })
                .await
                .unwrap();
                let (_, _, message) = condition(Some(&done), "HasValidBundle").unwrap();
                assert!(message.contains(says), "{name}: {message}");
            }
        }
    }
    // lookup saw nothing of the cluster (the default Namespace exists).
    let probe = Api::<ConfigMap>::namespaced(ctx.client.clone(), &ctx.namespace)
        .get("probe")
        .await
        .unwrap();
    assert_eq!(probe.data.unwrap()["found"], "no");
    let done = wait_for(&bds, &remote_name, "refused", WAIT, |bd| {
        condition(bd, "HasValidBundle").is_some_and(|(_, r, _)| r == "DependencyNotVendored")
    })
    .await
    .unwrap();
    let (_, _, message) = condition(Some(&done), "HasValidBundle").unwrap();
    assert!(message.contains("redis"), "{message}");
    // The provisioner is alive and stayed within its memory all along (what it reads of a
    // child's output is bounded; the child's memory was its own, and is gone).
    let peak = olm_e2e::memory::process_status_kib(provisioner.manager.pid, "VmHWM").unwrap();
    assert!(peak < 200 * 1024, "the provisioner's peak: {peak} KiB");
    for name in names.iter().chain([&remote_name]) {
        bds.delete(name, &DeleteParams::default()).await.unwrap();
        wait_for_deletion(&bds, name, WAIT).await.unwrap();
    }
    ctx.cleanup().await.unwrap();
}

#[tokio::test]
async fn an_operator_of_a_helm_bundle_gets_a_helm_bundle_deployment_with_its_values() {
    use olm_e2e::catalogs::unpacked_configmap_catalog;
    use olm_e2e::manager::{catalogd, operator_controller};
    use olm_e2e::operators::{
        bundle_doc, channel_doc, create_operator, package_doc, wait_bd_image, wait_resolved,
    };
    let ctx = TestContext::new("op-helm").await.unwrap();
    catalogd().unwrap();
    operator_controller().unwrap();
    let package = ctx.name("chart");
    // A catalog whose bundle is a chart (olm.bundle.mediatype helm+v3).
    let catalog = [
        package_doc(&package, "stable"),
        channel_doc(&package, "stable", &[("1.0.0", None, None)]),
        bundle_doc(
            &package,
            "1.0.0",
            "",
            "- type: olm.bundle.mediatype\n  value: helm+v3\n",
        ),
    ]
    .concat();
    unpacked_configmap_catalog(&ctx, &ctx.name("charts"), &ctx.name("charts"), &catalog)
        .await
        .unwrap();
    let name = ctx.name("hello");
    let ops = create_operator(
        &ctx,
        &name,
        json!({"packageName": package, "namespace": ctx.namespace,
               "values": {"greeting": "from an Operator"},
               "valuesFrom": [{"kind": "ConfigMap", "name": "hello-values", "optional": true}]}),
    )
    .await
    .unwrap();
    wait_resolved(&ops, &name, "True", "Success").await.unwrap();
    let image = olm_e2e::operators::bundle_image(&package, "1.0.0", "");
    let bd = wait_bd_image(&ctx, &name, &image).await.unwrap();
    assert_eq!(
        bd.spec.template.spec.provisioner_class_name,
        "core-rukpak-io-helm"
    );
    let config = serde_json::to_value(bd.spec.config.unwrap()).unwrap();
    assert_eq!(
        config,
        json!({"namespace": ctx.namespace,
               "values": {"greeting": "from an Operator"},
               "valuesFrom": [{"kind": "ConfigMap", "name": "hello-values", "optional": true}]})
    );
    ctx.cleanup().await.unwrap();
}
