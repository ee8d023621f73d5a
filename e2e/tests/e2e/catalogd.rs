//! catalogd end to end: a real control plane, catalogd as a local process running as its own
//! ServiceAccount, ConfigMap and HTTP(S) sources (real servers on loopback), the content
//! server, status, events and metrics.

use std::time::Duration;

use axum::http::StatusCode;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use olm_api::catalog::Phase;
use olm_api::conditions::find_condition;
use olm_e2e::catalogs::{
    DEADLINE, configmap_source, create_catalog, example_catalog, metric, put_catalog_configmap,
    put_configmap, status, unpacked_configmap_catalog, unpacked_message, wait_reason,
    wait_unpacked,
};
use olm_e2e::context::TestContext;
use olm_e2e::manager::{OLM_NAMESPACE, catalogd};
use olm_e2e::serve::{http_file, https_file};
use olm_e2e::wait::{wait_for, wait_for_deletion};
use serde_json::json;
use sha2::{Digest, Sha256};

fn http() -> reqwest::Client {
    olm_e2e::install_crypto_provider();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

async fn get_text(url: &str) -> (StatusCode, String) {
    let r = http().get(url).send().await.unwrap();
    (
        StatusCode::from_u16(r.status().as_u16()).unwrap(),
        r.text().await.unwrap(),
    )
}

/// `controller_runtime_reconcile_total{controller="catalog"}` summed over results.
async fn reconciles(admin: &str) -> f64 {
    let mut total = 0.0;
    for result in ["success", "error", "requeue", "requeue_after"] {
        total += metric(
            admin,
            "controller_runtime_reconcile_total",
            &["controller=\"catalog\"", &format!("result=\"{result}\"")],
        )
        .await
        .unwrap();
    }
    total
}

#[tokio::test]
async fn a_configmap_catalog_is_unpacked_and_served() {
    let ctx = TestContext::new("cd-configmap").await.unwrap();
    let cd = catalogd().unwrap();
    let admin = cd.admin_url.as_str();
    let (name, cm) = (ctx.name("example"), ctx.name("example-cm"));
    let success = [r#"source_type="configMaps""#, r#"result="success""#];
    let unpacks_before = metric(admin, "catalogd_unpack_duration_seconds_count", &success)
        .await
        .unwrap();
    let reconciles_before = reconciles(admin).await;
    let (api, c) = unpacked_configmap_catalog(&ctx, &name, &cm, &example_catalog("0.1.0"))
        .await
        .unwrap();
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

    // The metrics moved: this unpack was timed, the reconciles counted, and the served size
    // is the body's.
    let unpacks = metric(admin, "catalogd_unpack_duration_seconds_count", &success)
        .await
        .unwrap();
    assert!(unpacks > unpacks_before, "{unpacks} <= {unpacks_before}");
    assert!(reconciles(admin).await > reconciles_before);
    let label = format!("catalog=\"{name}\"");
    assert_eq!(
        metric(admin, "catalogd_catalog_content_bytes", &[&label])
            .await
            .unwrap(),
        body.len() as f64
    );
    api.delete(&name, &DeleteParams::default()).await.unwrap();
    wait_for_deletion(&api, &name, DEADLINE).await.unwrap();
    let text = http()
        .get(format!("{admin}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        !text.contains(&label),
        "the deleted catalog's content size is still reported"
    );
    ctx.cleanup().await.unwrap();
}

#[tokio::test]
async fn invalid_content_keeps_the_old_content_served_with_the_reason_and_an_event() {
    let ctx = TestContext::new("cd-invalid").await.unwrap();
    let cd = catalogd().unwrap();
    let admin = cd.admin_url.as_str();
    let (name, cm) = (ctx.name("inv"), ctx.name("inv-cm"));
    let (api, good) = unpacked_configmap_catalog(&ctx, &name, &cm, &example_catalog("0.1.0"))
        .await
        .unwrap();
    let good_status = good.status.unwrap();
    let hash = good_status.content_hash.unwrap();
    let url = good_status.content_url.unwrap();
    let (_, before) = get_text(&url).await;
    let errors = ["controller=\"catalog\""];
    let errors_before = metric(admin, "controller_runtime_reconcile_errors_total", &errors)
        .await
        .unwrap();
    let failure = [r#"source_type="configMaps""#, r#"result="failure""#];
    let failures_before = metric(admin, "catalogd_unpack_duration_seconds_count", &failure)
        .await
        .unwrap();

    // A channel entry whose bundle does not exist.
    let broken = example_catalog("0.1.0").replace(
        "- name: example-operator.v0.1.0",
        "- name: example-operator.v9.9.9",
    );
    put_catalog_configmap(&ctx, &cm, &broken).await.unwrap();
    let failed = wait_reason(&api, &name, "InvalidContent").await.unwrap();
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

    // A failed unpack is a reconcile error in the controller-runtime metrics, and a failure
    // in catalogd's own.
    let errors_after = metric(admin, "controller_runtime_reconcile_errors_total", &errors)
        .await
        .unwrap();
    assert!(
        errors_after > errors_before,
        "{errors_after} <= {errors_before}"
    );
    let failures = metric(admin, "catalogd_unpack_duration_seconds_count", &failure)
        .await
        .unwrap();
    assert!(failures > failures_before);

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
    put_catalog_configmap(&ctx, &cm, &example_catalog("0.1.0"))
        .await
        .unwrap();
    let fixed = wait_unpacked(&api, &name, None).await.unwrap();
    assert_eq!(
        fixed.status.unwrap().content_hash.as_deref(),
        Some(hash.as_str())
    );
    ctx.cleanup().await.unwrap();
}

/// Waits for an event about `object` with `reason` (events are listed, not watched: they are
/// written asynchronously and there is no single object to watch).
pub(crate) async fn wait_for_event(events: &Api<Event>, object: &str, reason: &str) -> Event {
    wait_for_event_saying(events, object, reason, "").await
}

/// Waits for an event about `object` with `reason` whose note contains `words`.
pub(crate) async fn wait_for_event_saying(
    events: &Api<Event>,
    object: &str,
    reason: &str,
    words: &str,
) -> Event {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let list = events.list(&ListParams::default()).await.unwrap();
        if let Some(e) = list.items.into_iter().find(|e| {
            e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(object)
                && e.reason.as_deref() == Some(reason)
                && e.note.as_deref().unwrap_or_default().contains(words)
        }) {
            return e;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no {reason} event for {object} saying {words:?} within {DEADLINE:?}"
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
    let api = create_catalog(&ctx, &name, configmap_source(&cm))
        .await
        .unwrap();
    let c = wait_reason(&api, &name, "SourceNotFound").await.unwrap();
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
    put_catalog_configmap(&ctx, &cm, &example_catalog("0.1.0"))
        .await
        .unwrap();
    wait_unpacked(&api, &name, None).await.unwrap();
    ctx.cleanup().await.unwrap();
}

#[tokio::test]
async fn deleting_a_catalog_removes_its_content() {
    let ctx = TestContext::new("cd-delete").await.unwrap();
    let cd = catalogd().unwrap();
    let (name, cm) = (ctx.name("gone"), ctx.name("gone-cm"));
    let (api, c) = unpacked_configmap_catalog(&ctx, &name, &cm, &example_catalog("0.1.0"))
        .await
        .unwrap();
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

#[tokio::test]
async fn equal_content_has_an_equal_hash_from_a_configmap_and_from_http() {
    let ctx = TestContext::new("cd-hash").await.unwrap();
    catalogd().unwrap();
    let v1 = example_catalog("0.1.0");
    let (cm_name, cm) = (ctx.name("by-cm"), ctx.name("by-cm-cm"));
    put_catalog_configmap(&ctx, &cm, &v1).await.unwrap();
    let cm_api = create_catalog(&ctx, &cm_name, configmap_source(&cm))
        .await
        .unwrap();
    let (server, url) = http_file("/catalog.yaml", v1.clone()).await.unwrap();
    let http_name = ctx.name("by-http");
    let http_api = create_catalog(
        &ctx,
        &http_name,
        json!({"type": "http", "http": {"url": url}}),
    )
    .await
    .unwrap();
    let first = wait_unpacked(&cm_api, &cm_name, None).await.unwrap();
    let first = first.status.unwrap().content_hash.unwrap();
    let via_http = wait_unpacked(&http_api, &http_name, None).await.unwrap();
    let via_http = via_http.status.unwrap();
    assert_eq!(via_http.content_hash.as_deref(), Some(first.as_str()));
    let resolved = via_http.resolved_source.unwrap().http.unwrap();
    assert_eq!(resolved.sha256, hex::encode(Sha256::digest(v1.as_bytes())));
    assert!(resolved.etag.is_some());
    assert!(server.full() >= 1);

    // New content: a new hash. The same content again: the first hash again.
    put_catalog_configmap(&ctx, &cm, &example_catalog("0.2.0"))
        .await
        .unwrap();
    let second = wait_unpacked(&cm_api, &cm_name, Some(&first))
        .await
        .unwrap();
    let second = second.status.unwrap().content_hash.unwrap();
    assert_ne!(second, first);
    put_catalog_configmap(&ctx, &cm, &v1).await.unwrap();
    let third = wait_unpacked(&cm_api, &cm_name, Some(&second))
        .await
        .unwrap();
    assert_eq!(third.status.unwrap().content_hash.unwrap(), first);
    ctx.cleanup().await.unwrap();
}

/// The poll interval is honoured as written (5 s is the shortest the API accepts): later polls
/// are conditional, answered 304, and come no sooner than the interval.
#[tokio::test]
async fn an_unchanged_http_catalog_is_polled_at_its_interval_with_conditional_requests() {
    let ctx = TestContext::new("cd-http-poll").await.unwrap();
    catalogd().unwrap();
    let v1 = example_catalog("0.1.0");
    let (server, url) = http_file("/catalog.yaml", v1.clone()).await.unwrap();
    let name = ctx.name("poll");
    let api = create_catalog(
        &ctx,
        &name,
        json!({"type": "http", "http": {"url": url, "pollInterval": "5s"}}),
    )
    .await
    .unwrap();
    let first = wait_unpacked(&api, &name, None)
        .await
        .unwrap()
        .status
        .unwrap();
    let hash = first.content_hash.unwrap();
    let first_poll = first
        .resolved_source
        .unwrap()
        .http
        .unwrap()
        .last_poll_attempt
        .unwrap();
    let polled = wait_for(&api, &name, "a later poll", DEADLINE, move |c| {
        status(c)
            .resolved_source
            .and_then(|r| r.http)
            .and_then(|h| h.last_poll_attempt)
            .is_some_and(|t| t.0 > first_poll.0)
    })
    .await
    .unwrap();
    let second_poll = polled
        .status
        .unwrap()
        .resolved_source
        .unwrap()
        .http
        .unwrap()
        .last_poll_attempt
        .unwrap();
    let gap = second_poll.0.duration_since(first_poll.0).as_secs_f64();
    assert!(
        gap >= 4.9,
        "polled again after {gap} s, before the 5 s interval"
    );
    assert!(
        server.not_modified() >= 1,
        "no conditional request was answered 304"
    );
    assert_eq!(server.full(), 1);
    let c = api.get(&name).await.unwrap();
    assert_eq!(
        c.status.unwrap().content_hash.as_deref(),
        Some(hash.as_str())
    );
    ctx.cleanup().await.unwrap();
}

#[tokio::test]
async fn sha256_pins_are_checked_and_bad_sources_say_why() {
    let ctx = TestContext::new("cd-http-pin").await.unwrap();
    catalogd().unwrap();
    let v1 = example_catalog("0.1.0");
    let (server, url) = http_file("/catalog.yaml", v1.clone()).await.unwrap();

    // The right pin unpacks, and records what it pinned.
    let pin = hex::encode(Sha256::digest(v1.as_bytes()));
    let name = ctx.name("pinned");
    let api = create_catalog(
        &ctx,
        &name,
        json!({"type": "http", "http": {"url": url, "sha256": pin}}),
    )
    .await
    .unwrap();
    let good = wait_unpacked(&api, &name, None)
        .await
        .unwrap()
        .status
        .unwrap();
    let hash = good.content_hash.unwrap();
    assert_eq!(good.resolved_source.unwrap().http.unwrap().sha256, pin);
    let downloads = server.full();

    // A pin that does not match: ChecksumMismatch, and the old content stays served.
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
    let c = wait_reason(&api, &name, "ChecksumMismatch").await.unwrap();
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
    assert!(
        server.full() > downloads,
        "the new pin was not checked against the body"
    );

    // An unreachable URL is a clear UnpackFailed.
    let bad_url = format!(
        "http://127.0.0.1:{}/catalog.yaml",
        olm_e2e::manager::free_port().unwrap()
    );
    let other = ctx.name("unreachable");
    let other_api = create_catalog(
        &ctx,
        &other,
        json!({"type": "http", "http": {"url": bad_url}}),
    )
    .await
    .unwrap();
    let c = wait_reason(&other_api, &other, "UnpackFailed")
        .await
        .unwrap();
    assert!(
        find_condition(&c.status.unwrap().conditions, "Unpacked")
            .unwrap()
            .message
            .contains("127.0.0.1")
    );
    // A body over --max-content-bytes (1 MiB in the tests) is refused as ContentTooLarge.
    let (_big, big_url) = http_file("/catalog.yaml", "#".repeat(2 * 1024 * 1024))
        .await
        .unwrap();
    let big = ctx.name("big");
    let big_api = create_catalog(
        &ctx,
        &big,
        json!({"type": "http", "http": {"url": big_url}}),
    )
    .await
    .unwrap();
    let c = wait_reason(&big_api, &big, "ContentTooLarge")
        .await
        .unwrap();
    assert!(
        find_condition(&c.status.unwrap().conditions, "Unpacked")
            .unwrap()
            .message
            .contains("--max-content-bytes")
    );
    ctx.cleanup().await.unwrap();
}

/// A catalog of half a million tiny broken blobs (1 MB) fails with a message of a few lines
/// that counts the rest; catalogd keeps serving.
#[tokio::test]
async fn a_catalog_of_many_tiny_broken_blobs_fails_with_a_bounded_message() {
    let ctx = TestContext::new("cd-tiny").await.unwrap();
    let cd = catalogd().unwrap();
    let (_server, url) = http_file("/catalog.json", "{}".repeat(500_000))
        .await
        .unwrap();
    let name = ctx.name("tiny");
    let api = create_catalog(&ctx, &name, json!({"type": "http", "http": {"url": url}}))
        .await
        .unwrap();
    let c = wait_reason(&api, &name, "InvalidContent").await.unwrap();
    let message = unpacked_message(&c);
    assert!(message.ends_with("and 499995 more problems"), "{message}");
    assert!(
        message.contains("catalog.json:1: the blob has no \"schema\""),
        "{message}"
    );
    assert!(message.len() < 1000, "{} bytes", message.len());
    assert!(cd.manager.is_running());
    ctx.cleanup().await.unwrap();
}

/// The credential opt-in: a Secret without the label is not used, nothing is sent (the server
/// sees no request at all), and the condition names the label. Labelling it opts in.
#[tokio::test]
async fn a_secret_is_a_credential_only_once_it_opts_in() {
    let ctx = TestContext::new("cd-optin").await.unwrap();
    let cd = catalogd().unwrap();
    let dir = cd.manager.dir.join(format!("tls-{}", ctx.namespace));
    let (server, url, ca) = https_file("/catalog.yaml", example_catalog("0.1.0"), &dir)
        .await
        .unwrap();
    let (ca_cm, secret) = (ctx.name("ca"), ctx.name("token"));
    put_configmap(&ctx, &ca_cm, json!({"ca.crt": ca}))
        .await
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), OLM_NAMESPACE);
    let s: Secret = serde_json::from_value(ctx.labelled(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": secret, "namespace": OLM_NAMESPACE},
        "stringData": {"token": "s3cret-token"}
    })))
    .unwrap();
    secrets.create(&Default::default(), &s).await.unwrap();
    let name = ctx.name("private");
    let api = create_catalog(
        &ctx,
        &name,
        json!({"type": "http", "http": {
            "url": url,
            "authSecret": {"name": secret},
            "caBundle": {"configMap": ca_cm}
        }}),
    )
    .await
    .unwrap();
    let c = wait_reason(&api, &name, "SecretNotOptedIn").await.unwrap();
    let message = unpacked_message(&c);
    assert!(
        message.contains("olm-rs.io/catalog-credential=true") && message.contains(&secret),
        "{message}"
    );
    assert!(!message.contains("s3cret"), "{message}");
    assert_eq!(
        server.authorizations(),
        Vec::<Option<String>>::new(),
        "catalogd sent a request for a Secret that did not opt in"
    );

    // Opting in, but naming another host: still nothing sent, and the condition says where
    // the Secret may go.
    secrets
        .patch(
            &secret,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {
                "labels": {"olm-rs.io/catalog-credential": "true"},
                "annotations": {"olm-rs.io/credential-hosts": "catalogs.example.com"}
            }})),
        )
        .await
        .unwrap();
    let c = wait_reason(&api, &name, "CredentialNotAllowed")
        .await
        .unwrap();
    let message = unpacked_message(&c);
    assert!(
        message.contains("may be sent only to catalogs.example.com"),
        "{message}"
    );
    assert_eq!(
        server.authorizations(),
        Vec::<Option<String>>::new(),
        "catalogd sent a request with a Secret scoped to another host"
    );
    // Scoped to this server, and to this Catalog only: the watch on credential Secrets
    // re-unpacks, with the token.
    secrets
        .patch(
            &secret,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {
                "olm-rs.io/credential-hosts": "127.0.0.1",
                "olm-rs.io/credential-catalogs": name,
            }}})),
        )
        .await
        .unwrap();
    wait_unpacked(&api, &name, None).await.unwrap();
    assert_eq!(
        server.authorizations().last().cloned().flatten().as_deref(),
        Some("Bearer s3cret-token")
    );
    let _ = std::fs::remove_dir_all(&dir);
    ctx.cleanup().await.unwrap();
}

