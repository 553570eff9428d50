//! Jelly-Patch: round trips through the writer and reader, and one hand-built stream
//! per validation rule of the specification.

use jelly::patch::{
    PatchEncoder, PatchEvent, PatchOptions, PatchReader, PatchStatementType as St,
    PatchStreamType as Sty, PatchWriter,
};
use jelly::{DecodeErrorKind as K, EncodeError, Statement, StatementRef, Term, TermRef};
use jelly_proto::fields::patch::{header as hf, namespace as nf, options as of, row};
use jelly_proto::wire::{put_bytes_field, put_uint_field, put_varint};

/// Owned copy of an event, for comparisons.
#[derive(Debug, Clone, PartialEq)]
enum Ev {
    Header(String, Term),
    Tx,
    Tc,
    Ta,
    Pa(String, String, Option<Term>),
    Pd(String, Option<String>, Option<Term>),
    A(Statement),
    D(Statement),
    Punct,
}

fn own(ev: PatchEvent<'_>) -> Option<Ev> {
    Some(match ev {
        PatchEvent::Options(_) => return None,
        PatchEvent::Header { key, value } => Ev::Header(key.into(), value.to_owned()),
        PatchEvent::TransactionStart => Ev::Tx,
        PatchEvent::TransactionCommit => Ev::Tc,
        PatchEvent::TransactionAbort => Ev::Ta,
        PatchEvent::AddNamespace { name, iri, graph } => {
            Ev::Pa(name.into(), iri.into(), graph.map(|g| g.to_owned()))
        }
        PatchEvent::DeleteNamespace { name, iri, graph } => Ev::Pd(
            name.into(),
            iri.map(Into::into),
            graph.map(|g| g.to_owned()),
        ),
        PatchEvent::Add(s) => Ev::A(s.to_owned()),
        PatchEvent::Delete(s) => Ev::D(s.to_owned()),
        PatchEvent::Punctuation => Ev::Punct,
    })
}

fn read(bytes: &[u8]) -> Result<Vec<(u64, Ev)>, jelly::DecodeError> {
    let mut out = Vec::new();
    PatchReader::new(bytes).for_each_event(|f, ev| {
        if let Some(e) = own(ev) {
            out.push((f, e))
        }
    })?;
    Ok(out)
}

fn iri(s: &str) -> TermRef<'_> {
    TermRef::Iri(s)
}

/// A change log: two transactions, namespaces, headers, blank nodes, literals.
fn change_log(quads: bool) -> Vec<Ev> {
    let g = |s: &str| {
        if quads {
            Some(Term::Iri(s.into()))
        } else {
            None
        }
    };
    let st = |s: &str, o: Term, graph: Option<Term>| Statement {
        subject: Term::Iri(format!("http://ex.org/{s}")),
        predicate: Term::Iri("http://ex.org/p".into()),
        object: o,
        graph,
    };
    vec![
        Ev::Header("id".into(), Term::Iri("urn:uuid:0b6e".into())),
        Ev::Header("prev".into(), Term::Iri("urn:uuid:0a11".into())),
        Ev::Tx,
        Ev::Pa("ex".into(), "http://ex.org/".into(), g("http://ex.org/g1")),
        Ev::A(st("s1", Term::simple_literal("one"), g("http://ex.org/g1"))),
        Ev::A(st(
            "s2",
            Term::BlankNode("b0".into()),
            g("http://ex.org/g1"),
        )),
        Ev::D(st("s1", Term::simple_literal("one"), g("http://ex.org/g2"))),
        Ev::Tc,
        Ev::Tx,
        Ev::Pd("ex".into(), None, g("http://ex.org/g2")),
        Ev::A(st(
            "s3",
            Term::Iri("http://ex.org/o".into()),
            g("http://ex.org/g2"),
        )),
        Ev::Ta,
    ]
}

