//! Delivery: stored items out to one subscriber, in the format it asked for.
//!
//! Jelly output is spliced by default ([`JellyMode::Splice`]): stored items are
//! spliceable frames (see [`jelly::EncoderConfig::spliceable`]), so they go out as they
//! are, back to back, with the options row only in the first and the item's metadata
//! (`offset`, `ts`, `source`, `h:<name>`) appended to each frame. A subscriber may join
//! at any item. [`JellyMode::Compact`] re-encodes every item into one encoder per
//! subscription instead, so tables carry over between items. Text output is written
//! item by item and cut at item boundaries.

use std::io::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::Stream;
use jelly::splice;
use jelly::{Decoder, Encoder, EncoderConfig, Event, StreamOptions};
use jelly_proto::wire::put_varint;
use tokio::sync::watch;

use crate::filter::ItemFilter;
use crate::item::Item;
use crate::log::{LogError, ReadLimits};
use crate::topic::{Physical, SubscriberGuard, Topic, TopicOptions};

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutFormat {
    /// Delimited Jelly-RDF: one frame per item, with frame metadata.
    Jelly,
    NQuads,
    NTriples,
    TriG,
    Turtle,
}

impl OutFormat {
    /// The media type.
    pub fn content_type(self) -> &'static str {
        match self {
            OutFormat::Jelly => "application/x-jelly-rdf",
            OutFormat::NQuads => "application/n-quads",
            OutFormat::NTriples => "application/n-triples",
            OutFormat::TriG => "application/trig",
            OutFormat::Turtle => "text/turtle",
        }
    }

    /// Short name (`?format=` values, metrics labels).
    pub fn name(self) -> &'static str {
        match self {
            OutFormat::Jelly => "jelly",
            OutFormat::NQuads => "nquads",
            OutFormat::NTriples => "ntriples",
            OutFormat::TriG => "trig",
            OutFormat::Turtle => "turtle",
        }
    }

    /// From a `?format=` value or a media type.
    pub fn parse(s: &str) -> Option<OutFormat> {
        let s = s.trim().to_ascii_lowercase();
        Some(match s.as_str() {
            "jelly" | "application/x-jelly-rdf" | "application/jelly" => OutFormat::Jelly,
            "nquads" | "nq" | "n-quads" | "application/n-quads" | "text/x-nquads" => {
                OutFormat::NQuads
            }
            "ntriples" | "nt" | "n-triples" | "application/n-triples" => OutFormat::NTriples,
            "trig" | "application/trig" | "application/x-trig" => OutFormat::TriG,
            "turtle" | "ttl" | "text/turtle" | "application/x-turtle" => OutFormat::Turtle,
            _ => return None,
        })
    }

    /// Every output format, in the order ties within one media range are broken.
    pub const ALL: [OutFormat; 5] = [
        OutFormat::Jelly,
        OutFormat::NQuads,
        OutFormat::TriG,
        OutFormat::NTriples,
        OutFormat::Turtle,
    ];

    /// Picks the format from an `Accept` header by RFC 9110 §12.5.1, among the
    /// formats `usable` allows: each format takes the q of the most specific range that
    /// matches it (its own type over `type/*` over `*/*`, so `q=0` on a type excludes
    /// it whatever a wildcard says); the highest q wins, then the range listed first,
    /// then `default`, then [`ALL`](Self::ALL)'s order. No header gives `default`;
    /// `None` when no usable format is acceptable.
    ///
    /// ```
    /// use jelly_server::deliver::OutFormat;
    /// let any = |_| true;
    /// let accept = Some("application/x-jelly-rdf;q=0, */*;q=0.5");
    /// assert_eq!(OutFormat::negotiate(accept, OutFormat::Jelly, any), Some(OutFormat::NQuads));
    /// ```
    pub fn negotiate(
        accept: Option<&str>,
        default: OutFormat,
        usable: impl Fn(OutFormat) -> bool,
    ) -> Option<OutFormat> {
        let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
            return usable(default).then_some(default);
        };
        // Per format: (specificity, q, position) of the most specific matching range.
        let mut got: [Option<(u8, f32, usize)>; 5] = [None; 5];
        for (pos, part) in accept.split(',').enumerate() {
            let mut it = part.split(';');
            let mime = it.next().unwrap_or("").trim().to_ascii_lowercase();
            let mut q = 1.0f32;
            for p in it {
                if let Some(v) = p.trim().strip_prefix("q=") {
                    // A weight that is not a qvalue (`NaN`, `1.5`) rules the range out.
                    q = crate::compress::qvalue(v.trim()).map_or(0.0, |t| f32::from(t) / 1000.0);
                }
            }
            for (i, f) in Self::ALL.into_iter().enumerate() {
                let specificity = match mime.as_str() {
                    "*/*" => 1,
                    m if m.strip_suffix("/*")
                        == f.content_type().split_once('/').map(|(ty, _)| ty) =>
                    {
                        2
                    }
                    m if OutFormat::parse(m) == Some(f) => 3,
                    _ => continue,
                };
                if got[i].is_none_or(|(s, _, _)| specificity > s) {
                    got[i] = Some((specificity, q, pos));
                }
            }
        }
        let mut best: Option<(f32, usize, OutFormat)> = None;
        for (i, f) in Self::ALL.into_iter().enumerate() {
            let Some((_, q, pos)) = got[i] else { continue };
            if q <= 0.0 || !usable(f) {
                continue;
            }
            let better = match best {
                None => true,
                Some((bq, bpos, bf)) => {
                    q > bq
                        || (q == bq
                            && (pos < bpos || (pos == bpos && f == default && bf != default)))
                }
            };
            if better {
                best = Some((q, pos, f));
            }
        }
        best.map(|(_, _, f)| f)
    }

    /// Whether the format can carry every statement the topic may hold.
    pub fn fits(self, topic: &TopicOptions) -> bool {
        self.unfit_reason(topic).is_none()
    }

    /// Why the format cannot carry every statement the topic may hold, if it cannot.
    ///
    /// Decided from the topic's options, not from the items stored so far: a format
    /// that fits only until some item arrives would strand its subscribers at that
    /// item on every resume.
    ///
    /// ```
    /// use jelly_server::deliver::OutFormat;
    /// use jelly_server::topic::TopicOptions;
    ///
    /// let star = TopicOptions { rdf_star: true, ..TopicOptions::default() };
    /// assert!(OutFormat::NQuads.unfit_reason(&star).is_none());
    /// assert!(OutFormat::TriG.unfit_reason(&star).is_some());
    /// ```
    pub fn unfit_reason(self, topic: &TopicOptions) -> Option<String> {
        if topic.physical == Physical::Quads
            && matches!(self, OutFormat::NTriples | OutFormat::Turtle)
        {
            return Some("it holds quads, and this format cannot carry named graphs".into());
        }
        // Turtle and TriG are written by oxttl from oxrdf terms (RDF 1.2); N-Triples and
        // N-Quads in RDF-star syntax, where a quoted triple may be a subject.
        if matches!(self, OutFormat::Turtle | OutFormat::TriG) {
            let what = jelly::oxrdf_adapter::not_representable_in(&topic.stream_options())?;
            return Some(format!(
                "it allows {what}, which Turtle and TriG cannot carry"
            ));
        }
        None
    }
}

