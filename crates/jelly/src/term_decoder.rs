//! Term decoding shared by Jelly-RDF and Jelly-Patch streams: the lookup tables, the
//! IRI delta state (`prefix_id`/`name_id` zero rules), the full-IRI cache and the
//! repeated-term buffers of the current statement.

use std::collections::HashMap;

use jelly_proto::fields::{iri, literal as lit, statement as st};
use jelly_proto::wire::{Reader, WireError, WireType, utf8};

use crate::error::{DecodeErrorKind as K, POSITIONS, Table};
use crate::term::{BufKind, TermBuf, TermRef};

/// Strings by slot number in one buffer: setting a slot appends its new text, and
/// the buffer is compacted when more than half of it is stale. Decoding a stream thus
/// allocates a few growing buffers rather than one string per table entry.
#[derive(Debug, Default)]
struct StrSlots {
    text: String,
    /// `(offset, length)` of each slot's text in `text`.
    spans: Vec<(usize, usize)>,
    /// Bytes of `text` that some slot refers to.
    live: usize,
}

impl StrSlots {
    /// Empties every slot; slots are made as they are set (see [`grow_to`]).
    fn reset(&mut self) {
        self.text.clear();
        self.spans.clear();
        self.live = 0;
    }

    #[inline(always)]
    fn get(&self, slot: usize) -> &str {
        match self.spans.get(slot) {
            // Every span is the whole text of one `set`, so it is on char boundaries.
            Some(&(off, len)) => self.text.get(off..off + len).unwrap_or_default(),
            None => "",
        }
    }

    /// [`StrSlots::get`] as bytes, without the checks that the span is on `char`
    /// boundaries (for callers that copy the value as it is).
    #[inline(always)]
    fn get_bytes(&self, slot: usize) -> &[u8] {
        match self.spans.get(slot) {
            Some(&(off, len)) => self.text.as_bytes().get(off..off + len).unwrap_or_default(),
            None => &[],
        }
    }

    /// Sets the text of `slot` (which must exist: see [`grow_to`]).
    #[inline]
    fn set(&mut self, slot: usize, value: &str) {
        let Some(&(_, old)) = self.spans.get(slot) else {
            return;
        };
        let len = value.len();
        self.live = self.live - old + len;
        if self.text.len() + len > 2 * self.live + (64 << 10) {
            self.compact(slot);
        }
        let off = self.text.len();
        self.text.push_str(value);
        self.spans[slot] = (off, len);
    }

    /// Rewrites the buffer with the text of every slot but `skip` (about to be set).
    #[cold]
    fn compact(&mut self, skip: usize) {
        let mut text = String::with_capacity(2 * self.live + (64 << 10));
        for (i, span) in self.spans.iter_mut().enumerate() {
            if i == skip {
                *span = (0, 0);
                continue;
            }
            let (off, len) = *span;
            let start = text.len();
            text.push_str(self.text.get(off..off + len).unwrap_or_default());
            *span = (start, len);
        }
        self.text = text;
    }
}

/// One lookup table. Entries live in slots indexed by id (`defined`, `values`), which
/// grow with the ids set, while at least a quarter of them would be in use; an entry
/// whose id lies further out goes into `sparse` (until the slots grow past it). So a
/// stream that asks for a large table (under a raised limit) costs memory for the
/// entries it defines, not for the highest id it uses: one entry of id 10^7 used to
/// fill 10^7 slots, about 0.5 GB with the IRI cache's.
#[derive(Debug, Default)]
struct Lookup {
    values: StrSlots,
    defined: Vec<bool>,
    /// Entries whose id is at or beyond `defined.len()`.
    sparse: HashMap<u32, Box<str>>,
    /// Ids defined, in the slots and in `sparse`.
    count: usize,
    last_id: u32,
    max: u32,
}

impl Lookup {
    /// Empties the table and sets its size. Nothing is allocated for the size (see
    /// [`Lookup`]).
    fn reset(&mut self, max: u32) {
        self.max = max;
        self.last_id = 0;
        self.values.reset();
        self.defined.clear();
        self.sparse.clear();
        self.count = 0;
        // Room for tables of the usual sizes (up to the default limits), so that they
        // grow without reallocating; reserved, not filled, so it costs no work.
        let room = presized(max);
        let _ = self.defined.try_reserve(room);
        let _ = self.values.spans.try_reserve(room);
    }

    #[inline(always)]
    fn get(&self, id: u32, table: Table) -> Result<&str, K> {
        match self.defined.get(id as usize) {
            Some(true) => Ok(self.values.get(id as usize)),
            _ => self.get_slow(id, table),
        }
    }

    /// [`Lookup::get`] of an id not in a slot: in `sparse`, or an error.
    #[cold]
    #[inline(never)]
    fn get_slow(&self, id: u32, table: Table) -> Result<&str, K> {
        self.get_sparse(id).ok_or_else(|| self.get_error(id, table))
    }

    /// [`Lookup::get`] as bytes (see [`StrSlots::get_bytes`]); `None` when `id` has no
    /// value.
    #[inline(always)]
    fn get_bytes(&self, id: u32) -> Option<&[u8]> {
        match self.defined.get(id as usize) {
            Some(true) => Some(self.values.get_bytes(id as usize)),
            _ => self.get_sparse(id).map(str::as_bytes),
        }
    }

    /// The value of `id` when it is not in a slot.
    #[cold]
    fn get_sparse(&self, id: u32) -> Option<&str> {
        self.sparse.get(&id).map(|v| &**v)
    }

