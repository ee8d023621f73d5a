//! The routes: discovery, and `get`, `list` and `watch` of the four kinds, each request
//! authenticated and authorized through the API server first. Everything that reads content
//! runs on the blocking pool (the store reads files).

use std::collections::HashMap;

use axum::Router;
use axum::extract::{ConnectInfo, Path, Query as Params, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::Value;

use crate::authn::{User, bearer};
use crate::content::{served, version};
use crate::discovery;
use crate::kinds::{GROUP, Kind, VERSION};
use crate::listener::Peer;
use crate::page::{Continue, TokenError, page};
use crate::query::{Form, Query, envelope, write};
use crate::review::{Access, Question};
use crate::state::ApiState;
use crate::status::Failure;
use crate::table::{self, Include};
use crate::watch;

/// The largest page of a list with `content=full` (every manifest of every bundle).
pub const MAX_FULL_PAGE: usize = 500;

/// The router of the API.
pub fn router(state: ApiState) -> Router {
    let base = format!("/apis/{GROUP}/{VERSION}");
    Router::new()
        .route("/apis", get(apis))
        .route(&format!("/apis/{GROUP}"), get(api_group))
        .route(&base, get(resource_list))
        .route(
            &format!("{base}/{{resource}}"),
            get(collection).fallback(read_only),
        )
        .route(
            &format!("{base}/{{resource}}/{{name}}"),
            get(one).fallback(read_only),
        )
        .route("/healthz", get(health))
        .route("/livez", get(health))
        .route("/readyz", get(ready))
        .fallback(|| async { Failure::no_route() })
        .with_state(state)
}

async fn health() -> &'static str {
    "ok"
}

async fn ready(State(state): State<ApiState>) -> Response {
    if (state.ready)() {
        "ok".into_response()
    } else {
        Failure::unavailable("catalogd is not yet serving content").into_response()
    }
}

async fn read_only(method: Method) -> Failure {
    Failure::read_only(method.as_str())
}

fn json(body: &Value, content_type: &'static str) -> Response {
    let mut response = body.to_string().into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// `/apis`: aggregated discovery when asked for it (with an ETag), else the group list.
async fn apis(headers: HeaderMap) -> Response {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let Some(media) = discovery::aggregated(accept) else {
        return json(&discovery::group_list(), "application/json");
    };
    let body = discovery::aggregated_document(media).to_string();
    let etag = format!(
        "\"{}\"",
        hex::encode(&<sha2::Sha256 as sha2::Digest>::digest(body.as_bytes())[..16])
    );
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag));
    let mut response = if matches {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        body.into_response()
    };
    let h = response.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(media));
    if let Ok(etag) = HeaderValue::from_str(&etag) {
        h.insert(header::ETAG, etag);
    }
    h.insert(header::VARY, HeaderValue::from_static("Accept"));
    response
}

async fn api_group() -> Response {
    json(&discovery::api_group(), "application/json")
}

async fn resource_list(State(state): State<ApiState>) -> Response {
    // The API server's availability check reads this: it fails until content can be served.
    if !(state.ready)() {
        return Failure::unavailable("catalogd is not yet serving content").into_response();
    }
    json(&discovery::resource_list(), "application/json")
}

/// Who is asking, or why that cannot be told.
async fn authenticate(state: &ApiState, peer: &Peer, headers: &HeaderMap) -> Result<User, Failure> {
    if peer.verified {
        let config = state
            .request_header
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        return match config {
            Some(c) if c.allows(peer.common_name.as_deref()) => {
                c.user(headers).ok_or_else(Failure::unauthorized)
            }
            _ => Err(Failure::unauthorized()),
        };
    }
    let Some(token) = bearer(headers) else {
        return Err(Failure::unauthorized());
    };
    match state.reviewer.token(token).await {
        Ok(Some(user)) => Ok(user),
        Ok(None) => Err(Failure::unauthorized()),
        Err(error) => {
            tracing::warn!(%error, "could not review a bearer token");
            Err(Failure::unavailable(
                "could not check the token with the API server",
            ))
        }
    }
}

/// Authenticates and authorizes `verb` on `kind` (and `name`).
async fn admit(
    state: &ApiState,
    peer: &Peer,
    headers: &HeaderMap,
    verb: &'static str,
    kind: Kind,
    name: Option<&str>,
) -> Result<(), Failure> {
    if !(state.ready)() {
        return Err(Failure::unavailable("catalogd is not yet serving content"));
    }
    let user = authenticate(state, peer, headers).await?;
    let question = Question {
        user,
        verb,
        resource: kind.resource(),
        name: name.map(str::to_owned),
    };
    match state.reviewer.access(&question).await {
        Ok(Access::Allowed) => Ok(()),
        Ok(Access::Denied(reason)) => Err(Failure::forbidden(
            &question.user.name,
            verb,
            kind.resource(),
            &reason,
        )),
        Err(error) => {
            tracing::warn!(%error, "could not review access");
            Err(error.failure("could not check access with the API server"))
        }
    }
}

/// How the response is wanted: a Table, or objects.
fn form(headers: &HeaderMap, params: &HashMap<String, String>) -> Result<Form, Failure> {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let full = match params.get("content").map(String::as_str) {
        None | Some("") => false,
        Some("full") => true,
        Some(other) => {
            return Err(Failure::bad_request(format!(
                "content must be \"full\" or absent, not {other:?}"
            )));
        }
    };
    Ok(match table::wanted(accept) {
        Some(version) => Form::Table {
            version,
            include: Include::parse(params.get("includeObject").map(String::as_str))
                .map_err(Failure::bad_request)?,
        },
        None => Form::Objects { full },
    })
}

