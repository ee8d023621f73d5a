//! The control plane's throw-away PKI, made with rcgen: a CA, the API server's serving
//! certificate, the admin's client certificate (group `system:masters`), the node's clients
//! (the kubelet as `system:node:<name>` in `system:nodes`, kube-proxy as `system:kube-proxy`,
//! CoreDNS as [`COREDNS_USER`]) and the key pair that signs service-account tokens. Every key is ECDSA P-256, which Go's TLS stack, the API
//! server's token signer (ES256) and rustls all take.

use std::path::Path;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use super::folder::io_error;
use crate::{Error, Result};

/// Names the API server's certificate is valid for: how the tests, the managers and
/// in-cluster clients reach it.
pub const API_SERVER_NAMES: &[&str] = &[
    "127.0.0.1",
    "10.0.0.1",
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
];

/// The admin's user name; its group `system:masters` gives it every permission.
pub const ADMIN_USER: &str = "olm-rs-admin";

/// CoreDNS's user name (the supervisor grants it what CoreDNS reads).
pub const COREDNS_USER: &str = "olm-rs:coredns";

/// A certificate and its private key, in PEM.
#[derive(Debug, Clone)]
pub struct Pair {
    /// The certificate (for service accounts: the public key).
    pub cert: String,
    /// The private key (PKCS#8).
    pub key: String,
}

/// Everything the components and the kubeconfig need.
#[derive(Debug, Clone)]
pub struct Pki {
    /// The CA's certificate, trusted by clients and by the API server for client certificates.
    pub ca: String,
    /// The API server's serving certificate.
    pub api_server: Pair,
    /// The admin's client certificate.
    pub admin: Pair,
    /// The kubelet's client certificate (`system:node:<node>`, group `system:nodes`).
    pub kubelet: Pair,
    /// kube-proxy's client certificate (`system:kube-proxy`, bound to `system:node-proxier`).
    pub kube_proxy: Pair,
    /// CoreDNS's client certificate ([`COREDNS_USER`]).
    pub coredns: Pair,
    /// The service-account token signing key (`cert` holds its public key).
    pub service_accounts: Pair,
}

/// The file names [`Pki::write`] uses.
pub mod files {
    /// The kubelet's certificate and key.
    pub const KUBELET: (&str, &str) = ("kubelet.crt", "kubelet.key");
    /// kube-proxy's certificate and key.
    pub const KUBE_PROXY: (&str, &str) = ("kube-proxy.crt", "kube-proxy.key");
    /// CoreDNS's certificate and key.
    pub const COREDNS: (&str, &str) = ("coredns.crt", "coredns.key");
    /// The CA certificate.
    pub const CA: &str = "ca.crt";
    /// The API server's certificate and key.
    pub const API_SERVER: (&str, &str) = ("apiserver.crt", "apiserver.key");
    /// The admin's certificate and key.
    pub const ADMIN: (&str, &str) = ("admin.crt", "admin.key");
    /// The service-account public and private key.
    pub const SERVICE_ACCOUNTS: (&str, &str) = ("sa.pub", "sa.key");
}

fn rcgen_error(what: &str) -> impl FnOnce(rcgen::Error) -> Error + '_ {
    move |e| Error::Cluster(format!("making the {what}: {e}"))
}

impl Pki {
    /// A new PKI whose API server certificate is valid for [`API_SERVER_NAMES`] and
    /// `extra_names` (the node's view of it), and whose kubelet is node `node`; nothing is
    /// written.
    pub fn generate(extra_names: &[String], node: &str) -> Result<Pki> {
        let ca_key = KeyPair::generate().map_err(rcgen_error("CA key"))?;
        let mut ca = CertificateParams::new(Vec::new()).map_err(rcgen_error("CA"))?;
        ca.distinguished_name
            .push(DnType::CommonName, "olm-rs-test-ca");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca.self_signed(&ca_key).map_err(rcgen_error("CA"))?;
        let issuer = Issuer::new(ca, ca_key);

        let mut names: Vec<String> = API_SERVER_NAMES.iter().map(|n| (*n).to_owned()).collect();
        names.extend(extra_names.iter().cloned());
        let api_server = leaf(
            &issuer,
            names,
            &[(DnType::CommonName, "kube-apiserver")],
            ExtendedKeyUsagePurpose::ServerAuth,
        )?;
        let admin = leaf(
            &issuer,
            Vec::new(),
            &[
                (DnType::OrganizationName, "system:masters"),
                (DnType::CommonName, ADMIN_USER),
            ],
            ExtendedKeyUsagePurpose::ClientAuth,
        )?;
        let client = |user: &str, group: Option<&str>| {
            let mut subject = Vec::new();
            if let Some(group) = group {
                subject.push((DnType::OrganizationName, group));
            }
            subject.push((DnType::CommonName, user));
            leaf(
                &issuer,
                Vec::new(),
                &subject,
                ExtendedKeyUsagePurpose::ClientAuth,
            )
        };
        let kubelet = client(&format!("system:node:{node}"), Some("system:nodes"))?;
        let kube_proxy = client("system:kube-proxy", None)?;
        let coredns = client(COREDNS_USER, None)?;
        let sa = KeyPair::generate().map_err(rcgen_error("service-account key"))?;
        Ok(Pki {
            ca: ca_cert.pem(),
            api_server,
            admin,
            kubelet,
            kube_proxy,
            coredns,
            service_accounts: Pair {
                cert: sa.public_key_pem(),
                key: sa.serialize_pem(),
            },
        })
    }

