//! The HTTP content server: serves each Catalog's stored content on its own port, as upstream
//! catalogd's (Go's `http.ServeContent` behind `gzhttp`) serves it, where that is observable:
//!
//! * `GET|HEAD /catalogs/{name}/api/v1/all` (and our `/catalogs/{name}/all.json`): the whole
//!   canonical content as `application/jsonl`; `Last-Modified` and conditional requests
//!   ([`crate::conditions`]: 304, 412), one byte range ([`crate::range`]: 206, 416,
//!   `Accept-Ranges: bytes` on identity bodies), and the stored `all.json.gz` when the client
//!   accepts gzip and the content has 1,024 bytes or more (gzhttp's threshold; never for HEAD,
//!   never for a range). Beyond upstream: `ETag: "<contentHash>"` and `If-None-Match`.
//! * `GET|HEAD /catalogs/{name}/api/v1/metas?schema=&package=&name=`: the lines whose blob
//!   matches every given parameter (the first of a repeated one), read through the stored index
//!   without scanning the file, gzip-compressed on the fly under the same rule; no match is 200
//!   with an empty body; the whole file when no parameter is given.
//!
//! The name is checked first (not a DNS-1123 subdomain: 400), then the parameters (any other:
//! 400 "invalid parameters"), then the catalog (none: 404); other paths are `404 page not
//! found`, other methods 405 with `Allow`. Every response carries `Vary: Accept-Encoding`, and
//! every error `X-Content-Type-Options: nosniff`. Every response is timed into
//! `catalogd_http_request_duration_seconds{code}` until its body has been sent, as upstream's
//! handler-wrapping histogram does. Serving it on a listener (and over HTTPS) is catalogd's
//! (`catalogd::server::serve`).

use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Path, Query, Request, State};
use axum::http::header::{
    ACCEPT_ENCODING, ACCEPT_RANGES, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_RANGE, CONTENT_TYPE,
    ETAG, LAST_MODIFIED, RANGE, VARY, X_CONTENT_TYPE_OPTIONS,
};
use axum::http::{Extensions, HeaderMap, HeaderValue, Method, StatusCode, Uri, Version};
use axum::middleware::{Next, from_fn_with_state, map_request, map_response};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::{Stream, StreamExt};
use prometheus::{Histogram, HistogramOpts, HistogramVec, Registry};
use tower_http::compression::CompressionLayer;

use crate::conditions::{Conditions, Verdict};
use crate::range::{Ranged, ranged};
use crate::store::{Encoding, MetasFilter, Opened, Span, Store, StoreError, Stored};

/// The media type of catalog content, as upstream serves it.
pub const JSONL: &str = "application/jsonl";

/// Buckets of `catalogd_http_request_duration_seconds`, as upstream catalogd's.
pub const REQUEST_DURATION_BUCKETS: [f64; 19] = [
    0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.2, 1.6, 2.0, 2.4, 2.8, 3.2, 3.6, 4.0, 10.0,
];

/// The smallest body that is compressed: gzhttp's `DefaultMinSize`, which upstream catalogd
/// uses (its documentation says 1,400 bytes; its code compresses from 1,024).
pub const GZIP_MIN_BYTES: u64 = 1024;

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
    // Metas selections are computed per request, so they are compressed per request: only
    // those `respond` marks ([`Compress`]); all.json is served precompressed.
    let compress = |_: StatusCode, _: Version, _: &HeaderMap, extensions: &Extensions| {
        extensions.get::<Compress>().is_some()
    };
    let metas_route = get(metas)
        .head(metas)
        .layer(CompressionLayer::new().compress_when(compress))
        .layer(map_request(one_reading_of_accept_encoding));
    Router::new()
        .route("/catalogs/{name}/all.json", get(all_json).head(all_json))
        .route("/catalogs/{name}/api/v1/all", get(all_json).head(all_json))
        .route("/catalogs/{name}/api/v1/metas", metas_route)
        .fallback(page_not_found)
        .with_state(store)
        .layer(map_response(every_response))
        // Outermost, so 404s of unknown paths, 405s and extractor rejections are timed too.
        .layer(from_fn_with_state(metrics, observe_duration))
}

