//! Publishing: turns a request body into self-contained items.
//!
//! A Jelly body is decoded with one decoder for the whole request (the publisher's
//! tables carry over from frame to frame), and every frame that holds statements
//! becomes one item. A text body becomes one item, or one item per graph with
//! `split=graph`. Every item is a complete one-frame stream (options row first, tables
//! empty) — see `docs/server-design.md`: a Jelly frame is rewritten as one by a
//! [`Rebaser`] when the publisher's options fit the topic's, and any other item is
//! encoded with a fresh [`jelly::Encoder`].
//!
//! The whole body is checked before anything is appended: a bad statement anywhere
//! refuses the request.

use std::collections::HashMap;
use std::sync::Mutex;

use bytes::Bytes;
use jelly::oxrdf_adapter::from_ox_quad;
use jelly::rebase::{Rebased, Rebaser};
use jelly::{
    DecodeError, DecodeErrorKind, Decoder, DecoderOptions, Delimiting, EncodeError, Encoder,
    EncoderConfig, Event, FrameReader, StatementRef, StreamOptions, Term, TermRef,
};

use crate::item::NewItem;
use crate::publish_memory::{PublishMemoryFull, Reservation};
use crate::topic::TopicOptions;

/// Formats a publisher may send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputFormat {
    /// `application/x-jelly-rdf`: a delimited stream (or one non-delimited frame).
    Jelly,
    NQuads,
    NTriples,
    Turtle,
    TriG,
    /// `application/rdf+xml`.
    RdfXml,
    /// `application/ld+json`. Remote contexts are not fetched (a document that
    /// needs one is refused): the server makes no requests on a publisher's behalf.
    JsonLd,
}

impl InputFormat {
    /// From a `Content-Type` value (parameters such as `charset` are ignored).
    pub fn from_content_type(ct: &str) -> Option<InputFormat> {
        let mime = ct
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        Some(match mime.as_str() {
            "application/x-jelly-rdf" | "application/jelly" => InputFormat::Jelly,
            "application/n-quads" | "text/x-nquads" => InputFormat::NQuads,
            "application/n-triples" | "text/plain" => InputFormat::NTriples,
            "text/turtle" | "application/x-turtle" => InputFormat::Turtle,
            "application/trig" | "application/x-trig" => InputFormat::TriG,
            "application/rdf+xml" => InputFormat::RdfXml,
            "application/ld+json" => InputFormat::JsonLd,
            _ => return None,
        })
    }
}

/// The content types accepted by [`InputFormat::from_content_type`], for error messages.
pub const ACCEPTED_CONTENT_TYPES: &str = "application/x-jelly-rdf, application/n-quads, application/n-triples, text/turtle, application/trig, application/rdf+xml, application/ld+json";

/// What a publish request asks for besides its body.
#[derive(Debug, Clone, Default)]
pub struct PublishMeta {
    pub source: String,
    pub headers: Vec<(String, String)>,
    /// Text bodies: one item per graph instead of one for the whole body.
    pub split_graph: bool,
    /// Base IRI for relative IRIs in Turtle, TriG, RDF/XML and JSON-LD.
    pub base_iri: Option<String>,
}

/// Why a publisher's header cannot be stored with its items.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderRefusal {
    /// Nothing after the prefix (`X-Jelly-Header-` alone).
    NoName,
    /// The same name twice: there is no one value to store, and keeping the first or
    /// the last without saying so would lose the other.
    Twice,
}

impl PublishMeta {
    /// The prefix of the request headers (HTTP) and metadata keys (gRPC) that are
    /// stored with each item, as `h:<name>`.
    pub const HEADER_PREFIX: &str = "x-jelly-header-";

    /// Adds header `name` (what follows [`HEADER_PREFIX`](Self::HEADER_PREFIX) in the
    /// request's key), unless it is empty or already there.
    ///
    /// ```
    /// use jelly_server::ingest::{HeaderRefusal, PublishMeta};
    /// let mut m = PublishMeta::default();
    /// assert_eq!(m.add_header("unit", "C"), Ok(()));
    /// assert_eq!(m.add_header("unit", "F"), Err(HeaderRefusal::Twice));
    /// assert_eq!(m.add_header("", "x"), Err(HeaderRefusal::NoName));
    /// ```
    pub fn add_header(&mut self, name: &str, value: &str) -> Result<(), HeaderRefusal> {
        if name.is_empty() {
            return Err(HeaderRefusal::NoName);
        }
        if self.headers.iter().any(|(n, _)| n == name) {
            return Err(HeaderRefusal::Twice);
        }
        self.headers.push((name.to_string(), value.to_string()));
        Ok(())
    }

    /// Most bytes of metadata a publisher may give each item: its source and its
    /// headers, names and values. Well below the 64 KiB a log record holds besides its
    /// frame, so that an item within `max_item_bytes` always fits its record.
    pub const MAX_BYTES: usize = 16 << 10;

    /// Bytes of the source and headers.
    ///
    /// ```
    /// use jelly_server::ingest::PublishMeta;
    /// let m = PublishMeta { source: "s1".into(), headers: vec![("k".into(), "vv".into())], ..Default::default() };
    /// assert_eq!(m.size(), 5);
    /// ```
    pub fn size(&self) -> usize {
        crate::item::metadata_bytes(&self.source, &self.headers)
    }

    /// Refuses metadata over [`MAX_BYTES`](Self::MAX_BYTES), with the reason.
    pub fn check_size(&self) -> Result<(), String> {
        let size = self.size();
        if size > Self::MAX_BYTES {
            return Err(format!(
                "the item metadata (source and headers) is {size} bytes; at most {} are \
                 stored with each item",
                Self::MAX_BYTES
            ));
        }
        Ok(())
    }
}

/// Why a body was refused. Nothing of it was appended.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    /// Malformed input (400).
    #[error("{0}")]
    Invalid(String),
    /// A Jelly frame the decoder refused (400), with where it stands in the body.
    #[error("malformed Jelly: {0}")]
    Malformed(DecodeError),
    /// Input that is well-formed but does not fit the topic (422).
    #[error("{0}")]
    NotAllowed(String),
    /// An item over the size limit (413).
    #[error("item {index} is {size} bytes as a Jelly frame; the limit is {max}")]
    TooLarge {
        index: usize,
        size: usize,
        max: usize,
    },
    /// Items that together would take more than a request may store (413).
    #[error(
        "the items of this request would take more than {max} bytes (each item holds the \
         lookup entries it needs and the request's metadata, so {items} items of a small \
         body can be far larger than it); publish it in parts, or as a streaming publish"
    )]
    ItemsTooLarge { items: usize, max: usize },
    /// The server's memory for publishes in progress is taken (503).
    #[error(transparent)]
    MemoryFull(#[from] PublishMemoryFull),
}

/// Counts the bytes of the items a request makes, frames and metadata, against a
/// limit: a small body can make many times its size in items (a frame of a few bytes
/// that repeats long terms becomes an item holding them all; metadata is stored with
/// every item), and all of an atomic request's items are in memory before the append.
/// Each item is checked as it is made, so a request stops at its first item over
/// `max_item_bytes` rather than making the rest first; with a [`Reservation`], the
/// items are also counted against the server's memory for publishes in progress.
struct Budget<'r> {
    used: usize,
    items: usize,
    max: usize,
    max_item: usize,
    memory: Option<&'r mut Reservation>,
}

