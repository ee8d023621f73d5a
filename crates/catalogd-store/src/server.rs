//! The HTTP content server: serves each Catalog's stored content on its own port.
//!
//! * `GET|HEAD /catalogs/{name}/all.json` (and upstream v1's `/catalogs/{name}/api/v1/all`):
//!   the whole canonical content as `application/jsonl`, `ETag: "<contentHash>"`,
//!   `Last-Modified`, conditional requests (`If-None-Match`, `If-Modified-Since`) answered with
//!   304, and the stored `all.json.gz` when the client accepts gzip (never compressed per
//!   request).
//! * `GET|HEAD /catalogs/{name}/api/v1/metas?schema=&package=&name=`: the lines whose blob
//!   matches every given parameter, read through the stored index without scanning the file;
//!   gzip-compressed on the fly when accepted (the whole file, when no parameter is given,
//!   comes precompressed like all.json).
//!
//! Invalid catalog names and unknown parameters are 400, missing catalogs 404, other methods
//! 405 with `Allow`. Every response is timed into `catalogd_http_request_duration_seconds{code}`
//! until its body has been sent, as upstream's handler-wrapping histogram does. Serving it on a
//! listener (and over HTTPS) is catalogd's (`catalogd::server::serve`).

use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Path, Query, Request, State};
use axum::http::header::{
    ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE, ETAG, IF_MODIFIED_SINCE,
    IF_NONE_MATCH, LAST_MODIFIED, VARY,
};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::{Stream, StreamExt};
use prometheus::{Histogram, HistogramOpts, HistogramVec, Registry};
use tower_http::compression::CompressionLayer;
use tower_http::compression::predicate::SizeAbove;

use crate::store::{Encoding, MetasFilter, Opened, Span, Store, StoreError, Stored};

/// The media type of catalog content, as upstream serves it.
pub const JSONL: &str = "application/jsonl";

/// Buckets of `catalogd_http_request_duration_seconds`, as upstream catalogd's.
pub const REQUEST_DURATION_BUCKETS: [f64; 19] = [
    0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.2, 1.6, 2.0, 2.4, 2.8, 3.2, 3.6, 4.0, 10.0,
];

/// Bytes read from disk per step of a response body: large enough that a 25 MB file takes a
/// hundred blocking reads, small enough that 64 concurrent downloads stay within a few MB.
const CHUNK: u64 = 256 * 1024;

/// The content server's metrics.
#[derive(Debug, Clone)]
pub struct ServerMetrics {
    request_duration: HistogramVec,
}

impl ServerMetrics {
    /// Creates the metrics and registers them into `registry`.
    pub fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let request_duration = HistogramVec::new(
            HistogramOpts::new(
                "catalogd_http_request_duration_seconds",
                "Histogram of request duration in seconds",
            )
            .buckets(REQUEST_DURATION_BUCKETS.to_vec()),
            &["code"],
        )?;
        registry.register(Box::new(request_duration.clone()))?;
        Ok(Self { request_duration })
    }

    /// `catalogd_http_request_duration_seconds{code}`.
    pub fn request_duration(&self) -> &HistogramVec {
        &self.request_duration
    }
}

/// The content server's routes over `store`.
pub fn router(store: Arc<Store>, metrics: ServerMetrics) -> Router {
    // Metas results are computed per request, so they are compressed per request; all.json
    // is served precompressed and is left alone (the layer skips responses that already have
    // a Content-Encoding).
    // Any non-empty selection is compressed when the client accepts gzip, so that a HEAD can
    // say in advance how the GET will be encoded.
    let metas_route = get(metas)
        .head(metas)
        .layer(CompressionLayer::new().compress_when(SizeAbove::new(0)));
    Router::new()
        .route("/catalogs/{name}/all.json", get(all_json).head(all_json))
        .route("/catalogs/{name}/api/v1/all", get(all_json).head(all_json))
        .route("/catalogs/{name}/api/v1/metas", metas_route)
        .with_state(store)
        // Outermost, so 404s of unknown paths, 405s and extractor rejections are timed too.
        .layer(from_fn_with_state(metrics, observe_duration))
}

