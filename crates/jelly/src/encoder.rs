//! The Jelly-RDF encoder: statements in, frame bytes out.

use jelly_proto::fields::{frame, namespace as ns, row};
use jelly_proto::wire::{put_bytes_field, put_varint_at};

use crate::error::EncodeError;
use crate::options::{PhysicalType, StreamOptions, VERSION_1_0, VERSION_1_1};
use crate::term::{StatementRef, TermBuf, TermRef};
use crate::term_encoder::{EntryFields, RowTerms, SharedRow, TermEncoder};

/// Choices of the encoder that are not stream options. The default: no namespace
/// declarations, spliceable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EncoderConfig {
    /// Allow [`Encoder::declare_namespace`]; raises the version tag to 2 (Jelly 1.1).
    pub namespace_declarations: bool,
    /// Write the first entry of each lookup table and the first IRI's name id
    /// explicitly, instead of with the `0 = previous + 1` shorthand. A stream written
    /// so (typically one frame from a fresh encoder) does not depend on the delta
    /// state it starts in, so it can be appended to any stream with the same options
    /// and still decode the same: the server stores items this way and serves them by
    /// concatenation. Costs one or two bytes per table per stream. On by default: two
    /// files of the same options joined with `cat` then decode as the two streams they
    /// are, in every reader, instead of the second's entries and first name resolving
    /// against the first's tables (wrong statements, without an error).
    ///
    /// ```
    /// use jelly::{Decoder, Encoder, EncoderConfig, Event, StreamOptions, StatementRef, TermRef};
    /// let cfg = EncoderConfig { spliceable: true, ..EncoderConfig::default() };
    /// let one = |o: &str| {
    ///     let mut enc = Encoder::with_config(StreamOptions::small(), cfg).unwrap();
    ///     enc.add(StatementRef::triple(TermRef::Iri(o), TermRef::Iri("http://ex.org/p"), TermRef::Iri(o))).unwrap();
    ///     enc.finish_frame()
    /// };
    /// // Two independently encoded frames, back to back, form one valid stream.
    /// let mut stream = one("http://ex.org/a");
    /// stream.extend(one("http://ex.org/b"));
    /// let mut dec = Decoder::default();
    /// let mut subjects = Vec::new();
    /// let mut cur = dec.frame(&stream);
    /// while let Some(ev) = cur.next_event().unwrap() {
    ///     if let Event::Statement(st) = ev { subjects.push(st.subject.to_string()); }
    /// }
    /// assert_eq!(subjects, ["<http://ex.org/a>", "<http://ex.org/b>"]);
    /// ```
    pub spliceable: bool,
}

impl Default for EncoderConfig {
    fn default() -> Self {
        EncoderConfig {
            namespace_declarations: false,
            spliceable: true,
        }
    }
}

/// Encodes statements into frames of the Jelly-RDF row layout.
///
/// ```
/// use jelly::{Encoder, StreamOptions, StatementRef, TermRef};
/// let mut enc = Encoder::new(StreamOptions::small()).unwrap();
/// let t = StatementRef::triple(TermRef::Iri("http://ex.org/s"), TermRef::Iri("http://ex.org/p"), TermRef::BlankNode("b"));
/// enc.add(t).unwrap();
/// enc.add(t).unwrap(); // all three terms repeated: a tiny row
/// let frame = enc.finish_frame();
/// assert!(frame.len() < 80);
/// ```
#[derive(Debug)]
pub struct Encoder {
    opts: StreamOptions,
    cfg: EncoderConfig,
    terms: TermEncoder,
    options_written: bool,
    graph_open: bool,
    current_graph: TermBuf,
    metadata: Vec<(String, Vec<u8>)>,
    statements: u64,
    /// In-place output (see [`Encoder::attach_output`]): where the current frame's
    /// rows start in `terms.buf`; 0 otherwise.
    frame_start: usize,
    /// In-place delimited output: bytes reserved before the current frame for its
    /// length prefix (the previous frame's prefix length, a guess that is usually right).
    prefix_gap: usize,
    /// In-place output: the encoder's own frame buffer, kept while it works in the
    /// caller's.
    own_buf: Option<Vec<u8>>,
}

