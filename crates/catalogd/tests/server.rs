//! The content server over real HTTP on loopback.

// Test helpers outside #[test] functions fail loudly too; clippy.toml only exempts the tests.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Read;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use catalogd::server::{ServerMetrics, router, serve};
use catalogd::store::{Store, Stored};
use olm_resolver::fbc::{Fbc, load_files};
use reqwest::StatusCode;
use reqwest::header::{
    ACCEPT_ENCODING, ACCEPT_RANGES, ALLOW, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_RANGE,
    CONTENT_TYPE, ETAG, IF_MATCH, IF_MODIFIED_SINCE, IF_NONE_MATCH, IF_RANGE, IF_UNMODIFIED_SINCE,
    LAST_MODIFIED, RANGE, VARY, X_CONTENT_TYPE_OPTIONS,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

const CATALOG: &str = r#"
---
schema: olm.package
name: alpha
defaultChannel: stable
---
schema: olm.channel
name: stable
package: alpha
entries:
  - name: alpha.v1.0.0
  - name: alpha.v1.1.0
    replaces: alpha.v1.0.0
---
schema: olm.bundle
name: alpha.v1.0.0
package: alpha
image: example.com/alpha:v1.0.0
properties:
  - type: olm.package
    value: {packageName: alpha, version: 1.0.0}
---
schema: olm.bundle
name: alpha.v1.1.0
package: alpha
image: example.com/alpha:v1.1.0
properties:
  - type: olm.package
    value: {packageName: alpha, version: 1.1.0}
---
schema: olm.package
name: beta
defaultChannel: stable
---
schema: olm.channel
name: stable
package: beta
entries:
  - name: beta.v0.1.0
---
schema: olm.bundle
name: beta.v0.1.0
package: beta
image: example.com/beta:v0.1.0
properties:
  - type: olm.package
    value: {packageName: beta, version: 0.1.0}
---
schema: example.com/note
package: beta
name: note
text: "<&> é"
"#;

struct Server {
    base: String,
    client: reqwest::Client,
    store: Arc<Store>,
    registry: prometheus::Registry,
    fbc: Fbc,
    stored: Stored,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
    dir: tempfile::TempDir,
}

impl Server {
    async fn start() -> Server {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(dir.path()).unwrap());
        // Padding in package alpha, so that the whole catalog and alpha's selection are over
        // the 1,024 bytes from which bodies are compressed (beta's stays under).
        let catalog = format!(
            "{CATALOG}---\nschema: example.com/note\npackage: alpha\nname: padding\ntext: {}\n",
            "x".repeat(1200)
        );
        let fbc = load_files([("catalog.yaml", catalog.as_bytes())]).unwrap();
        let stored = store.put("test-catalog", "uid-1", &fbc).unwrap();
        // all.json.gz is written in the background; these tests want it there.
        store.flush();
        let registry = prometheus::Registry::new();
        let metrics = ServerMetrics::new(&registry).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(serve(
            listener,
            router(store.clone(), metrics),
            None,
            shutdown.clone(),
        ));
        let client = reqwest::Client::builder().no_proxy().build().unwrap();
        Server {
            base,
            client,
            store,
            registry,
            fbc,
            stored,
            shutdown,
            task,
            dir,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    async fn get(&self, path: &str) -> reqwest::Response {
        self.client.get(self.url(path)).send().await.unwrap()
    }

    /// GETs `path` with `headers`.
    async fn get_with(
        &self,
        path: &str,
        headers: &[(reqwest::header::HeaderName, &str)],
    ) -> reqwest::Response {
        let mut request = self.client.get(self.url(path));
        for (name, value) in headers {
            request = request.header(name, *value);
        }
        request.send().await.unwrap()
    }

    fn etag(&self) -> String {
        format!("\"{}\"", self.stored.hash)
    }

    /// The lines of all.json whose blob matches, worked out from the rendered content itself
    /// rather than the index.
    fn expected(&self, schema: Option<&str>, package: Option<&str>, name: Option<&str>) -> Vec<u8> {
        let all = self.fbc.render();
        let mut out = Vec::new();
        for line in all.split_inclusive(|b| *b == b'\n') {
            let v: Value = serde_json::from_slice(line).unwrap();
            let field = |k: &str| v.get(k).and_then(Value::as_str);
            if [("schema", schema), ("package", package), ("name", name)]
                .iter()
                .all(|(k, want)| want.is_none_or(|w| field(k) == Some(w)))
            {
                out.extend_from_slice(line);
            }
        }
        out
    }

    async fn stop(self) {
        self.shutdown.cancel();
        self.task.await.unwrap().unwrap();
    }
}

fn header(res: &reqwest::Response, name: reqwest::header::HeaderName) -> &str {
    res.headers()
        .get(&name)
        .unwrap_or_else(|| panic!("no {name} header"))
        .to_str()
        .unwrap()
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut out)
        .unwrap();
    out
}

#[tokio::test]
async fn all_json_is_served_with_validators() {
    let s = Server::start().await;
    for path in [
        "/catalogs/test-catalog/all.json",
        "/catalogs/test-catalog/api/v1/all",
    ] {
        let res = s.get(path).await;
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(header(&res, CONTENT_TYPE), "application/jsonl");
        assert_eq!(header(&res, ETAG), s.etag());
        assert_eq!(
            header(&res, CONTENT_LENGTH),
            s.fbc.render().len().to_string()
        );
        assert!(header(&res, VARY).eq_ignore_ascii_case("accept-encoding"));
        let last_modified = httpdate::parse_http_date(header(&res, LAST_MODIFIED)).unwrap();
        assert_eq!(last_modified, truncate(s.stored.last_modified));
        assert!(res.headers().get(CONTENT_ENCODING).is_none());
        assert_eq!(res.bytes().await.unwrap(), s.fbc.render());
    }
    s.stop().await;
}

fn truncate(t: SystemTime) -> SystemTime {
    let secs = t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs();
    SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
}

#[tokio::test]
async fn head_has_the_headers_of_get_and_no_body() {
    let s = Server::start().await;
    let res = s
        .client
        .head(s.url("/catalogs/test-catalog/all.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(header(&res, ETAG), s.etag());
    assert_eq!(header(&res, CONTENT_TYPE), "application/jsonl");
    assert_eq!(
        header(&res, CONTENT_LENGTH),
        s.fbc.render().len().to_string()
    );
    assert!(res.bytes().await.unwrap().is_empty());

    let res = s
        .client
        .head(s.url("/catalogs/test-catalog/api/v1/metas?package=alpha"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(
        header(&res, CONTENT_LENGTH),
        s.expected(None, Some("alpha"), None).len().to_string()
    );
    assert!(res.bytes().await.unwrap().is_empty());
    s.stop().await;
}

#[tokio::test]
async fn conditional_requests_get_304() {
    let s = Server::start().await;
    let path = s.url("/catalogs/test-catalog/all.json");
    let conditional = |name, value: String| s.client.get(&path).header(name, value).send();

    for tag in [s.etag(), format!("\"nope\", {}", s.etag()), "*".into()] {
        let res = conditional(IF_NONE_MATCH, tag.clone()).await.unwrap();
        assert_eq!(res.status(), StatusCode::NOT_MODIFIED, "{tag}");
        assert_eq!(header(&res, ETAG), s.etag());
        assert!(res.bytes().await.unwrap().is_empty());
    }
    let res = conditional(IF_NONE_MATCH, "\"other\"".into())
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.bytes().await.unwrap(), s.fbc.render());

    let date = httpdate::fmt_http_date(s.stored.last_modified);
    let res = conditional(IF_MODIFIED_SINCE, date).await.unwrap();
    assert_eq!(res.status(), StatusCode::NOT_MODIFIED);
    let earlier = httpdate::fmt_http_date(s.stored.last_modified - Duration::from_secs(3600));
    let res = conditional(IF_MODIFIED_SINCE, earlier).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);

    // Metas honour them too.
    let res = s
        .get_with(
            "/catalogs/test-catalog/api/v1/metas?schema=olm.bundle",
            &[(IF_NONE_MATCH, &s.etag())],
        )
        .await;
    assert_eq!(res.status(), StatusCode::NOT_MODIFIED);
    s.stop().await;
}

#[tokio::test]
async fn gzip_is_served_when_accepted() {
    let s = Server::start().await;
    let res = s
        .get_with(
            "/catalogs/test-catalog/all.json",
            &[(ACCEPT_ENCODING, "br;q=1.0, gzip;q=0.8")],
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(header(&res, CONTENT_ENCODING), "gzip");
    // The gzip body has its own (weak) validator for the same content hash.
    assert_eq!(header(&res, ETAG), format!("W/{}", s.etag()));
    let length: usize = header(&res, CONTENT_LENGTH).parse().unwrap();
    let body = res.bytes().await.unwrap();
    assert_eq!(body.len(), length);
    assert_eq!(gunzip(&body), s.fbc.render());

    let res = s
        .get_with(
            "/catalogs/test-catalog/api/v1/metas?package=alpha",
            &[(ACCEPT_ENCODING, "gzip")],
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(header(&res, CONTENT_ENCODING), "gzip");
    let body = res.bytes().await.unwrap();
    assert_eq!(gunzip(&body), s.expected(None, Some("alpha"), None));
    s.stop().await;
}

/// all.json.gz is made after the content goes live: until it exists, a client that accepts
/// gzip gets the identity body, with the identity validator.
#[tokio::test]
async fn gzip_requests_before_the_gzip_is_made_get_the_identity_body() {
    let s = Server::start().await;
    let gz = s
        .dir
        .path()
        .join("test-catalog")
        .join(&s.stored.hash)
        .join(catalogd::store::ALL_JSON_GZ);
    std::fs::remove_file(&gz).unwrap();
    let res = s
        .get_with(
            "/catalogs/test-catalog/all.json",
            &[(ACCEPT_ENCODING, "gzip")],
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    assert!(res.headers().get(CONTENT_ENCODING).is_none());
    assert_eq!(header(&res, ETAG), s.etag());
    assert_eq!(res.bytes().await.unwrap(), s.fbc.render());
    s.stop().await;
}

/// As upstream (gzhttp never compresses a HEAD), a HEAD gets the identity headers whatever
/// it accepts: its length, its strong validator, `Accept-Ranges`.
#[tokio::test]
async fn a_head_is_never_compressed() {
    let s = Server::start().await;
    for (path, expected) in [
        ("/catalogs/test-catalog/api/v1/all", s.fbc.render()),
        (
            "/catalogs/test-catalog/api/v1/metas?package=alpha",
            s.expected(None, Some("alpha"), None),
        ),
    ] {
        let head = s
            .client
            .head(s.url(path))
            .header(ACCEPT_ENCODING, "gzip")
            .send()
            .await
            .unwrap();
        assert_eq!(head.status(), StatusCode::OK, "{path}");
        assert!(head.headers().get(CONTENT_ENCODING).is_none(), "{path}");
        assert_eq!(header(&head, ETAG), s.etag(), "{path}");
        assert_eq!(header(&head, CONTENT_LENGTH), expected.len().to_string());
        assert!(head.bytes().await.unwrap().is_empty());
        // Its GET is compressed: the body is over 1,024 bytes.
        let get = s.get_with(path, &[(ACCEPT_ENCODING, "gzip")]).await;
        assert_eq!(header(&get, CONTENT_ENCODING), "gzip", "{path}");
        assert_eq!(gunzip(&get.bytes().await.unwrap()), expected);
    }
    s.stop().await;
}

/// `*` in Accept-Encoding is gzip for the handler and the compression layer alike: the body is
/// compressed and its validator is the gzip one (not a weak tag on an identity body).
#[tokio::test]
async fn any_encoding_is_read_one_way() {
    let s = Server::start().await;
    let res = s
        .get_with(
            "/catalogs/test-catalog/api/v1/metas?package=alpha",
            &[(ACCEPT_ENCODING, "*")],
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(header(&res, CONTENT_ENCODING), "gzip");
    assert_eq!(header(&res, ETAG), format!("W/{}", s.etag()));
    assert_eq!(
        gunzip(&res.bytes().await.unwrap()),
        s.expected(None, Some("alpha"), None)
    );
    s.stop().await;
}

/// gzhttp's threshold: a body under 1,024 bytes is sent as it is, even when gzip is accepted.
#[tokio::test]
async fn bodies_under_1024_bytes_are_not_compressed() {
    let s = Server::start().await;
    let expected = s.expected(None, Some("beta"), None);
    assert!(expected.len() < 1024, "{}", expected.len());
    let res = s
        .get_with(
            "/catalogs/test-catalog/api/v1/metas?package=beta",
            &[(ACCEPT_ENCODING, "gzip")],
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    assert!(res.headers().get(CONTENT_ENCODING).is_none());
    assert_eq!(res.bytes().await.unwrap(), expected);
    assert!(s.fbc.render().len() >= 1024);
    s.stop().await;
}

/// If-Match and If-Unmodified-Since, as Go's ServeContent judges them: 412 when they fail,
/// before any 304.
#[tokio::test]
async fn failed_preconditions_get_412() {
    let s = Server::start().await;
    let earlier = httpdate::fmt_http_date(s.stored.last_modified - Duration::from_secs(3600));
    for path in [
        "/catalogs/test-catalog/api/v1/all",
        "/catalogs/test-catalog/api/v1/metas?package=alpha",
    ] {
        let with = |name, value: String| s.client.get(s.url(path)).header(name, value).send();
        let res = with(IF_MATCH, "\"other\"".into()).await.unwrap();
        assert_eq!(res.status(), StatusCode::PRECONDITION_FAILED, "{path}");
        // As Go: the content's Last-Modified, no body, no nosniff.
        assert!(res.headers().get(LAST_MODIFIED).is_some());
        assert!(res.headers().get(X_CONTENT_TYPE_OPTIONS).is_none());
        assert!(res.bytes().await.unwrap().is_empty());
        let res = with(IF_UNMODIFIED_SINCE, earlier.clone()).await.unwrap();
        assert_eq!(res.status(), StatusCode::PRECONDITION_FAILED, "{path}");
        // The current content's tag, or `*`, passes.
        for tag in [s.etag(), "*".into()] {
            let res = with(IF_MATCH, tag).await.unwrap();
            assert_eq!(res.status(), StatusCode::OK, "{path}");
        }
        // 412 comes before 304.
        let res = s
            .get_with(path, &[(IF_MATCH, "\"other\""), (IF_NONE_MATCH, &s.etag())])
            .await;
        assert_eq!(res.status(), StatusCode::PRECONDITION_FAILED, "{path}");
    }
    s.stop().await;
}

/// One byte range of the whole content: 206 of the identity body (even when gzip is
/// accepted), 416 when it starts past the end, the whole body when If-Range names other
/// content.
#[tokio::test]
async fn a_byte_range_gets_206_and_one_past_the_end_416() {
    let s = Server::start().await;
    let all = s.fbc.render();
    let path = s.url("/catalogs/test-catalog/api/v1/all");
    let ranged = |range: &'static str| {
        s.client
            .get(&path)
            .header(RANGE, range)
            .header(ACCEPT_ENCODING, "gzip")
            .send()
    };
    let res = ranged("bytes=0-9").await.unwrap();
    assert_eq!(res.status(), StatusCode::PARTIAL_CONTENT);
    assert!(res.headers().get(CONTENT_ENCODING).is_none());
    assert_eq!(
        header(&res, CONTENT_RANGE),
        format!("bytes 0-9/{}", all.len())
    );
    assert_eq!(header(&res, CONTENT_LENGTH), "10");
    assert_eq!(res.bytes().await.unwrap(), all[..10]);

    let res = ranged("bytes=-5").await.unwrap();
    assert_eq!(res.status(), StatusCode::PARTIAL_CONTENT);
    assert_eq!(res.bytes().await.unwrap(), all[all.len() - 5..]);

    let res = ranged("bytes=999999-").await.unwrap();
    assert_eq!(res.status(), StatusCode::RANGE_NOT_SATISFIABLE);
    assert_eq!(
        header(&res, CONTENT_RANGE),
        format!("bytes */{}", all.len())
    );
    // Not a byte range: 416 without Content-Range, as Go answers it.
    let res = ranged("lines=1-2").await.unwrap();
    assert_eq!(res.status(), StatusCode::RANGE_NOT_SATISFIABLE);
    assert!(res.headers().get(CONTENT_RANGE).is_none());
    assert_eq!(res.text().await.unwrap(), "invalid range\n");
    // An empty Range is no range: the whole body, compressed as usual.
    let res = ranged("").await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(header(&res, CONTENT_ENCODING), "gzip");

    // Identity bodies say ranges are taken; If-Range of other content gets the whole body.
    let res = s.get("/catalogs/test-catalog/all.json").await;
    assert_eq!(header(&res, ACCEPT_RANGES), "bytes");
    let res = s
        .client
        .get(&path)
        .header(RANGE, "bytes=0-9")
        .header(IF_RANGE, "\"other\"")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.bytes().await.unwrap(), all);
    // The same, accepting gzip: the whole body compressed, as any whole body.
    let res = s
        .client
        .get(&path)
        .header(RANGE, "bytes=0-9")
        .header(IF_RANGE, "\"other\"")
        .header(ACCEPT_ENCODING, "gzip")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(header(&res, CONTENT_ENCODING), "gzip");
    assert!(res.headers().get(ACCEPT_RANGES).is_none());
    assert_eq!(gunzip(&res.bytes().await.unwrap()), all);
    // Metas takes no ranges and says none.
    let res = s
        .get("/catalogs/test-catalog/api/v1/metas?package=beta")
        .await;
    assert!(res.headers().get(ACCEPT_RANGES).is_none());
    let res = s
        .client
        .get(&path)
        .header(RANGE, "bytes=0-9")
        .header(IF_RANGE, s.etag())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::PARTIAL_CONTENT);
    s.stop().await;
}

/// Encoded slashes and dots in a catalog name are rejected as invalid names, never resolved
/// to a path outside the catalog's directory.
#[tokio::test]
async fn encoded_path_traversal_is_a_bad_request() {
    let s = Server::start().await;
    // Sent byte for byte (an HTTP client would normalize `%2E%2E` away before sending).
    let raw = |path: &'static str| {
        let addr = s.base.trim_start_matches("http://").to_owned();
        async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
            tcp.write_all(
                format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
            )
            .await
            .unwrap();
            let mut response = String::new();
            tcp.read_to_string(&mut response).await.unwrap();
            response
        }
    };
    for path in [
        "/catalogs/..%2F..%2Fetc/all.json",
        "/catalogs/..%2Ftest-catalog/all.json",
        "/catalogs/%2E%2E/all.json",
        "/catalogs/%2e%2e%2f%2e%2e%2fetc/all.json",
        "/catalogs/test-catalog%2F..%2F..%2Fx/api/v1/metas",
    ] {
        let response = raw(path).await;
        assert!(response.starts_with("HTTP/1.1 400"), "{path}: {response}");
        assert!(
            response.contains("invalid catalog name"),
            "{path}: {response}"
        );
    }
    s.stop().await;
}

#[tokio::test]
async fn metas_queries_return_matching_lines_in_file_order() {
    let s = Server::start().await;
    /// A query string and the schema, package and name it selects.
    type Case<'a> = (&'a str, Option<&'a str>, Option<&'a str>, Option<&'a str>);
    let cases: &[Case] = &[
        ("schema=olm.bundle", Some("olm.bundle"), None, None),
        ("package=alpha", None, Some("alpha"), None),
        (
            "schema=olm.package&name=beta",
            Some("olm.package"),
            None,
            Some("beta"),
        ),
        ("name=stable", None, None, Some("stable")),
        (
            "schema=olm.channel&package=beta&name=stable",
            Some("olm.channel"),
            Some("beta"),
            Some("stable"),
        ),
        (
            "schema=example.com%2Fnote",
            Some("example.com/note"),
            None,
            None,
        ),
        ("package=nope", None, Some("nope"), None),
        // An empty value is a wildcard, as upstream.
        ("schema=&package=beta", None, Some("beta"), None),
    ];
    for (query, schema, package, name) in cases {
        let res = s
            .get(&format!("/catalogs/test-catalog/api/v1/metas?{query}"))
            .await;
        assert_eq!(res.status(), StatusCode::OK, "{query}");
        assert_eq!(header(&res, CONTENT_TYPE), "application/jsonl");
        assert_eq!(header(&res, ETAG), s.etag());
        assert!(res.headers().contains_key(LAST_MODIFIED));
        let want = s.expected(*schema, *package, *name);
        assert_eq!(
            header(&res, CONTENT_LENGTH),
            want.len().to_string(),
            "{query}"
        );
        let body = res.bytes().await.unwrap();
        assert_eq!(
            String::from_utf8_lossy(&body),
            String::from_utf8_lossy(&want),
            "{query}"
        );
    }
    // The olm.package blob has no package key: package= alone does not find it.
    let body = s
        .get("/catalogs/test-catalog/api/v1/metas?package=beta")
        .await
        .bytes()
        .await
        .unwrap();
    let schemas: Vec<String> = body
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice::<Value>(l).unwrap()["schema"].to_string())
        .collect();
    assert_eq!(
        schemas,
        ["\"olm.channel\"", "\"olm.bundle\"", "\"example.com/note\""]
    );

    // No parameters: the whole file.
    let res = s.get("/catalogs/test-catalog/api/v1/metas").await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.bytes().await.unwrap(), s.fbc.render());
    s.stop().await;
}

#[tokio::test]
async fn bad_requests_are_refused_with_the_right_status() {
    let s = Server::start().await;
    let res = s
        .get("/catalogs/test-catalog/api/v1/metas?schema=olm.bundle&version=1")
        .await;
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    assert!(res.text().await.unwrap().contains("\"version\""));

    for path in [
        "/catalogs/Not_Valid/all.json",
        "/catalogs/Not_Valid/api/v1/metas?schema=olm.bundle",
        "/catalogs/a..b/all.json",
    ] {
        let res = s.get(path).await;
        assert_eq!(res.status(), StatusCode::BAD_REQUEST, "{path}");
        assert!(res.text().await.unwrap().contains("invalid catalog name"));
    }

    // The name is judged before the parameters, as upstream judges it.
    let res = s.get("/catalogs/Not_Valid/api/v1/metas?version=1").await;
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    assert!(res.text().await.unwrap().contains("invalid catalog name"));
    let res = s
        .get("/catalogs/test-catalog/api/v1/metas?schema=olm.bundle&version=1")
        .await;
    assert!(res.text().await.unwrap().starts_with("invalid parameters"));

    for path in [
        "/catalogs/missing/all.json",
        "/catalogs/missing/api/v1/metas?package=alpha",
        "/catalogs/test-catalog/other",
    ] {
        let res = s.get(path).await;
        assert_eq!(res.status(), StatusCode::NOT_FOUND, "{path}");
        // Every error: Vary (as gzhttp adds it everywhere) and nosniff (as Go's http.Error).
        assert!(header(&res, VARY).eq_ignore_ascii_case("accept-encoding"));
        assert_eq!(header(&res, X_CONTENT_TYPE_OPTIONS), "nosniff");
    }
    // Other paths are Go's ServeMux answer.
    let res = s.get("/catalogs/test-catalog/other").await;
    assert_eq!(res.text().await.unwrap(), "404 page not found\n");

    for path in [
        "/catalogs/test-catalog/all.json",
        "/catalogs/test-catalog/api/v1/metas",
    ] {
        let res = s.client.post(s.url(path)).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::METHOD_NOT_ALLOWED, "{path}");
        let allow = header(&res, ALLOW).to_ascii_uppercase();
        assert!(allow.contains("GET") && allow.contains("HEAD"), "{allow}");
    }
    s.stop().await;
}

