//! Property test: random statement streams → `JellyWriter` → `JellyReader` → the same
//! statements in the same order.
//!
//! Small tables (names ≥ 8, prefixes 0–6, datatypes 0–4) force LRU eviction and the
//! entry-id / IRI delta rules on almost every row; random frame sizes move frame
//! boundaries everywhere. The encoder writes `"x"^^xsd:string` as the simple literal
//! `"x"` (the same RDF term), and a triple in a QUADS/GRAPHS stream comes back in the
//! default graph; the expectation is normalized accordingly.

use jelly::iso::normalize_term;
use jelly::{
    EncodeError, FramePolicy, JellyReader, JellyWriterBuilder, Literal, OwnedLiteralKind,
    PhysicalType, Statement, StatementRef, StreamOptions, Term, TermRef, Triple, WriteError,
};
use proptest::prelude::*;

const PREFIXES: [&str; 8] = [
    "http://example.org/",
    "http://example.org/vocab#",
    "http://example.org/a/b/",
    "https://w3id.org/jelly/",
    "urn:uuid:",
    "",
    "http://ex.org/é/",
    "http://x#y/",
];
const DATATYPES: [&str; 6] = [
    "http://www.w3.org/2001/XMLSchema#integer",
    "http://www.w3.org/2001/XMLSchema#string",
    "http://www.w3.org/2001/XMLSchema#dateTime",
    "http://www.w3.org/2001/XMLSchema#double",
    "http://example.org/dt#custom",
    "http://www.opengis.net/ont/geosparql#wktLiteral",
];
const LANGS: [&str; 4] = ["en", "en-GB", "de-CH-1996", "x-private"];

#[derive(Debug, Clone)]
struct Config {
    physical: PhysicalType,
    rdf_star: bool,
    generalized: bool,
    name: u32,
    prefix: u32,
    datatype: u32,
    rows_per_frame: usize,
    delimited: bool,
}

fn config() -> impl Strategy<Value = Config> {
    (
        prop_oneof![
            Just(PhysicalType::Triples),
            Just(PhysicalType::Quads),
            Just(PhysicalType::Graphs)
        ],
        any::<bool>(),
        any::<bool>(),
        8u32..=24,
        prop_oneof![Just(0u32), 1u32..=6],
        prop_oneof![Just(0u32), Just(1u32), 2u32..=4],
        1usize..=40,
        prop::bool::weighted(0.85),
    )
        .prop_map(
            |(physical, rdf_star, generalized, name, prefix, datatype, rows, delimited)| Config {
                physical,
                rdf_star,
                generalized,
                name,
                prefix,
                datatype,
                rows_per_frame: rows,
                delimited,
            },
        )
}

fn iri() -> impl Strategy<Value = Term> {
    (0..PREFIXES.len(), 0u32..40).prop_map(|(p, n)| Term::Iri(format!("{}n{n}", PREFIXES[p])))
}

fn bnode() -> impl Strategy<Value = Term> {
    (0u32..10).prop_map(|b| Term::BlankNode(format!("b{b}")))
}

fn literal(typed: bool) -> BoxedStrategy<Term> {
    let lex = prop_oneof!["[a-z ]{0,6}", "\\PC{0,5}", Just(String::new())];
    let simple = lex.clone().prop_map(Term::simple_literal);
    let lang = (lex.clone(), 0..LANGS.len()).prop_map(|(l, k)| {
        Term::Literal(Literal {
            lex: l,
            kind: OwnedLiteralKind::Lang(LANGS[k].into()),
        })
    });
    if typed {
        let ty = (lex, 0..DATATYPES.len()).prop_map(|(l, k)| {
            Term::Literal(Literal {
                lex: l,
                kind: OwnedLiteralKind::Typed(DATATYPES[k].into()),
            })
        });
        prop_oneof![simple, lang, ty].boxed()
    } else {
        // With the datatype table disabled, only xsd:string may be "typed".
        let xs = lex.prop_map(|l| {
            Term::Literal(Literal {
                lex: l,
                kind: OwnedLiteralKind::Typed(jelly::term::XSD_STRING.into()),
            })
        });
        prop_oneof![simple, lang, xs].boxed()
    }
}

