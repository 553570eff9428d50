//! The HTTP front-end (axum): topics, publish (atomic or streaming), subscribe
//! (chunked stream, long-poll, SSE), WebSocket publish and subscribe, health,
//! readiness and metrics, and the gRPC service's routes ([`crate::grpc`]). `docs/http-api.md`
//! describes the API, `docs/openapi.yaml` its schema, `docs/grpc-api.md` the gRPC side.
//!
//! Request bodies: an atomic publish's body may pause at most `body_read_timeout_ms`,
//! and must average `body_min_bytes_per_s` after that long (else 408). Long-lived
//! bodies (streaming publish, WebSocket, gRPC) have no idle limit between their frames
//! or messages, since they may legitimately be quiet for hours, but a frame or message
//! they have started may pause at most `body_read_timeout_ms` (`ws_pace` for
//! WebSocket); see `publish::read_body` for what bounds them otherwise. Request heads
//! are bounded in `accept`.

pub mod body_coding;
mod error;
mod health;
pub(crate) mod publish;
pub mod publish_stream;
mod subscribe;
mod topics;
mod ws;
mod ws_pace;
mod ws_upgrade;

use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::{get, post, put};
use tokio::sync::watch;

pub use error::ApiError;
use error::{FilteredQuery, JsonQuery, NoQuery};

use crate::auth::Auth;
use crate::config::ServerConfig;
use crate::filter::ItemFilter;
use crate::metrics::Metrics;
use crate::topic::Registry;

/// What every handler sees.
pub struct Shared {
    pub config: ServerConfig,
    /// Tokens and rights (open when the configuration has no `[auth]`).
    pub auth: Auth,
    pub topics: Registry,
    pub metrics: Arc<Metrics>,
    /// Live subscriptions' shared groups.
    pub fanout: crate::fanout::Fanout,
    /// Becomes true when the server shuts down: live subscriptions end.
    pub shutdown: watch::Receiver<bool>,
    /// What atomic publishes in progress hold, server-wide.
    pub publish_memory: Arc<crate::publish_memory::PublishMemory>,
    /// Turns of the large atomic publishes (bodies decoded off the async threads):
    /// [`crate::publish_memory::large_ingests`] make items at once, the others wait
    /// for a turn. Each may make up to `ITEMS_PER_BODY_LIMIT` × `max_body_bytes` of
    /// items, so without turns concurrent ones would share out
    /// [`Shared::publish_memory`] and all be refused before any got through; with
    /// them, memory goes to those that can finish.
    pub large_ingests: tokio::sync::Semaphore,
}

/// Handler state.
pub type AppState = Arc<Shared>;

/// All routes.
pub fn router(state: AppState) -> Router {
    let cors = cors_layer(&state.config.cors_origins);
    let router = routes(state);
    match cors {
        Some(layer) => router.layer(layer),
        None => router,
    }
}

/// The filter of a subscribe request's query string (without its `?`), read as the
/// subscribe endpoints read it: bad values and unknown parameters refused, the filter
/// built (`None` when there is none). Not part of the API: for the fuzz targets
/// (`fuzz/`), which have no request to extract it from.
#[doc(hidden)]
pub fn subscribe_filter(query: &str) -> Result<Option<Arc<ItemFilter>>, ApiError> {
    let FilteredQuery(_, params) = FilteredQuery::<subscribe::SubscribeQuery>::from_query(query)?;
    subscribe::pick_filter(params)
}

/// The CORS layer for `origins` (see `ServerConfig::cors_origins`); `None` when empty.
/// It is the outermost layer, so a browser's preflight `OPTIONS` is answered before
/// the rights check (a preflight carries no token).
fn cors_layer(origins: &[String]) -> Option<tower_http::cors::CorsLayer> {
    use axum::http::{HeaderName, HeaderValue, Method};
    use tower_http::cors::{AllowHeaders, AllowOrigin, CorsLayer};
    if origins.is_empty() {
        return None;
    }
    let allow = if origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        AllowOrigin::list(origins.iter().filter_map(|o| HeaderValue::from_str(o).ok()))
    };
    let exposed = [
        "x-jelly-next-offset",
        "x-jelly-first-offset",
        "x-jelly-start-offset",
        "x-jelly-items",
        "x-jelly-topic-id",
        // A 401/403's challenge says why (`invalid_token`, `insufficient_scope`).
        "www-authenticate",
    ]
    .map(HeaderName::from_static);
    Some(
        CorsLayer::new()
            .allow_origin(allow)
            .allow_methods([
                Method::GET,
                Method::POST,
                Method::PUT,
                Method::PATCH,
                Method::DELETE,
            ])
            // The request headers a preflight asks for are allowed as asked: a publish
            // may carry any number of `X-Jelly-Header-<name>` headers, which no fixed
            // list can name, and a header the server does not read is ignored anyway.
            .allow_headers(AllowHeaders::mirror_request())
            .expose_headers(exposed)
            .max_age(std::time::Duration::from_secs(600)),
    )
}

