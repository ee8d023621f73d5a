//! Keys and certificates, made with rcgen: ECDSA P-256 keys; a CA per BundleDeployment (its
//! subject names when it was made, so that CAs in one bundle are told apart); serving
//! certificates for a Service's three names, for server authentication only. Validity starts
//! a little before now (a tenth of the lifetime, at most five minutes), so that an API server
//! whose clock is behind the provisioner's still accepts a certificate just issued.

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use time::OffsetDateTime;

use super::rotation::{Ca, Issued, Issuer};

/// The issuer of the provisioner's certificates.
#[derive(Debug, Default, Clone, Copy)]
pub struct Rcgen;

/// How long before now a certificate's validity starts.
fn backdate(lifetime: i64) -> i64 {
    (lifetime / 10).min(300)
}

fn at(unix: i64) -> Result<OffsetDateTime, String> {
    OffsetDateTime::from_unix_timestamp(unix).map_err(|e| e.to_string())
}

/// A CA's parameters, the same each time for the same `made` (so that it can sign again from
/// its key alone).
fn ca_params(made: i64, expires: i64, lifetime: i64) -> Result<CertificateParams, String> {
    let mut params = CertificateParams::default();
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, format!("olm-rs-provisioner-ca-{made}"));
    params.distinguished_name = name;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params.not_before = at(made - backdate(lifetime))?;
    params.not_after = at(expires)?;
    Ok(params)
}

impl Issuer for Rcgen {
    fn ca(&mut self, now: i64, lifetime: i64) -> Result<Ca, String> {
        let key = KeyPair::generate().map_err(|e| e.to_string())?;
        let expires = now + lifetime;
        let cert = ca_params(now, expires, lifetime)?
            .self_signed(&key)
            .map_err(|e| e.to_string())?;
        Ok(Ca {
            cert: cert.pem(),
            key: key.serialize_pem(),
            made: now,
            expires,
        })
    }

    fn serving(&mut self, ca: &Ca, hosts: &[String], now: i64) -> Result<Issued, String> {
        let ca_key = KeyPair::from_pem(&ca.key).map_err(|e| e.to_string())?;
        let lifetime = ca.expires - ca.made;
        let issuer = rcgen::Issuer::new(ca_params(ca.made, ca.expires, lifetime)?, ca_key);
        let key = KeyPair::generate().map_err(|e| e.to_string())?;
        let mut params = CertificateParams::new(hosts.to_vec()).map_err(|e| e.to_string())?;
        let mut name = DistinguishedName::new();
        name.push(
            DnType::CommonName,
            hosts.first().cloned().unwrap_or_default(),
        );
        params.distinguished_name = name;
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        params.not_before = at(now - backdate(lifetime))?;
        params.not_after = at(ca.expires)?;
        let cert = params.signed_by(&key, &issuer).map_err(|e| e.to_string())?;
        Ok(Issued {
            cert: cert.pem(),
            key: key.serialize_pem(),
            issuer: ca.cert.clone(),
            hosts: hosts.to_vec(),
            expires: ca.expires,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

    use super::*;

    /// A serving certificate verifies against its CA for each of its names, as a TLS client
    /// (rustls, as the API server's Go client would) checks it; and not against another CA.
    #[test]
    fn a_serving_certificate_chains_to_its_ca_for_its_names() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let now = OffsetDateTime::now_utc().unix_timestamp();
        let mut rcgen = Rcgen;
        let ca = rcgen.ca(now, 3600).unwrap();
        let hosts: Vec<String> = ["svc.ns", "svc.ns.svc", "svc.ns.svc.cluster.local"]
            .map(String::from)
            .to_vec();
        let issued = rcgen.serving(&ca, &hosts, now).unwrap();
        let verify = |ca: &Ca, host: &str| {
            let mut roots = rustls::RootCertStore::empty();
            for c in rustls_pemfile_certs(&ca.cert) {
                roots.add(c).unwrap();
            }
            let verifier = rustls::client::WebPkiServerVerifier::builder(roots.into())
                .build()
                .unwrap();
            let cert = rustls_pemfile_certs(&issued.cert).remove(0);
            verifier.verify_server_cert(
                &cert,
                &[],
                &rustls::pki_types::ServerName::try_from(host.to_owned()).unwrap(),
                &[],
                rustls::pki_types::UnixTime::now(),
            )
        };
        use rustls::client::danger::ServerCertVerifier;
        for host in &hosts {
            verify(&ca, host).unwrap();
        }
        assert!(verify(&ca, "other.ns.svc").is_err());
        let other = rcgen.ca(now, 3600).unwrap();
        assert!(verify(&other, "svc.ns.svc").is_err());
    }

    fn rustls_pemfile_certs(pem: &str) -> Vec<rustls::pki_types::CertificateDer<'static>> {
        use rustls::pki_types::pem::PemObject;
        rustls::pki_types::CertificateDer::pem_slice_iter(pem.as_bytes())
            .map(Result::unwrap)
            .collect()
    }
}
