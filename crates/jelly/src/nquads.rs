//! N-Triples / N-Quads with RDF-star quoted triples and generalized statements.
//!
//! Read leniently ([`parse_line`], [`LineParser::default`]) it holds what oxttl cannot:
//! generalized statements (literals as subjects, blank nodes as predicates, …) and
//! RDF-star quoted triples in subject position, both of which Jelly-RDF 1.1 streams may
//! carry (the conformance suite's expected outputs use both). Read strictly
//! ([`LineParser::strict`]) it refuses what oxttl refuses, faster: the CLI's `to-jelly`
//! and the server's publish ingest read standard N-Triples / N-Quads so.

use std::fmt;
use std::io::{self, Write};

use thiserror::Error;

use crate::strict_terms::StrictTerms;
use crate::term::{
    LiteralKind, LiteralRef, Statement, StatementRef, Term, TermRef, Triple, XSD_STRING,
};

/// A syntax error with its 1-based line and column (in characters).
#[derive(Debug, Error, PartialEq, Eq)]
#[error("line {line}, column {column}: {message}")]
pub struct SyntaxError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// Parses a whole document of N-Triples or N-Quads (generalized, with `<< >>`).
///
/// A `"lex"^^xsd:string` literal is read as a simple literal (they are the same term in RDF 1.1).
///
/// ```
/// let st = jelly::nquads::parse_document("\"lit\" _:p << <s> <p> <o> >> <g> .\n").unwrap();
/// assert_eq!(st.len(), 1);
/// assert!(st[0].graph.is_some());
/// ```
pub fn parse_document(text: &str) -> Result<Vec<Statement>, SyntaxError> {
    let mut out = Vec::new();
    for (i, line) in lines(text).enumerate() {
        if let Some(st) = parse_line(line, i + 1)? {
            out.push(st);
        }
    }
    Ok(out)
}

/// The lines of `text`, ended by LF, CRLF or a lone CR (N-Triples' EOL is
/// `[#xD#xA]+`; [`str::lines`] would keep a lone CR inside a line), found with a
/// vectorized search: on the publish path of text formats, that search was a tenth of
/// the time with the standard one.
///
/// ```
/// let lines: Vec<&str> = jelly::nquads::lines("<a> <b> <c> .\r\n\n<d> <e> <f> .\r<g> <h> <i> .").collect();
/// assert_eq!(lines, ["<a> <b> <c> .", "", "<d> <e> <f> .", "<g> <h> <i> ."]);
/// ```
pub fn lines(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let b = rest.as_bytes();
        let Some(i) = memchr::memchr2(b'\n', b'\r', b) else {
            // The last line, without a line break: kept whole, as `str::lines` keeps it.
            return Some(std::mem::take(&mut rest));
        };
        let line = &rest[..i];
        let end = if b[i] == b'\r' && b.get(i + 1) == Some(&b'\n') {
            i + 2
        } else {
            i + 1
        };
        rest = &rest[end..];
        Some(line)
    })
}

/// Parses one line. `Ok(None)` for blank and comment lines.
pub fn parse_line(line: &str, line_no: usize) -> Result<Option<Statement>, SyntaxError> {
    parse_owned(&mut Parser::new(line, line_no))
}

/// One line with `p` (lenient or strict), into an owned statement.
fn parse_owned(p: &mut Parser<'_>) -> Result<Option<Statement>, SyntaxError> {
    Ok(statement_terms(p, |p, index| {
        let start = p.pos;
        let t = p.term()?;
        p.check_position(index, TermKind::of(&t.as_ref()), start)?;
        Ok(t)
    })?
    .map(|(s, pr, o, g)| Statement {
        subject: s,
        predicate: pr,
        object: o,
        graph: g,
    }))
}

/// The three or four terms of one statement line, each read by `term` (given the
/// term's position: 0 for the subject, … 3 for the graph); `None` for a blank or
/// comment line.
#[allow(clippy::type_complexity)]
fn statement_terms<'a, T>(
    p: &mut Parser<'a>,
    mut term: impl FnMut(&mut Parser<'a>, usize) -> Result<T, SyntaxError>,
) -> Result<Option<(T, T, T, Option<T>)>, SyntaxError> {
    p.ws();
    if p.eof() || p.peek() == Some('#') {
        return Ok(None);
    }
    let mut terms: [Option<T>; 4] = [None, None, None, None];
    let mut n = 0;
    loop {
        p.ws();
        match p.peek() {
            Some('.') => {
                p.pos += 1;
                break;
            }
            None => return Err(p.err("expected '.' at the end of the statement")),
            _ => {
                let t = term(p, n)?;
                let Some(slot) = terms.get_mut(n) else {
                    return Err(p.err("more than four terms in a statement"));
                };
                *slot = Some(t);
                n += 1;
            }
        }
    }
    p.ws();
    if !(p.eof() || p.peek() == Some('#')) {
        return Err(p.err("unexpected text after '.'"));
    }
    match terms {
        [Some(s), Some(pr), Some(o), g] => Ok(Some((s, pr, o, g))),
        _ => Err(p.err("a statement needs at least three terms")),
    }
}

