//! Streaming parsers of the RDF syntaxes read with Oxigraph's parsers (Turtle, TriG,
//! RDF/XML, JSON-LD, and N-Triples/N-Quads where jelly's own parser is not used), with
//! errors that name the file and the line and column.

use std::cell::Cell;
use std::io::{self, Read};
use std::rc::Rc;

use jelly::input_check::CheckedReader;
use jelly::text_nesting::NestingScanner;
use jelly::text_position::{PositionProbe, PositionTracker};
use jelly::xml_guard::XmlGuard;
use oxrdf::{GraphName, Quad};
use oxrdfio::{RdfParseError, RdfParser};
use oxrdfxml::{RdfXmlParseError, RdfXmlParser, ReaderRdfXmlParser};

use crate::common::input_io_err;
use crate::error::{CliError, CliResult};
use crate::format::Format;
use crate::io::Counting;
use crate::namespaces::{PrefixSignal, ScannedText};
use jelly::jsonld_parts::{ErrorPlace, JsonLdInputError, JsonLdParts, PartMap};

/// The statements of one input, as quads (in the default graph for triple syntaxes).
///
/// RDF/XML is parsed without oxrdfio, whose RDF/XML errors tell no position: the
/// parser's byte offset at an error, through a [`PositionTracker`] on the input, gives
/// its line and column (where the parser stood: the end of the tag at fault).
///
/// ```
/// use jelly_cli::format::Format;
/// use jelly_cli::rdf_source::RdfSource;
/// let xml = "<?xml version=\"1.0\"?>\n<rdf:RDF xmlns:rdf=\"http://www.w3.org/1999/02/22-rdf-syntax-ns#\">\n<rdf:Description rdf:about=\"bad iri\"/>\n</rdf:RDF>\n";
/// let mut src = RdfSource::new(Format::Rdfxml, None, xml.as_bytes()).unwrap();
/// let e = src.next_quad("in.rdf").unwrap().unwrap_err();
/// assert!(e.message.starts_with("in.rdf:3:"), "{}", e.message);
/// ```
pub enum RdfSource<R: Read> {
    /// Any syntax but RDF/XML, with the count of bytes the parser has read, and for
    /// the Turtle family the count of directives it has taken in. (Both parsers are
    /// boxed: they are large, and made once per input.)
    Oxrdfio {
        parser: Box<oxrdfio::ReaderQuadParser<Counting<Guarded<R>>>>,
        read: Rc<Cell<u64>>,
        directives: Option<Rc<Cell<u64>>>,
        format: Format,
    },
    /// JSON-LD, cut into documents the parser can hold whole. (Boxed: large, and made
    /// once per input.)
    JsonLd(Box<JsonLdSource<R>>),
    /// RDF/XML, through a tracker of line and column.
    RdfXml {
        parser: Box<ReaderRdfXmlParser<PositionTracker<CheckedReader<R, XmlGuard>>>>,
        probe: PositionProbe,
    },
}

/// JSON-LD input: its parts, the parser to make for each, and the current one.
pub struct JsonLdSource<R> {
    parts: JsonLdParts<R>,
    parser: RdfParser,
    current: Option<CurrentPart>,
}

/// The parser of one JSON-LD part, and where the part's pieces are in the input.
pub struct CurrentPart {
    parser: Box<oxrdfio::ReaderQuadParser<Counting<std::io::Cursor<Vec<u8>>>>>,
    /// Bytes of the part the parser has read.
    read: Rc<Cell<u64>>,
    map: PartMap,
    done: bool,
}

/// An input, guarded against deep nesting in the Turtle family.
pub enum Guarded<R> {
    /// N-Triples, N-Quads, Turtle, TriG or N3: nesting of triple terms and brackets
    /// bounded, reads ending at directives.
    Nesting(ScannedText<R>),
    /// Any other syntax, read as it is.
    Plain(R),
}

impl<R: Read> Read for Guarded<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Guarded::Nesting(r) => r.read(buf),
            Guarded::Plain(r) => r.read(buf),
        }
    }
}

/// The buffer of the Turtle-family and JSON parsers under oxrdfio (oxttl's and
/// json-event-parser's `MAX_BUFFER_SIZE`): a token must fit in it whole.
const PARSER_BUFFER: u64 = 16 << 20;

