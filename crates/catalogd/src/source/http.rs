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
use olm_api::catalog::{
    Catalog, HttpSource as HttpSpec, ResolvedHttpSource, ResolvedSource, SourceType,
};
use sha2::{Digest, Sha256};

use super::{CatalogSource, Fetched, SourceError, read_object, reasons};

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
            let missing = SourceError::new(
                reasons::INVALID_CREDENTIALS,
                format!(
                    "CA bundle ConfigMap {}/{} not found",
                    self.own_namespace, ca.config_map
                ),
            );
            let cm: ConfigMap = read_object(
                &self.client,
                &self.own_namespace,
                &ca.config_map,
                "CA bundle ConfigMap",
                missing,
            )
            .await?;
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
        // Credentials travel only over TLS, so a Catalog cannot send them in clear text.
        if !spec.url.starts_with("https://") {
            return Err(SourceError::new(
                reasons::INVALID_CREDENTIALS,
                format!(
                    "authSecret {} is sent only to https URLs, and {} is not one",
                    secret_ref.name,
                    redact(&spec.url)
                ),
            ));
        }
        let missing = SourceError::new(
            reasons::INVALID_CREDENTIALS,
            format!(
                "auth Secret {}/{} not found",
                self.own_namespace, secret_ref.name
            ),
        );
        let secret: Secret = read_object(
            &self.client,
            &self.own_namespace,
            &secret_ref.name,
            "Secret",
            missing,
        )
        .await?;
        // A ServiceAccount token is never a catalog credential: refusing it keeps Catalog authors
        // from sending the namespace's service identities to a server of their choice.
        if secret.type_.as_deref() == Some("kubernetes.io/service-account-token") {
            return Err(SourceError::new(
                reasons::INVALID_CREDENTIALS,
                format!(
                    "auth Secret {} is a ServiceAccount token, which catalogd never sends",
                    secret_ref.name
                ),
            ));
        }
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
        let shown = redact(&spec.url);
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
        let conditional = last.filter(|l| spec.sha256.as_ref().is_none_or(|pin| *pin == l.sha256));
        if let Some(last) = conditional {
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
                format!("GET {shown}: {}", describe(e)),
            )
        })?;
        let status = response.status();
        // A 304 counts only as the answer to a conditional request we sent.
        if status == reqwest::StatusCode::NOT_MODIFIED
            && let Some(last) = conditional
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
                format!("GET {shown}: HTTP {status}"),
            ));
        }
        if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN {
            return Err(SourceError::new(
                reasons::UNPACK_FAILED,
                format!(
                    "GET {shown}: HTTP {status}; check the credentials in spec.source.http.authSecret"
                ),
            ));
        }
        if !status.is_success() {
            return Err(SourceError::new(
                reasons::UNPACK_FAILED,
                format!("GET {shown}: HTTP {status}"),
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
            return Err(too_large(&shown, self.max_bytes, "the download"));
        }
        let mut body = Vec::new();
        let mut hasher = Sha256::new();
        let mut stream = response.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| {
                SourceError::new(
                    reasons::UNPACK_FAILED,
                    format!("GET {shown}: reading the body: {}", describe(e)),
                )
            })?;
            if body.len() as u64 + chunk.len() as u64 > self.max_bytes {
                return Err(too_large(&shown, self.max_bytes, "the download"));
            }
            hasher.update(&chunk);
            body.extend_from_slice(&chunk);
        }
        let sha256 = hex(&hasher.finalize());
        if let Some(pin) = &spec.sha256
            && *pin != sha256
        {
            return Err(SourceError::new(
                reasons::CHECKSUM_MISMATCH,
                format!("{shown} has sha256 {sha256}, but spec.source.http.sha256 pins {pin}"),
            ));
        }
        // Gunzip and untar are CPU work: off the async workers, which also serve content and probes.
        let (max, name) = (self.max_bytes, shown.clone());
        let files = tokio::task::spawn_blocking(move || files(&name, body, max))
            .await
            .map_err(|e| {
                SourceError::new(reasons::UNPACK_FAILED, format!("unpacking {shown}: {e}"))
            })??;
        let resolved = resolved(ResolvedHttpSource {
            url: spec.url.clone(),
            sha256,
            etag,
            last_modified,
            last_poll_attempt: Some(now),
        });
        Ok(Fetched::Content { files, resolved })
    }
}

fn too_large(url: &str, max_bytes: u64, what: &str) -> SourceError {
    SourceError::new(
        reasons::CONTENT_TOO_LARGE,
        format!(
            "{what} of {url} is larger than {max_bytes} bytes, the most catalogd accepts (--max-content-bytes)"
        ),
    )
}

