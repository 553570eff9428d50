//! A static bound on the rows an ASK query builds without reading the item.
//!
//! The work budget counts statement visits and term conversions; joining rows costs
//! neither. Parts of a query that read nothing from the item (`VALUES`, an aggregate
//! without `GROUP BY`, a `BIND` of constants) may stand apart from the rest (their
//! join is no cross product of the item with itself), but their own rows multiply
//! for free: three `VALUES` tables of 2,700 rows fit in 16 KiB and join into 2·10^10
//! rows, hours of CPU on every item. spareval joins by hashing (no nested loops;
//! sparopt's `sep-0006` is off), and its optimizer flattens a group's joins and
//! starts from the smallest part, usually a `VALUES` table, joining next whatever
//! shares a variable with what it has; so tables sharing a variable are joined
//! together before the item's patterns constrain them.
//!
//! [`most_unread_rows`] bounds, once when the filter is built, the rows of every
//! part that reads nothing (`VALUES`: its rows; an aggregate without `GROUP BY`: 1;
//! a join: the product; `UNION`: the sum; `LIMIT`: at most its length), and in each
//! group of joins the product of its parts that read nothing. A `VALUES` table
//! counts 1 row there instead of its rows when every item row can match at most one
//! of its rows: it has no `UNDEF`, its rows differ on the variables a triple pattern
//! of the group binds, and it shares no variable with another part that reads
//! nothing (which the optimizer could join with it first). A query whose bound is
//! over [`MAX_UNREAD_ROWS`] is refused.
//!
//! Not bounded here: the rows of a join of the item's own patterns (a hash join of
//! two patterns sharing a variable gives up to `N²` rows for `2N` visits), and
//! those rows times the at most [`MAX_UNREAD_ROWS`] rows a free part may add to each:
//! they depend on the item, and are bounded on each item before evaluating (module
//! `row_bound`). This static bound stays because it refuses, with a clear error when
//! the filter is built, queries that would be out of budget on every item.

use std::collections::HashSet;

use spargebra::algebra::{AggregateExpression, Expression, GraphPattern, OrderExpression};

use super::{children, operands, reads_item};

/// Most rows that the parts of an ASK query reading nothing from the item may
/// produce together, in one join group or one such part. One `VALUES` table fits
/// below it whatever it holds (16 KiB of query writes at most 8,192 rows of one
/// character and its space), so only joins of tables are limited: 100 × 100 pass,
/// 2,700³ does not. Joining 10,000 rows takes about a millisecond.
pub const MAX_UNREAD_ROWS: u64 = 10_000;

/// The largest number of rows a part of `p` that reads nothing from the item may
/// produce, or one group of joins of such parts (see the module docs); infinite if
/// it overflows.
pub fn most_unread_rows(p: &GraphPattern) -> f64 {
    let mut worst = 0.0;
    walk(p, &mut worst);
    worst
}

/// Records in `worst` the bounds of `p` and of every pattern inside it (`EXISTS`
/// patterns included).
fn walk(p: &GraphPattern, worst: &mut f64) {
    if !reads_item(p) {
        *worst = f64::max(*worst, rows(p));
    }
    if let GraphPattern::Join { .. } = p {
        let mut parts = Vec::new();
        join_parts(p, &mut parts);
        *worst = f64::max(*worst, group_product(&parts));
    }
    for e in expressions(p) {
        walk_expression(e, worst);
    }
    for c in children(p) {
        walk(c, worst);
    }
}

fn walk_expression(e: &Expression, worst: &mut f64) {
    if let Expression::Exists(p) = e {
        walk(p, worst);
    }
    for x in operands(e) {
        walk_expression(x, worst);
    }
}