/// Marks a response whose body the metas route's compression layer compresses.
#[derive(Debug, Clone, Copy)]
struct Compress;

/// Rewrites `Accept-Encoding` to what [`accepts_gzip`] reads in it (`gzip` or `identity`), so
/// that the compression layer and the handler, which chooses the validator and marks the body,
/// never read it two ways (tower-http ignores `*`, for one).
async fn one_reading_of_accept_encoding(mut request: Request) -> Request {
    let reading = if accepts_gzip(request.headers()) {
        "gzip"
    } else {
        "identity"
    };
    request
        .headers_mut()
        .insert(ACCEPT_ENCODING, HeaderValue::from_static(reading));
    request
}

/// Any other path: Go's `ServeMux` answer, as upstream's.
async fn page_not_found() -> Response {
    (StatusCode::NOT_FOUND, "404 page not found\n").into_response()
}

/// What every response carries: `Vary: Accept-Encoding` (gzhttp adds it to every response,
/// errors included, so caches key on it), and on errors `nosniff` (as Go's `http.Error`).
async fn every_response(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(VARY, HeaderValue::from_static("accept-encoding"));
    // Go's http.Error sets it; a bare 412 (WriteHeader) has no body and no such header.
    let error = response.status().is_client_error() || response.status().is_server_error();
    if error && response.status() != StatusCode::PRECONDITION_FAILED {
        response
            .headers_mut()
            .insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    }
    response
}

/// How the whole content is sent: gzip (precompressed) when accepted and the content has
/// [`GZIP_MIN_BYTES`] or more, never for a HEAD (gzhttp compresses no HEAD).
fn whole_coding(gzip: bool, head: bool, size: u64) -> Coding {
    if gzip && !head && size >= GZIP_MIN_BYTES {
        Coding::Precompressed
    } else {
        Coding::Identity
    }
}

async fn all_json(
    State(store): State<Arc<Store>>,
    Path(name): Path<String>,
    method: Method,
    headers: HeaderMap,
) -> Response {
    let gzip = accepts_gzip(&headers);
    let head = method == Method::HEAD;
    let conditions = Conditions::from_headers(&headers);
    // An empty Range is no range, as Go reads it.
    let range = headers
        .get(RANGE)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.trim().is_empty())
        .map(str::to_owned);
    let lookup = blocking(move || {
        let Some(stored) = store.current(&name)? else {
            return Ok(Lookup::NotFound(name));
        };
        if range.is_some() {
            // A range is of the identity body (gzhttp leaves ranged responses alone), judged
            // against the file that is sent.
            let Some(opened) = store.open_content(&name, Encoding::Identity)? else {
                return Ok(Lookup::NotFound(name));
            };
            let asked = if conditions.range_applies(&opened.stored) {
                ranged(range.as_deref(), opened.len)
            } else {
                Ranged::Whole
            };
            let sent = opened.stored.clone();
            let answer = match asked {
                Ranged::Invalid => Some(Lookup::InvalidRange),
                Ranged::Unsatisfiable => Some(Lookup::Unsatisfiable(opened.len)),
                Ranged::Part { start, length } => Some(Lookup::Part(
                    opened,
                    Span {
                        offset: start,
                        length,
                    },
                )),
                // A range that does not apply: the whole body, compressed as any other.
                Ranged::Whole if whole_coding(gzip, head, opened.len) == Coding::Identity => {
                    return Ok(Lookup::whole(Coding::Identity, opened).judged_whole(&conditions));
                }
                Ranged::Whole => None,
            };
            // Preconditions come before the range, as in Go (an identity answer's validator).
            if let Some(answer) = answer {
                return Ok(Lookup::judged(&conditions, &sent, false).unwrap_or(answer));
            }
        }
        let coding = whole_coding(gzip, head, stored.size);
        let Some(opened) = store.open_content(&name, coding.file())? else {
            return Ok(Lookup::NotFound(name));
        };
        let whole = Lookup::whole(coding, opened);
        Ok(whole.judged_whole(&conditions))
    })
    .await;
    let mut res = respond(lookup, &method);
    // Only this route takes ranges, of identity bodies (gzhttp drops the header from the
    // bodies it compresses).
    if matches!(res.status(), StatusCode::OK | StatusCode::PARTIAL_CONTENT)
        && !res.headers().contains_key(CONTENT_ENCODING)
    {
        res.headers_mut()
            .insert(ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    }
    res
}

