//! The text that tells `ask` filters apart in fan-out group keys.
//!
//! Why not the query as spargebra prints it: the parser wraps the pattern of a query
//! in a projection onto all its variables (its `SELECT *`), and the printer writes such
//! a projection below the query's own as a nested `SELECT`, so a query printed and
//! parsed again has one more level each time: a filter and its printed form, which
//! ask the same, had different keys and did not share a group.
//!
//! Why not even the same text printed twice: the parser names the variable of each
//! aggregate (`COUNT(*)`…) at random, so a query with one had a new key at each parse
//! and no two of its subscribers shared a group.
//!
//! [`ask_key`] prints the query without the projections that keep every variable of
//! what they project, which change no solution, along the chain of solution modifiers
//! where the printer nests them (when what is left is one `SELECT`: between nested
//! ones, they keep the modifiers of each apart), and names the parser's variables in
//! the order they are printed, with names the query uses nowhere else. A query and
//! each of its printed forms have one key; queries that differ otherwise keep
//! different keys (nothing else is rewritten, and a consistent renaming of variables
//! changes no ASK answer), so no two filters that could answer differently share a
//! group.

use std::collections::{HashMap, HashSet};

use spargebra::Query;
use spargebra::algebra::GraphPattern;
use spargebra::term::Variable;

/// The key text of `query`, parsed from `text`, whose `Debug` form is `debug` (an ASK
/// query; any other is printed as it is).
pub(super) fn ask_key(text: &str, query: &Query, debug: &str) -> String {
    let printed = match query {
        Query::Ask {
            dataset,
            pattern,
            base_iri,
        } => Query::Ask {
            dataset: dataset.clone(),
            pattern: without_identity_projections(pattern),
            base_iri: base_iri.clone(),
        }
        .to_string(),
        other => other.to_string(),
    };
    rename_made_up(&printed, &made_up_variables(text, debug))
}

/// The names of the variables of `debug` (a parsed query's `Debug` form, whose strings
/// are escaped) that `text`, the query as written, does not name: the parser made them.
/// One that `text` may name (as a part of a longer name) is left out, which keeps it as
/// it is, never merging it with another.
fn made_up_variables<'a>(text: &str, debug: &'a str) -> HashSet<&'a str> {
    const VARIABLE: &str = "Variable { name: \"";
    debug
        .match_indices(VARIABLE)
        .filter_map(|(at, _)| {
            let rest = &debug[at + VARIABLE.len()..];
            rest.find('"').map(|end| &rest[..end])
        })
        .filter(|name| !text.contains(&format!("?{name}")) && !text.contains(&format!("${name}")))
        .collect()
}

/// `printed` with each variable of `made_up` named after the order it first appears in,
/// with a prefix that `printed` holds nowhere.
fn rename_made_up(printed: &str, made_up: &HashSet<&str>) -> String {
    if made_up.is_empty() {
        return printed.to_string();
    }
    let mut prefix = String::from("m_");
    while printed.contains(&prefix) {
        prefix.push('_');
    }
    let mut names: HashMap<&str, usize> = HashMap::new();
    let mut out = String::with_capacity(printed.len());
    let mut rest = printed;
    while let Some(at) = rest.find('?') {
        out.push_str(&rest[..=at]);
        rest = &rest[at + 1..];
        let end = rest
            .char_indices()
            .find(|&(_, c)| !is_name_char(c))
            .map_or(rest.len(), |(i, _)| i);
        let name = &rest[..end];
        if made_up.contains(name) {
            let n = names.len();
            let n = *names.entry(name).or_insert(n);
            out.push_str(&format!("{prefix}{n}"));
            rest = &rest[end..];
        }
    }
    out.push_str(rest);
    out
}

/// Whether `c` may stand in a SPARQL variable name (`VARNAME`).
fn is_name_char(c: char) -> bool {
    c.is_alphanumeric()
        || c == '_'
        || c == '\u{B7}'
        || ('\u{300}'..='\u{36F}').contains(&c)
        || ('\u{203F}'..='\u{2040}').contains(&c)
}

