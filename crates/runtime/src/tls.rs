//! HTTPS for the managers' servers: a certificate and key from files, reloaded when the files
//! change (cert-manager renews a mounted Secret in place), or a self-signed certificate made
//! at start when none is given, as controller-runtime's secure metrics do.
//!
//! The files are looked at again at most once per [`RECHECK`], from the handshake that needs
//! the certificate: no watcher task to stop, and a renewal is served within seconds. A file
//! that cannot be read or parsed (a half-written renewal) keeps the last good certificate in
//! use and is logged.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// How often the files are looked at again.
pub const RECHECK: Duration = Duration::from_secs(2);

/// Why a certificate could not be loaded or made.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("reading {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file holds no usable PEM certificate or key.
    #[error("{path} holds no PEM {what}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// `certificate` or `private key`.
        what: &'static str,
    },
    /// The key does not suit rustls (or does not match).
    #[error("the key in {path} cannot be used")]
    Key {
        /// The key file.
        path: PathBuf,
        /// Why.
        #[source]
        source: rustls::Error,
    },
    /// rustls refused the server configuration.
    #[error("configuring TLS")]
    Config(#[source] rustls::Error),
    /// A self-signed certificate could not be made.
    #[error("making a self-signed certificate")]
    SelfSigned(#[source] rcgen::Error),
    /// No crypto provider is installed.
    #[error("no rustls crypto provider is installed")]
    NoProvider,
}

/// A server configuration that serves `files` (certificate, key), reloaded when they change,
/// or with `None` a self-signed certificate for `names`.
///
/// # Errors
///
/// When the files cannot be loaded at start (a later failure keeps the last good ones).
pub fn server_config(
    files: Option<(&Path, &Path)>,
    names: &[&str],
) -> Result<Arc<ServerConfig>, TlsError> {
    let mut config = server_config_verifying(files, names, None)?;
    if let Some(config) = Arc::get_mut(&mut config) {
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    }
    Ok(config)
}

/// [`server_config`] that asks clients for a certificate `verifier` checks (a client may
/// also send none), speaking HTTP/1.1 only.
///
/// # Errors
///
/// When the files cannot be loaded at start (a later failure keeps the last good ones).
pub fn server_config_verifying(
    files: Option<(&Path, &Path)>,
    names: &[&str],
    verifier: Option<Arc<dyn rustls::server::danger::ClientCertVerifier>>,
) -> Result<Arc<ServerConfig>, TlsError> {
    let provider = CryptoProvider::get_default()
        .cloned()
        .ok_or(TlsError::NoProvider)?;
    let resolver: Arc<dyn ResolvesServerCert> = match files {
        Some((cert, key)) => Arc::new(Reloading::load(cert, key, provider.clone())?),
        None => Arc::new(Fixed(self_signed(names, &provider)?)),
    };
    let builder = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Config)?;
    let client_auth = verifier.is_some();
    let mut config = match verifier {
        Some(verifier) => builder.with_client_cert_verifier(verifier),
        None => builder.with_no_client_auth(),
    }
    .with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    if client_auth {
        // A resumed session keeps the client certificate it began with: with none, a CA the
        // server stopped trusting stops counting at the next handshake.
        config.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
        config.send_tls13_tickets = 0;
    }
    Ok(Arc::new(config))
}

/// A self-signed certificate for `names`.
fn self_signed(names: &[&str], provider: &CryptoProvider) -> Result<Arc<CertifiedKey>, TlsError> {
    let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    let made = rcgen::generate_simple_self_signed(names).map_err(TlsError::SelfSigned)?;
    let key =
        PrivateKeyDer::try_from(made.signing_key.serialize_der()).map_err(|_| TlsError::Pem {
            path: PathBuf::from("(self-signed)"),
            what: "private key",
        })?;
    certified(
        vec![made.cert.der().clone()],
        key,
        provider,
        Path::new("(self-signed)"),
    )
}

fn certified(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    provider: &CryptoProvider,
    key_path: &Path,
) -> Result<Arc<CertifiedKey>, TlsError> {
    let key_error = |source| TlsError::Key {
        path: key_path.to_owned(),
        source,
    };
    let signing = provider
        .key_provider
        .load_private_key(key)
        .map_err(key_error)?;
    let certified = CertifiedKey::new(chain, signing);
    certified.keys_match().map_err(key_error)?;
    Ok(Arc::new(certified))
}