async fn metas(
    State(store): State<Arc<Store>>,
    Path(name): Path<String>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    // As upstream: the name first, then the parameters, then the catalog.
    if let Err(e) = crate::store::validate_catalog_name(&name) {
        return (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response();
    }
    let Ok(Query(params)) = Query::<Vec<(String, String)>>::try_from_uri(&uri) else {
        return (
            StatusCode::BAD_REQUEST,
            "invalid parameters: a query string that does not parse\n",
        )
            .into_response();
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
                        "invalid parameters: unknown query parameter {key:?}; the metas API \
                         accepts schema, package and name\n"
                    ),
                )
                    .into_response();
            }
        };
        slot.get_or_insert(value);
    }
    let whole_file = query.filter().is_empty();
    let gzip = accepts_gzip(&headers);
    let head = method == Method::HEAD;
    let conditions = Conditions::from_headers(&headers);
    let lookup = blocking(move || {
        if whole_file {
            let Some(stored) = store.current(&name)? else {
                return Ok(Lookup::NotFound(name));
            };
            let coding = whole_coding(gzip, head, stored.size);
            return Ok(match store.open_content(&name, coding.file())? {
                Some(opened) => Lookup::whole(coding, opened).judged_whole(&conditions),
                None => Lookup::NotFound(name),
            });
        }
        let Some((opened, index)) = store.open_with_index(&name)? else {
            return Ok(Lookup::NotFound(name));
        };
        let spans = index.query(&query.filter());
        let length: u64 = spans.iter().map(|s| s.length).sum();
        let coding = if gzip && !head && length >= GZIP_MIN_BYTES {
            Coding::OnTheFly
        } else {
            Coding::Identity
        };
        Ok(Lookup::Content(coding, opened, spans).judged_whole(&conditions))
    })
    .await;
    respond(lookup, &method)
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
    /// 304, with the validators of a 200 that would be gzip (or not).
    NotModified(Stored, bool),
    /// 412 (with the content's Last-Modified, as Go sends it).
    PreconditionFailed(Stored),
    /// 416: no range overlaps content of this many bytes.
    Unsatisfiable(u64),
    /// 416: the Range is not a byte range.
    InvalidRange,
    /// The opened file, how it is sent, and the spans of it to send, in order.
    Content(Coding, Opened, Vec<Span>),
    /// 206: one span of the opened identity file.
    Part(Opened, Span),
    /// 400, with this message.
    BadRequest(String),
    /// 500; the message is logged.
    Failed(String),
}

impl Lookup {
    /// The answer the conditional headers give before any file is opened, if any (`gzip`:
    /// whether the 200 would be gzip).
    fn judged(conditions: &Conditions, stored: &Stored, gzip: bool) -> Option<Lookup> {
        match conditions.verdict(stored) {
            Verdict::Proceed => None,
            Verdict::NotModified => Some(Lookup::NotModified(stored.clone(), gzip)),
            Verdict::PreconditionFailed => Some(Lookup::PreconditionFailed(stored.clone())),
        }
    }

    /// A 200 of opened content, unless the conditional headers, judged against that very
    /// content (not whatever was current a moment before: it may have been swapped since),
    /// answer first; a 304 carries the validator the 200 would have.
    fn judged_whole(self, conditions: &Conditions) -> Lookup {
        let Lookup::Content(coding, opened, spans) = self else {
            return self;
        };
        match Lookup::judged(conditions, &opened.stored, coding.is_gzip()) {
            Some(early) => early,
            None => Lookup::Content(coding, opened, spans),
        }
    }

