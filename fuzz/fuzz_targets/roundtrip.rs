//! Arbitrary statements → `JellyWriter` → `JellyReader` → the same statements, in order.
//! Statements the encoder refuses are dropped from the expectation; everything it
//! accepts must come back exactly (after the documented normalizations). The same
//! statements, with their IRIs taken from one pool, written through shared-input
//! sessions (broken up by plain adds) give the same bytes as plain adds.
#![no_main]

#[path = "common/alloc_limit.rs"]
mod alloc_limit;

use arbitrary::Arbitrary;
use jelly::{
    DecoderOptions, Delimiting, FramePolicy, JellyReader, JellyWriterBuilder, Literal, LogicalType,
    OwnedLiteralKind, PhysicalType, Statement, StatementRef, StreamOptions, Term, TermRef, Triple,
};
use libfuzzer_sys::fuzz_target;

const PREFIXES: [&str; 6] = [
    "http://example.org/",
    "http://example.org/ns#",
    "https://w3id.org/x/y/",
    "urn:uuid:",
    "",
    "http://é.example/ü/",
];
const DATATYPES: [&str; 5] = [
    "http://www.w3.org/2001/XMLSchema#integer",
    "http://www.w3.org/2001/XMLSchema#string",
    "http://www.w3.org/2001/XMLSchema#dateTime",
    "http://example.org/dt",
    "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString",
];
const LANGS: [&str; 3] = ["en", "de-CH", "x-private"];

#[derive(Arbitrary, Debug)]
enum T {
    Iri(u8, u8),
    Bnode(u8),
    Simple(String),
    Lang(String, u8),
    Typed(String, u8),
    Quoted(Box<(T, T, T)>),
    Default,
}

#[derive(Arbitrary, Debug)]
struct St {
    s: T,
    p: T,
    o: T,
    g: Option<T>,
}

#[derive(Arbitrary, Debug)]
struct Input {
    physical: u8,
    rdf_star: bool,
    generalized: bool,
    name: u8,
    prefix: u8,
    datatype: u8,
    rows_per_frame: u8,
    delimited: bool,
    statements: Vec<St>,
}

fn term(t: &T, depth: usize) -> Term {
    match t {
        T::Iri(p, n) => Term::Iri(format!(
            "{}n{}",
            PREFIXES[*p as usize % PREFIXES.len()],
            n % 32
        )),
        T::Bnode(b) => Term::BlankNode(format!("b{}", b % 16)),
        T::Simple(s) => Term::simple_literal(s.clone()),
        T::Lang(s, l) => Term::Literal(Literal {
            lex: s.clone(),
            kind: OwnedLiteralKind::Lang(LANGS[*l as usize % LANGS.len()].into()),
        }),
        T::Typed(s, d) => Term::Literal(Literal {
            lex: s.clone(),
            kind: OwnedLiteralKind::Typed(DATATYPES[*d as usize % DATATYPES.len()].into()),
        }),
        T::Quoted(b) if depth < 4 => Term::Triple(Box::new(Triple {
            subject: term(&b.0, depth + 1),
            predicate: term(&b.1, depth + 1),
            object: term(&b.2, depth + 1),
        })),
        T::Quoted(_) => Term::BlankNode("deep".into()),
        T::Default => Term::DefaultGraph,
    }
}

/// `built` with every top-level IRI taken from one pool (one copy per distinct IRI),
/// written through shared-input sessions with a plain add every `rows / 3 + 2`
/// statements, against plain adds of the same statements: the same bytes and the same
/// refusals.
fn shared_sessions_write_the_same_bytes(
    opts: &StreamOptions,
    built: &[Statement],
    rows: usize,
    delimited: bool,
) {
    let mut pool: Vec<&str> = built
        .iter()
        .flat_map(|s| {
            [&s.subject, &s.predicate, &s.object]
                .into_iter()
                .chain(&s.graph)
        })
        .filter_map(|t| match t {
            Term::Iri(i) => Some(i.as_str()),
            _ => None,
        })
        .collect();
    pool.sort_unstable();
    pool.dedup();
    let pooled = |t: &'_ Term| -> Option<usize> {
        match t {
            Term::Iri(i) => pool.binary_search(&i.as_str()).ok(),
            _ => None,
        }
    };
    fn at<'a>(t: &'a Term, pool: &[&'a str], k: Option<usize>) -> TermRef<'a> {
        match k {
            Some(k) => TermRef::Iri(pool[k]),
            None => t.as_ref(),
        }
    }
    let refs: Vec<StatementRef<'_>> = built
        .iter()
        .map(|s| {
            let at = |t| at(t, &pool, pooled(t));
            StatementRef {
                subject: at(&s.subject),
                predicate: at(&s.predicate),
                object: at(&s.object),
                graph: s.graph.as_ref().map(at),
            }
        })
        .collect();
    let builder = JellyWriterBuilder::new(opts.clone())
        .frame_policy(if delimited {
            FramePolicy::Rows(rows)
        } else {
            FramePolicy::Manual
        })
        .delimited(delimited);
    let (mut plain, mut shared) = (Vec::new(), Vec::new());
    let (mut plain_refused, mut shared_refused) = (Vec::new(), Vec::new());
    let mut w = builder
        .clone()
        .build_vec(&mut plain)
        .expect("valid options");
    for (k, st) in refs.iter().enumerate() {
        if w.add(*st).is_err() {
            plain_refused.push(k);
        }
    }
    w.finish().expect("finish");
    let every = rows / 3 + 2;
    let mut w = builder.build_vec(&mut shared).expect("valid options");
    let mut k = 0;
    while k < refs.len() {
        {
            let mut session = w.shared();
            while k < refs.len() && (k + 1) % every != 0 {
                if session.add(refs[k]).is_err() {
                    shared_refused.push(k);
                }
                k += 1;
            }
        }
        if k < refs.len() {
            if w.add(refs[k]).is_err() {
                shared_refused.push(k);
            }
            k += 1;
        }
    }
    w.finish().expect("finish");
    assert_eq!(plain_refused, shared_refused);
    assert!(plain == shared, "shared sessions wrote different bytes");
}

