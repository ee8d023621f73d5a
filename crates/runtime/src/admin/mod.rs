//! The admin HTTP server: `/metrics`, `/healthz` and `/readyz` on a port of their own, apart
//! from any content a manager serves, so probes and scrapes never queue behind catalog
//! downloads.
//!
//! * `GET /healthz` answers 200 `ok` while the process can serve at all (liveness).
//! * `GET /readyz` answers 200 `ok` once every registered [`Readiness`] check is ready, and
//!   503 naming the checks that are not. A manager starts unready and its watches mark
//!   themselves ready once synced, as kubert does.
//! * `GET /metrics` is the [`Metrics`] registry in text format 0.0.4.
//!
//! The server stops accepting connections when the shutdown token is cancelled and returns
//! once in-flight requests finish.
//!
//! With `--metrics-secure` ([`AdminArgs`]) it serves HTTPS ([`crate::tls`]) and `/metrics`
//! answers only bearer tokens allowed to `get` it ([`auth`]); the probes stay open, as the
//! kubelet sends no token.

pub mod auth;

pub use crate::readiness::{Readiness, ReadinessHandle};
pub use auth::MetricsAuth;

use crate::error::Error;
use crate::error_chain::error_chain;
use crate::metrics::Metrics;
use crate::metrics::register;
use axum::{
    Router,
    extract::{Request, State},
    http::{StatusCode, header},
    middleware::{Next, from_fn_with_state},
    response::{IntoResponse, Response},
    routing::get,
};
use std::path::PathBuf;
use std::{net::SocketAddr, sync::Arc};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// The content type Prometheus's Go client sends for text format 0.0.4.
pub const METRICS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

#[derive(Clone)]
struct AdminState {
    metrics: Arc<Metrics>,
    readiness: Readiness,
}

/// The admin routes, for callers that serve them themselves. Other paths are 404, other
/// methods 405.
pub fn router(metrics: Arc<Metrics>, readiness: Readiness) -> Router {
    router_with(metrics, readiness, None)
}

/// The admin routes, `/metrics` checked by `auth` when given.
pub fn router_with(
    metrics: Arc<Metrics>,
    readiness: Readiness,
    auth: Option<MetricsAuth>,
) -> Router {
    let mut metrics_route = get(metrics_handler);
    if let Some(auth) = auth {
        metrics_route = metrics_route.layer(from_fn_with_state(auth, require_token));
    }
    Router::new()
        .route("/metrics", metrics_route)
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(AdminState { metrics, readiness })
}

async fn require_token(State(auth): State<MetricsAuth>, request: Request, next: Next) -> Response {
    match auth.refusal(request.headers()).await {
        None => next.run(request).await,
        Some(refused) => refused,
    }
}

async fn metrics_handler(State(state): State<AdminState>) -> Response {
    match state.metrics.encode() {
        Ok(body) => ([(header::CONTENT_TYPE, METRICS_CONTENT_TYPE)], body).into_response(),
        Err(error) => {
            tracing::warn!(error = %error_chain(&error), "could not encode metrics");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "could not encode metrics\n",
            )
                .into_response()
        }
    }
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(state): State<AdminState>) -> Response {
    let not_ready = state.readiness.not_ready();
    if not_ready.is_empty() {
        (StatusCode::OK, "ok").into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {}", not_ready.join(", ")),
        )
            .into_response()
    }
}

/// Binds `addr` so the caller learns the real address (useful with port 0) before serving.
///
/// # Errors
///
/// [`Error::Bind`] if the address is taken or not allowed.
pub async fn bind_admin(addr: SocketAddr) -> Result<(TcpListener, SocketAddr), Error> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| Error::Bind { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| Error::Bind { addr, source })?;
    Ok((listener, bound))
}

/// Binds `addr` and serves the admin routes until `shutdown` is cancelled.
///
/// # Errors
///
/// [`Error::Bind`] if the address cannot be bound, [`Error::Serve`] if serving fails.
pub async fn serve_admin(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    readiness: Readiness,
    shutdown: CancellationToken,
) -> Result<(), Error> {
    let (listener, _bound) = bind_admin(addr).await?;
    serve_admin_on(listener, metrics, readiness, shutdown).await
}

