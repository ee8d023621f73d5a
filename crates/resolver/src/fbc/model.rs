//! The File-Based Catalog model: every blob as it was read (for rendering), plus typed views of
//! the schemas the resolver understands. Unknown schemas are kept and re-emitted unchanged.

use std::collections::HashMap;

pub use super::blobs::{Blob, Blobs};
pub use super::origin::{Origin, Problem};
pub use super::problems::Problems;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::canonical;
use super::property::{Gvk, PackageRequired, Property, parse_properties};

/// Schemas with meaning to olm-rs.
pub mod schemas {
    /// A package.
    pub const PACKAGE: &str = "olm.package";
    /// A channel of a package.
    pub const CHANNEL: &str = "olm.channel";
    /// A bundle of a package.
    pub const BUNDLE: &str = "olm.bundle";
    /// Deprecation notices of a package.
    pub const DEPRECATIONS: &str = "olm.deprecations";
}

/// An `olm.package` blob.
#[derive(Debug, Clone, PartialEq)]
pub struct Package {
    /// Package name.
    pub name: String,
    /// The channel installed when none is named.
    pub default_channel: String,
    /// Where it was read.
    pub origin: Origin,
}

/// One entry of an `olm.channel`: a bundle and its upgrade edges.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChannelEntry {
    /// Bundle name.
    #[serde(default)]
    pub name: String,
    /// The bundle this one replaces.
    #[serde(default)]
    pub replaces: Option<String>,
    /// Bundles this one skips.
    #[serde(default)]
    pub skips: Vec<String>,
    /// Versions this one can upgrade from (blang range).
    #[serde(default)]
    pub skip_range: Option<String>,
}

/// An `olm.channel` blob.
#[derive(Debug, Clone, PartialEq)]
pub struct Channel {
    /// Channel name.
    pub name: String,
    /// Its package.
    pub package: String,
    /// Its entries.
    pub entries: Vec<ChannelEntry>,
    /// Where it was read.
    pub origin: Origin,
}

/// An `olm.bundle` blob.
#[derive(Debug, Clone, PartialEq)]
pub struct Bundle {
    /// Bundle name.
    pub name: String,
    /// Its package.
    pub package: String,
    /// Bundle image.
    pub image: String,
    /// Parsed properties.
    pub properties: Vec<Property>,
    /// The version of its `olm.package` property, when that parses.
    pub version: Option<semver::Version>,
    /// Where it was read.
    pub origin: Origin,
}

impl Bundle {
    /// Its `olm.package` properties (valid bundles have exactly one).
    pub fn package_properties(&self) -> impl Iterator<Item = &super::property::PackageProperty> {
        self.properties.iter().filter_map(|p| match p {
            Property::Package(pp) => Some(pp),
            _ => None,
        })
    }

    /// GVKs it provides.
    pub fn provided_gvks(&self) -> impl Iterator<Item = &Gvk> {
        self.properties.iter().filter_map(|p| match p {
            Property::Gvk(g) => Some(g),
            _ => None,
        })
    }

    /// GVKs it requires.
    pub fn required_gvks(&self) -> impl Iterator<Item = &Gvk> {
        self.properties.iter().filter_map(|p| match p {
            Property::GvkRequired(g) => Some(g),
            _ => None,
        })
    }

    /// Packages it requires.
    pub fn required_packages(&self) -> impl Iterator<Item = &PackageRequired> {
        self.properties.iter().filter_map(|p| match p {
            Property::PackageRequired(r) => Some(r),
            _ => None,
        })
    }

    /// Its `olm.bundle.mediatype`, if any.
    pub fn mediatype(&self) -> Option<&str> {
        self.properties.iter().find_map(|p| match p {
            Property::BundleMediatype(m) => Some(m.as_str()),
            _ => None,
        })
    }

    /// Whether it carries its manifests inline (`olm.bundle.object`).
    pub fn has_objects(&self) -> bool {
        self.properties
            .iter()
            .any(|p| matches!(p, Property::BundleObject))
    }
}