fn write(opts: PatchOptions, events: &[Ev], patches: usize) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut w = PatchWriter::new(&mut buf, opts)
        .unwrap()
        .with_rows_per_frame(4);
    for _ in 0..patches {
        for e in events {
            let enc = w.encoder();
            match e {
                Ev::Header(k, v) => enc.header(k, v.as_ref()).unwrap(),
                Ev::Tx => enc.transaction_start().unwrap(),
                Ev::Tc => enc.transaction_commit().unwrap(),
                Ev::Ta => enc.transaction_abort().unwrap(),
                Ev::Pa(n, i, g) => enc
                    .add_namespace(n, i, g.as_ref().map(Term::as_ref))
                    .unwrap(),
                Ev::Pd(n, i, g) => enc
                    .delete_namespace(n, i.as_deref(), g.as_ref().map(Term::as_ref))
                    .unwrap(),
                Ev::A(s) => enc.add(s.as_ref()).unwrap(),
                Ev::D(s) => enc.delete(s.as_ref()).unwrap(),
                Ev::Punct => enc.punctuation().unwrap(),
            }
            if !matches!(e, Ev::Tx) && !w.encoder().in_transaction() {
                w.maybe_flush().unwrap();
            }
        }
        w.end_patch().unwrap();
    }
    w.finish().unwrap();
    buf
}

#[test]
fn round_trip_every_stream_and_statement_type() {
    for quads in [false, true] {
        for sty in [Sty::Frame, Sty::Flat, Sty::Punctuated] {
            let st = if quads { St::Quads } else { St::Triples };
            let events = change_log(quads);
            let bytes = write(PatchOptions::small(st, sty), &events, 3);
            let got = read(&bytes).unwrap_or_else(|e| panic!("{st:?} {sty:?}: {e}"));
            let mut want = Vec::new();
            for _ in 0..3 {
                want.extend(events.iter().cloned());
                if sty == Sty::Punctuated {
                    want.push(Ev::Punct);
                }
            }
            let got_events: Vec<Ev> = got.iter().map(|(_, e)| e.clone()).collect();
            assert_eq!(got_events, want, "{st:?} {sty:?}");
            if sty == Sty::Frame {
                // One frame per patch.
                let frames: std::collections::BTreeSet<u64> = got.iter().map(|(f, _)| *f).collect();
                assert_eq!(frames.len(), 3);
            }
        }
    }
}

/// Two patch files of the same options joined with `cat` decode as both: each stream
/// starts with explicit lookup ids, so the second's entries and first IRIs do not
/// resolve against the first's tables.
#[test]
fn patch_files_joined_by_cat_decode_to_both() {
    let opts = PatchOptions::small(St::Quads, Sty::Flat);
    let first = change_log(true);
    let other = |s: &str| Term::Iri(format!("http://other.example/{s}"));
    let second = vec![
        Ev::Tx,
        Ev::A(Statement {
            subject: other("s"),
            predicate: other("p"),
            object: other("o"),
            graph: Some(other("g")),
        }),
        Ev::Tc,
    ];
    let mut joined = write(opts.clone(), &first, 1);
    joined.extend(write(opts, &second, 1));
    let got: Vec<Ev> = read(&joined).unwrap().into_iter().map(|(_, e)| e).collect();
    let want: Vec<Ev> = first.into_iter().chain(second).collect();
    assert_eq!(got, want);
}

#[test]
fn repeated_terms_make_rows_small_and_survive_lru_eviction() {
    let opts = PatchOptions::with_tables(St::Quads, Sty::Flat, 8, 4, 2);
    let mut events = Vec::new();
    for i in 0..300 {
        let s = Statement {
            subject: Term::Iri(format!("http://ex{}.org/ns/s{}", i % 7, i % 13)),
            predicate: Term::Iri(format!("http://ex.org/p{}", i % 3)),
            object: Term::simple_literal(format!("v{}", i % 5)),
            graph: Some(Term::Iri(format!("http://g.org/{}", i % 4))),
        };
        events.push(if i % 5 == 0 { Ev::D(s) } else { Ev::A(s) });
        if i % 50 == 0 {
            events.push(Ev::Pa(
                format!("p{i}"),
                format!("http://ns{i}.org/"),
                Some(Term::Iri(format!("http://g.org/{}", i % 4))),
            ));
        }
    }
    let bytes = write(opts, &events, 1);
    let got: Vec<Ev> = read(&bytes).unwrap().into_iter().map(|(_, e)| e).collect();
    assert_eq!(got, events);
}

// ---- hand-built streams ------------------------------------------------------------

fn row_msg(field: u32, body: &[u8]) -> Vec<u8> {
    let mut r = Vec::new();
    put_bytes_field(&mut r, field, body);
    r
}

fn frame(rows: &[Vec<u8>]) -> Vec<u8> {
    let mut f = Vec::new();
    for r in rows {
        put_bytes_field(&mut f, 1, r);
    }
    let mut out = Vec::new();
    put_varint(&mut out, f.len() as u64);
    out.extend_from_slice(&f);
    out
}

