//! The image source against a real registry (Debian's docker-registry on 127.0.0.1), with
//! catalogd and operator-controller as local processes under their own ServiceAccounts. The
//! registries are shared by the tests of this process; each test uses repositories of its
//! own, and its requests are told apart in the registry's access log by repository.

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use olm_api::catalog::{Catalog, Phase};
use olm_api::conditions::find_condition;
use olm_e2e::catalogs::{
    create_catalog, example_catalog, metric, scope_secret, status, unpacked_message, wait_reason,
    wait_unpacked,
};
use olm_e2e::context::TestContext;
use olm_e2e::images::{self, Entry, Layer, base_layer, fbc_layer, layer, push, push_catalog};
use olm_e2e::manager::{OLM_NAMESPACE, catalogd, free_port, operator_controller};
use olm_e2e::operators::{create_operator, wait_bd_image, wait_resolved};
use olm_e2e::registry::{Credentials, Registry};
use olm_e2e::wait::{wait_for, wait_for_deletion};
use serde_json::json;

/// The user agent catalogd sends, which picks its requests out of the access log.
const CATALOGD_AGENT: &str = "olm-rs-catalogd";

fn plain() -> &'static Registry {
    olm_e2e::registry::plain().unwrap()
}

const USER: &str = "olm-e2e";
const PASSWORD: &str = "pull-s3cret";

fn secure() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let credentials = Credentials {
            user: USER.into(),
            password: PASSWORD.into(),
        };
        Registry::start("secure", Some(credentials)).unwrap()
    })
}

fn image_source(reference: &str, poll: Option<&str>) -> serde_json::Value {
    let mut image = json!({"ref": reference});
    if let Some(p) = poll {
        image["pollInterval"] = json!(p);
    }
    json!({"type": "image", "image": image})
}

fn example_files(version: &str) -> Vec<(&'static str, String)> {
    vec![("example-operator/catalog.yaml", example_catalog(version))]
}

async fn push_example(registry: &Registry, repository: &str, tag: &str, version: &str) -> String {
    let files = example_files(version);
    let files: Vec<(&str, &str)> = files.iter().map(|(p, c)| (*p, c.as_str())).collect();
    push_catalog(registry, repository, tag, &files)
        .await
        .unwrap()
}

fn resolved_ref(c: &Catalog) -> String {
    status(Some(c))
        .resolved_source
        .and_then(|r| r.image)
        .and_then(|i| i.resolved_ref)
        .unwrap_or_default()
}

fn last_poll(c: Option<&Catalog>) -> Option<String> {
    status(c)
        .resolved_source
        .and_then(|r| r.image)
        .and_then(|i| i.last_poll_attempt)
        .map(|t| t.0.to_string())
}

/// The origin demo "reporting failures in the Catalog object": a reference that does not exist
/// fails with the registry's reason; so does a registry that is not there.
#[tokio::test]
async fn a_missing_image_or_registry_fails_with_the_registry_reason() {
    let ctx = TestContext::new("img-missing").await.unwrap();
    catalogd().unwrap();
    // A registry of its own, which catalogd contacts here for the first time (its scheme is
    // not known yet: HTTPS is tried first, then plain HTTP).
    let registry = Registry::start(&ctx.name("registry"), None).unwrap();
    let registry = &registry;
    let name = ctx.name("missing");
    let api = create_catalog(
        &ctx,
        &name,
        image_source(
            &format!("{}/{}/nothing:1.0", registry.host, ctx.namespace),
            None,
        ),
    )
    .await
    .unwrap();
    let c = wait_reason(&api, &name, "SourceNotFound").await.unwrap();
    let message = unpacked_message(&c);
    assert!(
        message.contains("the registry answered") && message.contains("unknown"),
        "{message}"
    );
    assert_eq!(status(Some(&c)).phase, Some(Phase::Failing));

    let port = free_port().unwrap();
    let gone = ctx.name("gone");
    create_catalog(
        &ctx,
        &gone,
        image_source(&format!("127.0.0.1:{port}/x/index:1"), None),
    )
    .await
    .unwrap();
    let c = wait_reason(&api, &gone, "UnpackFailed").await.unwrap();
    let message = unpacked_message(&c);
    assert!(
        message.to_lowercase().contains("connection refused"),
        "{message}"
    );
    registry.stop().unwrap();
    ctx.cleanup().await.unwrap();
}

