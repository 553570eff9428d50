//! A static bound on the length of the strings an ASK evaluation can build.
//!
//! The work budget counts statement visits and term conversions, but not the work
//! inside one function call: `REPLACE(?o, ".", "$0$0$0$0")` reads `?o` once and
//! returns four times as many bytes, and ten of them nested turn a 10-byte literal
//! into 10 MB (gigabytes at fourteen) inside a single call that no cancellation can
//! stop. So, before evaluating, the filter bounds every string the query can build,
//! as a function of two figures of the item: `L`, the length of its longest term
//! (literal value with its tag or datatype, IRI, blank node label, quoted triple),
//! and `N`, its number of statements (which bounds the rows fed to `GROUP_CONCAT`).
//!
//! [`StringBound::of`] walks the query's algebra once, when the filter is built, and
//! compiles the bound of each expression into a small arithmetic program (a DAG:
//! a variable bound by `BIND` shares the node of its expression);
//! [`StringBound::longest`] runs it on an item's `L` and `N`. The rules, in bytes,
//! for an argument bound `n`:
//!
//! - a constant: its length; a variable: the bound of the expressions that bind it
//!   (`BIND`, `VALUES`, aggregates; the largest if bound several ways), else `L`;
//! - `CONCAT` and other functions of strings (`SUBSTR`, `STRBEFORE`, `STRLANG`,
//!   `TRIPLE`, custom functions…): the sum of their arguments (plus a small constant
//!   for functions that add text of their own, such as `IRI` resolving against the
//!   base, or casts);
//! - `REPLACE(x, pattern, r)`: a regex finds at most `n` non-empty matches and `n + 1`
//!   empty ones; each match is replaced by the bytes of `r`, every `$` reference of
//!   which inserts at most the matched text (the matches' texts sum to at most `n`);
//!   the text between matches and the matches sum to `n`. With a constant `r` of `k`
//!   references (`$1`, `$name`, `${name}`) and `c` other bytes:
//!   `(2n + 1)·c + max(1, k)·n` (so `"$0$0"` doubles the text, exactly); with a
//!   computed `r` of bound `m` (at most `m/2` references):
//!   `(2n + 1)·m + (m/2)·n + n`;
//! - `ENCODE_FOR_URI`: `3n` (one `%XX` per UTF-8 byte); `UCASE`, `LCASE`: `3n`
//!   (Unicode case mappings grow a character at most threefold in UTF-8);
//! - `IF`, `COALESCE`: the largest branch; numbers, booleans, dates, hashes, UUIDs: a
//!   small constant ([`SMALL_VALUE_BYTES`]);
//! - `GROUP_CONCAT(x; separator=s)`: rows × (`n` + `|s|`), rows bounded by the group's
//!   pattern (`N` to the power of its triple patterns, `VALUES` rows, …); `MIN`,
//!   `MAX`, `SAMPLE`: `n`; `COUNT`, `SUM`, `AVG`: small.
//!
//! An item on which some built string may exceed [`MAX_ASK_STRING_BYTES`] is out of
//! budget (not delivered, as when the work budget runs out), and a query over it for
//! one-byte terms on a one-statement item is refused when the filter is built. The
//! bound is linear in `L` for queries without `REPLACE` by a computed replacement or
//! `GROUP_CONCAT`, with the number of `CONCAT` arguments (or the growth factor of the
//! functions above) as its slope: any query that copies or concatenates up to four
//! terms passes on items whose terms are at most 16 MiB (the default largest item).

use std::collections::HashMap;

use spargebra::algebra::{AggregateExpression, AggregateFunction, Expression, Function};
use spargebra::algebra::{GraphPattern, OrderExpression};
use spargebra::term::{GroundTerm, NamedNodePattern};

use super::operands;

/// Longest string, in bytes, an ASK evaluation may build on an item: four times the
/// default largest item (16 MiB), so that copying and concatenating up to four of an
/// item's terms always passes, while a query that multiplies text cannot take the
/// server's memory.
pub const MAX_ASK_STRING_BYTES: u64 = 64 << 20;

