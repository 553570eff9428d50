//! `jelly rdf inspect`: options, frames, rows by kind, statements, distinct terms and
//! lookup table usage of a stream, in bounded memory.

use std::hash::{BuildHasher, Hasher};
use std::io::Write;

use hashbrown::HashSet;
use jelly::{Decoder, DecoderStats, Delimiting, Event, FrameReader, StreamOptions, TermRef};
use jelly_proto::fields::{entry, frame as ff, row};
use jelly_proto::wire::{Reader, WireType};

use crate::cli::InspectArgs;
use crate::error::{CliError, CliResult, decode_error, not_jelly_hint};
use crate::io::Progress;
use crate::report::{Value, around_top_list, map};
use crate::spool::{SPOOL_NAME, Spool, write_report};

/// Distinct terms kept exactly up to this many per kind.
pub const DISTINCT_CAP: usize = 4_000_000;

/// Lookup entry ids seen in a frame, with the 0 = previous + 1 rule.
#[derive(Debug, Default, Clone, Copy)]
pub struct TableUse {
    last: u64,
    /// Highest id defined.
    pub max_id: u64,
    /// Entry rows.
    pub entries: u64,
}

impl TableUse {
    fn entry(&mut self, id: u64) {
        let id = if id == 0 { self.last + 1 } else { id };
        self.last = id;
        self.max_id = self.max_id.max(id);
        self.entries += 1;
    }
}

/// Scans a frame's rows for lookup entries (name, prefix, datatype).
fn scan_tables(frame: &[u8], t: &mut [TableUse; 3]) {
    let mut r = Reader::new(frame);
    while let Ok(Some((field, wt))) = r.tag() {
        if field != ff::ROWS || wt != WireType::Len {
            if r.skip(wt).is_err() {
                return;
            }
            continue;
        }
        let Ok(mut rowr) = r.message() else { return };
        while let Ok(Some((rf, wt))) = rowr.tag() {
            let slot = match rf {
                row::NAME => Some(0),
                row::PREFIX => Some(1),
                row::DATATYPE => Some(2),
                _ => None,
            };
            match (slot, wt) {
                (Some(i), WireType::Len) => {
                    let Ok(mut e) = rowr.message() else { return };
                    let mut id = 0;
                    while let Ok(Some((ef, wt))) = e.tag() {
                        if ef == entry::ID && wt == WireType::Varint {
                            id = e.varint().unwrap_or(0);
                        } else if e.skip(wt).is_err() {
                            break;
                        }
                    }
                    t[i].entry(id);
                }
                _ => {
                    if rowr.skip(wt).is_err() {
                        return;
                    }
                }
            }
        }
    }
}

/// Counts distinct terms by 64-bit hash, exactly up to [`DISTINCT_CAP`] per kind.
#[derive(Default)]
pub struct Distinct {
    sets: [HashSet<u64>; 4],
    /// True once a set hit the cap (counts are then lower bounds).
    pub approximate: bool,
    hasher: foldhash::quality::FixedState,
}

const KIND_IRI: usize = 0;
const KIND_BNODE: usize = 1;
const KIND_LITERAL: usize = 2;
const KIND_TRIPLE: usize = 3;

impl Distinct {
    fn hash_term(&self, t: TermRef<'_>, h: &mut impl Hasher) {
        match t {
            TermRef::Iri(i) => {
                h.write_u8(0);
                h.write(i.as_bytes());
                h.write_u8(0xff);
            }
            TermRef::BlankNode(b) => {
                h.write_u8(1);
                h.write(b.as_bytes());
                h.write_u8(0xff);
            }
            TermRef::Literal(l) => {
                h.write_u8(2);
                h.write(l.lex.as_bytes());
                h.write_u8(0xff);
                match l.kind {
                    jelly::LiteralKind::Simple => h.write_u8(0),
                    jelly::LiteralKind::Lang(x) => {
                        h.write_u8(1);
                        h.write(x.as_bytes());
                    }
                    jelly::LiteralKind::Typed(x) => {
                        h.write_u8(2);
                        h.write(x.as_bytes());
                    }
                }
                h.write_u8(0xff);
            }
            TermRef::Triple(tr) => {
                h.write_u8(3);
                for i in 0..3 {
                    self.hash_term(tr.term(i), h);
                }
            }
            TermRef::DefaultGraph => h.write_u8(4),
        }
    }

