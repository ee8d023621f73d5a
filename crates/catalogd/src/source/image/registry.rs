//! Reaching registries: the TLS and plain-HTTP rules, the clients, and the cheap digest check
//! of a poll.
//!
//! Plain HTTP is used only for loopback registries and those named in
//! `--insecure-registries`, and even then only when the registry does not speak TLS: HTTPS is
//! tried first, as Docker does for such registries, and the scheme that worked is remembered.

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

use super::errors::PullError;
use super::manifest::ACCEPTED;
use super::reference::plain_http_allowed;

/// How catalogd reaches registries.
#[derive(Debug, Clone, Default)]
pub struct RegistryOptions {
    /// Registries (`host` or `host:port`) that may be reached over plain HTTP, besides
    /// loopback ones.
    pub insecure_registries: Vec<String>,
    /// PEM certificates trusted for every registry, besides the system's.
    pub ca_pem: Option<Vec<u8>>,
    /// Connect timeout and the longest wait for a read.
    pub timeout: Duration,
}

/// A registry and how to authenticate to it.
pub struct Access<'a> {
    /// The image.
    pub reference: &'a Reference,
    /// Credentials, or `Anonymous`.
    pub auth: &'a RegistryAuth,
    /// `insecureSkipTLSVerify`.
    pub skip_tls_verify: bool,
}

/// Registry clients, and what catalogd learned about each registry.
#[derive(Debug, Default)]
pub struct Registries {
    options: RegistryOptions,
    /// Registries that answered over plain HTTP.
    plain: Mutex<HashSet<String>>,
    /// Registries that want a token, for which the cheap check is left to oci-client.
    token: Mutex<HashSet<String>>,
    /// The clients of the cheap check, verifying TLS and not (built once: a poll must not
    /// parse the CA bundle again).
    head_clients: [OnceLock<reqwest::Client>; 2],
}

impl Registries {
    /// Registries reached as `options` say.
    pub fn new(options: RegistryOptions) -> Self {
        Self {
            options,
            ..Default::default()
        }
    }

    /// An oci-client for `access`, over plain HTTP when `plain`.
    pub fn client(&self, access: &Access<'_>, plain: bool) -> Result<Client, PullError> {
        let extra_root_certificates = self
            .options
            .ca_pem
            .iter()
            .map(|pem| Certificate {
                encoding: CertificateEncoding::Pem,
                data: pem.clone(),
            })
            .collect();
        // `try_from`, not `new`: `new` falls back to a default client (no CA, no timeouts) when
        // the configuration is refused.
        Ok(Client::try_from(ClientConfig {
            protocol: if plain {
                ClientProtocol::Http
            } else {
                ClientProtocol::Https
            },
            accept_invalid_certificates: access.skip_tls_verify,
            extra_root_certificates,
            // catalogd picks from an index itself, to say what the index has.
            platform_resolver: None,
            connect_timeout: Some(self.options.timeout),
            read_timeout: Some(self.options.timeout),
            user_agent: concat!("olm-rs-catalogd/", env!("CARGO_PKG_VERSION")),
            ..Default::default()
        })?)
    }

    /// Runs `op` with the scheme to use for the registry of `access` (`true` is plain HTTP),
    /// trying the other scheme once when a registry that may use plain HTTP cannot be
    /// reached on the first.
    pub async fn with_scheme<T, F, Fut>(&self, access: &Access<'_>, op: F) -> Result<T, PullError>
    where
        F: Fn(bool) -> Fut,
        Fut: std::future::Future<Output = Result<T, PullError>>,
    {
        let registry = access.reference.resolve_registry().to_owned();
        let remembered = self
            .plain
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&registry);
        let first = op(remembered).await;
        let eligible = plain_http_allowed(&registry, &self.options.insecure_registries);
        match first {
            Err(e) if eligible && e.is_connect() => {
                let second = op(!remembered).await;
                // The registry answered on the other scheme (with content or with an error of
                // its own): that is its scheme, and its answer is the answer.
                if second.as_ref().err().is_none_or(|e| !e.is_connect()) {
                    let mut plain = self.plain.lock().unwrap_or_else(PoisonError::into_inner);
                    if remembered {
                        plain.remove(&registry);
                    } else {
                        plain.insert(registry);
                    }
                    return second;
                }
                // Unreachable either way: say what failed on the scheme tried first (HTTPS,
                // usually).
                Err(e)
            }
            other => other,
        }
    }

