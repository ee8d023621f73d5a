//! The puller's registry client against a hostile registry. A real registry (the e2e tests use
//! Debian's docker-registry) never misbehaves like this, so this one is a small axum server
//! here: it sends endless manifests and error bodies, names token services on addresses the
//! network policy refuses or on hosts a pull secret does not name, and redirects blobs to a
//! metadata address. It also does the token dance right, to show that works.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use oci_client::Reference;
use olm_puller::ErrorKind;
use olm_puller::image::client::{self, Credentials};
use olm_puller::image::errors::{Offered, PullError};
use olm_puller::image::registry::{Access, Registries, RegistryOptions};
use olm_puller::network::NetworkPolicy;

const MANIFEST: &str = r#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:00","size":2},"layers":[]}"#;

#[derive(Clone, Default)]
struct Hostile {
    /// The realm the Bearer challenge names; empty: no challenge at all.
    realm: Arc<Mutex<String>>,
    /// The Authorization header of every token request.
    token_requests: Arc<Mutex<Vec<Option<String>>>>,
}

fn endless(chunk: &'static [u8]) -> Body {
    Body::from_stream(futures::stream::repeat_with(move || {
        Ok::<_, std::io::Error>(bytes::Bytes::from_static(chunk))
    }))
}

async fn manifest(
    State(s): State<Hostile>,
    Path((repo, _reference)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    match repo.as_str() {
        "huge" => return (StatusCode::OK, endless(&[b' '; 65536])).into_response(),
        "broken" => return (StatusCode::INTERNAL_SERVER_ERROR, endless(b"oops ")).into_response(),
        _ => {}
    }
    let realm = s.realm.lock().unwrap().clone();
    let authorized = headers
        .get(header::AUTHORIZATION)
        .is_some_and(|v| v == "Bearer good");
    if !realm.is_empty() && !authorized {
        return (
            StatusCode::UNAUTHORIZED,
            [(
                header::WWW_AUTHENTICATE,
                format!(r#"Bearer realm="{realm}",service="hostile""#),
            )],
        )
            .into_response();
    }
    (StatusCode::OK, MANIFEST).into_response()
}

async fn token(State(s): State<Hostile>, headers: HeaderMap) -> Response {
    s.token_requests.lock().unwrap().push(
        headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
    );
    (StatusCode::OK, r#"{"token":"good"}"#).into_response()
}

async fn blob() -> Response {
    (
        StatusCode::TEMPORARY_REDIRECT,
        [(header::LOCATION, "http://169.254.169.254/latest/meta-data/")],
    )
        .into_response()
}

/// The hostile registry on loopback: its state and port.
async fn start() -> (Hostile, u16) {
    let state = Hostile::default();
    let app = axum::Router::new()
        .route(
            "/v2/{repo}/manifests/{reference}",
            axum::routing::get(manifest),
        )
        .route("/v2/team/blobs/{digest}", axum::routing::get(blob))
        .route("/token", axum::routing::get(token))
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (state, port)
}

fn registries() -> Registries {
    olm_testkit::install_crypto_provider();
    Registries::new(RegistryOptions {
        insecure_registries: Vec::new(),
        ca_pem: None,
        timeout: std::time::Duration::from_secs(10),
        // The test registry listens on loopback; link-local stays refused.
        policy: Arc::new(NetworkPolicy {
            allow_loopback: true,
            ..Default::default()
        }),
    })
}

/// The session with `repo` of the registry on `port`, over plain HTTP.
fn session(
    registries: &Registries,
    port: u16,
    repo: &str,
    credentials: &Credentials,
) -> client::Session {
    let reference: Reference = format!("127.0.0.1:{port}/{repo}:1").parse().unwrap();
    registries
        .session(
            &Access {
                reference: &reference,
                credentials,
                skip_tls_verify: false,
            },
            true,
        )
        .unwrap()
}

fn reason(e: PullError) -> (ErrorKind, String) {
    let e = e.into_error("the image", &Offered::Credentials);
    (e.kind, e.message)
}

/// Basic credentials whose Secret names `hosts`.
fn credentials(hosts: &str) -> Credentials {
    let secret = k8s_openapi::api::core::v1::Secret {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            annotations: Some(
                [(
                    olm_puller::scope::HOSTS_ANNOTATION.to_owned(),
                    hosts.to_owned(),
                )]
                .into(),
            ),
            ..Default::default()
        },
        ..Default::default()
    };
    Credentials::Basic {
        user: "alice".into(),
        password: "s3cret".into(),
        scope: client::scope_of(
            Arc::new(secret),
            "pull".into(),
            olm_puller::scope::User::Catalog("c".into()),
        ),
    }
}

#[tokio::test]
async fn endless_manifests_and_error_bodies_are_cut_short() {
    let (_state, port) = start().await;
    let registries = registries();
    let anonymous = Credentials::Anonymous;
    let err = session(&registries, port, "huge", &anonymous)
        .manifest("1")
        .await
        .unwrap_err();
    let (why, message) = reason(err);
    assert_eq!(why, ErrorKind::TooLarge, "{message}");
    assert!(message.contains("4194304"), "{message}");
    // An endless error body: the status is the answer, in a bounded message.
    let err = session(&registries, port, "broken", &anonymous)
        .manifest("1")
        .await
        .unwrap_err();
    let (why, message) = reason(err);
    assert_eq!(why, ErrorKind::Failed, "{message}");
    assert!(message.contains("HTTP 500"), "{message}");
    assert!(message.len() < 400, "{} bytes", message.len());
}

#[tokio::test]
async fn a_token_service_is_asked_anonymously_or_with_credentials_it_may_receive() {
    let (state, port) = start().await;
    let registries = registries();
    *state.realm.lock().unwrap() = format!("http://127.0.0.1:{port}/token");
    // Anonymous: a token without credentials, then the manifest with it.
    let (body, digest) = session(&registries, port, "team", &Credentials::Anonymous)
        .manifest("1")
        .await
        .unwrap();
    assert_eq!(body, MANIFEST.as_bytes());
    assert!(digest.starts_with("sha256:"));
    assert_eq!(state.token_requests.lock().unwrap().pop(), Some(None));

    // The same host: the Secret names it, so the token service gets the credentials.
    session(&registries, port, "team", &credentials("127.0.0.1"))
        .manifest("1")
        .await
        .unwrap();
    let sent = state.token_requests.lock().unwrap().pop().flatten();
    assert!(sent.is_some_and(|a| a.starts_with("Basic ")));

    // A token service on a host the Secret does not name: nothing is sent to it.
    *state.realm.lock().unwrap() = format!("http://localhost:{port}/token");
    let err = session(&registries, port, "team", &credentials("127.0.0.1"))
        .manifest("1")
        .await
        .unwrap_err();
    let (why, message) = reason(err);
    assert_eq!(why, ErrorKind::CredentialNotAllowed, "{message}");
    assert!(message.contains("localhost"), "{message}");
    assert!(state.token_requests.lock().unwrap().is_empty());
    // Named too: sent.
    session(
        &registries,
        port,
        "team",
        &credentials("127.0.0.1, localhost"),
    )
    .manifest("1")
    .await
    .unwrap();
    assert_eq!(state.token_requests.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn token_services_and_redirects_obey_the_network_policy() {
    let (state, port) = start().await;
    let registries = registries();
    *state.realm.lock().unwrap() = "http://169.254.169.254/token".into();
    let err = session(&registries, port, "team", &Credentials::Anonymous)
        .manifest("1")
        .await
        .unwrap_err();
    let (why, message) = reason(err);
    assert_eq!(why, ErrorKind::HostNotAllowed, "{message}");
    assert!(message.contains("169.254.169.254"), "{message}");

    // A blob redirected to the metadata address is not followed.
    *state.realm.lock().unwrap() = String::new();
    let err = match session(&registries, port, "team", &Credentials::Anonymous)
        .blob("sha256:00")
        .await
    {
        Ok(_) => panic!("the redirect was followed"),
        Err(e) => e,
    };
    let (why, message) = reason(err);
    assert_eq!(why, ErrorKind::HostNotAllowed, "{message}");

    // And a registry on a refused address is never asked.
    let strict = Registries::new(RegistryOptions {
        timeout: std::time::Duration::from_secs(10),
        ..Default::default()
    });
    let reference: Reference = format!("127.0.0.1:{port}/team:1").parse().unwrap();
    let refused = strict.session(
        &Access {
            reference: &reference,
            credentials: &Credentials::Anonymous,
            skip_tls_verify: false,
        },
        true,
    );
    assert!(matches!(refused, Err(PullError::Refused(_))));
}

#[tokio::test]
async fn a_manifest_must_have_the_digest_it_is_asked_by() {
    let (_state, port) = start().await;
    let registries = registries();
    let wrong = format!("sha256:{}", "0".repeat(64));
    let err = session(&registries, port, "team", &Credentials::Anonymous)
        .manifest(&wrong)
        .await
        .unwrap_err();
    let (why, message) = reason(err);
    assert_eq!(why, ErrorKind::DigestMismatch, "{message}");
}
