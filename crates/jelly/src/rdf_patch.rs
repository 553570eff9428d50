//! The RDF Patch text format (`application/rdf-patch`), as defined by Apache Jena /
//! RDF Delta: <https://jena.apache.org/documentation/rdf-patch/>.
//!
//! A patch is a sequence of rows, one per line, each ending with ` .`:
//!
//! ```text
//! H id <uuid:0686c69d-8f89-4496-acb5-744f0157a8db> .
//! TX .
//! PA "rdf" "http://www.w3.org/1999/02/22-rdf-syntax-ns#" .
//! A <http://ex/s> <http://ex/p> "o"@en .
//! D _:b0 <http://ex/p> <<( <http://ex/a> <http://ex/b> 42 )>> <http://ex/g> .
//! TC .
//! ```
//!
//! - [`RdfPatchParser`] streams [`PatchRow`]s from any `BufRead`, one line at a time.
//! - [`RdfPatchWriter`] writes rows in the canonical form that Jena's reader accepts.
//! - [`RdfPatchValidator`] checks the structure (headers first, transactions that
//!   neither nest nor end without starting).
//!
//! Blank node labels are the stores' own identifiers and are never relabeled: `_:b0`
//! and `<_:b0>` both read as the blank node `b0`.
//!
//! ```
//! use jelly::rdf_patch::{PatchRow, RdfPatchParser, RdfPatchWriter};
//! let text = "TX .\nA <http://ex/s> <http://ex/p> _:b1 .\nTC .\n";
//! let rows: Vec<PatchRow> = RdfPatchParser::new(text.as_bytes())
//!     .collect::<Result<_, _>>()
//!     .unwrap();
//! assert_eq!(rows.len(), 3);
//! let mut w = RdfPatchWriter::new(Vec::new());
//! for row in &rows {
//!     w.write(row).unwrap();
//! }
//! // Blank nodes come out in Jena's bracketed form.
//! assert_eq!(String::from_utf8(w.finish().unwrap()).unwrap(), text.replace("_:b1", "<_:b1>"));
//! ```

use std::io::{self, BufRead, Read as _, Write};

use thiserror::Error;

use crate::nquads::{Parser, SyntaxError, write_iri, write_lex};
use crate::term::{
    Literal, LiteralKind, OwnedLiteralKind, Statement, StatementRef, Term, TermRef, Triple,
    XSD_STRING,
};

/// The media type of the RDF Patch text format.
pub const MEDIA_TYPE: &str = "application/rdf-patch";

/// Default cap on the length of one line (64 MiB), see [`RdfPatchParser::max_line_len`].
pub const DEFAULT_MAX_LINE_LEN: usize = 64 << 20;

const XSD_INTEGER: &str = "http://www.w3.org/2001/XMLSchema#integer";
const XSD_DECIMAL: &str = "http://www.w3.org/2001/XMLSchema#decimal";
const XSD_DOUBLE: &str = "http://www.w3.org/2001/XMLSchema#double";
const XSD_BOOLEAN: &str = "http://www.w3.org/2001/XMLSchema#boolean";

/// One row of an RDF Patch, owned.
///
/// ```
/// use jelly::rdf_patch::PatchRow;
/// use jelly::{Statement, Term};
/// let row = PatchRow::Add(Statement {
///     subject: Term::Iri("http://ex/s".into()),
///     predicate: Term::Iri("http://ex/p".into()),
///     object: Term::simple_literal("o"),
///     graph: None,
/// });
/// assert_eq!(row.keyword(), "A");
/// assert_eq!(row.as_ref().to_owned(), row);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PatchRow {
    /// `H key value .`: a header field (`id`, `prev`, …) with an RDF term as value.
    Header { key: String, value: Term },
    /// `TX .`: a transaction starts (`TB` is read as a synonym).
    TxStart,
    /// `TC .`: the transaction commits.
    TxCommit,
    /// `TA .`: the transaction aborts.
    TxAbort,
    /// `Z .`: a segment marker (a Jena extension, not in the published spec).
    Segment,
    /// `PA prefix iri [graph] .`: a prefix is added (the name is without its `:`).
    PrefixAdd {
        prefix: String,
        iri: String,
        graph: Option<Term>,
    },
    /// `PD prefix [graph] .`: a prefix is deleted.
    PrefixDelete { prefix: String, graph: Option<Term> },
    /// `A s p o [g] .`: a triple (`graph: None`) or quad is added.
    Add(Statement),
    /// `D s p o [g] .`: a triple (`graph: None`) or quad is deleted.
    Delete(Statement),
}

