//! Reading a topic: `GET /topics/{name}/items` (a long-lived chunked stream),
//! `GET /topics/{name}/poll` (a bounded page) and `GET /topics/{name}/sse`.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde::Deserialize;

use super::{ApiError, AppState, FilteredQuery};
use crate::compress::{Encoding, Stitcher};
use crate::deliver::{Delivery, Follow, JellyMode, OutFormat, Wrapping};
use crate::fanout::{Framing, GroupKey, MAX_WINDOW_MS};
use crate::filter::{FilterParams, ItemFilter};
use crate::log::{LogError, ReadLimits};
use crate::position::{self, FromError};
use crate::topic::Topic;

#[derive(Debug, Deserialize, Default)]
pub struct SubscribeQuery {
    /// `earliest`, `latest`, `<offset>`, `ts:<ms>` or `last:<n>`.
    pub(super) from: Option<String>,
    /// Overrides `Accept`: jelly, nquads, ntriples, trig, turtle.
    pub(super) format: Option<String>,
    /// `false`: end the response once the items present at the request are sent.
    pub(super) follow: Option<bool>,
    /// Jelly output: `splice` (default) or `compact`.
    pub(super) mode: Option<String>,
    /// Buffer window in milliseconds: items are gathered this long before they are
    /// written (0, the default: as soon as they are read).
    pub(super) window: Option<u64>,
    /// The id of the topic the client read from before (`X-Jelly-Topic-Id`): when
    /// the topic of that name now is another one, the answer is 404.
    pub(super) topic_id: Option<String>,
}

#[derive(Debug, Deserialize, Default)]
pub struct PollQuery {
    from: Option<String>,
    format: Option<String>,
    max_items: Option<usize>,
    max_bytes: Option<usize>,
    wait_ms: Option<u64>,
    mode: Option<String>,
    /// As [`SubscribeQuery::topic_id`].
    topic_id: Option<String>,
}

/// Longest wait of one long-poll request.
const MAX_WAIT_MS: u64 = 60_000;
/// Most items in one poll page.
const MAX_POLL_ITEMS: usize = 10_000;
/// Most bytes of stored items in one poll page (`max_bytes` is capped to this): a page
/// is read into memory before its first byte is sent, for its `X-Jelly-Next-Offset`.
/// A page always holds at least one item, however large.
pub const MAX_POLL_BYTES: usize = 8 << 20;
/// Raw output converted and compressed at a time while a poll page is sent.
const POLL_CHUNK: usize = 64 << 10;

/// The topic of a subscription; with `expected_id`, only if it is still that topic.
pub(super) fn topic(
    s: &AppState,
    name: &str,
    expected_id: Option<&str>,
) -> Result<Arc<Topic>, ApiError> {
    // A name no topic can have is the request's fault (400), as for PUT and DELETE.
    if !crate::topic::valid_name(name) {
        return Err(crate::topic::TopicError::BadName(name.to_string()).into());
    }
    if expected_id == Some("") {
        return Err(
            ApiError::bad_request(crate::topic::EMPTY_TOPIC_ID).with("parameter", "topic_id")
        );
    }
    s.topics.check_available(name)?;
    let t = s
        .topics
        .get(name)
        .ok_or_else(|| ApiError::unknown_topic(name))?;
    t.check_id(expected_id)?;
    Ok(t)
}

/// The `X-Jelly-Topic-Id` header of a subscription's response.
pub(super) fn topic_id_header(t: &Topic) -> HeaderValue {
    HeaderValue::from_str(&t.id).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// Resolves a `from` value to an offset, checking retention.
pub(super) async fn resolve_from(
    t: &Topic,
    from: Option<&str>,
    default: &str,
) -> Result<u64, ApiError> {
    position::resolve_from(t, from, default)
        .await
        .map_err(|e| match e {
            FromError::Bad(_) => ApiError::bad_request(e.to_string()).with("parameter", "from"),
            FromError::Gone { requested, first } => ApiError::gone(requested, first),
            FromError::PastEnd { next, .. } => {
                ApiError::new(StatusCode::RANGE_NOT_SATISFIABLE, e.to_string())
                    .with("next_offset", next)
            }
            FromError::Unavailable(m) => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, m),
        })
}