/// One entry of an `olm.deprecations` blob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeprecationEntry {
    /// `olm.package`, `olm.channel` or `olm.bundle`.
    pub schema: String,
    /// The channel or bundle name (empty for the package).
    pub name: String,
    /// What to tell people.
    pub message: String,
}

/// An `olm.deprecations` blob.
#[derive(Debug, Clone, PartialEq)]
pub struct Deprecation {
    /// Its package.
    pub package: String,
    /// Its entries.
    pub entries: Vec<DeprecationEntry>,
    /// Where it was read.
    pub origin: Origin,
}

/// A whole catalog.
#[derive(Debug, Clone, Default)]
pub struct Fbc {
    /// Every blob, in file-walk order: what is rendered and served.
    pub blobs: Blobs,
    /// Packages.
    pub packages: Vec<Package>,
    /// Channels.
    pub channels: Vec<Channel>,
    /// Bundles.
    pub bundles: Vec<Bundle>,
    /// Deprecations.
    pub deprecations: Vec<Deprecation>,
}

#[derive(Deserialize)]
struct DeprecationEntryDoc {
    #[serde(default)]
    reference: ReferenceDoc,
    #[serde(default)]
    message: String,
}

#[derive(Deserialize, Default)]
struct ReferenceDoc {
    #[serde(default)]
    schema: String,
    #[serde(default)]
    name: String,
}

/// Decodes an optional raw field; absent or `null` gives the default.
fn field<T: serde::de::DeserializeOwned + Default>(
    raw: Option<&RawValue>,
) -> Result<T, serde_json::Error> {
    match raw {
        None => Ok(T::default()),
        Some(r) if r.get() == "null" => Ok(T::default()),
        Some(r) => serde_json::from_str(r.get()),
    }
}

/// What [`Fbc::add`] keeps of a blob.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keep {
    /// The model and the blob's text.
    All,
    /// The model only, without properties of other types.
    Model,
    /// Nothing: the blob is only checked.
    Nothing,
}

impl Fbc {
    /// Builds the model from blobs given as values (tests, generated content), each read at its
    /// origin. Fails with every blob that is not an object, has no schema, or does not fit its
    /// schema.
    pub fn from_values(blobs: Vec<(serde_json::Value, Origin)>) -> Result<Self, Problems> {
        let mut fbc = Fbc::default();
        let mut problems = Problems::new();
        let mut files: HashMap<Arc<str>, u32> = HashMap::new();
        for (value, origin) in blobs {
            let file = *files
                .entry(origin.file.clone())
                .or_insert_with(|| fbc.blobs.add_file(origin.file.clone()));
            let json = value.to_string();
            fbc.push_json(&json, file, origin.line, &mut problems);
        }
        if problems.is_empty() {
            Ok(fbc)
        } else {
            Err(problems)
        }
    }

    /// Adds one blob, given as JSON text read in `file` (an id from `Blobs::add_file`) at
    /// `line`. A blob that does not fit its schema is a problem; once problems are being
    /// counted rather than listed, blobs are no longer kept (the content is invalid anyway), so
    /// broken content cannot grow memory.
    pub(crate) fn push_json(
        &mut self,
        json: &str,
        file: u32,
        line: usize,
        problems: &mut Problems,
    ) {
        self.push_kept(json, file, line, problems, Keep::All);
    }

    /// Adds one blob to the model only, as [`crate::fbc::load::load_model`] describes.
    pub(crate) fn push_model_json(
        &mut self,
        json: &str,
        file: u32,
        line: usize,
        problems: &mut Problems,
    ) {
        self.push_kept(json, file, line, problems, Keep::Model);
    }

    /// Checks one blob as [`Fbc::push_json`] would, without keeping it.
    pub(crate) fn check_json(
        &mut self,
        json: &str,
        file: u32,
        line: usize,
        problems: &mut Problems,
    ) {
        self.push_kept(json, file, line, problems, Keep::Nothing);
    }

