//! RDF text formats known to the command line.

use clap::ValueEnum;
use jelly::{LiteralKind, StatementRef, TermRef};
use oxrdfio::{JsonLdProfileSet, RdfFormat};

use crate::error::{CliError, CliResult};
use crate::io::strip_compression;

/// An RDF syntax.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// N-Triples (`.nt`)
    #[value(alias = "ntriples", alias = "n-triples")]
    Nt,
    /// N-Quads (`.nq`)
    #[value(alias = "nquads", alias = "n-quads")]
    Nq,
    /// Turtle (`.ttl`)
    #[value(alias = "turtle")]
    Ttl,
    /// TriG (`.trig`)
    Trig,
    /// RDF/XML (`.rdf`, `.owl`, `.xml`)
    #[value(alias = "rdf-xml", alias = "xml", alias = "rdf")]
    Rdfxml,
    /// JSON-LD (`.jsonld`)
    #[value(alias = "json-ld")]
    Jsonld,
    /// Notation3 (`.n3`; written as Turtle, which is N3)
    N3,
}

/// Refuses a Jelly output file whose name says RDF text: Jelly written to `data.nt` is
/// almost surely a mistake, and (the file being the input, converted in place) would
/// replace the only text copy with binary. A `.jelly` file may be its own input: the
/// output is written beside it and put in place once the command succeeds.
///
/// ```
/// use jelly_cli::format::check_jelly_output;
/// assert!(check_jelly_output("to-jelly", Some("out.jelly")).is_ok());
/// assert!(check_jelly_output("to-jelly", Some("in.nt")).is_err());
/// assert!(check_jelly_output("transcode", Some("out.nq.gz")).is_err());
/// assert!(check_jelly_output("to-jelly", Some("out.jelly.txt")).is_err());
/// ```
pub fn check_jelly_output(verb: &str, to: Option<&str>) -> CliResult<()> {
    let Some(path) = to.filter(|p| *p != "-") else {
        return Ok(());
    };
    if let Some(f) = Format::from_path(path) {
        return Err(CliError::usage(format!(
            "`{path}` is named as {} text, but {verb} writes Jelly: give the output a .jelly name",
            f.name()
        )));
    }
    if crate::jelly_text::is_jelly_text_path(path) {
        return Err(CliError::usage(format!(
            "`{path}` is named as jelly-text, but {verb} writes binary Jelly: give the output \
             a .jelly name (`jelly rdf from-jelly --out-format jelly-text` prints the text)"
        )));
    }
    Ok(())
}

impl Format {
    /// Guesses the format from a file name (after stripping `.gz` / `.zst`).
    pub fn from_path(path: &str) -> Option<Format> {
        let (base, _) = strip_compression(path);
        let ext = base.rsplit_once('.')?.1.to_ascii_lowercase();
        Some(match ext.as_str() {
            "nt" | "ntriples" => Format::Nt,
            "nq" | "nquads" => Format::Nq,
            "ttl" | "turtle" => Format::Ttl,
            "trig" => Format::Trig,
            "rdf" | "owl" | "xml" | "rdfxml" => Format::Rdfxml,
            "jsonld" | "json" => Format::Jsonld,
            "n3" => Format::N3,
            _ => return None,
        })
    }

    /// The text format of a `from-jelly` output: `--out-format`, else the one the
    /// output file's name says, else N-Quads. A name ending in `.jelly` is refused
    /// unless `--out-format` is given: text written there is almost surely a mistake.
    ///
    /// ```
    /// use jelly_cli::format::Format;
    /// assert_eq!(Format::for_text_output(None, Some("out.ttl")).unwrap(), Format::Ttl);
    /// assert_eq!(Format::for_text_output(None, None).unwrap(), Format::Nq);
    /// assert!(Format::for_text_output(None, Some("out.jelly.gz")).is_err());
    /// assert_eq!(Format::for_text_output(Some(Format::Nt), Some("x.jelly")).unwrap(), Format::Nt);
    /// ```
    pub fn for_text_output(given: Option<Format>, to: Option<&str>) -> CliResult<Format> {
        if let Some(f) = given {
            return Ok(f);
        }
        let Some(path) = to else {
            return Ok(Format::Nq);
        };
        if is_jelly_path(path) {
            return Err(CliError::usage(format!(
                "`{path}` names a Jelly file, but from-jelly writes RDF text: use `jelly rdf \
                 transcode` to write Jelly, or give --out-format to write text there anyway"
            )));
        }
        Ok(Format::from_path(path).unwrap_or(Format::Nq))
    }

