//! Pieces shared by the verbs: stream options from flags, frame ranges, and the
//! Jelly writer with grouping.

use std::io::{self, BufRead, Write};

use jelly::{
    Event, FramePolicy, JellyWriter, JellyWriterBuilder, LogicalType, PhysicalType, StatementRef,
    StreamOptions, Term, TermRef, WriteError,
};

use crate::cli::{FramePer, FramingArgs, PhysicalArg, Preset, StreamOptionArgs};
use crate::error::{CliError, CliResult, decode_error};
use crate::io::open_input;

/// Reads the stream options of an existing Jelly file (its first options row).
pub fn options_from_file(path: &str) -> CliResult<StreamOptions> {
    let input = open_input(path)?;
    let mut r = crate::limits::jelly_reader(input.reader);
    let frame = r.next_frame().map_err(|e| decode_error(&input.name, &e))?;
    if let Some(mut f) = frame
        && let Some(Event::Options(o)) =
            f.next_event().map_err(|e| decode_error(&input.name, &e))?
    {
        return Ok(o.clone());
    }
    Err(CliError::invalid(format!(
        "{}: no stream options at the start of the stream",
        input.name
    )))
}

/// The options asked for by the flags, on top of `base` (preset, `--options-from` or a
/// stream's options). A physical type given without a logical type carries the logical
/// type over to its counterpart ([`jelly::LogicalType::for_physical`]: a stream of
/// Jelly-JVM's or pyjelly's, always `FLAT_*`, re-encoded as another physical type would
/// otherwise declare a combination those readers refuse). Notes go to stderr unless
/// `quiet`.
pub fn apply_option_flags(
    mut o: StreamOptions,
    a: &StreamOptionArgs,
    quiet: bool,
) -> StreamOptions {
    if let Some(p) = a.physical_type {
        o.physical_type = match p {
            PhysicalArg::Triples => PhysicalType::Triples,
            PhysicalArg::Quads => PhysicalType::Quads,
            PhysicalArg::Graphs => PhysicalType::Graphs,
        };
        if a.logical_type.is_none() {
            let carried = o.logical_type.for_physical(o.physical_type);
            if carried != o.logical_type && !quiet {
                eprintln!(
                    "jelly: note: logical type {} becomes {} with physical type {} \
                     (--opt.logical-type sets another)",
                    o.logical_type.name(),
                    carried.name(),
                    o.physical_type.name()
                );
            }
            o.logical_type = carried;
        }
    }
    if let Some(l) = a.logical_type {
        o.logical_type = l;
    }
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
    if let Some(n) = &a.stream_name {
        o.stream_name = n.clone();
    }
    if (a.physical_type.is_some() || a.logical_type.is_some())
        && !o.logical_type.fits(o.physical_type)
        && !quiet
    {
        // Written as asked (the spec does not forbid it), but readers may not expect it.
        eprintln!(
            "jelly: note: logical type {} with physical type {} is a combination the \
             Jelly spec does not recommend; readers may refuse or misread it",
            o.logical_type.name(),
            o.physical_type.name()
        );
    }
    o
}

/// Base options from `--preset` / `--options-from`.
pub fn base_options(a: &StreamOptionArgs) -> CliResult<Option<StreamOptions>> {
    if let Some(path) = &a.options_from {
        let mut o = options_from_file(path)?;
        // The version is an encoding detail: let the encoder pick the lowest that fits.
        o.version = 0;
        if let Some(p) = a.preset {
            let t = preset(p);
            o.max_name_table_size = t.max_name_table_size;
            o.max_prefix_table_size = t.max_prefix_table_size;
            o.max_datatype_table_size = t.max_datatype_table_size;
        }
        return Ok(Some(o));
    }
    Ok(a.preset.map(preset))
}

fn preset(p: Preset) -> StreamOptions {
    match p {
        Preset::Small => StreamOptions::small(),
        Preset::Big => StreamOptions::big(),
    }
}

/// The logical type implied by `--frame-per` for `physical`.
pub fn logical_for_frame_per(fp: FramePer, physical: PhysicalType) -> Option<LogicalType> {
    let triples = physical == PhysicalType::Triples;
    match fp {
        FramePer::Graph if triples => Some(LogicalType::GRAPHS),
        FramePer::Graph => Some(LogicalType::NAMED_GRAPHS),
        FramePer::Dataset if triples => Some(LogicalType::GRAPHS),
        FramePer::Dataset => Some(LogicalType::DATASETS),
        FramePer::Input if triples => Some(LogicalType::GRAPHS),
        FramePer::Input => Some(LogicalType::DATASETS),
        FramePer::Frame => None,
    }
}