/// Bound of a value that is not text taken from anywhere: a number, a boolean, a
/// date, a hash, a UUID, or the text a function adds of its own (a datatype IRI, a
/// generated blank node label).
pub const SMALL_VALUE_BYTES: f64 = 128.0;

/// A node of the bound program; operands are earlier nodes.
#[derive(Debug, Clone)]
enum Op {
    Const(f64),
    /// `L`: the length of the item's longest term.
    LongestTerm,
    /// `N`: the number of statements of the item.
    Statements,
    /// `constant + Σ factor · operand`.
    Affine(f64, Vec<(f64, usize)>),
    Product(usize, usize),
    Max(Vec<usize>),
    Min(usize, usize),
}

#[derive(Debug, Clone)]
struct Node {
    op: Op,
    /// The function whose result this node bounds: checked against the cap.
    built_by: Option<String>,
}

/// The strings an ASK query can build, as a function of the item (see the module
/// docs).
#[derive(Debug, Clone)]
pub struct StringBound {
    nodes: Vec<Node>,
}

/// The longest string a query may build on an item, and what builds it.
#[derive(Debug, Clone, PartialEq)]
pub struct Longest {
    /// Bound in bytes (infinite if it overflows).
    pub bytes: f64,
    /// The function that builds it (`REPLACE`, `GROUP_CONCAT`…), if any.
    pub built_by: Option<String>,
}

/// Variable name → node bounding its values.
type Env = HashMap<String, usize>;

impl StringBound {
    /// The bound program of the ASK query whose pattern is `pattern`, with `base_len`
    /// bytes of base IRI (which `IRI()` prepends to relative IRIs).
    pub fn of(pattern: &GraphPattern, base_len: usize) -> StringBound {
        let mut b = Builder {
            nodes: Vec::new(),
            base_len: base_len as f64,
        };
        b.pattern(pattern, &Env::new());
        StringBound { nodes: b.nodes }
    }

    /// The longest string the query can build on an item whose longest term has
    /// `longest_term` bytes and which has `statements` statements.
    pub fn longest(&self, longest_term: usize, statements: usize) -> Longest {
        let mut values = Vec::with_capacity(self.nodes.len());
        let mut best = Longest {
            bytes: 0.0,
            built_by: None,
        };
        for node in &self.nodes {
            let v = match &node.op {
                Op::Const(c) => *c,
                Op::LongestTerm => longest_term as f64,
                Op::Statements => statements as f64,
                Op::Affine(c, terms) => terms.iter().fold(*c, |s, (f, i)| s + f * values[*i]),
                Op::Product(a, b) => values[*a] * values[*b],
                Op::Max(xs) => xs.iter().fold(0.0, |m: f64, i| m.max(values[*i])),
                Op::Min(a, b) => f64::min(values[*a], values[*b]),
            };
            // Bounds are never negative; 0 × ∞ (an empty part joined with an
            // overflowing one) would be NaN: keep it infinite, to stay an upper bound.
            let v = if v.is_nan() { f64::INFINITY } else { v };
            if node.built_by.is_some() && v > best.bytes {
                best = Longest {
                    bytes: v,
                    built_by: node.built_by.clone(),
                };
            }
            values.push(v);
        }
        best
    }

    /// Whether the query may build a string over [`MAX_ASK_STRING_BYTES`] on such an
    /// item; if so, how long and by what.
    pub fn over_cap(&self, longest_term: usize, statements: usize) -> Option<Longest> {
        let longest = self.longest(longest_term, statements);
        (longest.bytes > MAX_ASK_STRING_BYTES as f64).then_some(longest)
    }
}

struct Builder {
    nodes: Vec<Node>,
    base_len: f64,
}

impl Builder {
    fn push(&mut self, op: Op) -> usize {
        self.nodes.push(Node { op, built_by: None });
        self.nodes.len() - 1
    }

    fn built(&mut self, op: Op, by: impl Into<String>) -> usize {
        self.nodes.push(Node {
            op,
            built_by: Some(by.into()),
        });
        self.nodes.len() - 1
    }

    fn constant(&mut self, c: f64) -> usize {
        self.push(Op::Const(c))
    }

    fn max(&mut self, xs: Vec<usize>) -> usize {
        match xs.as_slice() {
            [one] => *one,
            _ => self.push(Op::Max(xs)),
        }
    }