/// `pattern` without the projections that keep all the variables in scope of what
/// they project, down through projections and solution modifiers, if what is left is
/// one `SELECT`; else `pattern` as it is.
///
/// Why only then: the printer writes the chain of modifiers down to a second projection
/// as one `SELECT`, keeping one of each modifier. Those projections are what keep the
/// modifiers of nested `SELECT`s apart (`{ SELECT * { … } LIMIT 1 } OFFSET 1`, never
/// true, would print as `LIMIT 1`).
fn without_identity_projections(pattern: &GraphPattern) -> GraphPattern {
    if is_one_select(pattern) {
        strip_identity_projections(pattern)
    } else {
        pattern.clone()
    }
}

/// Whether the chain of modifiers and projections from `pattern` down, identity
/// projections left out, is in the order of one `SELECT`: `LIMIT`/`OFFSET`, then
/// `DISTINCT` or `REDUCED`, then the projection, then `ORDER BY`, each at most once.
fn is_one_select(mut pattern: &GraphPattern) -> bool {
    let mut last = 0;
    loop {
        let (rank, inner) = match pattern {
            GraphPattern::Project { inner, variables } if keeps_all(inner, variables) => {
                pattern = inner;
                continue;
            }
            GraphPattern::Slice { inner, .. } => (1, inner),
            GraphPattern::Distinct { inner } | GraphPattern::Reduced { inner } => (2, inner),
            GraphPattern::Project { inner, .. } => (3, inner),
            GraphPattern::OrderBy { inner, .. } => (4, inner),
            _ => return true,
        };
        if rank <= last {
            return false;
        }
        last = rank;
        pattern = inner;
    }
}

/// `pattern` without the identity projections of its chain of modifiers.
fn strip_identity_projections(pattern: &GraphPattern) -> GraphPattern {
    let inner = |p: &GraphPattern| Box::new(strip_identity_projections(p));
    match pattern {
        GraphPattern::Project {
            inner: p,
            variables,
        } if keeps_all(p, variables) => strip_identity_projections(p),
        GraphPattern::Project {
            inner: p,
            variables,
        } => GraphPattern::Project {
            inner: inner(p),
            variables: variables.clone(),
        },
        GraphPattern::Distinct { inner: p } => GraphPattern::Distinct { inner: inner(p) },
        GraphPattern::Reduced { inner: p } => GraphPattern::Reduced { inner: inner(p) },
        GraphPattern::Slice {
            inner: p,
            start,
            length,
        } => GraphPattern::Slice {
            inner: inner(p),
            start: *start,
            length: *length,
        },
        GraphPattern::OrderBy {
            inner: p,
            expression,
        } => GraphPattern::OrderBy {
            inner: inner(p),
            expression: expression.clone(),
        },
        other => other.clone(),
    }
}

