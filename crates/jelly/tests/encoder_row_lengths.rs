//! Statement rows whose lengths cross the varint boundaries of their headers: the
//! encoder builds a row behind a header that assumes one-byte lengths and moves the
//! body when it is longer, and writes literal and blank node headers in one piece.

use jelly::{
    JellyReader, JellyWriterBuilder, Literal, OwnedLiteralKind, PhysicalType, Statement,
    StreamOptions, Term,
};

/// Lengths around the 1/2/3-byte varint boundaries of the term, the statement and the row.
const LENGTHS: [usize; 12] = [
    0, 1, 100, 110, 111, 125, 126, 127, 128, 16_250, 16_383, 16_384,
];

fn literal(lex: String, kind: OwnedLiteralKind) -> Term {
    Term::Literal(Literal { lex, kind })
}

fn statements() -> Vec<Statement> {
    let mut out = Vec::new();
    for (i, &n) in LENGTHS.iter().enumerate() {
        let text = "é".repeat(n / 2) + &"x".repeat(n % 2);
        let objects = [
            literal(text.clone(), OwnedLiteralKind::Simple),
            literal(
                text.clone(),
                OwnedLiteralKind::Lang("en-GB".repeat(1 + n % 40)),
            ),
            literal(
                text.clone(),
                OwnedLiteralKind::Typed(format!("http://ex.org/dt{}", n % 3)),
            ),
            Term::BlankNode(format!("b{i}{}", "y".repeat(n))),
        ];
        for (j, o) in objects.into_iter().enumerate() {
            out.push(Statement {
                subject: Term::Iri(format!("http://ex.org/s{i}")),
                predicate: Term::Iri(format!("http://ex.org/p{j}")),
                object: o,
                graph: Some(Term::BlankNode(format!("g{}", "z".repeat(n)))),
            });
        }
    }
    out
}

#[test]
fn rows_of_every_header_length_round_trip() {
    let input = statements();
    let opts = StreamOptions::small().with_physical_type(PhysicalType::Quads);
    let mut w = JellyWriterBuilder::new(opts).build(Vec::new()).unwrap();
    for st in &input {
        w.add(st.as_ref()).unwrap();
    }
    let bytes = w.finish().unwrap();
    let frames = JellyReader::from_slice(&bytes).read_all_frames().unwrap();
    let output: Vec<Statement> = frames.into_iter().flatten().collect();
    assert_eq!(output, input);
}
