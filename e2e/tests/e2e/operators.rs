//! operator-controller against a real control plane, with catalogd and operator-controller
//! running as local processes under their own ServiceAccounts. No rukpak runs here: nothing
//! acts on BundleDeployments except what the tests write themselves (said where they do).
//! Each test uses package names of its own, and its Operators select only its own Catalogs.

use std::time::Duration;

use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use olm_api::bundle_deployment::BundleDeployment;
use olm_api::catalog::Catalog;
use olm_e2e::catalogs::{
    self, example_catalog, metric, put_catalog_configmap, unpacked_configmap_catalog, wait_unpacked,
};
use olm_e2e::context::TestContext;
use olm_e2e::manager::{catalogd, operator_controller};
use olm_e2e::operators::*;
use olm_e2e::wait::wait_for_deletion;
use serde_json::json;

/// The upstream demo "detecting catalog changes and re-reconciling Operator objects", with a
/// ConfigMap Catalog.
#[tokio::test]
async fn a_catalog_change_moves_the_bundle_deployment_and_deletion_leaves_nothing() {
    let ctx = TestContext::new("op-demo").await.unwrap();
    let catalogd = catalogd().unwrap();
    let oc = operator_controller().unwrap();
    let (catalogs_api, catalog) = unpacked_configmap_catalog(
        &ctx,
        &ctx.name("demo"),
        &ctx.name("demo"),
        &example_catalog("0.1.0"),
    )
    .await
    .unwrap();
    let name = ctx.name("example");
    let ops = create_operator(&ctx, &name, json!({"packageName": "example-operator"}))
        .await
        .unwrap();
    let bd = wait_bd_image(
        &ctx,
        &name,
        "quay.io/olmtest/example-operator-bundle:v0.1.0",
    )
    .await
    .unwrap();
    assert_eq!(bd.spec.provisioner_class_name, "core-rukpak-io-plain");
    assert_eq!(
        bd.spec.template.spec.provisioner_class_name,
        "core-rukpak-io-registry"
    );
    assert_eq!(
        bd.labels()["olm.operatorframework.io/bundle-version"],
        "0.1.0"
    );
    let owner = &bd.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.controller),
        ("Operator", Some(true))
    );
    let op = wait_resolved(&ops, &name, "True", "Success").await.unwrap();
    let status = op.status.clone().unwrap();
    assert_eq!(status.resolved_version.as_deref(), Some("0.1.0"));
    assert_eq!(
        status.resolved_bundle_resource.as_deref(),
        Some("quay.io/olmtest/example-operator-bundle:v0.1.0")
    );
    let generation = op.metadata.generation;

    // 0.2.0 replaces 0.1.0: the same BundleDeployment moves, the Operator's spec is untouched.
    let next = example_catalog("0.2.0").replace(
        "- name: example-operator.v0.2.0\n",
        "- name: example-operator.v0.2.0\n  replaces: example-operator.v0.1.0\n",
    );
    put_catalog_configmap(&ctx, &ctx.name("demo"), &next)
        .await
        .unwrap();
    wait_unpacked(
        &catalogs_api,
        &catalog.name_any(),
        catalog
            .status
            .as_ref()
            .and_then(|s| s.content_hash.as_deref()),
    )
    .await
    .unwrap();
    let moved = wait_bd_image(
        &ctx,
        &name,
        "quay.io/olmtest/example-operator-bundle:v0.2.0",
    )
    .await
    .unwrap();
    assert_eq!(moved.uid(), bd.uid(), "the same BundleDeployment moves");
    let op = wait_operator(&ops, &name, "resolved 0.2.0", |o| {
        o.status
            .as_ref()
            .and_then(|s| s.resolved_version.as_deref())
            == Some("0.2.0")
    })
    .await
    .unwrap();
    assert_eq!(
        op.metadata.generation, generation,
        "the Operator's spec is not touched"
    );
    assert!(
        metric(
            &oc.admin_url,
            "operator_controller_catalog_fetches_total",
            &["result=\"downloaded\""]
        )
        .await
        .unwrap()
            >= 2.0
    );
    assert!(
        metric(
            &oc.admin_url,
            "operator_controller_resolution_duration_seconds_count",
            &[]
        )
        .await
        .unwrap()
            >= 2.0
    );
    assert!(
        metric(
            &oc.admin_url,
            "operator_controller_catalog_cache_bytes",
            &[]
        )
        .await
        .unwrap()
            > 0.0
    );

    // Deleting the Operator and the Catalog leaves no BundleDeployment and no served content.
    ops.delete(&name, &DeleteParams::background())
        .await
        .unwrap();
    catalogs_api
        .delete(&catalog.name_any(), &DeleteParams::default())
        .await
        .unwrap();
    let bds: Api<BundleDeployment> = Api::all(ctx.client.clone());
    wait_for_deletion(&bds, &name, Duration::from_secs(60))
        .await
        .unwrap();
    wait_for_deletion(&catalogs_api, &catalog.name_any(), Duration::from_secs(60))
        .await
        .unwrap();
    let url = format!(
        "{}/catalogs/{}/all.json",
        catalogd.content_url,
        catalog.name_any()
    );
    assert_eq!(reqwest::get(&url).await.unwrap().status(), 404);
    ctx.cleanup().await.unwrap();
}

