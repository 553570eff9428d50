//! WebSocket front-end: `GET /topics/{name}/ws` (subscribe) and
//! `GET /topics/{name}/ws/publish` (publish), both upgraded to WebSocket.
//!
//! Subscribe sends one message per item: a binary message holding one bare Jelly
//! frame (the frames of one connection form one Jelly stream: decode them in order
//! with one decoder), or a text message in a text format. Publish takes binary
//! messages, each one bare Jelly frame of one publisher stream, and text messages
//! holding N-Quads (one item each); every message is answered with an acknowledgement
//! once its item is appended.

use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use futures_util::{FutureExt as _, SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};

use super::publish::{PublishQuery, http_publish_slot, meta_from};
use super::publish_stream::{FrameError, StreamPublisher};
use super::subscribe::{
    SubscribeQuery, check_readable, delivery, follow, offset_header, pick_filter, pick_format,
    pick_mode, pick_window, resolve_from, topic, topic_id_header,
};
use super::ws_pace::PausedInsideMessage;
use super::ws_upgrade::{Handshake, Socket};
use super::{ApiError, AppState, FilteredQuery, JsonQuery, NoQuery, wait_shutdown};
use crate::deliver::{Follow, FollowEnd, JellyMode, OutFormat, Wrapping};
use crate::fanout::{Framing, GroupKey, Step, Subscription};

type WsError = tokio_tungstenite::tungstenite::Error;

/// Close codes (RFC 6455 §7.4.1, and one of the private range).
pub mod close_code {
    /// Normal closure: `follow=false` sent everything, or the peer closed.
    pub const NORMAL: u16 = 1000;
    /// The server is shutting down.
    pub const GOING_AWAY: u16 = 1001;
    /// The peer broke the WebSocket protocol (an unmasked frame, a reserved opcode, a
    /// stray continuation, an oversized control frame).
    pub const PROTOCOL: u16 = 1002;
    /// Malformed data: a Jelly decode error, a syntax error (HTTP 400).
    pub const INVALID: u16 = 1007;
    /// Well-formed but not allowed in the topic (HTTP 422 / 409), or a message that
    /// paused longer than `body_read_timeout_ms` before it was whole (HTTP 408).
    pub const POLICY: u16 = 1008;
    /// A message over the size limit (HTTP 413).
    pub const TOO_BIG: u16 = 1009;
    /// A server failure (HTTP 5xx).
    pub const ERROR: u16 = 1011;
    /// The subscriber fell behind retention (like HTTP 410); reconnect from the
    /// first retained offset.
    pub const GONE: u16 = 4410;
    /// The topic was deleted (like HTTP 404).
    pub const DELETED: u16 = 4404;
}

/// Most bytes a subscriber's socket reads at a time. Subscribers send little (pings,
/// a close), and tungstenite zeroes this much before every read attempt, which the
/// subscriber's loop makes once per item it sends.
const SUBSCRIBER_READ_BUFFER: usize = 1 << 10;
/// Most bytes a publisher's socket reads at a time. tungstenite zeroes this much of
/// its buffer before every read: at the default 128 KiB that was most of the memory an
/// item touched on the server (cold caches after idle, see BENCHMARKS.md §5), while a
/// frame larger than this only takes one more `read` per extra 8 KiB.
const PUBLISHER_READ_BUFFER: usize = 8 << 10;
/// Largest message a subscriber may send (they are ignored anyway); a larger one
/// closes the connection with 1009.
const MAX_SUBSCRIBER_MESSAGE: usize = 64 << 10;
/// How long to wait for the peer's close frame after ours.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// Refused upgrades (a plain GET, a bad handshake) answer 426 with a JSON error, and
/// the headers that say what to upgrade to: `Upgrade: websocket` (RFC 9110 §15.5.22)
/// and the version this server speaks (RFC 6455 §4.2.2).
fn upgrade_required(e: WebSocketUpgradeRejection) -> ApiError {
    ApiError::new(
        StatusCode::UPGRADE_REQUIRED,
        format!("this endpoint needs a WebSocket upgrade: {e}"),
    )
    .with_header(axum::http::header::UPGRADE, "websocket")
    .with_header(axum::http::header::SEC_WEBSOCKET_VERSION, "13")
}

