//! RDF Patch text format: round trips, Jena's forms, errors with positions, validation.

use jelly::rdf_patch::{
    PatchRow, PatchRowRef, RdfPatchError, RdfPatchParser, RdfPatchValidator, RdfPatchWriteError,
    RdfPatchWriter, Violation, ViolationKind, parse_str, to_string, validate,
};
use jelly::{Literal, OwnedLiteralKind, Statement, StatementRef, Term, TermRef, Triple};

fn iri(s: &str) -> Term {
    Term::Iri(s.to_owned())
}
fn bnode(s: &str) -> Term {
    Term::BlankNode(s.to_owned())
}
fn lit(lex: &str, kind: OwnedLiteralKind) -> Term {
    Term::Literal(Literal {
        lex: lex.to_owned(),
        kind,
    })
}
fn typed(lex: &str, dt: &str) -> Term {
    lit(lex, OwnedLiteralKind::Typed(dt.to_owned()))
}
fn triple(s: Term, p: Term, o: Term) -> Term {
    Term::Triple(Box::new(Triple {
        subject: s,
        predicate: p,
        object: o,
    }))
}
fn st(s: Term, p: Term, o: Term, g: Option<Term>) -> Statement {
    Statement {
        subject: s,
        predicate: p,
        object: o,
        graph: g,
    }
}

fn write_all(rows: &[PatchRow]) -> String {
    let mut w = RdfPatchWriter::new(Vec::new());
    for r in rows {
        w.write(r).unwrap();
    }
    String::from_utf8(w.finish().unwrap()).unwrap()
}

fn parse_gen(text: &str) -> Result<Vec<PatchRow>, RdfPatchError> {
    RdfPatchParser::new(text.as_bytes())
        .generalized(true)
        .collect()
}

/// Every row type, triples and quads, blank nodes, escaped/lang/typed literals, RDF-star.
fn sample_rows() -> Vec<PatchRow> {
    let xsd_int = "http://www.w3.org/2001/XMLSchema#integer";
    vec![
        PatchRow::Header {
            key: "id".into(),
            value: iri("uuid:0686c69d-8f89-4496-acb5-744f0157a8db"),
        },
        PatchRow::Header {
            key: "prev".into(),
            value: iri("uuid:3ee0eca0-6d5f-4b4d-85db-f69ab1167eb1"),
        },
        PatchRow::Header {
            key: "version".into(),
            value: typed("7", xsd_int),
        },
        PatchRow::Header {
            key: "create".into(),
            value: bnode("b0"),
        },
        PatchRow::Header {
            key: "has space".into(),
            value: Term::simple_literal("x"),
        },
        PatchRow::TxStart,
        PatchRow::PrefixAdd {
            prefix: "rdf".into(),
            iri: "http://www.w3.org/1999/02/22-rdf-syntax-ns#".into(),
            graph: None,
        },
        PatchRow::PrefixAdd {
            prefix: "".into(),
            iri: "http://ex/".into(),
            graph: Some(iri("http://ex/g")),
        },
        PatchRow::PrefixDelete {
            prefix: "old".into(),
            graph: None,
        },
        PatchRow::PrefixDelete {
            prefix: "old".into(),
            graph: Some(bnode("g1")),
        },
        PatchRow::Add(st(
            iri("http://ex/s"),
            iri("http://ex/p"),
            iri("http://ex/o"),
            None,
        )),
        PatchRow::Add(st(
            bnode("b1"),
            iri("http://ex/p"),
            lit(
                "tab\there \"quoted\" back\\slash\nnew line \u{1} é 😀",
                OwnedLiteralKind::Simple,
            ),
            Some(iri("http://ex/g")),
        )),
        PatchRow::Add(st(
            iri("http://ex/s"),
            iri("http://ex/p"),
            // Tags are read in lower case (see `tags_are_read_in_lower_case`).
            lit("chat", OwnedLiteralKind::Lang("fr-ca".into())),
            Some(bnode("graph-2")),
        )),
        PatchRow::Delete(st(
            iri("http://ex/s"),
            iri("http://ex/p"),
            typed("2024-01-01", "http://www.w3.org/2001/XMLSchema#date"),
            None,
        )),
        PatchRow::Delete(st(
            bnode("weird label/with:chars"),
            iri("http://ex/pé"),
            bnode("0starts-with-digit"),
            Some(iri("http://ex/g")),
        )),
        PatchRow::TxAbort,
        PatchRow::TxStart,
        PatchRow::Add(st(
            triple(
                iri("http://ex/a"),
                iri("http://ex/b"),
                triple(bnode("x"), iri("http://ex/c"), typed("42", xsd_int)),
            ),
            iri("http://ex/says"),
            triple(
                iri("http://ex/a"),
                iri("http://ex/b"),
                Term::simple_literal("o"),
            ),
            None,
        )),
        PatchRow::Segment,
        PatchRow::TxCommit,
    ]
}

