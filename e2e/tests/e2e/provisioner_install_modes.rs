//! Install modes, on the cluster's real node: a registry+v1 operator (busybox standing in for
//! its manager, reading `WATCH_NAMESPACE` from `olm.targetNamespaces` as real operators do)
//! that supports only OwnNamespace installs into its namespace with its Role there and runs; a
//! SingleNamespace install watches another namespace, with its Role there (and in its own),
//! not cluster-wide; a MultiNamespace install gets its Role in both watched namespaces; a mode
//! the CSV does not support is refused naming both, with nothing applied; a per-install
//! setting (`deploymentConfig`) is on the Deployment, and a change of it is applied again;
//! naming another install namespace is refused as a move. What each
//! ServiceAccount may do is asked of the API server (SubjectAccessReview), not read from the
//! objects.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::Role;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use olm_api::bundle_deployment::BundleDeployment;
use olm_e2e::context::TestContext;
use olm_e2e::images::Entry;
use olm_e2e::manager::provisioner;
use olm_e2e::node::{push_busybox, registry};
use olm_e2e::wait::{wait_for, wait_for_deletion};
use serde_json::{Value, json};

use crate::provisioner_bundles::{bundle_image, condition};
use crate::provisioner_ownership::extra_namespace;
use crate::provisioner_registry::registry_bundle;

const WAIT: Duration = Duration::from_secs(180);
const ACCOUNT: &str = "watcher";

/// A registry+v1 bundle of `package` supporting `modes`: a ServiceAccount allowed to read
/// ConfigMaps where it watches, and a Deployment running `busybox` as it.
fn bundle(package: &str, modes: &[&str], busybox: &str) -> Vec<Entry> {
    let install_modes: Vec<Value> = [
        "OwnNamespace",
        "SingleNamespace",
        "MultiNamespace",
        "AllNamespaces",
    ]
    .iter()
    .map(|m| json!({"type": m, "supported": modes.contains(m)}))
    .collect();
    let csv = json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": format!("{package}.v1.0.0")},
        "spec": {
            "installModes": install_modes,
            "install": {"strategy": "deployment", "spec": {
                "permissions": [{"serviceAccountName": ACCOUNT, "rules": [
                    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}]}],
                "deployments": [{"name": "watcher", "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": {"app": "watcher"}},
                    "template": {"metadata": {"labels": {"app": "watcher"}}, "spec": {
                        "serviceAccountName": ACCOUNT,
                        "automountServiceAccountToken": false,
                        "terminationGracePeriodSeconds": 1,
                        "securityContext": {"runAsNonRoot": true, "runAsUser": 65532,
                                            "seccompProfile": {"type": "RuntimeDefault"}},
                        "containers": [{"name": "manager", "image": busybox,
                            "command": ["/bin/sh", "-c",
                                "echo watching \"$WATCH_NAMESPACE\"; trap 'exit 0' TERM; while true; do sleep 1; done"],
                            "env": [{"name": "WATCH_NAMESPACE", "valueFrom": {"fieldRef": {
                                "fieldPath": "metadata.annotations['olm.targetNamespaces']"}}}],
                            "securityContext": {"allowPrivilegeEscalation": false,
                                                "capabilities": {"drop": ["ALL"]}}}]}}}}],
            }},
        },
    });
    registry_bundle(package, &csv, &[])
}

/// A BundleDeployment of the registry+v1 image `image` with `config`.
async fn deploy(ctx: &TestContext, name: &str, image: &str, config: Option<Value>) -> String {
    let name = ctx.name(name);
    let mut spec = json!({"provisionerClassName": "core-rukpak-io-plain", "template": {"spec": {
        "provisionerClassName": "core-rukpak-io-registry",
        "source": {"type": "image", "image": {"ref": image}}}}});
    if let Some(config) = config {
        spec["config"] = config;
    }
    let bd: BundleDeployment = serde_json::from_value(ctx.labelled(json!({
        "apiVersion": "core.rukpak.io/v1alpha1", "kind": "BundleDeployment",
        "metadata": {"name": name}, "spec": spec})))
    .unwrap();
    Api::<BundleDeployment>::all(ctx.client.clone())
        .create(&PostParams::default(), &bd)
        .await
        .unwrap();
    name
}

