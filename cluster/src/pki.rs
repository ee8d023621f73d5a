//! The control plane's throw-away PKI, made with the tests' one PKI (olm-testkit's
//! [`olm_testkit::pki`], rcgen): a CA, the API server's serving
//! certificate, the admin's client certificate (group `system:masters`), the node's clients
//! (the kubelet as `system:node:<name>` in `system:nodes`, kube-proxy as `system:kube-proxy`,
//! CoreDNS as [`COREDNS_USER`]) and the key pair that signs service-account tokens. Every key
//! is ECDSA P-256, which Go's TLS stack, the API server's token signer (ES256) and rustls all
//! take.

use std::path::Path;

use olm_testkit::pki::{Authority, DnType, ExtendedKeyUsagePurpose, key_pair};

use super::folder::io_error;
use crate::error::Result;

pub use olm_testkit::pki::Pair;

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
    /// The front proxy's CA (`--requestheader-client-ca-file`): a CA of its own, as kubeadm
    /// makes it, so that no other client certificate can pass for the aggregator.
    pub front_proxy_ca: String,
    /// The aggregator's client certificate ([`FRONT_PROXY_CLIENT`]), with which the API
    /// server proxies to aggregated APIs.
    pub front_proxy_client: Pair,
}

/// The common name of the aggregator's client certificate (`--requestheader-allowed-names`).
pub const FRONT_PROXY_CLIENT: &str = "front-proxy-client";

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
    /// The front proxy's CA certificate.
    pub const FRONT_PROXY_CA: &str = "front-proxy-ca.crt";
    /// The aggregator's client certificate and key.
    pub const FRONT_PROXY_CLIENT: (&str, &str) =
        ("front-proxy-client.crt", "front-proxy-client.key");
}

impl Pki {
    /// A new PKI whose API server certificate is valid for [`API_SERVER_NAMES`] and
    /// `extra_names` (the node's view of it), and whose kubelet is node `node`; nothing is
    /// written.
    pub fn generate(extra_names: &[String], node: &str) -> Result<Pki> {
        let ca = Authority::new("olm-rs-test-ca")?;
        let mut names: Vec<&str> = API_SERVER_NAMES.to_vec();
        names.extend(extra_names.iter().map(String::as_str));
        let api_server = ca.sign(
            &names,
            &[(DnType::CommonName, "kube-apiserver")],
            ExtendedKeyUsagePurpose::ServerAuth,
        )?;
        let front_proxy = Authority::new("olm-rs-test-front-proxy-ca")?;
        Ok(Pki {
            ca: ca.pem().to_owned(),
            api_server,
            admin: ca.client(ADMIN_USER, Some("system:masters"))?,
            kubelet: ca.client(&format!("system:node:{node}"), Some("system:nodes"))?,
            kube_proxy: ca.client("system:kube-proxy", None)?,
            coredns: ca.client(COREDNS_USER, None)?,
            service_accounts: key_pair()?,
            front_proxy_ca: front_proxy.pem().to_owned(),
            front_proxy_client: front_proxy.client(FRONT_PROXY_CLIENT, None)?,
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
            (files::FRONT_PROXY_CLIENT, &self.front_proxy_client),
        ];
        let mut all = vec![
            (files::CA, self.ca.as_str()),
            (files::FRONT_PROXY_CA, self.front_proxy_ca.as_str()),
        ];
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use olm_testkit::pki::{identifies, serves};

    use super::*;

    #[test]
    fn the_api_server_certificate_is_trusted_for_its_names_and_only_those() {
        let pki = Pki::generate(&["172.30.9.1".into()], "n1").unwrap();
        for name in API_SERVER_NAMES.iter().chain(&["172.30.9.1"]) {
            assert!(serves(&pki.ca, &pki.api_server.cert, name), "{name}");
        }
        assert!(!serves(&pki.ca, &pki.api_server.cert, "example.com"));
        // The admin's certificate is a client certificate: no server may present it.
        assert!(!serves(&pki.ca, &pki.admin.cert, "127.0.0.1"));
    }

    #[test]
    fn every_client_certificate_is_a_client_of_the_ca() {
        let pki = Pki::generate(&["172.30.9.1".into()], "n1").unwrap();
        for pair in [&pki.admin, &pki.kubelet, &pki.kube_proxy, &pki.coredns] {
            assert!(identifies(&pki.ca, &pair.cert));
        }
        // Another CA's client is refused: the check can fail.
        let other = Pki::generate(&["172.30.9.1".into()], "n1").unwrap();
        assert!(!identifies(&pki.ca, &other.admin.cert));
        // The front proxy's client is its own CA's, and no other client passes for it.
        assert!(identifies(
            &pki.front_proxy_ca,
            &pki.front_proxy_client.cert
        ));
        assert!(!identifies(&pki.front_proxy_ca, &pki.admin.cert));
        assert!(!identifies(&pki.ca, &pki.front_proxy_client.cert));
    }

    #[test]
    fn every_file_is_written_in_pem_under_its_name() {
        let pki = Pki::generate(&["172.30.9.1".into()], "n1").unwrap();
        let dir = tempfile::tempdir().unwrap();
        pki.write(dir.path()).unwrap();
        let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
        assert!(read(files::CA).starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(read(files::FRONT_PROXY_CA).starts_with("-----BEGIN CERTIFICATE-----"));
        for (cert, key) in [
            files::API_SERVER,
            files::ADMIN,
            files::KUBELET,
            files::KUBE_PROXY,
            files::COREDNS,
            files::FRONT_PROXY_CLIENT,
        ] {
            assert!(read(cert).starts_with("-----BEGIN CERTIFICATE-----"));
            assert!(read(key).starts_with("-----BEGIN PRIVATE KEY-----"));
        }
        let (public, private) = files::SERVICE_ACCOUNTS;
        assert!(read(public).starts_with("-----BEGIN PUBLIC KEY-----"));
        assert!(read(private).starts_with("-----BEGIN PRIVATE KEY-----"));
        // The service-account pair is one key pair.
        let key = rcgen::KeyPair::from_pem(&read(private)).unwrap();
        assert_eq!(key.public_key_pem(), read(public));
    }
}
