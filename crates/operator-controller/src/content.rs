//! The catalog content client: fetches each Catalog's `contentURL` from catalogd (gzip
//! accepted), keeps what resolution needs of it in memory keyed by content hash and shared by
//! every Operator, and never downloads or parses a hash it already holds: a held hash is
//! re-validated with a conditional GET (`If-None-Match`), at most once per `recheck` interval,
//! which is also how an unreachable catalogd is noticed.
//!
//! Content is trusted by its hash, not by who served it: the sha256 of what was downloaded
//! (after gunzip) must be the Catalog's `status.contentHash`, or it is not used. The default
//! transport to catalogd is plain HTTP inside the cluster, and an ETag is only a claim: without
//! the check, anyone who can tamper with that traffic could inject a catalog. A mismatch (also
//! what a catalogd that unpacked newer content than its status says yet serves) is "not yet",
//! never held.

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use http::StatusCode;
use http::header::{ACCEPT_ENCODING, CONTENT_ENCODING, IF_NONE_MATCH};
use olm_resolver::fbc::load_model;
use olm_resolver::resolve::CatalogContent;

use crate::metrics::ContentMetrics;

/// Why a Catalog's content could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    /// catalogd could not be reached or did not answer with the content: resolution waits
    /// (`Resolved=Unknown`) rather than decide without it.
    #[error("{0}")]
    Unreachable(String),
    /// The content was fetched but is not a valid catalog: the Catalog is left out.
    #[error("{0}")]
    Invalid(String),
    /// What was fetched does not have the Catalog's `contentHash`: resolution waits, as for
    /// an unreachable catalogd, and nothing of it is held.
    #[error("{0}")]
    Mismatch(String),
}

/// What the client holds for one Catalog.
#[derive(Debug, Clone)]
struct Held {
    /// The hash the result is for.
    hash: String,
    result: Result<Arc<CatalogContent>, FetchError>,
    checked: Instant,
}

/// Options of the client.
#[derive(Debug, Clone)]
pub struct ContentOptions {
    /// Root certificates (PEM) to trust for https content URLs, besides the system's.
    pub ca_pem: Option<Vec<u8>>,
    /// The largest content accepted, in bytes (after decompression).
    pub max_bytes: u64,
    /// How long a held hash is used before catalogd is asked again.
    pub recheck: Duration,
    /// Timeout of one fetch.
    pub timeout: Duration,
}

/// Fetches and caches catalog content. Share it as `Arc<ContentClient>`.
pub struct ContentClient {
    http: reqwest::Client,
    options: ContentOptions,
    held: Mutex<HashMap<String, Held>>,
    /// One fetch per Catalog at a time: the many Operators a change re-queues wait for it.
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    metrics: Option<ContentMetrics>,
}

/// Building the HTTP client failed (a bad CA bundle).
#[derive(Debug, thiserror::Error)]
#[error("building the catalog content client: {0}")]
pub struct BuildError(String);

