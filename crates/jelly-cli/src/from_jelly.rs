//! `jelly rdf from-jelly`: Jelly stream in, RDF text out, statement by statement.

use std::fs;
use std::io::Write;
use std::path::Path;

use jelly::nquads::NQuadsWriter;
use jelly::{Event, StatementRef, TermRef};
use oxrdfio::{RdfSerializer, WriterQuadSerializer};

use crate::cli::FromJellyArgs;
use crate::common::FrameRange;
use crate::error::{CliError, CliResult, decode_error, no_options_row, not_jelly_hint};
use crate::format::Format;
use crate::io::{Output, Progress, display_name, open_output};

/// The output of an oxrdfio serializer. For RDF/XML, each carriage return (which only
/// literal text can hold) is written as `&#13;`: XML readers turn a raw CR (or CR LF)
/// into a line feed, so `"a\r\nb"` would be read back as `"a\nb"`, and the serializer
/// writes it raw.
struct OxOutput {
    out: Output,
    escape_cr: bool,
}

impl Write for OxOutput {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if !self.escape_cr {
            return self.out.write(buf);
        }
        let mut rest = buf;
        while let Some(i) = rest.iter().position(|&b| b == b'\r') {
            self.out.write_all(&rest[..i])?;
            self.out.write_all(b"&#13;")?;
            rest = &rest[i + 1..];
        }
        self.out.write_all(rest)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// Where statements go: the fast N-Triples/N-Quads writer, or oxrdfio.
enum Sink {
    NQuads {
        w: NQuadsWriter<Output>,
        triples_only: bool,
    },
    Ox {
        format: Format,
        out: Option<Output>,
        ser: Option<Box<WriterQuadSerializer<OxOutput>>>,
    },
}

impl Sink {
    fn new(format: Format, out: Output) -> Sink {
        match format {
            Format::Nt | Format::Nq => Sink::NQuads {
                w: NQuadsWriter::new(out),
                triples_only: format == Format::Nt,
            },
            _ => Sink::Ox {
                format,
                out: Some(out),
                ser: None,
            },
        }
    }

    fn write(
        &mut self,
        st: StatementRef<'_>,
        prefixes: &[(String, String)],
        at: &dyn Fn() -> String,
        out_name: &str,
    ) -> CliResult {
        match self {
            Sink::NQuads { w, triples_only } => {
                if *triples_only && !matches!(st.graph, None | Some(TermRef::DefaultGraph)) {
                    return Err(CliError::invalid(format!(
                        "{}: statement in a named graph cannot be written as N-Triples; use --out-format nq",
                        at()
                    )));
                }
                w.write(st).map_err(|e| CliError::io(out_name, &e))
            }
            Sink::Ox { format, out, ser } => {
                if !format.is_dataset() && !matches!(st.graph, None | Some(TermRef::DefaultGraph)) {
                    return Err(CliError::invalid(format!(
                        "{}: statement in a named graph cannot be written as {}; use \
                         --out-format trig or nq",
                        at(),
                        format.name()
                    )));
                }
                if *format == Format::Rdfxml
                    && let Some(why) = crate::format::rdfxml_problem(st)
                {
                    return Err(CliError::invalid(format!(
                        "{}: {why}; use another --out-format",
                        at()
                    )));
                }
                let mut q = st.to_oxrdf_quad().map_err(|e| {
                    CliError::invalid(format!(
                        "{}: {e}; {} cannot hold this statement, use --out-format nq",
                        at(),
                        format.name()
                    ))
                })?;
                if *format == Format::Rdfxml {
                    crate::format::xml_blank_node_labels(&mut q);
                }
                if ser.is_none() {
                    let mut s = RdfSerializer::from_format(format.oxrdfio());
                    for (name, iri) in prefixes {
                        if !crate::format::is_turtle_prefix_name(name) {
                            continue;
                        }
                        if let Ok(with) = s.clone().with_prefix(name.clone(), iri.clone()) {
                            s = with;
                        }
                    }
                    if let Some(o) = out.take() {
                        let o = OxOutput {
                            out: o,
                            escape_cr: *format == Format::Rdfxml,
                        };
                        *ser = Some(Box::new(s.for_writer(o)));
                    }
                }
                match ser {
                    Some(s) => s.serialize_quad(&q).map_err(|e| {
                        if e.kind() == std::io::ErrorKind::BrokenPipe {
                            CliError::io(out_name, &e)
                        } else {
                            CliError::invalid(format!("{}: {e}", at()))
                        }
                    }),
                    None => Err(CliError::invalid(format!(
                        "{}: output already closed",
                        at()
                    ))),
                }
            }
        }
    }