/// The body as files: a gzip body is a tar archive of an FBC directory; anything else is a
/// single FBC file named after the URL's last path segment.
fn files(url: &str, body: Vec<u8>, max_bytes: u64) -> Result<Vec<(String, Vec<u8>)>, SourceError> {
    if !body.starts_with(&[0x1f, 0x8b]) {
        if body.starts_with(b"PK\x03\x04") || body.get(257..262) == Some(b"ustar") {
            return Err(SourceError::new(
                reasons::UNPACK_FAILED,
                format!(
                    "{url} is a zip or an uncompressed tar archive; serve an FBC file or a .tar.gz"
                ),
            ));
        }
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
    // Every gzip member (bgzip and concatenated files have several), and a limit on the
    // unpacked size too, so a small archive cannot expand without bound.
    let mut tarball = Vec::new();
    flate2::read::MultiGzDecoder::new(body.as_slice())
        .take(max_bytes + 1)
        .read_to_end(&mut tarball)
        .map_err(archive_error)?;
    drop(body);
    if tarball.len() as u64 > max_bytes {
        return Err(too_large(url, max_bytes, "the unpacked archive"));
    }
    let mut archive = tar::Archive::new(tarball.as_slice());
    let mut files = Vec::new();
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
        let size = entry.header().size().map_err(archive_error)?;
        let mut content = Vec::new();
        entry.read_to_end(&mut content).map_err(archive_error)?;
        // A truncated archive must fail, not yield part of a catalog.
        if content.len() as u64 != size {
            return Err(SourceError::new(
                reasons::UNPACK_FAILED,
                format!(
                    "{url} is truncated: archive entry {path:?} has {} of its {size} bytes",
                    content.len()
                ),
            ));
        }
        files.push((path, content));
    }
    // Walk order, as a directory would be read.
    files.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(files)
}

/// The URL as messages and events show it: no user info, no query string (pre-signed URLs carry
/// credentials there), no fragment.
pub fn redact(url: &str) -> String {
    let cut = url.find(['?', '#']).map_or(url, |i| &url[..i]);
    let elided = if cut.len() < url.len() { "?…" } else { "" };
    match cut.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest
                .split_once('/')
                .map_or((rest, None), |(a, p)| (a, Some(p)));
            let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
            let path = path.map(|p| format!("/{p}")).unwrap_or_default();
            format!("{scheme}://{host}{path}{elided}")
        }
        None => format!("{cut}{elided}"),
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
fn describe(e: reqwest::Error) -> String {
    let timeout = e.is_timeout();
    // The URL is named by the caller, redacted.
    let e = e.without_url();
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    if timeout {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_in_messages_carry_no_credentials() {
        assert_eq!(
            redact("https://user:pw@h.example/c.json?X-Sig=abc#f"),
            "https://h.example/c.json?…"
        );
        assert_eq!(redact("http://h:8080/a/b.yaml"), "http://h:8080/a/b.yaml");
        assert_eq!(redact("https://h"), "https://h");
    }

    fn tar_gz(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        for (path, data) in entries {
            let mut header = tar::Header::new_gnu();
            header.set_size(data.len() as u64);
            header.set_mode(0o644);
            // Written raw: the builder itself refuses `..` paths, which the test needs.
            header.as_old_mut().name[..path.len()].copy_from_slice(path.as_bytes());
            header.set_cksum();
            builder.append(&header, *data).unwrap();
        }
        let tar = builder.into_inner().unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut gz, &tar).unwrap();
        gz.finish().unwrap()
    }

    #[test]
    fn a_tar_gz_becomes_files_in_walk_order() {
        let body = tar_gz(&[("./b/catalog.yaml", b"b"), ("a.json", b"a")]);
        let files = files("u", body, 1 << 20).unwrap();
        assert_eq!(
            files,
            vec![
                ("a.json".into(), b"a".to_vec()),
                ("b/catalog.yaml".into(), b"b".to_vec())
            ]
        );
    }

    #[test]
    fn an_archive_that_expands_past_the_limit_is_too_large() {
        let body = tar_gz(&[("big.json", &[b' '; 100_000])]);
        let err = files("u", body, 50_000).unwrap_err();
        assert_eq!(err.reason, reasons::CONTENT_TOO_LARGE);
        assert!(err.message.contains("unpacked archive"), "{}", err.message);
    }

    #[test]
    fn a_truncated_archive_fails() {
        let mut body = tar_gz(&[("a.json", &[b'x'; 10_000])]);
        body.truncate(body.len() / 2);
        assert_eq!(
            files("u", body, 1 << 20).unwrap_err().reason,
            reasons::UNPACK_FAILED
        );
    }

    #[test]
    fn escaping_entries_and_unsupported_archives_are_refused() {
        let err = files("u", tar_gz(&[("../x", b"x")]), 1 << 20).unwrap_err();
        assert!(
            err.message.contains("escapes the catalog"),
            "{}",
            err.message
        );
        let err = files("u", b"PK\x03\x04rest".to_vec(), 1 << 20).unwrap_err();
        assert!(err.message.contains("zip"), "{}", err.message);
    }
}
