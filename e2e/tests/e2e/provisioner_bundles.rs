//! Upstream's plain test bundles (rukpak's `testdata/bundles/plain-v0`, as
//! docs/reference/provisioner.md lists them), mirrored as bundle images the harness builds and
//! pushes to the real registry, each installed through a BundleDeployment by the provisioner
//! binary: the valid one installs; no `manifests/`, an empty `manifests/` and a subdirectory
//! are refused with upstream's words; custom resources without their CRDs are retried until a
//! second BundleDeployment provides the CRDs, and then install.

use std::time::Duration;

use kube::api::{Api, PostParams};
use olm_api::bundle_deployment::BundleDeployment;
use olm_e2e::context::TestContext;
use olm_e2e::images::{Entry, layer, push};
use olm_e2e::manager::provisioner;
use olm_e2e::wait::{wait_for, wait_for_deletion};
use serde_json::json;

/// Pushes a bundle image of `entries` as `<ns>/<name>:v1`; its reference by tag.
pub(crate) async fn bundle_image(ctx: &TestContext, name: &str, entries: &[Entry]) -> String {
    let registry = olm_e2e::registry::plain().unwrap();
    let repository = format!("{}/{name}", ctx.namespace);
    push(
        registry,
        &repository,
        "v1",
        &[layer(entries)],
        &Default::default(),
    )
    .await
    .unwrap();
    format!("{}/{repository}:v1", registry.host)
}

/// The manifest of the BundleDeployment `name` of the plain bundle image `image`, labelled
/// for this test.
pub(crate) fn plain_bd(ctx: &TestContext, name: &str, image: &str) -> serde_json::Value {
    ctx.labelled(json!({
        "apiVersion": "core.rukpak.io/v1alpha1", "kind": "BundleDeployment",
        "metadata": {"name": name},
        "spec": {"provisionerClassName": "core-rukpak-io-plain", "template": {"spec": {
            "provisionerClassName": "core-rukpak-io-plain",
            "source": {"type": "image", "image": {"ref": image}}}}},
    }))
}

/// A BundleDeployment of the plain bundle image `image`, labelled for this test.
async fn deploy(ctx: &TestContext, name: &str, image: &str) -> String {
    let name = ctx.name(name);
    let bd: BundleDeployment = serde_json::from_value(plain_bd(ctx, &name, image)).unwrap();
    Api::<BundleDeployment>::all(ctx.client.clone())
        .create(&PostParams::default(), &bd)
        .await
        .unwrap();
    name
}

/// The condition `type_` of `bd`: (status, reason, message).
pub(crate) fn condition(
    bd: Option<&BundleDeployment>,
    type_: &str,
) -> Option<(String, String, String)> {
    olm_e2e::operators::bd_condition(bd, type_)
}

fn file(path: &str, doc: serde_json::Value) -> Entry {
    Entry::File(path.to_owned(), serde_json::to_vec(&doc).unwrap())
}