/// The expressions written directly in `p` (where an `EXISTS` may hide), those of
/// `ORDER BY` and aggregates included.
fn expressions(p: &GraphPattern) -> Vec<&Expression> {
    match p {
        GraphPattern::Filter { expr, .. } => vec![expr],
        GraphPattern::Extend { expression, .. } => vec![expression],
        GraphPattern::LeftJoin {
            expression: Some(e),
            ..
        } => vec![e],
        GraphPattern::OrderBy { expression, .. } => expression
            .iter()
            .map(|o| match o {
                OrderExpression::Asc(e) | OrderExpression::Desc(e) => e,
            })
            .collect(),
        GraphPattern::Group { aggregates, .. } => aggregates
            .iter()
            .filter_map(|(_, a)| match a {
                AggregateExpression::FunctionCall { expr, .. } => Some(expr),
                AggregateExpression::CountSolutions { .. } => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// The operands of a group of nested joins, which the optimizer reorders freely.
fn join_parts<'a>(p: &'a GraphPattern, out: &mut Vec<&'a GraphPattern>) {
    match p {
        GraphPattern::Join { left, right } => {
            join_parts(left, out);
            join_parts(right, out);
        }
        _ => out.push(p),
    }
}

/// The product, over the parts of a join group that read nothing, of the rows each
/// may add to a row of the rest.
fn group_product(parts: &[&GraphPattern]) -> f64 {
    let item_bound: HashSet<&str> = parts
        .iter()
        .flat_map(|p| certainly_bound(p))
        .collect::<HashSet<_>>();
    let unread: Vec<&GraphPattern> = parts.iter().copied().filter(|p| !reads_item(p)).collect();
    let mut product = 1.0;
    for (i, part) in unread.iter().enumerate() {
        let others: HashSet<&str> = unread
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .flat_map(|(_, p)| in_scope(p))
            .collect();
        let matched_once = match part {
            GraphPattern::Values {
                variables,
                bindings,
            } => {
                let keys: Vec<usize> = (0..variables.len())
                    .filter(|&k| item_bound.contains(variables[k].as_str()))
                    .collect();
                let shares_with_free = variables.iter().any(|v| others.contains(v.as_str()));
                let all_defined = bindings.iter().all(|row| row.iter().all(Option::is_some));
                let distinct = {
                    let mut seen = HashSet::new();
                    bindings.iter().all(|row| {
                        let key: Vec<String> = keys
                            .iter()
                            .map(|&k| row.get(k).and_then(Option::as_ref).map(|t| t.to_string()))
                            .map(Option::unwrap_or_default)
                            .collect();
                        seen.insert(key)
                    })
                };
                !keys.is_empty() && !shares_with_free && all_defined && distinct
            }
            _ => false,
        };
        if !matched_once {
            product *= rows(part);
        }
    }
    product
}

/// Variables in scope of `p`.
fn in_scope(p: &GraphPattern) -> Vec<&str> {
    let mut vars = Vec::new();
    p.on_in_scope_variable(|v| vars.push(v.as_str()));
    vars
}

/// Variables that every row of `p` binds to a term of the item: those of its triple
/// patterns (through filters), which are a BGP's or a path's variables in scope.
fn certainly_bound(p: &GraphPattern) -> Vec<&str> {
    match p {
        GraphPattern::Bgp { .. } | GraphPattern::Path { .. } => in_scope(p),
        GraphPattern::Filter { inner, .. } => certainly_bound(inner),
        _ => Vec::new(),
    }
}

/// A bound of the rows of `p`, a pattern that reads nothing from the item.
fn rows(p: &GraphPattern) -> f64 {
    match p {
        GraphPattern::Values { bindings, .. } => bindings.len() as f64,
        GraphPattern::Group { variables, .. } if variables.is_empty() => 1.0,
        GraphPattern::Join { left, right } => rows(left) * rows(right),
        GraphPattern::LeftJoin { left, right, .. } => rows(left) * rows(right).max(1.0),
        GraphPattern::Union { left, right } => rows(left) + rows(right),
        GraphPattern::Slice {
            inner,
            length: Some(len),
            ..
        } => rows(inner).min(*len as f64),
        // An empty group: one empty row. Patterns that read the item are not asked
        // about; one row keeps the product an upper bound of the other parts.
        GraphPattern::Bgp { .. } | GraphPattern::Path { .. } => 1.0,
        GraphPattern::Minus { left, .. } => rows(left),
        GraphPattern::Filter { inner, .. }
        | GraphPattern::Graph { inner, .. }
        | GraphPattern::Extend { inner, .. }
        | GraphPattern::OrderBy { inner, .. }
        | GraphPattern::Project { inner, .. }
        | GraphPattern::Distinct { inner }
        | GraphPattern::Reduced { inner }
        | GraphPattern::Slice { inner, .. }
        | GraphPattern::Group { inner, .. }
        | GraphPattern::Service { inner, .. } => rows(inner),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use spargebra::{Query, SparqlParser};

    fn bound(query: &str) -> f64 {
        let Ok(Query::Ask { pattern, .. }) = SparqlParser::new().parse_query(query) else {
            panic!("not an ASK query: {query}");
        };
        most_unread_rows(&pattern)
    }

    fn values(var: &str, n: usize) -> String {
        let rows: Vec<String> = (0..n).map(|i| i.to_string()).collect();
        format!("VALUES ?{var} {{ {} }}", rows.join(" "))
    }

    #[test]
    fn tables_that_read_nothing_multiply() {
        let q = format!(
            "ASK {{ {} {} {} }}",
            values("a", 30),
            values("b", 20),
            values("c", 10)
        );
        assert_eq!(bound(&q), 6000.0);
        // Beside the item's patterns, sharing nothing with them, they multiply too.
        let q = format!("ASK {{ ?s ?p ?o {} {} }}", values("a", 30), values("b", 20));
        assert_eq!(bound(&q), 600.0);
        // UNION adds, an aggregate without GROUP BY is one row (its input counts).
        let q = format!(
            "ASK {{ {{ {} }} UNION {{ {} }} {{ SELECT (COUNT(*) AS ?n) WHERE {{ {} {} }} }} }}",
            values("a", 30),
            values("a", 20),
            values("b", 7),
            values("c", 9)
        );
        assert_eq!(bound(&q), 63.0);
        // Inside an EXISTS.
        let q = format!(
            "ASK {{ ?s ?p ?o FILTER EXISTS {{ {} {} }} }}",
            values("a", 30),
            values("b", 20)
        );
        assert_eq!(bound(&q), 600.0);
        // Inside an EXISTS in an aggregate, or in ORDER BY: evaluated on every row.
        let tables = format!("{} {}", values("a", 30), values("b", 20));
        let q = format!(
            "ASK {{ {{ SELECT (SUM(IF(EXISTS {{ {tables} }}, 1, 0)) AS ?n) \
             WHERE {{ ?s ?p ?o }} }} }}"
        );
        assert_eq!(bound(&q), 600.0);
        let q = format!(
            "ASK {{ {{ SELECT ?s WHERE {{ ?s ?p ?o }} ORDER BY (EXISTS {{ {tables} }}) \
             LIMIT 1 }} }}"
        );
        assert_eq!(bound(&q), 600.0);
    }

    #[test]
    fn tables_matched_by_the_item_count_once() {
        // Each statement matches at most one row of each table.
        let q = format!(
            "ASK {{ ?s ?a ?b {} {} }}",
            values("a", 300),
            values("b", 200)
        );
        assert_eq!(bound(&q), 300.0);
        // Repeated values, or UNDEF, match a statement several times.
        let q = "ASK { ?s ?p ?a VALUES ?a { 1 1 1 } VALUES ?b { 1 2 } }";
        assert_eq!(bound(q), 6.0);
        let q = "ASK { ?s ?p ?a VALUES (?a ?b) { (1 2) (UNDEF 3) } VALUES ?c { 1 2 } }";
        assert_eq!(bound(q), 4.0);
        // Two tables sharing a variable may be joined together first.
        let q = format!(
            "ASK {{ ?s ?p ?a {} {} }}",
            values("a", 300),
            values("a", 200)
        );
        assert_eq!(bound(&q), 60_000.0);
    }
}
