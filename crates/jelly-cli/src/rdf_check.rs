//! Terms a Jelly stream can carry that are not RDF: IRIs that are not absolute, and
//! literals typed `rdf:langString` or `rdf:dirLangString` without a language tag.
//!
//! The decoder takes them (the spec says IRIs SHOULD be valid, and other readers
//! accept them too), but no RDF syntax can hold them: the N-Quads we would write reads
//! back as an error, and Turtle would resolve a relative IRI against a base. So
//! `from-jelly` says how many it wrote, and `validate` refuses them.
//!
//! Which terms these are is the codec's to say ([`jelly::term::is_absolute_iri`],
//! [`jelly::term::needs_language_tag`]); the decoder flags the statements that hold
//! them ([`jelly::Decoder::non_rdf_statement`]) from checks it makes once per distinct
//! IRI and datatype entry. This module words what is wrong.

use jelly::term::{is_absolute_iri, needs_language_tag};
use jelly::{Decoder, LiteralKind, StatementRef, TermRef};

/// What is not RDF about the statement `dec` handed out last, or `None`: cheap for the
/// usual statement, whose terms the decoder has already found to be RDF.
#[inline]
pub fn last_statement_problem(dec: &Decoder) -> Option<String> {
    dec.non_rdf_statement().and_then(statement_problem)
}

/// What is not RDF about `t` (quoted triples searched too), or `None`.
///
/// ```
/// use jelly::{LiteralRef, LiteralKind, TermRef};
/// use jelly_cli::rdf_check::term_problem;
/// assert_eq!(term_problem(TermRef::Iri("http://ex.org/a")), None);
/// assert!(term_problem(TermRef::Iri("a")).unwrap().contains("not absolute"));
/// let ls = LiteralRef { lex: "x", kind: LiteralKind::Typed(jelly::term::RDF_LANG_STRING) };
/// assert!(term_problem(TermRef::Literal(ls)).unwrap().contains("language tag"));
/// ```
pub fn term_problem(t: TermRef<'_>) -> Option<String> {
    match t {
        TermRef::Iri(i) if !is_absolute_iri(i) => Some(format!(
            "IRI <{i}> is not absolute (it has no scheme), which RDF does not allow"
        )),
        TermRef::Literal(l) => match l.kind {
            LiteralKind::Typed(dt) if needs_language_tag(dt) => Some(format!(
                "literal \"{}\" has the datatype <{dt}> without a language tag, which RDF does not allow",
                l.lex
            )),
            LiteralKind::Typed(dt) if !is_absolute_iri(dt) => Some(format!(
                "datatype IRI <{dt}> is not absolute (it has no scheme), which RDF does not allow"
            )),
            _ => None,
        },
        TermRef::Triple(q) => (0..3).find_map(|i| term_problem(q.term(i))),
        _ => None,
    }
}

/// What is not RDF about a statement's terms, or `None`.
pub fn statement_problem(st: StatementRef<'_>) -> Option<String> {
    [
        Some(st.subject),
        Some(st.predicate),
        Some(st.object),
        st.graph,
    ]
    .into_iter()
    .flatten()
    .find_map(term_problem)
}