fn options(st: u32, sty: u32, version: u32) -> Vec<u8> {
    let mut o = Vec::new();
    put_uint_field(&mut o, of::STATEMENT_TYPE, u64::from(st));
    put_uint_field(&mut o, of::STREAM_TYPE, u64::from(sty));
    put_uint_field(&mut o, of::MAX_NAME_TABLE_SIZE, 8);
    put_uint_field(&mut o, of::VERSION, u64::from(version));
    row_msg(row::OPTIONS, &o)
}

fn name_entry(value: &str) -> Vec<u8> {
    let mut e = Vec::new();
    put_bytes_field(&mut e, 2, value.as_bytes());
    row_msg(row::NAME, &e)
}

fn iri_msg(name_id: u32) -> Vec<u8> {
    let mut m = Vec::new();
    put_uint_field(&mut m, 2, u64::from(name_id));
    m
}

/// A quad row (A) with S/P/O = names 1, 2, 3 and an optional graph field.
fn add_row(graph_iri: Option<u32>) -> Vec<u8> {
    let mut q = Vec::new();
    put_bytes_field(&mut q, 1, &iri_msg(1));
    put_bytes_field(&mut q, 5, &iri_msg(2));
    put_bytes_field(&mut q, 9, &iri_msg(3));
    if let Some(g) = graph_iri {
        put_bytes_field(&mut q, 13, &iri_msg(g));
    }
    row_msg(row::STATEMENT_ADD, &q)
}

fn names() -> Vec<Vec<u8>> {
    vec![
        name_entry("http://s"),
        name_entry("http://p"),
        name_entry("http://o"),
        name_entry("http://g"),
    ]
}

fn marker(field: u32) -> Vec<u8> {
    row_msg(field, &[])
}

const TRIPLES: u32 = 1;
const QUADS: u32 = 2;
const FRAME: u32 = 1;
const FLAT: u32 = 2;
const PUNCTUATED: u32 = 3;

fn err_of(bytes: &[u8]) -> jelly::DecodeError {
    match read(bytes) {
        Ok(evs) => panic!("expected an error, decoded {evs:?}"),
        Err(e) => e,
    }
}

fn stream(frames: &[Vec<Vec<u8>>]) -> Vec<u8> {
    frames.iter().flat_map(|rows| frame(rows)).collect()
}

#[test]
fn transaction_must_not_span_frames_in_frame_streams() {
    let mut first = vec![options(TRIPLES, FRAME, 1)];
    first.extend(names());
    first.push(marker(row::TRANSACTION_START));
    first.push(add_row(None));
    let bytes = stream(&[first.clone(), vec![marker(row::TRANSACTION_COMMIT)]]);
    let e = err_of(&bytes);
    assert!(matches!(e.kind, K::TransactionSpansFrames), "{e}");
    assert_eq!(e.frame, 0);
    // The same rows in a FLAT stream are fine.
    first[0] = options(TRIPLES, FLAT, 1);
    let ok = stream(&[first, vec![marker(row::TRANSACTION_COMMIT)]]);
    assert_eq!(read(&ok).unwrap().len(), 3);
}

#[test]
fn punctuation_rules() {
    let mut rows = vec![
        options(TRIPLES, PUNCTUATED, 1),
        marker(row::TRANSACTION_START),
        marker(row::PUNCTUATION),
    ];
    let e = err_of(&stream(&[rows.clone()]));
    assert!(matches!(e.kind, K::PunctuationInTransaction), "{e}");
    assert_eq!(e.row, Some(2));
    // Every patch of a PUNCTUATED stream ends with its punctuation, the last one too:
    // rows after the last punctuation are a stream cut short.
    let mut p = vec![options(TRIPLES, PUNCTUATED, 1)];
    p.extend(names());
    p.push(add_row(None));
    p.push(marker(row::PUNCTUATION));
    assert_eq!(read(&stream(&[p.clone()])).unwrap().len(), 2);
    let e = err_of(&stream(&[p.clone(), vec![add_row(None)]]));
    assert!(matches!(e.kind, K::UnendedPatch(1)), "{e}");
    assert_eq!(e.frame, 1, "reported against the last frame");
    p.pop();
    assert!(matches!(err_of(&stream(&[p])).kind, K::UnendedPatch(1)));
    rows[0] = options(TRIPLES, FLAT, 1);
    rows.remove(1);
    let e = err_of(&stream(&[rows.clone()]));
    assert!(matches!(e.kind, K::PunctuationNotAllowed), "{e}");
    rows[0] = options(TRIPLES, FRAME, 1);
    assert!(matches!(
        err_of(&stream(&[rows])).kind,
        K::PunctuationNotAllowed
    ));
}