impl<'r> Budget<'r> {
    fn new(max: usize, max_item: usize, memory: Option<&'r mut Reservation>) -> Budget<'r> {
        Budget {
            used: 0,
            items: 0,
            max,
            max_item,
            memory,
        }
    }

    fn take(&mut self, item: &NewItem) -> Result<(), IngestError> {
        if item.frame.len() > self.max_item {
            return Err(IngestError::TooLarge {
                index: self.items,
                size: item.frame.len(),
                max: self.max_item,
            });
        }
        self.items += 1;
        self.hold(item.held_bytes())
    }

    /// Counts `bytes` held by the request's items, or on the way to them (statements
    /// kept until their item is made).
    fn hold(&mut self, bytes: usize) -> Result<(), IngestError> {
        self.used = self.used.saturating_add(bytes);
        if self.used > self.max {
            return Err(IngestError::ItemsTooLarge {
                items: self.items,
                max: self.max,
            });
        }
        if let Some(memory) = self.memory.as_deref_mut() {
            memory.grow(bytes)?;
        }
        Ok(())
    }

    /// Gives back what [`Budget::hold`] counted, once it is freed.
    fn release(&mut self, bytes: usize) {
        self.used = self.used.saturating_sub(bytes);
        if let Some(memory) = self.memory.as_deref_mut() {
            memory.shrink(bytes);
        }
    }
}

/// About what an owned copy of a statement takes: the statement, its strings, and the
/// statements of its quoted triples.
fn owned_bytes(st: StatementRef<'_>) -> usize {
    std::mem::size_of::<jelly::Statement>()
        + term_bytes(st.subject)
        + term_bytes(st.predicate)
        + term_bytes(st.object)
        + st.graph.map_or(0, term_bytes)
}

/// What an owned copy of a term takes beyond the term itself.
fn term_bytes(t: TermRef<'_>) -> usize {
    match t {
        TermRef::Iri(s) | TermRef::BlankNode(s) => s.len(),
        TermRef::Literal(l) => {
            l.lex.len()
                + match l.kind {
                    jelly::LiteralKind::Simple => 0,
                    jelly::LiteralKind::Lang(x) | jelly::LiteralKind::Typed(x) => x.len(),
                }
        }
        TermRef::Triple(t) => {
            std::mem::size_of::<jelly::Statement>()
                + term_bytes(t.subject())
                + term_bytes(t.predicate())
                + term_bytes(t.object())
        }
        TermRef::DefaultGraph => 0,
    }
}

/// Builds one item with a fresh encoder.
struct ItemBuilder {
    enc: Encoder,
    statements: u32,
}

impl ItemBuilder {
    fn new(opts: &StreamOptions) -> ItemBuilder {
        ItemBuilder {
            // The topic's options were validated when it was created.
            // Spliceable, so stored items can be served back to back without
            // re-encoding (see `docs/server-design.md`).
            enc: Encoder::with_config(
                opts.clone(),
                EncoderConfig {
                    spliceable: true,
                    ..EncoderConfig::default()
                },
            )
            .expect("topic stream options are valid"),
            statements: 0,
        }
    }

    fn add(&mut self, st: StatementRef<'_>) -> Result<(), EncodeError> {
        self.enc.add(st)?;
        self.statements = self.statements.saturating_add(1);
        Ok(())
    }

    /// The item so far. Before the next one, [`ItemBuilder::reset`].
    fn finish(&mut self, meta: &PublishMeta) -> NewItem {
        new_item(Bytes::from(self.enc.finish_frame()), self.statements, meta)
    }

    /// Drops what was added and starts a new item (keeping the encoder's buffers).
    fn reset(&mut self) {
        self.enc.reset();
        self.statements = 0;
    }
}

/// An item of `frame`, published with `meta`.
fn new_item(frame: Bytes, statements: u32, meta: &PublishMeta) -> NewItem {
    NewItem {
        frame,
        statements,
        source: meta.source.clone(),
        headers: meta.headers.clone(),
    }
}

fn not_allowed(item: usize, e: EncodeError, topic: &TopicOptions) -> IngestError {
    let hint = match e {
        EncodeError::WrongPhysicalType { .. } => {
            " (the topic holds triples; create it with physical=quads for named graphs)"
        }
        EncodeError::GeneralizedNotEnabled { .. } if !topic.rdf_star || !topic.generalized => {
            " (create the topic with rdf_star / generalized enabled)"
        }
        _ => "",
    };
    IngestError::NotAllowed(format!("item {item}: {e}{hint}"))
}

/// Turns a whole request body into items for `topic`.
///
/// ```
/// use jelly_server::ingest::{ingest, InputFormat, PublishMeta};
/// use jelly_server::topic::TopicOptions;
/// let body = b"<http://ex/s> <http://ex/p> <http://ex/o> <http://ex/g> .\n";
/// let items = ingest(body, InputFormat::NQuads, &TopicOptions::default(), &PublishMeta::default(), 1 << 20).unwrap();
/// assert_eq!(items.len(), 1);
/// ```
pub fn ingest(
    body: &[u8],
    format: InputFormat,
    topic: &TopicOptions,
    meta: &PublishMeta,
    max_item_bytes: usize,
) -> Result<Vec<NewItem>, IngestError> {
    ingest_with_paths(body, format, topic, meta, max_item_bytes, usize::MAX, None)
        .map(|(items, _)| items)
}

/// [`ingest`], also telling how the Jelly frames of the body were made into items (all
/// zero for a text body); the items may take at most `max_items_bytes` in all (frames
/// and metadata: [`NewItem::held_bytes`]), and are counted against `memory` as they
/// are made (the server's memory for publishes in progress) when it is given.
pub fn ingest_with_paths(
    body: &[u8],
    format: InputFormat,
    topic: &TopicOptions,
    meta: &PublishMeta,
    max_item_bytes: usize,
    max_items_bytes: usize,
    memory: Option<&mut Reservation>,
) -> Result<(Vec<NewItem>, IngestPaths), IngestError> {
    if body.is_empty() {
        return Err(IngestError::Invalid("empty body".into()));
    }
    let opts = topic.stream_options();
    let mut budget = Budget::new(max_items_bytes, max_item_bytes, memory);
    let (items, paths) = match format {
        InputFormat::Jelly => ingest_jelly(body, topic, meta, &mut budget)?,
        _ => (
            ingest_text(body, format, &opts, topic, meta, &mut budget)?,
            IngestPaths::default(),
        ),
    };
    if items.is_empty() {
        return Err(IngestError::Invalid("the body holds no statements".into()));
    }
    Ok((items, paths))
}

fn ingest_jelly(
    body: &[u8],
    topic: &TopicOptions,
    meta: &PublishMeta,
    budget: &mut Budget<'_>,
) -> Result<(Vec<NewItem>, IngestPaths), IngestError> {
    // A frame longer than an item may be is refused by its length prefix, as the
    // streaming publish does (413), before its bytes are looked at.
    let max_frame = DecoderOptions::default()
        .max_frame_bytes
        .min(budget.max_item as u64);
    let mut frames = FrameReader::from_slice(body, Delimiting::Auto, max_frame);
    let mut ingest = JellyIngest::pooled(topic, meta.clone(), usize::MAX);
    let mut read = || {
        let mut items = Vec::new();
        loop {
            let f = match frames.next_frame() {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(e) => {
                    // A body of one frame without a length prefix is that frame.
                    let whole = frames.delimiting() == Delimiting::Single;
                    return Err(frame_error(e, items.len(), whole.then_some(body.len())));
                }
            };
            if let Some(item) = ingest.frame_at(f.bytes, f.offset)? {
                budget.take(&item)?;
                items.push(item);
            }
        }
        Ok(items)
    };
    let items: Result<Vec<NewItem>, IngestError> = read();
    let paths = ingest.paths();
    ingest.recycle();
    Ok((items?, paths))
}

/// A frame the reader refused: by its length (413, as item `index`; `size`, the frame's
/// whole length when the reader stopped short of it), or malformed.
fn frame_error(e: DecodeError, index: usize, size: Option<usize>) -> IngestError {
    match e.kind {
        DecodeErrorKind::FrameTooLarge { len, max } => IngestError::TooLarge {
            index,
            size: size.unwrap_or_else(|| usize::try_from(len).unwrap_or(usize::MAX)),
            max: usize::try_from(max).unwrap_or(usize::MAX),
        },
        _ => IngestError::Malformed(e),
    }
}

/// How many published Jelly frames with statements were made into items by each path.
/// Counted by [`JellyIngest`] per publisher stream, and added to the server's
/// [`crate::metrics::Metrics`] by whoever publishes the items.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IngestPaths {
    /// Rebased: stored as sent, with the entries they use from earlier frames in front.
    pub rebased: u64,
    /// Decoded and re-encoded: the slower path, which a publisher whose options do not
    /// fit the topic's always takes.
    pub reencoded: u64,
}

