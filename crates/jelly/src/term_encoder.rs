//! Term encoding shared by Jelly-RDF and Jelly-Patch streams: LRU lookup tables, the
//! full-IRI id cache, the IRI delta state, repeated terms, and the frame buffer that
//! lookup entry rows are written into.

use jelly_proto::fields::{entry, frame, iri as iri_f, literal as lit, statement as st};
use jelly_proto::wire::{
    WireType, put_bytes_field, put_tag, put_uint_field, put_varint, put_varint_at, varint_len,
};

use crate::error::{EncodeError, POSITIONS, Table};
use crate::lookup::{AddrMemo, CachedIds, IriCache, Lookup, LruTable, bytes_eq};
use crate::term::{LiteralKind, StatementRef, TermBuf, TermRef, TripleRef, XSD_STRING};

/// Row field numbers of the three lookup entry kinds (they differ between Jelly-RDF
/// and Jelly-Patch).
#[derive(Debug, Clone, Copy)]
pub(crate) struct EntryFields {
    pub name: u32,
    pub prefix: u32,
    pub datatype: u32,
}

/// Splits an IRI into a prefix and a name: at the first `#` after the scheme part,
/// otherwise after the last `/`. The same rule as Jelly-JVM, so tables fill alike.
///
/// ```
/// assert_eq!(jelly::split_iri("http://ex.org/a/b"), ("http://ex.org/a/", "b"));
/// assert_eq!(jelly::split_iri("http://ex.org/v#t/x"), ("http://ex.org/v#", "t/x"));
/// assert_eq!(jelly::split_iri("urn:x"), ("", "urn:x"));
/// ```
#[inline]
pub fn split_iri(iri: &str) -> (&str, &str) {
    let b = iri.as_bytes();
    if b.len() > 8
        && let Some(i) = memchr::memchr(b'#', &b[8..])
    {
        let cut = 8 + i + 1;
        return (&iri[..cut], &iri[cut..]);
    }
    match memchr::memrchr(b'/', b) {
        Some(i) => (&iri[..=i], &iri[i + 1..]),
        None => ("", iri),
    }
}

/// The name of the last IRI split at a `/` at or after byte 8 (see
/// [`TermEncoder::split_at_recent_name`]): its id and generation in the name table,
/// and its length.
#[derive(Debug, Clone, Copy)]
struct RecentName {
    nid: u32,
    ngen: u32,
    len: usize,
}

impl RecentName {
    /// None (id 0 is no name's).
    const NONE: RecentName = RecentName {
        nid: 0,
        ngen: 0,
        len: 0,
    };
}

/// What [`TermEncoder::iri_ids_slow`] knows of the name of the IRI it splits.
#[derive(Debug, Clone, Copy)]
enum NameHint {
    /// The recent name, under this id.
    Known(u32),
    /// To be recorded as the recent name once looked up.
    Record,
    /// Neither.
    None,
}

/// What the first pass over a statement decided for one position. Small enough to
/// stay in registers; the second pass takes the other terms' text from the term.
#[derive(Debug, Clone, Copy)]
enum Planned {
    /// The term repeats the previous one of its position: nothing is written.
    Repeat,
    /// An IRI with these wire `(prefix_id, name_id)`.
    Iri(u32, u32),
    /// A blank node, literal or default graph; for a typed literal, its datatype id
    /// (otherwise 0).
    Other(u32),
}

/// The previous term of a position, as far as the repeated-term rule needs it.
#[derive(Debug, Clone, Copy)]
enum Last {
    /// None (start of the stream, or forgotten after a refused row).
    None,
    /// An IRI: its ids, which identify it while their generations hold, and its
    /// length, which rules most other IRIs out at once. `addr` is the address of its
    /// text when it came through a shared-input session (see
    /// [`TermEncoder::enter_session`]), otherwise 0, which no string's address equals.
    Iri {
        ids: CachedIds,
        len: usize,
        addr: usize,
    },
    /// Another term, kept in `TermEncoder::prev`.
    Other,
}

/// The terms of a statement row, read in place. The row writer is generic over it
/// rather than taking a [`StatementRef`]: so compiled, it measured about 3% fewer
/// instructions per statement on every dataset (the same code taking a `StatementRef`
/// does not), which is a matter of how the compiler places and inlines it.
pub(crate) trait RowTerms {
    /// Whether the terms' strings are shared for the current shared-input session
    /// ([`TermEncoder::enter_session`]), so an IRI's address identifies it.
    const SHARED: bool = false;

    /// Term `i`: subject, predicate, object, graph (the default graph when the
    /// statement has none).
    fn term(&self, i: usize) -> TermRef<'_>;

    /// True if one of the first `n` terms (3 or 4) is a quoted triple.
    fn quotes_triple(&self, n: usize) -> bool;
}

impl RowTerms for StatementRef<'_> {
    #[inline(always)]
    fn term(&self, i: usize) -> TermRef<'_> {
        match i {
            0 => self.subject,
            1 => self.predicate,
            2 => self.object,
            _ => self.graph_or_default(),
        }
    }

    #[inline(always)]
    fn quotes_triple(&self, n: usize) -> bool {
        self.subject.is_triple()
            || self.predicate.is_triple()
            || self.object.is_triple()
            || (n > 3 && self.graph.is_some_and(|g| g.is_triple()))
    }
}

/// A statement whose strings stay borrowed for the whole shared-input session that
/// it is added in ([`TermEncoder::enter_session`]): two of its IRIs at the same address,
/// with the same length, are the same IRI.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SharedRow<'a>(pub StatementRef<'a>);

impl RowTerms for SharedRow<'_> {
    const SHARED: bool = true;

    #[inline(always)]
    fn term(&self, i: usize) -> TermRef<'_> {
        self.0.term(i)
    }

    #[inline(always)]
    fn quotes_triple(&self, n: usize) -> bool {
        self.0.quotes_triple(n)
    }
}

/// Most ways of the IRI cache (64-byte buckets of three): 2 MiB.
const IRI_CACHE_WAYS_MAX: usize = 3 << 15;

/// Writes the key (field `field`, length-delimited) and the length `len` of a field into
/// `b` at `at`, as [`put_bytes_field`] begins it; returns the position after them.
#[inline(always)]
fn len_field_head_at<const L: usize>(b: &mut [u8; L], at: usize, field: u32, len: usize) -> usize {
    let at = put_varint_at(b, at, u64::from(field << 3 | 2));
    put_varint_at(b, at, len as u64)
}

/// Where a term is written; decides the field numbers of its oneof.
pub(crate) const AT_GRAPH_START: usize = 4;
/// The graph of a Jelly-Patch `RdfPatchNamespace`.
pub(crate) const AT_PATCH_NAMESPACE_GRAPH: usize = 5;
/// The value of a Jelly-Patch `RdfPatchHeader`.
pub(crate) const AT_PATCH_HEADER: usize = 6;