/// ConfigMap sources: the content size limit applies to them too, and an `.indexignore` key
/// excludes other keys, as in a catalog directory.
#[tokio::test]
async fn configmap_content_is_limited_and_honours_indexignore() {
    let ctx = TestContext::new("cd-cm-limits").await.unwrap();
    catalogd().unwrap();
    let (name, cm) = (ctx.name("ignore"), ctx.name("ignore-cm"));
    put_configmap(
        &ctx,
        &cm,
        json!({
            "catalog.yaml": example_catalog("0.1.0"),
            "README.md": "# not a catalog: [",
            ".indexignore": "README.md\n",
        }),
    )
    .await
    .unwrap();
    let api = create_catalog(&ctx, &name, configmap_source(&cm))
        .await
        .unwrap();
    wait_unpacked(&api, &name, None).await.unwrap();

    // Two ConfigMaps of 600 KB each: over the 1 MiB the tests allow.
    let (big, a, b) = (ctx.name("big"), ctx.name("big-a"), ctx.name("big-b"));
    let filler = format!("# {}\n", "x".repeat(600_000));
    put_catalog_configmap(&ctx, &a, &filler).await.unwrap();
    put_catalog_configmap(&ctx, &b, &filler).await.unwrap();
    let big_api = create_catalog(
        &ctx,
        &big,
        json!({"type": "configMaps", "configMaps": [
            {"configMap": {"name": a}}, {"configMap": {"name": b}, "path": "more"}
        ]}),
    )
    .await
    .unwrap();
    let c = wait_reason(&big_api, &big, "ContentTooLarge")
        .await
        .unwrap();
    let message = unpacked_message(&c);
    assert!(message.contains("--max-content-bytes"), "{message}");
    ctx.cleanup().await.unwrap();
}