    /// Adds what `keep` says of one blob (nothing once problems are only counted), reporting a
    /// blob that does not fit its schema.
    fn push_kept(
        &mut self,
        json: &str,
        file: u32,
        line: usize,
        problems: &mut Problems,
        keep: Keep,
    ) {
        let keep = if problems.is_full() {
            Keep::Nothing
        } else {
            keep
        };
        if let Err(message) = self.add(json, file, line, keep) {
            let origin = Origin {
                file: self.blobs.file(file),
                line,
            };
            problems.push(Problem::at(&origin, message));
        }
    }

    fn add(&mut self, raw: &str, file: u32, line: usize, keep: Keep) -> Result<(), String> {
        let fields = super::meta::read(raw)?;
        let schema = fields.schema.as_deref().unwrap_or_default();
        let package = fields.package.as_deref().unwrap_or_default();
        let name = fields.name.as_deref().unwrap_or_default();
        let origin = || Origin {
            file: self.blobs.file(file),
            line,
        };
        let what = |e: serde_json::Error| format!("invalid {schema} {name:?}: {e}");
        match schema {
            "" => return Err("the blob has no \"schema\"".into()),
            schemas::PACKAGE => {
                let default_channel: String = field(fields.default_channel).map_err(what)?;
                if keep == Keep::Nothing {
                    return Ok(());
                }
                let origin = origin();
                self.packages.push(Package {
                    name: name.to_owned(),
                    default_channel,
                    origin,
                });
            }
            schemas::CHANNEL => {
                let entries: Vec<ChannelEntry> = field(fields.entries).map_err(what)?;
                if keep == Keep::Nothing {
                    return Ok(());
                }
                let origin = origin();
                self.channels.push(Channel {
                    name: name.to_owned(),
                    package: package.to_owned(),
                    entries,
                    origin,
                });
            }
            schemas::BUNDLE => {
                let image: String = field(fields.image).map_err(what)?;
                let mut properties = parse_properties(fields.properties)
                    .map_err(|e| format!("bundle {name:?}: {e}"))?;
                if keep == Keep::Model {
                    properties.retain(|p| !matches!(p, super::property::Property::Other { .. }));
                }
                if keep == Keep::Nothing {
                    return Ok(());
                }
                let mut bundle = Bundle {
                    name: name.to_owned(),
                    package: package.to_owned(),
                    image,
                    properties,
                    version: None,
                    origin: origin(),
                };
                let version = bundle
                    .package_properties()
                    .next()
                    .and_then(|p| crate::range::parse_bundle_version(&p.version).ok());
                bundle.version = version;
                self.bundles.push(bundle);
            }
            schemas::DEPRECATIONS => {
                let docs: Vec<DeprecationEntryDoc> = field(fields.entries).map_err(what)?;
                if keep == Keep::Nothing {
                    return Ok(());
                }
                let entries = docs
                    .into_iter()
                    .map(|e| DeprecationEntry {
                        schema: e.reference.schema,
                        name: e.reference.name,
                        message: e.message,
                    })
                    .collect();
                let origin = origin();
                self.deprecations.push(Deprecation {
                    package: package.to_owned(),
                    entries,
                    origin,
                });
            }
            // Other schemas are kept as blobs only, and served unchanged.
            _ => {}
        }
        if keep != Keep::All {
            return Ok(());
        }
        self.blobs
            .push(raw, schema, package, name, file, line)
            .map_err(|_| "the catalog is larger than 4 GiB, which olm-rs does not load".to_owned())
    }

    /// The canonical JSON-lines rendering (what catalogd serves as all.json).
    pub fn render(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.blobs.text_len() + self.blobs.len());
        for blob in self.blobs.iter() {
            render_blob(blob.raw, &mut out);
        }
        out
    }

    /// Writes the canonical rendering to `out`, blob by blob, without holding it whole.
    pub fn render_to(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        let mut line = Vec::new();
        for blob in self.blobs.iter() {
            line.clear();
            render_blob(blob.raw, &mut line);
            out.write_all(&line)?;
        }
        Ok(())
    }

    /// sha256 (hex) of [`Fbc::render`].
    pub fn content_hash(&self) -> String {
        canonical::sha256_hex(&self.render())
    }

    /// Appends another catalog's blobs (for catalogs assembled from several sources).
    pub fn extend(&mut self, other: Fbc) {
        self.blobs.append(&other.blobs);
        self.packages.extend(other.packages);
        self.channels.extend(other.channels);
        self.bundles.extend(other.bundles);
        self.deprecations.extend(other.deprecations);
    }
}

