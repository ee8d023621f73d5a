//! The four kinds the API serves, what each lists from a catalog's index, and its Table
//! columns.

use serde_json::{Value, json};

use crate::summary::Summary;

/// The API group.
pub const GROUP: &str = "catalogs.olm-rs.io";
/// Its one version.
pub const VERSION: &str = "v1alpha1";
/// `group/version`.
pub const API_VERSION: &str = "catalogs.olm-rs.io/v1alpha1";

/// A served kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `olm.package` blobs.
    Package,
    /// `olm.channel` blobs.
    Channel,
    /// `olm.bundle` blobs.
    Bundle,
    /// Blobs of every other schema (`olm.deprecations`, schemas of one's own).
    Meta,
}

/// The fields a field selector may name, for every kind.
pub const FIELDS: [&str; 5] = [
    "metadata.name",
    "spec.catalog",
    "spec.schema",
    "spec.package",
    "spec.name",
];

/// One Table column: name, type, priority (1: only with `-o wide`), description.
pub type Column = (&'static str, &'static str, u8, &'static str);

impl Kind {
    /// Every kind, in discovery order.
    pub const ALL: [Kind; 4] = [Kind::Package, Kind::Channel, Kind::Bundle, Kind::Meta];

    /// The kind of a resource name (`packages`), if served.
    pub fn of_resource(resource: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.resource() == resource)
    }

    /// The plural resource.
    pub fn resource(self) -> &'static str {
        match self {
            Kind::Package => "packages",
            Kind::Channel => "channels",
            Kind::Bundle => "bundles",
            Kind::Meta => "metas",
        }
    }

    /// The singular resource.
    pub fn singular(self) -> &'static str {
        match self {
            Kind::Package => "package",
            Kind::Channel => "channel",
            Kind::Bundle => "bundle",
            Kind::Meta => "meta",
        }
    }

    /// The kind's name.
    pub fn kind(self) -> &'static str {
        match self {
            Kind::Package => "Package",
            Kind::Channel => "Channel",
            Kind::Bundle => "Bundle",
            Kind::Meta => "Meta",
        }
    }

    /// Whether a blob of `schema` is of this kind.
    pub fn has_schema(self, schema: &str) -> bool {
        match self {
            Kind::Package => schema == "olm.package",
            Kind::Channel => schema == "olm.channel",
            Kind::Bundle => schema == "olm.bundle",
            Kind::Meta => !matches!(schema, "olm.package" | "olm.channel" | "olm.bundle"),
        }
    }

    /// The Table columns after Name.
    pub fn columns(self) -> &'static [Column] {
        match self {
            Kind::Package => &[
                ("Catalog", "string", 0, "The Catalog serving it."),
                ("Default Channel", "string", 0, "Its defaultChannel."),
                ("Latest", "string", 0, "The highest version of its bundles."),
                (
                    "Deprecated",
                    "string",
                    1,
                    "Whether the catalog deprecates it.",
                ),
            ],
            Kind::Channel => &[
                ("Package", "string", 0, "The package."),
                ("Head", "string", 0, "The entry no other replaces or skips."),
                ("Entries", "integer", 0, "How many bundles it lists."),
                ("Catalog", "string", 1, "The Catalog serving it."),
                (
                    "Deprecated",
                    "string",
                    1,
                    "Whether the catalog deprecates it.",
                ),
            ],
            Kind::Bundle => &[
                ("Package", "string", 0, "The package."),
                ("Version", "string", 0, "Its olm.package version."),
                (
                    "Deprecated",
                    "string",
                    0,
                    "Whether the catalog deprecates it.",
                ),
                (
                    "Install Modes",
                    "string",
                    1,
                    "The install modes its ClusterServiceVersion supports.",
                ),
                (
                    "Webhooks",
                    "string",
                    1,
                    "Webhooks its ClusterServiceVersion defines (<unknown> when the catalog carries no CSV).",
                ),
                ("Catalog", "string", 1, "The Catalog serving it."),
            ],
            Kind::Meta => &[
                ("Catalog", "string", 0, "The Catalog serving it."),
                ("Schema", "string", 0, "The blob's schema."),
                ("Package", "string", 0, "The blob's package."),
                ("Blob Name", "string", 1, "The blob's name."),
            ],
        }
    }

    /// The cells after Name for `item`.
    pub fn cells(self, item: &Item, summary: &Summary) -> Vec<Value> {
        let yes_no = |b: bool| json!(if b { "True" } else { "False" });
        let none = || json!("<none>");
        match self {
            Kind::Package => {
                let s = summary.packages.get(&item.name);
                vec![
                    json!(item.catalog),
                    s.map_or_else(none, |s| json!(s.default_channel)),
                    s.and_then(|s| s.latest.as_ref())
                        .map_or_else(none, |v| json!(v.to_string())),
                    yes_no(s.is_some_and(|s| s.deprecated)),
                ]
            }
            Kind::Channel => {
                let s = summary
                    .channels
                    .get(&(item.package.clone(), item.name.clone()));
                vec![
                    json!(item.package),
                    s.and_then(|s| s.head.as_ref())
                        .map_or_else(none, |h| json!(h)),
                    json!(s.map_or(0, |s| s.entries)),
                    json!(item.catalog),
                    yes_no(s.is_some_and(|s| s.deprecated)),
                ]
            }
            Kind::Bundle => {
                let s = summary
                    .bundles
                    .get(&(item.package.clone(), item.name.clone()));
                let modes = s
                    .map(|s| s.install_modes.join(","))
                    .filter(|m| !m.is_empty());
                vec![
                    json!(item.package),
                    s.and_then(|s| s.version.as_ref())
                        .map_or_else(none, |v| json!(v)),
                    yes_no(s.is_some_and(|s| s.deprecated)),
                    modes.map_or_else(none, |m| json!(m)),
                    s.and_then(|s| s.webhooks)
                        .map_or_else(|| json!("<unknown>"), |n| json!(n.to_string())),
                    json!(item.catalog),
                ]
            }
            Kind::Meta => vec![
                json!(item.catalog),
                json!(item.schema),
                json!(if item.package.is_empty() {
                    "<none>"
                } else {
                    &item.package
                }),
                json!(if item.name.is_empty() {
                    "<none>"
                } else {
                    &item.name
                }),
            ],
        }
    }
}