/// pkg: stable has 1.0.0 <- 1.1.0 <- 1.2.0; fast has 1.2.0 <- 2.0.0.
fn versions_catalog(pkg: &str, tag: &str) -> String {
    [
        package_doc(pkg, "stable"),
        channel_doc(
            pkg,
            "stable",
            &[
                ("1.0.0", None, None),
                ("1.1.0", Some("1.0.0"), None),
                ("1.2.0", Some("1.1.0"), None),
            ],
        ),
        channel_doc(
            pkg,
            "fast",
            &[("1.2.0", None, None), ("2.0.0", Some("1.2.0"), None)],
        ),
        bundle_doc(pkg, "1.0.0", tag, ""),
        bundle_doc(pkg, "1.1.0", tag, ""),
        bundle_doc(pkg, "1.2.0", tag, ""),
        bundle_doc(pkg, "2.0.0", tag, ""),
    ]
    .concat()
}

#[tokio::test]
async fn version_pins_channels_selectors_and_priority_each_change_the_outcome() {
    let ctx = TestContext::new("op-choice").await.unwrap();
    operator_controller().unwrap();
    let pkg = "choice-pkg";
    unpacked_configmap_catalog(
        &ctx,
        &ctx.name("a"),
        &ctx.name("a"),
        &versions_catalog(pkg, ""),
    )
    .await
    .unwrap();
    let name = ctx.name("pin");
    let ops = create_operator(&ctx, &name, json!({"packageName": pkg, "version": "1.1.0"}))
        .await
        .unwrap();
    wait_bd_image(&ctx, &name, &bundle_image(pkg, "1.1.0", ""))
        .await
        .unwrap();
    // A range: the highest in it, along the edges from 1.1.0.
    patch_spec(&ops, &name, json!({"version": ">=1.0.0 <2.0.0"}))
        .await
        .unwrap();
    wait_bd_image(&ctx, &name, &bundle_image(pkg, "1.2.0", ""))
        .await
        .unwrap();
    // The fast channel offers 2.0.0, which replaces 1.2.0.
    patch_spec(&ops, &name, json!({"version": null, "channel": "fast"}))
        .await
        .unwrap();
    wait_bd_image(&ctx, &name, &bundle_image(pkg, "2.0.0", ""))
        .await
        .unwrap();
    // An unknown channel: the message names the channels that exist; the BD is kept.
    patch_spec(&ops, &name, json!({"channel": "nightly"}))
        .await
        .unwrap();
    let op = wait_resolved(&ops, &name, "False", "ResolutionFailed")
        .await
        .unwrap();
    let (_, _, message) = cond(Some(&op), "Resolved");
    assert!(
        message.contains("has no channel \"nightly\"")
            && message.contains("\"fast\"")
            && message.contains("\"stable\""),
        "{message}"
    );
    assert!(
        message.contains("existing BundleDeployment is kept"),
        "{message}"
    );
    assert_eq!(op.status.as_ref().unwrap().resolved_version, None);
    let bds: Api<BundleDeployment> = Api::all(ctx.client.clone());
    assert_eq!(
        bd_image(Some(&bds.get(&name).await.unwrap())),
        Some(bundle_image(pkg, "2.0.0", ""))
    );
    // An unsatisfiable range: the message names the versions there are.
    patch_spec(&ops, &name, json!({"channel": null, "version": ">=3.0.0"}))
        .await
        .unwrap();
    let op = wait_resolved(&ops, &name, "False", "ResolutionFailed")
        .await
        .unwrap();
    let (_, _, message) = cond(Some(&op), "Resolved");
    assert!(
        message.contains("\">=3.0.0\"") && message.contains("2.0.0"),
        "{message}"
    );

    // Selector and priority: two more catalogs with package sel-pkg, different images.
    let sel = "sel-pkg";
    let two = |tag: &str| {
        [
            package_doc(sel, "stable"),
            channel_doc(sel, "stable", &[("1.0.0", None, None)]),
            bundle_doc(sel, "1.0.0", tag, ""),
        ]
        .concat()
    };
    unpacked_configmap_catalog(&ctx, &ctx.name("low"), &ctx.name("low"), &two("-low"))
        .await
        .unwrap();
    unpacked_configmap_catalog(&ctx, &ctx.name("high"), &ctx.name("high"), &two("-high"))
        .await
        .unwrap();
    let catalogs_api: Api<Catalog> = Api::all(ctx.client.clone());
    let label = |tier: &str| json!({"metadata": {"labels": {"tier": tier}}});
    catalogs_api
        .patch(
            &ctx.name("low"),
            &PatchParams::default(),
            &Patch::Merge(label("low")),
        )
        .await
        .unwrap();
    catalogs_api
        .patch(
            &ctx.name("high"),
            &PatchParams::default(),
            &Patch::Merge(label("high")),
        )
        .await
        .unwrap();
    // Same version, same priority: an unbreakable tie, named.
    let s = ctx.name("sel");
    let sel_ops = create_operator(&ctx, &s, json!({"packageName": sel}))
        .await
        .unwrap();
    let op = wait_resolved(&sel_ops, &s, "False", "ResolutionFailed")
        .await
        .unwrap();
    assert!(
        cond(Some(&op), "Resolved").2.contains("same priority"),
        "{:?}",
        cond(Some(&op), "Resolved")
    );
    // A higher priority wins.
    catalogs_api
        .patch(
            &ctx.name("high"),
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"priority": 10}})),
        )
        .await
        .unwrap();
    wait_bd_image(&ctx, &s, &bundle_image(sel, "1.0.0", "-high"))
        .await
        .unwrap();
    // The selector narrows the catalogs, whatever their priority.
    patch_spec(&sel_ops, &s, json!({"catalogSelector": {"matchLabels": {"tier": "low", "olm-rs.io/e2e": ctx.namespace}}})).await.unwrap();
    wait_bd_image(&ctx, &s, &bundle_image(sel, "1.0.0", "-low"))
        .await
        .unwrap();
    ctx.cleanup().await.unwrap();
}

