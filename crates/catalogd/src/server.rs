//! The content server: the store crate's router ([`catalogd_store::server`], re-exported), and
//! [`serve`], which serves a router on a listener, over HTTPS with the runtime's TLS when asked
//! (the upload endpoint of generator Pods is served the same way).

pub use catalogd_store::server::*;

use std::io;
use std::sync::Arc;

use axum::Router;
use axum::serve::ListenerExt;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Serves `router` on `listener` (over HTTPS with `tls`) until `shutdown` is cancelled, then
/// lets in-flight requests finish.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    tls: Option<Arc<rustls::ServerConfig>>,
    shutdown: CancellationToken,
) -> io::Result<()> {
    if tls.is_some() {
        return olm_runtime::admin::serve_router(listener, router, tls, shutdown)
            .await
            .map_err(io::Error::other);
    }
    // Small responses (304s, metas hits) should not wait on Nagle's algorithm.
    let listener = listener.tap_io(|tcp| {
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::debug!(%error, "cannot set TCP_NODELAY");
        }
    });
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await
}