/// Whether `io` is the parser's own refusal of a token that does not fit in its
/// buffer, rather than an error of reading the input. oxttl and json-event-parser
/// report it as an I/O error of kind `OutOfMemory` with this text; the text is checked
/// too, so that a real out-of-memory read error stays an I/O error.
fn is_parser_buffer_full(io: &io::Error) -> bool {
    io.kind() == io::ErrorKind::OutOfMemory
        && io.to_string().contains("Reached the buffer maximal size")
}

/// The error for a token too long for the parser's buffer, `read` bytes into input
/// `name` of `format`: the buffer held the bytes from `read - 16 MiB` on when it
/// filled, so the token starts there or later.
fn parser_buffer_full(name: &str, format: &str, read: u64) -> CliError {
    let from = read.saturating_sub(PARSER_BUFFER);
    CliError::invalid(format!(
        "{name}: byte {from}: a token (IRI, literal, …) starting at or after this byte does \
         not fit in the {format} parser's buffer of {} MiB, which holds a token whole; \
         write the data as N-Triples or N-Quads instead (lines up to {} MiB)",
        PARSER_BUFFER >> 20,
        crate::common::MAX_LINE >> 20
    ))
}

/// The error of reading JSON-LD input `name` that could not be cut into parts.
fn jsonld_input_err(name: &str, e: JsonLdInputError) -> CliError {
    match e {
        JsonLdInputError::Io(io) => input_io_err(name, io),
        refused => CliError::invalid(format!("{name}: {refused}")),
    }
}

/// The error of parsing a part of JSON-LD input `name`, placed in the input.
fn jsonld_parse_err(name: &str, part: &CurrentPart, e: RdfParseError) -> CliError {
    let map = &part.map;
    match e {
        RdfParseError::Syntax(s) => {
            let text = s.to_string();
            let location = s.location().map(|l| (l.start.line, l.start.column));
            CliError::invalid(match map.error_place(location) {
                ErrorPlace::At { line, column } => {
                    format!("{name}:{line}:{column}: {}", map.message(&text))
                }
                ErrorPlace::Unknown => format!("{name}: {text}"),
                nodes => format!("{name}: {nodes}: {text}"),
            })
        }
        RdfParseError::Io(io) if is_parser_buffer_full(&io) => match map.pieces.as_slice() {
            // Parsed whole: the bytes read tell where.
            [(_, start)] if map.whole => {
                parser_buffer_full(name, "JSON-LD", start.offset + part.read.get())
            }
            _ => CliError::invalid(format!(
                "{name}: {}: a token (IRI, literal, …) does not fit in the JSON-LD parser's \
                 buffer of {} MiB, which holds a token whole; write the data as N-Triples or \
                 N-Quads instead (lines up to {} MiB)",
                map.error_place(None),
                PARSER_BUFFER >> 20,
                crate::common::MAX_LINE >> 20
            )),
        },
        RdfParseError::Io(io) => input_io_err(name, io),
    }
}

/// The refusal of `--base-iri b`.
fn bad_base(b: &str, e: impl std::fmt::Display) -> CliError {
    CliError::usage(format!("--base-iri {b}: {e}"))
}

/// An oxrdfio parser of `format`, resolving relative IRIs against `base_iri`.
fn oxrdfio_parser(format: Format, base_iri: Option<&str>) -> CliResult<RdfParser> {
    let p = RdfParser::from_format(format.oxrdfio());
    match base_iri {
        Some(b) => p.with_base_iri(b).map_err(|e| bad_base(b, e)),
        None => Ok(p),
    }
}

