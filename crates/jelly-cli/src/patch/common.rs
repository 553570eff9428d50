//! Pieces shared by the `jelly patch` verbs: telling text from binary, reading either
//! kind as one sequence of rows with their positions, the Jelly-Patch writer, and the
//! in-memory dataset of `diff` and `apply`.

use std::io::{BufRead, Write};

use foldhash::fast::RandomState;
use hashbrown::HashMap;
use jelly::patch::{
    PatchDecoder, PatchEncoder, PatchEvent, PatchOptions, PatchStatementType, PatchStats,
    PatchStreamType,
};
use jelly::rdf_patch::{PatchRowRef, RdfPatchError, RdfPatchParser, RdfPatchWriteError};
use jelly::{
    DecodeError, DecoderOptions, Delimiting, EncodeError, FrameReader, OwnedLiteralKind, Statement,
    Term, Triple,
};
use jelly_proto::fields::patch::row;
use jelly_proto::wire::{Reader, WireType};

use super::args::{PatchFormat, PatchOptionArgs, StatementTypeArg, StreamTypeArg};
use crate::cli::Preset;
use crate::common::{FrameRange, input_io_err};
use crate::error::{CliError, CliResult, decode_error};
use crate::io::{Input, Progress, strip_compression};

/// Which syntax the file name says, if any.
pub fn format_from_path(path: &str) -> Option<PatchFormat> {
    let (base, _) = strip_compression(path);
    let ext = base.rsplit_once('.')?.1.to_ascii_lowercase();
    match ext.as_str() {
        "jellyp" => Some(PatchFormat::Jellyp),
        "rdfp" | "rdfpatch" | "rdf-patch" | "patch" => Some(PatchFormat::Rdfp),
        _ => None,
    }
}

/// True if the (decompressed) first bytes look like RDF Patch text: no control bytes
/// besides tab and line breaks. A Jelly-Patch stream starts with its options row, whose
/// length and field tags are control bytes.
pub fn looks_like_text(head: &[u8]) -> bool {
    head.iter()
        .take(64)
        .all(|&b| b >= 0x20 || matches!(b, b'\t' | b'\n' | b'\r'))
}

/// The syntax of `input`: `forced`, else from the extension, else from its first bytes.
pub fn detect(
    input: &mut Input,
    path: &str,
    forced: Option<PatchFormat>,
) -> CliResult<PatchFormat> {
    if let Some(f) = forced {
        return Ok(f);
    }
    if let Some(f) = format_from_path(path) {
        return Ok(f);
    }
    let head = input
        .reader
        .fill_buf()
        .map_err(|e| input_io_err(&input.name, e))?;
    Ok(if looks_like_text(head) {
        PatchFormat::Rdfp
    } else {
        PatchFormat::Jellyp
    })
}

/// True when `input` holds no bytes at all (nothing to call text or binary).
pub fn is_empty_input(input: &mut Input) -> CliResult<bool> {
    input
        .reader
        .fill_buf()
        .map(<[u8]>::is_empty)
        .map_err(|e| input_io_err(&input.name, e))
}

/// Where a row is.
#[derive(Debug, Clone, Copy)]
pub enum Loc {
    /// 1-based line of a text patch.
    Line(usize),
    /// Frame and row (0-based, counting every row of the frame) of a binary patch.
    Row { frame: u64, row: Option<u64> },
}

impl Loc {
    /// `FILE:LINE` or `FILE:frame N:row M`.
    pub fn at(&self, name: &str) -> String {
        match *self {
            Loc::Line(l) => format!("{name}:{l}"),
            Loc::Row {
                frame,
                row: Some(r),
            } => format!("{name}:frame {frame}:row {r}"),
            Loc::Row { frame, row: None } => format!("{name}:frame {frame}"),
        }
    }
}

