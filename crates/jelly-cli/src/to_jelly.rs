//! `jelly rdf to-jelly`: RDF text in, Jelly stream out, statement by statement.

use std::io;

use jelly::nquads::{Extensions, LineParser, ParsedLines};
use jelly::oxrdf_adapter::from_ox_quad;
use jelly::{PhysicalType, StatementRef, StreamOptions};

use crate::cli::{FramePer, ToJellyArgs};
use crate::common::{GroupingWriter, apply_option_flags, base_options, logical_for_frame_per};
use crate::common::{for_each_nquads_line, input_io_err};
use crate::error::{CliError, CliResult};
use crate::format::{Format, is_jelly_path, unknown_format};
use crate::io::{Input, Output, Progress, display_name, open_input, open_output};
use crate::parse_ahead::ParseAhead;
use crate::rdf_source::RdfSource;
use crate::statement_batch::BatchEntry;
use oxrdf::Quad;

/// Picks the format of `input`.
pub fn input_format(input: &str, given: Option<Format>) -> CliResult<Format> {
    if let Some(f) = given {
        return Ok(f);
    }
    if input == "-" {
        return Ok(Format::Nq);
    }
    if is_jelly_path(input) {
        return Err(CliError::usage(format!(
            "{input}: this is a Jelly file; use `jelly rdf transcode` to re-encode it"
        )));
    }
    Format::from_path(input).ok_or_else(|| unknown_format(input, "--in-format"))
}

/// Runs the command.
pub fn run(args: &ToJellyArgs, quiet: bool) -> CliResult {
    let inputs: Vec<String> = if args.inputs.is_empty() {
        vec!["-".to_string()]
    } else {
        args.inputs.clone()
    };
    if inputs.iter().filter(|i| *i == "-").count() > 1 {
        return Err(CliError::usage("stdin (`-`) can be read only once"));
    }
    if crate::jelly_text::reads_jelly_text(args.in_format, &inputs)? {
        return crate::jelly_text::to_jelly(args, &inputs, quiet);
    }
    let in_format = args.in_format.and_then(|f| f.rdf());
    crate::format::check_jelly_output("to-jelly", args.to.as_deref())?;
    let formats = inputs
        .iter()
        .map(|i| input_format(i, in_format))
        .collect::<CliResult<Vec<_>>>()?;
    let any_dataset = formats.iter().any(|f| f.is_dataset());

    let mut options = base_options(&args.opts)?.unwrap_or_else(|| {
        StreamOptions::big().with_physical_type(if any_dataset {
            PhysicalType::Quads
        } else {
            PhysicalType::Triples
        })
    });
    if args.opts.options_from.is_none() && args.opts.physical_type.is_none() {
        options.physical_type = if any_dataset {
            PhysicalType::Quads
        } else {
            PhysicalType::Triples
        };
    }
    options = apply_option_flags(options, &args.opts, quiet);
    let frame_per = args.framing.frame_per;
    if frame_per == Some(FramePer::Frame) {
        return Err(CliError::usage(
            "--frame-per frame only applies to transcode; use graph, dataset or input",
        ));
    }
    if args.opts.logical_type.is_none()
        && args.opts.options_from.is_none()
        && let Some(l) = frame_per.and_then(|f| logical_for_frame_per(f, options.physical_type))
    {
        options.logical_type = l;
    }
    let own_parser = options.generalized_statements || options.rdf_star;

    let out_name = display_name(args.to.as_deref().unwrap_or("-"), false);
    if !quiet && let Some(note) = crate::limits::writer_note(&options) {
        eprintln!("jelly: {note}");
    }
    let output = open_output(args.to.as_deref())?;
    let mut w = GroupingWriter::new(
        options,
        &args.framing,
        frame_per,
        args.framing.enable_namespace_declarations,
        output,
        &out_name,
    )?;
    let mut progress: Option<Progress> = None;
    for (n, (path, format)) in inputs.iter().zip(&formats).enumerate() {
        w.start_input(n + 1, inputs.len());
        let input = open_input(path)?;
        match &mut progress {
            None => progress = Some(Progress::new(quiet, input.bytes_read.clone())),
            Some(p) => p.set_bytes(input.bytes_read.clone()),
        }
        let Some(p) = progress.as_mut() else {
            break;
        };
        let r = convert_one(
            input,
            *format,
            own_parser,
            args.base_iri.as_deref(),
            &mut w,
            p,
        );
        if let Err(mut e) = r {
            p.finish();
            if path == "-" && in_format.is_none() && e.code == crate::error::EXIT_INVALID {
                // The format was not chosen but assumed: say so, in case it is the cause.
                e.message
                    .push_str("; stdin is read as N-Quads unless --in-format names its syntax");
            }
            return Err(e);
        }
        w.end_input()?;
    }
    if let Some(p) = &progress {
        p.finish();
    }
    let out: Output = w.finish(quiet)?;
    out.finish().map_err(|e| CliError::io(&out_name, &e))
}