/// Appends the canonical line of one blob (with its newline) to `out`. Every blob was parsed as
/// JSON when it was read, so rendering cannot fail; should it, the text is kept as read.
pub fn render_blob(raw: &str, out: &mut Vec<u8>) {
    let mark = out.len();
    if canonical::write_raw(raw, out).is_err() {
        out.truncate(mark);
        out.extend_from_slice(raw.as_bytes());
    }
    out.push(b'\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn blob(value: serde_json::Value, line: usize) -> (serde_json::Value, Origin) {
        (
            value,
            Origin {
                file: "c.yaml".into(),
                line,
            },
        )
    }

    #[test]
    fn schemas_are_typed_and_unknown_ones_kept() {
        let fbc = Fbc::from_values(vec![
            blob(json!({"schema": "olm.package", "name": "foo", "defaultChannel": "stable"}), 1),
            blob(json!({"schema": "olm.channel", "package": "foo", "name": "stable",
                        "entries": [{"name": "foo.v1", "skips": ["foo.v0"], "skipRange": "<1.0.0"}]}), 5),
            blob(json!({"schema": "olm.bundle", "package": "foo", "name": "foo.v1", "image": "i",
                        "properties": [{"type": "olm.package", "value": {"packageName": "foo", "version": "1.0.0"}}]}), 9),
            blob(json!({"schema": "olm.deprecations", "package": "foo",
                        "entries": [{"reference": {"schema": "olm.bundle", "name": "foo.v1"}, "message": "old"}]}), 20),
            blob(json!({"schema": "acme.custom", "anything": [1, 2]}), 30),
        ])
        .unwrap();
        assert_eq!(fbc.packages[0].default_channel, "stable");
        assert_eq!(fbc.channels[0].entries[0].skips, vec!["foo.v0"]);
        assert_eq!(
            fbc.channels[0].entries[0].skip_range.as_deref(),
            Some("<1.0.0")
        );
        assert_eq!(fbc.bundles[0].version, Some(semver::Version::new(1, 0, 0)));
        assert_eq!(fbc.deprecations[0].entries[0].message, "old");
        assert_eq!(fbc.blobs.len(), 5);
        assert!(
            String::from_utf8(fbc.render())
                .unwrap()
                .ends_with("{\"anything\":[1,2],\"schema\":\"acme.custom\"}\n")
        );
    }

    #[test]
    fn meta_keys_match_case_insensitively_but_not_twice() {
        let fbc = Fbc::from_values(vec![blob(
            json!({"Schema": "olm.package", "NAME": "foo"}),
            1,
        )])
        .unwrap();
        assert_eq!(fbc.packages[0].name, "foo");
        let err = Fbc::from_values(vec![blob(
            json!({"schema": "olm.package", "Schema": "x"}),
            3,
        )])
        .unwrap_err();
        assert_eq!(
            err[0].to_string(),
            "c.yaml:3: the blob has several keys named \"schema\" that differ only in case"
        );
    }

    #[test]
    fn every_malformed_blob_is_reported_with_its_line() {
        let err = Fbc::from_values(vec![
            blob(json!({"name": "x"}), 1),
            blob(json!([1]), 4),
            blob(
                json!({"schema": "olm.channel", "name": "c", "entries": "nope"}),
                7,
            ),
        ])
        .unwrap_err();
        let lines: Vec<String> = err.iter().map(|p| p.to_string()).collect();
        assert_eq!(lines[0], "c.yaml:1: the blob has no \"schema\"");
        assert_eq!(lines[1], "c.yaml:4: a catalog blob must be an object");
        assert!(
            lines[2].starts_with("c.yaml:7: invalid olm.channel \"c\""),
            "{}",
            lines[2]
        );
    }
}
