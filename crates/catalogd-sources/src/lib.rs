//! Where catalog content comes from: one source per member of the `spec.source` union,
//! dispatched by [`Sources::fetch`] over that closed set. A source fetches files (name, bytes); parsing, validation and storing
//! are the pipeline's, the same for every source.

pub mod archive;
pub mod configmaps;
mod contract;
pub mod credentials;
pub mod custom;
mod dispatch;
pub mod git;
pub mod http;
pub mod image;
pub mod poll;

pub use contract::{Facts, Fetched, Mode, SourceError, reasons};
pub use dispatch::Sources;
