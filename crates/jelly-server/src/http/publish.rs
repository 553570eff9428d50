//! `POST /topics/{name}/items`: publish (atomic; `?stream=true` hands over to
//! [`super::publish_stream`]).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use axum::Extension;
use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{ApiError, AppState, JsonQuery};
use crate::accept::{ConnectionHeld, PublishSlot};
use crate::ingest::{
    ACCEPTED_CONTENT_TYPES, HeaderRefusal, IngestError, InputFormat, PublishMeta, ingest_with_paths,
};
use crate::log::LogError;
use crate::publish_memory::{PublishMemoryFull, Reservation};
use crate::topic::valid_name;
use crate::topic::{Topic, TopicError, TopicOptions};

#[derive(Debug, Deserialize, Default)]
pub struct PublishQuery {
    /// `graph`: one item per named graph (text bodies).
    split: Option<String>,
    /// Base IRI for relative IRIs in Turtle and TriG.
    base: Option<String>,
    /// `true`: a long-lived delimited Jelly stream, appended as its frames arrive.
    stream: Option<bool>,
}

/// Bodies below this size are ingested on the request's task (see `publish_inner`).
const INLINE_INGEST_BYTES: usize = 64 << 10;

pub use crate::publish_memory::ITEMS_PER_BODY_LIMIT;

/// Takes a place among the publishes in progress on the request's connection
/// (`max_publishes_per_connection`, see [`ConnectionHeld::try_publish`]), or says why
/// not. `None`: no limit, or a request that came without its connection (a router
/// served other than by `accept`).
pub(crate) fn publish_slot(
    s: &AppState,
    held: Option<&ConnectionHeld>,
) -> Result<Option<PublishSlot>, String> {
    let max = s.config.max_publishes_per_connection;
    let Some(held) = held else { return Ok(None) };
    held.try_publish(max).map(Some).ok_or_else(|| {
        format!(
            "this connection already has {max} publishes in progress \
             (max_publishes_per_connection); wait for one to end, or publish over another connection"
        )
    })
}

/// [`publish_slot`] for an HTTP request: a refusal is 429.
pub(super) fn http_publish_slot(
    s: &AppState,
    held: Option<&ConnectionHeld>,
) -> Result<Option<PublishSlot>, ApiError> {
    publish_slot(s, held).map_err(|m| ApiError::new(StatusCode::TOO_MANY_REQUESTS, m))
}

pub(super) fn meta_from(headers: &HeaderMap, q: &PublishQuery) -> Result<PublishMeta, ApiError> {
    let text = |name: &str, v: &axum::http::HeaderValue| {
        v.to_str()
            .map(str::to_string)
            .map_err(|_| ApiError::bad_request(format!("header {name} is not visible ASCII")))
    };
    // A metadata header given twice has no one value to store: refused, rather than
    // keeping the first or the last without saying so.
    let twice =
        |name: &str| ApiError::bad_request(format!("header {name} is given more than once"));
    let mut sources = headers.get_all("x-jelly-source").iter();
    let source = match (sources.next(), sources.next()) {
        (Some(_), Some(_)) => return Err(twice("X-Jelly-Source")),
        (Some(v), None) => text("X-Jelly-Source", v)?,
        (None, _) => String::new(),
    };
    // Checked here rather than by the parser, so that it is refused for every format
    // and named as the parameter it is.
    if let Some(base) = &q.base
        && let Err(e) = oxrdf::NamedNode::new(base.as_str())
    {
        return Err(ApiError::bad_request(format!(
            "query parameter `base`: `{base}` is not a valid value (an absolute IRI: {e})"
        ))
        .with("parameter", "base"));
    }
    let mut meta = PublishMeta {
        source,
        base_iri: q.base.clone(),
        ..PublishMeta::default()
    };
    for (k, v) in headers {
        let Some(name) = k.as_str().strip_prefix(PublishMeta::HEADER_PREFIX) else {
            continue;
        };
        match meta.add_header(name, &text(k.as_str(), v)?) {
            Ok(()) => {}
            Err(HeaderRefusal::NoName) => {
                return Err(ApiError::bad_request(format!(
                    "header {k} has no name after the prefix (X-Jelly-Header-<name>)"
                )));
            }
            Err(HeaderRefusal::Twice) => return Err(twice(k.as_str())),
        }
    }
    let split_graph = match q.split.as_deref() {
        None | Some("none") | Some("") => false,
        Some("graph") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "query parameter `split`: `{other}` is not a valid value (graph or none)"
            ))
            .with("parameter", "split"));
        }
    };
    meta.split_graph = split_graph;
    meta.check_size()
        .map_err(|m| ApiError::new(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE, m))?;
    Ok(meta)
}

