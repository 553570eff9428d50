//! Differential tests of the subscription filters (`pattern`, `prefix`, `ask`).
//!
//! Random small items (triples and quads, IRIs that share prefixes, blank nodes,
//! literals with language tags, directions and datatypes, quoted triples, named and
//! default graphs, repeated terms) and random filters, from a fixed seed. Each filter's
//! verdict is compared with an independent reference:
//!
//! - `pattern` with the equivalent SPARQL ASK, run by spareval on an oxrdf dataset
//!   built straight from the generated statements, and with a direct matcher over the
//!   generated statements (for the statements oxrdf cannot hold);
//! - `prefix` with a direct check over every IRI of the generated statements;
//! - `ask` with spareval on that same oxrdf dataset;
//! - all three end to end: the items published to a loopback server, and the offsets a
//!   filtered subscription delivers compared with the offsets the references expect.

mod support;

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use std::sync::Arc;

use bytes::Bytes;
use jelly::{Encoder, Literal, OwnedLiteralKind, PhysicalType, Statement, StreamOptions, Term};
use jelly_server::filter::{FilterParams, ItemFilter};
use jelly_server::item::Item;
use oxrdf::{BlankNode, Dataset, GraphName, NamedNode, NamedOrBlankNode, Quad};
use spareval::{QueryEvaluator, QueryResults};
use spargebra::SparqlParser;

const XSD: &str = "http://www.w3.org/2001/XMLSchema#";

/// SplitMix64: a small deterministic generator (no dependency, same sequence on every
/// platform), so a failure names a case that can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// True with probability `percent` / 100.
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

/// IRIs that share prefixes with each other and with the prefixes tried.
const IRIS: &[&str] = &[
    "http://ex.org/a",
    "http://ex.org/ab",
    "http://ex.org/a/b",
    "http://ex.org/",
    "http://exa.org/a",
    "urn:x:a",
    "urn:x:ab",
    "http://ex.org/\u{e9}t\u{e9}",
    "http://www.w3.org/2001/XMLSchema#integer",
    "http://ex.org/g1",
    "http://ex.org/g2",
];

/// Blank node labels; `x-y` is not a plain label (oxrdf gets an escaped one).
const BLANKS: &[&str] = &["b0", "b1", "b2", "x-y"];

/// (lexical form, language tag or `^^` datatype, or neither).
const LITERALS: &[(&str, Lit)] = &[
    ("v", Lit::Simple),
    ("V", Lit::Simple),
    ("http://ex.org/a", Lit::Simple),
    ("a \"q\" )>> * ?x", Lit::Simple),
    ("v", Lit::Lang("en")),
    ("v", Lit::Lang("EN")),
    ("v", Lit::Lang("en-US")),
    ("v", Lit::Lang("en--ltr")),
    ("v", Lit::Lang("EN-us--ltr")),
    ("v", Lit::Lang("en--rtl")),
    ("v", Lit::Lang("ar--rtl")),
    ("1", Lit::Typed("http://www.w3.org/2001/XMLSchema#integer")),
    ("01", Lit::Typed("http://www.w3.org/2001/XMLSchema#integer")),
    (
        "1.50",
        Lit::Typed("http://www.w3.org/2001/XMLSchema#decimal"),
    ),
    ("1", Lit::Typed("http://ex.org/dt")),
    ("v", Lit::Typed("urn:x:dt")),
];