/// Events are about the Catalog whatever its name's length (an Event's own name is derived
/// from it and must stay within 253 characters).
#[tokio::test]
async fn a_catalog_with_a_253_character_name_gets_its_events() {
    let ctx = TestContext::new("cd-long").await.unwrap();
    catalogd().unwrap();
    let mut name = ctx.name("long");
    while name.len() < 253 {
        let room = 253 - name.len();
        if room < 2 {
            name.push_str(&"z".repeat(room));
        } else {
            name.push('.');
            name.push_str(&"a".repeat((room - 1).min(60)));
        }
    }
    assert_eq!(name.len(), 253);
    let api = create_catalog(&ctx, &name, configmap_source(&ctx.name("missing")))
        .await
        .unwrap();
    wait_reason(&api, &name, "SourceNotFound").await.unwrap();
    let events: Api<Event> = Api::namespaced(ctx.client.clone(), "default");
    let event = wait_for_event(&events, &name, "SourceNotFound").await;
    assert!(event.metadata.name.unwrap().len() <= 253);
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
    let (api, first) = unpacked_configmap_catalog(&ctx, &name, &cm, &example_catalog("0.1.0"))
        .await
        .unwrap();
    let first = first.status.unwrap().content_hash.unwrap();
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
    put_catalog_configmap(&ctx, &cm, &example_catalog("0.2.0"))
        .await
        .unwrap();
    let c = wait_unpacked(&api, &name, Some(&first)).await.unwrap();
    let s = c.status.unwrap();
    let resolved = find_condition(&s.conditions, "ResolvedImage")
        .expect("the switcher's condition was removed");
    assert_eq!(resolved.message, "quay.io/example/catalog:v1.36");
    assert!(find_condition(&s.conditions, "Unpacked").is_some());
    assert_eq!(
        s.image_template.and_then(|t| t.template).as_deref(),
        Some("quay.io/example/catalog:v{kube_minor_version}")
    );
    ctx.cleanup().await.unwrap();
}