    /// Records that `var` may hold values bounded by `node`.
    fn bind(&mut self, env: &mut Env, var: &str, node: usize) {
        let merged = match env.get(var) {
            Some(&old) if old != node => self.max(vec![old, node]),
            _ => node,
        };
        env.insert(var.to_string(), merged);
    }

    /// `a` and `b` together: each variable bounded by the larger of its bounds.
    fn merge(&mut self, a: &Env, b: &Env) -> Env {
        let mut out = a.clone();
        for (var, &node) in b {
            self.bind(&mut out, var, node);
        }
        out
    }

    /// Bounds the expressions of `p`, evaluated with the variables of `outer` bound
    /// (an `EXISTS` pattern sees its row's values); returns the variables `p` binds
    /// with their bounds, and a node bounding the number of its rows.
    fn pattern(&mut self, p: &GraphPattern, outer: &Env) -> (Env, usize) {
        match p {
            GraphPattern::Bgp { patterns } => {
                let env = self.item_terms(p, outer);
                // Each row picks one statement per triple pattern.
                let n = self.push(Op::Statements);
                let mut rows = self.constant(1.0);
                for _ in patterns {
                    rows = self.push(Op::Product(rows, n));
                }
                (env, rows)
            }
            GraphPattern::Path { .. } => {
                let env = self.item_terms(p, outer);
                // A path relates two terms of the item (at most four per statement)
                // or of the query.
                let n = self.push(Op::Statements);
                let terms = self.push(Op::Affine(2.0, vec![(4.0, n)]));
                (env, self.push(Op::Product(terms, terms)))
            }
            GraphPattern::Join { left, right } => {
                let (l_env, l_rows) = self.pattern(left, outer);
                let (r_env, r_rows) = self.pattern(right, &l_env);
                let env = self.merge(&l_env, &r_env);
                (env, self.push(Op::Product(l_rows, r_rows)))
            }
            GraphPattern::LeftJoin {
                left,
                right,
                expression,
            } => {
                let (l_env, l_rows) = self.pattern(left, outer);
                let (r_env, r_rows) = self.pattern(right, &l_env);
                let env = self.merge(&l_env, &r_env);
                if let Some(e) = expression {
                    self.expression(e, &env);
                }
                // A left row is kept when nothing matches it.
                let r_or_one = self.push(Op::Affine(1.0, vec![(1.0, r_rows)]));
                (env, self.push(Op::Product(l_rows, r_or_one)))
            }
            GraphPattern::Union { left, right } => {
                let (l_env, l_rows) = self.pattern(left, outer);
                let (r_env, r_rows) = self.pattern(right, outer);
                let env = self.merge(&l_env, &r_env);
                (
                    env,
                    self.push(Op::Affine(0.0, vec![(1.0, l_rows), (1.0, r_rows)])),
                )
            }
            GraphPattern::Minus { left, right } => {
                let (l_env, l_rows) = self.pattern(left, outer);
                self.pattern(right, &l_env);
                (l_env, l_rows)
            }
            GraphPattern::Filter { expr, inner } => {
                let (env, rows) = self.pattern(inner, outer);
                self.expression(expr, &env);
                (env, rows)
            }
            GraphPattern::Graph { name, inner } => {
                let (mut env, rows) = self.pattern(inner, outer);
                if let NamedNodePattern::Variable(v) = name {
                    let l = self.push(Op::LongestTerm);
                    self.bind(&mut env, v.as_str(), l);
                }
                // The inner pattern once per graph name (at most one per statement).
                let n = self.push(Op::Statements);
                let graphs = self.push(Op::Affine(1.0, vec![(1.0, n)]));
                let rows_or_one = self.push(Op::Affine(1.0, vec![(1.0, rows)]));
                (env, self.push(Op::Product(rows_or_one, graphs)))
            }
            GraphPattern::Extend {
                inner,
                variable,
                expression,
            } => {
                let (mut env, rows) = self.pattern(inner, outer);
                let value = self.expression(expression, &env);
                self.bind(&mut env, variable.as_str(), value);
                (env, rows)
            }
            GraphPattern::Values {
                variables,
                bindings,
            } => {
                let mut env = outer.clone();
                for (i, var) in variables.iter().enumerate() {
                    let longest = bindings
                        .iter()
                        .filter_map(|row| row.get(i).and_then(Option::as_ref))
                        .map(ground_term_len)
                        .max()
                        .unwrap_or(0);
                    let c = self.constant(longest as f64);
                    self.bind(&mut env, var.as_str(), c);
                }
                (env, self.constant(bindings.len() as f64))
            }
            GraphPattern::OrderBy { inner, expression } => {
                let (env, rows) = self.pattern(inner, outer);
                for e in expression {
                    match e {
                        OrderExpression::Asc(e) | OrderExpression::Desc(e) => {
                            self.expression(e, &env)
                        }
                    };
                }
                (env, rows)
            }
            GraphPattern::Project { inner, variables } => {
                let (inner_env, rows) = self.pattern(inner, outer);
                let mut env = outer.clone();
                for v in variables {
                    if let Some(&node) = inner_env.get(v.as_str()) {
                        self.bind(&mut env, v.as_str(), node);
                    }
                }
                (env, rows)
            }
            GraphPattern::Distinct { inner } | GraphPattern::Reduced { inner } => {
                self.pattern(inner, outer)
            }
            GraphPattern::Slice { inner, length, .. } => {
                let (env, rows) = self.pattern(inner, outer);
                match length {
                    Some(len) => {
                        let len = self.constant(*len as f64);
                        (env, self.push(Op::Min(rows, len)))
                    }
                    None => (env, rows),
                }
            }
            GraphPattern::Group {
                inner,
                variables,
                aggregates,
            } => {
                let (inner_env, inner_rows) = self.pattern(inner, outer);
                let mut env = outer.clone();
                for v in variables {
                    if let Some(&node) = inner_env.get(v.as_str()) {
                        self.bind(&mut env, v.as_str(), node);
                    }
                }
                for (var, aggregate) in aggregates {
                    let value = self.aggregate(aggregate, &inner_env, inner_rows);
                    self.bind(&mut env, var.as_str(), value);
                }
                let rows = if variables.is_empty() {
                    self.constant(1.0)
                } else {
                    inner_rows
                };
                (env, rows)
            }
            // Refused before evaluation (see `calls_service`); bounded as its inner
            // pattern all the same.
            GraphPattern::Service { inner, .. } => self.pattern(inner, outer),
        }
    }

