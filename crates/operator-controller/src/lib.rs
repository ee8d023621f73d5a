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
//!
//! # Vocabulary
//!
//! One word for each thing, from the solver to what is written:
//!
//! * an **Outcome** ([`olm_resolver::resolve::Outcome`]) is the solver's result for one
//!   request: a resolved bundle, or the reasons none fits;
//! * a group's **answers** ([`memo::GroupAnswers`]) are the outcomes of one joint solve of a
//!   group of Operators that can affect each other, with the **bases** ([`memo::Base`]: what
//!   each member's BundleDeployment deployed) they were solved from; the memo keeps them;
//! * an **Answer** ([`resolution::Answer`]) is one Operator's outcome as the controller reads
//!   it: `Resolved`, `Failed` (with whether the spec itself is invalid), or `Unknown`
//!   (nothing decided: catalogs unreadable, or the solve ran out of time);
//! * a **Decision** ([`resolution::Decision`]) is an Answer with what explains it: the
//!   Catalogs left out and why, deprecation notices, what is deployed, whether the bundle
//!   follows an upgrade edge, the catalog's content hash;
//! * a **Step** ([`resolution::decide::Step`]) is where a group's answers come from: the
//!   memo, a reuse while BundleDeployments move to them, or a fresh solve;
//! * a **Plan** ([`plan::Plan`]) is what one reconcile writes from a Decision: the
//!   BundleDeployment (if any), the status and the events.

pub mod apis;
pub mod args;
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
