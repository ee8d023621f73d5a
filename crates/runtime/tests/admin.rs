//! The admin server over real HTTP on a loopback port: probes, readiness, metrics, routing
//! and graceful shutdown.

use olm_runtime::{
    Error, Metrics, Readiness, ReadinessHandle, ReconcileOutcome, bind_admin, serve_admin,
    serve_admin_on,
};
use reqwest::StatusCode;
use std::{net::SocketAddr, sync::Arc, time::Duration};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// Bounds every wait, so a hung server fails the test instead of hanging it.
const DEADLINE: Duration = Duration::from_secs(10);

struct Admin {
    base: String,
    http: reqwest::Client,
    watch: ReadinessHandle,
    shutdown: CancellationToken,
    server: JoinHandle<Result<(), Error>>,
}

async fn start() -> Result<Admin, Box<dyn std::error::Error + Send + Sync>> {
    olm_runtime::client::install_crypto_provider();
    let metrics = Arc::new(Metrics::new()?);
    metrics.register_controller("catalog", 2);
    metrics
        .reconcile_timer("catalog")
        .finish(ReconcileOutcome::Success);
    let readiness = Readiness::new();
    let watch = readiness.register("catalog-watch");
    let (listener, addr) = bind_admin(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
    assert_ne!(addr.port(), 0, "bind_admin must report the port it got");
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(serve_admin_on(
        listener,
        metrics,
        readiness,
        shutdown.clone(),
    ));
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(DEADLINE)
        .build()?;
    Ok(Admin {
        base: format!("http://{addr}"),
        http,
        watch,
        shutdown,
        server,
    })
}

impl Admin {
    async fn get(&self, path: &str) -> Result<(StatusCode, String), reqwest::Error> {
        let response = self.http.get(format!("{}{path}", self.base)).send().await?;
        let status = response.status();
        Ok((status, response.text().await?))
    }
}

#[tokio::test]
async fn healthz_answers_ok_even_before_ready() -> TestResult {
    let admin = start().await?;
    assert_eq!(admin.get("/healthz").await?, (StatusCode::OK, "ok".into()));
    Ok(())
}

#[tokio::test]
async fn readyz_is_unavailable_naming_the_check_until_it_is_ready() -> TestResult {
    let admin = start().await?;
    let (status, body) = admin.get("/readyz").await?;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(body.contains("catalog-watch"), "{body}");

    admin.watch.set_ready(true);
    assert_eq!(admin.get("/readyz").await?, (StatusCode::OK, "ok".into()));

    admin.watch.set_ready(false);
    assert_eq!(
        admin.get("/readyz").await?.0,
        StatusCode::SERVICE_UNAVAILABLE
    );
    Ok(())
}

#[tokio::test]
async fn metrics_are_prometheus_text_with_controller_runtime_families() -> TestResult {
    let admin = start().await?;
    let response = admin
        .http
        .get(format!("{}/metrics", admin.base))
        .send()
        .await?;
    assert_eq!(response.status(), StatusCode::OK);
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    let body = response.text().await?;
    assert!(
        body.contains("controller_runtime_reconcile_total"),
        "{body}"
    );
    assert!(
        body.contains(
            r#"controller_runtime_reconcile_total{controller="catalog",result="success"} 1"#
        ),
        "{body}"
    );
    assert!(
        body.contains(r#"controller_runtime_max_concurrent_reconciles{controller="catalog"} 2"#),
        "{body}"
    );
    Ok(())
}

#[tokio::test]
async fn unknown_paths_are_not_found_and_other_methods_not_allowed() -> TestResult {
    let admin = start().await?;
    assert_eq!(admin.get("/nope").await?.0, StatusCode::NOT_FOUND);
    assert_eq!(admin.get("/").await?.0, StatusCode::NOT_FOUND);
    let post = admin
        .http
        .post(format!("{}/healthz", admin.base))
        .send()
        .await?;
    assert_eq!(post.status(), StatusCode::METHOD_NOT_ALLOWED);
    Ok(())
}

#[tokio::test]
async fn cancelling_the_token_stops_the_server() -> TestResult {
    let admin = start().await?;
    // A pooled keep-alive connection stays open: it must not hold the shutdown up.
    assert_eq!(admin.get("/healthz").await?.0, StatusCode::OK);
    assert!(!admin.server.is_finished());

    admin.shutdown.cancel();
    let served = tokio::time::timeout(DEADLINE, admin.server).await??;
    served?;

    // Nothing listens any more.
    let after = admin
        .http
        .get(format!("{}/healthz", admin.base))
        .send()
        .await;
    assert!(after.is_err(), "{after:?}");
    Ok(())
}

#[tokio::test]
async fn serving_on_a_taken_address_is_a_bind_error() -> TestResult {
    let (_taken, addr) = bind_admin(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
    let result = tokio::time::timeout(
        DEADLINE,
        serve_admin(
            addr,
            Arc::new(Metrics::new()?),
            Readiness::new(),
            CancellationToken::new(),
        ),
    )
    .await?;
    assert!(
        matches!(&result, Err(Error::Bind { addr: a, .. }) if *a == addr),
        "{result:?}"
    );
    Ok(())
}