/// Publisher streams of finished requests, kept for the next ones: a new
/// [`JellyIngest`] allocates a decoder's and an encoder's tables, a large share of the
/// cost of a one-item request.
static POOL: Mutex<Vec<JellyIngest>> = Mutex::new(Vec::new());

/// The most streams [`POOL`] keeps (each holds its tables: at most a few MiB).
const POOL_MAX: usize = 8;

/// Incremental ingestion of one publisher's Jelly stream, a frame at a time (streaming
/// HTTP publish, WebSocket, gRPC `PublishRdf`). The publisher's lookup tables and
/// repeated terms carry over from frame to frame, as in any Jelly stream; each frame
/// that holds statements becomes one self-contained item.
///
/// ```
/// use jelly_server::ingest::{JellyIngest, PublishMeta};
/// use jelly_server::topic::TopicOptions;
/// use jelly::{Encoder, StreamOptions, StatementRef, TermRef};
/// let mut enc = Encoder::new(StreamOptions::big().with_physical_type(jelly::PhysicalType::Quads)).unwrap();
/// enc.add(StatementRef::quad(TermRef::Iri("http://ex/s"), TermRef::Iri("http://ex/p"), TermRef::Iri("http://ex/o"), TermRef::Iri("http://ex/g"))).unwrap();
/// let frame = enc.finish_frame();
/// let mut ingest = JellyIngest::new(&TopicOptions::default(), PublishMeta::default(), 1 << 20);
/// let item = ingest.frame(&frame).unwrap().unwrap();
/// assert_eq!(item.statements, 1);
/// assert!(ingest.publisher_options().is_some());
/// ```
pub struct JellyIngest {
    dec: Decoder,
    /// Rewrites each frame as a self-contained item without re-encoding it, when the
    /// publisher's options fit the topic's (see `docs/server-design.md`, "Rebasing").
    rebaser: Rebaser,
    /// The rebaser's output, reused from frame to frame.
    rebased_frame: Vec<u8>,
    /// Writes each item the rebaser cannot; reset between items rather than made anew
    /// (a fresh encoder allocates its tables again, a large share of the cost of a
    /// small item).
    builder: ItemBuilder,
    topic: TopicOptions,
    meta: PublishMeta,
    max_item_bytes: usize,
    /// Items made so far (for error messages).
    items: usize,
    /// How those items were made.
    paths: IngestPaths,
    /// Bytes of the stream consumed so far (for error offsets).
    consumed: u64,
}

impl JellyIngest {
    /// A new publisher stream for a topic with `topic` options.
    pub fn new(topic: &TopicOptions, meta: PublishMeta, max_item_bytes: usize) -> JellyIngest {
        let opts = topic.stream_options();
        JellyIngest {
            dec: Decoder::new(DecoderOptions::default()),
            rebaser: Rebaser::new(&opts),
            rebased_frame: Vec::new(),
            builder: ItemBuilder::new(&opts),
            topic: topic.clone(),
            meta,
            max_item_bytes,
            items: 0,
            paths: IngestPaths::default(),
            consumed: 0,
        }
    }

    /// A publisher stream for a topic with `topic` options: one from the pool, reset,
    /// when one for the same options is there, else a new one.
    fn pooled(topic: &TopicOptions, meta: PublishMeta, max_item_bytes: usize) -> JellyIngest {
        let reused = {
            let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
            let at = pool.iter().position(|j| j.topic == *topic);
            at.map(|i| pool.swap_remove(i))
        };
        match reused {
            Some(j) => {
                // Every field named, so that a new one cannot be carried over from the
                // previous publisher by mistake: only the decoder's and the builder's
                // buffers are kept. The builder is reset by each frame.
                let JellyIngest {
                    mut dec,
                    mut rebaser,
                    rebased_frame,
                    builder,
                    topic,
                    meta: _,
                    max_item_bytes: _,
                    items: _,
                    paths: _,
                    consumed: _,
                } = j;
                dec.reset();
                rebaser.reset();
                JellyIngest {
                    dec,
                    rebaser,
                    rebased_frame,
                    builder,
                    topic,
                    meta,
                    max_item_bytes,
                    items: 0,
                    paths: IngestPaths::default(),
                    consumed: 0,
                }
            }
            None => JellyIngest::new(topic, meta, max_item_bytes),
        }
    }

    /// Gives the stream back to the pool (it is reset when taken again).
    fn recycle(self) {
        let mut pool = POOL.lock().unwrap_or_else(|e| e.into_inner());
        if pool.len() < POOL_MAX {
            pool.push(self);
        }
    }

    /// How the items made so far were made: rebased or re-encoded.
    pub fn paths(&self) -> IngestPaths {
        self.paths
    }

    /// The stream options the publisher declared (after its first frame).
    pub fn publisher_options(&self) -> Option<&StreamOptions> {
        self.dec.options()
    }

    /// Decodes the next frame (a bare `RdfStreamFrame` message). Returns its item, or
    /// `None` for a frame without statements (options or namespaces only). After an
    /// error the stream is unusable: the decoder state is no longer trustworthy.
    pub fn frame(&mut self, bytes: &[u8]) -> Result<Option<NewItem>, IngestError> {
        let at = self.consumed;
        self.consumed += bytes.len() as u64;
        self.frame_at(bytes, at)
    }

