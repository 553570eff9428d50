//! The Jelly-RDF decoder: frame bytes in, [`Event`]s out.
//!
//! [`Decoder`] holds the stream state (options, lookup tables, IRI delta state,
//! repeated terms). [`Decoder::frame`] opens one frame's bytes and hands out events
//! one at a time; each event borrows the decoder, so nothing is allocated per
//! statement once the term buffers have grown to their working size.

use jelly_proto::fields::{
    entry, frame, graph_start as gs, iri, literal as lit, namespace as ns, row, statement as st,
};
use jelly_proto::wire::{Reader, WireError, WireType};

use crate::error::{DecodeError, DecodeErrorKind as K, POSITIONS, Table};
use crate::options::{MAX_SUPPORTED_VERSION, PhysicalType, StreamOptions};
use crate::term::{BufKind, StatementRef, TermBuf, TermRef};

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
    pub max_nesting: usize,
    /// Largest frame accepted by the readers, in bytes.
    pub max_frame_bytes: u64,
    /// Reject terms the stream options do not allow (generalized terms, quoted triples).
    pub check_features: bool,
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

#[derive(Debug, Default)]
struct Lookup {
    values: Vec<String>,
    defined: Vec<bool>,
    last_id: u32,
    max: u32,
}

impl Lookup {
    fn reset(&mut self, max: u32) {
        self.max = max;
        self.last_id = 0;
        self.values.clear();
        self.values.resize_with(max as usize + 1, String::new);
        self.defined.clear();
        self.defined.resize(max as usize + 1, false);
    }

    #[inline]
    fn get(&self, id: u32, table: Table) -> Result<&str, K> {
        match self.defined.get(id as usize) {
            Some(true) => Ok(&self.values[id as usize]),
            _ if id == 0 || id > self.max => {
                if table == Table::Prefix && self.max == 0 {
                    Err(K::PrefixTableDisabled)
                } else {
                    Err(K::EntryIdOutOfRange {
                        table,
                        id: u64::from(id),
                        max: self.max,
                    })
                }
            }
            _ => Err(K::UndefinedEntry {
                table,
                id: u64::from(id),
            }),
        }
    }

    fn set(&mut self, raw_id: u32, value: &str, table: Table) -> Result<(), K> {
        if self.max == 0 && table == Table::Prefix {
            return Err(K::PrefixTableDisabled);
        }
        let id = if raw_id == 0 {
            u64::from(self.last_id) + 1
        } else {
            u64::from(raw_id)
        };
        if id == 0 || id > u64::from(self.max) {
            return Err(K::EntryIdOutOfRange {
                table,
                id,
                max: self.max,
            });
        }
        let i = id as usize;
        self.values[i].clear();
        self.values[i].push_str(value);
        self.defined[i] = true;
        self.last_id = id as u32;
        Ok(())
    }
}

/// A full IRI built from a name entry and a prefix entry, kept so that statements
/// can refer to it instead of copying it.
#[derive(Debug, Default)]
struct CachedIri {
    valid: bool,
    pid: u32,
    /// Version of the prefix entry `pid` when the IRI was built.
    pver: u32,
    iri: String,
}

/// Lookup tables and the IRI delta state (`prefix_id`/`name_id` zero rules).
#[derive(Debug, Default)]
struct State {
    /// Full IRIs by name id.
    iri_cache: Vec<CachedIri>,
    /// Bumped whenever a prefix entry changes, which makes cached IRIs with it stale.
    prefix_ver: Vec<u32>,
    names: Lookup,
    prefixes: Lookup,
    datatypes: Lookup,
    last_prefix_id: u32,
    last_name_id: u32,
    generalized: bool,
    rdf_star: bool,
    check_features: bool,
    max_nesting: usize,
}

/// Which kind of term a wire field carries.
#[derive(Clone, Copy, PartialEq, Eq)]
enum TermField {
    Iri,
    Bnode,
    Literal,
    Triple,
    DefaultGraph,
}

impl TermField {
    fn kind_name(self) -> &'static str {
        match self {
            TermField::Iri => "IRI",
            TermField::Bnode => "blank node",
            TermField::Literal => "literal",
            TermField::Triple => "quoted triple",
            TermField::DefaultGraph => "default graph",
        }
    }
}

