//! operator-controller: resolves `Operator` objects to bundles and writes `BundleDeployment`s.
//!
//! Wiring only: flags, tracing, client, the content client and resolver; then the admin
//! server (metrics, probes) and the Operator controller until SIGTERM. `explain` runs the same
//! resolution once against the cluster and prints it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};
use clap::{Parser, Subcommand, ValueEnum};
use olm_runtime::{RuntimeArgs, StartOptions, events::EventPublisher, telemetry};
use operator_controller::content::{ContentClient, ContentOptions};
use operator_controller::controller::{self, Settings};
use operator_controller::explain;
use operator_controller::metrics::AllMetrics;
use operator_controller::resolution::Resolver;

/// operator-controller: resolves Operators against catalogd's content and writes
/// BundleDeployments.
#[derive(Parser, Debug)]
#[command(version, about, args_override_self = true)]
struct Flags {
    #[command(subcommand)]
    command: Option<Command>,
    /// PEM file of CA certificates trusted for https content URLs (besides the system's).
    #[arg(long, env = "CATALOGD_CA_FILE", global = true)]
    catalogd_ca_file: Option<PathBuf>,
    /// The largest catalog content accepted, in bytes (after decompression).
    #[arg(long, default_value_t = 512 * 1024 * 1024, global = true)]
    max_catalog_bytes: u64,
    /// How long held content is used before catalogd is asked again (a conditional GET), in
    /// seconds; also how soon an unreachable catalogd is noticed.
    #[arg(long, default_value_t = 30, global = true)]
    catalog_recheck_seconds: u64,
    /// How long one content fetch may take, in seconds.
    #[arg(long, default_value_t = 120, global = true)]
    fetch_timeout_seconds: u64,
    /// How long one joint solve of a group of Operators may take, in seconds; past it, nothing
    /// is decided (Resolved=Unknown) and the Operators are retried.
    #[arg(long, default_value_t = 30, global = true)]
    resolution_timeout_seconds: u64,
    /// Operators reconciled at once.
    #[arg(long, default_value_t = 8)]
    concurrency: u16,
    /// Longest wait before retrying a failed Operator, in seconds.
    #[arg(long, default_value_t = 60)]
    max_backoff_seconds: u64,
    /// How often an Operator is looked at again without a trigger, in seconds (changes of
    /// catalogd's reachability are noticed by the prober every --catalog-recheck-seconds).
    #[arg(long, default_value_t = 600)]
    resync_seconds: u64,
    /// Log format: plain or json.
    #[arg(long, default_value = "plain", global = true)]
    log_format: telemetry::LogFormat,
    #[command(flatten)]
    runtime: RuntimeArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Prints what the controller would write for each Operator (or those named), and why,
    /// from the cluster of the current kubeconfig; writes nothing.
    Explain {
        /// Operators to explain; all when none.
        names: Vec<String>,
        /// Output format.
        #[arg(short = 'o', long, default_value = "text")]
        output: Output,
    },
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum Output {
    Text,
    Json,
}

fn content_client(flags: &Flags, metrics: Option<&AllMetrics>) -> Result<Arc<ContentClient>> {
    let ca_pem = match &flags.catalogd_ca_file {
        Some(path) => {
            Some(std::fs::read(path).with_context(|| format!("reading {}", path.display()))?)
        }
        None => None,
    };
    let options = ContentOptions {
        ca_pem,
        max_bytes: flags.max_catalog_bytes,
        recheck: Duration::from_secs(flags.catalog_recheck_seconds),
        timeout: Duration::from_secs(flags.fetch_timeout_seconds),
    };
    Ok(Arc::new(ContentClient::new(
        options,
        metrics.map(|m| m.content.clone()),
    )?))
}

#[tokio::main]
async fn main() -> Result<()> {
    let flags = Flags::parse();
    if let Some(Command::Explain { names, output }) = &flags.command {
        // Logs would mix with the report: only warnings, on stderr.
        telemetry::init_cli_tracing("warn")?;
        let client = olm_runtime::client::client()
            .await
            .context("connecting to the Kubernetes API")?;
        let resolver = Resolver::new(content_client(&flags, None)?, None)
            .with_timeout(Duration::from_secs(flags.resolution_timeout_seconds.max(1)));
        let reports = explain::explain(&client, &resolver, names)
            .await
            .context("reading Operators, Catalogs and BundleDeployments")?;
        match output {
            Output::Text => print!("{}", explain::text(&reports)),
            Output::Json => println!("{}", serde_json::json!({ "operators": reports })),
        }
        return Ok(());
    }

    let olm_runtime::Started {
        client,
        shutdown,
        metrics,
        readiness,
        leadership,
        admin,
    } = olm_runtime::start(StartOptions {
        name: "operator-controller",
        log_format: flags.log_format,
        runtime: &flags.runtime,
        advertise: None,
        flags: &flags,
    })
    .await
    .context("starting")?;
    let own = AllMetrics::new(&metrics.registry)?;

    let admin = admin.spawn().await?;

    let settings = Settings {
        concurrency: flags.concurrency.max(1),
        max_backoff: Duration::from_secs(flags.max_backoff_seconds.max(1)),
        resync: Duration::from_secs(flags.resync_seconds.max(1)),
        probe_interval: Duration::from_secs(flags.catalog_recheck_seconds.max(1)),
    };
    metrics.register_controller(controller::CONTROLLER, usize::from(settings.concurrency));
    // A follower is ready (it serves its metrics) and waits; only the leader reconciles.
    let work = async {
        let operators_ready = readiness.register("operator-watch");
        let resolver = Arc::new(
            Resolver::new(
                content_client(&flags, Some(&own))?,
                Some(own.operators.clone()),
            )
            .with_timeout(Duration::from_secs(flags.resolution_timeout_seconds.max(1))),
        );
        let (controller, ctx) = controller::build(
            client.clone(),
            resolver,
            EventPublisher::from_env(client, "operator-controller"),
            own.operators.clone(),
            &settings,
            operators_ready,
        );
        controller::run(
            controller,
            ctx,
            metrics,
            settings.concurrency,
            shutdown.clone(),
        )
        .await;
        anyhow::Ok(())
    };
    if let Some(led) = leadership
        .run(work, &shutdown, flags.runtime.shutdown.grace())
        .await?
    {
        led?;
    }
    leadership.finish(&shutdown, [admin]).await;
    tracing::info!("operator-controller stopped");
    Ok(())
}
