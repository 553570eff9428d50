//! The Jelly-RDF decoder: frame bytes in, [`Event`]s out.
//!
//! [`Decoder`] holds the stream state (options, lookup tables, IRI delta state,
//! repeated terms). [`Decoder::frame`] opens one frame's bytes and hands out events
//! one at a time; each event borrows the decoder, so nothing is allocated per
//! statement once the term buffers have grown to their working size.

use jelly_proto::fields::{frame, graph_start as gs, namespace as ns, row};
use jelly_proto::wire::{Reader, WireError, WireType};

use crate::error::{DecodeError, DecodeErrorKind as K, Table};
use crate::options::{MAX_SUPPORTED_VERSION, PhysicalType, StreamOptions};
use crate::term::{StatementRef, TermBuf, TermRef};
use crate::term_decoder::{TermDecoder, TermField, expect_len, varint_at, wire_code};

/// Limits and strictness of a [`Decoder`].
///
/// ```
/// let o = jelly::DecoderOptions::default();
/// assert_eq!((o.max_name_table_size, o.max_prefix_table_size, o.max_datatype_table_size), (4096, 1024, 256));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecoderOptions {
    /// Largest name table a stream may request.
    pub max_name_table_size: u32,
    /// Largest prefix table a stream may request.
    pub max_prefix_table_size: u32,
    /// Largest datatype table a stream may request.
    pub max_datatype_table_size: u32,
    /// Deepest nesting of quoted triples accepted (1 = a quoted triple with no quoted triple inside).
    /// Values above [`MAX_NESTING_CAP`] act as the cap.
    pub max_nesting: usize,
    /// Largest frame accepted by the readers, in bytes.
    pub max_frame_bytes: u64,
    /// Reject terms the stream options do not allow (generalized terms, quoted triples).
    pub check_features: bool,
    /// Most frames a stream may have before its options row. The options row must be
    /// the stream's first row, so the frames before it have no rows: the spec gives
    /// them no meaning and no writer needs many of them, while any run of zero bytes
    /// (a zero-filled file, `/dev/zero`) reads as a stream of empty frames that would
    /// otherwise be read without end. Past this many, the stream is refused.
    pub max_frames_before_options: u64,
}

/// The default of [`DecoderOptions::max_frames_before_options`].
pub const DEFAULT_MAX_FRAMES_BEFORE_OPTIONS: u64 = 1024;

/// The deepest nesting of quoted triples any decoder accepts, whatever
/// [`DecoderOptions::max_nesting`] asks for.
///
/// Why a hard cap: decoding a quoted triple, and everything done with the decoded term
/// afterwards (writing it as text, converting it to oxrdf, re-encoding it, hashing it),
/// recurses once per level. Measured in a debug build, the most expensive of those
/// paths (`jelly rdf inspect`) overflowed 8 MiB of stack (the usual main-thread size)
/// at about 1,500 levels and 2 MiB at about 300, so 256 levels keep within a quarter
/// of the main thread's stack; a higher limit would let a stream abort the process
/// instead of being refused.
pub const MAX_NESTING_CAP: usize = 256;

impl DecoderOptions {
    /// Checks the table sizes a stream requests: a name table of at least 8 (the spec's
    /// minimum) and no table larger than this decoder's caps.
    pub(crate) fn check_table_sizes(&self, name: u32, prefix: u32, datatype: u32) -> Result<(), K> {
        if name < 8 {
            return Err(K::NameTableTooSmall(name));
        }
        for (table, requested, limit) in [
            (Table::Name, name, self.max_name_table_size),
            (Table::Prefix, prefix, self.max_prefix_table_size),
            (Table::Datatype, datatype, self.max_datatype_table_size),
        ] {
            if requested > limit {
                return Err(K::TableTooLarge {
                    table,
                    requested,
                    limit,
                });
            }
        }
        Ok(())
    }
}

impl Default for DecoderOptions {
    fn default() -> Self {
        DecoderOptions {
            max_name_table_size: 4096,
            max_prefix_table_size: 1024,
            max_datatype_table_size: 256,
            max_nesting: 100,
            max_frame_bytes: 64 << 20,
            check_features: true,
            max_frames_before_options: DEFAULT_MAX_FRAMES_BEFORE_OPTIONS,
        }
    }
}

