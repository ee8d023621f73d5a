//! The `git` source: FBC kept in a git repository, fetched with gix (pure Rust, no git
//! binary). A branch or tag is polled with one `ls-refs` and fetched only when its commit
//! moved; a commit is pinned and fetched once. Only the commit is fetched (depth 1), into a
//! scratch repository; the catalog is read from its objects, never checked out.

pub mod bounded;
pub mod facts;
pub mod remote;
pub mod spec;
pub mod ssh;
pub mod tree;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Client;
use olm_api::catalog::{
    Catalog, GitSource as GitSpec, ResolvedGitSource, ResolvedSource, SourceType,
};
use prometheus::{IntCounter, IntCounterVec, Opts};
use tokio::sync::Semaphore;

use self::spec::{Transport, Want};
use super::credentials::{HttpAuth, ca_bundle, http_auth, opted_in_secret};
use crate::contract::{Fetched, Mode, SourceError, reasons};
use olm_puller::budget::Reserve;
use olm_puller::scope;

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
    /// Where fetches may connect.
    pub policy: Arc<olm_puller::network::NetworkPolicy>,
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

    /// The credentials of `spec` (basic for https, a key and known hosts for ssh), if it names
    /// a Secret: checked before anything is sent.
    async fn credentials(
        &self,
        spec: &GitSpec,
        transport: Transport,
        catalog: &str,
    ) -> Result<Credentials, SourceError> {
        let Some(secret_ref) = &spec.auth_secret else {
            if transport == Transport::Ssh {
                return Err(SourceError::new(
                    reasons::INVALID_CREDENTIALS,
                    format!(
                        "{} is an ssh repository: name a Secret with {} and {} in git.authSecret",
                        spec::redact(&spec.repository),
                        ssh::PRIVATE_KEY,
                        ssh::KNOWN_HOSTS
                    ),
                ));
            }
            return Ok(Credentials::default());
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
        // The Secret must allow this Catalog to send it to this repository's host.
        if transport == Transport::Ssh {
            let target = ssh::target(&spec.repository)?;
            let port = (target.port != 22).then_some(target.port);
            scope::check(
                &secret,
                &secret_ref.name,
                &scope::User::Catalog(catalog.to_owned()),
                &scope::Target::Host {
                    host: &target.host,
                    port,
                },
            )?;
        } else {
            let url = url::Url::parse(&spec.repository).map_err(|e| {
                SourceError::new(
                    spec::INVALID_SPEC,
                    format!("{} is not a URL: {e}", spec::redact(&spec.repository)),
                )
            })?;
            scope::check(
                &secret,
                &secret_ref.name,
                &scope::User::Catalog(catalog.to_owned()),
                &scope::Target::Url(&url),
            )?;
        }
        if transport == Transport::Ssh {
            return ssh_auth(&secret, &secret_ref.name).map(|a| Credentials {
                ssh: Some(a),
                ..Default::default()
            });
        }
        Ok(Credentials {
            account: Some(match http_auth(&secret, &secret_ref.name)? {
                HttpAuth::Bearer(token) => (TOKEN_USER.to_owned(), token),
                HttpAuth::Basic(user, password) => (user, password.unwrap_or_default()),
            }),
            ..Default::default()
        })
    }

    /// Fetches the catalog (see [`super::Sources::fetch`]).
    pub async fn fetch(
        &self,
        catalog: &Catalog,
        mode: &Mode,
        reserve: &Arc<Reserve>,
    ) -> Result<Fetched, SourceError> {
        let spec = catalog.spec.source.git.clone().unwrap_or_default();
        let want = Want::from_spec(&spec.r#ref)?;
        let transport = spec::transport(&spec.repository)?;
        let directory = spec::directory(&spec)?;
        let catalog_name = catalog.metadata.name.as_deref().unwrap_or_default();
        let credentials = self.credentials(&spec, transport, catalog_name).await?;
        let ca = match &spec.ca_bundle {
            Some(ca) => {
                let key = ca.key.as_deref().unwrap_or("ca.crt");
                ca_bundle(&self.client, &self.own_namespace, &ca.config_map, key).await?
            }
            None => Vec::new(),
        };
        let remote = remote::Remote {
            url: spec.repository.clone(),
            account: credentials.account,
            ssh: credentials.ssh,
            ca,
            timeout: self.options.timeout,
            shown: spec::redact(&spec.repository),
            policy: self.options.policy.clone(),
        };
        // What was fetched last for this repository, if the plan asks to compare.
        let since = crate::contract::since(mode)
            .and_then(|p| p.git.clone())
            .filter(|g| g.repository == spec::redact(&spec.repository));
        let _permit =
            self.permits.clone().acquire_owned().await.map_err(|_| {
                SourceError::new(reasons::UNPACK_FAILED, "catalogd is shutting down")
            })?;
        let options = self.options.clone();
        let metrics = self.metrics.clone();
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let name = catalog.metadata.name.clone().unwrap_or_default();
        let (reserve, runtime) = (reserve.clone(), tokio::runtime::Handle::current());
        let task = tokio::task::spawn_blocking(move || {
            let work = Work {
                remote: &remote,
                want: &want,
                directory: &directory,
                options: &options,
                metrics: metrics.as_ref(),
                catalog: &name,
                reserve: &reserve,
                runtime: &runtime,
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

/// What a Secret gave.
#[derive(Default)]
struct Credentials {
    account: Option<(String, String)>,
    ssh: Option<ssh::SshAuth>,
}

/// The SSH credentials a Secret holds: a private key and the server's known hosts (a host key
/// is never trusted on first use).
fn ssh_auth(
    secret: &k8s_openapi::api::core::v1::Secret,
    name: &str,
) -> Result<ssh::SshAuth, SourceError> {
    let data = secret.data.clone().unwrap_or_default();
    let text = |key: &str| {
        data.get(key)
            .and_then(|v| String::from_utf8(v.0.clone()).ok())
            .filter(|v| !v.trim().is_empty())
    };
    let private_key = text(ssh::PRIVATE_KEY).ok_or_else(|| {
        SourceError::new(
            reasons::INVALID_CREDENTIALS,
            format!("auth Secret {name} has no {}", ssh::PRIVATE_KEY),
        )
    })?;
    let known_hosts = text(ssh::KNOWN_HOSTS).ok_or_else(|| {
        SourceError::new(
            reasons::INVALID_CREDENTIALS,
            format!(
                "auth Secret {name} has no {}: catalogd never trusts a host key on first use; add the server's known_hosts line (ssh-keyscan HOST)",
                ssh::KNOWN_HOSTS
            ),
        )
    })?;
    Ok(ssh::SshAuth {
        private_key,
        known_hosts,
    })
}

/// One fetch, run on a blocking thread.
struct Work<'a> {
    remote: &'a remote::Remote,
    want: &'a Want,
    directory: &'a str,
    options: &'a GitOptions,
    metrics: Option<&'a GitMetrics>,
    catalog: &'a str,
    reserve: &'a Reserve,
    runtime: &'a tokio::runtime::Handle,
}

impl Work<'_> {
    /// `ls-refs` first when a commit is served for a branch or tag (and nothing more when it
    /// did not move), else the fetch and the read of the directory.
    fn run(&self, since: Option<ResolvedGitSource>, now: Time) -> Result<Fetched, SourceError> {
        let (remote, want) = (self.remote, self.want);
        let resolved = |commit: String| ResolvedSource {
            type_: Some(SourceType::Git),
            // As shown everywhere else: a password in the URL never reaches the status.
            git: Some(ResolvedGitSource {
                repository: remote.shown.clone(),
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
        // The pack is indexed, and the directory's files read, in memory: the unpack budget's
        // share for the most they may be, first.
        self.runtime
            .block_on(self.reserve.reserve(self.options.max_bytes));
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
            &fetched.objects(self.options.max_bytes),
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
