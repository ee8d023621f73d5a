//! Watches: a stream of `ADDED`, `MODIFIED` and `DELETED` events, worked out again whenever
//! the store says a catalog's content changed. An object's resourceVersion is its content's,
//! so every object of a catalog moved to new content is `MODIFIED`, those it no longer has
//! `DELETED`, its new ones `ADDED`; catalogs that did not change send nothing.
//!
//! A watch from resourceVersion "" or "0" starts with an `ADDED` for every selected object; a
//! watch from the resourceVersion of the content served now starts quiet; from any other, it
//! sends one `ERROR` event with a 410 Status (the content it started from is gone; list again),
//! as the API server does for a compacted one.

use std::collections::HashMap;
use std::convert::Infallible;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::content::{served, version};
use crate::kinds::{API_VERSION, Kind};
use crate::objects::resource_version;
use crate::query::{Form, Query, write};
use crate::state::ApiState;
use crate::status::Failure;
use crate::table;

/// The longest a watch lasts (clients watch again, as they do with the API server's).
const MAX_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// What a watcher has been told of each object: its resourceVersion, and for Tables the row
/// (so a `DELETED` shows what went).
type Known = HashMap<String, (String, Option<Value>)>;

/// One event, as a line.
fn event(kind: &str, object: &Value) -> Bytes {
    let mut line = json!({ "type": kind, "object": object }).to_string();
    line.push('\n');
    Bytes::from(line)
}

/// An event's object: the written item itself, or a Table of its one row.
fn wrap(kind: Kind, form: Form, written: Value, rv: &str) -> Value {
    match form {
        Form::Table { version, .. } => {
            table::table(version, Some(table::columns(kind)), vec![written], rv, None)
        }
        Form::Objects { .. } => written,
    }
}

/// Works out the events that bring `known` up to the content served now.
fn catch_up(
    state: &ApiState,
    query: &Query,
    form: Form,
    known: &mut Known,
) -> Result<(String, Vec<Bytes>), Failure> {
    let served = served(&state.store).map_err(|e| Failure::internal(e.to_string()))?;
    let rv = version(&served);
    let mut lines = Vec::new();
    let mut now = Known::new();
    for (at, item) in query.items(&served) {
        let s = &served[at];
        let object_rv = resource_version(&s.opened.stored.hash);
        let before = known.remove(&item.object);
        let kind = match before {
            Some((old_rv, row)) if old_rv == object_rv => {
                now.insert(item.object, (old_rv, row));
                continue;
            }
            Some(_) => "MODIFIED",
            None => "ADDED",
        };
        let written = write(query.kind, s, &item, form, &state.summaries)
            .map_err(|e| Failure::internal(format!("reading {}: {e}", s.catalog)))?;
        let row = matches!(form, Form::Table { .. }).then(|| written.clone());
        lines.push(event(kind, &wrap(query.kind, form, written, &object_rv)));
        now.insert(item.object, (object_rv, row));
    }
    for (name, (old_rv, row)) in known.drain() {
        let object = match (form, row) {
            (Form::Table { .. }, Some(row)) => wrap(query.kind, form, row, &old_rv),
            _ => json!({
                "apiVersion": API_VERSION,
                "kind": query.kind.kind(),
                "metadata": {"name": name, "resourceVersion": old_rv},
            }),
        };
        lines.push(event("DELETED", &object));
    }
    *known = now;
    Ok((rv, lines))
}

/// Starts a watch: the response streams events until the timeout, the client leaves, or
/// catalogd stops.
///
/// # Errors
///
/// A bad `timeoutSeconds`.
pub fn start(
    state: &ApiState,
    query: Query,
    form: Form,
    params: &HashMap<String, String>,
) -> Result<Response, Failure> {
    let from = params.get("resourceVersion").cloned().unwrap_or_default();
    let timeout = match params.get("timeoutSeconds").map(|t| t.parse::<u64>()) {
        None => MAX_TIMEOUT,
        Some(Ok(t)) => Duration::from_secs(t).min(MAX_TIMEOUT),
        Some(Err(_)) => return Err(Failure::bad_request("timeoutSeconds must be a number")),
    };
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    let state = state.clone();
    let mut changes = state.store.changes();
    changes.mark_unchanged();
    tokio::spawn(async move {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut known = Known::new();
        let Some((rv, lines)) = round(&state, &query, form, &mut known, &tx).await else {
            return;
        };
        if from.is_empty() || from == "0" {
            if !send(&tx, lines).await {
                return;
            }
        } else if from != rv {
            let gone = Failure::expired(format!(
                "too old resource version: {from} ({rv}): the catalogs' content changed since; list again"
            ));
            let _ = tx.send(event("ERROR", &gone.body())).await;
            return;
        }
        // Started from what is served now: the client has it all already.
        loop {
            if !wait(&mut changes, &tx, deadline).await {
                return;
            }
            let Some((_, lines)) = round(&state, &query, form, &mut known, &tx).await else {
                return;
            };
            if !send(&tx, lines).await {
                return;
            }
        }
    });
    let body = Body::from_stream(futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, Infallible>(b), rx))
    }));
    let mut response = body.into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

/// One catch-up on the blocking pool; on failure the client gets an `ERROR` event.
async fn round(
    state: &ApiState,
    query: &Query,
    form: Form,
    known: &mut Known,
    tx: &mpsc::Sender<Bytes>,
) -> Option<(String, Vec<Bytes>)> {
    let (state2, query2) = (state.clone(), query.clone());
    let mut taken = std::mem::take(known);
    let joined = tokio::task::spawn_blocking(move || {
        let result = catch_up(&state2, &query2, form, &mut taken);
        (result, taken)
    })
    .await;
    let (result, back) = match joined {
        Ok(j) => j,
        Err(e) => (
            Err(Failure::internal(format!("the watch failed: {e}"))),
            Known::new(),
        ),
    };
    *known = back;
    match result {
        Ok(r) => Some(r),
        Err(failure) => {
            let _ = tx.send(event("ERROR", &failure.body())).await;
            None
        }
    }
}

async fn send(tx: &mpsc::Sender<Bytes>, lines: Vec<Bytes>) -> bool {
    for line in lines {
        if tx.send(line).await.is_err() {
            return false;
        }
    }
    true
}

/// Waits for a content change: false when the deadline passes or the client left first.
async fn wait(
    changes: &mut tokio::sync::watch::Receiver<u64>,
    tx: &mpsc::Sender<Bytes>,
    deadline: tokio::time::Instant,
) -> bool {
    tokio::select! {
        changed = changes.changed() => changed.is_ok(),
        () = tx.closed() => false,
        () = tokio::time::sleep_until(deadline) => false,
    }
}
