//! Watches: a stream of `ADDED`, `MODIFIED` and `DELETED` events, worked out again whenever
//! the store says a catalog's content changed. Every object of a catalog moved to new content
//! is `MODIFIED`, those it no longer has `DELETED`, its new ones `ADDED`; catalogs that did not
//! change send nothing. Every object and event carries the resourceVersion of everything served
//! at the time ([`crate::content::version`]), so a client resumes from the last one it saw.
//!
//! A watch from resourceVersion "" or "0" starts with an `ADDED` for every selected object; a
//! watch from the resourceVersion of the content served now starts quiet; from any other, it
//! sends one `ERROR` event with a 410 Status (the content it started from is gone; list again),
//! as the API server does for a compacted one. With `sendInitialEvents=true` (client-go's
//! watch-list, on by default since 1.35) it starts with an `ADDED` for every selected object
//! whatever the resourceVersion, then a `BOOKMARK` annotated `k8s.io/initial-events-end`; with
//! `allowWatchBookmarks=true` a `BOOKMARK` follows every round, so a resumed watch starts from
//! the newest version.

use std::collections::HashMap;
use std::convert::Infallible;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::{OwnedSemaphorePermit, mpsc};

use crate::content::{served, version};
use crate::kinds::{API_VERSION, Kind};
use crate::query::{Form, Query, write};
use crate::state::ApiState;
use crate::status::Failure;
use crate::table;

/// The longest a watch lasts (clients watch again, as they do with the API server's).
const MAX_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// The annotation of the bookmark that ends a watch-list's initial events.
const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// What a watcher has been told of each object: the hash of its catalog's content, and for
/// Tables its row without the object (so a `DELETED` shows what went).
type Known = HashMap<String, (String, Option<Value>)>;

/// One event, as a line.
fn event(kind: &str, object: &Value) -> Bytes {
    let mut line = json!({ "type": kind, "object": object }).to_string();
    line.push('\n');
    Bytes::from(line)
}