/// The origin demo "reporting the hash of the catalog content" (0.1.0, 0.2.0, 0.1.0 again: the
/// hash comes back to exactly the first value), re-pushing a tag noticed at the next poll, and
/// the cost of a poll of an unchanged tag: exactly one manifest HEAD, nothing else.
#[tokio::test]
async fn the_content_hash_follows_the_tag_and_an_unchanged_poll_costs_one_head() {
    let ctx = TestContext::new("img-hash").await.unwrap();
    let cd = catalogd().unwrap();
    let registry = plain();
    let repository = format!("{}/example-operator-index", ctx.namespace);
    let d1 = push_example(registry, &repository, "latest", "0.1.0").await;
    let name = ctx.name("hash");
    let api = create_catalog(
        &ctx,
        &name,
        image_source(
            &format!("{}/{repository}:latest", registry.host),
            Some("5s"),
        ),
    )
    .await
    .unwrap();
    let first = wait_unpacked(&api, &name, None).await.unwrap();
    let h1 = status(Some(&first)).content_hash.unwrap();
    assert_eq!(
        resolved_ref(&first),
        format!("{}/{repository}@{d1}", registry.host)
    );

    let d2 = push_example(registry, &repository, "latest", "0.2.0").await;
    assert_ne!(d1, d2);
    let second = wait_unpacked(&api, &name, Some(&h1)).await.unwrap();
    let h2 = status(Some(&second)).content_hash.unwrap();
    assert!(resolved_ref(&second).ends_with(&d2));

    // The same image again: the same digest, the same content hash, and its layers come from
    // catalogd's cache.
    let cached_before = metric(
        &cd.admin_url,
        "catalogd_image_layers_total",
        &["origin=\"cache\""],
    )
    .await
    .unwrap();
    assert_eq!(
        push_example(registry, &repository, "latest", "0.1.0").await,
        d1
    );
    let third = wait_unpacked(&api, &name, Some(&h2)).await.unwrap();
    assert_eq!(status(Some(&third)).content_hash.unwrap(), h1);
    let cached_after = metric(
        &cd.admin_url,
        "catalogd_image_layers_total",
        &["origin=\"cache\""],
    )
    .await
    .unwrap();
    assert!(
        cached_after >= cached_before + 2.0,
        "{cached_before} -> {cached_after}"
    );

    // Polls of the unchanged tag, counted from the registry's own access log between two
    // recorded polls: one HEAD of the manifest each, and nothing else.
    let mine = |r: &String| r.contains(&repository);
    let settled = wait_poll_after(&api, &name, last_poll(Some(&third))).await;
    let before: Vec<String> = registry
        .requests(CATALOGD_AGENT)
        .into_iter()
        .filter(mine)
        .collect();
    let once = wait_poll_after(&api, &name, settled).await;
    wait_poll_after(&api, &name, once).await;
    let during: Vec<String> = registry
        .requests(CATALOGD_AGENT)
        .into_iter()
        .filter(mine)
        .skip(before.len())
        .collect();
    let head = format!("HEAD /v2/{repository}/manifests/latest");
    assert_eq!(during, vec![head.clone(), head], "requests of two polls");
    ctx.cleanup().await.unwrap();
}

/// Waits for a poll recorded after `after`; returns its time.
async fn wait_poll_after(api: &Api<Catalog>, name: &str, after: Option<String>) -> Option<String> {
    olm_e2e::catalogs::wait_poll_after(api, name, after, last_poll)
        .await
        .unwrap()
}