/// Field numbers `(iri, blank node, literal, other)` for a term written at `position`
/// (0–2: S/P/O of a statement, where "other" is the quoted triple; 3: a quad's graph,
/// where "other" is the default graph; or one of the `AT_*` places).
#[inline]
pub(crate) fn term_fields(position: usize) -> (u32, u32, u32, u32) {
    match position {
        0..=2 => {
            let b = position as u32 * 4 + 1;
            (b, b + 1, b + 2, b + 3)
        }
        3 => (st::G_IRI, st::G_BNODE, st::G_LITERAL, st::G_DEFAULT),
        AT_GRAPH_START => (1, 2, 4, 3),
        AT_PATCH_NAMESPACE_GRAPH => (3, 4, 6, 5),
        _ => (2, 3, 4, 5),
    }
}

/// Term state of one stream being encoded.
#[derive(Debug)]
pub(crate) struct TermEncoder {
    names: LruTable,
    /// Of size 0 when the stream has no prefix table: then it is never looked up, and
    /// every IRI has prefix id 0, whose slot holds the empty string, so the checks of
    /// cached ids need no special case.
    prefixes: LruTable,
    datatypes: Option<LruTable>,
    /// Full IRI → ids, so a known IRI costs one hash lookup instead of a split and two.
    iri_cache: IriCache,
    /// IRI address → ids for shared-input sessions; made on the first one.
    addr_memo: Option<AddrMemo>,
    /// The shared-input session whose addresses `addr_memo` and `last` hold (0: none),
    /// and the number of sessions started (each one's id).
    session: u64,
    sessions_started: u64,
    last_prefix_id: u32,
    last_name_id: u32,
    /// What each position's previous term was; the value of a term other than an
    /// IRI is kept in `prev`.
    last: [Last; 4],
    prev: [TermBuf; 4],
    /// Id and generation of the datatypes looked up last, most recent first (id 0:
    /// none): most typed literals have one of a few datatypes.
    recent_datatypes: [(u32, u32); 4],
    /// The name of the last IRI split at a `/` at or after byte 8. IRIs of one resource family often share it (a timestamp or
    /// serial number under several paths), and when a new IRI ends with it after a
    /// `/`, its split is known without scanning and its name without a lookup.
    recent_name: RecentName,
    /// Statement counter; entries used by the current statement are never evicted.
    pub(crate) stamp: u32,
    /// Rows of the current frame, already framed as `rows` (field 1) elements.
    pub(crate) buf: Vec<u8>,
    pub(crate) rows: usize,
    /// One scratch buffer per quoted-triple depth.
    pub(crate) scratch: Vec<Vec<u8>>,
    entry_fields: EntryFields,
    max_name: u32,
    generalized: bool,
    rdf_star: bool,
    /// The prefix table is too small to split IRIs by ([`MIN_SPLITTING_PREFIX_TABLE`]):
    /// every IRI is written whole, as a name under the empty prefix.
    whole_iris: bool,
}

/// Prefix tables of fewer entries than this cannot always hold the prefixes of one
/// row (a quad may need four at once, and every entry a row uses must be in the table
/// when the row is read). With such a table every IRI is written whole under the one
/// entry of the empty prefix, so that any row whose IRIs fit the name table can be
/// written; a table of 0 still means no prefix at all.
const MIN_SPLITTING_PREFIX_TABLE: u32 = 4;

impl TermEncoder {
    pub(crate) fn new(
        names: u32,
        prefixes: u32,
        datatypes: u32,
        generalized: bool,
        rdf_star: bool,
        entry_fields: EntryFields,
    ) -> Self {
        TermEncoder {
            names: LruTable::new(names),
            prefixes: LruTable::new(prefixes),
            datatypes: (datatypes > 0).then(|| LruTable::new(datatypes)),
            // Sized for a few IRIs per name entry, so a new stream does not rehash its way up.
            iri_cache: IriCache::new((names as usize * 2).clamp(256, IRI_CACHE_WAYS_MAX)),
            addr_memo: None,
            session: 0,
            sessions_started: 0,
            last_prefix_id: 0,
            last_name_id: 0,
            prev: Default::default(),
            recent_datatypes: [(0, u32::MAX); 4],
            recent_name: RecentName::NONE,
            last: [Last::None; 4],
            stamp: 0,
            buf: Vec::with_capacity(64 * 1024),
            rows: 0,
            scratch: vec![Vec::with_capacity(256)],
            entry_fields,
            max_name: names,
            generalized,
            rdf_star,
            whole_iris: prefixes > 0 && prefixes < MIN_SPLITTING_PREFIX_TABLE,
        }
    }

    /// Starts over as for a new stream (empty tables, no previous terms, an empty
    /// frame), keeping every buffer. The frame buffer keeps its first `keep` bytes:
    /// with in-place output they are the frames already finished.
    pub(crate) fn reset(&mut self, keep: usize) {
        self.names.clear();
        self.prefixes.clear();
        if let Some(d) = &mut self.datatypes {
            d.clear();
        }
        // The cache's entries name ids whose generations just moved on: all stale.
        self.last_prefix_id = 0;
        self.last_name_id = 0;
        self.recent_datatypes = [(0, u32::MAX); 4];
        self.recent_name = RecentName::NONE;
        self.last = [Last::None; 4];
        self.buf.truncate(keep);
        self.rows = 0;
    }

    /// The id of a new shared-input session. Its strings are borrowed for as long as
    /// the session is used; a session started within it (through its encoder) may end,
    /// and its strings be freed, before it is used again.
    pub(crate) fn new_session(&mut self) -> u64 {
        self.sessions_started += 1;
        self.sessions_started
    }

    /// Called before each statement of session `id`, added through [`SharedRow`]:
    /// when the addresses held are another session's, they may belong to strings
    /// that are gone, so they are all forgotten.
    #[inline(always)]
    pub(crate) fn enter_session(&mut self, id: u64) {
        if self.session != id {
            self.forget_addresses();
            self.session = id;
        }
    }

    /// Forgets every address recorded (the memo's and the previous IRIs').
    #[cold]
    fn forget_addresses(&mut self) {
        match &mut self.addr_memo {
            Some(m) => m.new_epoch(),
            None => {
                self.addr_memo = Some(AddrMemo::new(
                    (self.max_name as usize * 2).clamp(256, IRI_CACHE_WAYS_MAX),
                ))
            }
        }
        for l in &mut self.last {
            if let Last::Iri { addr, .. } = l {
                *addr = 0;
            }
        }
    }

    /// Makes the next entry of every table and the next IRI's name carry explicit ids,
    /// so the rows that follow do not depend on the delta state of earlier rows.
    pub(crate) fn forget_delta_state(&mut self) {
        self.names.forget_last_emitted();
        self.prefixes.forget_last_emitted();
        if let Some(d) = &mut self.datatypes {
            d.forget_last_emitted();
        }
        // No name id is u32::MAX, so `last_name_id + 1` matches none. The prefix
        // delta needs nothing: a fresh state holds 0, which no prefix id equals.
        self.last_name_id = u32::MAX - 1;
    }