    /// Whether a statement went out (a text serializer starts at the first one).
    fn has_written(&self) -> bool {
        match self {
            Sink::NQuads { .. } => true,
            Sink::Ox { ser, .. } => ser.is_some(),
        }
    }

    fn finish(self, prefixes: &[(String, String)], out_name: &str) -> CliResult {
        let io = |e: std::io::Error| CliError::io(out_name, &e);
        // JSON-LD and RDF/XML documents end without a newline; text files should not.
        let newline = matches!(
            &self,
            Sink::Ox {
                format: Format::Jsonld | Format::Rdfxml,
                ..
            }
        );
        let mut out = match self {
            Sink::NQuads { w, .. } => w.finish().map_err(io)?,
            Sink::Ox {
                format,
                out,
                ser: None,
            } => {
                // No statement: still write a valid (empty) document.
                let mut s = RdfSerializer::from_format(format.oxrdfio());
                for (name, iri) in prefixes {
                    if !crate::format::is_turtle_prefix_name(name) {
                        continue;
                    }
                    if let Ok(with) = s.clone().with_prefix(name.clone(), iri.clone()) {
                        s = with;
                    }
                }
                match out {
                    Some(o) => s.for_writer(o).finish().map_err(io)?,
                    None => return Ok(()),
                }
            }
            Sink::Ox { ser: Some(s), .. } => s.finish().map_err(io)?.out,
        };
        if newline {
            std::io::Write::write_all(&mut out, b"\n").map_err(io)?;
        }
        out.finish().map_err(io)
    }
}

/// Runs the command.
pub fn run(args: &FromJellyArgs, quiet: bool) -> CliResult {
    if crate::jelly_text::writes_jelly_text(args) {
        return crate::jelly_text::from_jelly(args, quiet);
    }
    let in_path = args.input.as_deref().unwrap_or("-");
    let format =
        Format::for_text_output(args.out_format.and_then(|f| f.rdf()), args.to.as_deref())?;
    let range = match &args.take_frames {
        Some(r) => FrameRange::parse(r)?,
        None => FrameRange::ALL,
    };
    if let Some(dir) = &args.split_frames {
        if std::path::Path::new(dir).exists() && !std::path::Path::new(dir).is_dir() {
            return Err(CliError::usage(format!(
                "--split-frames {dir}: is not a directory (it names the folder the frames go to)"
            )));
        }
        fs::create_dir_all(dir).map_err(|e| CliError::io(dir, &e))?;
    }
    let input = crate::jelly_text::open_jelly_input(in_path, quiet)?;
    let name = input.name.clone();
    let mut progress = Progress::new(quiet, input.bytes_read.clone());
    let mut reader = crate::limits::jelly_reader(input.reader);
    let mut prefixes: Vec<(String, String)> = Vec::new();
    let combined_name = display_name(args.to.as_deref().unwrap_or("-"), false);
    let mut combined = match &args.split_frames {
        None => Some(Sink::new(format, open_output(args.to.as_deref())?)),
        Some(_) => None,
    };
    let mut frames_seen = 0u64;
    let mut frames_taken = 0u64;
    // Named graphs opened and closed with no statement between (a GRAPHS stream's
    // empty graphs, which no statement-based output can carry), and whether the graph
    // open now has had none yet.
    let mut empty_graphs = 0u64;
    let mut graph_is_empty = false;
    // Statements written with terms RDF does not allow (see `rdf_check`), and the first.
    let mut not_rdf = 0u64;
    let mut first_not_rdf: Option<String> = None;
    let result = (|| -> CliResult {
        loop {
            let frame = reader
                .next_frame()
                .map_err(|e| not_jelly_hint(decode_error(&name, &e), in_path, e.frame))?;
            let Some(mut frame) = frame else {
                if frames_seen == 0 {
                    return Err(CliError::invalid(format!(
                        "{name}: input is empty (no frames)"
                    )));
                }
                // Frames with no rows at all: no options row, so not a stream (as
                // validate says), rather than an empty dataset.
                if reader.decoder().options().is_none() {
                    return Err(no_options_row(&name, frames_seen));
                }
                break;
            };
            frames_seen += 1;
            let i = frame.index();
            if range.done(i) {
                break;
            }
            let take = range.contains(i);
            frames_taken += u64::from(take);
            let mut split: Option<(Sink, String)> = None;
            if take && let Some(dir) = &args.split_frames {
                let p = Path::new(dir).join(format!("frame-{i:06}.{}", format.extension()));
                let p = p.to_string_lossy().into_owned();
                split = Some((Sink::new(format, open_output(Some(&p))?), p));
            }
            let at = || format!("{name}:frame {i}");
            while let Some(ev) = frame
                .next_event()
                .map_err(|e| not_jelly_hint(decode_error(&name, &e), in_path, e.frame))?
            {
                let mut written = false;
                match ev {
                    Event::GraphStart(_) => graph_is_empty = take,
                    Event::GraphEnd => {
                        empty_graphs += u64::from(std::mem::take(&mut graph_is_empty));
                    }
                    Event::Statement(st) if take => {
                        graph_is_empty = false;
                        progress.statement();
                        match (&mut split, &mut combined) {
                            (Some((s, p)), _) => s.write(st, &prefixes, &at, p)?,
                            (None, Some(s)) => s.write(st, &prefixes, &at, &combined_name)?,
                            (None, None) => {}
                        }
                        written = true;
                    }
                    Event::Namespace { name: n, iri } => {
                        match prefixes.iter_mut().find(|(k, _)| k == n) {
                            Some(slot) => slot.1 = iri.to_string(),
                            None => prefixes.push((n.to_string(), iri.to_string())),
                        }
                    }
                    _ => {}
                }
                // Asked of the decoder once the event is done with (it borrows the frame).
                if written
                    && let Some(why) = crate::rdf_check::last_statement_problem(frame.decoder())
                {
                    not_rdf += 1;
                    first_not_rdf.get_or_insert_with(|| format!("{}: {why}", at()));
                }
            }
            if let Some((s, p)) = split {
                s.finish(&prefixes, &p)?;
            }
        }
        Ok(())
    })();
    progress.finish();
    if let Err(e) = result {
        // On stdout, what was written stays: end it after its last complete statement
        // (Turtle leaves a block open, JSON-LD and RDF/XML a document), so that the
        // text a pipe got is well-formed. A file is left as it was instead (it is only
        // replaced on success).
        // Only once something was written: an empty document beside the error would
        // read as an empty dataset.
        if args.to.as_deref().is_none_or(|t| t == "-")
            && let Some(s) = combined
            && s.has_written()
        {
            let _ = s.finish(&prefixes, &combined_name);
        }
        return Err(e);
    }
    if let Some(s) = combined {
        s.finish(&prefixes, &combined_name)?;
    }
    if let Some(r) = &args.take_frames
        && frames_taken == 0
    {
        // Not an error (an empty selection is a valid answer), but likely a mistake.
        eprintln!(
            "jelly: note: --take-frames {r} selects no frame of {name}, which has {frames_seen}"
        );
    }
    if let Some(first) = first_not_rdf.filter(|_| !quiet) {
        eprintln!(
            "jelly: note: {not_rdf} statement(s) of {name} hold terms RDF does not allow, \
             written as they are (RDF readers will refuse them; `jelly rdf validate` \
             reports each); the first: {first}"
        );
    }
    if !quiet && empty_graphs > 0 {
        eprintln!(
            "jelly: note: {empty_graphs} empty named graph(s) of {name} left out: the output holds statements only"
        );
    }
    let _ = std::io::stderr().flush();
    Ok(())
}
