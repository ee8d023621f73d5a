//! The registry client of a pull: the few calls of the OCI distribution API a pull needs
//! (manifest HEAD and GET, blob GET) and a registry's token service. It is ours, not
//! oci-client's, because a registry is chosen by a Catalog's author and may be hostile:
//!
//! * every body is bounded (a manifest by [`MAX_MANIFEST_BYTES`], an error or a token by
//!   [`MAX_SMALL_BODY_BYTES`]; blobs are bounded by the layer cache as they stream);
//! * every connection obeys the network policy: the registry, the token service its challenge
//!   names and every redirect (blob stores) are checked, and names are resolved through it;
//! * credentials go only where the pull secret allows: the registry, and its token service
//!   only when the Secret names that host too (a challenge could name any realm); a redirect
//!   to another host carries no `Authorization` (reqwest drops it).

use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use futures::{Stream, StreamExt, TryStreamExt};
use reqwest::header::{ACCEPT, WWW_AUTHENTICATE};
use reqwest::{Response, StatusCode};

use super::cache::Hasher;
use super::errors::PullError;
use super::manifest::ACCEPTED;
use crate::error::{Error, ErrorKind};
use crate::network::NetworkPolicy;
use crate::scope::Target;

/// The largest manifest read (the OCI distribution spec asks registries to accept 4 MiB).
pub const MAX_MANIFEST_BYTES: u64 = 4 << 20;
/// The largest error body or token response read.
pub const MAX_SMALL_BODY_BYTES: u64 = 64 << 10;

/// Decides whether the credentials may be sent to a target (the pull secret's scope).
pub type ScopeCheck = Arc<dyn Fn(&Target<'_>) -> Result<(), Error> + Send + Sync>;

/// What a pull authenticates with.
#[derive(Clone)]
pub enum Credentials {
    /// Nothing: anonymous pulls (and anonymous tokens).
    Anonymous,
    /// A user and password from a pull secret, and where they may go.
    Basic {
        /// The user name.
        user: String,
        /// The password.
        password: String,
        /// Where the Secret lets them be sent.
        scope: ScopeCheck,
    },
}

impl std::fmt::Debug for Credentials {
    // Never print a credential.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Credentials::Anonymous => f.write_str("Anonymous"),
            Credentials::Basic { user, .. } => write!(f, "Basic({user:?}, …)"),
        }
    }
}

/// How requests of the session authenticate, learnt from the registry's challenge.
#[derive(Debug, Clone)]
enum State {
    /// Nothing sent yet beyond anonymous requests.
    Anonymous,
    /// The registry asked for basic credentials.
    Basic,
    /// A token of the registry's token service.
    Bearer(String),
}

/// Requests to one repository of one registry, as one pull makes them.
pub struct Session {
    http: reqwest::Client,
    /// `https://host[:port]` or `http://…`.
    base: url::Url,
    repository: String,
    credentials: Credentials,
    policy: Arc<NetworkPolicy>,
    state: Mutex<State>,
}

/// A `WWW-Authenticate` challenge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Challenge {
    /// `Basic realm=…`.
    Basic,
    /// `Bearer realm=…,service=…,scope=…`.
    Bearer {
        /// The token service.
        realm: String,
        /// Its `service` parameter.
        service: Option<String>,
        /// Its `scope` parameter.
        scope: Option<String>,
    },
}

/// Parses a `WWW-Authenticate` header (RFC 7235 auth-params, quoted or not).
pub fn parse_challenge(header: &str) -> Option<Challenge> {
    let header = header.trim();
    let (scheme, rest) = header.split_once(' ').unwrap_or((header, ""));
    if scheme.eq_ignore_ascii_case("basic") {
        return Some(Challenge::Basic);
    }
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let mut params = std::collections::HashMap::new();
    let mut rest = rest.trim();
    while !rest.is_empty() {
        let (key, after) = rest.split_once('=')?;
        let key = key.trim().to_ascii_lowercase();
        let after = after.trim_start();
        let (value, tail) = if let Some(quoted) = after.strip_prefix('"') {
            let end = quoted.find('"')?;
            (&quoted[..end], &quoted[end + 1..])
        } else {
            let end = after.find(',').unwrap_or(after.len());
            (after[..end].trim(), &after[end..])
        };
        params.insert(key, value.to_owned());
        rest = tail.trim_start().trim_start_matches(',').trim_start();
    }
    Some(Challenge::Bearer {
        realm: params.remove("realm")?,
        service: params.remove("service"),
        scope: params.remove("scope"),
    })
}