    /// Writes a statement row (`field` holds an `RdfTriple` or `RdfQuad`) of the
    /// terms of `s`: subject, predicate, object and, when `quad`, its graph (the
    /// default graph when it has none). The caller validated them with
    /// [`TermEncoder::check_statement`]. Inlined into the encoders' per-statement paths, which
    /// saves a call and its register saves per statement.
    #[inline(always)]
    pub(crate) fn write_statement<S: RowTerms>(
        &mut self,
        field: u32,
        s: &S,
        quad: bool,
    ) -> Result<(), EncodeError> {
        if field <= 15 {
            // One copy of the row writer per statement length, written out term by
            // term and reading the terms in place.
            if !quad && !s.quotes_triple(3) {
                return self.write_row::<3, S>(field, s);
            }
            if quad && !s.quotes_triple(4) {
                return self.write_row::<4, S>(field, s);
            }
        }
        // Quoted triples nest rows of their own: build the body aside.
        let all = [s.term(0), s.term(1), s.term(2), s.term(3)];
        let terms = if quad { &all[..] } else { &all[..3] };
        let body = self.statement_body(terms)?;
        self.push_row(field, &body);
        self.scratch[0] = body;
        Ok(())
    }

    /// Checks the terms [`TermEncoder::write_statement`] writes for `s` and `quad`
    /// with [`TermEncoder::check_term_deep`], before any state changes.
    #[inline(always)]
    pub(crate) fn check_statement<S: RowTerms>(
        &self,
        s: &S,
        quad: bool,
    ) -> Result<(), EncodeError> {
        self.check_term_deep(s.term(0), 0)?;
        self.check_term_deep(s.term(1), 1)?;
        self.check_term_deep(s.term(2), 2)?;
        if quad {
            self.check_term_deep(s.term(3), 3)?;
        }
        Ok(())
    }

    /// [`TermEncoder::write_statement`] for a row of the first `N` terms of `s`,
    /// none a quoted triple, whose oneof field `field` has a one-byte tag.
    fn write_row<const N: usize, S: RowTerms>(
        &mut self,
        field: u32,
        s: &S,
    ) -> Result<(), EncodeError> {
        // First pass: resolve every term in S, P, O, G order (lookup entry rows go
        // into the frame now, ahead of the statement row). Second pass: write the row.
        self.stamp = self.stamp.wrapping_add(1);
        let delta_state = (self.last_prefix_id, self.last_name_id);
        // Written out term by term rather than as loops, so that each term's position
        // (its slot and field numbers) is a constant.
        let mut plan = [Planned::Repeat; N];
        plan[0] = self.plan_or_undo(0, s.term(0), delta_state, S::SHARED)?;
        plan[1] = self.plan_or_undo(1, s.term(1), delta_state, S::SHARED)?;
        plan[2] = self.plan_or_undo(2, s.term(2), delta_state, S::SHARED)?;
        if let Some(p) = plan.get_mut(3) {
            *p = self.plan_or_undo(3, s.term(3), delta_state, S::SHARED)?;
        }
        let buf = &mut self.buf;
        let start = buf.len();
        // The row is built in place behind a header that assumes one-byte lengths,
        // which is moved when the row turns out longer.
        buf.extend_from_slice(&[(frame::ROWS << 3 | 2) as u8, 0, (field << 3 | 2) as u8, 0]);
        let body_start = buf.len();
        Self::write_planned(buf, 0, plan[0], s.term(0));
        Self::write_planned(buf, 1, plan[1], s.term(1));
        Self::write_planned(buf, 2, plan[2], s.term(2));
        if let Some(&p) = plan.get(3) {
            Self::write_planned(buf, 3, p, s.term(3));
        }
        let body_len = buf.len() - body_start;
        if body_len < 126 {
            buf[start + 1] = (body_len + 2) as u8;
            buf[start + 3] = body_len as u8;
        } else {
            Self::fix_long_row_header(buf, start, body_start);
        }
        self.rows += 1;
        Ok(())
    }

    /// [`TermEncoder::plan_term`] for term `slot` of a statement row, undoing the
    /// row's effects ([`TermEncoder::undo_row`]) when it fails.
    #[inline(always)]
    fn plan_or_undo(
        &mut self,
        slot: usize,
        t: TermRef<'_>,
        delta_state: (u32, u32),
        shared: bool,
    ) -> Result<Planned, EncodeError> {
        let r = self.plan_term(slot, t, shared);
        if r.is_err() {
            self.undo_row(delta_state, slot);
        }
        r
    }

    /// A statement row failed at term `slot` and is not written: puts back the IRI
    /// delta state its earlier terms advanced (entry rows already emitted stay valid)
    /// and forgets the repeated terms they set.
    #[cold]
    fn undo_row(&mut self, delta_state: (u32, u32), slot: usize) {
        (self.last_prefix_id, self.last_name_id) = delta_state;
        self.last[..slot].fill(Last::None);
    }

    /// Rewrites the header of a row built in place whose body reached 126 bytes or more.
    #[cold]
    fn fix_long_row_header(buf: &mut Vec<u8>, start: usize, body_start: usize) {
        let end = buf.len();
        let body_len = end - body_start;
        let row_len = 1 + varint_len(body_len as u64) + body_len;
        // The header on the stack (at most 2 tags + 2 × 10 varint bytes), then the body
        // moved up by the bytes the header grew: no allocation, one move.
        let mut header = [0u8; 22];
        header[0] = buf[start];
        let mut n = put_varint_at(&mut header, 1, row_len as u64);
        header[n] = buf[start + 2];
        n = put_varint_at(&mut header, n + 1, body_len as u64);
        let grow = n - (body_start - start);
        buf.resize(end + grow, 0);
        buf.copy_within(body_start..end, body_start + grow);
        buf[start..start + n].copy_from_slice(&header[..n]);
    }

    /// First pass over one term of a statement: resolves it (lookup entries, delta
    /// state, repeated terms) and tells what to write.
    #[inline(always)]
    fn plan_term(
        &mut self,
        slot: usize,
        t: TermRef<'_>,
        shared: bool,
    ) -> Result<Planned, EncodeError> {
        if let TermRef::Iri(iri) = t {
            // `shared` is a constant wherever this is inlined (`RowTerms::SHARED`).
            if shared {
                return self.plan_iri_shared(slot, iri);
            }
            return self.plan_iri(slot, iri);
        }
        if matches!(self.last[slot], Last::Other) && self.prev[slot].as_ref() == t {
            return Ok(Planned::Repeat);
        }
        self.check_term(t, slot)?;
        let p = match t {
            TermRef::Literal(l) => match l.kind {
                LiteralKind::Typed(dt) if dt != XSD_STRING => Planned::Other(self.datatype_id(dt)?),
                _ => Planned::Other(0),
            },
            TermRef::BlankNode(_) | TermRef::DefaultGraph => Planned::Other(0),
            // Callers route quoted triples to `term_field`, and IRIs are handled above.
            TermRef::Triple(_) | TermRef::Iri(_) => {
                return Err(EncodeError::RdfStarNotEnabled(POSITIONS[slot]));
            }
        };
        self.prev[slot].set_from(t);
        self.last[slot] = Last::Other;
        Ok(p)
    }