    /// `outer` with the variables that `p` matches against the item's terms.
    fn item_terms(&mut self, p: &GraphPattern, outer: &Env) -> Env {
        let mut vars = Vec::new();
        p.on_in_scope_variable(|v| vars.push(v.as_str().to_string()));
        // A variable already bound outside (an `EXISTS` row, the left of a join)
        // keeps the larger of its bound and L: it is matched with a term of the item.
        let mut env = outer.clone();
        let l = self.push(Op::LongestTerm);
        for var in vars {
            self.bind(&mut env, &var, l);
        }
        env
    }

    fn aggregate(&mut self, a: &AggregateExpression, env: &Env, rows: usize) -> usize {
        let AggregateExpression::FunctionCall { name, expr, .. } = a else {
            return self.constant(SMALL_VALUE_BYTES);
        };
        let value = self.expression(expr, env);
        match name {
            AggregateFunction::Count | AggregateFunction::Sum | AggregateFunction::Avg => {
                self.constant(SMALL_VALUE_BYTES)
            }
            AggregateFunction::Min | AggregateFunction::Max | AggregateFunction::Sample => value,
            AggregateFunction::GroupConcat { separator } => {
                let sep = separator.as_deref().map_or(1, str::len) as f64;
                let per_row = self.push(Op::Affine(sep, vec![(1.0, value)]));
                self.built(Op::Product(rows, per_row), "GROUP_CONCAT")
            }
            AggregateFunction::Custom(iri) => {
                let per_row = self.push(Op::Affine(SMALL_VALUE_BYTES, vec![(1.0, value)]));
                self.built(Op::Product(rows, per_row), iri.to_string())
            }
        }
    }