#[test]
fn round_trip_every_row_type() {
    let rows = sample_rows();
    let text = write_all(&rows);
    let back = parse_str(&text).unwrap();
    assert_eq!(back, rows, "{text}");
    // The canonical text is a fixed point.
    assert_eq!(write_all(&back), text);
    assert_eq!(to_string(&rows).unwrap(), text);
}

#[test]
fn canonical_forms() {
    let text = write_all(&sample_rows());
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "H id <uuid:0686c69d-8f89-4496-acb5-744f0157a8db> ."
    );
    assert_eq!(
        lines[2],
        "H version \"7\"^^<http://www.w3.org/2001/XMLSchema#integer> ."
    );
    assert_eq!(lines[4], "H \"has space\" \"x\" .");
    assert_eq!(lines[5], "TX .");
    assert_eq!(
        lines[6],
        "PA \"rdf\" \"http://www.w3.org/1999/02/22-rdf-syntax-ns#\" ."
    );
    assert_eq!(lines[7], "PA \"\" \"http://ex/\" <http://ex/g> .");
    assert_eq!(lines[8], "PD \"old\" .");
    assert_eq!(lines[9], "PD \"old\" <_:g1> .");
    assert_eq!(lines[10], "A <http://ex/s> <http://ex/p> <http://ex/o> .");
    assert_eq!(
        lines[11],
        "A <_:b1> <http://ex/p> \"tab\\there \\\"quoted\\\" back\\\\slash\\nnew line \\u0001 é 😀\" <http://ex/g> ."
    );
    assert_eq!(
        lines[12],
        "A <http://ex/s> <http://ex/p> \"chat\"@fr-ca <_:graph-2> ."
    );
    // Blank nodes are always written in Jena's <_:…> form, whatever their label.
    assert_eq!(
        lines[14],
        "D <_:weird\\u0020label/with:chars> <http://ex/pé> <_:0starts-with-digit> <http://ex/g> ."
    );
    assert_eq!(lines[15], "TA .");
    assert_eq!(
        lines[17],
        "A <<( <http://ex/a> <http://ex/b> <<( <_:x> <http://ex/c> \"42\"^^<http://www.w3.org/2001/XMLSchema#integer> )>> )>> <http://ex/says> <<( <http://ex/a> <http://ex/b> \"o\" )>> ."
    );
    assert_eq!(lines[18], "Z .");
    assert_eq!(lines[19], "TC .");
}

