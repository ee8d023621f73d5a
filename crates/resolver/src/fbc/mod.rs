//! File-Based Catalogs: decoding, the model, the canonical form, and validation.

mod blobs;
pub mod canonical;
pub mod decode;
pub mod load;
mod meta;
pub mod model;
mod origin;
mod problems;
pub mod property;
pub mod validate;
mod yaml;
mod yaml_block;

pub use load::{load_files, load_model, load_path};
pub use model::{
    Blob, Blobs, Bundle, Channel, ChannelEntry, Deprecation, Fbc, Origin, Package, Problem,
    Problems,
};

/// The meta fields of one blob given as JSON text: `schema`, `package` and `name`, matched
/// case-insensitively as upstream matches them (borrowed from the text when it has no escapes).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlobMeta<'a> {
    /// `schema`, when present.
    pub schema: Option<std::borrow::Cow<'a, str>>,
    /// `package`, when present.
    pub package: Option<std::borrow::Cow<'a, str>>,
    /// `name`, when present.
    pub name: Option<std::borrow::Cow<'a, str>>,
}

/// Reads the meta fields of the blob `json`; the error is a sentence (not an object, a field
/// that is not a string, two keys differing only in case).
pub fn blob_meta(json: &str) -> Result<BlobMeta<'_>, String> {
    let fields = meta::read(json)?;
    Ok(BlobMeta {
        schema: fields.schema,
        package: fields.package,
        name: fields.name,
    })
}
