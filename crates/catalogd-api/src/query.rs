//! What a request selects: a kind, a label selector and a field selector, applied to the
//! index alone (no blob is read to decide), and how each selected item is written out.

use serde_json::{Value, json};

use crate::content::{Served, Summaries};
use crate::kinds::{API_VERSION, FIELDS, Item, Kind, items};
use crate::objects::{metadata, object};
use crate::select::{FieldSelector, LabelSelector, fields, labels};
use crate::table::{self, Include};

/// A parsed selection.
#[derive(Debug, Clone)]
pub struct Query {
    /// The kind.
    pub kind: Kind,
    /// `labelSelector`.
    pub labels: LabelSelector,
    /// `fieldSelector`.
    pub fields: FieldSelector,
}

impl Query {
    /// Parses the selectors of a request for `kind`.
    ///
    /// # Errors
    ///
    /// What is wrong with a selector.
    pub fn parse(kind: Kind, label: Option<&str>, field: Option<&str>) -> Result<Query, String> {
        Ok(Query {
            kind,
            labels: labels(label.unwrap_or_default())?,
            fields: fields(field.unwrap_or_default(), &FIELDS)?,
        })
    }

    /// A query for the one object `name`.
    pub fn named(kind: Kind, name: &str) -> Query {
        Query {
            kind,
            labels: LabelSelector::default(),
            fields: FieldSelector(vec![crate::select::FieldRequirement {
                field: "metadata.name".into(),
                value: name.into(),
                negate: false,
            }]),
        }
    }

    /// Whether `item` is selected.
    pub fn selects(&self, item: &Item) -> bool {
        self.labels.matches(&item.labels()) && self.fields.matches(|f| item.field(f))
    }

    /// The selected items of `served`, sorted by name, each with its catalog's place in
    /// `served`.
    pub fn items(&self, served: &[Served]) -> Vec<(usize, Item)> {
        let catalog = self
            .fields
            .required("spec.catalog")
            .or_else(|| self.labels.required("catalog"));
        let name = self.fields.required("metadata.name");
        let mut out = Vec::new();
        for (i, s) in served.iter().enumerate() {
            if catalog.is_some_and(|c| c != s.catalog) {
                continue;
            }
            // A plain name (it has a dot) starts with its catalog, which then has no dot; a
            // hashed one (no dot) may be any catalog's.
            if let Some((first, _)) = name.and_then(|n| n.split_once('.'))
                && first != s.catalog
            {
                continue;
            }
            for item in items(self.kind, &s.catalog, &s.index) {
                if self.selects(&item) {
                    out.push((i, item));
                }
            }
        }
        out.sort_by(|a, b| a.1.object.cmp(&b.1.object));
        out
    }
}

/// How items are written out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// As objects; `full`: nothing left out.
    Objects {
        /// `?content=full`.
        full: bool,
    },
    /// As Table rows.
    Table {
        /// `meta.k8s.io/v1` or `v1beta1`.
        version: &'static str,
        /// What a row carries.
        include: Include,
    },
}

/// One item, as `form` says: an object or a Table row, when `version` is served.
///
/// # Errors
///
/// When its content cannot be read.
pub fn write(
    kind: Kind,
    served: &Served,
    item: &Item,
    form: Form,
    summaries: &Summaries,
    version: &str,
) -> std::io::Result<Value> {
    let origin = served.origin(version);
    let whole = |full| -> std::io::Result<Value> {
        let blob = served.blob(item.offset, item.length)?;
        Ok(object(kind, item, origin, &blob, full))
    };
    match form {
        Form::Objects { full } => whole(full),
        Form::Table { version, include } => {
            let summary = summaries.of(served)?;
            let carried = match include {
                Include::None => None,
                Include::Metadata => Some(table::partial(metadata(item, origin), version)),
                Include::Object => Some(whole(false)?),
            };
            Ok(table::row(
                &item.object,
                kind.cells(item, &summary),
                origin.created,
                carried,
            ))
        }
    }
}

/// Stands for the items in [`envelope`]'s text.
const ITEMS: &str = "\"@@items@@\"";

/// The text of a list around its items: what comes before the `[` that opens them, and after
/// the `]` that closes them. The items are written between, one at a time, so a list never
/// holds more than its text and one object.
pub fn envelope(kind: Kind, form: Form, version: &str, next: Option<&str>) -> (String, String) {
    let placeholder = json!("@@items@@");
    let whole = match form {
        Form::Table { version: v, .. } => {
            let mut t = table::table(v, Some(table::columns(kind)), Vec::new(), version, next);
            if let Some(o) = t.as_object_mut() {
                o.insert("rows".into(), placeholder);
            }
            t
        }
        Form::Objects { .. } => {
            let mut metadata = json!({ "resourceVersion": version });
            if let (Some(next), Some(m)) = (next, metadata.as_object_mut()) {
                m.insert("continue".into(), json!(next));
            }
            json!({
                "apiVersion": API_VERSION,
                "kind": format!("{}List", kind.kind()),
                "metadata": metadata,
                "items": placeholder,
            })
        }
    }
    .to_string();
    match whole.split_once(ITEMS) {
        Some((head, tail)) => (head.to_owned(), tail.to_owned()),
        None => (whole, String::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_written_item_by_item_is_the_list() {
        let (head, tail) = envelope(Kind::Bundle, Form::Objects { full: false }, "v1", Some("t"));
        let text = format!("{head}[{{\"a\":1}},{{\"b\":2}}]{tail}");
        let parsed: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(parsed["kind"], "BundleList");
        assert_eq!(parsed["metadata"]["continue"], "t");
        assert_eq!(parsed["items"].as_array().unwrap().len(), 2);
        let form = Form::Table {
            version: "meta.k8s.io/v1",
            include: Include::Metadata,
        };
        let (head, tail) = envelope(Kind::Package, form, "v1", None);
        let parsed: Value = serde_json::from_str(&format!("{head}[]{tail}")).unwrap();
        assert_eq!(parsed["kind"], "Table");
        assert!(parsed["columnDefinitions"].is_array());
        assert_eq!(parsed["rows"], json!([]));
    }
}
