//! catalog-switcher's flags (every one documented in docs/catalog-switcher.md).

use clap::Parser;
use olm_runtime::RuntimeArgs;

use crate::allowlist::Allowed;

/// catalog-switcher: keeps Catalog image references in step with their templates.
#[derive(Parser, Debug)]
#[command(version, about, args_override_self = true)]
pub struct Args {
    /// How often to ask the API server for its version, in seconds.
    #[arg(long, default_value_t = 300)]
    pub version_poll_seconds: u64,
    /// Resources object variables may read (comma-separated
    /// `[GROUP/]VERSION/RESOURCE[@NAMESPACE]`); nothing else is read.
    #[arg(long, value_delimiter = ',')]
    pub allowed_resources: Vec<Allowed>,
    /// Switch OLM v0 CatalogSources too, while their CRD is served. Turn it off where OLM v0's
    /// own catalog-operator switches them, so the two do not take turns rewriting them.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub switch_catalog_sources: bool,
    /// The most distinct objects one template may read; a template reading more is not
    /// resolved (TooManyObjects).
    #[arg(long, default_value_t = 8)]
    pub max_objects_per_template: usize,
    /// The most objects watched at once for all templates (each a watch on the API server); a
    /// template that would pass it is not resolved (WatchLimitReached).
    #[arg(long, default_value_t = 500)]
    pub max_watched_objects: usize,
    #[command(flatten)]
    pub runtime: RuntimeArgs,
}
