//! Input with one copy of each distinct string: statements that refer to an arena,
//! as a parser that interns its terms (Jena's RIOT shares one node object per
//! distinct IRI) or an in-memory graph gives them.

use jelly::Statement;

/// One term as offsets into the arena: (start, len, kind, extra start, extra len).
type Span = (u32, u32, u8, u32, u32);

/// All distinct strings of the input in one buffer; statements refer to them, as
/// they would refer to a parser's buffer or an interned term store (Jena's RIOT
/// parser also shares one node object per distinct IRI).
pub struct Arena {
    buf: String,
    spans: Vec<[Span; 4]>,
}

/// The arena of `statements` (quoted triples are left out: they become the default graph).
pub fn intern(statements: &[Statement]) -> Arena {
    use std::collections::HashMap;
    let mut buf = String::new();
    let mut seen: HashMap<String, (u32, u32)> = HashMap::new();
    let mut put = |s: &str, buf: &mut String| -> (u32, u32) {
        if let Some(&r) = seen.get(s) {
            return r;
        }
        let r = (buf.len() as u32, s.len() as u32);
        buf.push_str(s);
        seen.insert(s.to_owned(), r);
        r
    };
    let mut spans = Vec::with_capacity(statements.len());
    for st in statements {
        let mut row = [(0, 0, 0u8, 0, 0); 4];
        let terms = [
            Some(&st.subject),
            Some(&st.predicate),
            Some(&st.object),
            st.graph.as_ref(),
        ];
        for (i, t) in terms.iter().enumerate() {
            row[i] = match t {
                None | Some(jelly::Term::DefaultGraph) => (0, 0, 0, 0, 0),
                Some(jelly::Term::Iri(x)) => {
                    let (a, b) = put(x, &mut buf);
                    (a, b, 1, 0, 0)
                }
                Some(jelly::Term::BlankNode(x)) => {
                    let (a, b) = put(x, &mut buf);
                    (a, b, 2, 0, 0)
                }
                Some(jelly::Term::Literal(l)) => {
                    let (a, b) = put(&l.lex, &mut buf);
                    match &l.kind {
                        jelly::OwnedLiteralKind::Simple => (a, b, 3, 0, 0),
                        jelly::OwnedLiteralKind::Lang(x) => {
                            let (c, d) = put(x, &mut buf);
                            (a, b, 4, c, d)
                        }
                        jelly::OwnedLiteralKind::Typed(x) => {
                            let (c, d) = put(x, &mut buf);
                            (a, b, 5, c, d)
                        }
                    }
                }
                Some(jelly::Term::Triple(_)) => (0, 0, 0, 0, 0),
            };
        }
        spans.push(row);
    }
    Arena { buf, spans }
}

/// The statements of `arena`, as quads when `quads`.
pub fn arena_refs<'a>(arena: &'a Arena, quads: bool) -> Vec<jelly::StatementRef<'a>> {
    use jelly::{LiteralKind, LiteralRef, TermRef};
    let s = |a: u32, b: u32| &arena.buf[a as usize..(a + b) as usize];
    arena
        .spans
        .iter()
        .map(|row| {
            let t = |i: usize| {
                let (a, b, k, c, d) = row[i];
                match k {
                    1 => TermRef::Iri(s(a, b)),
                    2 => TermRef::BlankNode(s(a, b)),
                    3 => TermRef::Literal(LiteralRef {
                        lex: s(a, b),
                        kind: LiteralKind::Simple,
                    }),
                    4 => TermRef::Literal(LiteralRef {
                        lex: s(a, b),
                        kind: LiteralKind::Lang(s(c, d)),
                    }),
                    5 => TermRef::Literal(LiteralRef {
                        lex: s(a, b),
                        kind: LiteralKind::Typed(s(c, d)),
                    }),
                    _ => TermRef::DefaultGraph,
                }
            };
            jelly::StatementRef {
                subject: t(0),
                predicate: t(1),
                object: t(2),
                graph: quads.then(|| t(3)),
            }
        })
        .collect()
}
