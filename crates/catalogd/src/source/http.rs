//! The `http` source: a single FBC file (JSON or YAML) or a `.tar.gz` of an FBC directory,
//! fetched with a GET. An unchanged catalog is not downloaded again (`If-None-Match` /
//! `If-Modified-Since`, or a `sha256` pin already served); the body is size-limited, time-limited
//! and, when pinned, checked.

use std::io::Read;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Client;
use kube::api::Api;
use olm_api::catalog::{
    Catalog, HttpSource as HttpSpec, ResolvedHttpSource, ResolvedSource, SourceType,
};
use sha2::{Digest, Sha256};

use super::{CatalogSource, Fetched, SourceError, reasons};

/// Fetches catalogs over HTTP(S).
pub struct HttpSource {
    client: Client,
    own_namespace: String,
    max_bytes: u64,
    timeout: Duration,
}

impl HttpSource {
    /// A source reading Secrets and CA bundles from `own_namespace`, accepting bodies (and
    /// unpacked archives) up to `max_bytes`, and giving up on a request after `timeout`.
    pub fn new(client: Client, own_namespace: String, max_bytes: u64, timeout: Duration) -> Self {
        Self {
            client,
            own_namespace,
            max_bytes,
            timeout,
        }
    }

    async fn http_client(&self, spec: &HttpSpec) -> Result<reqwest::Client, SourceError> {
        let mut builder = reqwest::Client::builder()
            .timeout(self.timeout)
            .connect_timeout(self.timeout.min(Duration::from_secs(30)));
        if let Some(ca) = &spec.ca_bundle {
            let key = ca.key.as_deref().unwrap_or("ca.crt");
            let cm = Api::<ConfigMap>::namespaced(self.client.clone(), &self.own_namespace)
                .get_opt(&ca.config_map)
                .await
                .map_err(|e| {
                    SourceError::new(
                        reasons::UNPACK_FAILED,
                        format!("reading CA bundle ConfigMap {}: {e}", ca.config_map),
                    )
                })?
                .ok_or_else(|| {
                    SourceError::new(
                        reasons::INVALID_CREDENTIALS,
                        format!(
                            "CA bundle ConfigMap {}/{} not found",
                            self.own_namespace, ca.config_map
                        ),
                    )
                })?;
            let pem = cm.data.as_ref().and_then(|d| d.get(key)).ok_or_else(|| {
                SourceError::new(
                    reasons::INVALID_CREDENTIALS,
                    format!("CA bundle ConfigMap {} has no key {key:?}", ca.config_map),
                )
            })?;
            let certs = reqwest::Certificate::from_pem_bundle(pem.as_bytes()).map_err(|e| {
                SourceError::new(
                    reasons::INVALID_CREDENTIALS,
                    format!("CA bundle {}/{key} is not PEM: {e}", ca.config_map),
                )
            })?;
            for cert in certs {
                builder = builder.add_root_certificate(cert);
            }
        }
        builder.build().map_err(|e| {
            SourceError::new(
                reasons::UNPACK_FAILED,
                format!("building the HTTP client: {e}"),
            )
        })
    }

    async fn authorize(
        &self,
        spec: &HttpSpec,
        request: reqwest::RequestBuilder,
    ) -> Result<reqwest::RequestBuilder, SourceError> {
        let Some(secret_ref) = &spec.auth_secret else {
            return Ok(request);
        };
        let secret = Api::<Secret>::namespaced(self.client.clone(), &self.own_namespace)
            .get_opt(&secret_ref.name)
            .await
            .map_err(|e| {
                SourceError::new(
                    reasons::UNPACK_FAILED,
                    format!("reading Secret {}: {e}", secret_ref.name),
                )
            })?
            .ok_or_else(|| {
                SourceError::new(
                    reasons::INVALID_CREDENTIALS,
                    format!(
                        "auth Secret {}/{} not found",
                        self.own_namespace, secret_ref.name
                    ),
                )
            })?;
        let data = secret.data.unwrap_or_default();
        let text = |k: &str| {
            data.get(k)
                .map(|v| String::from_utf8_lossy(&v.0).into_owned())
        };
        match (text("token"), text("username"), text("password")) {
            (Some(token), _, _) => Ok(request.bearer_auth(token)),
            (None, Some(user), password) => Ok(request.basic_auth(user, password)),
            _ => Err(SourceError::new(
                reasons::INVALID_CREDENTIALS,
                format!(
                    "auth Secret {} has neither a \"token\" nor a \"username\" key",
                    secret_ref.name
                ),
            )),
        }
    }

