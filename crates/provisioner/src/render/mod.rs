//! Formats defined by a Go tool, rendered by that tool: Helm charts by `helm template`,
//! kustomizations by `kustomize build`, each run as a sandboxed child ([`sandbox`]) within
//! [`limits`], a few at a time. What to run and what its refusals mean is decided by the
//! formats ([`crate::format::helm`], [`crate::format::kustomize`]); the output then goes
//! through the pipeline every bundle goes through.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::Semaphore;

use crate::bundle::Tree;
use crate::format::{helm, kustomize};
use crate::status::reasons;
use crate::values::Layer;

pub mod capabilities;
pub mod limits;
pub mod sandbox;

use capabilities::{Capabilities, Discovered};
use limits::Limits;
use sandbox::{RunError, Scratch};

/// Why a bundle was not rendered, in the tool's words where it said.
pub type Failure = crate::source::Refusal;

/// Where the cluster's capabilities come from.
pub enum Cluster {
    /// Discovery of the cluster the provisioner serves.
    Discovered(Discovered),
    /// Given (`provisioner render` without a cluster).
    Fixed(Arc<Capabilities>),
}

/// Renders charts and kustomizations.
pub struct Renderer {
    /// The `helm` program.
    pub helm: PathBuf,
    /// The `kustomize` program.
    pub kustomize: PathBuf,
    /// What each render may use.
    pub limits: Limits,
    /// Where scratch directories are made.
    pub scratch: PathBuf,
    slots: Semaphore,
    cluster: Cluster,
}

impl Renderer {
    /// A renderer running `helm` and `kustomize` (paths, or names looked up on `PATH` now),
    /// at most `concurrency` at once, scratch directories below `scratch`.
    pub fn new(
        helm: &Path,
        kustomize: &Path,
        limits: Limits,
        concurrency: usize,
        scratch: PathBuf,
        cluster: Cluster,
    ) -> Renderer {
        Renderer {
            helm: on_path(helm),
            kustomize: on_path(kustomize),
            limits,
            scratch,
            slots: Semaphore::new(concurrency.max(1)),
            cluster,
        }
    }

    /// The cluster's capabilities (discovered, or given).
    pub async fn capabilities(&self) -> Result<Arc<Capabilities>, Failure> {
        match &self.cluster {
            Cluster::Fixed(caps) => Ok(caps.clone()),
            Cluster::Discovered(d) => d.get().await.map_err(|e| Failure {
                reason: reasons::RENDER_FAILED,
                message: format!("reading the cluster's version and APIs: {e}"),
            }),
        }
    }

    /// What `helm template` prints for the chart in `tree`, released as `release` in
    /// `namespace`, with `values` merged in order.
    pub async fn helm(
        &self,
        tree: &Tree,
        release: &str,
        namespace: &str,
        values: &[Layer],
    ) -> Result<Vec<u8>, Failure> {
        let chart = helm::chart_dir(tree)?;
        let capabilities = self.capabilities().await?;
        let _slot = self.slots.acquire().await.map_err(|_| stopped_renderer())?;
        let scratch = Scratch::of(&self.scratch, tree).map_err(setup)?;
        let mut names = Vec::with_capacity(values.len());
        for (i, layer) in values.iter().enumerate() {
            let path = scratch
                .extra(&format!("values-{i}.yaml"), &layer.content)
                .map_err(setup)?;
            names.push((path.to_string_lossy().into_owned(), layer.name.clone()));
        }
        let job = helm::Job {
            release,
            namespace,
            chart: &chart,
            values: names.iter().map(|(p, _)| p.clone()).collect(),
            capabilities: &capabilities,
        };
        let bundle = scratch.bundle().to_string_lossy().into_owned();
        names.push((format!("{bundle}/"), String::new()));
        scratch
            .run(&self.helm, &helm::args(&job), &self.limits)
            .await
            .map_err(|e| match e {
                RunError::Failed { stderr } => {
                    let refused = helm::refusal(&stderr, &names);
                    Failure {
                        reason: refused.reason,
                        message: format!("helm template: {}", refused.message),
                    }
                }
                e => run_failure("helm template", &self.helm, e),
            })
    }

    /// What `kustomize build` prints for the kustomization in `tree` at `directory` (or its
    /// root); a remote reference is refused before kustomize runs.
    pub async fn kustomize(
        &self,
        tree: &Tree,
        directory: Option<&str>,
    ) -> Result<Vec<u8>, Failure> {
        let dir = kustomize::root(tree, directory)?;
        if let Some(refused) = kustomize::remote(tree).or_else(|| kustomize::outside(tree)) {
            return Err(refused);
        }
        let _slot = self.slots.acquire().await.map_err(|_| stopped_renderer())?;
        let scratch = Scratch::of(&self.scratch, tree).map_err(setup)?;
        let bundle = scratch.bundle().to_string_lossy().into_owned();
        scratch
            .run(&self.kustomize, &kustomize::args(&dir), &self.limits)
            .await
            .map_err(|e| match e {
                RunError::Failed { stderr } => Failure {
                    reason: reasons::RENDER_FAILED,
                    message: format!(
                        "kustomize build: {}",
                        kustomize::refusal(&stderr.replace(&format!("{bundle}/"), "")).message
                    ),
                },
                e => run_failure("kustomize build", &self.kustomize, e),
            })
    }
}

/// `program` itself when it is a path; else the first file of that name on `PATH`, or the
/// name (starting it then fails, saying so).
fn on_path(program: &Path) -> PathBuf {
    if program.components().count() > 1 {
        return program.to_path_buf();
    }
    std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| program.to_path_buf())
}

fn setup(e: RunError) -> Failure {
    Failure {
        reason: reasons::RENDER_FAILED,
        message: e.to_string(),
    }
}

fn stopped_renderer() -> Failure {
    Failure {
        reason: reasons::RENDER_FAILED,
        message: "the provisioner is stopping".into(),
    }
}

fn run_failure(what: &str, program: &Path, e: RunError) -> Failure {
    match e {
        RunError::Stopped(stopped) => Failure {
            reason: reasons::RENDER_STOPPED,
            message: format!("{what}: {stopped}"),
        },
        RunError::Setup(m) => Failure {
            reason: reasons::RENDER_FAILED,
            message: format!(
                "{what}: {m} (the provisioner runs {}: --helm-binary and --kustomize-binary name the programs)",
                program.display()
            ),
        },
        RunError::Failed { stderr } => Failure {
            reason: reasons::RENDER_FAILED,
            message: format!("{what}: {stderr}"),
        },
    }
}
