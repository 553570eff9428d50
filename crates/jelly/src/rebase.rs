//! Rebasing: each frame of a Jelly stream rewritten as a self-contained frame, without
//! decoding and re-encoding its statements.
//!
//! A frame in the middle of a stream depends on what came before it: lookup entries
//! defined by earlier frames, the IRI delta state (`prefix_id` / `name_id` 0), the
//! entry-id delta (`id` 0) and terms repeated from the previous statement. A
//! [`Rebaser`] follows a stream frame by frame and writes each frame so that it depends
//! on nothing earlier:
//! - the target stream's options row comes first;
//! - then every entry the frame uses but an earlier frame defined, with its id;
//! - then the frame's rows, with each id written explicitly wherever its 0 shorthand
//!   would have meant something else without the earlier frames, and the terms the
//!   frame's first statement repeats from the previous frame written out.
//!
//! Ids keep their numbers, so the frame's rows are copied nearly as they are: no
//! string is hashed or looked up. Frames rebased this way can be served back to back,
//! in any order and after any other such frames, as one stream ([`crate::splice`]),
//! exactly like frames of a fresh encoder with
//! [`EncoderConfig::spliceable`](crate::EncoderConfig). The server stores published
//! items this way.
//!
//! Some frames cannot be rebased, and [`Rebased::Unsupported`] says why; the caller
//! then re-encodes that frame from its decoded statements. Examples: the publisher's
//! options do not fit the target's (larger tables, another physical type, GRAPHS), or
//! the first statement repeats a quoted triple from the previous frame. A TRIPLES
//! stream fits a QUADS target: its triples are written as quads in the default graph.
//!
//! ```
//! use jelly::{Decoder, Encoder, StreamOptions, StatementRef, TermRef};
//! use jelly::rebase::{Rebaser, Rebased};
//! let opts = StreamOptions::small();
//! let mut enc = Encoder::new(opts.clone()).unwrap();
//! let t = |s, o| StatementRef::triple(TermRef::Iri(s), TermRef::Iri("http://ex.org/p"), TermRef::Iri(o));
//! enc.add(t("http://ex.org/a", "http://ex.org/b")).unwrap();
//! let first = enc.finish_frame();
//! enc.add(t("http://ex.org/a", "http://ex.org/c")).unwrap(); // repeats a, uses p from frame 1
//! let second = enc.finish_frame();
//!
//! let mut dec = Decoder::default();
//! let mut rebaser = Rebaser::new(&opts);
//! let mut out = Vec::new();
//! for frame in [&first, &second] {
//!     // Before the decoder takes the frame: the rebaser reads the tables as they were
//!     // at the frame's start.
//!     let r = rebaser.rebase(frame, &dec, &mut out);
//!     assert_eq!(r, Rebased::Frame { statements: 1 });
//!     let mut cur = dec.frame(frame);
//!     while cur.next_event().unwrap().is_some() {}
//! }
//! // The second frame alone, read by a fresh decoder:
//! let mut fresh = Decoder::default();
//! let mut cur = fresh.frame(&out);
//! let mut seen = Vec::new();
//! while let Some(ev) = cur.next_event().unwrap() {
//!     if let jelly::Event::Statement(st) = ev {
//!         seen.push((st.subject.to_owned(), st.object.to_owned()));
//!     }
//! }
//! let iri = |s: &str| jelly::Term::Iri(s.into());
//! assert_eq!(seen, vec![(iri("http://ex.org/a"), iri("http://ex.org/c"))]);
//! ```

use jelly_proto::fields::{entry, frame, literal, namespace, row, statement};
use jelly_proto::wire::{Reader, WireType, put_tag, put_varint};

use crate::decoder::Decoder;
use crate::error::Table;
use crate::options::{PhysicalType, StreamOptions};
use crate::term_decoder::{TermField, iri_ids, quad_graph_field, spo_field};
use crate::term_encoder::{TermEncoder, delta_wire_ids, put_entry_row, put_row, term_fields};

/// What [`Rebaser::rebase`] made of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rebased {
    /// The self-contained frame is in `out`; it holds this many statements.
    Frame { statements: u32 },
    /// The frame holds no statements (options, entries or namespaces only); `out` is
    /// empty. Its entries are still followed.
    NoStatements,
    /// The frame cannot be rebased (the reason is for logs); re-encode its statements.
    /// Later frames may still be rebased, unless the stream as a whole does not fit.
    Unsupported(&'static str),
}

/// Index of a table in the per-table arrays.
const PREFIX: usize = 0;
const NAME: usize = 1;
const DATATYPE: usize = 2;

