//! When the provisioner's own certificates change: a pure function of what is kept (the
//! [`Store`]), what needs a certificate, the time and the lifetime asked.
//!
//! One CA per BundleDeployment signs a serving certificate for each Service in front of a
//! webhook or APIService, valid as long as the CA. A CA is replaced well before it expires,
//! in three steps so that no call is ever made to a server the API server does not trust:
//!
//! 1. a third of its lifetime before it expires, a next CA is made and trusted (it is in every
//!    CA bundle applied) but signs nothing yet;
//! 2. a twelfth of the lifetime later (the new bundle has reached the API server, which reads
//!    webhook configurations, CRDs and APIServices as they change), the next CA becomes the
//!    signing one: every serving certificate is issued again, and the Deployments serving them
//!    roll (their Pod templates carry the signing CA's hash, as OLM v0's `olmcahash`), while
//!    the old CA stays trusted, so old Pods keep answering until new ones are ready;
//! 3. when the old CA expires, it leaves the bundle.
//!
//! A store that is missing (or unreadable, or whose CA has expired: the provisioner was
//! stopped that long) starts again with a new CA; everything trusted before is dropped.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::format::registry::Serving;

/// A CA: its certificate and key (PEM), when it was made and when it expires (Unix seconds).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ca {
    /// The certificate.
    pub cert: String,
    /// Its private key.
    pub key: String,
    /// When it was made.
    pub made: i64,
    /// When it expires.
    pub expires: i64,
}

/// A serving certificate: the certificate and key (PEM), the CA that signed it (its
/// certificate), the names it is for, and when it expires.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Issued {
    /// The certificate.
    pub cert: String,
    /// Its private key.
    pub key: String,
    /// The signing CA's certificate.
    pub issuer: String,
    /// The names it is for.
    pub hosts: Vec<String>,
    /// When it expires.
    pub expires: i64,
}

/// What the provisioner keeps of one BundleDeployment's certificates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Store {
    /// The CA that signs.
    pub current: Ca,
    /// A CA already trusted, to sign next.
    #[serde(default)]
    pub next: Option<Ca>,
    /// The CA that signed before (its certificate), trusted until it expires.
    #[serde(default)]
    pub previous: Option<Ca>,
    /// The serving certificates, by Service (`<namespace>/<name>`).
    #[serde(default)]
    pub serving: BTreeMap<String, Issued>,
}

impl Store {
    /// The CA bundle the API server trusts the Services by: every CA in use (signing, next,
    /// previous), PEM, in that order.
    pub fn bundle(&self) -> String {
        let mut out = self.current.cert.clone();
        for ca in self.next.iter().chain(&self.previous) {
            out.push_str(&ca.cert);
        }
        out
    }
}

/// What makes keys and certificates (rcgen, or a fake in tests).
pub trait Issuer {
    /// A new CA valid from `now` for `lifetime` seconds.
    fn ca(&mut self, now: i64, lifetime: i64) -> Result<Ca, String>;
    /// A serving certificate for `hosts`, signed by `ca`, valid until the CA expires.
    fn serving(&mut self, ca: &Ca, hosts: &[String], now: i64) -> Result<Issued, String>;
}

/// When a CA of `lifetime` seconds made at `made`, expiring at `expires`, gets its successor.
fn renew_at(ca: &Ca, lifetime: i64) -> i64 {
    ca.expires - lifetime / 3
}

/// How long a next CA is trusted before it signs.
fn overlap(lifetime: i64) -> i64 {
    lifetime / 12
}

/// The key a Service's certificate is kept under.
pub fn service_key(s: &Serving) -> String {
    format!("{}/{}", s.namespace, s.service)
}

/// The store after `now`'s steps, and whether it changed (then it is written before anything
/// it signs is applied).
pub fn advance(
    store: Option<Store>,
    serving: &[Serving],
    now: i64,
    lifetime: i64,
    issuer: &mut impl Issuer,
) -> Result<(Store, bool), String> {
    let before = store.clone();
    let mut store = match store.filter(|s| s.current.expires > now) {
        Some(s) => s,
        None => Store {
            current: issuer.ca(now, lifetime)?,
            next: None,
            previous: None,
            serving: BTreeMap::new(),
        },
    };
    if store.previous.as_ref().is_some_and(|p| p.expires <= now) {
        store.previous = None;
    }
    match store.next.take() {
        Some(next) if now >= next.made + overlap(lifetime) => {
            let old = std::mem::replace(&mut store.current, next);
            store.previous = Some(Ca {
                key: String::new(),
                ..old
            });
        }
        Some(next) => store.next = Some(next),
        None if now >= renew_at(&store.current, lifetime) => {
            store.next = Some(issuer.ca(now, lifetime)?);
        }
        None => {}
    }
    let mut issued = BTreeMap::new();
    for s in serving {
        let key = service_key(s);
        let hosts = s.hosts().to_vec();
        let kept = store
            .serving
            .remove(&key)
            .filter(|i| i.issuer == store.current.cert && i.hosts == hosts && i.expires > now);
        let cert = match kept {
            Some(i) => i,
            None => issuer.serving(&store.current, &hosts, now)?,
        };
        issued.insert(key, cert);
    }
    store.serving = issued;
    let changed = before.as_ref() != Some(&store);
    Ok((store, changed))
}

/// Seconds from `now` until the store's next step is due (none: nothing will change until the
/// bundle does).
pub fn next_step(store: &Store, now: i64, lifetime: i64) -> i64 {
    let mut at = vec![store.current.expires];
    match &store.next {
        Some(next) => at.push(next.made + overlap(lifetime)),
        None => at.push(renew_at(&store.current, lifetime)),
    }
    if let Some(p) = &store.previous {
        at.push(p.expires);
    }
    at.into_iter().min().map_or(0, |t| (t - now).max(0))
}

#[cfg(test)]
mod tests;
