//! The `custom` source: a container of the user's that generates the catalog. catalogd runs it
//! in a Pod of its own namespace (see [`pod`]), the collector uploads the output to catalogd's
//! upload endpoint with a one-time token ([`runs`], [`upload`]), and catalogd reads the Pod's
//! status to explain failures ([`verdict`]). The source never waits: each reconcile looks at
//! the run and answers at once (started, running, failed, or the uploaded content), and the
//! Pod's changes bring the next reconcile.

pub mod facts;
pub mod pod;
pub mod resources;
pub mod runs;
pub mod upload;
pub mod verdict;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use olm_api::catalog::{Catalog, ResolvedCustomSource, ResolvedSource, SourceType};
use prometheus::{IntCounterVec, Opts};

use self::pod::{PodOptions, generator_pod, pod_name, resolve, spec_hash, token_secret};
use self::runs::Runs;
use self::verdict::{Verdict, verdict};
use crate::contract::{Fetched, Mode, SourceError, reasons, since};
use olm_puller::budget::Reserve;

/// The condition reason for a spec catalogd cannot act on.
pub const INVALID_SPEC: &str = "InvalidSpec";

/// How often a running generator is looked at when nothing else brings a reconcile.
pub const RECHECK: Duration = Duration::from_secs(15);

/// Counts of the custom source.
#[derive(Clone)]
pub struct CustomMetrics {
    /// Generator runs that ended, by `result` (`succeeded`, `failed`).
    pub runs: IntCounterVec,
    /// Uploads, by `result` (`accepted`, `rejected`).
    pub uploads: IntCounterVec,
}

impl CustomMetrics {
    /// Registers the families in `registry`.
    pub fn new(registry: &prometheus::Registry) -> Result<Self, prometheus::Error> {
        let runs = IntCounterVec::new(
            Opts::new(
                "catalogd_custom_runs_total",
                "Generator Pods of custom sources that ended, by result.",
            ),
            &["result"],
        )?;
        let uploads = IntCounterVec::new(
            Opts::new(
                "catalogd_custom_uploads_total",
                "Uploads to catalogd's upload endpoint, by result (rejected: a wrong, unknown or used token, or a checksum mismatch).",
            ),
            &["result"],
        )?;
        registry.register(Box::new(runs.clone()))?;
        registry.register(Box::new(uploads.clone()))?;
        Ok(Self { runs, uploads })
    }
}

/// How the custom source is set up.
#[derive(Debug, Clone)]
pub struct CustomOptions {
    /// The Pods' namespace, image and upload URL, and the output limit.
    pub pod: PodOptions,
    /// Generators running at once, across all Catalogs.
    pub max_concurrent: usize,
}

/// Runs generators.
pub struct CustomSource {
    client: kube::Client,
    options: CustomOptions,
    runs: Arc<Runs>,
    metrics: Option<CustomMetrics>,
}