/// A stored item that could not be delivered (should not happen: items are checked on publish).
#[derive(Debug, thiserror::Error)]
#[error("item {offset}: {message}")]
pub struct DeliverError {
    pub offset: u64,
    pub message: String,
}

/// How a subscription's Jelly stream is produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum JellyMode {
    /// Stored items (spliceable frames) are sent as they are, back to back, with the
    /// options row only in the first and the item's metadata appended: no decoding
    /// or encoding per subscriber. Each item starts with empty tables of its own.
    #[default]
    Splice,
    /// Every item is decoded and re-encoded into one encoder per subscription, so
    /// tables carry over between items: a smaller stream for more CPU.
    Compact,
}

impl JellyMode {
    /// From a `?mode=` value.
    pub fn parse(s: &str) -> Option<JellyMode> {
        match s.trim() {
            "splice" => Some(JellyMode::Splice),
            "compact" => Some(JellyMode::Compact),
            _ => None,
        }
    }
}

/// The Jelly side of a [`Delivery`].
enum JellyOut {
    Splice {
        /// The options row went out already (it is sent once per stream).
        sent_options: bool,
        /// Keep the options row in every item, so each output frame decodes alone.
        every_item: bool,
    },
    Compact(Box<Encoder>),
}

/// Per-subscription output state.
pub struct Delivery {
    format: OutFormat,
    jelly: Option<JellyOut>,
    delimited: bool,
    /// The metadata fields of the item being spliced, kept between items so that a
    /// spliced item allocates nothing.
    meta: Vec<u8>,
    /// Reads items for the paths that do not splice (made on first use, then reset for
    /// each item): a new decoder would size its tables again for every item.
    dec: Option<Box<Decoder>>,
    /// Text formats: each item starts with a `# offset N` comment line.
    offset_comments: bool,
}

impl Delivery {
    /// A new output stream, in [`JellyMode::Splice`] for Jelly. `delimited` only
    /// matters for Jelly (false: each item is a bare frame message, as in SSE events
    /// and gRPC messages).
    pub fn new(format: OutFormat, delimited: bool) -> Delivery {
        Delivery {
            format,
            jelly: (format == OutFormat::Jelly).then_some(JellyOut::Splice {
                sent_options: false,
                every_item: false,
            }),
            delimited,
            meta: Vec::new(),
            dec: None,
            offset_comments: false,
        }
    }

    /// A Jelly output stream in the given mode. `Compact` encodes with `options`
    /// (the topic's, or ones a client asked for that are compatible with them).
    pub fn jelly(mode: JellyMode, options: StreamOptions, delimited: bool) -> Delivery {
        Self::try_jelly(mode, options, delimited).expect("delivery stream options are valid")
    }