/// Checks option values the encoder does not check itself.
pub fn check_options(o: &StreamOptions) -> CliResult {
    if o.max_name_table_size < 8 {
        return Err(CliError::usage(format!(
            "--opt.max-name-table-size must be at least 8 (got {})",
            o.max_name_table_size
        )));
    }
    Ok(())
}

/// A half-open range of frame indices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameRange {
    pub start: u64,
    /// Exclusive end; `None` = to the end of the stream.
    pub end: Option<u64>,
}

impl FrameRange {
    /// All frames.
    pub const ALL: FrameRange = FrameRange {
        start: 0,
        end: None,
    };

    /// Parses `3`, `1..5`, `1..=5`, `..10`, `2..`.
    pub fn parse(s: &str) -> CliResult<FrameRange> {
        let bad = || {
            CliError::usage(format!(
                "invalid frame range `{s}` (use 3, 1..5, 1..=5, ..10 or 2..)"
            ))
        };
        let num = |t: &str| t.trim().parse::<u64>().map_err(|_| bad());
        let s2 = s.trim();
        if let Some((a, b)) = s2.split_once("..") {
            let start = if a.trim().is_empty() { 0 } else { num(a)? };
            let end = if let Some(b) = b.strip_prefix('=') {
                Some(num(b)?.checked_add(1).ok_or_else(bad)?)
            } else if b.trim().is_empty() {
                None
            } else {
                Some(num(b)?)
            };
            if end.is_some_and(|e| e <= start) {
                return Err(CliError::usage(format!(
                    "frame range `{s}` is empty (its end is not after its start)"
                )));
            }
            Ok(FrameRange { start, end })
        } else {
            let i = num(s2)?;
            Ok(FrameRange {
                start: i,
                end: Some(i.checked_add(1).ok_or_else(bad)?),
            })
        }
    }

    /// True if frame `i` is in the range.
    pub fn contains(&self, i: u64) -> bool {
        i >= self.start && self.end.is_none_or(|e| i < e)
    }

    /// True if no frame at or after `i` is in the range.
    pub fn done(&self, i: u64) -> bool {
        self.end.is_some_and(|e| i >= e)
    }
}

/// A Jelly writer that also ends frames by graph or input, as `--frame-per` asks.
pub struct GroupingWriter<W: Write> {
    pub writer: JellyWriter<W>,
    frame_per: Option<FramePer>,
    last_graph: Option<Term>,
    out_name: String,
    ns_enabled: bool,
    /// Prefix given to the blank-node labels of the current input (see
    /// [`GroupingWriter::start_input`]).
    bnode_prefix: Option<String>,
    /// Empty named graphs met while writing a TRIPLES or QUADS stream, which has no
    /// row to carry one (told once, at the end).
    dropped_empty_graphs: u64,
}

impl<W: Write> GroupingWriter<W> {
    /// Builds the writer. `options` must be final.
    pub fn new(
        options: StreamOptions,
        framing: &FramingArgs,
        frame_per: Option<FramePer>,
        ns_enabled: bool,
        out: W,
        out_name: &str,
    ) -> CliResult<Self> {
        check_options(&options)?;
        let delimited = framing.delimited.unwrap_or(true);
        let policy = match frame_per {
            Some(_) => FramePolicy::Manual,
            // Non-delimited output is exactly one frame.
            None if !delimited && framing.rows_per_frame.is_none() => FramePolicy::Manual,
            None => FramePolicy::Rows(framing.rows_per_frame.unwrap_or(256).max(1)),
        };
        let writer = JellyWriterBuilder::new(options)
            .frame_policy(policy)
            .frame_byte_target(
                framing
                    .bytes_per_frame
                    .unwrap_or(crate::cli::DEFAULT_BYTES_PER_FRAME),
            )
            .delimited(delimited)
            .namespace_declarations(ns_enabled)
            .build(out)
            .map_err(|e| CliError::usage(format!("invalid stream options: {e}")))?;
        Ok(GroupingWriter {
            writer,
            frame_per,
            last_graph: None,
            out_name: out_name.to_string(),
            ns_enabled,
            bnode_prefix: None,
            dropped_empty_graphs: 0,
        })
    }

