//! `provisioner render`: what a BundleDeployment would apply, without a cluster and without
//! applying it. The bundle's files (a directory, or an image pulled with the provisioner's own
//! image code: a bundle image or a Helm OCI chart artifact), its format, its `spec.config` (a
//! file), and values files as `helm -f` takes them, converted exactly as an install converts
//! them ([`crate::convert`]) and printed as YAML documents in apply order. Charts see the
//! `.Capabilities` of `--kube-version` with the built-in APIs (and any `--api-versions`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Parser;

use olm_puller::budget::UnpackBudget;
use olm_puller::flags::Setup;
use olm_puller::flags::{ImageArgs, NetworkArgs};

use crate::bundle::Tree;
use crate::convert::{Input, objects};
use crate::fetch::Fetcher;
use crate::render::capabilities::Capabilities;
use crate::render::limits::Limits;
use crate::render::{Cluster, Renderer};
use crate::source::Format;
use crate::source::Wanted;
use crate::values::Layer;

/// The formats by the names `olm.bundle.mediatype` gives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MediaType {
    /// plain+v0.
    #[value(name = "plain+v0")]
    Plain,
    /// registry+v1.
    #[value(name = "registry+v1")]
    Registry,
    /// helm+v3.
    #[value(name = "helm+v3")]
    Helm,
    /// kustomize.
    #[value(name = "kustomize")]
    Kustomize,
}

impl From<MediaType> for Format {
    fn from(m: MediaType) -> Format {
        match m {
            MediaType::Plain => Format::Plain,
            MediaType::Registry => Format::Registry,
            MediaType::Helm => Format::Helm,
            MediaType::Kustomize => Format::Kustomize,
        }
    }
}

/// provisioner render: prints what a BundleDeployment of this bundle would apply.
#[derive(Parser, Debug)]
#[command(name = "provisioner render", about)]
pub struct RenderArgs {
    /// The bundle's directory (an unpacked bundle image, a chart, a kustomization).
    #[arg(required_unless_present = "image")]
    pub dir: Option<PathBuf>,
    /// A bundle image or Helm OCI chart artifact to pull instead of a directory (pulled as the
    /// provisioner pulls: the same limits, the network policy of --allow-loopback-sources and
    /// the others, --registry-ca-file, --insecure-registries).
    #[arg(long, conflicts_with = "dir")]
    pub image: Option<String>,
    /// A pull secret for --image, read from --namespace of the cluster `KUBECONFIG` names (it
    /// must have opted in, as for the provisioner).
    #[arg(long, requires = "image")]
    pub pull_secret: Option<String>,
    /// The managers' namespace, where pull secrets are read.
    #[arg(long, default_value = "olm-system")]
    pub namespace: String,
    /// The bundle's format.
    #[arg(long, value_enum)]
    pub format: MediaType,
    /// A file holding the BundleDeployment's `spec.config` (YAML or JSON); `valuesFrom` is
    /// read from a cluster only, so give those values with --values.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Values files, merged in order before `spec.config.values` (as `helm -f`).
    #[arg(long = "values", short = 'f')]
    pub values: Vec<PathBuf>,
    /// The BundleDeployment's name (a chart's release name).
    #[arg(long, default_value = "preview")]
    pub name: String,
    /// Where namespaced objects that name no namespace go (the provisioner's
    /// --default-namespace) when `spec.config` names none.
    #[arg(long, default_value = "default")]
    pub default_namespace: String,
    /// The Kubernetes version charts see.
    #[arg(long, default_value = "v1.36.0")]
    pub kube_version: String,
    /// APIs charts see beside the built-in ones (`group/version` or `group/version/Kind`).
    #[arg(long, value_delimiter = ',')]
    pub api_versions: Vec<String>,
    /// The `helm` program.
    #[arg(long, default_value = "helm")]
    pub helm_binary: PathBuf,
    /// The `kustomize` program.
    #[arg(long, default_value = "kustomize")]
    pub kustomize_binary: PathBuf,
    /// The largest bundle read, in bytes (and the most a tool may print).
    #[arg(long, default_value_t = 64 * 1024 * 1024)]
    pub max_content_bytes: u64,
    /// How long one render may run, in seconds.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub render_timeout_seconds: u64,
    /// The most memory one render may hold, in bytes.
    #[arg(long, default_value_t = 256 * 1024 * 1024, value_parser = clap::value_parser!(u64).range(16 * 1024 * 1024..))]
    pub render_memory_bytes: u64,
    #[command(flatten)]
    pub network: NetworkArgs,
    #[command(flatten)]
    pub images: ImageArgs,
}