#[derive(Clone, Copy)]
enum Lit {
    Simple,
    Lang(&'static str),
    Typed(&'static str),
}

/// What the items of one case may hold (the options of the stream they come from).
#[derive(Clone, Copy, Debug)]
struct Shape {
    quads: bool,
    rdf_star: bool,
    /// Generalized statements: a literal or quoted triple as subject, a blank node as
    /// predicate, a literal as graph name (oxrdf and SPARQL cannot hold these).
    generalized: bool,
}

impl Shape {
    fn options(self) -> StreamOptions {
        let physical = if self.quads {
            PhysicalType::Quads
        } else {
            PhysicalType::Triples
        };
        StreamOptions::small()
            .with_physical_type(physical)
            .with_rdf_star(self.rdf_star)
            .with_generalized_statements(self.generalized)
    }
}

fn iri(s: &str) -> Term {
    Term::Iri(s.to_string())
}

fn literal(lex: &str, kind: Lit) -> Term {
    Term::Literal(Literal {
        lex: lex.to_string(),
        kind: match kind {
            Lit::Simple => OwnedLiteralKind::Simple,
            Lit::Lang(l) => OwnedLiteralKind::Lang(l.to_string()),
            Lit::Typed(d) => OwnedLiteralKind::Typed(d.to_string()),
        },
    })
}

fn gen_iri(r: &mut Rng) -> Term {
    let i = r.below(IRIS.len());
    iri(IRIS[i])
}

fn gen_blank(r: &mut Rng) -> Term {
    Term::BlankNode((*r.pick(BLANKS)).to_string())
}

fn gen_literal(r: &mut Rng) -> Term {
    let (lex, kind) = *r.pick(LITERALS);
    literal(lex, kind)
}

/// A quoted triple as RDF 1.2 has them (no quoted triple as subject), nested up to
/// `depth` levels.
fn gen_quoted(r: &mut Rng, depth: usize) -> Term {
    let subject = if r.chance(70) {
        gen_iri(r)
    } else {
        gen_blank(r)
    };
    let object = match r.below(10) {
        0..=3 => gen_iri(r),
        4 => gen_blank(r),
        5..=7 => gen_literal(r),
        _ if depth > 1 => gen_quoted(r, depth - 1),
        _ => gen_iri(r),
    };
    Term::Triple(Box::new(jelly::Triple {
        subject,
        predicate: gen_iri(r),
        object,
    }))
}

/// A term like `t` that is not `t` in RDF, or is `t` written otherwise: a language
/// tag in another case, another or no direction, another datatype, the same text
/// without its tag; other terms as they are.
fn near_miss(r: &mut Rng, t: &Term) -> Term {
    let l = match t {
        Term::Literal(l) => l,
        Term::Triple(tr) => {
            return Term::Triple(Box::new(jelly::Triple {
                object: near_miss(r, &tr.object),
                ..(**tr).clone()
            }));
        }
        _ => return t.clone(),
    };
    let kind = match (&l.kind, r.below(4)) {
        (OwnedLiteralKind::Lang(tag), 0) => {
            let flipped: String = tag
                .chars()
                .map(|c| {
                    if c.is_ascii_lowercase() {
                        c.to_ascii_uppercase()
                    } else {
                        c.to_ascii_lowercase()
                    }
                })
                .collect();
            // The direction is lower case in RDF 1.2; only the tag changes case.
            match flipped.rsplit_once("--") {
                Some((lang, dir)) => format!("{lang}--{}", dir.to_ascii_lowercase()),
                None => flipped,
            }
        }
        (OwnedLiteralKind::Lang(tag), 1) => match tag.rsplit_once("--") {
            Some((lang, "ltr")) => format!("{lang}--rtl"),
            Some((lang, _)) => lang.to_string(),
            None => format!("{tag}--ltr"),
        },
        (OwnedLiteralKind::Typed(_), 0) => {
            return literal(&l.lex, Lit::Typed("http://ex.org/dt"));
        }
        (OwnedLiteralKind::Simple, 0) => {
            return literal(&l.lex, Lit::Lang("en"));
        }
        (OwnedLiteralKind::Simple, 1) => {
            return literal(&l.lex, Lit::Typed("http://ex.org/dt"));
        }
        _ => return literal(&l.lex, Lit::Simple),
    };
    Term::Literal(Literal {
        lex: l.lex.clone(),
        kind: OwnedLiteralKind::Lang(kind),
    })
}

fn gen_statement(r: &mut Rng, shape: Shape) -> Statement {
    let generalized = shape.generalized && r.chance(25);
    // RDF-star (not RDF 1.2) has quoted triples as subjects too.
    let subject = match r.below(10) {
        0..=5 => gen_iri(r),
        6..=8 => gen_blank(r),
        _ if shape.rdf_star => gen_quoted(r, 2),
        _ if generalized => gen_literal(r),
        _ => gen_iri(r),
    };
    let predicate = if generalized && r.chance(30) {
        gen_blank(r)
    } else {
        gen_iri(r)
    };
    let object = match r.below(10) {
        0..=2 => gen_iri(r),
        3..=4 => gen_blank(r),
        5..=7 => gen_literal(r),
        _ if shape.rdf_star => gen_quoted(r, 2),
        _ => gen_literal(r),
    };
    let graph = if !shape.quads {
        None
    } else {
        match r.below(10) {
            0..=3 => Some(Term::DefaultGraph),
            4..=7 => Some(gen_iri(r)),
            8 => Some(gen_blank(r)),
            _ if generalized => Some(gen_literal(r)),
            _ => Some(gen_iri(r)),
        }
    };
    Statement {
        subject,
        predicate,
        object,
        graph,
    }
}

/// One to five statements; later ones often reuse terms of earlier ones, so variables
/// repeated across positions and statements have something to bind to.
fn gen_item_statements(r: &mut Rng, shape: Shape) -> Vec<Statement> {
    let n = 1 + r.below(5);
    let mut out: Vec<Statement> = Vec::with_capacity(n);
    for _ in 0..n {
        let mut st = gen_statement(r, shape);
        if let Some(prev) = out.last().cloned()
            && r.chance(40)
        {
            match r.below(4) {
                0 => st.subject = prev.subject,
                1 => st.object = prev.subject.clone(),
                2 if shape.quads => st.graph = prev.graph,
                _ => {
                    if !matches!(prev.object, Term::Literal(_) | Term::Triple(_)) {
                        st.subject = prev.object;
                    }
                }
            }
        }
        if r.chance(10) {
            // A statement whose subject is also its object, or nearly (the same term
            // written otherwise, or another term written alike).
            st.object = if r.chance(50) {
                st.subject.clone()
            } else {
                near_miss(r, &st.subject)
            };
        }
        out.push(st);
    }
    out
}

/// The statements encoded as the server stores an item: one frame with its own
/// options row and lookup entries.
fn encode_item(statements: &[Statement], shape: Shape, offset: u64) -> Item {
    let mut enc = Encoder::new(shape.options()).expect("options");
    for s in statements {
        enc.add(s.as_ref()).expect("statement fits the shape");
    }
    Item {
        offset,
        timestamp_ms: 0,
        frame: Bytes::from(enc.finish_frame()),
        statements: statements.len() as u32,
        source: String::new(),
        headers: Vec::new(),
    }
}

// ---------------------------------------------------------------------------------
// The references.

/// A term in N-Triples syntax (as a `pattern` takes it; SPARQL reads it too).
fn nt(t: &Term) -> String {
    match t {
        Term::Iri(i) => format!("<{i}>"),
        Term::BlankNode(b) => format!("_:{b}"),
        Term::Literal(l) => {
            let mut s = String::from("\"");
            for c in l.lex.chars() {
                match c {
                    '"' => s.push_str("\\\""),
                    '\\' => s.push_str("\\\\"),
                    c => s.push(c),
                }
            }
            s.push('"');
            match &l.kind {
                OwnedLiteralKind::Simple => {}
                OwnedLiteralKind::Lang(tag) => write!(s, "@{tag}").unwrap(),
                OwnedLiteralKind::Typed(dt) => write!(s, "^^<{dt}>").unwrap(),
            }
            s
        }
        Term::Triple(t) => format!(
            "<<( {} {} {} )>>",
            nt(&t.subject),
            nt(&t.predicate),
            nt(&t.object)
        ),
        Term::DefaultGraph => String::new(),
    }
}

/// A term's identity in RDF: language tags in lower case (they are case-insensitive),
/// `"v"^^xsd:string` the same as `"v"`. Defined on generalized terms too.
fn canonical(t: &Term) -> String {
    match t {
        Term::Literal(l) => match &l.kind {
            OwnedLiteralKind::Typed(dt) if dt == &format!("{XSD}string") => {
                nt(&literal(&l.lex, Lit::Simple))
            }
            OwnedLiteralKind::Lang(tag) => {
                let text = nt(&literal(&l.lex, Lit::Simple));
                format!("{text}@{}", tag.to_ascii_lowercase())
            }
            _ => nt(t),
        },
        Term::Triple(tr) => format!(
            "<<( {} {} {} )>>",
            canonical(&tr.subject),
            canonical(&tr.predicate),
            canonical(&tr.object)
        ),
        _ => nt(t),
    }
}

/// The oxrdf term, built with oxrdf's checking constructors (which put language tags
/// in lower case), or `None` where RDF 1.2 has no such term.
fn ox_term(t: &Term) -> Option<oxrdf::Term> {
    Some(match t {
        Term::Iri(i) => NamedNode::new(i.clone()).ok()?.into(),
        // Labels are local to the item: any label that keeps them apart will do.
        Term::BlankNode(b) => BlankNode::new_unchecked(blank_label(b)).into(),
        Term::Literal(l) => match &l.kind {
            OwnedLiteralKind::Simple => oxrdf::Literal::new_simple_literal(&l.lex).into(),
            OwnedLiteralKind::Typed(dt) => {
                oxrdf::Literal::new_typed_literal(&l.lex, NamedNode::new(dt.clone()).ok()?).into()
            }
            OwnedLiteralKind::Lang(tag) => match tag.rsplit_once("--") {
                Some((lang, dir @ ("ltr" | "rtl"))) => {
                    let dir = if dir == "ltr" {
                        oxrdf::BaseDirection::Ltr
                    } else {
                        oxrdf::BaseDirection::Rtl
                    };
                    oxrdf::Literal::new_directional_language_tagged_literal(&l.lex, lang, dir)
                        .ok()?
                        .into()
                }
                _ => oxrdf::Literal::new_language_tagged_literal(&l.lex, tag)
                    .ok()?
                    .into(),
            },
        },
        Term::Triple(tr) => oxrdf::Triple::new(
            ox_subject(&tr.subject)?,
            ox_predicate(&tr.predicate)?,
            ox_term(&tr.object)?,
        )
        .into(),
        Term::DefaultGraph => return None,
    })
}

fn blank_label(b: &str) -> String {
    b.bytes().map(|c| format!("{c:02x}")).collect()
}

fn ox_subject(t: &Term) -> Option<NamedOrBlankNode> {
    match ox_term(t)? {
        oxrdf::Term::NamedNode(n) => Some(n.into()),
        oxrdf::Term::BlankNode(b) => Some(b.into()),
        _ => None,
    }
}

fn ox_predicate(t: &Term) -> Option<NamedNode> {
    match ox_term(t)? {
        oxrdf::Term::NamedNode(n) => Some(n),
        _ => None,
    }
}

/// The statement as an RDF 1.2 quad, or `None` if it is generalized (or has a quoted
/// triple as subject), which the `ask` filter leaves out.
fn ox_quad(st: &Statement) -> Option<Quad> {
    let graph_name = match &st.graph {
        None | Some(Term::DefaultGraph) => GraphName::DefaultGraph,
        Some(g) => match ox_term(g)? {
            oxrdf::Term::NamedNode(n) => n.into(),
            oxrdf::Term::BlankNode(b) => b.into(),
            _ => return None,
        },
    };
    Some(Quad::new(
        ox_subject(&st.subject)?,
        ox_predicate(&st.predicate)?,
        ox_term(&st.object)?,
        graph_name,
    ))
}

/// The reference dataset: the RDF 1.2 statements of the item, the literals inside
/// triple terms in the canonical form of their value, as the docs say `ask` sees
/// them (spareval compares triple terms by value).
fn reference_dataset(statements: &[Statement]) -> Dataset {
    statements
        .iter()
        .filter_map(ox_quad)
        .map(|q| Quad {
            object: value_form(q.object.clone()),
            ..q
        })
        .collect()
}

/// A triple term with its literals in the canonical form of their value
/// (`"01"^^xsd:integer` as `"1"^^xsd:integer`); other terms as they are.
fn value_form(t: oxrdf::Term) -> oxrdf::Term {
    match t {
        t @ oxrdf::Term::Triple(_) => spareval::ExpressionTerm::from(t).into(),
        t => t,
    }
}

/// Whether the quoted triples among the terms hold only literals in canonical form:
/// only then does SPARQL (which compares triple terms by value) tell what a `pattern`
/// (which compares them as written) does.
fn quoted_in_value_form<'a>(terms: impl IntoIterator<Item = &'a Term>) -> bool {
    terms.into_iter().all(|t| match (t, ox_term(t)) {
        (Term::Triple(_), Some(ox)) => value_form(ox.clone()) == ox,
        _ => true,
    })
}

fn representable(statements: &[Statement]) -> bool {
    statements.iter().all(|s| ox_quad(s).is_some())
}

/// spareval's answer to `query` on `data`.
fn reference_ask(query: &str, data: &Dataset) -> Result<bool, String> {
    let q = SparqlParser::new()
        .parse_query(query)
        .map_err(|e| format!("{e}: {query}"))?;
    match QueryEvaluator::new().prepare(&q).execute(data) {
        Ok(QueryResults::Boolean(b)) => Ok(b),
        Ok(_) => Err("not a boolean".into()),
        Err(e) => Err(format!("evaluation: {e}")),
    }
}

/// One position of a generated `pattern`.
#[derive(Clone, Debug)]
enum PTerm {
    Any,
    /// `?v{n}` (written `$v{n}` sometimes: the same variable).
    Var(u8),
    /// `_:b{n}`.
    Blank(u8),
    Exact(Term),
}

/// Whether a term may stand in a pattern as an exact term: blank nodes are never
/// matched by label, so no blank node, not even inside a quoted triple.
fn exact_allowed(t: &Term) -> bool {
    match t {
        Term::BlankNode(_) | Term::DefaultGraph => false,
        Term::Triple(tr) => {
            exact_allowed(&tr.subject) && exact_allowed(&tr.predicate) && exact_allowed(&tr.object)
        }
        _ => true,
    }
}

/// All terms of the statements (quoted triples and their parts too).
fn terms_of(statements: &[Statement]) -> Vec<Term> {
    fn add(t: &Term, out: &mut Vec<Term>) {
        out.push(t.clone());
        if let Term::Triple(tr) = t {
            add(&tr.subject, out);
            add(&tr.predicate, out);
            add(&tr.object, out);
        }
    }
    let mut out = Vec::new();
    for s in statements {
        add(&s.subject, &mut out);
        add(&s.predicate, &mut out);
        add(&s.object, &mut out);
        if let Some(g) = &s.graph {
            add(g, &mut out);
        }
    }
    out
}

fn gen_pattern(r: &mut Rng, statements: &[Statement], shape: Shape) -> Vec<PTerm> {
    let n = if r.chance(35) { 4 } else { 3 };
    let near: Vec<Term> = terms_of(statements)
        .into_iter()
        .filter(exact_allowed)
        .collect();
    // Most exact terms come from a statement of the item, so they match now and then.
    let own = &statements[r.below(statements.len())];
    let own_terms = [
        Some(own.subject.clone()),
        Some(own.predicate.clone()),
        Some(own.object.clone()),
        own.graph.clone(),
    ];
    (0..n)
        .map(|i| match r.below(10) {
            0..=1 => PTerm::Any,
            2..=3 => PTerm::Var(r.below(3) as u8),
            4 => PTerm::Blank(r.below(2) as u8),
            _ => {
                let exact = match r.below(5) {
                    0..=1 => own_terms[i].clone().filter(exact_allowed),
                    3 => own_terms[i]
                        .as_ref()
                        .map(|t| near_miss(r, t))
                        .filter(exact_allowed),
                    2 if !near.is_empty() => Some(r.pick(&near).clone()),
                    _ => None,
                };
                let exact = exact.unwrap_or_else(|| match i {
                    1 | 3 => gen_iri(r),
                    _ if shape.rdf_star && r.chance(15) => loop {
                        let q = gen_quoted(r, 2);
                        if exact_allowed(&q) {
                            break q;
                        }
                    },
                    _ if r.chance(50) => gen_literal(r),
                    _ => gen_iri(r),
                });
                // A graph name in a pattern is an IRI; a literal there is refused.
                if i == 3 && !matches!(exact, Term::Iri(_)) {
                    PTerm::Any
                } else {
                    PTerm::Exact(exact)
                }
            }
        })
        .collect()
}

fn pattern_text(p: &[PTerm], r: &mut Rng) -> String {
    p.iter()
        .map(|t| match t {
            PTerm::Any => "*".to_string(),
            PTerm::Var(n) if r.chance(20) => format!("$v{n}"),
            PTerm::Var(n) => format!("?v{n}"),
            PTerm::Blank(n) => format!("_:b{n}"),
            PTerm::Exact(t) => nt(t),
        })
        .collect::<Vec<_>>()
        .join(if r.chance(20) { "  \t" } else { " " })
}

/// The SPARQL ASK equivalent of a pattern, as the docs define it: `?name` a variable,
/// `*` a fresh one, `_:name` a variable bound to a blank node, a fourth term `GRAPH`,
/// three terms any graph (default or named).
fn pattern_as_sparql(p: &[PTerm]) -> String {
    let mut filters = Vec::new();
    let mut fresh = 0;
    let mut var = |t: &PTerm, pos: usize, filters: &mut Vec<String>| -> String {
        fresh += 1;
        match t {
            PTerm::Any => format!("?any{fresh}"),
            PTerm::Var(n) => format!("?v{n}"),
            PTerm::Blank(n) => {
                filters.push(format!("isBlank(?b{n})"));
                format!("?b{n}")
            }
            // SPARQL takes any term as object, and an IRI anywhere; other terms are
            // compared with sameTerm (no statement has them there in RDF 1.2).
            PTerm::Exact(e) if pos == 2 || matches!(e, Term::Iri(_)) => nt(e),
            PTerm::Exact(e) => {
                filters.push(format!("sameTerm(?x{fresh}, {})", nt(e)));
                format!("?x{fresh}")
            }
        }
    };
    let s = var(&p[0], 0, &mut filters);
    let pr = var(&p[1], 1, &mut filters);
    let o = var(&p[2], 2, &mut filters);
    let triple = format!("{s} {pr} {o} .");
    let body = match p.get(3) {
        None => format!("{{ {triple} }} UNION {{ GRAPH ?anygraph {{ {triple} }} }}"),
        Some(g) => {
            let g = var(g, 3, &mut filters);
            format!("GRAPH {g} {{ {triple} }}")
        }
    };
    let filters = if filters.is_empty() {
        String::new()
    } else {
        format!(" FILTER({})", filters.join(" && "))
    };
    format!("ASK {{ {body}{filters} }}")
}

/// The pattern matched directly on the generated statements (generalized ones too),
/// with RDF term identity ([`canonical`]).
fn pattern_direct(p: &[PTerm], statements: &[Statement]) -> bool {
    statements.iter().any(|st| {
        let graph = match (p.len(), &st.graph) {
            (3, _) => None,
            (_, None | Some(Term::DefaultGraph)) => return false,
            (_, Some(g)) => Some(g),
        };
        let values = [
            Some(&st.subject),
            Some(&st.predicate),
            Some(&st.object),
            graph,
        ];
        let mut bound: HashMap<String, String> = HashMap::new();
        p.iter().zip(values).all(|(pt, v)| {
            let Some(v) = v else { return true };
            let mut bind = |name: String| {
                let c = canonical(v);
                bound.entry(name).or_insert_with(|| c.clone()) == &c
            };
            match pt {
                PTerm::Any => true,
                PTerm::Exact(e) => canonical(e) == canonical(v),
                PTerm::Var(n) => bind(format!("?{n}")),
                PTerm::Blank(n) => matches!(v, Term::BlankNode(_)) && bind(format!("_:{n}")),
            }
        })
    })
}

/// Every IRI of the statements: all positions, datatypes written on literals, inside
/// quoted triples; not literal values.
fn iris_of(statements: &[Statement]) -> Vec<String> {
    terms_of(statements)
        .into_iter()
        .filter_map(|t| match t {
            Term::Iri(i) => Some(i),
            Term::Literal(Literal {
                kind: OwnedLiteralKind::Typed(dt),
                ..
            }) if dt != format!("{XSD}string") => Some(dt),
            _ => None,
        })
        .collect()
}

const PREFIXES: &[&str] = &[
    "http://ex.org/",
    "http://ex.org/a",
    "http://ex.org/a/",
    "http://ex.org/ab",
    "http://exa",
    "http://ex.org/\u{e9}",
    "urn:x:",
    "urn:x:ab",
    "urn:x:d",
    "http://www.w3.org/2001/XMLSchema#",
    "http://www.w3.org/2001/XMLSchema#integer",
    "http://www.w3.org/1999/02/22-rdf-syntax-ns#",
    "http://nowhere.org/",
];

fn gen_prefixes(r: &mut Rng) -> Vec<&'static str> {
    (0..1 + r.below(3)).map(|_| *r.pick(PREFIXES)).collect()
}