const TABLES: [Table; 3] = [Table::Prefix, Table::Name, Table::Datatype];

/// Row field of each table's entries.
const ENTRY_ROWS: [u32; 3] = [row::PREFIX, row::NAME, row::DATATYPE];

/// Index of the frame numbers in [`Rebaser::stamps`].
const DEFINED: usize = 0;
const IMPORTED: usize = 1;

/// No id: `UNKNOWN + 1` and `UNKNOWN` itself match no id, so an id compared with it is
/// always written explicitly.
const UNKNOWN: u32 = u32::MAX - 1;

/// Deepest nesting of quoted triples followed (the decoder's default limit).
const MAX_DEPTH: usize = 100;

/// A term of the previous statement, as the next frame's first statement may repeat it.
#[derive(Debug, Clone, Copy)]
enum Prev {
    /// No statement yet.
    None,
    /// An IRI, by its resolved ids.
    Iri { pid: u32, nid: u32 },
    /// A blank node, literal or default graph: its field and payload (in the current
    /// frame while it is being read, then copied), and a literal's datatype id (0 if none).
    Raw {
        field: u32,
        datatype: u32,
        start: u32,
        end: u32,
        copied: bool,
    },
    /// Cannot be written out again: a quoted triple, or an IRI or datatype whose entry
    /// was redefined since.
    Stale,
}

/// Follows one Jelly stream and rewrites each of its frames as a self-contained frame
/// of a target stream. See the [module documentation](self).
#[derive(Debug)]
pub struct Rebaser {
    /// Sizes of the target's tables (prefix, name, datatype).
    target_sizes: [u32; 3],
    target_physical: PhysicalType,
    target_rdf_star: bool,
    target_generalized: bool,
    /// Whether namespace declarations are written (a Jelly 1.1 target) or dropped.
    keep_namespaces: bool,
    /// The target's options row, as a frame's first `rows` field.
    options_row: Vec<u8>,
    /// Whether the publisher's options fit the target's; `None` before its options row.
    fits: Option<bool>,
    /// A TRIPLES stream into a QUADS target: triple rows become quads in the default graph.
    triples_as_quads: bool,
    /// Set for good when the stream could not be followed (malformed input): the state
    /// below no longer matches the decoder's.
    lost: bool,

    // The publisher's stream state, as its decoder holds it.
    /// Resolved ids of the last IRI.
    last_prefix: u32,
    last_name: u32,
    /// Last entry id per table.
    last_entry: [u32; 3],
    /// Per table and id: the number of the frame that last defined it, and of the
    /// frame that last imported it (ids up to the target's table size). Side by side,
    /// so that a use of an id reads one cache line.
    stamps: [Vec<[u32; 2]>; 3],
    /// Number of the current frame (from 1; 0 in the stamps means never).
    frame_no: u32,
    /// The previous statement's terms, by position.
    prev: [Prev; 4],
    /// Copies of [`Prev::Raw`] payloads, by position.
    prev_bytes: [Vec<u8>; 4],

    // The output frame's state, while one is written.
    /// Resolved ids of the last IRI written (UNKNOWN at the start: ids are explicit).
    out_prefix: u32,
    out_name: u32,
    /// Last entry id written per table, among the frame's own entry rows.
    out_entry: [u32; 3],
    /// Statements written in the current frame (0: the next one is its first).
    statements: u32,
    /// Why the current frame cannot be rebased.
    unsupported: Option<&'static str>,

    /// Scratch: the entries the frame uses from earlier frames, one bit per id and
    /// table (read in order of table and id, with no sort), and how many are set; the
    /// frame's rows; one statement (and one per level of quoted triples) while it is
    /// written.
    imports: [Vec<u64>; 3],
    import_count: usize,
    body: Vec<u8>,
    nested: Vec<Vec<u8>>,
}