/// One row of an RDF Patch, borrowed; what [`RdfPatchWriter::write`] takes.
///
/// ```
/// use jelly::rdf_patch::{PatchRowRef, RdfPatchWriter};
/// use jelly::{StatementRef, TermRef};
/// let mut w = RdfPatchWriter::new(Vec::new());
/// let st = StatementRef::triple(TermRef::Iri("s"), TermRef::Iri("p"), TermRef::BlankNode("o"));
/// w.write(PatchRowRef::Delete(st)).unwrap();
/// assert_eq!(w.finish().unwrap(), b"D <s> <p> <_:o> .\n");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchRowRef<'a> {
    /// See [`PatchRow::Header`].
    Header { key: &'a str, value: TermRef<'a> },
    /// See [`PatchRow::TxStart`].
    TxStart,
    /// See [`PatchRow::TxCommit`].
    TxCommit,
    /// See [`PatchRow::TxAbort`].
    TxAbort,
    /// See [`PatchRow::Segment`].
    Segment,
    /// See [`PatchRow::PrefixAdd`].
    PrefixAdd {
        prefix: &'a str,
        iri: &'a str,
        graph: Option<TermRef<'a>>,
    },
    /// See [`PatchRow::PrefixDelete`].
    PrefixDelete {
        prefix: &'a str,
        graph: Option<TermRef<'a>>,
    },
    /// See [`PatchRow::Add`].
    Add(StatementRef<'a>),
    /// See [`PatchRow::Delete`].
    Delete(StatementRef<'a>),
}

impl PatchRow {
    /// Borrowed view.
    pub fn as_ref(&self) -> PatchRowRef<'_> {
        match self {
            PatchRow::Header { key, value } => PatchRowRef::Header {
                key,
                value: value.as_ref(),
            },
            PatchRow::TxStart => PatchRowRef::TxStart,
            PatchRow::TxCommit => PatchRowRef::TxCommit,
            PatchRow::TxAbort => PatchRowRef::TxAbort,
            PatchRow::Segment => PatchRowRef::Segment,
            PatchRow::PrefixAdd { prefix, iri, graph } => PatchRowRef::PrefixAdd {
                prefix,
                iri,
                graph: graph.as_ref().map(Term::as_ref),
            },
            PatchRow::PrefixDelete { prefix, graph } => PatchRowRef::PrefixDelete {
                prefix,
                graph: graph.as_ref().map(Term::as_ref),
            },
            PatchRow::Add(st) => PatchRowRef::Add(st.as_ref()),
            PatchRow::Delete(st) => PatchRowRef::Delete(st.as_ref()),
        }
    }

    /// The row's keyword: `H`, `TX`, `TC`, `TA`, `Z`, `PA`, `PD`, `A` or `D`.
    pub fn keyword(&self) -> &'static str {
        self.as_ref().keyword()
    }
}

impl<'a> PatchRowRef<'a> {
    /// Owned copy.
    pub fn to_owned(&self) -> PatchRow {
        match *self {
            PatchRowRef::Header { key, value } => PatchRow::Header {
                key: key.to_owned(),
                value: value.to_owned(),
            },
            PatchRowRef::TxStart => PatchRow::TxStart,
            PatchRowRef::TxCommit => PatchRow::TxCommit,
            PatchRowRef::TxAbort => PatchRow::TxAbort,
            PatchRowRef::Segment => PatchRow::Segment,
            PatchRowRef::PrefixAdd { prefix, iri, graph } => PatchRow::PrefixAdd {
                prefix: prefix.to_owned(),
                iri: iri.to_owned(),
                graph: graph.map(|g| g.to_owned()),
            },
            PatchRowRef::PrefixDelete { prefix, graph } => PatchRow::PrefixDelete {
                prefix: prefix.to_owned(),
                graph: graph.map(|g| g.to_owned()),
            },
            PatchRowRef::Add(st) => PatchRow::Add(st.to_owned()),
            PatchRowRef::Delete(st) => PatchRow::Delete(st.to_owned()),
        }
    }

    /// The row's keyword: `H`, `TX`, `TC`, `TA`, `Z`, `PA`, `PD`, `A` or `D`.
    pub fn keyword(&self) -> &'static str {
        match self {
            PatchRowRef::Header { .. } => "H",
            PatchRowRef::TxStart => "TX",
            PatchRowRef::TxCommit => "TC",
            PatchRowRef::TxAbort => "TA",
            PatchRowRef::Segment => "Z",
            PatchRowRef::PrefixAdd { .. } => "PA",
            PatchRowRef::PrefixDelete { .. } => "PD",
            PatchRowRef::Add(_) => "A",
            PatchRowRef::Delete(_) => "D",
        }
    }
}

impl<'a> From<&'a PatchRow> for PatchRowRef<'a> {
    fn from(row: &'a PatchRow) -> Self {
        row.as_ref()
    }
}

/// An error reading RDF Patch text. Lines and columns are 1-based; columns count
/// characters.
#[derive(Debug, Error)]
pub enum RdfPatchError {
    /// The row is not valid RDF Patch.
    #[error("line {line}, column {column}: {message}")]
    Syntax {
        line: usize,
        column: usize,
        message: String,
    },
    /// A line longer than the parser's cap (see [`RdfPatchParser::max_line_len`]).
    #[error("line {line}: longer than the limit of {limit} bytes")]
    LineTooLong { line: usize, limit: usize },
    /// The reader failed.
    #[error("line {line}: read error: {source}")]
    Io {
        line: usize,
        #[source]
        source: io::Error,
    },
}

impl RdfPatchError {
    /// The 1-based line the error is on.
    pub fn line(&self) -> usize {
        match self {
            RdfPatchError::Syntax { line, .. }
            | RdfPatchError::LineTooLong { line, .. }
            | RdfPatchError::Io { line, .. } => *line,
        }
    }

    /// The 1-based column (in characters) of a syntax error.
    pub fn column(&self) -> Option<usize> {
        match self {
            RdfPatchError::Syntax { column, .. } => Some(*column),
            _ => None,
        }
    }
}

impl From<SyntaxError> for RdfPatchError {
    fn from(e: SyntaxError) -> Self {
        RdfPatchError::Syntax {
            line: e.line,
            column: e.column,
            message: e.message,
        }
    }
}