/// Serves the admin routes on an already bound listener until `shutdown` is cancelled, then
/// waits for in-flight requests.
///
/// # Errors
///
/// [`Error::Serve`] if serving fails.
pub async fn serve_admin_on(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    readiness: Readiness,
    shutdown: CancellationToken,
) -> Result<(), Error> {
    let addr = listener.local_addr().ok();
    tracing::info!(?addr, "admin server listening");
    axum::serve(listener, router(metrics, readiness))
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await
        .map_err(Error::Serve)?;
    tracing::info!(?addr, "admin server stopped");
    Ok(())
}

/// Serves `router` on `listener`, over HTTPS with `tls`, until `shutdown` is cancelled, then
/// waits for in-flight requests.
///
/// # Errors
///
/// [`Error::Serve`] if serving fails.
pub async fn serve_router(
    listener: TcpListener,
    router: Router,
    tls: Option<Arc<rustls::ServerConfig>>,
    shutdown: CancellationToken,
) -> Result<(), Error> {
    match tls {
        None => axum::serve(listener, router)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await
            .map_err(Error::Serve),
        Some(config) => {
            let listener =
                tls_listener::TlsListener::new(tokio_rustls::TlsAcceptor::from(config), listener);
            axum::serve(listener, router)
                .with_graceful_shutdown(shutdown.cancelled_owned())
                .await
                .map_err(Error::Serve)
        }
    }
}

/// The admin server's flags (`#[command(flatten)]`).
#[derive(clap::Args, Debug, Clone)]
pub struct AdminArgs {
    /// Address of the metrics and health endpoints.
    #[arg(long, default_value = "0.0.0.0:8080")]
    pub admin_address: SocketAddr,
    /// Serve the metrics and health endpoints over HTTPS, and /metrics only to bearer tokens
    /// the API server authenticates (TokenReview) for a user allowed to get the non-resource
    /// URL /metrics (SubjectAccessReview). Without --metrics-tls-cert-file, a self-signed
    /// certificate is made at start.
    #[arg(long, default_value_t = false)]
    pub metrics_secure: bool,
    /// PEM certificate (chain) of the HTTPS admin server; reloaded when it changes.
    #[arg(long, requires = "metrics_tls_key_file")]
    pub metrics_tls_cert_file: Option<PathBuf>,
    /// PEM private key of --metrics-tls-cert-file.
    #[arg(long, requires = "metrics_tls_cert_file")]
    pub metrics_tls_key_file: Option<PathBuf>,
}

/// The admin server of a manager, ready to be started once its readiness checks are
/// registered (so `/readyz` never says ready too early).
pub struct AdminServer {
    pub(crate) args: AdminArgs,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) readiness: Readiness,
    pub(crate) shutdown: CancellationToken,
    /// Without the write guard: the token reviews are creates, and followers answer scrapes.
    pub(crate) reviews: kube::Client,
}

impl AdminServer {
    /// Binds the address and serves until shutdown, in a task of its own.
    ///
    /// # Errors
    ///
    /// [`Error::Bind`] when the address cannot be bound, [`Error::Tls`] when the certificate
    /// cannot be loaded.
    pub async fn spawn(self) -> Result<tokio::task::JoinHandle<Result<(), Error>>, Error> {
        let args = self.args;
        let (listener, addr) = bind_admin(args.admin_address).await?;
        let tls_files = args
            .metrics_tls_cert_file
            .as_deref()
            .zip(args.metrics_tls_key_file.as_deref());
        let tls = if args.metrics_secure || tls_files.is_some() {
            if args.metrics_secure && tls_files.is_none() {
                tracing::warn!("--metrics-secure without a certificate: serving a self-signed one");
            }
            Some(crate::tls::server_config(tls_files, &["localhost"]).map_err(Error::Tls)?)
        } else {
            None
        };
        let auth = if args.metrics_secure {
            let reviews = register(
                &self.metrics.registry,
                prometheus::IntCounterVec::new(
                    prometheus::Opts::new(
                        "metrics_auth_token_reviews_total",
                        "Bearer tokens sent to /metrics that had to be reviewed, by result (allowed, unauthenticated, forbidden, error; throttled: refused with 429 without a review, past the review rate).",
                    ),
                    &["result"],
                )?,
            )?;
            Some(MetricsAuth::new(self.reviews, Some(reviews)))
        } else {
            None
        };
        tracing::info!(
            %addr,
            https = tls.is_some(),
            metrics_auth = auth.is_some(),
            "admin server listening"
        );
        let router = router_with(self.metrics, self.readiness, auth);
        Ok(tokio::spawn(serve_router(
            listener,
            router,
            tls,
            self.shutdown,
        )))
    }
}