/// Parses lines into statements that borrow from the line, for the publish path of the
/// server: a string is copied only when it has escapes (into a buffer reused from line
/// to line), so most lines allocate nothing. Lines with RDF-star quoted triples take the
/// owned path of [`parse_line`].
///
/// ```
/// let mut p = jelly::nquads::LineParser::default();
/// let st = p.parse("<http://s> <http://p> \"caf\\u00E9\"@fr .", 1).unwrap().unwrap();
/// assert_eq!(st.to_string(), "<http://s> <http://p> \"café\"@fr .");
/// assert!(p.parse("# a comment", 2).unwrap().is_none());
/// ```
///
/// [`LineParser::default`] reads as [`parse_line`] does (any IRI text, any term in any
/// position, quoted triples); [`LineParser::strict`] reads standard N-Triples / N-Quads
/// as oxttl does (see [`crate::strict_terms`]).
pub struct LineParser {
    /// Unescaped strings of the current line.
    scratch: String,
    /// The current line's statement, when it has quoted triples.
    owned: Option<Statement>,
    /// The term checks of strict reading, with their cache; `None` when lenient.
    strict: Option<StrictTerms>,
    /// What is allowed beyond standard statements.
    extensions: Extensions,
}

/// What a [strict](LineParser::strict) parser allows beyond standard statements (a
/// lenient one allows both).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Extensions {
    /// RDF-star quoted triples `<< s p o >>` and RDF 1.2 triple terms `<<( s p o )>>`,
    /// as subject or object.
    pub quoted_triples: bool,
    /// Generalized statements: any term in any position (a literal as subject, a blank
    /// node as predicate, …).
    pub generalized: bool,
}

impl Default for LineParser {
    fn default() -> Self {
        LineParser {
            scratch: String::new(),
            owned: None,
            strict: None,
            extensions: Extensions {
                quoted_triples: true,
                generalized: true,
            },
        }
    }
}

impl LineParser {
    /// A parser of standard N-Triples / N-Quads that refuses what oxttl refuses
    /// (invalid or relative IRIs, malformed language tags, blank node labels outside
    /// the grammar, terms out of their positions) and allows what `extensions` names.
    ///
    /// ```
    /// use jelly::nquads::{Extensions, LineParser};
    /// let mut p = LineParser::strict(Extensions::default());
    /// assert!(p.parse("<http://s> <http://p> \"x\"@en-GB .", 1).is_ok());
    /// let e = p.parse("<http://s> <http://p> \"x\"@en-abcdefghi .", 2).unwrap_err();
    /// assert_eq!((e.line, e.column), (2, 27));
    /// assert!(p.parse("<http://s:port> <http://p> <http://o> .", 3).is_err());
    /// ```
    pub fn strict(extensions: Extensions) -> Self {
        LineParser {
            strict: Some(StrictTerms::default()),
            extensions,
            ..LineParser::default()
        }
    }

    /// Parses one line; `Ok(None)` for blank and comment lines. Errors as [`parse_line`].
    pub fn parse<'a>(
        &'a mut self,
        line: &'a str,
        line_no: usize,
    ) -> Result<Option<StatementRef<'a>>, SyntaxError> {
        let p = self.parser(line, line_no);
        if self.takes_owned_path(line) {
            self.owned = self.parse_owned_checked(p)?;
            return Ok(self.owned.as_ref().map(Statement::as_ref));
        }
        self.scratch.clear();
        let Some(st) = parse_spans(p, &mut self.strict, &mut self.scratch)? else {
            return Ok(None);
        };
        Ok(Some(st.resolve(line, &self.scratch)))
    }

    /// A parser of `line` that takes this reader's extensions.
    fn parser<'l>(&self, line: &'l str, line_no: usize) -> Parser<'l> {
        let mut p = Parser::new(line, line_no);
        p.any_position = self.extensions.generalized;
        p
    }

    /// Whether `line` is read by the owned path (quoted triples allowed and `<<` in it);
    /// strict reading without quoted triples takes the borrowing path, which refuses `<<`.
    fn takes_owned_path(&self, line: &str) -> bool {
        self.extensions.quoted_triples && line.contains("<<")
    }

    /// Parses with the owned path, lending it this reader's strict checks (and their IRI
    /// cache) for the line.
    fn parse_owned_checked(&mut self, mut p: Parser<'_>) -> Result<Option<Statement>, SyntaxError> {
        p.strict = self.strict.take();
        let parsed = parse_owned(&mut p);
        self.strict = p.strict.take();
        parsed
    }

    /// Parses every line of `text`, the first being line `first_line`, into statements
    /// held as spans of `text`: one thread can parse while another reads the statements
    /// (the CLI's `to-jelly` pipeline), without an allocation per term. Also returns the
    /// number of lines read. The first syntax error ends the parse.
    ///
    /// ```
    /// use jelly::nquads::{Extensions, LineParser};
    /// let mut p = LineParser::strict(Extensions::default());
    /// let text = "<http://s> <http://p> \"a\\tb\" .\n# note\n_:x <http://p> <http://o> .\n";
    /// let (parsed, lines) = p.parse_lines(text.to_string(), 10).unwrap();
    /// assert_eq!(lines, 3);
    /// let st: Vec<(usize, String)> = parsed.iter().map(|(l, st)| (l, st.to_string())).collect();
    /// assert_eq!(st[0], (10, "<http://s> <http://p> \"a\\tb\" .".to_string()));
    /// assert_eq!(st[1].0, 12);
    /// let Err(e) = p.parse_lines("\n<http://s> <p> <http://o> .\n".to_string(), 10) else {
    ///     panic!("a relative IRI in strict N-Triples")
    /// };
    /// assert_eq!((e.line, e.column), (11, 13));
    /// ```
    pub fn parse_lines(
        &mut self,
        text: String,
        first_line: usize,
    ) -> Result<(ParsedLines, usize), SyntaxError> {
        let mut scratch = String::new();
        let mut statements = Vec::with_capacity(text.len() / 128);
        let mut n = 0;
        for (i, line) in lines(&text).enumerate() {
            n = i + 1;
            let line_no = first_line + i;
            // The offset of `line` in `text` (`lines` yields subslices of it).
            let offset = line.as_ptr() as usize - text.as_ptr() as usize;
            let p = self.parser(line, line_no);
            if self.takes_owned_path(line) {
                if let Some(statement) = self.parse_owned_checked(p)? {
                    statements.push(ParsedStatement::Owned {
                        line: line_no,
                        statement: Box::new(statement),
                    });
                }
                continue;
            }
            if let Some(st) = parse_spans(p, &mut self.strict, &mut scratch)? {
                statements.push(ParsedStatement::Spans {
                    line: line_no,
                    terms: st.shifted(offset),
                });
            }
        }
        Ok((
            ParsedLines {
                text,
                scratch,
                statements,
            },
            n,
        ))
    }
}