impl Encoder {
    /// An encoder with default configuration (no namespace declarations).
    pub fn new(options: StreamOptions) -> Result<Self, EncodeError> {
        Self::with_config(options, EncoderConfig::default())
    }

    /// An encoder with explicit configuration.
    ///
    /// A `version` of 0 in `options` is replaced by the lowest tag that covers the
    /// configuration: 1, or 2 with namespace declarations.
    pub fn with_config(
        mut options: StreamOptions,
        cfg: EncoderConfig,
    ) -> Result<Self, EncodeError> {
        if options.max_name_table_size < 8 {
            return Err(EncodeError::NameTableTooSmall(options.max_name_table_size));
        }
        if !matches!(
            options.physical_type,
            PhysicalType::Triples | PhysicalType::Quads | PhysicalType::Graphs
        ) {
            return Err(EncodeError::PhysicalTypeUnspecified);
        }
        if options.version == 0 {
            options.version = if cfg.namespace_declarations {
                VERSION_1_1
            } else {
                VERSION_1_0
            };
        } else if cfg.namespace_declarations && options.version < VERSION_1_1 {
            return Err(EncodeError::VersionTooLowForNamespaces(options.version));
        }
        let mut terms = TermEncoder::new(
            options.max_name_table_size,
            options.max_prefix_table_size,
            options.max_datatype_table_size,
            options.generalized_statements,
            options.rdf_star,
            EntryFields {
                name: row::NAME,
                prefix: row::PREFIX,
                datatype: row::DATATYPE,
            },
        );
        if cfg.spliceable {
            terms.forget_delta_state();
        }
        Ok(Encoder {
            terms,
            opts: options,
            cfg,
            options_written: false,
            graph_open: false,
            current_graph: TermBuf::default(),
            metadata: Vec::new(),
            statements: 0,
            frame_start: 0,
            prefix_gap: 0,
            own_buf: None,
        })
    }

    /// Starts a new stream with the same options and configuration, as a fresh
    /// encoder would, but keeping the lookup tables' buffers. For many small
    /// independent streams (one per item) this saves most of the allocations.
    ///
    /// ```
    /// use jelly::{Encoder, StreamOptions, StatementRef, TermRef};
    /// let st = StatementRef::triple(TermRef::Iri("http://ex.org/s"), TermRef::Iri("http://ex.org/p"), TermRef::Iri("http://ex.org/o"));
    /// let mut enc = Encoder::new(StreamOptions::small()).unwrap();
    /// enc.add(st).unwrap();
    /// let first = enc.finish_frame();
    /// enc.reset();
    /// enc.add(st).unwrap();
    /// assert_eq!(enc.finish_frame(), first, "the same bytes as a new encoder writes");
    /// ```
    pub fn reset(&mut self) {
        // In-place output keeps the frames finished so far (and the current frame's gap).
        self.terms.reset(self.frame_start);
        if self.cfg.spliceable {
            self.terms.forget_delta_state();
        }
        self.options_written = false;
        self.graph_open = false;
        self.metadata.clear();
        self.statements = 0;
    }

    /// The options written to the stream.
    pub fn options(&self) -> &StreamOptions {
        &self.opts
    }

    /// Rows in the current (unfinished) frame.
    pub fn frame_rows(&self) -> usize {
        self.terms.rows
    }

    /// Bytes in the current (unfinished) frame.
    pub fn frame_bytes(&self) -> usize {
        self.terms.buf.len() - self.frame_start
    }

    /// Statements encoded so far.
    pub fn statements(&self) -> u64 {
        self.statements
    }

    /// True while a GRAPHS-stream graph is open.
    pub fn graph_open(&self) -> bool {
        self.graph_open
    }

    /// Adds a metadata entry to the current frame (`RdfStreamFrame.metadata`).
    pub fn set_frame_metadata(&mut self, key: impl Into<String>, value: impl Into<Vec<u8>>) {
        self.metadata.push((key.into(), value.into()));
    }

