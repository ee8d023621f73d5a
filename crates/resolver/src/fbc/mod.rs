//! File-Based Catalogs: decoding, the model, the canonical form, and validation.

pub mod canonical;
pub mod decode;
pub mod load;
mod meta;
pub mod model;
pub mod property;
pub mod validate;

pub use load::{load_files, load_path};
pub use model::{Blob, Bundle, Channel, ChannelEntry, Deprecation, Fbc, Origin, Package, Problem};