async fn all_json(
    State(store): State<Arc<Store>>,
    Path(name): Path<String>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    let encoding = if accepts_gzip(&headers) {
        Coding::Precompressed
    } else {
        Coding::Identity
    };
    let conditions = Conditions::from_headers(&headers);
    let lookup = blocking(move || {
        let Some(stored) = store.current(&name)? else {
            return Ok(Lookup::NotFound(name));
        };
        if conditions.not_modified(&stored) {
            return Ok(Lookup::NotModified(stored));
        }
        Ok(match store.open_content(&name, encoding.file())? {
            Some(opened) => {
                let span = Span {
                    offset: 0,
                    length: opened.len,
                };
                Lookup::Content(opened, vec![span])
            }
            None => Lookup::NotFound(name),
        })
    })
    .await;
    respond(lookup, &method, encoding)
}

async fn metas(
    State(store): State<Arc<Store>>,
    Path(name): Path<String>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let Ok(Query(params)) = Query::<Vec<(String, String)>>::try_from_uri(&uri) else {
        return (StatusCode::BAD_REQUEST, "invalid query string\n").into_response();
    };
    let mut query = OwnedFilter::default();
    for (key, value) in params {
        // As upstream (Go's url.Values.Get), the first value of a repeated parameter wins.
        let slot = match key.as_str() {
            "schema" => &mut query.schema,
            "package" => &mut query.package,
            "name" => &mut query.name,
            _ => {
                return (
                    StatusCode::BAD_REQUEST,
                    format!(
                        "unknown query parameter {key:?}: the metas API accepts schema, package \
                         and name\n"
                    ),
                )
                    .into_response();
            }
        };
        slot.get_or_insert(value);
    }
    let filter = query.filter();
    let whole_file = filter.is_empty();
    // The whole file is served precompressed, like all.json; a selection is compressed by
    // the route's compression layer.
    let encoding = match (whole_file, accepts_gzip(&headers)) {
        (true, true) => Coding::Precompressed,
        (false, true) => Coding::OnTheFly,
        (_, false) => Coding::Identity,
    };
    let conditions = Conditions::from_headers(&headers);
    let lookup = blocking(move || {
        let Some(stored) = store.current(&name)? else {
            return Ok(Lookup::NotFound(name));
        };
        if conditions.not_modified(&stored) {
            return Ok(Lookup::NotModified(stored));
        }
        if whole_file {
            return Ok(match store.open_content(&name, encoding.file())? {
                Some(opened) => {
                    let span = Span {
                        offset: 0,
                        length: opened.len,
                    };
                    Lookup::Content(opened, vec![span])
                }
                None => Lookup::NotFound(name),
            });
        }
        Ok(match store.open_with_index(&name)? {
            Some((opened, index)) => {
                let spans = index.query(&query.filter());
                Lookup::Content(opened, spans)
            }
            None => Lookup::NotFound(name),
        })
    })
    .await;
    respond(lookup, &method, encoding)
}

/// The metas parameters, owned so they can move to the blocking thread.
#[derive(Debug, Default, Clone)]
struct OwnedFilter {
    schema: Option<String>,
    package: Option<String>,
    name: Option<String>,
}

impl OwnedFilter {
    fn filter(&self) -> MetasFilter<'_> {
        MetasFilter {
            schema: self.schema.as_deref(),
            package: self.package.as_deref(),
            name: self.name.as_deref(),
        }
    }
}

/// What the store said about a request.
enum Lookup {
    NotFound(String),
    NotModified(Stored),
    /// The opened file and the spans of it to send, in order.
    Content(Opened, Vec<Span>),
    /// 400, with this message.
    BadRequest(String),
    /// 500; the message is logged.
    Failed(String),
}

