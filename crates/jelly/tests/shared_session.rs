//! Shared-input sessions (`Encoder::shared`, `JellyVecWriter::shared`): an IRI is known
//! by the address of its text only within one session. These tests free the strings of
//! one session and allocate others of the same length, with different text, for the
//! next, so that the allocator hands out the same addresses again: a session that
//! trusted an address recorded in an earlier one would write the wrong ids.

use jelly::{
    Encoder, FramePolicy, JellyReader, JellyWriterBuilder, Statement, StatementRef, StreamOptions,
    TermRef,
};

/// IRIs of round `r`: the same lengths every round, different text.
fn round_iris(r: usize) -> Vec<String> {
    (0..40)
        .map(|i| format!("http://ex.org/r{}/{}/n{:03}", r % 10, ["a", "b"][i % 2], i))
        .collect()
}

/// The statements of one round, referring to `iris`.
fn round_statements(iris: &[String]) -> Vec<StatementRef<'_>> {
    (0..120)
        .map(|k| {
            StatementRef::triple(
                TermRef::Iri(&iris[(k / 3) % iris.len()]),
                TermRef::Iri(&iris[k % 5]),
                TermRef::Iri(&iris[(k * 7) % iris.len()]),
            )
        })
        .collect()
}

#[test]
fn a_new_session_does_not_trust_addresses_of_freed_strings() {
    // Small tables, so ids are evicted and reused as well.
    let opts = StreamOptions::with_tables(16, 4, 0);
    let mut shared = Encoder::new(opts.clone()).unwrap();
    let mut plain = Encoder::new(opts).unwrap();
    let (mut shared_bytes, mut plain_bytes) = (Vec::new(), Vec::new());
    let mut expected: Vec<Statement> = Vec::new();
    let mut previous_addrs: Vec<usize> = Vec::new();
    let mut reused = 0;
    for r in 0..20 {
        let iris = round_iris(r);
        let addrs: Vec<usize> = iris.iter().map(|s| s.as_ptr() as usize).collect();
        reused += addrs.iter().filter(|a| previous_addrs.contains(a)).count();
        let statements = round_statements(&iris);
        {
            let mut session = shared.shared();
            for st in &statements {
                session.add(*st).unwrap();
            }
        }
        for st in &statements {
            plain.add(*st).unwrap();
            expected.push(st.to_owned());
        }
        shared_bytes.extend(shared.finish_frame());
        plain_bytes.extend(plain.finish_frame());
        previous_addrs = addrs;
        // `iris` is freed here; the next round's strings take its memory.
    }
    assert!(
        reused > 0,
        "the allocator never reused an address, so this test proves nothing"
    );
    assert!(
        shared_bytes == plain_bytes,
        "sessions wrote different bytes"
    );
    let decoded: Vec<Statement> = JellyReader::new(&shared_bytes[..])
        .read_all_frames()
        .unwrap()
        .into_iter()
        .flatten()
        .collect();
    assert_eq!(decoded, expected);
}

#[test]
fn writer_sessions_over_freed_strings_write_the_same_bytes_as_plain_adds() {
    let opts = StreamOptions::with_tables(16, 4, 0);
    let builder = JellyWriterBuilder::new(opts).frame_policy(FramePolicy::Rows(50));
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let mut w = builder.clone().build_vec(&mut a).unwrap();
    let mut p = builder.build_vec(&mut b).unwrap();
    for r in 0..10 {
        let iris = round_iris(r);
        let statements = round_statements(&iris);
        let mut session = w.shared();
        for st in &statements {
            session.add(*st).unwrap();
            p.add(*st).unwrap();
        }
        // The session ends here and `iris` is freed; nothing runs when a session ends
        // (it has no destructor), so the next one must not rely on that.
    }
    w.finish().unwrap();
    p.finish().unwrap();
    assert!(a == b, "sessions wrote different bytes");
}

#[test]
fn plain_adds_between_sessions_keep_the_bytes_the_same() {
    // The repeated-term state crosses from session statements to plain ones and back.
    let iris = round_iris(0);
    let copies: Vec<String> = iris.clone();
    let statements = round_statements(&iris);
    let opts = StreamOptions::with_tables(16, 4, 0);
    let mut shared = Encoder::new(opts.clone()).unwrap();
    let mut plain = Encoder::new(opts).unwrap();
    for (k, st) in statements.iter().enumerate() {
        // Every fourth statement is added outside a session, with equal text at other
        // addresses.
        if k % 4 == 3 {
            let at = |t: TermRef<'_>| match t {
                TermRef::Iri(i) => TermRef::Iri(&copies[iris.iter().position(|x| x == i).unwrap()]),
                other => panic!("unexpected {other:?}"),
            };
            let copy = StatementRef::triple(at(st.subject), at(st.predicate), at(st.object));
            shared.add(copy).unwrap();
        } else {
            shared.shared().add(*st).unwrap();
        }
        plain.add(*st).unwrap();
    }
    assert_eq!(shared.finish_frame(), plain.finish_frame());
}

/// Frees `old` and allocates `text` (of the same length, other text), which the
/// allocator puts where `old` was; fails if it does not, since the tests that use it
/// would then prove nothing.
fn in_place_of(old: String, text: &str) -> String {
    assert_eq!(old.len(), text.len());
    let at = old.as_ptr();
    drop(old);
    let new = String::from(text);
    assert_eq!(
        new.as_ptr(),
        at,
        "the allocator did not reuse the address, so this test proves nothing"
    );
    new
}