/// Whether `account` of `namespace` may list ConfigMaps in `target`, as the API server says.
async fn may_list_config_maps(ctx: &TestContext, namespace: &str, target: &str) -> bool {
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(format!("system:serviceaccount:{namespace}:{ACCOUNT}")),
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(target.to_owned()),
                verb: Some("list".into()),
                resource: Some("configmaps".into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let answer = Api::<SubjectAccessReview>::all(ctx.client.clone())
        .create(&PostParams::default(), &review)
        .await
        .unwrap();
    answer.status.is_some_and(|s| s.allowed)
}

async fn healthy(bds: &Api<BundleDeployment>, name: &str) {
    let done = wait_for(bds, name, "installed and healthy", WAIT, |bd| {
        condition(bd, "Installed").is_some_and(|(s, _, _)| s == "True")
            && condition(bd, "Healthy").is_some_and(|(s, _, _)| s == "True")
    })
    .await
    .unwrap();
    let (_, reason, _) = condition(Some(&done), "Installed").unwrap();
    assert_eq!(reason, "InstallationSucceeded");
}

/// The Pod template's `olm.targetNamespaces` of the operator installed in `namespace`.
async fn targets(ctx: &TestContext, namespace: &str) -> String {
    let deployment = Api::<Deployment>::namespaced(ctx.client.clone(), namespace)
        .get("watcher")
        .await
        .unwrap();
    let annotations = deployment
        .spec
        .and_then(|s| s.template.metadata)
        .and_then(|m| m.annotations)
        .unwrap_or_default();
    annotations["olm.targetNamespaces"].clone()
}

/// The `GREETING` variable of the operator installed in `namespace`, and (checked) the
/// `team` annotation its settings put on the Deployment.
async fn greeting_of(ctx: &TestContext, namespace: &str) -> Option<String> {
    let deployment = Api::<Deployment>::namespaced(ctx.client.clone(), namespace)
        .get("watcher")
        .await
        .unwrap();
    let annotations = deployment.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations.get("team").map(String::as_str),
        Some("e2e"),
        "{:?}",
        deployment.metadata
    );
    let spec = deployment.spec?;
    let container = spec.template.spec?.containers.into_iter().next()?;
    container
        .env?
        .into_iter()
        .find(|e| e.name == "GREETING")
        .and_then(|e| e.value)
}

/// The namespaces of `candidates` holding a Role (only the operators' are made in them).
async fn roles_in(ctx: &TestContext, candidates: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    for ns in candidates {
        let roles = Api::<Role>::namespaced(ctx.client.clone(), ns)
            .list(&Default::default())
            .await
            .unwrap();
        // These namespaces are this test's: any Role in them is the operator's.
        if !roles.items.is_empty() {
            found.push((*ns).to_owned());
        }
    }
    found
}

