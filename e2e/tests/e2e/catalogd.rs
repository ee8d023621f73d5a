//! catalogd end to end: a real control plane, catalogd as a local process running as its own
//! ServiceAccount, ConfigMap and HTTP sources (a real HTTP server on loopback), the content
//! server, status, events and metrics.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use olm_api::catalog::{Catalog, CatalogStatus, Phase};
use olm_api::conditions::find_condition;
use olm_e2e::context::TestContext;
use olm_e2e::manager::{OLM_NAMESPACE, catalogd};
use olm_e2e::wait::{wait_for, wait_for_deletion};
use serde_json::json;
use sha2::{Digest, Sha256};
use tokio::sync::Mutex;

const DEADLINE: Duration = Duration::from_secs(60);

/// The `example-operator` catalog of upstream catalogd's ConfigMap demo.
fn example_catalog(version: &str) -> String {
    format!(
        "---\nschema: olm.package\nname: example-operator\ndefaultChannel: stable\n---\nschema: olm.channel\nname: stable\npackage: example-operator\nentries:\n- name: example-operator.v{version}\n---\nschema: olm.bundle\nname: example-operator.v{version}\npackage: example-operator\nimage: quay.io/olmtest/example-operator-bundle:v{version}\nproperties:\n- type: olm.package\n  value:\n    packageName: example-operator\n    version: {version}\n"
    )
}

fn http() -> reqwest::Client {
    olm_runtime::client::install_crypto_provider();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

async fn put_configmap(ctx: &TestContext, name: &str, content: &str) {
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), OLM_NAMESPACE);
    let cm = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": OLM_NAMESPACE},
        "data": {"catalog.yaml": content}
    });
    api.patch(name, &PatchParams::apply("e2e").force(), &Patch::Apply(&cm))
        .await
        .unwrap();
}

async fn create_catalog(ctx: &TestContext, name: &str, source: serde_json::Value) -> Api<Catalog> {
    let api: Api<Catalog> = Api::all(ctx.client.clone());
    let c: Catalog = serde_json::from_value(ctx.labelled(json!({
        "apiVersion": "catalogd.operatorframework.io/v1alpha1", "kind": "Catalog",
        "metadata": {"name": name}, "spec": {"source": source}
    })))
    .unwrap();
    api.create(&PostParams::default(), &c).await.unwrap();
    api
}

fn configmap_source(cm: &str) -> serde_json::Value {
    json!({"type": "configMaps", "configMaps": [{"configMap": {"name": cm}}]})
}

fn status(c: Option<&Catalog>) -> CatalogStatus {
    c.and_then(|c| c.status.clone()).unwrap_or_default()
}

/// Waits until the catalog is unpacked at its current generation with a content hash other than
/// `not`, and returns the hash.
async fn wait_unpacked(api: &Api<Catalog>, name: &str, not: Option<&str>) -> Catalog {
    let not = not.map(str::to_owned);
    wait_for(
        api,
        name,
        "Unpacked=True with new content",
        DEADLINE,
        move |c| {
            let s = status(c);
            s.phase == Some(Phase::Unpacked)
                && s.observed_generation == c.and_then(|c| c.metadata.generation)
                && find_condition(&s.conditions, "Unpacked").is_some_and(|u| u.status == "True")
                && s.content_hash.is_some()
                && s.content_hash != not
        },
    )
    .await
    .unwrap()
}

async fn wait_reason(api: &Api<Catalog>, name: &str, reason: &'static str) -> Catalog {
    wait_for(api, name, reason, DEADLINE, move |c| {
        find_condition(&status(c).conditions, "Unpacked")
            .is_some_and(|u| u.status == "False" && u.reason == reason)
    })
    .await
    .unwrap()
}

async fn get_text(url: &str) -> (StatusCode, String) {
    let r = http().get(url).send().await.unwrap();
    (
        StatusCode::from_u16(r.status().as_u16()).unwrap(),
        r.text().await.unwrap(),
    )
}