/// Checks that the log can be read at `start`, for a streamed body: one whose first
/// read failed would end the connection before any status line, so damage at the
/// start position is answered 503, naming it. (A long-poll page reads before it
/// answers anyway.)
pub(super) async fn check_readable(t: &Topic, start: u64) -> Result<(), ApiError> {
    if start >= t.log.next_offset() {
        return Ok(());
    }
    let one = ReadLimits {
        max_items: 1,
        max_bytes: 1,
    };
    t.log.read(start, one).await.map_err(|e| read_error(t, e))?;
    Ok(())
}

/// The answer to a failed read of the log.
fn read_error(t: &Topic, e: LogError) -> ApiError {
    match e {
        LogError::Truncated { requested, first } => ApiError::gone(requested, first),
        LogError::Closed if t.is_deleted() => {
            crate::topic::TopicError::Deleted(t.name.clone()).into()
        }
        e => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    }
}

/// The output format: `?format=` if given, else `Accept`.
pub(super) fn pick_format(
    t: &Topic,
    format: Option<&str>,
    headers: &HeaderMap,
    default: OutFormat,
) -> Result<OutFormat, ApiError> {
    let f = match format {
        Some(f) => OutFormat::parse(f).ok_or_else(|| {
            ApiError::bad_request(format!(
                "unknown format `{f}` (jelly, nquads, ntriples, trig, turtle)"
            ))
            .with("parameter", "format")
        })?,
        None => {
            let accept = super::header_list(headers, header::ACCEPT);
            let accept = accept.as_deref();
            let options = t.options();
            match OutFormat::negotiate(accept, default, |f| f.fits(&options)) {
                Some(f) => f,
                // Acceptable formats that cannot carry the topic get the reason below.
                None => OutFormat::negotiate(accept, default, |_| true).ok_or_else(|| {
                    let offered = offered(&options);
                    ApiError::new(
                        StatusCode::NOT_ACCEPTABLE,
                        format!(
                            "none of the accepted types is offered for topic `{}`: {}",
                            t.name,
                            offered.join(", ")
                        ),
                    )
                    .with("offered", offered)
                    .varying_on("accept")
                })?,
            }
        }
    };
    let options = t.options();
    if let Some(reason) = f.unfit_reason(&options) {
        let offered = offered(&options);
        let err = ApiError::new(
            StatusCode::NOT_ACCEPTABLE,
            format!(
                "topic `{}` cannot be served as {}: {reason} (use {})",
                t.name,
                f.content_type(),
                offered.join(", ")
            ),
        )
        // As every 406 does: what the topic can be served in.
        .with("offered", offered);
        // Chosen by `Accept` when no `?format=` was given.
        return Err(if format.is_none() {
            err.varying_on("accept")
        } else {
            err
        });
    }
    Ok(f)
}

/// The Jelly mode of a `?mode=` value (default: splice).
pub(super) fn pick_mode(mode: Option<&str>) -> Result<JellyMode, ApiError> {
    match mode {
        None => Ok(JellyMode::Splice),
        Some(m) => JellyMode::parse(m).ok_or_else(|| {
            ApiError::bad_request(format!("unknown mode `{m}` (splice or compact)"))
                .with("parameter", "mode")
        }),
    }
}

/// The subscription's filter, from the `source`, `prefix`, `pattern` and `ask`
/// query parameters (a second query extractor next to the handler's own).
pub(super) fn pick_filter(params: FilterParams) -> Result<Option<Arc<ItemFilter>>, ApiError> {
    Ok(params.build()?)
}

/// The output of one subscription read privately (not through a fan-out group), cut
/// as `framing` cuts it, as a group's would be.
pub(super) fn delivery(
    t: &Topic,
    format: OutFormat,
    mode: JellyMode,
    framing: Framing,
) -> Delivery {
    let delimited = framing.delimited();
    let d = if format == OutFormat::Jelly {
        Delivery::jelly(mode, t.options().stream_options(), delimited)
    } else {
        Delivery::new(format, delimited)
    };
    if framing.marks_text_offsets() {
        d.with_offset_comments()
    } else {
        d
    }
}

pub(super) fn offset_header(v: u64) -> HeaderValue {
    HeaderValue::from(v)
}

