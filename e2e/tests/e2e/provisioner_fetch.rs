//! The provisioner's fetch: a bundle image pulled from the real registry with the puller catalogd
//! shares (the whole image, not a catalog's configs directory), and bundles in ConfigMaps.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use olm_api::bundle_deployment::{BundleConfigMapSource, BundleLocalRef};
use olm_e2e::context::TestContext;
use olm_e2e::images::{Entry, layer, push};
use olm_puller::budget::UnpackBudget;
use olm_puller::image::ImageOptions;
use olm_puller::image::ImageSource;
use olm_puller::image::cache::LayerCache;
use olm_puller::image::registry::RegistryOptions;
use olm_puller::network::NetworkPolicy;
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
        1 << 20,
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
    // Two ConfigMaps each within Kubernetes' 1 MiB, together more than --max-content-bytes.
    for name in ["half-a", "half-b"] {
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": name},
            "immutable": true,
            "data": {format!("{name}.yaml"): "#".repeat(600 << 10)},
        }))
        .unwrap();
        configmaps
            .create(&PostParams::default(), &cm)
            .await
            .unwrap();
    }
    let err = fetcher
        .fetch(
            "shop",
            &Wanted::ConfigMaps(vec![entry("half-a"), entry("half-b")]),
        )
        .await
        .unwrap_err();
    let FetchError::Source(source) = &err else {
        panic!("{err}");
    };
    assert_eq!(source.reason, "ContentTooLarge");
    assert!(err.to_string().contains("--max-content-bytes"), "{err}");
    // Reading bundle files into objects takes a share of the budget ten times their size: a
    // bundle that would need more than the whole budget is refused before it is parsed.
    let err = fetcher.parse_share(1 << 20).await.unwrap_err();
    assert!(err.to_string().contains("--unpack-budget-bytes"), "{err}");
    assert!(fetcher.parse_share(100 << 10).await.is_ok());
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

/// A bundle of one 60 MiB JSON file (within --max-content-bytes) would take about ten times that
/// to parse: the provisioner refuses it before parsing, says why, and stays up (it was
/// OOM-killed, then pulled the bundle again at start: a crash loop that stopped every
/// BundleDeployment).
#[tokio::test]
async fn a_bundle_too_large_to_parse_is_refused_before_it_is_read() {
    use olm_api::bundle_deployment::BundleDeployment;
    use olm_e2e::manager::{OWN_PROVISIONER_LABEL, start_provisioner_with};
    let ctx = TestContext::new("prov-huge").await.unwrap();
    // A provisioner of its own, with the default content limit (64 MiB) and budget (128 MiB).
    let own = ctx.name("own");
    let provisioner = {
        let args = [
            format!("--bundle-deployment-selector={OWN_PROVISIONER_LABEL}={own}"),
            "--max-content-bytes=67108864".to_owned(),
        ];
        tokio::task::spawn_blocking(move || start_provisioner_with("provisioner-huge", &args))
            .await
            .unwrap()
            .unwrap()
    };
    let pid = provisioner.manager.pid;
    // A JSON array of ConfigMaps, 60 MiB in all.
    let one = serde_json::to_string(&json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": ctx.namespace}, "data": {"k": "v"}}))
    .unwrap();
    let mut array = String::from("[");
    while array.len() < 60 << 20 {
        if array.len() > 1 {
            array.push(',');
        }
        array.push_str(&one);
    }
    array.push(']');
    let registry = olm_e2e::registry::plain().unwrap();
    let repository = format!("{}/huge", ctx.namespace);
    let entries = [
        Entry::Dir("manifests".into()),
        Entry::File("manifests/all.json".into(), array.into_bytes()),
    ];
    push(
        registry,
        &repository,
        "v1",
        &[layer(&entries)],
        &Default::default(),
    )
    .await
    .unwrap();
    let image = format!("{}/{repository}:v1", registry.host);
    let before = olm_e2e::memory::process_status_kib(pid, "VmRSS").unwrap();
    assert!(olm_e2e::memory::reset_process_peak(pid));
    let bds: Api<BundleDeployment> = Api::all(ctx.client.clone());
    let name = ctx.name("huge");
    let mut doc = crate::provisioner_bundles::plain_bd(&ctx, &name, &image);
    doc["metadata"]["labels"][OWN_PROVISIONER_LABEL] = own.clone().into();
    let bd: BundleDeployment = serde_json::from_value(doc).unwrap();
    bds.create(&PostParams::default(), &bd).await.unwrap();
    let refused = olm_e2e::wait::wait_for(&bds, &name, "refused", Duration::from_secs(120), |bd| {
        crate::provisioner_bundles::condition(bd, "Unpacked")
            .is_some_and(|(s, _, m)| s == "False" && m.contains("--unpack-budget-bytes"))
    })
    .await
    .unwrap();
    let (_, reason, message) =
        crate::provisioner_bundles::condition(Some(&refused), "Unpacked").unwrap();
    assert_eq!(reason, "UnpackFailed", "{message}");
    let peak = olm_e2e::memory::process_status_kib(pid, "VmHWM").unwrap();
    let rise_mib = peak.saturating_sub(before) / 1024;
    eprintln!("provisioner: a 60 MiB JSON bundle refused; its peak memory rose by {rise_mib} MiB");
    // The fetched file itself, once or twice (the layer and the file): never its parsed
    // objects, which took about a GiB.
    assert!(rise_mib < 400, "peak rose by {rise_mib} MiB");
    assert!(
        std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "the provisioner is gone"
    );
    bds.delete(&name, &Default::default()).await.unwrap();
    olm_e2e::wait::wait_for_deletion(&bds, &name, Duration::from_secs(60))
        .await
        .unwrap();
    ctx.cleanup().await.unwrap();
    provisioner.manager.stop().unwrap();
}