    /// Writes every file into `dir` (created), named as [`files`] says.
    pub fn write(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(io_error(dir))?;
        let pairs = [
            (files::API_SERVER, &self.api_server),
            (files::ADMIN, &self.admin),
            (files::KUBELET, &self.kubelet),
            (files::KUBE_PROXY, &self.kube_proxy),
            (files::COREDNS, &self.coredns),
            (files::SERVICE_ACCOUNTS, &self.service_accounts),
        ];
        let mut all = vec![(files::CA, self.ca.as_str())];
        for ((cert, key), pair) in pairs {
            all.push((cert, pair.cert.as_str()));
            all.push((key, pair.key.as_str()));
        }
        for (name, pem) in all {
            let path = dir.join(name);
            std::fs::write(&path, pem).map_err(io_error(&path))?;
        }
        Ok(())
    }
}

fn leaf(
    issuer: &Issuer<'_, KeyPair>,
    names: Vec<String>,
    subject: &[(DnType, &str)],
    usage: ExtendedKeyUsagePurpose,
) -> Result<Pair> {
    let key = KeyPair::generate().map_err(rcgen_error("key"))?;
    let mut params = CertificateParams::new(names).map_err(rcgen_error("certificate"))?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    for (kind, value) in subject {
        params.distinguished_name.push(kind.clone(), *value);
    }
    params.is_ca = IsCa::ExplicitNoCa;
    // ECDSA keys sign; they encipher nothing.
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![usage];
    params.use_authority_key_identifier_extension = true;
    let cert = params
        .signed_by(&key, issuer)
        .map_err(rcgen_error("certificate"))?;
    Ok(Pair {
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::sync::Arc;

    use rustls::RootCertStore;
    use rustls::client::WebPkiServerVerifier;
    use rustls::client::danger::ServerCertVerifier;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
    use rustls::server::WebPkiClientVerifier;

    use super::*;

    fn der(pem: &str) -> CertificateDer<'static> {
        CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()
    }

    fn roots(pki: &Pki) -> Arc<RootCertStore> {
        let mut roots = RootCertStore::empty();
        roots.add(der(&pki.ca)).unwrap();
        Arc::new(roots)
    }

    fn ring() -> Arc<rustls::crypto::CryptoProvider> {
        Arc::new(rustls::crypto::ring::default_provider())
    }

    #[test]
    fn the_api_server_certificate_is_trusted_for_its_names_and_only_those() {
        let pki = Pki::generate(&["172.30.9.1".into()], "n1").unwrap();
        let verifier = WebPkiServerVerifier::builder_with_provider(roots(&pki), ring())
            .build()
            .unwrap();
        let check = |name: &str| {
            verifier.verify_server_cert(
                &der(&pki.api_server.cert),
                &[],
                &ServerName::try_from(name.to_owned()).unwrap(),
                &[],
                UnixTime::now(),
            )
        };
        for name in API_SERVER_NAMES.iter().chain(&["172.30.9.1"]) {
            check(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        assert!(check("example.com").is_err());
        // The admin's certificate is a client certificate: no server may present it.
        let as_server = verifier.verify_server_cert(
            &der(&pki.admin.cert),
            &[],
            &ServerName::try_from("127.0.0.1").unwrap(),
            &[],
            UnixTime::now(),
        );
        assert!(as_server.is_err());
    }

    #[test]
    fn the_admin_certificate_is_a_client_certificate_of_the_ca() {
        let pki = Pki::generate(&["172.30.9.1".into()], "n1").unwrap();
        let verifier = WebPkiClientVerifier::builder_with_provider(roots(&pki), ring())
            .build()
            .unwrap();
        verifier
            .verify_client_cert(&der(&pki.admin.cert), &[], UnixTime::now())
            .unwrap();
        // Another CA's client is refused: the check can fail.
        let other = Pki::generate(&["172.30.9.1".into()], "n1").unwrap();
        assert!(
            verifier
                .verify_client_cert(&der(&other.admin.cert), &[], UnixTime::now())
                .is_err()
        );
    }

    #[test]
    fn every_file_is_written_in_pem_under_its_name() {
        let pki = Pki::generate(&["172.30.9.1".into()], "n1").unwrap();
        let dir = tempfile::tempdir().unwrap();
        pki.write(dir.path()).unwrap();
        let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
        assert!(read(files::CA).starts_with("-----BEGIN CERTIFICATE-----"));
        for (cert, key) in [
            files::API_SERVER,
            files::ADMIN,
            files::KUBELET,
            files::KUBE_PROXY,
            files::COREDNS,
        ] {
            assert!(read(cert).starts_with("-----BEGIN CERTIFICATE-----"));
            assert!(read(key).starts_with("-----BEGIN PRIVATE KEY-----"));
        }
        let (public, private) = files::SERVICE_ACCOUNTS;
        assert!(read(public).starts_with("-----BEGIN PUBLIC KEY-----"));
        assert!(read(private).starts_with("-----BEGIN PRIVATE KEY-----"));
        // The service-account pair is one key pair.
        let key = KeyPair::from_pem(&read(private)).unwrap();
        assert_eq!(key.public_key_pem(), read(public));
    }
}