/// Streaming RDF Patch parser: an iterator of rows over a `BufRead`.
///
/// It holds one line at a time (a row never spans lines), capped at
/// [`DEFAULT_MAX_LINE_LEN`] bytes. Blank lines and `#` comments are skipped. After the
/// first error the iterator ends.
///
/// By default statements must be strict RDF (subject an IRI, blank node or triple
/// term; predicate an IRI; graph an IRI or blank node); [`Self::generalized`] lifts
/// that. Besides N-Triples terms it reads what Jena writes: `<_:label>` blank nodes,
/// bare numbers and booleans (`42`, `1.5`, `1e3`, `true`), triple terms as
/// `<<( s p o )>>` or `<< s p o >>`.
///
/// ```
/// use jelly::rdf_patch::{PatchRow, RdfPatchParser};
/// let mut p = RdfPatchParser::new(&b"# a comment\n\nPD \"ex\" .\n"[..]);
/// let row = p.next().unwrap().unwrap();
/// assert_eq!(row, PatchRow::PrefixDelete { prefix: "ex".into(), graph: None });
/// assert_eq!(p.line(), 3);
/// assert!(p.next().is_none());
///
/// let err = RdfPatchParser::new(&b"TX .\nA <s> <p> <o>\n"[..]).nth(1).unwrap().unwrap_err();
/// assert_eq!(err.to_string(), "line 2, column 14: expected '.' at the end of the row");
/// ```
pub struct RdfPatchParser<R: BufRead> {
    reader: R,
    buf: Vec<u8>,
    lines_read: usize,
    line: usize,
    generalized: bool,
    max_line_len: usize,
    done: bool,
}

impl<R: BufRead> RdfPatchParser<R> {
    /// A strict parser over `reader`.
    pub fn new(reader: R) -> Self {
        RdfPatchParser {
            reader,
            buf: Vec::new(),
            lines_read: 0,
            line: 0,
            generalized: false,
            max_line_len: DEFAULT_MAX_LINE_LEN,
            done: false,
        }
    }

    /// Allows generalized statements (any term in any position of `A`/`D` rows and
    /// triple terms, and any term as a prefix's graph).
    pub fn generalized(mut self, yes: bool) -> Self {
        self.generalized = yes;
        self
    }

    /// Caps the length of one line in bytes (without its line break).
    pub fn max_line_len(mut self, bytes: usize) -> Self {
        self.max_line_len = bytes;
        self
    }

    /// The 1-based line of the row last returned (0 before the first).
    pub fn line(&self) -> usize {
        self.line
    }

    /// Reads the next line into `buf`, without its line break. `false` at the end.
    fn read_line(&mut self) -> Result<bool, RdfPatchError> {
        self.buf.clear();
        // Room for the longest allowed line plus "\r\n".
        let cap = (self.max_line_len as u64).saturating_add(2);
        let n = (&mut self.reader)
            .take(cap)
            .read_until(b'\n', &mut self.buf)
            .map_err(|source| RdfPatchError::Io {
                line: self.lines_read + 1,
                source,
            })?;
        if n == 0 {
            return Ok(false);
        }
        self.lines_read += 1;
        let ended = self.buf.last() == Some(&b'\n');
        if ended {
            self.buf.pop();
            if self.buf.last() == Some(&b'\r') {
                self.buf.pop();
            }
        }
        if self.buf.len() > self.max_line_len {
            return Err(RdfPatchError::LineTooLong {
                line: self.lines_read,
                limit: self.max_line_len,
            });
        }
        Ok(true)
    }
}