#[tokio::test]
async fn an_upgrade_off_the_edges_is_refused_under_enforce_and_done_under_ignore() {
    let ctx = TestContext::new("op-edges").await.unwrap();
    operator_controller().unwrap();
    let pkg = "edges-pkg";
    // 2.0.0 has no edge from 1.0.0.
    let text = [
        package_doc(pkg, "stable"),
        channel_doc(pkg, "stable", &[("1.0.0", None, None)]),
        channel_doc(pkg, "next", &[("2.0.0", None, None)]),
        bundle_doc(pkg, "1.0.0", "", ""),
        bundle_doc(pkg, "2.0.0", "", ""),
    ]
    .concat();
    unpacked_configmap_catalog(&ctx, &ctx.name("c"), &ctx.name("c"), &text)
        .await
        .unwrap();
    let name = ctx.name("op");
    let ops = create_operator(&ctx, &name, json!({"packageName": pkg, "version": "1.0.0"}))
        .await
        .unwrap();
    wait_bd_image(&ctx, &name, &bundle_image(pkg, "1.0.0", ""))
        .await
        .unwrap();
    patch_spec(&ops, &name, json!({"version": "2.0.0"}))
        .await
        .unwrap();
    let op = wait_resolved(&ops, &name, "False", "ResolutionFailed")
        .await
        .unwrap();
    let (_, _, message) = cond(Some(&op), "Resolved");
    assert!(
        message.contains("upgradeConstraintPolicy to Ignore"),
        "{message}"
    );
    let bds: Api<BundleDeployment> = Api::all(ctx.client.clone());
    assert_eq!(
        bd_image(Some(&bds.get(&name).await.unwrap())),
        Some(bundle_image(pkg, "1.0.0", ""))
    );
    patch_spec(&ops, &name, json!({"upgradeConstraintPolicy": "Ignore"}))
        .await
        .unwrap();
    wait_bd_image(&ctx, &name, &bundle_image(pkg, "2.0.0", ""))
        .await
        .unwrap();
    wait_resolved(&ops, &name, "True", "Success").await.unwrap();
    ctx.cleanup().await.unwrap();
}