    /// A node bounding the length of `e`'s value (its text, for a literal or an IRI).
    fn expression(&mut self, e: &Expression, env: &Env) -> usize {
        match e {
            Expression::NamedNode(n) => self.constant(n.as_str().len() as f64),
            Expression::Literal(l) => {
                let extra = l.language().map_or(l.datatype().as_str().len(), str::len);
                self.constant((l.value().len() + extra) as f64)
            }
            Expression::Variable(v) => match env.get(v.as_str()) {
                Some(&node) => node,
                None => self.push(Op::LongestTerm),
            },
            Expression::Or(..)
            | Expression::And(..)
            | Expression::Equal(..)
            | Expression::SameTerm(..)
            | Expression::Greater(..)
            | Expression::GreaterOrEqual(..)
            | Expression::Less(..)
            | Expression::LessOrEqual(..)
            | Expression::Add(..)
            | Expression::Subtract(..)
            | Expression::Multiply(..)
            | Expression::Divide(..)
            | Expression::In(..)
            | Expression::UnaryPlus(_)
            | Expression::UnaryMinus(_)
            | Expression::Not(_) => {
                for x in operands(e) {
                    self.expression(x, env);
                }
                self.constant(SMALL_VALUE_BYTES)
            }
            Expression::Exists(p) => {
                self.pattern(p, env);
                self.constant(SMALL_VALUE_BYTES)
            }
            Expression::Bound(_) => self.constant(SMALL_VALUE_BYTES),
            Expression::If(cond, a, b) => {
                self.expression(cond, env);
                let a = self.expression(a, env);
                let b = self.expression(b, env);
                self.max(vec![a, b])
            }
            Expression::Coalesce(xs) => {
                let xs: Vec<usize> = xs.iter().map(|x| self.expression(x, env)).collect();
                if xs.is_empty() {
                    self.constant(0.0)
                } else {
                    self.max(xs)
                }
            }
            Expression::FunctionCall(f, args) => self.function(f, args, env),
        }
    }

    fn function(&mut self, f: &Function, args: &[Expression], env: &Env) -> usize {
        let bounds: Vec<usize> = args.iter().map(|a| self.expression(a, env)).collect();
        let arg = |i: usize| bounds.get(i).copied();
        let name = f.to_string();
        match f {
            Function::Replace => {
                let (Some(n), Some(r)) = (arg(0), arg(2)) else {
                    return self.constant(0.0);
                };
                match &args[2] {
                    Expression::Literal(l) => {
                        let (c, k) = replacement_parts(l.value());
                        // (2n + 1)·c + max(1, k)·n
                        let (c, k) = (c as f64, k.max(1) as f64);
                        self.built(Op::Affine(c, vec![(2.0 * c + k, n)]), name)
                    }
                    _ => {
                        // (2n + 1)·m + (m/2)·n + n
                        let nm = self.push(Op::Product(n, r));
                        self.built(Op::Affine(0.0, vec![(2.5, nm), (1.0, r), (1.0, n)]), name)
                    }
                }
            }
            Function::UCase | Function::LCase | Function::EncodeForUri => match arg(0) {
                Some(n) => self.built(Op::Affine(0.0, vec![(3.0, n)]), name),
                None => self.constant(0.0),
            },
            // Results that are numbers, booleans, dates, hashes or generated ids.
            Function::Rand
            | Function::Abs
            | Function::Ceil
            | Function::Floor
            | Function::Round
            | Function::StrLen
            | Function::Contains
            | Function::StrStarts
            | Function::StrEnds
            | Function::LangMatches
            | Function::Year
            | Function::Month
            | Function::Day
            | Function::Hours
            | Function::Minutes
            | Function::Seconds
            | Function::Timezone
            | Function::Tz
            | Function::Now
            | Function::Uuid
            | Function::StrUuid
            | Function::Md5
            | Function::Sha1
            | Function::Sha256
            | Function::Sha384
            | Function::Sha512
            | Function::IsIri
            | Function::IsBlank
            | Function::IsLiteral
            | Function::IsNumeric
            | Function::Regex
            | Function::IsTriple
            | Function::HasLang
            | Function::HasLangDir => self.constant(SMALL_VALUE_BYTES),
            // Parts of the argument (or all of it): no longer than it.
            Function::SubStr
            | Function::StrBefore
            | Function::StrAfter
            | Function::Subject
            | Function::Predicate
            | Function::Object => match arg(0) {
                Some(n) => n,
                None => self.constant(0.0),
            },
            Function::Concat => {
                let terms = bounds.iter().map(|&b| (1.0, b)).collect();
                self.built(Op::Affine(0.0, terms), name)
            }
            Function::Iri => {
                let terms = bounds.iter().map(|&b| (1.0, b)).collect();
                self.built(Op::Affine(self.base_len, terms), name)
            }
            // Everything else (STR, STRLANG, STRDT, LANG, DATATYPE, BNODE, TRIPLE,
            // casts, custom functions): the text of its arguments, and some of its
            // own.
            _ => {
                let terms = bounds.iter().map(|&b| (1.0, b)).collect();
                self.built(Op::Affine(SMALL_VALUE_BYTES, terms), name)
            }
        }
    }
}