#[test]
fn transactions_do_not_nest_and_commit_needs_a_transaction() {
    let tx = marker(row::TRANSACTION_START);
    let e = err_of(&stream(&[vec![
        options(TRIPLES, FLAT, 1),
        tx.clone(),
        tx.clone(),
    ]]));
    assert!(matches!(e.kind, K::NestedTransaction), "{e}");
    let e = err_of(&stream(&[vec![
        options(TRIPLES, FLAT, 1),
        marker(row::TRANSACTION_COMMIT),
    ]]));
    assert!(matches!(e.kind, K::NoTransaction(_)), "{e}");
    let e = err_of(&stream(&[vec![
        options(TRIPLES, FLAT, 1),
        marker(row::TRANSACTION_ABORT),
    ]]));
    assert!(matches!(e.kind, K::NoTransaction(_)), "{e}");
    // A transaction left open at the end of the stream.
    let e = err_of(&stream(&[vec![options(QUADS, FLAT, 1), tx]]));
    assert!(matches!(e.kind, K::UnterminatedTransaction), "{e}");
    assert_eq!(e.frame, 0, "reported against the last frame");
}

#[test]
fn triples_streams_set_no_graph() {
    let mut rows = vec![options(TRIPLES, FLAT, 1)];
    rows.extend(names());
    rows.push(add_row(Some(4)));
    let e = err_of(&stream(&[rows]));
    assert!(matches!(e.kind, K::GraphInTriplesPatch), "{e}");
    // A namespace with a graph, too.
    let mut ns = Vec::new();
    put_bytes_field(&mut ns, nf::NAME, b"ex");
    put_bytes_field(&mut ns, nf::VALUE, &iri_msg(1));
    put_bytes_field(&mut ns, nf::G_DEFAULT, &[]);
    let mut rows = vec![options(TRIPLES, FLAT, 1)];
    rows.extend(names());
    rows.push(row_msg(row::NAMESPACE_ADD, &ns));
    assert!(matches!(
        err_of(&stream(&[rows])).kind,
        K::GraphInTriplesPatch
    ));
}

#[test]
fn namespace_graph_shares_the_repeated_graph_with_statements() {
    let mut ns = Vec::new();
    put_bytes_field(&mut ns, nf::NAME, b"ex");
    put_bytes_field(&mut ns, nf::VALUE, &iri_msg(1));
    put_bytes_field(&mut ns, nf::G_IRI, &iri_msg(4));
    let mut rows = vec![options(QUADS, FLAT, 1)];
    rows.extend(names());
    rows.push(row_msg(row::NAMESPACE_ADD, &ns));
    rows.push(add_row(None)); // graph repeated from the namespace row
    let got = read(&stream(&[rows])).unwrap();
    let Ev::A(st) = &got[1].1 else {
        panic!("{got:?}")
    };
    assert_eq!(st.graph, Some(Term::Iri("http://g".into())));
    // Without any earlier graph, a quad must set one.
    let mut rows = vec![options(QUADS, FLAT, 1)];
    rows.extend(names());
    rows.push(add_row(None));
    assert!(matches!(
        err_of(&stream(&[rows])).kind,
        K::RepeatedTermFirst { position: "graph" }
    ));
}