/// The origin demo "detecting catalog changes and re-reconciling Operator objects", with
/// images: the Catalog moves from example-operator-index:0.1.0 to 0.2.0 and the
/// BundleDeployment from the 0.1.0 bundle to the 0.2.0 one; deleting both leaves nothing.
#[tokio::test]
async fn operators_follow_a_catalog_image_to_its_next_version() {
    let ctx = TestContext::new("img-demo").await.unwrap();
    let cd = catalogd().unwrap();
    operator_controller().unwrap();
    let registry = plain();
    let repository = format!("{}/example-operator-index", ctx.namespace);
    push_example(registry, &repository, "0.1.0", "0.1.0").await;
    let next = example_catalog("0.2.0").replace(
        "- name: example-operator.v0.2.0\n",
        "- name: example-operator.v0.2.0\n  replaces: example-operator.v0.1.0\n",
    );
    push_catalog(
        registry,
        &repository,
        "0.2.0",
        &[("example-operator/catalog.yaml", next.as_str())],
    )
    .await
    .unwrap();
    let name = ctx.name("operatorhubio");
    let api = create_catalog(
        &ctx,
        &name,
        image_source(&format!("{}/{repository}:0.1.0", registry.host), None),
    )
    .await
    .unwrap();
    let first = wait_unpacked(&api, &name, None).await.unwrap();
    let operator = ctx.name("example");
    let ops = create_operator(&ctx, &operator, json!({"packageName": "example-operator"}))
        .await
        .unwrap();
    let bd = wait_bd_image(
        &ctx,
        &operator,
        "quay.io/olmtest/example-operator-bundle:v0.1.0",
    )
    .await
    .unwrap();
    wait_resolved(&ops, &operator, "True", "Success")
        .await
        .unwrap();

    api.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"source": {"image": {
            "ref": format!("{}/{repository}:0.2.0", registry.host)
        }}}})),
    )
    .await
    .unwrap();
    wait_unpacked(&api, &name, status(Some(&first)).content_hash.as_deref())
        .await
        .unwrap();
    let moved = wait_bd_image(
        &ctx,
        &operator,
        "quay.io/olmtest/example-operator-bundle:v0.2.0",
    )
    .await
    .unwrap();
    assert_eq!(moved.uid(), bd.uid(), "the same BundleDeployment moves");

    ops.delete(&operator, &DeleteParams::background())
        .await
        .unwrap();
    api.delete(&name, &DeleteParams::background())
        .await
        .unwrap();
    wait_for_deletion(&ops, &operator, Duration::from_secs(60))
        .await
        .unwrap();
    wait_for_deletion(&api, &name, Duration::from_secs(60))
        .await
        .unwrap();
    let bds: Api<olm_api::bundle_deployment::BundleDeployment> = Api::all(ctx.client.clone());
    wait_for_deletion(&bds, &operator, Duration::from_secs(60))
        .await
        .unwrap();
    let served = reqwest::get(format!("{}/catalogs/{name}/all.json", cd.content_url))
        .await
        .unwrap();
    assert_eq!(served.status(), reqwest::StatusCode::NOT_FOUND);
    ctx.cleanup().await.unwrap();
}

/// A private registry (TLS from the harness CA, htpasswd): no pull secret, a wrong one and one
/// that did not opt in each fail clearly and never show the password; the right one works.
#[tokio::test]
async fn a_private_registry_needs_an_opted_in_pull_secret() {
    let ctx = TestContext::new("img-private").await.unwrap();
    catalogd().unwrap();
    let registry = secure();
    let repository = format!("{}/private-index", ctx.namespace);
    push_example(registry, &repository, "1", "0.1.0").await;
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), OLM_NAMESPACE);
    let put_secret = |name: String, password: &str, opted_in: bool| {
        let auth = base64_encode(&format!("{USER}:{password}"));
        let config = json!({"auths": {registry.host.clone(): {"auth": auth}}}).to_string();
        let mut secret = ctx.labelled(json!({
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
            "metadata": {"name": name, "namespace": OLM_NAMESPACE},
            "stringData": {".dockerconfigjson": config}
        }));
        if opted_in {
            secret["metadata"]["labels"]["olm-rs.io/catalog-credential"] = json!("true");
            secret["metadata"]["annotations"] =
                json!({"olm-rs.io/credential-hosts": registry.host.clone()});
        }
        let secrets = secrets.clone();
        async move {
            let s: Secret = serde_json::from_value(secret).unwrap();
            secrets.create(&Default::default(), &s).await.unwrap();
        }
    };
    let (wrong, right) = (ctx.name("wrong"), ctx.name("right"));
    put_secret(wrong.clone(), "not-the-password", true).await;
    put_secret(right.clone(), PASSWORD, false).await;

    let name = ctx.name("private");
    let reference = format!("{}/{repository}:1", registry.host);
    let api = create_catalog(&ctx, &name, image_source(&reference, None))
        .await
        .unwrap();
    let c = wait_reason(&api, &name, "Unauthorized").await.unwrap();
    assert!(
        unpacked_message(&c).contains("requires credentials"),
        "{}",
        unpacked_message(&c)
    );

    let set_secret = |secret: String| {
        let api = api.clone();
        let name = name.clone();
        async move {
            api.patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"source": {"image": {"pullSecret": secret}}}})),
            )
            .await
            .unwrap();
        }
    };
    set_secret(wrong).await;
    let c = wait_for(
        &api,
        &name,
        "the wrong secret refused",
        Duration::from_secs(60),
        |c| unpacked_message_of(c).contains("refused the credentials"),
    )
    .await
    .unwrap();
    let message = unpacked_message(&c);
    assert!(message.contains("unauthorized"), "{message}");
    assert!(!message.contains("not-the-password"), "{message}");

    set_secret(right.clone()).await;
    let c = wait_reason(&api, &name, "SecretNotOptedIn").await.unwrap();
    assert!(!unpacked_message(&c).contains(PASSWORD));
    secrets
        .patch(
            &right,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"labels": {"olm-rs.io/catalog-credential": "true"}}}),
            ),
        )
        .await
        .unwrap();
    // Opted in, but scoped to nowhere, then to another registry: nothing is sent.
    let c = wait_reason(&api, &name, "CredentialNotAllowed")
        .await
        .unwrap();
    assert!(
        unpacked_message(&c).contains("olm-rs.io/credential-hosts"),
        "{}",
        unpacked_message(&c)
    );
    scope_secret(&ctx, &right, "registry.example.com")
        .await
        .unwrap();
    wait_for(
        &api,
        &name,
        "refused for another registry",
        Duration::from_secs(60),
        |c| unpacked_message_of(c).contains("may be sent only to registry.example.com"),
    )
    .await
    .unwrap();
    scope_secret(
        &ctx,
        &right,
        &format!("registry.example.com, {}", registry.host),
    )
    .await
    .unwrap();
    let c = wait_unpacked(&api, &name, None).await.unwrap();
    assert!(resolved_ref(&c).starts_with(&format!("{}/{repository}@sha256:", registry.host)));
    ctx.cleanup().await.unwrap();
}

