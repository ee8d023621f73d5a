//! catalog-switcher: keeps catalog image references in step with the
//! `olm.catalogImageTemplate` annotation.
//!
//! * [`template`]: the template language, parsed with errors that name the column.
//! * [`version`]: the API server's version as the version variables see it.
//! * [`render`]: a template filled from the version and objects' fields, and what the
//!   switcher makes of it (the reference to write, the status to report), as pure functions.

pub mod render;
pub mod template;
pub mod version;
