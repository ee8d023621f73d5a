//! catalog-switcher: keeps catalog image references in step with the
//! `olm.catalogImageTemplate` annotation.
//!
//! * [`allowlist`]: which resources object variables may read.
//! * [`template`]: the template language, parsed with errors that name the column.
//! * [`version`]: the API server's version as the version variables see it.
//! * [`render`]: a template filled from the version and objects' fields, and what the
//!   switcher makes of it, as pure functions.
//! * [`status`]: the reference and the status to write for an object, decided purely.

pub mod allowlist;
pub mod render;
pub mod status;
pub mod template;
pub mod version;
