//! The content client against a real HTTP server that answers as catalogd does (ETag of the
//! content hash, 304 to a matching If-None-Match, gzip when asked): it downloads a hash once,
//! re-validates it conditionally, shares it between Catalogs, and tells unreachable from
//! invalid.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use operator_controller::content::{ContentClient, ContentOptions, FetchError, sha256_hex};

const CATALOG: &str = r#"{"schema":"olm.package","name":"foo","defaultChannel":"stable"}
{"schema":"olm.channel","package":"foo","name":"stable","entries":[{"name":"foo.v1.0.0"}]}
{"schema":"olm.bundle","package":"foo","name":"foo.v1.0.0","image":"i","properties":[{"type":"olm.package","value":{"packageName":"foo","version":"1.0.0"}}]}
"#;

#[derive(Default)]
struct Counts {
    full: AtomicUsize,
    not_modified: AtomicUsize,
    gzip: AtomicUsize,
}

/// Serves the (text, hash) in `body` at /all.json; returns its URL.
async fn server(body: Arc<Mutex<(String, String)>>, counts: Arc<Counts>) -> String {
    let app = Router::new().route(
        "/all.json",
        get(move |headers: HeaderMap| {
            let (text, hash) = body.lock().unwrap().clone();
            let counts = counts.clone();
            async move {
                let etag = format!("\"{hash}\"");
                let inm = headers
                    .get(header::IF_NONE_MATCH)
                    .and_then(|v| v.to_str().ok());
                if inm == Some(etag.as_str()) {
                    counts.not_modified.fetch_add(1, Ordering::SeqCst);
                    return (StatusCode::NOT_MODIFIED, [(header::ETAG, etag)]).into_response();
                }
                counts.full.fetch_add(1, Ordering::SeqCst);
                let gzip = headers
                    .get(header::ACCEPT_ENCODING)
                    .and_then(|v| v.to_str().ok())
                    .is_some_and(|v| v.contains("gzip"));
                if gzip {
                    counts.gzip.fetch_add(1, Ordering::SeqCst);
                    let mut gz =
                        flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                    gz.write_all(text.as_bytes()).unwrap();
                    let bytes = gz.finish().unwrap();
                    let headers = [
                        (header::ETAG, etag),
                        (header::CONTENT_ENCODING, "gzip".to_owned()),
                    ];
                    return (StatusCode::OK, headers, bytes).into_response();
                }
                (StatusCode::OK, [(header::ETAG, etag)], text).into_response()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}/all.json")
}

fn client(recheck: Duration) -> ContentClient {
    ContentClient::new(
        ContentOptions {
            ca_pem: None,
            max_bytes: 1 << 20,
            recheck,
            timeout: Duration::from_secs(5),
        },
        None,
    )
    .unwrap()
}

fn count(c: &AtomicUsize) -> usize {
    c.load(Ordering::SeqCst)
}

#[tokio::test]
async fn a_hash_is_downloaded_once_revalidated_conditionally_and_shared() {
    let counts = Arc::new(Counts::default());
    let h1 = sha256_hex(CATALOG.as_bytes());
    let body = Arc::new(Mutex::new((CATALOG.to_owned(), h1.clone())));
    let url = server(body.clone(), counts.clone()).await;
    let c = client(Duration::ZERO);

    let first = c.content("a", &h1, &url).await.unwrap();
    assert_eq!(first.entries.len(), 1);
    assert_eq!((count(&counts.full), count(&counts.gzip)), (1, 1));
    // Held, and older than the recheck interval (zero): asked again, conditionally.
    let again = c.content("a", &h1, &url).await.unwrap();
    assert!(Arc::ptr_eq(&first, &again), "not parsed again");
    assert_eq!(count(&counts.full), 1);
    assert_eq!(count(&counts.not_modified), 1);
    // Another Catalog with the same content shares it, without a download.
    let shared = c.content("b", &h1, &url).await.unwrap();
    assert!(Arc::ptr_eq(&first, &shared));
    assert_eq!(count(&counts.full), 1);
    assert_eq!(c.hashes(), std::slice::from_ref(&h1));

    // New content: downloaded once more.
    let text = CATALOG.replace("foo", "bar");
    let h2 = sha256_hex(text.as_bytes());
    *body.lock().unwrap() = (text, h2.clone());
    let new = c.content("a", &h2, &url).await.unwrap();
    assert_eq!(new.entries[0].package, "bar");
    assert_eq!(count(&counts.full), 2);

    // Deleted Catalogs' content is dropped.
    let before = c.bytes();
    c.retain(&["a".to_owned()].into());
    assert_eq!(c.hashes(), [h2]);
    assert!(c.bytes() < before);
}

#[tokio::test]
async fn within_the_recheck_interval_nothing_is_asked() {
    let counts = Arc::new(Counts::default());
    let h1 = sha256_hex(CATALOG.as_bytes());
    let body = Arc::new(Mutex::new((CATALOG.to_owned(), h1.clone())));
    let url = server(body, counts.clone()).await;
    let c = client(Duration::from_secs(3600));
    c.content("a", &h1, &url).await.unwrap();
    c.content("a", &h1, &url).await.unwrap();
    assert_eq!(count(&counts.full) + count(&counts.not_modified), 1);
}

#[tokio::test]
async fn unreachable_and_invalid_content_are_told_apart() {
    let c = client(Duration::ZERO);
    // Nothing listens on a port just freed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let down = c
        .content("a", "h1", &format!("http://127.0.0.1:{port}/all.json"))
        .await;
    assert!(
        matches!(&down, Err(FetchError::Unreachable(m)) if m.contains("could not be reached")),
        "{down:?}"
    );

    let counts = Arc::new(Counts::default());
    let bad = sha256_hex(b"{not json");
    let body = Arc::new(Mutex::new(("{not json".to_owned(), bad.clone())));
    let url = server(body, counts).await;
    let invalid = c.content("b", &bad, &url).await;
    assert!(
        matches!(&invalid, Err(FetchError::Invalid(m)) if m.contains("not a valid catalog")),
        "{invalid:?}"
    );
}

/// Content altered on the way (or newer than the status): the ETag claims the Catalog's hash,
/// the bytes are other. It is never used nor held, under that hash or any other: each ask
/// downloads again, and once the right bytes arrive they are used.
#[tokio::test]
async fn content_that_does_not_hash_to_the_catalogs_content_hash_is_never_used() {
    let counts = Arc::new(Counts::default());
    let wanted = sha256_hex(CATALOG.as_bytes());
    let injected = CATALOG
        .replace("foo.v1.0.0", "foo.v6.6.6")
        .replace("1.0.0", "6.6.6");
    // The injector's server claims the wanted hash in its ETag.
    let body = Arc::new(Mutex::new((injected, wanted.clone())));
    let url = server(body.clone(), counts.clone()).await;
    let c = client(Duration::from_secs(3600));
    for _ in 0..2 {
        let got = c.content("a", &wanted, &url).await;
        assert!(
            matches!(&got, Err(FetchError::Mismatch(m)) if m.contains(&wanted)),
            "{got:?}"
        );
    }
    assert_eq!(count(&counts.full), 2, "a mismatch is not held");
    assert!(c.hashes().is_empty());
    *body.lock().unwrap() = (CATALOG.to_owned(), wanted.clone());
    let good = c.content("a", &wanted, &url).await.unwrap();
    assert_eq!(good.entries[0].name, "foo.v1.0.0");
}