#[tokio::test]
async fn a_configmap_catalog_is_unpacked_and_served() {
    let ctx = TestContext::new("cd-configmap").await.unwrap();
    let cd = catalogd().unwrap();
    let (name, cm) = (ctx.name("example"), ctx.name("example-cm"));
    put_configmap(&ctx, &cm, &example_catalog("0.1.0")).await;
    let api = create_catalog(&ctx, &name, configmap_source(&cm)).await;
    let c = wait_unpacked(&api, &name, None).await;
    let s = c.status.unwrap();
    let hash = s.content_hash.clone().unwrap();
    assert_eq!(hash.len(), 64);
    assert_eq!(s.short_content_hash.as_deref(), Some(&hash[..12]));
    let url = s.content_url.clone().unwrap();
    assert_eq!(url, format!("{}/catalogs/{name}/all.json", cd.content_url));
    let cms = s.resolved_source.unwrap().config_maps.unwrap();
    assert_eq!(cms[0].name, cm);
    assert!(!cms[0].uid.is_empty() && !cms[0].resource_version.is_empty());
    let serving = find_condition(&s.conditions, "Serving").unwrap();
    assert_eq!(serving.status, "True");
    assert!(serving.message.contains(&hash));

    let (code, body) = get_text(&url).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(
        body,
        "{\"defaultChannel\":\"stable\",\"name\":\"example-operator\",\"schema\":\"olm.package\"}\n\
         {\"entries\":[{\"name\":\"example-operator.v0.1.0\"}],\"name\":\"stable\",\"package\":\"example-operator\",\"schema\":\"olm.channel\"}\n\
         {\"image\":\"quay.io/olmtest/example-operator-bundle:v0.1.0\",\"name\":\"example-operator.v0.1.0\",\"package\":\"example-operator\",\"properties\":[{\"type\":\"olm.package\",\"value\":{\"packageName\":\"example-operator\",\"version\":\"0.1.0\"}}],\"schema\":\"olm.bundle\"}\n"
    );
    let metas = format!("{}/catalogs/{name}/api/v1/metas", cd.content_url);
    let (code, package) =
        get_text(&format!("{metas}?schema=olm.package&name=example-operator")).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(package.lines().count(), 1);
    assert!(package.contains("\"defaultChannel\":\"stable\""));
    let (_, channel) = get_text(&format!(
        "{metas}?schema=olm.channel&package=example-operator"
    ))
    .await;
    assert!(
        channel.contains("\"name\":\"stable\"") && channel.lines().count() == 1,
        "{channel}"
    );
    let (_, bundle) = get_text(&format!(
        "{metas}?schema=olm.bundle&name=example-operator.v0.1.0"
    ))
    .await;
    assert!(
        bundle.contains("example-operator-bundle:v0.1.0") && bundle.lines().count() == 1,
        "{bundle}"
    );

    let (metrics_code, metrics) = get_text(&format!("{}/metrics", cd.admin_url)).await;
    assert_eq!(metrics_code, StatusCode::OK);
    for family in [
        "controller_runtime_reconcile_total",
        "controller_runtime_reconcile_time_seconds",
        "catalogd_unpack_duration_seconds",
        "catalogd_catalog_content_bytes",
        "catalogd_catalogs",
        "catalogd_http_request_duration_seconds",
    ] {
        assert!(metrics.contains(family), "/metrics lacks {family}");
    }
    api.delete(&name, &DeleteParams::default()).await.unwrap();
    ctx.cleanup().await.unwrap();
}

#[tokio::test]
async fn invalid_content_keeps_the_old_content_served_with_the_reason_and_an_event() {
    let ctx = TestContext::new("cd-invalid").await.unwrap();
    catalogd().unwrap();
    let (name, cm) = (ctx.name("inv"), ctx.name("inv-cm"));
    put_configmap(&ctx, &cm, &example_catalog("0.1.0")).await;
    let api = create_catalog(&ctx, &name, configmap_source(&cm)).await;
    let good = wait_unpacked(&api, &name, None).await;
    let good_status = good.status.unwrap();
    let hash = good_status.content_hash.unwrap();
    let url = good_status.content_url.unwrap();
    let (_, before) = get_text(&url).await;

    // A channel entry whose bundle does not exist.
    let broken = example_catalog("0.1.0").replace(
        "- name: example-operator.v0.1.0",
        "- name: example-operator.v9.9.9",
    );
    put_configmap(&ctx, &cm, &broken).await;
    let failed = wait_reason(&api, &name, "InvalidContent").await;
    let s = failed.status.unwrap();
    assert_eq!(s.phase, Some(Phase::Failing));
    let unpacked = find_condition(&s.conditions, "Unpacked").unwrap();
    assert!(
        unpacked
            .message
            .contains(&format!("{OLM_NAMESPACE}/{cm}/catalog.yaml:")),
        "{}",
        unpacked.message
    );
    assert!(
        unpacked.message.contains("example-operator.v9.9.9"),
        "{}",
        unpacked.message
    );
    let serving = find_condition(&s.conditions, "Serving").unwrap();
    assert_eq!(serving.status, "True");
    assert!(serving.message.contains(&hash), "{}", serving.message);
    assert_eq!(s.content_hash.as_deref(), Some(hash.as_str()));
    let (code, after) = get_text(&url).await;
    assert_eq!((code, after), (StatusCode::OK, before));

    // The transition was recorded as a Warning event on the Catalog.
    let events: Api<Event> = Api::namespaced(ctx.client.clone(), "default");
    let found = wait_for_event(&events, &name, "InvalidContent").await;
    assert_eq!(found.type_.as_deref(), Some("Warning"));
    assert!(
        found
            .note
            .unwrap_or_default()
            .contains("example-operator.v9.9.9")
    );

    // Fixing the content recovers.
    put_configmap(&ctx, &cm, &example_catalog("0.1.0")).await;
    let fixed = wait_unpacked(&api, &name, None).await;
    assert_eq!(
        fixed.status.unwrap().content_hash.as_deref(),
        Some(hash.as_str())
    );
    api.delete(&name, &DeleteParams::default()).await.unwrap();
    ctx.cleanup().await.unwrap();
}