/// Runs store work on the blocking pool (the store does file-system I/O) and turns its
/// errors into the answers they call for.
async fn blocking(f: impl FnOnce() -> Result<Lookup, StoreError> + Send + 'static) -> Lookup {
    match tokio::task::spawn_blocking(f).await {
        Ok(Ok(lookup)) => lookup,
        Ok(Err(e @ StoreError::InvalidName { .. })) => Lookup::BadRequest(e.to_string()),
        Ok(Err(e)) => Lookup::Failed(e.to_string()),
        Err(e) => Lookup::Failed(format!("the store task failed: {e}")),
    }
}

/// How a response body is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Coding {
    /// As stored.
    Identity,
    /// The stored `all.json.gz`.
    Precompressed,
    /// Compressed per request by the route's compression layer (metas selections).
    OnTheFly,
}

impl Coding {
    /// The stored file to read.
    fn file(self) -> Encoding {
        match self {
            Coding::Precompressed => Encoding::Gzip,
            Coding::Identity | Coding::OnTheFly => Encoding::Identity,
        }
    }

    fn is_gzip(self) -> bool {
        self != Coding::Identity
    }
}

fn respond(lookup: Lookup, method: &Method, encoding: Coding) -> Response {
    let (opened, spans) = match lookup {
        Lookup::Content(opened, spans) => (opened, spans),
        Lookup::NotModified(stored) => {
            let mut res = StatusCode::NOT_MODIFIED.into_response();
            validators(res.headers_mut(), &stored, encoding.is_gzip());
            return res;
        }
        Lookup::NotFound(name) => {
            return (
                StatusCode::NOT_FOUND,
                format!("catalog {name:?} not found: it does not exist or has no content yet\n"),
            )
                .into_response();
        }
        Lookup::BadRequest(message) => {
            return (StatusCode::BAD_REQUEST, format!("{message}\n")).into_response();
        }
        Lookup::Failed(error) => {
            // The details are for the operator's logs, not for clients.
            tracing::error!(%error, "cannot serve catalog content");
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal error reading catalog content\n",
            )
                .into_response();
        }
    };
    let length: u64 = spans.iter().map(|s| s.length).sum();
    let encoding = match encoding {
        // An empty selection is an empty identity body, whatever the client accepts.
        Coding::OnTheFly if length == 0 => Coding::Identity,
        // all.json.gz is made in the background after a put: until then, identity.
        Coding::Precompressed if opened.encoding == Encoding::Identity => Coding::Identity,
        other => other,
    };
    let head = method == Method::HEAD;
    let body = if head && encoding == Coding::OnTheFly {
        // A body of unknown size, so that hyper does not add `Content-Length: 0`: the length
        // of the compressed GET body is not known in advance.
        Body::from_stream(futures::stream::empty::<io::Result<Bytes>>())
    } else if head {
        Body::empty()
    } else {
        Body::from_stream(read_spans(Arc::new(opened.file), spans))
    };
    let mut res = Response::new(body);
    let headers = res.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(JSONL));
    match encoding {
        Coding::Identity => {
            headers.insert(CONTENT_LENGTH, HeaderValue::from(length));
        }
        Coding::Precompressed => {
            headers.insert(CONTENT_LENGTH, HeaderValue::from(length));
            headers.insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        }
        // The compression layer compresses a GET's body (and drops its length, unknown until
        // sent); a HEAD says the same without compressing anything.
        Coding::OnTheFly if head => {
            headers.insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        }
        Coding::OnTheFly => {
            headers.insert(CONTENT_LENGTH, HeaderValue::from(length));
        }
    }
    validators(headers, &opened.stored, encoding.is_gzip());
    res
}

/// ETag, Last-Modified and Vary: on every 200 and 304. The ETag is the content hash: strong for
/// the identity body, weak (`W/"<hash>"`) for the gzip one, since RFC 9110 gives each content
/// coding its own strong validator. If-None-Match compares weakly, so either form validates.
fn validators(headers: &mut HeaderMap, stored: &Stored, gzip: bool) {
    let weak = if gzip { "W/" } else { "" };
    if let Ok(etag) = HeaderValue::from_str(&format!("{weak}\"{}\"", stored.hash)) {
        headers.insert(ETAG, etag);
    }
    if let Ok(date) = HeaderValue::from_str(&httpdate::fmt_http_date(stored.last_modified)) {
        headers.insert(LAST_MODIFIED, date);
    }
    // The body differs with Accept-Encoding, so caches must key on it.
    headers.insert(VARY, HeaderValue::from_static("accept-encoding"));
}