    /// True when metadata was set for the current frame
    /// ([`Encoder::set_frame_metadata`]), so the frame is worth writing even with no rows.
    ///
    /// ```
    /// let mut enc = jelly::Encoder::new(jelly::StreamOptions::small()).unwrap();
    /// assert!(!enc.has_frame_metadata());
    /// enc.set_frame_metadata("heartbeat", "1");
    /// assert!(enc.has_frame_metadata());
    /// enc.finish_frame();
    /// assert!(!enc.has_frame_metadata());
    /// ```
    pub fn has_frame_metadata(&self) -> bool {
        !self.metadata.is_empty()
    }

    #[inline(always)]
    fn ensure_options(&mut self) {
        if !self.options_written {
            self.write_options();
        }
    }

    #[cold]
    fn write_options(&mut self) {
        self.options_written = true;
        let body = self.opts.encode_to_vec();
        self.terms.push_row(row::OPTIONS, &body);
    }

    #[inline(always)]
    fn emit_statement<S: RowTerms>(
        &mut self,
        field: u32,
        s: &S,
        quad: bool,
    ) -> Result<(), EncodeError> {
        // Validate before touching any state, so a refused statement leaves the stream intact.
        self.terms.check_statement(s, quad)?;
        self.ensure_options();
        self.terms.write_statement(field, s, quad)?;
        self.statements += 1;
        Ok(())
    }

    fn wrong_type(&self, op: &'static str) -> EncodeError {
        EncodeError::WrongPhysicalType {
            op,
            physical: self.opts.physical_type.name(),
        }
    }

    /// Adds a statement.
    ///
    /// - TRIPLES: a triple, or a quad in the default graph.
    /// - QUADS: a quad; a triple goes to the default graph.
    /// - GRAPHS: graphs open and close as the statement's graph changes; a triple
    ///   belongs to the default graph. Use [`Encoder::start_graph`] and
    ///   [`Encoder::add_to_open_graph`] to control the graph rows yourself.
    pub fn add(&mut self, s: StatementRef<'_>) -> Result<(), EncodeError> {
        self.add_row(s, &s)
    }

    /// [`Encoder::add`] of a statement of shared-input session `session` (see
    /// [`Encoder::shared`]).
    pub(crate) fn add_shared(
        &mut self,
        s: &StatementRef<'_>,
        session: u64,
    ) -> Result<(), EncodeError> {
        self.terms.enter_session(session);
        self.add_row(*s, &SharedRow(*s))
    }

    /// The id of a new shared-input session.
    pub(crate) fn new_session(&mut self) -> u64 {
        self.terms.new_session()
    }

