//! Streaming publish: `POST /topics/{name}/items?stream=true`, a long-lived
//! (chunked) body holding a delimited Jelly stream whose items are appended as their
//! frames arrive — and [`StreamPublisher`], the incremental ingestion shared with the
//! WebSocket publisher.
//!
//! Unlike the atomic POST, a bad frame mid-stream does not undo what came before it:
//! every item of the frames before it stays appended, and the error names the frame.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::Json;
use axum::body::Body;
use axum::http::StatusCode;
use bytes::{Bytes, BytesMut};
use futures_util::{FutureExt as _, StreamExt as _};
use serde_json::{Value, json};

use super::publish::ingest_error;
use super::{ApiError, AppState, wait_shutdown};
use crate::ingest::{IngestError, IngestPaths, JellyIngest, PublishMeta};
use crate::item::NewItem;
use crate::log::LogError;
use crate::topic::{Topic, TopicError, TopicOptions, valid_name};

/// Append the pending items once this many are decoded, even if more data is ready.
pub const FLUSH_ITEMS: usize = 64;
/// Append the pending items once their frames add up to this many bytes.
pub const FLUSH_BYTES: usize = 1 << 20;
/// Frames at least this large are decoded on a blocking thread.
const BLOCKING_FRAME_BYTES: usize = 256 << 10;

/// Why a frame of a publisher stream was refused.
#[derive(Debug)]
pub struct FrameError {
    /// The status an HTTP answer would carry.
    pub status: StatusCode,
    /// What went wrong.
    pub message: String,
}

impl From<IngestError> for FrameError {
    fn from(e: IngestError) -> FrameError {
        // The stream publishers name the frame (and the HTTP one its byte) themselves,
        // so a decoder's error keeps only the row within the frame.
        if let IngestError::Malformed(d) = &e {
            let row = d.row.map(|r| format!("row {r}: ")).unwrap_or_default();
            return FrameError {
                status: StatusCode::BAD_REQUEST,
                message: format!("malformed Jelly: {row}{}", d.kind),
            };
        }
        let a = ingest_error(e);
        FrameError {
            status: a.status,
            message: a.body["error"].as_str().unwrap_or_default().to_string(),
        }
    }
}

impl From<ApiError> for FrameError {
    fn from(a: ApiError) -> FrameError {
        FrameError {
            status: a.status,
            message: a.body["error"].as_str().unwrap_or_default().to_string(),
        }
    }
}

/// Incremental ingestion of one publisher stream into a topic: frames in, items
/// appended in small batches. The topic is created (when auto-creation is on) by the
/// first append, so a stream that is refused before any item creates nothing.
pub struct StreamPublisher {
    s: AppState,
    name: String,
    options: TopicOptions,
    topic: Option<Arc<Topic>>,
    /// `None` only while a frame is decoded on a blocking thread (or after that failed).
    ingest: Option<Box<JellyIngest>>,
    meta: PublishMeta,
    pending: Vec<NewItem>,
    pending_bytes: usize,
    /// Items appended so far.
    pub accepted: u64,
    /// The offsets appended, as ranges: other publishers' items may fall between
    /// this stream's batches, so its first and last offset alone can overstate.
    pub ranges: OffsetRanges,
}

impl StreamPublisher {
    /// A publisher for topic `name`: checks the name, and that the topic exists or
    /// may be created on the first append.
    pub fn new(s: &AppState, name: &str, meta: PublishMeta) -> Result<StreamPublisher, ApiError> {
        if !valid_name(name) {
            return Err(TopicError::BadName(name.to_string()).into());
        }
        // A mirrored topic's offsets are its upstream's: nobody else may append.
        s.topics.check_publish(name)?;
        let topic = s.topics.get(name);
        if topic.is_none() && !s.config.auto_create_topics {
            return Err(ApiError::not_found(format!(
                "topic `{name}` does not exist (create it first: auto-creation is off)"
            ))
            .with("topic", name));
        }
        let options = match &topic {
            Some(t) => TopicOptions::clone(&t.options()),
            None => s.topics.defaults().clone(),
        };
        let ingest = JellyIngest::new(&options, meta.clone(), s.config.max_item_bytes);
        Ok(StreamPublisher {
            s: s.clone(),
            name: name.to_string(),
            options,
            topic,
            ingest: Some(Box::new(ingest)),
            meta,
            pending: Vec::new(),
            pending_bytes: 0,
            accepted: 0,
            ranges: OffsetRanges::default(),
        })
    }

    /// The largest frame accepted (the server's `max_item_bytes`).
    pub fn max_frame_bytes(&self) -> usize {
        self.s.config.max_item_bytes
    }

