//! The API's HTTPS listener: it asks every client for a certificate and accepts one only when
//! the request-header CA signed it (a client may send none: then it must bring a bearer token),
//! and tells each request who connected ([`Peer`]). The CA comes from the API server's
//! ConfigMap and may change while serving, so the verifier is swapped in place.

use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use axum::extract::connect_info::Connected;
use axum::serve::IncomingStream;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// The listener's type.
pub type ApiListener = tls_listener::TlsListener<TcpListener, tokio_rustls::TlsAcceptor>;

/// Verifies client certificates against the request-header CA of the moment.
#[derive(Debug)]
pub struct ProxyVerifier {
    current: RwLock<Option<Arc<dyn ClientCertVerifier>>>,
    provider: Arc<CryptoProvider>,
}

impl ProxyVerifier {
    /// A verifier that accepts no certificate until [`ProxyVerifier::set_ca`].
    pub fn new(provider: Arc<CryptoProvider>) -> Self {
        Self {
            current: RwLock::new(None),
            provider,
        }
    }

    /// Trusts the certificates of `pem` from now on.
    ///
    /// # Errors
    ///
    /// When `pem` holds no usable CA certificate.
    pub fn set_ca(&self, pem: &str) -> Result<(), String> {
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
            let cert = cert.map_err(|e| format!("request-header CA: {e}"))?;
            roots
                .add(cert)
                .map_err(|e| format!("request-header CA: {e}"))?;
        }
        if roots.is_empty() {
            return Err("request-header CA: no certificate".into());
        }
        let verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::new(roots), self.provider.clone())
                .allow_unauthenticated()
                .build()
                .map_err(|e| format!("request-header CA: {e}"))?;
        *self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(verifier);
        Ok(())
    }

    /// Trusts no client certificate from now on (the API server no longer names a front
    /// proxy).
    pub fn clear(&self) {
        *self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }

    fn verifier(&self) -> Option<Arc<dyn ClientCertVerifier>> {
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

impl ClientCertVerifier for ProxyVerifier {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        // No hints: Go's client then sends the one certificate it has.
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        match self.verifier() {
            Some(v) => v.verify_client_cert(end_entity, intermediates, now),
            None => Err(rustls::Error::General(
                "no request-header client CA is known yet".into(),
            )),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// Who connected: the address, and the common name of the client certificate the
/// request-header CA signed, when one was sent (the handshake fails for any other).
#[derive(Debug, Clone)]
pub struct Peer {
    /// The remote address.
    pub address: SocketAddr,
    /// Whether a verified client certificate was sent.
    pub verified: bool,
    /// Its common name.
    pub common_name: Option<String>,
}

impl Connected<IncomingStream<'_, ApiListener>> for Peer {
    fn connect_info(stream: IncomingStream<'_, ApiListener>) -> Self {
        let (_, connection) = stream.io().get_ref();
        let leaf = connection.peer_certificates().and_then(|c| c.first());
        Peer {
            address: *stream.remote_addr(),
            verified: leaf.is_some(),
            common_name: leaf.and_then(|der| common_name(der)),
        }
    }
}

/// The first common name of a certificate's subject.
pub fn common_name(der: &[u8]) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    cert.subject()
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .map(str::to_owned)
}

/// How long the API keeps accepting after shutdown begins: the Pod's endpoint is being removed
/// meanwhile, and kube-proxy may still send new connections here until it has.
pub const LAME_DUCK: std::time::Duration = std::time::Duration::from_secs(3);

/// Serves `router` on `listener` over TLS with `config` until [`LAME_DUCK`] after `shutdown`
/// is cancelled.
///
/// # Errors
///
/// When serving fails.
pub async fn serve(
    listener: TcpListener,
    router: axum::Router,
    config: Arc<rustls::ServerConfig>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let listener: ApiListener =
        tls_listener::TlsListener::new(tokio_rustls::TlsAcceptor::from(config), listener);
    axum::serve(
        listener,
        router.into_make_service_with_connect_info::<Peer>(),
    )
    .with_graceful_shutdown(async move {
        shutdown.cancelled().await;
        tokio::time::sleep(LAME_DUCK).await;
    })
    .await
}
