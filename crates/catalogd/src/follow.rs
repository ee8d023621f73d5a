//! What a catalogd follower does: serve content like the leader, without reconciling. Only
//! the leader fetches sources and writes status; a follower watches Catalogs and copies each
//! served content (`status.contentHash`) from the leader's content server into its own store,
//! checking the hash, so every replica behind the content Service answers the same.
//!
//! The leader advertises its content server's address on the leader Lease
//! ([`olm_runtime::leader::Leadership::leader_address`]). What to copy and what to drop is
//! decided by [`plan`], a pure function; [`Follower::run`] carries it out.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use kube::api::Api;
use kube::runtime::{WatchStreamExt as _, reflector, watcher};
use olm_api::catalog::Catalog;
use olm_api::conditions::is_true;
use olm_runtime::leader::Leadership;
use olm_runtime::{ReadinessHandle, error_chain};
use sha2::{Digest as _, Sha256};
use tokio_util::sync::CancellationToken;

use crate::status::SERVING;
use crate::store::Rendered;
use crate::store::Store;
use crate::unpack::parse_and_validate;

/// A Catalog as a follower sees it: its identity and the hash the leader serves for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    /// The Catalog's name.
    pub name: String,
    /// Its uid.
    pub uid: String,
    /// `status.contentHash` while `Serving` is true.
    pub hash: Option<String>,
}

/// What this replica's store holds for a catalog name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// The catalog's name.
    pub name: String,
    /// The uid of the Catalog the content belongs to.
    pub owner: Option<String>,
    /// The hash of its current content.
    pub hash: Option<String>,
}

/// One step of keeping the store in step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Copy the content the leader serves for this Catalog.
    Copy {
        /// The Catalog.
        name: String,
        /// Its uid (the owner of the copy).
        uid: String,
        /// The hash the copy must have.
        hash: String,
    },
    /// Remove content no existing Catalog owns.
    Remove(String),
}

/// The steps that make `held` match `wanted`: copy every served hash not held for its
/// Catalog, remove what belongs to no existing Catalog (by name and uid). Content of a
/// Catalog that exists but is not served (yet) is kept, as the leader keeps it.
pub fn plan(wanted: &[Wanted], held: &[Held]) -> Vec<Step> {
    let held_by_name: HashMap<&str, &Held> = held.iter().map(|h| (h.name.as_str(), h)).collect();
    let existing: HashMap<&str, &str> = wanted
        .iter()
        .map(|w| (w.name.as_str(), w.uid.as_str()))
        .collect();
    let mut steps: Vec<Step> = wanted
        .iter()
        .filter_map(|w| {
            let hash = w.hash.as_ref()?;
            let have = held_by_name.get(w.name.as_str());
            let in_step = have.is_some_and(|h| {
                h.owner.as_deref() == Some(w.uid.as_str()) && h.hash.as_ref() == Some(hash)
            });
            (!in_step).then(|| Step::Copy {
                name: w.name.clone(),
                uid: w.uid.clone(),
                hash: hash.clone(),
            })
        })
        .collect();
    steps.extend(
        held.iter()
            .filter(|h| existing.get(h.name.as_str()).copied() != h.owner.as_deref())
            // A copy replaces content of an earlier Catalog of the same name anyway.
            .filter(|h| {
                !steps
                    .iter()
                    .any(|s| matches!(s, Step::Copy { name, .. } if *name == h.name))
            })
            .map(|h| Step::Remove(h.name.clone()))
            .collect::<Vec<_>>(),
    );
    steps
}

/// What a Catalog asks of followers.
pub fn wanted(catalog: &Catalog) -> Option<Wanted> {
    let status = catalog.status.as_ref();
    let serving = status.is_some_and(|s| is_true(&s.conditions, SERVING));
    Some(Wanted {
        name: catalog.metadata.name.clone()?,
        uid: catalog.metadata.uid.clone()?,
        hash: status
            .and_then(|s| s.content_hash.clone())
            .filter(|_| serving),
    })
}

