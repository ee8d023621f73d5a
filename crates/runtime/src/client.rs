//! The Kubernetes client every manager uses, and the one TLS crypto provider the process runs.
//!
//! kube, reqwest and rustls each can bring a crypto provider; with more than one compiled in,
//! rustls refuses to guess. We build with `ring` only and install it as the process default
//! before anything opens a TLS connection.

use crate::error::Error;
use crate::leader::WriteGuard;

/// Installs rustls's `ring` provider as the process-wide default.
///
/// Idempotent: if a provider is already installed (by an earlier call or another library) this
/// does nothing, since the first installed provider stays in force either way.
pub fn install_crypto_provider() {
    // `Err` only means a provider is already installed, which is what we want.
    let _already_installed = rustls::crypto::ring::default_provider().install_default();
}

/// Installs the crypto provider, then builds a client from KUBECONFIG (or `~/.kube/config`)
/// or, inside a pod, from the service account.
///
/// # Errors
///
/// [`Error::Client`] when no configuration is found or it is unusable.
pub async fn client() -> Result<kube::Client, Error> {
    install_crypto_provider();
    kube::Client::try_default().await.map_err(Error::Client)
}

/// Installs the crypto provider, then reads the configuration as [`client`] does, adding a
/// `User-Agent` header (`<manager>/<version> <identity>`), so the API server's audit log tells
/// replicas apart.
///
/// # Errors
///
/// [`Error::Client`] when no configuration is found or it is unusable.
pub async fn config(manager: &str, identity: &str) -> Result<kube::Config, Error> {
    install_crypto_provider();
    let mut config = kube::Config::infer()
        .await
        .map_err(|e| Error::Client(kube::Error::InferConfig(e)))?;
    let agent = format!("{manager}/{} {identity}", env!("CARGO_PKG_VERSION"));
    // An identity given on the command line may hold characters a header cannot: then the
    // manager's name alone.
    let value = http::HeaderValue::from_str(agent.trim())
        .or_else(|_| http::HeaderValue::from_str(manager))
        .map_err(|e| Error::Client(kube::Error::HttpError(e.into())))?;
    config.headers.push((http::header::USER_AGENT, value));
    Ok(config)
}

/// A client from `config` whose writes pass `guard` (see [`crate::leader::WriteGuard`]).
///
/// # Errors
///
/// [`Error::Client`] when the configuration is unusable (its TLS settings, say).
pub fn guarded(config: kube::Config, guard: &WriteGuard) -> Result<kube::Client, Error> {
    Ok(kube::client::ClientBuilder::try_from(config)
        .map_err(Error::Client)?
        .with_layer(&guard.layer())
        .build())
}

#[cfg(test)]
mod tests {
    use super::install_crypto_provider;

    /// The process default is ring's provider, whatever called first: the same cipher suites
    /// and key exchange groups, in the same order (a provider of another library, or none,
    /// fails this).
    #[test]
    fn installing_the_provider_twice_keeps_ring_as_the_default() {
        install_crypto_provider();
        install_crypto_provider();
        let installed =
            rustls::crypto::CryptoProvider::get_default().expect("a default provider is installed");
        let ring = rustls::crypto::ring::default_provider();
        let suites = |p: &rustls::crypto::CryptoProvider| {
            p.cipher_suites
                .iter()
                .map(|s| s.suite())
                .collect::<Vec<_>>()
        };
        let groups = |p: &rustls::crypto::CryptoProvider| {
            p.kx_groups.iter().map(|g| g.name()).collect::<Vec<_>>()
        };
        assert_eq!(suites(installed), suites(&ring));
        assert_eq!(groups(installed), groups(&ring));
        // And a client can be built on it (it could not without a usable provider).
        assert!(
            !rustls::ClientConfig::builder()
                .with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth()
                .crypto_provider()
                .cipher_suites
                .is_empty()
        );
    }
}