impl<R: BufRead> Iterator for RdfPatchParser<R> {
    type Item = Result<PatchRow, RdfPatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            match self.read_line() {
                Ok(true) => {}
                Ok(false) => {
                    self.done = true;
                    return None;
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
            let text = match std::str::from_utf8(&self.buf) {
                Ok(t) => t,
                Err(e) => {
                    self.done = true;
                    let valid = &self.buf[..e.valid_up_to()];
                    let column = String::from_utf8_lossy(valid).chars().count() + 1;
                    return Some(Err(RdfPatchError::Syntax {
                        line: self.lines_read,
                        column,
                        message: "invalid UTF-8".to_owned(),
                    }));
                }
            };
            let text = if self.lines_read == 1 {
                text.strip_prefix('\u{feff}').unwrap_or(text)
            } else {
                text
            };
            match parse_row(text, self.lines_read, self.generalized) {
                Ok(None) => {}
                Ok(Some(row)) => {
                    self.line = self.lines_read;
                    return Some(Ok(row));
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
        None
    }
}

/// Parses a whole patch held in memory (strict RDF).
///
/// ```
/// let rows = jelly::rdf_patch::parse_str("H id <uuid:1> .\nTX .\nTC .\n").unwrap();
/// assert_eq!(rows.len(), 3);
/// ```
pub fn parse_str(text: &str) -> Result<Vec<PatchRow>, RdfPatchError> {
    RdfPatchParser::new(text.as_bytes()).collect()
}

/// Where a term stands, for the strict-RDF checks.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Subject,
    Predicate,
    Object,
    Graph,
    HeaderValue,
}

struct RowParser<'a> {
    p: Parser<'a>,
    line: usize,
    generalized: bool,
}

/// Parses one line; `Ok(None)` for blank and comment lines.
fn parse_row(
    text: &str,
    line: usize,
    generalized: bool,
) -> Result<Option<PatchRow>, RdfPatchError> {
    let mut p = Parser::new(text, line);
    p.bnode_iris = true;
    let mut r = RowParser {
        p,
        line,
        generalized,
    };
    r.p.ws();
    if r.p.eof() || r.p.peek() == Some('#') {
        return Ok(None);
    }
    let kw_start = r.p.pos;
    let kw_len =
        r.p.rest()
            .bytes()
            .take_while(u8::is_ascii_alphanumeric)
            .count();
    if kw_len == 0 {
        return Err(r.err_at(
            kw_start,
            "expected a row keyword (H, TX, TC, TA, PA, PD, A or D)",
        ));
    }
    r.p.pos += kw_len;
    let kw = &text[kw_start..kw_start + kw_len];
    let row = match kw {
        "H" => {
            r.p.ws();
            let key = r.header_key()?;
            r.p.ws();
            if r.at_row_end() {
                return Err(r.err("a header row needs a value: H key value ."));
            }
            let value = r.term(Role::HeaderValue)?;
            PatchRow::Header { key, value }
        }
        "TX" | "TB" => PatchRow::TxStart,
        "TC" => PatchRow::TxCommit,
        "TA" => PatchRow::TxAbort,
        "Z" => PatchRow::Segment,
        "PA" => {
            r.p.ws();
            let prefix = r.prefix_name()?;
            r.p.ws();
            let iri = r.prefix_iri()?;
            let graph = r.optional_graph()?;
            PatchRow::PrefixAdd { prefix, iri, graph }
        }
        "PD" => {
            r.p.ws();
            let prefix = r.prefix_name()?;
            let graph = r.optional_graph()?;
            PatchRow::PrefixDelete { prefix, graph }
        }
        "A" | "D" => {
            let st = r.statement(kw)?;
            if kw == "A" {
                PatchRow::Add(st)
            } else {
                PatchRow::Delete(st)
            }
        }
        _ => {
            return Err(r.err_at(
                kw_start,
                &format!("unknown row keyword '{kw}' (expected H, TX, TC, TA, PA, PD, A or D)"),
            ));
        }
    };
    r.p.ws();
    if r.p.peek() != Some('.') {
        return Err(r.err("expected '.' at the end of the row"));
    }
    r.p.pos += 1;
    r.p.ws();
    if !(r.p.eof() || r.p.peek() == Some('#')) {
        return Err(r.err("unexpected text after the '.' that ends the row"));
    }
    Ok(Some(row))
}

/// PN_CHARS_BASE of Turtle.
fn is_pn_chars_base(c: char) -> bool {
    matches!(c,
        'A'..='Z' | 'a'..='z' | '\u{C0}'..='\u{D6}' | '\u{D8}'..='\u{F6}' | '\u{F8}'..='\u{2FF}'
        | '\u{370}'..='\u{37D}' | '\u{37F}'..='\u{1FFF}' | '\u{200C}'..='\u{200D}'
        | '\u{2070}'..='\u{218F}' | '\u{2C00}'..='\u{2FEF}' | '\u{3001}'..='\u{D7FF}'
        | '\u{F900}'..='\u{FDCF}' | '\u{FDF0}'..='\u{FFFD}' | '\u{10000}'..='\u{EFFFF}')
}

/// PN_CHARS of Turtle.
fn is_pn_chars(c: char) -> bool {
    is_pn_chars_base(c)
        || matches!(c, '_' | '-' | '0'..='9' | '\u{B7}' | '\u{300}'..='\u{36F}' | '\u{203F}'..='\u{2040}')
}

/// Length in bytes of `(PN_CHARS | '.')*` at the start of `s`, without trailing dots.
fn pn_tail_len(s: &str) -> usize {
    let mut end = 0;
    let mut len = 0;
    for c in s.chars() {
        if c == '.' {
            len += 1;
        } else if is_pn_chars(c) {
            len += c.len_utf8();
            end = len;
        } else {
            break;
        }
    }
    end
}

impl<'a> RowParser<'a> {
    fn err_at(&self, pos: usize, msg: &str) -> RdfPatchError {
        let s = self.p.s;
        RdfPatchError::Syntax {
            line: self.line,
            column: s[..pos.min(s.len())].chars().count() + 1,
            message: msg.to_owned(),
        }
    }

    fn err(&self, msg: &str) -> RdfPatchError {
        self.err_at(self.p.pos, msg)
    }

    fn next_is_digit(&self) -> bool {
        self.p
            .rest()
            .as_bytes()
            .get(1)
            .is_some_and(u8::is_ascii_digit)
    }

    /// At the end of a row's items: `.` (not a `.5` decimal), a comment or the line end.
    fn at_row_end(&self) -> bool {
        match self.p.peek() {
            None | Some('#') => true,
            Some('.') => !self.next_is_digit(),
            _ => false,
        }
    }

    /// After a bare word or number: the token must end here.
    fn at_delimiter(&self) -> bool {
        match self.p.peek() {
            None => true,
            Some(c) => c.is_whitespace() || matches!(c, '.' | ')' | '>' | '<' | '"' | '#'),
        }
    }

    /// A bare word `PN_CHARS_BASE ((PN_CHARS | '.')* PN_CHARS)?`, or `None`.
    fn word(&mut self) -> Option<&'a str> {
        let s: &'a str = self.p.s;
        let rest = &s[self.p.pos..];
        let first = rest.chars().next().filter(|&c| is_pn_chars_base(c))?;
        let len = first.len_utf8() + pn_tail_len(&rest[first.len_utf8()..]);
        let start = self.p.pos;
        self.p.pos += len;
        Some(&s[start..start + len])
    }