#[tokio::test]
async fn new_content_gets_a_new_etag() {
    let s = Server::start().await;
    let other = load_files([(
        "c.yaml",
        "---\nschema: olm.package\nname: gamma\ndefaultChannel: x\n".as_bytes(),
    )])
    .unwrap();
    let stored = s.store.put("test-catalog", "uid-1", &other).unwrap();
    let res = s
        .get_with(
            "/catalogs/test-catalog/all.json",
            &[(IF_NONE_MATCH, &s.etag())],
        )
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(header(&res, ETAG), format!("\"{}\"", stored.hash));
    assert_eq!(res.bytes().await.unwrap(), other.render());

    s.store.delete("test-catalog").unwrap();
    let res = s.get("/catalogs/test-catalog/all.json").await;
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    s.stop().await;
}

fn observed(registry: &prometheus::Registry, code: &str) -> u64 {
    registry
        .gather()
        .iter()
        .filter(|f| f.name() == "catalogd_http_request_duration_seconds")
        .flat_map(|f| f.get_metric().iter())
        .filter(|m| {
            m.get_label()
                .iter()
                .any(|l| l.name() == "code" && l.value() == code)
        })
        .map(|m| m.get_histogram().get_sample_count())
        .sum()
}

#[tokio::test]
async fn every_response_is_timed_by_status_code() {
    let s = Server::start().await;
    assert_eq!(observed(&s.registry, "404"), 0);
    assert_eq!(observed(&s.registry, "304"), 0);

    s.get("/catalogs/missing/all.json").await;
    s.get("/nothing/here").await;
    assert_eq!(observed(&s.registry, "404"), 2);
    let res = s
        .get_with(
            "/catalogs/test-catalog/all.json",
            &[(IF_NONE_MATCH, &s.etag())],
        )
        .await;
    assert_eq!(res.status(), StatusCode::NOT_MODIFIED);
    assert_eq!(observed(&s.registry, "304"), 1);
    s.client
        .head(s.url("/catalogs/test-catalog/all.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(observed(&s.registry, "200"), 1);

    let families = s.registry.gather();
    let family = families
        .iter()
        .find(|f| f.name() == "catalogd_http_request_duration_seconds")
        .unwrap();
    let buckets: Vec<f64> = family.get_metric()[0]
        .get_histogram()
        .get_bucket()
        .iter()
        .map(|b| b.upper_bound())
        .collect();
    assert_eq!(
        buckets,
        [
            0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.2, 1.6, 2.0, 2.4, 2.8, 3.2, 3.6,
            4.0, 10.0
        ]
    );
    s.stop().await;
}
