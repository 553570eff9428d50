//! Jelly's term model: borrowed [`TermRef`] for the hot path and owned [`Term`].
//!
//! Jelly-RDF 1.1 can carry generalized statements (any term in any position) and
//! RDF-star quoted triples in the subject, predicate or object, which oxrdf's RDF 1.2
//! model cannot represent. These types represent every stream losslessly; the
//! [`crate::oxrdf_adapter`] module converts to oxrdf where the statement fits.

use std::fmt;

/// `http://www.w3.org/2001/XMLSchema#string`: a typed literal with this datatype is a simple literal.
pub const XSD_STRING: &str = "http://www.w3.org/2001/XMLSchema#string";
/// `http://www.w3.org/1999/02/22-rdf-syntax-ns#langString`.
pub const RDF_LANG_STRING: &str = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString";

/// `http://www.w3.org/1999/02/22-rdf-syntax-ns#dirLangString` (RDF 1.2).
pub const RDF_DIR_LANG_STRING: &str = "http://www.w3.org/1999/02/22-rdf-syntax-ns#dirLangString";

/// Whether `iri` starts with a scheme (`ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":"`,
/// RFC 3986 §3.1): absolute IRIs do, relative references do not. RDF allows only
/// absolute IRIs; a Jelly stream can carry others (the spec says IRIs SHOULD be valid),
/// so decoders take them and tell (see [`crate::Decoder::non_rdf_statement`]).
///
/// ```
/// use jelly::term::is_absolute_iri;
/// assert!(is_absolute_iri("http://ex.org/a") && is_absolute_iri("urn:x"));
/// assert!(!is_absolute_iri("a") && !is_absolute_iri("/a:b") && !is_absolute_iri("1a:b"));
/// ```
#[inline]
pub fn is_absolute_iri(iri: &str) -> bool {
    // One pass that stops at the scheme's colon, or at the first byte no scheme holds.
    let Some((&first, rest)) = iri.as_bytes().split_first() else {
        return false;
    };
    if !first.is_ascii_alphabetic() {
        return false;
    }
    for &c in rest {
        if c == b':' {
            return true;
        }
        if !(c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.')) {
            return false;
        }
    }
    false
}

/// Whether `datatype` is one RDF gives only to literals with a language tag
/// (`rdf:langString`, `rdf:dirLangString`): a literal typed with it and no tag is not RDF.
///
/// ```
/// use jelly::term::{RDF_LANG_STRING, XSD_STRING, needs_language_tag};
/// assert!(needs_language_tag(RDF_LANG_STRING) && !needs_language_tag(XSD_STRING));
/// ```
#[inline]
pub fn needs_language_tag(datatype: &str) -> bool {
    datatype == RDF_LANG_STRING || datatype == RDF_DIR_LANG_STRING
}

/// Whether a literal typed `datatype` (and so without a language tag) is RDF: its
/// datatype is an absolute IRI that does not call for a language tag.
#[inline]
pub(crate) fn typed_literal_is_rdf(datatype: &str) -> bool {
    !needs_language_tag(datatype) && is_absolute_iri(datatype)
}