/// Runs `provisioner render`: the YAML on standard output, or why not (exit code 1).
pub async fn run(args: &RenderArgs) -> Result<String, String> {
    let tree = match (&args.dir, &args.image) {
        (Some(dir), _) => read_dir(dir, args.max_content_bytes)?,
        (None, Some(image)) => pull(args, image).await?,
        (None, None) => return Err("name the bundle: a directory, or --image".into()),
    };
    let format = Format::from(args.format);
    let config = match &args.config {
        None => None,
        Some(path) => {
            let text = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let docs = crate::format::manifests::documents(&text)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            match docs.into_iter().next() {
                Some(serde_json::Value::Object(map)) => Some(map),
                None => None,
                Some(_) => return Err(format!("{}: spec.config is an object", path.display())),
            }
        }
    };
    let settings = crate::settings::of(config.as_ref(), format).map_err(|e| e.message)?;
    if !settings.values.from.is_empty() {
        return Err(
            "spec.config.valuesFrom is read from the cluster: give those values with --values"
                .into(),
        );
    }
    let mut from = Vec::new();
    for path in &args.values {
        let content = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        from.push(Layer {
            name: path.display().to_string(),
            content,
        });
    }
    let values = crate::values::layers(&settings.values, from);
    let mut caps = Capabilities::builtin(&args.kube_version);
    caps.api_versions.extend(args.api_versions.iter().cloned());
    caps.api_versions.sort_unstable();
    caps.api_versions.dedup();
    let scratch = std::env::temp_dir();
    let renderer = Renderer::new(
        &args.helm_binary,
        &args.kustomize_binary,
        Limits {
            time: std::time::Duration::from_secs(args.render_timeout_seconds),
            memory: args.render_memory_bytes,
            output: args.max_content_bytes,
        },
        1,
        scratch,
        Cluster::Fixed(Arc::new(caps)),
    );
    let input = Input {
        format,
        tree: &tree,
        settings: &settings,
        values: &values,
        release: &args.name,
        default_namespace: &args.default_namespace,
    };
    let rendered = objects(&renderer, &input)
        .await
        .map_err(|attempt| format!("{}: {}", attempt.reason(), attempt.message()))?;
    let mut out = String::new();
    for (_, phase) in crate::order::by_phase(rendered.objects) {
        for object in phase {
            out.push_str("---\n");
            out.push_str(
                &serde_saphyr::to_string(&object.manifest)
                    .map_err(|e| format!("printing {}: {e}", object.key))?,
            );
        }
    }
    Ok(out)
}

/// Runs `provisioner render` and prints its YAML (or why not, on standard error); the exit
/// code.
pub async fn print(args: &RenderArgs) -> i32 {
    match run(args).await {
        Ok(yaml) => {
            print!("{yaml}");
            0
        }
        Err(e) => {
            eprintln!("provisioner render: {e}");
            1
        }
    }
}

/// The files of the image `reference`, pulled as the provisioner pulls them (the layer cache
/// in a scratch directory). Without a cluster, only what needs no pull secret.
async fn pull(args: &RenderArgs, reference: &str) -> Result<Tree, String> {
    let client = match kube::Client::try_default().await {
        Ok(client) => client,
        // No cluster: a client that reaches nothing, for images that need no pull secret.
        Err(_) => {
            let nowhere = crate::render::sandbox::NO_PROXY_HERE
                .parse()
                .map_err(|e| format!("{e}"))?;
            kube::Client::try_from(kube::Config::new(nowhere)).map_err(|e| e.to_string())?
        }
    };
    let cache_dir = tempfile::tempdir().map_err(|e| format!("a layer cache: {e}"))?;
    let setup = Setup {
        client: client.clone(),
        namespace: args.namespace.clone(),
        registry_ca: args.images.registry_ca()?,
        request_timeout: std::time::Duration::from_secs(120),
        max_bytes: args.max_content_bytes,
        cache_dir: cache_dir.path(),
        metrics: None,
    };
    let images = args
        .images
        .image_source(&args.network, setup)
        .map_err(|e| format!("a layer cache: {e}"))?;
    let budget = UnpackBudget::new(args.max_content_bytes.saturating_mul(2));
    let fetcher = Fetcher::new(
        client,
        args.namespace.clone(),
        Arc::new(images),
        budget,
        args.max_content_bytes,
    );
    let wanted = Wanted::Image {
        reference: reference.to_owned(),
        pull_secret: args.pull_secret.clone(),
    };
    let content = fetcher
        .fetch(&args.name, &wanted)
        .await
        .map_err(|e| format!("pulling {reference}: {e}"))?;
    Ok(content.tree)
}

/// The files below `dir` as a bundle tree, at most `max` bytes of them; links are not
/// followed.
pub fn read_dir(dir: &Path, max: u64) -> Result<Tree, String> {
    let mut tree = Tree::new();
    let mut bytes = 0u64;
    let mut todo = vec![PathBuf::new()];
    while let Some(relative) = todo.pop() {
        let at = dir.join(&relative);
        let entries = std::fs::read_dir(&at).map_err(|e| format!("{}: {e}", at.display()))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("{}: {e}", at.display()))?;
            let kind = entry
                .file_type()
                .map_err(|e| format!("{}: {e}", entry.path().display()))?;
            let path = relative.join(entry.file_name());
            let name = path.to_string_lossy().replace('\\', "/");
            if kind.is_dir() {
                tree = tree.dir(&name);
                todo.push(path);
            } else if kind.is_file() {
                let content = std::fs::read(entry.path())
                    .map_err(|e| format!("{}: {e}", entry.path().display()))?;
                bytes = bytes.saturating_add(content.len() as u64);
                if bytes > max {
                    return Err(format!(
                        "{} holds more than {max} bytes (--max-content-bytes)",
                        dir.display()
                    ));
                }
                tree = tree.file(&name, content);
            }
        }
    }
    Ok(tree)
}