/// A streaming body's response, with its `Content-Encoding` (the body is already
/// encoded with it).
fn streaming_response(
    content_type: &'static str,
    start: u64,
    topic_id: HeaderValue,
    encoding: Encoding,
    body: Body,
) -> Response {
    let mut r = Response::new(body);
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        header::VARY,
        HeaderValue::from_static("accept, accept-encoding"),
    );
    if let Some(ce) = encoding.content_encoding() {
        h.insert(header::CONTENT_ENCODING, HeaderValue::from_static(ce));
    }
    h.insert("x-jelly-start-offset", offset_header(start));
    h.insert("x-jelly-topic-id", topic_id);
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    r
}

/// The response coding for a request's `Accept-Encoding`.
pub(super) fn pick_encoding(headers: &HeaderMap) -> Encoding {
    Encoding::negotiate(super::header_list(headers, header::ACCEPT_ENCODING).as_deref())
}

/// A numeric query parameter checked against its documented range: outside it the
/// request is refused (400 naming the parameter) rather than quietly clamped, so that
/// a client learns its value was not used.
fn in_range<T: PartialOrd + std::fmt::Display + Copy>(
    name: &'static str,
    value: T,
    lo: T,
    hi: T,
) -> Result<T, ApiError> {
    if value < lo || value > hi {
        return Err(ApiError::bad_request(format!(
            "{name}={value} is out of range ({lo} to {hi})"
        ))
        .with("parameter", name));
    }
    Ok(value)
}

/// The `window` parameter, checked.
pub(super) fn pick_window(window: Option<u64>) -> Result<u64, ApiError> {
    in_range("window", window.unwrap_or(0), 0, MAX_WINDOW_MS)
}

/// A long-poll page being sent: its items are converted and compressed
/// [`POLL_CHUNK`] bytes of output at a time, so that a page in a text format or
/// compressed never sits in memory whole beside its items.
struct PollPage {
    items: std::vec::IntoIter<crate::item::Item>,
    delivery: Delivery,
    stitcher: Stitcher,
    encoding: Encoding,
    topic: Arc<Topic>,
    metrics: Arc<crate::metrics::Metrics>,
    /// Whether the body is sent (not for `HEAD`), so counted as delivered.
    counted: bool,
    started: bool,
    done: bool,
}

impl PollPage {
    /// The next bytes of the body: the coding's header with the first chunk, then
    /// chunks, then its trailer with the last one; empty once `done`.
    fn next_chunk(&mut self) -> Result<bytes::Bytes, crate::deliver::DeliverError> {
        if self.done {
            return Ok(bytes::Bytes::new());
        }
        let mut raw = Vec::new();
        for it in self.items.by_ref() {
            self.delivery.write_item(&it, &mut raw)?;
            if raw.len() >= POLL_CHUNK {
                break;
            }
        }
        let mut out = Vec::new();
        if !self.started {
            self.started = true;
            out.extend_from_slice(&self.stitcher.header());
        }
        if !raw.is_empty() {
            let block = crate::fanout::encode::block(self.encoding, raw);
            out.extend_from_slice(&self.stitcher.block(&block));
        }
        if self.items.len() == 0 {
            self.done = true;
            out.extend_from_slice(&self.stitcher.trailer());
        }
        let n = out.len() as u64;
        if self.counted {
            self.metrics.count_out(&self.topic.stats, 0, n);
        }
        Ok(bytes::Bytes::from(out))
    }
}

/// How a chunked-stream or SSE subscription is cut, filtered, batched and compressed.
struct Shape {
    kind: &'static str,
    framing: Framing,
    window: u64,
    filter: Option<Arc<ItemFilter>>,
    encoding: Encoding,
    start: u64,
}

impl Shape {
    /// The response body: the subscriber's own [`Follow`] when its bytes are its own
    /// (`follow=false`: a bounded replay; compact Jelly: its own encoder), else a
    /// shared fan-out group.
    fn body(
        self,
        s: &AppState,
        t: Arc<Topic>,
        d: Delivery,
        bounded: bool,
        mode: JellyMode,
    ) -> Body {
        let format = d.format();
        if bounded || (format == OutFormat::Jelly && mode == JellyMode::Compact) {
            let end = bounded.then(|| t.log.next_offset());
            let wrapping = if self.framing == Framing::Sse {
                Wrapping::Sse
            } else {
                Wrapping::Raw
            };
            let f = follow(s, t, self.kind, d, self.start, end, wrapping)
                .with_filter(self.filter)
                .with_window(Duration::from_millis(self.window));
            return private_body(f, self.encoding);
        }
        let key = GroupKey {
            filter: self.filter,
            encoding: self.encoding,
            window_ms: self.window,
            ..GroupKey::new(&t.name, format, self.framing)
        };
        Body::from_stream(
            s.fanout
                .subscribe(t, key, self.kind, self.start)
                .into_stream(),
        )
    }
}