/// One decoded item of a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event<'a> {
    /// The stream options row (only its first occurrence is reported).
    Options(&'a StreamOptions),
    /// A triple or quad. In GRAPHS streams, triples carry the open graph.
    Statement(StatementRef<'a>),
    /// A namespace declaration (`name` has no colon).
    Namespace { name: &'a str, iri: &'a str },
    /// Start of a graph in a GRAPHS stream.
    GraphStart(TermRef<'a>),
    /// End of a graph in a GRAPHS stream.
    GraphEnd,
}

/// Counters kept while decoding, for `inspect`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DecoderStats {
    pub frames: u64,
    pub options_rows: u64,
    pub triple_rows: u64,
    pub quad_rows: u64,
    pub graph_start_rows: u64,
    pub graph_end_rows: u64,
    pub namespace_rows: u64,
    pub name_rows: u64,
    pub prefix_rows: u64,
    pub datatype_rows: u64,
}

impl DecoderStats {
    /// All rows.
    pub fn rows(&self) -> u64 {
        self.options_rows
            + self.triple_rows
            + self.quad_rows
            + self.graph_start_rows
            + self.graph_end_rows
            + self.namespace_rows
            + self.name_rows
            + self.prefix_rows
            + self.datatype_rows
    }
}

/// Decoder state for one Jelly-RDF stream.
///
/// ```
/// use jelly::{Decoder, Encoder, Event, StreamOptions, TermRef, StatementRef};
/// let mut enc = Encoder::new(StreamOptions::small()).unwrap();
/// enc.add(StatementRef::triple(TermRef::Iri("http://e/s"), TermRef::Iri("http://e/p"), TermRef::Iri("http://e/o"))).unwrap();
/// let bytes = enc.finish_frame();
///
/// let mut dec = Decoder::default();
/// let mut frame = dec.frame(&bytes);
/// let mut n = 0;
/// while let Some(ev) = frame.next_event().unwrap() {
///     if let Event::Statement(st) = ev { assert_eq!(st.object, TermRef::Iri("http://e/o")); n += 1; }
/// }
/// assert_eq!(n, 1);
/// ```
#[derive(Debug)]
pub struct Decoder {
    cfg: DecoderOptions,
    options: Option<StreamOptions>,
    terms: TermDecoder,
    graph: TermBuf,
    in_graph: bool,
    ns_name: String,
    ns_iri: TermBuf,
    stats: DecoderStats,
}

impl Default for Decoder {
    /// A decoder with [`DecoderOptions::default`] (a derived `Default` would leave the
    /// term decoder with a nesting limit of 0 and no feature checks).
    fn default() -> Self {
        Decoder::new(DecoderOptions::default())
    }
}

/// What the last row produced (computed before the borrow for the event is taken).
enum Produced {
    Nothing,
    Options,
    Triple,
    Quad,
    Namespace,
    GraphStart,
    GraphEnd,
}

impl Decoder {
    /// A decoder with the given limits.
    pub fn new(cfg: DecoderOptions) -> Self {
        Decoder {
            terms: TermDecoder::new(&cfg),
            cfg,
            options: None,
            graph: TermBuf::default(),
            in_graph: false,
            ns_name: String::new(),
            ns_iri: TermBuf::default(),
            stats: DecoderStats::default(),
        }
    }

    /// Starts over for a new stream, as [`Decoder::new`] with the same limits would,
    /// but keeping the lookup tables' buffers (they are sized again by the next
    /// options row). For many small streams in a row, such as one per request.
    ///
    /// ```
    /// use jelly::{Decoder, Encoder, Event, StreamOptions, StatementRef, TermRef};
    /// let mut enc = Encoder::new(StreamOptions::small()).unwrap();
    /// let st = StatementRef::triple(TermRef::Iri("http://ex.org/s"), TermRef::Iri("http://ex.org/p"), TermRef::Iri("http://ex.org/o"));
    /// enc.add(st).unwrap();
    /// let frame = enc.finish_frame();
    /// let mut dec = Decoder::default();
    /// for _ in 0..2 {
    ///     // The same stream twice: without the reset, the second options row would be
    ///     // a repeat and the tables would carry over.
    ///     dec.reset();
    ///     let mut n = 0;
    ///     let mut cur = dec.frame(&frame);
    ///     while let Some(ev) = cur.next_event().unwrap() {
    ///         if let Event::Statement(_) = ev { n += 1; }
    ///     }
    ///     assert_eq!(n, 1);
    /// }
    /// ```
    pub fn reset(&mut self) {
        self.terms.forget_stream();
        self.options = None;
        self.in_graph = false;
        self.stats = DecoderStats::default();
    }

    /// The stream options, once the options row has been read.
    pub fn options(&self) -> Option<&StreamOptions> {
        self.options.as_ref()
    }

    /// Limits in force.
    pub fn config(&self) -> &DecoderOptions {
        &self.cfg
    }

    /// Counters so far.
    pub fn stats(&self) -> &DecoderStats {
        &self.stats
    }

    /// Opens the next frame. `bytes` is one `RdfStreamFrame` message (no length prefix).
    pub fn frame<'d, 'b>(&'d mut self, bytes: &'b [u8]) -> FrameCursor<'d, 'b> {
        self.frame_at(bytes, 0)
    }

    /// Like [`Decoder::frame`], with `offset` the position of `bytes` in the input, for error messages.
    pub fn frame_at<'d, 'b>(&'d mut self, bytes: &'b [u8], offset: u64) -> FrameCursor<'d, 'b> {
        let index = self.stats.frames;
        self.stats.frames += 1;
        FrameCursor {
            dec: self,
            bytes,
            pos: 0,
            base: offset,
            index,
            row: 0,
            row_start: 0,
        }
    }

    /// The statement of the last [`Event::Statement`] again, if it holds a term RDF does
    /// not allow: an IRI that is not absolute ([`crate::term::is_absolute_iri`]), or a
    /// literal typed with such an IRI or with `rdf:langString` / `rdf:dirLangString`
    /// ([`crate::term::needs_language_tag`]) — quoted triples searched too. `None` when
    /// all its terms are RDF. Call it right after the event (before the next one).
    ///
    /// The decoder takes such terms (the spec says IRIs SHOULD be valid, and other
    /// readers take them too), but no RDF syntax can write them. Rather than checking
    /// every statement's terms, which reads every IRI, ask here: the decoder checks an
    /// IRI when it builds it from its lookup entries (once per distinct IRI, as long as
    /// its entries stay) and a datatype when its entry is set, so the answer costs a
    /// few loads.
    ///
    /// ```
    /// use jelly::{Decoder, Encoder, Event, StatementRef, StreamOptions, TermRef};
    /// let mut enc = Encoder::new(StreamOptions::small()).unwrap();
    /// let p = TermRef::Iri("http://ex.org/p");
    /// enc.add(StatementRef::triple(TermRef::Iri("http://ex.org/s"), p, TermRef::Iri("http://ex.org/o"))).unwrap();
    /// enc.add(StatementRef::triple(TermRef::Iri("s"), p, TermRef::Iri("http://ex.org/o"))).unwrap();
    /// let bytes = enc.finish_frame();
    /// let mut dec = Decoder::default();
    /// let mut frame = dec.frame(&bytes);
    /// let mut found = Vec::new();
    /// while let Some(ev) = frame.next_event().unwrap() {
    ///     if let Event::Statement(_) = ev {
    ///         found.push(frame.decoder().non_rdf_statement().map(|st| st.subject.to_string()));
    ///     }
    /// }
    /// assert_eq!(found, [None, Some("<s>".to_string())]);
    /// ```
    #[inline]
    pub fn non_rdf_statement(&self) -> Option<StatementRef<'_>> {
        // Every term a statement can hold, whatever the stream's type: false for all of
        // them is the usual answer, found without a branch per term.
        let t = &self.terms.cur;
        if !(t[0].not_rdf | t[1].not_rdf | t[2].not_rdf | t[3].not_rdf | self.graph.not_rdf) {
            return None;
        }
        self.non_rdf_statement_of_type()
    }

    /// [`Decoder::non_rdf_statement`] with only the terms of the stream's statements
    /// looked at (the graph of a GRAPHS stream or a quad's, as it has one).
    #[cold]
    #[inline(never)]
    fn non_rdf_statement_of_type(&self) -> Option<StatementRef<'_>> {
        let t = &self.terms.cur;
        let spo = t[0].not_rdf | t[1].not_rdf | t[2].not_rdf;
        // The physical type says which statements the stream holds: quads in QUADS
        // streams, triples (in the open graph, for GRAPHS) in the others.
        let physical = self.physical();
        let not_rdf = match physical {
            PhysicalType::Quads => spo | t[3].not_rdf,
            PhysicalType::Graphs => spo | self.graph.not_rdf,
            _ => spo,
        };
        not_rdf.then(|| self.statement_ref(physical == PhysicalType::Quads))
    }

    /// The value of entry `id` of `table`, as the stream has defined it so far.
    pub(crate) fn entry(&self, table: crate::error::Table, id: u32) -> Option<&[u8]> {
        self.terms.state.entry(table, id)
    }

    fn apply_options(&mut self, o: StreamOptions) -> Result<Produced, K> {
        if let Some(first) = &self.options {
            return if *first == o {
                Ok(Produced::Nothing)
            } else {
                Err(K::OptionsChanged)
            };
        }
        match o.version {
            0 => return Err(K::ZeroVersion),
            v if v > MAX_SUPPORTED_VERSION => return Err(K::UnsupportedVersion(v)),
            _ => {}
        }
        match o.physical_type {
            PhysicalType::Unspecified => return Err(K::PhysicalTypeUnspecified),
            PhysicalType::Unknown(v) => return Err(K::UnknownPhysicalType(v)),
            _ => {}
        }
        self.cfg.check_table_sizes(
            o.max_name_table_size,
            o.max_prefix_table_size,
            o.max_datatype_table_size,
        )?;
        self.terms.reset(
            o.max_name_table_size,
            o.max_prefix_table_size,
            o.max_datatype_table_size,
            o.generalized_statements,
            o.rdf_star,
        );
        self.options = Some(o);
        Ok(Produced::Options)
    }

    fn physical(&self) -> PhysicalType {
        self.options
            .as_ref()
            .map_or(PhysicalType::Unspecified, |o| o.physical_type)
    }

    fn not_allowed(&self, row: &'static str) -> K {
        K::RowNotAllowed {
            row,
            physical: self.physical().name(),
        }
    }

    /// A triple or quad row, given its statement payload. Byte offsets in its errors
    /// are offsets in `payload` (the callers know where that is).
    #[inline]
    fn statement_row(&mut self, quad: bool, payload: &[u8]) -> Result<Produced, K> {
        let physical = self.physical();
        if quad {
            self.stats.quad_rows += 1;
            if physical != PhysicalType::Quads {
                return Err(if self.options.is_none() {
                    K::MissingOptions
                } else {
                    self.not_allowed("quad")
                });
            }
            self.terms.statement(payload, 4)?;
            Ok(Produced::Quad)
        } else {
            self.stats.triple_rows += 1;
            match physical {
                PhysicalType::Triples => {}
                PhysicalType::Graphs if self.in_graph => {}
                PhysicalType::Graphs => return Err(K::TripleOutsideGraph),
                _ if self.options.is_none() => return Err(K::MissingOptions),
                _ => return Err(self.not_allowed("triple")),
            }
            self.terms.statement(payload, 3)?;
            Ok(Produced::Triple)
        }
    }

    /// A row that is exactly one lookup entry (`key` is the row's one-byte field key,
    /// `at` the offset of `payload` in the frame).
    #[inline]
    fn entry_row(&mut self, key: u8, payload: &[u8], at: usize) -> Result<Produced, K> {
        if self.options.is_none() {
            return Err(K::MissingOptions);
        }
        let table = match key >> 3 {
            9 => {
                self.stats.name_rows += 1;
                Table::Name
            }
            10 => {
                self.stats.prefix_rows += 1;
                Table::Prefix
            }
            _ => {
                self.stats.datatype_rows += 1;
                Table::Datatype
            }
        };
        self.terms
            .entry_row(table, Reader::with_base(payload, at))?;
        Ok(Produced::Nothing)
    }

    fn row(&mut self, mut r: Reader<'_>) -> Result<Produced, K> {
        let mut found: Option<(u32, Reader<'_>)> = None;
        while let Some((field, wt)) = r.tag()? {
            match field {
                f if row::is_row_field(f) => {
                    expect_len(field, wt)?;
                    let m = r.message()?;
                    if found.is_some() {
                        return Err(K::MultipleRowFields(field));
                    }
                    found = Some((field, m));
                }
                _ => r.skip(wt)?,
            }
        }
        let Some((field, m)) = found else {
            return Err(K::EmptyRow);
        };
        if self.options.is_none() && field != row::OPTIONS {
            return Err(K::MissingOptions);
        }
        let physical = self.physical();
        match field {
            row::OPTIONS => {
                self.stats.options_rows += 1;
                let o = StreamOptions::decode_from(m)?;
                self.apply_options(o)
            }
            row::TRIPLE | row::QUAD => {
                let at = m.offset();
                self.statement_row(field == row::QUAD, m.unread())
                    .map_err(|e| e.shifted(at))
            }
            row::GRAPH_START => {
                self.stats.graph_start_rows += 1;
                if physical != PhysicalType::Graphs {
                    return Err(self.not_allowed("graph_start"));
                }
                if self.in_graph {
                    return Err(K::NestedGraphStart);
                }
                let mut r = m;
                let mut slot: Option<(TermField, Reader<'_>)> = None;
                while let Some((field, wt)) = r.tag()? {
                    let kind = match field {
                        gs::G_IRI => TermField::Iri,
                        gs::G_BNODE => TermField::Bnode,
                        gs::G_DEFAULT => TermField::DefaultGraph,
                        gs::G_LITERAL => TermField::Literal,
                        _ => {
                            r.skip(wt)?;
                            continue;
                        }
                    };
                    expect_len(field, wt)?;
                    let p = r.message()?;
                    if slot.is_some() {
                        return Err(K::MultipleTermFields { position: "graph" });
                    }
                    slot = Some((kind, p));
                }
                let Some((kind, p)) = slot else {
                    return Err(K::GraphStartUnset);
                };
                self.terms
                    .state
                    .resolve_term(kind, p, &mut self.graph, 3, 0)?;
                self.in_graph = true;
                Ok(Produced::GraphStart)
            }
            row::GRAPH_END => {
                self.stats.graph_end_rows += 1;
                if physical != PhysicalType::Graphs {
                    return Err(self.not_allowed("graph_end"));
                }
                self.in_graph = false;
                Ok(Produced::GraphEnd)
            }
            row::NAMESPACE => {
                // Accepted whatever the stream's version, although declarations came
                // with version 2 (our encoder refuses them below it): one carries no
                // RDF, and refusing it would refuse a whole stream whose only fault is
                // a version tag too low, which readers should not reject (spec: a
                // consumer SHOULD NOT reject lower non-zero versions). `jelly rdf
                // validate` reports it (NamespaceBeforeVersion2).
                self.stats.namespace_rows += 1;
                let mut r = m;
                let mut value: Option<Reader<'_>> = None;
                self.ns_name.clear();
                while let Some((field, wt)) = r.tag()? {
                    match (field, wt) {
                        (ns::NAME, WireType::Len) => {
                            let s = r.str()?;
                            self.ns_name.clear();
                            self.ns_name.push_str(s);
                        }
                        (ns::VALUE, WireType::Len) => value = Some(r.message()?),
                        (_, wt) => r.skip(wt)?,
                    }
                }
                let Some(v) = value else {
                    return Err(K::NamespaceWithoutIri);
                };
                self.terms.state.resolve_iri(v, &mut self.ns_iri)?;
                Ok(Produced::Namespace)
            }
            row::NAME => {
                self.stats.name_rows += 1;
                self.terms.entry_row(Table::Name, m)?;
                Ok(Produced::Nothing)
            }
            row::PREFIX => {
                self.stats.prefix_rows += 1;
                self.terms.entry_row(Table::Prefix, m)?;
                Ok(Produced::Nothing)
            }
            row::DATATYPE => {
                self.stats.datatype_rows += 1;
                self.terms.entry_row(Table::Datatype, m)?;
                Ok(Produced::Nothing)
            }
            _ => Ok(Produced::Nothing),
        }
    }

    #[inline(always)]
    fn statement_ref(&self, quad: bool) -> StatementRef<'_> {
        let graph = if quad {
            Some(self.terms.term_ref(&self.terms.cur[3]))
        } else if self.physical() == PhysicalType::Graphs {
            Some(self.graph.as_ref())
        } else {
            None
        };
        StatementRef {
            subject: self.terms.term_ref(&self.terms.cur[0]),
            predicate: self.terms.term_ref(&self.terms.cur[1]),
            object: self.terms.term_ref(&self.terms.cur[2]),
            graph,
        }
    }
}

