//! Secure metrics, scraped by a real Prometheus (Debian's), in a test binary of its own: the
//! three managers serve their admin endpoints over HTTPS and `/metrics` only to a token the
//! API server allows to `get` it; Prometheus scrapes them with a ServiceAccount's token bound
//! to the chart's `olm-metrics-reader` ClusterRole, and its query API returns the
//! controller-runtime families and the domain metrics of each manager.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::time::Duration;

use futures::StreamExt as _;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use olm_e2e::catalogs::{example_catalog, unpacked_configmap_catalog};
use olm_e2e::context::TestContext;
use olm_e2e::manager::{
    StopOnDrop, start_catalog_switcher_with, start_catalogd_with, start_operator_controller_with,
};
use olm_e2e::operators::{create_operator, one_bundle_catalog, wait_resolved};
use olm_e2e::prometheus::{self, Job, value};
use serde_json::json;

/// A token of the ServiceAccount `name` of the test's namespace.
async fn token(ctx: &TestContext, name: &str) -> String {
    let accounts: Api<ServiceAccount> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    accounts
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": name}})).unwrap(),
        )
        .await
        .unwrap();
    let request = TokenRequest {
        spec: TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..Default::default()
        },
        ..Default::default()
    };
    accounts
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .unwrap()
        .status
        .unwrap()
        .token
}

/// GET `url` with `token` (if any), trusting the harness's CA: the status.
async fn scrape(url: &str, token: Option<&str>) -> u16 {
    let ca = reqwest::Certificate::from_pem(olm_e2e::tls::ca().unwrap().pem.as_bytes()).unwrap();
    let client = reqwest::Client::builder()
        .add_root_certificate(ca)
        .build()
        .unwrap();
    let mut request = client.get(url);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    request.send().await.unwrap().status().as_u16()
}