    /// [`TermEncoder::plan_term`] for an IRI.
    #[inline(always)]
    fn plan_iri(&mut self, slot: usize, iri: &str) -> Result<Planned, EncodeError> {
        // A repeated IRI is the previous IRI of the slot, which the decoder still holds
        // whatever happened to the tables since. It is only recognised while its table
        // entries stay valid, so as to compare with them rather than keep a copy.
        if let Last::Iri { ids, len, .. } = self.last[slot]
            && len == iri.len()
            && self.ids_spell(ids, iri)
        {
            return Ok(Planned::Repeat);
        }
        let hash = self.iri_cache.hash(iri);
        let c = self.resolve_iri(iri, hash)?;
        let (pid, nid) = self.wire_ids(c.pid, c.nid);
        self.last[slot] = Last::Iri {
            ids: c,
            len: iri.len(),
            addr: 0,
        };
        Ok(Planned::Iri(pid, nid))
    }

    /// [`TermEncoder::plan_iri`] for an IRI of a shared-input session: an IRI at the
    /// address of the slot's previous IRI, or of one in the address memo, is known
    /// without hashing or comparing its text. Every decision is the one
    /// [`TermEncoder::plan_iri`] takes (the same entries, touches and ids), so the
    /// bytes written are the same.
    #[inline(always)]
    fn plan_iri_shared(&mut self, slot: usize, iri: &str) -> Result<Planned, EncodeError> {
        let addr = iri.as_ptr() as usize;
        if let Last::Iri { ids, len, addr: a } = self.last[slot]
            && len == iri.len()
            && ((a == addr && self.ids_hold(ids)) || self.ids_spell(ids, iri))
        {
            return Ok(Planned::Repeat);
        }
        let known = match &self.addr_memo {
            Some(m) => m.get(addr, iri.len()),
            None => None,
        };
        let c = match known {
            Some(c) if self.ids_hold(c) => {
                let stamp = self.stamp;
                self.prefixes.touch(c.pid, stamp);
                self.names.touch(c.nid, stamp);
                c
            }
            _ => {
                let hash = self.iri_cache.hash(iri);
                let c = self.resolve_iri(iri, hash)?;
                if let Some(m) = &mut self.addr_memo {
                    m.insert(addr, iri.len(), c);
                }
                c
            }
        };
        let (pid, nid) = self.wire_ids(c.pid, c.nid);
        self.last[slot] = Last::Iri {
            ids: c,
            len: iri.len(),
            addr,
        };
        Ok(Planned::Iri(pid, nid))
    }

    /// True if the table slots of `c` still hold the values it was made from.
    #[inline(always)]
    fn ids_hold(&self, c: CachedIds) -> bool {
        matches!(self.names.entry(c.nid), Some((g, _)) if g == c.ngen)
            && matches!(self.prefixes.entry(c.pid), Some((g, _)) if g == c.pgen)
    }

    /// Second pass over one term: writes what [`TermEncoder::plan_term`] decided, as
    /// the fields of `position` (see [`term_fields`]).
    #[inline(always)]
    fn write_planned(out: &mut Vec<u8>, position: usize, p: Planned, t: TermRef<'_>) {
        let (f_iri, f_bnode, f_lit, f_other) = term_fields(position);
        match (p, t) {
            (Planned::Repeat, _) => {}
            (Planned::Iri(pid, nid), _) => Self::put_iri(out, f_iri, (pid, nid)),
            (Planned::Other(_), TermRef::BlankNode(b)) => {
                let mut head = [0u8; 16];
                let n = len_field_head_at(&mut head, 0, f_bnode, b.len());
                out.extend_from_slice(&head[..n]);
                out.extend_from_slice(b.as_bytes());
            }
            (Planned::Other(dt), TermRef::Literal(l)) => {
                let lang = match l.kind {
                    LiteralKind::Lang(tag) => Some(tag),
                    _ => None,
                };
                let lex = l.lex;
                let field_len = |n: usize| 1 + varint_len(n as u64) + n;
                let mut len = 0;
                if !lex.is_empty() {
                    len += field_len(lex.len());
                }
                if let Some(tag) = lang {
                    len += field_len(tag.len());
                }
                if dt != 0 {
                    len += 1 + varint_len(u64::from(dt));
                }
                // The header (field tag, length, and the lexical form's tag and length)
                // and the tail (language tag's header or the datatype id) are put
                // together on the stack, so each is one copy with one length check.
                let mut head = [0u8; 24];
                let mut n = len_field_head_at(&mut head, 0, f_lit, len);
                if !lex.is_empty() {
                    n = len_field_head_at(&mut head, n, lit::LEX, lex.len());
                }
                out.extend_from_slice(&head[..n]);
                out.extend_from_slice(lex.as_bytes());
                let mut tail = [0u8; 16];
                if let Some(tag) = lang {
                    let m = len_field_head_at(&mut tail, 0, lit::LANGTAG, tag.len());
                    out.extend_from_slice(&tail[..m]);
                    out.extend_from_slice(tag.as_bytes());
                } else if dt != 0 {
                    tail[0] = (lit::DATATYPE << 3) as u8;
                    let m = put_varint_at(&mut tail, 1, u64::from(dt));
                    out.extend_from_slice(&tail[..m]);
                }
            }
            (Planned::Other(_), _) => put_bytes_field(out, f_other, &[]),
        }
    }

    /// The id of datatype `dt` (not `xsd:string`), emitting an entry when it is new.
    #[inline]
    fn datatype_id(&mut self, dt: &str) -> Result<u32, EncodeError> {
        let stamp = self.stamp;
        let Some(table) = &mut self.datatypes else {
            return Err(EncodeError::DatatypeTableDisabled(dt.to_owned()));
        };
        let recent = &mut self.recent_datatypes;
        for i in 0..recent.len() {
            let (id, generation) = recent[i];
            if let Some((g, value)) = table.entry(id)
                && g == generation
                && bytes_eq(value.as_bytes(), dt.as_bytes())
            {
                table.touch(id, stamp);
                recent[..=i].rotate_right(1);
                return Ok(id);
            }
        }
        let r = table.get_or_insert(dt, stamp);
        if let Some(Lookup::Hit(id) | Lookup::New { id, .. }) = r {
            recent.rotate_right(1);
            recent[0] = (id, table.generation(id));
        }
        match r {
            Some(Lookup::Hit(id)) => Ok(id),
            Some(Lookup::New { id, wire_id }) => {
                Self::push_entry(
                    &mut self.buf,
                    &mut self.rows,
                    self.entry_fields.datatype,
                    wire_id,
                    dt,
                );
                Ok(id)
            }
            None => Err(Self::table_full_error(Table::Datatype, table.size())),
        }
    }