#[test]
fn jena_documentation_example_parses() {
    // https://jena.apache.org/documentation/rdf-patch/ (header section example).
    let doc = r#"H id <uuid:0686c69d-8f89-4496-acb5-744f0157a8db> .
H prev <uuid:3ee0eca0-6d5f-4b4d-85db-f69ab1167eb1> .
TX .
PA "rdf" "http://www.w3.org/1999/02/22-rdf-syntax-ns#" .
PA "owl" "http://www.w3.org/2002/07/owl#" .
PA "rdfs" "http://www.w3.org/2000/01/rdf-schema#" .
A <http://example/SubClass> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <http://www.w3.org/2002/07/owl#Class> .
A <http://example/SubClass> <http://www.w3.org/2000/01/rdf-schema#subClassOf> <http://example/SUPER_CLASS> .
A <http://example/SubClass> <http://www.w3.org/2000/01/rdf-schema#label> "SubClass" .
TC .
"#;
    let rows = parse_str(doc).unwrap();
    assert_eq!(rows.len(), 10);
    assert_eq!(
        rows[1],
        PatchRow::Header {
            key: "prev".into(),
            value: iri("uuid:3ee0eca0-6d5f-4b4d-85db-f69ab1167eb1")
        }
    );
    assert_eq!(
        rows[3],
        PatchRow::PrefixAdd {
            prefix: "rdf".into(),
            iri: "http://www.w3.org/1999/02/22-rdf-syntax-ns#".into(),
            graph: None
        }
    );
    assert_eq!(
        rows[8],
        PatchRow::Add(st(
            iri("http://example/SubClass"),
            iri("http://www.w3.org/2000/01/rdf-schema#label"),
            Term::simple_literal("SubClass"),
            None
        ))
    );
    assert_eq!(rows[9], PatchRow::TxCommit);
    // Our writer reproduces the documentation's text exactly.
    assert_eq!(write_all(&rows), doc);
    assert!(validate(doc.as_bytes()).unwrap().is_empty());
}

#[test]
fn jena_test_file_syntax_1_parses() {
    // jena-rdfpatch/testing/files/syntax-1.rdfp: note "<…>." with no space before the dot.
    let doc = r#"# Text patch.
H id <uuid:bbe2edae-325e-11ec-abcc-a70bbba0dfb1>.
TX .
PA "ex" <http://example> .
PD "ex" .
PA "" <http://example> .
PD "" .
A <http://example/s> <http://example/p> <http://example/o1> <http://example/g> .
D <http://example/s> <http://example/p> <http://example/o1> <http://example/g> .
TC .
"#;
    let rows = parse_str(doc).unwrap();
    assert_eq!(rows.len(), 9);
    assert_eq!(
        rows[4],
        PatchRow::PrefixAdd {
            prefix: "".into(),
            iri: "http://example".into(),
            graph: None
        }
    );
}

#[test]
fn prefix_forms_all_read_the_same() {
    let want = PatchRow::PrefixAdd {
        prefix: "rdf".into(),
        iri: "http://www.w3.org/1999/02/22-rdf-syntax-ns#".into(),
        graph: None,
    };
    for text in [
        "PA \"rdf\" \"http://www.w3.org/1999/02/22-rdf-syntax-ns#\" .",
        "PA \"rdf\" <http://www.w3.org/1999/02/22-rdf-syntax-ns#> .",
        "PA rdf <http://www.w3.org/1999/02/22-rdf-syntax-ns#> .",
        "PA rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#> .",
        "PA rdf: \"http://www.w3.org/1999/02/22-rdf-syntax-ns#\" .",
    ] {
        assert_eq!(
            parse_str(text).unwrap(),
            std::slice::from_ref(&want),
            "{text}"
        );
    }
    let empty = PatchRow::PrefixDelete {
        prefix: "".into(),
        graph: Some(iri("http://g")),
    };
    for text in ["PD : <http://g> .", "PD \"\" <http://g> ."] {
        assert_eq!(
            parse_str(text).unwrap(),
            std::slice::from_ref(&empty),
            "{text}"
        );
    }
    assert_eq!(
        parse_str("PD ex.a: .").unwrap(),
        [PatchRow::PrefixDelete {
            prefix: "ex.a".into(),
            graph: None
        }]
    );
}