    /// A plain string `"…"` (no language tag or datatype).
    fn plain_string(&mut self, what: &str) -> Result<String, RdfPatchError> {
        let start = self.p.pos;
        match self.p.term()? {
            Term::Literal(Literal {
                lex,
                kind: OwnedLiteralKind::Simple,
            }) => Ok(lex),
            _ => Err(self.err_at(
                start,
                &format!("{what} must be a plain string, without language tag or datatype"),
            )),
        }
    }

    fn header_key(&mut self) -> Result<String, RdfPatchError> {
        if self.p.peek() == Some('"') {
            return self.plain_string("a header key");
        }
        let start = self.p.pos;
        match self.word() {
            Some(w) if self.at_delimiter() => Ok(w.to_owned()),
            _ => Err(self.err_at(
                start,
                "expected a header key: a word such as id or prev, or a quoted string",
            )),
        }
    }

    /// `"rdf"` (Jena's form), `rdf` or `rdf:`; `""` or `:` for the empty prefix.
    fn prefix_name(&mut self) -> Result<String, RdfPatchError> {
        if self.p.peek() == Some('"') {
            return self.plain_string("a prefix name");
        }
        let start = self.p.pos;
        let name = self.word().unwrap_or_default().to_owned();
        if self.p.peek() == Some(':') {
            self.p.pos += 1;
        }
        if self.p.pos == start || !self.at_delimiter() {
            return Err(self.err_at(
                start,
                "expected a prefix name: a quoted string such as \"rdf\", or rdf or rdf:",
            ));
        }
        Ok(name)
    }

    /// `<iri>` or `"iri"`.
    fn prefix_iri(&mut self) -> Result<String, RdfPatchError> {
        let start = self.p.pos;
        match self.p.peek() {
            Some('"') => self.plain_string("a prefix IRI"),
            Some('<') if !self.p.rest().starts_with("<<") => match self.p.term()? {
                Term::Iri(iri) => Ok(iri),
                _ => Err(self.err_at(start, "expected the prefix IRI")),
            },
            _ => Err(self.err_at(
                start,
                "expected the prefix IRI, as <iri> or as a quoted string",
            )),
        }
    }

    fn optional_graph(&mut self) -> Result<Option<Term>, RdfPatchError> {
        self.p.ws();
        if self.at_row_end() {
            return Ok(None);
        }
        self.term(Role::Graph).map(Some)
    }

    /// The 3 or 4 terms of an `A` or `D` row, up to (not including) the final `.`.
    fn statement(&mut self, kw: &str) -> Result<Statement, RdfPatchError> {
        const ROLES: [Role; 4] = [Role::Subject, Role::Predicate, Role::Object, Role::Graph];
        let mut terms: [Option<Term>; 4] = [None, None, None, None];
        let a = if kw == "A" { "an" } else { "a" };
        let mut n = 0;
        loop {
            self.p.ws();
            if self.at_row_end() {
                break;
            }
            if n == 4 {
                return Err(self.err(&format!(
                    "too many terms: {a} {kw} row has 3 (a triple) or 4 (a quad)"
                )));
            }
            terms[n] = Some(self.term(ROLES[n])?);
            n += 1;
        }
        let [Some(s), Some(p), Some(o), g] = terms else {
            if self.p.peek() == Some('.') {
                return Err(self.err(&format!(
                    "{a} {kw} row needs 3 terms (a triple) or 4 (a quad), found {n}"
                )));
            }
            return Err(self.err("expected '.' at the end of the row"));
        };
        Ok(Statement {
            subject: s,
            predicate: p,
            object: o,
            graph: g,
        })
    }

    /// One RDF term, checked for its role unless generalized.
    fn term(&mut self, role: Role) -> Result<Term, RdfPatchError> {
        let start = self.p.pos;
        let rest = self.p.rest();
        let t = if rest.starts_with("<<") {
            self.triple_term()?
        } else {
            match self.p.peek() {
                Some('<') => match self.p.term()? {
                    // Jena writes blank nodes as <_:label>.
                    Term::Iri(iri) if iri.starts_with("_:") => Term::BlankNode(iri[2..].to_owned()),
                    t => t,
                },
                Some('"') => self.p.term()?,
                Some('_') => self.blank_node()?,
                Some(c) if c.is_ascii_digit() || matches!(c, '+' | '-' | '.') => self.number()?,
                _ => self.boolean()?,
            }
        };
        if !self.generalized {
            self.check_role(&t, role, start)?;
        }
        Ok(t)
    }

    fn check_role(&self, t: &Term, role: Role, start: usize) -> Result<(), RdfPatchError> {
        let ok = match role {
            Role::Subject => matches!(t, Term::Iri(_) | Term::BlankNode(_) | Term::Triple(_)),
            Role::Predicate => matches!(t, Term::Iri(_)),
            Role::Graph => matches!(t, Term::Iri(_) | Term::BlankNode(_)),
            Role::Object | Role::HeaderValue => true,
        };
        if ok {
            return Ok(());
        }
        let place = match role {
            Role::Subject => "the subject",
            Role::Predicate => "the predicate",
            _ => "a graph name",
        };
        Err(self.err_at(
            start,
            &format!(
                "a {} cannot be {place} (only with generalized statements)",
                t.as_ref().kind_name()
            ),
        ))
    }