    /// [`Delivery::jelly`] for options that may be unusable (a client's request):
    /// `Compact` fails when no encoder can be made with `options`.
    pub fn try_jelly(
        mode: JellyMode,
        options: StreamOptions,
        delimited: bool,
    ) -> Result<Delivery, jelly::EncodeError> {
        let jelly = match mode {
            JellyMode::Splice => JellyOut::Splice {
                sent_options: false,
                every_item: false,
            },
            JellyMode::Compact => JellyOut::Compact(Box::new(Encoder::with_config(
                options,
                EncoderConfig::default(),
            )?)),
        };
        Ok(Delivery {
            format: OutFormat::Jelly,
            jelly: Some(jelly),
            delimited,
            meta: Vec::new(),
            dec: None,
            offset_comments: false,
        })
    }

    /// Splice mode: keep the options row in every output frame, so each one decodes
    /// on its own (SSE events, which browsers may handle one by one).
    pub fn options_in_every_item(mut self) -> Delivery {
        if let Some(JellyOut::Splice { every_item, .. }) = &mut self.jelly {
            *every_item = true;
        }
        self
    }

    /// Text formats: each item starts with a comment line `# offset N`, which RDF
    /// parsers skip, so that a subscriber reading a text stream (where nothing else
    /// marks where items begin) can resume after the last item it read. No effect on
    /// Jelly, whose frames carry their offset in metadata.
    pub fn with_offset_comments(mut self) -> Delivery {
        self.offset_comments = self.format != OutFormat::Jelly;
        self
    }

    /// Splice mode: the options row already went out on this stream (a shared fan-out
    /// stream, whose subscribers each get the options row in their own first item), so
    /// every item is written without it.
    pub fn options_sent(mut self) -> Delivery {
        if let Some(JellyOut::Splice { sent_options, .. }) = &mut self.jelly {
            *sent_options = true;
        }
        self
    }

    pub fn format(&self) -> OutFormat {
        self.format
    }

    /// Appends one item to `out`.
    pub fn write_item(&mut self, item: &Item, out: &mut Vec<u8>) -> Result<(), DeliverError> {
        let err = |message: String| DeliverError {
            offset: item.offset,
            message,
        };
        if let Some(JellyOut::Splice {
            sent_options,
            every_item,
        }) = &mut self.jelly
        {
            let frame = &item.frame[..];
            let skip = if *sent_options && !*every_item {
                splice::options_row_len(frame).unwrap_or(0)
            } else {
                0
            };
            *sent_options = true;
            let meta = &mut self.meta;
            meta.clear();
            item_metadata(item, |k, v| splice::push_metadata(meta, k, v));
            if self.delimited {
                put_varint(out, (frame.len() - skip + meta.len()) as u64);
            }
            out.extend_from_slice(&frame[skip..]);
            out.extend_from_slice(meta);
            return Ok(());
        }
        if self.offset_comments {
            // A comment line that RDF parsers skip, so that a text subscriber knows each
            // item's offset and can resume after the last one it read.
            let _ = writeln!(out, "# offset {}", item.offset);
        }
        // Each stored item is a stream of its own (its options row first).
        let dec = self.dec.get_or_insert_with(Box::default);
        dec.reset();
        let mut cur = dec.frame(&item.frame);
        match self.format {
            OutFormat::Jelly => {
                let Some(JellyOut::Compact(enc)) = self.jelly.as_mut() else {
                    return Err(err("jelly delivery without an encoder".into()));
                };
                while let Some(ev) = cur.next_event().map_err(|e| err(e.to_string()))? {
                    if let Event::Statement(st) = ev {
                        enc.add(st).map_err(|e| err(e.to_string()))?;
                    }
                }
                if enc.graph_open() {
                    enc.end_graph().map_err(|e| err(e.to_string()))?;
                }
                item_metadata(item, |k, v| enc.set_frame_metadata(k, v));
                enc.finish_frame_into(out, self.delimited);
            }
            OutFormat::NQuads | OutFormat::NTriples => {
                while let Some(ev) = cur.next_event().map_err(|e| err(e.to_string()))? {
                    if let Event::Statement(st) = ev {
                        jelly::nquads::write_statement_line(out, st);
                    }
                }
            }
            OutFormat::Turtle => {
                let mut ser = oxttl::TurtleSerializer::new().for_writer(&mut *out);
                while let Some(ev) = cur.next_event().map_err(|e| err(e.to_string()))? {
                    if let Event::Statement(st) = ev {
                        let q = st.to_oxrdf_quad().map_err(|e| err(e.to_string()))?;
                        ser.serialize_triple(oxrdf::TripleRef::from(q.as_ref()))
                            .map_err(|e| err(e.to_string()))?;
                    }
                }
                ser.finish().map_err(|e| err(e.to_string()))?;
            }
            OutFormat::TriG => {
                let mut ser = oxttl::TriGSerializer::new().for_writer(&mut *out);
                while let Some(ev) = cur.next_event().map_err(|e| err(e.to_string()))? {
                    if let Event::Statement(st) = ev {
                        let q = st.to_oxrdf_quad().map_err(|e| err(e.to_string()))?;
                        ser.serialize_quad(q.as_ref())
                            .map_err(|e| err(e.to_string()))?;
                    }
                }
                ser.finish().map_err(|e| err(e.to_string()))?;
            }
        }
        Ok(())
    }
}