#[inline]
fn spo_field(field: u32) -> Option<(usize, TermField)> {
    let kind = match (field - 1) % 4 {
        0 => TermField::Iri,
        1 => TermField::Bnode,
        2 => TermField::Literal,
        _ => TermField::Triple,
    };
    Some(((field as usize - 1) / 4, kind))
}

#[inline]
fn quad_graph_field(field: u32) -> TermField {
    match field {
        st::G_IRI => TermField::Iri,
        st::G_BNODE => TermField::Bnode,
        st::G_DEFAULT => TermField::DefaultGraph,
        _ => TermField::Literal,
    }
}

fn expect_len(field: u32, wt: WireType) -> Result<(), K> {
    if wt == WireType::Len {
        Ok(())
    } else {
        Err(K::WrongWireType {
            field,
            got: wire_name(wt),
            expected: "length-delimited",
        })
    }
}

fn wire_code(wt: WireType) -> u8 {
    match wt {
        WireType::Varint => 0,
        WireType::Fixed64 => 1,
        WireType::Len => 2,
        WireType::Fixed32 => 5,
    }
}

fn wire_name(wt: WireType) -> &'static str {
    match wt {
        WireType::Varint => "varint",
        WireType::Fixed64 => "fixed64",
        WireType::Len => "length-delimited",
        WireType::Fixed32 => "fixed32",
    }
}

/// Reads a varint from `b` at `*pos` (one-byte fast path inlined).
#[inline(always)]
fn varint_at(b: &[u8], pos: &mut usize) -> Result<u64, K> {
    if let Some(&x) = b.get(*pos)
        && x < 0x80
    {
        *pos += 1;
        return Ok(u64::from(x));
    }
    varint_at_slow(b, pos)
}

#[cold]
#[inline(never)]
fn varint_at_slow(b: &[u8], pos: &mut usize) -> Result<u64, K> {
    let mut r = Reader::new(&b[*pos..]);
    let v = r.varint()?;
    *pos += r.offset();
    Ok(v)
}

/// Parses an `RdfIri` payload into `(prefix_id, name_id)`.
#[inline(always)]
fn iri_ids(b: &[u8]) -> Result<(u32, u32), K> {
    // Common encodings: empty, `08 p`, `10 n`, `08 p 10 n` with one-byte ids.
    match *b {
        [] => return Ok((0, 0)),
        [0x10, n] if n < 0x80 => return Ok((0, u32::from(n))),
        [0x08, p] if p < 0x80 => return Ok((u32::from(p), 0)),
        [0x08, p, 0x10, n] if p < 0x80 && n < 0x80 => return Ok((u32::from(p), u32::from(n))),
        _ => {}
    }
    let mut r = Reader::new(b);
    let (mut prefix_id, mut name_id) = (0u32, 0u32);
    while let Some((field, wt)) = r.tag()? {
        match (field, wt) {
            (iri::PREFIX_ID, WireType::Varint) => prefix_id = r.varint32()?,
            (iri::NAME_ID, WireType::Varint) => name_id = r.varint32()?,
            (_, wt) => r.skip(wt)?,
        }
    }
    Ok((prefix_id, name_id))
}

/// Term kind and payload range of one statement position, as found on the wire.
#[derive(Clone, Copy)]
struct RawSlot {
    kind: Option<TermField>,
    start: usize,
    end: usize,
}

const EMPTY_SLOT: RawSlot = RawSlot {
    kind: None,
    start: 0,
    end: 0,
};

impl State {
    /// Applies the IRI rules to an `RdfIri` payload and writes the IRI into `dest`.
    #[inline(always)]
    fn resolve_iri_bytes(&mut self, b: &[u8], dest: &mut TermBuf) -> Result<(), K> {
        let (prefix_id, name_id) = iri_ids(b)?;
        let pid = if prefix_id == 0 {
            self.last_prefix_id
        } else {
            prefix_id
        };
        let prefix = if pid == 0 {
            ""
        } else {
            self.prefixes.get(pid, Table::Prefix)?
        };
        let nid = if name_id == 0 {
            self.last_name_id.saturating_add(1)
        } else {
            name_id
        };
        let name = self.names.get(nid, Table::Name)?;
        dest.set_iri2(prefix, name);
        self.last_prefix_id = pid;
        self.last_name_id = nid;
        Ok(())
    }