    /// `<<( s p o )>>` (RDF 1.2, what Jena writes) or `<< s p o >>` (RDF-star).
    fn triple_term(&mut self) -> Result<Term, RdfPatchError> {
        // Each level recurses: a line of thousands would overflow the stack. The limit
        // is the one N-Triples and N-Quads lines have.
        if self.p.depth >= crate::text_nesting::MAX_TEXT_NESTING {
            return Err(self.err(&format!(
                "triple terms nested deeper than {} levels",
                crate::text_nesting::MAX_TEXT_NESTING
            )));
        }
        self.p.depth += 1;
        let paren = self.p.rest().starts_with("<<(");
        self.p.pos += if paren { 3 } else { 2 };
        self.p.ws();
        let subject = self.term(Role::Subject)?;
        self.p.ws();
        let predicate = self.term(Role::Predicate)?;
        self.p.ws();
        let object = self.term(Role::Object)?;
        self.p.depth -= 1;
        self.p.ws();
        let close = if paren { ")>>" } else { ">>" };
        if !self.p.rest().starts_with(close) {
            return Err(self.err(&format!("expected '{close}' to close the triple term")));
        }
        self.p.pos += close.len();
        Ok(Term::Triple(Box::new(Triple {
            subject,
            predicate,
            object,
        })))
    }

    /// `_:label`, with N-Triples' label rules.
    fn blank_node(&mut self) -> Result<Term, RdfPatchError> {
        if !self.p.rest().starts_with("_:") {
            return Err(self.err("expected '_:' for a blank node"));
        }
        self.p.pos += 2;
        let rest = self.p.rest();
        let Some(first) = rest
            .chars()
            .next()
            .filter(|&c| c == '_' || c.is_ascii_digit() || is_pn_chars_base(c))
        else {
            return Err(self.err("a blank node label starts with a letter, a digit or '_'"));
        };
        let len = first.len_utf8() + pn_tail_len(&rest[first.len_utf8()..]);
        let label = rest[..len].to_owned();
        self.p.pos += len;
        Ok(Term::BlankNode(label))
    }

    /// A Turtle number as Jena writes it: `42`, `-1.5`, `.5`, `1e3`, `1.e-3`.
    fn number(&mut self) -> Result<Term, RdfPatchError> {
        let start = self.p.pos;
        let b = self.p.s.as_bytes();
        let digits = |mut i: usize| {
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            i
        };
        // End of an exponent starting at `i`, if there is one.
        let exponent = |i: usize| {
            if !matches!(b.get(i), Some(b'e' | b'E')) {
                return None;
            }
            let j = i + 1 + usize::from(matches!(b.get(i + 1), Some(b'+' | b'-')));
            let end = digits(j);
            (end > j).then_some(end)
        };
        let mut i = start + usize::from(matches!(b.get(start), Some(b'+' | b'-')));
        let int_end = digits(i);
        let has_int = int_end > i;
        i = int_end;
        let mut fraction = false;
        if b.get(i) == Some(&b'.') {
            if b.get(i + 1).is_some_and(u8::is_ascii_digit) {
                i = digits(i + 1);
                fraction = true;
            } else if has_int && exponent(i + 1).is_some() {
                i += 1;
                fraction = true;
            }
        }
        if !has_int && !fraction {
            return Err(self.err_at(start, "expected an RDF term"));
        }
        let datatype = match exponent(i) {
            Some(end) => {
                i = end;
                XSD_DOUBLE
            }
            None if fraction => XSD_DECIMAL,
            None => XSD_INTEGER,
        };
        self.p.pos = i;
        if !self.at_delimiter() {
            return Err(self.err_at(start, "malformed number"));
        }
        Ok(Term::Literal(Literal {
            lex: self.p.s[start..i].to_owned(),
            kind: OwnedLiteralKind::Typed(datatype.to_owned()),
        }))
    }

    /// `true` or `false`, else the "expected a term" error.
    fn boolean(&mut self) -> Result<Term, RdfPatchError> {
        let start = self.p.pos;
        for word in ["true", "false"] {
            if self.p.rest().starts_with(word) {
                self.p.pos += word.len();
                if self.at_delimiter() {
                    return Ok(Term::Literal(Literal {
                        lex: word.to_owned(),
                        kind: OwnedLiteralKind::Typed(XSD_BOOLEAN.to_owned()),
                    }));
                }
                self.p.pos = start;
            }
        }
        Err(self.err(
            "expected an RDF term (<iri>, _:blank, \"literal\", number, boolean or <<( triple )>>)",
        ))
    }
}

/// A row that cannot be written as RDF Patch text, or a write failure.
#[derive(Debug, Error)]
pub enum RdfPatchWriteError {
    /// The output failed.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// The row holds something the text format cannot express.
    #[error("cannot write this row as RDF Patch: {0}")]
    Unrepresentable(String),
}

/// Streaming RDF Patch writer, producing one canonical line per row.
///
/// The form is the one Apache Jena's reader accepts (and its writer produces): single
/// spaces, ` .` at the end, prefix rows as `PA "name" "iri" .`, triple terms as
/// `<<( s p o )>>`, header keys as bare words (quoted when they are not words).
/// Blank nodes keep their labels and are written as `<_:label>`, Jena's form, which
/// Jena reads back exactly (its reader mangles `_:label`). A statement whose graph is
/// [`TermRef::DefaultGraph`] is written as a triple. One line buffer is reused, so
/// writing does not allocate per row.
///
/// ```
/// use jelly::rdf_patch::{PatchRowRef, RdfPatchWriter};
/// let mut w = RdfPatchWriter::new(Vec::new());
/// w.write(PatchRowRef::TxStart).unwrap();
/// w.write(PatchRowRef::PrefixAdd { prefix: "ex", iri: "http://ex/", graph: None }).unwrap();
/// w.write(PatchRowRef::TxCommit).unwrap();
/// let text = String::from_utf8(w.finish().unwrap()).unwrap();
/// assert_eq!(text, "TX .\nPA \"ex\" \"http://ex/\" .\nTC .\n");
/// ```
pub struct RdfPatchWriter<W: Write> {
    out: W,
    line: String,
}