#[test]
fn options_rules() {
    assert!(matches!(
        err_of(&stream(&[vec![options(TRIPLES, FLAT, 0)]])).kind,
        K::ZeroVersion
    ));
    assert!(matches!(
        err_of(&stream(&[vec![options(TRIPLES, FLAT, 2)]])).kind,
        K::PatchVersion(2)
    ));
    assert!(matches!(
        err_of(&stream(&[vec![options(0, FLAT, 1)]])).kind,
        K::PatchStatementType(0)
    ));
    assert!(matches!(
        err_of(&stream(&[vec![options(TRIPLES, 0, 1)]])).kind,
        K::PatchStreamType(0)
    ));
    assert!(matches!(
        err_of(&stream(&[vec![options(TRIPLES, 9, 1)]])).kind,
        K::PatchStreamType(9)
    ));
    let changed = stream(&[
        vec![options(TRIPLES, FLAT, 1)],
        vec![options(QUADS, FLAT, 1)],
    ]);
    let e = err_of(&changed);
    assert!(matches!(e.kind, K::OptionsChanged), "{e}");
    assert_eq!((e.frame, e.row), (1, Some(0)));
    let same = stream(&[
        vec![options(TRIPLES, FLAT, 1)],
        vec![options(TRIPLES, FLAT, 1)],
    ]);
    assert!(read(&same).unwrap().is_empty());
    assert!(matches!(
        err_of(&stream(&[vec![marker(row::TRANSACTION_START)]])).kind,
        K::MissingOptions
    ));
}

#[test]
fn namespace_add_needs_an_iri_and_header_needs_a_value() {
    let mut ns = Vec::new();
    put_bytes_field(&mut ns, nf::NAME, b"ex");
    let e = err_of(&stream(&[vec![
        options(TRIPLES, FLAT, 1),
        row_msg(row::NAMESPACE_ADD, &ns),
    ]]));
    assert!(matches!(e.kind, K::PatchNamespaceWithoutIri), "{e}");
    // PD without an IRI is fine.
    let got = read(&stream(&[vec![
        options(TRIPLES, FLAT, 1),
        row_msg(row::NAMESPACE_DELETE, &ns),
    ]]))
    .unwrap();
    assert_eq!(got[0].1, Ev::Pd("ex".into(), None, None));
    let mut h = Vec::new();
    put_bytes_field(&mut h, hf::KEY, b"id");
    let e = err_of(&stream(&[vec![
        options(TRIPLES, FLAT, 1),
        row_msg(row::HEADER, &h),
    ]]));
    assert!(matches!(e.kind, K::HeaderWithoutValue), "{e}");
}

#[test]
fn encoder_refuses_what_the_rules_forbid() {
    let mut t = PatchEncoder::new(PatchOptions::small(St::Triples, Sty::Frame)).unwrap();
    let q = StatementRef::quad(
        iri("http://s"),
        iri("http://p"),
        iri("http://o"),
        iri("http://g"),
    );
    assert!(matches!(t.add(q), Err(EncodeError::PatchRule(_))));
    assert!(matches!(
        t.add_namespace("ex", "http://e/", Some(iri("http://g"))),
        Err(EncodeError::PatchRule(_))
    ));
    assert!(matches!(t.punctuation(), Err(EncodeError::PatchRule(_))));
    assert!(t.transaction_commit().is_err());
    t.transaction_start().unwrap();
    assert!(t.transaction_start().is_err());
    assert!(matches!(
        PatchEncoder::new(PatchOptions::with_tables(St::Triples, Sty::Flat, 7, 0, 0)),
        Err(EncodeError::NameTableTooSmall(7))
    ));
    // A row needing three prefixes in a two-entry prefix table: too small to split
    // IRIs by, so they are written whole (names under the empty prefix).
    let mut q3 =
        PatchEncoder::new(PatchOptions::with_tables(St::Quads, Sty::Flat, 8, 2, 0)).unwrap();
    let three = StatementRef::quad(
        iri("http://a/s"),
        iri("http://b/p"),
        iri("http://c/o"),
        TermRef::DefaultGraph,
    );
    assert_eq!(q3.add(three), Ok(()));
    let mut buf = Vec::new();
    let mut w = PatchWriter::new(&mut buf, PatchOptions::small(St::Triples, Sty::Frame)).unwrap();
    w.encoder().transaction_start().unwrap();
    assert!(
        w.end_patch().is_err(),
        "a FRAME patch cannot end inside a transaction"
    );
}

