//! The `git` source: FBC kept in a git repository, fetched with gix (pure Rust, no git
//! binary). A branch or tag is polled with one `ls-refs` and fetched only when its commit
//! moved; a commit is pinned and fetched once. Only the commit is fetched (depth 1), into a
//! scratch repository; the catalog is read from its objects, never checked out.

pub mod remote;
pub mod spec;
pub mod tree;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Client;
use olm_api::catalog::{
    Catalog, GitSource as GitSpec, ResolvedGitSource, ResolvedSource, SourceType,
};
use prometheus::{IntCounter, IntCounterVec, Opts};
use tokio::sync::Semaphore;

use self::spec::{Transport, Want};
use super::credentials::{HttpAuth, ca_bundle, http_auth, opted_in_secret};
use super::{CatalogSource, Fetched, SourceError, reasons};
use crate::plan::Mode;

/// The user name sent with a `token` (git hosts accept any with a token as the password).
pub const TOKEN_USER: &str = "x-access-token";

/// How the git source is set up.
#[derive(Debug, Clone)]
pub struct GitOptions {
    /// The most a catalog directory (and the pack fetched for it) may hold.
    pub max_bytes: u64,
    /// The most one ls-refs or fetch may take, in all.
    pub timeout: Duration,
    /// Fetches running at once, across all Catalogs.
    pub max_concurrent: usize,
    /// Where scratch repositories live while a fetch runs.
    pub scratch: PathBuf,
}

/// Counts of the git source.
#[derive(Clone)]
pub struct GitMetrics {
    /// Remote operations, by `operation` (`ls-refs`, `fetch`) and `result` (`success`,
    /// `failure`).
    pub operations: IntCounterVec,
    /// Bytes of packs fetched.
    pub fetched_bytes: IntCounter,
}

impl GitMetrics {
    /// Registers the families in `registry`.
    pub fn new(registry: &prometheus::Registry) -> Result<Self, prometheus::Error> {
        let operations = IntCounterVec::new(
            Opts::new(
                "catalogd_git_operations_total",
                "Git remote operations (ls-refs: a poll; fetch: a commit downloaded), by result.",
            ),
            &["operation", "result"],
        )?;
        let fetched_bytes = IntCounter::new(
            "catalogd_git_fetched_bytes_total",
            "Bytes of git packs fetched (depth 1: one commit's objects each).",
        )?;
        registry.register(Box::new(operations.clone()))?;
        registry.register(Box::new(fetched_bytes.clone()))?;
        Ok(Self {
            operations,
            fetched_bytes,
        })
    }

    fn count<T>(&self, operation: &str, result: &Result<T, SourceError>) {
        let label = if result.is_ok() { "success" } else { "failure" };
        self.operations.with_label_values(&[operation, label]).inc();
    }
}

/// Fetches catalogs from git repositories.
pub struct GitSource {
    client: Client,
    own_namespace: String,
    options: GitOptions,
    permits: Arc<Semaphore>,
    metrics: Option<GitMetrics>,
}

impl GitSource {
    /// A source reading Secrets and CA bundles from `own_namespace`, counting in `metrics`.
    pub fn new(
        client: Client,
        own_namespace: String,
        options: GitOptions,
        metrics: Option<GitMetrics>,
    ) -> Self {
        // Scratch repositories of an earlier run are garbage.
        let _ = std::fs::remove_dir_all(&options.scratch);
        let permits = Arc::new(Semaphore::new(options.max_concurrent.max(1)));
        Self {
            client,
            own_namespace,
            options,
            permits,
            metrics,
        }
    }

    /// The basic credentials of `spec`, if it names a Secret: checked before anything is sent.
    async fn account(
        &self,
        spec: &GitSpec,
        transport: Transport,
    ) -> Result<Option<(String, String)>, SourceError> {
        let Some(secret_ref) = &spec.auth_secret else {
            return Ok(None);
        };
        if transport == Transport::Http {
            return Err(spec::credentials_need_tls(
                &secret_ref.name,
                &spec.repository,
            ));
        }
        let secret = opted_in_secret(
            &self.client,
            &self.own_namespace,
            &secret_ref.name,
            "auth Secret",
        )
        .await?;
        Ok(Some(match http_auth(&secret, &secret_ref.name)? {
            HttpAuth::Bearer(token) => (TOKEN_USER.to_owned(), token),
            HttpAuth::Basic(user, password) => (user, password.unwrap_or_default()),
        }))
    }