impl<W: Write> RdfPatchWriter<W> {
    /// A writer to `out` (wrap it in a `BufWriter` for files).
    pub fn new(out: W) -> Self {
        RdfPatchWriter {
            out,
            line: String::with_capacity(256),
        }
    }

    /// Writes one row. Nothing is written if the row cannot be represented.
    pub fn write<'r>(&mut self, row: impl Into<PatchRowRef<'r>>) -> Result<(), RdfPatchWriteError> {
        self.line.clear();
        format_row(&mut self.line, row.into())?;
        self.line.push('\n');
        self.out.write_all(self.line.as_bytes())?;
        Ok(())
    }

    /// The inner writer.
    pub fn get_ref(&self) -> &W {
        &self.out
    }

    /// Flushes and returns the inner writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// Writes rows to a string.
///
/// ```
/// use jelly::rdf_patch::{to_string, PatchRow};
/// assert_eq!(to_string(&[PatchRow::TxStart, PatchRow::TxAbort]).unwrap(), "TX .\nTA .\n");
/// ```
pub fn to_string<'r>(
    rows: impl IntoIterator<Item = impl Into<PatchRowRef<'r>>>,
) -> Result<String, RdfPatchWriteError> {
    let mut out = String::new();
    for row in rows {
        format_row(&mut out, row.into())?;
        out.push('\n');
    }
    Ok(out)
}

fn format_row(out: &mut String, row: PatchRowRef<'_>) -> Result<(), RdfPatchWriteError> {
    out.push_str(row.keyword());
    match row {
        PatchRowRef::Header { key, value } => {
            out.push(' ');
            let bare = key.starts_with(|c: char| c.is_ascii_alphabetic())
                && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            if bare {
                out.push_str(key);
            } else {
                let _ = write_lex(out, key);
            }
            out.push(' ');
            write_term(out, value)?;
        }
        PatchRowRef::TxStart
        | PatchRowRef::TxCommit
        | PatchRowRef::TxAbort
        | PatchRowRef::Segment => {}
        PatchRowRef::PrefixAdd { prefix, iri, graph } => {
            out.push(' ');
            let _ = write_lex(out, prefix);
            out.push(' ');
            let _ = write_lex(out, iri);
            write_graph(out, graph)?;
        }
        PatchRowRef::PrefixDelete { prefix, graph } => {
            out.push(' ');
            let _ = write_lex(out, prefix);
            write_graph(out, graph)?;
        }
        PatchRowRef::Add(st) | PatchRowRef::Delete(st) => {
            for t in [st.subject, st.predicate, st.object] {
                out.push(' ');
                write_term(out, t)?;
            }
            write_graph(out, st.graph)?;
        }
    }
    out.push_str(" .");
    Ok(())
}

fn write_graph(out: &mut String, graph: Option<TermRef<'_>>) -> Result<(), RdfPatchWriteError> {
    match graph {
        None | Some(TermRef::DefaultGraph) => Ok(()),
        Some(g) => {
            out.push(' ');
            write_term(out, g)
        }
    }
}

fn write_term(out: &mut String, t: TermRef<'_>) -> Result<(), RdfPatchWriteError> {
    match t {
        TermRef::Iri(iri) => {
            if iri.starts_with("_:") {
                return Err(RdfPatchWriteError::Unrepresentable(format!(
                    "the IRI <{iri}> would read back as a blank node"
                )));
            }
            let _ = write_iri(out, iri);
        }
        TermRef::BlankNode(label) => {
            // Always Jena's bracketed form: Apache Jena 5.6's reader drops the first
            // character of a `_:label` blank node, but reads `<_:label>` exactly (and
            // its own writer produces it). Our parser reads both forms.
            let _ = write_iri(out, &format!("_:{label}"));
        }
        TermRef::Literal(l) => {
            let _ = write_lex(out, l.lex);
            match l.kind {
                LiteralKind::Simple => {}
                LiteralKind::Lang(tag) => {
                    if tag.is_empty()
                        || !tag.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                    {
                        return Err(RdfPatchWriteError::Unrepresentable(format!(
                            "invalid language tag {tag:?}"
                        )));
                    }
                    out.push('@');
                    out.push_str(tag);
                }
                LiteralKind::Typed(dt) if dt == XSD_STRING => {}
                LiteralKind::Typed(dt) => {
                    out.push_str("^^");
                    let _ = write_iri(out, dt);
                }
            }
        }
        TermRef::Triple(tr) => {
            out.push_str("<<(");
            for i in 0..3 {
                out.push(' ');
                write_term(out, tr.term(i))?;
            }
            out.push_str(" )>>");
        }
        TermRef::DefaultGraph => {
            return Err(RdfPatchWriteError::Unrepresentable(
                "the default graph can only stand as a statement's graph".to_owned(),
            ));
        }
    }
    Ok(())
}