/// Calls `f` with each metadata entry of an item: `offset`, `ts`, `source` (when set)
/// and `h:<name>` for the publisher's headers.
fn item_metadata(item: &Item, mut f: impl FnMut(&str, &[u8])) {
    f("offset", item.offset.to_string().as_bytes());
    f("ts", item.timestamp_ms.to_string().as_bytes());
    if !item.source.is_empty() {
        f("source", item.source.as_bytes());
    }
    for (k, v) in &item.headers {
        f(&format!("h:{k}"), v.as_bytes());
    }
}

/// How items are wrapped on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wrapping {
    /// Items back to back (chunked HTTP body).
    Raw,
    /// Server-sent events: `id: <offset>`, data lines (text) or one base64 line (Jelly).
    Sse,
}

/// One step of a [`Follow`].
#[derive(Debug)]
pub enum Batch {
    /// The output of one or more items, back to back; `ends[i]` is the end of item
    /// `i` in `data` (so each item's output can be sent as its own message).
    Items { data: Bytes, ends: Vec<usize> },
    /// Nothing new for a while (SSE keep-alive).
    KeepAlive,
    /// The subscription is over.
    End(EndReason),
}

impl Batch {
    /// The output of each item, as its own buffer (no copy).
    pub fn parts(data: &Bytes, ends: &[usize]) -> impl Iterator<Item = Bytes> {
        let mut start = 0;
        ends.iter().map(move |&end| {
            let part = data.slice(start..end);
            start = end;
            part
        })
    }
}

/// Why a subscription ended.
#[derive(Debug)]
pub enum EndReason {
    /// The server is shutting down.
    Shutdown,
    /// The requested end offset was reached (`follow=false`).
    Reached,
    /// The subscriber fell behind retention: `requested` is gone, `first` is retained.
    Truncated { requested: u64, first: u64 },
    /// The log could not be read.
    ReadFailed(String),
    /// A stored item could not be written in the subscription's format.
    DeliverFailed(DeliverError),
    /// The log was closed.
    Closed,
    /// The topic was deleted (its log closed under the subscription).
    Deleted,
}

impl EndReason {
    /// The summary of the reason, for front-ends that only tell a few apart.
    pub fn summary(&self) -> FollowEnd {
        match self {
            EndReason::Shutdown => FollowEnd::Shutdown,
            EndReason::Reached => FollowEnd::Reached,
            EndReason::Truncated { first, .. } => FollowEnd::FellBehind { first: *first },
            EndReason::Deleted => FollowEnd::Deleted,
            // Already says what failed ("corrupt log segment …", "I/O error on …"),
            // kept short for a WebSocket close reason's 123 bytes.
            EndReason::ReadFailed(m) => FollowEnd::Failed(m.clone()),
            EndReason::DeliverFailed(e) => FollowEnd::Failed(e.to_string()),
            EndReason::Closed => FollowEnd::Failed("the topic's log was closed".into()),
        }
    }

    /// For a streamed HTTP body: the error that cuts the response off when the
    /// subscription failed (an item it cannot write, a log it cannot read), so that the
    /// client cannot take a truncated response for a complete one (a `follow=false`
    /// replay ends cleanly only when it is whole); `None` for an orderly end. Pass the
    /// reason through [`EndReason::of_topic`] first.
    ///
    /// `replay`: the subscription was to end at a set offset (`follow=false`). Then
    /// any end before it (the server shutting down, the topic deleted) leaves the
    /// replay incomplete and is an error too; a live follow has no end to miss, and
    /// those end it in order. Items dropped by retention before they were sent are an
    /// error either way: the subscriber missed them, and an orderly end would let a
    /// client that does not reconnect (or a proxy that logs it) take the gap for
    /// nothing at all. Except on `sse`, a live SSE stream: it says so in its last
    /// event ([`sse_end_event`]), which a page reads to close its `EventSource`.
    pub fn body_error(&self, replay: bool, sse: bool) -> Option<std::io::Error> {
        let cut = |why: String| {
            Some(std::io::Error::other(format!(
                "the replay stopped before its end: {why}"
            )))
        };
        match self {
            EndReason::ReadFailed(m) => Some(std::io::Error::other(format!(
                "the subscription failed: the log could not be read: {m}"
            ))),
            EndReason::DeliverFailed(e) => Some(std::io::Error::other(format!(
                "the subscription failed: {e}"
            ))),
            EndReason::Reached => None,
            EndReason::Truncated { requested, first } if !replay && !sse => {
                Some(std::io::Error::other(format!(
                    "the subscriber fell behind retention: offset {requested} is no longer \
                     retained (the first retained offset is {first}); items were missed"
                )))
            }
            _ if !replay => None,
            EndReason::Shutdown => cut("the server is shutting down".into()),
            EndReason::Deleted => cut("the topic was deleted".into()),
            EndReason::Closed => cut("the topic's log was closed".into()),
            EndReason::Truncated { requested, first } => cut(format!(
                "offset {requested} is no longer retained (the first retained offset is {first})"
            )),
        }
    }

