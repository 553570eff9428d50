//! The encoder's full-IRI cache hashes only part of a long IRI. IRIs that differ only in
//! the bytes it leaves out share its buckets: they must still get their own ids.

use jelly::{JellyReader, JellyWriterBuilder, Statement, StatementRef, StreamOptions, TermRef};

/// 100-byte IRIs differing only at bytes 20..26 (outside the first 16, middle 16 and
/// last 16 bytes): in the prefix for even `i`, in the name for odd `i`.
fn iri(i: u32) -> String {
    let fill = format!("{}{}", "b".repeat(40), "c".repeat(20));
    let s = if i.is_multiple_of(2) {
        format!("http://example.org/a{i:06}/{fill}/end-of-iri!!")
    } else {
        format!("http://example.org/n{i:06}{fill}end-of-iri!!!!")
    };
    assert_eq!(s.len(), 100, "{s}");
    s
}

#[test]
fn iris_alike_in_the_hashed_bytes_keep_their_own_ids() {
    let iris: Vec<String> = (0..300).map(iri).collect();
    let p = "http://example.org/p";
    // A pseudo-random walk over the IRIs, with repeats near and far apart.
    let mut x = 7u32;
    let mut statements = Vec::new();
    for _ in 0..5000 {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        let s = &iris[(x >> 8) as usize % iris.len()];
        let o = &iris[(x >> 20) as usize % 40];
        statements.push((s.clone(), o.clone()));
    }
    // A small name table, so that entries are evicted and reassigned too.
    let mut opts = StreamOptions::small();
    opts.max_name_table_size = 64;
    let mut out = Vec::new();
    let mut w = JellyWriterBuilder::new(opts).build(&mut out).unwrap();
    for (s, o) in &statements {
        w.add(StatementRef::triple(
            TermRef::Iri(s),
            TermRef::Iri(p),
            TermRef::Iri(o),
        ))
        .unwrap();
    }
    w.finish().unwrap();
    let got: Vec<Statement> = JellyReader::from_slice(&out)
        .read_all_frames()
        .unwrap()
        .into_iter()
        .flatten()
        .collect();
    assert_eq!(got.len(), statements.len());
    for (g, (s, o)) in got.iter().zip(&statements) {
        assert_eq!(g.subject, jelly::Term::Iri(s.clone()));
        assert_eq!(g.object, jelly::Term::Iri(o.clone()));
    }
}
