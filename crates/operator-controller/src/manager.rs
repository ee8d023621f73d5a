//! operator-controller as a manager ([`olm_runtime::manager`]): every replica registers the
//! metric families (so followers show them too); the leader resolves and reconciles Operators.
//! `explain` ([`explain_command`]) runs the same resolution once and prints it.

use std::sync::Arc;

use olm_runtime::manager::{Context, Manager};
use olm_runtime::{EventPublisher, StartOptions};

use crate::args::{Args, ArgsError, Output};
use crate::controller;
use crate::explain;
use crate::metrics::AllMetrics;

/// What stops operator-controller.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The runtime (client, admin server, leader election, logs) failed.
    #[error(transparent)]
    Runtime(#[from] olm_runtime::Error),
    /// A flag names what cannot be used.
    #[error(transparent)]
    Args(#[from] ArgsError),
    /// A metric family could not be registered.
    #[error("registering metrics")]
    Metrics(#[from] prometheus::Error),
    /// `explain` could not read the cluster.
    #[error("reading Operators, Catalogs and BundleDeployments")]
    Read(#[source] kube::Error),
    /// `explain -o json` could not render its report.
    #[error("rendering the report")]
    Render(#[from] serde_json::Error),
}

/// operator-controller, from its flags.
pub struct OperatorController(pub Args);

impl Manager for OperatorController {
    type Error = Error;
    type Prepared = AllMetrics;

    fn options(&self) -> StartOptions<'_> {
        StartOptions {
            name: "operator-controller",
            runtime: &self.0.runtime,
            advertise: None,
            flags: &self.0,
        }
    }

    async fn prepare(&self, ctx: &Context) -> Result<AllMetrics, Error> {
        Ok(AllMetrics::new(&ctx.metrics.registry)?)
    }

    async fn lead(&self, own: &AllMetrics, ctx: &Context) -> Result<(), Error> {
        let settings = self.0.settings();
        let operators_ready = ctx.readiness.register("operator-watch");
        let resolver = Arc::new(self.0.resolver(Some(own))?);
        let (controller, reconciler) = controller::build(
            ctx.client.clone(),
            resolver,
            EventPublisher::from_env(ctx.client.clone(), "operator-controller"),
            own.operators.clone(),
            &settings,
            operators_ready,
        );
        controller::run(
            controller,
            reconciler,
            ctx.metrics.clone(),
            settings.concurrency,
            ctx.shutdown.clone(),
        )
        .await;
        Ok(())
    }
}

/// `operator-controller explain`: what the controller would write for the Operators named
/// (all when none), from the cluster of the current kubeconfig; writes nothing.
pub async fn explain_command(args: &Args, names: &[String], output: Output) -> Result<(), Error> {
    // Logs would mix with the report: only warnings, on stderr.
    olm_runtime::telemetry::init_cli_tracing("warn")?;
    let client = olm_runtime::client::client().await?;
    let resolver = args.resolver(None)?;
    let reports = explain::explain(&client, &resolver, names)
        .await
        .map_err(Error::Read)?;
    match output {
        Output::Text => print!("{}", explain::text(&reports)),
        Output::Json => println!(
            "{}",
            serde_json::to_string(&std::collections::BTreeMap::from([("operators", &reports)]))?
        ),
    }
    Ok(())
}