/// One object as the index knows it: enough to name, label, select and sort it without
/// reading its blob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// The object's name.
    pub object: String,
    /// The Catalog.
    pub catalog: String,
    /// The blob's schema.
    pub schema: String,
    /// Its package (for a package, its own name).
    pub package: String,
    /// Its name (empty for blobs without one).
    pub name: String,
    /// Where the blob lies in the catalog's `all.json`.
    pub offset: u64,
    /// Its length.
    pub length: u64,
}

impl Item {
    /// Its labels: `catalog`, `package` (when a valid label value) and `schema`.
    pub fn labels(&self) -> std::collections::BTreeMap<&'static str, &str> {
        let mut labels = std::collections::BTreeMap::new();
        labels.insert("catalog", self.catalog.as_str());
        if !self.package.is_empty() && crate::names::is_label_value(&self.package) {
            labels.insert("package", self.package.as_str());
        }
        if crate::names::is_label_value(&self.schema) {
            labels.insert("schema", self.schema.as_str());
        }
        labels
    }

    /// A field a field selector may name.
    pub fn field(&self, field: &str) -> Option<&str> {
        Some(match field {
            "metadata.name" => &self.object,
            "spec.catalog" => &self.catalog,
            "spec.schema" => &self.schema,
            "spec.package" => &self.package,
            "spec.name" => &self.name,
            _ => return None,
        })
    }
}

/// The items of `kind` in one catalog's index, named, in file order.
pub fn items(kind: Kind, catalog: &str, index: &catalogd_store::store::Index) -> Vec<Item> {
    // Metas of one (schema, package, name) may repeat: the later ones get hashed names.
    let mut seen: std::collections::HashMap<(&str, &str, &str), usize> =
        std::collections::HashMap::new();
    let mut out = Vec::new();
    for entry in index.entries() {
        if !kind.has_schema(entry.schema) {
            continue;
        }
        let package = if kind == Kind::Package {
            entry.name
        } else {
            entry.package
        };
        let object = match kind {
            Kind::Package => crate::names::derive(&[catalog, entry.name]),
            Kind::Channel | Kind::Bundle => {
                crate::names::derive(&[catalog, entry.package, entry.name])
            }
            Kind::Meta => {
                let n = seen
                    .entry((entry.schema, entry.package, entry.name))
                    .or_default();
                let ordinal = *n;
                *n += 1;
                let parts = [catalog, entry.schema, entry.package, entry.name];
                if ordinal == 0 {
                    crate::names::derive(&parts)
                } else {
                    // The second of the same tuple: hashed with its ordinal, so it can never
                    // take a name a plain tuple (a blob named `bar.1`, say) has.
                    let ordinal = ordinal.to_string();
                    crate::names::hashed(&[
                        catalog,
                        entry.schema,
                        entry.package,
                        entry.name,
                        ordinal.as_str(),
                    ])
                }
            }
        };
        out.push(Item {
            object,
            catalog: catalog.to_owned(),
            schema: entry.schema.to_owned(),
            package: package.to_owned(),
            name: entry.name.to_owned(),
            offset: entry.offset,
            length: entry.length,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use catalogd_store::store::IndexBuilder;

    fn index(lines: &[(&str, &str, &str)]) -> catalogd_store::store::Index {
        let mut b = IndexBuilder::new();
        for (schema, package, name) in lines {
            b.push(schema, package, name, 10).unwrap();
        }
        b.finish()
    }

    #[test]
    fn every_item_of_a_kind_has_a_name_of_its_own() {
        // A blob repeated in a schema of one's own, beside one named like its ordinal.
        let idx = index(&[
            ("example", "foo", "bar"),
            ("example", "foo", "bar"),
            ("example", "foo", "bar.1"),
            ("olm.package", "", "foo"),
            ("olm.bundle", "foo", "foo.v1"),
        ]);
        let metas = items(Kind::Meta, "cat", &idx);
        let names: std::collections::BTreeSet<&str> =
            metas.iter().map(|i| i.object.as_str()).collect();
        assert_eq!(metas.len(), 3);
        assert_eq!(names.len(), 3, "{names:?}");
        assert!(names.contains("cat.example.foo.bar.1"));
        let bundles = items(Kind::Bundle, "cat", &idx);
        assert_eq!(bundles[0].object, "cat.foo.foo.v1");
        assert_eq!(bundles[0].labels()["package"], "foo");
        let packages = items(Kind::Package, "cat", &idx);
        assert_eq!(packages[0].package, "foo");
        assert_eq!(packages[0].field("spec.schema"), Some("olm.package"));
    }
}