pub(super) fn ingest_error(e: IngestError) -> ApiError {
    let status = match e {
        IngestError::Invalid(_) | IngestError::Malformed(_) => StatusCode::BAD_REQUEST,
        IngestError::NotAllowed(_) => StatusCode::UNPROCESSABLE_ENTITY,
        IngestError::TooLarge { .. } | IngestError::ItemsTooLarge { .. } => {
            StatusCode::PAYLOAD_TOO_LARGE
        }
        IngestError::MemoryFull(full) => return memory_full(full),
    };
    ApiError::new(status, e.to_string())
}

/// The answer to a publish refused for want of the server's publish memory: 503, to
/// be retried (by then the requests that hold it have ended or been refused too).
fn memory_full(full: PublishMemoryFull) -> ApiError {
    ApiError::new(StatusCode::SERVICE_UNAVAILABLE, full.to_string())
        .with("max_publish_memory_bytes", full.max)
        .with_header(header::RETRY_AFTER, "1")
}

/// The topic for a publish ([`crate::topic::Registry::for_publish`]). An existing
/// topic is looked up on the async thread; creating one, which makes its files and
/// syncs them, runs off it, so an auto-create does not stall the worker's other
/// requests.
pub(crate) async fn publish_topic(s: &AppState, name: &str) -> Result<Arc<Topic>, ApiError> {
    s.topics.check_publish(name)?;
    if let Some(t) = s.topics.get(name) {
        return Ok(t);
    }
    let (s, name) = (s.clone(), name.to_string());
    super::blocking(move || s.topics.for_publish(&name)).await
}

/// What bounds the body of an atomic publish: its size, its pauses and its pace.
struct BodyLimits {
    /// Most bytes (then 413).
    max: usize,
    /// Longest wait for the next piece (then 408); also the grace before `min_rate`.
    idle: Option<Duration>,
    /// Slowest average rate in bytes per second (then 408); only with `idle`.
    min_rate: Option<u64>,
}

impl BodyLimits {
    fn of(config: &crate::config::ServerConfig) -> BodyLimits {
        BodyLimits {
            max: config.max_body_bytes,
            idle: config.body_read_timeout(),
            min_rate: Some(config.body_min_bytes_per_s).filter(|&r| r > 0),
        }
    }

    /// The pace a body started at `start` must keep (`None`: none, as without `idle`
    /// or `min_rate`).
    fn pace(&self, start: Instant) -> Option<Pace> {
        let (grace, rate) = (self.idle?, self.min_rate?);
        Some(Pace {
            due: start.checked_add(grace)?,
            grace,
            rate,
        })
    }
}

/// When a body must be complete: one grace after it started, pushed back by a second
/// for every `rate` bytes received. Time is earned from no further ahead than one
/// grace after each piece, so a client cannot bank time with a fast start and then
/// drip the rest.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Pace {
    due: Instant,
    grace: Duration,
    rate: u64,
}

impl Pace {
    /// The pace after `n` more bytes came at `now`; `None` when the deadline is
    /// beyond what an `Instant` holds (a huge body at 1 byte/s): never due.
    fn after(self, now: Instant, n: usize) -> Option<Pace> {
        let earned = Duration::try_from_secs_f64(n as f64 / self.rate as f64).ok()?;
        let from = self.due.min(now.checked_add(self.grace)?);
        Some(Pace {
            due: from.checked_add(earned)?,
            ..self
        })
    }
}