/// An open frame. Call [`FrameCursor::next_event`] until it returns `None`.
pub struct FrameCursor<'d, 'b> {
    dec: &'d mut Decoder,
    bytes: &'b [u8],
    pos: usize,
    base: u64,
    index: u64,
    row: u64,
    row_start: usize,
}

impl<'d, 'b> FrameCursor<'d, 'b> {
    /// Index of this frame in the stream (from 0).
    pub fn index(&self) -> u64 {
        self.index
    }

    /// The decoder (for its options and stats).
    pub fn decoder(&self) -> &Decoder {
        self.dec
    }

    /// An error about the row the last event came from, located as the decoder's own
    /// errors are: for checks made beyond the decoder's.
    ///
    /// ```
    /// use jelly::{DecodeErrorKind, Decoder, Encoder, StreamOptions};
    /// let bytes = Encoder::new(StreamOptions::small()).unwrap().finish_frame();
    /// let mut dec = Decoder::default();
    /// let mut frame = dec.frame_at(&bytes, 10);
    /// frame.next_event().unwrap(); // the options row
    /// let e = frame.row_error(DecodeErrorKind::EmptyRow);
    /// assert_eq!((e.frame, e.row, e.offset), (0, Some(0), Some(10)));
    /// ```
    pub fn row_error(&self, kind: K) -> DecodeError {
        DecodeError {
            frame: self.index,
            row: Some(self.row.saturating_sub(1)),
            offset: Some(self.base + self.row_start as u64),
            kind,
        }
    }