/// One item of a patch, text or binary.
pub enum Op<'a> {
    /// A row with an RDF Patch text equivalent.
    Row {
        row: PatchRowRef<'a>,
        /// The IRI of a Jelly-Patch `PD` row that has one: RDF Patch text has no place
        /// for it, but a Jelly-Patch output keeps it.
        pd_iri: Option<&'a str>,
    },
    /// The end of a patch in a PUNCTUATED stream.
    Punctuation,
    /// The end of a binary frame, with the counters so far. `patch_end`: the stream is
    /// a FRAME stream, so the frame is a whole patch.
    FrameEnd {
        index: u64,
        /// Length of the frame message.
        bytes: u64,
        stats: &'a PatchStats,
        patch_end: bool,
    },
    /// A frame outside the frames taken (`--take-frames`), decoded for its tables and
    /// counters only: what came before the first frame taken.
    FrameSkipped {
        index: u64,
        stats: &'a PatchStats,
        /// As in `FrameEnd`: the frame was a whole patch.
        patch_end: bool,
    },
}

/// `FILE:LINE:COLUMN: message` for a text parse error.
pub fn text_err(name: &str, e: RdfPatchError) -> CliError {
    match e {
        RdfPatchError::Syntax {
            line,
            column,
            message,
        } => CliError::invalid(format!("{name}:{line}:{column}: {message}")),
        RdfPatchError::LineTooLong { line, limit } => CliError::invalid(format!(
            "{name}:{line}: line longer than the limit of {limit} bytes"
        )),
        RdfPatchError::Io { line, source } => {
            let mut e = input_io_err(name, source);
            // Damaged input (a cut compressed file): where it was found, named once.
            if e.code == crate::error::EXIT_INVALID {
                let detail = e
                    .message
                    .strip_prefix(&format!("{name}: "))
                    .unwrap_or(&e.message)
                    .to_string();
                e.message = format!("{name}:{line}: {detail}");
            }
            e
        }
    }
}

/// Reads RDF Patch text, calling `f` for every row.
pub fn read_text(
    reader: impl BufRead,
    name: &str,
    generalized: bool,
    progress: &mut Progress,
    mut f: impl FnMut(Loc, Op<'_>) -> CliResult,
) -> CliResult {
    let mut parser = RdfPatchParser::new(reader).generalized(generalized);
    while let Some(r) = parser.next() {
        let row = r.map_err(|e| text_err(name, e))?;
        progress.statement();
        f(
            Loc::Line(parser.line()),
            Op::Row {
                row: row.as_ref(),
                pd_iri: None,
            },
        )?;
    }
    Ok(())
}

/// What [`read_binary`] saw.
pub struct BinarySummary {
    pub options: Option<PatchOptions>,
    pub stats: PatchStats,
    pub delimiting: Delimiting,
    /// Bytes of the (decompressed) stream consumed.
    pub bytes: u64,
    /// Frames read (all of them unless the range stopped early).
    pub frames: u64,
}

/// For each row of a frame that yields an event, its row index. Wire errors end the
/// scan early: the decoder reports them.
fn event_rows(frame: &[u8], options_seen: &mut bool) -> Vec<u64> {
    let mut out = Vec::new();
    let mut r = Reader::new(frame);
    let mut index = 0u64;
    while let Ok(Some((field, wt))) = r.tag() {
        if field != 1 {
            if r.skip(wt).is_err() {
                break;
            }
            continue;
        }
        let this = index;
        index += 1;
        if wt != WireType::Len {
            break;
        }
        let Ok(mut m) = r.message() else {
            break;
        };
        let mut kind = None;
        while let Ok(Some((f, wt))) = m.tag() {
            if kind.is_none() && ((1..=8).contains(&f) || (11..=15).contains(&f)) {
                kind = Some(f);
            }
            if m.skip(wt).is_err() {
                break;
            }
        }
        match kind {
            Some(row::OPTIONS) => {
                if !*options_seen {
                    *options_seen = true;
                    out.push(this);
                }
            }
            Some(row::NAME | row::PREFIX | row::DATATYPE) => {}
            _ => out.push(this),
        }
    }
    out
}

/// Maps a binary event to its text row (`None` for options and punctuation).
pub fn event_row<'a>(ev: &PatchEvent<'a>) -> Option<PatchRowRef<'a>> {
    Some(match *ev {
        PatchEvent::Options(_) | PatchEvent::Punctuation => return None,
        PatchEvent::Header { key, value } => PatchRowRef::Header { key, value },
        PatchEvent::TransactionStart => PatchRowRef::TxStart,
        PatchEvent::TransactionCommit => PatchRowRef::TxCommit,
        PatchEvent::TransactionAbort => PatchRowRef::TxAbort,
        PatchEvent::AddNamespace { name, iri, graph } => PatchRowRef::PrefixAdd {
            prefix: name,
            iri,
            graph,
        },
        PatchEvent::DeleteNamespace { name, graph, .. } => PatchRowRef::PrefixDelete {
            prefix: name,
            graph,
        },
        PatchEvent::Add(s) => PatchRowRef::Add(s),
        PatchEvent::Delete(s) => PatchRowRef::Delete(s),
    })
}