/// Reads a whole request body within `limits` (413 over the size, 408 on a pause or
/// when it comes too slowly, 400 when the connection breaks).
///
/// An atomic publish is a bounded upload, so a client that stops sending in the middle
/// is stuck or hostile (a slowloris body: announce a length, send part of it): without
/// a bound it would hold the connection and the partial body for ever. Pauses are
/// bounded, and so is the pace (`body_min_bytes_per_s`, after a grace of one pause;
/// see [`Pace`]): a client that sends a byte just inside every pause would otherwise
/// hold the connection for as long as its body is long. A large body on a slow but
/// real link still gets through.
/// Long-lived bodies are deliberately not bounded this way: a streaming publish
/// (`?stream=true`), a WebSocket or a gRPC publish may stay quiet for hours between
/// items, as a sensor does between readings. Their dead peers are dropped by the
/// HTTP/2 keep-alive PINGs (`http2_keepalive_ms`), TCP keepalive probes
/// (`tcp_keepalive_ms`) and, for WebSocket, the server's pings;
/// `max_connections_per_ip` bounds what one client can hold open.
/// Reads a whole body, holding its bytes in `memory` as they come (and, while its
/// pieces are joined, once more).
async fn read_body(
    mut body: Body,
    limits: &BodyLimits,
    memory: &mut Reservation,
) -> Result<bytes::Bytes, ApiError> {
    use http_body_util::BodyExt as _;
    let max = limits.max;
    let too_large = || {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "request body over the limit of {max} bytes (max_body_bytes; a compressed \
                 body is counted decompressed)"
            ),
        )
        .with("max_body_bytes", max)
    };
    // A Content-Length over the limit is refused before anything is read.
    if http_body::Body::size_hint(&body).lower() > max as u64 {
        return Err(too_large());
    }
    let start = Instant::now();
    let mut pace = limits.pace(start);
    let mut chunks: Vec<bytes::Bytes> = Vec::new();
    let mut len = 0usize;
    loop {
        let due = pace.map(|p| p.due);
        let wait = match (limits.idle, due) {
            (Some(idle), Some(due)) => {
                Some(idle.min(due.saturating_duration_since(Instant::now())))
            }
            (idle, _) => idle,
        };
        let frame = match wait {
            // `timeout` polls the body first, so a piece that is already there is
            // taken even when the wait is zero.
            Some(d) => match tokio::time::timeout(d, body.frame()).await {
                Ok(frame) => frame,
                Err(_) => return Err(too_slow(limits, start, len, due)),
            },
            None => body.frame().await,
        };
        let Some(frame) = frame else { break };
        let frame = frame.map_err(|e| {
            let e = crate::error_chain::with_causes(&e);
            ApiError::bad_request(format!("cannot read the request body: {e}"))
        })?;
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        len = len.saturating_add(data.len());
        if len > max {
            return Err(too_large());
        }
        memory.grow(data.len()).map_err(memory_full)?;
        pace = pace.and_then(|p| p.after(Instant::now(), data.len()));
        if !data.is_empty() {
            chunks.push(data);
        }
    }
    Ok(match chunks.len() {
        0 => bytes::Bytes::new(),
        1 => chunks.swap_remove(0),
        _ => {
            memory.grow(len).map_err(memory_full)?;
            let mut all = Vec::with_capacity(len);
            for c in &chunks {
                all.extend_from_slice(c);
            }
            drop(chunks);
            memory.shrink(len);
            bytes::Bytes::from(all)
        }
    })
}

/// The 408 of a body that stopped (a pause over `idle`) or came too slowly (past
/// `due`, the deadline its pace earned), after `len` bytes.
fn too_slow(limits: &BodyLimits, start: Instant, len: usize, due: Option<Instant>) -> ApiError {
    let elapsed_ms = start.elapsed().as_millis() as u64;
    if let (Some(due), Some(rate)) = (due, limits.min_rate)
        && Instant::now() >= due
    {
        return ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "request body too slow: {len} bytes in {elapsed_ms} ms, under the \
                 {rate} bytes/s it must average (body_min_bytes_per_s); a body that \
                 is produced slowly can go as a streaming Jelly publish (?stream=true)"
            ),
        )
        .with("body_min_bytes_per_s", rate)
        .with("received_bytes", len)
        .with("elapsed_ms", elapsed_ms);
    }
    let ms = limits.idle.map_or(0, |d| d.as_millis() as u64);
    ApiError::new(
        StatusCode::REQUEST_TIMEOUT,
        format!(
            "no request body bytes for {ms} ms after {len} bytes: the body is \
             incomplete (body_read_timeout_ms)"
        ),
    )
    .with("body_read_timeout_ms", ms)
    .with("received_bytes", len)
}