    /// The whole of `opened`, sent as `coding` (identity when the gzip asked for is not made
    /// yet: `open_content` then opened all.json).
    fn whole(coding: Coding, opened: Opened) -> Lookup {
        let coding = match coding {
            Coding::Precompressed if opened.encoding == Encoding::Identity => Coding::Identity,
            other => other,
        };
        let span = Span {
            offset: 0,
            length: opened.len,
        };
        Lookup::Content(coding, opened, vec![span])
    }
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

fn respond(lookup: Lookup, method: &Method) -> Response {
    let (coding, opened, spans, partial) = match lookup {
        Lookup::Content(coding, opened, spans) => (coding, opened, spans, None),
        Lookup::Part(opened, span) => (Coding::Identity, opened, vec![span], Some(span)),
        Lookup::NotModified(stored, gzip) => {
            let mut res = StatusCode::NOT_MODIFIED.into_response();
            validators(res.headers_mut(), &stored, gzip);
            return res;
        }
        // As Go's ServeContent: no body, the content's Last-Modified.
        Lookup::PreconditionFailed(stored) => {
            let mut res = StatusCode::PRECONDITION_FAILED.into_response();
            if let Ok(date) = HeaderValue::from_str(&httpdate::fmt_http_date(stored.last_modified))
            {
                res.headers_mut().insert(LAST_MODIFIED, date);
            }
            return res;
        }
        Lookup::InvalidRange => {
            return (StatusCode::RANGE_NOT_SATISFIABLE, "invalid range\n").into_response();
        }
        Lookup::Unsatisfiable(size) => {
            let mut res = (
                StatusCode::RANGE_NOT_SATISFIABLE,
                "invalid range: failed to overlap\n",
            )
                .into_response();
            if let Ok(range) = HeaderValue::from_str(&format!("bytes */{size}")) {
                res.headers_mut().insert(CONTENT_RANGE, range);
            }
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
    let body = if method == Method::HEAD {
        Body::empty()
    } else {
        Body::from_stream(read_spans(Arc::new(opened.file), spans))
    };
    let mut res = Response::new(body);
    let headers = res.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(JSONL));
    match coding {
        Coding::Identity => {
            headers.insert(CONTENT_LENGTH, HeaderValue::from(length));
        }
        Coding::Precompressed => {
            headers.insert(CONTENT_LENGTH, HeaderValue::from(length));
            headers.insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        }
        // The compression layer compresses the body (and drops its length, unknown until
        // sent).
        Coding::OnTheFly => {
            headers.insert(CONTENT_LENGTH, HeaderValue::from(length));
            res.extensions_mut().insert(Compress);
        }
    }
    let headers = res.headers_mut();
    validators(headers, &opened.stored, coding.is_gzip());
    if let Some(span) = partial {
        let end = span.offset + span.length - 1;
        if let Ok(range) =
            HeaderValue::from_str(&format!("bytes {}-{end}/{}", span.offset, opened.len))
        {
            headers.insert(CONTENT_RANGE, range);
        }
        *res.status_mut() = StatusCode::PARTIAL_CONTENT;
    }
    res
}

/// ETag and Last-Modified: on every 200, 206 and 304. The ETag is the content hash:
/// strong for the identity body, weak (`W/"<hash>"`) for the gzip one, since RFC 9110 gives
/// each content coding its own strong validator. If-None-Match compares weakly, so either
/// form validates.
fn validators(headers: &mut HeaderMap, stored: &Stored, gzip: bool) {
    let weak = if gzip { "W/" } else { "" };
    if let Ok(etag) = HeaderValue::from_str(&format!("{weak}\"{}\"", stored.hash)) {
        headers.insert(ETAG, etag);
    }
    if let Ok(date) = HeaderValue::from_str(&httpdate::fmt_http_date(stored.last_modified)) {
        headers.insert(LAST_MODIFIED, date);
    }
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
}