#[test]
fn a_new_session_does_not_take_a_reused_address_for_the_previous_iri() {
    let p = String::from("http://ex.org/p");
    let opts = StreamOptions::small();
    let mut shared = Encoder::new(opts.clone()).unwrap();
    let mut plain = Encoder::new(opts).unwrap();
    let first = String::from("http://ex.org/s/first");
    let st = StatementRef::triple(TermRef::Iri(&first), TermRef::Iri(&p), TermRef::Iri(&p));
    shared.shared().add(st).unwrap();
    plain.add(st).unwrap();
    let second = in_place_of(first, "http://ex.org/s/other");
    let st = StatementRef::triple(TermRef::Iri(&second), TermRef::Iri(&p), TermRef::Iri(&p));
    shared.shared().add(st).unwrap();
    plain.add(st).unwrap();
    let bytes = shared.finish_frame();
    assert_eq!(bytes, plain.finish_frame());
    let subjects: Vec<String> = JellyReader::new(&bytes[..])
        .read_all_frames()
        .unwrap()
        .into_iter()
        .flatten()
        .map(|s| s.subject.to_string())
        .collect();
    assert_eq!(
        subjects,
        ["<http://ex.org/s/first>", "<http://ex.org/s/other>"]
    );
}

/// An oxrdf dataset holds one copy of each distinct string, so
/// `oxrdf_adapter::write_dataset` writes it through shared-input sessions. Real data
/// (nanopubs, named graphs) plus quads that must leave the session (a triple term, a
/// literal with a base direction): the same bytes as plain adds in the same order, and
/// the same quads back.
#[test]
fn write_dataset_writes_the_same_bytes_as_plain_adds() {
    use jelly::PhysicalType;
    use jelly::oxrdf_adapter::{from_ox_quad, write_dataset};
    use oxrdf::{BaseDirection, Dataset, GraphName, Literal, NamedNode, Quad, Triple};

    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/datasets/nanopubs-fair-pkd/nanopubs-fair-pkd.nq");
    let text = std::fs::read_to_string(&path).expect("shared/datasets beside the checkout");
    let mut ds = Dataset::new();
    for st in jelly::nquads::parse_document(&text)
        .unwrap()
        .iter()
        .take(8000)
    {
        ds.insert(&st.as_ref().to_oxrdf_quad().unwrap());
    }
    let ex = |s: &str| NamedNode::new_unchecked(format!("http://ex.org/{s}"));
    ds.insert(&Quad::new(
        ex("a"),
        ex("says"),
        Triple::new(ex("s"), ex("p"), ex("o")),
        GraphName::DefaultGraph,
    ));
    ds.insert(&Quad::new(
        ex("a"),
        ex("label"),
        Literal::new_directional_language_tagged_literal_unchecked("abc", "ar", BaseDirection::Rtl),
        ex("g"),
    ));
    let opts = StreamOptions::small()
        .with_physical_type(PhysicalType::Quads)
        .with_rdf_star(true);
    let builder = JellyWriterBuilder::new(opts).frame_policy(FramePolicy::Rows(100));
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let mut w = builder.clone().build_vec(&mut a).unwrap();
    assert_eq!(write_dataset(&mut w, &ds).unwrap(), ds.len() as u64);
    w.finish().unwrap();
    let mut p = builder.build_vec(&mut b).unwrap();
    for q in ds.iter() {
        let mut holder = None;
        p.add(from_ox_quad(q, &mut holder)).unwrap();
    }
    p.finish().unwrap();
    assert!(a == b, "write_dataset wrote different bytes");
    let mut back = Dataset::new();
    JellyReader::from_slice(&a)
        .for_each_statement(|st| {
            back.insert(&st.to_oxrdf_quad().unwrap());
        })
        .unwrap();
    assert_eq!(back, ds);
}

/// A session started through another session's `encoder()` ends before the outer one
/// does, and its strings may be freed while the outer session goes on: the outer
/// session must not trust the addresses the inner one recorded.
#[test]
fn an_inner_session_does_not_leave_its_addresses_to_the_outer_one() {
    let p = String::from("http://ex.org/p");
    let opts = StreamOptions::small();
    let mut shared = Encoder::new(opts.clone()).unwrap();
    let mut plain = Encoder::new(opts).unwrap();
    let mut outer = shared.shared();
    let st = StatementRef::triple(TermRef::Iri(&p), TermRef::Iri(&p), TermRef::Iri(&p));
    outer.add(st).unwrap();
    plain.add(st).unwrap();
    let first = String::from("http://ex.org/s/first");
    let st = StatementRef::triple(TermRef::Iri(&first), TermRef::Iri(&p), TermRef::Iri(&first));
    outer.encoder().shared().add(st).unwrap();
    plain.add(st).unwrap();
    let second = in_place_of(first, "http://ex.org/s/other");
    // In the outer session, `second` sits at the address `first` had in the inner one.
    let st = StatementRef::triple(TermRef::Iri(&p), TermRef::Iri(&p), TermRef::Iri(&second));
    outer.add(st).unwrap();
    plain.add(st).unwrap();
    assert_eq!(shared.finish_frame(), plain.finish_frame());
}