#[tokio::test]
async fn prometheus_scrapes_every_manager_through_secure_metrics() {
    olm_e2e::install_crypto_provider();
    let ctx = TestContext::new("prometheus").await.unwrap();
    let issued = olm_e2e::tls::ca()
        .unwrap()
        .issue(&std::env::temp_dir().join(format!("olm-e2e-metrics-{}", std::process::id())))
        .unwrap();
    let secure = vec![
        "--metrics-secure".to_owned(),
        format!("--metrics-tls-cert-file={}", issued.cert.display()),
        format!("--metrics-tls-key-file={}", issued.key.display()),
    ];
    let catalogd = start_catalogd_with("secure-catalogd", &secure).unwrap();
    let _catalogd = StopOnDrop(catalogd.manager.clone());
    let operators = start_operator_controller_with("secure-operator-controller", &secure).unwrap();
    let _operators = StopOnDrop(operators.manager.clone());
    let switcher = start_catalog_switcher_with("secure-catalog-switcher", &secure).unwrap();
    let _switcher = StopOnDrop(switcher.manager.clone());
    let admins = [
        ("catalogd", catalogd.admin_url.clone()),
        ("operator-controller", operators.admin_url.clone()),
        ("catalog-switcher", switcher.admin_url.clone()),
    ];

    // Prometheus's ServiceAccount, bound to the chart's reader role; another one, unbound.
    let reader = token(&ctx, "prometheus").await;
    let stranger = token(&ctx, "stranger").await;
    ctx.apply(&json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": ctx.name("metrics-reader")},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "olm-metrics-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": ctx.namespace}]
    }))
    .await
    .unwrap();

    for (manager, admin) in &admins {
        let https = admin;
        let metrics = format!("{https}/metrics");
        assert_eq!(scrape(&metrics, None).await, 401, "{manager}: no token");
        assert_eq!(
            scrape(&metrics, Some("not-a-token")).await,
            401,
            "{manager}: bad token"
        );
        assert_eq!(
            scrape(&metrics, Some(&stranger)).await,
            403,
            "{manager}: not allowed"
        );
        assert_eq!(
            scrape(&metrics, Some(&reader)).await,
            200,
            "{manager}: the reader"
        );
        // The kubelet's probes carry no token.
        assert_eq!(
            scrape(&format!("{https}/readyz"), None).await,
            200,
            "{manager}"
        );
    }

    // A flood of random tokens costs the API server a bounded number of reviews: at most
    // the burst and the rate of reviews of unknown tokens (20, then 5 a second), counted in the
    // API server's own audit log; the rest are answered 429 without a review, and the reader,
    // already decided, is never refused.
    let catalogd_metrics = format!("{}/metrics", catalogd.admin_url);
    let flood_started = std::time::SystemTime::now();
    let started = std::time::Instant::now();
    let ca = reqwest::Certificate::from_pem(olm_e2e::tls::ca().unwrap().pem.as_bytes()).unwrap();
    let http = reqwest::Client::builder()
        .add_root_certificate(ca)
        .build()
        .unwrap();
    let statuses: Vec<u16> = futures::stream::iter(0..5_000u32)
        .map(|i| {
            let (http, url) = (http.clone(), catalogd_metrics.clone());
            async move {
                let token = format!("random-{i}-{}", std::process::id());
                match http.get(&url).bearer_auth(token).send().await {
                    Ok(r) => r.status().as_u16(),
                    Err(_) => 0,
                }
            }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    let elapsed = started.elapsed().as_secs_f64();
    assert_eq!(
        scrape(&catalogd_metrics, Some(&reader)).await,
        200,
        "the reader during a flood"
    );
    let reviews = olm_e2e::audit::writes_by("catalogd/", flood_started)
        .unwrap()
        .into_iter()
        .filter(|w| w.uri.contains("/tokenreviews"))
        .count();
    let bound = 20 + (5.0 * elapsed).ceil() as usize + 1;
    let throttled = statuses.iter().filter(|s| **s == 429).count();
    eprintln!(
        "5000 random tokens in {elapsed:.1} s: {reviews} TokenReviews (bound {bound}), {throttled} answered 429"
    );
    assert!(
        reviews <= bound,
        "{reviews} TokenReviews for 5000 random tokens, more than {bound}"
    );
    assert!(
        statuses.iter().all(|s| *s == 401 || *s == 429),
        "every random token is refused: {:?}",
        statuses
            .iter()
            .filter(|s| **s != 401 && **s != 429)
            .take(5)
            .collect::<Vec<_>>()
    );

    // Work for each manager, so its domain metrics count something.
    let pkg = "scraped-pkg";
    let text = one_bundle_catalog(pkg) + &example_catalog("0.1.0");
    unpacked_configmap_catalog(&ctx, &ctx.name("c"), &ctx.name("c"), &text)
        .await
        .unwrap();
    let op = ctx.name("op");
    let ops = create_operator(&ctx, &op, json!({"packageName": pkg}))
        .await
        .unwrap();
    wait_resolved(&ops, &op, "True", "Success").await.unwrap();

    let jobs: Vec<Job> = admins
        .iter()
        .map(|(name, admin)| Job {
            name: (*name).to_owned(),
            target: admin.trim_start_matches("https://").to_owned(),
            server_name: None,
        })
        .collect();
    let ca = olm_e2e::tls::ca().unwrap().cert_file();
    let prometheus = prometheus::start("prometheus", &jobs, &ca, &reader).unwrap();
    let _prometheus = StopOnDrop(prometheus.manager.clone());
    let deadline = Duration::from_secs(60);
    prometheus
        .wait("up == 1", deadline, |r| r.len() == 3)
        .await
        .unwrap();
    for (job, domain) in [
        ("catalogd", "catalogd_catalogs"),
        (
            "operator-controller",
            "operator_controller_resolution_duration_seconds_count",
        ),
        ("catalog-switcher", "catalog_switcher_server_version_info"),
    ] {
        let reconciles = format!("sum(controller_runtime_reconcile_total{{job=\"{job}\"}})");
        prometheus
            .wait(&reconciles, deadline, |r| {
                r.first().and_then(value).is_some_and(|v| v > 0.0)
            })
            .await
            .unwrap();
        let own = format!("sum({domain}{{job=\"{job}\"}})");
        prometheus
            .wait(&own, deadline, |r| {
                r.first().and_then(value).is_some_and(|v| v > 0.0)
            })
            .await
            .unwrap();
    }
    ctx.cleanup().await.unwrap();
}