/// A private subscription's body, compressed on its own (each chunk an independent
/// block: this subscriber's own work, as for compact mode and bounded replays).
fn private_body(f: Follow, encoding: Encoding) -> Body {
    if encoding == Encoding::Identity {
        return Body::from_stream(f.into_stream());
    }
    let mut stitcher = Stitcher::new(encoding);
    let header = stitcher.header();
    let state = (f.bytes_counted_by_caller(), stitcher, Some(header), false);
    Body::from_stream(futures_util::stream::unfold(
        state,
        move |(mut f, mut st, header, done)| async move {
            if let Some(h) = header {
                return Some((Ok::<_, std::io::Error>(h), (f, st, None, done)));
            }
            if done {
                return None;
            }
            let (chunk, items) = match f.next_batch().await {
                crate::deliver::Batch::Items { data, .. } => (data, true),
                crate::deliver::Batch::KeepAlive => {
                    (bytes::Bytes::from_static(b": keep-alive\n\n"), false)
                }
                crate::deliver::Batch::End(reason) => {
                    // A failure cuts the body off without its trailer, as uncompressed.
                    let reason = reason.of_topic(&f.topic);
                    let sse = f.wrapping == crate::deliver::Wrapping::Sse;
                    if let Some(e) = reason.body_error(f.end.is_some(), sse) {
                        return Some((Err(e), (f, st, None, true)));
                    }
                    let mut out = Vec::new();
                    if f.wrapping == crate::deliver::Wrapping::Sse
                        && let Some(ev) = crate::deliver::sse_end_event(&reason)
                    {
                        let b = crate::fanout::encode::block(encoding, ev);
                        out.extend_from_slice(&st.block(&b));
                    }
                    out.extend_from_slice(&st.trailer());
                    f.count_bytes_sent(out.len());
                    return Some((Ok(bytes::Bytes::from(out)), (f, st, None, true)));
                }
            };
            let b = crate::fanout::encode::block(encoding, chunk.to_vec());
            let out = st.block(&b);
            if items {
                // As sent: compressed (keep-alives are not counted, as uncompressed).
                f.count_bytes_sent(out.len());
            }
            Some((Ok(out), (f, st, None, false)))
        },
    ))
}

#[allow(clippy::too_many_arguments)]
pub(super) fn follow(
    s: &AppState,
    t: Arc<Topic>,
    kind: &'static str,
    delivery: Delivery,
    start: u64,
    end: Option<u64>,
    wrapping: Wrapping,
) -> Follow {
    let guard = t.subscribe(kind, delivery.format().name(), start);
    let batch = ReadLimits {
        max_items: s.config.delivery_batch_items.max(1),
        max_bytes: 4 << 20,
    };
    Follow::new(
        t,
        guard,
        start,
        end,
        delivery,
        wrapping,
        batch,
        s.shutdown.clone(),
        Duration::from_secs(s.config.sse_keepalive_secs.max(1)),
        s.metrics.clone(),
    )
}

/// `GET /topics/{name}/items`: a chunked stream that follows new items. Live splice
/// and text subscriptions are served by fan-out groups; `mode=compact` and
/// `follow=false` read the log privately.
pub async fn stream(
    State(s): State<AppState>,
    Path(name): Path<String>,
    FilteredQuery(q, fq): FilteredQuery<SubscribeQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let t = topic(&s, &name, q.topic_id.as_deref())?;
    let format = pick_format(&t, q.format.as_deref(), &headers, OutFormat::Jelly)?;
    let mode = pick_mode(q.mode.as_deref())?;
    let window = pick_window(q.window)?;
    let filter = pick_filter(fq)?;
    let encoding = pick_encoding(&headers);
    let start = resolve_from(&t, q.from.as_deref(), "earliest").await?;
    check_readable(&t, start).await?;
    let d = delivery(&t, format, mode, Framing::Stream);
    let id = topic_id_header(&t);
    let body = Shape {
        kind: "stream",
        framing: Framing::Stream,
        window,
        filter,
        encoding,
        start,
    }
    .body(&s, t, d, q.follow == Some(false), mode);
    Ok(streaming_response(
        format.content_type(),
        start,
        id,
        encoding,
        body,
    ))
}