    /// Applies the IRI rules and writes the resolved IRI into `dest`.
    #[inline]
    fn resolve_iri(&mut self, mut r: Reader<'_>, dest: &mut TermBuf) -> Result<(), K> {
        self.resolve_iri_bytes(r.remaining(), dest)
    }

    fn resolve_literal(&mut self, mut r: Reader<'_>, dest: &mut TermBuf) -> Result<(), K> {
        let mut lex = "";
        let mut lang: Option<&str> = None;
        let mut dt: Option<u32> = None;
        while let Some((field, wt)) = r.tag()? {
            match (field, wt) {
                (lit::LEX, WireType::Len) => lex = r.str()?,
                (lit::LANGTAG, WireType::Len) => lang = Some(r.str()?),
                (lit::DATATYPE, WireType::Varint) => dt = Some(r.varint32()?),
                (lit::LEX | lit::LANGTAG | lit::DATATYPE, wt) => {
                    let expected = if field == lit::DATATYPE {
                        "varint"
                    } else {
                        "length-delimited"
                    };
                    return Err(K::WrongWireType {
                        field,
                        got: wire_name(wt),
                        expected,
                    });
                }
                (_, wt) => r.skip(wt)?,
            }
        }
        match (lang, dt) {
            (Some(_), Some(_)) => return Err(K::LangAndDatatype),
            (Some(l), None) => {
                dest.set_str(BufKind::Lang, lex);
                dest.b.clear();
                dest.b.push_str(l);
            }
            (None, Some(0)) => return Err(K::DatatypeZero),
            (None, Some(id)) => {
                let dt = self.datatypes.get(id, Table::Datatype)?;
                dest.set_str(BufKind::Typed, lex);
                dest.b.clear();
                dest.b.push_str(dt);
            }
            (None, None) => dest.set_str(BufKind::Simple, lex),
        }
        Ok(())
    }

    /// Resolves one term field into `dest`. `depth` is the quoted-triple nesting level of `dest`.
    fn resolve_term(
        &mut self,
        kind: TermField,
        payload: Reader<'_>,
        dest: &mut TermBuf,
        position: usize,
        depth: usize,
    ) -> Result<(), K> {
        if self.check_features {
            self.check_feature(kind, position)?;
        }
        match kind {
            TermField::Iri => self.resolve_iri(payload, dest),
            TermField::Bnode => {
                let mut r = payload;
                // The payload of a string field is the string itself.
                let s = std::str::from_utf8(r_rest(&mut r))
                    .map_err(|e| WireError::BadUtf8(r.offset() + e.valid_up_to()))?;
                dest.set_str(BufKind::Bnode, s);
                Ok(())
            }
            TermField::Literal => self.resolve_literal(payload, dest),
            TermField::DefaultGraph => {
                dest.kind = BufKind::DefaultGraph;
                Ok(())
            }
            TermField::Triple => {
                if depth >= self.max_nesting {
                    return Err(K::TooDeep(self.max_nesting));
                }
                let slots = collect_spo(payload, 3)?;
                let q = dest.quoted.get_or_insert_with(Default::default);
                for (i, slot) in slots.into_iter().take(3).enumerate() {
                    let Some((k, r)) = slot else {
                        return Err(K::RepeatedTermInQuoted {
                            position: POSITIONS[i],
                        });
                    };
                    self.resolve_term(k, r, &mut q[i], i, depth + 1)?;
                }
                dest.kind = BufKind::Triple;
                Ok(())
            }
        }
    }

    #[inline]
    fn check_feature(&self, kind: TermField, position: usize) -> Result<(), K> {
        let allowed = match (position, kind) {
            (_, TermField::Triple) => {
                if !self.rdf_star {
                    return Err(K::RdfStarNotAllowed {
                        position: POSITIONS[position],
                    });
                }
                position != 1 || self.generalized
            }
            (0, TermField::Iri | TermField::Bnode) => true,
            (1, TermField::Iri) => true,
            (2, _) => true,
            (3, TermField::Iri | TermField::Bnode | TermField::DefaultGraph) => true,
            _ => self.generalized,
        };
        if allowed {
            Ok(())
        } else {
            Err(K::GeneralizedNotAllowed {
                kind: kind.kind_name(),
                position: POSITIONS[position],
            })
        }
    }
}

/// The remaining bytes of a reader (a string field's payload).
#[inline]
fn r_rest<'a>(r: &mut Reader<'a>) -> &'a [u8] {
    r.remaining()
}