impl Rebaser {
    /// A rebaser writing frames of a stream with `target` options (the options row
    /// every output frame starts with). Only TRIPLES and QUADS targets can be written;
    /// for others every frame is [`Rebased::Unsupported`].
    ///
    /// A `version` of 0 in `target` stands for 1, as for [`Encoder`](crate::Encoder)
    /// without namespace declarations. Namespace declarations are kept only in a
    /// target of version 2 or later.
    pub fn new(target: &StreamOptions) -> Rebaser {
        let mut target = target.clone();
        if target.version == 0 {
            target.version = crate::options::VERSION_1_0;
        }
        let mut options_row = Vec::new();
        put_row(&mut options_row, row::OPTIONS, &target.encode_to_vec());
        let target_sizes = [
            target.max_prefix_table_size,
            target.max_name_table_size,
            target.max_datatype_table_size,
        ];
        Rebaser {
            target_sizes,
            target_physical: target.physical_type,
            target_rdf_star: target.rdf_star,
            target_generalized: target.generalized_statements,
            keep_namespaces: target.version >= crate::options::VERSION_1_1,
            options_row,
            fits: None,
            triples_as_quads: false,
            lost: false,
            last_prefix: 0,
            last_name: 0,
            last_entry: [0; 3],
            stamps: target_sizes.map(|n| vec![[0; 2]; n as usize + 1]),
            frame_no: 0,
            prev: [Prev::None, Prev::None, Prev::None, Prev::None],
            prev_bytes: Default::default(),
            out_prefix: UNKNOWN,
            out_name: UNKNOWN,
            out_entry: [UNKNOWN; 3],
            statements: 0,
            unsupported: None,
            imports: target_sizes.map(|n| vec![0; (n as usize + 1).div_ceil(64)]),
            import_count: 0,
            body: Vec::new(),
            nested: Vec::new(),
        }
    }

    /// Forgets the stream followed so far, for a new one (keeping the buffers).
    pub fn reset(&mut self) {
        self.fits = None;
        self.triples_as_quads = false;
        self.lost = false;
        self.last_prefix = 0;
        self.last_name = 0;
        self.last_entry = [0; 3];
        self.clear_stamps();
        self.frame_no = 0;
        self.prev = [Prev::None, Prev::None, Prev::None, Prev::None];
    }

    /// Forgets which frame defined or imported each id.
    fn clear_stamps(&mut self) {
        for stamps in &mut self.stamps {
            stamps.fill([0; 2]);
        }
    }

    /// Rewrites `frame`, the next frame of the stream that `dec` decodes, into `out`
    /// (cleared first). Call it before `dec` decodes the frame: entries from earlier
    /// frames are read from `dec`'s tables as they are at the frame's start. Every frame
    /// of the stream must go through here, in order, even those the caller then
    /// re-encodes; `dec` is only read.
    ///
    /// The output is only meaningful if `dec` then accepts the frame: the rebaser
    /// follows the stream but checks little of it.
    pub fn rebase(&mut self, frame_bytes: &[u8], dec: &Decoder, out: &mut Vec<u8>) -> Rebased {
        out.clear();
        if self.lost {
            return Rebased::Unsupported("an earlier frame could not be followed");
        }
        if u32::try_from(frame_bytes.len()).is_err() {
            // Offsets into the frame are kept as u32; no reader accepts such a frame.
            self.lost = true;
            return Rebased::Unsupported("a frame of 4 GiB or more");
        }
        self.frame_no += 1;
        if self.frame_no == u32::MAX {
            // The stamps would wrap: forget them (a frame older than this is long gone).
            self.clear_stamps();
            self.frame_no = 1;
        }
        self.out_prefix = if self.target_sizes[PREFIX] == 0 {
            // Without a prefix table every IRI has the empty prefix, written as 0.
            0
        } else {
            UNKNOWN
        };
        self.out_name = UNKNOWN;
        self.out_entry = [UNKNOWN; 3];
        self.statements = 0;
        self.unsupported = None;
        if self.import_count != 0 {
            // Left over from a frame that was not written.
            self.clear_imports();
        }
        self.body.clear();
        if let Err(why) = self.frame(frame_bytes) {
            self.lost = true;
            return Rebased::Unsupported(why);
        }
        // Raw terms of the last statement now point into this frame: keep copies.
        for (pos, p) in self.prev.iter_mut().enumerate() {
            if let Prev::Raw {
                start, end, copied, ..
            } = p
                && !*copied
            {
                let keep = &mut self.prev_bytes[pos];
                keep.clear();
                let range = *start as usize..*end as usize;
                keep.extend_from_slice(frame_bytes.get(range).unwrap_or_default());
                // Within u32: the frame's length is checked on entry.
                *start = 0;
                *end = keep.len() as u32;
                *copied = true;
            }
        }
        if self.statements == 0 {
            return Rebased::NoStatements;
        }
        if let Some(why) = self.unsupported {
            return Rebased::Unsupported(why);
        }
        if self.fits != Some(true) {
            return Rebased::Unsupported("the stream's options do not fit the target's");
        }
        out.reserve(self.options_row.len() + 64 * self.import_count + self.body.len());
        out.extend_from_slice(&self.options_row);
        if !self.write_imports(dec, out) {
            out.clear();
            return Rebased::Unsupported("a use of an undefined entry");
        }
        out.extend_from_slice(&self.body);
        Rebased::Frame {
            statements: self.statements,
        }
    }