/// A term for `position` (0 S, 1 P, 2 O), nested quoted triples up to `depth`.
fn term(c: &Config, position: usize, depth: u32) -> BoxedStrategy<Term> {
    let typed = c.datatype > 0;
    let any_leaf = prop_oneof![3 => iri(), 2 => bnode(), 2 => literal(typed)].boxed();
    let leaf = if c.generalized {
        any_leaf
    } else {
        match position {
            0 => prop_oneof![iri(), bnode()].boxed(),
            1 => iri().boxed(),
            _ => any_leaf,
        }
    };
    let quoted_ok = c.rdf_star && depth > 0 && (position != 1 || c.generalized);
    if !quoted_ok {
        return leaf;
    }
    let q = (
        term(c, 0, depth - 1),
        term(c, 1, depth - 1),
        term(c, 2, depth - 1),
    )
        .prop_map(|(s, p, o)| {
            Term::Triple(Box::new(Triple {
                subject: s,
                predicate: p,
                object: o,
            }))
        });
    prop_oneof![4 => leaf, 1 => q].boxed()
}

fn graph(c: &Config) -> BoxedStrategy<Option<Term>> {
    match c.physical {
        PhysicalType::Triples => Just(None).boxed(),
        _ => {
            let g = if c.generalized {
                prop_oneof![iri(), bnode(), Just(Term::DefaultGraph), literal(false)].boxed()
            } else {
                prop_oneof![iri(), bnode(), Just(Term::DefaultGraph)].boxed()
            };
            // A triple (None) goes to the default graph.
            prop_oneof![4 => g.prop_map(Some), 1 => Just(None)].boxed()
        }
    }
}

fn statement(c: &Config) -> BoxedStrategy<Statement> {
    (term(c, 0, 2), term(c, 1, 2), term(c, 2, 2), graph(c))
        .prop_map(|(s, p, o, g)| Statement {
            subject: s,
            predicate: p,
            object: o,
            graph: g,
        })
        .boxed()
}

/// Runs of repeated terms matter for the encoder: sometimes reuse the previous statement.
fn stream() -> impl Strategy<Value = (Config, Vec<Statement>)> {
    config().prop_flat_map(|c| {
        let st = statement(&c);
        let v = prop::collection::vec((st, 0u8..4), 0..60).prop_map(|v| {
            let mut out: Vec<Statement> = Vec::with_capacity(v.len());
            for (s, reuse) in v {
                match (out.last().cloned(), reuse) {
                    (Some(prev), 0) => out.push(Statement {
                        object: s.object,
                        ..prev
                    }),
                    (Some(prev), 1) => out.push(Statement {
                        subject: s.subject,
                        ..prev
                    }),
                    _ => out.push(s),
                }
            }
            out
        });
        (Just(c), v)
    })
}

fn lang_tag(t: &Term) -> Option<&str> {
    match t {
        Term::Literal(Literal {
            kind: OwnedLiteralKind::Lang(tag),
            ..
        }) => Some(tag),
        _ => None,
    }
}

fn normalize(mut s: Statement, physical: PhysicalType) -> Statement {
    for t in [&mut s.subject, &mut s.predicate, &mut s.object] {
        *t = normalize_term(t);
    }
    s.graph = match (physical, s.graph) {
        (PhysicalType::Triples, _) => None,
        (_, g) => Some(normalize_term(&g.unwrap_or(Term::DefaultGraph))),
    };
    s
}