/// Whether `tag` is a language tag as RDF's text syntaxes write it: letters, then
/// `-`-separated groups of letters and digits (`en`, `en-GB`, `sr-Latn-RS`), with an
/// optional RDF 1.2 base direction carried after `--` (`ar--rtl` or `--ltr`, see
/// [`crate::oxrdf_adapter`]). Anything else (an empty tag, a space, a newline, a
/// quote) would change the meaning of the text a writer makes of it, so decoders
/// refuse it.
///
/// ```
/// use jelly::term::valid_language_tag;
/// assert!(valid_language_tag("en") && valid_language_tag("sr-Latn-RS"));
/// assert!(valid_language_tag("ar--rtl") && valid_language_tag("x-1"));
/// assert!(!valid_language_tag("") && !valid_language_tag("en us"));
/// assert!(!valid_language_tag("en .\n<s> <p> <o> .") && !valid_language_tag("en--"));
/// assert!(!valid_language_tag("1234") && !valid_language_tag("en-"));
/// assert!(!valid_language_tag("en--up"));
/// ```
pub fn valid_language_tag(tag: &str) -> bool {
    // One pass over the bytes (it runs for every tagged literal a decoder reads).
    let b = tag.as_bytes();
    let (tag, direction) = match b.windows(2).position(|w| w == b"--") {
        Some(i) => (&b[..i], Some(&b[i + 2..])),
        None => (b, None),
    };
    if direction.is_some_and(|d| d != b"ltr" && d != b"rtl") {
        return false;
    }
    // `group_len` counts the bytes of the current group; `first` is true in the first.
    let (mut group_len, mut first) = (0usize, true);
    for &c in tag {
        if c == b'-' {
            if group_len == 0 {
                return false;
            }
            group_len = 0;
            first = false;
        } else if c.is_ascii_alphabetic() || (!first && c.is_ascii_digit()) {
            group_len += 1;
        } else {
            return false;
        }
    }
    group_len > 0
}

/// The first character of `iri` that no IRI may hold (RFC 3987; N-Triples' `IRIREF`):
/// a control character or space, or one of `<>"{}|^`\`. Writers of RDF text would
/// have to escape it, and some (Turtle, TriG) write IRIs as they are, so decoders
/// refuse such IRIs.
///
/// ```
/// use jelly::term::forbidden_iri_char;
/// assert_eq!(forbidden_iri_char("http://ex.org/a#b"), None);
/// assert_eq!(forbidden_iri_char("http://ex.org/a b"), Some(' '));
/// assert_eq!(forbidden_iri_char("http://e/dt> .\n"), Some('>'));
/// ```
pub fn forbidden_iri_char(iri: &str) -> Option<char> {
    iri.bytes()
        .find(|&b| FORBIDDEN_IN_IRI[usize::from(b)])
        .map(char::from)
}

/// The bytes [`forbidden_iri_char`] looks for, as a table (it runs over every lookup
/// entry a decoder reads).
static FORBIDDEN_IN_IRI: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b <= b' ' as usize {
        t[b] = true;
        b += 1;
    }
    let others = *b"<>\"{}|^`\\";
    let mut i = 0;
    while i < others.len() {
        t[others[i] as usize] = true;
        i += 1;
    }
    t
};