/// The number of group references in a regex replacement text (the `regex` crate's
/// syntax, which spareval uses: `$1`, `$name`, `${name}`), and the bytes of the
/// text it inserts as is (`$$` inserts one `$`).
fn replacement_parts(r: &str) -> (usize, usize) {
    let b = r.as_bytes();
    let name = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let (mut literal, mut refs, mut i) = (0, 0, 0);
    while i < b.len() {
        if b[i] != b'$' {
            literal += 1;
            i += 1;
            continue;
        }
        match b.get(i + 1) {
            Some(b'$') => {
                literal += 1;
                i += 2;
            }
            Some(b'{') => {
                // `${name}`; counted as literal text too, whatever the crate makes of
                // a name it does not take.
                let end = r[i..].find('}').map_or(b.len(), |end| i + end + 1);
                refs += 1;
                literal += end - i;
                i = end;
            }
            Some(&c) if name(c) => {
                refs += 1;
                i += 1;
                while i < b.len() && name(b[i]) {
                    i += 1;
                }
            }
            _ => {
                literal += 1;
                i += 1;
            }
        }
    }
    (literal, refs)
}

/// Bytes of a `VALUES` term (as written, which is no shorter than its value).
fn ground_term_len(t: &GroundTerm) -> usize {
    t.to_string().len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use spargebra::{Query, SparqlParser};

    /// The longest string `query` can build on an item with terms of at most `l`
    /// bytes and `n` statements.
    fn longest(query: &str, l: usize, n: usize) -> Longest {
        let Ok(Query::Ask { pattern, .. }) = SparqlParser::new().parse_query(query) else {
            panic!("not an ASK query: {query}");
        };
        StringBound::of(&pattern, 0).longest(l, n)
    }

    fn bytes(query: &str, l: usize, n: usize) -> f64 {
        longest(query, l, n).bytes
    }

    #[test]
    fn replacement_references_and_literal_text() {
        assert_eq!(replacement_parts("$0$0$0$0"), (0, 4));
        assert_eq!(replacement_parts("a$1 b$name"), (3, 2));
        assert_eq!(replacement_parts("$$x$"), (3, 0));
        assert_eq!(replacement_parts("${x}y"), (5, 1));
    }

    #[test]
    fn growing_functions_follow_their_rules() {
        // REPLACE by four references: four times the text, exactly.
        let q = r#"ASK { ?s ?p ?o FILTER(STRLEN(REPLACE(?o, ".", "$0$0$0$0")) > 1) }"#;
        assert_eq!(longest(q, 10, 1).bytes, 40.0);
        assert_eq!(longest(q, 10, 1).built_by.as_deref(), Some("REPLACE"));
        // Constant text per match: (2n + 1)·c + n.
        let q = r#"ASK { ?s ?p ?o FILTER(REPLACE(?o, "", "ab") = "") }"#;
        assert_eq!(bytes(q, 10, 1), 21.0 * 2.0 + 10.0);
        // A computed replacement of bound m = n: (2n + 1)·m + (m/2)·n + n.
        let q = r#"ASK { ?s ?p ?o FILTER(REPLACE(?o, "", ?o) = "") }"#;
        assert_eq!(bytes(q, 10, 1), 21.0 * 10.0 + 5.0 * 10.0 + 10.0);
        for f in ["UCASE", "LCASE", "ENCODE_FOR_URI"] {
            let q = format!("ASK {{ ?s ?p ?o FILTER({f}(?o) = \"\") }}");
            assert_eq!(bytes(&q, 10, 1), 30.0, "{f}");
        }
        let q = r#"ASK { ?s ?p ?o FILTER(CONCAT(?o, ?s, "abc") = "") }"#;
        // A constant literal counts its datatype IRI too (xsd:string, 39 bytes).
        assert_eq!(bytes(q, 10, 1), 20.0 + 3.0 + 39.0);
        // Nesting multiplies.
        let q = r#"ASK { ?s ?p ?o FILTER(UCASE(ENCODE_FOR_URI(?o)) = "") }"#;
        assert_eq!(bytes(q, 10, 1), 90.0);
    }

    #[test]
    fn bound_variables_carry_their_expressions_bound() {
        // A BIND chain: each CONCAT doubles the previous variable.
        let q = "ASK { ?s ?p ?o BIND(CONCAT(?o, ?o) AS ?a) BIND(CONCAT(?a, ?a) AS ?b) \
                 BIND(CONCAT(?b, ?b) AS ?c) FILTER(?c = \"\") }";
        assert_eq!(bytes(q, 10, 1), 80.0);
        // Through a subquery's projection, and into an EXISTS pattern.
        let q = "ASK { { SELECT ?a WHERE { ?s ?p ?o BIND(CONCAT(?o, ?o) AS ?a) } } \
                 FILTER EXISTS { BIND(CONCAT(?a, ?a, ?a) AS ?b) } }";
        assert_eq!(bytes(q, 10, 1), 60.0);
        // A variable bound two ways takes the larger bound.
        let q = "ASK { { ?s ?p ?o BIND(UCASE(?o) AS ?a) } UNION { BIND(\"x\" AS ?a) } \
                 FILTER(CONCAT(?a, ?a) = \"\") }";
        assert_eq!(bytes(q, 30, 1), 180.0);
        // VALUES: the longest value written.
        let q = "ASK { VALUES ?v { \"abcd\" \"ab\" } ?s ?p ?o FILTER(CONCAT(?v, ?v) = ?o) }";
        assert_eq!(bytes(q, 1, 1), 2.0 * "\"abcd\"".len() as f64);
    }

    #[test]
    fn group_concat_counts_its_rows() {
        // One row per statement, each the value and its separator.
        let q = "ASK { { SELECT (GROUP_CONCAT(UCASE(?o); separator=\"--\") AS ?g) \
                 WHERE { ?s ?p ?o } } FILTER(STRLEN(?g) > 0) }";
        let l = longest(q, 10, 100);
        assert_eq!(l.bytes, 100.0 * 32.0);
        assert_eq!(l.built_by.as_deref(), Some("GROUP_CONCAT"));
        // Two patterns: pairs of statements; the aggregate's result is a variable.
        let q = "ASK { { SELECT (GROUP_CONCAT(?o) AS ?g) WHERE { ?s ?p ?o . ?s ?q ?r } } \
                 FILTER(CONCAT(?g, ?g) = \"\") }";
        assert_eq!(bytes(q, 10, 100), 2.0 * 100.0 * 100.0 * 11.0);
    }

    #[test]
    fn plain_queries_build_nothing_large() {
        for q in [
            "ASK { ?s ?p ?o }",
            "ASK { ?s ?p ?o FILTER(?o = \"x\") }",
            "ASK { ?s ?p ?o FILTER(STRLEN(STR(?o)) > 3 && CONTAINS(?o, \"a\")) }",
            "ASK { ?s ?p ?o FILTER(REGEX(?o, \"^a\")) }",
        ] {
            // Only function results are checked; these build at most small values.
            assert!(
                bytes(q, 16 << 20, 1000) < 1024.0 + 2.0 * (16 << 20) as f64,
                "{q}"
            );
        }
        let q = "ASK { ?s ?p ?a . ?s ?q ?b FILTER(CONCAT(?a, ?b) = \"x\") }";
        let l = 16 << 20;
        assert_eq!(bytes(q, l, 1000), 2.0 * l as f64);
    }
}