/// Streams `spans` of `file` in order, reading up to [`CHUNK`] bytes (of one or several
/// spans) per blocking read, so memory per response stays bounded whatever the file size.
fn read_spans(
    file: Arc<std::fs::File>,
    spans: Vec<Span>,
) -> impl Stream<Item = io::Result<Bytes>> + Send + 'static {
    struct Cursor {
        file: Arc<std::fs::File>,
        spans: Vec<Span>,
        /// Next span to read, and how far into it.
        next: usize,
        done_in_span: u64,
    }
    let cursor = Cursor {
        file,
        spans,
        next: 0,
        done_in_span: 0,
    };
    futures::stream::try_unfold(cursor, |mut cursor| async move {
        if cursor.next >= cursor.spans.len() {
            return Ok(None);
        }
        let (chunk, cursor) = tokio::task::spawn_blocking(move || {
            let mut buf = Vec::new();
            while let Some(span) = cursor.spans.get(cursor.next) {
                let room = CHUNK.saturating_sub(buf.len() as u64);
                if room == 0 {
                    break;
                }
                let left = span.length - cursor.done_in_span;
                let take = left.min(room);
                let start = buf.len();
                buf.resize(start + take as usize, 0);
                cursor
                    .file
                    .read_exact_at(&mut buf[start..], span.offset + cursor.done_in_span)?;
                cursor.done_in_span += take;
                if cursor.done_in_span == span.length {
                    cursor.next += 1;
                    cursor.done_in_span = 0;
                }
            }
            io::Result::Ok((buf, cursor))
        })
        .await
        .map_err(io::Error::other)??;
        Ok(Some((Bytes::from(chunk), cursor)))
    })
}

/// True when the request's Accept-Encoding allows gzip (`gzip`, `x-gzip` or `*` with a
/// non-zero q-value, an explicit gzip entry taking precedence over `*`).
fn accepts_gzip(headers: &HeaderMap) -> bool {
    let mut gzip = None;
    let mut any = None;
    for value in headers.get_all(ACCEPT_ENCODING) {
        let Ok(value) = value.to_str() else { continue };
        for item in value.split(',') {
            let mut parts = item.split(';');
            let coding = parts.next().unwrap_or_default().trim();
            let q = parts
                .filter_map(|p| {
                    let (k, v) = p.split_once('=')?;
                    k.trim().eq_ignore_ascii_case("q").then(|| v.trim())
                })
                .next()
                .map(|v| v.parse::<f32>().unwrap_or(0.0))
                .unwrap_or(1.0);
            if coding.eq_ignore_ascii_case("gzip") || coding.eq_ignore_ascii_case("x-gzip") {
                gzip = Some(q);
            } else if coding == "*" {
                any = Some(q);
            }
        }
    }
    gzip.or(any).is_some_and(|q| q > 0.0)
}

/// The request's conditional headers (RFC 9110 §13).
#[derive(Debug, Clone, Default)]
struct Conditions {
    /// The If-None-Match entity tags, if the header is present.
    if_none_match: Option<Vec<String>>,
    if_modified_since: Option<SystemTime>,
}

impl Conditions {
    fn from_headers(headers: &HeaderMap) -> Self {
        let if_none_match = headers.contains_key(IF_NONE_MATCH).then(|| {
            headers
                .get_all(IF_NONE_MATCH)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .flat_map(|v| v.split(','))
                .map(|tag| tag.trim().to_owned())
                .collect()
        });
        let if_modified_since = headers
            .get(IF_MODIFIED_SINCE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| httpdate::parse_http_date(v).ok());
        Self {
            if_none_match,
            if_modified_since,
        }
    }

