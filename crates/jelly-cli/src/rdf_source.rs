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
    /// RDF/XML, through a tracker of line and column.
    RdfXml {
        parser: Box<ReaderRdfXmlParser<PositionTracker<CheckedReader<R, XmlGuard>>>>,
        probe: PositionProbe,
    },
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

impl<R: Read> RdfSource<R> {
    /// A parser of `format` over `reader`, resolving relative IRIs against `base_iri`.
    pub fn new(format: Format, base_iri: Option<&str>, reader: R) -> CliResult<RdfSource<R>> {
        fn bad_base(b: &str, e: impl std::fmt::Display) -> CliError {
            CliError::usage(format!("--base-iri {b}: {e}"))
        }
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
        let mut p = RdfParser::from_format(format.oxrdfio());
        if let Some(b) = base_iri {
            p = p.with_base_iri(b).map_err(|e| bad_base(b, e))?;
        }
        // The text parsers recurse once per level of triple terms, and hold a state per
        // open bracket: deep nesting is refused before them (JSON-LD has a depth limit
        // of its own). Where directives end is noted for the namespace declarations.
        let (reader, directives) = match format {
            Format::Nt | Format::Nq | Format::Ttl | Format::Trig | Format::N3 => {
                let scanned = ScannedText::new(
                    reader,
                    NestingScanner::new(jelly::text_nesting::MAX_TEXT_NESTING).noting_directives(),
                );
                let passed = scanned.directives_passed();
                (Guarded::Nesting(scanned), Some(passed))
            }
            _ => (Guarded::Plain(reader), None),
        };
        let read = Rc::new(Cell::new(0));
        let reader = Counting::new(reader, read.clone());
        Ok(RdfSource::Oxrdfio {
            parser: Box::new(p.for_reader(reader)),
            read,
            directives,
            format,
        })
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
            RdfSource::RdfXml { parser, .. } => (None, Some(parser.prefixes())),
        };
        any.into_iter().flatten().chain(xml.into_iter().flatten())
    }
}