    /// True if the format holds datasets (named graphs).
    pub fn is_dataset(self) -> bool {
        matches!(self, Format::Nq | Format::Trig | Format::Jsonld)
    }

    /// The oxrdfio format.
    pub fn oxrdfio(self) -> RdfFormat {
        match self {
            Format::Nt => RdfFormat::NTriples,
            Format::Nq => RdfFormat::NQuads,
            Format::Ttl => RdfFormat::Turtle,
            Format::Trig => RdfFormat::TriG,
            Format::Rdfxml => RdfFormat::RdfXml,
            Format::Jsonld => RdfFormat::JsonLd {
                profile: JsonLdProfileSet::empty(),
            },
            Format::N3 => RdfFormat::N3,
        }
    }

    /// The usual file extension.
    pub fn extension(self) -> &'static str {
        match self {
            Format::Nt => "nt",
            Format::Nq => "nq",
            Format::Ttl => "ttl",
            Format::Trig => "trig",
            Format::Rdfxml => "rdf",
            Format::Jsonld => "jsonld",
            Format::N3 => "n3",
        }
    }

    /// Human name.
    pub fn name(self) -> &'static str {
        match self {
            Format::Nt => "N-Triples",
            Format::Nq => "N-Quads",
            Format::Ttl => "Turtle",
            Format::Trig => "TriG",
            Format::Rdfxml => "RDF/XML",
            Format::Jsonld => "JSON-LD",
            Format::N3 => "N3",
        }
    }
}

/// The error for an input whose format its name does not tell, `hint` naming the
/// option that would: but a path that is a directory or does not exist says that
/// instead, since no option would help.
///
/// ```
/// use jelly_cli::format::unknown_format;
/// let e = unknown_format("/", "--in-format");
/// assert!(e.to_string().contains("is a directory"));
/// let e = unknown_format("Cargo.toml", "--in-format");
/// assert!(e.to_string().contains("use --in-format"));
/// let e = unknown_format("no-such-file.rdfx", "--in-format");
/// assert!(e.to_string().contains("no-such-file.rdfx"));
/// assert!(!e.to_string().contains("--in-format"));
/// ```
pub fn unknown_format(path: &str, hint: &str) -> CliError {
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => CliError::usage(format!("{path}: is a directory")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => crate::io::open_error(path, path, &e),
        _ => CliError::usage(format!(
            "{path}: cannot tell the RDF format from the file name; use {hint}"
        )),
    }
}

/// True if the path names a Jelly file: it ends in `.jelly` in any case, before a
/// compression suffix (`.gz`, `.zst`, …).
///
/// ```
/// use jelly_cli::format::is_jelly_path;
/// assert!(is_jelly_path("feed.JELLY.gz"));
/// assert!(!is_jelly_path("feed.jelly.nt"));
/// ```
pub fn is_jelly_path(path: &str) -> bool {
    let (base, _) = strip_compression(path);
    base.rsplit_once('.')
        .is_some_and(|(_, ext)| ext.eq_ignore_ascii_case("jelly"))
}

/// Gives the blank nodes of `q` labels that RDF/XML can hold. Its `rdf:nodeID` is an
/// XML name, which cannot start with a digit, while the other syntaxes take `_:1a`: such
/// a label gets the [escaped](jelly::term::escaped_blank_node_label) form (`e-` and
/// hex), as labels of other characters already have (plain labels have no `-`, so
/// distinct blank nodes stay distinct).
///
/// ```
/// let mut q = oxrdf::Quad::new(
///     oxrdf::BlankNode::new_unchecked("1a"),
///     oxrdf::NamedNode::new_unchecked("http://ex.org/p"),
///     oxrdf::BlankNode::new_unchecked("b1"),
///     oxrdf::GraphName::DefaultGraph,
/// );
/// jelly_cli::format::xml_blank_node_labels(&mut q);
/// assert_eq!(q.subject.to_string(), "_:e-3161");
/// assert_eq!(q.object.to_string(), "_:b1");
/// ```
pub fn xml_blank_node_labels(q: &mut oxrdf::Quad) {
    fn fix(b: &mut oxrdf::BlankNode) {
        if b.as_str().starts_with(|c: char| c.is_ascii_digit()) {
            *b = oxrdf::BlankNode::new_unchecked(jelly::term::escaped_blank_node_label(b.as_str()));
        }
    }
    if let oxrdf::NamedOrBlankNode::BlankNode(b) = &mut q.subject {
        fix(b);
    }
    if let oxrdf::Term::BlankNode(b) = &mut q.object {
        fix(b);
    }
    if let oxrdf::GraphName::BlankNode(b) = &mut q.graph_name {
        fix(b);
    }
}

