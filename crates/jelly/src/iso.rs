//! RDF dataset isomorphism for (generalized, RDF-star) statements.
//!
//! Used by the conformance harness and by `jelly rdf validate --compare-to-rdf-file`.
//! Blank nodes get colours by iterative refinement over their occurrences, and the
//! remaining ties are settled by a bounded backtracking search.
//!
//! [`OrderedIso`] is the stricter comparison the conformance suite defines ("ordered
//! RDF dataset isomorphism"): statement by statement in order, duplicates counted,
//! with one blank node mapping for all the frames compared.

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
    statements.iter().map(normalize_statement).collect()
}

/// One statement in the form the comparison uses: a quad (a triple's graph is the
/// default graph), each term as [`normalize_term`] gives it.
pub fn normalize_statement(s: &Statement) -> Statement {
    Statement {
        subject: normalize_term(&s.subject),
        predicate: normalize_term(&s.predicate),
        object: normalize_term(&s.object),
        graph: Some(s.graph.as_ref().map_or(Term::DefaultGraph, normalize_term)),
    }
}

/// One term in the form the comparison uses: `"x"^^xsd:string` as the simple literal
/// `"x"` (the same RDF term, and how encoders write it), and a language tag in lower
/// case (RDF compares tags ignoring case: `en-US` and `en-us` are one tag, and parsers
/// differ in which they keep), also inside quoted triples.
///
/// ```
/// use jelly::iso::normalize_term;
/// use jelly::{Literal, OwnedLiteralKind, Term};
/// let typed = Term::Literal(Literal { lex: "x".into(), kind: OwnedLiteralKind::Typed(jelly::term::XSD_STRING.into()) });
/// let simple = Term::Literal(Literal { lex: "x".into(), kind: OwnedLiteralKind::Simple });
/// assert_eq!(normalize_term(&typed), simple);
/// let lang = |t: &str| Term::Literal(Literal { lex: "x".into(), kind: OwnedLiteralKind::Lang(t.into()) });
/// assert_eq!(normalize_term(&lang("en-US")), normalize_term(&lang("en-us")));
/// assert_eq!(normalize_term(&Term::Iri("http://ex.org/a".into())), Term::Iri("http://ex.org/a".into()));
/// ```
pub fn normalize_term(t: &Term) -> Term {
    match t {
        Term::Literal(Literal {
            lex,
            kind: OwnedLiteralKind::Typed(dt),
        }) if dt == XSD_STRING => Term::Literal(Literal {
            lex: lex.clone(),
            kind: OwnedLiteralKind::Simple,
        }),
        Term::Literal(Literal {
            lex,
            kind: OwnedLiteralKind::Lang(tag),
        }) if tag.bytes().any(|b| b.is_ascii_uppercase()) => Term::Literal(Literal {
            lex: lex.clone(),
            kind: OwnedLiteralKind::Lang(tag.to_ascii_lowercase()),
        }),
        Term::Triple(tr) => Term::Triple(Box::new(Triple {
            subject: normalize_term(&tr.subject),
            predicate: normalize_term(&tr.predicate),
            object: normalize_term(&tr.object),
        })),
        t => t.clone(),
    }
}

/// Ordered isomorphism: the i-th statement of one list must equal the i-th of the
/// other, with blank nodes matched one to one by a mapping that holds across every
/// call on the same value (so one value per stream: the suite assumes one blank node
/// pool for the whole stream). `"x"^^xsd:string` equals `"x"`, and language tags
/// compare ignoring case.
///
/// ```
/// use jelly::iso::OrderedIso;
/// use jelly::{Statement, Term};
/// let st = |s: &str, o: &str| Statement {
///     subject: Term::BlankNode(s.into()),
///     predicate: Term::Iri("http://ex.org/p".into()),
///     object: Term::BlankNode(o.into()),
///     graph: None,
/// };
/// let mut iso = OrderedIso::default();
/// assert!(iso.compare(&[st("a", "b")], &[st("x", "y")]).is_ok());
/// // The mapping a→x, b→y carries over to the next frame.
/// assert!(iso.compare(&[st("b", "a")], &[st("x", "y")]).is_err());
/// // Order and duplicates count.
/// let mut iso = OrderedIso::default();
/// assert!(iso.compare(&[st("a", "a"), st("a", "a")], &[st("x", "x")]).is_err());
/// ```
#[derive(Debug, Default)]
pub struct OrderedIso {
    fwd: HashMap<String, String>,
    back: HashMap<String, String>,
}