/// The terms of one line read by `p` (with `strict`'s checks, if any) as spans of the
/// line and of `scratch`; `None` for a blank or comment line.
fn parse_spans(
    mut p: Parser<'_>,
    strict: &mut Option<StrictTerms>,
    scratch: &mut String,
) -> Result<Option<SpanStatement>, SyntaxError> {
    p.strict = strict.take();
    let parsed = statement_terms(&mut p, |p, index| {
        let start = p.pos;
        let t = p.term_span(scratch)?;
        p.check_position(index, t.kind(), start)?;
        Ok(t)
    });
    *strict = p.strict.take();
    Ok(parsed?.map(|(s, pr, o, g)| SpanStatement {
        subject: s,
        predicate: pr,
        object: o,
        graph: g,
    }))
}

/// A statement as spans (see [`LineParser::parse_lines`]).
struct SpanStatement {
    subject: TermSpan,
    predicate: TermSpan,
    object: TermSpan,
    graph: Option<TermSpan>,
}

impl SpanStatement {
    fn resolve<'a>(&self, text: &'a str, scratch: &'a str) -> StatementRef<'a> {
        StatementRef {
            subject: self.subject.resolve(text, scratch),
            predicate: self.predicate.resolve(text, scratch),
            object: self.object.resolve(text, scratch),
            graph: self.graph.map(|g| g.resolve(text, scratch)),
        }
    }

    /// The same statement with its spans of the line moved by `by` bytes.
    fn shifted(self, by: usize) -> SpanStatement {
        SpanStatement {
            subject: self.subject.shifted(by),
            predicate: self.predicate.shifted(by),
            object: self.object.shifted(by),
            graph: self.graph.map(|g| g.shifted(by)),
        }
    }
}

/// The statements of many lines, read by [`LineParser::parse_lines`].
pub struct ParsedLines {
    /// The text the spans point into.
    text: String,
    /// The unescaped strings of all lines.
    scratch: String,
    statements: Vec<ParsedStatement>,
}

// The spans are the common case, kept inline: boxing them would allocate per statement.
#[allow(clippy::large_enum_variant)]
enum ParsedStatement {
    Spans {
        line: usize,
        terms: SpanStatement,
    },
    /// A line with quoted triples.
    Owned {
        line: usize,
        statement: Box<Statement>,
    },
}

impl ParsedLines {
    /// The number of statements.
    pub fn len(&self) -> usize {
        self.statements.len()
    }

    /// Whether there is no statement.
    pub fn is_empty(&self) -> bool {
        self.statements.is_empty()
    }

    /// Each statement with its 1-based line number, in order.
    pub fn iter(&self) -> impl Iterator<Item = (usize, StatementRef<'_>)> {
        self.statements.iter().map(|st| match st {
            ParsedStatement::Spans { line, terms } => {
                (*line, terms.resolve(&self.text, &self.scratch))
            }
            ParsedStatement::Owned { line, statement } => (*line, Statement::as_ref(statement)),
        })
    }
}

/// Where a parsed string lies: in the line (it had no escapes) or in the scratch buffer.
#[derive(Clone, Copy)]
enum Span {
    Line(usize, usize),
    Scratch(usize, usize),
}

impl Span {
    fn shifted(self, by: usize) -> Span {
        match self {
            Span::Line(a, b) => Span::Line(a + by, b + by),
            s @ Span::Scratch(..) => s,
        }
    }

    fn resolve<'a>(self, line: &'a str, scratch: &'a str) -> &'a str {
        match self {
            Span::Line(a, b) => &line[a..b],
            Span::Scratch(a, b) => &scratch[a..b],
        }
    }
}

/// A term of a line without quoted triples, as spans.
#[derive(Clone, Copy)]
enum TermSpan {
    Iri(Span),
    BlankNode(Span),
    Literal(Span, KindSpan),
}

#[derive(Clone, Copy)]
enum KindSpan {
    Simple,
    Lang(Span),
    Typed(Span),
}

/// What a term is, for the checks of its position.
#[derive(Clone, Copy, PartialEq, Eq)]
enum TermKind {
    Iri,
    BlankNode,
    Literal,
    Triple,
}

impl TermKind {
    fn of(t: &TermRef<'_>) -> TermKind {
        match t {
            TermRef::Iri(_) | TermRef::DefaultGraph => TermKind::Iri,
            TermRef::BlankNode(_) => TermKind::BlankNode,
            TermRef::Literal(_) => TermKind::Literal,
            TermRef::Triple(_) => TermKind::Triple,
        }
    }
}

impl TermSpan {
    fn shifted(self, by: usize) -> TermSpan {
        match self {
            TermSpan::Iri(i) => TermSpan::Iri(i.shifted(by)),
            TermSpan::BlankNode(b) => TermSpan::BlankNode(b.shifted(by)),
            TermSpan::Literal(lex, kind) => TermSpan::Literal(
                lex.shifted(by),
                match kind {
                    KindSpan::Simple => KindSpan::Simple,
                    KindSpan::Lang(t) => KindSpan::Lang(t.shifted(by)),
                    KindSpan::Typed(d) => KindSpan::Typed(d.shifted(by)),
                },
            ),
        }
    }