    /// Appends one `rows` element holding a row whose oneof field `field` has `body`.
    #[inline]
    pub(crate) fn push_row(&mut self, field: u32, body: &[u8]) {
        put_row(&mut self.buf, field, body);
        self.rows += 1;
    }

    #[inline]
    fn push_entry(buf: &mut Vec<u8>, rows: &mut usize, field: u32, wire_id: u32, value: &str) {
        put_entry_row(buf, field, wire_id, value.as_bytes());
        *rows += 1;
    }

    /// Every entry of `table` is used by the row being encoded: the row needs more
    /// distinct entries than the table holds.
    #[cold]
    fn table_full_error(table: Table, size: u32) -> EncodeError {
        EncodeError::TableTooSmallForRow { table, size }
    }

    /// True if the table slots of `c` still hold the values it was made from, and
    /// its prefix and name entries spell `iri`.
    #[inline(always)]
    fn ids_spell(&self, c: CachedIds, iri: &str) -> bool {
        let Some((ngen, name)) = self.names.entry(c.nid) else {
            return false;
        };
        if ngen != c.ngen {
            return false;
        }
        let Some((pgen, prefix)) = self.prefixes.entry(c.pid) else {
            return false;
        };
        let (iri, prefix, name) = (iri.as_bytes(), prefix.as_bytes(), name.as_bytes());
        if pgen != c.pgen || iri.len() != prefix.len() + name.len() {
            return false;
        }
        let (head, tail) = iri.split_at(prefix.len());
        bytes_eq(head, prefix) && bytes_eq(tail, name)
    }

    /// The ids of `iri` (whose hash is `hash`), if the IRI cache has them and they are
    /// still valid. No side effects.
    #[inline(always)]
    fn peek_iri(&self, iri: &str, hash: u64) -> Option<CachedIds> {
        let (ways, tag) = self.iri_cache.ways(hash);
        for w in ways {
            if w.tag == tag && self.ids_spell(w.ids, iri) {
                return Some(w.ids);
            }
        }
        None
    }

    /// Makes sure `iri` is in the tables (emitting entries, touching the LRU lists) and
    /// returns its ids.
    #[inline(always)]
    fn resolve_iri(&mut self, iri: &str, hash: u64) -> Result<CachedIds, EncodeError> {
        let Some(c) = self.peek_iri(iri, hash) else {
            return self.resolve_iri_slow(iri, hash);
        };
        let stamp = self.stamp;
        self.prefixes.touch(c.pid, stamp);
        self.names.touch(c.nid, stamp);
        Ok(c)
    }

    #[inline(never)]
    fn resolve_iri_slow(&mut self, iri: &str, hash: u64) -> Result<CachedIds, EncodeError> {
        let (pid, nid) = self.iri_ids_slow(iri)?;
        let pgen = self.prefixes.generation(pid);
        let ngen = self.names.generation(nid);
        let ids = CachedIds {
            pid,
            pgen,
            nid,
            ngen,
        };
        self.iri_cache.insert(hash, ids);
        Ok(ids)
    }

    /// Resolves `iri` and returns the `(prefix_id, name_id)` to write.
    #[inline]
    pub(crate) fn iri_ids(&mut self, iri: &str) -> Result<(u32, u32), EncodeError> {
        let hash = self.iri_cache.hash(iri);
        let c = self.resolve_iri(iri, hash)?;
        Ok(self.wire_ids(c.pid, c.nid))
    }

    /// The ids to write for `(pid, nid)` under the delta rules; advances the delta state.
    #[inline]
    fn wire_ids(&mut self, pid: u32, nid: u32) -> (u32, u32) {
        delta_wire_ids(&mut self.last_prefix_id, &mut self.last_name_id, pid, nid)
    }

    /// Splits the IRI and looks both parts up, emitting entries for new ones.
    fn iri_ids_slow(&mut self, iri: &str) -> Result<(u32, u32), EncodeError> {
        let stamp = self.stamp;
        if self.prefixes.size() == 0 {
            let nid = self.name_id(iri, stamp)?;
            return Ok((0, nid));
        }
        if self.whole_iris {
            return self.whole_iri_ids(iri, stamp);
        }
        // The split `split_iri` makes, and what is known of the name.
        let (prefix, name, hint) = match self.split_at_recent_name(iri) {
            Some((cut, nid)) => (&iri[..cut], &iri[cut..], NameHint::Known(nid)),
            None => {
                let (prefix, name) = split_iri(iri);
                // Cut at a `/` at byte 7 or later: the name, from byte 8 on, has
                // neither `/` nor `#` (else the cut would be there).
                if prefix.len() >= 8 && prefix.ends_with('/') {
                    (prefix, name, NameHint::Record)
                } else {
                    (prefix, name, NameHint::None)
                }
            }
        };
        let Some(pid) = self.prefix_id(prefix, stamp) else {
            // Every entry of the table is one of this row's: the IRI goes whole under
            // the empty prefix, when that has (or can get) an entry.
            return self.whole_iri_ids(iri, stamp);
        };
        let nid = if let NameHint::Known(nid) = hint {
            // What `get_or_insert` does on a hit: the name is in the table under this id.
            self.names.touch(nid, stamp);
            nid
        } else {
            let nid = self.name_id(name, stamp)?;
            if let NameHint::Record = hint {
                self.recent_name = RecentName {
                    nid,
                    ngen: self.names.generation(nid),
                    len: name.len(),
                };
            }
            nid
        };
        Ok((pid, nid))
    }

    /// The id of prefix `prefix`, emitting an entry when it is new; `None` when the
    /// table is full of entries the current row uses.
    fn prefix_id(&mut self, prefix: &str, stamp: u32) -> Option<u32> {
        match self.prefixes.get_or_insert(prefix, stamp)? {
            Lookup::Hit(id) => Some(id),
            Lookup::New { id, wire_id } => {
                Self::push_entry(
                    &mut self.buf,
                    &mut self.rows,
                    self.entry_fields.prefix,
                    wire_id,
                    prefix,
                );
                Some(id)
            }
        }
    }

    /// `iri` written whole: the empty prefix and the whole IRI as its name.
    #[cold]
    fn whole_iri_ids(&mut self, iri: &str, stamp: u32) -> Result<(u32, u32), EncodeError> {
        let Some(pid) = self.prefix_id("", stamp) else {
            return Err(Self::table_full_error(Table::Prefix, self.prefixes.size()));
        };
        let nid = self.name_id(iri, stamp)?;
        Ok((pid, nid))
    }