/// A close frame; the reason is cut to the 123 bytes a close frame can hold.
fn close(code: u16, reason: &str) -> Message {
    Message::Close(Some(CloseFrame {
        code: CloseCode::from(code),
        reason: Utf8Bytes::from(super::prefix_within(reason, 123)),
    }))
}

/// Sends our close frame and waits (briefly) for the peer's, to finish the handshake.
async fn close_and_drain(socket: &mut Socket, code: u16, reason: &str) {
    if socket.send(close(code, reason)).await.is_err() {
        return;
    }
    let _ = tokio::time::timeout(CLOSE_WAIT, async {
        while let Some(Ok(m)) = socket.next().await {
            if matches!(m, Message::Close(_)) {
                break;
            }
        }
    })
    .await;
}

/// Finishes a close the peer started: tungstenite queues its answer to the peer's
/// close frame, and a flush sends it before the socket is dropped.
async fn answer_close(socket: &mut Socket) {
    let _ = socket.flush().await;
}

/// Sends the pong the WebSocket layer queued for a ping just read, before anything
/// more is read. tungstenite answers pings by itself but goes on reading while the
/// answer cannot be written, and each ping read meanwhile adds one more pong to its
/// write buffer, without a bound: a client that sent pings and read nothing grew the
/// server by about 120 bytes per ping (200 MB for 1.6 million pings). Waiting here
/// holds that client's pings in the socket buffers instead, as for any client that
/// does not read; TCP keepalive's send timeout drops it if it never does.
async fn send_pong(socket: &mut Socket) -> Result<(), WsError> {
    socket.flush().await
}

/// The close code, HTTP status and reason for a read error of the WebSocket layer:
/// `None` when the connection itself broke (nothing can be sent). The error's text is
/// tungstenite's, or [`PausedInsideMessage`]'s.
fn read_error_close(e: &WsError, max_message: usize) -> Option<(u16, StatusCode, String)> {
    if let Some(paused) = PausedInsideMessage::find(e) {
        return Some((
            close_code::POLICY,
            StatusCode::REQUEST_TIMEOUT,
            paused.to_string(),
        ));
    }
    let msg = e.to_string();
    if msg.starts_with("Space limit exceeded") || msg.contains("too long") {
        Some((
            close_code::TOO_BIG,
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("message over the limit of {max_message} bytes: {msg}"),
        ))
    } else if msg.starts_with("UTF-8 encoding error") {
        Some((
            close_code::INVALID,
            StatusCode::BAD_REQUEST,
            format!("WebSocket error: {msg}"),
        ))
    } else if msg.starts_with("WebSocket protocol error") {
        Some((close_code::PROTOCOL, StatusCode::BAD_REQUEST, msg))
    } else {
        None
    }
}

fn ping_interval(s: &AppState) -> tokio::time::Interval {
    let every = Duration::from_secs(s.config.sse_keepalive_secs.max(1));
    let mut i = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    i
}