/// `GET /topics/{name}/sse`: server-sent events, one per item, `id: <offset>`.
/// `Last-Event-ID` (sent by browsers on reconnect) overrides `from`.
pub async fn sse(
    State(s): State<AppState>,
    Path(name): Path<String>,
    FilteredQuery(q, fq): FilteredQuery<SubscribeQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let t = topic(&s, &name, q.topic_id.as_deref())?;
    let filter = pick_filter(fq)?;
    let format = match q.format.as_deref() {
        Some(f) => OutFormat::parse(f).ok_or_else(|| {
            ApiError::bad_request(format!(
                "unknown format `{f}` (jelly, nquads, ntriples, trig, turtle)"
            ))
            .with("parameter", "format")
        })?,
        None => OutFormat::NQuads,
    };
    if !format.fits(&t.options()) {
        return Err(pick_format(&t, Some(format.name()), &headers, format).unwrap_err());
    }
    let mode = pick_mode(q.mode.as_deref())?;
    let window = pick_window(q.window)?;
    let encoding = pick_encoding(&headers);
    let last_id = match headers.get("last-event-id").map(|v| v.to_str()) {
        None => None,
        Some(Ok(v)) => Some(v.trim()).filter(|v| !v.is_empty()),
        // Not ignored: a replay from the start would repeat what the client has.
        Some(Err(_)) => {
            return Err(ApiError::bad_request("Last-Event-ID is not visible ASCII"));
        }
    };
    let start = match last_id {
        Some(id) => {
            let id = crate::position::number(id).ok_or_else(|| {
                ApiError::bad_request(format!("Last-Event-ID `{id}` is not an offset"))
            })?;
            // The event after the last one seen; none can follow the largest offset.
            let after = id.checked_add(1).ok_or_else(|| {
                ApiError::new(
                    StatusCode::RANGE_NOT_SATISFIABLE,
                    format!(
                        "Last-Event-ID {id} is past the end of the topic (next offset {})",
                        t.log.next_offset()
                    ),
                )
                .with("next_offset", t.log.next_offset())
            })?;
            resolve_from(&t, Some(&after.to_string()), "earliest").await?
        }
        None => resolve_from(&t, q.from.as_deref(), "earliest").await?,
    };
    check_readable(&t, start).await?;
    // Each Jelly event keeps its options row, so a browser can decode events one by one.
    let d = delivery(&t, format, mode, Framing::Sse).options_in_every_item();
    let id = topic_id_header(&t);
    let body = Shape {
        kind: "sse",
        framing: Framing::Sse,
        window,
        filter,
        encoding,
        start,
    }
    .body(&s, t, d, q.follow == Some(false), mode);
    Ok(streaming_response(
        "text/event-stream",
        start,
        id,
        encoding,
        body,
    ))
}

