//! The tests' one PKI, made with rcgen: a CA and the certificates it signs. The harness's CA
//! ([`crate::tls`]) and the local control plane's (olm-cluster's `pki`) are both made here, so
//! no test needs the openssl CLI. Every key is ECDSA P-256 in PKCS#8, which Go's TLS stack, the
//! API server's token signer (ES256) and rustls all take; an ECDSA key signs and enciphers
//! nothing, so leaves carry `digitalSignature` alone.

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, KeyUsagePurpose};

pub use rcgen::{DnType, ExtendedKeyUsagePurpose};

use crate::{Error, Result};

/// A certificate and its private key, in PEM.
#[derive(Debug, Clone)]
pub struct Pair {
    /// The certificate (for a bare key pair: its public key).
    pub cert: String,
    /// The private key (PKCS#8).
    pub key: String,
}

/// A certificate authority: its certificate, and the key that signs what it issues.
pub struct Authority {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
}

impl std::fmt::Debug for Authority {
    // The signing key is never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authority").field("pem", &self.pem).finish()
    }
}

fn rcgen_error(what: &str) -> impl FnOnce(rcgen::Error) -> Error + '_ {
    move |e| Error::Fixture(format!("making the {what}: {e}"))
}

impl Authority {
    /// A new self-signed CA named `common_name`.
    pub fn new(common_name: &str) -> Result<Authority> {
        let key = KeyPair::generate().map_err(rcgen_error("CA key"))?;
        let mut params = CertificateParams::new(Vec::new()).map_err(rcgen_error("CA"))?;
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).map_err(rcgen_error("CA"))?;
        Ok(Authority {
            issuer: Issuer::new(params, key),
            pem: cert.pem(),
        })
    }

    /// The CA's certificate, PEM.
    pub fn pem(&self) -> &str {
        &self.pem
    }

    /// A serving certificate for `names` (DNS names or IP addresses, as written), its common
    /// name the first of them.
    pub fn server(&self, names: &[&str]) -> Result<Pair> {
        let common_name = names.first().copied().unwrap_or("olm-rs-test-server");
        self.sign(
            names,
            &[(DnType::CommonName, common_name)],
            ExtendedKeyUsagePurpose::ServerAuth,
        )
    }

    /// A client certificate for Kubernetes user `user`, in group `group` when given.
    pub fn client(&self, user: &str, group: Option<&str>) -> Result<Pair> {
        let mut subject = Vec::new();
        if let Some(group) = group {
            subject.push((DnType::OrganizationName, group));
        }
        subject.push((DnType::CommonName, user));
        self.sign(&[], &subject, ExtendedKeyUsagePurpose::ClientAuth)
    }

    /// A certificate for `names` with `subject`, for `usage`, signed by this CA.
    pub fn sign(
        &self,
        names: &[&str],
        subject: &[(DnType, &str)],
        usage: ExtendedKeyUsagePurpose,
    ) -> Result<Pair> {
        let key = KeyPair::generate().map_err(rcgen_error("key"))?;
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let mut params = CertificateParams::new(names).map_err(rcgen_error("certificate"))?;
        params.distinguished_name = rcgen::DistinguishedName::new();
        for (kind, value) in subject {
            params.distinguished_name.push(kind.clone(), *value);
        }
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![usage];
        params.use_authority_key_identifier_extension = true;
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(rcgen_error("certificate"))?;
        Ok(Pair {
            cert: cert.pem(),
            key: key.serialize_pem(),
        })
    }
}

/// A bare key pair (`cert` holds its public key), e.g. to sign service-account tokens.
pub fn key_pair() -> Result<Pair> {
    let key = KeyPair::generate().map_err(rcgen_error("key pair"))?;
    Ok(Pair {
        cert: key.public_key_pem(),
        key: key.serialize_pem(),
    })
}