/// Whether a blank node label can be written as it is in every RDF text syntax: ASCII
/// letters, digits and `_`. Writers give any other label (Jelly allows any string) as
/// [`escaped_blank_node_label`].
///
/// ```
/// use jelly::term::plain_blank_node_label;
/// assert!(plain_blank_node_label("b12") && plain_blank_node_label("_x"));
/// assert!(!plain_blank_node_label("") && !plain_blank_node_label("a b\n<x> <y> <z> ."));
/// ```
pub fn plain_blank_node_label(label: &str) -> bool {
    !label.is_empty()
        && label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// The label a writer gives a blank node whose label is not
/// [plain](plain_blank_node_label): `e-` and the hex of its UTF-8 bytes. No plain label
/// contains `-`, so distinct blank nodes stay distinct.
///
/// ```
/// assert_eq!(jelly::term::escaped_blank_node_label("a b"), "e-612062");
/// ```
pub fn escaped_blank_node_label(label: &str) -> String {
    let mut out = String::with_capacity(2 + 2 * label.len());
    // Writing to a String cannot fail.
    let _ = write_escaped_blank_node_label(&mut out, label);
    out
}

/// Writes [`escaped_blank_node_label`] to `f`, without building it first (the N-Quads
/// writer does this for every such blank node it writes).
///
/// ```
/// let mut s = String::from("_:");
/// jelly::term::write_escaped_blank_node_label(&mut s, "a b").unwrap();
/// assert_eq!(s, "_:e-612062");
/// ```
pub fn write_escaped_blank_node_label(f: &mut impl fmt::Write, label: &str) -> fmt::Result {
    f.write_str("e-")?;
    for b in label.bytes() {
        write!(f, "{b:02x}")?;
    }
    Ok(())
}

/// Kind of a literal, borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LiteralKind<'a> {
    /// A simple literal (`xsd:string`).
    Simple,
    /// A language-tagged string.
    Lang(&'a str),
    /// A typed literal with the datatype IRI.
    Typed(&'a str),
}

/// A borrowed literal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LiteralRef<'a> {
    /// Lexical form.
    pub lex: &'a str,
    /// Simple, language-tagged or typed.
    pub kind: LiteralKind<'a>,
}

/// A borrowed RDF term, as handed out by the decoder without allocating.
///
/// ```
/// use jelly::TermRef;
/// let t = TermRef::Iri("http://example.org/a");
/// assert_eq!(t.to_string(), "<http://example.org/a>");
/// assert_eq!(t.to_owned().as_ref(), t);
/// ```
#[derive(Debug, Clone, Copy)]
pub enum TermRef<'a> {
    /// An IRI.
    Iri(&'a str),
    /// A blank node label (without `_:`).
    BlankNode(&'a str),
    /// A literal.
    Literal(LiteralRef<'a>),
    /// An RDF-star quoted triple.
    Triple(TripleRef<'a>),
    /// The default graph (graph position only).
    DefaultGraph,
}

/// A borrowed quoted triple. Its terms live in the decoder's buffers, an owned
/// [`Triple`], or a caller's array of [`TermRef`].
#[derive(Clone, Copy)]
pub struct TripleRef<'a>(TripleRepr<'a>);

#[derive(Clone, Copy)]
enum TripleRepr<'a> {
    Terms(&'a [TermRef<'a>; 3]),
    Owned(&'a Triple),
    Buf(&'a [TermBuf; 3]),
}

impl<'a> TripleRef<'a> {
    /// A quoted triple made of three borrowed terms.
    pub fn from_terms(terms: &'a [TermRef<'a>; 3]) -> Self {
        TripleRef(TripleRepr::Terms(terms))
    }

    pub(crate) fn from_bufs(b: &'a [TermBuf; 3]) -> Self {
        TripleRef(TripleRepr::Buf(b))
    }

    /// Term at position 0, 1 or 2.
    #[inline]
    pub fn term(&self, i: usize) -> TermRef<'a> {
        match self.0 {
            TripleRepr::Terms(t) => t[i],
            TripleRepr::Owned(t) => match i {
                0 => t.subject.as_ref(),
                1 => t.predicate.as_ref(),
                _ => t.object.as_ref(),
            },
            TripleRepr::Buf(b) => b[i].as_ref(),
        }
    }

    /// Subject.
    pub fn subject(&self) -> TermRef<'a> {
        self.term(0)
    }
    /// Predicate.
    pub fn predicate(&self) -> TermRef<'a> {
        self.term(1)
    }
    /// Object.
    pub fn object(&self) -> TermRef<'a> {
        self.term(2)
    }

    /// Owned copy.
    pub fn to_owned(&self) -> Triple {
        Triple {
            subject: self.subject().to_owned(),
            predicate: self.predicate().to_owned(),
            object: self.object().to_owned(),
        }
    }
}

impl PartialEq for TripleRef<'_> {
    fn eq(&self, other: &Self) -> bool {
        (0..3).all(|i| self.term(i) == other.term(i))
    }
}
impl Eq for TripleRef<'_> {}

impl fmt::Debug for TripleRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "<< {} {} {} >>",
            self.subject(),
            self.predicate(),
            self.object()
        )
    }
}

impl PartialEq for TermRef<'_> {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (TermRef::Iri(a), TermRef::Iri(b)) => a == b,
            (TermRef::BlankNode(a), TermRef::BlankNode(b)) => a == b,
            (TermRef::Literal(a), TermRef::Literal(b)) => a == b,
            (TermRef::Triple(a), TermRef::Triple(b)) => a == b,
            (TermRef::DefaultGraph, TermRef::DefaultGraph) => true,
            _ => false,
        }
    }
}
impl Eq for TermRef<'_> {}

