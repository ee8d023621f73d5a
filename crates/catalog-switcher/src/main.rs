//! catalog-switcher: fills `olm.catalogImageTemplate` annotations into catalog image references.
//!
//! Wiring only: flags, tracing, client, metrics; the version poller; the Catalog controller,
//! and the CatalogSource controller while that CRD is served, until SIGTERM.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};
use catalog_switcher::allowlist::{Allowed, Allowlist};
use catalog_switcher::controller;
use catalog_switcher::lookup::Objects;
use catalog_switcher::reconcile::Context;
use catalog_switcher::version::KubeVersion;
use catalog_switcher::watches::{Requeue, Watches};
use clap::Parser;
use kube::api::Api;
use kube::runtime::watcher;
use olm_api::catalog::Catalog;

use olm_runtime::{Metrics, ReadinessHandle, RuntimeArgs, StartOptions, telemetry};
use prometheus::{IntCounterVec, IntGaugeVec, Opts};
use tokio::sync::watch;

/// catalog-switcher: keeps Catalog image references in step with their templates.
#[derive(Parser, Debug)]
#[command(version, about, args_override_self = true)]
struct Flags {
    /// How often to ask the API server for its version, in seconds.
    #[arg(long, default_value_t = 300)]
    version_poll_seconds: u64,
    /// Resources object variables may read (comma-separated
    /// `[GROUP/]VERSION/RESOURCE[@NAMESPACE]`); nothing else is read.
    #[arg(long, value_delimiter = ',')]
    allowed_resources: Vec<Allowed>,
    /// Switch OLM v0 CatalogSources too, while their CRD is served. Turn it off where OLM v0's
    /// own catalog-operator switches them, so the two do not take turns rewriting them.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    switch_catalog_sources: bool,
    /// The most distinct objects one template may read; a template reading more is not
    /// resolved (TooManyObjects).
    #[arg(long, default_value_t = 8)]
    max_objects_per_template: usize,
    /// The most objects watched at once for all templates (each a watch on the API server); a
    /// template that would pass it is not resolved (WatchLimitReached).
    #[arg(long, default_value_t = 500)]
    max_watched_objects: usize,
    /// Log format: plain or json.
    #[arg(long, default_value = "plain")]
    log_format: telemetry::LogFormat,
    #[command(flatten)]
    runtime: RuntimeArgs,
}

#[tokio::main]
async fn main() -> Result<()> {
    let flags = Flags::parse();
    let olm_runtime::Started {
        client,
        shutdown,
        metrics,
        readiness,
        leadership,
        admin,
    } = olm_runtime::start(StartOptions {
        name: "catalog-switcher",
        log_format: flags.log_format,
        runtime: &flags.runtime,
        advertise: None,
        flags: &flags,
    })
    .await
    .context("starting")?;
    let resolutions = IntCounterVec::new(
        Opts::new(
            "catalog_switcher_template_resolutions_total",
            "Templates filled, by result (resolved, unresolved, not_allowed).",
        ),
        &["result"],
    )?;
    let version_info = IntGaugeVec::new(
        Opts::new(
            "catalog_switcher_server_version_info",
            "The API server's version, as last polled (value 1).",
        ),
        &["git_version"],
    )?;
    let watched = prometheus::IntGauge::new(
        "catalog_switcher_watched_objects",
        "Objects watched because a template reads them.",
    )?;
    metrics.registry.register(Box::new(resolutions.clone()))?;
    metrics.registry.register(Box::new(version_info.clone()))?;
    metrics.registry.register(Box::new(watched.clone()))?;

    let admin = admin.spawn().await?;

    // A follower is ready (it serves its metrics) and waits; only the leader switches.
    let families = Families {
        resolutions,
        version_info,
        watched,
    };
    let work = async {
        let catalogs_ready = readiness.register("catalog-watch");
        switch(
            &flags,
            client,
            metrics,
            families,
            catalogs_ready,
            shutdown.clone(),
        )
        .await;
    };
    leadership
        .run(work, &shutdown, flags.runtime.shutdown.grace())
        .await?;
    leadership.finish(&shutdown, [admin]).await;
    tracing::info!("catalog-switcher stopped");
    Ok(())
}