/// `GET /topics/{name}/ws`: subscribe over WebSocket. Takes `from`, `format`, `mode`,
/// `follow`, `window` and the filter parameters like `GET /topics/{name}/items`; errors
/// (404, 400, 410, 416, 406) are answered before the upgrade. The upgrade response
/// carries `X-Jelly-Start-Offset`. Live splice and text subscriptions share a fan-out group.
pub async fn subscribe(
    State(s): State<AppState>,
    Path(name): Path<String>,
    FilteredQuery(q, fq): FilteredQuery<SubscribeQuery>,
    held: Option<axum::Extension<crate::accept::ConnectionHeld>>,
    headers: HeaderMap,
    ws: Result<Handshake, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let t = topic(&s, &name, q.topic_id.as_deref())?;
    let format = pick_format(&t, q.format.as_deref(), &headers, OutFormat::Jelly)?;
    let mode = pick_mode(q.mode.as_deref())?;
    let window = pick_window(q.window)?;
    let filter = pick_filter(fq)?;
    let start = resolve_from(&t, q.from.as_deref(), "earliest").await?;
    let ws = ws.map_err(upgrade_required)?;
    check_readable(&t, start).await?;
    let id = topic_id_header(&t);
    let source =
        if q.follow == Some(false) || (format == OutFormat::Jelly && mode == JellyMode::Compact) {
            let end = (q.follow == Some(false)).then(|| t.log.next_offset());
            // Bare frames: the messages of one connection form one Jelly stream.
            let d = delivery(&t, format, mode, Framing::Messages);
            Source::Private(
                follow(&s, t, "ws", d, start, end, Wrapping::Raw)
                    .with_filter(filter)
                    .with_window(Duration::from_millis(window)),
            )
        } else {
            let key = GroupKey {
                filter,
                window_ms: window,
                ..GroupKey::new(&t.name, format, Framing::Messages)
            };
            Source::Shared(s.fanout.subscribe(t, key, "ws", start))
        };
    let ping = ping_interval(&s);
    // Subscribers send little (pings, a close): a 1 KiB read buffer instead of the
    // default 128 KiB, which would be most of a subscriber's memory at 10k+ sockets.
    let config = WebSocketConfig::default()
        .max_message_size(Some(MAX_SUBSCRIBER_MESSAGE))
        // Else a single frame of up to tungstenite's 16 MiB is read whole before the
        // message limit is checked.
        .max_frame_size(Some(MAX_SUBSCRIBER_MESSAGE))
        .read_buffer_size(SUBSCRIBER_READ_BUFFER);
    // What a subscriber sends is ignored and at most 64 KiB: no pause limit.
    let mut r = ws.upgrade(config, None, move |socket| async move {
        // The connection counts (per-address limit, gauge, shutdown) while the
        // WebSocket lives, not only until the upgrade.
        let _held = held;
        run_subscriber(socket, source, format, ping).await
    });
    r.headers_mut()
        .insert("x-jelly-start-offset", offset_header(start));
    r.headers_mut().insert("x-jelly-topic-id", id);
    Ok(r)
}

/// Where a WebSocket subscriber's messages come from.
enum Source {
    /// Its own reader (compact mode, `follow=false`).
    Private(Follow),
    /// A fan-out group.
    Shared(Subscription),
}

impl Source {
    /// The next messages, or `None` at the end. Not cancel-safe (see
    /// [`Follow::next_items`]): [`run_subscriber`] runs it in a task of its own.
    async fn next_messages(&mut self) -> Option<Vec<Bytes>> {
        match self {
            Source::Private(f) => f
                .next_items()
                .await
                .map(|items| items.into_iter().map(|(_, b)| b).collect()),
            Source::Shared(sub) => loop {
                match sub.next_step().await {
                    Step::Data(d) => return Some(d),
                    Step::KeepAlive => {}
                    Step::End(_) => return None,
                }
            },
        }
    }

    fn end_reason(&self) -> Option<FollowEnd> {
        match self {
            Source::Private(f) => f.end_reason(),
            Source::Shared(sub) => sub.end_reason(),
        }
    }
}

/// What the task reading a WebSocket subscriber's source hands to its connection.
enum Next {
    Messages(Vec<Bytes>),
    End(Option<FollowEnd>),
}