/// A `BOOKMARK` at `rv`; `initial_end`: the one that ends a watch-list's initial events.
fn bookmark(kind: Kind, rv: &str, initial_end: bool) -> Bytes {
    let mut metadata = json!({ "resourceVersion": rv });
    if initial_end && let Some(m) = metadata.as_object_mut() {
        m.insert("annotations".into(), json!({ INITIAL_EVENTS_END: "true" }));
    }
    event(
        "BOOKMARK",
        &json!({"apiVersion": API_VERSION, "kind": kind.kind(), "metadata": metadata}),
    )
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

/// Works out the events that bring `known` up to the content served now and sends each to
/// `sink` as it is made (`None`: only learns what is served, for a client that has it
/// already). The resourceVersion served, or `None` once the client has left.
fn catch_up(
    state: &ApiState,
    query: &Query,
    form: Form,
    known: &mut Known,
    sink: Option<&mpsc::Sender<Bytes>>,
) -> Result<Option<String>, Failure> {
    let served = served(&state.store).map_err(|e| Failure::internal(e.to_string()))?;
    let rv = version(&served);
    let mut now = Known::new();
    let mut left = false;
    let mut emit = |line: Bytes| {
        if let Some(sink) = sink
            && !left
            && sink.blocking_send(line).is_err()
        {
            left = true;
        }
    };
    for (at, item) in query.items(&served) {
        let s = &served[at];
        let hash = s.opened.stored.hash.clone();
        let before = known.remove(&item.object);
        let kind = match before {
            Some((old, row)) if old == hash => {
                now.insert(item.object, (old, row));
                continue;
            }
            Some(_) => "MODIFIED",
            None => "ADDED",
        };
        if sink.is_none() && matches!(form, Form::Objects { .. }) {
            now.insert(item.object, (hash, None));
            continue;
        }
        let written = write(query.kind, s, &item, form, &state.summaries, &rv)
            .map_err(|e| Failure::internal(format!("reading {}: {e}", s.catalog)))?;
        let row = match form {
            Form::Table { .. } => {
                let mut row = written.clone();
                if let Some(r) = row.as_object_mut() {
                    r.remove("object");
                }
                Some(row)
            }
            Form::Objects { .. } => None,
        };
        emit(event(kind, &wrap(query.kind, form, written, &rv)));
        now.insert(item.object, (hash, row));
    }
    for (name, (_, row)) in known.drain() {
        let object = match (form, row) {
            (Form::Table { .. }, Some(row)) => wrap(query.kind, form, row, &rv),
            _ => json!({
                "apiVersion": API_VERSION,
                "kind": query.kind.kind(),
                "metadata": {"name": name, "resourceVersion": rv},
            }),
        };
        emit(event("DELETED", &object));
    }
    *known = now;
    Ok((!left).then_some(rv))
}

/// Starts a watch: the response streams events until the timeout, the client leaves, or
/// catalogd stops. `permit` is held while it streams.
///
/// # Errors
///
/// A bad `timeoutSeconds`.
pub fn start(
    state: &ApiState,
    query: Query,
    form: Form,
    params: &HashMap<String, String>,
    permit: OwnedSemaphorePermit,
) -> Result<Response, Failure> {
    let from = params.get("resourceVersion").cloned().unwrap_or_default();
    let flag = |name: &str| matches!(params.get(name).map(String::as_str), Some("true" | "1"));
    let (initial_events, bookmarks) = (flag("sendInitialEvents"), flag("allowWatchBookmarks"));
    let timeout = match params.get("timeoutSeconds").map(|t| t.parse::<u64>()) {
        // 0 is "the server's default", as the API server reads it.
        None | Some(Ok(0)) => MAX_TIMEOUT,
        Some(Ok(t)) => Duration::from_secs(t).min(MAX_TIMEOUT),
        Some(Err(_)) => return Err(Failure::bad_request("timeoutSeconds must be a number")),
    };
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    let state = state.clone();
    let mut changes = state.store.changes();
    changes.mark_unchanged();
    let kind = query.kind;
    tokio::spawn(async move {
        let _permit = permit;
        let deadline = tokio::time::Instant::now() + timeout;
        let mut known = Known::new();
        let send_all = initial_events || from.is_empty() || from == "0";
        let Some(rv) = round(&state, &query, form, &mut known, send_all, &tx).await else {
            return;
        };
        if !send_all && from != rv {
            let gone = Failure::expired(format!(
                "too old resource version: {from} ({rv}): the catalogs' content changed since; list again"
            ));
            let _ = tx.send(event("ERROR", &gone.body())).await;
            return;
        }
        if initial_events && tx.send(bookmark(kind, &rv, true)).await.is_err() {
            return;
        }
        loop {
            if !wait(&mut changes, &tx, deadline).await {
                return;
            }
            let Some(rv) = round(&state, &query, form, &mut known, true, &tx).await else {
                return;
            };
            if bookmarks && tx.send(bookmark(kind, &rv, false)).await.is_err() {
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

/// One catch-up on the blocking pool, its events sent as they are made (`send`: false for a
/// client that has the content already); on failure the client gets an `ERROR` event. The
/// resourceVersion served, or `None` when the watch is over.
async fn round(
    state: &ApiState,
    query: &Query,
    form: Form,
    known: &mut Known,
    send: bool,
    tx: &mpsc::Sender<Bytes>,
) -> Option<String> {
    let (state2, query2, tx2) = (state.clone(), query.clone(), tx.clone());
    let mut taken = std::mem::take(known);
    let joined = tokio::task::spawn_blocking(move || {
        let sink = send.then_some(&tx2);
        let result = catch_up(&state2, &query2, form, &mut taken, sink);
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
        Ok(rv) => rv,
        Err(failure) => {
            let _ = tx.send(event("ERROR", &failure.body())).await;
            None
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bookmark_that_ends_the_initial_events_is_annotated() {
        let line = bookmark(Kind::Bundle, "abc", true);
        let event: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(event["type"], "BOOKMARK");
        assert_eq!(event["object"]["metadata"]["resourceVersion"], "abc");
        assert_eq!(
            event["object"]["metadata"]["annotations"][INITIAL_EVENTS_END],
            "true"
        );
        assert_eq!(event["object"]["kind"], "Bundle");
        let plain: Value = serde_json::from_slice(&bookmark(Kind::Bundle, "abc", false)).unwrap();
        assert!(plain["object"]["metadata"].get("annotations").is_none());
        assert!(line.ends_with(b"\n"));
    }
}