/// `GET /topics/{name}/poll`: at most `max_items` / `max_bytes` from `from`, waiting
/// up to `wait_ms` when nothing is there yet. `X-Jelly-Next-Offset` tells where to go on.
///
/// With a filter, `max_items` / `max_bytes` bound the items read; those the filter
/// skips are not sent, but `X-Jelly-Next-Offset` moves past them. When a whole page is
/// skipped the request reads on (while there are items) and waits (while `wait_ms`
/// lasts) for one that passes.
pub async fn poll(
    State(s): State<AppState>,
    Path(name): Path<String>,
    FilteredQuery(q, fq): FilteredQuery<PollQuery>,
    method: axum::http::Method,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    // A `HEAD` answers the same headers, but nothing is delivered: not counted.
    let counted = method != axum::http::Method::HEAD;
    let t = topic(&s, &name, q.topic_id.as_deref())?;
    let format = pick_format(&t, q.format.as_deref(), &headers, OutFormat::Jelly)?;
    let mode = pick_mode(q.mode.as_deref())?;
    let filter = pick_filter(fq)?;
    let from = resolve_from(&t, q.from.as_deref(), "earliest").await?;
    let limits = ReadLimits {
        max_items: in_range("max_items", q.max_items.unwrap_or(100), 1, MAX_POLL_ITEMS)?,
        max_bytes: in_range(
            "max_bytes",
            q.max_bytes.unwrap_or(1 << 20),
            1,
            MAX_POLL_BYTES,
        )?,
    };
    let wait_ms = in_range("wait_ms", q.wait_ms.unwrap_or(0), 0, MAX_WAIT_MS)?;
    let wait = Duration::from_millis(wait_ms);
    let read = |from| {
        let t = t.clone();
        async move {
            t.log
                .read(from, limits)
                .await
                .map_err(|e| read_error(&t, e))
        }
    };
    let deadline = tokio::time::Instant::now() + wait;
    let mut next = from;
    let items = loop {
        let mut items = read(next).await?;
        if items.is_empty() && !wait.is_zero() {
            // Wait until an item arrives or the wait is over.
            let mut w = t.log.watch();
            let mut shutdown = s.shutdown.clone();
            let at = next;
            tokio::select! {
                _ = tokio::time::timeout_at(deadline, w.wait_for(|n| *n > at)) => {}
                _ = shutdown.changed() => {}
            }
            items = read(next).await?;
        }
        let Some(last) = items.last() else {
            break items;
        };
        let Some(f) = &filter else { break items };
        let last = last.offset;
        let mut kept = Vec::with_capacity(items.len());
        for it in items {
            // An ASK query runs on a blocking thread, item by item: it holds no async
            // worker, and a client that has gone drops this future between items.
            let taken = if f.is_costly() {
                f.takes_off_thread(&it).await
            } else {
                f.takes(&it)
            };
            if taken {
                kept.push(it);
            }
        }
        let items = kept;
        next = last + 1;
        // A page with items that pass, or out of time: answer. Else read on (with no
        // wait, while the log has items past this page).
        let timed_out = if wait.is_zero() {
            next >= t.log.next_offset()
        } else {
            tokio::time::Instant::now() >= deadline
        };
        if !items.is_empty() || timed_out {
            break items;
        }
        tokio::task::coop::consume_budget().await;
    };
    if let Some(last) = items.last() {
        next = next.max(last.offset + 1);
    }
    let n = items.len() as u64;
    if counted {
        s.metrics.count_out(&t.stats, n, 0);
    }
    let encoding = pick_encoding(&headers);
    let mut page = PollPage {
        items: items.into_iter(),
        delivery: delivery(&t, format, mode, Framing::Stream),
        stitcher: Stitcher::new(encoding),
        encoding,
        topic: t.clone(),
        metrics: s.metrics.clone(),
        counted,
        started: false,
        done: false,
    };
    // The first chunk before the answer, so that an item that cannot be written in
    // this format still gets an error status rather than a cut body.
    let first = page
        .next_chunk()
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    let rest = futures_util::stream::unfold(page, |mut page| async move {
        match page.next_chunk() {
            Ok(c) if c.is_empty() && page.done => None,
            r => Some((r.map_err(std::io::Error::other), page)),
        }
    });
    let body = Body::from_stream(
        futures_util::stream::once(async move { Ok::<_, std::io::Error>(first) }).chain(rest),
    );
    let mut r = (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static(format.content_type()),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        body,
    )
        .into_response();
    let h = r.headers_mut();
    h.insert(
        header::VARY,
        HeaderValue::from_static("accept, accept-encoding"),
    );
    if let Some(ce) = encoding.content_encoding() {
        h.insert(header::CONTENT_ENCODING, HeaderValue::from_static(ce));
    }
    h.insert("x-jelly-next-offset", offset_header(next));
    h.insert("x-jelly-first-offset", offset_header(t.log.first_offset()));
    h.insert("x-jelly-topic-id", topic_id_header(&t));
    h.insert("x-jelly-items", offset_header(n));
    Ok(r)
}

/// The media types a topic with `options` can be served in (a 406's `offered`).
fn offered(options: &crate::topic::TopicOptions) -> Vec<&'static str> {
    OutFormat::ALL
        .into_iter()
        .filter(|f| f.fits(options))
        .map(OutFormat::content_type)
        .collect()
}