impl OrderedIso {
    /// Compares `got` with `want` in order; the error names the first statement that
    /// differs, or the counts.
    pub fn compare(&mut self, got: &[Statement], want: &[Statement]) -> Result<(), String> {
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            self.compare_statement(i as u64, g, w)?;
        }
        if got.len() != want.len() {
            return Err(format!("{} statements, {} expected", got.len(), want.len()));
        }
        Ok(())
    }

    /// Compares statement `index` (from 0, for the message) of one side with the
    /// statement at the same place of the other, as [`OrderedIso::compare`] does each
    /// pair: for comparing streams statement by statement, without holding them. Only
    /// the blank node mapping is kept.
    ///
    /// ```
    /// use jelly::iso::OrderedIso;
    /// use jelly::{Statement, Term};
    /// let st = |s: &str| Statement {
    ///     subject: Term::BlankNode(s.into()),
    ///     predicate: Term::Iri("http://ex.org/p".into()),
    ///     object: Term::Iri("http://ex.org/o".into()),
    ///     graph: None,
    /// };
    /// let mut iso = OrderedIso::default();
    /// assert!(iso.compare_statement(0, &st("a"), &st("x")).is_ok());
    /// let e = iso.compare_statement(1, &st("a"), &st("y")).unwrap_err();
    /// assert!(e.starts_with("statement 1:"), "{e}");
    /// ```
    pub fn compare_statement(
        &mut self,
        index: u64,
        got: &Statement,
        want: &Statement,
    ) -> Result<(), String> {
        let (g, w) = (got, want);
        let gg = g.graph.as_ref().unwrap_or(&Term::DefaultGraph);
        let wg = w.graph.as_ref().unwrap_or(&Term::DefaultGraph);
        let same = self.term_eq(&g.subject, &w.subject)
            && self.term_eq(&g.predicate, &w.predicate)
            && self.term_eq(&g.object, &w.object)
            && self.term_eq(gg, wg);
        if !same {
            return Err(format!("statement {index}: got `{g}`, expected `{w}`"));
        }
        Ok(())
    }

    fn term_eq(&mut self, a: &Term, b: &Term) -> bool {
        match (a, b) {
            (Term::BlankNode(x), Term::BlankNode(y)) => match (self.fwd.get(x), self.back.get(y)) {
                (Some(m), Some(n)) => m == y && n == x,
                (None, None) => {
                    self.fwd.insert(x.clone(), y.clone());
                    self.back.insert(y.clone(), x.clone());
                    true
                }
                _ => false,
            },
            (Term::Triple(x), Term::Triple(y)) => {
                self.term_eq(&x.subject, &y.subject)
                    && self.term_eq(&x.predicate, &y.predicate)
                    && self.term_eq(&x.object, &y.object)
            }
            (Term::Literal(_), Term::Literal(_)) => normalize_term(a) == normalize_term(b),
            _ => a == b,
        }
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
    isomorphic_sides(a, b, ["the first list", "the second list"])
}