fn kind_of(resource: &str) -> Result<Kind, Failure> {
    Kind::of_resource(resource).ok_or_else(Failure::no_route)
}

async fn collection(
    State(state): State<ApiState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    Path(resource): Path<String>,
    Params(params): Params<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let watching = matches!(params.get("watch").map(String::as_str), Some("true" | "1"));
    let verb = if watching { "watch" } else { "list" };
    let result = async {
        let kind = kind_of(&resource)?;
        admit(&state, &peer, &headers, verb, kind, None).await?;
        let form = form(&headers, &params)?;
        let query = Query::parse(
            kind,
            params.get("labelSelector").map(String::as_str),
            params.get("fieldSelector").map(String::as_str),
        )
        .map_err(Failure::bad_request)?;
        if watching {
            if matches!(form, Form::Objects { full: true }) {
                return Err(Failure::bad_request(
                    "content=full is not served to watches (it would send every manifest at once): list in pages instead",
                ));
            }
            let permit = state.watches.clone().try_acquire_owned().map_err(|_| {
                Failure::too_many(format!(
                    "more than {} watches of catalog content are open",
                    crate::state::MAX_WATCHES
                ))
            })?;
            return watch::start(&state, query, form, &params, permit);
        }
        let limit = match params.get("limit").map(|l| l.parse::<usize>()) {
            None => 0,
            Some(Ok(l)) => l,
            Some(Err(_)) => return Err(Failure::bad_request("limit must be a number")),
        };
        if matches!(form, Form::Objects { full: true }) && !(1..=MAX_FULL_PAGE).contains(&limit) {
            return Err(Failure::bad_request(format!(
                "a list with content=full carries every manifest: ask for pages, limit between 1 and {MAX_FULL_PAGE}"
            )));
        }
        let _permit = state.lists.clone().try_acquire_owned().map_err(|_| {
            Failure::too_many(format!(
                "more than {} lists of catalog content are under way",
                crate::state::MAX_LISTS
            ))
        })?;
        let token = params.get("continue").filter(|c| !c.is_empty()).cloned();
        let state2 = state.clone();
        run_blocking(move || list_now(&state2, &query, form, limit, token.as_deref())).await
    }
    .await;
    finish(&state, &resource, verb, result)
}

fn list_now(
    state: &ApiState,
    query: &Query,
    form: Form,
    limit: usize,
    token: Option<&str>,
) -> Result<Response, Failure> {
    let served = served(&state.store).map_err(|e| Failure::internal(e.to_string()))?;
    state.summaries.retain(&served);
    let rv = version(&served);
    let after = match token.map(|t| Continue::decode(t, &rv)) {
        None => None,
        Some(Ok(c)) => Some(c.after),
        Some(Err(TokenError::Invalid)) => {
            return Err(Failure::bad_request("continue key is not valid"));
        }
        Some(Err(TokenError::Expired)) => {
            return Err(Failure::expired(
                "The provided continue parameter is too old to display a consistent list result: the catalogs' content changed. Start the list again without it.",
            ));
        }
    };
    let items = query.items(&served);
    let (items, next) = page(items, |(_, i)| &i.object, after.as_deref(), limit, &rv);
    // Written into the body one object at a time: a page of 10,000 bundles holds its text,
    // never all its objects at once.
    let (head, tail) = envelope(query.kind, form, &rv, next.as_deref());
    let mut body = Vec::with_capacity(head.len() + tail.len() + 2);
    body.extend_from_slice(head.as_bytes());
    body.push(b'[');
    for (n, (at, item)) in items.iter().enumerate() {
        let s = &served[*at];
        let written = write(query.kind, s, item, form, &state.summaries, &rv)
            .map_err(|e| Failure::internal(format!("reading {}: {e}", s.catalog)))?;
        if n > 0 {
            body.push(b',');
        }
        serde_json::to_writer(&mut body, &written)
            .map_err(|e| Failure::internal(format!("writing the list: {e}")))?;
    }
    body.push(b']');
    body.extend_from_slice(tail.as_bytes());
    let mut response = body.into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

async fn one(
    State(state): State<ApiState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    Path((resource, name)): Path<(String, String)>,
    Params(params): Params<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let result = async {
        let kind = kind_of(&resource)?;
        admit(&state, &peer, &headers, "get", kind, Some(&name)).await?;
        let form = form(&headers, &params)?;
        let state2 = state.clone();
        run_blocking(move || {
            let served = served(&state2.store).map_err(|e| Failure::internal(e.to_string()))?;
            let rv = version(&served);
            let query = Query::named(kind, &name);
            let Some((at, item)) = query.items(&served).into_iter().next() else {
                return Err(Failure::not_found(kind.resource(), &name));
            };
            let s = &served[at];
            let written = write(kind, s, &item, form, &state2.summaries, &rv)
                .map_err(|e| Failure::internal(format!("reading {}: {e}", s.catalog)))?;
            let body = match form {
                Form::Table { version, .. } => table::table(
                    version,
                    Some(table::columns(kind)),
                    vec![written],
                    &rv,
                    None,
                ),
                Form::Objects { .. } => written,
            };
            Ok(json(&body, "application/json"))
        })
        .await
    }
    .await;
    finish(&state, &resource, "get", result)
}

async fn run_blocking<F>(f: F) -> Result<Response, Failure>
where
    F: FnOnce() -> Result<Response, Failure> + Send + 'static,
{
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| Err(Failure::internal(format!("the request failed: {e}"))))
}

fn finish(
    state: &ApiState,
    resource: &str,
    verb: &str,
    result: Result<Response, Failure>,
) -> Response {
    let response = result.unwrap_or_else(IntoResponse::into_response);
    let resource = Kind::of_resource(resource).map_or("unknown", Kind::resource);
    state.count(resource, verb, response.status());
    response
}