/// Whether `cert` (PEM) is a serving certificate the CA `ca` (PEM) vouches for as `name`, as a
/// TLS client checks it (rustls's WebPKI verifier, ring).
pub fn serves(ca: &str, cert: &str, name: &str) -> bool {
    use rustls::client::WebPkiServerVerifier;
    use rustls::client::danger::ServerCertVerifier;
    use rustls::pki_types::{ServerName, UnixTime};
    let (Some(roots), Some(cert), Ok(name)) = (roots(ca), der(cert), ServerName::try_from(name))
    else {
        return false;
    };
    WebPkiServerVerifier::builder_with_provider(roots, ring())
        .build()
        .is_ok_and(|v| {
            v.verify_server_cert(&cert, &[], &name, &[], UnixTime::now())
                .is_ok()
        })
}

/// Whether `cert` (PEM) is a client certificate the CA `ca` (PEM) vouches for, as a TLS server
/// checks it.
pub fn identifies(ca: &str, cert: &str) -> bool {
    use rustls::pki_types::UnixTime;
    use rustls::server::WebPkiClientVerifier;
    let (Some(roots), Some(cert)) = (roots(ca), der(cert)) else {
        return false;
    };
    WebPkiClientVerifier::builder_with_provider(roots, ring())
        .build()
        .is_ok_and(|v| v.verify_client_cert(&cert, &[], UnixTime::now()).is_ok())
}

fn der(pem: &str) -> Option<rustls::pki_types::CertificateDer<'static>> {
    use rustls::pki_types::pem::PemObject;
    rustls::pki_types::CertificateDer::from_pem_slice(pem.as_bytes()).ok()
}

fn roots(ca: &str) -> Option<std::sync::Arc<rustls::RootCertStore>> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(der(ca)?).ok()?;
    Some(std::sync::Arc::new(roots))
}

fn ring() -> std::sync::Arc<rustls::crypto::CryptoProvider> {
    std::sync::Arc::new(rustls::crypto::ring::default_provider())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_server_certificate_is_trusted_for_its_names_and_only_those() {
        let ca = Authority::new("test-ca").unwrap();
        let server = ca.server(&["127.0.0.1", "catalogd.test"]).unwrap();
        assert!(serves(ca.pem(), &server.cert, "127.0.0.1"));
        assert!(serves(ca.pem(), &server.cert, "catalogd.test"));
        assert!(!serves(ca.pem(), &server.cert, "example.com"));
        // A client certificate is no server's.
        let client = ca.client("someone", None).unwrap();
        assert!(!serves(ca.pem(), &client.cert, "127.0.0.1"));
        // Another CA's server is not trusted.
        let other = Authority::new("test-ca").unwrap();
        let foreign = other.server(&["127.0.0.1"]).unwrap();
        assert!(!serves(ca.pem(), &foreign.cert, "127.0.0.1"));
    }

    #[test]
    fn a_client_certificate_is_trusted_by_its_ca_only() {
        let ca = Authority::new("test-ca").unwrap();
        let client = ca.client("system:node:n1", Some("system:nodes")).unwrap();
        assert!(identifies(ca.pem(), &client.cert));
        let other = Authority::new("test-ca").unwrap();
        let foreign = other
            .client("system:node:n1", Some("system:nodes"))
            .unwrap();
        assert!(!identifies(ca.pem(), &foreign.cert));
        // Not PEM at all: no.
        assert!(!identifies(ca.pem(), "not a certificate"));
    }

    #[test]
    fn keys_are_pkcs8_and_a_key_pair_is_one_pair() {
        let ca = Authority::new("test-ca").unwrap();
        let server = ca.server(&["127.0.0.1"]).unwrap();
        assert!(server.key.starts_with("-----BEGIN PRIVATE KEY-----"));
        assert!(server.cert.starts_with("-----BEGIN CERTIFICATE-----"));
        let pair = key_pair().unwrap();
        assert!(pair.cert.starts_with("-----BEGIN PUBLIC KEY-----"));
        let key = KeyPair::from_pem(&pair.key).unwrap();
        assert_eq!(key.public_key_pem(), pair.cert);
        // The signing key never shows in Debug.
        assert!(!format!("{ca:?}").contains("PRIVATE"));
    }
}
