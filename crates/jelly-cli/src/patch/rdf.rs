//! Reading a whole RDF file into a [`Dataset`] (with its prefixes), and writing one.

use std::io;

use jelly::nquads::NQuadsWriter;
use jelly::oxrdf_adapter::from_ox_quad;
use jelly::{Event, Statement};
use oxrdfio::RdfSerializer;

use super::common::{Dataset, normalize};
use crate::common::for_each_nquads_line;
use crate::error::{CliError, CliResult, decode_error};
use crate::format::{Format, is_jelly_path, unknown_format};
use crate::held::HeldLimit;
use crate::io::{Output, Progress, open_input};
use crate::rdf_source::RdfSource;

/// A loaded RDF file.
pub struct Loaded {
    pub data: Dataset,
    /// Prefixes declared by the file, in declaration order.
    pub prefixes: Vec<(String, String)>,
}

/// Sets a prefix, keeping the order of first declaration.
pub fn set_prefix(prefixes: &mut Vec<(String, String)>, name: &str, iri: &str) {
    match prefixes.iter_mut().find(|(k, _)| k == name) {
        Some(slot) => slot.1 = iri.to_string(),
        None => prefixes.push((name.to_string(), iri.to_string())),
    }
}

/// Reads `path` (`-` for stdin: N-Quads unless `format` says otherwise). N-Triples and
/// N-Quads use Jelly's own line parser (blank node labels kept, RDF-star accepted);
/// `.jelly` files are decoded. At most `limit.max` distinct statements are held (`why`:
/// why the verb holds them, for the error past the limit).
pub fn load_rdf(
    path: &str,
    format: Option<Format>,
    quiet: bool,
    limit: HeldLimit,
    why: &str,
) -> CliResult<Loaded> {
    let jelly = format.is_none() && path != "-" && is_jelly_path(path);
    let format = match format {
        Some(f) => Some(f),
        None if path == "-" => Some(Format::Nq),
        None if jelly => None,
        None => Some(Format::from_path(path).ok_or_else(|| unknown_format(path, "--in-format"))?),
    };
    let mut input = open_input(path)?;
    if format.is_some() {
        input.skip_bom()?;
    }
    let name = input.name.clone();
    let mut progress = Progress::new(quiet, input.bytes_read.clone());
    let mut out = Loaded {
        data: Dataset::default(),
        prefixes: Vec::new(),
    };
    let hold = |data: &mut Dataset, st: Statement| -> CliResult {
        let held = data.len() as u64;
        limit.check(held + 1, &name, why)?;
        data.try_reserve(1)
            .map_err(|_| limit.out_of_memory(held, &name, why))?;
        data.insert(normalize(st));
        Ok(())
    };
    let r = (|| -> CliResult {
        match format {
            None => {
                let mut reader = crate::limits::jelly_reader(input.reader);
                while let Some(mut frame) =
                    reader.next_frame().map_err(|e| decode_error(&name, &e))?
                {
                    while let Some(ev) = frame.next_event().map_err(|e| decode_error(&name, &e))? {
                        match ev {
                            Event::Statement(s) => {
                                progress.statement();
                                hold(&mut out.data, s.to_owned())?;
                            }
                            Event::Namespace { name: n, iri } => {
                                set_prefix(&mut out.prefixes, n, iri)
                            }
                            _ => {}
                        }
                    }
                }
            }
            Some(Format::Nt | Format::Nq) => {
                for_each_nquads_line(input.reader, &name, |st, _| {
                    progress.statement();
                    hold(&mut out.data, st)
                })?;
            }
            Some(f) => {
                let mut it = RdfSource::new(f, None, input.reader)?;
                while let Some(q) = it.next_quad(&name) {
                    let q = q?;
                    let mut holder = None;
                    let mut st: Statement = from_ox_quad(q.as_ref(), &mut holder).to_owned();
                    if !f.is_dataset() {
                        st.graph = None;
                    }
                    progress.statement();
                    hold(&mut out.data, st)?;
                }
                for (p, iri) in it.prefixes() {
                    set_prefix(&mut out.prefixes, p, iri);
                }
            }
        }
        Ok(())
    })();
    progress.finish();
    r?;
    Ok(out)
}

/// Writes statements in `format` (prefixes are used by Turtle and TriG).
pub fn write_rdf<'a>(
    statements: impl IntoIterator<Item = &'a Statement>,
    prefixes: &[(String, String)],
    format: Format,
    out: Output,
    out_name: &str,
) -> CliResult {
    let io = |e: io::Error| CliError::io(out_name, &e);
    match format {
        Format::Nt | Format::Nq => {
            let mut w = NQuadsWriter::new(out);
            for st in statements {
                if format == Format::Nt && st.graph.is_some() {
                    return Err(CliError::invalid(format!(
                        "{out_name}: statement in a named graph cannot be written as N-Triples ({st}); use --out-format nq"
                    )));
                }
                w.write(st.as_ref()).map_err(io)?;
            }
            w.finish().map_err(io)?.finish().map_err(io)
        }
        Format::N3 => Err(CliError::usage(
            "N3 is an input format only; use ttl, trig, nt or nq",
        )),
        _ => {
            let mut s = RdfSerializer::from_format(format.oxrdfio());
            for (name, iri) in prefixes {
                if !crate::format::is_turtle_prefix_name(name) {
                    continue;
                }
                if let Ok(with) = s.clone().with_prefix(name.clone(), iri.clone()) {
                    s = with;
                }
            }
            let mut ser = s.for_writer(out);
            for st in statements {
                if !format.is_dataset() && st.graph.is_some() {
                    return Err(CliError::invalid(format!(
                        "{out_name}: statement in a named graph cannot be written as {} ({st}); use --out-format nq or trig",
                        format.name()
                    )));
                }
                let q = st.as_ref().to_oxrdf_quad().map_err(|e| {
                    CliError::invalid(format!(
                        "{out_name}: {e}; {} cannot hold this statement, use --out-format nq",
                        format.name()
                    ))
                })?;
                ser.serialize_quad(&q).map_err(|e| {
                    if e.kind() == io::ErrorKind::BrokenPipe {
                        CliError::io(out_name, &e)
                    } else {
                        CliError::invalid(format!("{out_name}: {e}"))
                    }
                })?;
            }
            let mut out = ser.finish().map_err(io)?;
            // JSON-LD and RDF/XML documents end without a newline; text files should not.
            if matches!(format, Format::Jsonld | Format::Rdfxml) {
                io::Write::write_all(&mut out, b"\n").map_err(io)?;
            }
            out.finish().map_err(io)
        }
    }
}