    /// Decodes one Jelly frame (a bare `RdfStreamFrame`) at byte `offset` of the
    /// publisher's stream; its item, if it holds statements, becomes pending. Returns
    /// whether it made an item. After an error the stream cannot go on.
    pub async fn frame(&mut self, bytes: Bytes, offset: u64) -> Result<bool, FrameError> {
        let Some(mut ingest) = self.ingest.take() else {
            return Err(FrameError {
                status: StatusCode::INTERNAL_SERVER_ERROR,
                message: "the stream cannot go on after an earlier failure".into(),
            });
        };
        let before = ingest.paths();
        let (ingest, r) = if bytes.len() >= BLOCKING_FRAME_BYTES {
            tokio::task::spawn_blocking(move || {
                let r = ingest.frame_at(&bytes, offset);
                (ingest, r)
            })
            .await
            .map_err(|e| FrameError {
                status: StatusCode::INTERNAL_SERVER_ERROR,
                message: format!("decoding failed: {e}"),
            })?
        } else {
            let r = ingest.frame_at(&bytes, offset);
            (ingest, r)
        };
        if r.is_ok() {
            let after = ingest.paths();
            self.s.metrics.count_ingest(IngestPaths {
                rebased: after.rebased - before.rebased,
                reencoded: after.reencoded - before.reencoded,
            });
            self.ingest = Some(ingest);
        }
        match r? {
            Some(item) => {
                self.push(item);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Ingests a text message as one item (N-Quads, or N-Triples for a triples topic
    /// as well); `false` for a message of no statements (empty, or only comments),
    /// which makes no item, as a Jelly frame without statements does. Independent of
    /// the Jelly stream's state.
    pub fn text(&mut self, text: &str) -> Result<bool, FrameError> {
        let no_statements = text.lines().all(|l| {
            let l = l.trim_matches([' ', '\t', '\r']);
            l.is_empty() || l.starts_with('#')
        });
        if no_statements {
            return Ok(false);
        }
        let mut items = crate::ingest::ingest(
            text.as_bytes(),
            crate::ingest::InputFormat::NQuads,
            &self.options,
            &self.meta,
            self.s.config.max_item_bytes,
        )?;
        if items.len() != 1 {
            return Err(FrameError {
                status: StatusCode::BAD_REQUEST,
                message: "a text message must hold N-Quads statements".into(),
            });
        }
        if let Some(item) = items.pop() {
            self.push(item);
        }
        Ok(true)
    }

    fn push(&mut self, item: NewItem) {
        self.pending_bytes += item.frame.len();
        self.pending.push(item);
    }

    /// The topic's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The options items are checked against: the topic's, or the defaults until the
    /// first append creates it.
    pub fn topic_options(&self) -> &TopicOptions {
        &self.options
    }

    /// Pending (decoded, not yet appended) items.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Whether the pending batch is full.
    pub fn should_flush(&self) -> bool {
        self.pending.len() >= FLUSH_ITEMS || self.pending_bytes >= FLUSH_BYTES
    }

    /// Appends the pending items as one batch; returns their offsets.
    pub async fn flush(&mut self) -> Result<Vec<u64>, FrameError> {
        if self.pending.is_empty() {
            return Ok(Vec::new());
        }
        let topic = match &self.topic {
            Some(t) => t.clone(),
            None => {
                let t = super::publish::publish_topic(&self.s, &self.name).await?;
                if !t.options().same_items(&self.options) {
                    // Created concurrently with other options; nothing was appended yet.
                    return Err(FrameError {
                        status: StatusCode::CONFLICT,
                        message: format!(
                            "topic `{}` was created concurrently with other options",
                            self.name
                        ),
                    });
                }
                self.topic = Some(t.clone());
                t
            }
        };
        let items = std::mem::take(&mut self.pending);
        self.pending_bytes = 0;
        let offsets = topic
            .append(items, &self.s.metrics)
            .await
            .map_err(|e| match e {
                LogError::ItemTooLarge { .. } => FrameError {
                    status: StatusCode::PAYLOAD_TOO_LARGE,
                    message: e.to_string(),
                },
                LogError::Closed if topic.is_deleted() => FrameError {
                    status: StatusCode::NOT_FOUND,
                    message: TopicError::Deleted(self.name.clone()).to_string(),
                },
                e => FrameError {
                    status: StatusCode::SERVICE_UNAVAILABLE,
                    message: format!("append failed: {e}"),
                },
            })?;
        if let (Some(&first), Some(&last)) = (offsets.first(), offsets.last()) {
            self.accepted += offsets.len() as u64;
            // One append's items take consecutive offsets.
            self.ranges.push(first, last);
        }
        Ok(offsets)
    }

    /// The summary of what was appended: `{topic, first_offset, last_offset, items,
    /// ranges}`, `ranges` being `[[first, last], …]` of the offsets this stream got.
    pub fn summary(&self) -> Value {
        json!({
            "topic": self.name,
            "first_offset": self.ranges.first(),
            "last_offset": self.ranges.last(),
            "items": self.accepted,
            "ranges": self.ranges.as_pairs(),
        })
    }
}

/// Offsets as inclusive ranges, merged where they touch: the offsets one streaming
/// publish was given, in order.
///
/// ```
/// use jelly_server::http::publish_stream::OffsetRanges;
/// let mut r = OffsetRanges::default();
/// r.push(0, 63);
/// r.push(64, 99); // follows on: merged
/// r.push(130, 130); // another publisher's items came between
/// assert_eq!(r.as_pairs(), vec![[0, 99], [130, 130]]);
/// assert_eq!((r.first(), r.last()), (Some(0), Some(130)));
/// assert_eq!(r.to_header(64), "0-99,130");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OffsetRanges(Vec<(u64, u64)>);

impl OffsetRanges {
    /// Adds the offsets `first..=last`, after all the earlier ones.
    pub fn push(&mut self, first: u64, last: u64) {
        match self.0.last_mut() {
            Some((_, end)) if end.checked_add(1) == Some(first) => *end = last,
            _ => self.0.push((first, last)),
        }
    }

    /// The first offset of all, if any.
    pub fn first(&self) -> Option<u64> {
        self.0.first().map(|r| r.0)
    }

    /// The last offset of all, if any.
    pub fn last(&self) -> Option<u64> {
        self.0.last().map(|r| r.1)
    }

    /// The ranges as `[first, last]` pairs.
    pub fn as_pairs(&self) -> Vec<[u64; 2]> {
        self.0.iter().map(|&(a, b)| [a, b]).collect()
    }

    /// The ranges as `a-b,c,d-e` (a single offset without a dash), cut at a range
    /// boundary once longer than `max` bytes and then ended with `,...`.
    pub fn to_header(&self, max: usize) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        for (i, &(a, b)) in self.0.iter().enumerate() {
            let start = s.len();
            if i > 0 {
                s.push(',');
            }
            let _ = if a == b {
                write!(s, "{a}")
            } else {
                write!(s, "{a}-{b}")
            };
            if s.len() > max {
                s.truncate(start);
                s.push_str(",...");
                break;
            }
        }
        s
    }
}

/// A varint at the start of `buf`: `Ok(None)` if incomplete, `Err` if over 10 bytes.
pub(crate) fn varint(buf: &[u8]) -> Result<Option<(u64, usize)>, ()> {
    let mut v = 0u64;
    for (i, &b) in buf.iter().enumerate().take(10) {
        if i == 9 && b > 1 {
            return Err(());
        }
        v |= u64::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            return Ok(Some((v, i + 1)));
        }
    }
    if buf.len() >= 10 { Err(()) } else { Ok(None) }
}

/// Where a streaming publish stands, for error answers.
#[derive(Debug, Clone, Copy)]
struct Position {
    /// Index of the next frame.
    frame: u64,
    /// Body bytes before the next frame's length prefix.
    offset: u64,
    /// Where the next frame's message starts, once its length prefix is read.
    message: Option<u64>,
}

impl Position {
    /// The byte an error names: where the frame's message starts, as the decoder, the
    /// atomic POST and the CLI count, or where its length prefix starts when the
    /// prefix itself is at fault.
    fn byte(&self) -> u64 {
        self.message.unwrap_or(self.offset)
    }
}

fn stream_error(p: &StreamPublisher, pos: &Position, e: FrameError) -> ApiError {
    let mut a = ApiError::new(
        e.status,
        format!(
            "frame {} (byte {}): {}; {} earlier item(s) were appended{}",
            pos.frame,
            pos.byte(),
            e.message,
            p.accepted,
            if e.status == StatusCode::NOT_FOUND {
                " before the topic was deleted"
            } else {
                " and stay"
            }
        ),
    )
    .with("frame", pos.frame)
    .with("byte_offset", pos.byte())
    .with("items_accepted", p.accepted);
    if let Value::Object(m) = p.summary() {
        for (k, v) in m {
            if k != "items" {
                a = a.with(&k, v);
            }
        }
    }
    a
}

/// `POST /topics/{name}/items?stream=true`: reads the body frame by frame (never
/// whole), appending items as they are decoded: a batch whenever [`FLUSH_ITEMS`] or
/// [`FLUSH_BYTES`] are pending, and whenever the body has no more data ready.
pub async fn publish_stream(
    s: AppState,
    name: &str,
    meta: PublishMeta,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    let mut p = StreamPublisher::new(&s, name, meta)?;
    let max = p.max_frame_bytes() as u64;
    let mut stream = body.into_data_stream();
    let mut shutdown = s.shutdown.clone();
    let mut buf = BytesMut::new();
    let mut pos = Position {
        frame: 0,
        offset: 0,
        message: None,
    };
    // Where the pending batch's first frame is (each frame that finds nothing pending
    // sets it): an append that fails appends none of the batch, so its error names
    // that frame.
    let mut batch = pos;
    // The body may be quiet between frames for as long as it likes, but a frame it has
    // started is held until it is whole (up to the item limit), so it may pause at most
    // as long as an atomic publish's body.
    let pause = s.config.body_read_timeout();
    macro_rules! fail {
        ($e:expr) => {{
            let e: FrameError = $e;
            // Frames before the bad one are kept: append what is pending first.
            let e = match p.flush().await {
                Ok(_) => e,
                Err(fe) => {
                    pos = batch;
                    fe
                }
            };
            s.metrics.publish_rejected.fetch_add(1, Ordering::Relaxed);
            return Err(stream_error(&p, &pos, e));
        }};
    }
    macro_rules! flush {
        () => {
            if let Err(e) = p.flush().await {
                pos = batch;
                fail!(e)
            }
        };
    }
    loop {
        // Data that is ready is taken at once; when the body stalls, the pending
        // items are appended before waiting.
        let next = match stream.next().now_or_never() {
            Some(next) => next,
            None => {
                flush!();
                let inside_frame = !buf.is_empty();
                tokio::select! {
                    next = stream.next() => next,
                    _ = wait_shutdown(&mut shutdown) => fail!(FrameError {
                        status: StatusCode::SERVICE_UNAVAILABLE,
                        message: "the server is shutting down".into(),
                    }),
                    () = tokio::time::sleep(pause.unwrap_or(Duration::MAX)),
                        if inside_frame && pause.is_some() =>
                    {
                        fail!(FrameError {
                            status: StatusCode::REQUEST_TIMEOUT,
                            message: format!(
                                "the frame stopped for {} ms with {} of its bytes received \
                                 (body_read_timeout_ms)",
                                pause.unwrap_or_default().as_millis(),
                                buf.len()
                            ),
                        })
                    }
                }
            }
        };
        let chunk = match next {
            None => break,
            Some(Ok(c)) => c,
            Some(Err(e)) => fail!(FrameError {
                status: StatusCode::BAD_REQUEST,
                message: format!(
                    "cannot read the request body: {}",
                    crate::error_chain::with_causes(&e)
                ),
            }),
        };
        buf.extend_from_slice(&chunk);
        loop {
            let (len, n) = match varint(&buf) {
                Ok(Some(v)) => v,
                Ok(None) => break,
                Err(()) => fail!(FrameError {
                    status: StatusCode::BAD_REQUEST,
                    message:
                        "malformed Jelly: bad frame length varint (the stream must be delimited)"
                            .into(),
                }),
            };
            pos.message = Some(pos.offset + n as u64);
            if len > max {
                fail!(FrameError {
                    status: StatusCode::PAYLOAD_TOO_LARGE,
                    message: format!("frame of {len} bytes; the limit is {max}"),
                });
            }
            let len = len as usize;
            if buf.len() < n + len {
                break;
            }
            let _ = buf.split_to(n);
            let frame = buf.split_to(len).freeze();
            if p.pending() == 0 {
                batch = pos;
            }
            if let Err(e) = p.frame(frame, pos.offset + n as u64).await {
                fail!(e);
            }
            pos.frame += 1;
            pos.offset += (n + len) as u64;
            pos.message = None;
            if p.should_flush() {
                flush!();
            }
        }
    }
    if !buf.is_empty() {
        let message = match varint(&buf) {
            Ok(Some((len, n))) => format!(
                "malformed Jelly: the body ended inside the frame (its length prefix announced \
                 {len} bytes, {} were sent)",
                buf.len() - n
            ),
            _ => "malformed Jelly: the body ended inside a frame's length prefix".to_string(),
        };
        fail!(FrameError {
            status: StatusCode::BAD_REQUEST,
            message,
        });
    }
    flush!();
    if p.accepted == 0 {
        // Refused as a whole; the error names the end of the body.
        s.metrics.publish_rejected.fetch_add(1, Ordering::Relaxed);
        let e = FrameError {
            status: StatusCode::BAD_REQUEST,
            message: format!(
                "the stream holds no statements ({} frame(s) read)",
                pos.frame
            ),
        };
        return Err(stream_error(&p, &pos, e));
    }
    tracing::debug!(topic = name, items = p.accepted, "stream published");
    Ok(Json(p.summary()))
}
