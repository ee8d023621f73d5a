//! catalog-switcher: keeps catalog image references in step with the
//! `olm.catalogImageTemplate` annotation.
//!
//! * [`allowlist`]: which resources object variables may read.
//! * [`controller`]: one controller per kind, built the same way; [`v0`]: the CatalogSource
//!   controller follows its CRD.
//! * [`switched`]: the kinds the switcher manages (Catalog, v0 CatalogSource).
//! * [`template`]: the template language, parsed with errors that name the column.
//! * [`version`]: the API server's version as the version variables see it.
//! * [`watches`]: watches of the objects templates read, started and stopped as they change.
//! * [`render`]: a template filled from the version and objects' fields, and what the
//!   switcher makes of it, as pure functions.
//! * [`lookup`]: reading the objects templates name, within the allowlist.
//! * [`reconcile`]: one reconcile of a Catalog (server-side apply, only on change).
//! * [`status`]: the reference and the status to write for an object, decided purely.
//! * [`manager`]: the switcher as a manager, from its [`args`]; [`metrics`]: its families.

pub mod allowlist;
pub mod args;
pub mod controller;
pub mod lookup;
pub mod manager;
pub mod metrics;
pub mod reconcile;
pub mod render;
pub mod status;
pub mod switched;
pub mod template;
pub mod v0;
pub mod version;
pub mod watches;
