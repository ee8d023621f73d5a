//! kustomize bundles through the provisioner binary on the real control plane: a base and a
//! production overlay (crates/provisioner/tests/data/kustomize) built by the real kustomize,
//! from a bundle image (the overlay's directory named in `spec.config.directory`) and from
//! immutable ConfigMaps (one per directory); a kustomization with a remote base is refused
//! before kustomize runs, and nothing is applied.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use olm_api::bundle_deployment::BundleDeployment;
use olm_e2e::context::TestContext;
use olm_e2e::images::Entry;
use olm_e2e::manager::{OLM_NAMESPACE, provisioner};
use olm_e2e::wait::{wait_for, wait_for_deletion};
use serde_json::{Value, json};

use crate::provisioner_bundles::{bundle_image, condition};

const KUSTOMIZE: &str = "crates/provisioner/tests/data/kustomize";
const WAIT: Duration = Duration::from_secs(90);

/// The files of `dir`'s subdirectories `subs`, by path below `dir`.
fn files(dir: &Path, subs: &[&str]) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for sub in subs {
        let mut paths: Vec<_> = std::fs::read_dir(dir.join(sub))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        paths.sort();
        for path in paths {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            out.push((format!("{sub}/{name}"), std::fs::read(&path).unwrap()));
        }
    }
    out
}

fn kustomize_bd(ctx: &TestContext, name: &str, source: Value, config: Value) -> BundleDeployment {
    serde_json::from_value(ctx.labelled(json!({
        "apiVersion": "core.rukpak.io/v1alpha1", "kind": "BundleDeployment",
        "metadata": {"name": name},
        "spec": {"provisionerClassName": "core-rukpak-io-plain",
            "config": config,
            "template": {"spec": {"provisionerClassName": "core-rukpak-io-kustomize",
                "source": source}}},
    })))
    .unwrap()
}

#[tokio::test]
async fn a_base_and_its_overlay_install_from_an_image_and_from_config_maps_and_remote_bases_are_refused()
 {
    let ctx = TestContext::new("prov-kustomize").await.unwrap();
    provisioner().unwrap();
    let client = ctx.client.clone();
    let root = olm_e2e::repo_root().join(KUSTOMIZE);
    let all = files(&root, &["base", "overlays/prod"]);

    // From an image: the whole tree, the overlay named.
    let mut entries = vec![
        Entry::Dir("base".into()),
        Entry::Dir("overlays".into()),
        Entry::Dir("overlays/prod".into()),
    ];
    entries.extend(all.iter().map(|(p, c)| Entry::File(p.clone(), c.clone())));
    let image = bundle_image(&ctx, "kustomize", &entries).await;
    // From ConfigMaps: one per directory, each at its path.
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), OLM_NAMESPACE);
    let mut sources = Vec::new();
    for (sub, suffix) in [("base", "base"), ("overlays/prod", "prod")] {
        let data: serde_json::Map<String, Value> = all
            .iter()
            .filter_map(|(p, c)| {
                let (dir, file) = p.rsplit_once('/')?;
                (dir == sub).then(|| (file.to_owned(), String::from_utf8_lossy(c).into()))
            })
            .collect();
        let name = ctx.name(&format!("kz-{suffix}"));
        let map: ConfigMap = serde_json::from_value(ctx.labelled(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": OLM_NAMESPACE},
            "immutable": true, "data": data,
        })))
        .unwrap();
        maps.create(&PostParams::default(), &map).await.unwrap();
        sources.push(json!({"configMap": {"name": name}, "path": sub}));
    }
    let remote_image = bundle_image(
        &ctx,
        "kustomize-remote",
        &[Entry::File(
            "kustomization.yaml".into(),
            b"resources:\n- https://github.com/kubernetes-sigs/kustomize//examples/helloWorld?ref=v5.8.2\n".to_vec(),
        )],
    )
    .await;

    let bds: Api<BundleDeployment> = Api::all(client.clone());
    // The image's overlay in this test's namespace; the ConfigMaps' base in another one the
    // test makes (the same names, so two namespaces).
    let other = format!("{}-cm", ctx.namespace);
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let ns: k8s_openapi::api::core::v1::Namespace = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": other, "labels": ctx.namespace_labels()},
    }))
    .unwrap();
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let from_image = ctx.name("kz-image");
    let from_maps = ctx.name("kz-maps");
    let remote = ctx.name("kz-remote");
    for bd in [
        kustomize_bd(
            &ctx,
            &from_image,
            json!({"type": "image", "image": {"ref": image}}),
            json!({"namespace": ctx.namespace, "directory": "overlays/prod"}),
        ),
        kustomize_bd(
            &ctx,
            &from_maps,
            json!({"type": "configMaps", "configMaps": sources}),
            json!({"namespace": other, "directory": "base"}),
        ),
        kustomize_bd(
            &ctx,
            &remote,
            json!({"type": "image", "image": {"ref": remote_image}}),
            json!({}),
        ),
    ] {
        bds.create(&PostParams::default(), &bd).await.unwrap();
    }
    for name in [&from_image, &from_maps] {
        wait_for(&bds, name, "installed", WAIT, |bd| {
            condition(bd, "Installed").is_some_and(|(s, _, _)| s == "True")
        })
        .await
        .unwrap();
    }
    // The overlay: names prefixed, the Service's port patched, the merged greeting.
    let services: Api<Service> = Api::namespaced(client.clone(), &ctx.namespace);
    let prod = services.get("prod-web").await.unwrap();
    assert_eq!(prod.spec.unwrap().ports.unwrap()[0].port, 8443);
    Api::<Deployment>::namespaced(client.clone(), &ctx.namespace)
        .get("prod-web")
        .await
        .unwrap();
    let greetings = Api::<ConfigMap>::namespaced(client.clone(), &ctx.namespace)
        .list(&ListParams::default().labels("app.kubernetes.io/name=web"))
        .await
        .unwrap();
    let greeting = greetings
        .items
        .iter()
        .find(|m| {
            m.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with("prod-greeting-"))
        })
        .unwrap();
    assert_eq!(greeting.data.as_ref().unwrap()["message"], "bonjour");
    // The base, from the ConfigMaps.
    let base = Api::<Service>::namespaced(client.clone(), &other)
        .get("web")
        .await
        .unwrap();
    assert_eq!(base.spec.unwrap().ports.unwrap()[0].port, 80);

    let refused = wait_for(&bds, &remote, "refused", WAIT, |bd| {
        condition(bd, "HasValidBundle")
            .is_some_and(|(s, r, _)| s == "False" && r == "RemoteReferenceRefused")
    })
    .await
    .unwrap();
    let (_, _, message) = condition(Some(&refused), "HasValidBundle").unwrap();
    assert!(
        message.contains("kustomization.yaml: resources entry") && message.contains("is remote"),
        "{message}"
    );
    for name in [&from_image, &from_maps, &remote] {
        bds.delete(name, &DeleteParams::default()).await.unwrap();
        wait_for_deletion(&bds, name, WAIT).await.unwrap();
    }
    assert!(services.get_opt("prod-web").await.unwrap().is_none());
    ctx.cleanup().await.unwrap();
}