/// [`isomorphic`], with `names` for `a` and `b` in the reason of a difference, so that
/// it says which side holds what ("the stream has 4 distinct statements, the RDF file
/// 3", "only in the RDF file: …") rather than leaving the reader to guess.
///
/// ```
/// use jelly::iso::{IsoResult, isomorphic_sides};
/// use jelly::nquads::parse_document;
/// let a = parse_document("<http://a> <http://p> <http://b> .\n").unwrap();
/// let b = parse_document("<http://a> <http://p> <http://c> .\n").unwrap();
/// let IsoResult::Different(why) = isomorphic_sides(&a, &b, ["the stream", "the file"]) else {
///     panic!("different statements found isomorphic");
/// };
/// assert_eq!(why, "only in the stream: <http://a> <http://p> <http://b> .");
/// ```
pub fn isomorphic_sides(a: &[Statement], b: &[Statement], names: [&str; 2]) -> IsoResult {
    let [name_a, name_b] = names;
    let na = normalize(a);
    let nb = normalize(b);
    // Same statements with the same labels: the identity mapping already works.
    if na == nb {
        return IsoResult::Isomorphic;
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
    // One ground statement that only one side holds, to show where they differ.
    let missing = || {
        ground_a
            .difference(&ground_b)
            .next()
            .map(|s| (name_a, *s))
            .or_else(|| ground_b.difference(&ground_a).next().map(|s| (name_b, *s)))
    };
    if na.len() != nb.len() {
        let counts = format!(
            "{name_a} has {} distinct statements, {name_b} {}",
            na.len(),
            nb.len()
        );
        return IsoResult::Different(match missing() {
            Some((side, s)) => format!("{counts}; only in {side}: {s}"),
            None => counts,
        });
    }
    if ground_a != ground_b {
        return IsoResult::Different(match missing() {
            Some((side, s)) => format!("only in {side}: {s}"),
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
    for v in by_color.values_mut() {
        v.sort_unstable();
    }
    let mut order: Vec<(&str, u64)> = ca.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    order.sort_by_key(|(k, c)| (by_color.get(c).map_or(0, Vec::len), *k));
    match search(&order, &by_color, &va, &target, 2_000_000) {
        Some(true) => IsoResult::Isomorphic,
        Some(false) => {
            IsoResult::Different("no blank node mapping makes the datasets equal".into())
        }
        None => IsoResult::TooHard,
    }
}

/// Depth-first search for a blank node mapping, with an explicit stack (no recursion,
/// so any number of blank nodes is fine). After each assignment, every statement whose
/// blank nodes are now all mapped must be in `target`, which prunes wrong branches at
/// once. `budget` bounds the number of candidate tries; `None` means it ran out.
fn search(
    order: &[(&str, u64)],
    by_color: &HashMap<u64, Vec<&str>>,
    va: &[&Statement],
    target: &HashSet<Statement>,
    mut budget: u64,
) -> Option<bool> {
    let n = order.len();
    let step_of: HashMap<&str, usize> = order
        .iter()
        .enumerate()
        .map(|(i, (b, _))| (*b, i))
        .collect();
    // completes[i]: the statements whose last-mapped blank node is order[i].
    let mut completes: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (si, s) in va.iter().enumerate() {
        let mut bn = BTreeSet::new();
        for t in terms(s) {
            collect_bnodes(t, &mut bn);
        }
        if let Some(last) = bn.iter().filter_map(|b| step_of.get(b).copied()).max() {
            completes[last].push(si);
        }
    }
    let empty: Vec<&str> = Vec::new();
    let cands: Vec<&Vec<&str>> = order
        .iter()
        .map(|(_, c)| by_color.get(c).unwrap_or(&empty))
        .collect();
    let mut next_choice = vec![0usize; n];
    let mut chosen: Vec<Option<&str>> = vec![None; n];
    let mut map: HashMap<String, String> = HashMap::with_capacity(n);
    let mut used: HashSet<&str> = HashSet::with_capacity(n);
    let mut i = 0;
    while i < n {
        let mut placed = false;
        while next_choice[i] < cands[i].len() {
            if budget == 0 {
                return None;
            }
            budget -= 1;
            let c = cands[i][next_choice[i]];
            next_choice[i] += 1;
            if used.contains(c) {
                continue;
            }
            map.insert(order[i].0.to_owned(), c.to_owned());
            let consistent = completes[i]
                .iter()
                .all(|&si| target.contains(&relabel_statement(va[si], &map)));
            if consistent {
                used.insert(c);
                chosen[i] = Some(c);
                placed = true;
                break;
            }
            map.remove(order[i].0);
        }
        if placed {
            i += 1;
            if i < n {
                next_choice[i] = 0;
            }
            continue;
        }
        // Exhausted the candidates of step i: undo step i - 1 and try its next one.
        if i == 0 {
            return Some(false);
        }
        i -= 1;
        if let Some(c) = chosen[i].take() {
            used.remove(c);
        }
        map.remove(order[i].0);
    }
    // Every statement was checked when its last blank node was mapped, and the sets
    // have equal sizes, so the mapping is a bijection between them.
    Some(true)
}

fn relabel_statement(s: &Statement, map: &HashMap<String, String>) -> Statement {
    Statement {
        subject: relabel(&s.subject, map),
        predicate: relabel(&s.predicate, map),
        object: relabel(&s.object, map),
        graph: s.graph.as_ref().map(|g| relabel(g, map)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nquads::parse_document;

    /// A side with a statement more is told by its counts and by the statement.
    #[test]
    fn a_missing_statement_is_named_beside_the_counts() {
        let a = parse_document(
            "<http://a> <http://p> <http://b> .\n<http://a> <http://p> <http://c> .\n",
        )
        .unwrap();
        let b = parse_document("<http://a> <http://p> <http://b> .\n").unwrap();
        let IsoResult::Different(why) = isomorphic_sides(&a, &b, ["the stream", "the file"]) else {
            panic!("a statement more found isomorphic");
        };
        assert_eq!(
            why,
            "the stream has 2 distinct statements, the file 1; only in the stream: \
             <http://a> <http://p> <http://c> ."
        );
    }

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
    fn many_blank_nodes_need_no_deep_recursion() {
        let text: String = (0..20_000)
            .map(|i| format!("_:b{i} <http://ex.org/p> \"{i}\" .\n"))
            .collect();
        let a = parse_document(&text).unwrap();
        let relabelled: String = (0..20_000)
            .map(|i| format!("_:x{i} <http://ex.org/p> \"{i}\" .\n"))
            .collect();
        let b = parse_document(&relabelled).unwrap();
        assert!(isomorphic(&a, &b).is_iso());
        // One changed literal breaks it.
        let changed = relabelled.replace("\"19999\"", "\"-1\"");
        assert!(!isomorphic(&a, &parse_document(&changed).unwrap()).is_iso());
    }

    #[test]
    fn symmetric_structures_are_matched_by_backtracking() {
        // Two 3-cycles vs one 6-cycle: same degrees everywhere, colour refinement cannot
        // tell them apart, the search must.
        let two = "_:a <p> _:b .\n_:b <p> _:c .\n_:c <p> _:a .\n_:d <p> _:e .\n_:e <p> _:f .\n_:f <p> _:d .\n";
        let six = "_:1 <p> _:2 .\n_:2 <p> _:3 .\n_:3 <p> _:4 .\n_:4 <p> _:5 .\n_:5 <p> _:6 .\n_:6 <p> _:1 .\n";
        let two_again = "_:u <p> _:v .\n_:v <p> _:w .\n_:w <p> _:u .\n_:x <p> _:y .\n_:y <p> _:z .\n_:z <p> _:x .\n";
        let a = parse_document(two).unwrap();
        assert!(!isomorphic(&a, &parse_document(six).unwrap()).is_iso());
        assert!(isomorphic(&a, &parse_document(two_again).unwrap()).is_iso());
    }

    #[test]
    fn triple_equals_default_graph_quad() {
        let a = parse_document("<s> <p> \"o\" .\n").unwrap();
        let b =
            parse_document("<s> <p> \"o\"^^<http://www.w3.org/2001/XMLSchema#string> .\n").unwrap();
        assert!(isomorphic(&a, &b).is_iso());
    }
}