    /// Follows and writes every row of a frame. An error means the stream could not
    /// be followed (the decoder will most likely reject the frame).
    fn frame(&mut self, bytes: &[u8]) -> Result<(), &'static str> {
        let mut r = Reader::new(bytes);
        loop {
            let field_start = r.offset();
            let Some((field, wt)) = r.tag().map_err(|_| "malformed frame")? else {
                break;
            };
            if field == frame::ROWS && wt == WireType::Len {
                let row_bytes = r.bytes().map_err(|_| "malformed row")?;
                let row_start = r.offset() - row_bytes.len();
                let raw = &bytes[field_start..r.offset()];
                self.row(bytes, row_start, row_bytes, raw)?;
            } else {
                // Frame metadata and unknown fields are not carried over.
                r.skip(wt).map_err(|_| "malformed frame")?;
            }
        }
        Ok(())
    }

    /// One row; `base` is its payload's offset in `frame_bytes`, and `raw` the whole
    /// `rows` field (copied as it is where nothing in it changes).
    fn row(
        &mut self,
        frame_bytes: &[u8],
        base: usize,
        row_bytes: &[u8],
        raw: &[u8],
    ) -> Result<(), &'static str> {
        // Usual shape: one field, with a one-byte key and a length of one or two bytes.
        if let [key, b1, rest @ ..] = row_bytes
            && key & 7 == 2
            && *key < 0x80
        {
            let (len, head): (usize, usize) = if *b1 < 0x80 {
                (usize::from(*b1), 2)
            } else if let [b2, ..] = rest
                && *b2 < 0x80
                && *b2 != 0
            {
                (usize::from(b1 & 0x7f) | usize::from(*b2) << 7, 3)
            } else {
                (usize::MAX, 0)
            };
            if head.checked_add(len) == Some(row_bytes.len()) {
                let field = u32::from(key >> 3);
                if row::is_row_field(field) {
                    let m = Reader::with_base(&row_bytes[head..], base + head);
                    return self.row_field(frame_bytes, field, m, raw);
                }
            }
        }
        let mut r = Reader::with_base(row_bytes, base);
        let mut found: Option<(u32, Reader<'_>)> = None;
        while let Some((field, wt)) = r.tag().map_err(|_| "malformed row")? {
            match field {
                f if row::is_row_field(f) => {
                    if wt != WireType::Len || found.is_some() {
                        return Err("malformed row");
                    }
                    found = Some((field, r.message().map_err(|_| "malformed row")?));
                }
                _ => r.skip(wt).map_err(|_| "malformed row")?,
            }
        }
        let Some((field, m)) = found else {
            return Err("empty row");
        };
        self.row_field(frame_bytes, field, m, raw)
    }

    /// The one field of a row.
    #[inline(always)]
    fn row_field(
        &mut self,
        frame_bytes: &[u8],
        field: u32,
        m: Reader<'_>,
        raw: &[u8],
    ) -> Result<(), &'static str> {
        match field {
            row::OPTIONS => self.options(m.unread()),
            row::TRIPLE | row::QUAD => self.statement(frame_bytes, field, m, raw),
            row::NAMESPACE => self.namespace(m),
            row::NAME => self.entry(NAME, m, raw),
            row::PREFIX => self.entry(PREFIX, m, raw),
            row::DATATYPE => self.entry(DATATYPE, m, raw),
            _ => {
                // Graph rows belong to GRAPHS streams, which do not fit any target.
                self.unsupported = Some("graph rows");
                Err("graph rows")
            }
        }
    }

    fn options(&mut self, body: &[u8]) -> Result<(), &'static str> {
        if self.fits.is_some() {
            // A repeated options row must equal the first (the decoder checks it).
            return Ok(());
        }
        let o = StreamOptions::decode(body).map_err(|_| "malformed options")?;
        // Triples go into a QUADS target in its default graph.
        self.triples_as_quads =
            o.physical_type == PhysicalType::Triples && self.target_physical == PhysicalType::Quads;
        // Only TRIPLES and QUADS frames stand alone (a GRAPHS frame may continue a graph).
        let target_ok = matches!(
            self.target_physical,
            PhysicalType::Triples | PhysicalType::Quads
        );
        let fits = target_ok
            && (o.physical_type == self.target_physical || self.triples_as_quads)
            && o.max_prefix_table_size <= self.target_sizes[PREFIX]
            && o.max_name_table_size <= self.target_sizes[NAME]
            && o.max_datatype_table_size <= self.target_sizes[DATATYPE];
        // Features the target lacks: the decoder checks terms against the publisher's
        // own options only, so those must not allow more.
        let fits = fits
            && (!o.rdf_star || self.target_rdf_star)
            && (!o.generalized_statements || self.target_generalized);
        self.fits = Some(fits);
        Ok(())
    }

    /// An entry row of `table`.
    fn entry(&mut self, table: usize, mut m: Reader<'_>, raw: &[u8]) -> Result<(), &'static str> {
        let mut raw_id = 0u32;
        let mut value: &[u8] = &[];
        while let Some((field, wt)) = m.tag().map_err(|_| "malformed entry")? {
            match (field, wt) {
                (entry::ID, WireType::Varint) => {
                    raw_id = m.varint32().map_err(|_| "malformed entry")?;
                }
                (entry::VALUE, WireType::Len) => {
                    value = m.bytes().map_err(|_| "malformed entry")?;
                }
                (_, wt) => m.skip(wt).map_err(|_| "malformed entry")?,
            }
        }
        // With the output's last entry id equal to the stream's, the row reads the
        // same in the output as it is.
        let in_step = self.out_entry[table] == self.last_entry[table];
        let id = if raw_id == 0 {
            self.last_entry[table].saturating_add(1)
        } else {
            raw_id
        };
        if id as usize >= self.stamps[table].len() {
            return Err("entry id beyond the target's table");
        }
        self.last_entry[table] = id;
        self.stamps[table][id as usize][DEFINED] = self.frame_no;
        // Terms of the previous statement that use this id can no longer be written
        // out from it.
        for p in &mut self.prev {
            let hit = match *p {
                Prev::Iri { pid, nid } => {
                    (table == PREFIX && pid == id) || (table == NAME && nid == id)
                }
                Prev::Raw { datatype, .. } => table == DATATYPE && datatype == id,
                _ => false,
            };
            if hit {
                *p = Prev::Stale;
            }
        }
        if in_step {
            self.body.extend_from_slice(raw);
        } else {
            let wire = if id == self.out_entry[table].wrapping_add(1) {
                0
            } else {
                id
            };
            put_entry_row(&mut self.body, ENTRY_ROWS[table], wire, value);
        }
        self.out_entry[table] = id;
        Ok(())
    }

    /// Notes a use of entry `id` of `table`: one defined by an earlier frame is written
    /// in front of the frame's rows, once.
    #[inline(always)]
    fn use_entry(&mut self, table: usize, id: u32) -> Result<(), &'static str> {
        let i = id as usize;
        let Some(&[d, m]) = self.stamps[table].get(i) else {
            return Err("entry id beyond the target's table");
        };
        if d == self.frame_no || m == self.frame_no {
            return Ok(());
        }
        self.import(table, id)
    }

    /// Writes entry `id` of `table` as the decoder holds it, in front of the frame's rows.
    #[inline(never)]
    fn import(&mut self, table: usize, id: u32) -> Result<(), &'static str> {
        if id == 0 {
            return Err("entry id 0");
        }
        self.stamps[table][id as usize][IMPORTED] = self.frame_no;
        // The stamps and the bitset are sized alike: within bounds.
        if let Some(word) = self.imports[table].get_mut(id as usize / 64) {
            *word |= 1 << (id % 64);
            self.import_count += 1;
        }
        Ok(())
    }

    /// Writes the imported entries in order of table and id, so that runs of
    /// consecutive ids use the entry-id shorthand (0: the previous id + 1).
    /// Returns false when one of them is not defined (the decoder rejects the frame).
    fn write_imports(&mut self, dec: &Decoder, out: &mut Vec<u8>) -> bool {
        let mut defined = true;
        'tables: for (t, bits) in self.imports.iter_mut().enumerate() {
            // The previous id written of this table (0: none; no entry has id 0).
            let mut last = 0u32;
            for (w, word) in bits.iter_mut().enumerate() {
                let mut set = std::mem::take(word);
                while set != 0 {
                    // Under the table's size, which is a u32.
                    let id = (w * 64) as u32 + set.trailing_zeros();
                    set &= set - 1;
                    let wire = if last != 0 && id == last.wrapping_add(1) {
                        0
                    } else {
                        id
                    };
                    let Some(value) = dec.entry(TABLES[t], id) else {
                        defined = false;
                        break 'tables;
                    };
                    put_entry_row(out, ENTRY_ROWS[t], wire, value);
                    last = id;
                }
            }
        }
        if defined {
            // Every word was taken.
            self.import_count = 0;
        } else {
            // The words not yet read are still set.
            self.clear_imports();
        }
        defined
    }

    /// Forgets the imported entries marked so far.
    fn clear_imports(&mut self) {
        self.imports.iter_mut().for_each(|bits| bits.fill(0));
        self.import_count = 0;
    }

    /// Notes the entries an IRI with resolved ids uses.
    #[inline(always)]
    fn use_iri(&mut self, pid: u32, nid: u32) -> Result<(), &'static str> {
        if pid == 0 {
            if self.target_sizes[PREFIX] != 0 {
                // The empty prefix is only written as 0, which after another frame's
                // IRIs would mean their prefix.
                self.unsupported = Some("an IRI without a prefix entry");
            }
        } else {
            self.use_entry(PREFIX, pid)?;
        }
        self.use_entry(NAME, nid)
    }

    /// Writes an IRI field with resolved ids, using the 0 shorthands only where the
    /// output frame itself supports them.
    fn write_iri(
        &mut self,
        out_field: u32,
        pid: u32,
        nid: u32,
        dest: &mut Vec<u8>,
    ) -> Result<(), &'static str> {
        self.use_iri(pid, nid)?;
        let ids = delta_wire_ids(&mut self.out_prefix, &mut self.out_name, pid, nid);
        TermEncoder::put_iri(dest, out_field, ids);
        Ok(())
    }

    /// Resolves an `RdfIri` payload against the stream's delta state.
    #[inline(always)]
    fn resolve_iri(&mut self, payload: &[u8]) -> Result<(u32, u32), &'static str> {
        let (p, n) = iri_ids(payload).map_err(|_| "malformed IRI")?;
        let pid = if p == 0 { self.last_prefix } else { p };
        let nid = if n == 0 {
            self.last_name.saturating_add(1)
        } else {
            n
        };
        self.last_prefix = pid;
        self.last_name = nid;
        Ok((pid, nid))
    }

    /// A literal's datatype id (0 if it has none).
    #[inline]
    fn literal_datatype(payload: &[u8]) -> Result<u32, &'static str> {
        // Usual shape: `lex` (key 0x0A, length of one byte) then `datatype` (key 0x18,
        // a one-byte id), or no datatype at all.
        if let [0x0A, len, rest @ ..] = payload
            && *len < 0x80
            && let Some(tail) = rest.get(*len as usize..)
        {
            match *tail {
                [] => return Ok(0),
                [0x18, dt] if dt < 0x80 => return Ok(u32::from(dt)),
                _ => {}
            }
        }
        let mut r = Reader::new(payload);
        let mut dt = 0;
        while let Some((field, wt)) = r.tag().map_err(|_| "malformed literal")? {
            match (field, wt) {
                (literal::DATATYPE, WireType::Varint) => {
                    dt = r.varint32().map_err(|_| "malformed literal")?;
                }
                (_, wt) => r.skip(wt).map_err(|_| "malformed literal")?,
            }
        }
        Ok(dt)
    }

    /// One term field of a statement (or quoted triple): followed, and written to
    /// `dest` unless the row is copied as it is (`None`). Returns what the next frame
    /// needs to repeat it.
    #[inline]
    fn term(
        &mut self,
        field: u32,
        payload: &[u8],
        payload_at: usize,
        quad: bool,
        depth: usize,
        dest: Option<&mut Vec<u8>>,
    ) -> Result<Prev, &'static str> {
        match term_kind(field, quad) {
            TermField::Iri => {
                let (pid, nid) = self.resolve_iri(payload)?;
                match dest {
                    Some(dest) => self.write_iri(field, pid, nid, dest)?,
                    None => {
                        self.use_iri(pid, nid)?;
                        self.out_prefix = pid;
                        self.out_name = nid;
                    }
                }
                Ok(Prev::Iri { pid, nid })
            }
            TermField::Triple => {
                if depth >= MAX_DEPTH {
                    return Err("quoted triples nested too deep");
                }
                let Some(dest) = dest else {
                    return self
                        .triple(payload, payload_at, depth + 1, None)
                        .map(|()| Prev::Stale);
                };
                let mut inner = self.nested.pop().unwrap_or_default();
                inner.clear();
                let r = self.triple(payload, payload_at, depth + 1, Some(&mut inner));
                if r.is_ok() {
                    put_tag(dest, field, WireType::Len);
                    put_varint(dest, inner.len() as u64);
                    dest.extend_from_slice(&inner);
                }
                self.nested.push(inner);
                r.map(|()| Prev::Stale)
            }
            kind => {
                let datatype = if kind == TermField::Literal {
                    Self::literal_datatype(payload)?
                } else {
                    0
                };
                if datatype != 0 {
                    self.use_entry(DATATYPE, datatype)?;
                }
                if let Some(dest) = dest {
                    put_tag(dest, field, WireType::Len);
                    put_varint(dest, payload.len() as u64);
                    dest.extend_from_slice(payload);
                }
                Ok(Prev::Raw {
                    field,
                    datatype,
                    start: payload_at as u32,
                    end: (payload_at + payload.len()) as u32,
                    copied: false,
                })
            }
        }
    }

    /// A quoted triple's payload (every position set: repeated terms are not allowed
    /// inside, and the decoder rejects them).
    fn triple(
        &mut self,
        payload: &[u8],
        at: usize,
        depth: usize,
        mut dest: Option<&mut Vec<u8>>,
    ) -> Result<(), &'static str> {
        let slots = statement_slots(payload, at, false)?;
        for slot in slots.iter().take(3) {
            if slot.field == 0 {
                return Err("a quoted triple with a term missing");
            }
            let (start, end) = (slot.start as usize, slot.end as usize);
            let p = &payload[start - at..end - at];
            self.term(slot.field, p, start, false, depth, dest.as_deref_mut())?;
        }
        Ok(())
    }

    /// A triple or quad row.
    fn statement(
        &mut self,
        frame_bytes: &[u8],
        row_field: u32,
        m: Reader<'_>,
        raw: &[u8],
    ) -> Result<(), &'static str> {
        let quad = row_field == row::QUAD;
        let at = m.offset();
        let payload = m.unread();
        let slots = statement_slots(payload, at, quad)?;
        let first = self.statements == 0;
        let n = if quad { 4 } else { 3 };
        if !first
            && !self.triples_as_quads
            && self.out_prefix == self.last_prefix
            && self.out_name == self.last_name
        {
            // The output's IRI delta state is the stream's, and a repeated term repeats
            // the previous row of this frame: the row reads the same in the output as
            // it is. Only followed (delta state, entries used, terms for repetition).
            for (pos, slot) in slots.iter().enumerate().take(n) {
                if slot.field != 0 {
                    let (start, end) = (slot.start as usize, slot.end as usize);
                    let p = &frame_bytes[start..end];
                    self.prev[pos] = self.term(slot.field, p, start, quad, 0, None)?;
                }
            }
            self.body.extend_from_slice(raw);
            self.statements += 1;
            return Ok(());
        }
        let mut stmt = self.nested.pop().unwrap_or_default();
        stmt.clear();
        let mut result = Ok(());
        for (pos, slot) in slots.iter().enumerate().take(n) {
            let r = match *slot {
                Slot { field: 0, .. } if first => self.repeat(pos, &mut stmt),
                Slot { field: 0, .. } => Ok(()),
                Slot { field, start, end } => {
                    let (start, end) = (start as usize, end as usize);
                    let p = &frame_bytes[start..end];
                    self.term(field, p, start, quad, 0, Some(&mut stmt))
                        .map(|prev| self.prev[pos] = prev)
                }
            };
            if r.is_err() {
                result = r;
                break;
            }
        }
        let mut row_field = row_field;
        if self.triples_as_quads && !quad {
            row_field = row::QUAD;
            if first {
                // Later quads of the frame repeat it.
                put_tag(&mut stmt, statement::G_DEFAULT, WireType::Len);
                put_varint(&mut stmt, 0);
            }
        }
        if result.is_ok() {
            put_row(&mut self.body, row_field, &stmt);
            self.statements += 1;
        }
        self.nested.push(stmt);
        result
    }

    /// Writes out the previous statement's term at `pos`, which the frame's first
    /// statement repeats.
    fn repeat(&mut self, pos: usize, dest: &mut Vec<u8>) -> Result<(), &'static str> {
        match self.prev[pos] {
            Prev::Iri { pid, nid } => {
                // An IRI written here is part of the output's delta state only; the
                // stream's own state is unchanged by a repeated term.
                self.write_iri(term_fields(pos).0, pid, nid, dest)
            }
            Prev::Raw {
                field,
                datatype,
                start,
                end,
                copied,
            } => {
                if datatype != 0 {
                    self.use_entry(DATATYPE, datatype)?;
                }
                // A repeat in the first statement always comes from an earlier frame.
                let bytes = if copied {
                    self.prev_bytes[pos]
                        .get(start as usize..end as usize)
                        .unwrap_or_default()
                } else {
                    &[][..]
                };
                put_tag(dest, field, WireType::Len);
                put_varint(dest, bytes.len() as u64);
                dest.extend_from_slice(bytes);
                Ok(())
            }
            Prev::Stale => {
                self.unsupported =
                    Some("the first statement repeats a term that cannot be written out");
                Ok(())
            }
            Prev::None => Err("a repeated term in the stream's first statement"),
        }
    }

    /// A namespace declaration: its IRI takes part in the delta state.
    fn namespace(&mut self, mut m: Reader<'_>) -> Result<(), &'static str> {
        let mut name: &[u8] = &[];
        let mut value: Option<&[u8]> = None;
        while let Some((field, wt)) = m.tag().map_err(|_| "malformed namespace")? {
            match (field, wt) {
                (namespace::NAME, WireType::Len) => {
                    name = m.bytes().map_err(|_| "malformed namespace")?;
                }
                (namespace::VALUE, WireType::Len) => {
                    value = Some(m.bytes().map_err(|_| "malformed namespace")?);
                }
                (_, wt) => m.skip(wt).map_err(|_| "malformed namespace")?,
            }
        }
        let Some(value) = value else {
            return Err("a namespace without an IRI");
        };
        let (pid, nid) = self.resolve_iri(value)?;
        if !self.keep_namespaces {
            // Dropped: the output's delta state does not see its IRI.
            return Ok(());
        }
        let mut decl = self.nested.pop().unwrap_or_default();
        decl.clear();
        if !name.is_empty() {
            put_tag(&mut decl, namespace::NAME, WireType::Len);
            put_varint(&mut decl, name.len() as u64);
            decl.extend_from_slice(name);
        }
        let r = self.write_iri(namespace::VALUE, pid, nid, &mut decl);
        if r.is_ok() {
            put_row(&mut self.body, row::NAMESPACE, &decl);
        }
        self.nested.push(decl);
        r
    }
}