/// A header value may be any RDF term (`h_iri | h_bnode | h_literal | h_triple_term`):
/// a literal needs no generalized statements, a triple term only RDF-star, as in an
/// object; a header is metadata, not a graph name.
#[test]
fn header_values_of_every_kind_round_trip() {
    use jelly::{Literal, OwnedLiteralKind, Triple};
    let lit = |lex: &str, kind| {
        Term::Literal(Literal {
            lex: lex.into(),
            kind,
        })
    };
    let quoted = Term::Triple(Box::new(Triple {
        subject: Term::Iri("http://e/a".into()),
        predicate: Term::Iri("http://e/b".into()),
        object: lit("c", OwnedLiteralKind::Lang("en".into())),
    }));
    let events = vec![
        Ev::Header("id".into(), Term::Iri("uuid:1".into())),
        Ev::Header("b".into(), Term::BlankNode("x".into())),
        Ev::Header("t".into(), lit("2026-11-28", OwnedLiteralKind::Simple)),
        Ev::Header(
            "n".into(),
            lit(
                "42",
                OwnedLiteralKind::Typed("http://www.w3.org/2001/XMLSchema#integer".into()),
            ),
        ),
        Ev::Header("q".into(), quoted.clone()),
        Ev::Tx,
        Ev::Tc,
    ];
    let mut opts = PatchOptions::small(St::Triples, Sty::Frame);
    opts.rdf_star = true;
    assert!(!opts.generalized_statements);
    let got = read(&write(opts, &events, 1)).unwrap();
    let got: Vec<Ev> = got.into_iter().map(|(_, e)| e).collect();
    assert_eq!(got, events);
    // Without RDF-star, the triple term is refused, as it would be in an object.
    let mut enc = PatchEncoder::new(PatchOptions::small(St::Triples, Sty::Frame)).unwrap();
    assert!(matches!(
        enc.header("q", quoted.as_ref()),
        Err(EncodeError::RdfStarNotEnabled(_))
    ));
    let l = lit("v", OwnedLiteralKind::Simple);
    enc.header("t", l.as_ref()).unwrap();
}

/// The only position of `needle` in `hay`.
fn only_pos(hay: &[u8], needle: &[u8]) -> usize {
    let at: Vec<usize> = (0..=hay.len() - needle.len())
        .filter(|&i| hay[i..].starts_with(needle))
        .collect();
    assert_eq!(at.len(), 1, "{needle:02x?} in {hay:02x?}");
    at[0]
}

/// Field number 0 is refused in a patch statement, as everywhere else; every wire
/// error names the byte at fault by its position in the input.
#[test]
fn wire_errors_are_located_in_the_input() {
    let head = || {
        let mut rows = vec![options(QUADS, FLAT, 1)];
        rows.extend(names());
        rows.push(add_row(Some(4)));
        rows
    };
    // An add with an empty field 0 before its terms (which alone decode).
    let mut q = vec![0x02, 0x00];
    for (field, id) in [(1, 1), (5, 2), (9, 3), (13, 4)] {
        put_bytes_field(&mut q, field, &iri_msg(id));
    }
    let field0 = row_msg(row::STATEMENT_ADD, &q);
    // A namespace add whose graph is a blank node with invalid UTF-8.
    let mut pa = Vec::new();
    put_bytes_field(&mut pa, nf::NAME, b"ex");
    put_bytes_field(&mut pa, nf::VALUE, &iri_msg(1));
    put_bytes_field(&mut pa, nf::G_BNODE, &[b'g', 0xfe]);
    let pa = row_msg(row::NAMESPACE_ADD, &pa);
    // A header whose value is a blank node with invalid UTF-8.
    let mut h = Vec::new();
    put_bytes_field(&mut h, hf::KEY, b"k");
    put_bytes_field(&mut h, hf::H_BNODE, &[b'h', 0xfd]);
    let h = row_msg(row::HEADER, &h);
    for (what, bad, fault) in [
        ("field 0 in an add", field0.clone(), field0[2..].to_vec()),
        ("namespace graph", pa, vec![0xfe]),
        ("header value", h, vec![0xfd]),
    ] {
        // In a second frame, so that offsets in the frame differ from those in the input.
        let bytes = stream(&[head(), vec![bad]]);
        let e = err_of(&bytes);
        let K::Wire(w) = &e.kind else {
            panic!("{what}: {e}")
        };
        assert_eq!(w.offset(), only_pos(&bytes, &fault), "{what}: {e}");
        assert_eq!((e.frame, e.row), (1, Some(0)), "{what}: {e}");
    }
    let K::Wire(jelly_proto::wire::WireError::ZeroField(_)) =
        err_of(&stream(&[head(), vec![field0]])).kind
    else {
        panic!("field 0 not refused")
    };
    // The same add without field 0 decodes.
    let mut ok = head();
    ok.push(add_row(Some(4)));
    assert_eq!(read(&stream(&[ok])).unwrap().len(), 2);
}