impl<'a> TermRef<'a> {
    /// Owned copy.
    pub fn to_owned(&self) -> Term {
        match *self {
            TermRef::Iri(s) => Term::Iri(s.to_owned()),
            TermRef::BlankNode(s) => Term::BlankNode(s.to_owned()),
            TermRef::Literal(l) => Term::Literal(Literal {
                lex: l.lex.to_owned(),
                kind: match l.kind {
                    LiteralKind::Simple => OwnedLiteralKind::Simple,
                    LiteralKind::Lang(s) => OwnedLiteralKind::Lang(s.to_owned()),
                    LiteralKind::Typed(s) => OwnedLiteralKind::Typed(s.to_owned()),
                },
            }),
            TermRef::Triple(t) => Term::Triple(Box::new(t.to_owned())),
            TermRef::DefaultGraph => Term::DefaultGraph,
        }
    }

    /// Short name of the term kind, for error messages.
    pub fn kind_name(&self) -> &'static str {
        match self {
            TermRef::Iri(_) => "IRI",
            TermRef::BlankNode(_) => "blank node",
            TermRef::Literal(_) => "literal",
            TermRef::Triple(_) => "quoted triple",
            TermRef::DefaultGraph => "default graph",
        }
    }

    /// True if the term or any term nested in it is a quoted triple.
    pub fn is_triple(&self) -> bool {
        matches!(self, TermRef::Triple(_))
    }
}

/// Owned literal kind.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum OwnedLiteralKind {
    /// Simple literal.
    Simple,
    /// Language tag.
    Lang(String),
    /// Datatype IRI.
    Typed(String),
}

/// An owned literal.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Literal {
    /// Lexical form.
    pub lex: String,
    /// Simple, language-tagged or typed.
    pub kind: OwnedLiteralKind,
}

/// An owned term.
///
/// ```
/// use jelly::{Term, TermRef};
/// let t = Term::BlankNode("b0".into());
/// assert_eq!(t.as_ref(), TermRef::BlankNode("b0"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Term {
    /// An IRI.
    Iri(String),
    /// A blank node label.
    BlankNode(String),
    /// A literal.
    Literal(Literal),
    /// A quoted triple.
    Triple(Box<Triple>),
    /// The default graph.
    DefaultGraph,
}

impl Term {
    /// Borrowed view.
    #[inline]
    pub fn as_ref(&self) -> TermRef<'_> {
        match self {
            Term::Iri(s) => TermRef::Iri(s),
            Term::BlankNode(s) => TermRef::BlankNode(s),
            Term::Literal(l) => TermRef::Literal(LiteralRef {
                lex: &l.lex,
                kind: match &l.kind {
                    OwnedLiteralKind::Simple => LiteralKind::Simple,
                    OwnedLiteralKind::Lang(s) => LiteralKind::Lang(s),
                    OwnedLiteralKind::Typed(s) => LiteralKind::Typed(s),
                },
            }),
            Term::Triple(t) => TermRef::Triple(TripleRef(TripleRepr::Owned(t))),
            Term::DefaultGraph => TermRef::DefaultGraph,
        }
    }

    /// A simple literal.
    pub fn simple_literal(lex: impl Into<String>) -> Term {
        Term::Literal(Literal {
            lex: lex.into(),
            kind: OwnedLiteralKind::Simple,
        })
    }
}

impl fmt::Display for Term {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_ref().fmt(f)
    }
}

/// An owned triple (possibly generalized).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Triple {
    pub subject: Term,
    pub predicate: Term,
    pub object: Term,
}

impl Triple {
    /// Borrowed view, for use as a quoted triple.
    pub fn as_ref(&self) -> TripleRef<'_> {
        TripleRef(TripleRepr::Owned(self))
    }
}