fn star_hint(mut e: CliError) -> CliError {
    if e.message.contains("must be an IRI") || e.message.contains("<<") {
        e.message.push_str(
            " (for RDF-star or generalized N-Triples/N-Quads use --opt.rdf-star or --opt.generalized-statements)",
        );
    }
    e
}

fn convert_one<W: io::Write>(
    input: Input,
    format: Format,
    own_parser: bool,
    base_iri: Option<&str>,
    w: &mut GroupingWriter<W>,
    progress: &mut Progress,
) -> CliResult {
    let name = input.name.clone();
    let mut input = input;
    input.skip_bom()?;
    let mut n: u64 = 0;
    match format {
        Format::Nt | Format::Nq if own_parser => {
            for_each_nquads_line(input.reader, &name, |st, line_no| {
                w.add(st.as_ref(), &|| format!("{name}:{line_no}"))?;
                progress.statement();
                Ok(())
            })?;
        }
        Format::Nt | Format::Nq => {
            convert_lines(input.reader, format == Format::Nq, &name, w, progress)?;
        }
        Format::Ttl | Format::Trig => {
            let mut parsed = ParseAhead::new(input.reader, format, base_iri, &name, w.ns_enabled());
            while let Some(p) = parsed.next_parsed() {
                match p? {
                    BatchEntry::Prefix {
                        prefix,
                        iri,
                        at_end,
                    } => {
                        let at = || match at_end {
                            false => format!("{name}: statement {}", n + 1),
                            true => format!("{name}: end"),
                        };
                        w.namespace(prefix, iri, &at)?;
                    }
                    BatchEntry::Statement(st) => {
                        n += 1;
                        w.add(st, &|| format!("{name}: statement {n}"))?;
                        progress.statement();
                    }
                }
            }
        }
        _ => {
            let mut it = RdfSource::new(format, base_iri, input.reader)?;
            let mut ns = crate::namespaces::NamespaceTracker::default();
            let want_ns = w.ns_enabled();
            while let Some(q) = it.next_quad(&name) {
                let q = q?;
                n += 1;
                if want_ns {
                    for (p, iri) in ns.before_statement(it.prefix_signal(), it.prefixes()) {
                        w.namespace(&p, &iri, &|| format!("{name}: statement {n}"))?;
                    }
                }
                add_ox_quad(w, format, &q, &name, n)?;
                progress.statement();
            }
            if want_ns {
                for (p, iri) in ns.at_end(it.prefixes()) {
                    w.namespace(&p, &iri, &|| format!("{name}: end"))?;
                }
            }
        }
    }
    Ok(())
}

/// Adds statement `n` of input `name` of `format`, as an oxrdfio parser gave it.
fn add_ox_quad<W: io::Write>(
    w: &mut GroupingWriter<W>,
    format: Format,
    q: &Quad,
    name: &str,
    n: u64,
) -> CliResult {
    let mut holder = None;
    let mut st: StatementRef<'_> = from_ox_quad(q.as_ref(), &mut holder);
    // N3 formulas ({ … }) come as statements in a graph named by a blank node: they
    // are not asserted, so they keep that graph (and need a quads stream) rather than
    // become triples of the default graph.
    let in_formula =
        format == Format::N3 && !matches!(st.graph, None | Some(jelly::TermRef::DefaultGraph));
    if !format.is_dataset() && !in_formula {
        st.graph = None;
    }
    w.add(st, &|| format!("{name}: statement {n}"))
        .map_err(|mut e| {
            if in_formula {
                e.message.push_str(
                    " (it is inside an N3 formula { … }: write formulas as quads, \
                     with --opt.physical-type quads)",
                );
            }
            e
        })
}

/// Size of the chunks N-Triples / N-Quads input is cut into (at line ends) for parsing.
const LINE_CHUNK: usize = 1 << 20;

/// Statements parsed from one chunk, or the 1-based line and column and the message of
/// the first syntax error in it.
type ParsedChunk = Result<ParsedLines, (usize, usize, String)>;

