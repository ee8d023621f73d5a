//! The aggregated API's wiring (`--catalog-api-address`): its HTTPS listener, which trusts
//! the front proxy's client certificate, the API server's authentication settings read from
//! the `extension-apiserver-authentication` ConfigMap and read again every
//! [`SETTINGS_INTERVAL`] (the API server may rotate its front-proxy CA), and the routes of
//! [`catalogd_api`] over the content store. Every replica serves it from its own store, so with
//! two replicas the API stays available while one restarts.

use std::sync::Arc;
use std::time::Duration;

use catalogd_api::authn::{CONFIG_MAP, CONFIG_MAP_NAMESPACE, RequestHeader};
use catalogd_api::listener::ProxyVerifier;
use catalogd_api::review::Reviewer;
use catalogd_api::server::router;
use catalogd_api::state::ApiState;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use olm_runtime::ReadinessHandle;
use olm_runtime::manager::Context;
use olm_runtime::metrics::register;
use rustls::crypto::CryptoProvider;
use tokio::task::JoinHandle;

use super::Error;
use crate::args::Args;
use crate::store::Store;

/// How often the API server's authentication settings are read again.
pub const SETTINGS_INTERVAL: Duration = Duration::from_secs(60);
/// How soon a failed first read is tried again (doubling up to [`SETTINGS_INTERVAL`]).
const FIRST_RETRY: Duration = Duration::from_millis(500);

/// Starts the API when `--catalog-api-address` is set; `ready` says whether this replica
/// serves content (until then every request is answered 503, so the API server's
/// availability check fails and the APIService says why).
///
/// # Errors
///
/// When the address cannot be bound, the certificate cannot be loaded, or the metric cannot
/// be registered.
pub async fn start(
    args: &Args,
    ctx: &Context,
    store: Arc<Store>,
    ready: ReadinessHandle,
) -> Result<Option<JoinHandle<std::io::Result<()>>>, Error> {
    let Some(address) = args.catalog_api_address else {
        return Ok(None);
    };
    let provider = CryptoProvider::get_default()
        .cloned()
        .ok_or_else(|| Error::Settings("no TLS crypto provider is installed".into()))?;
    let verifier = Arc::new(ProxyVerifier::new(provider));
    let files = args
        .catalog_api_tls_cert_file
        .as_deref()
        .zip(args.catalog_api_tls_key_file.as_deref());
    let tls =
        olm_runtime::tls::server_config_verifying(files, &["catalogd-api"], Some(verifier.clone()))
            .map_err(Error::Tls)?;
    let requests = register(
        &ctx.metrics.registry,
        prometheus::IntCounterVec::new(
            prometheus::Opts::new(
                "catalogd_api_requests_total",
                "Requests to the aggregated API (catalogs.olm-rs.io), by resource, verb and HTTP code.",
            ),
            &["resource", "verb", "code"],
        )?,
    )?;
    let state = ApiState::new(
        store,
        Reviewer::new(ctx.reviews.clone()),
        Arc::new(move || ready.is_ready()),
        Some(requests),
    );
    let settings = state.request_header();
    let client = ctx.reviews.clone();
    let shutdown = ctx.shutdown.clone();
    // Not Ready until the API server's settings are read once: before, no request the
    // aggregator proxies could be authenticated (its handshake fails), and a Pod that took
    // over from a good one in a rollout would make the APIService unavailable.
    let settings_read = ctx.readiness.register("catalog-api-authentication");
    tokio::spawn(async move {
        let mut pause = FIRST_RETRY;
        loop {
            let read = read_settings(&client).await;
            if read.is_ok() {
                settings_read.set_ready(true);
                pause = SETTINGS_INTERVAL;
            } else {
                pause = (pause * 2).min(SETTINGS_INTERVAL);
            }
            match read {
                Ok(Some(config)) => match verifier.set_ca(&config.ca) {
                    Ok(()) => {
                        *settings
                            .write()
                            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(config);
                    }
                    Err(error) => {
                        withdraw(&verifier, &settings);
                        tracing::warn!(%error, "the API server's front-proxy CA is not usable: no client certificate is trusted until it is");
                    }
                },
                Ok(None) => {
                    withdraw(&verifier, &settings);
                    tracing::warn!(
                        "{CONFIG_MAP_NAMESPACE}/{CONFIG_MAP} has no requestheader-client-ca-file: the API server has no front proxy, so only bearer tokens reach the catalog API"
                    );
                }
                // The last settings read stay: the API server is down or the read refused.
                Err(error) => {
                    tracing::warn!(%error, "cannot read {CONFIG_MAP_NAMESPACE}/{CONFIG_MAP}")
                }
            }
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(pause) => {}
            }
        }
    });
    let listener = Error::bind("the catalog API", address).await?;
    Ok(Some(tokio::spawn(catalogd_api::listener::serve(
        listener,
        router(state),
        tls,
        ctx.shutdown.clone(),
    ))))
}

/// Trusts no front proxy any longer: its CA and headers are gone from the API server's settings.
fn withdraw(verifier: &ProxyVerifier, settings: &std::sync::RwLock<Option<RequestHeader>>) {
    verifier.clear();
    *settings
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
}

async fn read_settings(client: &kube::Client) -> Result<Option<RequestHeader>, String> {
    let map = Api::<ConfigMap>::namespaced(client.clone(), CONFIG_MAP_NAMESPACE)
        .get(CONFIG_MAP)
        .await
        .map_err(|e| e.to_string())?;
    RequestHeader::from_config_map(&map.data.unwrap_or_default())
}