    /// [`JellyIngest::frame`] with the frame's byte offset in the publisher's stream.
    pub fn frame_at(&mut self, bytes: &[u8], offset: u64) -> Result<Option<NewItem>, IngestError> {
        let index = self.items;
        // The rebaser reads the decoder's tables as they are before this frame.
        let rebased = self
            .rebaser
            .rebase(bytes, &self.dec, &mut self.rebased_frame);
        // Decoded either way: the decoder checks the frame and follows the stream's
        // tables for the frames after it; a frame not rebased is re-encoded from it.
        let reencode = !matches!(rebased, Rebased::Frame { .. });
        let b = &mut self.builder;
        b.reset();
        let mut decoded = 0u32;
        let mut cur = self.dec.frame_at(bytes, offset);
        while let Some(ev) = cur.next_event().map_err(IngestError::Malformed)? {
            if let Event::Statement(st) = ev {
                decoded += 1;
                if reencode {
                    b.add(st).map_err(|e| not_allowed(index, e, &self.topic))?;
                }
            }
        }
        let item = match rebased {
            Rebased::Frame { statements } => {
                if decoded != statements {
                    // The rebaser follows the same rules; a difference is a bug, and
                    // the item is refused rather than stored wrong.
                    return Err(IngestError::Invalid(format!(
                        "item {index}: the frame could not be stored as it was sent \
                         ({statements} statements rewritten, {decoded} decoded)"
                    )));
                }
                self.paths.rebased += 1;
                // Copied out at its exact size: items stay in memory (fan-out ring,
                // pending batches), and a grown buffer can be twice its length.
                let frame = Bytes::copy_from_slice(&self.rebased_frame);
                new_item(frame, statements, &self.meta)
            }
            Rebased::NoStatements | Rebased::Unsupported(_) => {
                if decoded == 0 {
                    return Ok(None);
                }
                self.paths.reencoded += 1;
                b.finish(&self.meta)
            }
        };
        if item.frame.len() > self.max_item_bytes {
            return Err(IngestError::TooLarge {
                index,
                size: item.frame.len(),
                max: self.max_item_bytes,
            });
        }
        self.items += 1;
        Ok(Some(item))
    }
}

/// Groups statements into items: one for all, or one per graph (in order of first
/// appearance).
///
/// One item is encoded as the statements come. Split by graph, the statements are kept
/// per graph and encoded at the end with one builder, reset between graphs: a builder
/// per graph would hold a whole encoder's tables for each of what can be tens of
/// thousands of graphs in one body. The statements kept are counted in the budget as
/// items are: a short prefixed name of Turtle or TriG is a whole IRI in each, so a
/// 67 KB body once held 197 MB of them, uncounted.
struct Grouper<'a, 'r> {
    topic: &'a TopicOptions,
    split: bool,
    whole: ItemBuilder,
    /// With `split`: each graph's statements, in order of first appearance, and
    /// what they hold ([`owned_bytes`]).
    graphs: Vec<(Vec<jelly::Statement>, usize)>,
    by_graph: HashMap<Term, usize>,
    budget: &'a mut Budget<'r>,
}

impl Grouper<'_, '_> {
    fn add(&mut self, st: StatementRef<'_>) -> Result<(), IngestError> {
        if !self.split {
            return self
                .whole
                .add(st)
                .map_err(|e| not_allowed(0, e, self.topic));
        }
        let key = match st.graph {
            None | Some(TermRef::DefaultGraph) => Term::DefaultGraph,
            Some(g) => g.to_owned(),
        };
        let idx = match self.by_graph.get(&key) {
            Some(&i) => i,
            None => {
                // A new graph's name is kept once more, as the key of its entry.
                self.budget
                    .hold(std::mem::size_of::<Term>() + term_bytes(key.as_ref()))?;
                self.graphs.push((Vec::new(), 0));
                self.by_graph.insert(key, self.graphs.len() - 1);
                self.graphs.len() - 1
            }
        };
        let bytes = owned_bytes(st);
        self.budget.hold(bytes)?;
        let (statements, held) = &mut self.graphs[idx];
        statements.push(st.to_owned());
        *held += bytes;
        Ok(())
    }

    /// The items, each counted against the budget as it is made (and each graph's
    /// statements given back once its item is).
    fn finish(mut self, meta: &PublishMeta) -> Result<Vec<NewItem>, IngestError> {
        if !self.split {
            if self.whole.statements == 0 {
                return Ok(Vec::new());
            }
            let item = self.whole.finish(meta);
            self.budget.take(&item)?;
            return Ok(vec![item]);
        }
        let mut items = Vec::with_capacity(self.graphs.len());
        for (idx, (statements, held)) in std::mem::take(&mut self.graphs).into_iter().enumerate() {
            self.whole.reset();
            for st in &statements {
                self.whole
                    .add(st.as_ref())
                    .map_err(|e| not_allowed(idx, e, self.topic))?;
            }
            drop(statements);
            self.budget.release(held);
            let item = self.whole.finish(meta);
            self.budget.take(&item)?;
            items.push(item);
        }
        Ok(items)
    }
}