    fn kind(&self) -> TermKind {
        match self {
            TermSpan::Iri(_) => TermKind::Iri,
            TermSpan::BlankNode(_) => TermKind::BlankNode,
            TermSpan::Literal(..) => TermKind::Literal,
        }
    }

    fn resolve<'a>(self, line: &'a str, scratch: &'a str) -> TermRef<'a> {
        match self {
            TermSpan::Iri(i) => TermRef::Iri(i.resolve(line, scratch)),
            TermSpan::BlankNode(b) => TermRef::BlankNode(b.resolve(line, scratch)),
            TermSpan::Literal(lex, kind) => {
                let kind = match kind {
                    KindSpan::Simple => LiteralKind::Simple,
                    KindSpan::Lang(t) => LiteralKind::Lang(t.resolve(line, scratch)),
                    KindSpan::Typed(dt) => match dt.resolve(line, scratch) {
                        XSD_STRING => LiteralKind::Simple,
                        dt => LiteralKind::Typed(dt),
                    },
                };
                TermRef::Literal(LiteralRef {
                    lex: lex.resolve(line, scratch),
                    kind,
                })
            }
        }
    }
}

/// Term tokenizer over one line, shared with [`crate::rdf_patch`].
pub(crate) struct Parser<'a> {
    pub(crate) s: &'a str,
    /// Byte offset of the next character.
    pub(crate) pos: usize,
    line: usize,
    /// Quoted triples open around the term being parsed.
    /// How deep the term being read is nested in quoted triples.
    pub(crate) depth: usize,
    /// `<_:label>` is a blank node (RDF Patch, as Jena writes it), whose label may
    /// hold what an IRI cannot.
    pub(crate) bnode_iris: bool,
    /// The checks of strict N-Triples / N-Quads; `None` reads leniently.
    strict: Option<StrictTerms>,
    /// Whether any term may stand in any position (generalized statements).
    any_position: bool,
}

impl<'a> Parser<'a> {
    pub(crate) fn new(s: &'a str, line: usize) -> Self {
        Parser {
            s,
            pos: 0,
            line,
            depth: 0,
            bnode_iris: false,
            strict: None,
            any_position: true,
        }
    }

    /// A syntax error at byte offset `at` of the line.
    fn err_at(&self, at: usize, msg: &str) -> SyntaxError {
        let mut e = self.err(msg);
        e.column = self.s[..at.min(self.s.len())].chars().count() + 1;
        e
    }

    /// Whether a term of `kind` may stand at `index` of a statement or quoted triple
    /// (0 subject, 1 predicate, 2 object, 3 graph), which starts at byte `start`.
    fn check_position(
        &self,
        index: usize,
        kind: TermKind,
        start: usize,
    ) -> Result<(), SyntaxError> {
        if self.any_position {
            return Ok(());
        }
        let msg = match (index, kind) {
            (0, TermKind::Iri | TermKind::BlankNode | TermKind::Triple)
            | (1, TermKind::Iri)
            | (2, _)
            | (3, TermKind::Iri | TermKind::BlankNode)
            | (4.., _) => return Ok(()),
            (0, _) => "the subject must be an IRI or a blank node",
            (1, _) => "the predicate must be an IRI",
            _ => "the graph name must be an IRI or a blank node",
        };
        Err(self.err_at(start, msg))
    }
    pub(crate) fn err(&self, msg: &str) -> SyntaxError {
        let column = self.s[..self.pos.min(self.s.len())].chars().count() + 1;
        SyntaxError {
            line: self.line,
            column,
            message: msg.to_owned(),
        }
    }
    pub(crate) fn eof(&self) -> bool {
        self.pos >= self.s.len()
    }
    pub(crate) fn peek(&self) -> Option<char> {
        self.s[self.pos..].chars().next()
    }
    pub(crate) fn rest(&self) -> &str {
        &self.s[self.pos..]
    }
    pub(crate) fn ws(&mut self) {
        while let Some(c) = self.peek() {
            if c == ' ' || c == '\t' || c == '\r' {
                self.pos += 1;
            } else {
                break;
            }
        }
    }

    pub(crate) fn term(&mut self) -> Result<Term, SyntaxError> {
        if self.rest().starts_with("<<") {
            // Each level recurses: a line of thousands would overflow the stack.
            if self.depth >= crate::text_nesting::MAX_TEXT_NESTING {
                return Err(self.err(&format!(
                    "quoted triples nested deeper than {} levels",
                    crate::text_nesting::MAX_TEXT_NESTING
                )));
            }
            self.depth += 1;
            let paren = self.rest().starts_with("<<(");
            self.pos += if paren { 3 } else { 2 };
            let mut t = [None, None, None];
            for (index, slot) in t.iter_mut().enumerate() {
                self.ws();
                let start = self.pos;
                let term = self.term()?;
                self.check_position(index, TermKind::of(&term.as_ref()), start)?;
                *slot = Some(term);
            }
            self.depth -= 1;
            self.ws();
            let close = if paren { ")>>" } else { ">>" };
            if !self.rest().starts_with(close) {
                return Err(self.err("expected '>>' to close the quoted triple"));
            }
            self.pos += close.len();
            let [Some(s), Some(p), Some(o)] = t else {
                return Err(self.err("incomplete quoted triple"));
            };
            return Ok(Term::Triple(Box::new(Triple {
                subject: s,
                predicate: p,
                object: o,
            })));
        }
        let mut scratch = String::new();
        let t = self.term_span(&mut scratch)?;
        Ok(t.resolve(self.s, &scratch).to_owned())
    }