impl<R: Read> RdfSource<R> {
    /// A parser of `format` over `reader`, resolving relative IRIs against `base_iri`.
    pub fn new(format: Format, base_iri: Option<&str>, reader: R) -> CliResult<RdfSource<R>> {
        if format == Format::Rdfxml {
            let mut p = RdfXmlParser::new();
            if let Some(b) = base_iri {
                p = p.with_base_iri(b).map_err(|e| bad_base(b, e))?;
            }
            // The parser expands declared entities in full: bombs are refused first.
            let (tracked, probe) =
                PositionTracker::new(CheckedReader::new(reader, XmlGuard::default()));
            return Ok(RdfSource::RdfXml {
                parser: Box::new(p.for_reader(tracked)),
                probe,
            });
        }
        let p = oxrdfio_parser(format, base_iri)?;
        if format == Format::Jsonld {
            return Ok(RdfSource::JsonLd(Box::new(JsonLdSource {
                parts: JsonLdParts::new(reader),
                parser: p,
                current: None,
            })));
        }
        // The text parsers recurse once per level of triple terms, and hold a state per
        // open bracket: deep nesting is refused before them (JSON-LD has a depth limit
        // of its own). Where directives end is noted for the namespace declarations;
        // N-Triples and N-Quads have none, and their count stays 0.
        let (reader, directives) = match format {
            Format::Nt | Format::Nq | Format::Ttl | Format::Trig | Format::N3 => {
                let scanner = NestingScanner::new(jelly::text_nesting::MAX_TEXT_NESTING);
                let scanner = if matches!(format, Format::Nt | Format::Nq) {
                    scanner
                } else {
                    scanner.noting_directives()
                };
                let scanned = ScannedText::new(reader, scanner);
                let passed = scanned.directives_passed();
                (Guarded::Nesting(scanned), Some(passed))
            }
            _ => (Guarded::Plain(reader), None),
        };
        Ok(Self::oxrdfio(p, reader, directives, format))
    }

    /// A parser of Turtle, TriG or N3 over text that a [`NestingScanner`] noting
    /// directives has already gone through (so nesting is bounded) and whose reads end
    /// just after each directive, as [`ScannedText`]'s do; `directives` counts those
    /// the parser has read past.
    pub fn prescanned(
        format: Format,
        base_iri: Option<&str>,
        reader: R,
        directives: Rc<Cell<u64>>,
    ) -> CliResult<RdfSource<R>> {
        Ok(Self::oxrdfio(
            oxrdfio_parser(format, base_iri)?,
            Guarded::Plain(reader),
            Some(directives),
            format,
        ))
    }

    fn oxrdfio(
        p: RdfParser,
        reader: Guarded<R>,
        directives: Option<Rc<Cell<u64>>>,
        format: Format,
    ) -> RdfSource<R> {
        let read = Rc::new(Cell::new(0));
        let reader = Counting::new(reader, read.clone());
        RdfSource::Oxrdfio {
            parser: Box::new(p.for_reader(reader)),
            read,
            directives,
            format,
        }
    }

    /// The next statement, or an error that names `name` and the place.
    pub fn next_quad(&mut self, name: &str) -> Option<CliResult<Quad>> {
        match self {
            RdfSource::Oxrdfio {
                parser,
                read,
                format,
                ..
            } => Some(parser.next()?.map_err(|e| match e {
                RdfParseError::Syntax(s) => match s.location() {
                    Some(l) => CliError::invalid(format!(
                        "{name}:{}:{}: {s}",
                        l.start.line + 1,
                        l.start.column + 1
                    )),
                    None => CliError::invalid(format!("{name}: {s}")),
                },
                RdfParseError::Io(io) if is_parser_buffer_full(&io) => {
                    parser_buffer_full(name, format.name(), read.get())
                }
                RdfParseError::Io(io) => input_io_err(name, io),
            })),
            RdfSource::JsonLd(j) => loop {
                let JsonLdSource {
                    parts,
                    parser,
                    current,
                } = &mut **j;
                if let Some(c) = current.as_mut().filter(|c| !c.done) {
                    match c.parser.next() {
                        Some(Ok(q)) => return Some(Ok(q)),
                        Some(Err(e)) => return Some(Err(jsonld_parse_err(name, c, e))),
                        None => c.done = true,
                    }
                }
                match parts.next_part() {
                    Ok(Some(part)) => {
                        let read = Rc::new(Cell::new(0));
                        let text = Counting::new(std::io::Cursor::new(part.text), read.clone());
                        *current = Some(CurrentPart {
                            parser: Box::new(parser.clone().for_reader(text).with_document_loader(
                                |_| Err(jelly::jsonld_parts::REMOTE_CONTEXT_REFUSED.into()),
                            )),
                            read,
                            map: part.map,
                            done: false,
                        });
                    }
                    Ok(None) => return None,
                    Err(e) => return Some(Err(jsonld_input_err(name, e))),
                }
            },
            RdfSource::RdfXml { parser, probe } => Some(match parser.next()? {
                Ok(t) => Ok(t.in_graph(GraphName::DefaultGraph)),
                Err(RdfXmlParseError::Syntax(s)) => Err(CliError::invalid(
                    match probe.position(parser.buffer_position()) {
                        Some(at) => format!("{name}:{}:{}: {s}", at.line, at.column),
                        None => format!("{name}: byte {}: {s}", parser.buffer_position()),
                    },
                )),
                Err(RdfXmlParseError::Io(io)) => Err(input_io_err(name, io)),
            }),
        }
    }