    /// Starts input `n` (from 1) of `count`. A blank-node label belongs to its
    /// document, so with several inputs each one's labels get a prefix of their own
    /// (`i1_`, `i2_`, …): `_:b0` of two files stays two nodes. One input keeps its labels.
    pub fn start_input(&mut self, n: usize, count: usize) {
        self.bnode_prefix = (count > 1).then(|| format!("i{n}_"));
    }

    /// Maps a writer error; `at` locates the statement in the input.
    pub fn err(&self, e: WriteError, at: &str) -> CliError {
        match e {
            WriteError::Io(io) => CliError::io(&self.out_name, &io),
            WriteError::SecondFrameNonDelimited => CliError::usage(format!(
                "{}: {at}: {} (to write the input as one frame, add --frame-per input)",
                self.out_name,
                WriteError::SecondFrameNonDelimited
            )),
            WriteError::Encode(e) => {
                // What to turn on, for content the options leave out.
                let hint = match &e {
                    jelly::EncodeError::RdfStarNotEnabled(_) => " (use --opt.rdf-star)",
                    jelly::EncodeError::GeneralizedNotEnabled { .. } => {
                        " (use --opt.generalized-statements)"
                    }
                    // A named graph in TRIPLES output: transcode keeps the first
                    // input's options, so a later quads input lands here too.
                    jelly::EncodeError::WrongPhysicalType {
                        physical: "triples",
                        ..
                    } => " (use --opt.physical-type quads)",
                    _ => "",
                };
                CliError::invalid(format!("{at}: {e}{hint}"))
            }
        }
    }

    /// Adds a statement, starting a new frame first if its graph differs (`--frame-per graph`).
    pub fn add(&mut self, st: StatementRef<'_>, at: &dyn Fn() -> String) -> CliResult {
        if self.frame_per == Some(FramePer::Graph) {
            let g = st.graph_or_default();
            let same = self.last_graph.as_ref().is_some_and(|l| l.as_ref() == g);
            if !same {
                if self.last_graph.is_some() {
                    self.end_group().map_err(|e| self.err(e, &at()))?;
                }
                self.last_graph = Some(g.to_owned());
            }
        }
        if let Some(prefix) = &self.bnode_prefix
            && statement_has_blank_node(st)
        {
            let mut owned = st.to_owned();
            for t in [&mut owned.subject, &mut owned.predicate, &mut owned.object] {
                prefix_blank_nodes(t, prefix);
            }
            if let Some(g) = &mut owned.graph {
                prefix_blank_nodes(g, prefix);
            }
            return self
                .writer
                .add(owned.as_ref())
                .map_err(|e| self.err(e, &at()));
        }
        self.writer.add(st).map_err(|e| self.err(e, &at()))
    }

    /// Writes graph `g` with no statements in it: a `graph_start` row right after a
    /// `graph_end` (closing the open graph first), for GRAPHS output only. Statements
    /// alone cannot carry an empty graph (the writer opens graphs as statements come),
    /// and the spec allows one in GRAPHS streams; TRIPLES and QUADS have no way to
    /// write it, so nothing is written for them. With `--frame-per graph` it starts a
    /// frame of its own, as a graph of statements would.
    pub fn empty_graph(&mut self, g: TermRef<'_>, at: &dyn Fn() -> String) -> CliResult {
        if self.writer.encoder().options().physical_type != PhysicalType::Graphs {
            self.dropped_empty_graphs += 1;
            return Ok(());
        }
        let mut owned = g.to_owned();
        if let Some(prefix) = &self.bnode_prefix {
            prefix_blank_nodes(&mut owned, prefix);
        }
        if self.frame_per == Some(FramePer::Graph) {
            if self.last_graph.is_some() && self.last_graph.as_ref() != Some(&owned) {
                self.end_group().map_err(|e| self.err(e, &at()))?;
            }
            self.last_graph = Some(owned.clone());
        }
        let enc = self.writer.encoder();
        let r = (|| {
            if enc.graph_open() {
                enc.end_graph()?;
            }
            enc.start_graph(owned.as_ref())?;
            enc.end_graph()
        })();
        r.map_err(|e| self.err(WriteError::Encode(e), &at()))
    }

    /// True if namespace declarations are written.
    pub fn ns_enabled(&self) -> bool {
        self.ns_enabled
    }