#[tokio::test]
async fn upstreams_plain_test_bundles_install_or_are_refused_with_upstreams_words() {
    let ctx = TestContext::new("prov-bundles").await.unwrap();
    provisioner().unwrap();
    let bds: Api<BundleDeployment> = Api::all(ctx.client.clone());
    let config_map = |name: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ctx.namespace}, "data": {"lives": "3"}})
    };

    // valid: one object in manifests/.
    let valid = bundle_image(
        &ctx,
        "valid",
        &[
            Entry::Dir("manifests".into()),
            file("manifests/cm.json", config_map("game-demo")),
        ],
    )
    .await;
    // no-manifests, empty-manifests, subdir: refused.
    let cases = [
        (
            "no-manifests",
            vec![
                Entry::Dir("other".into()),
                file("other/cm.json", config_map("x")),
            ],
            "readdir manifests: file does not exist",
        ),
        (
            "empty-manifests",
            vec![Entry::Dir("manifests".into())],
            "invalid bundle: found zero objects: plain+v0 bundles are required to contain at least one object",
        ),
        (
            "subdir",
            vec![
                Entry::Dir("manifests".into()),
                Entry::Dir("manifests/emptydir".into()),
                file("manifests/cm.json", config_map("y")),
            ],
            "subdirectories are not allowed within the \"manifests\" directory of the bundle image filesystem: found \"manifests/emptydir\"",
        ),
    ];
    let valid_bd = deploy(&ctx, "valid", &valid).await;
    let mut refused = Vec::new();
    for (name, entries, words) in cases {
        let image = bundle_image(&ctx, name, &entries).await;
        refused.push((deploy(&ctx, name, &image).await, words));
    }
    wait_for(
        &bds,
        &valid_bd,
        "installed",
        Duration::from_secs(60),
        |bd| condition(bd, "Installed").is_some_and(|(s, _, _)| s == "True"),
    )
    .await
    .unwrap();
    for (bd, words) in refused {
        let seen = wait_for(&bds, &bd, "refused", Duration::from_secs(60), |bd| {
            condition(bd, "HasValidBundle").is_some_and(|(s, _, _)| s == "False")
        })
        .await
        .unwrap();
        let (_, reason, message) = condition(Some(&seen), "HasValidBundle").unwrap();
        assert_eq!(reason, "BundleLoadFailed", "{bd}");
        assert!(message.starts_with(words), "{bd}: {message}");
        let (status, reason, _) = condition(Some(&seen), "Installed").unwrap();
        assert_eq!(
            (status.as_str(), reason.as_str()),
            ("False", "InstallFailed"),
            "{bd}"
        );
    }
    ctx.cleanup().await.unwrap();
}

#[tokio::test]
async fn custom_resources_without_their_crds_are_retried_until_another_bundle_provides_them() {
    let ctx = TestContext::new("prov-dependent").await.unwrap();
    provisioner().unwrap();
    let bds: Api<BundleDeployment> = Api::all(ctx.client.clone());
    let group = format!("{}.e2e.olm-rs.io", ctx.namespace);
    let crd = ctx.labelled(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("widgets.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]},
    }));
    let widget = json!({"apiVersion": format!("{group}/v1"), "kind": "Widget",
        "metadata": {"name": "w", "namespace": ctx.namespace}});
    // dependent: a custom resource of a CRD nobody serves yet.
    let dependent_image = bundle_image(
        &ctx,
        "dependent",
        &[
            Entry::Dir("manifests".into()),
            file("manifests/widget.json", widget),
        ],
    )
    .await;
    let provides_image = bundle_image(
        &ctx,
        "provides",
        &[
            Entry::Dir("manifests".into()),
            file("manifests/crd.json", crd),
        ],
    )
    .await;
    let dependent = deploy(&ctx, "dependent", &dependent_image).await;
    let failed = wait_for(
        &bds,
        &dependent,
        "a failed first install",
        Duration::from_secs(60),
        |bd| {
            condition(bd, "Installed").is_some_and(|(s, r, _)| s == "False" && r == "InstallFailed")
        },
    )
    .await
    .unwrap();
    let (_, _, message) = condition(Some(&failed), "Installed").unwrap();
    assert!(
        message.contains("no matches for kind \"Widget\""),
        "{message}"
    );
    // provides: the CRDs; the dependent's retry (every 30 s) then installs.
    let provides = deploy(&ctx, "provides", &provides_image).await;
    for bd in [&provides, &dependent] {
        wait_for(&bds, bd, "installed", Duration::from_secs(90), |bd| {
            condition(bd, "Installed").is_some_and(|(s, _, _)| s == "True")
        })
        .await
        .unwrap();
    }
    // The dependent goes first (its custom resource with it), then the CRD's bundle.
    bds.delete(&dependent, &Default::default()).await.unwrap();
    wait_for_deletion(&bds, &dependent, Duration::from_secs(60))
        .await
        .unwrap();
    ctx.cleanup().await.unwrap();
}