    async fn get(&self, catalog: &Catalog, mode: &Mode) -> Result<Fetched, SourceError> {
        let spec = catalog.spec.source.git.clone().unwrap_or_default();
        let want = Want::from_spec(&spec.r#ref)?;
        let transport = spec::transport(&spec.repository)?;
        let directory = spec::directory(&spec)?;
        if transport == Transport::Ssh {
            return Err(SourceError::new(
                reasons::UNSUPPORTED_SOURCE,
                format!(
                    "{}: this catalogd cannot fetch over ssh yet; use the repository's https URL with a token in git.authSecret",
                    spec::redact(&spec.repository)
                ),
            ));
        }
        let account = self.account(&spec, transport).await?;
        let ca = match &spec.ca_bundle {
            Some(ca) => {
                let key = ca.key.as_deref().unwrap_or("ca.crt");
                ca_bundle(&self.client, &self.own_namespace, &ca.config_map, key).await?
            }
            None => Vec::new(),
        };
        let remote = remote::Remote {
            url: spec.repository.clone(),
            account,
            ca,
            timeout: self.options.timeout,
            shown: spec::redact(&spec.repository),
        };
        // What was fetched last for this repository, if the plan asks to compare.
        let since = super::since(mode)
            .and_then(|p| p.git.clone())
            .filter(|g| g.repository == spec.repository);
        let _permit =
            self.permits.clone().acquire_owned().await.map_err(|_| {
                SourceError::new(reasons::UNPACK_FAILED, "catalogd is shutting down")
            })?;
        let options = self.options.clone();
        let metrics = self.metrics.clone();
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let name = catalog.metadata.name.clone().unwrap_or_default();
        let task = tokio::task::spawn_blocking(move || {
            let work = Work {
                remote: &remote,
                want: &want,
                directory: &directory,
                options: &options,
                metrics: metrics.as_ref(),
                catalog: &name,
            };
            work.run(since, now)
        });
        task.await.map_err(|e| {
            SourceError::new(
                reasons::UNPACK_FAILED,
                format!("the git fetch stopped: {e}"),
            )
        })?
    }
}

/// One fetch, run on a blocking thread.
struct Work<'a> {
    remote: &'a remote::Remote,
    want: &'a Want,
    directory: &'a str,
    options: &'a GitOptions,
    metrics: Option<&'a GitMetrics>,
    catalog: &'a str,
}

impl Work<'_> {
    /// `ls-refs` first when a commit is served for a branch or tag (and nothing more when it
    /// did not move), else the fetch and the read of the directory.
    fn run(&self, since: Option<ResolvedGitSource>, now: Time) -> Result<Fetched, SourceError> {
        let (remote, want) = (self.remote, self.want);
        let resolved = |commit: String| ResolvedSource {
            type_: Some(SourceType::Git),
            git: Some(ResolvedGitSource {
                repository: remote.url.clone(),
                commit,
                last_poll_attempt: Some(now.clone()),
            }),
            ..Default::default()
        };
        if let Some(previous) = &since {
            let unchanged = match want {
                Want::Commit(id) => same_commit(id, &previous.commit),
                _ => {
                    let listed = remote::ls_ref(remote, want, &self.options.scratch);
                    if let Some(m) = self.metrics {
                        m.count("ls-refs", &listed);
                    }
                    same_commit(&listed?, &previous.commit)
                }
            };
            if unchanged {
                return Ok(Fetched::Unchanged {
                    resolved: resolved(previous.commit.clone()),
                });
            }
        }
        let started = std::time::Instant::now();
        let fetched = remote::fetch(remote, want, &self.options.scratch, self.options.max_bytes);
        if let Some(m) = self.metrics {
            m.count("fetch", &fetched);
        }
        let fetched = fetched?;
        if let Some(m) = self.metrics {
            m.fetched_bytes.inc_by(fetched.bytes);
        }
        tracing::info!(
            catalog = self.catalog,
            repository = %remote.shown,
            r#ref = %want.describe(),
            commit = %fetched.commit,
            bytes = fetched.bytes,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "fetched a git commit"
        );
        let at = format!("{} at {}", remote.shown, fetched.commit);
        let files = tree::files(
            &fetched.objects(),
            fetched.tree,
            self.directory,
            self.options.max_bytes,
            &at,
        )?;
        Ok(Fetched::Content {
            files,
            resolved: resolved(fetched.commit.to_string()),
        })
    }
}

/// Whether `id` is the commit recorded as `recorded` (hex, as in the status).
fn same_commit(id: &gix::ObjectId, recorded: &str) -> bool {
    gix::ObjectId::from_hex(recorded.as_bytes()).is_ok_and(|r| r == *id)
}

impl CatalogSource for GitSource {
    fn fetch<'a>(
        &'a self,
        catalog: &'a Catalog,
        mode: &'a Mode,
    ) -> BoxFuture<'a, Result<Fetched, SourceError>> {
        self.get(catalog, mode).boxed()
    }
}