    /// The reason as the subscriber should hear it: a closed log, or a read that
    /// failed because of it, is a deletion when the topic was deleted.
    pub fn of_topic(self, topic: &Topic) -> EndReason {
        match self {
            EndReason::Closed | EndReason::ReadFailed(_) if topic.is_deleted() => {
                EndReason::Deleted
            }
            r => r,
        }
    }
}

/// The output of one batch of a subscription stops growing once it reaches this many
/// bytes, and the items after it are read from the log again for the next batch. A
/// batch is read as up to `delivery_batch_items` items or 4 MiB of stored Jelly, which
/// as text can be ten times that; a subscriber that does not read holds one batch's
/// output, so without this bound each such subscription (200 streams on one HTTP/2
/// connection) could pin tens of MiB. One item larger than this still goes out whole.
pub const OUTPUT_CHUNK_BYTES: usize = 256 << 10;

/// Everything a live subscription needs.
pub struct Follow {
    pub topic: Arc<Topic>,
    pub guard: SubscriberGuard,
    pub next: u64,
    /// Stop (end the body) once this offset is reached (`follow=false`).
    pub end: Option<u64>,
    pub delivery: Delivery,
    pub wrapping: Wrapping,
    pub batch: ReadLimits,
    pub shutdown: watch::Receiver<bool>,
    /// SSE keep-alive interval.
    pub keepalive: Duration,
    pub metrics: Arc<crate::metrics::Metrics>,
    /// Items it rejects are skipped (see [`Follow::with_filter`]).
    filter: Option<Arc<ItemFilter>>,
    /// Offsets of the items in the last [`Batch::Items`] (they need not be
    /// consecutive once a filter skips items).
    offsets: Vec<u64>,
    /// Items read but not yet written, from `next` on: what was left of a read when
    /// its batch reached [`OUTPUT_CHUNK_BYTES`].
    pending: Vec<Item>,
    /// When output (items or a keep-alive) last went out.
    last_output: Instant,
    /// Buffer window: new items are gathered this long before they are read.
    window: Duration,
    watch: watch::Receiver<u64>,
    ended: Option<FollowEnd>,
    /// Whether its output is counted in `bytes_out` as it is made; not when the
    /// caller sends it otherwise (compressed) and counts what it sends.
    counts_bytes: bool,
}

/// Why a [`Follow`] ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FollowEnd {
    /// The server is shutting down.
    Shutdown,
    /// `follow=false`: every item up to the end offset was sent.
    Reached,
    /// The next item is no longer retained; `first` is the first retained offset.
    FellBehind { first: u64 },
    /// A log read or an encoding failed; why, for the subscriber (a WebSocket close
    /// reason carries it).
    Failed(String),
    /// The topic was deleted.
    Deleted,
}

/// One step of a [`Follow`].
enum Step {
    Items(Vec<Item>),
    KeepAlive,
    End(EndReason),
}