/// A borrowed statement: a triple (`graph` is `None`) or a quad.
///
/// ```
/// use jelly::{StatementRef, TermRef};
/// let st = StatementRef::triple(TermRef::Iri("s"), TermRef::Iri("p"), TermRef::BlankNode("o"));
/// assert_eq!(st.to_string(), "<s> <p> _:o .");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatementRef<'a> {
    pub subject: TermRef<'a>,
    pub predicate: TermRef<'a>,
    pub object: TermRef<'a>,
    /// `None` for a triple, `Some` for a quad (possibly [`TermRef::DefaultGraph`]).
    pub graph: Option<TermRef<'a>>,
}

impl<'a> StatementRef<'a> {
    /// A triple.
    pub fn triple(s: TermRef<'a>, p: TermRef<'a>, o: TermRef<'a>) -> Self {
        StatementRef {
            subject: s,
            predicate: p,
            object: o,
            graph: None,
        }
    }
    /// A quad.
    pub fn quad(s: TermRef<'a>, p: TermRef<'a>, o: TermRef<'a>, g: TermRef<'a>) -> Self {
        StatementRef {
            subject: s,
            predicate: p,
            object: o,
            graph: Some(g),
        }
    }
    /// Owned copy.
    pub fn to_owned(&self) -> Statement {
        Statement {
            subject: self.subject.to_owned(),
            predicate: self.predicate.to_owned(),
            object: self.object.to_owned(),
            graph: self.graph.map(|g| g.to_owned()),
        }
    }
    /// The graph, with a triple counted as being in the default graph.
    pub fn graph_or_default(&self) -> TermRef<'a> {
        self.graph.unwrap_or(TermRef::DefaultGraph)
    }
}

/// An owned statement: a triple (`graph` is `None`) or a quad.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Statement {
    pub subject: Term,
    pub predicate: Term,
    pub object: Term,
    pub graph: Option<Term>,
}

impl Statement {
    /// Borrowed view.
    #[inline]
    pub fn as_ref(&self) -> StatementRef<'_> {
        StatementRef {
            subject: self.subject.as_ref(),
            predicate: self.predicate.as_ref(),
            object: self.object.as_ref(),
            graph: self.graph.as_ref().map(Term::as_ref),
        }
    }
}

impl fmt::Display for Statement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_ref().fmt(f)
    }
}

/// Decoder-side reusable storage for one term. Overwriting it reuses the string
/// capacity, so steady-state decoding does not allocate.
#[derive(Debug, Clone, Default)]
pub(crate) struct TermBuf {
    pub kind: BufKind,
    /// IRI, blank node label or lexical form.
    pub a: String,
    /// Language tag or datatype IRI.
    pub b: String,
    /// Components of a quoted triple.
    pub quoted: Option<Box<[TermBuf; 3]>>,
    /// For [`BufKind::IriCached`]: the name id whose decoder cache entry holds the IRI.
    pub nid: u32,
    /// The term is, or holds, one RDF does not allow: a relative IRI, or a literal
    /// typed with a relative IRI, `rdf:langString` or `rdf:dirLangString` (see
    /// `Decoder::non_rdf_statement`). Kept by the decoder only: the encoder's
    /// [`TermBuf::set_from`] does not set it.
    pub not_rdf: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum BufKind {
    #[default]
    Unset,
    Iri,
    /// An IRI held in the decoder's IRI cache (see `Decoder::term_ref`).
    IriCached,
    Bnode,
    Simple,
    Lang,
    Typed,
    Triple,
    DefaultGraph,
}

impl TermBuf {
    #[inline]
    pub fn as_ref(&self) -> TermRef<'_> {
        match self.kind {
            BufKind::Iri => TermRef::Iri(&self.a),
            BufKind::Bnode => TermRef::BlankNode(&self.a),
            BufKind::Simple => TermRef::Literal(LiteralRef {
                lex: &self.a,
                kind: LiteralKind::Simple,
            }),
            BufKind::Lang => TermRef::Literal(LiteralRef {
                lex: &self.a,
                kind: LiteralKind::Lang(&self.b),
            }),
            BufKind::Typed => TermRef::Literal(LiteralRef {
                lex: &self.a,
                kind: LiteralKind::Typed(&self.b),
            }),
            BufKind::Triple => match &self.quoted {
                Some(q) => TermRef::Triple(TripleRef::from_bufs(q)),
                None => TermRef::DefaultGraph,
            },
            BufKind::DefaultGraph | BufKind::Unset | BufKind::IriCached => TermRef::DefaultGraph,
        }
    }