/// N-Triples and N-Quads: a second thread parses while this one encodes, so the two
/// overlap on two cores. The input is cut into ~1 MiB chunks at line ends (a statement
/// never spans lines in these formats); at most two chunks are in flight, so memory
/// stays bounded.
///
/// The parser is jelly's strict one ([`LineParser::strict`]), which refuses what oxttl
/// refuses: it validates each distinct IRI once (oxttl validated every occurrence, a
/// third of the time on bsbm) and hands statements over as spans of the chunk, with no
/// allocation per term.
fn convert_lines<W: io::Write>(
    mut reader: Box<dyn io::BufRead>,
    quads: bool,
    name: &str,
    w: &mut GroupingWriter<W>,
    progress: &mut Progress,
) -> CliResult {
    use std::sync::mpsc::sync_channel;

    let (chunk_tx, chunk_rx) = sync_channel::<Vec<u8>>(2);
    let (parsed_tx, parsed_rx) = sync_channel::<ParsedChunk>(2);
    let worker = std::thread::spawn(move || {
        // Quoted triples are read (oxttl reads RDF 1.2 triple terms too) and refused
        // by the writer unless --opt.rdf-star, with the flag named.
        let mut parser = LineParser::strict(Extensions {
            quoted_triples: true,
            generalized: false,
        });
        let mut next_line = 1;
        for chunk in chunk_rx {
            let parsed = parse_chunk(&mut parser, chunk, next_line).map(|(lines, n)| {
                next_line += n;
                lines
            });
            if parsed_tx.send(parsed).is_err() {
                break;
            }
        }
    });
    let mut in_flight = 0;
    let mut n = 0u64;
    let mut eof = false;
    // Bytes read so far: where the next chunk starts, for an error about one of its lines.
    let mut read = 0u64;
    let result = loop {
        while !eof && in_flight < 2 {
            let chunk = read_chunk(reader.as_mut(), read).map_err(|e| input_io_err(name, e))?;
            read += chunk.len() as u64;
            if chunk.is_empty() {
                eof = true;
                break;
            }
            if chunk_tx.send(chunk).is_err() {
                break;
            }
            in_flight += 1;
        }
        if in_flight == 0 {
            break Ok(());
        }
        in_flight -= 1;
        let Ok(parsed) = parsed_rx.recv() else {
            break Err(CliError::invalid(format!(
                "{name}: the parser thread stopped"
            )));
        };
        match parsed {
            Ok(batch) => {
                for (line, st) in batch.iter() {
                    if !quads && st.graph.is_some() {
                        return Err(CliError::invalid(format!(
                            "{name}:{line}: a fourth term (a graph name) in N-Triples; \
                             read the file as N-Quads with --in-format nq"
                        )));
                    }
                    n += 1;
                    w.add(st, &|| format!("{name}: statement {n}"))?;
                    progress.statement();
                }
            }
            Err((line, column, message)) => {
                break Err(star_hint(CliError::invalid(format!(
                    "{name}:{line}:{column}: {message}"
                ))));
            }
        }
    };
    drop(chunk_tx);
    drop(parsed_rx);
    let _ = worker.join();
    result
}

/// Parses one chunk whose first line is `first_line`; also returns its number of lines.
fn parse_chunk(
    parser: &mut LineParser,
    chunk: Vec<u8>,
    first_line: usize,
) -> Result<(ParsedLines, usize), (usize, usize, String)> {
    let text = String::from_utf8(chunk).map_err(|e| {
        let at = jelly::text_position::utf8_error_position(e.as_bytes(), &e.utf8_error());
        (
            first_line.saturating_add(to_usize(at.line) - 1),
            to_usize(at.column),
            "invalid UTF-8".to_string(),
        )
    })?;
    parser
        .parse_lines(text, first_line)
        .map_err(|e| (e.line, e.column, e.message))
}

/// A line or column number of a chunk in memory, which fits a `usize`.
fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// Reads about [`LINE_CHUNK`] bytes, then up to the end of the line. Empty at the end.
/// `at`: the input's byte offset of the chunk, named in the error of a line too long.
fn read_chunk(r: &mut dyn io::BufRead, at: u64) -> io::Result<Vec<u8>> {
    let mut buf = Vec::with_capacity(LINE_CHUNK + 4096);
    while buf.len() < LINE_CHUNK {
        let avail = r.fill_buf()?;
        if avail.is_empty() {
            return Ok(buf);
        }
        let take = avail.len().min(LINE_CHUNK - buf.len());
        buf.extend_from_slice(&avail[..take]);
        r.consume(take);
    }
    // Then to the end of the line.
    let line_start = memchr::memrchr2(b'\n', b'\r', &buf).map_or(0, |i| i + 1);
    crate::common::read_through_line_end(r, &mut buf).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("the line starting at byte {}: {e}", at + line_start as u64),
        )
    })?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Invalid UTF-8 in a chunk is located by the chunk's first line, lines ending at
    /// LF, CRLF or a lone CR, and its column in characters.
    #[test]
    fn invalid_utf8_in_a_chunk_names_line_and_column() {
        let chunk = b"<http://e/s> <http://e/p> \"a\" .\r\n\r<http://e/s> <http://e/p> \"\xC3\xA9\xFF\" .\n";
        let mut parser = LineParser::strict(jelly::nquads::Extensions::default());
        let Err(e) = parse_chunk(&mut parser, chunk.to_vec(), 10) else {
            panic!("invalid UTF-8 accepted");
        };
        assert_eq!(e, (12, 29, "invalid UTF-8".to_string()));
    }
}