    /// What tells when [`prefixes`](Self::prefixes) may have changed.
    pub fn prefix_signal(&self) -> PrefixSignal {
        match self {
            RdfSource::Oxrdfio {
                directives: Some(d),
                ..
            } => PrefixSignal::Directives(d.get()),
            _ => PrefixSignal::Unknown,
        }
    }

    /// The prefixes declared so far.
    pub fn prefixes(&self) -> impl Iterator<Item = (&str, &str)> {
        let (any, xml) = match self {
            RdfSource::Oxrdfio { parser, .. } => (Some(parser.prefixes()), None),
            RdfSource::JsonLd(j) => (j.current.as_ref().map(|c| c.parser.prefixes()), None),
            RdfSource::RdfXml { parser, .. } => (None, Some(parser.prefixes())),
        };
        any.into_iter().flatten().chain(xml.into_iter().flatten())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// JSON-LD cut into parts of one node each (objects of over 40 bytes cut).
    fn cut_jsonld(doc: &str) -> RdfSource<&[u8]> {
        RdfSource::JsonLd(Box::new(JsonLdSource {
            parts: JsonLdParts::with_limits(doc.as_bytes(), 40, 1),
            parser: RdfParser::from_format(Format::Jsonld.oxrdfio()),
            current: None,
        }))
    }

    #[test]
    fn jsonld_errors_in_parts_name_their_place_in_the_input() {
        let doc = "{\"@context\": {\"ex\": \"http://ex/\"},\n \"@graph\": [\n  \
                   {\"@id\": \"ex:a\", \"ex:p\": 1},\n  {\"@id\": \"ex:b\",\n   \"ex:p\": tru}]}";
        let mut src = cut_jsonld(doc);
        assert!(src.next_quad("in.jsonld").unwrap().is_ok());
        let e = src.next_quad("in.jsonld").unwrap().unwrap_err();
        assert_eq!(e.message, "in.jsonld:5:12: true expected");
        // An error the parser places nowhere: the lines of the part's nodes.
        let doc = "[{\"@id\": \"http://ex/a\"},\n {\"@id\": \"http://ex/b\",\n  \"@type\": 5}]";
        let mut src = cut_jsonld(doc);
        let e = loop {
            match src.next_quad("in.jsonld").unwrap() {
                Ok(_) => {}
                Err(e) => break e,
            }
        };
        assert_eq!(
            e.message,
            "in.jsonld: line 2 (byte offset 26): @type value must be a string"
        );
        // A refusal of the cutting.
        let doc = "{\"http://ex/p\": \"v\", \"@graph\": [{\"@id\": \"http://ex/a\"}]}";
        let e = cut_jsonld(doc).next_quad("in.jsonld").unwrap().unwrap_err();
        assert!(
            e.message.starts_with("in.jsonld: line 1, byte offset 1: "),
            "{}",
            e.message
        );
    }

    #[test]
    fn small_jsonld_is_parsed_whole_as_before() {
        let doc = "{\"@context\": {\"ex\": \"http://ex/\"},\n \"@graph\": [{\"@id\": \"ex:a\", \"ex:p\": tru}]}";
        let mut src = RdfSource::new(Format::Jsonld, None, doc.as_bytes()).unwrap();
        let e = src.next_quad("in.jsonld").unwrap().unwrap_err();
        assert_eq!(
            e.message,
            "in.jsonld:2:37: Parser error at line 2 between columns 37 and column 40: true expected"
        );
    }
}
