//! RDF dataset isomorphism for (generalized, RDF-star) statements.
//!
//! Used by the conformance harness and by `jelly rdf validate --compare-to-rdf-file`.
//! Blank nodes get colours by iterative refinement over their occurrences, and the
//! remaining ties are settled by a bounded backtracking search.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::{Hash, Hasher};

use crate::term::{Literal, OwnedLiteralKind, Statement, Term, Triple, XSD_STRING};

/// Outcome of a comparison.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IsoResult {
    /// The two sets are isomorphic.
    Isomorphic,
    /// They are not; the message says why.
    Different(String),
    /// The search for a blank node mapping gave up after its step limit.
    TooHard,
}

impl IsoResult {
    /// True for [`IsoResult::Isomorphic`].
    pub fn is_iso(&self) -> bool {
        matches!(self, IsoResult::Isomorphic)
    }
}

/// Puts statements in the form the comparison uses: a triple is a quad in the default
/// graph and `"x"^^xsd:string` is a simple literal; duplicates collapse (datasets are sets).
pub fn normalize(statements: &[Statement]) -> HashSet<Statement> {
    statements
        .iter()
        .map(|s| Statement {
            subject: norm_term(&s.subject),
            predicate: norm_term(&s.predicate),
            object: norm_term(&s.object),
            graph: Some(s.graph.as_ref().map_or(Term::DefaultGraph, norm_term)),
        })
        .collect()
}

fn norm_term(t: &Term) -> Term {
    match t {
        Term::Literal(Literal {
            lex,
            kind: OwnedLiteralKind::Typed(dt),
        }) if dt == XSD_STRING => Term::Literal(Literal {
            lex: lex.clone(),
            kind: OwnedLiteralKind::Simple,
        }),
        Term::Triple(tr) => Term::Triple(Box::new(Triple {
            subject: norm_term(&tr.subject),
            predicate: norm_term(&tr.predicate),
            object: norm_term(&tr.object),
        })),
        t => t.clone(),
    }
}

fn terms(s: &Statement) -> [&Term; 4] {
    [
        &s.subject,
        &s.predicate,
        &s.object,
        s.graph.as_ref().unwrap_or(&Term::DefaultGraph),
    ]
}

fn collect_bnodes<'a>(t: &'a Term, out: &mut BTreeSet<&'a str>) {
    match t {
        Term::BlankNode(b) => {
            out.insert(b);
        }
        Term::Triple(tr) => {
            collect_bnodes(&tr.subject, out);
            collect_bnodes(&tr.predicate, out);
            collect_bnodes(&tr.object, out);
        }
        _ => {}
    }
}

fn hash_term(t: &Term, colors: &HashMap<&str, u64>, me: &str, h: &mut DefaultHasher) {
    match t {
        Term::BlankNode(b) if b == me => 1u8.hash(h),
        Term::BlankNode(b) => {
            2u8.hash(h);
            colors.get(b.as_str()).hash(h);
        }
        Term::Triple(tr) => {
            3u8.hash(h);
            hash_term(&tr.subject, colors, me, h);
            hash_term(&tr.predicate, colors, me, h);
            hash_term(&tr.object, colors, me, h);
        }
        other => {
            4u8.hash(h);
            other.hash(h);
        }
    }
}

fn term_mentions(t: &Term, b: &str) -> bool {
    match t {
        Term::BlankNode(x) => x == b,
        Term::Triple(tr) => {
            term_mentions(&tr.subject, b)
                || term_mentions(&tr.predicate, b)
                || term_mentions(&tr.object, b)
        }
        _ => false,
    }
}

/// Colours of the blank nodes of `set` after refinement.
fn colors(set: &[&Statement]) -> HashMap<String, u64> {
    let mut bnodes = BTreeSet::new();
    for s in set {
        for t in terms(s) {
            collect_bnodes(t, &mut bnodes);
        }
    }
    // Occurrence lists: which statements mention each blank node.
    let mut occ: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, s) in set.iter().enumerate() {
        let mut here = BTreeSet::new();
        for t in terms(s) {
            collect_bnodes(t, &mut here);
        }
        for b in here {
            occ.entry(b).or_default().push(i);
        }
    }
    let mut col: HashMap<&str, u64> = bnodes.iter().map(|b| (*b, 0u64)).collect();
    let mut classes = 1usize;
    for _ in 0..=bnodes.len() {
        let mut next = HashMap::with_capacity(col.len());
        for b in &bnodes {
            let mut sigs: Vec<u64> = occ[b]
                .iter()
                .map(|&i| {
                    let mut h = DefaultHasher::new();
                    for (pos, t) in terms(set[i]).into_iter().enumerate() {
                        pos.hash(&mut h);
                        hash_term(t, &col, b, &mut h);
                    }
                    h.finish()
                })
                .collect();
            sigs.sort_unstable();
            let mut h = DefaultHasher::new();
            col[b].hash(&mut h);
            sigs.hash(&mut h);
            next.insert(*b, h.finish());
        }
        let n: HashSet<u64> = next.values().copied().collect();
        col = next;
        if n.len() == classes {
            break;
        }
        classes = n.len();
    }
    let _ = term_mentions;
    col.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

fn relabel(t: &Term, map: &HashMap<String, String>) -> Term {
    match t {
        Term::BlankNode(b) => Term::BlankNode(map.get(b).cloned().unwrap_or_else(|| b.clone())),
        Term::Triple(tr) => Term::Triple(Box::new(Triple {
            subject: relabel(&tr.subject, map),
            predicate: relabel(&tr.predicate, map),
            object: relabel(&tr.object, map),
        })),
        t => t.clone(),
    }
}