fn routes(state: AppState) -> Router {
    Router::new()
        .route("/health", get(health::health))
        .route("/ready", get(health::ready))
        .route("/metrics", get(metrics))
        .route("/topics", get(topics::list))
        .route(
            "/topics/{name}",
            get(topics::describe).delete(topics::delete).merge(
                put(topics::create)
                    .patch(topics::alter)
                    .layer(axum::middleware::from_fn(body_coding::decode_request_body)),
            ),
        )
        .route(
            "/topics/{name}/items",
            get(subscribe::stream).merge(
                // Compressed bodies are read decompressed (the body limits then count
                // decompressed bytes).
                post(publish::publish)
                    .layer(axum::middleware::from_fn(body_coding::decode_request_body)),
            ),
        )
        .route("/topics/{name}/poll", get(subscribe::poll))
        .route("/topics/{name}/sse", get(subscribe::sse))
        .route("/topics/{name}/ws", get(ws::subscribe))
        .route("/topics/{name}/ws/publish", get(ws::publish))
        .merge(crate::grpc::routes())
        // Rights of every route above (routes added below this line are not checked;
        // `auth::need_of` says which right a route needs).
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::auth::guard,
        ))
        .fallback(fallback)
        .layer(axum::middleware::map_response(json_method_not_allowed))
        // Bodies are read with our own limit (and a JSON error), not axum's default 2 MB.
        .layer(DefaultBodyLimit::disable())
        .with_state(state)
}

/// Unknown paths: a JSON 404, or gRPC `UNIMPLEMENTED` for a gRPC request.
async fn fallback(req: axum::extract::Request) -> axum::response::Response {
    if crate::grpc::service::is_grpc(&req) {
        crate::grpc::service::unimplemented(req.uri().path())
    } else {
        ApiError::not_found("no such endpoint").into_response()
    }
}

/// axum answers a known path with the wrong method with an empty 405: made a JSON
/// error like every other (axum adds the `Allow` header after this layer).
async fn json_method_not_allowed(res: axum::response::Response) -> axum::response::Response {
    if res.status() != axum::http::StatusCode::METHOD_NOT_ALLOWED
        || res.headers().contains_key(header::CONTENT_TYPE)
    {
        return res;
    }
    ApiError::new(
        axum::http::StatusCode::METHOD_NOT_ALLOWED,
        "method not allowed on this path (the Allow header lists those it takes)",
    )
    .into_response()
}

/// Runs a registry operation that blocks on file I/O (making, syncing or removing a
/// topic's files) off the async threads.
pub(crate) async fn blocking<T: Send + 'static>(
    op: impl FnOnce() -> Result<T, crate::topic::TopicError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(op)
        .await
        .map_err(|e| ApiError::new(axum::http::StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?
        .map_err(ApiError::from)
}

/// Completes when the server begins to shut down.
pub(crate) async fn wait_shutdown(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|v| *v).await;
}

async fn metrics(State(s): State<AppState>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        {
            let mut text = s.metrics.render(&s.topics);
            s.publish_memory.render_metrics(&mut text);
            text
        },
    )
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary
/// (`str::floor_char_boundary`, which the supported Rust version lacks).
pub(crate) fn prefix_within(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Every line of a list-valued header as one list (RFC 9110 §5.3: a field sent on
/// several lines means their values joined with commas); `None` when it is absent.
/// Lines that are not visible ASCII are left out.
pub(crate) fn header_list(
    headers: &axum::http::HeaderMap,
    name: header::HeaderName,
) -> Option<String> {
    let mut out: Option<String> = None;
    for v in headers.get_all(name) {
        let Ok(v) = v.to_str() else { continue };
        match &mut out {
            Some(o) => {
                o.push_str(", ");
                o.push_str(v);
            }
            None => out = Some(v.to_string()),
        }
    }
    out
}