    /// Starts a shared-input session: statements added through the returned
    /// [`SharedEncoder`] are encoded as by [`Encoder::add`], to the same bytes, but an
    /// IRI is recognised by the address of its text when the same string was seen
    /// earlier in the session, without hashing or comparing it. That pays off when the
    /// input holds one copy of each distinct string (an interning parser, an
    /// in-memory graph or an arena), as Jena's parser shares node objects; with one
    /// copy per occurrence it costs a little more than [`Encoder::add`].
    ///
    /// The strings must live as long as `'s`, the session's lifetime, which the
    /// borrow checker enforces.
    ///
    /// ```
    /// use jelly::{Encoder, StreamOptions, StatementRef, TermRef};
    /// let p = String::from("http://ex.org/p");
    /// let subjects = ["http://ex.org/a".to_string(), "http://ex.org/b".to_string()];
    /// let mut shared = Encoder::new(StreamOptions::small()).unwrap();
    /// let mut plain = Encoder::new(StreamOptions::small()).unwrap();
    /// {
    ///     let mut session = shared.shared();
    ///     for s in &subjects {
    ///         let st = StatementRef::triple(TermRef::Iri(s), TermRef::Iri(&p), TermRef::Iri(s));
    ///         session.add(st).unwrap();
    ///         plain.add(st).unwrap();
    ///     }
    /// }
    /// assert_eq!(shared.finish_frame(), plain.finish_frame());
    /// ```
    pub fn shared<'s>(&mut self) -> SharedEncoder<'_, 's> {
        SharedEncoder {
            session: self.new_session(),
            enc: self,
            _strings: std::marker::PhantomData,
        }
    }

    /// [`Encoder::add`] of `s`, whose terms the row writer reads through `row`.
    #[inline(always)]
    fn add_row<S: RowTerms>(&mut self, s: StatementRef<'_>, row: &S) -> Result<(), EncodeError> {
        match self.opts.physical_type {
            PhysicalType::Triples => match s.graph {
                None | Some(TermRef::DefaultGraph) => self.emit_statement(row::TRIPLE, row, false),
                Some(_) => Err(self.wrong_type("a quad in a named graph")),
            },
            PhysicalType::Quads => self.emit_statement(row::QUAD, row, true),
            PhysicalType::Graphs => {
                let g = s.graph_or_default();
                if !self.graph_open || self.current_graph.as_ref() != g {
                    if self.graph_open {
                        self.end_graph()?;
                    }
                    self.start_graph(g)?;
                }
                self.emit_statement(row::TRIPLE, row, false)
            }
            _ => Err(EncodeError::PhysicalTypeUnspecified),
        }
    }

    /// GRAPHS streams: adds a triple to the graph opened by [`Encoder::start_graph`].
    pub fn add_to_open_graph(&mut self, s: StatementRef<'_>) -> Result<(), EncodeError> {
        if self.opts.physical_type != PhysicalType::Graphs {
            return Err(self.wrong_type("add_to_open_graph"));
        }
        if !self.graph_open {
            return Err(EncodeError::NoOpenGraph);
        }
        self.emit_statement(row::TRIPLE, &s, false)
    }

    /// GRAPHS streams: opens graph `g` (`graph_start` row).
    pub fn start_graph(&mut self, g: TermRef<'_>) -> Result<(), EncodeError> {
        if self.opts.physical_type != PhysicalType::Graphs {
            return Err(self.wrong_type("graph_start"));
        }
        if self.graph_open {
            return Err(EncodeError::GraphAlreadyOpen);
        }
        self.terms.check_term_deep(g, 3)?;
        if matches!(g, TermRef::Triple(_)) {
            return Err(EncodeError::GeneralizedNotEnabled {
                kind: "quoted triple",
                position: "graph",
            });
        }
        self.ensure_options();
        self.terms.stamp = self.terms.stamp.wrapping_add(1);
        let mut body = std::mem::take(&mut self.terms.scratch[0]);
        body.clear();
        let r = self
            .terms
            .term_field(g, crate::term_encoder::AT_GRAPH_START, &mut body, 0);
        if r.is_ok() {
            self.terms.push_row(row::GRAPH_START, &body);
            self.current_graph.set_from(g);
            self.graph_open = true;
        }
        self.terms.scratch[0] = body;
        r
    }

    /// GRAPHS streams: closes the open graph (`graph_end` row).
    pub fn end_graph(&mut self) -> Result<(), EncodeError> {
        if self.opts.physical_type != PhysicalType::Graphs {
            return Err(self.wrong_type("graph_end"));
        }
        self.ensure_options();
        self.terms.push_row(row::GRAPH_END, &[]);
        self.graph_open = false;
        Ok(())
    }

    /// Declares a namespace (`@prefix name: <iri>`). Needs [`EncoderConfig::namespace_declarations`].
    pub fn declare_namespace(&mut self, name: &str, iri: &str) -> Result<(), EncodeError> {
        if !self.cfg.namespace_declarations {
            return Err(EncodeError::VersionTooLowForNamespaces(self.opts.version));
        }
        self.ensure_options();
        self.terms.stamp = self.terms.stamp.wrapping_add(1);
        let mut v = std::mem::take(&mut self.terms.scratch[0]);
        v.clear();
        let r = self.terms.iri_ids(iri);
        if let Ok(ids) = r {
            if !name.is_empty() {
                put_bytes_field(&mut v, ns::NAME, name.as_bytes());
            }
            TermEncoder::put_iri(&mut v, ns::VALUE, ids);
            self.terms.push_row(row::NAMESPACE, &v);
        }
        self.terms.scratch[0] = v;
        r.map(|_| ())
    }

    /// Ends the current frame and returns its bytes (one `RdfStreamFrame`, no length prefix).
    ///
    /// The first frame always carries the options row, even if nothing else was added.
    pub fn finish_frame(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        self.finish_frame_into(&mut out, false);
        out
    }

    /// Ends the current frame, appending it to `out`, with a varint length prefix when `delimited`.
    pub fn finish_frame_into(&mut self, out: &mut Vec<u8>, delimited: bool) {
        // Writing to a Vec cannot fail.
        let _ = self.write_frame(out, delimited);
    }

    /// Ends the current frame and writes it to `out` straight from the encoder's buffer
    /// (with a varint length prefix when `delimited`). Returns the bytes written.
    pub fn write_frame(
        &mut self,
        out: &mut impl std::io::Write,
        delimited: bool,
    ) -> std::io::Result<usize> {
        self.ensure_options();
        let mut meta = Vec::new();
        if !self.metadata.is_empty() {
            put_metadata(&mut self.metadata, &mut meta);
        }
        let rows = &self.terms.buf[self.frame_start..];
        let (prefix, prefix_len) = length_prefix(delimited, rows.len() + meta.len());
        let prefix = &prefix[..prefix_len];
        let r = out
            .write_all(prefix)
            .and_then(|()| out.write_all(rows))
            .and_then(|()| out.write_all(&meta));
        let n = prefix.len() + rows.len() + meta.len();
        self.terms.buf.truncate(self.frame_start);
        self.terms.rows = 0;
        r.map(|()| n)
    }

    /// Starts in-place output: from now on the encoder encodes its frames at the end of
    /// `out` (after its contents), and [`Encoder::finish_frame_in_place`] finishes them
    /// there, so no frame is copied. [`Encoder::detach_output`] gives `out` back. The
    /// current frame must be empty.
    pub(crate) fn attach_output(&mut self, out: Vec<u8>, delimited: bool) {
        self.own_buf = Some(std::mem::replace(&mut self.terms.buf, out));
        // Most frames of a stream are of a size; 3 bytes cover 16 KiB to 2 MiB.
        self.prefix_gap = if delimited { 3 } else { 0 };
        self.open_frame_in_place();
    }

    /// Reserves the length prefix's gap and starts the next frame after it.
    #[inline]
    fn open_frame_in_place(&mut self) {
        let buf = &mut self.terms.buf;
        self.frame_start = buf.len() + self.prefix_gap;
        // Byte pushes: the gap is a few bytes, and neither a `memset` call nor another
        // caller of the row writer's `extend_from_slice` (which then stops being inlined).
        for _ in 0..self.prefix_gap {
            buf.push(0);
        }
    }

    /// In-place output: ends the current frame where it was encoded (filling in its
    /// length prefix when `delimited`, as given to [`Encoder::attach_output`]) and
    /// starts the next. Returns the frame's bytes, prefix included.
    pub(crate) fn finish_frame_in_place(&mut self, delimited: bool) -> usize {
        self.ensure_options();
        if !self.metadata.is_empty() {
            put_metadata(&mut self.metadata, &mut self.terms.buf);
        }
        let buf = &mut self.terms.buf;
        let len = buf.len() - self.frame_start;
        let (prefix, prefix_len) = length_prefix(delimited, len);
        let gap_start = self.frame_start - self.prefix_gap;
        if prefix_len != self.prefix_gap {
            // The guess was wrong: move the frame so that it follows the prefix.
            let end = buf.len();
            let to = gap_start + prefix_len;
            if to > self.frame_start {
                buf.resize(end + (to - self.frame_start), 0);
            }
            buf.copy_within(self.frame_start..end, to);
            buf.truncate(to + len);
            self.prefix_gap = prefix_len;
        }
        buf[gap_start..gap_start + prefix_len].copy_from_slice(&prefix[..prefix_len]);
        self.terms.rows = 0;
        self.open_frame_in_place();
        prefix_len + len
    }

    /// Ends in-place output: returns the buffer given to [`Encoder::attach_output`]
    /// with the frames finished since, without the current frame's rows.
    pub(crate) fn detach_output(&mut self) -> Vec<u8> {
        self.terms.buf.truncate(self.frame_start - self.prefix_gap);
        let own = self.own_buf.take().unwrap_or_default();
        let out = std::mem::replace(&mut self.terms.buf, own);
        self.terms.buf.clear();
        self.terms.rows = 0;
        self.frame_start = 0;
        self.prefix_gap = 0;
        out
    }
}

