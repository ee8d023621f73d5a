//! Bundle properties: the typed ones the resolver uses, the rest kept raw.

use serde::Deserialize;
use serde_json::value::RawValue;

/// Property types with meaning to olm-rs.
pub mod types {
    /// The bundle's package and version; exactly one per bundle.
    pub const PACKAGE: &str = "olm.package";
    /// A GVK the bundle provides.
    pub const GVK: &str = "olm.gvk";
    /// A package (and blang version range) the bundle needs.
    pub const PACKAGE_REQUIRED: &str = "olm.package.required";
    /// A GVK the bundle needs.
    pub const GVK_REQUIRED: &str = "olm.gvk.required";
    /// The bundle format (`registry+v1`, `plain+v0`).
    pub const BUNDLE_MEDIATYPE: &str = "olm.bundle.mediatype";
    /// A manifest inlined in the catalog.
    pub const BUNDLE_OBJECT: &str = "olm.bundle.object";
}

/// A group/version/kind.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
pub struct Gvk {
    /// API group (empty for the core group).
    #[serde(default)]
    pub group: String,
    /// API version.
    #[serde(default)]
    pub version: String,
    /// Kind.
    #[serde(default)]
    pub kind: String,
}

impl std::fmt::Display for Gvk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.group.is_empty() {
            write!(f, "{}/{}", self.version, self.kind)
        } else {
            write!(f, "{}/{} {}", self.group, self.version, self.kind)
        }
    }
}

/// The value of an `olm.package` property.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PackageProperty {
    /// Package name.
    #[serde(default)]
    pub package_name: String,
    /// Bundle version (strict semver).
    #[serde(default)]
    pub version: String,
}

/// The value of an `olm.package.required` property.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PackageRequired {
    /// The package needed.
    #[serde(default)]
    pub package_name: String,
    /// Acceptable versions, as a blang range.
    #[serde(default)]
    pub version_range: String,
}

/// A parsed property.
#[derive(Debug, Clone, PartialEq)]
pub enum Property {
    /// `olm.package`.
    Package(PackageProperty),
    /// `olm.gvk`.
    Gvk(Gvk),
    /// `olm.package.required`.
    PackageRequired(PackageRequired),
    /// `olm.gvk.required`.
    GvkRequired(Gvk),
    /// `olm.bundle.mediatype`.
    BundleMediatype(String),
    /// `olm.bundle.object`: the bundle carries its manifests inline.
    BundleObject,
    /// Any other type, kept as it is.
    Other {
        /// The property type.
        type_: String,
        /// Its value, as JSON text.
        value: String,
    },
}

#[derive(Deserialize)]
struct RawProperty<'a> {
    #[serde(rename = "type", default)]
    type_: String,
    #[serde(borrow, default)]
    value: Option<&'a RawValue>,
}

/// Parses a bundle's `properties` list (JSON text, absent for none); the error says which entry
/// is malformed and why.
pub fn parse_properties(list: Option<&RawValue>) -> Result<Vec<Property>, String> {
    let Some(list) = list else {
        return Ok(Vec::new());
    };
    if list.get() == "null" {
        return Ok(Vec::new());
    }
    let items: Vec<&RawValue> =
        serde_json::from_str(list.get()).map_err(|_| "properties must be a list".to_owned())?;
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| {
            let raw: RawProperty<'_> = serde_json::from_str(item.get())
                .map_err(|e| format!("property[{i}] is malformed: {e}"))?;
            let value = raw.value.map_or("null", RawValue::get);
            let typed =
                |e: serde_json::Error| format!("parse property[{i}] of type {:?}: {e}", raw.type_);
            Ok(match raw.type_.as_str() {
                types::PACKAGE => Property::Package(serde_json::from_str(value).map_err(typed)?),
                types::GVK => Property::Gvk(serde_json::from_str(value).map_err(typed)?),
                types::PACKAGE_REQUIRED => {
                    Property::PackageRequired(serde_json::from_str(value).map_err(typed)?)
                }
                types::GVK_REQUIRED => {
                    Property::GvkRequired(serde_json::from_str(value).map_err(typed)?)
                }
                types::BUNDLE_MEDIATYPE => {
                    Property::BundleMediatype(serde_json::from_str(value).map_err(typed)?)
                }
                types::BUNDLE_OBJECT => Property::BundleObject,
                "" => return Err(format!("property[{i}] has no type")),
                _ => Property::Other {
                    type_: raw.type_,
                    value: value.to_owned(),
                },
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn raw(v: serde_json::Value) -> Box<RawValue> {
        serde_json::value::to_raw_value(&v).unwrap()
    }

    #[test]
    fn known_properties_are_typed_and_others_kept() {
        let props = parse_properties(Some(&raw(json!([
            {"type": "olm.package", "value": {"packageName": "foo", "version": "1.0.0"}},
            {"type": "olm.gvk", "value": {"group": "x.io", "kind": "A", "version": "v1"}},
            {"type": "olm.package.required", "value": {"packageName": "bar", "versionRange": ">=1.0.0"}},
            {"type": "olm.gvk.required", "value": {"group": "y.io", "kind": "B", "version": "v1"}},
            {"type": "olm.bundle.mediatype", "value": "plain+v0"},
            {"type": "olm.csv.metadata", "value": {"displayName": "Foo"}}
        ]))))
        .unwrap();
        assert_eq!(props.len(), 6);
        assert_eq!(
            props[0],
            Property::Package(PackageProperty {
                package_name: "foo".into(),
                version: "1.0.0".into()
            })
        );
        assert_eq!(props[4], Property::BundleMediatype("plain+v0".into()));
        assert!(matches!(&props[5], Property::Other { type_, .. } if type_ == "olm.csv.metadata"));
    }

    #[test]
    fn a_malformed_known_property_is_an_error_naming_it() {
        let err = parse_properties(Some(&raw(json!([{"type": "olm.package", "value": "foo"}]))))
            .unwrap_err();
        assert!(
            err.contains("property[0]") && err.contains("olm.package"),
            "{err}"
        );
        assert!(parse_properties(Some(&raw(json!({"type": "x"})))).is_err());
    }
}