    /// Length of the slots: ids below it are kept in slots.
    #[inline]
    fn slots(&self) -> usize {
        self.defined.len()
    }

    /// Why `id` has no value: out of range, or not defined yet.
    #[cold]
    #[inline(never)]
    fn get_error(&self, id: u32, table: Table) -> K {
        match id {
            _ if id == 0 || id > self.max => {
                if table == Table::Prefix && self.max == 0 {
                    K::PrefixTableDisabled
                } else {
                    K::EntryIdOutOfRange {
                        table,
                        id: u64::from(id),
                        max: self.max,
                    }
                }
            }
            _ => K::UndefinedEntry {
                table,
                id: u64::from(id),
            },
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
        if i >= self.defined.len() {
            let len = grown_len(i, self.defined.len(), self.max);
            // Slots only while at least a quarter of them would be in use (and always
            // for tables up to the default limits).
            if len > DENSE_SLOTS.max(4 * (self.count + 1)) {
                let fresh = self.sparse.insert(id as u32, value.into()).is_none();
                self.count += usize::from(fresh);
                self.last_id = id as u32;
                return Ok(());
            }
            grow_to(&mut self.defined, len, false)
                .and_then(|()| grow_to(&mut self.values.spans, len, (0, 0)))
                .map_err(|()| K::TableAllocation { table, id })?;
            if !self.sparse.is_empty() {
                self.unsparse();
            }
        }
        self.values.set(i, value);
        self.count += usize::from(!self.defined[i]);
        self.defined[i] = true;
        self.last_id = id as u32;
        Ok(())
    }

    /// Moves the entries of `sparse` that the slots now reach into their slots.
    #[cold]
    fn unsparse(&mut self) {
        let len = self.defined.len();
        let reached: Vec<u32> = self
            .sparse
            .keys()
            .copied()
            .filter(|&id| (id as usize) < len)
            .collect();
        for id in reached {
            if let Some(v) = self.sparse.remove(&id) {
                self.values.set(id as usize, &v);
                self.defined[id as usize] = true;
            }
        }
    }
}

/// Slots a table may always have (up to 4,096 entries, the default name table limit),
/// however few of them are in use.
const DENSE_SLOTS: usize = 4097;

/// Slots reserved ahead for a table of size `max`: all of them up to 4,096 (the
/// default name table limit), then that many.
fn presized(max: u32) -> usize {
    (max as usize + 1).min(DENSE_SLOTS)
}

/// The length a table's slots grow to for id `i`: at least twice the present length
/// (so that ids set in order grow it a few times, not once per entry), never past
/// the table's size `max` (ids run to `max`, slot 0 is unused).
fn grown_len(i: usize, len: usize, max: u32) -> usize {
    (i + 1)
        .max(len.saturating_mul(2))
        .max(16)
        .min(max as usize + 1)
}

/// Lengthens `v` to `len` with `fill` (never shortens it). Growth at least doubles the
/// capacity, so ids set in order cost amortized constant time; a length that cannot
/// be allocated is an error rather than an abort.
fn grow_to<T: Clone>(v: &mut Vec<T>, len: usize, fill: T) -> Result<(), ()> {
    grow_with(v, len, || fill.clone())
}

/// [`grow_to`] with each new slot made by `make`.
fn grow_with<T>(v: &mut Vec<T>, len: usize, make: impl FnMut() -> T) -> Result<(), ()> {
    if len <= v.len() {
        return Ok(());
    }
    if len > v.capacity() {
        let want = len.max(v.capacity().saturating_mul(2));
        if v.try_reserve_exact(want - v.len()).is_err() {
            v.try_reserve_exact(len - v.len()).map_err(|_| ())?;
        }
    }
    v.resize_with(len, make);
    Ok(())
}

/// A full IRI built from a name entry and a prefix entry, kept so that statements
/// can refer to it instead of copying it.
#[derive(Debug)]
struct CachedIri {
    /// What the IRI was built from, [`iri_key`] of the prefix id and that prefix
    /// entry's version, or [`NO_IRI`]: one comparison checks an entry.
    key: u64,
    iri: String,
    /// `iri` is relative (see [`TermBuf::not_rdf`]): checked when the IRI is built, so
    /// once per distinct IRI rather than per occurrence.
    not_rdf: bool,
}

/// [`CachedIri::key`] of an entry holding no IRI. No IRI has it: prefix id 0 (no
/// prefix) always has version 0.
const NO_IRI: u64 = 1 << 32;

/// A key no [`CachedIri`] has (prefix id 0 has version 0): that of an IRI not to cache.
const UNCACHED_IRI: u64 = 2 << 32;

/// [`CachedIri::key`] of an IRI built with prefix entry `pid` at version `pver`.
#[inline(always)]
fn iri_key(pid: u32, pver: u32) -> u64 {
    u64::from(pver) << 32 | u64::from(pid)
}

/// Shrinks the buffers of a quoted triple's terms, at every nesting level, that grew
/// past [`QUOTED_KEEP`] (their text is about to be replaced).
fn shrink_quoted(q: &mut [TermBuf; 3]) {
    for t in q.iter_mut() {
        if t.a.capacity() > QUOTED_KEEP {
            t.a.clear();
            t.a.shrink_to(QUOTED_KEEP);
        }
        if t.b.capacity() > QUOTED_KEEP {
            t.b.clear();
            t.b.shrink_to(QUOTED_KEEP);
        }
        if let Some(inner) = &mut t.quoted {
            shrink_quoted(inner);
        }
    }
}

impl Default for CachedIri {
    fn default() -> Self {
        CachedIri {
            key: NO_IRI,
            iri: String::new(),
            not_rdf: false,
        }
    }
}

/// Most bytes the IRI cache's buffers may hold together. An entry per name id holds
/// prefix + name, so without a cap a stream could define one long prefix and then
/// make every name id hold a copy of it: a name table's worth of copies from one
/// frame. Past the cap an IRI is copied into its term, as an uncached IRI is.
const IRI_CACHE_BYTES_MAX: usize = 32 << 20;

/// A term buffer inside a quoted triple that grew past this size is shrunk back
/// before the buffer is reused for another quoted triple, so that buffers at many
/// nesting levels do not each keep the room of the largest term they once held.
const QUOTED_KEEP: usize = 64 << 10;

/// Lookup tables and the IRI delta state (`prefix_id`/`name_id` zero rules).
#[derive(Debug, Default)]
pub(crate) struct State {
    /// Full IRIs by name id, for the ids the name table keeps in slots (as far as
    /// they were set).
    iri_cache: Vec<CachedIri>,
    /// Bytes allocated by the buffers of `iri_cache` (at most [`IRI_CACHE_BYTES_MAX`]).
    iri_cache_bytes: usize,
    /// Bytes of text written into the terms of the quoted triple being resolved.
    quoted_bytes: u64,
    /// Most bytes of text one top-level quoted triple may hold (the largest frame
    /// accepted): its IRIs are built from table entries, so nesting could otherwise
    /// multiply a frame's bytes by the number of terms.
    pub(crate) max_quoted_bytes: u64,
    /// Bumped whenever a prefix entry changes, which makes cached IRIs with it stale.
    /// Index 0 (no prefix) is always there; a prefix id beyond the end (one the prefix
    /// table keeps out of its slots) has no version, and IRIs with it are not cached.
    prefix_ver: Vec<u32>,
    /// Per datatype id in the datatype table's slots (as far as they were set): whether
    /// literals of that datatype are not RDF (see [`TermBuf::not_rdf`]), worked out when
    /// the entry is set; `None` for an entry set out of the slots (then checked per use).
    datatype_not_rdf: Vec<Option<bool>>,
    names: Lookup,
    prefixes: Lookup,
    datatypes: Lookup,
    last_prefix_id: u32,
    last_name_id: u32,
    generalized: bool,
    rdf_star: bool,
    pub(crate) check_features: bool,
    pub(crate) max_nesting: usize,
}

/// Which kind of term a wire field carries.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum TermField {
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

/// Position (0–2) and term kind of a subject, predicate or object field (1–12).
#[inline]
pub(crate) fn spo_field(field: u32) -> Option<(usize, TermField)> {
    let kind = match (field - 1) % 4 {
        0 => TermField::Iri,
        1 => TermField::Bnode,
        2 => TermField::Literal,
        _ => TermField::Triple,
    };
    Some(((field as usize - 1) / 4, kind))
}

#[inline]
pub(crate) fn quad_graph_field(field: u32) -> TermField {
    match field {
        st::G_IRI => TermField::Iri,
        st::G_BNODE => TermField::Bnode,
        st::G_DEFAULT => TermField::DefaultGraph,
        _ => TermField::Literal,
    }
}

pub(crate) fn expect_len(field: u32, wt: WireType) -> Result<(), K> {
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

pub(crate) fn wire_code(wt: WireType) -> u8 {
    match wt {
        WireType::Varint => 0,
        WireType::Fixed64 => 1,
        WireType::Len => 2,
        WireType::Fixed32 => 5,
    }
}

pub(crate) fn wire_name(wt: WireType) -> &'static str {
    match wt {
        WireType::Varint => "varint",
        WireType::Fixed64 => "fixed64",
        WireType::Len => "length-delimited",
        WireType::Fixed32 => "fixed32",
    }
}

/// Reads a varint from `b` at `*pos` (one-byte fast path inlined).
#[inline(always)]
pub(crate) fn varint_at(b: &[u8], pos: &mut usize) -> Result<u64, K> {
    if let Some(&x) = b.get(*pos)
        && x < 0x80
    {
        *pos += 1;
        return Ok(u64::from(x));
    }
    // Two bytes: lengths of rows and fields from 128 bytes to 16 KiB.
    if let Some(&[x, y]) = b
        .get(*pos..*pos + 2)
        .and_then(|s| <&[u8; 2]>::try_from(s).ok())
        && y < 0x80
    {
        *pos += 2;
        return Ok(u64::from(x & 0x7f) | u64::from(y) << 7);
    }
    varint_at_slow(b, pos)
}

#[cold]
#[inline(never)]
fn varint_at_slow(b: &[u8], pos: &mut usize) -> Result<u64, K> {
    // Based at `*pos`, so that an error's offset is an offset in `b`, like the other
    // offsets the callers report (see `DecodeErrorKind::shifted`).
    let mut r = Reader::with_base(&b[*pos..], *pos);
    let v = r.varint()?;
    *pos = r.offset();
    Ok(v)
}

/// Reads an id of one or two varint bytes (canonical) at `*at`; `None` for anything else.
#[inline(always)]
fn short_id(b: &[u8], at: &mut usize) -> Option<u32> {
    let lo = *b.get(*at)?;
    if lo < 0x80 {
        *at += 1;
        return Some(u32::from(lo));
    }
    let hi = *b.get(*at + 1)?;
    if hi >= 0x80 || hi == 0 {
        return None;
    }
    *at += 2;
    Some(u32::from(lo & 0x7f) | u32::from(hi) << 7)
}

/// Parses an `RdfIri` payload into `(prefix_id, name_id)`.
#[inline(always)]
pub(crate) fn iri_ids(b: &[u8]) -> Result<(u32, u32), K> {
    // Common encodings: empty, `08 p`, `10 n`, `08 p 10 n` with one-byte ids.
    match *b {
        [] => return Ok((0, 0)),
        [0x10, n] if n < 0x80 => return Ok((0, u32::from(n))),
        [0x08, p] if p < 0x80 => return Ok((u32::from(p), 0)),
        [0x08, p, 0x10, n] if p < 0x80 && n < 0x80 => return Ok((u32::from(p), u32::from(n))),
        _ => {}
    }
    // The same with ids of one or two bytes (names beyond 127).
    let mut at = 0;
    let two = |at: &mut usize| short_id(b, at);
    let mut prefix_id = 0;
    let mut name_id = 0;
    let mut ok = true;
    if b.first() == Some(&0x08) {
        at = 1;
        match two(&mut at) {
            Some(p) => prefix_id = p,
            None => ok = false,
        }
    }
    if ok && b.get(at) == Some(&0x10) {
        at += 1;
        match two(&mut at) {
            Some(n) => name_id = n,
            None => ok = false,
        }
    }
    if ok && at == b.len() {
        return Ok((prefix_id, name_id));
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

/// Term kind and payload of one statement position, as found on the wire.
pub(crate) type RawSlot<'b> = Option<(TermField, &'b [u8])>;

/// `e`, an error found in the payload of `slot`, a term of the statement `whole`, with
/// its offset moved to an offset in `whole`. Worked out only for errors (from where
/// the payload lies in memory), so that the terms being decoded carry no offsets.
#[cold]
#[inline(never)]
fn slot_error(e: K, whole: &[u8], slot: RawSlot<'_>) -> K {
    let at = slot.map_or(0, |(_, part)| {
        (part.as_ptr() as usize).wrapping_sub(whole.as_ptr() as usize)
    });
    e.shifted(at)
}

/// Term kinds by the code used in [`term_keys`].
const TERM_KINDS: [TermField; 5] = [
    TermField::Iri,
    TermField::Bnode,
    TermField::Literal,
    TermField::Triple,
    TermField::DefaultGraph,
];

/// For each first byte of a field key in a statement with `n` terms (3 or 4): if it is
/// the whole key of a length-delimited term field 1–15 (1–12 for triples), 0x80, plus
/// the field's position (0–3) times 8, plus its kind (index into [`TERM_KINDS`]); 0 for
/// any other byte. Field 16 (`g_literal`) has a two-byte key and takes the general path.
const fn term_keys(n: usize) -> [u8; 256] {
    let mut t = [0u8; 256];
    let mut field = 1;
    while field <= if n == 4 { 15 } else { 12 } {
        let (pos, kind) = if field <= 12 {
            ((field - 1) / 4, (field - 1) % 4)
        } else {
            // 13: g_iri, 14: g_bnode, 15: g_default_graph.
            (3, [0, 1, 4][field - 13])
        };
        t[field << 3 | 2] = (0x80 | pos << 3 | kind) as u8;
        field += 1;
    }
    t
}

/// [`term_keys`] of triples.
const TRIPLE_KEYS: [u8; 256] = term_keys(3);
/// [`term_keys`] of quads.
const QUAD_KEYS: [u8; 256] = term_keys(4);

impl State {
    /// The value of entry `id` of `table`, if the stream has defined it, as bytes.
    pub(crate) fn entry(&self, table: Table, id: u32) -> Option<&[u8]> {
        let t = match table {
            Table::Name => &self.names,
            Table::Prefix => &self.prefixes,
            Table::Datatype => &self.datatypes,
        };
        t.get_bytes(id)
    }

    /// The datatype IRI of entry `id`, and whether literals typed with it are not RDF.
    #[inline(always)]
    fn datatype(&self, id: u32) -> Result<(&str, bool), K> {
        let dt = self.datatypes.get(id, Table::Datatype)?;
        let not_rdf = match self.datatype_not_rdf.get(id as usize) {
            Some(&Some(flag)) => flag,
            _ => !crate::term::typed_literal_is_rdf(dt),
        };
        Ok((dt, not_rdf))
    }

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
    pub(crate) fn resolve_iri(&mut self, mut r: Reader<'_>, dest: &mut TermBuf) -> Result<(), K> {
        let at = r.offset();
        self.resolve_iri_bytes(r.remaining(), dest)
            .map_err(|e| e.shifted(at))
    }

    /// Resolves an `RdfLiteral` payload in one of its usual shapes (lexical form with a
    /// one-byte length, then nothing, a one-byte datatype id or a language tag with a
    /// one-byte length) into `dest`. Returns false, having changed nothing, for any
    /// other shape (or invalid UTF-8), which [`State::resolve_literal`] handles.
    #[inline]
    pub(crate) fn literal_fast(&mut self, b: &[u8], dest: &mut TermBuf) -> Result<bool, K> {
        let (lex, rest) = match *b {
            [0x0a, l, ref rest @ ..] if l < 0x80 && rest.len() >= usize::from(l) => {
                rest.split_at(usize::from(l))
            }
            [0x0a, ..] => {
                // A longer lexical form (a length of two bytes or more).
                let mut at = 1;
                let Ok(len) = varint_at(b, &mut at) else {
                    return Ok(false);
                };
                match usize::try_from(len)
                    .ok()
                    .and_then(|l| b.get(at..)?.split_at_checked(l))
                {
                    Some(x) => x,
                    None => return Ok(false),
                }
            }
            _ => (&[][..], b),
        };
        let Ok(lex) = utf8(lex) else {
            return Ok(false);
        };
        match *rest {
            // An empty tag: a simple literal (see `resolve_literal`).
            [] | [0x12, 0] => dest.set_str(BufKind::Simple, lex),
            [0x18, id] if id != 0 && id < 0x80 => {
                let (dt, not_rdf) = self.datatype(u32::from(id))?;
                dest.set_typed(lex, dt, not_rdf);
            }
            [0x12, l, ref tag @ ..] if l < 0x80 && tag.len() == usize::from(l) => {
                let Ok(tag) = utf8(tag) else {
                    return Ok(false);
                };
                check_language_tag(tag)?;
                dest.set_str(BufKind::Lang, lex);
                dest.b.clear();
                dest.b.push_str(tag);
            }
            _ => return Ok(false),
        }
        Ok(true)
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
            // The oneof set to an empty tag, as a writer that always sets the field
            // makes: no language, so a simple literal (Jelly-JVM and pyjelly read it so;
            // RDF has no literal with an empty tag).
            (Some(""), None) => dest.set_str(BufKind::Simple, lex),
            (Some(l), None) => {
                check_language_tag(l)?;
                dest.set_str(BufKind::Lang, lex);
                dest.b.clear();
                dest.b.push_str(l);
            }
            (None, Some(0)) => return Err(K::DatatypeZero),
            (None, Some(id)) => {
                let (dt, not_rdf) = self.datatype(id)?;
                dest.set_typed(lex, dt, not_rdf);
            }
            (None, None) => dest.set_str(BufKind::Simple, lex),
        }
        Ok(())
    }

    /// Resolves one term field into `dest`. `depth` is the quoted-triple nesting level of `dest`.
    pub(crate) fn resolve_term(
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
        if depth > 0 && kind != TermField::Triple {
            self.resolve_term_kind(kind, payload, dest, depth)?;
            return self.note_quoted(dest);
        }
        if depth == 0 && kind == TermField::Triple {
            self.quoted_bytes = 0;
            if let Some(q) = &mut dest.quoted {
                shrink_quoted(q);
            }
        }
        self.resolve_term_kind(kind, payload, dest, depth)
    }

    /// Counts the text of `dest`, a term inside a quoted triple, against the quoted
    /// triple's limit.
    #[inline]
    fn note_quoted(&mut self, dest: &TermBuf) -> Result<(), K> {
        self.quoted_bytes += (dest.a.len() + dest.b.len()) as u64;
        if self.quoted_bytes > self.max_quoted_bytes {
            return Err(K::QuotedTooLarge(self.max_quoted_bytes));
        }
        Ok(())
    }

    /// [`State::resolve_term`] after its checks.
    fn resolve_term_kind(
        &mut self,
        kind: TermField,
        payload: Reader<'_>,
        dest: &mut TermBuf,
        depth: usize,
    ) -> Result<(), K> {
        match kind {
            TermField::Iri => self.resolve_iri(payload, dest),
            TermField::Bnode => {
                let mut r = payload;
                let start = r.offset();
                // The payload of a string field is the string itself.
                let s = utf8(r_rest(&mut r))
                    .map_err(|e| WireError::BadUtf8(start + e.valid_up_to()))?;
                dest.set_str(BufKind::Bnode, s);
                Ok(())
            }
            TermField::Literal => self.resolve_literal(payload, dest),
            TermField::DefaultGraph => {
                dest.kind = BufKind::DefaultGraph;
                dest.not_rdf = false;
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
                dest.not_rdf = q.iter().any(|t| t.not_rdf);
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

/// Refuses a language tag that RDF's text syntaxes cannot write as it is.
#[inline]
fn check_language_tag(tag: &str) -> Result<(), K> {
    if crate::term::valid_language_tag(tag) {
        Ok(())
    } else {
        Err(K::InvalidLanguageTag(tag.to_string()))
    }
}

/// Parses an `RdfLookupEntry` payload in its usual shapes (a value with a one-byte
/// length, after a one-byte id or none) into `(id, value)`; `None` for any other shape
/// or invalid UTF-8, which [`entry_general`] then parses (and reports).
#[inline(always)]
fn entry_fast(b: &[u8]) -> Option<(u32, &str)> {
    let (id, value) = match *b {
        [0x12, l, ref v @ ..] if l < 0x80 && v.len() == usize::from(l) => (0, v),
        [0x08, id, 0x12, l, ref v @ ..] if id < 0x80 && l < 0x80 && v.len() == usize::from(l) => {
            (u32::from(id), v)
        }
        _ => return None,
    };
    Some((id, utf8(value).ok()?))
}

/// Parses any `RdfLookupEntry` payload into `(id, value)` (the last of each field wins).
#[inline(never)]
fn entry_general(mut r: Reader<'_>) -> Result<(u32, &str), K> {
    let mut id = 0u32;
    let mut value = "";
    while let Some((f, wt)) = r.tag()? {
        match (f, wt) {
            (jelly_proto::fields::entry::ID, WireType::Varint) => id = r.varint32()?,
            (jelly_proto::fields::entry::VALUE, WireType::Len) => value = r.str()?,
            (_, wt) => r.skip(wt)?,
        }
    }
    Ok((id, value))
}

/// Term state of one stream. The statement being decoded lives in `cur` (positions
/// S, P, O, G); a position left unset by a row keeps its term (repeated terms).
#[derive(Debug, Default)]
pub(crate) struct TermDecoder {
    pub(crate) state: State,
    pub(crate) cur: [TermBuf; 4],
    pub(crate) have: [bool; 4],
    /// Reject graph fields in 3-term statements (Jelly-Patch TRIPLES streams).
    pub(crate) forbid_graph: bool,
}

impl TermDecoder {
    /// Term state with the nesting limit and feature checking of `cfg`.
    pub(crate) fn new(cfg: &crate::decoder::DecoderOptions) -> Self {
        let mut t = TermDecoder::default();
        // Capped so that no option lets a stream overflow the stack (see MAX_NESTING_CAP).
        t.state.max_nesting = cfg.max_nesting.min(crate::decoder::MAX_NESTING_CAP);
        t.state.check_features = cfg.check_features;
        t.state.max_quoted_bytes = cfg.max_frame_bytes;
        t
    }

    /// Forgets what a stream set up beyond its tables (which the next options row
    /// resets): the terms available for repetition and the IRI delta state.
    pub(crate) fn forget_stream(&mut self) {
        self.have = [false; 4];
        self.state.last_prefix_id = 0;
        self.state.last_name_id = 0;
    }

    /// Sizes the tables for a new stream and sets the allowed features.
    pub(crate) fn reset(
        &mut self,
        names: u32,
        prefixes: u32,
        datatypes: u32,
        generalized: bool,
        rdf_star: bool,
    ) {
        // Terms kept for repetition must not point into the tables being cleared.
        Self::materialize(&mut self.cur, &self.state.iri_cache, |_| true);
        let st = &mut self.state;
        st.names.reset(names);
        st.prefixes.reset(prefixes);
        st.datatypes.reset(datatypes);
        // Entries keep their buffers, so a decoder reused for many short streams (the
        // server's items) builds its cached IRIs without allocating again.
        // Like the tables' slots, the cache and the prefix versions grow with the
        // entries set (in `entry_row`), as far as the slots; what a larger earlier
        // stream left beyond this one's tables is dropped.
        st.iri_cache.truncate(names as usize + 1);
        for e in &mut st.iri_cache {
            e.key = NO_IRI;
        }
        st.iri_cache_bytes = st.iri_cache.iter().map(|e| e.iri.capacity()).sum();
        st.prefix_ver.clear();
        let _ = st.prefix_ver.try_reserve(presized(prefixes));
        st.prefix_ver.push(0);
        st.datatype_not_rdf.clear();
        let _ = st.datatype_not_rdf.try_reserve(presized(datatypes));
        let _ = st
            .iri_cache
            .try_reserve(presized(names).saturating_sub(st.iri_cache.len()));
        st.generalized = generalized;
        st.rdf_star = rdf_star;
    }

    /// Applies a lookup entry row (`RdfLookupEntry` payload) to `table`.
    pub(crate) fn entry_row(&mut self, table: Table, r: Reader<'_>) -> Result<(), K> {
        let (id, value) = match entry_fast(r.unread()) {
            Some(entry) => entry,
            None => entry_general(r)?,
        };
        let lookup = match table {
            Table::Name => &mut self.state.names,
            Table::Prefix => &mut self.state.prefixes,
            Table::Datatype => &mut self.state.datatypes,
        };
        lookup.set(id, value, table)?;
        let id = lookup.last_id;
        // Every IRI is made of entries, so checking each entry once checks them all.
        if let Some(ch) = crate::term::forbidden_iri_char(value) {
            return Err(K::InvalidIriChar { table, id, ch });
        }
        match table {
            Table::Name => {
                // Terms still pointing at the cached IRI of this name keep their own copy.
                Self::release(&mut self.cur, &self.state.iri_cache, id);
                let cache = &mut self.state.iri_cache;
                let slots = self.state.names.slots();
                match cache.get_mut(id as usize) {
                    Some(e) => e.key = NO_IRI,
                    // A name out of the table's slots has no cache entry: its IRIs are
                    // built into their terms.
                    None if id as usize >= slots => {}
                    None => {
                        let len =
                            grown_len(id as usize, cache.len(), self.state.names.max).min(slots);
                        grow_with(cache, len, CachedIri::default).map_err(|()| {
                            K::TableAllocation {
                                table,
                                id: u64::from(id),
                            }
                        })?
                    }
                }
            }
            Table::Prefix => {
                let vers = &mut self.state.prefix_ver;
                let slots = self.state.prefixes.slots();
                if id as usize >= vers.len() && (id as usize) < slots {
                    let len =
                        grown_len(id as usize, vers.len(), self.state.prefixes.max).min(slots);
                    grow_to(vers, len, 0).map_err(|()| K::TableAllocation {
                        table,
                        id: u64::from(id),
                    })?;
                }
                // A new entry's version goes from 0 to 1, above the 0 of "no prefix".
                if let Some(v) = vers.get_mut(id as usize) {
                    *v = v.wrapping_add(1);
                }
            }
            Table::Datatype => {
                let flags = &mut self.state.datatype_not_rdf;
                let slots = self.state.datatypes.slots();
                if id as usize >= flags.len() && (id as usize) < slots {
                    // Entries moved into the slots from out of them get `None` here.
                    let len =
                        grown_len(id as usize, flags.len(), self.state.datatypes.max).min(slots);
                    grow_to(flags, len, None).map_err(|()| K::TableAllocation {
                        table,
                        id: u64::from(id),
                    })?;
                }
                if let Some(flag) = flags.get_mut(id as usize) {
                    *flag = Some(!crate::term::typed_literal_is_rdf(value));
                }
            }
        }
        Ok(())
    }

    /// Decodes an `RdfTriple` (n = 3) or `RdfQuad` (n = 4) payload into the current
    /// statement. Fields are first located on the wire, then resolved in S, P, O, G
    /// order, as the IRI delta rules require whatever the field order. Errors' byte
    /// offsets are offsets in `b` (the caller moves them to its own buffer's).
    #[inline(always)]
    pub(crate) fn statement(&mut self, b: &[u8], n: usize) -> Result<(), K> {
        // One copy per statement size, which then tests no size at run time.
        if n == 4 {
            self.statement_n::<4>(b)
        } else {
            self.statement_n::<3>(b)
        }
    }

    /// [`TermDecoder::statement`] of `N` terms.
    #[inline(never)]
    fn statement_n<const N: usize>(&mut self, b: &[u8]) -> Result<(), K> {
        let n = N;
        let mut slots: [RawSlot<'_>; 4] = [None; 4];
        let mut pos = 0;
        let keys = if n == 4 { &QUAD_KEYS } else { &TRIPLE_KEYS };
        while pos < b.len() {
            // Fast path: a one-byte key of a term field and a one-byte length.
            let code = keys[usize::from(b[pos])];
            if code != 0
                && let Some(&len) = b.get(pos + 1)
                && len < 0x80
            {
                let p = usize::from(code >> 3 & 3);
                let start = pos + 2;
                let end = start + usize::from(len);
                let Some(payload) = b.get(start..end) else {
                    return Err(WireError::Truncated(b.len()).into());
                };
                if slots[p].is_some() {
                    return Err(K::MultipleTermFields {
                        position: POSITIONS[p],
                    });
                }
                slots[p] = Some((TERM_KINDS[usize::from(code & 7)], payload));
                pos = end;
                continue;
            }
            let key_at = pos;
            let key = varint_at(b, &mut pos)?;
            let field = key >> 3;
            let term_field = match field {
                1..=12 => true,
                13..=16 if n == 4 => true,
                13..=16 if self.forbid_graph => return Err(K::GraphInTriplesPatch),
                _ => false,
            };
            if !term_field {
                // Field 0 is not a field (protobuf parsers reject it), as everywhere
                // else in a frame.
                if field == 0 {
                    return Err(WireError::ZeroField(key_at).into());
                }
                // Unknown field: skip it with the general reader.
                let mut r = Reader::with_base(&b[pos..], pos);
                let wt = match key & 7 {
                    0 => WireType::Varint,
                    1 => WireType::Fixed64,
                    2 => WireType::Len,
                    5 => WireType::Fixed32,
                    w => {
                        return Err(WireError::BadWireType {
                            wire_type: w as u8,
                            offset: key_at,
                        }
                        .into());
                    }
                };
                r.skip(wt)?;
                pos = r.offset();
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
            if slots[p].is_some() {
                return Err(K::MultipleTermFields {
                    position: POSITIONS[p],
                });
            }
            let end = pos + len as usize;
            // In range: `len` was checked against the bytes left above.
            slots[p] = Some((kind, b.get(pos..end).unwrap_or_default()));
            pos = end;
        }
        // Unrolled, so that each call knows its position. A term's errors are located
        // in its payload: moved to `b` here.
        let r = self.slot(0, slots[0]).map_err(|e| (e, 0));
        let r = r.and_then(|()| self.slot(1, slots[1]).map_err(|e| (e, 1)));
        let r = r.and_then(|()| self.slot(2, slots[2]).map_err(|e| (e, 2)));
        let r = if n == 4 {
            r.and_then(|()| self.slot(3, slots[3]).map_err(|e| (e, 3)))
        } else {
            r
        };
        // (`& 3`: `i` is at most 3, which the compiler does not see.)
        r.map_err(|(e, i)| slot_error(e, b, slots[i & 3]))
    }

    /// Resolves the term found for repeat slot `i` (0–3: S, P, O, G), or keeps the
    /// slot's previous term when none was found (a repeated term). Errors' byte offsets
    /// are offsets in the term's payload.
    #[inline(always)]
    pub(crate) fn slot(&mut self, i: usize, found: RawSlot<'_>) -> Result<(), K> {
        match found {
            Some((TermField::Iri, payload)) => {
                // IRIs are allowed in every position: no feature check needed.
                self.resolve_iri_cached(payload, i)?;
                self.have[i] = true;
            }
            // Literals are allowed as objects: no feature check needed.
            Some((TermField::Literal, payload))
                if i == 2 && self.state.literal_fast(payload, &mut self.cur[2])? =>
            {
                self.have[i] = true;
            }
            Some((kind, payload)) => {
                self.state
                    .resolve_term(kind, Reader::new(payload), &mut self.cur[i], i, 0)?;
                self.have[i] = true;
            }
            None if self.have[i] => {}
            None => {
                return Err(K::RepeatedTermFirst {
                    position: POSITIONS[i],
                });
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
        // Version 0 for no prefix (entry 0 is never set); no version, and a key no
        // entry has, for a prefix out of the prefix table's slots.
        let key = match st.prefix_ver.get(pid as usize) {
            Some(&pver) => iri_key(pid, pver),
            None => UNCACHED_IRI,
        };
        let (hit, cached_not_rdf) = match st.iri_cache.get(nid as usize) {
            Some(e) => (e.key == key, e.not_rdf),
            None => (false, false),
        };
        let mut not_rdf = cached_not_rdf;
        if !hit {
            let prefix = if pid == 0 {
                ""
            } else {
                st.prefixes.get(pid, Table::Prefix)?
            };
            let name = st.names.get(nid, Table::Name)?;
            let len = prefix.len() + name.len();
            let old_cap = st
                .iri_cache
                .get(nid as usize)
                .map_or(0, |e| e.iri.capacity());
            let cap = len.next_power_of_two().max(64);
            // Over the cache's budget, a name or prefix out of its table's slots (in
            // streams that set a few entries of high id): this IRI goes into the term
            // itself.
            let slot = nid as usize;
            if slot >= st.iri_cache.len()
                || key == UNCACHED_IRI
                || (old_cap < len && st.iri_cache_bytes - old_cap + cap > IRI_CACHE_BYTES_MAX)
            {
                self.cur[i].set_iri2(prefix, name);
                st.last_prefix_id = pid;
                st.last_name_id = nid;
                return Ok(());
            }
            // The entry is about to change: terms still pointing at it keep their own copy.
            Self::release(&mut self.cur, &st.iri_cache, nid);
            // In bounds: checked just above, and `release` only reads the cache.
            let e = &mut st.iri_cache[slot];
            if old_cap < len {
                // A fresh buffer with room to spare, rather than growing the old one
                // part by part (copying stale text): later IRIs of this id then fit.
                e.iri = String::with_capacity(cap);
                st.iri_cache_bytes = st.iri_cache_bytes - old_cap + e.iri.capacity();
            }
            e.iri.clear();
            e.iri.push_str(prefix);
            e.iri.push_str(name);
            e.key = key;
            // Checked on the whole IRI: whether prefix + name has a scheme depends on both.
            e.not_rdf = !crate::term::is_absolute_iri(&e.iri);
            not_rdf = e.not_rdf;
        }
        st.last_prefix_id = pid;
        st.last_name_id = nid;
        let dest = &mut self.cur[i];
        dest.kind = BufKind::IriCached;
        dest.nid = nid;
        dest.not_rdf = not_rdf;
        Ok(())
    }

    /// Gives every current term that points at the cached IRI of `nid` its own copy.
    /// Rarely any does: the check stays inline, the copy is cold.
    #[inline(always)]
    fn release(cur: &mut [TermBuf; 4], cache: &[CachedIri], nid: u32) {
        if cur
            .iter()
            .any(|t| t.kind == BufKind::IriCached && t.nid == nid)
        {
            Self::materialize(cur, cache, |t| t.nid == nid);
        }
    }

    /// Gives the current terms that borrow their IRI from the cache and that `which`
    /// picks their own copy of it.
    #[cold]
    fn materialize(cur: &mut [TermBuf; 4], cache: &[CachedIri], which: impl Fn(&TermBuf) -> bool) {
        for t in cur.iter_mut() {
            if t.kind == BufKind::IriCached && which(t) {
                t.a.clear();
                t.a.push_str(cache.get(t.nid as usize).map_or("", |e| &e.iri));
                t.kind = BufKind::Iri;
            }
        }
    }

    /// The term in a buffer, resolving IRIs held in the cache.
    #[inline(always)]
    pub(crate) fn term_ref<'a>(&'a self, b: &'a TermBuf) -> TermRef<'a> {
        if b.kind == BufKind::IriCached {
            TermRef::Iri(&self.state.iri_cache[b.nid as usize].iri)
        } else {
            b.as_ref()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The general parse of an `RdfIri`, to check the fast paths of [`iri_ids`] against.
    fn iri_ids_reference(b: &[u8]) -> Result<(u32, u32), K> {
        let mut r = Reader::new(b);
        let (mut p, mut n) = (0, 0);
        while let Some((field, wt)) = r.tag()? {
            match (field, wt) {
                (iri::PREFIX_ID, WireType::Varint) => p = r.varint32()?,
                (iri::NAME_ID, WireType::Varint) => n = r.varint32()?,
                (_, wt) => r.skip(wt)?,
            }
        }
        Ok((p, n))
    }

    #[test]
    fn iri_ids_fast_paths_agree_with_the_general_parse() {
        let cases: &[&[u8]] = &[
            &[],
            &[0x08, 5],
            &[0x10, 7],
            &[0x08, 5, 0x10, 7],
            &[0x10, 0x80, 0x01],
            &[0x10, 0xff, 0x7f],
            &[0x08, 0x81, 0x01, 0x10, 0xa0, 0x1f],
            &[0x08, 3, 0x10, 0x80, 0x00],
            &[0x10, 0x80, 0x80, 0x01],
            &[0x10, 7, 0x08, 5],
            &[0x08, 1, 0x08, 2],
            &[0x08, 1, 0x18, 9],
            &[0x10, 0x80],
            &[0x08],
            &[0x10, 0xff, 0xff, 0xff, 0xff, 0x7f],
        ];
        for b in cases {
            assert_eq!(
                format!("{:?}", iri_ids(b)),
                format!("{:?}", iri_ids_reference(b)),
                "{b:02x?}"
            );
        }
    }

    #[test]
    fn str_slots_keep_every_value_through_compactions() {
        let mut s = StrSlots::default();
        s.reset();
        grow_to(&mut s.spans, 50, (0, 0)).unwrap();
        let mut model = vec![String::new(); 50];
        for i in 0..20_000usize {
            let slot = (i * 7919) % 50;
            let v = format!("é{}{}", i, "x".repeat(i % 300));
            s.set(slot, &v);
            model[slot] = v;
            if i % 1000 == 0 {
                for (j, m) in model.iter().enumerate() {
                    assert_eq!(s.get(j), m);
                }
            }
        }
        assert!(s.text.len() <= 2 * s.live + (64 << 10) + 400);
    }
}