impl ContentClient {
    /// A client with these options; `metrics` count fetches and cached bytes.
    pub fn new(
        options: ContentOptions,
        metrics: Option<ContentMetrics>,
    ) -> Result<Self, BuildError> {
        // reqwest is built without a provider of its own: it uses the process's (ring).
        olm_runtime::install_crypto_provider();
        let mut builder = reqwest::Client::builder()
            .timeout(options.timeout)
            .connect_timeout(options.timeout.min(Duration::from_secs(10)));
        if let Some(pem) = &options.ca_pem {
            let certs = reqwest::Certificate::from_pem_bundle(pem)
                .map_err(|e| BuildError(format!("the CA bundle is not PEM certificates: {e}")))?;
            for cert in certs {
                builder = builder.add_root_certificate(cert);
            }
        }
        let http = builder.build().map_err(|e| BuildError(e.to_string()))?;
        Ok(Self {
            http,
            options,
            held: Mutex::default(),
            locks: Mutex::default(),
            metrics,
        })
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<String, Held>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_for(&self, catalog: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.locks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(catalog.to_owned())
            .or_default()
            .clone()
    }

    /// The content of `catalog`, whose status says it serves `hash` at `url`.
    pub async fn content(
        &self,
        catalog: &str,
        hash: &str,
        url: &str,
    ) -> Result<Arc<CatalogContent>, FetchError> {
        let lock = self.lock_for(catalog);
        let _one_at_a_time = lock.lock().await;
        if let Some(h) = self.held().get(catalog)
            && h.hash == hash
            && h.checked.elapsed() < self.options.recheck
        {
            return h.result.clone();
        }
        let known = self.find(hash);
        let result = self.fetch(url, hash, known).await;
        if matches!(result, Err(FetchError::Mismatch(_))) {
            // Not this hash's content: nothing to hold, under this hash or any other.
            return result;
        }
        let mut held = self.held();
        held.insert(
            catalog.to_owned(),
            Held {
                hash: hash.to_owned(),
                result: result.clone(),
                checked: Instant::now(),
            },
        );
        self.update_bytes(&held);
        result
    }

    /// Content already held for `hash`, under any Catalog.
    fn find(&self, hash: &str) -> Option<Arc<CatalogContent>> {
        self.held()
            .values()
            .filter(|h| h.hash == hash)
            .find_map(|h| h.result.as_ref().ok().cloned())
    }

    async fn fetch(
        &self,
        url: &str,
        hash: &str,
        known: Option<Arc<CatalogContent>>,
    ) -> Result<Arc<CatalogContent>, FetchError> {
        let mut request = self.http.get(url).header(ACCEPT_ENCODING, "gzip");
        if known.is_some() {
            request = request.header(IF_NONE_MATCH, format!("\"{hash}\""));
        }
        let result = match request.send().await {
            Err(e) => Err(FetchError::Unreachable(format!(
                "catalogd could not be reached at {url}: {}",
                olm_runtime::error_chain(&e)
            ))),
            Ok(response) if response.status() == StatusCode::NOT_MODIFIED => match known {
                // Held content was checked against this hash when it was downloaded.
                Some(content) => {
                    self.count("not_modified");
                    return Ok(content);
                }
                None => Err(FetchError::Unreachable(format!(
                    "{url} answered 304 Not Modified to an unconditional request"
                ))),
            },
            Ok(response) if response.status().is_success() => {
                let result = self.read(response, hash).await;
                self.count(if result.is_ok() {
                    "downloaded"
                } else {
                    "error"
                });
                return result;
            }
            Ok(response) => Err(FetchError::Unreachable(format!(
                "{url} answered {}",
                response.status()
            ))),
        };
        self.count("error");
        result
    }

    async fn read(
        &self,
        mut response: reqwest::Response,
        hash: &str,
    ) -> Result<Arc<CatalogContent>, FetchError> {
        let gzip = response
            .headers()
            .get(CONTENT_ENCODING)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"gzip"));
        let url = response.url().to_string();
        let max = self.options.max_bytes;
        // Sized once when the length is known: growing by doubling would briefly hold 1.5x
        // the body (and copy it) on the way.
        let known = response.content_length().unwrap_or(0).min(max);
        let mut body = Vec::with_capacity(usize::try_from(known).unwrap_or(0));
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    body.extend_from_slice(&chunk);
                    if body.len() as u64 > max {
                        return Err(FetchError::Invalid(format!(
                            "the content at {url} is larger than {max} bytes (--max-catalog-bytes)"
                        )));
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    return Err(FetchError::Unreachable(format!(
                        "reading {url}: {}",
                        olm_runtime::error_chain(&e)
                    )));
                }
            }
        }
        // Parsing a large catalog takes a while: off the async workers.
        let started = std::time::Instant::now();
        let bytes = body.len();
        let log_url = url.clone();
        let expected = hash.to_owned();
        let parsed = tokio::task::spawn_blocking(move || parse(&url, body, gzip, max, &expected))
            .await
            .map_err(|e| FetchError::Invalid(format!("parsing the content failed: {e}")))?;
        if let Ok(c) = &parsed {
            tracing::info!(url = %log_url, bytes, gzip, bundles = c.entries.len(), elapsed = ?started.elapsed(), "catalog content downloaded and parsed");
        }
        parsed
    }

    /// Drops what is held for Catalogs not in `existing` (deleted ones).
    pub fn retain(&self, existing: &HashSet<String>) {
        let mut held = self.held();
        held.retain(|name, _| existing.contains(name));
        self.locks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|name, _| existing.contains(name));
        self.update_bytes(&held);
    }

    /// Bytes held, each hash counted once.
    pub fn bytes(&self) -> usize {
        bytes_of(&self.held())
    }

    /// Hashes held, for tests and `explain`.
    pub fn hashes(&self) -> Vec<String> {
        let mut h: Vec<String> = self
            .held()
            .values()
            .filter(|h| h.result.is_ok())
            .map(|h| h.hash.clone())
            .collect();
        h.sort();
        h.dedup();
        h
    }

    fn update_bytes(&self, held: &HashMap<String, Held>) {
        if let Some(m) = &self.metrics {
            m.cache_bytes
                .set(i64::try_from(bytes_of(held)).unwrap_or(i64::MAX));
        }
    }

    fn count(&self, result: &str) {
        if let Some(m) = &self.metrics {
            m.fetches.with_label_values(&[result]).inc();
        }
    }
}