#[tokio::test]
async fn dependencies_and_api_conflicts_are_resolved_jointly_and_one_bad_operator_blocks_none() {
    let ctx = TestContext::new("op-joint").await.unwrap();
    operator_controller().unwrap();
    let gvk = |t: &str| {
        format!("- type: {t}\n  value: {{group: example.com, version: v1, kind: Widget}}\n")
    };
    let text = [
        package_doc("joint-app", "stable"),
        channel_doc("joint-app", "stable", &[("1.0.0", None, None)]),
        bundle_doc("joint-app", "1.0.0", "", "- type: olm.package.required\n  value: {packageName: joint-lib, versionRange: '<2.0.0'}\n"),
        package_doc("joint-lib", "stable"),
        channel_doc("joint-lib", "stable", &[("1.0.0", None, None), ("1.5.0", Some("1.0.0"), None), ("2.0.0", Some("1.5.0"), None)]),
        bundle_doc("joint-lib", "1.0.0", "", ""),
        bundle_doc("joint-lib", "1.5.0", "", ""),
        bundle_doc("joint-lib", "2.0.0", "", ""),
        package_doc("joint-wa", "stable"),
        channel_doc("joint-wa", "stable", &[("1.0.0", None, None)]),
        bundle_doc("joint-wa", "1.0.0", "", &gvk("olm.gvk")),
        package_doc("joint-wb", "stable"),
        channel_doc("joint-wb", "stable", &[("1.0.0", None, None)]),
        bundle_doc("joint-wb", "1.0.0", "", &gvk("olm.gvk")),
    ]
    .concat();
    unpacked_configmap_catalog(&ctx, &ctx.name("c"), &ctx.name("c"), &text)
        .await
        .unwrap();
    let mk = |n: &str| ctx.name(n);
    let ops = create_operator(&ctx, &mk("app"), json!({"packageName": "joint-app"}))
        .await
        .unwrap();
    create_operator(&ctx, &mk("lib"), json!({"packageName": "joint-lib"}))
        .await
        .unwrap();
    create_operator(&ctx, &mk("wa"), json!({"packageName": "joint-wa"}))
        .await
        .unwrap();
    create_operator(&ctx, &mk("wb"), json!({"packageName": "joint-wb"}))
        .await
        .unwrap();
    create_operator(&ctx, &mk("nope"), json!({"packageName": "joint-nope"}))
        .await
        .unwrap();
    // The dependency holds lib below 2.0.0 though 2.0.0 is the highest.
    wait_bd_image(&ctx, &mk("app"), &bundle_image("joint-app", "1.0.0", ""))
        .await
        .unwrap();
    wait_bd_image(&ctx, &mk("lib"), &bundle_image("joint-lib", "1.5.0", ""))
        .await
        .unwrap();
    // Two providers of one API: both refused, with the API named.
    for n in ["wa", "wb"] {
        let op = wait_resolved(&ops, &mk(n), "False", "ResolutionFailed")
            .await
            .unwrap();
        let (_, _, message) = cond(Some(&op), "Resolved");
        assert!(
            message.contains("cannot all be satisfied together") && message.contains("Widget"),
            "{message}"
        );
        assert_eq!(cond(Some(&op), "Installed").0, "Unknown");
    }
    let op = wait_resolved(&ops, &mk("nope"), "False", "ResolutionFailed")
        .await
        .unwrap();
    assert!(
        cond(Some(&op), "Resolved")
            .2
            .contains("no catalog has a package named \"joint-nope\"")
    );
    // Without the rival, the other provider resolves.
    ops.delete(&mk("wb"), &DeleteParams::background())
        .await
        .unwrap();
    wait_bd_image(&ctx, &mk("wa"), &bundle_image("joint-wa", "1.0.0", ""))
        .await
        .unwrap();
    ctx.cleanup().await.unwrap();
}

