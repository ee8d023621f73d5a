//! Server-side printing: the `Table` kubectl asks for (`Accept: application/json;as=Table;
//! v=v1;g=meta.k8s.io`), with each kind's columns.

use serde_json::{Value, json};

use crate::kinds::Kind;

/// Whether `accept` asks for a Table (meta.k8s.io v1 or v1beta1), and which version.
pub fn wanted(accept: &str) -> Option<&'static str> {
    for media in accept.split(',') {
        let params: Vec<String> = media
            .split(';')
            .skip(1)
            .map(|p| p.trim().replace(' ', ""))
            .collect();
        let has = |p: &str| params.iter().any(|q| q == p);
        if has("as=Table") && has("g=meta.k8s.io") {
            if has("v=v1") {
                return Some("meta.k8s.io/v1");
            }
            if has("v=v1beta1") {
                return Some("meta.k8s.io/v1beta1");
            }
        }
    }
    None
}

/// What each row carries (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Include {
    /// Nothing.
    None,
    /// The object's metadata (the default).
    Metadata,
    /// The whole object.
    Object,
}

impl Include {
    /// From the `includeObject` parameter.
    pub fn parse(value: Option<&str>) -> Result<Include, String> {
        match value {
            None | Some("") | Some("Metadata") => Ok(Include::Metadata),
            Some("None") => Ok(Include::None),
            Some("Object") => Ok(Include::Object),
            Some(other) => Err(format!(
                "includeObject must be None, Metadata or Object, not {other:?}"
            )),
        }
    }
}

/// The column definitions of `kind`.
pub fn columns(kind: Kind) -> Value {
    let mut defs = vec![json!({
        "name": "Name", "type": "string", "format": "name", "priority": 0,
        "description": "Derived from the catalog, package and blob names (docs/catalogs.md).",
    })];
    for (name, ty, priority, description) in kind.columns() {
        defs.push(json!({
            "name": name, "type": ty, "format": "", "priority": priority,
            "description": description,
        }));
    }
    defs.push(json!({
        "name": "Age", "type": "date", "format": "", "priority": 0,
        "description": "Since the catalog's content was first served.",
    }));
    Value::Array(defs)
}

/// A row: the name, the kind's cells, the age, and the object as `include` says.
pub fn row(name: &str, cells: Vec<Value>, created: &str, object: Option<Value>) -> Value {
    let mut all = vec![json!(name)];
    all.extend(cells);
    all.push(json!(age(created)));
    let mut row = json!({ "cells": all });
    if let (Some(object), Some(r)) = (object, row.as_object_mut()) {
        r.insert("object".into(), object);
    }
    row
}

/// The object a row carries as `PartialObjectMetadata`.
pub fn partial(metadata: Value, version: &str) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": version, "metadata": metadata})
}

/// A Table.
pub fn table(
    version: &str,
    columns: Option<Value>,
    rows: Vec<Value>,
    resource_version: &str,
    next: Option<&str>,
) -> Value {
    let mut metadata = json!({ "resourceVersion": resource_version });
    if let (Some(next), Some(m)) = (next, metadata.as_object_mut()) {
        m.insert("continue".into(), json!(next));
    }
    let mut t = json!({
        "kind": "Table",
        "apiVersion": version,
        "metadata": metadata,
        "rows": rows,
    });
    if let (Some(columns), Some(o)) = (columns, t.as_object_mut()) {
        o.insert("columnDefinitions".into(), columns);
    }
    t
}

/// kubectl's short age (`5m`, `3h`, `2d`) of an RFC 3339 time.
fn age(created: &str) -> String {
    let Ok(then) = created.parse::<jiff::Timestamp>() else {
        return "<unknown>".into();
    };
    let secs = jiff::Timestamp::now().as_second() - then.as_second();
    match secs.max(0) {
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m", s / 60),
        s if s < 172_800 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_s_accept_header() {
        let kubectl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(wanted(kubectl), Some("meta.k8s.io/v1"));
        assert_eq!(wanted("application/json"), None);
        assert_eq!(Include::parse(None), Ok(Include::Metadata));
        assert!(Include::parse(Some("All")).is_err());
    }

    #[test]
    fn bundle_columns_hide_the_wide_ones() {
        let defs = columns(Kind::Bundle);
        let names: Vec<&str> = defs
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["priority"] == 0)
            .map(|d| d["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["Name", "Package", "Version", "Deprecated", "Age"]);
    }
}
