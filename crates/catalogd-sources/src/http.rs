//! The `http` source: a single FBC file (JSON or YAML) or a `.tar.gz` of an FBC directory,
//! fetched with a GET, conditionally when the plan says so (`If-None-Match` /
//! `If-Modified-Since`). The body is size-limited, time-limited and, when pinned, checked.
//! Credentials come only from Secrets that opted in (see [`super::credentials`]) and travel
//! only over TLS.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Client;
use olm_api::catalog::{
    Catalog, HttpSource as HttpSpec, ResolvedHttpSource, ResolvedSource, SourceType,
};
use sha2::{Digest, Sha256};

use super::credentials::{HttpAuth, ca_bundle, http_auth, opted_in_secret};
use crate::archive;
use crate::contract::{Facts, Fetched, Mode, SourceError, reasons, since, too_large};
use crate::poll::poll_interval;
use olm_puller::budget::Reserve;
use olm_puller::describe::describe;
use olm_puller::network::NetworkPolicy;
use olm_puller::redact::redact;
use olm_puller::scope;

/// The most redirects a fetch follows (each checked against the network policy).
const MAX_REDIRECTS: usize = 10;

/// Fetches catalogs over HTTP(S).
pub struct HttpSource {
    client: Client,
    own_namespace: String,
    max_bytes: u64,
    timeout: Duration,
    policy: Arc<NetworkPolicy>,
}

impl HttpSource {
    /// A source reading Secrets and CA bundles from `own_namespace`, accepting bodies (and
    /// unpacked archives) up to `max_bytes`, giving up on a request after `timeout`, and
    /// reaching only what `policy` allows.
    pub fn new(
        client: Client,
        own_namespace: String,
        max_bytes: u64,
        timeout: Duration,
        policy: Arc<NetworkPolicy>,
    ) -> Self {
        Self {
            client,
            own_namespace,
            max_bytes,
            timeout,
            policy,
        }
    }