    /// An IRI, blank node or literal (not a quoted triple), as spans; unescaped strings
    /// are appended to `scratch`.
    fn term_span(&mut self, scratch: &mut String) -> Result<TermSpan, SyntaxError> {
        match self.peek() {
            Some('<') => {
                if self.rest().starts_with("<<") {
                    return Err(self.err("a quoted triple `<<` here"));
                }
                Ok(TermSpan::Iri(self.iri(scratch, false)?))
            }
            Some('_') => {
                if !self.rest().starts_with("_:") {
                    return Err(self.err("expected '_:' for a blank node"));
                }
                self.pos += 2;
                if self.strict.is_some() {
                    return self.strict_blank_node();
                }
                let start = self.pos;
                while let Some(c) = self.peek() {
                    if c.is_whitespace() || c == '<' || c == '>' || c == '"' {
                        break;
                    }
                    self.pos += c.len_utf8();
                }
                // A trailing '.' ends the statement, not the label.
                while self.pos > start && self.s[..self.pos].ends_with('.') {
                    self.pos -= 1;
                }
                if self.pos == start {
                    return Err(self.err("empty blank node label"));
                }
                Ok(TermSpan::BlankNode(Span::Line(start, self.pos)))
            }
            Some('"') => self.literal(scratch),
            _ => Err(self.err("expected a term")),
        }
    }

    /// A blank node label after its `_:`, as the N-Triples grammar has it: it ends at
    /// the first character that no label holds (a trailing `.` ends the statement).
    fn strict_blank_node(&mut self) -> Result<TermSpan, SyntaxError> {
        use crate::strict_terms::{blank_node_label_char, blank_node_label_start};
        let start = self.pos;
        match self.peek() {
            Some(c) if blank_node_label_start(c) => self.pos += c.len_utf8(),
            _ => return Err(self.err("a blank node label cannot start here")),
        }
        while let Some(c) = self.peek().filter(|&c| blank_node_label_char(c)) {
            self.pos += c.len_utf8();
        }
        while self.s[..self.pos].ends_with('.') {
            self.pos -= 1;
        }
        Ok(TermSpan::BlankNode(Span::Line(start, self.pos)))
    }

    /// An IRI after its '<'. Most have no escape: then it is a span of the line.
    /// Characters an IRI cannot hold (spaces, `{`, `"`, …, also written as `\u`
    /// escapes) are refused here: a decoder refuses them in a Jelly stream, so a
    /// stream made from them could not be read back. Strict reading checks the whole
    /// IRI (as a `datatype` too, if it is one), once per distinct IRI.
    fn iri(&mut self, scratch: &mut String, datatype: bool) -> Result<Span, SyntaxError> {
        self.pos += 1;
        let start = self.pos;
        let span = self.delimited(b'>', "unterminated IRI", scratch, Self::uchar)?;
        let text = span.resolve(self.s, scratch);
        if let Some(checks) = &mut self.strict {
            let checked = if datatype {
                checks.check_datatype(text)
            } else {
                checks.check_iri(text)
            };
            return match checked {
                Ok(()) => Ok(span),
                Err(m) => Err(self.err_at(start, &m)),
            };
        }
        if self.bnode_iris && text.starts_with("_:") {
            return Ok(span);
        }
        if let Some(c) = crate::term::forbidden_iri_char(text) {
            return Err(self.err_at(start, &format!("an IRI cannot hold {c:?}")));
        }
        Ok(span)
    }

    /// The text up to the byte `close`, with `unescape` reading each escape after its
    /// backslash: a span of the line when there was none, else of `scratch`, where the
    /// runs between escapes are copied whole.
    fn delimited(
        &mut self,
        close: u8,
        unterminated: &str,
        scratch: &mut String,
        unescape: impl Fn(&mut Self) -> Result<char, SyntaxError>,
    ) -> Result<Span, SyntaxError> {
        let s = self.s;
        let start = self.pos;
        let mut unescaped: Option<usize> = None;
        loop {
            let rest = &s.as_bytes()[self.pos..];
            let Some(i) = memchr::memchr2(close, b'\\', rest) else {
                self.pos = s.len();
                return Err(self.err(unterminated));
            };
            let run = &s[self.pos..self.pos + i];
            self.pos += i + 1;
            if rest[i] == close {
                return Ok(match unescaped {
                    None => Span::Line(start, self.pos - 1),
                    Some(from) => {
                        scratch.push_str(run);
                        Span::Scratch(from, scratch.len())
                    }
                });
            }
            unescaped.get_or_insert(scratch.len());
            scratch.push_str(run);
            scratch.push(unescape(self)?);
        }
    }