#[tokio::test]
async fn installed_follows_the_bundle_deployment_status_and_explain_agrees() {
    let ctx = TestContext::new("op-installed").await.unwrap();
    let oc = operator_controller().unwrap();
    let pkg = "installed-pkg";
    let text = [
        package_doc(pkg, "stable"),
        channel_doc(pkg, "stable", &[("1.0.0", None, None)]),
        bundle_doc(pkg, "1.0.0", "", ""),
        "---\nschema: olm.deprecations\npackage: installed-pkg\nentries:\n- reference: {schema: olm.package}\n  message: installed-pkg is retired\n".to_owned(),
    ]
    .concat();
    unpacked_configmap_catalog(&ctx, &ctx.name("c"), &ctx.name("c"), &text)
        .await
        .unwrap();
    let name = ctx.name("op");
    let ops = create_operator(&ctx, &name, json!({"packageName": pkg}))
        .await
        .unwrap();
    let bd = wait_bd_image(&ctx, &name, &bundle_image(pkg, "1.0.0", ""))
        .await
        .unwrap();
    let op = wait_operator(&ops, &name, "Installed=Unknown", |o| {
        cond(Some(o), "Installed").0 == "Unknown"
    })
    .await
    .unwrap();
    let (s, reason, message) = cond(Some(&op), "Deprecated");
    assert_eq!(
        (s.as_str(), reason.as_str(), message.as_str()),
        ("True", "PackageDeprecated", "installed-pkg is retired")
    );

    // No rukpak runs here: the test writes the status a provisioner would.
    let bds: Api<BundleDeployment> = Api::all(ctx.client.clone());
    let write = |status: &str, message: &str| {
        json!({"status": {"observedGeneration": bd.metadata.generation, "activeBundle": "b1",
            "conditions": [{"type": "Installed", "status": status, "reason": "InstallationSucceeded",
            "message": message, "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})
    };
    bds.patch_status(
        &name,
        &PatchParams::default(),
        &Patch::Merge(write("True", "ok")),
    )
    .await
    .unwrap();
    let op = wait_operator(&ops, &name, "Installed=True", |o| {
        cond(Some(o), "Installed").0 == "True"
    })
    .await
    .unwrap();
    let status = op.status.clone().unwrap();
    assert_eq!(
        status.installed_bundle_resource,
        Some(bundle_image(pkg, "1.0.0", ""))
    );
    assert_eq!(status.installed_version.as_deref(), Some("1.0.0"));
    bds.patch_status(
        &name,
        &PatchParams::default(),
        &Patch::Merge(write("False", "pods crash")),
    )
    .await
    .unwrap();
    let op = wait_operator(&ops, &name, "Installed=False", |o| {
        cond(Some(o), "Installed").0 == "False"
    })
    .await
    .unwrap();
    let (_, reason, message) = cond(Some(&op), "Installed");
    assert_eq!(
        (reason.as_str(), message.as_str()),
        (
            "InstallationFailed",
            "bundledeployment not ready: pods crash"
        )
    );
    assert_eq!(op.status.as_ref().unwrap().installed_bundle_resource, None);

    // explain prints what the controller wrote, and writes nothing.
    let rv = op.resource_version();
    let out = explain(oc, &["-o", "json", &name]).unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &report["operators"][0];
    assert_eq!(r["name"], name.as_str());
    assert_eq!(r["bundleDeployment"], "unchanged");
    assert_eq!(r["statusChanges"], false, "{r:#}");
    let written: Vec<(String, String, String, String)> = op
        .status
        .as_ref()
        .unwrap()
        .conditions
        .iter()
        .map(|c| {
            (
                c.type_.clone(),
                c.status.clone(),
                c.reason.clone(),
                c.message.clone(),
            )
        })
        .collect();
    let explained: Vec<(String, String, String, String)> = r["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["type"].as_str().unwrap().into(),
                c["status"].as_str().unwrap().into(),
                c["reason"].as_str().unwrap().into(),
                c["message"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(written, explained);
    let text = explain(oc, &[&name]).unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("is up to date") && text.contains("Installed=False InstallationFailed"),
        "{text}"
    );
    assert_eq!(ops.get(&name).await.unwrap().resource_version(), rv);
    let _ = catalogs::DEADLINE;
    ctx.cleanup().await.unwrap();
}

/// Two releases at once: the BundleDeployment takes one upgrade edge at a time (1.0.0, then
/// 1.1.0, then 1.2.0), never jumping past its edges, and ends at the head.
#[tokio::test]
async fn an_operator_moves_one_upgrade_edge_at_a_time() {
    let ctx = TestContext::new("op-chain").await.unwrap();
    operator_controller().unwrap();
    let pkg = "chain-pkg";
    let catalog = |entries: &[(&str, Option<&str>, Option<&str>)]| {
        let mut text = [
            package_doc(pkg, "stable"),
            channel_doc(pkg, "stable", entries),
        ]
        .concat();
        for (v, _, _) in entries {
            text.push_str(&bundle_doc(pkg, v, "", ""));
        }
        text
    };
    let cm = ctx.name("c");
    let (catalogs_api, c) =
        unpacked_configmap_catalog(&ctx, &cm, &cm, &catalog(&[("1.0.0", None, None)]))
            .await
            .unwrap();
    let name = ctx.name("op");
    create_operator(&ctx, &name, json!({"packageName": pkg}))
        .await
        .unwrap();
    wait_bd_image(&ctx, &name, &bundle_image(pkg, "1.0.0", ""))
        .await
        .unwrap();

    // Every image the BundleDeployment takes, in order.
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let bds: Api<BundleDeployment> = Api::all(ctx.client.clone());
    let (s, n) = (seen.clone(), name.clone());
    let watch = tokio::spawn(async move {
        use futures::StreamExt;
        use kube::runtime::{WatchStreamExt, watcher};
        let config = watcher::Config::default().fields(&format!("metadata.name={n}"));
        let mut stream = watcher(bds, config)
            .default_backoff()
            .applied_objects()
            .boxed();
        while let Some(Ok(bd)) = stream.next().await {
            if let Some(image) = bd_image(Some(&bd)) {
                let mut s = s.lock().unwrap();
                if s.last() != Some(&image) {
                    s.push(image);
                }
            }
        }
    });
    put_catalog_configmap(
        &ctx,
        &cm,
        &catalog(&[
            ("1.0.0", None, None),
            ("1.1.0", Some("1.0.0"), None),
            ("1.2.0", Some("1.1.0"), None),
        ]),
    )
    .await
    .unwrap();
    wait_unpacked(
        &catalogs_api,
        &cm,
        c.status.as_ref().and_then(|s| s.content_hash.as_deref()),
    )
    .await
    .unwrap();
    wait_bd_image(&ctx, &name, &bundle_image(pkg, "1.2.0", ""))
        .await
        .unwrap();
    // The recording watch is a watch of its own: it may see 1.2.0 a moment after the wait
    // above did.
    let last = bundle_image(pkg, "1.2.0", "");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while seen.lock().unwrap().last() != Some(&last) {
        assert!(
            std::time::Instant::now() < deadline,
            "the watch never saw {last}"
        );
        // Polling our own watch's record, bounded by the deadline above.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    watch.abort();
    // After 1.0.0 (which the watch may report first or not), 1.1.0, then 1.2.0.
    let first = bundle_image(pkg, "1.0.0", "");
    let seen: Vec<String> = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|i| **i != first)
        .cloned()
        .collect();
    let expected: Vec<String> = ["1.1.0", "1.2.0"]
        .iter()
        .map(|v| bundle_image(pkg, v, ""))
        .collect();
    assert_eq!(seen, expected);
    ctx.cleanup().await.unwrap();
}