/// Waits for an event about `object` with `reason` (events are listed, not watched: they are
/// written asynchronously and there is no single object to watch).
async fn wait_for_event(events: &Api<Event>, object: &str, reason: &str) -> Event {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let list = events.list(&ListParams::default()).await.unwrap();
        if let Some(e) = list.items.into_iter().find(|e| {
            e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(object)
                && e.reason.as_deref() == Some(reason)
        }) {
            return e;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no {reason} event for {object} within {DEADLINE:?}"
        );
        // Bounded by the deadline above.
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test]
async fn a_missing_configmap_is_reported_and_the_catalog_unpacks_once_it_appears() {
    let ctx = TestContext::new("cd-missing").await.unwrap();
    catalogd().unwrap();
    let (name, cm) = (ctx.name("late"), ctx.name("late-cm"));
    let api = create_catalog(&ctx, &name, configmap_source(&cm)).await;
    let c = wait_reason(&api, &name, "SourceNotFound").await;
    let s = c.status.unwrap();
    assert!(
        find_condition(&s.conditions, "Unpacked")
            .unwrap()
            .message
            .contains(&cm)
    );
    assert_eq!(
        find_condition(&s.conditions, "Serving").unwrap().status,
        "False"
    );
    put_configmap(&ctx, &cm, &example_catalog("0.1.0")).await;
    wait_unpacked(&api, &name, None).await;
    api.delete(&name, &DeleteParams::default()).await.unwrap();
    ctx.cleanup().await.unwrap();
}

#[tokio::test]
async fn deleting_a_catalog_removes_its_content() {
    let ctx = TestContext::new("cd-delete").await.unwrap();
    let cd = catalogd().unwrap();
    let (name, cm) = (ctx.name("gone"), ctx.name("gone-cm"));
    put_configmap(&ctx, &cm, &example_catalog("0.1.0")).await;
    let api = create_catalog(&ctx, &name, configmap_source(&cm)).await;
    let c = wait_unpacked(&api, &name, None).await;
    let url = c.status.unwrap().content_url.unwrap();
    assert!(cd.storage.join(&name).exists());
    api.delete(&name, &DeleteParams::default()).await.unwrap();
    wait_for_deletion(&api, &name, DEADLINE).await.unwrap();
    assert!(
        !cd.storage.join(&name).exists(),
        "the catalog's files are still stored"
    );
    let (code, _) = get_text(&url).await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    ctx.cleanup().await.unwrap();
}

/// A catalog file server: `GET /catalog.yaml` with a strong ETag, honouring If-None-Match.
#[derive(Clone)]
struct FileServer {
    body: Arc<Mutex<String>>,
    not_modified: Arc<AtomicUsize>,
    full: Arc<AtomicUsize>,
}

