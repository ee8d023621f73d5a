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
            // A plain name starts with its catalog and a dot; a hashed one with its catalog's
            // characters made dashes. Either way, it starts with the catalog's first label.
            let first = s.catalog.split('.').next().unwrap_or_default();
            if name.is_some_and(|n| !n.starts_with(first)) {
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

/// One item, as `form` says: an object or a Table row.
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
) -> std::io::Result<Value> {
    let origin = served.origin();
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

/// A list of written items.
pub fn list(
    kind: Kind,
    form: Form,
    written: Vec<Value>,
    version: &str,
    next: Option<&str>,
) -> Value {
    match form {
        Form::Table { version: v, .. } => {
            table::table(v, Some(table::columns(kind)), written, version, next)
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
                "items": written,
            })
        }
    }
}