    /// Locates an error of the row that starts at `row_start`. Byte offsets inside
    /// `kind` stay offsets in the frame: see [`FrameCursor::next_event_inline`].
    #[cold]
    fn err(&self, kind: K, row: Option<u64>) -> DecodeError {
        DecodeError {
            frame: self.index,
            row,
            offset: Some(self.base + self.row_start as u64),
            kind,
        }
    }

    /// The next event of the frame, or `None` at its end.
    #[inline]
    pub fn next_event(&mut self) -> Result<Option<Event<'_>>, DecodeError> {
        self.next_event_inline()
    }

    /// [`FrameCursor::next_event`], inlined into the loops of this crate that hand each
    /// event to a closure: the event is then built where the closure reads it, instead
    /// of being assembled field by field and copied out as a return value (whose wide
    /// reloads of narrow stores stalled on store forwarding).
    ///
    /// Errors' byte offsets are moved to the input's here, once, rather than in each
    /// error path of the loop below: done there (in `err`), they made the loop compile
    /// to twice the code and cost about 12% more instructions per statement (callgrind,
    /// `codec_profile decode` on iot-assist-weather).
    #[inline(always)]
    pub(crate) fn next_event_inline(&mut self) -> Result<Option<Event<'_>>, DecodeError> {
        let base = self.base;
        match self.next_event_in_frame() {
            Err(e) => Err(e.moved(base)),
            ok => ok,
        }
    }

    /// [`FrameCursor::next_event_inline`], with the byte offsets inside its errors'
    /// kinds (but not their row's offset) still offsets in the frame.
    #[inline(always)]
    fn next_event_in_frame(&mut self) -> Result<Option<Event<'_>>, DecodeError> {
        let produced = loop {
            let b = self.bytes;
            if self.pos >= b.len() {
                // Checked once per frame, at its end (after its metadata, if any).
                if self.dec.options.is_none() {
                    let frames = self.index + 1;
                    let max = self.dec.cfg.max_frames_before_options;
                    if frames > max {
                        self.row_start = self.pos;
                        return Err(self.err(K::NoOptionsInFirstFrames(max), None));
                    }
                }
                return Ok(None);
            }
            self.row_start = self.pos;
            // The usual row: fewer than 128 bytes, exactly one triple, quad or lookup
            // entry whose length is one byte. Read here without the general framing
            // (which gives the same result for these bytes).
            if let Some(&[0x0a, len, key, inner]) = b.get(self.pos..self.pos + 4)
                && len < 0x80
                && inner.wrapping_add(2) == len
                && let Some(payload) = b.get(self.pos + 4..self.pos + 2 + usize::from(len))
            {
                match key {
                    0x12 | 0x1a => {
                        let row_index = self.row;
                        self.row += 1;
                        self.pos += 2 + usize::from(len);
                        match self.dec.statement_row(key == 0x1a, payload) {
                            Ok(_) => {
                                let dec: &Decoder = self.dec;
                                return Ok(Some(Event::Statement(dec.statement_ref(key == 0x1a))));
                            }
                            Err(e) => {
                                // The payload follows the row's key and length and the
                                // statement's key and length, one byte each.
                                let e = e.shifted(self.row_start + 4);
                                return Err(self.err(e, Some(row_index)));
                            }
                        }
                    }
                    0x4a | 0x52 | 0x5a => {
                        let row_index = self.row;
                        self.row += 1;
                        let at = self.pos + 4;
                        self.pos += 2 + usize::from(len);
                        match self.dec.entry_row(key, payload, at) {
                            Ok(_) => continue,
                            Err(e) => return Err(self.err(e, Some(row_index))),
                        }
                    }
                    _ => {}
                }
            }
            let mut pos = self.pos;
            let key = varint_at(b, &mut pos).map_err(|e| self.err(e, None))?;
            if key != u64::from(frame::ROWS << 3 | 2) {
                // Another frame field (metadata, unknown): skip it.
                let mut r = Reader::with_base(&b[self.pos..], self.pos);
                let skipped = r.tag().and_then(|t| match t {
                    Some((field, wt)) if field != frame::ROWS => r.skip(wt),
                    Some((field, wt)) => Err(WireError::BadWireType {
                        wire_type: wire_code(wt),
                        offset: field as usize,
                    }),
                    None => Ok(()),
                });
                if let Err(e) = skipped {
                    let kind = match e {
                        WireError::BadWireType { .. } if key >> 3 == u64::from(frame::ROWS) => {
                            K::WrongWireType {
                                field: frame::ROWS,
                                got: "non-length-delimited",
                                expected: "length-delimited",
                            }
                        }
                        e => e.into(),
                    };
                    return Err(self.err(kind, None));
                }
                self.pos = r.offset();
                continue;
            }
            let row_index = self.row;
            self.row += 1;
            let len = varint_at(b, &mut pos).map_err(|e| self.err(e, Some(row_index)))?;
            if len > (b.len() - pos) as u64 {
                return Err(self.err(WireError::Truncated(b.len()).into(), Some(row_index)));
            }
            let row = &b[pos..pos + len as usize];
            self.pos = pos + len as usize;
            let result = match row.first() {
                // A row that is exactly one triple (field 2) or quad (field 3).
                Some(&(0x12 | 0x1a)) => {
                    let mut p = 1;
                    match varint_at(row, &mut p) {
                        Ok(l) if l == (row.len() - p) as u64 => self
                            .dec
                            .statement_row(row[0] == 0x1a, &row[p..])
                            .map_err(|e| e.shifted(pos + p)),
                        _ => self.dec.row(Reader::with_base(row, pos)),
                    }
                }
                // A lookup entry row: name (field 9), prefix (10) or datatype (11).
                Some(&(0x4a | 0x52 | 0x5a)) => {
                    let mut p = 1;
                    match varint_at(row, &mut p) {
                        Ok(l) if l == (row.len() - p) as u64 => {
                            self.dec.entry_row(row[0], &row[p..], pos + p)
                        }
                        _ => self.dec.row(Reader::with_base(row, pos)),
                    }
                }
                _ => self.dec.row(Reader::with_base(row, pos)),
            };
            match result {
                Ok(Produced::Nothing) => {}
                Ok(Produced::Options) if self.dec.options.is_none() => {}
                Ok(p) => break p,
                Err(e) => return Err(self.err(e, Some(row_index))),
            }
        };
        let dec: &Decoder = self.dec;
        Ok(Some(match produced {
            Produced::Triple => Event::Statement(dec.statement_ref(false)),
            Produced::Quad => Event::Statement(dec.statement_ref(true)),
            Produced::Namespace => Event::Namespace {
                name: &dec.ns_name,
                iri: &dec.ns_iri.a,
            },
            Produced::GraphStart => Event::GraphStart(dec.graph.as_ref()),
            Produced::GraphEnd => Event::GraphEnd,
            Produced::Nothing | Produced::Options => match &dec.options {
                Some(o) => Event::Options(o),
                None => return Ok(None),
            },
        }))
    }

    /// Runs `f` on every remaining event of the frame.
    pub fn for_each(&mut self, mut f: impl FnMut(Event<'_>)) -> Result<(), DecodeError> {
        while let Some(ev) = self.next_event_inline()? {
            f(ev);
        }
        Ok(())
    }

    /// The frame's metadata entries (`RdfStreamFrame.metadata`), in wire order.
    ///
    /// Keys must be UTF-8 (they are proto `string`s); values are arbitrary bytes.
    /// An error is located at the frame's start (whatever rows were read before).
    pub fn metadata(&self) -> Result<Vec<(&'b str, &'b [u8])>, DecodeError> {
        frame_metadata(self.bytes).map_err(|e| {
            DecodeError {
                frame: self.index,
                row: None,
                offset: Some(self.base),
                kind: e.into(),
            }
            .moved(self.base)
        })
    }
}