/// How long to wait before trying failed copies again, at most.
const MAX_RETRY: Duration = Duration::from_secs(30);

/// How far a follower is behind the leader: since when each Catalog whose served content it
/// does not hold has been out of step.
#[derive(Debug, Default, Clone)]
pub struct Lag {
    since: HashMap<String, Instant>,
}

impl Lag {
    /// Records that the Catalogs `behind` are out of step at `now` (the others are in step).
    pub fn update(&mut self, behind: &[String], now: Instant) {
        self.since.retain(|name, _| behind.contains(name));
        for name in behind {
            self.since.entry(name.clone()).or_insert(now);
        }
    }

    /// How long the oldest out-of-step Catalog has been behind at `now` (zero when in step).
    pub fn behind(&self, now: Instant) -> Duration {
        self.since
            .values()
            .map(|since| now.saturating_duration_since(*since))
            .max()
            .unwrap_or_default()
    }

    /// Whether the follower may be served from: nothing behind for longer than `bound`. A
    /// Catalog just changed is behind for a moment on every follower; one behind for longer is
    /// stale content behind the Service, and the follower should leave it.
    pub fn ready(&self, now: Instant, bound: Duration) -> bool {
        self.behind(now) <= bound
    }
}

/// A follower's copying loop.
pub struct Follower {
    /// The API client (reads only).
    pub client: kube::Client,
    /// This replica's store.
    pub store: Arc<Store>,
    /// Where the leader's address comes from.
    pub leadership: Leadership,
    /// How the leader's content server is reached.
    pub peer: Peer,
    /// The largest content copied, in bytes.
    pub max_bytes: u64,
    /// Ready while no served hash has been missing here for longer than `max_lag`.
    pub ready: ReadinessHandle,
    /// How long a served hash may be missing before the follower reports not ready.
    pub max_lag: Duration,
    /// How far behind the leader this follower is (`catalogd_follower_lag_seconds`).
    pub lag_gauge: prometheus::Gauge,
}

impl Follower {
    /// The hand-over: copies the leader's content until this replica leads (`true`) or
    /// `shutdown` comes first (`false`), then stops copying, so that the leader's own
    /// reconciles take over the store.
    pub async fn until_leading(self, shutdown: &CancellationToken) -> bool {
        let stop = shutdown.child_token();
        let leadership = self.leadership.clone();
        let following = tokio::spawn(self.run(stop.clone()));
        let leading = leadership.acquired(shutdown).await;
        stop.cancel();
        let _ = following.await;
        leading
    }