async fn run_subscriber(
    mut socket: Socket,
    mut f: Source,
    format: OutFormat,
    mut ping: tokio::time::Interval,
) {
    // The source is read in a task of its own, and the connection takes its messages
    // from a channel. Reading it in the `select!` below would drop a read cut short by
    // a client message or a ping: a read that is part way through a batch (ASK filters
    // are evaluated item by item, off the async threads) has already moved its
    // position and its Jelly tables on, so items would be lost and a compact stream
    // broken. A channel's `recv` loses nothing when dropped.
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Next>(1);
    // Aborted when the connection ends: the reader of a subscriber that has gone may
    // be waiting for new items for ever.
    let _reader = tokio_util::task::AbortOnDropHandle::new(tokio::spawn(async move {
        loop {
            let next = match f.next_messages().await {
                Some(m) => Next::Messages(m),
                None => Next::End(f.end_reason()),
            };
            let end = matches!(next, Next::End(_));
            if tx.send(next).await.is_err() || end {
                return;
            }
        }
    }));
    loop {
        tokio::select! {
            next = rx.recv() => {
                let items = match next {
                    Some(Next::Messages(m)) => m,
                    other => {
                        // No `End` (the reader task failed): an error close, as `None`.
                        let end = match other {
                            Some(Next::End(r)) => r,
                            _ => None,
                        };
                        let (code, reason) = match end {
                            Some(FollowEnd::Shutdown) => {
                                (close_code::GOING_AWAY, "server shutting down".to_string())
                            }
                            Some(FollowEnd::Reached) => {
                                (close_code::NORMAL, "end of the requested items".to_string())
                            }
                            Some(FollowEnd::FellBehind { first }) => (
                                close_code::GONE,
                                format!("fell behind retention; the first retained offset is {first}"),
                            ),
                            Some(FollowEnd::Deleted) => {
                                (close_code::DELETED, "the topic was deleted".to_string())
                            }
                            Some(FollowEnd::Failed(why)) => (
                                close_code::ERROR,
                                format!("subscription failed: {why}"),
                            ),
                            None => {
                                (close_code::ERROR, "subscription failed".to_string())
                            }
                        };
                        close_and_drain(&mut socket, code, &reason).await;
                        return;
                    }
                };
                for bytes in items {
                    let msg = if format == OutFormat::Jelly {
                        Message::Binary(bytes)
                    } else {
                        match Utf8Bytes::try_from(bytes) {
                            Ok(t) => Message::Text(t),
                            Err(_) => {
                                close_and_drain(&mut socket, close_code::ERROR, "output is not UTF-8").await;
                                return;
                            }
                        }
                    };
                    if socket.send(msg).await.is_err() {
                        return;
                    }
                }
            }
            msg = socket.next() => match msg {
                Some(Ok(Message::Close(_))) => {
                    answer_close(&mut socket).await;
                    return;
                }
                None => return,
                Some(Err(e)) => {
                    if let Some((code, _, reason)) = read_error_close(&e, MAX_SUBSCRIBER_MESSAGE) {
                        close_and_drain(&mut socket, code, &reason).await;
                    }
                    return;
                }
                Some(Ok(Message::Ping(_))) => {
                    if send_pong(&mut socket).await.is_err() {
                        return;
                    }
                }
                // Data from a subscriber is ignored.
                Some(Ok(_)) => {}
            },
            _ = ping.tick() => {
                if socket.send(Message::Ping(Bytes::new())).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// `GET /topics/{name}/ws/publish`: publish over WebSocket. The upgrade request may
/// carry `X-Jelly-Source` and `X-Jelly-Header-<name>` (stored with every item). The
/// topic must exist unless auto-creation is on (then the first item creates it).
pub async fn publish(
    State(s): State<AppState>,
    Path(name): Path<String>,
    query: Result<JsonQuery<NoQuery>, ApiError>,
    held: Option<axum::Extension<crate::accept::ConnectionHeld>>,
    headers: HeaderMap,
    ws: Result<Handshake, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    s.metrics.requests_publish.fetch_add(1, Ordering::Relaxed);
    let checked = (|| {
        query?;
        let meta = meta_from(&headers, &PublishQuery::default())?;
        let p = StreamPublisher::new(&s, &name, meta)?;
        let ws = ws.map_err(upgrade_required)?;
        // Several WebSockets can share an HTTP/2 connection (RFC 8441).
        let slot = http_publish_slot(&s, held.as_deref())?;
        Ok::<_, ApiError>((p, ws, slot))
    })();
    let (p, ws, slot) = match checked {
        Ok(v) => v,
        Err(e) => {
            s.metrics.publish_rejected.fetch_add(1, Ordering::Relaxed);
            return Err(e);
        }
    };
    let max = p.max_frame_bytes();
    let config = WebSocketConfig::default()
        .max_message_size(Some(max))
        .max_frame_size(Some(max))
        .read_buffer_size(PUBLISHER_READ_BUFFER);
    // A message is buffered until it is whole: it may pause at most as long as an
    // atomic publish's body (between messages, the socket may be quiet for ever).
    let pause = s.config.body_read_timeout();
    Ok(ws.upgrade(config, pause, move |socket| async move {
        // As for a subscriber: the connection counts while the WebSocket lives, and
        // so does this publish.
        let _held = (held, slot);
        run_publisher(socket, p, s).await
    }))
}

/// One received message waiting for its acknowledgement.
struct Pending {
    /// Index of the message (binary and text messages, from 0).
    index: u64,
    /// Whether it made an item (a frame without statements does not).
    item: bool,
}

/// The close code for a refusal with this HTTP status.
fn code_for(status: StatusCode) -> u16 {
    match status.as_u16() {
        400 => close_code::INVALID,
        413 => close_code::TOO_BIG,
        409 | 415 | 422 | 507 => close_code::POLICY,
        // The topic was deleted under the publisher.
        404 => close_code::DELETED,
        // 503 included: an append that failed (a full disk) is the server's failure;
        // a shutdown closes with GOING_AWAY where it is seen (`PublishSession::fail`).
        _ => close_code::ERROR,
    }
}

/// The acknowledgement of message `frame`: `{"frame":F,"offset":N}`, with `null` for a
/// frame that made no item. Written directly: one per item, and a `serde_json::Value`
/// cost more than the rest of sending it.
fn ack(frame: u64, offset: Option<u64>) -> String {
    match offset {
        Some(o) => format!(r#"{{"frame":{frame},"offset":{o}}}"#),
        None => format!(r#"{{"frame":{frame},"offset":null}}"#),
    }
}

struct PublishSession {
    socket: Socket,
    p: StreamPublisher,
    pending: Vec<Pending>,
    s: AppState,
}

impl PublishSession {
    /// Appends the pending items and acknowledges every pending message, in order:
    /// `{"frame": i, "offset": N}` (`"offset": null` for a frame without statements).
    /// When the append fails, none of the pending messages was appended: the error
    /// comes with the first one's index, and they are not acknowledged.
    async fn flush(&mut self) -> Result<(), (u64, FrameError)> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let offsets = match self.p.flush().await {
            Ok(offsets) => offsets,
            Err(e) => {
                let first = self.pending.first().map_or(0, |m| m.index);
                self.pending.clear();
                return Err((first, e));
            }
        };
        crate::fanout::let_subscribers_write().await;
        let mut offsets = offsets.into_iter();
        for m in std::mem::take(&mut self.pending) {
            let offset = if m.item { offsets.next() } else { None };
            // A peer that went away cannot be told; its items are appended all the same.
            let _ = self
                .socket
                .send(Message::Text(ack(m.index, offset).into()))
                .await;
        }
        Ok(())
    }

    /// Refuses message `index`: what came before it is appended and acknowledged,
    /// then a JSON error message and a close frame.
    async fn fail(self, index: u64, e: FrameError) {
        let code = code_for(e.status);
        self.fail_with(index, e, code).await;
    }

    /// [`fail`](Self::fail) closing with `code`.
    async fn fail_with(mut self, index: u64, e: FrameError, code: u16) {
        self.s
            .metrics
            .publish_rejected
            .fetch_add(1, Ordering::Relaxed);
        let (index, e) = match self.flush().await {
            Ok(()) => (index, e),
            Err(failed) => failed,
        };
        let mut body = json!({
            "error": format!("frame {index}: {}", e.message),
            "status": e.status.as_u16(),
            "frame": index,
            "items_accepted": self.p.accepted,
        });
        if let (Value::Object(m), Value::Object(sum)) = (&mut body, self.p.summary()) {
            for (k, v) in sum {
                if k != "items" {
                    m.insert(k, v);
                }
            }
        }
        let _ = self
            .socket
            .send(Message::Text(body.to_string().into()))
            .await;
        let reason = format!("frame {index}: {}", e.message);
        // A log closed by a shutdown fails the append with 503 too.
        let code = if *self.s.shutdown.borrow() {
            close_code::GOING_AWAY
        } else {
            code
        };
        close_and_drain(&mut self.socket, code, &reason).await;
    }
}

async fn run_publisher(socket: Socket, p: StreamPublisher, s: AppState) {
    let mut shutdown = s.shutdown.clone();
    let mut ping = ping_interval(&s);
    let mut sess = PublishSession {
        socket,
        p,
        pending: Vec::new(),
        s,
    };
    // Message index, and bytes of the publisher's Jelly stream so far.
    let (mut index, mut offset) = (0u64, 0u64);
    loop {
        // Messages that are ready are taken at once; when none is, what is pending
        // is appended and acknowledged before waiting.
        let msg = match sess.socket.next().now_or_never() {
            Some(m) => m,
            None => {
                if let Err((at, e)) = sess.flush().await {
                    sess.fail(at, e).await;
                    return;
                }
                tokio::select! {
                    m = sess.socket.next() => m,
                    _ = wait_shutdown(&mut shutdown) => {
                        close_and_drain(&mut sess.socket, close_code::GOING_AWAY, "server shutting down").await;
                        return;
                    }
                    _ = ping.tick() => {
                        if sess.socket.send(Message::Ping(Bytes::new())).await.is_err() {
                            return;
                        }
                        continue;
                    }
                }
            }
        };
        let r = match msg {
            Some(Ok(Message::Binary(b))) => {
                let len = b.len() as u64;
                let r = sess.p.frame(b, offset).await;
                offset += len;
                r
            }
            Some(Ok(Message::Text(t))) => sess.p.text(&t),
            Some(Ok(Message::Ping(_))) => {
                if send_pong(&mut sess.socket).await.is_err() {
                    return;
                }
                continue;
            }
            // Raw frames are only ever written, never read.
            Some(Ok(Message::Pong(_) | Message::Frame(_))) => continue,
            // The peer closed: append what it sent (it can no longer be acknowledged),
            // then answer its close frame.
            Some(Ok(Message::Close(_))) => {
                let _ = sess.p.flush().await;
                answer_close(&mut sess.socket).await;
                return;
            }
            None => {
                let _ = sess.p.flush().await;
                return;
            }
            Some(Err(e)) => {
                let Some((code, status, message)) = read_error_close(&e, sess.p.max_frame_bytes())
                else {
                    // The connection broke: keep what arrived whole.
                    let _ = sess.p.flush().await;
                    return;
                };
                sess.fail_with(index, FrameError { status, message }, code)
                    .await;
                return;
            }
        };
        match r {
            Ok(item) => sess.pending.push(Pending { index, item }),
            Err(e) => {
                sess.fail(index, e).await;
                return;
            }
        }
        index += 1;
        if (sess.pending.len() >= super::publish_stream::FLUSH_ITEMS || sess.p.should_flush())
            && let Err((at, e)) = sess.flush().await
        {
            sess.fail(at, e).await;
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_close_with_the_code_of_their_kind() {
        let code = |n| code_for(StatusCode::from_u16(n).unwrap());
        assert_eq!(code(400), close_code::INVALID);
        assert_eq!(code(413), close_code::TOO_BIG);
        assert_eq!(code(422), close_code::POLICY);
        assert_eq!(code(404), close_code::DELETED);
        // A failed append (a full disk) is the server's failure, not a shutdown.
        assert_eq!(code(503), close_code::ERROR);
    }

    #[test]
    fn acks_are_the_json_of_frame_and_offset() {
        for (frame, offset) in [(0, Some(0)), (7, None), (u64::MAX, Some(u64::MAX))] {
            let v: Value = serde_json::from_str(&ack(frame, offset)).unwrap();
            assert_eq!(v, json!({ "frame": frame, "offset": offset }));
        }
    }
}