    /// Records a term (and the terms inside a quoted triple).
    pub fn add(&mut self, t: TermRef<'_>) {
        let kind = match t {
            TermRef::Iri(_) => KIND_IRI,
            TermRef::BlankNode(_) => KIND_BNODE,
            TermRef::Literal(_) => KIND_LITERAL,
            TermRef::Triple(tr) => {
                for i in 0..3 {
                    self.add(tr.term(i));
                }
                KIND_TRIPLE
            }
            TermRef::DefaultGraph => return,
        };
        let mut h = self.hasher.build_hasher();
        self.hash_term(t, &mut h);
        let v = h.finish();
        let set = &mut self.sets[kind];
        if set.len() >= DISTINCT_CAP {
            if !set.contains(&v) {
                self.approximate = true;
            }
        } else {
            set.insert(v);
        }
    }

    /// Counts: IRIs, blank nodes, literals, quoted triples.
    pub fn counts(&self) -> [u64; 4] {
        [0, 1, 2, 3].map(|i| self.sets[i].len() as u64)
    }
}

fn rows_value(s: &DecoderStats) -> Value {
    map(vec![
        ("total", s.rows().into()),
        ("options", s.options_rows.into()),
        ("triple", s.triple_rows.into()),
        ("quad", s.quad_rows.into()),
        ("graph_start", s.graph_start_rows.into()),
        ("graph_end", s.graph_end_rows.into()),
        ("namespace", s.namespace_rows.into()),
        ("name", s.name_rows.into()),
        ("prefix", s.prefix_rows.into()),
        ("datatype", s.datatype_rows.into()),
    ])
}

fn diff(a: &DecoderStats, b: &DecoderStats) -> DecoderStats {
    DecoderStats {
        frames: a.frames - b.frames,
        options_rows: a.options_rows - b.options_rows,
        triple_rows: a.triple_rows - b.triple_rows,
        quad_rows: a.quad_rows - b.quad_rows,
        graph_start_rows: a.graph_start_rows - b.graph_start_rows,
        graph_end_rows: a.graph_end_rows - b.graph_end_rows,
        namespace_rows: a.namespace_rows - b.namespace_rows,
        name_rows: a.name_rows - b.name_rows,
        prefix_rows: a.prefix_rows - b.prefix_rows,
        datatype_rows: a.datatype_rows - b.datatype_rows,
    }
}

/// The options as a report value.
pub fn options_value(o: &StreamOptions) -> Value {
    map(vec![
        ("stream_name", o.stream_name.as_str().into()),
        ("physical_type", o.physical_type.name().into()),
        ("logical_type", o.logical_type.name().into()),
        ("generalized_statements", o.generalized_statements.into()),
        ("rdf_star", o.rdf_star.into()),
        ("max_name_table_size", o.max_name_table_size.into()),
        ("max_prefix_table_size", o.max_prefix_table_size.into()),
        ("max_datatype_table_size", o.max_datatype_table_size.into()),
        ("version", o.version.into()),
    ])
}

/// What [`inspect`] found.
pub struct Inspected {
    /// The report; with `--per-frame`, its last value `frames_detail` is an empty list
    /// standing for the entries written to the detail writer.
    pub report: Value,
    /// Per-frame entries written.
    pub frames_detail: u64,
    /// The error that stopped the reading partway (`--per-frame` only: the report then
    /// covers the frames before it).
    pub failure: Option<CliError>,
}

