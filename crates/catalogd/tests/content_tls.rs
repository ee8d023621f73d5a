//! The content server over HTTPS from certificate files, over real TLS on a loopback port:
//! clients that trust the CA get the content; a renewed certificate written over the files is
//! served to new connections without a restart.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::Arc;
use std::time::{Duration, Instant};

use catalogd::server::{ServerMetrics, router, serve};
use catalogd::store::Store;
use olm_resolver::fbc::load_files;
use tokio_util::sync::CancellationToken;

const CATALOG: &str = "schema: olm.package\nname: alpha\n---\nschema: olm.bundle\nname: alpha.v1\npackage: alpha\nimage: example.com/alpha:v1\nproperties:\n- type: olm.package\n  value: {packageName: alpha, version: 1.0.0}\n";

/// A CA and a server certificate for 127.0.0.1 it signed, as PEM.
fn issue(ca: &rcgen::Issuer<'_, rcgen::KeyPair>) -> (String, String) {
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
    let cert = params.signed_by(&key, ca).unwrap();
    (cert.pem(), key.serialize_pem())
}

/// The DER of the certificate the server presents to a new connection.
async fn served(client: &reqwest::Client, url: &str) -> (u16, Vec<u8>) {
    let response = client.get(url).send().await.unwrap();
    let info = response
        .extensions()
        .get::<reqwest::tls::TlsInfo>()
        .and_then(|i| i.peer_certificate())
        .map(<[u8]>::to_vec)
        .unwrap();
    (response.status().as_u16(), info)
}

#[tokio::test]
async fn content_is_served_over_https_and_a_renewed_certificate_without_a_restart() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path().join("store")).unwrap());
    let fbc = load_files([("catalog.yaml", CATALOG.as_bytes())]).unwrap();
    store.put("tls-catalog", "uid-1", &fbc).unwrap();

    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let ca = rcgen::Issuer::new(ca_params, ca_key);
    let (cert_file, key_file) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    let (cert, key) = issue(&ca);
    std::fs::write(&cert_file, &cert).unwrap();
    std::fs::write(&key_file, &key).unwrap();

    let tls = olm_runtime::tls::server_config(Some((&cert_file, &key_file)), &[]).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!(
        "https://{}/catalogs/tls-catalog/all.json",
        listener.local_addr().unwrap()
    );
    let shutdown = CancellationToken::new();
    let registry = prometheus::Registry::new();
    let task = tokio::spawn(serve(
        listener,
        router(store, ServerMetrics::new(&registry).unwrap()),
        Some(tls),
        shutdown.clone(),
    ));
    // A new client per request: a new connection, so a new handshake.
    let client = || {
        reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(ca_cert.pem().as_bytes()).unwrap())
            .tls_info(true)
            .no_proxy()
            .build()
            .unwrap()
    };
    let (status, first) = served(&client(), &url).await;
    assert_eq!(status, 200);
    // Without the CA, the server is not trusted.
    let untrusting = reqwest::Client::builder().no_proxy().build().unwrap();
    assert!(untrusting.get(&url).send().await.is_err());

    let (renewed, renewed_key) = issue(&ca);
    std::fs::write(&key_file, &renewed_key).unwrap();
    std::fs::write(&cert_file, &renewed).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, now) = served(&client(), &url).await;
        assert_eq!(status, 200);
        if now != first {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the renewed certificate was not served"
        );
        // Waiting out the reload interval (olm_runtime::tls::RECHECK), bounded above.
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    shutdown.cancel();
    task.await.unwrap().unwrap();
}
