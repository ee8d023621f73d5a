//! operator-controller's flags, and what they build: the content client, the resolver and
//! the controller's settings (every flag is documented in docs/operators.md).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use olm_runtime::RuntimeArgs;

use crate::content::{BuildError, ContentClient, ContentOptions};
use crate::controller::Settings;
use crate::metrics::AllMetrics;
use crate::resolution::Resolver;

/// operator-controller: resolves Operators against catalogd's content and writes
/// BundleDeployments.
#[derive(Parser, Debug)]
#[command(version, about, args_override_self = true)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// PEM file of CA certificates trusted for https content URLs (besides the system's).
    #[arg(long, env = "CATALOGD_CA_FILE", global = true)]
    pub catalogd_ca_file: Option<PathBuf>,
    /// The largest catalog content accepted, in bytes (after decompression).
    #[arg(long, default_value_t = 512 * 1024 * 1024, global = true)]
    pub max_catalog_bytes: u64,
    /// How long held content is used before catalogd is asked again (a conditional GET), in
    /// seconds; also how soon an unreachable catalogd is noticed.
    #[arg(long, default_value_t = 30, global = true)]
    pub catalog_recheck_seconds: u64,
    /// How long one content fetch may take, in seconds.
    #[arg(long, default_value_t = 120, global = true)]
    pub fetch_timeout_seconds: u64,
    /// How long one joint solve of a group of Operators may take, in seconds; past it, nothing
    /// is decided (Resolved=Unknown) and the Operators are retried.
    #[arg(long, default_value_t = 30, global = true)]
    pub resolution_timeout_seconds: u64,
    /// Operators reconciled at once.
    #[arg(long, default_value_t = 8)]
    pub concurrency: u16,
    /// Longest wait before retrying a failed Operator, in seconds.
    #[arg(long, default_value_t = 60)]
    pub max_backoff_seconds: u64,
    /// How often an Operator is looked at again without a trigger, in seconds (changes of
    /// catalogd's reachability are noticed by the prober every --catalog-recheck-seconds).
    #[arg(long, default_value_t = 600)]
    pub resync_seconds: u64,
    #[command(flatten)]
    pub runtime: RuntimeArgs,
}

/// operator-controller's commands besides running the manager.
#[derive(Subcommand, Debug)]
pub enum Command {
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

/// How `explain` prints its report.
#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum Output {
    // The report as text (plain comments: doc comments would change `explain --help`).
    Text,
    // `{"operators": [...]}`.
    Json,
}

impl Args {
    /// The content client these flags describe.
    pub fn content_client(
        &self,
        metrics: Option<&AllMetrics>,
    ) -> Result<Arc<ContentClient>, ArgsError> {
        let ca_pem = match &self.catalogd_ca_file {
            Some(path) => Some(std::fs::read(path).map_err(|source| ArgsError::Read {
                path: path.clone(),
                source,
            })?),
            None => None,
        };
        let options = ContentOptions {
            ca_pem,
            max_bytes: self.max_catalog_bytes,
            recheck: Duration::from_secs(self.catalog_recheck_seconds),
            timeout: Duration::from_secs(self.fetch_timeout_seconds),
        };
        Ok(Arc::new(ContentClient::new(
            options,
            metrics.map(|m| m.content.clone()),
        )?))
    }

    /// The resolver these flags describe, counting into `metrics` when given.
    pub fn resolver(&self, metrics: Option<&AllMetrics>) -> Result<Resolver, ArgsError> {
        Ok(Resolver::new(
            self.content_client(metrics)?,
            metrics.map(|m| m.operators.clone()),
        )
        .with_timeout(Duration::from_secs(self.resolution_timeout_seconds.max(1))))
    }

    /// The controller's settings (every duration at least a second).
    pub fn settings(&self) -> Settings {
        Settings {
            concurrency: self.concurrency.max(1),
            max_backoff: Duration::from_secs(self.max_backoff_seconds.max(1)),
            resync: Duration::from_secs(self.resync_seconds.max(1)),
            probe_interval: Duration::from_secs(self.catalog_recheck_seconds.max(1)),
        }
    }
}

/// Flags that name what cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ArgsError {
    /// --catalogd-ca-file could not be read.
    #[error("reading {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The content client could not be built (a bad CA bundle).
    #[error(transparent)]
    Content(#[from] BuildError),
}