/// The token in a token service's answer (`token`, or OAuth2's `access_token`).
pub fn parse_token(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Answer {
        #[serde(default)]
        token: Option<String>,
        #[serde(default)]
        access_token: Option<String>,
    }
    let answer: Answer = serde_json::from_slice(body).ok()?;
    answer
        .token
        .or(answer.access_token)
        .filter(|t| !t.is_empty())
}

/// What a registry's error body says: its error codes and messages (the OCI error envelope),
/// or the first line of its text.
pub fn parse_error_body(body: &[u8]) -> (Vec<String>, String) {
    #[derive(serde::Deserialize)]
    struct Envelope {
        #[serde(default)]
        errors: Vec<Entry>,
    }
    #[derive(serde::Deserialize)]
    struct Entry {
        #[serde(default)]
        code: String,
        #[serde(default)]
        message: String,
    }
    if let Ok(envelope) = serde_json::from_slice::<Envelope>(body)
        && !envelope.errors.is_empty()
    {
        let codes = envelope.errors.iter().map(|e| e.code.clone()).collect();
        let words = envelope
            .errors
            .iter()
            .map(|e| format!("{} ({})", e.message, e.code))
            .collect::<Vec<_>>()
            .join("; ");
        return (codes, clip(&words));
    }
    let text = String::from_utf8_lossy(body);
    (
        Vec::new(),
        clip(text.lines().next().unwrap_or_default().trim()),
    )
}

/// At most 200 characters of what a server said: enough to say why, never a flood.
fn clip(text: &str) -> String {
    olm_api::conditions::clip_to(text.to_owned(), 200)
}

