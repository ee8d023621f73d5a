//! Catalog file servers on loopback for tests of the http source: plain HTTP, or HTTPS with a
//! certificate from the harness's throw-away CA ([`crate::tls`], made with rcgen). Each
//! serves one body at one path with a strong ETag, honours If-None-Match, and records what it
//! was sent (so a test can prove a credential was, or was not, sent).

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use tokio::net::{TcpListener, TcpStream};

use crate::{Error, Result};

/// What a file server serves and has seen.
#[derive(Clone, Default)]
pub struct FileServer {
    body: Arc<Mutex<Vec<u8>>>,
    not_modified: Arc<AtomicUsize>,
    full: Arc<AtomicUsize>,
    authorizations: Arc<Mutex<Vec<Option<String>>>>,
}

impl FileServer {
    /// Replaces the body.
    pub fn set_body(&self, body: impl Into<Vec<u8>>) {
        *self.body.lock().unwrap_or_else(PoisonError::into_inner) = body.into();
    }

    /// Requests answered 304.
    pub fn not_modified(&self) -> usize {
        self.not_modified.load(Ordering::SeqCst)
    }

    /// Requests answered with the body.
    pub fn full(&self) -> usize {
        self.full.load(Ordering::SeqCst)
    }

    /// The Authorization header of every request, in order (`None` when absent).
    pub fn authorizations(&self) -> Vec<Option<String>> {
        self.authorizations
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

async fn serve_file(State(s): State<FileServer>, headers: HeaderMap) -> Response {
    s.authorizations
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(
            headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
        );
    let body = s
        .body
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let etag = format!("\"{}\"", hex::encode(Sha256::digest(&body)));
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

fn router(state: FileServer, path: &str) -> axum::Router {
    axum::Router::new()
        .route(path, axum::routing::get(serve_file))
        .with_state(state)
}

/// Serves `body` at `path` (e.g. `/catalog.yaml`) over plain HTTP on loopback; returns the
/// server and the URL.
pub async fn http_file(path: &str, body: impl Into<Vec<u8>>) -> Result<(FileServer, String)> {
    let state = FileServer::default();
    state.set_body(body);
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| Error::Fixture(format!("binding a file server: {e}")))?;
    let addr = listener
        .local_addr()
        .map_err(|e| Error::Fixture(e.to_string()))?;
    let app = router(state.clone(), path);
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok((state, format!("http://{addr}{path}")))
}

/// Answers every request on loopback with a redirect to `location` (a source must check where
/// a redirect goes); returns the URL to ask.
pub async fn http_redirect(location: &str) -> Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| Error::Fixture(format!("binding a redirect server: {e}")))?;
    let addr = listener
        .local_addr()
        .map_err(|e| Error::Fixture(e.to_string()))?;
    let location = location.to_owned();
    let app = axum::Router::new().fallback(move || {
        let location = location.clone();
        async move { (StatusCode::FOUND, [(header::LOCATION, location)]).into_response() }
    });
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(format!("http://{addr}/catalog.yaml"))
}

/// A TLS listener for `axum::serve`: the handshake happens in `accept`; failed handshakes are
/// skipped.
pub(crate) struct TlsListener {
    tcp: TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<TcpStream>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((stream, addr)) = self.tcp.accept().await else {
                continue;
            };
            if let Ok(tls) = self.acceptor.accept(stream).await {
                return (tls, addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

/// A TLS listener on 127.0.0.1 with a certificate from the harness CA (written to `dir`).
pub(crate) async fn tls_listener(dir: &Path) -> Result<(TlsListener, std::net::SocketAddr)> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};

    std::fs::create_dir_all(dir).map_err(|source| Error::Io {
        path: dir.display().to_string(),
        source,
    })?;
    let issued = crate::tls::ca()?.issue(dir)?;
    let read = |path: &Path| {
        std::fs::read(path).map_err(|source| Error::Io {
            path: path.display().to_string(),
            source,
        })
    };
    let pem_error = |e: rustls::pki_types::pem::Error| Error::Fixture(format!("reading PEM: {e}"));
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&read(&issued.cert)?)
        .collect::<std::result::Result<_, _>>()
        .map_err(pem_error)?;
    let key = PrivateKeyDer::from_pem_slice(&read(&issued.key)?).map_err(pem_error)?;

    crate::install_crypto_provider();
    let config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| Error::Fixture(format!("TLS configuration: {e}")))?;
    let tcp = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| Error::Fixture(format!("binding a TLS server: {e}")))?;
    let addr = tcp
        .local_addr()
        .map_err(|e| Error::Fixture(e.to_string()))?;
    let listener = TlsListener {
        tcp,
        acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
    };
    Ok((listener, addr))
}

/// Serves `body` at `path` over HTTPS on 127.0.0.1, with a certificate from the harness CA
/// (written to `dir`); returns the server, the URL and the CA's PEM (for a Catalog's caBundle).
pub async fn https_file(
    path: &str,
    body: impl Into<Vec<u8>>,
    dir: &Path,
) -> Result<(FileServer, String, String)> {
    let (listener, addr) = tls_listener(dir).await?;
    let state = FileServer::default();
    state.set_body(body);
    let app = router(state.clone(), path);
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok((
        state,
        format!("https://127.0.0.1:{}{path}", addr.port()),
        crate::tls::ca()?.pem.clone(),
    ))
}