impl CustomSource {
    /// A source running generator Pods as `options` say, recording runs in `runs` (shared with
    /// the upload endpoint).
    pub fn new(
        client: kube::Client,
        options: CustomOptions,
        runs: Arc<Runs>,
        metrics: Option<CustomMetrics>,
    ) -> Self {
        Self {
            client,
            options,
            runs,
            metrics,
        }
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.options.pod.namespace)
    }

    /// Deletes the generator Pods (and their token Secrets) an earlier catalogd left: their
    /// runs are forgotten, so their uploads could never be accepted.
    pub async fn remove_leftovers(&self) -> Result<usize, kube::Error> {
        let selector = ListParams::default().labels(&format!("{}=true", pod::GENERATOR_LABEL));
        let pods = self.pods().list_metadata(&selector).await?;
        for p in &pods.items {
            if let Some(name) = &p.metadata.name {
                self.delete(name).await;
            }
        }
        Ok(pods.items.len())
    }

    /// Deletes a run's Pod, and its token Secret: the Secret of that name only if it is one
    /// (the generator label, owned by that Pod), never a Secret of someone else's that happens
    /// to share the name. One already gone is fine.
    async fn delete(&self, name: &str) {
        let secrets: Api<Secret> =
            Api::namespaced(self.client.clone(), &self.options.pod.namespace);
        let warn = |what: &str, e: kube::Error| tracing::warn!(pod = name, error = %e, "could not delete a generator {what}");
        // The Pod's uid names its Secret's owner; read before the Pod goes.
        let pod_uid = match self.pods().get_metadata_opt(name).await {
            Ok(meta) => meta.and_then(|m| m.metadata.uid),
            Err(e) => return warn("pod", e),
        };
        match self.pods().delete(name, &DeleteParams::background()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.is_not_found() => {}
            Err(e) => warn("pod", e),
        }
        // Only its metadata is read: whose Secret it is.
        let secret = match secrets.get_metadata_opt(name).await {
            Ok(Some(secret)) => secret,
            Ok(None) => return,
            Err(e) => return warn("secret", e),
        };
        if !pod::is_token_secret_of(&secret.metadata, name, pod_uid.as_deref()) {
            tracing::info!(
                secret = name,
                "a Secret shares a generator pod's name but is not its token Secret; left alone"
            );
            return;
        }
        // The Secret deleted is the one just checked, not one created since under its name.
        let params = DeleteParams {
            preconditions: secret.metadata.uid.map(|uid| kube::api::Preconditions {
                uid: Some(uid),
                resource_version: None,
            }),
            ..DeleteParams::background()
        };
        match secrets.delete(name, &params).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.is_not_found() || s.code == 409 => {}
            Err(e) => warn("secret", e),
        }
    }

    /// Forgets the run of a deleted Catalog and deletes its Pod (which the garbage collector
    /// would also delete, as the Catalog owns it, but not before the Catalog is gone).
    pub async fn forget(&self, uid: &str) {
        if let Some(run) = self.runs.finish(uid) {
            self.delete(&run.pod).await;
        }
    }

    fn count_run(&self, ok: bool) {
        if let Some(m) = &self.metrics {
            let result = if ok { "succeeded" } else { "failed" };
            m.runs.with_label_values(&[result]).inc();
        }
    }

    /// Takes the next step of the catalog's generator run (see [`super::Sources::fetch`]).
    pub async fn fetch(
        &self,
        catalog: &Catalog,
        mode: &Mode,
        reserve: &Reserve,
    ) -> Result<Fetched, SourceError> {
        let spec = catalog.spec.source.custom.clone().unwrap_or_default();
        let resolved = resolve(&spec)?;
        if let Some(message) =
            resources::beyond_ceiling(spec.resources.as_ref(), &self.options.pod.defaults.maximum)
        {
            return Err(SourceError::new(INVALID_SPEC, message));
        }
        let uid = catalog.metadata.uid.clone().unwrap_or_default();
        let catalog_name = catalog.metadata.name.clone().unwrap_or_default();
        let hash = spec_hash(&spec);

        if let Some(run) = self.runs.get(&uid) {
            if run.spec_hash != hash {
                // The spec changed under a run: its output would be of the old spec.
                self.runs.finish(&uid);
                self.delete(&run.pod).await;
            } else {
                let live = self.pods().get_opt(&run.pod).await.map_err(|e| {
                    SourceError::new(
                        reasons::UNPACK_FAILED,
                        format!("reading generator pod {}: {e}", run.pod),
                    )
                })?;
                let Some(live) = live else {
                    self.runs.finish(&uid);
                    self.count_run(false);
                    return Err(SourceError::new(
                        verdict::reasons::GENERATOR_FAILED,
                        format!(
                            "generator pod {}/{} was deleted before it finished; it runs again at the next retry",
                            self.options.pod.namespace, run.pod
                        ),
                    ));
                };
                return match verdict(&live, run.started.elapsed(), resolved.timeout) {
                    Verdict::Running(message) => Ok(Fetched::Running {
                        message,
                        recheck: RECHECK.min(
                            resolved
                                .timeout
                                .saturating_sub(run.started.elapsed())
                                .max(Duration::from_secs(1)),
                        ),
                    }),
                    Verdict::Failed { reason, message } => {
                        self.runs.finish(&uid);
                        self.delete(&run.pod).await;
                        self.count_run(false);
                        let rejected = if run.rejected.is_empty() {
                            String::new()
                        } else {
                            format!(
                                "; catalogd refused uploads for it: {}",
                                run.rejected.join("; ")
                            )
                        };
                        Err(SourceError::new(reason, format!("{message}{rejected}")))
                    }
                    Verdict::Done { image_digest } => {
                        let finished = self.runs.finish(&uid);
                        self.delete(&run.pod).await;
                        let Some(upload) = finished.and_then(|r| r.upload) else {
                            self.count_run(false);
                            return Err(SourceError::new(
                                verdict::reasons::COLLECT_FAILED,
                                format!(
                                    "generator pod {} finished, but catalogd received no upload from it",
                                    run.pod
                                ),
                            ));
                        };
                        self.count_run(true);
                        // The upload is in memory already (the upload endpoint holds at most
                        // --max-concurrent-generators of them); its share for the unpack.
                        reserve.reserve(upload.bytes.len() as u64).await;
                        tracing::info!(
                            catalog = %catalog_name,
                            pod = %run.pod,
                            bytes = upload.bytes.len(),
                            sha256 = %upload.sha256,
                            "collected a generator's output"
                        );
                        let result = ResolvedSource {
                            type_: Some(SourceType::Custom),
                            custom: Some(ResolvedCustomSource {
                                image_digest,
                                sha256: upload.sha256.clone(),
                                last_poll_attempt: Some(Time(k8s_openapi::jiff::Timestamp::now())),
                            }),
                            ..Default::default()
                        };
                        // The same output as the served content: nothing to unpack again.
                        let same = since(mode)
                            .and_then(|p| p.custom.as_ref())
                            .is_some_and(|p| p.sha256 == upload.sha256);
                        if same {
                            Ok(Fetched::Unchanged { resolved: result })
                        } else {
                            Ok(Fetched::Content {
                                files: vec![(resolved.output_file.clone(), upload.bytes)],
                                resolved: result,
                            })
                        }
                    }
                };
            }
        }

        // A new run, when a slot is free.
        let token = runs::new_token().map_err(|e| {
            SourceError::new(
                reasons::UNPACK_FAILED,
                format!("making an upload token: {e}"),
            )
        })?;
        let suffix: String = runs::new_token()
            .map_err(|e| {
                SourceError::new(reasons::UNPACK_FAILED, format!("making a pod name: {e}"))
            })?
            .chars()
            .take(8)
            .collect();
        let name = pod_name(&catalog_name, &suffix);
        // Recorded first (so that an upload can never arrive before its run exists), and under
        // one lock with the count of runs (so that concurrent reconciles never exceed it).
        let max = self.options.max_concurrent.max(1);
        if !self.runs.try_start(&uid, &name, &hash, &token, max) {
            return Ok(Fetched::Running {
                message: format!(
                    "waiting for a free generator slot: {max} generators run at once (--max-concurrent-generators)"
                ),
                recheck: Duration::from_secs(5),
            });
        }
        let wanted = generator_pod(catalog, &spec, &resolved, &name, &self.options.pod);
        let api_error = |what: &str, e: kube::Error| {
            SourceError::new(
                reasons::UNPACK_FAILED,
                format!(
                    "creating generator {what} {}/{name}: {e}",
                    self.options.pod.namespace
                ),
            )
        };
        let created = match self.pods().create(&PostParams::default(), &wanted).await {
            Ok(p) => p,
            Err(e) => {
                self.runs.finish(&uid);
                return Err(api_error("pod", e));
            }
        };
        let secrets: Api<Secret> =
            Api::namespaced(self.client.clone(), &self.options.pod.namespace);
        if let Err(e) = secrets
            .create(&PostParams::default(), &token_secret(&created, &token))
            .await
        {
            self.runs.finish(&uid);
            self.delete(&name).await;
            return Err(api_error("secret", e));
        }
        tracing::info!(catalog = %catalog_name, pod = %name, image = %spec.image, "started a generator");
        Ok(Fetched::Running {
            message: format!(
                "started generator pod {}/{name} (image {})",
                self.options.pod.namespace, spec.image
            ),
            recheck: RECHECK,
        })
    }
}
