//! Reading an RDF file (or a Jelly file) statement by statement, for comparisons: one
//! at a time for an ordered comparison, or all of them, within a [`HeldLimit`].

use std::collections::VecDeque;
use std::io::BufRead;

use jelly::oxrdf_adapter::from_ox_quad;
use jelly::{Event, JellyReader, Statement, Term};

use crate::common::NQuadsLines;
use crate::error::{CliResult, decode_error};
use crate::format::Format;
use crate::held::HeldLimit;
use crate::io::open_input;
use crate::rdf_source::RdfSource;

/// Where the statements come from.
enum Source {
    /// A Jelly stream, decoded a frame at a time (`pending`: the rest of the frame).
    Jelly {
        reader: Box<JellyReader<Box<dyn BufRead>>>,
        pending: VecDeque<Statement>,
    },
    /// N-Triples or N-Quads, with Jelly's tolerant parser (RDF-star, generalized).
    Lines(NQuadsLines<Box<dyn BufRead>>),
    /// Any other syntax, with Oxigraph's parsers.
    Ox(Box<RdfSource<Box<dyn BufRead>>>),
}

/// The statements of an RDF file, in order, one at a time: memory does not grow with
/// the file (a Jelly file holds one frame's statements at a time).
pub struct StatementReader {
    source: Source,
    name: String,
}

impl StatementReader {
    /// Opens `path` (format from `format` or the extension; a `.jelly` file as a Jelly
    /// stream).
    pub fn open(path: &str, format: Option<Format>) -> CliResult<StatementReader> {
        if format.is_none() && crate::format::is_jelly_path(path) {
            let input = open_input(path)?;
            let name = input.name.clone();
            return Ok(StatementReader {
                source: Source::Jelly {
                    reader: Box::new(crate::limits::jelly_reader(input.reader)),
                    pending: VecDeque::new(),
                },
                name,
            });
        }
        let format = match format.or_else(|| Format::from_path(path)) {
            Some(f) => f,
            None => return Err(crate::format::unknown_format(path, "--compare-to-format")),
        };
        let mut input = open_input(path)?;
        input.skip_bom()?;
        let name = input.name.clone();
        let source = match format {
            Format::Nt | Format::Nq => Source::Lines(NQuadsLines::new(input.reader, &name)),
            _ => Source::Ox(Box::new(RdfSource::new(format, None, input.reader)?)),
        };
        Ok(StatementReader { source, name })
    }

    /// The file's name, for messages.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The next statement (a triple has no graph), or `None` at the end.
    pub fn next_statement(&mut self) -> CliResult<Option<Statement>> {
        let name = &self.name;
        match &mut self.source {
            Source::Jelly { reader, pending } => loop {
                if let Some(st) = pending.pop_front() {
                    return Ok(Some(st));
                }
                let Some(mut frame) = reader.next_frame().map_err(|e| decode_error(name, &e))?
                else {
                    return Ok(None);
                };
                while let Some(ev) = frame.next_event().map_err(|e| decode_error(name, &e))? {
                    if let Event::Statement(s) = ev {
                        pending.push_back(s.to_owned());
                    }
                }
            },
            Source::Lines(lines) => Ok(lines.next_statement()?.map(|(st, _)| st)),
            Source::Ox(it) => {
                let Some(q) = it.next_quad(name) else {
                    return Ok(None);
                };
                let q = q?;
                let mut holder = None;
                let mut st = from_ox_quad(q.as_ref(), &mut holder).to_owned();
                if st.graph == Some(Term::DefaultGraph) {
                    st.graph = None;
                }
                Ok(Some(st))
            }
        }
    }

    /// All the (remaining) statements, at most `limit.max` of them.
    pub fn read_all(mut self, limit: HeldLimit, why: &str) -> CliResult<Vec<Statement>> {
        let mut out: Vec<Statement> = Vec::new();
        while let Some(st) = self.next_statement()? {
            let held = out.len() as u64 + 1;
            limit.check(held, &self.name, why)?;
            out.try_reserve(1)
                .map_err(|_| limit.out_of_memory(held - 1, &self.name, why))?;
            out.push(st);
        }
        Ok(out)
    }
}

/// Reads `path` (format from `format` or the extension; a `.jelly` file as a Jelly
/// stream) into owned statements, at most `limit.max` of them (`why`: why they are
/// held, for the error past the limit).
pub fn read_rdf_file(
    path: &str,
    format: Option<Format>,
    limit: HeldLimit,
    why: &str,
) -> CliResult<Vec<Statement>> {
    StatementReader::open(path, format)?.read_all(limit, why)
}