#[test]
fn jena_term_forms() {
    // What Jena's writer produces: <_:label> blank nodes, bare numbers and booleans.
    let xsd = |t: &str| format!("http://www.w3.org/2001/XMLSchema#{t}");
    let rows = parse_str(concat!(
        "A <_:b0> <http://p> 42 .\n",
        "A <_:b0> <http://p> -1.5 .\n",
        "A <_:b0> <http://p> 1e3 .\n",
        "A <_:b0> <http://p> +1.E-3 .\n",
        "A <_:b0> <http://p> .5 .\n",
        "A <_:b0> <http://p> true .\n",
        "A <_:b0> <http://p> false <http://g>.\n",
        "A <_:b0> <http://p> 7.\n",
        "A _:b0 <http://p> << <http://a> <http://b> 3 >> .\n",
        "TB .\n",
    ))
    .unwrap();
    let objects: Vec<Term> = rows
        .iter()
        .filter_map(|r| match r {
            PatchRow::Add(s) => {
                assert_eq!(s.subject, bnode("b0"));
                Some(s.object.clone())
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        objects,
        [
            typed("42", &xsd("integer")),
            typed("-1.5", &xsd("decimal")),
            typed("1e3", &xsd("double")),
            typed("+1.E-3", &xsd("double")),
            typed(".5", &xsd("decimal")),
            typed("true", &xsd("boolean")),
            typed("false", &xsd("boolean")),
            typed("7", &xsd("integer")),
            triple(
                iri("http://a"),
                iri("http://b"),
                typed("3", &xsd("integer"))
            ),
        ]
    );
    assert_eq!(rows[9], PatchRow::TxStart);
    // ^^xsd:string is a simple literal; RDF 1.2 directional tags are kept.
    let rows = parse_str(concat!(
        "A <http://s> <http://p> \"x\"^^<http://www.w3.org/2001/XMLSchema#string> .\n",
        "A <http://s> <http://p> \"x\"@ar--rtl .\n",
    ))
    .unwrap();
    assert_eq!(
        rows[0],
        PatchRow::Add(st(
            iri("http://s"),
            iri("http://p"),
            Term::simple_literal("x"),
            None
        ))
    );
    assert_eq!(
        write_all(&rows).lines().nth(1),
        Some("A <http://s> <http://p> \"x\"@ar--rtl .")
    );
}

#[test]
fn comments_blank_lines_whitespace_crlf_bom() {
    let text = "\u{feff}# leading comment\r\n\r\n   \t\nTX . # trailing comment\r\n  A\t<http://s>   <http://p>\t\"o\"  .\nTC .";
    let mut p = RdfPatchParser::new(text.as_bytes());
    assert_eq!(p.next().unwrap().unwrap(), PatchRow::TxStart);
    assert_eq!(p.line(), 4);
    assert!(matches!(p.next().unwrap().unwrap(), PatchRow::Add(_)));
    assert_eq!(p.line(), 5);
    assert_eq!(p.next().unwrap().unwrap(), PatchRow::TxCommit);
    assert_eq!(p.line(), 6);
    assert!(p.next().is_none());
}

#[test]
fn generalized_statements_need_the_option() {
    let text = "A \"lit\" _:p <<( \"s\" \"p\" \"o\" )>> \"g\" .\nPD \"x\" \"g\" .\n";
    let rows = parse_gen(text).unwrap();
    assert_eq!(
        rows[0],
        PatchRow::Add(st(
            Term::simple_literal("lit"),
            bnode("p"),
            triple(
                Term::simple_literal("s"),
                Term::simple_literal("p"),
                Term::simple_literal("o")
            ),
            Some(Term::simple_literal("g"))
        ))
    );
    assert_eq!(parse_gen(&write_all(&rows)).unwrap(), rows);
    let e = parse_str(text).unwrap_err();
    assert_eq!(
        e.to_string(),
        "line 1, column 3: a literal cannot be the subject (only with generalized statements)"
    );
}

/// (input, line, column, message fragment)
const ERRORS: &[(&str, usize, usize, &str)] = &[
    (
        "TX .\nA <s> <p> <o>\n",
        2,
        14,
        "expected '.' at the end of the row",
    ),
    (
        "A <s> <p> <o> <g> <x> .",
        1,
        19,
        "too many terms: an A row has 3",
    ),
    (
        "D <s> <p> .",
        1,
        11,
        "a D row needs 3 terms (a triple) or 4 (a quad), found 2",
    ),
    ("XX <s> .", 1, 1, "unknown row keyword 'XX'"),
    ("  <s> <p> <o> .", 1, 3, "expected a row keyword"),
    ("TX <x> .", 1, 4, "expected '.' at the end of the row"),
    ("TC . TX .", 1, 6, "unexpected text after the '.'"),
    ("A \"s\" <p> <o> .", 1, 3, "a literal cannot be the subject"),
    (
        "A <s> _:p <o> .",
        1,
        7,
        "a blank node cannot be the predicate",
    ),
    (
        "A <s> <p> <o> \"g\" .",
        1,
        15,
        "a literal cannot be a graph name",
    ),
    (
        "A <s> <p> <<( \"s\" <p> <o> )>> .",
        1,
        15,
        "a literal cannot be the subject",
    ),
    (
        "A <s> <p> <<( <a> <b> <c> >> .",
        1,
        27,
        "expected ')>>' to close the triple term",
    ),
    ("A <s> <p> \"open .", 1, 18, "unterminated literal"),
    ("A <s> <p> <o .", 1, 15, "unterminated IRI"),
    ("A <s> <p> _:-x .", 1, 13, "a blank node label starts with"),
    ("A <s> <p> 12abc .", 1, 11, "malformed number"),
    ("A <s> <p> maybe .", 1, 11, "expected an RDF term"),
    ("H <id> <x> .", 1, 3, "expected a header key"),
    ("H id .", 1, 6, "a header row needs a value"),
    (
        "H \"id\"@en <x> .",
        1,
        3,
        "a header key must be a plain string",
    ),
    ("PA <http://x> <http://y> .", 1, 4, "expected a prefix name"),
    (
        "PA \"x\"@en <http://y> .",
        1,
        4,
        "a prefix name must be a plain string",
    ),
    ("PA \"x\" .", 1, 8, "expected the prefix IRI"),
    (
        "PA \"x\" <y> \"g\" .",
        1,
        12,
        "a literal cannot be a graph name",
    ),
    (
        "PD \"x\" <g> <h> .",
        1,
        12,
        "expected '.' at the end of the row",
    ),
    ("A <s> <p> \"a\\qb\" .", 1, 15, "invalid escape"),
    // Columns count characters, not bytes.
    (
        "A <é> <p> <o> \"x\" .",
        1,
        15,
        "a literal cannot be a graph name",
    ),
];

#[test]
fn errors_carry_line_and_column() {
    for &(input, line, column, fragment) in ERRORS {
        let e = parse_str(input).unwrap_err();
        match &e {
            RdfPatchError::Syntax {
                line: l,
                column: c,
                message,
            } => {
                assert_eq!((*l, *c), (line, column), "{input:?}: {e}");
                assert!(message.contains(fragment), "{input:?}: {e}");
            }
            other => panic!("{input:?}: {other}"),
        }
        assert_eq!(e.line(), line);
        assert_eq!(e.column(), Some(column));
    }
}

#[test]
fn error_line_counts_skipped_lines_and_stops_iteration() {
    let text = "# c\n\nTX .\n\n# c\nA <s> <p> <o> <g> <h> .\nTC .\n";
    let mut p = RdfPatchParser::new(text.as_bytes());
    assert!(p.next().unwrap().is_ok());
    let e = p.next().unwrap().unwrap_err();
    assert_eq!(e.to_string().split(':').next(), Some("line 6, column 19"));
    assert!(p.next().is_none(), "the parser stops after an error");
}

#[test]
fn invalid_utf8_and_long_lines() {
    let e = RdfPatchParser::new(&b"TX .\nA <s> <p> \"\xff\" .\n"[..])
        .nth(1)
        .unwrap()
        .unwrap_err();
    assert_eq!(e.to_string(), "line 2, column 12: invalid UTF-8");

    let long = format!("TX .\nA <s> <p> \"{}\" .\nTC .\n", "x".repeat(100));
    let e = RdfPatchParser::new(long.as_bytes())
        .max_line_len(64)
        .nth(1)
        .unwrap()
        .unwrap_err();
    assert!(matches!(
        e,
        RdfPatchError::LineTooLong { line: 2, limit: 64 }
    ));
    assert_eq!(e.to_string(), "line 2: longer than the limit of 64 bytes");
    // Exactly at the limit is fine, with or without CRLF and a final newline.
    let row = "A <s> <p> \"xxxx\" .";
    for text in [format!("{row}\r\n"), format!("{row}\n"), row.to_owned()] {
        let rows: Result<Vec<_>, _> = RdfPatchParser::new(text.as_bytes())
            .max_line_len(row.len())
            .collect();
        assert_eq!(rows.unwrap().len(), 1, "{text:?}");
    }
}

#[test]
fn writer_rejects_unrepresentable_rows() {
    let mut w = RdfPatchWriter::new(Vec::new());
    let bad_iri = StatementRef::triple(TermRef::Iri("_:x"), TermRef::Iri("p"), TermRef::Iri("o"));
    assert!(matches!(
        w.write(PatchRowRef::Add(bad_iri)),
        Err(RdfPatchWriteError::Unrepresentable(_))
    ));
    let dg = StatementRef::triple(TermRef::DefaultGraph, TermRef::Iri("p"), TermRef::Iri("o"));
    assert!(w.write(PatchRowRef::Delete(dg)).is_err());
    assert!(w.get_ref().is_empty(), "nothing written for rejected rows");
    // The default graph as a statement's graph is written as a triple.
    let st = StatementRef::quad(
        TermRef::Iri("s"),
        TermRef::Iri("p"),
        TermRef::Iri("o"),
        TermRef::DefaultGraph,
    );
    w.write(PatchRowRef::Add(st)).unwrap();
    assert_eq!(w.finish().unwrap(), b"A <s> <p> <o> .\n");
}

#[test]
fn borrowed_and_owned_rows_agree() {
    for row in sample_rows() {
        let r = row.as_ref();
        assert_eq!(r.to_owned(), row);
        assert_eq!(r.keyword(), row.keyword());
        assert_eq!(PatchRowRef::from(&row), r);
    }
}

fn violations(text: &str) -> Vec<(usize, ViolationKind)> {
    validate(text.as_bytes())
        .unwrap()
        .into_iter()
        .map(|Violation { line, kind }| (line, kind))
        .collect()
}

#[test]
fn validation_rules() {
    // Valid: header, several transactions, changes outside TX (transactions are optional).
    assert!(
        violations(concat!(
            "H id <uuid:1> .\n",
            "TX .\nA <s> <p> <o> .\nTC .\n",
            "TX .\nD <s> <p> <o> .\nTA .\n",
            "A <s> <p> <o2> .\nPA \"x\" <http://x> .\n",
        ))
        .is_empty()
    );
    assert_eq!(
        violations("TX .\nA <s> <p> <o> .\n# c\nTX .\nTC .\n"),
        [(4, ViolationKind::NestedTransaction { open_line: 1 })]
    );
    assert_eq!(
        violations("A <s> <p> <o> .\nTC .\n\nTA .\n"),
        [
            (2, ViolationKind::CommitOutsideTransaction),
            (4, ViolationKind::AbortOutsideTransaction)
        ]
    );
    assert_eq!(
        violations("H id <x> .\nTX .\nA <s> <p> <o> .\n"),
        [(2, ViolationKind::UnterminatedTransaction)]
    );
    assert_eq!(
        violations("H id <x> .\n\nTX .\nH prev <y> .\nTC .\nH z <z> .\n"),
        [
            (
                4,
                ViolationKind::HeaderAfterChanges {
                    first_change_line: 3
                }
            ),
            (
                6,
                ViolationKind::HeaderAfterChanges {
                    first_change_line: 3
                }
            )
        ]
    );
    let rows = parse_str("TX .\nH prev <y> .\nTC .\n").unwrap();
    let mut v = RdfPatchValidator::new().allow_late_headers(true);
    assert!(
        rows.iter()
            .enumerate()
            .all(|(i, r)| v.check(i + 1, r).is_none())
    );
    assert!(v.finish().is_none());
    // `Z` ends a patch: the next one may have its own header, and a transaction open
    // at it is not ended.
    assert!(
        violations(concat!(
            "H id <uuid:1> .\nTX .\nA <s> <p> <o> .\nTC .\nZ .\n",
            "H id <uuid:2> .\nH prev <uuid:1> .\nTX .\nD <s> <p> <o> .\nTC .\nZ .\n",
        ))
        .is_empty()
    );
    assert_eq!(
        violations("TX .\nA <s> <p> <o> .\nZ .\nTC .\n"),
        [
            (1, ViolationKind::UnterminatedTransaction),
            (4, ViolationKind::CommitOutsideTransaction)
        ]
    );
    let msg = validate(&b"TX .\nTX .\n"[..]).unwrap()[0].to_string();
    assert_eq!(
        msg,
        "line 2: TX inside the transaction started on line 1 (transactions do not nest)"
    );
}

#[test]
fn validate_reports_parse_errors() {
    let e = validate(&b"TX .\nQ .\n"[..]).unwrap_err();
    assert_eq!(e.line(), 2);
}

/// Triple terms nested deeper than N-Triples allows are refused with the line, at any
/// depth (each level recursed once: 20 000 levels overflowed the stack), and a depth
/// within the limit still reads.
#[test]
fn deeply_nested_triple_terms_are_refused_not_overflowed() {
    let nested = |n: usize, open: &str, close: &str| {
        format!(
            "TX .\nA {}<http://e/a>{} <http://e/p> <http://e/o> .\nTC .\n",
            open.repeat(n),
            format!(" <http://e/b> <http://e/c> {close}").repeat(n)
        )
    };
    for (open, close) in [("<< ", ">>"), ("<<( ", ")>>")] {
        let ok = parse_str(&nested(100, open, close)).unwrap();
        assert_eq!(ok.len(), 3);
        for n in [101, 20_000] {
            let e = parse_str(&nested(n, open, close)).unwrap_err();
            assert_eq!(e.line(), 2, "{e}");
            assert!(e.to_string().contains("nested deeper than 100"), "{e}");
        }
    }
    // The validator reads rows with the same parser.
    let e = validate(nested(20_000, "<< ", ">>").as_bytes()).unwrap_err();
    assert!(e.to_string().contains("nested deeper"), "{e}");
}

/// A language tag is read in lower case, as oxrdf keeps tags (RDF compares them
/// ignoring case), so every reader of the project gives one spelling.
#[test]
fn tags_are_read_in_lower_case() {
    let rows = parse_str("A <http://ex/s> <http://ex/p> \"chat\"@fr-CA .\n").unwrap();
    let PatchRow::Add(st) = &rows[0] else {
        panic!("{rows:?}")
    };
    assert_eq!(
        st.object,
        Term::Literal(jelly::Literal {
            lex: "chat".into(),
            kind: OwnedLiteralKind::Lang("fr-ca".into())
        })
    );
}