type Slot<'b> = Option<(TermField, Reader<'b>)>;

/// Collects the term fields of an `RdfTriple` (n = 3) or `RdfQuad` (n = 4).
#[inline]
fn collect_spo(mut r: Reader<'_>, n: usize) -> Result<[Slot<'_>; 4], K> {
    let mut slots: [Slot<'_>; 4] = [None, None, None, None];
    while let Some((field, wt)) = r.tag()? {
        let (pos, kind) = match field {
            1..=12 => match spo_field(field) {
                Some(x) => x,
                None => continue,
            },
            13..=16 if n == 4 => (3, quad_graph_field(field)),
            _ => {
                r.skip(wt)?;
                continue;
            }
        };
        expect_len(field, wt)?;
        let payload = r.message()?;
        if slots[pos].is_some() {
            return Err(K::MultipleTermFields {
                position: POSITIONS[pos],
            });
        }
        slots[pos] = Some((kind, payload));
    }
    Ok(slots)
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
#[derive(Debug, Default)]
pub struct Decoder {
    cfg: DecoderOptions,
    options: Option<StreamOptions>,
    state: State,
    cur: [TermBuf; 4],
    have: [bool; 4],
    graph: TermBuf,
    in_graph: bool,
    ns_name: String,
    ns_iri: TermBuf,
    stats: DecoderStats,
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
        let mut d = Decoder {
            cfg,
            ..Default::default()
        };
        d.state.max_nesting = d.cfg.max_nesting;
        d.state.check_features = d.cfg.check_features;
        d
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
        if o.max_name_table_size < 8 {
            return Err(K::NameTableTooSmall(o.max_name_table_size));
        }
        for (table, requested, limit) in [
            (
                Table::Name,
                o.max_name_table_size,
                self.cfg.max_name_table_size,
            ),
            (
                Table::Prefix,
                o.max_prefix_table_size,
                self.cfg.max_prefix_table_size,
            ),
            (
                Table::Datatype,
                o.max_datatype_table_size,
                self.cfg.max_datatype_table_size,
            ),
        ] {
            if requested > limit {
                return Err(K::TableTooLarge {
                    table,
                    requested,
                    limit,
                });
            }
        }
        self.state.names.reset(o.max_name_table_size);
        self.state.prefixes.reset(o.max_prefix_table_size);
        self.state.datatypes.reset(o.max_datatype_table_size);
        self.state.iri_cache.clear();
        self.state
            .iri_cache
            .resize_with(o.max_name_table_size as usize + 1, CachedIri::default);
        self.state.prefix_ver.clear();
        self.state
            .prefix_ver
            .resize(o.max_prefix_table_size as usize + 1, 0);
        self.state.generalized = o.generalized_statements;
        self.state.rdf_star = o.rdf_star;
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

    /// Decodes an `RdfTriple` (n = 3) or `RdfQuad` (n = 4) payload into the current
    /// statement. Fields are first located on the wire, then resolved in S, P, O, G
    /// order, as the IRI delta rules require whatever the field order.
    fn statement(&mut self, b: &[u8], n: usize) -> Result<(), K> {
        let mut slots = [EMPTY_SLOT; 4];
        let mut pos = 0;
        while pos < b.len() {
            let key = varint_at(b, &mut pos)?;
            let field = key >> 3;
            let term_field = match field {
                1..=12 => true,
                13..=16 => n == 4,
                _ => false,
            };
            if !term_field {
                // Unknown field: skip it with the general reader.
                let mut r = Reader::new(&b[pos..]);
                let wt = match key & 7 {
                    0 => WireType::Varint,
                    1 => WireType::Fixed64,
                    2 => WireType::Len,
                    5 => WireType::Fixed32,
                    w => {
                        return Err(WireError::BadWireType {
                            wire_type: w as u8,
                            offset: pos,
                        }
                        .into());
                    }
                };
                r.skip(wt)?;
                pos += r.offset();
                continue;
            }
            let field = field as u32;
            if key & 7 != 2 {
                return Err(K::WrongWireType {
                    field,
                    got: "non-length-delimited",
                    expected: "length-delimited",
                });
            }
            let len = varint_at(b, &mut pos)?;
            if len > (b.len() - pos) as u64 {
                return Err(WireError::Truncated(b.len()).into());
            }
            let (p, kind) = if field <= 12 {
                let p = (field as usize - 1) / 4;
                let kind = match (field - 1) % 4 {
                    0 => TermField::Iri,
                    1 => TermField::Bnode,
                    2 => TermField::Literal,
                    _ => TermField::Triple,
                };
                (p, kind)
            } else {
                (3, quad_graph_field(field))
            };
            if slots[p].kind.is_some() {
                return Err(K::MultipleTermFields {
                    position: POSITIONS[p],
                });
            }
            let end = pos + len as usize;
            slots[p] = RawSlot {
                kind: Some(kind),
                start: pos,
                end,
            };
            pos = end;
        }
        for (i, slot) in slots.iter().enumerate().take(n) {
            match slot.kind {
                Some(TermField::Iri) => {
                    // IRIs are allowed in every position: no feature check needed.
                    self.resolve_iri_cached(&b[slot.start..slot.end], i)?;
                    self.have[i] = true;
                }
                Some(kind) => {
                    let payload = Reader::new(&b[slot.start..slot.end]);
                    self.state
                        .resolve_term(kind, payload, &mut self.cur[i], i, 0)?;
                    self.have[i] = true;
                }
                None if self.have[i] => {}
                None => {
                    return Err(K::RepeatedTermFirst {
                        position: POSITIONS[i],
                    });
                }
            }
        }
        Ok(())
    }

    /// Resolves a top-level IRI of position `i` through the IRI cache: no copy when the
    /// cache already holds it.
    #[inline(always)]
    fn resolve_iri_cached(&mut self, b: &[u8], i: usize) -> Result<(), K> {
        let (prefix_id, name_id) = iri_ids(b)?;
        let st = &mut self.state;
        let pid = if prefix_id == 0 {
            st.last_prefix_id
        } else {
            prefix_id
        };
        let nid = if name_id == 0 {
            st.last_name_id.saturating_add(1)
        } else {
            name_id
        };
        let pver = if pid == 0 {
            0
        } else {
            st.prefix_ver.get(pid as usize).copied().unwrap_or(0)
        };
        let hit = match st.iri_cache.get(nid as usize) {
            Some(e) => e.valid && e.pid == pid && e.pver == pver,
            None => false,
        };
        if !hit {
            let prefix = if pid == 0 {
                ""
            } else {
                st.prefixes.get(pid, Table::Prefix)?
            };
            let name = st.names.get(nid, Table::Name)?;
            // The entry is about to change: terms still pointing at it keep their own copy.
            Self::materialize(&mut self.cur, &st.iri_cache, nid);
            let e = &mut st.iri_cache[nid as usize];
            e.iri.clear();
            e.iri.push_str(prefix);
            e.iri.push_str(name);
            e.valid = true;
            e.pid = pid;
            e.pver = pver;
        }
        st.last_prefix_id = pid;
        st.last_name_id = nid;
        let dest = &mut self.cur[i];
        dest.kind = BufKind::IriCached;
        dest.nid = nid;
        Ok(())
    }

    /// Copies the cached IRI of `nid` into every current term that points at it.
    #[cold]
    fn materialize(cur: &mut [TermBuf; 4], cache: &[CachedIri], nid: u32) {
        for t in cur.iter_mut() {
            if t.kind == BufKind::IriCached && t.nid == nid {
                t.a.clear();
                t.a.push_str(&cache[nid as usize].iri);
                t.kind = BufKind::Iri;
            }
        }
    }

    /// The term in a buffer, resolving IRIs held in the cache.
    #[inline(always)]
    fn term_ref<'a>(&'a self, b: &'a TermBuf) -> TermRef<'a> {
        if b.kind == BufKind::IriCached {
            TermRef::Iri(&self.state.iri_cache[b.nid as usize].iri)
        } else {
            b.as_ref()
        }
    }

    /// A triple or quad row, given its statement payload.
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
            self.statement(payload, 4)?;
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
            self.statement(payload, 3)?;
            Ok(Produced::Triple)
        }
    }

    fn row(&mut self, mut r: Reader<'_>) -> Result<Produced, K> {
        let mut found: Option<(u32, Reader<'_>)> = None;
        while let Some((field, wt)) = r.tag()? {
            match field {
                row::OPTIONS
                | row::TRIPLE
                | row::QUAD
                | row::GRAPH_START
                | row::GRAPH_END
                | row::NAMESPACE
                | row::NAME
                | row::PREFIX
                | row::DATATYPE => {
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
            row::TRIPLE => self.statement_row(false, m.unread()),
            row::QUAD => self.statement_row(true, m.unread()),
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
                self.state.resolve_term(kind, p, &mut self.graph, 3, 0)?;
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
                self.state.resolve_iri(v, &mut self.ns_iri)?;
                Ok(Produced::Namespace)
            }
            row::NAME | row::PREFIX | row::DATATYPE => {
                let (table, lookup) = match field {
                    row::NAME => {
                        self.stats.name_rows += 1;
                        (Table::Name, &mut self.state.names)
                    }
                    row::PREFIX => {
                        self.stats.prefix_rows += 1;
                        (Table::Prefix, &mut self.state.prefixes)
                    }
                    _ => {
                        self.stats.datatype_rows += 1;
                        (Table::Datatype, &mut self.state.datatypes)
                    }
                };
                let mut r = m;
                let mut id = 0u32;
                let mut value = "";
                while let Some((f, wt)) = r.tag()? {
                    match (f, wt) {
                        (entry::ID, WireType::Varint) => id = r.varint32()?,
                        (entry::VALUE, WireType::Len) => value = r.str()?,
                        (_, wt) => r.skip(wt)?,
                    }
                }
                lookup.set(id, value, table)?;
                let id = lookup.last_id;
                match table {
                    Table::Name => {
                        if self
                            .cur
                            .iter()
                            .any(|t| t.kind == BufKind::IriCached && t.nid == id)
                        {
                            Self::materialize(&mut self.cur, &self.state.iri_cache, id);
                        }
                        if let Some(e) = self.state.iri_cache.get_mut(id as usize) {
                            e.valid = false;
                        }
                    }
                    Table::Prefix => {
                        if let Some(v) = self.state.prefix_ver.get_mut(id as usize) {
                            *v = v.wrapping_add(1);
                        }
                    }
                    Table::Datatype => {}
                }
                Ok(Produced::Nothing)
            }
            _ => Ok(Produced::Nothing),
        }
    }

    fn statement_ref(&self, quad: bool) -> StatementRef<'_> {
        let graph = if quad {
            Some(self.term_ref(&self.cur[3]))
        } else if self.physical() == PhysicalType::Graphs {
            Some(self.graph.as_ref())
        } else {
            None
        };
        StatementRef {
            subject: self.term_ref(&self.cur[0]),
            predicate: self.term_ref(&self.cur[1]),
            object: self.term_ref(&self.cur[2]),
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

    #[cold]
    fn err(&self, kind: K, row: Option<u64>) -> DecodeError {
        // Offsets inside a row are relative to sub-messages; report the row's start.
        DecodeError {
            frame: self.index,
            row,
            offset: Some(self.base + self.row_start as u64),
            kind,
        }
    }

    /// The next event of the frame, or `None` at its end.
    pub fn next_event(&mut self) -> Result<Option<Event<'_>>, DecodeError> {
        let produced = loop {
            let b = self.bytes;
            if self.pos >= b.len() {
                return Ok(None);
            }
            self.row_start = self.pos;
            let mut pos = self.pos;
            let key = varint_at(b, &mut pos).map_err(|e| self.err(e, None))?;
            if key != u64::from(frame::ROWS << 3 | 2) {
                // Another frame field (metadata, unknown): skip it.
                let mut r = Reader::new(&b[self.pos..]);
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
                self.pos += r.offset();
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
                        Ok(l) if p as u64 + l == row.len() as u64 => {
                            self.dec.statement_row(row[0] == 0x1a, &row[p..])
                        }
                        _ => self.dec.row(Reader::new(row)),
                    }
                }
                _ => self.dec.row(Reader::new(row)),
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
        while let Some(ev) = self.next_event()? {
            f(ev);
        }
        Ok(())
    }

    /// The frame's metadata entries (`RdfStreamFrame.metadata`), in wire order.
    ///
    /// Keys must be UTF-8 (they are proto `string`s); values are arbitrary bytes.
    pub fn metadata(&self) -> Result<Vec<(&'b str, &'b [u8])>, DecodeError> {
        frame_metadata(self.bytes).map_err(|e| self.err(e.into(), None))
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