fn ingest_text(
    body: &[u8],
    format: InputFormat,
    opts: &StreamOptions,
    topic: &TopicOptions,
    meta: &PublishMeta,
    budget: &mut Budget<'_>,
) -> Result<Vec<NewItem>, IngestError> {
    let mut g = Grouper {
        topic,
        split: meta.split_graph,
        whole: ItemBuilder::new(opts),
        graphs: Vec::new(),
        by_graph: HashMap::new(),
        budget,
    };
    // A UTF-8 byte-order mark, which some editors write, starts no statement (XML
    // parsers skip one themselves, and count their byte offsets from it).
    let whole = body.len();
    let body = match format {
        InputFormat::RdfXml => body,
        _ => body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(body),
    };
    if matches!(format, InputFormat::Turtle | InputFormat::TriG) {
        // Before oxttl, which recurses once per level of triple terms and brackets.
        // (N-Triples and N-Quads go through jelly's line parser, which bounds the
        // nesting of triple terms itself, in the same pass.)
        jelly::text_nesting::NestingScanner::new(jelly::text_nesting::MAX_TEXT_NESTING)
            .feed(body)
            .map_err(|e| IngestError::Invalid(e.to_string()))?;
    }
    match format {
        InputFormat::NQuads | InputFormat::NTriples => {
            let text = std::str::from_utf8(body).map_err(|e| {
                // Counted in the body as sent, byte-order mark included.
                let at = e.valid_up_to() + (whole - body.len());
                let line = jelly::text_position::utf8_error_position(body, &e).line;
                IngestError::Invalid(format!("invalid UTF-8 at line {line} (byte offset {at})"))
            })?;
            // Strict as oxttl (and so as the Turtle path): valid absolute IRIs, well-formed
            // language tags. Quoted triples and generalized terms are read here and
            // allowed or refused by the topic's options when encoded.
            let mut parser = jelly::nquads::LineParser::strict(jelly::nquads::Extensions {
                quoted_triples: true,
                generalized: true,
            });
            for (i, line) in jelly::nquads::lines(text).enumerate() {
                let st = parser.parse(line, i + 1).map_err(|e| {
                    let hint = if e.message.contains("is relative") {
                        "; Turtle and TriG resolve relative IRIs against ?base="
                    } else {
                        ""
                    };
                    IngestError::Invalid(format!("syntax error: {e}{hint}"))
                })?;
                if let Some(st) = st {
                    if format == InputFormat::NTriples && st.graph.is_some() {
                        return Err(IngestError::Invalid(format!(
                            "line {}: a quad in N-Triples (send it as application/n-quads)",
                            i + 1
                        )));
                    }
                    g.add(st)?;
                }
            }
        }
        InputFormat::Turtle => {
            let mut p = oxttl::TurtleParser::new();
            if let Some(b) = &meta.base_iri {
                p = p.with_base_iri(b.as_str()).map_err(bad_base_iri)?;
            }
            for t in p.for_slice(body) {
                let t = t.map_err(|e| IngestError::Invalid(format!("syntax error: {e}")))?;
                let mut holder = None;
                g.add(jelly::oxrdf_adapter::from_ox_triple(
                    t.as_ref(),
                    &mut holder,
                ))?;
            }
        }
        InputFormat::RdfXml => {
            // The parser expands declared entities in full: bombs are refused first.
            jelly::xml_guard::XmlGuard::default()
                .feed(body)
                .map_err(|e| IngestError::Invalid(e.to_string()))?;
            // Parsed without oxrdfio, whose RDF/XML errors tell no position: the
            // parser's byte offset at the error gives its line and column.
            let mut p = oxrdfxml::RdfXmlParser::new();
            if let Some(b) = &meta.base_iri {
                p = p.with_base_iri(b.as_str()).map_err(bad_base_iri)?;
            }
            let mut it = p.for_slice(body);
            while let Some(t) = it.next() {
                let t = t.map_err(|e| {
                    let byte = usize::try_from(it.buffer_position()).unwrap_or(usize::MAX);
                    let at = jelly::text_position::position_in(body, byte);
                    IngestError::Invalid(format!(
                        "syntax error at line {} column {} (byte offset {byte}): {e}",
                        at.line, at.column
                    ))
                })?;
                let mut holder = None;
                g.add(jelly::oxrdf_adapter::from_ox_triple(
                    t.as_ref(),
                    &mut holder,
                ))?;
            }
        }
        InputFormat::TriG => {
            let mut p = oxrdfio::RdfParser::from_format(oxrdfio::RdfFormat::TriG);
            if let Some(b) = &meta.base_iri {
                p = p.with_base_iri(b.as_str()).map_err(bad_base_iri)?;
            }
            for q in p.for_slice(body) {
                let q = q.map_err(|e| IngestError::Invalid(format!("syntax error: {e}")))?;
                add_quad(&mut g, &q)?;
            }
        }
        InputFormat::JsonLd => {
            let mut p = oxrdfio::RdfParser::from_format(oxrdfio::RdfFormat::JsonLd {
                profile: oxrdfio::JsonLdProfileSet::empty(),
            });
            if let Some(b) = &meta.base_iri {
                p = p.with_base_iri(b.as_str()).map_err(bad_base_iri)?;
            }
            // The parser holds a top-level object whole, at about twenty times its size:
            // a large body is parsed in parts (see `jelly::jsonld_parts`).
            let mut parts = jelly::jsonld_parts::JsonLdParts::new(body);
            while let Some(part) = parts
                .next_part()
                .map_err(|e| IngestError::Invalid(format!("JSON-LD: {e}")))?
            {
                for q in p.clone().for_slice(&part.text).with_document_loader(|_| {
                    Err(jelly::jsonld_parts::REMOTE_CONTEXT_REFUSED.into())
                }) {
                    let q = q.map_err(|e| jsonld_syntax_error(&part.map, e))?;
                    add_quad(&mut g, &q)?;
                }
            }
        }
        InputFormat::Jelly => unreachable!("handled by ingest_jelly"),
    }
    g.finish(meta)
}

/// Adds a statement of the TriG or JSON-LD parser (its default graph is no graph).
fn add_quad(g: &mut Grouper<'_, '_>, q: &oxrdf::Quad) -> Result<(), IngestError> {
    let mut holder = None;
    let mut st = from_ox_quad(q.as_ref(), &mut holder);
    if st.graph == Some(TermRef::DefaultGraph) {
        st.graph = None;
    }
    g.add(st)
}

/// The error of the JSON-LD parser in `part`, placed in the body.
fn jsonld_syntax_error(
    part: &jelly::jsonld_parts::PartMap,
    e: oxrdfio::RdfSyntaxError,
) -> IngestError {
    use jelly::jsonld_parts::ErrorPlace;
    let location = e.location().map(|l| (l.start.line, l.start.column));
    let text = e.to_string();
    IngestError::Invalid(match part.error_place(location) {
        // Parsed whole: the parser's own message tells where, as for other formats.
        _ if part.whole => format!("syntax error: {text}"),
        ErrorPlace::Unknown => format!("syntax error: {text}"),
        place => format!("syntax error at {place}: {}", part.message(&text)),
    })
}