#[tokio::test]
async fn registry_operators_install_in_every_mode_with_their_roles_where_they_watch() {
    let ctx = TestContext::new("prov-modes").await.unwrap();
    provisioner().unwrap();
    let bds: Api<BundleDeployment> = Api::all(ctx.client.clone());
    let busybox = push_busybox(&registry().unwrap(), "1.36").await.unwrap();
    let elsewhere = ctx.namespace.clone();

    // OwnNamespace only, no namespace asked: its own namespace, `<package>-system`, made for
    // it; with a per-install setting of its Deployment.
    let own_package = ctx.name("own");
    let own_image = bundle_image(
        &ctx,
        "own",
        &bundle(&own_package, &["OwnNamespace"], &busybox),
    )
    .await;
    let greeting = |value: &str| {
        json!({"deploymentConfig": {"env": [{"name": "GREETING", "value": value}],
                                    "annotations": {"team": "e2e"}}})
    };
    let own = deploy(&ctx, "own", &own_image, Some(greeting("hello"))).await;
    // SingleNamespace: installed in one namespace, watching another.
    let single_home = extra_namespace(&ctx, "single-home").await;
    let watched = extra_namespace(&ctx, "watched").await;
    let single_image = bundle_image(
        &ctx,
        "single",
        &bundle(
            &ctx.name("single"),
            &["SingleNamespace", "OwnNamespace"],
            &busybox,
        ),
    )
    .await;
    let single = deploy(
        &ctx,
        "single",
        &single_image,
        Some(json!({"namespace": single_home, "watchNamespace": watched})),
    )
    .await;
    // MultiNamespace: two watched namespaces, named out of order.
    let multi_home = extra_namespace(&ctx, "multi-home").await;
    let (team_a, team_b) = (
        extra_namespace(&ctx, "team-a").await,
        extra_namespace(&ctx, "team-b").await,
    );
    let multi_image = bundle_image(
        &ctx,
        "multi",
        &bundle(&ctx.name("multi"), &["MultiNamespace"], &busybox),
    )
    .await;
    let multi = deploy(
        &ctx,
        "multi",
        &multi_image,
        Some(json!({"namespace": multi_home, "targetNamespaces": [team_b, team_a]})),
    )
    .await;
    // A mode the CSV does not support: refused, naming both.
    let refused_home = extra_namespace(&ctx, "refused-home").await;
    let refused_image = bundle_image(
        &ctx,
        "refused",
        &bundle(
            &ctx.name("refused"),
            &["OwnNamespace", "AllNamespaces"],
            &busybox,
        ),
    )
    .await;
    let refused = deploy(
        &ctx,
        "refused",
        &refused_image,
        Some(json!({"namespace": refused_home, "watchNamespace": watched})),
    )
    .await;

    let own_home = format!("{own_package}-system");
    healthy(&bds, &own).await;
    assert_eq!(targets(&ctx, &own_home).await, own_home);
    assert_eq!(
        roles_in(&ctx, &[&own_home, &elsewhere]).await,
        std::slice::from_ref(&own_home)
    );
    assert!(may_list_config_maps(&ctx, &own_home, &own_home).await);
    assert!(!may_list_config_maps(&ctx, &own_home, &elsewhere).await);
    assert_eq!(greeting_of(&ctx, &own_home).await, Some("hello".into()));
    // A changed setting is applied again.
    let before = bds.get(&own).await.unwrap().status.unwrap().active_bundle;
    bds.patch(
        &own,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"config": greeting("goodbye")}})),
    )
    .await
    .unwrap();
    wait_for(
        &bds,
        &own,
        "installed with the new setting",
        WAIT,
        move |bd| {
            condition(bd, "Installed").is_some_and(|(s, _, _)| s == "True")
                && bd
                    .and_then(|b| b.status.as_ref())
                    .is_some_and(|s| s.active_bundle != before)
        },
    )
    .await
    .unwrap();
    assert_eq!(greeting_of(&ctx, &own_home).await, Some("goodbye".into()));

    healthy(&bds, &single).await;
    assert_eq!(targets(&ctx, &single_home).await, watched);
    assert_eq!(
        roles_in(&ctx, &[&single_home, &watched, &elsewhere]).await,
        [single_home.clone(), watched.clone()]
    );
    assert!(may_list_config_maps(&ctx, &single_home, &watched).await);
    assert!(
        !may_list_config_maps(&ctx, &single_home, &elsewhere).await,
        "a SingleNamespace operator's permissions are not cluster-wide"
    );
    // Naming another install namespace is a move, refused as any: what users keep in the old
    // one would be left behind. Named back, it is installed again.
    let config =
        |home: &str| json!({"spec": {"config": {"namespace": home, "watchNamespace": watched}}});
    bds.patch(
        &single,
        &PatchParams::default(),
        &Patch::Merge(config(&refused_home)),
    )
    .await
    .unwrap();
    let moved = wait_for(&bds, &single, "a move refused", WAIT, |bd| {
        condition(bd, "Installed")
            .is_some_and(|(s, r, _)| s == "False" && r == "InstallNamespaceChangeRefused")
    })
    .await
    .unwrap();
    let (_, _, message) = condition(Some(&moved), "Installed").unwrap();
    assert!(
        message.contains(&format!(
            "would move from {single_home:?} to {refused_home:?}"
        )),
        "{message}"
    );
    bds.patch(
        &single,
        &PatchParams::default(),
        &Patch::Merge(config(&single_home)),
    )
    .await
    .unwrap();
    healthy(&bds, &single).await;

    healthy(&bds, &multi).await;
    assert_eq!(
        targets(&ctx, &multi_home).await,
        format!("{team_a},{team_b}")
    );
    for ns in [&team_a, &team_b] {
        assert!(may_list_config_maps(&ctx, &multi_home, ns).await, "{ns}");
    }
    assert!(!may_list_config_maps(&ctx, &multi_home, &elsewhere).await);

    let seen = wait_for(&bds, &refused, "refused", WAIT, |bd| {
        condition(bd, "Installed")
            .is_some_and(|(s, r, _)| s == "False" && r == "UnsupportedInstallMode")
    })
    .await
    .unwrap();
    let (_, _, message) = condition(Some(&seen), "Installed").unwrap();
    assert!(
        message.contains(&format!(
            "SingleNamespace (watching {watched:?}) is not supported by this bundle's ClusterServiceVersion (it supports OwnNamespace, AllNamespaces)"
        )),
        "{message}"
    );
    assert!(
        Api::<Deployment>::namespaced(ctx.client.clone(), &refused_home)
            .get_opt("watcher")
            .await
            .unwrap()
            .is_none(),
        "nothing of a refused install is applied"
    );

    for bd in [&own, &single, &multi, &refused] {
        bds.delete(bd, &DeleteParams::default()).await.unwrap();
        wait_for_deletion(&bds, bd, WAIT).await.unwrap();
    }
    // The namespace made for the OwnNamespace operator goes with it; the user's stay, empty of
    // what was applied.
    wait_for_deletion(&Api::<Namespace>::all(ctx.client.clone()), &own_home, WAIT)
        .await
        .unwrap();
    assert!(
        roles_in(&ctx, &[&single_home, &watched, &team_a])
            .await
            .is_empty()
    );
    ctx.cleanup().await.unwrap();
}