impl Follow {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        topic: Arc<Topic>,
        guard: SubscriberGuard,
        next: u64,
        end: Option<u64>,
        delivery: Delivery,
        wrapping: Wrapping,
        batch: ReadLimits,
        shutdown: watch::Receiver<bool>,
        keepalive: Duration,
        metrics: Arc<crate::metrics::Metrics>,
    ) -> Follow {
        let watch = topic.log.watch();
        Follow {
            topic,
            guard,
            next,
            end,
            delivery,
            wrapping,
            batch,
            shutdown,
            keepalive,
            metrics,
            filter: None,
            offsets: Vec::new(),
            pending: Vec::new(),
            last_output: Instant::now(),
            window: Duration::ZERO,
            watch,
            ended: None,
            counts_bytes: true,
        }
    }

    /// Leaves `bytes_out` to the caller, which sends the output in another form (a
    /// compressed body) and counts that with [`Follow::count_bytes_sent`].
    pub fn bytes_counted_by_caller(mut self) -> Follow {
        self.counts_bytes = false;
        self
    }

    /// Counts `n` bytes sent in `bytes_out` (topic and server).
    pub fn count_bytes_sent(&self, n: usize) {
        self.metrics.count_out(&self.topic.stats, 0, n as u64);
    }

    /// Gathers new items for `window` after the first arrives before sending them, as
    /// a fan-out group with a window does (the `window` parameter); items already
    /// stored go out at once.
    pub fn with_window(mut self, window: Duration) -> Follow {
        self.window = window;
        self
    }

    /// Delivers only the items `filter` accepts (`None`: every item). Skipped items
    /// still move the subscription on (`next` and the subscriber's position). An item
    /// the filter cannot be checked on (see [`crate::filter::FilterError::Item`]) is
    /// skipped too: that is not the subscriber's fault, so the subscription goes on.
    pub fn with_filter(mut self, filter: Option<Arc<ItemFilter>>) -> Follow {
        self.filter = filter;
        self
    }

    /// Whether the subscription's filter lets the item through.
    fn accepts(&self, item: &Item) -> bool {
        self.filter.as_ref().is_none_or(|f| f.takes(item))
    }

    /// [`Follow::accepts`] on a blocking thread (for a costly filter).
    async fn accepts_off_thread(&self, item: &Item) -> bool {
        let Some(f) = &self.filter else {
            return true;
        };
        f.takes_off_thread(item).await
    }

    /// The next chunk of output, or `None` when the subscription ends (shutdown,
    /// `follow=false` reached its end, or the subscriber fell behind retention).
    pub async fn next_chunk(&mut self) -> Option<Bytes> {
        match self.next_batch().await {
            Batch::Items { data, .. } => Some(data),
            Batch::KeepAlive => Some(Bytes::from_static(b": keep-alive\n\n")),
            Batch::End(_) => None,
        }
    }

    /// The next batch of output: the items available now (waiting for new ones when
    /// there are none), a keep-alive (SSE), or the end of the subscription and why.
    pub async fn next_batch(&mut self) -> Batch {
        loop {
            let items = match self.step().await {
                Step::Items(items) => items,
                Step::KeepAlive => {
                    self.last_output = Instant::now();
                    return Batch::KeepAlive;
                }
                Step::End(reason) => return Batch::End(reason),
            };
            let mut out = Vec::new();
            let mut ends = Vec::with_capacity(items.len());
            self.offsets.clear();
            let costly = self.filter.as_ref().is_some_and(|f| f.is_costly());
            for (k, it) in items.iter().enumerate() {
                let taken = if costly {
                    // Each ASK evaluation on a blocking thread, so that it holds no async
                    // worker; between them a subscription whose client has gone is
                    // dropped (stopping after the item being evaluated).
                    self.accepts_off_thread(it).await
                } else {
                    self.accepts(it)
                };
                if !taken {
                    self.next = it.offset + 1;
                    continue;
                }
                if let Err(e) = self.write(it, &mut out) {
                    // Usually the subscriber's own choice (for example a datatype table of 0 asked
                    // over gRPC) that an item does not fit: not a server fault.
                    tracing::warn!(topic = %self.topic.name, error = %e, "cannot deliver item");
                    if ends.is_empty() {
                        let reason = EndReason::DeliverFailed(e);
                        self.ended = Some(reason.summary());
                        return Batch::End(reason);
                    }
                    // Send what was written; the failing item fails again next time.
                    break;
                }
                self.next = it.offset + 1;
                ends.push(out.len());
                self.offsets.push(it.offset);
                if out.len() >= OUTPUT_CHUNK_BYTES {
                    // The rest of the items read go out in the next batch.
                    self.pending = items[k + 1..].to_vec();
                    break;
                }
            }
            out.truncate(ends.last().copied().unwrap_or(0));
            self.count(ends.len(), out.len());
            if ends.is_empty() {
                // The filter skipped the whole batch: read on, letting other tasks run
                // between batches, and keep an SSE stream alive while nothing passes.
                tokio::task::coop::consume_budget().await;
                if self.wrapping == Wrapping::Sse && self.last_output.elapsed() >= self.keepalive {
                    self.last_output = Instant::now();
                    return Batch::KeepAlive;
                }
                continue;
            }
            self.last_output = Instant::now();
            return Batch::Items {
                data: Bytes::from(out),
                ends,
            };
        }
    }

    /// The next items, each written separately (one WebSocket message per item), as
    /// `(offset, bytes)`; `None` when the subscription ends, as for
    /// [`Follow::next_chunk`]. Items are not wrapped (use [`Wrapping::Raw`]).
    /// Not cancel-safe (nor is [`Follow::next_batch`]): with a costly filter a read
    /// awaits between items it has already written, so a read dropped part way loses
    /// them. Run it where it is not raced (a body stream, its own task).
    pub async fn next_items(&mut self) -> Option<Vec<(u64, Bytes)>> {
        loop {
            match self.next_batch().await {
                Batch::KeepAlive => continue,
                Batch::End(_) => return None,
                Batch::Items { data, ends } => {
                    return Some(
                        self.offsets
                            .iter()
                            .copied()
                            .zip(Batch::parts(&data, &ends))
                            .collect(),
                    );
                }
            }
        }
    }

    /// Why the subscription ended (once [`Follow::next_chunk`] or
    /// [`Follow::next_items`] returned `None`).
    pub fn end_reason(&self) -> Option<FollowEnd> {
        self.ended.clone()
    }

    /// Counts delivered items and bytes (topic and server counters, subscriber position).
    fn count(&self, items: usize, bytes: usize) {
        let bytes = if self.counts_bytes { bytes as u64 } else { 0 };
        self.metrics
            .count_out(&self.topic.stats, items as u64, bytes);
        self.guard.advance(self.next);
    }

    /// Ends the subscription: records why (for [`Follow::end_reason`]).
    fn end_with(&mut self, reason: EndReason) -> Step {
        let reason = reason.of_topic(&self.topic);
        self.ended = Some(reason.summary());
        Step::End(reason)
    }

    /// Waits for the next stored items (at least one), a keep-alive tick (SSE), or
    /// the end. Does not advance `next`.
    async fn step(&mut self) -> Step {
        loop {
            if *self.shutdown.borrow() {
                return self.end_with(EndReason::Shutdown);
            }
            if self.end.is_some_and(|e| self.next >= e) {
                return self.end_with(EndReason::Reached);
            }
            if !self.pending.is_empty() {
                return Step::Items(std::mem::take(&mut self.pending));
            }
            let mut limits = self.batch;
            if let Some(e) = self.end {
                limits.max_items = limits.max_items.min((e - self.next) as usize);
            }
            let items = match self.topic.log.read(self.next, limits).await {
                Ok(items) => items,
                Err(LogError::Truncated { requested, first }) => {
                    tracing::warn!(
                        topic = %self.topic.name,
                        requested,
                        first,
                        "subscriber fell behind retention; closing its stream"
                    );
                    return self.end_with(EndReason::Truncated { requested, first });
                }
                Err(LogError::Closed) => return self.end_with(EndReason::Closed),
                Err(e) => {
                    tracing::error!(topic = %self.topic.name, error = %e, "log read failed");
                    return self.end_with(EndReason::ReadFailed(e.to_string()));
                }
            };
            if items.is_empty() {
                let next = self.next;
                let keepalive = tokio::time::sleep(self.keepalive);
                let woke = tokio::select! {
                    r = self.watch.wait_for(|n| *n > next) => {
                        if r.is_err() { Some(EndReason::Closed) } else { None }
                    }
                    _ = self.shutdown.changed() => Some(EndReason::Shutdown),
                    _ = keepalive, if self.wrapping == Wrapping::Sse => return Step::KeepAlive,
                };
                if let Some(reason) = woke {
                    return self.end_with(reason);
                }
                if !self.window.is_zero() {
                    tokio::select! {
                        _ = tokio::time::sleep(self.window) => {}
                        _ = self.shutdown.changed() => return self.end_with(EndReason::Shutdown),
                    }
                }
                continue;
            }
            return Step::Items(items);
        }
    }

    fn write(&mut self, it: &Item, out: &mut Vec<u8>) -> Result<(), DeliverError> {
        match self.wrapping {
            Wrapping::Raw => self.delivery.write_item(it, out),
            Wrapping::Sse => {
                let mut body = Vec::new();
                self.delivery.write_item(it, &mut body)?;
                sse_event(it.offset, self.delivery.format(), &body, out);
                Ok(())
            }
        }
    }

    /// The subscription as a body stream.
    /// The subscription as a body stream, which a failure ends with an error (see
    /// [`EndReason::body_error`]).
    pub fn into_stream(self) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Send {
        futures_util::stream::unfold(Some(self), |f| async move {
            let mut f = f?;
            match f.next_batch().await {
                Batch::Items { data, .. } => Some((Ok(data), Some(f))),
                Batch::KeepAlive => Some((Ok(Bytes::from_static(b": keep-alive\n\n")), Some(f))),
                Batch::End(reason) => {
                    let reason = reason.of_topic(&f.topic);
                    match reason.body_error(f.end.is_some(), f.wrapping == Wrapping::Sse) {
                        Some(e) => Some((Err(e), None)),
                        None if f.wrapping == Wrapping::Sse => {
                            let ev = sse_end_event(&reason)?;
                            f.count_bytes_sent(ev.len());
                            Some((Ok(Bytes::from(ev)), None))
                        }
                        None => None,
                    }
                }
            }
        })
    }
}

