//! A bundle's files made into the objects to apply, for every format: plain+v0 and
//! registry+v1 converted in process (pure), Helm charts and kustomizations rendered by their
//! tool and read back. The reconcile (within the unpack budget) and `provisioner render` (a
//! preview, without a cluster) both go through here, so a preview shows what an install
//! applies.

use crate::bundle::Tree;
use crate::format::registry::{self, RegistryError, Rendered};
use crate::format::{plain, rendered};
use crate::object::Object;
use crate::render::{Failure, Renderer};
use crate::settings::Settings;
use crate::source::Format;
use crate::status::{Attempt, reasons};
use crate::values::Layer;

/// What to convert.
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    /// The format.
    pub format: Format,
    /// The bundle's files.
    pub tree: &'a Tree,
    /// What `spec.config` asks.
    pub settings: &'a Settings,
    /// A chart's values, in merge order.
    pub values: &'a [Layer],
    /// A chart's release name (the BundleDeployment's).
    pub release: &'a str,
    /// Where namespaced objects that name no namespace go when `spec.config` names none.
    pub default_namespace: &'a str,
}

impl Input<'_> {
    /// Whether a tool renders this format.
    pub fn rendered_by_a_tool(&self) -> bool {
        matches!(self.format, Format::Helm | Format::Kustomize)
    }
}

/// The objects of a plain+v0 or registry+v1 bundle (refused for a format a tool renders:
/// [`tool_output`] and [`tool_objects`] make those).
pub fn converted(input: &Input<'_>) -> Result<Rendered, Attempt> {
    let tree = input.tree;
    match input.format {
        Format::Plain => plain::objects(tree)
            .map(|objects| Rendered {
                objects,
                serving: Vec::new(),
            })
            .map_err(|e| Attempt::Invalid {
                reason: reasons::BUNDLE_LOAD_FAILED,
                message: e.to_string(),
            }),
        Format::Registry => registry::render(tree, input.settings).map_err(|e| match e {
            // A valid bundle, asked for a mode it does not support: said on `Installed`.
            RegistryError::Mode(m) => Attempt::InstallMode(m.to_string()),
            e => Attempt::Invalid {
                reason: reasons::BUNDLE_LOAD_FAILED,
                message: format!("convert registry+v1 bundle to plain+v0 bundle: {e}"),
            },
        }),
        Format::Helm | Format::Kustomize => Err(Attempt::Invalid {
            reason: crate::source::reasons::UNSUPPORTED_FORMAT,
            message: "a chart or a kustomization is rendered by its tool, not converted".into(),
        }),
    }
}

/// What the tool of `input`'s format prints for it.
pub async fn tool_output(renderer: &Renderer, input: &Input<'_>) -> Result<Vec<u8>, Attempt> {
    let settings = input.settings;
    let output = match input.format {
        Format::Plain | Format::Registry => return converted(input).map(|_| Vec::new()),
        Format::Helm => {
            let namespace = settings
                .namespace
                .as_deref()
                .unwrap_or(input.default_namespace);
            renderer
                .helm(input.tree, input.release, namespace, input.values)
                .await
        }
        Format::Kustomize => {
            renderer
                .kustomize(input.tree, settings.directory.as_deref())
                .await
        }
    };
    output.map_err(failed)
}

/// The objects in a tool's `output`, namespaced ones that name no namespace in the one
/// `spec.config` names (else where every bundle's go).
pub async fn tool_objects(
    renderer: &Renderer,
    input: &Input<'_>,
    output: &[u8],
) -> Result<Vec<Object>, Attempt> {
    let tool = match input.format {
        Format::Helm => "helm template",
        Format::Kustomize => "kustomize build",
        Format::Plain | Format::Registry => "the conversion",
    };
    let objects = rendered::objects(output).map_err(|e| Attempt::Invalid {
        reason: reasons::BUNDLE_LOAD_FAILED,
        message: format!("{tool}: {e}"),
    })?;
    let Some(namespace) = &input.settings.namespace else {
        return Ok(objects);
    };
    let caps = renderer.capabilities().await.map_err(failed)?;
    Ok(rendered::in_namespace(
        objects,
        namespace,
        &|api_version, kind| caps.namespaced(api_version, kind),
    ))
}

/// The objects of any bundle (without the unpack budget: for a preview).
pub async fn objects(renderer: &Renderer, input: &Input<'_>) -> Result<Rendered, Attempt> {
    if !input.rendered_by_a_tool() {
        return converted(input);
    }
    let output = tool_output(renderer, input).await?;
    Ok(Rendered {
        objects: tool_objects(renderer, input, &output).await?,
        serving: Vec::new(),
    })
}

fn failed(e: Failure) -> Attempt {
    Attempt::Invalid {
        reason: e.reason,
        message: e.message,
    }
}