    /// Keeps the store in step until `stop`.
    pub async fn run(self, stop: CancellationToken) {
        let (reader, writer) = reflector::store::<Catalog>();
        let events = reflector::reflector(
            writer,
            watcher(
                Api::<Catalog>::all(self.client.clone()),
                watcher::Config::default(),
            ),
        )
        .default_backoff();
        let mut events = std::pin::pin!(events);
        let mut lease = self.leadership.lease_changes();
        let (mut synced, mut dirty, mut failures) = (false, false, 0u32);
        let mut retry_at: Option<Instant> = None;
        let mut lag = Lag::default();
        let mut caught_up = false;
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                event = events.next() => match event {
                    Some(Ok(watcher::Event::InitDone)) => { synced = true; dirty = true; }
                    Some(Ok(watcher::Event::Init | watcher::Event::InitApply(_))) => {}
                    Some(Ok(_)) => dirty = true,
                    Some(Err(error)) => {
                        tracing::warn!(error = %error_chain(&error), "the Catalog watch failed; retrying");
                    }
                    None => return,
                },
                changed = lease.changed() => {
                    if changed.is_err() { return; }
                    dirty = true;
                }
                () = sleep_until(retry_at) => dirty = true,
            }
            if !synced || !dirty {
                continue;
            }
            dirty = false;
            let wanted: Vec<Wanted> = reader.state().iter().filter_map(|c| wanted(c)).collect();
            let behind = self.step(&wanted).await;
            let now = Instant::now();
            lag.update(&behind, now);
            self.lag_gauge.set(lag.behind(now).as_secs_f64());
            // Ready once the store first held every served hash, and while nothing has been
            // missing for longer than the bound since.
            caught_up |= behind.is_empty();
            self.ready
                .set_ready(caught_up && lag.ready(now, self.max_lag));
            if behind.is_empty() {
                failures = 0;
                retry_at = None;
            } else {
                failures = failures.saturating_add(1);
                let wait = Duration::from_secs(1 << failures.min(5))
                    .min(MAX_RETRY)
                    // Looked at again when the lag would pass its bound, so readiness follows.
                    .min(
                        self.max_lag
                            .saturating_sub(lag.behind(now))
                            .max(Duration::from_secs(1)),
                    );
                retry_at = Some(now + wait);
            }
        }
    }

    /// Carries out one plan; the Catalogs whose served content is still not held (copies that
    /// failed; a store that cannot be read counts as all of them).
    async fn step(&self, wanted: &[Wanted]) -> Vec<String> {
        let everything = || {
            wanted
                .iter()
                .filter(|w| w.hash.is_some())
                .map(|w| w.name.clone())
                .collect()
        };
        let store = self.store.clone();
        let held = match tokio::task::spawn_blocking(move || held(&store)).await {
            Ok(Ok(held)) => held,
            Ok(Err(error)) => {
                tracing::warn!(%error, "could not list the content store");
                return everything();
            }
            Err(error) => {
                tracing::warn!(%error, "listing the content store failed");
                return everything();
            }
        };
        let mut behind = Vec::new();
        for step in plan(wanted, &held) {
            let result = match &step {
                Step::Copy { name, uid, hash } => self.copy(name, uid, hash).await,
                Step::Remove(name) => {
                    let (store, name) = (self.store.clone(), name.clone());
                    tokio::task::spawn_blocking(move || {
                        store.delete(&name).map_err(|e| e.to_string())
                    })
                    .await
                    .unwrap_or_else(|e| Err(e.to_string()))
                }
            };
            match result {
                Ok(()) => tracing::info!(?step, "follower content in step"),
                Err(error) => {
                    tracing::warn!(?step, %error, "could not copy the leader's content; retrying");
                    let (Step::Copy { name, .. } | Step::Remove(name)) = &step;
                    behind.push(name.clone());
                }
            }
        }
        behind
    }

    /// Copies `name`'s content with `hash` from the leader.
    async fn copy(&self, name: &str, uid: &str, hash: &str) -> Result<(), String> {
        let leader = self
            .leadership
            .leader_address()
            .ok_or("no leader has advertised its content address yet")?;
        let (http, url) = self
            .peer
            .request(&leader, &format!("catalogs/{name}/all.json"))?;
        let body = self.download(&http, &url).await?;
        let got = hex::encode(Sha256::digest(&body));
        if got != hash {
            // The leader moved on since the status was read; the next status triggers a copy.
            return Err(format!("{url} served content {got}, not {hash}"));
        }
        let (store, name, uid, hash) = (
            self.store.clone(),
            name.to_owned(),
            uid.to_owned(),
            hash.to_owned(),
        );
        tokio::task::spawn_blocking(move || {
            let fbc = parse_and_validate(vec![("all.json".to_owned(), body)])?;
            let rendered = Rendered::from_fbc(&fbc).map_err(|e| e.to_string())?;
            if rendered.hash() != hash {
                return Err(format!(
                    "the leader's content {hash} renders as {} here; is this replica another version?",
                    rendered.hash()
                ));
            }
            store
                .put_rendered(&name, &uid, rendered)
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
        .await
        .unwrap_or_else(|e| Err(e.to_string()))
    }

    async fn download(&self, http: &reqwest::Client, url: &str) -> Result<Vec<u8>, String> {
        let response = http
            .get(url)
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(|e| format!("GET {url}: {}", error_chain(&e)))?;
        let mut body = Vec::new();
        let mut stream = response.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| format!("GET {url}: {}", error_chain(&e)))?;
            if body.len() as u64 + chunk.len() as u64 > self.max_bytes {
                return Err(format!("{url} is larger than {} bytes", self.max_bytes));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }
}

/// How a follower reaches the leader's content server.
#[derive(Debug, Default)]
pub struct Peer {
    /// CAs (PEM) trusted for the leader's HTTPS content server, besides the system's.
    pub ca_pem: Option<Vec<u8>>,
    /// The name the content server's certificate is for (the host of `--external-address`).
    /// Over HTTPS, the leader's advertised address (a Pod IP, which no certificate names) is
    /// connected to under this name.
    pub server_name: Option<String>,
    /// How long one copy may take.
    pub timeout: Duration,
    /// The client made for the leader last seen, by its address: leaders change rarely.
    pub client: std::sync::Mutex<Option<(String, reqwest::Client)>>,
}

impl Peer {
    /// A client and the URL of `path` on the leader advertised as `leader`.
    pub fn request(&self, leader: &str, path: &str) -> Result<(reqwest::Client, String), String> {
        let address = leader;
        let leader = url::Url::parse(leader)
            .map_err(|e| format!("the leader advertised {leader:?}, not a URL: {e}"))?;
        let (url, resolve) = target(&leader, self.server_name.as_deref(), path)?;
        let mut cached = self
            .client
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((for_address, client)) = cached.as_ref()
            && for_address == address
        {
            return Ok((client.clone(), url.to_string()));
        }
        let mut builder = reqwest::Client::builder().timeout(self.timeout);
        if let Some(pem) = &self.ca_pem {
            for cert in reqwest::Certificate::from_pem_bundle(pem).map_err(|e| e.to_string())? {
                builder = builder.add_root_certificate(cert);
            }
        }
        if let Some((name, addr)) = resolve {
            builder = builder.resolve(&name, addr);
        }
        let client = builder.build().map_err(|e| error_chain(&e))?;
        *cached = Some((address.to_owned(), client.clone()));
        Ok((client, url.to_string()))
    }
}

/// The URL of `path` on `leader`, and, over HTTPS with a `server_name` when the leader is
/// advertised by IP, the name to connect under and the address it stands for.
pub fn target(
    leader: &url::Url,
    server_name: Option<&str>,
    path: &str,
) -> Result<(url::Url, Option<(String, std::net::SocketAddr)>), String> {
    let base = if leader.path().ends_with('/') {
        leader.clone()
    } else {
        let mut base = leader.clone();
        base.set_path(&format!("{}/", leader.path()));
        base
    };
    let mut url = base
        .join(path)
        .map_err(|e| format!("{leader}{path} is not a URL: {e}"))?;
    let ip = match leader.host() {
        Some(url::Host::Ipv4(ip)) => Some(std::net::IpAddr::V4(ip)),
        Some(url::Host::Ipv6(ip)) => Some(std::net::IpAddr::V6(ip)),
        _ => None,
    };
    let (Some(name), Some(ip), "https") = (server_name, ip, leader.scheme()) else {
        return Ok((url, None));
    };
    let port = leader.port_or_known_default().unwrap_or(443);
    url.set_host(Some(name))
        .map_err(|e| format!("{name} is not a host name: {e}"))?;
    Ok((
        url,
        Some((name.to_owned(), std::net::SocketAddr::new(ip, port))),
    ))
}

/// What the store holds, by catalog name.
fn held(store: &Store) -> Result<Vec<Held>, crate::store::StoreError> {
    store
        .list()?
        .into_iter()
        .map(|name| {
            Ok(Held {
                owner: store.owner(&name)?,
                hash: store.current(&name)?.map(|s| s.hash),
                name,
            })
        })
        .collect()
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::{Held, Step, Wanted, plan, target};

    #[test]
    fn an_https_leader_by_ip_is_reached_under_the_certificates_name() {
        let leader = url::Url::parse("https://10.1.2.3:8083").expect("a URL");
        let (url, resolve) = target(
            &leader,
            Some("catalogd.olm-system.svc"),
            "catalogs/a/all.json",
        )
        .expect("a target");
        assert_eq!(
            url.as_str(),
            "https://catalogd.olm-system.svc:8083/catalogs/a/all.json"
        );
        let (name, addr) = resolve.expect("resolved by hand");
        assert_eq!(name, "catalogd.olm-system.svc");
        assert_eq!(addr.to_string(), "10.1.2.3:8083");
    }

    #[test]
    fn plain_http_or_a_named_leader_is_reached_as_advertised() {
        let plain = url::Url::parse("http://10.1.2.3:8083").expect("a URL");
        let (url, resolve) =
            target(&plain, Some("catalogd"), "catalogs/a/all.json").expect("a target");
        assert_eq!(url.as_str(), "http://10.1.2.3:8083/catalogs/a/all.json");
        assert!(resolve.is_none());
        let named = url::Url::parse("https://leader.example/base").expect("a URL");
        let (url, resolve) =
            target(&named, Some("catalogd"), "catalogs/a/all.json").expect("a target");
        assert_eq!(
            url.as_str(),
            "https://leader.example/base/catalogs/a/all.json"
        );
        assert!(resolve.is_none());
    }

    fn wanted(name: &str, uid: &str, hash: Option<&str>) -> Wanted {
        Wanted {
            name: name.into(),
            uid: uid.into(),
            hash: hash.map(Into::into),
        }
    }

    fn held(name: &str, owner: &str, hash: &str) -> Held {
        Held {
            name: name.into(),
            owner: Some(owner.into()),
            hash: Some(hash.into()),
        }
    }

    fn copy(name: &str, uid: &str, hash: &str) -> Step {
        Step::Copy {
            name: name.into(),
            uid: uid.into(),
            hash: hash.into(),
        }
    }

    #[test]
    fn served_hashes_not_held_are_copied() {
        let steps = plan(
            &[
                wanted("a", "u1", Some("h1")),
                wanted("b", "u2", Some("h2")),
                wanted("c", "u3", None),
            ],
            &[held("a", "u1", "h0"), held("b", "u2", "h2")],
        );
        assert_eq!(steps, [copy("a", "u1", "h1")]);
    }

    #[test]
    fn content_of_a_catalog_recreated_under_its_name_is_copied_again() {
        let steps = plan(&[wanted("a", "new", Some("h1"))], &[held("a", "old", "h1")]);
        assert_eq!(steps, [copy("a", "new", "h1")]);
    }

    #[test]
    fn content_of_deleted_catalogs_is_removed_and_unserved_content_kept() {
        let steps = plan(
            &[wanted("kept", "u1", None)],
            &[
                held("kept", "u1", "h1"),
                held("gone", "u2", "h2"),
                held("replaced", "u3", "h3"),
            ],
        );
        assert_eq!(
            steps,
            [Step::Remove("gone".into()), Step::Remove("replaced".into())]
        );
        let recreated_unserved = plan(&[wanted("a", "new", None)], &[held("a", "old", "h")]);
        assert_eq!(recreated_unserved, [Step::Remove("a".into())]);
    }

    #[test]
    fn a_store_in_step_needs_nothing() {
        assert!(plan(&[wanted("a", "u", Some("h"))], &[held("a", "u", "h")]).is_empty());
        assert!(plan(&[], &[]).is_empty());
    }
}