/// Reads `response`'s body, failing past `max` bytes (`what` names it in the error).
pub async fn read_bounded(response: Response, max: u64, what: &str) -> Result<Vec<u8>, PullError> {
    if response.content_length().is_some_and(|n| n > max) {
        return Err(PullError::TooLarge(format!(
            "{what} is larger than the {max} bytes read from a registry"
        )));
    }
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        if body.len() as u64 + chunk.len() as u64 > max {
            return Err(PullError::TooLarge(format!(
                "{what} is larger than the {max} bytes read from a registry"
            )));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

impl Session {
    /// A session with `repository` at `base` over `http`, authenticating with `credentials`
    /// and connecting where `policy` allows.
    pub fn new(
        http: reqwest::Client,
        base: url::Url,
        repository: String,
        credentials: Credentials,
        policy: Arc<NetworkPolicy>,
    ) -> Result<Self, PullError> {
        policy.check_url(&base)?;
        Ok(Self {
            http,
            base,
            repository,
            credentials,
            policy,
            state: Mutex::new(State::Anonymous),
        })
    }

    fn url(&self, kind: &str, reference: &str) -> Result<url::Url, PullError> {
        self.base
            .join(&format!("/v2/{}/{kind}/{reference}", self.repository))
            .map_err(|e| PullError::Invalid(format!("the registry URL does not form: {e}")))
    }

    fn state(&self) -> State {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Sends the request `build` makes, authenticated as the session has learnt; a 401 with
    /// a challenge is answered once (credentials or a token) and the request sent again. An
    /// answer that is not a success is the registry's error.
    async fn send(
        &self,
        build: impl Fn(&reqwest::Client) -> reqwest::RequestBuilder,
    ) -> Result<Response, PullError> {
        let mut challenged = false;
        loop {
            let mut request = build(&self.http);
            match (self.state(), &self.credentials) {
                (State::Bearer(token), _) => request = request.bearer_auth(token),
                (State::Basic, Credentials::Basic { user, password, .. }) => {
                    request = request.basic_auth(user, Some(password))
                }
                _ => {}
            }
            let response = request.send().await?;
            let status = response.status();
            if status == StatusCode::UNAUTHORIZED && !challenged {
                challenged = true;
                let challenge = response
                    .headers()
                    .get(WWW_AUTHENTICATE)
                    .and_then(|v| v.to_str().ok())
                    .and_then(parse_challenge);
                match challenge {
                    Some(challenge) => {
                        self.answer(challenge).await?;
                        continue;
                    }
                    None => return Err(PullError::Unauthorized),
                }
            }
            if status.is_success() {
                return Ok(response);
            }
            return Err(self.error(response).await);
        }
    }

    /// The registry's error, from its status and (bounded) body.
    async fn error(&self, response: Response) -> PullError {
        let status = response.status().as_u16();
        // A HEAD has no body; a body too large to read says nothing more.
        let body = read_bounded(response, MAX_SMALL_BODY_BYTES, "the error")
            .await
            .unwrap_or_default();
        let (codes, words) = parse_error_body(&body);
        if status == 401 && codes.iter().all(|c| c == "UNAUTHORIZED") {
            return PullError::Unauthorized;
        }
        PullError::Registry {
            status,
            codes,
            words,
        }
    }

    /// Answers a challenge: basic credentials, or a token from the token service.
    async fn answer(&self, challenge: Challenge) -> Result<(), PullError> {
        let next = match challenge {
            Challenge::Basic => match self.credentials {
                Credentials::Basic { .. } => State::Basic,
                Credentials::Anonymous => return Err(PullError::Unauthorized),
            },
            Challenge::Bearer {
                realm,
                service,
                scope,
            } => State::Bearer(self.token(&realm, service, scope).await?),
        };
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) = next;
        Ok(())
    }

    /// A pull token from the token service `realm`.
    async fn token(
        &self,
        realm: &str,
        service: Option<String>,
        scope: Option<String>,
    ) -> Result<String, PullError> {
        let mut url = url::Url::parse(realm).map_err(|e| {
            PullError::Invalid(format!(
                "the registry names a token service that is not a URL ({e})"
            ))
        })?;
        if url.scheme() != "https" && self.base.scheme() == "https" {
            return Err(PullError::Invalid(format!(
                "the registry names a token service over plain HTTP ({}), which is never used",
                crate::redact::redact(realm)
            )));
        }
        self.policy.check_url(&url)?;
        let scope = scope.unwrap_or_else(|| format!("repository:{}:pull", self.repository));
        {
            let mut query = url.query_pairs_mut();
            if let Some(service) = &service {
                query.append_pair("service", service);
            }
            query.append_pair("scope", &scope);
        }
        let mut request = self.http.get(url.clone());
        if let Credentials::Basic {
            user,
            password,
            scope,
        } = &self.credentials
        {
            // The challenge chose this host, not the Secret's owner.
            scope(&Target::Url(&url)).map_err(PullError::Credential)?;
            request = request.basic_auth(user, Some(password));
        }
        let response = request.send().await?;
        let status = response.status();
        if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
            return Err(PullError::Unauthorized);
        }
        if !status.is_success() {
            return Err(self.error(response).await);
        }
        let body =
            read_bounded(response, MAX_SMALL_BODY_BYTES, "the token service's answer").await?;
        parse_token(&body)
            .ok_or_else(|| PullError::Invalid("the token service's answer holds no token".into()))
    }

    /// The digest `reference` (a tag or digest) names now: a HEAD of its manifest, or, when
    /// the registry does not say, the digest of the manifest itself.
    pub async fn digest(&self, reference: &str) -> Result<String, PullError> {
        let url = self.url("manifests", reference)?;
        let head = self
            .send(|http| http.head(url.clone()).header(ACCEPT, ACCEPTED.join(", ")))
            .await;
        let response = match head {
            Ok(response) => response,
            // A HEAD's error has no body: ask again with a GET, whose body says why.
            Err(PullError::Registry { .. }) => return Ok(self.manifest(reference).await?.1),
            Err(e) => return Err(e),
        };
        let header = response
            .headers()
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok())
            .filter(|d| super::reference::parse_digest(d).is_some())
            .map(str::to_owned);
        match header {
            Some(digest) => Ok(digest),
            None => Ok(self.manifest(reference).await?.1),
        }
    }

    /// The manifest `reference` names, and its digest (checked against `reference` when it is
    /// a digest), read up to [`MAX_MANIFEST_BYTES`].
    pub async fn manifest(&self, reference: &str) -> Result<(Vec<u8>, String), PullError> {
        let url = self.url("manifests", reference)?;
        let response = self
            .send(|http| http.get(url.clone()).header(ACCEPT, ACCEPTED.join(", ")))
            .await?;
        let body = read_bounded(response, MAX_MANIFEST_BYTES, "the manifest").await?;
        let pinned = super::reference::parse_digest(reference);
        let mut hasher = match pinned {
            Some(("sha512", _)) => Hasher::Sha512(sha2::Sha512::default()),
            _ => Hasher::Sha256(sha2::Sha256::default()),
        };
        hasher.update(&body);
        let digest = hasher.finish();
        if pinned.is_some() && digest != reference {
            return Err(PullError::Blob {
                what: "the manifest".into(),
                source: super::cache::BlobError::Mismatch {
                    expected: reference.to_owned(),
                    actual: digest,
                },
            });
        }
        Ok((body, digest))
    }

    /// The blob `digest`, as a stream (its size and digest are checked by whoever reads it).
    pub async fn blob(
        &self,
        digest: &str,
    ) -> Result<impl Stream<Item = std::io::Result<Bytes>> + Unpin + use<>, PullError> {
        let url = self.url("blobs", digest)?;
        let response = self.send(|http| http.get(url.clone())).await?;
        Ok(response.bytes_stream().map_err(std::io::Error::other))
    }
}