    fn uchar(&mut self) -> Result<char, SyntaxError> {
        let Some(k) = self.peek() else {
            return Err(self.err("dangling backslash"));
        };
        // `k` may be any character (a multi-byte one after a bad escape): step over all of it.
        self.pos += k.len_utf8();
        let n = match k {
            'u' => 4,
            'U' => 8,
            _ => return Err(self.err("invalid escape")),
        };
        let hex = self
            .s
            .get(self.pos..self.pos + n)
            .ok_or_else(|| self.err("short \\u escape"))?;
        // from_str_radix would also accept a leading '+'.
        if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(self.err("bad hex in \\u escape"));
        }
        let v = u32::from_str_radix(hex, 16).map_err(|_| self.err("bad hex in \\u escape"))?;
        self.pos += n;
        char::from_u32(v).ok_or_else(|| self.err("escape is not a Unicode scalar value"))
    }

    /// A literal's escape after its backslash: `\t`, `\n`, … or `\uXXXX`.
    fn echar(&mut self) -> Result<char, SyntaxError> {
        let Some(k) = self.peek() else {
            return Err(self.err("dangling backslash"));
        };
        let c = match k {
            't' => '\t',
            'b' => '\u{8}',
            'n' => '\n',
            'r' => '\r',
            'f' => '\u{c}',
            '"' => '"',
            '\'' => '\'',
            '\\' => '\\',
            _ => return self.uchar(),
        };
        self.pos += 1;
        Ok(c)
    }

    /// A literal after its opening quote, with its language tag or datatype.
    fn literal(&mut self, scratch: &mut String) -> Result<TermSpan, SyntaxError> {
        self.pos += 1;
        let lex = self.delimited(b'"', "unterminated literal", scratch, Self::echar)?;
        // `^^` and a language tag are terminals of their own, which white space may
        // separate from the string (as oxttl reads them): `"x" @en`, `"x" ^^ <dt>`.
        let after_lex = self.pos;
        self.ws();
        if !(self.rest().starts_with("^^") || self.peek() == Some('@')) {
            self.pos = after_lex;
        }
        let kind = if self.rest().starts_with("^^") {
            self.pos += 2;
            self.ws();
            if self.peek() != Some('<') {
                return Err(self.err("expected '<' after '^^'"));
            }
            KindSpan::Typed(self.iri(scratch, true)?)
        } else if self.peek() == Some('@') {
            self.pos += 1;
            let start = self.pos;
            while let Some(c) = self.peek() {
                if c.is_ascii_alphanumeric() || c == '-' {
                    self.pos += 1;
                } else {
                    break;
                }
            }
            if self.pos == start {
                return Err(self.err("empty language tag"));
            }
            let tag = &self.s[start..self.pos];
            if self.strict.is_some() {
                crate::strict_terms::check_language_tag(tag).map_err(|m| self.err_at(start, &m))?;
            } else if !crate::term::valid_language_tag(tag) {
                return Err(self.err(&format!("invalid language tag `{tag}`")));
            }
            // In lower case, as oxrdf keeps tags (and RDF compares them ignoring case):
            // one spelling of the tag whichever parser read the input.
            if tag.bytes().any(|b| b.is_ascii_uppercase()) {
                let from = scratch.len();
                scratch.push_str(&tag.to_ascii_lowercase());
                KindSpan::Lang(Span::Scratch(from, scratch.len()))
            } else {
                KindSpan::Lang(Span::Line(start, self.pos))
            }
        } else {
            KindSpan::Simple
        };
        Ok(TermSpan::Literal(lex, kind))
    }
}

pub(crate) fn write_iri(f: &mut impl fmt::Write, iri: &str) -> fmt::Result {
    f.write_char('<')?;
    // Every character that needs an escape is ASCII: write the runs between them whole.
    write_escaped(f, iri, &IRI_ESCAPES, |f, b| write!(f, "\\u{:04X}", b))?;
    f.write_char('>')
}

pub(crate) fn write_lex(f: &mut impl fmt::Write, lex: &str) -> fmt::Result {
    f.write_char('"')?;
    write_escaped(f, lex, &LEX_ESCAPES, |f, b| match b {
        b'"' => f.write_str("\\\""),
        b'\\' => f.write_str("\\\\"),
        b'\n' => f.write_str("\\n"),
        b'\r' => f.write_str("\\r"),
        b'\t' => f.write_str("\\t"),
        0x08 => f.write_str("\\b"),
        0x0c => f.write_str("\\f"),
        b => write!(f, "\\u{:04X}", b),
    })?;
    f.write_char('"')
}

/// Bytes written as `\uXXXX` in an IRI, as a table: a lookup per byte is faster than
/// a match on the text-output path.
static IRI_ESCAPES: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = matches!(
            b as u8,
            0..=b' ' | b'<' | b'>' | b'"' | b'{' | b'}' | b'|' | b'^' | b'`' | b'\\'
        );
        b += 1;
    }
    t
};

/// Bytes escaped in a literal's lexical form.
static LEX_ESCAPES: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = matches!(b as u8, b'"' | b'\\' | 0..=0x1f | 0x7f);
        b += 1;
    }
    t
};

/// Writes `text`, with `escape` for each byte marked in `needs_escape` (ASCII bytes
/// only, so the runs between them are whole characters) and the runs between them as
/// they are. (Checking 8- or 16-byte blocks first was tried: no gain was measurable.)
fn write_escaped<W: fmt::Write>(
    f: &mut W,
    text: &str,
    needs_escape: &[bool; 256],
    escape: impl Fn(&mut W, u8) -> fmt::Result,
) -> fmt::Result {
    let mut start = 0;
    for (i, &b) in text.as_bytes().iter().enumerate() {
        if needs_escape[usize::from(b)] {
            f.write_str(&text[start..i])?;
            escape(f, b)?;
            start = i + 1;
        }
    }
    f.write_str(&text[start..])
}

/// Writes a blank node label so that the output is valid N-Triples. Labels made only
/// of ASCII letters, digits and `_` are kept; any other label is written as `e-` plus
/// the hex of its UTF-8 bytes. The mapping is injective (kept labels never contain `-`),
/// so distinct blank nodes stay distinct.
fn write_bnode(f: &mut impl fmt::Write, label: &str) -> fmt::Result {
    f.write_str("_:")?;
    if crate::term::plain_blank_node_label(label) {
        f.write_str(label)
    } else {
        crate::term::write_escaped_blank_node_label(f, label)
    }
}