/// Decodes and checks the whole body, then appends all its items as one batch.
pub async fn publish(
    State(s): State<AppState>,
    Path(name): Path<String>,
    query: Result<JsonQuery<PublishQuery>, ApiError>,
    held: Option<Extension<ConnectionHeld>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    s.metrics.requests_publish.fetch_add(1, Ordering::Relaxed);
    // A bad query is a refused publish too, counted as one.
    let JsonQuery(q) = query.inspect_err(|_| {
        s.metrics.publish_rejected.fetch_add(1, Ordering::Relaxed);
    })?;
    // Held until the body is read and its items appended.
    let _slot = http_publish_slot(&s, held.as_deref()).inspect_err(|_| {
        s.metrics.publish_rejected.fetch_add(1, Ordering::Relaxed);
    })?;
    if q.stream == Some(true) {
        return publish_stream_checked(s, &name, &q, &headers, body).await;
    }
    let r = publish_inner(&s, &name, &q, &headers, body).await;
    if r.is_err() {
        s.metrics.publish_rejected.fetch_add(1, Ordering::Relaxed);
    }
    r
}

/// Checks a streaming publish request, then runs it.
async fn publish_stream_checked(
    s: AppState,
    name: &str,
    q: &PublishQuery,
    headers: &HeaderMap,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    let checked = (|| {
        let ct = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if InputFormat::from_content_type(ct) != Some(InputFormat::Jelly) {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                format!(
                    "unsupported Content-Type `{ct}` for a streaming publish; use application/x-jelly-rdf"
                ),
            ));
        }
        let meta = meta_from(headers, q)?;
        if meta.split_graph {
            return Err(ApiError::bad_request(
                "split=graph does not apply to a streaming publish (one item per frame)",
            ));
        }
        Ok(meta)
    })();
    let meta = match checked {
        Ok(m) => m,
        Err(e) => {
            s.metrics.publish_rejected.fetch_add(1, Ordering::Relaxed);
            return Err(e);
        }
    };
    // publish_stream counts its own refusals (it may have appended items by then).
    super::publish_stream::publish_stream(s, name, meta, body).await
}

