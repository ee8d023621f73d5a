//! catalogd as a manager ([`olm_runtime::manager`]): what every replica prepares and serves
//! (the content store, cleared of orphans, and the content server), how a follower copies the
//! leader's content until it leads ([`crate::follow`]), and the leader's work ([`lead`]).

pub mod api;
pub mod lead;

use olm_runtime::metrics::register;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use olm_runtime::manager::{Context, Manager};
use olm_runtime::shutdown::SERVER_DRAIN;
use olm_runtime::{ReadinessHandle, StartOptions};
use tokio::task::JoinHandle;

use crate::args::Args;
use crate::follow::{Follower, Peer};
use crate::orphans::{OrphansError, remove_orphans};
use crate::store::{Store, StoreError};
use crate::{budget, server};

/// What stops catalogd from starting or leading.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The runtime (client, admin server, leader election) failed.
    #[error(transparent)]
    Runtime(#[from] olm_runtime::Error),
    /// The flags contradict each other.
    #[error("{0}")]
    Settings(String),
    /// A file or directory could not be read or opened.
    #[error("{what}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
    /// A listening address is taken or not allowed.
    #[error("binding {what} to {address}")]
    Bind {
        /// Which server.
        what: &'static str,
        /// Its address.
        address: SocketAddr,
        /// Why binding failed.
        #[source]
        source: std::io::Error,
    },
    /// A call to the API server failed.
    #[error("{what}")]
    Kube {
        /// What was being done.
        what: &'static str,
        /// Why it failed.
        #[source]
        source: kube::Error,
    },
    /// The content store could not be opened.
    #[error("opening the content store {path}")]
    Store {
        /// Its directory.
        path: String,
        /// Why.
        #[source]
        source: StoreError,
    },
    /// Stored content of deleted Catalogs could not be looked at.
    #[error(transparent)]
    Orphans(#[from] OrphansError),
    /// A metric family could not be registered.
    #[error("registering metrics")]
    Metrics(#[from] prometheus::Error),
    /// The content server's certificate could not be loaded.
    #[error("loading the content server's certificate")]
    Tls(#[source] olm_runtime::tls::TlsError),
}

impl Error {
    pub(crate) fn kube(what: &'static str, source: kube::Error) -> Self {
        Self::Kube { what, source }
    }

    /// A listener on `address`, or why not.
    pub(crate) async fn bind(
        what: &'static str,
        address: SocketAddr,
    ) -> Result<tokio::net::TcpListener, Self> {
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .map_err(|source| Self::Bind {
                what,
                address,
                source,
            })?;
        if let Ok(local) = listener.local_addr() {
            tracing::info!(address = %local, "{what} listening");
        }
        Ok(listener)
    }
}

/// Reads `path`, saying which file failed.
fn read(path: &Path) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|source| Error::Io {
        what: format!("reading {}", path.display()),
        source,
    })
}

/// catalogd, from its flags.
pub struct Catalogd(pub Args);

/// What every replica holds once prepared.
pub struct Prepared {
    /// The content store every replica serves.
    pub store: Arc<Store>,
    /// The CAs of --registry-ca-file, checked.
    pub registry_ca: Option<Vec<u8>>,
    /// `content-sync`: whether this replica serves what the leader serves.
    pub content_synced: ReadinessHandle,
    /// `catalogd_follower_lag_seconds`.
    pub lag: prometheus::Gauge,
    content: JoinHandle<std::io::Result<()>>,
    /// The aggregated API's server, when it is on.
    api: Option<JoinHandle<std::io::Result<()>>>,
}

impl Manager for Catalogd {
    type Error = Error;
    type Prepared = Prepared;

    fn options(&self) -> StartOptions<'_> {
        StartOptions {
            name: "catalogd",
            runtime: &self.0.runtime,
            advertise: self.0.peer_address.clone(),
            flags: &self.0,
        }
    }

    async fn prepare(&self, ctx: &Context) -> Result<Prepared, Error> {
        let args = &self.0;
        if args.runtime.leader_election.leader_elect && args.peer_address.is_none() {
            tracing::warn!("--leader-elect without --peer-address: followers cannot copy content");
        }
        // Checked at start, not when this replica comes to lead: a bad flag fails every replica.
        budget::check_settings(args.memory()).map_err(Error::Settings)?;
        tracing::info!(
            bound_mib = budget::memory_bound(args.memory()) >> 20,
            "memory is bounded by the unpack budget (docs/install.md): set the container's limit at or above this"
        );
        let registry_ca = args.image.registry_ca().map_err(Error::Settings)?;
        let content_ready = ctx.readiness.register("content-server");
        let content_synced = ctx.readiness.register("content-sync");
        let lag = register(
            &ctx.metrics.registry,
            prometheus::Gauge::new(
                "catalogd_follower_lag_seconds",
                "How long this follower has been missing content the leader serves (its oldest out-of-step Catalog); zero when in step, and on the leader.",
            )?,
        )?;
        let store = Store::open_with_index_budget(&args.storage_dir, args.max_served_index_bytes)
            .map_err(|source| Error::Store {
            path: args.storage_dir.display().to_string(),
            source,
        })?;
        let store = Arc::new(store);
        remove_orphans(&ctx.client, &store).await?;
        let router = server::router(
            store.clone(),
            server::ServerMetrics::new(&ctx.metrics.registry)?,
        );
        let listener = Error::bind("the content server", args.content_address).await?;
        let tls = match (&args.content_tls_cert_file, &args.content_tls_key_file) {
            (Some(cert), Some(key)) => {
                Some(olm_runtime::tls::server_config(Some((cert, key)), &[]).map_err(Error::Tls)?)
            }
            _ => None,
        };
        let content = tokio::spawn(server::serve(listener, router, tls, ctx.shutdown.clone()));
        content_ready.set_ready(true);
        let api = api::start(args, ctx, store.clone(), content_synced.clone()).await?;
        Ok(Prepared {
            store,
            registry_ca,
            content_synced,
            lag,
            content,
            api,
        })
    }

    /// Every replica serves content; until it leads, a replica copies the leader's.
    async fn follow(&self, prepared: &Prepared, ctx: &Context) -> Result<(), Error> {
        let args = &self.0;
        let follower = Follower {
            client: ctx.client.clone(),
            store: prepared.store.clone(),
            leadership: ctx.leadership.clone(),
            peer: Peer {
                ca_pem: args.peer_ca_file.as_deref().map(read).transpose()?,
                server_name: url::Url::parse(&args.external_address)
                    .ok()
                    .and_then(|u| u.host_str().map(str::to_owned)),
                timeout: Duration::from_secs(args.http_timeout_seconds),
                client: std::sync::Mutex::default(),
            },
            // Canonical content is about the size of what was fetched; leave room for layout.
            max_bytes: args.max_content_bytes.saturating_mul(2),
            ready: prepared.content_synced.clone(),
            max_lag: Duration::from_secs(args.follower_max_lag_seconds),
            lag_gauge: prepared.lag.clone(),
        };
        if follower.until_leading(&ctx.shutdown).await {
            tracing::info!("leading: reconciling Catalogs");
        }
        Ok(())
    }

    async fn lead(&self, prepared: &Prepared, ctx: &Context) -> Result<(), Error> {
        lead::lead(&self.0, prepared, ctx).await
    }

    async fn drain(&self, prepared: Prepared) {
        let _ = tokio::time::timeout(SERVER_DRAIN, prepared.content).await;
        if let Some(api) = prepared.api {
            let _ =
                tokio::time::timeout(SERVER_DRAIN + catalogd_api::listener::LAME_DUCK, api).await;
        }
    }
}