    /// When `iri` ends with the recent name ([`TermEncoder::recent_name`]), still in the
    /// name table, after a `/` and with no `#` from byte 8 on before it: where
    /// [`split_iri`] cuts it (as the name has neither `/` nor `#`, it is that `/`),
    /// and the name's id.
    #[inline]
    fn split_at_recent_name(&self, iri: &str) -> Option<(usize, u32)> {
        let RecentName { nid, ngen, len } = self.recent_name;
        let b = iri.as_bytes();
        // The name holds neither `/` nor `#`, so with a `/` before it at byte 7 or
        // later and no `#` from byte 8 up to it, that `/` is where `split_iri` cuts.
        // The cheap tests first: most IRIs that miss fail on the `/`.
        let cut = b.len().checked_sub(len).filter(|&c| c >= 8)?;
        if b[cut - 1] != b'/' || nid == 0 {
            return None;
        }
        let (g, name) = self.names.entry(nid)?;
        if g != ngen || !bytes_eq(&b[cut..], name.as_bytes()) {
            return None;
        }
        if memchr::memchr(b'#', &b[8..cut]).is_some() {
            return None;
        }
        Some((cut, nid))
    }

    /// The id of name `name`, emitting an entry when it is new.
    #[inline]
    fn name_id(&mut self, name: &str, stamp: u32) -> Result<u32, EncodeError> {
        match self.names.get_or_insert(name, stamp) {
            Some(Lookup::Hit(id)) => Ok(id),
            Some(Lookup::New { id, wire_id }) => {
                Self::push_entry(
                    &mut self.buf,
                    &mut self.rows,
                    self.entry_fields.name,
                    wire_id,
                    name,
                );
                Ok(id)
            }
            None => Err(Self::table_full_error(Table::Name, self.max_name)),
        }
    }

    /// Writes an `RdfIri` message as field `field`.
    #[inline(always)]
    pub(crate) fn put_iri(out: &mut Vec<u8>, field: u32, (pid, nid): (u32, u32)) {
        // Written in place into 16 zeroed bytes, then cut to length: at most 2 (tag)
        // + 1 (length) + 2 × (1 + 5) bytes. (Bytes assembled on the stack and copied as
        // a block would stall the copy's load behind the byte stores.)
        let at = out.len();
        let Some(b) = zeroed_tail::<16>(out) else {
            return;
        };
        let mut n = put_varint_at(b, 0, u64::from(field << 3 | 2));
        let len_at = n;
        n += 1;
        if pid != 0 {
            b[n] = (iri_f::PREFIX_ID << 3) as u8;
            n = put_varint_at(b, n + 1, u64::from(pid));
        }
        if nid != 0 {
            b[n] = (iri_f::NAME_ID << 3) as u8;
            n = put_varint_at(b, n + 1, u64::from(nid));
        }
        // The body is at most 12 bytes, so its length is one byte.
        b[len_at] = (n - len_at - 1) as u8;
        out.truncate(at + n);
    }

