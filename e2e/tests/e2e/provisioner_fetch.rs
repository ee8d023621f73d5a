//! The provisioner's fetch: a bundle image pulled from the real registry with catalogd's image
//! code (the whole image, not a catalog's configs directory), and bundles in ConfigMaps.

use std::sync::Arc;
use std::time::Duration;

use catalogd_sources::budget::UnpackBudget;
use catalogd_sources::image::ImageOptions;
use catalogd_sources::image::ImageSource;
use catalogd_sources::image::cache::LayerCache;
use catalogd_sources::image::registry::RegistryOptions;
use catalogd_sources::network::NetworkPolicy;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use olm_api::bundle_deployment::{BundleConfigMapSource, BundleLocalRef};
use olm_e2e::context::TestContext;
use olm_e2e::images::{Entry, layer, push};
use provisioner::fetch::{FetchError, Fetcher};
use provisioner::format::plain;
use provisioner::source::Wanted;
use serde_json::json;

fn fetcher(ctx: &TestContext, cache: &std::path::Path) -> Fetcher {
    let images = ImageSource::new(
        ctx.client.clone(),
        ctx.namespace.clone(),
        ImageOptions {
            registry: RegistryOptions {
                timeout: Duration::from_secs(30),
                // The test registry listens on loopback.
                policy: Arc::new(NetworkPolicy {
                    allow_loopback: true,
                    ..Default::default()
                }),
                ..Default::default()
            },
            max_bytes: 1 << 20,
            pull_timeout: Duration::from_secs(60),
            max_concurrent_pulls: 1,
            allow_credentials_without_tls_verify: false,
        },
        LayerCache::open(cache, 16 << 20).unwrap(),
        None,
    );
    Fetcher::new(
        ctx.client.clone(),
        ctx.namespace.clone(),
        Arc::new(images),
        UnpackBudget::new(8 << 20),
    )
}

const CONFIG_MAP: &str =
    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: game-demo\ndata:\n  lives: \"3\"\n";

#[tokio::test]
async fn a_bundle_image_is_pulled_whole_by_digest() {
    let ctx = TestContext::new("prov-fetch-image").await.unwrap();
    let registry = olm_e2e::registry::plain().unwrap();
    // Upstream's plain.v0.1.0: one ConfigMap in manifests/, on a base layer of other files,
    // which a later layer removes in part (a whiteout) to show layers apply in order.
    let base = layer(&[
        Entry::Dir("etc".into()),
        Entry::File("etc/os-release".into(), b"ID=scratch\n".to_vec()),
        Entry::Dir("manifests".into()),
        Entry::File(
            "manifests/stale.yaml".into(),
            CONFIG_MAP.replace("game-demo", "stale").into_bytes(),
        ),
    ]);
    let bundle = layer(&[
        Entry::File("manifests/.wh.stale.yaml".into(), Vec::new()),
        Entry::File(
            "manifests/configmap.yaml".into(),
            CONFIG_MAP.as_bytes().to_vec(),
        ),
        Entry::Dir("metadata".into()),
        Entry::File(
            "metadata/annotations.yaml".into(),
            b"annotations: {}\n".to_vec(),
        ),
    ]);
    let repository = format!("{}/plain", ctx.namespace);
    let digest = push(
        registry,
        &repository,
        "v0.1.0",
        &[base, bundle],
        &Default::default(),
    )
    .await
    .unwrap();
    let cache = tempfile::tempdir().unwrap();
    let wanted = Wanted::Image {
        reference: format!("{}/{repository}:v0.1.0", registry.host),
        pull_secret: None,
    };
    let content = fetcher(&ctx, cache.path())
        .fetch("shop", &wanted)
        .await
        .unwrap();
    assert_eq!(
        content.resolved,
        Some(format!("{}/{repository}@{digest}", registry.host))
    );
    let objects = plain::objects(&content.tree).unwrap();
    let keys: Vec<String> = objects.iter().map(|o| o.key.to_string()).collect();
    assert_eq!(keys, ["ConfigMap game-demo"]);
    assert!(content.tree.is_dir("metadata") && content.tree.is_dir("etc"));
    ctx.cleanup().await.unwrap();
}

#[tokio::test]
async fn bundles_in_immutable_config_maps_are_read_and_mutable_ones_refused() {
    let ctx = TestContext::new("prov-fetch-cm").await.unwrap();
    let configmaps: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    for (name, immutable) in [("bundle", true), ("mutable", false)] {
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": name},
            "immutable": immutable,
            "data": {"configmap.yaml": CONFIG_MAP},
        }))
        .unwrap();
        configmaps
            .create(&PostParams::default(), &cm)
            .await
            .unwrap();
    }
    let entry = |name: &str| BundleConfigMapSource {
        config_map: BundleLocalRef { name: name.into() },
        path: Some("manifests".into()),
    };
    let cache = tempfile::tempdir().unwrap();
    let fetcher = fetcher(&ctx, cache.path());
    let content = fetcher
        .fetch("shop", &Wanted::ConfigMaps(vec![entry("bundle")]))
        .await
        .unwrap();
    assert_eq!(content.resolved, None);
    assert_eq!(plain::objects(&content.tree).unwrap().len(), 1);

    let err = fetcher
        .fetch("shop", &Wanted::ConfigMaps(vec![entry("mutable")]))
        .await
        .unwrap_err();
    assert!(matches!(err, FetchError::Refused(_)), "{err}");
    assert!(
        err.to_string()
            .starts_with("ConfigMap mutable is not immutable"),
        "{err}"
    );
    let missing = fetcher
        .fetch("shop", &Wanted::ConfigMaps(vec![entry("nowhere")]))
        .await
        .unwrap_err();
    assert_eq!(
        missing.to_string(),
        format!(
            "ConfigMap {}/nowhere does not exist: bundle ConfigMaps live in the provisioner's namespace",
            ctx.namespace
        )
    );
    ctx.cleanup().await.unwrap();
}