/// The error of a publisher's base IRI (`?base=`) that is no IRI.
fn bad_base_iri(e: impl std::fmt::Display) -> IngestError {
    IngestError::Invalid(format!("bad base IRI: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topic::Physical;

    fn decode_item(frame: &[u8]) -> Vec<jelly::Statement> {
        let mut r =
            jelly::JellyReader::with_options(frame, DecoderOptions::default(), Delimiting::Single);
        let frames = r.read_all_frames().unwrap();
        assert_eq!(frames.len(), 1);
        frames.into_iter().next().unwrap()
    }

    /// A continuous publisher stream of real data (tables, IRI deltas and repeated
    /// terms carry over from frame to frame) into a TRIPLES and a QUADS topic: every
    /// frame is stored rebased, and each item means alone, and spliced after the
    /// others, what its frame meant in the stream.
    #[test]
    fn continuous_streams_are_rebased() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../shared/datasets/iot-assist-weather/iot-assist-weather.nt"
        );
        let text = std::fs::read_to_string(path).unwrap();
        let statements: Vec<jelly::Statement> = text
            .lines()
            .take(2000)
            .enumerate()
            .filter_map(|(i, l)| jelly::nquads::parse_line(l, i + 1).unwrap())
            .collect();
        for physical in [Physical::Triples, Physical::Quads] {
            let topic = TopicOptions {
                physical,
                ..TopicOptions::default()
            };
            let mut enc = Encoder::new(StreamOptions::big()).unwrap();
            let mut reference = Decoder::default();
            let mut spliced = Decoder::default();
            let mut ing = JellyIngest::new(&topic, PublishMeta::default(), 1 << 20);
            for (k, chunk) in statements.chunks(50).enumerate() {
                for s in chunk {
                    enc.add(s.as_ref()).unwrap();
                }
                let frame = enc.finish_frame();
                let mut want = Vec::new();
                let mut cur = reference.frame(&frame);
                while let Some(ev) = cur.next_event().unwrap() {
                    if let Event::Statement(st) = ev {
                        let mut st = st.to_owned();
                        if physical == Physical::Quads {
                            st.graph = Some(jelly::Term::DefaultGraph);
                        }
                        want.push(st);
                    }
                }
                let item = ing.frame(&frame).unwrap().unwrap();
                assert_eq!(item.statements as usize, want.len());
                assert_eq!(decode_item(&item.frame), want, "item {k} alone");
                let skip = if k == 0 {
                    0
                } else {
                    jelly::splice::options_row_len(&item.frame).unwrap()
                };
                let mut got = Vec::new();
                let mut cur = spliced.frame(&item.frame[skip..]);
                while let Some(ev) = cur.next_event().unwrap() {
                    if let Event::Statement(st) = ev {
                        got.push(st.to_owned());
                    }
                }
                assert_eq!(got, want, "item {k} spliced");
            }
            assert_eq!(
                ing.paths(),
                IngestPaths {
                    rebased: 40,
                    reencoded: 0
                },
                "{physical:?}"
            );
        }
    }

    /// N-Triples / N-Quads are read as strictly as oxttl reads them (and so as the
    /// Turtle path): every negative W3C syntax test is refused, every positive one
    /// accepted, and so are IRIs and language tags that only a full check refuses.
    #[test]
    fn n_triples_ingest_is_as_strict_as_oxttl() {
        let t = TopicOptions {
            physical: Physical::Quads,
            ..TopicOptions::default()
        };
        let m = PublishMeta::default();
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../jelly/tests/data/w3c-nt");
        let (mut negatives, mut positives) = (0, 0);
        for (suite, format) in [
            ("rdf-n-triples", InputFormat::NTriples),
            ("rdf-n-quads", InputFormat::NQuads),
        ] {
            for entry in std::fs::read_dir(dir.join(suite)).unwrap() {
                let path = entry.unwrap().path();
                let body = std::fs::read(&path).unwrap();
                let r = ingest(&body, format, &t, &m, 1 << 20);
                if path.to_string_lossy().contains("-bad-") {
                    negatives += 1;
                    assert!(r.is_err(), "accepted {}", path.display());
                } else {
                    positives += 1;
                    // A body of comments and blank lines only is refused as empty.
                    let empty = oxttl::NQuadsParser::new().for_slice(&body).next().is_none();
                    match r {
                        Err(IngestError::Invalid(e))
                            if empty && (e.contains("no statements") || e == "empty body") => {}
                        r => assert!(r.is_ok(), "refused {}: {:?}", path.display(), r.err()),
                    }
                }
            }
        }
        assert_eq!((negatives, positives), (63, 98));
        for (body, what) in [
            (
                "<http://e/s> <http://e/p> \"x\"@en-abcdefghi .\n",
                "language tag",
            ),
            (
                "<http://e/s> <http://e/p> \"x\"@abcdefghi .\n",
                "language tag",
            ),
            (
                "<http://e:80x/s> <http://e/p> <http://e/o> .\n",
                "invalid IRI",
            ),
            (
                "<http://e/s> <http://[::1/p> <http://e/o> .\n",
                "invalid IRI",
            ),
            (
                "<http://e/s> <http://e/p> <http://e/%zz> .\n",
                "invalid IRI",
            ),
            (
                "<http://e/s> <http://e/p> \"1\"^^<http://e:x/int> .\n",
                "invalid IRI",
            ),
            ("_:a:b <http://e/p> <http://e/o> .\n", "line 1"),
        ] {
            let e = ingest(body.as_bytes(), InputFormat::NTriples, &t, &m, 1 << 20).unwrap_err();
            let text = e.to_string();
            assert!(
                text.contains(what) && text.contains("line 1"),
                "{body}: {text}"
            );
            // The Turtle path refuses it too.
            assert!(
                ingest(body.as_bytes(), InputFormat::Turtle, &t, &m, 1 << 20).is_err(),
                "{body}"
            );
        }
    }

    /// N-Triples and N-Quads take absolute IRIs only: a relative one (in any
    /// position, a datatype or a quoted triple) is refused with its line.
    #[test]
    fn relative_iris_in_n_triples_are_refused() {
        let t = TopicOptions {
            rdf_star: true,
            ..TopicOptions::default()
        };
        let m = PublishMeta::default();
        for (body, iri) in [
            (
                "<http://e/s> <http://e/p> <http://e/o> .\n<s> <http://e/p> <http://e/o> .\n",
                "s",
            ),
            ("<http://e/s> <http://e/p> \"1\"^^<int> .\n", "int"),
            (
                "<http://e/s> <http://e/p> <<( <http://e/a> <b> <http://e/c> )>> .\n",
                "b",
            ),
            ("<http://e/s> <http://e/p> <http://e/o> <g> .\n", "g"),
        ] {
            let e = ingest(body.as_bytes(), InputFormat::NQuads, &t, &m, 1 << 20).unwrap_err();
            let text = e.to_string();
            assert!(text.contains(&format!("<{iri}> is relative")), "{text}");
        }
        let e = ingest(
            b"\n\n<s> <p> <o> .\n",
            InputFormat::NTriples,
            &t,
            &m,
            1 << 20,
        )
        .unwrap_err();
        assert!(e.to_string().contains("line 3"), "{e}");
        for ok in [
            "<urn:x:1> <http://e/p> <mailto:a@b.c> .\n",
            "_:b <tag:x,2024:p> \"v\" .\n",
        ] {
            assert!(
                ingest(ok.as_bytes(), InputFormat::NTriples, &t, &m, 1 << 20).is_ok(),
                "{ok}"
            );
        }
    }

    /// Invalid UTF-8 is located on the line the line parser would name: lines end at
    /// LF, CRLF or a lone CR.
    #[test]
    fn invalid_utf8_names_its_line_whatever_the_line_ends() {
        let t = TopicOptions::default();
        let m = PublishMeta::default();
        for end in ["\n", "\r\n", "\r"] {
            let good = format!("<http://e/s> <http://e/p> \"a\" .{end}");
            let mut body = good.repeat(2).into_bytes();
            body.extend_from_slice(b"<http://e/s> <http://e/p> \"\xff\" .\n");
            let e = ingest(&body, InputFormat::NTriples, &t, &m, 1 << 20).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!(
                    "invalid UTF-8 at line 3 (byte offset {})",
                    2 * good.len() + 27
                ),
                "{end:?}"
            );
        }
    }

    #[test]
    fn trig_split_by_graph() {
        let body =
            b"<s> <p> <o> .\n<g1> { <s> <p> <o1> . }\n<g2> { <s> <p> <o2> . <s> <p> <o3> . }\n";
        let meta = PublishMeta {
            split_graph: true,
            base_iri: Some("http://ex/".into()),
            ..Default::default()
        };
        let items = ingest(
            body,
            InputFormat::TriG,
            &TopicOptions::default(),
            &meta,
            1 << 20,
        )
        .unwrap();
        assert_eq!(
            items.iter().map(|i| i.statements).collect::<Vec<_>>(),
            [1, 1, 2]
        );
        let st = decode_item(&items[2].frame);
        assert_eq!(st[0].graph, Some(Term::Iri("http://ex/g2".into())));
    }

    #[test]
    fn split_graph_keeps_graphs_apart_in_order_of_first_appearance() {
        // Interleaved graphs: each item holds its graph's statements, in order.
        let body = b"<http://ex/s> <http://ex/p> <http://ex/a> <http://ex/g1> .\n\
<http://ex/s> <http://ex/p> <http://ex/b> <http://ex/g2> .\n\
<http://ex/s> <http://ex/p> <http://ex/c> <http://ex/g1> .\n";
        let meta = PublishMeta {
            split_graph: true,
            ..Default::default()
        };
        let t = TopicOptions::default();
        let items = ingest(body, InputFormat::NQuads, &t, &meta, 1 << 20).unwrap();
        assert_eq!(items.len(), 2);
        let g1 = decode_item(&items[0].frame);
        let objects: Vec<_> = g1.iter().map(|s| s.object.clone()).collect();
        assert_eq!(
            objects,
            [
                Term::Iri("http://ex/a".into()),
                Term::Iri("http://ex/c".into())
            ]
        );
        assert!(
            g1.iter()
                .all(|s| s.graph == Some(Term::Iri("http://ex/g1".into())))
        );
        assert_eq!(items[1].statements, 1);
    }

    #[test]
    fn statements_kept_for_split_graphs_are_counted() {
        // A long prefix: each statement kept until its graph's item is made holds the
        // whole IRI, about 100 KB, from a body of about 100 KB plus 30 bytes a line.
        let long = "x".repeat(100_000);
        let mut body = format!("@prefix p: <http://ex/{long}/> .\n");
        for i in 0..200 {
            body.push_str(&format!("GRAPH p:g {{ p:a{i} p:b p:c . }}\n"));
        }
        let t = TopicOptions::default();
        let m = PublishMeta {
            split_graph: true,
            ..PublishMeta::default()
        };
        let ingest = |max_items: usize, memory: Option<&mut Reservation>| {
            ingest_with_paths(
                body.as_bytes(),
                InputFormat::TriG,
                &t,
                &m,
                16 << 20,
                max_items,
                memory,
            )
        };
        // Refused while the statements are read (over 100 of them pass 10 MB), not
        // only once its one item is made (a few hundred KB: its IRIs share a prefix).
        let e = ingest(10_000_000, None).unwrap_err();
        assert!(
            matches!(e, IngestError::ItemsTooLarge { items: 0, .. }),
            "{e}"
        );
        let pool = crate::publish_memory::PublishMemory::new(10_000_000);
        let mut share = pool.reservation();
        let e = ingest(usize::MAX, Some(&mut share)).unwrap_err();
        assert!(matches!(e, IngestError::MemoryFull(_)), "{e}");
        drop(share);
        assert_eq!(pool.in_use(), 0);
        // Accepted with room: once the item is made, the statements are given back
        // and the share holds the item (and the graph's name, kept as a key).
        let pool = crate::publish_memory::PublishMemory::new(0);
        let mut share = pool.reservation();
        let (items, _) = ingest(usize::MAX, Some(&mut share)).unwrap();
        assert_eq!(items.len(), 1);
        assert!(share.held() >= items[0].held_bytes());
        assert!(
            share.held() < items[0].held_bytes() + 200_000,
            "{}",
            share.held()
        );
    }

    #[test]
    fn what_a_request_makes_is_bounded_not_just_its_body() {
        // Frames of a few bytes that repeat a long term: each item holds the term.
        let long = format!("http://ex/{}", "x".repeat(100_000));
        let mut buf = Vec::new();
        let quads = StreamOptions::big().with_physical_type(jelly::PhysicalType::Quads);
        let mut w = jelly::JellyWriterBuilder::new(quads)
            .frame_policy(jelly::FramePolicy::Manual)
            .build(&mut buf)
            .unwrap();
        for _ in 0..50 {
            w.add(StatementRef::quad(
                TermRef::Iri(&long),
                TermRef::Iri("http://ex/p"),
                TermRef::Iri("http://ex/o"),
                TermRef::Iri("http://ex/g"),
            ))
            .unwrap();
            w.flush_frame().unwrap();
        }
        w.finish().unwrap();
        assert!(buf.len() < 110_000, "the body is small: {}", buf.len());
        let t = TopicOptions::default();
        let m = PublishMeta::default();
        let max = 1 << 20;
        let e = ingest_with_paths(&buf, InputFormat::Jelly, &t, &m, max, max, None).unwrap_err();
        assert!(matches!(e, IngestError::ItemsTooLarge { .. }), "{e}");
        assert!(e.to_string().contains("streaming publish"), "{e}");
        let (items, _) =
            ingest_with_paths(&buf, InputFormat::Jelly, &t, &m, max, 16 << 20, None).unwrap();
        assert_eq!(items.len(), 50);
        // Counted against the server's publish memory too, as they are made: a pool
        // with room for 20 of these items refuses the request at the 21st.
        let one = items[0].held_bytes();
        let with_memory = |pool: &std::sync::Arc<crate::publish_memory::PublishMemory>| {
            let mut share = pool.reservation();
            let got = ingest_with_paths(
                &buf,
                InputFormat::Jelly,
                &t,
                &m,
                max,
                16 << 20,
                Some(&mut share),
            );
            (got, share)
        };
        let pool = crate::publish_memory::PublishMemory::new(20 * one + one / 2);
        let (got, share) = with_memory(&pool);
        assert!(matches!(got, Err(IngestError::MemoryFull(_))), "{got:?}");
        assert_eq!(share.held(), 20 * one);
        drop(share);
        assert_eq!(pool.in_use(), 0);
        let (got, share) = with_memory(&crate::publish_memory::PublishMemory::new(0));
        assert!(got.is_ok());
        assert_eq!(share.held(), 50 * one);
        // An item over `max_item_bytes` stops the request there, before the rest are
        // made: were the items made first, the third would pass `max_items` (250,000)
        // and the request would be refused for that instead.
        let e =
            ingest_with_paths(&buf, InputFormat::Jelly, &t, &m, 1000, 250_000, None).unwrap_err();
        assert!(matches!(e, IngestError::TooLarge { index: 0, .. }), "{e}");
        // Metadata is stored with every item: counted too.
        let mut body = String::new();
        for g in 0..100 {
            body.push_str(&format!(
                "<http://ex/s> <http://ex/p> \"v\" <http://ex/g{g}> .\n"
            ));
        }
        let meta = PublishMeta {
            split_graph: true,
            source: "s".repeat(10_000),
            ..Default::default()
        };
        let e = ingest_with_paths(
            body.as_bytes(),
            InputFormat::NQuads,
            &t,
            &meta,
            max,
            500_000,
            None,
        )
        .unwrap_err();
        assert!(matches!(e, IngestError::ItemsTooLarge { .. }), "{e}");
        let (items, _) = ingest_with_paths(
            body.as_bytes(),
            InputFormat::NQuads,
            &t,
            &meta,
            max,
            2 << 20,
            None,
        )
        .unwrap();
        assert_eq!(items.len(), 100);
    }

    #[test]
    fn jelly_frames_become_self_contained_items() {
        let mut buf = Vec::new();
        let mut w = jelly::JellyWriterBuilder::new(StreamOptions::small())
            .frame_policy(jelly::FramePolicy::Manual)
            .build(&mut buf)
            .unwrap();
        let s = TermRef::Iri("http://ex/s");
        for i in 0..3 {
            let o = format!("http://ex/o{i}");
            w.add(StatementRef::triple(
                s,
                TermRef::Iri("http://ex/p"),
                TermRef::Iri(&o),
            ))
            .unwrap();
            w.flush_frame().unwrap();
        }
        w.finish().unwrap();
        let opts = TopicOptions {
            physical: Physical::Triples,
            ..Default::default()
        };
        let items = ingest(
            &buf,
            InputFormat::Jelly,
            &opts,
            &PublishMeta::default(),
            1 << 20,
        )
        .unwrap();
        assert_eq!(items.len(), 3);
        // Frame 2 of the publisher's stream repeats terms from frame 0; the item does not need it.
        let st = decode_item(&items[2].frame);
        assert_eq!(st[0].subject, Term::Iri("http://ex/s".into()));
        assert_eq!(st[0].object, Term::Iri("http://ex/o2".into()));
    }

    #[test]
    fn refusals() {
        let t = TopicOptions {
            physical: Physical::Triples,
            ..Default::default()
        };
        let m = PublishMeta::default();
        assert!(matches!(
            ingest(
                b"<http://e/s> <http://e/p> <http://e/o> <http://e/g> .\n",
                InputFormat::NQuads,
                &t,
                &m,
                1 << 20
            ),
            Err(IngestError::NotAllowed(_))
        ));
        assert!(matches!(
            ingest(b"<s> <p> .\n", InputFormat::NQuads, &t, &m, 1 << 20),
            Err(IngestError::Invalid(_))
        ));
        assert!(matches!(
            ingest(b"\x05\x0a\x03", InputFormat::Jelly, &t, &m, 1 << 20),
            Err(IngestError::Malformed(_))
        ));
        assert!(matches!(
            ingest(
                b"<http://s> <http://p> <http://o> .\n",
                InputFormat::NTriples,
                &t,
                &m,
                10
            ),
            Err(IngestError::TooLarge { .. })
        ));
        // A length prefix over the item limit: 413 by its length, as the streaming
        // publish answers (it was 400, against the decoder's own 64 MiB limit).
        let mut body = vec![0x80, 0x80, 0x80, 0x80, 0x01];
        body.extend_from_slice(b"\x05\x0a\x03");
        let e = ingest(&body, InputFormat::Jelly, &t, &m, 16 << 20).unwrap_err();
        assert!(
            matches!(
                e,
                IngestError::TooLarge {
                    index: 0,
                    size: 268_435_456,
                    max: 16_777_216
                }
            ),
            "{e}"
        );
        // One frame without a length prefix over the limit: its size is the body's.
        let mut enc = Encoder::new(StreamOptions::big()).unwrap();
        for i in 0..200 {
            let s = format!("http://e/s{i}");
            let st = StatementRef::triple(
                TermRef::Iri(&s),
                TermRef::Iri("http://e/p"),
                TermRef::Iri("http://e/o"),
            );
            enc.add(st).unwrap();
        }
        let frame = enc.finish_frame();
        let e = ingest(&frame, InputFormat::Jelly, &t, &m, 1000).unwrap_err();
        assert!(
            matches!(e, IngestError::TooLarge { index: 0, size, max: 1000 } if size == frame.len()),
            "{e} ({} bytes)",
            frame.len()
        );
    }

    /// Nesting of brackets in Turtle and TriG is bounded before the parser, which keeps
    /// a state per open bracket (a million `[` took 557 MB).
    #[test]
    fn deep_brackets_are_refused_before_parsing() {
        let t = TopicOptions::default();
        let m = PublishMeta::default();
        let max = jelly::text_nesting::MAX_BRACKET_NESTING;
        let nest = |n: usize| {
            format!(
                "<http://e/s> <http://e/p> {}<http://e/o>{} .\n",
                "[ <http://e/p> ".repeat(n),
                " ]".repeat(n)
            )
        };
        for format in [InputFormat::Turtle, InputFormat::TriG] {
            assert!(ingest(nest(max).as_bytes(), format, &t, &m, 1 << 24).is_ok());
            let Err(IngestError::Invalid(e)) =
                ingest(nest(max + 1).as_bytes(), format, &t, &m, 1 << 24)
            else {
                panic!("not refused");
            };
            assert!(
                e.contains(&format!(
                    "nested deeper than {max} levels (line 1, byte offset"
                )),
                "{e}"
            );
        }
    }

    /// A JSON-LD top-level array is parsed in parts (the parser holds an object whole):
    /// an error in one tells its place in the body, not in the part.
    #[test]
    fn json_ld_in_parts_tells_places_in_the_body() {
        let t = TopicOptions::default();
        let m = PublishMeta::default();
        let ok = "[{\"@id\": \"http://e/a\", \"http://e/p\": 1},\n {\"@id\": \"http://e/b\", \"http://e/p\": 2}]";
        let items = ingest(ok.as_bytes(), InputFormat::JsonLd, &t, &m, 1 << 20).unwrap();
        assert_eq!(decode_item(&items[0].frame).len(), 2);
        let bad =
            "[{\"@id\": \"http://e/a\"},\n {\"@id\": \"http://e/b\",\n  \"http://e/p\": tru}]";
        let Err(IngestError::Invalid(e)) =
            ingest(bad.as_bytes(), InputFormat::JsonLd, &t, &m, 1 << 20)
        else {
            panic!("not refused");
        };
        assert_eq!(e, "syntax error at line 3 column 17: true expected");
    }

    /// Jelly bodies reuse pooled publisher streams: each body decodes as with a fresh
    /// decoder, whatever came before it (a body that leans on an earlier body's
    /// repeated terms is refused, as a fresh decoder refuses it).
    #[test]
    fn pooled_streams_decode_each_body_as_a_fresh_one() {
        use jelly::{Encoder, StatementRef, TermRef};
        let topic = TopicOptions::default();
        let opts = topic.stream_options();
        let st = |s: &str, o: &str| {
            let mut e = Encoder::new(opts.clone()).unwrap();
            e.add(StatementRef::quad(
                TermRef::Iri(s),
                TermRef::Iri("http://ex/p"),
                TermRef::Iri(o),
                TermRef::DefaultGraph,
            ))
            .unwrap();
            e.finish_frame()
        };
        let body = |frame: Vec<u8>| {
            let mut b = Vec::new();
            jelly_proto::wire::put_varint(&mut b, frame.len() as u64);
            b.extend(frame);
            b
        };
        let first = body(st("http://ex/s1", "http://ex/o1"));
        // One statement, then the same statement again: its second row is all repeats.
        let mut e = Encoder::new(opts.clone()).unwrap();
        let q = StatementRef::quad(
            TermRef::Iri("http://ex/s2"),
            TermRef::Iri("http://ex/p"),
            TermRef::Iri("http://ex/o2"),
            TermRef::DefaultGraph,
        );
        e.add(q).unwrap();
        let f1 = e.finish_frame();
        e.add(q).unwrap();
        let f2 = e.finish_frame();
        // The second frame alone leans on the first's tables and repeated terms.
        let leaning = body(f2);
        let meta = PublishMeta::default();
        for _ in 0..3 {
            let items = ingest(&first, InputFormat::Jelly, &topic, &meta, 1 << 20).unwrap();
            assert_eq!(items.len(), 1);
            let both = [body(f1.clone()), leaning.clone()].concat();
            assert_eq!(
                ingest(&both, InputFormat::Jelly, &topic, &meta, 1 << 20)
                    .unwrap()
                    .len(),
                2
            );
            // After a stream that set up those tables and terms, still refused.
            let e = ingest(&leaning, InputFormat::Jelly, &topic, &meta, 1 << 20).unwrap_err();
            assert!(matches!(e, IngestError::Malformed(_)), "{e}");
        }
        // Items come out the same as a fresh stream writes them.
        let fresh = JellyIngest::new(&topic, meta.clone(), 1 << 20)
            .frame(&st("http://ex/s1", "http://ex/o1"))
            .unwrap()
            .unwrap();
        let pooled = ingest(&first, InputFormat::Jelly, &topic, &meta, 1 << 20).unwrap();
        assert_eq!(pooled[0].frame, fresh.frame);
        assert_eq!(decode_item(&pooled[0].frame).len(), 1);
    }
}