    /// The digest the reference names now: one manifest HEAD. Registries that want a token
    /// are asked through oci-client, which fetches and caches it.
    pub async fn digest(&self, access: &Access<'_>) -> Result<String, PullError> {
        self.with_scheme(access, |plain| async move {
            let registry = access.reference.resolve_registry();
            let wants_token = self
                .token
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .contains(registry);
            if !wants_token {
                match self.head(access, plain).await? {
                    Head::Digest(d) => return Ok(d),
                    Head::WantsToken => {
                        self.token
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .insert(registry.to_owned());
                    }
                    Head::Other => {}
                }
            }
            // Anything but a plain answer (a token to fetch, a missing manifest, an error):
            // oci-client asks again and explains the registry's answer.
            Ok(self
                .client(access, plain)?
                .fetch_manifest_digest(access.reference, access.auth)
                .await?)
        })
        .await
    }

    /// One HEAD of the manifest, with basic credentials if there are any.
    /// The client of the cheap check.
    fn head_client(&self, skip_tls_verify: bool) -> Result<&reqwest::Client, PullError> {
        let slot = &self.head_clients[usize::from(skip_tls_verify)];
        if let Some(client) = slot.get() {
            return Ok(client);
        }
        let mut builder = reqwest::Client::builder()
            .connect_timeout(self.options.timeout)
            .timeout(self.options.timeout)
            .danger_accept_invalid_certs(skip_tls_verify)
            .user_agent(concat!("olm-rs-catalogd/", env!("CARGO_PKG_VERSION")));
        if let Some(pem) = &self.options.ca_pem {
            // Checked at start-up (`check_ca`).
            for cert in reqwest::Certificate::from_pem_bundle(pem).unwrap_or_default() {
                builder = builder.add_root_certificate(cert);
            }
        }
        let client = builder.build()?;
        // Two pulls may build it at once; either serves.
        Ok(slot.get_or_init(|| client))
    }

    async fn head(&self, access: &Access<'_>, plain: bool) -> Result<Head, PullError> {
        let client = self.head_client(access.skip_tls_verify)?;
        let reference = access.reference;
        let tag = reference.digest().or(reference.tag()).unwrap_or("latest");
        let url = format!(
            "{}://{}/v2/{}/manifests/{tag}",
            if plain { "http" } else { "https" },
            reference.resolve_registry(),
            reference.repository()
        );
        let mut request = client
            .head(url)
            .header(reqwest::header::ACCEPT, ACCEPTED.join(", "));
        if let RegistryAuth::Basic(user, password) = access.auth {
            request = request.basic_auth(user, Some(password));
        }
        let response = request.send().await?;
        let status = response.status();
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        if status == reqwest::StatusCode::OK
            && let Some(digest) = header("docker-content-digest")
            && super::reference::parse_digest(&digest).is_some()
        {
            return Ok(Head::Digest(digest));
        }
        if status == reqwest::StatusCode::UNAUTHORIZED
            && header("www-authenticate")
                .is_some_and(|c| c.to_ascii_lowercase().starts_with("bearer"))
        {
            return Ok(Head::WantsToken);
        }
        Ok(Head::Other)
    }
}

/// Checks a PEM bundle of CAs, at start-up, so that a broken `--registry-ca-file` stops
/// catalogd rather than weakening every pull.
pub fn check_ca(pem: &[u8]) -> Result<usize, String> {
    match reqwest::Certificate::from_pem_bundle(pem) {
        Ok(certs) if !certs.is_empty() => Ok(certs.len()),
        Ok(_) => Err("holds no PEM certificate".into()),
        Err(e) => Err(format!("is not a PEM bundle: {e}")),
    }
}

enum Head {
    Digest(String),
    WantsToken,
    Other,
}
