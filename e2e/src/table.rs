//! `kubectl get`-style tables, rendered by the API server itself (the `Table` format uses each
//! CRD's printer columns), so what the demo prints is what `kubectl get` would print.

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject};
use serde::Deserialize;

use crate::{Error, Result, kube_err};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Table {
    column_definitions: Vec<Column>,
    // The API server sends `"rows": null` when a label selector matches nothing.
    #[serde(default, deserialize_with = "null_is_empty")]
    rows: Vec<Row>,
}

fn null_is_empty<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Vec<Row>, D::Error> {
    Ok(Option::<Vec<Row>>::deserialize(d)?.unwrap_or_default())
}

#[derive(Deserialize)]
struct Column {
    name: String,
    #[serde(rename = "type")]
    type_: String,
    #[serde(default)]
    priority: i32,
}

#[derive(Deserialize)]
struct Row {
    cells: Vec<serde_json::Value>,
}

/// Lists `resource` (in `namespace`, or cluster-wide) as the API server's table and renders it
/// like `kubectl get`: upper-case headers, aligned columns, dates as ages.
pub async fn get_table(
    client: &Client,
    resource: &ApiResource,
    namespace: Option<&str>,
) -> Result<String> {
    get_table_selected(client, resource, namespace, None).await
}

/// As [`get_table`], of the objects with the labels `selector` names (`kubectl get -l`).
pub async fn get_table_selected(
    client: &Client,
    resource: &ApiResource,
    namespace: Option<&str>,
    selector: Option<&str>,
) -> Result<String> {
    let api: Api<DynamicObject> = match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
        None => Api::all_with(client.clone(), resource),
    };
    let url = match selector {
        Some(s) => format!(
            "{}?labelSelector={}",
            api.resource_url(),
            url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>()
        ),
        None => api.resource_url().to_owned(),
    };
    let request = http::Request::get(url)
        .header(
            http::header::ACCEPT,
            "application/json;as=Table;v=v1;g=meta.k8s.io",
        )
        .body(Vec::new())
        .map_err(|e| Error::Document(e.to_string()))?;
    let text = client
        .request_text(request)
        .await
        .map_err(kube_err(format!("listing {}", resource.plural)))?;
    let table: Table = serde_json::from_str(&text)
        .map_err(|e| Error::Document(format!("the table of {}: {e}", resource.plural)))?;
    Ok(render(&table, k8s_openapi::jiff::Timestamp::now()))
}

fn render(table: &Table, now: k8s_openapi::jiff::Timestamp) -> String {
    // kubectl shows priority-0 columns only, without -o wide.
    let shown: Vec<usize> = (0..table.column_definitions.len())
        .filter(|&i| table.column_definitions[i].priority == 0)
        .collect();
    let mut lines: Vec<Vec<String>> = vec![
        shown
            .iter()
            .map(|&i| table.column_definitions[i].name.to_uppercase())
            .collect(),
    ];
    for row in &table.rows {
        lines.push(
            shown
                .iter()
                .map(|&i| cell(row.cells.get(i), &table.column_definitions[i].type_, now))
                .collect(),
        );
    }
    if table.rows.is_empty() {
        return "No resources found.\n".to_owned();
    }
    let widths: Vec<usize> = (0..shown.len())
        .map(|c| {
            lines
                .iter()
                .map(|l| l[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for line in lines {
        let padded: Vec<String> = line
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        out.push_str(padded.join("   ").trim_end());
        out.push('\n');
    }
    out
}

fn cell(
    value: Option<&serde_json::Value>,
    type_: &str,
    now: k8s_openapi::jiff::Timestamp,
) -> String {
    match value {
        None | Some(serde_json::Value::Null) => "<none>".to_owned(),
        Some(serde_json::Value::String(s)) if type_ == "date" => match s.parse() {
            Ok(t) => age(now.duration_since(t).as_secs()),
            Err(_) => s.clone(),
        },
        Some(serde_json::Value::String(s)) if s.is_empty() => "<none>".to_owned(),
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// kubectl's short ages: `45s`, `3m12s`, `5h`, `2d`.
fn age(secs: i64) -> String {
    let secs = secs.max(0);
    match secs {
        0..120 => format!("{secs}s"),
        120..600 => format!("{}m{}s", secs / 60, secs % 60),
        600..10_800 => format!("{}m", secs / 60),
        10_800..172_800 => format!("{}h", secs / 3600),
        _ => format!("{}d", secs / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_like_kubectl() {
        let table: Table = serde_json::from_value(serde_json::json!({
            "columnDefinitions": [
                {"name": "Name", "type": "string"},
                {"name": "Phase", "type": "string"},
                {"name": "Priority", "type": "integer", "priority": 1},
                {"name": "Age", "type": "date"}
            ],
            "rows": [
                {"cells": ["a-long-name", "Unpacked", 0, "2026-01-01T00:00:00Z"]},
                {"cells": ["b", null, 5, "2026-01-01T00:05:00Z"]}
            ]
        }))
        .unwrap();
        let now: k8s_openapi::jiff::Timestamp = "2026-01-01T00:10:00Z".parse().unwrap();
        assert_eq!(
            render(&table, now),
            "NAME          PHASE      AGE\na-long-name   Unpacked   10m\nb             <none>     5m0s\n"
        );
    }

    #[test]
    fn ages() {
        assert_eq!(age(5), "5s");
        assert_eq!(age(150), "2m30s");
        assert_eq!(age(4000), "66m");
        assert_eq!(age(20_000), "5h");
        assert_eq!(age(400_000), "4d");
    }
}