/// The varint length prefix of a frame of `len` bytes and its length, or no prefix
/// when not `delimited`.
#[inline]
fn length_prefix(delimited: bool, len: usize) -> ([u8; 10], usize) {
    let mut prefix = [0u8; 10];
    let n = if delimited {
        put_varint_at(&mut prefix, 0, len as u64)
    } else {
        0
    };
    (prefix, n)
}

/// Appends the frame metadata entries (taking them out of `metadata`) to `out`.
#[cold]
fn put_metadata(metadata: &mut Vec<(String, Vec<u8>)>, out: &mut Vec<u8>) {
    for (k, v) in metadata.drain(..) {
        let mut e = Vec::with_capacity(k.len() + v.len() + 4);
        put_bytes_field(&mut e, frame::MAP_KEY, k.as_bytes());
        put_bytes_field(&mut e, frame::MAP_VALUE, &v);
        put_bytes_field(out, frame::METADATA, &e);
    }
}

/// A shared-input session of an [`Encoder`] (see [`Encoder::shared`]): every string of
/// the statements added through it lives at least as long as `'s`, so within the
/// session an IRI's address identifies it.
///
/// ```
/// use jelly::{Encoder, StreamOptions, StatementRef, TermRef};
/// let iris = ["http://ex.org/s".to_string(), "http://ex.org/p".to_string()];
/// let mut enc = Encoder::new(StreamOptions::big()).unwrap();
/// let mut session = enc.shared();
/// let (s, p) = (TermRef::Iri(&iris[0]), TermRef::Iri(&iris[1]));
/// session.add(StatementRef::triple(s, p, s)).unwrap();
/// session.add(StatementRef::triple(s, p, p)).unwrap();
/// assert_eq!(session.encoder().statements(), 2);
/// ```
///
/// A string cannot be freed while the session that was given it is still in use:
///
/// ```compile_fail
/// use jelly::{Encoder, StreamOptions, StatementRef, TermRef};
/// let mut enc = Encoder::new(StreamOptions::small()).unwrap();
/// let mut session = enc.shared();
/// {
///     let s = String::from("http://ex.org/s");
///     session.add(StatementRef::triple(TermRef::Iri(&s), TermRef::Iri(&s), TermRef::Iri(&s))).unwrap();
/// } // `s` is freed here, but the session goes on
/// let o = String::from("http://ex.org/o");
/// session.add(StatementRef::triple(TermRef::Iri(&o), TermRef::Iri(&o), TermRef::Iri(&o))).unwrap();
/// ```
#[derive(Debug)]
pub struct SharedEncoder<'e, 's> {
    enc: &'e mut Encoder,
    session: u64,
    /// Invariant in `'s`, so the session cannot be re-typed to a shorter lifetime.
    _strings: std::marker::PhantomData<fn(&'s str) -> &'s str>,
}

impl<'s> SharedEncoder<'_, 's> {
    /// Adds a statement, as [`Encoder::add`] does.
    #[inline]
    pub fn add(&mut self, s: StatementRef<'s>) -> Result<(), EncodeError> {
        self.enc.add_shared(&s, self.session)
    }

    /// The encoder, for everything else (frames, graphs, metadata). Statements added
    /// to it directly are encoded as by [`Encoder::add`] and do not end the session;
    /// a session started on it makes this one forget the addresses it has seen.
    pub fn encoder(&mut self) -> &mut Encoder {
        self.enc
    }
}