/// Why `st` cannot be written as RDF/XML, or `None`: text that XML 1.0 cannot hold
/// (control characters other than tab, line feed and carriage return), or a predicate
/// that does not end in an XML name (RDF/XML writes predicates as element names, so
/// `<http://ex.org/123>` has none). The serializer would write either as broken XML.
pub fn rdfxml_problem(st: StatementRef<'_>) -> Option<String> {
    fn bad_char(text: &str) -> Option<char> {
        text.chars().find(|&c| {
            matches!(c, '\u{0}'..='\u{8}' | '\u{B}' | '\u{C}' | '\u{E}'..='\u{1F}' | '\u{FFFE}' | '\u{FFFF}')
        })
    }
    fn check(t: TermRef<'_>) -> Option<String> {
        let texts: [Option<&str>; 2] = match t {
            TermRef::Iri(s) | TermRef::BlankNode(s) => [Some(s), None],
            TermRef::Literal(l) => match l.kind {
                LiteralKind::Simple => [Some(l.lex), None],
                LiteralKind::Lang(x) | LiteralKind::Typed(x) => [Some(l.lex), Some(x)],
            },
            TermRef::Triple(q) => return (0..3).find_map(|i| check(q.term(i))),
            TermRef::DefaultGraph => [None, None],
        };
        texts.into_iter().flatten().find_map(|s| {
            bad_char(s).map(|c| format!("U+{:04X} in {t}, which XML 1.0 cannot hold", u32::from(c)))
        })
    }
    let terms = [
        Some(st.subject),
        Some(st.predicate),
        Some(st.object),
        st.graph,
    ];
    if let Some(p) = terms.into_iter().flatten().find_map(check) {
        return Some(p);
    }
    if let TermRef::Iri(p) = st.predicate {
        // The name at the end of the IRI, as the serializer splits it: the last run of
        // XML name characters (no colon), from its first name-start character.
        let run_start = p
            .char_indices()
            .rev()
            .find(|&(_, c)| !is_xml_name_char(c) || c == ':')
            .map_or(0, |(i, c)| i + c.len_utf8());
        if !p[run_start..].chars().any(is_xml_name_start_char) {
            return Some(format!(
                "predicate <{p}> does not end in an XML name, so RDF/XML cannot write it"
            ));
        }
    }
    None
}

/// An XML `NameStartChar` other than `:`.
fn is_xml_name_start_char(c: char) -> bool {
    matches!(c,
        'A'..='Z' | '_' | 'a'..='z' | '\u{C0}'..='\u{D6}' | '\u{D8}'..='\u{F6}'
        | '\u{F8}'..='\u{2FF}' | '\u{370}'..='\u{37D}' | '\u{37F}'..='\u{1FFF}'
        | '\u{200C}'..='\u{200D}' | '\u{2070}'..='\u{218F}' | '\u{2C00}'..='\u{2FEF}'
        | '\u{3001}'..='\u{D7FF}' | '\u{F900}'..='\u{FDCF}' | '\u{FDF0}'..='\u{FFFD}'
        | '\u{10000}'..='\u{EFFFF}')
}

/// An XML `NameChar` (`:` included).
fn is_xml_name_char(c: char) -> bool {
    c == ':'
        || is_xml_name_start_char(c)
        || matches!(c, '-' | '.' | '0'..='9' | '\u{B7}' | '\u{300}'..='\u{36F}' | '\u{203F}'..='\u{2040}')
}

/// True if `name` can be declared as a prefix in Turtle and TriG (`PN_PREFIX`, or empty).
pub fn is_turtle_prefix_name(name: &str) -> bool {
    let mut chars = name.chars();
    match chars.next() {
        None => true,
        Some(first) => {
            first.is_alphabetic()
                && !name.ends_with('.')
                && chars.all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '\u{B7}'))
        }
    }
}