/// Distinct prefixes, names and datatypes one statement refers to (an upper bound of
/// the entries its row needs: repeated terms need none).
fn needs(c: &Config, s: &Statement) -> (u32, u32, u32) {
    use std::collections::HashSet;
    fn walk<'a>(t: &'a Term, iris: &mut Vec<&'a str>, dts: &mut HashSet<&'a str>) {
        match t {
            Term::Iri(i) => iris.push(i),
            Term::Literal(Literal {
                kind: OwnedLiteralKind::Typed(d),
                ..
            }) if d != jelly::term::XSD_STRING => {
                dts.insert(d);
            }
            Term::Triple(tr) => {
                walk(&tr.subject, iris, dts);
                walk(&tr.predicate, iris, dts);
                walk(&tr.object, iris, dts);
            }
            _ => {}
        }
    }
    let (mut iris, mut dts) = (Vec::new(), HashSet::new());
    for t in [&s.subject, &s.predicate, &s.object]
        .into_iter()
        .chain(&s.graph)
    {
        walk(t, &mut iris, &mut dts);
    }
    let (mut prefixes, mut names) = (HashSet::new(), HashSet::new());
    for i in iris {
        if c.prefix > 0 {
            let (p, n) = jelly::split_iri(i);
            prefixes.insert(p);
            names.insert(n);
        } else {
            names.insert(i);
        }
    }
    (prefixes.len() as u32, names.len() as u32, dts.len() as u32)
}

fn builder(c: &Config) -> JellyWriterBuilder {
    let opts = StreamOptions::with_tables(c.name, c.prefix, c.datatype)
        .with_physical_type(c.physical)
        .with_rdf_star(c.rdf_star)
        .with_generalized_statements(c.generalized);
    let policy = if c.delimited {
        FramePolicy::Rows(c.rows_per_frame)
    } else {
        FramePolicy::Manual
    };
    JellyWriterBuilder::new(opts)
        .frame_policy(policy)
        .delimited(c.delimited)
}

fn round_trip(c: &Config, input: &[Statement]) -> Result<(), TestCaseError> {
    let mut out = Vec::new();
    let mut w = builder(c).build(&mut out).unwrap();
    let mut expected = Vec::new();
    let mut tags = Vec::new();
    for s in input {
        match w.add(s.as_ref()) {
            Ok(()) => {
                expected.push(normalize(s.clone(), c.physical));
                tags.push(lang_tag(&s.object).map(str::to_string));
            }
            // Only allowed when the statement alone needs more distinct entries than a
            // table holds (all entry rows precede the statement row that uses them).
            Err(WriteError::Encode(e @ EncodeError::TableTooSmallForRow { .. })) => {
                let (p, n, d) = needs(c, s);
                prop_assert!(
                    (c.prefix > 0 && p > c.prefix) || n > c.name || d > c.datatype,
                    "refused {s} (needs {p} prefixes, {n} names, {d} datatypes): {e}"
                );
            }
            Err(e) => return Err(TestCaseError::fail(format!("refused {s}: {e}"))),
        }
    }
    w.finish().unwrap();
    let frames = JellyReader::new(&out[..])
        .read_all_frames()
        .map_err(|e| TestCaseError::fail(format!("decoding failed: {e}")))?;
    if !c.delimited {
        prop_assert_eq!(frames.len(), 1);
    }
    // Both sides in the comparison's form (language tags compare ignoring case).
    let decoded: Vec<Statement> = frames.into_iter().flatten().collect();
    let got: Vec<Statement> = decoded
        .iter()
        .map(|s| normalize(s.clone(), c.physical))
        .collect();
    prop_assert_eq!(got.len(), expected.len());
    for (k, (g, e)) in got.iter().zip(&expected).enumerate() {
        prop_assert_eq!(g, e, "statement {}", k);
    }
    // The comparison ignores the case of language tags; the codec keeps it.
    for (k, (g, t)) in decoded.iter().zip(&tags).enumerate() {
        prop_assert_eq!(lang_tag(&g.object), t.as_deref(), "statement {}", k);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_streams_round_trip((c, input) in stream()) {
        round_trip(&c, &input)?;
    }

    /// The smallest legal tables: prefix table off, one datatype slot, 8 names.
    #[test]
    fn round_trip_with_minimal_tables((c, input) in stream()) {
        // min(1) keeps "no typed literals generated" streams at datatype 0.
        let c = Config { name: 8, prefix: 0, datatype: c.datatype.min(1), ..c };
        round_trip(&c, &input)?;
    }
}

/// `input` with every IRI of a top-level term that `pooled` picks taken from one pool
/// (one copy per distinct IRI), the rest borrowed from the statements themselves.
fn pooled_refs<'a>(
    input: &'a [Statement],
    pool: &'a [String],
    pooled: impl Fn(usize) -> bool,
) -> Vec<StatementRef<'a>> {
    let pick = |t: &'a Term, k: usize| match t {
        Term::Iri(i) if pooled(k) => match pool.binary_search(i) {
            Ok(at) => TermRef::Iri(&pool[at]),
            Err(_) => t.as_ref(),
        },
        _ => t.as_ref(),
    };
    input
        .iter()
        .enumerate()
        .map(|(n, s)| StatementRef {
            subject: pick(&s.subject, 4 * n),
            predicate: pick(&s.predicate, 4 * n + 1),
            object: pick(&s.object, 4 * n + 2),
            graph: s.graph.as_ref().map(|g| pick(g, 4 * n + 3)),
        })
        .collect()
}