/// Reads a Jelly-Patch stream, calling `f` for every row of the frames in `range` and
/// at the end of every frame read. Errors are `FILE:frame N:row M (byte B): message`.
/// A PUNCTUATED stream whose last patch has no punctuation is an error (a stream cut
/// short), unless `allow_unended` (for `inspect`, which reports it).
pub fn read_binary(
    mut reader: impl BufRead,
    name: &str,
    range: FrameRange,
    progress: &mut Progress,
    allow_unended: bool,
    mut f: impl FnMut(Loc, Op<'_>) -> CliResult,
) -> CliResult<BinarySummary> {
    let cfg = DecoderOptions {
        check_features: true,
        ..crate::limits::decoder_options()
    };
    // A hint for text given as binary (by extension or --in-format). A read error here
    // (a damaged compressed file) is the answer, not an empty input.
    let text_like = match reader.fill_buf() {
        Ok(h) => !h.is_empty() && looks_like_text(h),
        Err(e) => return Err(input_io_err(name, e)),
    };
    let mut frames = FrameReader::new(reader, Delimiting::Auto, cfg.max_frame_bytes);
    let mut dec = PatchDecoder::new(cfg);
    let mut options_seen = false;
    let hint = |e: &DecodeError| {
        let mut err = decode_error(name, e);
        if e.frame == 0 && text_like {
            err.message
                .push_str(" (is this a Jelly-Patch file? RDF Patch text needs --in-format rdfp)");
        }
        if e.frame == 0 && crate::format::is_jelly_path(name) {
            err.message
                .push_str(" (a .jelly file is Jelly-RDF: use `jelly rdf …`)");
        }
        err
    };
    loop {
        let (count, offset) = (frames.frames_read(), frames.bytes_read());
        let raw = frames.next_frame().map_err(|e| hint(&e))?;
        let Some(raw) = raw else {
            if count == 0 {
                return Err(CliError::invalid(format!(
                    "{name}: input is empty (no frames)"
                )));
            }
            let end = match dec.finish() {
                Err(jelly::DecodeErrorKind::UnendedPatch(_)) if allow_unended => Ok(()),
                other => other,
            };
            end.map_err(|kind| {
                decode_error(
                    name,
                    &DecodeError {
                        frame: count - 1,
                        row: None,
                        offset: Some(offset),
                        kind,
                    },
                )
            })?;
            break;
        };
        let index = raw.index;
        if range.done(index) {
            break;
        }
        let take = range.contains(index);
        let frame_bytes = raw.bytes.len() as u64;
        let rows = event_rows(raw.bytes, &mut options_seen);
        let mut cursor = dec.frame_at(raw.bytes, raw.offset);
        let mut k = 0usize;
        while let Some(ev) = cursor.next_event().map_err(|e| hint(&e))? {
            let loc = Loc::Row {
                frame: index,
                row: rows.get(k).copied(),
            };
            k += 1;
            if !take {
                continue;
            }
            if let PatchEvent::Punctuation = ev {
                f(loc, Op::Punctuation)?;
            } else if let Some(r) = event_row(&ev) {
                progress.statement();
                let pd_iri = match ev {
                    PatchEvent::DeleteNamespace { iri, .. } => iri,
                    _ => None,
                };
                f(loc, Op::Row { row: r, pd_iri })?;
            }
        }
        if !take {
            f(
                Loc::Row {
                    frame: index,
                    row: None,
                },
                Op::FrameSkipped {
                    index,
                    stats: dec.stats(),
                    patch_end: dec.options().map(|o| o.stream_type) == Some(PatchStreamType::Frame),
                },
            )?;
        }
        if take {
            f(
                Loc::Row {
                    frame: index,
                    row: None,
                },
                Op::FrameEnd {
                    index,
                    bytes: frame_bytes,
                    stats: dec.stats(),
                    patch_end: dec.options().map(|o| o.stream_type) == Some(PatchStreamType::Frame),
                },
            )?;
        }
    }
    if dec.options().is_none() {
        return Err(CliError::invalid(format!(
            "{name}: the stream has no options row"
        )));
    }
    Ok(BinarySummary {
        options: dec.options().cloned(),
        stats: dec.stats().clone(),
        delimiting: frames.delimiting(),
        bytes: frames.bytes_read(),
        frames: frames.frames_read(),
    })
}

/// Builds the stream options from the flags.
pub fn options_from_flags(a: &PatchOptionArgs, default_quads: bool) -> CliResult<PatchOptions> {
    let st = match a.statement_type {
        Some(StatementTypeArg::Triples) => PatchStatementType::Triples,
        Some(StatementTypeArg::Quads) => PatchStatementType::Quads,
        None if default_quads => PatchStatementType::Quads,
        None => PatchStatementType::Triples,
    };
    let sty = match a.stream_type {
        StreamTypeArg::Frame => PatchStreamType::Frame,
        StreamTypeArg::Flat => PatchStreamType::Flat,
        StreamTypeArg::Punctuated => PatchStreamType::Punctuated,
    };
    let mut o = match a.preset {
        Some(Preset::Small) => PatchOptions::small(st, sty),
        Some(Preset::Big) | None => PatchOptions::big(st, sty),
    };
    if let Some(n) = a.max_name_table_size {
        o.max_name_table_size = n;
    }
    if let Some(n) = a.max_prefix_table_size {
        o.max_prefix_table_size = n;
    }
    if let Some(n) = a.max_datatype_table_size {
        o.max_datatype_table_size = n;
    }
    if let Some(b) = a.rdf_star {
        o.rdf_star = b;
    }
    if let Some(b) = a.generalized_statements {
        o.generalized_statements = b;
    }
    if o.max_name_table_size < 8 {
        return Err(CliError::usage(format!(
            "--opt.max-name-table-size must be at least 8 (got {})",
            o.max_name_table_size
        )));
    }
    Ok(o)
}

/// When a [`PatchOut`] ends the frames of FLAT and PUNCTUATED streams: after `rows`
/// rows, or once the rows take `bytes` bytes, whichever comes first.
#[derive(Debug, Clone, Copy)]
pub struct FrameSize {
    /// Rows per frame (`--rows-per-frame`).
    pub rows: usize,
    /// Bytes a frame's rows may reach before it ends (`--bytes-per-frame`).
    pub bytes: usize,
}

impl FrameSize {
    /// The sizes `--rows-per-frame` and `--bytes-per-frame` ask for, or the defaults.
    pub fn from_flags(rows: Option<usize>, bytes: Option<usize>) -> FrameSize {
        FrameSize {
            rows: rows.unwrap_or(256).max(1),
            bytes: bytes.unwrap_or(crate::cli::DEFAULT_BYTES_PER_FRAME).max(1),
        }
    }
}

/// Writes a Jelly-Patch stream: frames of at most [`FrameSize`] (FLAT, PUNCTUATED; a
/// row past the byte size stays in its frame) or one frame per patch (FRAME), delimited
/// or as exactly one frame.
pub struct PatchOut<W: Write> {
    out: W,
    out_name: String,
    enc: PatchEncoder,
    frame_size: FrameSize,
    delimited: bool,
    frames: u64,
    /// Bytes of the largest frame written, without its length prefix.
    largest_frame: u64,
    ops_in_patch: u64,
    buf: Vec<u8>,
}

impl<W: Write> PatchOut<W> {
    /// A writer of a stream with `options`.
    pub fn new(
        out: W,
        out_name: &str,
        options: PatchOptions,
        frame_size: FrameSize,
        delimited: bool,
    ) -> CliResult<Self> {
        let enc = PatchEncoder::new(options)
            .map_err(|e| CliError::usage(format!("invalid stream options: {e}")))?;
        Ok(PatchOut {
            out,
            out_name: out_name.to_string(),
            enc,
            frame_size,
            delimited,
            frames: 0,
            largest_frame: 0,
            ops_in_patch: 0,
            buf: Vec::new(),
        })
    }

    /// Whether a FLAT or PUNCTUATED stream's frame is full. Transactions and patches may
    /// span frames in these stream types, so any row may end one; a FRAME stream's frame
    /// is one patch and never ends here; non-delimited output is one frame.
    fn frame_full(&self) -> bool {
        self.enc.options().stream_type != PatchStreamType::Frame
            && self.delimited
            && (self.enc.frame_rows() >= self.frame_size.rows
                || self.enc.frame_bytes() >= self.frame_size.bytes)
    }

    /// The options written.
    pub fn options(&self) -> &PatchOptions {
        self.enc.options()
    }

    /// True while a transaction is open.
    pub fn in_transaction(&self) -> bool {
        self.enc.in_transaction()
    }

    fn enc_err(e: EncodeError, at: &dyn Fn() -> String) -> CliError {
        let hint = match &e {
            EncodeError::RdfStarNotEnabled(_) => " (use --opt.rdf-star)",
            EncodeError::GeneralizedNotEnabled { .. } => " (use --opt.generalized-statements)",
            EncodeError::DatatypeTableDisabled(_) => {
                " (use --opt.max-datatype-table-size 1 or more)"
            }
            _ => "",
        };
        CliError::invalid(format!("{}: {e}{hint}", at()))
    }

    /// Writes one row (`pd_iri`: the IRI of a `PD` row, if it has one); a `Z` segment
    /// row ends the patch.
    pub fn row(
        &mut self,
        r: PatchRowRef<'_>,
        pd_iri: Option<&str>,
        at: &dyn Fn() -> String,
    ) -> CliResult {
        let e = &mut self.enc;
        let res = match r {
            PatchRowRef::Header { key, value } => e.header(key, value),
            PatchRowRef::TxStart => e.transaction_start(),
            PatchRowRef::TxCommit => e.transaction_commit(),
            PatchRowRef::TxAbort => e.transaction_abort(),
            PatchRowRef::Segment => return self.end_patch(at),
            PatchRowRef::PrefixAdd { prefix, iri, graph } => e.add_namespace(prefix, iri, graph),
            PatchRowRef::PrefixDelete { prefix, graph } => {
                e.delete_namespace(prefix, pd_iri, graph)
            }
            PatchRowRef::Add(s) => e.add(s),
            PatchRowRef::Delete(s) => e.delete(s),
        };
        res.map_err(|e| Self::enc_err(e, at))?;
        self.ops_in_patch += 1;
        if self.frame_full() {
            self.flush(at)?;
        }
        Ok(())
    }

    fn flush(&mut self, at: &dyn Fn() -> String) -> CliResult {
        if self.frames > 0 && !self.delimited {
            return Err(CliError::usage(format!(
                "{}: --delimited=false writes exactly one frame, and this FRAME stream has more than one patch",
                at()
            )));
        }
        self.buf.clear();
        let len = self.enc.finish_frame_into(&mut self.buf, self.delimited);
        self.largest_frame = self.largest_frame.max(len as u64);
        self.out
            .write_all(&self.buf)
            .map_err(|e| CliError::io(&self.out_name, &e))?;
        self.frames += 1;
        Ok(())
    }

    /// Ends the current patch (nothing if it is empty; nothing in FLAT streams).
    pub fn end_patch(&mut self, at: &dyn Fn() -> String) -> CliResult {
        if self.ops_in_patch == 0 {
            return Ok(());
        }
        match self.enc.options().stream_type {
            PatchStreamType::Frame => {
                if self.enc.in_transaction() {
                    return Err(CliError::invalid(format!(
                        "{}: a patch ends inside a transaction (a FRAME stream cannot split it)",
                        at()
                    )));
                }
                self.ops_in_patch = 0;
                self.flush(at)
            }
            PatchStreamType::Punctuated => {
                self.enc.punctuation().map_err(|e| Self::enc_err(e, at))?;
                self.ops_in_patch = 0;
                if self.frame_full() {
                    self.flush(at)?;
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Ends the last patch, writes the last frame and returns the output. Unless
    /// `quiet`, a note on stderr tells when a frame came out larger than readers accept
    /// by default (as rdf to-jelly tells it), since the reader's error comes much later.
    pub fn finish(mut self, at: &dyn Fn() -> String, quiet: bool) -> CliResult<W> {
        if self.enc.in_transaction() {
            return Err(CliError::invalid(format!(
                "{}: the input ends inside a transaction",
                at()
            )));
        }
        self.end_patch(at)?;
        if self.enc.frame_rows() > 0 || self.frames == 0 {
            self.flush(at)?;
        }
        if !quiet && let Some(note) = crate::limits::frame_note(self.largest_frame) {
            eprintln!("{note}");
        }
        self.out
            .flush()
            .map_err(|e| CliError::io(&self.out_name, &e))?;
        Ok(self.out)
    }
}

/// Maps a text writer error.
pub fn text_write_err(e: RdfPatchWriteError, at: &dyn Fn() -> String, out_name: &str) -> CliError {
    match e {
        RdfPatchWriteError::Io(io) => CliError::io(out_name, &io),
        other => CliError::invalid(format!("{}: {other}", at())),
    }
}

fn normalize_term(t: Term) -> Term {
    match t {
        Term::Literal(mut l) => {
            if matches!(&l.kind, OwnedLiteralKind::Typed(dt) if dt == jelly::term::XSD_STRING) {
                l.kind = OwnedLiteralKind::Simple;
            }
            Term::Literal(l)
        }
        Term::Triple(tr) => {
            let Triple {
                subject,
                predicate,
                object,
            } = *tr;
            Term::Triple(Box::new(Triple {
                subject: normalize_term(subject),
                predicate: normalize_term(predicate),
                object: normalize_term(object),
            }))
        }
        other => other,
    }
}

/// The form statements are compared in: triples in the default graph have no graph,
/// `xsd:string` literals are simple literals.
pub fn normalize(st: Statement) -> Statement {
    Statement {
        subject: normalize_term(st.subject),
        predicate: st.predicate,
        object: normalize_term(st.object),
        graph: match st.graph {
            None | Some(Term::DefaultGraph) => None,
            Some(g) => Some(g),
        },
    }
}

/// A set of statements that remembers the order they were first added in.
#[derive(Default)]
pub struct Dataset {
    map: HashMap<Statement, u64, RandomState>,
    next: u64,
}

impl Dataset {
    /// Adds a (normalized) statement; false if it was there.
    pub fn insert(&mut self, st: Statement) -> bool {
        let seq = self.next;
        match self.map.entry(st) {
            hashbrown::hash_map::Entry::Occupied(_) => false,
            hashbrown::hash_map::Entry::Vacant(v) => {
                v.insert(seq);
                self.next += 1;
                true
            }
        }
    }

    /// Makes room for `n` more statements, or tells that the memory is not there (so
    /// that running out of memory is an error, not an abort).
    pub fn try_reserve(&mut self, n: usize) -> Result<(), hashbrown::TryReserveError> {
        self.map.try_reserve(n)
    }

    /// Adds a statement back at its old place.
    pub fn insert_at(&mut self, st: Statement, seq: u64) {
        self.map.insert(st, seq);
    }

    /// Removes a statement, returning its place.
    pub fn remove(&mut self, st: &Statement) -> Option<u64> {
        self.map.remove(st)
    }

    /// True if the statement is in the set.
    pub fn contains(&self, st: &Statement) -> bool {
        self.map.contains_key(st)
    }

    /// Number of statements.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True if empty.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The statements in order.
    pub fn ordered(&self) -> Vec<&Statement> {
        let mut v: Vec<(&Statement, u64)> = self.map.iter().map(|(s, &n)| (s, n)).collect();
        v.sort_unstable_by_key(|&(_, n)| n);
        v.into_iter().map(|(s, _)| s).collect()
    }

    /// True if any statement holds a triple term.
    pub fn has_triple_terms(&self) -> bool {
        self.map
            .keys()
            .any(|s| matches!(s.subject, Term::Triple(_)) || matches!(s.object, Term::Triple(_)))
    }

    /// True if any statement is generalized (a literal subject or graph, a predicate
    /// that is not an IRI).
    pub fn has_generalized(&self) -> bool {
        self.map.keys().any(|s| {
            matches!(s.subject, Term::Literal(_))
                || !matches!(s.predicate, Term::Iri(_))
                || matches!(s.graph, Some(Term::Literal(_)))
        })
    }

    /// True if any statement is in a named graph.
    pub fn has_named_graphs(&self) -> bool {
        self.map.keys().any(|s| s.graph.is_some())
    }
}