    async fn http_client(&self, spec: &HttpSpec) -> Result<reqwest::Client, SourceError> {
        let mut builder = reqwest::Client::builder()
            // Each read is bounded here; the request's whole time is bounded around the
            // request and around the body, so that waiting for the unpack budget in between
            // does not count.
            .read_timeout(self.timeout)
            .connect_timeout(self.timeout.min(Duration::from_secs(30)))
            // Every address a name resolves to, and every redirect, obeys the policy.
            .dns_resolver(self.policy.resolver())
            .redirect(self.policy.redirects(MAX_REDIRECTS));
        if let Some(ca) = &spec.ca_bundle {
            let key = ca.key.as_deref().unwrap_or("ca.crt");
            for cert in ca_bundle(&self.client, &self.own_namespace, &ca.config_map, key).await? {
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

    /// The credentials of `spec`, if it names a Secret: checked before any request is made,
    /// as is that the Secret allows the Catalog `catalog` to send them to the URL.
    async fn credentials(
        &self,
        spec: &HttpSpec,
        url: &url::Url,
        catalog: &str,
    ) -> Result<Option<HttpAuth>, SourceError> {
        let Some(secret_ref) = &spec.auth_secret else {
            return Ok(None);
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
        let secret = opted_in_secret(
            &self.client,
            &self.own_namespace,
            &secret_ref.name,
            "auth Secret",
        )
        .await?;
        scope::check(
            &secret,
            &secret_ref.name,
            &scope::User::Catalog(catalog.to_owned()),
            &scope::Target::Url(url),
        )?;
        http_auth(&secret, &secret_ref.name).map(Some)
    }

    /// Fetches the catalog (see [`super::Sources::fetch`]).
    pub async fn fetch(
        &self,
        catalog: &Catalog,
        mode: &Mode,
        reserve: &Reserve,
    ) -> Result<Fetched, SourceError> {
        let spec = catalog.spec.source.http.clone().unwrap_or_default();
        let shown = redact(&spec.url);
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        // Credentials first: a Secret that did not opt in fails the fetch before anything is
        // sent.
        let catalog_name = catalog.metadata.name.as_deref().unwrap_or_default();
        let url = url::Url::parse(&spec.url).map_err(|e| {
            SourceError::new(reasons::UNPACK_FAILED, format!("{shown} is not a URL: {e}"))
        })?;
        // Before anything else: a refused host is never asked, not even for a Secret's sake.
        self.policy.check_url(&url).map_err(|r| {
            SourceError::new(reasons::HOST_NOT_ALLOWED, format!("GET {shown}: {r}"))
        })?;
        let auth = self.credentials(&spec, &url, catalog_name).await?;
        let client = self.http_client(&spec).await?;
        let mut request = client.get(&spec.url);
        let since = since(mode)
            .and_then(|p| p.http.as_ref())
            .filter(|h| h.url == spec.url);
        if let Some(last) = since {
            if let Some(etag) = &last.etag {
                request = request.header(reqwest::header::IF_NONE_MATCH, etag);
            }
            if let Some(modified) = &last.last_modified {
                request = request.header(reqwest::header::IF_MODIFIED_SINCE, modified);
            }
        }
        request = match auth {
            Some(HttpAuth::Bearer(token)) => request.bearer_auth(token),
            Some(HttpAuth::Basic(user, password)) => request.basic_auth(user, password),
            None => request,
        };
        let timed_out = |what: &str| {
            SourceError::new(
                reasons::UNPACK_FAILED,
                format!(
                    "GET {shown}: {what} took longer than {}s (timed out; see --http-timeout-seconds)",
                    self.timeout.as_secs()
                ),
            )
        };
        let response = tokio::time::timeout(self.timeout, request.send())
            .await
            .map_err(|_| timed_out("the request"))?
            .map_err(|e| request_failed(&shown, e))?;
        let status = response.status();
        // A 304 counts only as the answer to a conditional request we sent.
        if status == reqwest::StatusCode::NOT_MODIFIED
            && let Some(last) = since
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
        // The body is held in memory: its share of the unpack budget first, for its announced
        // length or the most it may be.
        reserve
            .reserve(
                response
                    .content_length()
                    .unwrap_or(self.max_bytes)
                    .min(self.max_bytes),
            )
            .await;
        let read = async {
            let mut body = Vec::new();
            let mut hasher = Sha256::new();
            let mut stream = response.bytes_stream();
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(|e| {
                    SourceError::new(
                        reasons::UNPACK_FAILED,
                        format!(
                            "GET {shown}: reading the body: {}",
                            describe(e, "--http-timeout-seconds")
                        ),
                    )
                })?;
                if body.len() as u64 + chunk.len() as u64 > self.max_bytes {
                    return Err(too_large(&shown, self.max_bytes, "the download"));
                }
                hasher.update(&chunk);
                body.extend_from_slice(&chunk);
            }
            Ok((body, hasher))
        };
        let (body, hasher) = tokio::time::timeout(self.timeout, read)
            .await
            .map_err(|_| timed_out("reading the body"))??;
        let sha256 = hex::encode(hasher.finalize());
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
        let files = tokio::task::spawn_blocking(move || archive::files(&name, body, max))
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

fn resolved(http: ResolvedHttpSource) -> ResolvedSource {
    ResolvedSource {
        type_: Some(SourceType::Http),
        http: Some(http),
        ..Default::default()
    }
}

/// A request that failed: refused by the network policy (at a redirect or a name's address),
/// or another failure, with its causes.
fn request_failed(shown: &str, e: reqwest::Error) -> SourceError {
    if let Some(refused) = NetworkPolicy::refusal_in(&e) {
        return SourceError::new(reasons::HOST_NOT_ALLOWED, format!("GET {shown}: {refused}"));
    }
    SourceError::new(
        reasons::UNPACK_FAILED,
        format!("GET {shown}: {}", describe(e, "--http-timeout-seconds")),
    )
}

/// What the planner needs to know of an http spec ([`Facts`]), given what was fetched for the
/// served content: pinned content that is served cannot change; a conditional GET is asked
/// only when a "not modified" would be good news (the same URL, and no new pin to check
/// against the body).
pub fn facts<'a>(spec: &HttpSpec, previous: Option<&'a ResolvedSource>) -> Facts<'a> {
    let previous = previous
        .and_then(|p| p.http.as_ref())
        .filter(|h| h.url == spec.url);
    Facts {
        interval: poll_interval(spec.poll_interval.as_deref()),
        pinned_and_served: spec
            .sha256
            .as_ref()
            .zip(previous)
            .is_some_and(|(pin, p)| *pin == p.sha256),
        conditional: previous
            .is_some_and(|p| spec.sha256.as_ref().is_none_or(|pin| *pin == p.sha256)),
        last_poll: previous.and_then(|h| h.last_poll_attempt.as_ref()),
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
        assert_eq!(redact("https://h/"), "https://h/");
        assert_eq!(redact("https://tok@h/c.json"), "https://h/c.json");
        assert_eq!(redact("not a url?secret=1"), "not a url");
    }

    #[test]
    fn http_facts_pin_only_served_content_and_ask_conditionally_only_for_good_news() {
        use olm_api::catalog::ResolvedHttpSource;
        let served = ResolvedSource {
            http: Some(ResolvedHttpSource {
                url: "https://h/c.json".into(),
                sha256: "aa".into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let spec = |url: &str, pin: Option<&str>| HttpSpec {
            url: url.into(),
            sha256: pin.map(str::to_owned),
            ..Default::default()
        };
        let pinned = facts(&spec("https://h/c.json", Some("aa")), Some(&served));
        assert!(pinned.pinned_and_served && pinned.conditional);
        let new_pin = facts(&spec("https://h/c.json", Some("bb")), Some(&served));
        assert!(!new_pin.pinned_and_served && !new_pin.conditional);
        let unpinned = facts(&spec("https://h/c.json", None), Some(&served));
        assert!(!unpinned.pinned_and_served && unpinned.conditional);
        let moved = facts(&spec("https://h/other.json", None), Some(&served));
        assert!(!moved.conditional);
    }
}
