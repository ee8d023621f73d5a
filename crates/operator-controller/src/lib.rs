//! operator-controller: resolves `Operator` objects against the content catalogd serves and
//! records each answer as a `BundleDeployment`, with status, events and metrics that say why.
//!
//! * [`inputs`] turns API objects into what resolution needs (pure);
//! * [`content`] fetches and caches each Catalog's content by its hash;
//! * [`resolution`] resolves jointly, group by group, with memoized answers — the one code path
//!   the controller and `explain` share;
//! * [`plan`] decides what to write (BundleDeployment, status, event) from an answer (pure);
//! * [`controller`] and [`reconcile`] wire it to the API server;
//! * [`manager`] runs it as a manager from its [`args`], and the `explain` command.

pub mod args;
pub mod backoff;
pub mod bundle_deployment;
pub mod content;
pub mod controller;
pub mod explain;
pub mod inputs;
pub mod manager;
pub mod memo;
pub mod metrics;
pub mod plan;
pub mod probe;
pub mod reconcile;
pub mod resolution;
pub mod status;

/// Field manager of every write, as upstream operator-controller's.
pub const FIELD_MANAGER: &str = "operator-controller";