/// Writes `refs` through shared-input sessions of a `JellyVecWriter`: a new session
/// wherever `breaks` has a 1 (with that statement added by plain `add` between two
/// sessions). Returns the bytes and the index of every refused statement.
fn write_shared(c: &Config, refs: &[StatementRef<'_>], breaks: &[u8]) -> (Vec<u8>, Vec<usize>) {
    let mut out = Vec::new();
    let mut refused = Vec::new();
    let mut w = builder(c).build_vec(&mut out).unwrap();
    let mut k = 0;
    while k < refs.len() {
        {
            let mut session = w.shared();
            while k < refs.len() && breaks.get(k) != Some(&1) {
                if session.add(refs[k]).is_err() {
                    refused.push(k);
                }
                k += 1;
            }
        }
        if k < refs.len() {
            if w.add(refs[k]).is_err() {
                refused.push(k);
            }
            k += 1;
        }
    }
    w.finish().unwrap();
    (out, refused)
}

/// The same statements through plain `add`.
fn write_plain(c: &Config, refs: &[StatementRef<'_>]) -> (Vec<u8>, Vec<usize>) {
    let mut out = Vec::new();
    let mut refused = Vec::new();
    let mut w = builder(c).build_vec(&mut out).unwrap();
    for (k, st) in refs.iter().enumerate() {
        if w.add(*st).is_err() {
            refused.push(k);
        }
    }
    w.finish().unwrap();
    (out, refused)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Shared-input sessions write the same bytes as plain `add` and refuse the same
    /// statements, whether every IRI is pooled (known by address) or only some, across
    /// session boundaries and table evictions.
    #[test]
    fn shared_sessions_write_the_same_bytes(
        (c, input) in stream(),
        all in any::<bool>(),
        breaks in prop::collection::vec(prop::bool::weighted(0.05).prop_map(u8::from), 0..60),
    ) {
        let mut pool: Vec<String> = input
            .iter()
            .flat_map(|s| [&s.subject, &s.predicate, &s.object].into_iter().chain(&s.graph))
            .filter_map(|t| match t {
                Term::Iri(i) => Some(i.clone()),
                _ => None,
            })
            .collect();
        pool.sort();
        pool.dedup();
        let refs = pooled_refs(&input, &pool, |k| all || k % 3 != 1);
        let (plain, plain_refused) = write_plain(&c, &refs);
        let (shared, shared_refused) = write_shared(&c, &refs, &breaks);
        prop_assert_eq!(plain_refused, shared_refused);
        prop_assert!(plain == shared, "shared session wrote different bytes");
    }
}

/// The case the `roundtrip` fuzz target found in a work-in-progress IRI cache: the same
/// IRI in all three positions of the first statement.
#[test]
fn same_iri_in_every_position() {
    let t = Term::Iri("http://example.org/n0".into());
    for physical in [
        PhysicalType::Triples,
        PhysicalType::Quads,
        PhysicalType::Graphs,
    ] {
        for prefix in [0, 4] {
            let c = Config {
                physical,
                rdf_star: false,
                generalized: false,
                name: 8,
                prefix,
                datatype: 0,
                rows_per_frame: 1,
                delimited: prefix == 0,
            };
            let s = Statement {
                subject: t.clone(),
                predicate: t.clone(),
                object: t.clone(),
                graph: None,
            };
            round_trip(&c, &[s.clone(), s]).unwrap();
        }
    }
}