/// The statement as the decoder gives it back: `"x"^^xsd:string` comes back as `"x"`.
/// Nothing else changes; language tags keep their case (`jelly::iso::normalize_term`
/// also lower-cases them, for comparisons, so it cannot serve here).
fn as_decoded(t: &Term) -> Term {
    match t {
        Term::Literal(Literal {
            lex,
            kind: OwnedLiteralKind::Typed(dt),
        }) if dt == "http://www.w3.org/2001/XMLSchema#string" => Term::Literal(Literal {
            lex: lex.clone(),
            kind: OwnedLiteralKind::Simple,
        }),
        Term::Triple(tr) => Term::Triple(Box::new(Triple {
            subject: as_decoded(&tr.subject),
            predicate: as_decoded(&tr.predicate),
            object: as_decoded(&tr.object),
        })),
        t => t.clone(),
    }
}

fuzz_target!(|input: Input| {
    let physical = match input.physical % 3 {
        0 => PhysicalType::Triples,
        1 => PhysicalType::Quads,
        _ => PhysicalType::Graphs,
    };
    let mut opts = StreamOptions::with_tables(
        8 + u32::from(input.name % 32),
        u32::from(input.prefix % 8),
        u32::from(input.datatype % 6),
    )
    .with_physical_type(physical)
    .with_rdf_star(input.rdf_star)
    .with_generalized_statements(input.generalized);
    if physical == PhysicalType::Quads {
        opts = opts.with_logical_type(LogicalType::FLAT_QUADS);
    }
    let rows = 1 + usize::from(input.rows_per_frame % 64);
    let opts_for_shared = opts.clone();
    let mut out = Vec::new();
    let mut w = JellyWriterBuilder::new(opts)
        .frame_policy(if input.delimited {
            FramePolicy::Rows(rows)
        } else {
            FramePolicy::Manual // non-delimited output is exactly one frame
        })
        .delimited(input.delimited)
        .build(&mut out)
        .expect("valid options");
    let built: Vec<Statement> = input
        .statements
        .iter()
        .take(256)
        .map(|st| Statement {
            subject: term(&st.s, 0),
            predicate: term(&st.p, 0),
            object: term(&st.o, 0),
            graph: st.g.as_ref().map(|g| term(g, 0)),
        })
        .collect();
    let mut expected: Vec<Statement> = Vec::new();
    for s in &built {
        let mut s = s.clone();
        if w.add(s.as_ref()).is_err() {
            continue;
        }
        for t in [&mut s.subject, &mut s.predicate, &mut s.object] {
            *t = as_decoded(t);
        }
        match physical {
            PhysicalType::Triples => s.graph = None,
            _ => {
                let g = s.graph.take().unwrap_or(Term::DefaultGraph);
                s.graph = Some(as_decoded(&g));
            }
        }
        expected.push(s);
    }
    w.finish().expect("finish");
    shared_sessions_write_the_same_bytes(&opts_for_shared, &built, rows, input.delimited);
    let cfg = DecoderOptions {
        max_nesting: 8,
        ..Default::default()
    };
    let got: Vec<Statement> = JellyReader::with_options(&out[..], cfg, Delimiting::Auto)
        .read_all_frames()
        .unwrap_or_else(|e| panic!("decoding our own output failed: {e}"))
        .into_iter()
        .flatten()
        .collect();
    assert_eq!(got.len(), expected.len());
    for (k, (g, e)) in got.iter().zip(&expected).enumerate() {
        assert_eq!(g, e, "statement {k}");
    }
});