async fn serve_file(State(s): State<FileServer>, headers: HeaderMap) -> Response {
    let body = s.body.lock().await.clone();
    let etag = format!("\"{}\"", hex(&Sha256::digest(body.as_bytes())));
    if headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        == Some(etag.as_str())
    {
        s.not_modified.fetch_add(1, Ordering::SeqCst);
        return (StatusCode::NOT_MODIFIED, [(header::ETAG, etag)]).into_response();
    }
    s.full.fetch_add(1, Ordering::SeqCst);
    (StatusCode::OK, [(header::ETAG, etag)], body).into_response()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

async fn file_server(content: String) -> (FileServer, String) {
    let state = FileServer {
        body: Arc::new(Mutex::new(content)),
        not_modified: Arc::default(),
        full: Arc::default(),
    };
    let app = axum::Router::new()
        .route("/catalog.yaml", axum::routing::get(serve_file))
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/catalog.yaml", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (state, url)
}

#[tokio::test]
async fn equal_content_has_an_equal_hash_from_a_configmap_and_from_http() {
    let ctx = TestContext::new("cd-hash").await.unwrap();
    catalogd().unwrap();
    let v1 = example_catalog("0.1.0");
    let (cm_name, cm) = (ctx.name("by-cm"), ctx.name("by-cm-cm"));
    put_configmap(&ctx, &cm, &v1).await;
    let cm_api = create_catalog(&ctx, &cm_name, configmap_source(&cm)).await;
    let (server, url) = file_server(v1.clone()).await;
    let http_name = ctx.name("by-http");
    let http_api = create_catalog(
        &ctx,
        &http_name,
        json!({"type": "http", "http": {"url": url}}),
    )
    .await;
    let first = wait_unpacked(&cm_api, &cm_name, None)
        .await
        .status
        .unwrap()
        .content_hash
        .unwrap();
    let via_http = wait_unpacked(&http_api, &http_name, None)
        .await
        .status
        .unwrap();
    assert_eq!(via_http.content_hash.as_deref(), Some(first.as_str()));
    let resolved = via_http.resolved_source.unwrap().http.unwrap();
    assert_eq!(resolved.sha256, hex(&Sha256::digest(v1.as_bytes())));
    assert!(resolved.etag.is_some());
    assert!(server.full.load(Ordering::SeqCst) >= 1);

    // New content: a new hash. The same content again: the first hash again.
    put_configmap(&ctx, &cm, &example_catalog("0.2.0")).await;
    let second = wait_unpacked(&cm_api, &cm_name, Some(&first))
        .await
        .status
        .unwrap()
        .content_hash
        .unwrap();
    assert_ne!(second, first);
    put_configmap(&ctx, &cm, &v1).await;
    let third = wait_unpacked(&cm_api, &cm_name, Some(&second))
        .await
        .status
        .unwrap()
        .content_hash
        .unwrap();
    assert_eq!(third, first);
    for (api, name) in [(&cm_api, &cm_name), (&http_api, &http_name)] {
        api.delete(name, &DeleteParams::default()).await.unwrap();
    }
    ctx.cleanup().await.unwrap();
}

#[tokio::test]
async fn an_unchanged_http_catalog_is_not_downloaded_again_and_a_wrong_pin_is_refused() {
    let ctx = TestContext::new("cd-http").await.unwrap();
    catalogd().unwrap();
    let v1 = example_catalog("0.1.0");
    let (server, url) = file_server(v1.clone()).await;
    let name = ctx.name("poll");
    let api = create_catalog(
        &ctx,
        &name,
        json!({"type": "http", "http": {"url": url, "pollInterval": "1s"}}),
    )
    .await;
    let first = wait_unpacked(&api, &name, None).await.status.unwrap();
    let hash = first.content_hash.unwrap();
    let first_poll = first
        .resolved_source
        .unwrap()
        .http
        .unwrap()
        .last_poll_attempt
        .unwrap();
    // Later polls send If-None-Match and get 304: the poll time moves, the content does not.
    wait_for(&api, &name, "a later poll", DEADLINE, move |c| {
        status(c)
            .resolved_source
            .and_then(|r| r.http)
            .and_then(|h| h.last_poll_attempt)
            .is_some_and(|t| t.0 > first_poll.0)
    })
    .await
    .unwrap();
    assert!(
        server.not_modified.load(Ordering::SeqCst) >= 1,
        "no conditional request was answered 304"
    );
    assert_eq!(server.full.load(Ordering::SeqCst), 1);
    let c = api.get(&name).await.unwrap();
    assert_eq!(
        c.status.unwrap().content_hash.as_deref(),
        Some(hash.as_str())
    );

    // A sha256 pin that does not match: ChecksumMismatch, and the old content stays served.
    let wrong = "0".repeat(64);
    api.patch(
        &name,
        &PatchParams::apply("e2e").force(),
        &Patch::Apply(json!({
            "apiVersion": "catalogd.operatorframework.io/v1alpha1", "kind": "Catalog",
            "spec": {"source": {"type": "http", "http": {"url": url, "sha256": wrong}}}
        })),
    )
    .await
    .unwrap();
    let c = wait_reason(&api, &name, "ChecksumMismatch").await;
    let s = c.status.unwrap();
    assert!(
        find_condition(&s.conditions, "Unpacked")
            .unwrap()
            .message
            .contains(&wrong)
    );
    assert_eq!(s.content_hash.as_deref(), Some(hash.as_str()));
    assert_eq!(
        find_condition(&s.conditions, "Serving").unwrap().status,
        "True"
    );

    // The right pin is accepted; an unreachable URL is a clear UnpackFailed.
    let pin = hex(&Sha256::digest(v1.as_bytes()));
    let bad_url = format!(
        "http://127.0.0.1:{}/catalog.yaml",
        olm_e2e::manager::free_port().unwrap()
    );
    let other = ctx.name("unreachable");
    let other_api = create_catalog(
        &ctx,
        &other,
        json!({"type": "http", "http": {"url": bad_url, "sha256": pin}}),
    )
    .await;
    let c = wait_reason(&other_api, &other, "UnpackFailed").await;
    assert!(
        find_condition(&c.status.unwrap().conditions, "Unpacked")
            .unwrap()
            .message
            .contains("127.0.0.1")
    );
    // A body over --max-content-bytes (1 MiB in the tests) is refused as ContentTooLarge.
    let (_big, big_url) = file_server("#".repeat(2 * 1024 * 1024)).await;
    let big = ctx.name("big");
    let big_api = create_catalog(
        &ctx,
        &big,
        json!({"type": "http", "http": {"url": big_url}}),
    )
    .await;
    let c = wait_reason(&big_api, &big, "ContentTooLarge").await;
    assert!(
        find_condition(&c.status.unwrap().conditions, "Unpacked")
            .unwrap()
            .message
            .contains("--max-content-bytes")
    );
    for n in [&name, &other, &big] {
        api.delete(n, &DeleteParams::default()).await.unwrap();
    }
    ctx.cleanup().await.unwrap();
}

#[tokio::test]
async fn a_source_type_this_catalogd_cannot_unpack_yet_is_reported_clearly() {
    let ctx = TestContext::new("cd-unsupported").await.unwrap();
    catalogd().unwrap();
    let name = ctx.name("image");
    let api = create_catalog(
        &ctx,
        &name,
        json!({"type": "image", "image": {"ref": "quay.io/x/y:1"}}),
    )
    .await;
    let c = wait_reason(&api, &name, "UnsupportedSource").await;
    assert_eq!(c.status.unwrap().phase, Some(Phase::Failing));
    api.delete(&name, &DeleteParams::default()).await.unwrap();
    ctx.cleanup().await.unwrap();
}

/// catalogd writes its status with server-side apply, owning only its own conditions: a
/// condition and the imageTemplate written by another manager (the catalog-switcher) survive
/// catalogd's next unpack.
#[tokio::test]
async fn other_managers_status_fields_survive_catalogd_writes() {
    let ctx = TestContext::new("cd-ssa").await.unwrap();
    catalogd().unwrap();
    let (name, cm) = (ctx.name("ssa"), ctx.name("ssa-cm"));
    put_configmap(&ctx, &cm, &example_catalog("0.1.0")).await;
    let api = create_catalog(&ctx, &name, configmap_source(&cm)).await;
    let first = wait_unpacked(&api, &name, None)
        .await
        .status
        .unwrap()
        .content_hash
        .unwrap();
    api.patch_status(
        &name,
        &PatchParams::apply("catalog-switcher-e2e").force(),
        &Patch::Apply(json!({
            "apiVersion": "catalogd.operatorframework.io/v1alpha1", "kind": "Catalog",
            "status": {
                "conditions": [{
                    "type": "ResolvedImage", "status": "True", "reason": "AllTemplatesResolved",
                    "message": "quay.io/example/catalog:v1.36", "lastTransitionTime": "2026-01-01T00:00:00Z"
                }],
                "imageTemplate": {"template": "quay.io/example/catalog:v{kube_minor_version}"}
            }
        })),
    )
    .await
    .unwrap();
    put_configmap(&ctx, &cm, &example_catalog("0.2.0")).await;
    let c = wait_unpacked(&api, &name, Some(&first)).await;
    let s = c.status.unwrap();
    let resolved = find_condition(&s.conditions, "ResolvedImage")
        .expect("the switcher's condition was removed");
    assert_eq!(resolved.message, "quay.io/example/catalog:v1.36");
    assert!(find_condition(&s.conditions, "Unpacked").is_some());
    assert_eq!(
        s.image_template.and_then(|t| t.template).as_deref(),
        Some("quay.io/example/catalog:v{kube_minor_version}")
    );
    api.delete(&name, &DeleteParams::default()).await.unwrap();
    ctx.cleanup().await.unwrap();
}
