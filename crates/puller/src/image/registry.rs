//! Reaching registries: the TLS and plain-HTTP rules, the HTTP clients (bound by the network
//! policy), and the cheap digest check of a poll.
//!
//! Plain HTTP is used only for loopback registries and those named in
//! `--insecure-registries`, and even then only when the registry does not speak TLS: HTTPS is
//! tried first, as Docker does for such registries, and the scheme that worked is remembered.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use oci_client::Reference;

use super::client::{Credentials, Session};
use super::errors::PullError;
use super::reference::plain_http_allowed;
use crate::network::NetworkPolicy;

/// The most redirects a registry request follows (a blob store, typically: one).
const MAX_REDIRECTS: usize = 5;

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
    /// Where pulls may connect.
    pub policy: Arc<NetworkPolicy>,
}

/// A registry and how to authenticate to it.
pub struct Access<'a> {
    /// The image.
    pub reference: &'a Reference,
    /// Credentials, or `Anonymous`.
    pub credentials: &'a Credentials,
    /// `insecureSkipTLSVerify`.
    pub skip_tls_verify: bool,
}

/// Registry clients, and what catalogd learned about each registry.
#[derive(Debug, Default)]
pub struct Registries {
    options: RegistryOptions,
    /// Registries that answered over plain HTTP.
    plain: Mutex<HashSet<String>>,
    /// The HTTP clients, verifying TLS and not (built once: a poll must not parse the CA
    /// bundle again).
    clients: [OnceLock<reqwest::Client>; 2],
}

impl Registries {
    /// Registries reached as `options` say.
    pub fn new(options: RegistryOptions) -> Self {
        Self {
            options,
            ..Default::default()
        }
    }

    /// The HTTP client of registry requests.
    fn http(&self, skip_tls_verify: bool) -> Result<reqwest::Client, PullError> {
        let slot = &self.clients[usize::from(skip_tls_verify)];
        if let Some(client) = slot.get() {
            return Ok(client.clone());
        }
        let mut builder = reqwest::Client::builder()
            .connect_timeout(self.options.timeout)
            .read_timeout(self.options.timeout)
            .danger_accept_invalid_certs(skip_tls_verify)
            .dns_resolver(self.options.policy.resolver())
            .redirect(self.options.policy.redirects(MAX_REDIRECTS))
            .user_agent(concat!("olm-rs-catalogd/", env!("CARGO_PKG_VERSION")));
        if let Some(pem) = &self.options.ca_pem {
            // Checked at start-up (`check_ca`).
            for cert in reqwest::Certificate::from_pem_bundle(pem).unwrap_or_default() {
                builder = builder.add_root_certificate(cert);
            }
        }
        let client = builder.build()?;
        // Two pulls may build it at once; either serves.
        Ok(slot.get_or_init(|| client).clone())
    }

    /// A session with the repository of `access`, over plain HTTP when `plain`.
    pub fn session(&self, access: &Access<'_>, plain: bool) -> Result<Session, PullError> {
        let scheme = if plain { "http" } else { "https" };
        let registry = access.reference.resolve_registry();
        let base = url::Url::parse(&format!("{scheme}://{registry}/")).map_err(|e| {
            PullError::Invalid(format!("the registry {registry} does not form a URL: {e}"))
        })?;
        Session::new(
            self.http(access.skip_tls_verify)?,
            base,
            access.reference.repository().to_owned(),
            access.credentials.clone(),
            self.options.policy.clone(),
        )
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

    /// The digest the reference names now: one manifest HEAD (after the registry's token
    /// dance, when it wants one).
    pub async fn digest(&self, access: &Access<'_>) -> Result<String, PullError> {
        let reference = access
            .reference
            .digest()
            .or(access.reference.tag())
            .unwrap_or("latest")
            .to_owned();
        self.with_scheme(access, |plain| {
            let reference = reference.clone();
            async move { self.session(access, plain)?.digest(&reference).await }
        })
        .await
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