/// The kind of term a statement field (1–16, as `statement_slots` gives them) carries.
fn term_kind(field: u32, quad: bool) -> TermField {
    if quad && field > 12 {
        quad_graph_field(field)
    } else {
        spo_field(field).map_or(TermField::Triple, |(_, kind)| kind)
    }
}

/// One term field of a statement: its number (0: the position is not set) and its
/// payload's range in the frame.
#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    field: u32,
    start: u32,
    end: u32,
}

/// The term fields of a statement payload by position (S, P, O, G), with `at` the
/// payload's offset in the frame (which is under 4 GiB). The last field of a position
/// wins, as protobuf reads a `oneof`. Unknown fields are dropped.
type Slots = [Slot; 4];

#[inline]
fn statement_slots(payload: &[u8], at: usize, quad: bool) -> Result<Slots, &'static str> {
    let mut slots = [Slot::default(); 4];
    let last = if quad { 15 } else { 12 };
    // Usual shape: one-byte keys of term fields 1–15 with lengths under 128.
    let mut i = 0;
    let n = payload.len();
    while i + 1 < n {
        let (key, len) = (payload[i], payload[i + 1]);
        let field = u32::from(key >> 3);
        if key & 7 != 2 || key >= 0x80 || len >= 0x80 || field == 0 || field > last {
            break;
        }
        let start = i + 2;
        let end = start + len as usize;
        if end > n {
            return Err("malformed statement");
        }
        let pos = if field > 12 {
            3
        } else {
            (field as usize - 1) / 4
        };
        slots[pos] = Slot {
            field,
            start: (at + start) as u32,
            end: (at + end) as u32,
        };
        i = end;
    }
    if i == n {
        return Ok(slots);
    }
    let mut r = Reader::with_base(payload, at);
    let last = if quad { 16 } else { 12 };
    while let Some((field, wt)) = r.tag().map_err(|_| "malformed statement")? {
        if (1..=last).contains(&field) && wt == WireType::Len {
            let b = r.bytes().map_err(|_| "malformed statement")?;
            let start = r.offset() - b.len();
            let pos = if field > 12 {
                3
            } else {
                (field as usize - 1) / 4
            };
            slots[pos] = Slot {
                field,
                start: start as u32,
                end: (start + b.len()) as u32,
            };
        } else {
            r.skip(wt).map_err(|_| "malformed statement")?;
        }
    }
    Ok(slots)
}