fn relabel_set(set: &[&Statement], map: &HashMap<String, String>) -> HashSet<Statement> {
    set.iter()
        .map(|s| Statement {
            subject: relabel(&s.subject, map),
            predicate: relabel(&s.predicate, map),
            object: relabel(&s.object, map),
            graph: s.graph.as_ref().map(|g| relabel(g, map)),
        })
        .collect()
}

/// Compares two statement lists as RDF datasets, up to blank node renaming.
///
/// ```
/// use jelly::iso::isomorphic;
/// use jelly::nquads::parse_document;
/// let a = parse_document("_:x <p> _:y .\n_:y <p> _:x .\n").unwrap();
/// let b = parse_document("_:m <p> _:n .\n_:n <p> _:m .\n").unwrap();
/// assert!(isomorphic(&a, &b).is_iso());
/// ```
pub fn isomorphic(a: &[Statement], b: &[Statement]) -> IsoResult {
    let na = normalize(a);
    let nb = normalize(b);
    // Same statements with the same labels: the identity mapping already works.
    if na == nb {
        return IsoResult::Isomorphic;
    }
    if na.len() != nb.len() {
        return IsoResult::Different(format!("{} distinct statements vs {}", na.len(), nb.len()));
    }
    let has_bnode = |s: &Statement| {
        terms(s).into_iter().any(|t| {
            let mut set = BTreeSet::new();
            collect_bnodes(t, &mut set);
            !set.is_empty()
        })
    };
    // Ground statements must match one to one.
    let ground_a: HashSet<&Statement> = na.iter().filter(|s| !has_bnode(s)).collect();
    let ground_b: HashSet<&Statement> = nb.iter().filter(|s| !has_bnode(s)).collect();
    if ground_a != ground_b {
        let missing = ground_a
            .difference(&ground_b)
            .next()
            .or_else(|| ground_b.difference(&ground_a).next());
        return IsoResult::Different(match missing {
            Some(s) => format!("statement without blank nodes only on one side: {s}"),
            None => "different statements without blank nodes".into(),
        });
    }
    let va: Vec<&Statement> = na.iter().filter(|s| has_bnode(s)).collect();
    let vb: Vec<&Statement> = nb.iter().filter(|s| has_bnode(s)).collect();
    if va.is_empty() {
        return IsoResult::Isomorphic;
    }
    let ca = colors(&va);
    let cb = colors(&vb);
    let mut hist_a: Vec<u64> = ca.values().copied().collect();
    let mut hist_b: Vec<u64> = cb.values().copied().collect();
    hist_a.sort_unstable();
    hist_b.sort_unstable();
    if hist_a != hist_b {
        return IsoResult::Different("blank node structures differ".into());
    }
    let target: HashSet<Statement> = vb.iter().map(|s| (*s).clone()).collect();
    // Candidates for each blank node of `a`: the blank nodes of `b` with the same colour.
    let mut by_color: HashMap<u64, Vec<&str>> = HashMap::new();
    for (k, v) in &cb {
        by_color.entry(*v).or_default().push(k);
    }
    let mut order: Vec<(&str, u64)> = ca.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    order.sort_by_key(|(k, c)| (by_color.get(c).map_or(0, Vec::len), *k));
    let mut map = HashMap::new();
    let mut used = HashSet::new();
    let mut budget = 200_000u32;
    match search(
        &order,
        0,
        &by_color,
        &mut map,
        &mut used,
        &va,
        &target,
        &mut budget,
    ) {
        Some(true) => IsoResult::Isomorphic,
        Some(false) => {
            IsoResult::Different("no blank node mapping makes the datasets equal".into())
        }
        None => IsoResult::TooHard,
    }
}

#[allow(clippy::too_many_arguments)]
fn search<'a>(
    order: &[(&'a str, u64)],
    i: usize,
    by_color: &HashMap<u64, Vec<&'a str>>,
    map: &mut HashMap<String, String>,
    used: &mut HashSet<&'a str>,
    va: &[&Statement],
    target: &HashSet<Statement>,
    budget: &mut u32,
) -> Option<bool> {
    if *budget == 0 {
        return None;
    }
    *budget -= 1;
    if i == order.len() {
        return Some(relabel_set(va, map) == *target);
    }
    let (b, c) = order[i];
    let cands = by_color.get(&c)?;
    for &cand in cands {
        if used.contains(cand) {
            continue;
        }
        map.insert(b.to_owned(), cand.to_owned());
        used.insert(cand);
        match search(order, i + 1, by_color, map, used, va, target, budget) {
            Some(true) => return Some(true),
            None => return None,
            Some(false) => {}
        }
        used.remove(cand);
        map.remove(b);
    }
    Some(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nquads::parse_document;

    #[test]
    fn detects_difference_in_bnode_structure() {
        let a = parse_document("_:x <p> _:y .\n_:y <p> _:x .\n").unwrap();
        let b = parse_document("_:m <p> _:n .\n_:n <p> _:n .\n").unwrap();
        assert!(!isomorphic(&a, &b).is_iso());
    }

    #[test]
    fn quoted_triples_with_bnodes() {
        let a = parse_document("<< _:a <p> _:b >> <q> _:a .\n").unwrap();
        let b = parse_document("<< _:z <p> _:y >> <q> _:z .\n").unwrap();
        let c = parse_document("<< _:z <p> _:y >> <q> _:y .\n").unwrap();
        assert!(isomorphic(&a, &b).is_iso());
        assert!(!isomorphic(&a, &c).is_iso());
    }

    #[test]
    fn triple_equals_default_graph_quad() {
        let a = parse_document("<s> <p> \"o\" .\n").unwrap();
        let b =
            parse_document("<s> <p> \"o\"^^<http://www.w3.org/2001/XMLSchema#string> .\n").unwrap();
        assert!(isomorphic(&a, &b).is_iso());
    }
}