/// Reads the metadata map of a frame without decoding its rows.
pub fn frame_metadata(bytes: &[u8]) -> Result<Vec<(&str, &[u8])>, WireError> {
    let mut out = Vec::new();
    let mut r = Reader::new(bytes);
    while let Some((field, wt)) = r.tag()? {
        if field == frame::METADATA && wt == WireType::Len {
            let mut e = r.message()?;
            let (mut k, mut v): (&str, &[u8]) = ("", &[]);
            while let Some((f, wt)) = e.tag()? {
                match (f, wt) {
                    (frame::MAP_KEY, WireType::Len) => k = e.str()?,
                    (frame::MAP_VALUE, WireType::Len) => v = e.bytes()?,
                    (_, wt) => e.skip(wt)?,
                }
            }
            out.push((k, v));
        } else {
            r.skip(wt)?;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Encoder, Term, Triple};

    /// Splits a frame into its rows' payloads.
    fn rows(frame: &[u8]) -> Vec<Vec<u8>> {
        let mut r = Reader::new(frame);
        let mut rows = Vec::new();
        while let Some((field, _)) = r.tag().unwrap() {
            assert_eq!(field, frame::ROWS);
            rows.push(r.bytes().unwrap().to_vec());
        }
        rows
    }

    /// A frame of `rows`, each with `pad` appended (bytes of an unknown row field).
    fn frame_of(rows: &[Vec<u8>], pad: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for row in rows {
            out.push(0x0a);
            jelly_proto::wire::put_varint(&mut out, (row.len() + pad.len()) as u64);
            out.extend_from_slice(row);
            out.extend_from_slice(pad);
        }
        out
    }

    /// Every event of a frame (as text), or the error (without its byte offset).
    fn decode_all(frame: &[u8]) -> Result<Vec<String>, String> {
        let mut dec = Decoder::default();
        let mut cur = dec.frame(frame);
        let mut out = Vec::new();
        loop {
            match cur.next_event() {
                Ok(Some(ev)) => out.push(format!("{ev:?}")),
                Ok(None) => return Ok(out),
                Err(e) => return Err(format!("{:?} {:?} {}", e.row, e.frame, e.kind)),
            }
        }
    }

    /// Short rows of one statement or lookup entry, which the frame loop reads from
    /// their first bytes, decode and fail exactly as the same rows read by the general
    /// row parser (which an unknown field at the end of each row forces).
    #[test]
    fn short_rows_decode_as_general_rows() {
        let mut enc = Encoder::new(StreamOptions::small()).unwrap();
        let o = ["x", "y"].map(|v| Term::Iri(format!("http://ex.org/o/{v}")));
        for i in 0..40 {
            let s = Term::Iri(format!("http://ex.org/s/{}", i % 7));
            let p = Term::Iri(format!("http://ex.org/p{}", i % 3));
            let obj = Term::simple_literal(format!("v{i}"));
            enc.add(StatementRef::triple(s.as_ref(), p.as_ref(), obj.as_ref()))
                .unwrap();
            enc.add(StatementRef::triple(
                s.as_ref(),
                p.as_ref(),
                o[i % 2].as_ref(),
            ))
            .unwrap();
        }
        let rows = rows(&enc.finish_frame());
        // field 15, varint 0: skipped by the row parser.
        let pad = [0x78, 0x00];
        let short = decode_all(&frame_of(&rows, &[])).unwrap();
        assert_eq!(short.len(), 81);
        assert_eq!(Ok(short), decode_all(&frame_of(&rows, &pad)));
        // Without the options row: the first entry row is refused.
        let no_options = &rows[1..];
        let err = decode_all(&frame_of(no_options, &[])).unwrap_err();
        assert!(err.starts_with("Some(0)"), "{err}");
        assert_eq!(Err(err), decode_all(&frame_of(no_options, &pad)));
        // Without the name entries: the first statement row is refused.
        let no_names: Vec<Vec<u8>> = rows
            .iter()
            .filter(|r| r.first() != Some(&0x4a))
            .cloned()
            .collect();
        assert!(no_names.len() < rows.len());
        let err = decode_all(&frame_of(&no_names, &[])).unwrap_err();
        assert!(err.contains("undefined name entry"), "{err}");
        assert_eq!(Err(err), decode_all(&frame_of(&no_names, &pad)));
    }

    /// `Decoder::default()` has the limits of `DecoderOptions::default()`: quoted
    /// triples (up to its nesting limit) decode, features not in the options are refused.
    #[test]
    fn default_decoder_has_default_limits() {
        let quoted = Term::Triple(Box::new(Triple {
            subject: Term::Iri("http://e/s".into()),
            predicate: Term::Iri("http://e/p".into()),
            object: Term::Iri("http://e/o".into()),
        }));
        let st = StatementRef::triple(
            quoted.as_ref(),
            TermRef::Iri("http://e/q"),
            TermRef::Iri("http://e/x"),
        );
        let mut enc = Encoder::new(StreamOptions::small().with_rdf_star(true)).unwrap();
        enc.add(st).unwrap();
        let bytes = enc.finish_frame();
        let mut dec = Decoder::default();
        assert_eq!(dec.config(), &DecoderOptions::default());
        let mut cur = dec.frame(&bytes);
        let mut got = Vec::new();
        while let Some(ev) = cur.next_event().unwrap() {
            if let Event::Statement(s) = ev {
                got.push(s.to_owned());
            }
        }
        assert_eq!(got, vec![st.to_owned()]);
    }
}