    async fn get(
        &self,
        catalog: &Catalog,
        previous: Option<&ResolvedSource>,
        have_content: bool,
    ) -> Result<Fetched, SourceError> {
        let spec = catalog.spec.source.http.clone().unwrap_or_default();
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let last = previous
            .and_then(|p| p.http.as_ref())
            .filter(|h| h.url == spec.url && have_content);
        // Pinned content we already serve needs no download at all.
        if let (Some(pin), Some(last)) = (&spec.sha256, last)
            && *pin == last.sha256
        {
            let resolved = resolved(ResolvedHttpSource {
                last_poll_attempt: Some(now),
                ..last.clone()
            });
            return Ok(Fetched::Unchanged { resolved });
        }
        let client = self.http_client(&spec).await?;
        let mut request = client.get(&spec.url);
        // Conditional only when a 304 would be good news: not when a new pin must be checked
        // against the body.
        if let Some(last) = last.filter(|l| spec.sha256.as_ref().is_none_or(|pin| *pin == l.sha256))
        {
            if let Some(etag) = &last.etag {
                request = request.header(reqwest::header::IF_NONE_MATCH, etag);
            }
            if let Some(modified) = &last.last_modified {
                request = request.header(reqwest::header::IF_MODIFIED_SINCE, modified);
            }
        }
        let request = self.authorize(&spec, request).await?;
        let response = request.send().await.map_err(|e| {
            SourceError::new(
                reasons::UNPACK_FAILED,
                format!("GET {}: {}", spec.url, describe(&e)),
            )
        })?;
        let status = response.status();
        if status == reqwest::StatusCode::NOT_MODIFIED
            && let Some(last) = last
        {
            return Ok(Fetched::Unchanged {
                resolved: resolved(ResolvedHttpSource {
                    last_poll_attempt: Some(now),
                    ..last.clone()
                }),
            });
        }
        if status == reqwest::StatusCode::NOT_FOUND || status == reqwest::StatusCode::GONE {
            return Err(SourceError::new(
                reasons::SOURCE_NOT_FOUND,
                format!("GET {}: HTTP {status}", spec.url),
            ));
        }
        if !status.is_success() {
            return Err(SourceError::new(
                reasons::UNPACK_FAILED,
                format!("GET {}: HTTP {status}", spec.url),
            ));
        }
        let header = |name: reqwest::header::HeaderName| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let etag = header(reqwest::header::ETAG);
        let last_modified = header(reqwest::header::LAST_MODIFIED);
        if response
            .content_length()
            .is_some_and(|n| n > self.max_bytes)
        {
            return Err(self.too_large(&spec.url));
        }
        let mut body = Vec::new();
        let mut stream = response.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| {
                SourceError::new(
                    reasons::UNPACK_FAILED,
                    format!("GET {}: reading the body: {}", spec.url, describe(&e)),
                )
            })?;
            if body.len() as u64 + chunk.len() as u64 > self.max_bytes {
                return Err(self.too_large(&spec.url));
            }
            body.extend_from_slice(&chunk);
        }
        let sha256 = hex(&Sha256::digest(&body));
        if let Some(pin) = &spec.sha256
            && *pin != sha256
        {
            return Err(SourceError::new(
                reasons::CHECKSUM_MISMATCH,
                format!(
                    "{} has sha256 {sha256}, but spec.source.http.sha256 pins {pin}",
                    spec.url
                ),
            ));
        }
        let files = self.files(&spec.url, body)?;
        let resolved = resolved(ResolvedHttpSource {
            url: spec.url.clone(),
            sha256,
            etag,
            last_modified,
            last_poll_attempt: Some(now),
        });
        Ok(Fetched::Content { files, resolved })
    }

    fn too_large(&self, url: &str) -> SourceError {
        SourceError::new(
            reasons::CONTENT_TOO_LARGE,
            format!(
                "{url} is larger than {} bytes, the most catalogd accepts (--max-content-bytes)",
                self.max_bytes
            ),
        )
    }

    /// The body as files: a gzip body is a tar archive of an FBC directory; anything else is a
    /// single FBC file named after the URL.
    fn files(&self, url: &str, body: Vec<u8>) -> Result<Vec<(String, Vec<u8>)>, SourceError> {
        if !body.starts_with(&[0x1f, 0x8b]) {
            let name = url
                .rsplit('/')
                .next()
                .filter(|n| !n.is_empty())
                .unwrap_or("catalog")
                .to_owned();
            return Ok(vec![(name, body)]);
        }
        let archive_error = |e: std::io::Error| {
            SourceError::new(
                reasons::UNPACK_FAILED,
                format!("{url} is gzip, but not a readable .tar.gz: {e}"),
            )
        };
        // The limit applies to the unpacked size too, so a small archive cannot expand without bound.
        let mut tarball = Vec::new();
        flate2::read::GzDecoder::new(body.as_slice())
            .take(self.max_bytes + 1)
            .read_to_end(&mut tarball)
            .map_err(archive_error)?;
        if tarball.len() as u64 > self.max_bytes {
            return Err(self.too_large(url));
        }
        let mut archive = tar::Archive::new(tarball.as_slice());
        let mut files = Vec::new();
        let mut total = 0u64;
        for entry in archive.entries().map_err(archive_error)? {
            let mut entry = entry.map_err(archive_error)?;
            if !entry.header().entry_type().is_file() {
                continue;
            }
            let path = entry
                .path()
                .map_err(archive_error)?
                .to_string_lossy()
                .trim_start_matches("./")
                .to_owned();
            if path.split('/').any(|c| c == "..") || path.starts_with('/') {
                return Err(SourceError::new(
                    reasons::UNPACK_FAILED,
                    format!("{url}: archive entry {path:?} escapes the catalog"),
                ));
            }
            let mut content = Vec::new();
            entry.read_to_end(&mut content).map_err(archive_error)?;
            total += content.len() as u64;
            if total > self.max_bytes {
                return Err(self.too_large(url));
            }
            files.push((path, content));
        }
        // Walk order, as a directory would be read.
        files.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(files)
    }
}

fn resolved(http: ResolvedHttpSource) -> ResolvedSource {
    ResolvedSource {
        type_: Some(SourceType::Http),
        http: Some(http),
        ..Default::default()
    }
}

/// reqwest's error with its causes, so "timed out" or "connection refused" is visible.
fn describe(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    if e.is_timeout() {
        text.push_str(" (timed out; see --http-timeout-seconds)");
    }
    text
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl CatalogSource for HttpSource {
    fn fetch<'a>(
        &'a self,
        catalog: &'a Catalog,
        previous: Option<&'a ResolvedSource>,
        have_content: bool,
    ) -> BoxFuture<'a, Result<Fetched, SourceError>> {
        self.get(catalog, previous, have_content).boxed()
    }
}