/// Writes one term in N-Triples / N-Quads syntax (RDF-star quoted triples as `<< >>`).
fn write_term<W: fmt::Write>(f: &mut W, t: TermRef<'_>) -> fmt::Result {
    match t {
        TermRef::Iri(i) => write_iri(f, i),
        TermRef::BlankNode(b) => write_bnode(f, b),
        TermRef::Literal(l) => {
            write_lex(f, l.lex)?;
            match l.kind {
                LiteralKind::Simple => Ok(()),
                LiteralKind::Lang(t) => {
                    f.write_char('@')?;
                    f.write_str(t)
                }
                LiteralKind::Typed(dt) if dt == XSD_STRING => Ok(()),
                LiteralKind::Typed(dt) => {
                    f.write_str("^^")?;
                    write_iri(f, dt)
                }
            }
        }
        TermRef::Triple(t) => {
            f.write_str("<< ")?;
            write_term(f, t.subject())?;
            f.write_char(' ')?;
            write_term(f, t.predicate())?;
            f.write_char(' ')?;
            write_term(f, t.object())?;
            f.write_str(" >>")
        }
        // Only reachable for a default graph outside the graph position.
        TermRef::DefaultGraph => f.write_str("<>"),
    }
}

/// Appends one statement as an N-Triples / N-Quads line (with its `\n`) to `out`. It
/// writes straight into the buffer: the server's text subscriptions spent most of their
/// time in `fmt::Formatter` calls when each statement went through `Display`.
///
/// ```
/// use jelly::{StatementRef, TermRef};
/// let mut out = Vec::new();
/// jelly::nquads::write_statement_line(&mut out, StatementRef::triple(TermRef::Iri("s"), TermRef::Iri("p"), TermRef::Iri("o")));
/// assert_eq!(out, b"<s> <p> <o> .\n");
/// ```
pub fn write_statement_line(out: &mut Vec<u8>, st: StatementRef<'_>) {
    /// `fmt::Write` into a byte buffer: it cannot fail.
    struct Bytes<'a>(&'a mut Vec<u8>);
    impl fmt::Write for Bytes<'_> {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            self.0.extend_from_slice(s.as_bytes());
            Ok(())
        }
    }
    let _ = write_statement(&mut Bytes(out), st);
    out.push(b'\n');
}

/// Writes one statement (without a line end).
fn write_statement<W: fmt::Write>(f: &mut W, st: StatementRef<'_>) -> fmt::Result {
    write_term(f, st.subject)?;
    f.write_char(' ')?;
    write_term(f, st.predicate)?;
    f.write_char(' ')?;
    write_term(f, st.object)?;
    if let Some(g) = st.graph
        && g != TermRef::DefaultGraph
    {
        f.write_char(' ')?;
        write_term(f, g)?;
    }
    f.write_str(" .")
}

impl fmt::Display for TermRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_term(f, *self)
    }
}

impl fmt::Display for StatementRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_statement(f, *self)
    }
}

/// Streaming N-Triples / N-Quads writer (statements in the default graph are written
/// as triples). Reuses one line buffer, so writing does not allocate per statement.
pub struct NQuadsWriter<W: Write> {
    out: W,
    line: Vec<u8>,
}

impl<W: Write> NQuadsWriter<W> {
    /// A writer to `out` (wrap it in a `BufWriter` for files).
    pub fn new(out: W) -> Self {
        NQuadsWriter {
            out,
            line: Vec::with_capacity(256),
        }
    }

    /// Writes one statement line.
    pub fn write(&mut self, st: StatementRef<'_>) -> io::Result<()> {
        self.line.clear();
        write_statement_line(&mut self.line, st);
        self.out.write_all(&self.line)
    }

    /// Flushes and returns the inner writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Quoted triples nest up to the decoders' limit; deeper is a syntax error, not
    /// a stack overflow.
    #[test]
    fn nesting_is_bounded() {
        let line = |n: usize| {
            format!(
                "<s> <p> {}<o>{} .",
                "<< <s> <p> ".repeat(n),
                " >>".repeat(n)
            )
        };
        assert!(parse_line(&line(100), 1).unwrap().is_some());
        let e = parse_line(&line(100_000), 7).unwrap_err();
        assert_eq!(e.line, 7);
        assert!(e.message.contains("deeper than 100"), "{}", e.message);
        let mut p = LineParser::default();
        assert!(p.parse(&line(101), 1).is_err());
    }

    #[test]
    fn round_trip_escapes_and_star() {
        let doc =
            "<< _:a <p> \"x\\ny\"@en >> <http://ex/p\\u00E9q> \"a\\\"b\\\\\"^^<http://dt> <g> .\n";
        let st = parse_document(doc).unwrap();
        let again = parse_document(&format!("{}\n", st[0])).unwrap();
        assert_eq!(st, again);
        if let Term::Iri(p) = &st[0].predicate {
            assert_eq!(p, "http://ex/péq");
        } else {
            panic!("predicate should be an IRI");
        }
    }

    #[test]
    fn iris_cannot_hold_what_an_iri_cannot_hold_written_or_escaped() {
        for doc in [
            "<http://e/a b> <p> <o> .\n",
            "<s> <p> <http://e/{x}> .\n",
            "<s> <p> <http://e/\\u0020> .\n",
            "<s> <p> <http://e/\\u003E> .\n",
            "<s> <p> \"x\"^^<http://e/d t> .\n",
        ] {
            let e = parse_document(doc).unwrap_err();
            assert!(e.message.contains("an IRI cannot hold"), "{doc}: {e}");
        }
        let e = parse_document("<s> <p> <http://e/a b> .\n").unwrap_err();
        assert_eq!(e.column, 10, "the column of the IRI: {e}");
    }

    #[test]
    fn unicode_escapes_take_hex_digits_only() {
        assert!(parse_document("<s> <p> \"\\u0041\" .\n").is_ok());
        assert!(parse_document("<s> <p> \"\\u+041\" .\n").is_err());
        assert!(parse_document("<s> <p> \"\\U+0000041\" .\n").is_err());
    }