/// Builds the report of a stream. With `--per-frame`, each frame's entry is written to
/// `detail` as the frame is read (rendered for a top-level list, see
/// [`crate::report::top_list_item`]), so memory does not grow with the frame count.
pub fn inspect(
    args: &InspectArgs,
    quiet: bool,
    mut detail: Option<&mut dyn Write>,
) -> CliResult<Inspected> {
    let in_path = args.input.as_deref().unwrap_or("-");
    let input = crate::jelly_text::open_jelly_input(in_path, quiet)?;
    let name = input.name.clone();
    let mut progress = Progress::new(quiet, input.bytes_read.clone());
    let cfg = crate::limits::decoder_options();
    // The library's framing, as the other verbs read it: the same frames, limits,
    // autodetection (from three bytes, however the input arrives) and errors.
    let mut frames = FrameReader::new(input.reader, Delimiting::Auto, cfg.max_frame_bytes);
    let mut dec = Decoder::new(cfg);
    let mut tables = [TableUse::default(); 3];
    let mut distinct = Distinct::default();
    let mut statements = 0u64;
    let mut index = 0u64;
    let mut metadata_frames = 0u64;
    let result = (|| -> CliResult {
        let located =
            |e: &jelly::DecodeError| not_jelly_hint(decode_error(&name, e), in_path, e.frame);
        loop {
            let start = frames.bytes_read();
            let Some(raw) = frames.next_frame().map_err(|e| located(&e))? else {
                if index == 0 && frames.bytes_read() == 0 {
                    return Err(CliError::invalid(format!("{name}: input is empty")));
                }
                if dec.options().is_none() {
                    return Err(crate::error::no_options_row(&name, index));
                }
                break;
            };
            // `offset` is where the frame's message starts, after its length prefix:
            // the byte the other verbs' errors name.
            let (buf, message_at) = (raw.bytes, raw.offset);
            let frame_bytes = message_at + buf.len() as u64 - start;
            scan_tables(buf, &mut tables);
            let before = dec.stats().clone();
            let mut st_in_frame = 0u64;
            let mut f = dec.frame_at(buf, message_at);
            while let Some(ev) = f.next_event().map_err(|e| located(&e))? {
                if let Event::Statement(s) = ev {
                    st_in_frame += 1;
                    progress.statement();
                    distinct.add(s.subject);
                    distinct.add(s.predicate);
                    distinct.add(s.object);
                    if let Some(g) = s.graph {
                        distinct.add(g);
                    }
                }
            }
            // Keys are proto `string`s: one that is not UTF-8 makes the frame invalid,
            // as it does for any protobuf parser. Read after the rows, so that damage
            // earlier in the frame is reported first, as the other verbs report it.
            if !f.metadata().map_err(|e| located(&e))?.is_empty() {
                metadata_frames += 1;
            }
            statements += st_in_frame;
            if let Some(w) = detail.as_deref_mut() {
                let d = diff(dec.stats(), &before);
                let entry = map(vec![
                    ("index", index.into()),
                    ("bytes", frame_bytes.into()),
                    ("statements", st_in_frame.into()),
                    ("rows", rows_value(&d)),
                ]);
                w.write_all(crate::report::top_list_item(&entry, index == 0, args.json).as_bytes())
                    .map_err(|e| CliError::io(SPOOL_NAME, &e))?;
            }
            index += 1;
        }
        Ok(())
    })();
    progress.finish();
    // With --per-frame, the frames read before an error are still reported (their
    // entries are already written); otherwise an error leaves no report.
    let failure = match result {
        Ok(()) => None,
        Err(e) if detail.is_some() => Some(e),
        Err(e) => return Err(e),
    };
    let total_bytes = frames.bytes_read();
    let stats = dec.stats().clone();
    let counts = distinct.counts();
    let opts = dec.options().cloned();
    let table = |i: usize, size: u32| {
        map(vec![
            ("size", size.into()),
            ("max_id_used", tables[i].max_id.into()),
            ("entries", tables[i].entries.into()),
        ])
    };
    let mut top = vec![
        ("file", Value::from(name.as_str())),
        (
            "delimited",
            Value::Bool(frames.delimiting() != Delimiting::Single),
        ),
        ("options", opts.as_ref().map_or(Value::Null, options_value)),
        ("frames", index.into()),
        ("frames_with_metadata", metadata_frames.into()),
        ("bytes", total_bytes.into()),
        ("statements", statements.into()),
        ("rows", rows_value(&stats)),
        (
            "distinct_terms",
            map(vec![
                ("iris", counts[KIND_IRI].into()),
                ("blank_nodes", counts[KIND_BNODE].into()),
                ("literals", counts[KIND_LITERAL].into()),
                ("quoted_triples", counts[KIND_TRIPLE].into()),
                ("approximate", distinct.approximate.into()),
            ]),
        ),
        (
            "lookup_tables",
            map(vec![
                (
                    "name",
                    table(0, opts.as_ref().map_or(0, |o| o.max_name_table_size)),
                ),
                (
                    "prefix",
                    table(1, opts.as_ref().map_or(0, |o| o.max_prefix_table_size)),
                ),
                (
                    "datatype",
                    table(2, opts.as_ref().map_or(0, |o| o.max_datatype_table_size)),
                ),
            ]),
        ),
        (
            "bytes_per_statement",
            if statements == 0 {
                Value::Null
            } else {
                Value::Float(total_bytes as f64 / statements as f64)
            },
        ),
    ];
    if detail.is_some() {
        top.push(("frames_detail", Value::List(Vec::new())));
    }
    Ok(Inspected {
        report: map(top),
        // Entries are written for frames 0..index, all complete.
        frames_detail: if detail.is_some() { index } else { 0 },
        failure,
    })
}

/// Runs the command.
pub fn run(args: &InspectArgs, quiet: bool) -> CliResult {
    let mut spool = if args.per_frame {
        Some(Spool::create()?)
    } else {
        None
    };
    let found = inspect(args, quiet, spool.as_mut().map(Spool::writer))?;
    let (head, tail) = around_top_list(&found.report, found.frames_detail, args.json);
    write_report(args.to.as_deref(), &head, spool.as_mut(), &tail)?;
    match found.failure {
        Some(e) => Err(e),
        None => Ok(()),
    }
}