fn bytes_of(held: &HashMap<String, Held>) -> usize {
    let mut seen = HashSet::new();
    held.values()
        .filter_map(|h| h.result.as_ref().ok().map(|c| (h.hash.as_str(), c)))
        .filter(|(hash, _)| seen.insert(*hash))
        .map(|(_, c)| c.approx_bytes())
        .sum()
}

/// Lower-case hex sha256 of `bytes`: the resolver's, which names canonical content.
pub use olm_resolver::fbc::canonical::sha256_hex;

/// The hash in an ETag: `"abc"` or `W/"abc"` → `abc`.
pub fn etag_hash(etag: &str) -> &str {
    etag.trim().trim_start_matches("W/").trim_matches('"')
}

/// Decodes a fetched body, checks that it is the content `hash` names (its sha256, as
/// catalogd computes `contentHash`), and parses it into what resolution needs.
pub fn parse(
    url: &str,
    body: Vec<u8>,
    gzip: bool,
    max: u64,
    hash: &str,
) -> Result<Arc<CatalogContent>, FetchError> {
    let bytes = if gzip {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(body.as_slice())
            .take(max.saturating_add(1))
            .read_to_end(&mut out)
            .map_err(|e| {
                FetchError::Invalid(format!("the content at {url} is not valid gzip: {e}"))
            })?;
        if out.len() as u64 > max {
            return Err(FetchError::Invalid(format!(
                "the content at {url} is larger than {max} bytes (--max-catalog-bytes)"
            )));
        }
        out
    } else {
        body
    };
    let actual = sha256_hex(&bytes);
    if actual != hash {
        return Err(FetchError::Mismatch(format!(
            "the content at {url} has sha256 {actual}, not the Catalog's contentHash {hash}: it is not used (catalogd may be serving newer content than its status says yet, or the content was altered on the way); waiting"
        )));
    }
    // The model only: resolution reads neither the blobs' text nor CSV metadata.
    let fbc = load_model("all.json", &bytes).map_err(|problems| {
        let first: Vec<String> = (&problems)
            .into_iter()
            .take(3)
            .map(ToString::to_string)
            .collect();
        FetchError::Invalid(format!(
            "the content at {url} is not a valid catalog ({} problems): {}",
            problems.total(),
            first.join("; ")
        ))
    })?;
    Ok(Arc::new(CatalogContent::from_fbc(fbc)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etags_strong_or_weak_give_the_hash() {
        assert_eq!(etag_hash("\"abc\""), "abc");
        assert_eq!(etag_hash("W/\"abc\""), "abc");
    }

    #[test]
    fn gzip_and_plain_bodies_parse_to_the_same_content_and_bad_ones_are_invalid() {
        let text = br#"{"schema":"olm.package","name":"foo","defaultChannel":"stable"}
{"schema":"olm.channel","package":"foo","name":"stable","entries":[{"name":"foo.v1.0.0"}]}
{"schema":"olm.bundle","package":"foo","name":"foo.v1.0.0","image":"i","properties":[{"type":"olm.package","value":{"packageName":"foo","version":"1.0.0"}}]}
"#;
        let hash = sha256_hex(text);
        let plain = parse("u", text.to_vec(), false, 1 << 20, &hash).unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, text).unwrap();
        let zipped = parse("u", gz.finish().unwrap(), true, 1 << 20, &hash).unwrap();
        assert_eq!(plain.entries.len(), 1);
        assert_eq!(zipped.entries[0].name, plain.entries[0].name);
        assert!(matches!(
            parse("u", b"{".to_vec(), false, 1 << 20, &sha256_hex(b"{")),
            Err(FetchError::Invalid(_))
        ));
        assert!(matches!(
            parse("u", b"xx".to_vec(), true, 1 << 20, &hash),
            Err(FetchError::Invalid(_))
        ));
    }

    #[test]
    fn content_that_is_not_the_catalogs_hash_is_refused() {
        let text = b"{\"schema\":\"olm.package\",\"name\":\"foo\"}\n";
        let err = parse("u", text.to_vec(), false, 1 << 20, &"0".repeat(64)).unwrap_err();
        assert!(
            matches!(&err, FetchError::Mismatch(m) if m.contains("not the Catalog's contentHash")),
            "{err}"
        );
    }
}