/// The switcher's own metric families, registered before leading so followers show them too.
struct Families {
    resolutions: IntCounterVec,
    version_info: IntGaugeVec,
    watched: prometheus::IntGauge,
}

/// The leader's work: the version poller and the controllers, until `shutdown`.
async fn switch(
    flags: &Flags,
    client: kube::Client,
    metrics: Arc<Metrics>,
    families: Families,
    catalogs_ready: ReadinessHandle,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let Families {
        resolutions,
        version_info,
        watched,
    } = families;
    // The version first, so that the first reconciles have it.
    let (version_tx, version_rx) = watch::channel(poll_version(&client).await);
    set_version_info(&version_info, version_rx.borrow().as_ref());
    // The Catalog watch restarting (after an error, or a long disconnection) may mean the
    // cluster was upgraded meanwhile: poll at once then too.
    let poll_now = Arc::new(tokio::sync::Notify::new());
    let poller = {
        let (client, shutdown, poll_now) = (client.clone(), shutdown.clone(), poll_now.clone());
        let interval = Duration::from_secs(flags.version_poll_seconds.max(1));
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = tokio::time::sleep(interval) => {}
                    () = poll_now.notified() => {}
                }
                let polled = poll_version(&client).await;
                if polled.is_some() && *version_tx.borrow() != polled {
                    tracing::info!(version = ?polled, "the API server's version changed");
                    set_version_info(&version_info, polled.as_ref());
                    // Every controller re-resolves all its objects.
                    version_tx.send_replace(polled);
                }
            }
        })
    };

    let (catalogs_tx, catalogs_rx) = futures::channel::mpsc::unbounded();
    let requeue = Requeue {
        catalogs: catalogs_tx,
        catalog_sources: Arc::default(),
    };
    let watches = Watches::new(
        client.clone(),
        requeue.clone(),
        watched,
        flags.max_watched_objects,
    );
    let ctx = Arc::new(Context {
        client: client.clone(),
        objects: Objects::new(client.clone(), Allowlist(flags.allowed_resources.clone())),
        version: version_rx,
        resolutions,
        watches: watches.clone(),
        events: olm_runtime::EventPublisher::from_env(client.clone(), "catalog-switcher"),
        max_objects_per_template: flags.max_objects_per_template,
    });
    let v0 = flags.switch_catalog_sources.then(|| {
        tokio::spawn(catalog_switcher::v0::supervise(
            ctx.clone(),
            metrics.clone(),
            requeue,
            shutdown.clone(),
        ))
    });
    controller::run(
        controller::CATALOGS,
        Api::<Catalog>::all(client.clone()),
        ctx,
        metrics.clone(),
        catalogs_rx,
        move |event| match event {
            Ok(watcher::Event::Init) => poll_now.notify_one(),
            Ok(watcher::Event::InitDone | watcher::Event::Apply(_)) => {
                catalogs_ready.set_ready(true)
            }
            Ok(watcher::Event::Delete(_) | watcher::Event::InitApply(_)) => {}
            Err(error) => {
                tracing::warn!(%error, "the Catalog watch failed; not ready until it recovers");
                catalogs_ready.set_ready(false);
            }
        },
        shutdown.clone(),
    )
    .await;
    shutdown.cancel();
    if let Some(v0) = v0 {
        let _ = v0.await;
    }
    let _ = poller.await;
}

/// The API server's version, or `None` (logged) when it cannot be read.
async fn poll_version(client: &kube::Client) -> Option<KubeVersion> {
    match client.apiserver_version().await {
        Ok(info) => {
            let version = KubeVersion::from_info(&info);
            if version.is_none() {
                tracing::warn!(git_version = %info.git_version, "the API server's version has no usable numbers");
            }
            version
        }
        Err(error) => {
            tracing::warn!(%error, "could not read the API server's version; keeping the last one");
            None
        }
    }
}

fn set_version_info(gauge: &IntGaugeVec, version: Option<&KubeVersion>) {
    gauge.reset();
    if let Some(v) = version {
        gauge.with_label_values(&[v.git_version.as_str()]).set(1);
    }
}