    /// Sets a term of one string (a blank node, a simple or tagged literal's lexical
    /// form; an IRI only from [`TermBuf::set_from`]), which the decoder counts as RDF.
    #[inline]
    pub fn set_str(&mut self, kind: BufKind, a: &str) {
        self.kind = kind;
        self.not_rdf = false;
        self.a.clear();
        self.a.push_str(a);
    }

    /// Sets a typed literal; `not_rdf` is whether its datatype makes it one RDF does
    /// not allow (worked out once per datatype entry by the decoder).
    #[inline]
    pub fn set_typed(&mut self, lex: &str, datatype: &str, not_rdf: bool) {
        self.set_str(BufKind::Typed, lex);
        self.not_rdf = not_rdf;
        self.b.clear();
        self.b.push_str(datatype);
    }

    /// Sets the IRI `prefix` + `name`, checking that it is absolute (for IRIs the
    /// decoder does not cache, whose check is then made per occurrence).
    #[inline]
    pub fn set_iri2(&mut self, prefix: &str, name: &str) {
        self.kind = BufKind::Iri;
        self.a.clear();
        self.a.push_str(prefix);
        self.a.push_str(name);
        self.not_rdf = !is_absolute_iri(&self.a);
    }

    /// Copies any borrowed term in (used for carrying terms over, and by tests).
    pub fn set_from(&mut self, t: TermRef<'_>) {
        match t {
            TermRef::Iri(s) => self.set_str(BufKind::Iri, s),
            TermRef::BlankNode(s) => self.set_str(BufKind::Bnode, s),
            TermRef::Literal(l) => {
                let (kind, b) = match l.kind {
                    LiteralKind::Simple => (BufKind::Simple, ""),
                    LiteralKind::Lang(s) => (BufKind::Lang, s),
                    LiteralKind::Typed(s) => (BufKind::Typed, s),
                };
                self.set_str(kind, l.lex);
                self.b.clear();
                self.b.push_str(b);
            }
            TermRef::Triple(tr) => {
                let q = self.quoted.get_or_insert_with(Default::default);
                for (i, slot) in q.iter_mut().enumerate() {
                    slot.set_from(tr.term(i));
                }
                self.kind = BufKind::Triple;
            }
            TermRef::DefaultGraph => self.kind = BufKind::DefaultGraph,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_iris_have_a_scheme() {
        for ok in ["http://a", "urn:x", "a+b-c.d:e", "uuid:0686", "a:"] {
            assert!(is_absolute_iri(ok), "{ok}");
        }
        for bad in [
            "", "a", "/a:b", ":x", "1a:b", "a b:c", "s", "#frag", "a_b:c",
        ] {
            assert!(!is_absolute_iri(bad), "{bad}");
        }
    }

    #[test]
    fn forbidden_iri_chars_are_the_controls_space_and_the_nine_delimiters() {
        for b in 0u8..128 {
            let iri = format!("http://ex.org/a{}b", char::from(b));
            let want = (b <= b' ' || b"<>\"{}|^`\\".contains(&b)).then_some(char::from(b));
            assert_eq!(forbidden_iri_char(&iri), want, "byte {b}");
        }
        assert_eq!(forbidden_iri_char("http://ex.org/é😀"), None);
    }
}