    /// True when the client's copy is current: If-None-Match matches (weak comparison, `*`
    /// matches anything), or, only when there is no If-None-Match, the content is not newer
    /// than If-Modified-Since (at the one-second resolution of HTTP dates).
    fn not_modified(&self, stored: &Stored) -> bool {
        if let Some(tags) = &self.if_none_match {
            return tags.iter().any(|tag| {
                let tag = tag.strip_prefix("W/").unwrap_or(tag);
                tag == "*"
                    || tag
                        .strip_prefix('"')
                        .and_then(|t| t.strip_suffix('"'))
                        .is_some_and(|t| t == stored.hash)
            });
        }
        let secs = |t: SystemTime| t.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).ok();
        match (
            self.if_modified_since.and_then(secs),
            secs(stored.last_modified),
        ) {
            (Some(since), Some(modified)) => modified <= since,
            _ => false,
        }
    }
}

/// Observes the request duration when dropped: when the response body has been sent, or the
/// client went away.
struct ObserveOnDrop {
    histogram: Histogram,
    start: Instant,
}

impl ObserveOnDrop {
    /// Referenced from the body stream so the guard lives exactly as long as the body.
    fn keep(&self) {}
}

impl Drop for ObserveOnDrop {
    fn drop(&mut self) {
        self.histogram.observe(self.start.elapsed().as_secs_f64());
    }
}

async fn observe_duration(
    State(metrics): State<ServerMetrics>,
    request: Request,
    next: Next,
) -> Response {
    let start = Instant::now();
    let response = next.run(request).await;
    let histogram = metrics
        .request_duration
        .with_label_values(&[response.status().as_str()]);
    // Bodies of known size here are small (errors, 304s, HEADs): observe now, so the metric
    // is updated before the client sees the response. Streamed bodies are timed to their end.
    if response.body().size_hint().exact().is_some() {
        histogram.observe(start.elapsed().as_secs_f64());
        return response;
    }
    let guard = ObserveOnDrop { histogram, start };
    response.map(|body| {
        Body::from_stream(body.into_data_stream().map(move |chunk| {
            guard.keep();
            chunk
        }))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn gzip_acceptance_follows_q_values() {
        assert!(accepts_gzip(&headers(&[("accept-encoding", "gzip")])));
        assert!(accepts_gzip(&headers(&[(
            "accept-encoding",
            "br, GZIP;q=0.5"
        )])));
        assert!(accepts_gzip(&headers(&[("accept-encoding", "*")])));
        assert!(accepts_gzip(&headers(&[("accept-encoding", "x-gzip")])));
        assert!(!accepts_gzip(&headers(&[])));
        assert!(!accepts_gzip(&headers(&[("accept-encoding", "identity")])));
        assert!(!accepts_gzip(&headers(&[("accept-encoding", "gzip;q=0")])));
        assert!(!accepts_gzip(&headers(&[(
            "accept-encoding",
            "*, gzip;q=0"
        )])));
    }

    #[test]
    fn conditions_compare_etags_weakly_and_dates_by_second() {
        let t = UNIX_EPOCH + std::time::Duration::from_millis(1_700_000_000_500);
        let stored = Stored {
            hash: "abc".into(),
            size: 1,
            last_modified: t,
        };
        let c = |pairs: &[(&'static str, &str)]| {
            Conditions::from_headers(&headers(pairs)).not_modified(&stored)
        };
        assert!(c(&[("if-none-match", "\"abc\"")]));
        assert!(c(&[("if-none-match", "\"x\", W/\"abc\"")]));
        assert!(c(&[("if-none-match", "*")]));
        assert!(!c(&[("if-none-match", "\"x\"")]));
        assert!(!c(&[("if-none-match", "abc")]));
        let date = httpdate::fmt_http_date(t);
        assert!(c(&[("if-modified-since", &date)]));
        let earlier = httpdate::fmt_http_date(t - std::time::Duration::from_secs(1));
        assert!(!c(&[("if-modified-since", &earlier)]));
        // If-None-Match wins over If-Modified-Since.
        assert!(!c(&[
            ("if-none-match", "\"x\""),
            ("if-modified-since", &date)
        ]));
        assert!(!c(&[]));
    }
}