async fn publish_inner(
    s: &AppState,
    name: &str,
    q: &PublishQuery,
    headers: &HeaderMap,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    if !valid_name(name) {
        return Err(crate::topic::TopicError::BadName(name.to_string()).into());
    }
    // Before the body is read: a mirrored topic's offsets are its upstream's.
    s.topics.check_publish(name)?;
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let format = InputFormat::from_content_type(ct).ok_or_else(|| {
        ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("unsupported Content-Type `{ct}`; use one of {ACCEPTED_CONTENT_TYPES}"),
        )
    })?;
    let meta = meta_from(headers, q)?;
    if meta.split_graph && format == InputFormat::Jelly {
        // A Jelly body is already one item per frame: splitting it again by graph
        // would silently do nothing, so the parameter is refused rather than ignored.
        return Err(ApiError::bad_request(
            "split=graph does not apply to a Jelly body (one item per frame); \
             send the graphs in frames of their own, or send TriG or N-Quads",
        ));
    }
    // Held until the items are appended (or the request is refused): the body and
    // the items made from it, counted against the server's publish memory.
    let mut memory = s.publish_memory.reservation();
    let body = read_body(body, &BodyLimits::of(&s.config), &mut memory).await?;

    // Check the body against the topic's options (or the defaults for a new topic)
    // before the topic is created, so a refused body creates nothing.
    let mut options = match s.topics.get(name) {
        Some(t) => TopicOptions::clone(&t.options()),
        None => s.topics.defaults().clone(),
    };
    let max_item = s.config.max_item_bytes;
    // What a request's items may take in all: a multiple of the body limit (items hold
    // their lookup entries and metadata, so honest ones can be larger than the body).
    let max_items = s.config.max_body_bytes.saturating_mul(ITEMS_PER_BODY_LIMIT);
    let items = loop {
        // Small bodies are decoded right here: a hand-off to the blocking pool costs a
        // thread wake-up, which is most of the publish latency of a small item. Large
        // ones go to the blocking pool so they do not hold up the runtime.
        // Items of an earlier pass (a topic created concurrently) are gone.
        memory.shrink(memory.held().saturating_sub(body.len()));
        let (items, paths) = if body.len() < INLINE_INGEST_BYTES {
            let mem = Some(&mut memory);
            ingest_with_paths(&body, format, &options, &meta, max_item, max_items, mem)
        } else {
            // A turn among the large ones (see `Shared::large_ingests`); the
            // semaphore is never closed.
            let _turn = s.large_ingests.acquire().await.map_err(|_| {
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the server is shutting down",
                )
            })?;
            let (b, o, m) = (body.clone(), options.clone(), meta.clone());
            let (got, held) = tokio::task::spawn_blocking(move || {
                let got =
                    ingest_with_paths(&b, format, &o, &m, max_item, max_items, Some(&mut memory));
                (got, memory)
            })
            .await
            .map_err(|e| {
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("ingest failed: {e}"),
                )
            })?;
            memory = held;
            got
        }
        .map_err(ingest_error)?;
        let topic = publish_topic(s, name).await?;
        if topic.options().same_items(&options) {
            s.metrics.count_ingest(paths);
            break (topic, items);
        }
        // Created concurrently with other options: check again against those.
        options = TopicOptions::clone(&topic.options());
    };
    let (topic, items) = items;
    let offsets = topic.append(items, &s.metrics).await.map_err(|e| match e {
        LogError::ItemTooLarge { .. } => {
            ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, e.to_string())
        }
        LogError::Closed if topic.is_deleted() => TopicError::Deleted(name.to_string()).into(),
        e => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("append failed: {e}"),
        ),
    })?;
    tracing::debug!(topic = name, items = offsets.len(), "published");
    // Appended: the body and its count in the publish memory go before the yield.
    drop((body, memory));
    crate::fanout::let_subscribers_write().await;
    Ok(Json(json!({ "topic": name, "offsets": offsets })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_is_due_after_the_grace_plus_what_its_bytes_earned() {
        let start = Instant::now();
        let ms = Duration::from_millis;
        let limits = |idle: Option<u64>, min_rate: Option<u64>| BodyLimits {
            max: usize::MAX,
            idle: idle.map(Duration::from_millis),
            min_rate,
        };
        let p = limits(Some(300), Some(1024)).pace(start).unwrap();
        assert_eq!(p.due, start + ms(300));
        assert_eq!(p.after(start, 2048).unwrap().due, start + ms(2300));
        // A burst earns time, but a later piece earns from at most one grace ahead of
        // its arrival: 1 MiB at once, then 2 bytes a second later, is due 1.3 s (plus
        // 2 ms) after the start, not 1,024 s.
        let burst = p.after(start, 1 << 20).unwrap();
        assert_eq!(burst.due, start + ms(300) + Duration::from_secs(1024));
        let drip = burst.after(start + ms(1000), 2).unwrap();
        let two_bytes = Duration::from_secs_f64(2.0 / 1024.0);
        assert_eq!(drip.due, start + ms(1300) + two_bytes);
        // No pace without a grace, nor without a rate.
        assert_eq!(limits(None, Some(1024)).pace(start), None);
        assert_eq!(limits(Some(300), None).pace(start), None);
        // A deadline no Instant holds is none, not a panic.
        let one_per_s = limits(Some(300), Some(1)).pace(start).unwrap();
        assert_eq!(one_per_s.after(start, usize::MAX), None);
    }
}