    /// Declares a namespace (ignored unless namespace declarations are on).
    pub fn namespace(&mut self, name: &str, iri: &str, at: &dyn Fn() -> String) -> CliResult {
        if !self.ns_enabled {
            return Ok(());
        }
        self.writer
            .declare_namespace(name, iri)
            .map_err(|e| self.err(e, &at()))
    }

    fn end_group(&mut self) -> Result<(), WriteError> {
        if self.writer.encoder().graph_open() {
            self.writer.encoder().end_graph()?;
        }
        self.writer.flush_frame()
    }

    /// The end of one input file (`--frame-per input|dataset`).
    pub fn end_input(&mut self) -> CliResult {
        if matches!(self.frame_per, Some(FramePer::Input | FramePer::Dataset)) {
            self.end_group().map_err(|e| self.err(e, "end of input"))?;
        }
        Ok(())
    }

    /// The end of an input frame (`--frame-per frame`, transcode).
    pub fn end_input_frame(&mut self) -> CliResult {
        if self.frame_per == Some(FramePer::Frame) {
            self.end_group().map_err(|e| self.err(e, "end of frame"))?;
        }
        Ok(())
    }

    /// Writes the last frame and returns the output. Unless `quiet`, a note on stderr
    /// tells when a frame came out larger than readers accept by default (one large
    /// statement or graph can make one), since the reader's error comes much later.
    pub fn finish(mut self, quiet: bool) -> CliResult<W> {
        let name = self.out_name.clone();
        // The last frame is written first so that it counts for the note (finish
        // then writes nothing more: the frame it would end is empty).
        self.end_group().map_err(|e| self.err(e, &name))?;
        if !quiet && let Some(note) = crate::limits::frame_note(self.writer.largest_frame_bytes()) {
            eprintln!("{note}");
        }
        if !quiet && self.dropped_empty_graphs > 0 {
            let physical = match self.writer.encoder().options().physical_type {
                PhysicalType::Triples => "TRIPLES",
                _ => "QUADS",
            };
            eprintln!(
                "jelly: note: {} empty named graph(s) of the input left out: a {physical} stream cannot hold a graph without statements (--opt.physical-type=GRAPHS keeps them)",
                self.dropped_empty_graphs
            );
        }
        self.writer.finish().map_err(|e| match e {
            WriteError::Io(io) => CliError::io(&name, &io),
            other => CliError::invalid(format!("{name}: {other}")),
        })
    }
}

fn has_blank_node(t: TermRef<'_>) -> bool {
    match t {
        TermRef::BlankNode(_) => true,
        TermRef::Triple(q) => (0..3).any(|i| has_blank_node(q.term(i))),
        _ => false,
    }
}

fn statement_has_blank_node(st: StatementRef<'_>) -> bool {
    has_blank_node(st.subject)
        || has_blank_node(st.predicate)
        || has_blank_node(st.object)
        || st.graph.is_some_and(has_blank_node)
}

/// Puts `prefix` in front of every blank-node label in `t`, quoted triples included.
fn prefix_blank_nodes(t: &mut Term, prefix: &str) {
    match t {
        Term::BlankNode(label) => label.insert_str(0, prefix),
        Term::Triple(q) => {
            prefix_blank_nodes(&mut q.subject, prefix);
            prefix_blank_nodes(&mut q.predicate, prefix);
            prefix_blank_nodes(&mut q.object, prefix);
        }
        _ => {}
    }
}

/// An I/O error while reading input `name`: undecodable or truncated bytes are invalid
/// data (exit 1), anything else an I/O failure (exit 2).
pub fn input_io_err(name: &str, io: io::Error) -> CliError {
    if matches!(
        io.kind(),
        io::ErrorKind::InvalidData | io::ErrorKind::UnexpectedEof
    ) {
        CliError::invalid(format!("{name}: {io}"))
    } else {
        CliError::io(name, &io)
    }
}

/// Longest line of N-Triples / N-Quads input (as for RDF Patch text).
pub const MAX_LINE: usize = jelly::rdf_patch::DEFAULT_MAX_LINE_LEN;