    #[test]
    fn errors_have_positions() {
        let e = parse_document("<s> <p> \"open .\n").unwrap_err();
        assert_eq!(e.line, 1);
        let e = parse_document("<s> <p> <o>\n").unwrap_err();
        assert!(e.message.contains("'.'"), "{e}");
    }

    #[test]
    fn odd_bnode_labels_stay_distinct_and_valid() {
        let a = TermRef::BlankNode("a-b").to_string();
        let b = TermRef::BlankNode("e-612d62").to_string();
        assert_ne!(a, b);
        assert!(a.starts_with("_:e-"));
    }

    #[test]
    fn escapes_between_runs_of_plain_text() {
        // Escapes at the start, in the middle and at the end, beside non-ASCII text.
        let line = "<\\u0041é\\u0042x\\U0001F600> <p> \"\\tä\\\"b\\\\\\u007F\\n\" .";
        let st = parse_line(line, 1).unwrap().unwrap();
        assert_eq!(st.subject, Term::Iri("AéBx\u{1F600}".into()));
        let Term::Literal(l) = &st.object else {
            panic!("object should be a literal")
        };
        assert_eq!(l.lex, "\tä\"b\\\u{7f}\n");
        assert_eq!(
            st.to_string(),
            "<AéBx\u{1F600}> <p> \"\\tä\\\"b\\\\\\u007F\\n\" ."
        );
        let e = parse_line("<s> <p> <o", 3).unwrap_err();
        assert_eq!(
            (e.line, e.column, e.message.as_str()),
            (3, 11, "unterminated IRI")
        );
        let e = parse_line("<s> <p> \"é", 4).unwrap_err();
        assert_eq!((e.column, e.message.as_str()), (11, "unterminated literal"));
    }

    /// The borrowing parser of the publish path reads every line as [`parse_line`] does,
    /// errors included.
    fn same_as_parse_line(line: &str) {
        let mut p = LineParser::default();
        let borrowed = p.parse(line, 7).map(|st| st.map(|st| st.to_owned()));
        assert_eq!(borrowed, parse_line(line, 7), "{line:?}");
    }

    #[test]
    fn line_parser_agrees_with_parse_line() {
        for line in [
            "<http://s> <http://p> <http://o> .",
            "<http://s> <http://p> \"x\"^^<http://www.w3.org/2001/XMLSchema#string> <http://g> .",
            "<http://s> <http://p> \"x\"^^<http://www.w3.org/2001/XMLSchema\\u0023string> .",
            "_:b1 <http://p\\u0020q> \"a\\tb\\u00E9\"@en-GB . # comment",
            "<< <s> <p> <o> >> <p> \"q\" .",
            "<s> <p> \"<< not a quoted triple >>\" .",
            "   # only a comment",
            "",
            "<s> <p> .",
            "<s> <p> <o> <g> <h> .",
            "<s> <p> \"open .",
            "<s> <p> <o> . extra",
            "<s> <p> \"x\"^^\"y\" .",
            "<s> <p> \"x\"@ .",
            "_: <p> <o> .",
            "<s\\u12> <p> <o> .",
            "<s> <p> \"\\q\" .",
        ] {
            same_as_parse_line(line);
        }
    }

    proptest::proptest! {
        #[test]
        fn line_parser_agrees_on_any_line(
            parts in proptest::collection::vec(
                proptest::sample::select(vec![
                    "<", ">", "\"", "\\", "u00E9", "U0001F600", "t", " ", ".", "_:", "@", "^^",
                    "<<", ">>", "é", "#", "a", "http://x/", "en",
                ]),
                0..24,
            )
        ) {
            same_as_parse_line(&parts.concat());
        }
    }

    #[test]
    fn lines_cut_as_str_lines() {
        for text in [
            "",
            "\n",
            "a",
            "a\n",
            "a\r\nb\r",
            "\r\n\r\n",
            "a\rb\n\nc",
            "é\r\n😀",
        ] {
            let ours: Vec<&str> = lines(text).collect();
            // `str::lines`, with a lone CR as a line break too.
            let std: Vec<&str> = text
                .split_inclusive('\n')
                .flat_map(|l| {
                    let l = l.strip_suffix('\n').unwrap_or(l);
                    let l = l.strip_suffix('\r').unwrap_or(l);
                    l.split('\r')
                })
                .collect();
            assert_eq!(ours, std, "{text:?}");
        }
    }

    #[test]
    fn escapes_found_in_every_block() {
        // Escapes on both sides of the 16-byte blocks and at the very end, among
        // multi-byte characters.
        let iri = format!(
            "{}é{}>{} x{}^",
            "a".repeat(14),
            "b".repeat(13),
            "c".repeat(14),
            "d".repeat(17)
        );
        let mut expected = String::from("<");
        for c in iri.chars() {
            match c {
                '>' | ' ' | '^' => expected.push_str(&format!("\\u{:04X}", c as u32)),
                c => expected.push(c),
            }
        }
        expected.push('>');
        assert_eq!(TermRef::Iri(&iri).to_string(), expected);
        let lex = format!(
            "{}\"{}\n{}\u{7f}",
            "x".repeat(15),
            "y".repeat(16),
            "z".repeat(40)
        );
        let expected = format!(
            "\"{}\\\"{}\\n{}\\u007F\"",
            "x".repeat(15),
            "y".repeat(16),
            "z".repeat(40)
        );
        let lit = TermRef::Literal(LiteralRef {
            lex: &lex,
            kind: LiteralKind::Simple,
        });
        assert_eq!(lit.to_string(), expected);
    }
}