    fn literal_body(
        &mut self,
        lex: &str,
        kind: LiteralKind<'_>,
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError> {
        if !lex.is_empty() {
            put_bytes_field(out, lit::LEX, lex.as_bytes());
        }
        match kind {
            LiteralKind::Simple => {}
            LiteralKind::Typed(dt) if dt == XSD_STRING => {}
            LiteralKind::Lang(tag) => put_bytes_field(out, lit::LANGTAG, tag.as_bytes()),
            LiteralKind::Typed(dt) => {
                let id = self.datatype_id(dt)?;
                put_tag(out, lit::DATATYPE, WireType::Varint);
                put_varint(out, u64::from(id));
            }
        }
        Ok(())
    }

    fn check_term(&self, t: TermRef<'_>, position: usize) -> Result<(), EncodeError> {
        let ok = match (position, t) {
            // RdfQuad's graph oneof has no quoted-triple field.
            (3, TermRef::Triple(_)) => false,
            (_, TermRef::Triple(_)) => {
                if !self.rdf_star {
                    return Err(EncodeError::RdfStarNotEnabled(POSITIONS[position]));
                }
                position != 1 || self.generalized
            }
            (_, TermRef::DefaultGraph) if position != 3 => {
                return Err(EncodeError::DefaultGraphMisplaced);
            }
            (0, TermRef::Iri(_) | TermRef::BlankNode(_)) => true,
            (1, TermRef::Iri(_)) => true,
            (2, _) => true,
            (3, TermRef::Iri(_) | TermRef::BlankNode(_) | TermRef::DefaultGraph) => true,
            _ => self.generalized,
        };
        if ok {
            Ok(())
        } else {
            Err(EncodeError::GeneralizedNotEnabled {
                kind: t.kind_name(),
                position: POSITIONS[position],
            })
        }
    }

    /// Writes the field for term `t` at `position` (0–2: S/P/O; 3: quad graph;
    /// 4: graph_start graph) into `out`.
    pub(crate) fn term_field(
        &mut self,
        t: TermRef<'_>,
        position: usize,
        out: &mut Vec<u8>,
        depth: usize,
    ) -> Result<(), EncodeError> {
        // A header value may be any term, as an object; the other places outside a
        // statement are graph names.
        let rules = if position == AT_PATCH_HEADER {
            2
        } else {
            position.min(3)
        };
        self.check_term(t, rules)?;
        // Field numbers: S/P/O use base+0..3 (iri, bnode, literal, triple); the quad
        // graph uses 13 (iri), 14 (bnode), 15 (default), 16 (literal); graph_start 1..4.
        let (f_iri, f_bnode, f_lit, f_other) = term_fields(position);
        match t {
            TermRef::Iri(iri) => {
                let ids = self.iri_ids(iri)?;
                Self::put_iri(out, f_iri, ids);
            }
            TermRef::BlankNode(b) => put_bytes_field(out, f_bnode, b.as_bytes()),
            TermRef::Literal(l) => {
                let mut v = std::mem::take(self.scratch_at(depth + 1));
                v.clear();
                let r = self.literal_body(l.lex, l.kind, &mut v);
                if r.is_ok() {
                    put_bytes_field(out, f_lit, &v);
                }
                *self.scratch_at(depth + 1) = v;
                r?;
            }
            TermRef::DefaultGraph => put_bytes_field(out, f_other, &[]),
            TermRef::Triple(tr) => {
                let mut v = std::mem::take(self.scratch_at(depth + 1));
                v.clear();
                let r = self.quoted_body(tr, &mut v, depth + 1);
                if r.is_ok() {
                    put_bytes_field(out, f_other, &v);
                }
                *self.scratch_at(depth + 1) = v;
                r?;
            }
        }
        Ok(())
    }

    fn quoted_body(
        &mut self,
        t: TripleRef<'_>,
        out: &mut Vec<u8>,
        depth: usize,
    ) -> Result<(), EncodeError> {
        for i in 0..3 {
            self.term_field(t.term(i), i, out, depth)?;
        }
        Ok(())
    }

    fn scratch_at(&mut self, depth: usize) -> &mut Vec<u8> {
        while self.scratch.len() <= depth {
            self.scratch.push(Vec::with_capacity(128));
        }
        &mut self.scratch[depth]
    }

    /// Encodes the statement body (all non-repeated terms) into scratch[0] and returns it.
    pub(crate) fn statement_body(&mut self, terms: &[TermRef<'_>]) -> Result<Vec<u8>, EncodeError> {
        self.stamp = self.stamp.wrapping_add(1);
        let delta_state = (self.last_prefix_id, self.last_name_id);
        let mut body = std::mem::take(&mut self.scratch[0]);
        body.clear();
        for (i, &t) in terms.iter().enumerate() {
            if let Err(e) = self.repeatable_term(i, t, i, &mut body) {
                self.scratch[0] = body;
                self.undo_row(delta_state, i);
                return Err(e);
            }
        }
        Ok(body)
    }

    /// Writes term `t` of repeat slot `slot` (0–3: S, P, O, G) as the fields of
    /// `position` (see [`term_fields`]), or nothing when it repeats the slot's previous term.
    #[inline]
    pub(crate) fn repeatable_term(
        &mut self,
        slot: usize,
        t: TermRef<'_>,
        position: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError> {
        if t.is_triple() {
            if matches!(self.last[slot], Last::Other) && self.prev[slot].as_ref() == t {
                return Ok(());
            }
            self.term_field(t, position, out, 0)?;
            self.prev[slot].set_from(t);
            self.last[slot] = Last::Other;
            return Ok(());
        }
        let p = self.plan_term(slot, t, false)?;
        Self::write_planned(out, position, p, t);
        Ok(())
    }

    #[inline(always)]
    pub(crate) fn check_term_deep(
        &self,
        t: TermRef<'_>,
        position: usize,
    ) -> Result<(), EncodeError> {
        match (position, t) {
            (0 | 2, TermRef::Iri(_) | TermRef::BlankNode(_))
            | (1, TermRef::Iri(_))
            | (3, TermRef::Iri(_) | TermRef::BlankNode(_) | TermRef::DefaultGraph) => Ok(()),
            (2, TermRef::Literal(l))
                if self.datatypes.is_some() || !matches!(l.kind, LiteralKind::Typed(_)) =>
            {
                Ok(())
            }
            _ => self.check_term_slow(t, position),
        }
    }

    #[inline(never)]
    fn check_term_slow(&self, t: TermRef<'_>, position: usize) -> Result<(), EncodeError> {
        // Fast path: the term kinds plain RDF allows in each position.
        match (position, t) {
            (0 | 2, TermRef::Iri(_) | TermRef::BlankNode(_))
            | (1, TermRef::Iri(_))
            | (3, TermRef::Iri(_) | TermRef::BlankNode(_) | TermRef::DefaultGraph) => return Ok(()),
            (2, TermRef::Literal(l))
                if self.datatypes.is_some() || !matches!(l.kind, LiteralKind::Typed(_)) =>
            {
                return Ok(());
            }
            _ => {}
        }
        self.check_term(t, position)?;
        if let TermRef::Literal(l) = t
            && let LiteralKind::Typed(dt) = l.kind
            && dt != XSD_STRING
            && self.datatypes.is_none()
        {
            return Err(EncodeError::DatatypeTableDisabled(dt.to_owned()));
        }
        if let TermRef::Triple(tr) = t {
            for i in 0..3 {
                self.check_term_deep(tr.term(i), i)?;
            }
        }
        Ok(())
    }
}

/// The ids to write for an IRI with resolved ids `(pid, nid)`, after an IRI whose
/// resolved ids are `*last_prefix` and `*last_name`: 0 for a prefix id equal to the
/// last one and for a name id one past the last one (the IRI delta rules). The last
/// ids move on to this IRI's.
#[inline(always)]
pub(crate) fn delta_wire_ids(
    last_prefix: &mut u32,
    last_name: &mut u32,
    pid: u32,
    nid: u32,
) -> (u32, u32) {
    let wire_pid = if pid == *last_prefix { 0 } else { pid };
    let wire_nid = if nid == last_name.wrapping_add(1) {
        0
    } else {
        nid
    };
    *last_prefix = pid;
    *last_name = nid;
    (wire_pid, wire_nid)
}

/// Appends one `rows` element of a frame, holding a row whose oneof field `field` has
/// `body`.
///
/// Not inlined: inlined into the encoder's row writer, it cost about 3% more
/// instructions per statement there (callgrind, iot-weather), for rows that are rare.
#[inline(never)]
pub(crate) fn put_row(buf: &mut Vec<u8>, field: u32, body: &[u8]) {
    let row_len = 1 + varint_len(body.len() as u64) + body.len();
    buf.push((frame::ROWS << 3 | 2) as u8);
    put_varint(buf, row_len as u64);
    put_tag(buf, field, WireType::Len);
    put_varint(buf, body.len() as u64);
    buf.extend_from_slice(body);
}

/// Appends one `rows` element holding a lookup entry row (`field`: name, prefix or
/// datatype) with `wire_id` (0: the previous entry's id + 1) and `value`. Fields
/// equal to their default are left out.
///
/// Not inlined, for the same reason as [`put_row`]: measured, the encoder's row writer
/// counts about 3% more instructions per statement with it inlined.
#[inline(never)]
pub(crate) fn put_entry_row(buf: &mut Vec<u8>, field: u32, wire_id: u32, value: &[u8]) {
    // Usual shape: a one-byte row key, an id of at most two varint bytes and a value
    // under 100 bytes, so that every length is one byte. The header is written in
    // place into 10 zeroed bytes and cut to length, as `put_iri` writes (bytes
    // assembled on the stack and copied as a block would stall the copy's load behind
    // the byte stores). The rebaser writes dozens of these per frame (the entries a
    // frame uses from earlier frames); the general path below spent about 145
    // instructions per row on varint loops and per-byte capacity checks.
    if field < 16 && wire_id < 0x4000 && value.len() < 100 {
        let start = buf.len();
        buf.reserve(10 + value.len());
        let Some(head) = zeroed_tail::<10>(buf) else {
            return;
        };
        head[0] = (frame::ROWS << 3 | 2) as u8;
        head[2] = (field << 3 | 2) as u8;
        let mut n = 4;
        if wire_id >= 0x80 {
            head[4] = (entry::ID << 3) as u8;
            head[5] = (wire_id as u8) | 0x80;
            head[6] = (wire_id >> 7) as u8;
            n = 7;
        } else if wire_id != 0 {
            head[4] = (entry::ID << 3) as u8;
            head[5] = wire_id as u8;
            n = 6;
        }
        if !value.is_empty() {
            head[n] = (entry::VALUE << 3 | 2) as u8;
            head[n + 1] = value.len() as u8;
            n += 2;
        }
        // Both under 128: at most 3 + 2 + 99, and 2 more.
        let entry_len = n - 4 + value.len();
        head[1] = (entry_len + 2) as u8;
        head[3] = entry_len as u8;
        buf.truncate(start + n);
        buf.extend_from_slice(value);
        return;
    }
    put_entry_row_general(buf, field, wire_id, value);
}

/// Appends `N` zero bytes to `buf` and returns them, to be written in place and then
/// cut to length (see [`TermEncoder::put_iri`] for why in place).
#[inline(always)]
fn zeroed_tail<const N: usize>(buf: &mut Vec<u8>) -> Option<&mut [u8; N]> {
    let at = buf.len();
    buf.extend_from_slice(&[0u8; N]);
    buf.get_mut(at..)
        .and_then(|b| <&mut [u8; N]>::try_from(b).ok())
}

/// [`put_entry_row`] for any field number, id and value length.
#[cold]
fn put_entry_row_general(buf: &mut Vec<u8>, field: u32, wire_id: u32, value: &[u8]) {
    let id_len = if wire_id == 0 {
        0
    } else {
        1 + varint_len(u64::from(wire_id))
    };
    let val_len = if value.is_empty() {
        0
    } else {
        1 + varint_len(value.len() as u64) + value.len()
    };
    let entry_len = id_len + val_len;
    let row_len = 1 + varint_len(entry_len as u64) + entry_len;
    buf.push((frame::ROWS << 3 | 2) as u8);
    put_varint(buf, row_len as u64);
    put_tag(buf, field, WireType::Len);
    put_varint(buf, entry_len as u64);
    put_uint_field(buf, entry::ID, u64::from(wire_id));
    if !value.is_empty() {
        put_bytes_field(buf, entry::VALUE, value);
    }
}

#[cfg(test)]
mod tests {
    use super::split_iri;

    /// The fast path of `put_entry_row` writes what the general one writes, across the
    /// edges of its shape: ids around one and two varint bytes, values around 99 bytes,
    /// and the entry row fields of both formats.
    #[test]
    fn entry_rows_fast_path_matches_the_general_writer() {
        let ids = [
            0,
            1,
            2,
            127,
            128,
            129,
            300,
            16383,
            16384,
            16385,
            1 << 21,
            u32::MAX,
        ];
        let value = [b'x'; 200];
        for field in [1, 9, 10, 11, 15, 16, 17] {
            for id in ids {
                for len in [0, 1, 2, 98, 99, 100, 101, 126, 127, 128, 200] {
                    let mut fast = vec![0xAA];
                    super::put_entry_row(&mut fast, field, id, &value[..len]);
                    let mut general = vec![0xAA];
                    super::put_entry_row_general(&mut general, field, id, &value[..len]);
                    assert_eq!(
                        fast, general,
                        "field {field}, id {id}, value of {len} bytes"
                    );
                }
            }
        }
    }

    /// Every IRI resolves to the prefix and name `split_iri` gives, whether or not
    /// its name is the recent one: IRIs ending with the recent name after a `/`, after
    /// a `#`, with a `#` earlier on, short ones, and ones whose name was evicted.
    #[test]
    fn iris_split_as_split_iri_with_the_recent_name() {
        let iris = [
            "http://ex.org/a/T1",
            "http://ex.org/b/T1",
            "http://ex.org/c#d/T1",
            "http://ex.org/c/d#T1",
            "http://ex.org/T1",
            "http://ex.org/a/xT1",
            "http://ex.org/a/T1#x",
            "http:/T1",
            "ab/T1",
            "ab/cdefT1",
            "abcdefg/T1",
            "abcdef#/T1",
            "abcdefg#/T1",
            "http://ex.org/a/",
            "http://ex.org/b/",
            "http://ex.org/b#/",
            "urn:x",
            "http://ex.org/e/T1",
            "http://ex.org/a/T2",
            "http://ex.org/b/T2",
            "http://ex.org/f/T3",
            "http://ex.org/g/T4",
            "http://ex.org/h/T2",
            "http://ex.org/i/T1",
        ];
        let fields = super::EntryFields {
            name: 9,
            prefix: 10,
            datatype: 11,
        };
        // A name table of 3 entries, so names are evicted and come back.
        let mut enc = super::TermEncoder::new(3, 16, 0, false, false, fields);
        for _ in 0..3 {
            for iri in iris {
                enc.stamp = enc.stamp.wrapping_add(1);
                let hash = enc.iri_cache.hash(iri);
                let c = enc.resolve_iri(iri, hash).expect("resolves");
                let (prefix, name) = split_iri(iri);
                assert_eq!(enc.prefixes.value(c.pid), prefix, "{iri}");
                assert_eq!(enc.names.value(c.nid), name, "{iri}");
                // Again, from the split alone (the IRI cache is bypassed).
                let (pid, nid) = enc.iri_ids_slow(iri).expect("resolves");
                assert_eq!((pid, nid), (c.pid, c.nid), "{iri}");
            }
        }
    }

    /// The split rule written plainly: after the first `#` from byte 8 on, otherwise
    /// after the last `/`.
    fn split_plain(iri: &str) -> (&str, &str) {
        let b = iri.as_bytes();
        let cut = b
            .iter()
            .enumerate()
            .skip(8)
            .find(|&(_, &c)| c == b'#')
            .or_else(|| b.iter().enumerate().rev().find(|&(_, &c)| c == b'/'))
            .map_or(0, |(i, _)| i + 1);
        iri.split_at(cut)
    }

    #[test]
    fn split_iri_matches_the_plain_rule_at_every_length_and_position() {
        // Every length up to 70, with a `#` or `/` (or both, or neither) at each
        // position, around the 8-byte scheme skip and the 16-byte blocks.
        for len in 0..70 {
            let base: String = (0..len).map(|i| (b'a' + (i % 26) as u8) as char).collect();
            let mut cases = vec![base.clone()];
            for i in 0..len {
                for c in ["#", "/"] {
                    let mut s = base.clone();
                    s.replace_range(i..=i, c);
                    cases.push(s.clone());
                    for j in (i + 1..len).step_by(5) {
                        for d in ["#", "/"] {
                            let mut t = s.clone();
                            t.replace_range(j..=j, d);
                            cases.push(t);
                        }
                    }
                }
            }
            for s in &cases {
                assert_eq!(split_iri(s), split_plain(s), "{s:?}");
            }
        }
        assert_eq!(split_iri("http://é.org/ü#ö"), ("http://é.org/ü#", "ö"));
    }
}