/// The last event of an SSE body that ends in order, saying why: `EventSource`
/// reconnects after any end of the body, and would learn only from a failed
/// reconnection (410, 404) that it should not. `None` for a failure, which cuts the
/// body off instead (see [`EndReason::body_error`]).
///
/// ```
/// use jelly_server::deliver::{EndReason, sse_end_event};
/// let ev = sse_end_event(&EndReason::Truncated { requested: 5, first: 9 }).unwrap();
/// let ev = String::from_utf8(ev).unwrap();
/// let data: serde_json::Value = serde_json::from_str(ev.strip_prefix("event: end\ndata: ").unwrap()).unwrap();
/// assert_eq!((data["reason"].as_str(), data["first_offset"].as_u64()), (Some("fell_behind"), Some(9)));
/// assert!(sse_end_event(&EndReason::Closed).is_none());
/// ```
pub fn sse_end_event(reason: &EndReason) -> Option<Vec<u8>> {
    let data = match reason {
        EndReason::Reached => serde_json::json!({
            "reason": "end",
            "message": "every item asked for was sent (follow=false)",
        }),
        EndReason::Truncated { requested, first } => serde_json::json!({
            "reason": "fell_behind",
            "first_offset": first,
            "message": format!(
                "offset {requested} is no longer retained (the first retained offset is {first}); resuming from it would answer 410"
            ),
        }),
        EndReason::Deleted => serde_json::json!({
            "reason": "deleted",
            "message": "the topic was deleted; a topic created again under its name starts over at offset 0",
        }),
        EndReason::Shutdown => serde_json::json!({
            "reason": "shutdown",
            "message": "the server is shutting down; resume from the offset after the last event's id",
        }),
        EndReason::ReadFailed(_) | EndReason::DeliverFailed(_) | EndReason::Closed => {
            return None;
        }
    };
    Some(format!("event: end\ndata: {data}\n\n").into_bytes())
}