fn unpacked_message_of(c: Option<&Catalog>) -> String {
    c.map(unpacked_message).unwrap_or_default()
}

fn base64_encode(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// Hostile and broken images: each is refused with a clear reason while the last good content
/// is still served, and a layer that unpacks far past the limit does not grow catalogd's
/// memory.
#[tokio::test]
async fn hostile_images_are_refused_and_the_last_good_content_is_served() {
    let ctx = TestContext::new("img-hostile").await.unwrap();
    let cd = catalogd().unwrap();
    let registry = plain();
    let repository = format!("{}/index", ctx.namespace);
    let labels: BTreeMap<String, String> = BTreeMap::new();
    push_example(registry, &repository, "good", "0.1.0").await;
    let name = ctx.name("hostile");
    let api = create_catalog(
        &ctx,
        &name,
        image_source(&format!("{}/{repository}:good", registry.host), None),
    )
    .await
    .unwrap();
    let good = wait_unpacked(&api, &name, None).await.unwrap();
    let good_hash = status(Some(&good)).content_hash.unwrap();
    let content_url = status(Some(&good)).content_url.unwrap();
    let good_body = reqwest::get(&content_url)
        .await
        .unwrap()
        .text()
        .await
        .unwrap();

    let fbc = || fbc_layer("configs", &[("c.yaml", example_catalog("0.1.0").as_str())]);
    // A layer of its own (so not in catalogd's cache), corrupted in the registry's storage
    // after the push: the registry then serves bytes that do not have their digest.
    let unique = fbc_layer(
        "configs",
        &[
            ("c.yaml", &example_catalog("0.3.0")),
            ("id", &ctx.namespace),
        ],
    );
    let unique_digest = digest_of(&unique);
    let cases: Vec<(&str, Vec<Layer>, &str, &str)> = vec![
        (
            "dotdot",
            vec![
                base_layer(),
                fbc(),
                layer(&[Entry::File("configs/../../etc/cron".into(), b"x".to_vec())]),
            ],
            "UnpackFailed",
            "climbs out of the image",
        ),
        (
            "symlink",
            vec![
                fbc(),
                layer(&[Entry::Symlink(
                    "configs/evil.json".into(),
                    "../../../etc/shadow".into(),
                )]),
            ],
            "UnpackFailed",
            "outside the image",
        ),
        (
            "whiteout",
            vec![
                base_layer(),
                fbc(),
                layer(&[Entry::File(".wh.configs".into(), Vec::new())]),
            ],
            "UnpackFailed",
            "no /configs directory",
        ),
        (
            "big",
            vec![
                fbc(),
                layer(&[Entry::File(
                    "bin/blob".into(),
                    images::noise(2 << 20, b"olm-rs"),
                )]),
            ],
            "ContentTooLarge",
            "more than the 1048576 allowed",
        ),
        (
            "corrupt",
            vec![base_layer(), unique],
            "ChecksumMismatch",
            "digest mismatch",
        ),
    ];
    for (tag, layers, reason, why) in cases {
        push(registry, &repository, tag, &layers, &labels)
            .await
            .unwrap();
        if tag == "corrupt" {
            let blob = registry.blob_file(&unique_digest);
            let mut bytes = std::fs::read(&blob).unwrap();
            let last = bytes.len() - 1;
            bytes[last] ^= 0xff;
            std::fs::write(&blob, bytes).unwrap();
        }
        refused(
            &api,
            &name,
            &format!("{}/{repository}:{tag}", registry.host),
            reason,
            why,
            &good_hash,
            &content_url,
            &good_body,
        )
        .await;
    }

    // A small layer that unpacks to 256 MiB: refused while it streams, at the 1 MiB limit,
    // without catalogd's peak memory growing anywhere near that.
    let peak_before = olm_e2e::process::peak_rss_mib(cd.manager.pid);
    push(
        registry,
        &repository,
        "bomb",
        &[fbc(), zero_bomb(256 << 20)],
        &labels,
    )
    .await
    .unwrap();
    refused(
        &api,
        &name,
        &format!("{}/{repository}:bomb", registry.host),
        "ContentTooLarge",
        "unpacks to more than 1048576 bytes",
        &good_hash,
        &content_url,
        &good_body,
    )
    .await;
    let peak_after = olm_e2e::process::peak_rss_mib(cd.manager.pid);
    assert!(
        peak_after < peak_before + 64,
        "catalogd's peak memory grew from {peak_before} to {peak_after} MiB"
    );
    assert!(cd.manager.is_running());
    ctx.cleanup().await.unwrap();
}

/// Points the Catalog at `reference` and checks it is refused with `reason` and a message
/// containing `why`, while the good content is still served and said to be.
#[allow(clippy::too_many_arguments)]
async fn refused(
    api: &Api<Catalog>,
    name: &str,
    reference: &str,
    reason: &'static str,
    why: &str,
    good_hash: &str,
    content_url: &str,
    good_body: &str,
) {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"source": {"image": {"ref": reference}}}})),
    )
    .await
    .unwrap();
    let reference = reference.to_owned();
    let c = wait_for(api, name, reason, Duration::from_secs(60), move |c| {
        let s = status(c);
        s.observed_generation == c.and_then(|c| c.metadata.generation)
            && find_condition(&s.conditions, "Unpacked")
                .is_some_and(|u| u.status == "False" && u.reason == reason)
            && unpacked_message_of(c).contains(&reference)
    })
    .await
    .unwrap();
    let message = unpacked_message(&c);
    assert!(message.contains(why), "{reason}: {message}");
    let s = status(Some(&c));
    assert_eq!(s.content_hash.as_deref(), Some(good_hash), "{message}");
    let serving = find_condition(&s.conditions, "Serving").unwrap();
    assert_eq!(serving.status, "True", "{message}");
    let body = reqwest::get(content_url)
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(body, good_body, "the last good content is served");
}

fn digest_of(layer: &Layer) -> String {
    use sha2::{Digest, Sha256};
    format!("sha256:{}", hex::encode(Sha256::digest(&layer.data)))
}

/// A gzip layer holding one file of `len` zero bytes, written without holding it.
fn zero_bomb(len: u64) -> Layer {
    use std::io::Write;
    let mut header = tar::Header::new_gnu();
    header.set_path("bin/zeros").unwrap();
    header.set_size(len);
    header.set_mode(0o644);
    header.set_cksum();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(header.as_bytes()).unwrap();
    let zeros = vec![0u8; 1 << 20];
    let mut left = len;
    while left > 0 {
        let n = left.min(zeros.len() as u64) as usize;
        gz.write_all(&zeros[..n]).unwrap();
        left -= n as u64;
    }
    gz.write_all(&[0u8; 1024]).unwrap();
    Layer {
        data: gz.finish().unwrap(),
        // Not a true diff_id; catalogd does not read diff_ids.
        diff_id: format!("sha256:{}", "0".repeat(64)),
    }
}