/// Whether projecting `pattern` onto `variables` keeps each variable it can bind.
fn keeps_all(pattern: &GraphPattern, variables: &[Variable]) -> bool {
    let mut all = true;
    pattern.on_in_scope_variable(|v| all &= variables.contains(v));
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use spargebra::SparqlParser;

    fn key(text: &str) -> String {
        let query = SparqlParser::new().parse_query(text).unwrap();
        ask_key(text, &query, &format!("{query:?}"))
    }

    /// A query, its form as spargebra prints it, and that form printed again have
    /// one key.
    #[test]
    fn printed_forms_have_the_key_of_the_query() {
        for q in [
            "ASK { ?s ?p ?o }",
            "ASK { ?s ?p ?o } LIMIT 1",
            "ASK { ?s ?p ?o } OFFSET 1",
            "ASK { ?s ?p ?o } ORDER BY ?s",
            "ASK { SELECT ?s WHERE { ?s ?p ?o } }",
            "ASK { SELECT DISTINCT ?s WHERE { ?s ?p ?o } LIMIT 2 }",
            "ASK { SELECT (1 AS ?x) WHERE { ?s ?p ?o } }",
            "ASK { ?s ?p ?o FILTER(?o > 1) BIND(1 AS ?x) }",
            "ASK FROM <http://g> { ?s ?p ?o }",
            "BASE <http://b/> ASK { <s> ?p ?o }",
        ] {
            let mut text = q.to_string();
            for round in 0..3 {
                text = SparqlParser::new().parse_query(&text).unwrap().to_string();
                assert_eq!(key(&text), key(q), "{q}, printed {} times", round + 1);
            }
            // The key is a query with that key.
            assert_eq!(key(&key(q)), key(q), "{q}");
        }
    }

    /// The parser's random names for aggregates do not make a query's key differ
    /// from one parse to the next. (Their printed forms do not share it: each print
    /// and parse adds a renaming of the aggregate's variable.)
    #[test]
    fn aggregates_have_one_key() {
        for (q, spaced) in [
            (
                "ASK { { SELECT (COUNT(*) AS ?c) WHERE { ?s ?p ?o } } FILTER(?c > 2) }",
                "ask{{select(count(*)as ?c){?s ?p ?o}}filter(?c>2)}",
            ),
            (
                "ASK { { SELECT ?s (COUNT(*) AS ?c) WHERE { ?s ?p ?o } GROUP BY ?s HAVING (COUNT(*) > 1 && COUNT(?o) < 3) } FILTER(?c > 2) }",
                "ASK {{SELECT ?s (COUNT(*) AS ?c) {?s ?p ?o}\nGROUP BY ?s\nHAVING (COUNT(*)>1 && COUNT(?o)<3)}\nFILTER(?c>2)}",
            ),
        ] {
            assert_eq!(key(q), key(q), "{q}");
            assert_eq!(key(spaced), key(q), "{q}");
        }
    }

    /// Nested `SELECT`s keep their own modifiers in the key: each pair answers
    /// differently (the first is never true; the DISTINCT ones differ on duplicates).
    #[test]
    fn nested_selects_keep_their_own_modifiers() {
        for (nested, flat) in [
            (
                "ASK { SELECT * { SELECT * { ?s ?p ?o } LIMIT 1 } OFFSET 1 }",
                "ASK { ?s ?p ?o } LIMIT 1",
            ),
            (
                "ASK { SELECT ?s { SELECT * { ?s ?p ?o } LIMIT 1 } OFFSET 1 }",
                "ASK { SELECT ?s { ?s ?p ?o } LIMIT 1 }",
            ),
            (
                "ASK { SELECT DISTINCT * { SELECT * { {?s ?p ?o} UNION {?s ?p ?o} } OFFSET 1 } }",
                "ASK { SELECT DISTINCT * { {?s ?p ?o} UNION {?s ?p ?o} } OFFSET 1 }",
            ),
        ] {
            assert_ne!(key(nested), key(flat), "{nested} / {flat}");
        }
    }

    /// Queries that can answer differently keep different keys.
    #[test]
    fn different_patterns_keep_different_keys() {
        let queries = [
            "ASK { ?s ?p ?o }",
            "ASK { ?s ?p ?o } LIMIT 1",
            "ASK { ?s ?p ?o } OFFSET 1",
            "ASK { SELECT ?s WHERE { ?s ?p ?o } OFFSET 1 }",
            "ASK { ?s ?p ?s }",
            "ASK { ?s ?p ?o FILTER(?o > 1) }",
            "ASK { { SELECT ?s WHERE { ?s ?p ?o } } ?s ?q ?o }",
            "ASK { { SELECT ?s ?o WHERE { ?s ?p ?o } } ?s ?q ?o }",
            "ASK { { SELECT ?s (COUNT(*) AS ?c) WHERE { ?s ?p ?o } GROUP BY ?s HAVING (COUNT(*) > 1) } FILTER(?c > 2) }",
            "ASK { { SELECT ?s (COUNT(*) AS ?c) WHERE { ?s ?p ?o } GROUP BY ?s HAVING (COUNT(*) > 2) } FILTER(?c > 2) }",
            "ASK { { SELECT ?s (COUNT(*) AS ?c) WHERE { ?s ?p ?o } GROUP BY ?s HAVING (COUNT(?o) > 1) } FILTER(?c > 2) }",
            "ASK { { SELECT ?s (COUNT(*) AS ?c) WHERE { ?s ?p ?o } GROUP BY ?s HAVING (COUNT(*) > 1 && COUNT(?o) < 3) } FILTER(?c > 2) }",
            "ASK { { SELECT ?s (COUNT(*) AS ?c) WHERE { ?s ?p ?o } GROUP BY ?s HAVING (COUNT(?o) > 1 && COUNT(*) < 3) } FILTER(?c > 2) }",
            // A variable named like the parser's ones once renamed.
            "ASK { { SELECT ?s (COUNT(*) AS ?c) WHERE { ?s ?p ?m_0 } GROUP BY ?s HAVING (COUNT(*) > 1) } FILTER(?c > 2) }",
        ];
        for (i, a) in queries.iter().enumerate() {
            for b in &queries[i + 1..] {
                assert_ne!(key(a), key(b), "{a} / {b}");
            }
        }
    }
}