/// The scope check of a pull secret: the registry's and its token service's hosts must be ones
/// `secret` names.
pub fn scope_of(
    secret: Arc<k8s_openapi::api::core::v1::Secret>,
    name: String,
    user: crate::scope::User,
) -> ScopeCheck {
    Arc::new(move |target: &Target<'_>| crate::scope::check(&secret, &name, &user, target))
}

/// Refuses credentials with TLS verification off unless the admin allows it.
pub fn check_tls_for_credentials(
    credentials: &Credentials,
    skip_tls_verify: bool,
    allowed: bool,
) -> Result<(), Error> {
    match credentials {
        Credentials::Basic { .. } if skip_tls_verify && !allowed => Err(Error::new(
            ErrorKind::CredentialNotAllowed,
            "spec.source.image.insecureSkipTLSVerify is set together with a pull secret: without checking the registry's certificate, anyone in between would receive the credentials. Nothing was sent; verify TLS (name a CA with --registry-ca-file), or have the admin allow it (--allow-credentials-without-tls-verify)",
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_parse_quoted_and_bare() {
        assert_eq!(
            parse_challenge(
                r#"Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull""#
            ),
            Some(Challenge::Bearer {
                realm: "https://auth.example/token".into(),
                service: Some("registry.example".into()),
                scope: Some("repository:a/b:pull".into()),
            })
        );
        assert_eq!(
            parse_challenge("bearer realm=https://a/t, service=r"),
            Some(Challenge::Bearer {
                realm: "https://a/t".into(),
                service: Some("r".into()),
                scope: None,
            })
        );
        assert_eq!(
            parse_challenge(r#"Basic realm="Registry""#),
            Some(Challenge::Basic)
        );
        assert_eq!(parse_challenge("Negotiate abc"), None);
        assert_eq!(parse_challenge(r#"Bearer service="r""#), None, "no realm");
        assert_eq!(parse_challenge(r#"Bearer realm="unterminated"#), None);
    }

    #[test]
    fn tokens_and_error_bodies_parse() {
        assert_eq!(parse_token(br#"{"token":"t"}"#).as_deref(), Some("t"));
        assert_eq!(
            parse_token(br#"{"access_token":"a"}"#).as_deref(),
            Some("a")
        );
        assert_eq!(parse_token(br#"{"token":""}"#), None);
        assert_eq!(parse_token(b"<html>"), None);
        let (codes, words) = parse_error_body(
            br#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}"#,
        );
        assert_eq!(codes, ["MANIFEST_UNKNOWN"]);
        assert_eq!(words, "manifest unknown (MANIFEST_UNKNOWN)");
        let flood = format!("<html>{}\nsecond line", "x".repeat(10_000));
        let (codes, words) = parse_error_body(flood.as_bytes());
        assert!(codes.is_empty());
        assert!(words.chars().count() <= 200, "{}", words.len());
    }

    #[test]
    fn credentials_need_tls_verification_unless_the_admin_allows_them_without() {
        let basic = Credentials::Basic {
            user: "u".into(),
            password: "p".into(),
            scope: Arc::new(|_: &Target<'_>| Ok(())),
        };
        let err = check_tls_for_credentials(&basic, true, false).unwrap_err();
        assert_eq!(err.kind, ErrorKind::CredentialNotAllowed);
        assert!(
            err.message
                .contains("--allow-credentials-without-tls-verify")
        );
        assert!(check_tls_for_credentials(&basic, true, true).is_ok());
        assert!(check_tls_for_credentials(&basic, false, false).is_ok());
        assert!(check_tls_for_credentials(&Credentials::Anonymous, true, false).is_ok());
        assert_eq!(
            format!("{basic:?}"),
            r#"Basic("u", …)"#,
            "no password in logs"
        );
    }
}