/// Appends to `buf` the rest of the current line and its end: LF, CRLF or a lone CR
/// (N-Triples' EOL is `[#xD#xA]+`). Nothing at the end of the input. A line longer
/// than [`MAX_LINE`] is an error, so that input with no line breaks is not read whole
/// into memory.
pub fn read_through_line_end(r: &mut dyn BufRead, buf: &mut Vec<u8>) -> io::Result<()> {
    let start = buf.len();
    loop {
        let avail = r.fill_buf()?;
        if avail.is_empty() {
            return Ok(());
        }
        if let Some(i) = memchr::memchr2(b'\n', b'\r', avail) {
            let cr = avail[i] == b'\r';
            buf.extend_from_slice(&avail[..=i]);
            r.consume(i + 1);
            // A CRLF cut between two reads keeps its LF with its CR.
            if cr && r.fill_buf()?.first() == Some(&b'\n') {
                buf.push(b'\n');
                r.consume(1);
            }
            return Ok(());
        }
        if buf.len() - start + avail.len() > MAX_LINE {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a line longer than {MAX_LINE} bytes (is this N-Triples or N-Quads?)"),
            ));
        }
        let n = avail.len();
        buf.extend_from_slice(avail);
        r.consume(n);
    }
}

/// N-Triples / N-Quads read line by line with jelly's own parser (generalized
/// statements, quoted triples in any position), one statement at a time. Terms are
/// checked as strictly as in plain N-Triples ([`jelly::nquads::LineParser::strict`]:
/// absolute, valid IRIs; well-formed language tags). Errors name `name:line:column`.
pub struct NQuadsLines<R: BufRead> {
    reader: R,
    name: String,
    buf: Vec<u8>,
    line_no: usize,
    /// Boxed: it holds the IRI cache's table, and readers live in enums of sources.
    parser: Box<jelly::nquads::LineParser>,
}

impl<R: BufRead> NQuadsLines<R> {
    /// A reader of `reader`, called `name` in errors.
    pub fn new(reader: R, name: &str) -> Self {
        NQuadsLines {
            reader,
            name: name.to_string(),
            buf: Vec::with_capacity(1024),
            line_no: 0,
            parser: Box::new(jelly::nquads::LineParser::strict(
                jelly::nquads::Extensions {
                    quoted_triples: true,
                    generalized: true,
                },
            )),
        }
    }

    /// The next statement and its 1-based line number, or `None` at the end.
    pub fn next_statement(&mut self) -> CliResult<Option<(jelly::Statement, usize)>> {
        let name = &self.name;
        loop {
            self.buf.clear();
            read_through_line_end(&mut self.reader, &mut self.buf).map_err(|e| {
                let line = self.line_no + 1;
                input_io_err(name, io::Error::new(e.kind(), format!("line {line}: {e}")))
            })?;
            if self.buf.is_empty() {
                return Ok(None);
            }
            self.line_no += 1;
            let line_no = self.line_no;
            let line = std::str::from_utf8(&self.buf).map_err(|e| {
                // The buffer is one line: its column, in characters as the parser's.
                let column = jelly::text_position::utf8_error_position(&self.buf, &e).column;
                CliError::invalid(format!("{name}:{line_no}:{column}: invalid UTF-8"))
            })?;
            let line = line.trim_end_matches(['\n', '\r']);
            let st = self.parser.parse(line, line_no).map_err(|e| {
                CliError::invalid(format!("{name}:{}:{}: {}", e.line, e.column, e.message))
            })?;
            if let Some(st) = st {
                return Ok(Some((st.to_owned(), line_no)));
            }
        }
    }
}

/// Reads N-Triples / N-Quads with [`NQuadsLines`] and calls `f` with each statement and
/// its 1-based line number.
pub fn for_each_nquads_line(
    reader: impl BufRead,
    name: &str,
    mut f: impl FnMut(jelly::Statement, usize) -> CliResult,
) -> CliResult {
    let mut lines = NQuadsLines::new(reader, name);
    while let Some((st, line_no)) = lines.next_statement()? {
        f(st, line_no)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Invalid UTF-8 is located on its line, in characters as the parser's columns.
    #[test]
    fn invalid_utf8_column_counts_characters() {
        let text =
            b"<http://e/s> <http://e/p> \"a\" .\r<http://e/s> <http://e/p> \"\xC3\xA9\xFF\" .\n";
        let mut lines = NQuadsLines::new(&text[..], "in.nt");
        assert!(lines.next_statement().unwrap().is_some());
        let e = lines.next_statement().unwrap_err();
        // `é` is one character (two bytes): the bad byte is the 29th character.
        assert!(e.to_string().ends_with("in.nt:2:29: invalid UTF-8"), "{e}");
    }
}