/// Writes one SSE event.
pub fn sse_event(offset: u64, format: OutFormat, body: &[u8], out: &mut Vec<u8>) {
    let _ = write!(out, "id: {offset}\nevent: item\n");
    if format == OutFormat::Jelly {
        out.extend_from_slice(b"data: ");
        base64_into(body, out);
        out.push(b'\n');
    } else {
        let text = String::from_utf8_lossy(body);
        let mut any = false;
        for line in text.lines() {
            out.extend_from_slice(b"data: ");
            out.extend_from_slice(line.as_bytes());
            out.push(b'\n');
            any = true;
        }
        if !any {
            out.extend_from_slice(b"data:\n");
        }
    }
    out.push(b'\n');
}

/// Standard base64 with padding.
pub fn base64_into(data: &[u8], out: &mut Vec<u8>) {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for c in data.chunks(3) {
        let b = [c[0], *c.get(1).unwrap_or(&0), *c.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        out.push(T[(n >> 18) as usize & 63]);
        out.push(T[(n >> 12) as usize & 63]);
        out.push(if c.len() > 1 {
            T[(n >> 6) as usize & 63]
        } else {
            b'='
        });
        out.push(if c.len() > 2 {
            T[n as usize & 63]
        } else {
            b'='
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64() {
        let mut o = Vec::new();
        base64_into(b"foobar", &mut o);
        o.push(b' ');
        base64_into(b"fooba", &mut o);
        o.push(b' ');
        base64_into(b"f", &mut o);
        assert_eq!(o, b"Zm9vYmFy Zm9vYmE= Zg==");
    }

    #[test]
    fn negotiation() {
        let n = |a| OutFormat::negotiate(a, OutFormat::Jelly, |_| true);
        assert_eq!(n(None), Some(OutFormat::Jelly));
        assert_eq!(n(Some("*/*")), Some(OutFormat::Jelly));
        assert_eq!(n(Some("application/n-quads")), Some(OutFormat::NQuads));
        assert_eq!(
            n(Some("text/turtle;q=0.5, application/trig")),
            Some(OutFormat::TriG)
        );
        assert_eq!(n(Some("image/png")), None);
        // Equal q: the range listed first.
        assert_eq!(
            n(Some("text/turtle, application/trig")),
            Some(OutFormat::Turtle)
        );
        assert_eq!(n(Some("text/*")), Some(OutFormat::Turtle));
        assert_eq!(n(Some("application/*")), Some(OutFormat::Jelly));
        assert_eq!(n(Some("Application/N-Quads")), Some(OutFormat::NQuads));
        // An explicit q=0 excludes a type whatever a wildcard says.
        assert_eq!(
            n(Some("application/x-jelly-rdf;q=0, */*;q=0.5")),
            Some(OutFormat::NQuads)
        );
        assert_eq!(
            n(Some(
                "application/x-jelly-rdf;q=0, application/n-quads;q=0.5, */*;q=0.8"
            )),
            Some(OutFormat::TriG)
        );
        assert_eq!(n(Some("*/*;q=0")), None);
        // Weights that are not qvalues rule their range out rather than rank it
        // (`NaN` and `inf` parse as floats; `1.5` is over 1).
        for bad in ["NaN", "inf", "1.5", "-1", ".5"] {
            let a = format!("application/n-quads;q={bad}, application/trig;q=0.1");
            let got = OutFormat::negotiate(Some(&a), OutFormat::Jelly, |_| true);
            assert_eq!(got, Some(OutFormat::TriG), "q={bad}");
        }
        assert_eq!(
            n(Some(
                "application/n-quads;q=0.999, application/trig;q=1.000"
            )),
            Some(OutFormat::TriG)
        );
    }

    #[test]
    fn negotiation_skips_formats_the_topic_cannot_take() {
        let quads = |f: OutFormat| !matches!(f, OutFormat::NTriples | OutFormat::Turtle);
        let n = |a| OutFormat::negotiate(a, OutFormat::Jelly, quads);
        assert_eq!(
            n(Some("application/n-triples, application/n-quads;q=0.9")),
            Some(OutFormat::NQuads)
        );
        assert_eq!(n(Some("text/turtle, */*;q=0.1")), Some(OutFormat::Jelly));
        assert_eq!(n(Some("text/turtle")), None);
    }
}