/// Reads a certificate chain and key from PEM files.
fn read_pair(
    cert: &Path,
    key: &Path,
    provider: &CryptoProvider,
) -> Result<Arc<CertifiedKey>, TlsError> {
    let read = |path: &Path| {
        std::fs::read(path).map_err(|source| TlsError::Read {
            path: path.to_owned(),
            source,
        })
    };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&read(cert)?)
        .filter_map(Result::ok)
        .collect();
    if chain.is_empty() {
        return Err(TlsError::Pem {
            path: cert.to_owned(),
            what: "certificate",
        });
    }
    let private = PrivateKeyDer::from_pem_slice(&read(key)?).map_err(|_| TlsError::Pem {
        path: key.to_owned(),
        what: "private key",
    })?;
    certified(chain, private, provider, key)
}

/// What identifies a version of a file without reading it: its mtime and length.
type Stamp = Option<(SystemTime, u64)>;

/// The [`Stamp`] of `path`.
fn stamp(path: &Path) -> Stamp {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

#[derive(Debug)]
struct Fixed(Arc<CertifiedKey>);

impl ResolvesServerCert for Fixed {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }
}

/// A certificate reloaded from its files when they change.
#[derive(Debug)]
struct Reloading {
    cert: PathBuf,
    key: PathBuf,
    provider: Arc<CryptoProvider>,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    current: Arc<CertifiedKey>,
    stamps: (Stamp, Stamp),
    checked: Instant,
}

impl Reloading {
    fn load(cert: &Path, key: &Path, provider: Arc<CryptoProvider>) -> Result<Self, TlsError> {
        let stamps = (stamp(cert), stamp(key));
        let current = read_pair(cert, key, &provider)?;
        Ok(Self {
            cert: cert.to_owned(),
            key: key.to_owned(),
            provider,
            state: Mutex::new(State {
                current,
                stamps,
                checked: Instant::now(),
            }),
        })
    }

    /// The certificate to serve: reloaded first if the files changed since last looked at.
    fn current(&self) -> Arc<CertifiedKey> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.checked.elapsed() >= RECHECK {
            state.checked = Instant::now();
            let stamps = (stamp(&self.cert), stamp(&self.key));
            if stamps != state.stamps {
                match read_pair(&self.cert, &self.key, &self.provider) {
                    Ok(loaded) => {
                        tracing::info!(cert = %self.cert.display(), "serving the renewed certificate");
                        state.current = loaded;
                        state.stamps = stamps;
                    }
                    Err(error) => tracing::warn!(
                        error = %crate::error_chain::error_chain(&error),
                        "the certificate files changed but cannot be used; serving the last good ones"
                    ),
                }
            }
        }
        state.current.clone()
    }
}

impl ResolvesServerCert for Reloading {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

#[cfg(test)]
mod tests {
    use super::{Reloading, read_pair, server_config};
    use rustls::crypto::CryptoProvider;
    use std::sync::Arc;

    fn provider() -> Arc<CryptoProvider> {
        crate::client::install_crypto_provider();
        CryptoProvider::get_default().cloned().expect("a provider")
    }

    fn pair(name: &str) -> (String, String) {
        let made = rcgen::generate_simple_self_signed(vec![name.to_owned()]).expect("a cert");
        (made.cert.pem(), made.signing_key.serialize_pem())
    }

    #[test]
    fn renewed_files_are_served_and_broken_ones_keep_the_last_good() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
        let (c1, k1) = pair("one.example");
        std::fs::write(&cert, &c1).expect("write");
        std::fs::write(&key, &k1).expect("write");
        let reloading = Reloading::load(&cert, &key, provider()).expect("loads");
        let first = reloading.current().cert[0].clone();

        let (c2, k2) = pair("two.example");
        std::fs::write(&cert, &c2).expect("write");
        std::fs::write(&key, &k2).expect("write");
        // As if RECHECK had passed.
        reloading.state.lock().expect("lock").checked -= super::RECHECK;
        let second = reloading.current().cert[0].clone();
        assert_ne!(first, second, "the renewed certificate is served");

        // Half a renewal: a certificate that does not match the key is not taken.
        std::fs::write(&cert, &c1).expect("write");
        reloading.state.lock().expect("lock").checked -= super::RECHECK;
        assert_eq!(reloading.current().cert[0], second);
    }

    #[test]
    fn bad_files_fail_at_start_with_their_names() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
        std::fs::write(&cert, "not pem").expect("write");
        std::fs::write(&key, "not pem").expect("write");
        let error = read_pair(&cert, &key, &provider()).expect_err("no certificate");
        assert!(
            error
                .to_string()
                .contains("tls.crt holds no PEM certificate")
        );
        let missing = dir.path().join("missing.crt");
        let error = server_config(Some((&missing, &key)), &[]).expect_err("missing file");
        assert!(error.to_string().contains("missing.crt"));
    }

    #[test]
    fn without_files_a_self_signed_certificate_is_served() {
        provider();
        assert!(server_config(None, &["localhost"]).is_ok());
    }
}