/// A structural rule of RDF Patch that a row breaks.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ViolationKind {
    /// `TX` while a transaction is open: transactions do not nest.
    #[error("TX inside the transaction started on line {open_line} (transactions do not nest)")]
    NestedTransaction { open_line: usize },
    /// `TC` with no open transaction.
    #[error("TC without a transaction started by TX")]
    CommitOutsideTransaction,
    /// `TA` with no open transaction.
    #[error("TA without a transaction started by TX")]
    AbortOutsideTransaction,
    /// The patch ends inside a transaction (reported on its `TX` line).
    #[error("the transaction started here is not ended by TC or TA")]
    UnterminatedTransaction,
    /// An `H` row after the header, which ends at the first non-`H` row.
    #[error("header row after the header, which ended on line {first_change_line}")]
    HeaderAfterChanges { first_change_line: usize },
}

/// A [`ViolationKind`] at a 1-based line.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("line {line}: {kind}")]
pub struct Violation {
    pub line: usize,
    pub kind: ViolationKind,
}

/// Checks a patch's structure as the spec describes it: a header (possibly empty),
/// then change blocks, where an explicit transaction is `TX`, changes, then `TC` or
/// `TA`.
///
/// - `H` rows come before every other row ("the header is ended by the first non `H`
///   line"). Jena's reader itself tolerates later headers, and the spec's "preferred
///   style" speaks of headers placed before the item they refer to, so
///   [`Self::allow_late_headers`] turns this check off.
/// - `TX` does not open a transaction inside another; `TC` and `TA` end an open one;
///   a transaction open at the end of the patch is reported.
///
/// Changes outside `TX`…`TC` are valid: the spec makes explicit transactions optional
/// (the patch is then applied atomically), so mixing is not flagged. `Z` (segment)
/// ends a patch and the next one begins: a transaction open at it is reported, and
/// the next patch may have its own header (a log of patches written one after the
/// other, as `jelly patch from-jelly --patch-separator segment` writes it).
///
/// ```
/// use jelly::rdf_patch::{parse_str, RdfPatchValidator, ViolationKind};
/// let rows = parse_str("TX .\nTX .\nTC .\n").unwrap();
/// let mut v = RdfPatchValidator::new();
/// let found: Vec<_> = rows.iter().enumerate().filter_map(|(i, r)| v.check(i + 1, r)).collect();
/// assert_eq!(found[0].line, 2);
/// assert_eq!(found[0].kind, ViolationKind::NestedTransaction { open_line: 1 });
/// assert!(v.finish().is_none());
/// ```
#[derive(Debug, Clone, Default)]
pub struct RdfPatchValidator {
    open_tx: Option<usize>,
    first_change_line: Option<usize>,
    allow_late_headers: bool,
}

impl RdfPatchValidator {
    /// A validator with every check on.
    pub fn new() -> Self {
        Self::default()
    }

    /// Accepts `H` rows after the first non-header row.
    pub fn allow_late_headers(mut self, yes: bool) -> Self {
        self.allow_late_headers = yes;
        self
    }

    /// Checks the row at 1-based `line`, in order.
    pub fn check<'r>(&mut self, line: usize, row: impl Into<PatchRowRef<'r>>) -> Option<Violation> {
        let row = row.into();
        if row == PatchRowRef::Segment {
            // The patch ends here; the next starts afresh, header included.
            self.first_change_line = None;
            return self.open_tx.take().map(|tx_line| Violation {
                line: tx_line,
                kind: ViolationKind::UnterminatedTransaction,
            });
        }
        let kind = match row {
            PatchRowRef::Header { .. } => match self.first_change_line {
                Some(first_change_line) if !self.allow_late_headers => {
                    Some(ViolationKind::HeaderAfterChanges { first_change_line })
                }
                _ => None,
            },
            PatchRowRef::TxStart => match self.open_tx {
                Some(open_line) => Some(ViolationKind::NestedTransaction { open_line }),
                None => {
                    self.open_tx = Some(line);
                    None
                }
            },
            PatchRowRef::TxCommit | PatchRowRef::TxAbort => match self.open_tx.take() {
                Some(_) => None,
                None if row == PatchRowRef::TxCommit => {
                    Some(ViolationKind::CommitOutsideTransaction)
                }
                None => Some(ViolationKind::AbortOutsideTransaction),
            },
            _ => None,
        };
        if !matches!(row, PatchRowRef::Header { .. }) {
            self.first_change_line.get_or_insert(line);
        }
        kind.map(|kind| Violation { line, kind })
    }

    /// Ends the check: reports a transaction left open.
    pub fn finish(self) -> Option<Violation> {
        self.open_tx.map(|line| Violation {
            line,
            kind: ViolationKind::UnterminatedTransaction,
        })
    }
}

/// Parses a patch (strict RDF) and returns its structural violations, in order.
///
/// ```
/// let v = jelly::rdf_patch::validate(&b"TX .\nA <s> <p> <o> .\nH id <x> .\n"[..]).unwrap();
/// let lines: Vec<usize> = v.iter().map(|v| v.line).collect();
/// assert_eq!(lines, [3, 1]); // late header; TX never ended
/// ```
pub fn validate(reader: impl BufRead) -> Result<Vec<Violation>, RdfPatchError> {
    let mut parser = RdfPatchParser::new(reader);
    let mut validator = RdfPatchValidator::new();
    let mut found = Vec::new();
    while let Some(row) = parser.next() {
        found.extend(validator.check(parser.line(), &row?));
    }
    found.extend(validator.finish());
    Ok(found)
}
