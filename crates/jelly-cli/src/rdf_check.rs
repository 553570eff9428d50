//! Terms a Jelly stream can carry that are not RDF: IRIs that are not absolute, and
//! literals typed `rdf:langString` or `rdf:dirLangString` without a language tag.
//!
//! The decoder takes them (the spec says IRIs SHOULD be valid, and other readers
//! accept them too), but no RDF syntax can hold them: the N-Quads we would write reads
//! back as an error, and Turtle would resolve a relative IRI against a base. So
//! `from-jelly` says how many it wrote, and `validate` refuses them.

use jelly::{LiteralKind, StatementRef, TermRef};

const RDF_DIR_LANG_STRING: &str = "http://www.w3.org/1999/02/22-rdf-syntax-ns#dirLangString";

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
        TermRef::Iri(i) if !is_absolute(i) => Some(format!(
            "IRI <{i}> is not absolute (it has no scheme), which RDF does not allow"
        )),
        TermRef::Literal(l) => match l.kind {
            LiteralKind::Typed(dt)
                if dt == jelly::term::RDF_LANG_STRING || dt == RDF_DIR_LANG_STRING =>
            {
                Some(format!(
                    "literal \"{}\" has the datatype <{dt}> without a language tag, which RDF does not allow",
                    l.lex
                ))
            }
            LiteralKind::Typed(dt) if !is_absolute(dt) => Some(format!(
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

/// Whether `iri` starts with a scheme (`ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":"`,
/// RFC 3986 §3.1): absolute IRIs do, relative references do not.
fn is_absolute(iri: &str) -> bool {
    let b = iri.as_bytes();
    let Some(colon) = b.iter().position(|&c| c == b':') else {
        return false;
    };
    colon > 0
        && b[0].is_ascii_alphabetic()
        && b[1..colon]
            .iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_iris_have_a_scheme() {
        for ok in ["http://a", "urn:x", "a+b-c.d:e", "uuid:0686"] {
            assert!(is_absolute(ok), "{ok}");
        }
        for bad in ["", "a", "/a:b", ":x", "1a:b", "a b:c", "s", "#frag"] {
            assert!(!is_absolute(bad), "{bad}");
        }
    }
}