fn prefix_direct(prefixes: &[&str], statements: &[Statement]) -> bool {
    iris_of(statements)
        .iter()
        .any(|i| prefixes.iter().any(|p| i.starts_with(p)))
}

fn prefix_text(prefixes: &[&str], r: &mut Rng) -> String {
    prefixes
        .iter()
        .map(|p| {
            if r.chance(50) {
                format!("<{p}>")
            } else {
                p.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A random ASK query over the statements of the item: one to three triple patterns
/// made from its statements (each term kept, or replaced by a variable named after it,
/// so repeated terms join, or by a fresh variable), in the default graph, a named
/// graph or any, with filters on the kind, language, direction and datatype of the
/// bound terms.
fn gen_ask(r: &mut Rng, statements: &[Statement], shape: Shape) -> String {
    let mut names: Vec<String> = Vec::new();
    let mut fresh = 0;
    let mut term = |r: &mut Rng, t: &Term, pos: usize| -> String {
        let exact_ok = exact_allowed(t) && (pos == 2 || matches!(t, Term::Iri(_)));
        match r.below(10) {
            0..=2 if exact_ok => nt(t),
            3 if exact_ok => nt(&near_miss(r, t)),
            0..=6 => {
                let c = canonical(t);
                let n = names.iter().position(|x| *x == c).unwrap_or_else(|| {
                    names.push(c);
                    names.len() - 1
                });
                format!("?t{n}")
            }
            7 if pos == 2 && shape.rdf_star => {
                fresh += 2;
                format!("<<( ?f{} {} ?f{} )>>", fresh - 1, nt(&gen_iri(r)), fresh)
            }
            8 if pos == 2 => nt(&gen_literal(r)),
            _ => {
                fresh += 1;
                format!("?f{fresh}")
            }
        }
    };
    let n = if r.chance(20) { 3 } else { 1 + r.below(2) };
    let mut triples = String::new();
    let first = &statements[r.below(statements.len())];
    for i in 0..n {
        let st = if i == 0 {
            first
        } else {
            &statements[r.below(statements.len())]
        };
        let s = term(r, &st.subject, 0);
        let p = term(r, &st.predicate, 1);
        let o = term(r, &st.object, 2);
        write!(triples, "{s} {p} {o} . ").unwrap();
    }
    const VARS: &[&str] = &["?t0", "?t1", "?t2", "?f1"];
    let mut filters = Vec::new();
    for _ in 0..r.below(3) {
        let v = r.pick(VARS);
        filters.push(match r.below(16) {
            0 => format!("isBlank({v})"),
            1 => format!("isLiteral({v})"),
            2 => format!("isIRI({v})"),
            3 => format!("isTRIPLE({v})"),
            4 => format!("lang({v}) = \"en\""),
            5 => format!("langMatches(lang({v}), \"EN\")"),
            6 => format!("hasLANGDIR({v})"),
            7 => format!("LANGDIR({v}) = \"rtl\""),
            8 => format!("datatype({v}) = <{XSD}integer>"),
            9 => format!("{v} = 1"),
            10 => format!("STRSTARTS(STR({v}), \"http://ex.org/a\")"),
            11 => format!("sameTerm({v}, {})", nt(&gen_literal(r))),
            12 => format!("{v} = {}", nt(&gen_literal(r))),
            13 => format!("EXISTS {{ {v} ?p2 ?o2 }}"),
            14 => format!("NOT EXISTS {{ GRAPH ?g2 {{ ?s2 ?p2 {v} }} }}"),
            _ => format!("!BOUND({v})"),
        });
    }
    let filters = if filters.is_empty() {
        String::new()
    } else {
        format!(
            " FILTER({})",
            filters.join(if r.chance(30) { " && " } else { " || " })
        )
    };
    let group = format!("{triples}{filters}");
    let graph = match &first.graph {
        Some(g @ Term::Iri(_)) if r.chance(70) => nt(g),
        _ => nt(&gen_iri(r)),
    };
    match r.below(5) {
        0 => format!("ASK {{ {group} }}"),
        1 => format!("ASK {{ GRAPH ?g {{ {group} }} }}"),
        2 => format!("ASK {{ GRAPH {graph} {{ {group} }} }}"),
        _ => format!("ASK {{ {{ {group} }} UNION {{ GRAPH ?g {{ {group} }} }} }}"),
    }
}

fn build(f: impl FnOnce(&mut FilterParams)) -> Result<Arc<ItemFilter>, String> {
    let mut p = FilterParams::default();
    f(&mut p);
    match p.build() {
        Ok(Some(f)) => Ok(f),
        Ok(None) => Err("no filter".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// Shapes a topic's items may have, in turn.
const SHAPES: &[Shape] = &[
    Shape {
        quads: true,
        rdf_star: true,
        generalized: false,
    },
    Shape {
        quads: false,
        rdf_star: false,
        generalized: false,
    },
    Shape {
        quads: true,
        rdf_star: false,
        generalized: false,
    },
    Shape {
        quads: false,
        rdf_star: true,
        generalized: false,
    },
    Shape {
        quads: true,
        rdf_star: true,
        generalized: true,
    },
];

/// Case numbers and the failures found, reported all at once.
#[derive(Default)]
struct Failures(Vec<String>);

impl Failures {
    fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok && self.0.len() < 20 {
            self.0.push(what());
        }
    }

    fn assert_none(&self, kind: &str) {
        assert!(
            self.0.is_empty(),
            "{kind}: {} mismatches, first ones:\n{}",
            self.0.len(),
            self.0.join("\n---\n")
        );
    }
}

fn show(statements: &[Statement]) -> String {
    statements
        .iter()
        .map(|s| {
            let g = s.graph.as_ref().map(nt).unwrap_or_default();
            format!(
                "  {} {} {} {g}",
                nt(&s.subject),
                nt(&s.predicate),
                nt(&s.object)
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn pattern_agrees_with_sparql_and_a_direct_match() {
    let mut r = Rng(0x5eed_0001);
    let mut fails = Failures::default();
    let (mut cases, mut matched) = (0, 0);
    for case in 0..1500 {
        let shape = SHAPES[case % SHAPES.len()];
        let statements = gen_item_statements(&mut r, shape);
        let item = encode_item(&statements, shape, case as u64);
        let p = gen_pattern(&mut r, &statements, shape);
        let text = pattern_text(&p, &mut r);
        let f = match build(|f| f.pattern = Some(text.clone())) {
            Ok(f) => f,
            Err(e) => {
                fails.check(false, || format!("case {case}: `{text}` refused: {e}"));
                continue;
            }
        };
        let got = f.accepts(&item).map_err(|e| e.to_string());
        let direct = pattern_direct(&p, &statements);
        cases += 1;
        matched += usize::from(direct);
        fails.check(got.as_ref() == Ok(&direct), || {
            format!(
                "case {case}: pattern `{text}` gave {got:?}, direct match {direct}\n{}",
                show(&statements)
            )
        });
        let exact = p.iter().filter_map(|t| match t {
            PTerm::Exact(e) => Some(e),
            _ => None,
        });
        if representable(&statements)
            && quoted_in_value_form(exact)
            && quoted_in_value_form(&terms_of(&statements))
        {
            let q = pattern_as_sparql(&p);
            let sparql = reference_ask(&q, &reference_dataset(&statements));
            fails.check(sparql == Ok(direct), || {
                format!(
                    "case {case}: `{q}` gave {sparql:?}, direct match of `{text}` {direct}\n{}",
                    show(&statements)
                )
            });
        }
    }
    fails.assert_none("pattern");
    // The generator is worth something only if both verdicts are common.
    assert!(
        matched > cases / 5 && matched < cases * 4 / 5,
        "{matched} of {cases}"
    );
}

#[test]
fn prefix_agrees_with_a_direct_check_of_every_iri() {
    let mut r = Rng(0x5eed_0002);
    let mut fails = Failures::default();
    let mut matched = 0;
    let cases = 2000;
    for case in 0..cases {
        let shape = SHAPES[case % SHAPES.len()];
        let statements = gen_item_statements(&mut r, shape);
        let item = encode_item(&statements, shape, case as u64);
        let prefixes = gen_prefixes(&mut r);
        let text = prefix_text(&prefixes, &mut r);
        let got = build(|f| f.prefix = Some(text.clone()))
            .and_then(|f| f.accepts(&item).map_err(|e| e.to_string()));
        let direct = prefix_direct(&prefixes, &statements);
        matched += usize::from(direct);
        fails.check(got == Ok(direct), || {
            format!(
                "case {case}: prefix `{text}` gave {got:?}, direct check {direct}\n{}",
                show(&statements)
            )
        });
    }
    fails.assert_none("prefix");
    assert!(
        matched > cases / 5 && matched < cases * 4 / 5,
        "{matched} of {cases}"
    );
}

#[test]
fn ask_agrees_with_spareval_on_the_same_statements() {
    let mut r = Rng(0x5eed_0003);
    let mut fails = Failures::default();
    let (mut cases, mut matched, mut refused) = (0, 0, 0);
    for case in 0..800 {
        let shape = SHAPES[case % SHAPES.len()];
        let statements = gen_item_statements(&mut r, shape);
        let item = encode_item(&statements, shape, case as u64);
        // Generated again while the server refuses it; only the cross-product rule
        // may refuse a generated query.
        let (q, f) = loop {
            let q = gen_ask(&mut r, &statements, shape);
            match build(|f| f.ask = Some(q.clone())) {
                Ok(f) => break (q, f),
                Err(e) => {
                    fails.check(e.contains("cross product"), || {
                        format!("case {case}: `{q}` refused: {e}")
                    });
                    refused += 1;
                }
            }
        };
        let got = f.accepts(&item).map_err(|e| e.to_string());
        let want = reference_ask(&q, &reference_dataset(&statements));
        cases += 1;
        matched += usize::from(want == Ok(true));
        fails.check(got == want, || {
            format!(
                "case {case}: `{q}` gave {got:?}, spareval on the statements {want:?}\n{}",
                show(&statements)
            )
        });
    }
    fails.assert_none("ask");
    assert!(refused < cases, "{refused} generated queries refused");
    assert!(
        matched > cases / 10 && matched < cases * 9 / 10,
        "{matched} of {cases}"
    );
}

/// An item in N-Quads (RDF 1.2: triple terms in the object, directions on tags).
fn nquads(statements: &[Statement]) -> String {
    statements
        .iter()
        .map(|s| {
            let g = match &s.graph {
                None | Some(Term::DefaultGraph) => String::new(),
                Some(g) => format!("{} ", nt(g)),
            };
            format!(
                "{} {} {} {g}.\n",
                nt(&s.subject),
                nt(&s.predicate),
                nt(&s.object)
            )
        })
        .collect()
}

/// A reference verdict on an item's statements.
type ItemCheck = Box<dyn Fn(&[Statement]) -> bool>;

/// A random combination of filters and the offsets the references expect it to pass.
fn gen_filter_and_expected(
    r: &mut Rng,
    items: &[(Shape, Vec<Statement>)],
) -> (Vec<(&'static str, String)>, Vec<u64>) {
    // The terms of a random stored item, so that exact terms hit now and then.
    let (shape, sample) = &items[r.below(items.len())];
    let mut params = Vec::new();
    let mut checks: Vec<ItemCheck> = Vec::new();
    let kinds = 1 + r.below(7);
    if kinds & 1 != 0 {
        let p = gen_pattern(r, sample, *shape);
        params.push(("pattern", pattern_text(&p, r)));
        checks.push(Box::new(move |s| pattern_direct(&p, s)));
    }
    if kinds & 2 != 0 {
        let prefixes = gen_prefixes(r);
        params.push(("prefix", prefix_text(&prefixes, r)));
        checks.push(Box::new(move |s| prefix_direct(&prefixes, s)));
    }
    if kinds & 4 != 0 {
        // Regenerated until the server would take it (no cross product).
        let q = loop {
            let q = gen_ask(r, sample, *shape);
            if build(|f| f.ask = Some(q.clone())).is_ok() {
                break q;
            }
        };
        params.push(("ask", q.clone()));
        checks.push(Box::new(move |s| {
            reference_ask(&q, &reference_dataset(s)).expect("reference evaluates")
        }));
    }
    let expected = items
        .iter()
        .enumerate()
        .filter(|(_, (_, s))| checks.iter().all(|c| c(s)))
        .map(|(i, _)| i as u64)
        .collect();
    (params, expected)
}

/// Percent-encodes a query parameter value.
fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Items published to a real server (one Jelly stream whose tables carry over from
/// item to item, single-frame Jelly bodies of other options, N-Quads bodies), then
/// read back through filtered subscriptions: the offsets delivered are the offsets
/// the references expect.
#[tokio::test]
async fn filters_on_a_real_server_deliver_what_the_references_expect() {
    let mut r = Rng(0x5eed_0004);
    let items: Vec<(Shape, Vec<Statement>)> = (0..60)
        .map(|i| {
            let shape = SHAPES[i % SHAPES.len()];
            (shape, gen_item_statements(&mut r, shape))
        })
        .collect();
    let srv = jelly_server::Server::start(jelly_server::ServerConfig::ephemeral())
        .await
        .unwrap();
    let c = support::client();
    let topic = format!("{}/topics/d", srv.url());
    let put = c
        .put(&topic)
        .json(&serde_json::json!({"physical": "quads", "rdf_star": true, "generalized": true}))
        .send()
        .await
        .unwrap();
    assert!(put.status().is_success(), "{}", put.status());
    let publish = |body: Vec<u8>, content_type: &'static str| {
        let req = c
            .post(format!("{topic}/items"))
            .header("content-type", content_type)
            .body(body)
            .send();
        async move {
            let r = req.await.unwrap();
            let status = r.status();
            let v: serde_json::Value = r.json().await.unwrap();
            assert!(status.is_success(), "{v}");
            v["offsets"].as_array().unwrap().len()
        }
    };
    // Items 0..30: one publisher stream with the topic's options.
    let (first, rest) = items.split_at(30);
    let frames: Vec<Vec<Statement>> = first.iter().map(|(_, s)| s.clone()).collect();
    let opts = SHAPES[4].options();
    let body = support::jelly_stream(&frames, opts);
    assert_eq!(publish(body, "application/x-jelly-rdf").await, 30);
    // Items 30..60: one request each, N-Quads when RDF 1.2 holds the item, else a
    // one-frame Jelly stream with the options of its shape.
    for (shape, statements) in rest {
        let n = if representable(statements) {
            publish(nquads(statements).into_bytes(), "application/n-quads").await
        } else {
            let body = support::jelly_stream(std::slice::from_ref(statements), shape.options());
            publish(body, "application/x-jelly-rdf").await
        };
        assert_eq!(n, 1);
    }
    let mut fails = Failures::default();
    let mut nonempty = 0;
    for case in 0..40 {
        let (params, expected) = gen_filter_and_expected(&mut r, &items);
        let query: String = params
            .iter()
            .map(|(k, v)| format!("&{k}={}", urlencode(v)))
            .collect();
        let resp = c
            .get(format!("{topic}/items?follow=false{query}"))
            .send()
            .await
            .unwrap();
        assert!(resp.status().is_success(), "{params:?}: {}", resp.status());
        let got: Vec<u64> = support::frames(&resp.bytes().await.unwrap())
            .into_iter()
            .map(|(offset, _)| offset)
            .collect();
        nonempty += usize::from(!expected.is_empty());
        fails.check(got == expected, || {
            let diff: BTreeSet<u64> = got
                .iter()
                .chain(&expected)
                .filter(|o| got.contains(o) != expected.contains(o))
                .copied()
                .collect();
            let shown: Vec<String> = diff
                .iter()
                .take(3)
                .map(|o| format!("item {o}:\n{}", show(&items[*o as usize].1)))
                .collect();
            format!(
                "case {case}: {params:?} delivered {got:?}, expected {expected:?}\n{}",
                shown.join("\n")
            )
        });
    }
    fails.assert_none("server");
    assert!(nonempty > 10, "{nonempty} filters expected some item");
    srv.shutdown().await.unwrap();
}
