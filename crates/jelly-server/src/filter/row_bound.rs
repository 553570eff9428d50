//! A per-item bound of the rows an ASK evaluation produces.
//!
//! The work budget counts statement visits and term conversions, but spareval joins
//! item-reading parts with hash joins over rows it has already read, and those joins
//! spend nothing: `?a ?p ?b . ?c ?p ?d . ?e ?p ?f` on an item of `N` statements with
//! one predicate yields `N³` rows for `3N` visits, hours of CPU and gigabytes of rows
//! on a 2,000-statement item. `FILTER EXISTS { … }` re-runs its pattern for every row,
//! and property paths work on pairs of nodes. So before evaluating, [`RowBound::work`]
//! bounds, from the item itself, the rows every operator of the query's plan may
//! produce, summed over the plan; an item over [`MAX_ASK_ROWS`] is out of budget.
//!
//! The plan is the one spareval evaluates: the query optimized by sparopt (the
//! optimizer does not look at the data, so this is done once, when the filter is
//! built), whose joins carry their order and their hash keys. Per item, in one pass
//! over the statements per triple pattern or path:
//!
//! - a triple pattern yields the statements of its graph that match its constant
//!   positions; for each variable, its *degree* is the most of those statements that
//!   share one value of it (a quoted triple pattern matches anything, and its
//!   variables' degree is its row count);
//! - a hash join on keys `K` yields at most `rows(A) × degree(B, K)` and
//!   `rows(B) × degree(A, K)` (the degree on several keys is at most the least of
//!   theirs; without keys it is the row count: a cross product), and a variable's
//!   degree multiplies the same way;
//! - `OPTIONAL` yields at most `rows(A) × max(1, degree(B, K))`, and evaluates its
//!   condition on each of those pairs; `MINUS` compares each row with as many;
//!   `UNION` adds; `VALUES` has its rows (degrees counted once, at build time);
//!   `GRAPH ?g` yields the item's graph names; an aggregate without `GROUP BY` one
//!   row; `FILTER`, `BIND`, `ORDER BY`, `DISTINCT`, projections and slices at most
//!   their input, evaluating their expressions once per input row;
//! - an `EXISTS` pattern costs its work once per row its expression is evaluated on
//!   (spareval evaluates it anew from each row): with the variables every such row
//!   binds given one value, so a pattern that shares one looks up that value's
//!   statements, not all of them (a variable a row may leave unbound, from an
//!   `OPTIONAL` or one branch of a `UNION`, narrows nothing);
//! - a property path is bounded from the item's nodes `n` (distinct, per graph),
//!   its statements and the largest number of statements of one node: a closure
//!   (`*`, `+`) reaches at most `n` nodes from a start, expanding each once; a
//!   sequence multiplies what each step reaches (spareval does not deduplicate it).
//!
//! The work is the sum of the rows every operator yields or builds, plus the
//! statements its patterns visit. Each bound is an upper bound whatever the values:
//! a filter that would keep no row is not counted on.
//!
//! Not bounded here: the work inside one expression call (strings are bounded
//! separately, module `string_bound`), and the work of a query whose plan has a
//! `SERVICE` (refused when the filter is built).

use std::collections::{HashMap, HashSet};

use oxrdf::{Dataset, GraphNameRef, NamedNode, QuadRef, Term, TermRef};
use spargebra::Query;
use spargebra::algebra::PropertyPathExpression;
use spargebra::term::{GroundTerm, GroundTermPattern, NamedNodePattern};
use sparopt::algebra::{
    AggregateExpression, Expression, GraphPattern, JoinAlgorithm, LeftJoinAlgorithm,
    MinusAlgorithm, OrderExpression,
};

/// Most rows (summed over the operators of its plan, see the module docs) one ASK
/// evaluation may produce on one item. Measured in a release build, spareval spends
/// about 250 ns per unit (a joined row with its filter, a path step), closures and
/// joins alike: 4·10^6 units is about a second, as long as exhausting the
/// statement-visit budget ([`super::ASK_WORK_BUDGET`]) takes, and bounds the rows
/// held in hash tables (some 32 bytes per variable each). Ordinary queries on a
/// 750-statement item of weather observations stay below 7,000; a self-join of all
/// its statements on their predicate (`?a ?p ?b . ?c ?p ?d`) is 270,000.
pub const MAX_ASK_ROWS: f64 = 4e6;

/// The plan of an ASK query, ready to be bounded on each item.
#[derive(Debug)]
pub struct RowBound {
    plan: Plan,
    /// With `FROM` clauses, how many graphs form the default graph: a statement may
    /// then be read once per such graph (not only from the item's default graph).
    from_graphs: Option<usize>,
}

/// What bounds the rows of a plan on an item: the rows it yields, the work spent to
/// yield them (rows of its operators, statements visited), per variable its degree
/// (the most rows sharing one value; a variable not listed is not bound), and the
/// variables bound in every row it yields.
#[derive(Debug, Clone, Default)]
struct Estimate {
    rows: f64,
    work: f64,
    degrees: HashMap<String, f64>,
    certain: HashSet<String>,
}

impl Estimate {
    /// The most rows sharing one value of all of `keys` (the row count without keys).
    fn degree(&self, keys: &[String]) -> f64 {
        keys.iter()
            .map(|k| self.degrees.get(k).copied().unwrap_or(self.rows))
            .fold(self.rows, f64::min)
    }

    /// The same yield with the variables of `bound` given one value each (by the row
    /// an `EXISTS` is evaluated on): the rows sharing those values.
    fn given(mut self, bound: &HashSet<String>) -> Estimate {
        let keys: Vec<String> = self
            .degrees
            .keys()
            .filter(|v| bound.contains(*v))
            .cloned()
            .collect();
        if keys.is_empty() {
            return self;
        }
        let rows = self.degree(&keys);
        self.rows = rows;
        self.degrees.values_mut().for_each(|d| *d = d.min(rows));
        self
    }
}

/// One position of a triple pattern.
#[derive(Debug)]
enum Position {
    Constant(Term),
    Variable(String),
    /// A quoted triple pattern: matches any term here (an upper bound); its
    /// variables' degree is the pattern's row count.
    Quoted(Vec<String>),
}

/// Which statements a pattern reads.
#[derive(Debug, Clone)]
enum Context {
    /// The default graph.
    Default,
    /// Any named graph, named by a variable.
    AnyNamed(String),
    /// One named graph.
    Named(NamedNode),
}

/// One end of a property path.
#[derive(Debug)]
enum End {
    Constant,
    Variables(Vec<String>),
}

/// The plan of a query: sparopt's, with what bounding it needs.
#[derive(Debug)]
enum Plan {
    Quad {
        positions: [Position; 3],
        context: Context,
    },
    Path {
        subject: End,
        object: End,
        path: PropertyPathExpression,
        context: Context,
    },
    GraphNames {
        variable: Option<String>,
    },
    Values {
        rows: f64,
        degrees: HashMap<String, f64>,
        /// The variables bound in every row (no `UNDEF`).
        certain: HashSet<String>,
    },
    Join {
        left: Box<Plan>,
        right: Box<Plan>,
        keys: Vec<String>,
    },
    LeftJoin {
        left: Box<Plan>,
        right: Box<Plan>,
        keys: Vec<String>,
        per_pair: Vec<Plan>,
    },
    Minus {
        left: Box<Plan>,
        right: Box<Plan>,
        keys: Vec<String>,
    },
    Union(Vec<Plan>),
    /// An operator that yields at most its input's rows, evaluating the `EXISTS`
    /// patterns of its expressions once per input row.
    PerRow {
        inner: Box<Plan>,
        per_row: Vec<Plan>,
        output: Output,
    },
    /// What cannot be bounded (`SERVICE`, refused elsewhere).
    Unbounded,
}

/// What a [`Plan::PerRow`] operator yields from its input.
#[derive(Debug)]
enum Output {
    /// The input rows, with the same variables.
    Same,
    /// The input rows, plus a variable.
    Bind(String),
    /// The input rows, restricted to these variables.
    Project(Vec<String>),
    /// At most this many of the input rows.
    AtMost(f64),
    /// One row per group of these variables (one row without any), binding the
    /// aggregates' variables too.
    Groups(Vec<String>, Vec<String>),
}

impl RowBound {
    /// The plan of `query` as spareval evaluates it (sparopt's optimized algebra).
    pub fn of(query: &Query) -> RowBound {
        let Query::Ask {
            pattern, dataset, ..
        } = query
        else {
            return RowBound {
                plan: Plan::Unbounded,
                from_graphs: None,
            };
        };
        let optimized = sparopt::Optimizer::optimize_graph_pattern(pattern.into());
        RowBound {
            plan: Plan::of(&optimized),
            from_graphs: dataset.as_ref().map(|d| d.default.len().max(1)),
        }
    }

    /// The work an evaluation may do on `dataset` (see the module docs).
    pub fn work(&self, dataset: &Dataset) -> f64 {
        let item = ItemView {
            dataset,
            from_graphs: self.from_graphs,
        };
        self.plan.estimate(&item, &HashSet::new()).work
    }
}

fn var(v: &oxrdf::Variable) -> String {
    v.as_str().to_string()
}

fn keys_of(keys: &[oxrdf::Variable]) -> Vec<String> {
    keys.iter().map(var).collect()
}

fn context_of(graph_name: Option<&NamedNodePattern>) -> Context {
    match graph_name {
        None => Context::Default,
        Some(NamedNodePattern::Variable(v)) => Context::AnyNamed(var(v)),
        Some(NamedNodePattern::NamedNode(n)) => Context::Named(n.clone()),
    }
}

fn position_of(t: &GroundTermPattern) -> Position {
    match t {
        GroundTermPattern::NamedNode(n) => Position::Constant(n.clone().into()),
        GroundTermPattern::Literal(l) => Position::Constant(l.clone().into()),
        GroundTermPattern::Variable(v) => Position::Variable(var(v)),
        GroundTermPattern::Triple(_) => {
            let mut vars = Vec::new();
            quoted_variables(t, &mut vars);
            Position::Quoted(vars)
        }
    }
}

fn quoted_variables(t: &GroundTermPattern, out: &mut Vec<String>) {
    match t {
        GroundTermPattern::Variable(v) => out.push(var(v)),
        GroundTermPattern::Triple(tr) => {
            quoted_variables(&tr.subject, out);
            if let NamedNodePattern::Variable(v) = &tr.predicate {
                out.push(var(v));
            }
            quoted_variables(&tr.object, out);
        }
        GroundTermPattern::NamedNode(_) | GroundTermPattern::Literal(_) => {}
    }
}

fn end_of(t: &GroundTermPattern) -> End {
    match t {
        GroundTermPattern::NamedNode(_) | GroundTermPattern::Literal(_) => End::Constant,
        _ => {
            let mut vars = Vec::new();
            quoted_variables(t, &mut vars);
            End::Variables(vars)
        }
    }
}

/// The `EXISTS` patterns inside `e`, as plans.
fn exists_in(e: &Expression, out: &mut Vec<Plan>) {
    match e {
        Expression::Exists(p) => out.push(Plan::of(p)),
        Expression::Or(xs) | Expression::And(xs) | Expression::Coalesce(xs) => {
            xs.iter().for_each(|x| exists_in(x, out));
        }
        Expression::FunctionCall(_, xs) => xs.iter().for_each(|x| exists_in(x, out)),
        Expression::Equal(a, b)
        | Expression::SameTerm(a, b)
        | Expression::Greater(a, b)
        | Expression::GreaterOrEqual(a, b)
        | Expression::Less(a, b)
        | Expression::LessOrEqual(a, b)
        | Expression::Add(a, b)
        | Expression::Subtract(a, b)
        | Expression::Multiply(a, b)
        | Expression::Divide(a, b) => {
            exists_in(a, out);
            exists_in(b, out);
        }
        Expression::UnaryPlus(a) | Expression::UnaryMinus(a) | Expression::Not(a) => {
            exists_in(a, out);
        }
        Expression::If(a, b, c) => {
            exists_in(a, out);
            exists_in(b, out);
            exists_in(c, out);
        }
        Expression::NamedNode(_)
        | Expression::Literal(_)
        | Expression::Variable(_)
        | Expression::Bound(_) => {}
    }
}

fn exists_of<'a>(es: impl IntoIterator<Item = &'a Expression>) -> Vec<Plan> {
    let mut out = Vec::new();
    es.into_iter().for_each(|e| exists_in(e, &mut out));
    out
}

impl Plan {
    fn of(p: &GraphPattern) -> Plan {
        let per_row = |inner: &GraphPattern, per_row: Vec<Plan>, output: Output| Plan::PerRow {
            inner: Box::new(Plan::of(inner)),
            per_row,
            output,
        };
        match p {
            GraphPattern::QuadPattern {
                subject,
                predicate,
                object,
                graph_name,
            } => Plan::Quad {
                positions: [
                    position_of(subject),
                    match predicate {
                        NamedNodePattern::NamedNode(n) => Position::Constant(n.clone().into()),
                        NamedNodePattern::Variable(v) => Position::Variable(var(v)),
                    },
                    position_of(object),
                ],
                context: context_of(graph_name.as_ref()),
            },
            GraphPattern::Path {
                subject,
                path,
                object,
                graph_name,
            } => Plan::Path {
                subject: end_of(subject),
                object: end_of(object),
                path: path.clone(),
                context: context_of(graph_name.as_ref()),
            },
            GraphPattern::Graph { graph_name } => Plan::GraphNames {
                variable: match graph_name {
                    NamedNodePattern::Variable(v) => Some(var(v)),
                    NamedNodePattern::NamedNode(_) => None,
                },
            },
            GraphPattern::Values {
                variables,
                bindings,
            } => {
                let mut degrees = HashMap::new();
                let mut certain = HashSet::new();
                for (i, v) in variables.iter().enumerate() {
                    let mut counts: HashMap<&GroundTerm, f64> = HashMap::new();
                    let mut undef = false;
                    for row in bindings {
                        match row.get(i) {
                            Some(Some(t)) => *counts.entry(t).or_default() += 1.0,
                            _ => undef = true,
                        }
                    }
                    degrees.insert(var(v), counts.into_values().fold(0.0, f64::max));
                    if !undef {
                        certain.insert(var(v));
                    }
                }
                Plan::Values {
                    rows: bindings.len() as f64,
                    degrees,
                    certain,
                }
            }
            GraphPattern::Join {
                left,
                right,
                algorithm: JoinAlgorithm::HashBuildLeftProbeRight { keys },
            } => Plan::Join {
                left: Box::new(Plan::of(left)),
                right: Box::new(Plan::of(right)),
                keys: keys_of(keys),
            },
            GraphPattern::LeftJoin {
                left,
                right,
                expression,
                algorithm: LeftJoinAlgorithm::HashBuildRightProbeLeft { keys },
            } => Plan::LeftJoin {
                left: Box::new(Plan::of(left)),
                right: Box::new(Plan::of(right)),
                keys: keys_of(keys),
                per_pair: exists_of([expression]),
            },
            GraphPattern::Minus {
                left,
                right,
                algorithm: MinusAlgorithm::HashBuildRightProbeLeft { keys },
            } => Plan::Minus {
                left: Box::new(Plan::of(left)),
                right: Box::new(Plan::of(right)),
                keys: keys_of(keys),
            },
            GraphPattern::Union { inner } => Plan::Union(inner.iter().map(Plan::of).collect()),
            GraphPattern::Filter { expression, inner } => {
                per_row(inner, exists_of([expression]), Output::Same)
            }
            GraphPattern::Extend {
                inner,
                variable,
                expression,
            } => per_row(inner, exists_of([expression]), Output::Bind(var(variable))),
            GraphPattern::OrderBy { inner, expression } => per_row(
                inner,
                exists_of(expression.iter().map(|o| match o {
                    OrderExpression::Asc(e) | OrderExpression::Desc(e) => e,
                })),
                Output::Same,
            ),
            GraphPattern::Project { inner, variables } => {
                per_row(inner, Vec::new(), Output::Project(keys_of(variables)))
            }
            GraphPattern::Distinct { inner } | GraphPattern::Reduced { inner } => {
                per_row(inner, Vec::new(), Output::Same)
            }
            GraphPattern::Slice { inner, length, .. } => per_row(
                inner,
                Vec::new(),
                length.map_or(Output::Same, |l| Output::AtMost(l as f64)),
            ),
            GraphPattern::Group {
                inner,
                variables,
                aggregates,
            } => per_row(
                inner,
                exists_of(aggregates.iter().filter_map(|(_, a)| match a {
                    AggregateExpression::FunctionCall { expr, .. } => Some(expr),
                    AggregateExpression::CountSolutions { .. } => None,
                })),
                Output::Groups(
                    keys_of(variables),
                    aggregates.iter().map(|(v, _)| var(v)).collect(),
                ),
            ),
            GraphPattern::Service { .. } => Plan::Unbounded,
        }
    }

    /// The bound of this plan on `item`, evaluated from a row that gives the
    /// variables of `bound` one value each (none at the top; an `EXISTS` pattern is
    /// evaluated from the row it tests, so its patterns look up those values).
    fn estimate(&self, item: &ItemView<'_>, bound: &HashSet<String>) -> Estimate {
        match self {
            Plan::Quad { positions, context } => {
                // The item's indexes look up the given values: only the statements
                // that match them are visited.
                let e = item.quad(positions, context).given(bound);
                Estimate { work: e.rows, ..e }
            }
            Plan::Path {
                subject,
                object,
                path,
                context,
            } => {
                // An end whose variables the row all gives is one node, as a constant
                // (a quoted triple given in part is still looked up from every node).
                let given = |end: &End| match end {
                    End::Variables(vars) if vars.iter().all(|v| bound.contains(v)) => End::Constant,
                    End::Variables(vars) => End::Variables(vars.clone()),
                    End::Constant => End::Constant,
                };
                let mut e = item.path(&given(subject), &given(object), path, context);
                for end in [subject, object] {
                    if let End::Variables(vars) = end {
                        e.certain.extend(vars.iter().cloned());
                    }
                }
                e.given(bound)
            }
            Plan::GraphNames { variable } => {
                let rows = match variable {
                    Some(_) => item.graph_names(),
                    None => 1.0,
                };
                Estimate {
                    rows,
                    work: rows,
                    degrees: variable.iter().map(|v| (v.clone(), 1.0)).collect(),
                    certain: variable.iter().cloned().collect(),
                }
                .given(bound)
            }
            Plan::Values {
                rows,
                degrees,
                certain,
            } => {
                // Every row is compared with the given values.
                let e = Estimate {
                    rows: *rows,
                    work: *rows,
                    degrees: degrees.clone(),
                    certain: certain.clone(),
                }
                .given(bound);
                Estimate { work: *rows, ..e }
            }
            Plan::Join { left, right, keys } => {
                let (l, r) = (left.estimate(item, bound), right.estimate(item, bound));
                let (dl, dr) = (l.degree(keys), r.degree(keys));
                let rows = f64::min(l.rows * dr, r.rows * dl);
                let mut degrees = HashMap::new();
                for (v, d) in &l.degrees {
                    degrees.insert(v.clone(), (d * dr).min(rows));
                }
                for (v, d) in &r.degrees {
                    let via_right = (d * dl).min(rows);
                    match degrees.get_mut(v) {
                        // A key is bound on both sides: either count holds.
                        Some(e) if keys.contains(v) => *e = e.min(via_right),
                        // Bound on one side or the other (OPTIONAL, UNION): both count.
                        Some(e) => *e = (*e + via_right).min(rows),
                        None => {
                            degrees.insert(v.clone(), via_right);
                        }
                    }
                }
                Estimate {
                    rows,
                    // Both sides, the built table, and the joined rows.
                    work: l.work + r.work + l.rows + rows,
                    degrees,
                    certain: l.certain.union(&r.certain).cloned().collect(),
                }
            }
            Plan::LeftJoin {
                left,
                right,
                keys,
                per_pair,
            } => {
                let (l, r) = (left.estimate(item, bound), right.estimate(item, bound));
                let pairs = l.rows * r.degree(keys).max(1.0);
                // The condition is evaluated on joined pairs: both sides' variables.
                let pair_bound: HashSet<String> = bound
                    .iter()
                    .chain(&l.certain)
                    .chain(&r.certain)
                    .cloned()
                    .collect();
                let per_pair = 1.0 + work_of(per_pair, item, &pair_bound);
                let mut degrees: HashMap<String, f64> =
                    r.degrees.keys().map(|v| (v.clone(), pairs)).collect();
                for (v, d) in &l.degrees {
                    degrees.insert(v.clone(), (d * r.degree(keys).max(1.0)).min(pairs));
                }
                Estimate {
                    rows: pairs,
                    work: l.work + r.work + r.rows + pairs * per_pair,
                    degrees,
                    certain: l.certain,
                }
            }
            Plan::Minus { left, right, keys } => {
                let (l, r) = (left.estimate(item, bound), right.estimate(item, bound));
                let compared = l.rows * r.degree(keys).max(1.0);
                Estimate {
                    rows: l.rows,
                    work: l.work + r.work + r.rows + compared,
                    degrees: l.degrees,
                    certain: l.certain,
                }
            }
            Plan::Union(branches) => {
                let mut out = Estimate::default();
                let mut certain: Option<HashSet<String>> = None;
                for b in branches {
                    let e = b.estimate(item, bound);
                    out.rows += e.rows;
                    out.work += e.work;
                    for (v, d) in e.degrees {
                        *out.degrees.entry(v).or_default() += d;
                    }
                    certain = Some(match certain {
                        None => e.certain,
                        Some(c) => c.intersection(&e.certain).cloned().collect(),
                    });
                }
                out.certain = certain.unwrap_or_default();
                out.work += out.rows;
                out
            }
            Plan::PerRow {
                inner,
                per_row,
                output,
            } => {
                // A projection (a subquery) or a grouping sees only its own variables
                // of the row it is evaluated from.
                let inner_bound: HashSet<String> = match output {
                    Output::Project(vars) | Output::Groups(vars, _) => bound
                        .iter()
                        .filter(|v| vars.contains(*v))
                        .cloned()
                        .collect(),
                    _ => bound.clone(),
                };
                let mut e = inner.estimate(item, &inner_bound);
                // Each `EXISTS` is evaluated from each row: the row's variables are given.
                let row_bound: HashSet<String> =
                    inner_bound.iter().chain(&e.certain).cloned().collect();
                e.work += e.rows * (1.0 + work_of(per_row, item, &row_bound));
                match output {
                    Output::Same => {}
                    Output::Bind(v) => {
                        e.degrees.insert(v.clone(), e.rows);
                    }
                    Output::Project(vars) => {
                        e.degrees.retain(|v, _| vars.contains(v));
                        e.certain.retain(|v| vars.contains(v));
                    }
                    Output::AtMost(n) => {
                        e.rows = e.rows.min(*n);
                        let rows = e.rows;
                        e.degrees.values_mut().for_each(|d| *d = d.min(rows));
                    }
                    Output::Groups(vars, aggregates) => {
                        if vars.is_empty() {
                            e.rows = 1.0;
                        }
                        let rows = e.rows;
                        e.degrees.retain(|v, _| vars.contains(v));
                        e.degrees.values_mut().for_each(|d| *d = d.min(rows));
                        e.certain.retain(|v| vars.contains(v));
                        for a in aggregates {
                            e.degrees.insert(a.clone(), rows);
                        }
                    }
                }
                e
            }
            Plan::Unbounded => Estimate {
                rows: f64::INFINITY,
                work: f64::INFINITY,
                degrees: HashMap::new(),
                certain: HashSet::new(),
            },
        }
    }
}

/// The summed work of `plans` (each evaluated once, from a row giving `bound`).
fn work_of(plans: &[Plan], item: &ItemView<'_>, bound: &HashSet<String>) -> f64 {
    plans.iter().map(|p| p.estimate(item, bound).work).sum()
}

/// The item's statements, as the evaluation reads them.
struct ItemView<'a> {
    dataset: &'a Dataset,
    from_graphs: Option<usize>,
}

impl ItemView<'_> {
    /// The statements a pattern in `context` reads, each with how many times it is
    /// read (more than once when several `FROM` graphs form the default graph).
    fn statements<'b>(
        &'b self,
        context: &'b Context,
    ) -> impl Iterator<Item = (QuadRef<'b>, f64)> + 'b {
        self.dataset
            .iter()
            .filter_map(move |q| self.weight(q, context).map(|w| (q, w)))
    }

    /// [`ItemView::statements`], looked up by a constant position when there is one
    /// (the caller still checks every position).
    fn statements_matching<'b>(
        &'b self,
        positions: &'b [Position; 3],
        context: &'b Context,
    ) -> Box<dyn Iterator<Item = (QuadRef<'b>, f64)> + 'b> {
        let constant = |i: usize| match &positions[i] {
            Position::Constant(c) => Some(c.as_ref()),
            _ => None,
        };
        let candidates: Box<dyn Iterator<Item = QuadRef<'b>> + 'b> =
            match (constant(1), constant(2), constant(0)) {
                (Some(TermRef::NamedNode(p)), _, _) => {
                    Box::new(self.dataset.quads_for_predicate(p))
                }
                (_, Some(o), _) => Box::new(self.dataset.quads_for_object(o)),
                (_, _, Some(TermRef::NamedNode(s))) => Box::new(self.dataset.quads_for_subject(s)),
                _ => return Box::new(self.statements(context)),
            };
        Box::new(candidates.filter_map(move |q| self.weight(q, context).map(|w| (q, w))))
    }

    /// How many times a pattern in `context` reads `q` (`None`: not at all).
    fn weight(&self, q: QuadRef<'_>, context: &Context) -> Option<f64> {
        let read = match context {
            // With FROM, the default graph is made of named graphs: any statement
            // may be in it.
            Context::Default => self.from_graphs.is_some() || q.graph_name.is_default_graph(),
            Context::AnyNamed(_) => !q.graph_name.is_default_graph(),
            Context::Named(n) => q.graph_name == GraphNameRef::NamedNode(n.as_ref()),
        };
        match (read, context, self.from_graphs) {
            (false, _, _) => None,
            (true, Context::Default, Some(k)) => Some(k as f64),
            (true, _, _) => Some(1.0),
        }
    }

    /// How many named graphs the item has.
    fn graph_names(&self) -> f64 {
        let names: HashSet<GraphNameRef<'_>> = self
            .dataset
            .iter()
            .map(|q| q.graph_name)
            .filter(|g| !g.is_default_graph())
            .collect();
        names.len() as f64
    }

    fn quad(&self, positions: &[Position; 3], context: &Context) -> Estimate {
        let mut rows = 0.0;
        let mut counts: [HashMap<TermRef<'_>, f64>; 4] = Default::default();
        for (q, weight) in self.statements_matching(positions, context) {
            let terms = [
                TermRef::from(q.subject),
                TermRef::from(q.predicate),
                q.object,
            ];
            let matches = positions.iter().zip(terms).all(|(p, t)| match p {
                Position::Constant(c) => c.as_ref() == t,
                _ => true,
            });
            if !matches {
                continue;
            }
            rows += weight;
            for (i, (p, t)) in positions.iter().zip(terms).enumerate() {
                if let Position::Variable(_) = p {
                    *counts[i].entry(t).or_default() += weight;
                }
            }
            if let Context::AnyNamed(_) = context {
                let g = match q.graph_name {
                    GraphNameRef::NamedNode(n) => TermRef::from(n),
                    GraphNameRef::BlankNode(b) => TermRef::from(b),
                    GraphNameRef::DefaultGraph => continue,
                };
                *counts[3].entry(g).or_default() += weight;
            }
        }
        let mut degrees: HashMap<String, f64> = HashMap::new();
        let mut put = |v: &str, d: f64| {
            let e = degrees.entry(v.to_string()).or_insert(d);
            *e = e.min(d);
        };
        let max = |c: &HashMap<TermRef<'_>, f64>| c.values().copied().fold(0.0, f64::max);
        for (i, p) in positions.iter().enumerate() {
            match p {
                Position::Variable(v) => put(v, max(&counts[i])),
                Position::Quoted(vars) => vars.iter().for_each(|v| put(v, rows)),
                Position::Constant(_) => {}
            }
        }
        if let Context::AnyNamed(g) = context {
            put(g, max(&counts[3]));
        }
        let certain = degrees.keys().cloned().collect();
        Estimate {
            rows,
            work: rows,
            degrees,
            certain,
        }
    }

    fn path(
        &self,
        subject: &End,
        object: &End,
        path: &PropertyPathExpression,
        context: &Context,
    ) -> Estimate {
        let graph = GraphStats::of(self, path, context);
        let cost = graph.cost(path);
        let (rows, work) = match (subject, object) {
            (End::Variables(_), End::Variables(_)) => {
                (cost.rows_all.min(graph.nodes * graph.nodes), cost.work_all)
            }
            (End::Constant, End::Constant) => (1.0, cost.work_one),
            _ => (cost.rows_one, cost.work_one),
        };
        let mut degrees: HashMap<String, f64> = HashMap::new();
        for end in [subject, object] {
            if let End::Variables(vars) = end {
                for v in vars {
                    degrees.insert(v.clone(), cost.rows_one.min(rows));
                }
            }
        }
        if let Context::AnyNamed(g) = context {
            degrees.insert(g.clone(), rows);
        }
        let certain = match context {
            Context::AnyNamed(g) => HashSet::from([g.clone()]),
            _ => HashSet::new(),
        };
        Estimate {
            rows,
            work: work + rows + graph.statements,
            degrees,
            certain,
        }
    }
}

/// What bounds a property path's evaluation in one graph context.
struct GraphStats {
    /// Distinct nodes per graph, summed over the graphs, plus one per graph (a
    /// constant end may be no node of it): the most nodes a closure reaches from
    /// a start, or starts from.
    nodes: f64,
    /// Statements read.
    statements: f64,
    /// Per predicate named in the path (and `None` for all), its statements and the
    /// most of them one node is the subject or object of.
    edges: HashMap<Option<NamedNode>, (f64, f64)>,
}

/// Bounds of a path's evaluation: from one start (`_one`: the results and the work),
/// and from all starts at once (`_all`).
#[derive(Clone, Copy)]
struct PathCost {
    rows_one: f64,
    work_one: f64,
    rows_all: f64,
    work_all: f64,
}

impl GraphStats {
    fn of(item: &ItemView<'_>, path: &PropertyPathExpression, context: &Context) -> GraphStats {
        fn named(p: &PropertyPathExpression, out: &mut Vec<NamedNode>) {
            match p {
                PropertyPathExpression::NamedNode(n) => out.push(n.clone()),
                PropertyPathExpression::Reverse(a)
                | PropertyPathExpression::ZeroOrMore(a)
                | PropertyPathExpression::OneOrMore(a)
                | PropertyPathExpression::ZeroOrOne(a) => named(a, out),
                PropertyPathExpression::Sequence(a, b)
                | PropertyPathExpression::Alternative(a, b) => {
                    named(a, out);
                    named(b, out);
                }
                PropertyPathExpression::NegatedPropertySet(_) => {}
            }
        }
        let mut predicates = Vec::new();
        named(path, &mut predicates);
        let mut nodes = HashSet::new();
        let mut graphs = HashSet::new();
        let mut statements = 0.0;
        // (predicate index or all, node) -> statements of that node.
        let mut per_node: HashMap<(Option<usize>, TermRef<'_>), f64> = HashMap::new();
        let mut totals: HashMap<Option<usize>, f64> = HashMap::new();
        for (q, weight) in item.statements(context) {
            statements += weight;
            graphs.insert(q.graph_name);
            let (s, o) = (TermRef::from(q.subject), q.object);
            nodes.insert((q.graph_name, s));
            nodes.insert((q.graph_name, o));
            let index = predicates.iter().position(|p| p.as_ref() == q.predicate);
            for key in [None, index.map(Some)].into_iter().flatten() {
                *totals.entry(key).or_default() += weight;
                *per_node.entry((key, s)).or_default() += weight;
                if s != o {
                    *per_node.entry((key, o)).or_default() += weight;
                }
            }
        }
        let mut edges = HashMap::new();
        for (key, total) in totals {
            let most = per_node
                .iter()
                .filter(|((k, _), _)| *k == key)
                .map(|(_, n)| *n)
                .fold(0.0, f64::max);
            edges.insert(key.map(|i| predicates[i].clone()), (total, most));
        }
        GraphStats {
            nodes: (nodes.len() + graphs.len() + 1) as f64,
            statements,
            edges,
        }
    }

    fn cost(&self, p: &PropertyPathExpression) -> PathCost {
        let n = self.nodes;
        let step = |key: Option<NamedNode>| {
            let (total, most) = self.edges.get(&key).copied().unwrap_or((0.0, 0.0));
            PathCost {
                rows_one: most,
                work_one: most + 1.0,
                rows_all: total,
                work_all: total + 1.0,
            }
        };
        match p {
            PropertyPathExpression::NamedNode(node) => step(Some(node.clone())),
            PropertyPathExpression::NegatedPropertySet(_) => step(None),
            PropertyPathExpression::Reverse(a) => self.cost(a),
            PropertyPathExpression::Sequence(a, b) => {
                let (a, b) = (self.cost(a), self.cost(b));
                PathCost {
                    rows_one: a.rows_one * b.rows_one,
                    work_one: a.work_one + a.rows_one * b.work_one,
                    rows_all: a.rows_all * b.rows_one,
                    work_all: a.work_all + a.rows_all * b.work_one,
                }
            }
            PropertyPathExpression::Alternative(a, b) => {
                let (a, b) = (self.cost(a), self.cost(b));
                PathCost {
                    rows_one: a.rows_one + b.rows_one,
                    work_one: a.work_one + b.work_one,
                    rows_all: a.rows_all + b.rows_all,
                    work_all: a.work_all + b.work_all,
                }
            }
            PropertyPathExpression::ZeroOrMore(a) | PropertyPathExpression::OneOrMore(a) => {
                let a = self.cost(a);
                // From one start, each node reached is expanded once, and each of its
                // results checked against those seen.
                let work_one = a.work_all + a.rows_all + n;
                PathCost {
                    rows_one: n,
                    work_one,
                    rows_all: n * n,
                    work_all: a.work_all + n * work_one,
                }
            }
            PropertyPathExpression::ZeroOrOne(a) => {
                let a = self.cost(a);
                PathCost {
                    rows_one: a.rows_one + 1.0,
                    work_one: a.work_one + 1.0,
                    rows_all: a.rows_all + n,
                    work_all: a.work_all + n,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use spargebra::SparqlParser;

    /// `n` statements `s_i <p> s_{i+1}`.
    fn chain(n: usize) -> Dataset {
        let mut ds = Dataset::new();
        for i in 0..n {
            ds.insert(&oxrdf::Quad::new(
                NamedNode::new_unchecked(format!("http://a/s{i}")),
                NamedNode::new_unchecked("http://a/p"),
                NamedNode::new_unchecked(format!("http://a/s{}", i + 1)),
                oxrdf::GraphName::DefaultGraph,
            ));
        }
        ds
    }

    fn work(query: &str, ds: &Dataset) -> f64 {
        let q = SparqlParser::new().parse_query(query).unwrap();
        RowBound::of(&q).work(ds)
    }

    #[test]
    fn a_join_on_a_shared_predicate_multiplies() {
        let q = "ASK { ?a ?p ?b . ?c ?p ?d . ?e ?p ?f FILTER(?a = <urn:none>) }";
        let w = work(q, &chain(2000));
        // 8·10^9 joined rows, counted again by the filter they pass through.
        assert!((8e9..1.7e10).contains(&w), "{w}");
        // Joined on a subject or object (degree 1 on a chain), rows stay linear.
        let q = "ASK { ?a ?p ?b . ?b ?q ?c . ?c ?r ?d }";
        let w = work(q, &chain(2000));
        assert!(w < 20_000.0, "{w}");
    }

    #[test]
    fn exists_costs_its_work_per_row() {
        let q = "ASK { ?a ?p ?b FILTER EXISTS { ?c ?q ?d } }";
        let w = work(q, &chain(100));
        assert!((10_000.0..11_000.0).contains(&w), "{w}");
    }

    /// An `EXISTS` pattern sharing a variable with the row it tests looks up the row's
    /// value: one statement per row on a chain, not the whole chain. A variable the
    /// row may leave unbound (from an `OPTIONAL`) narrows nothing.
    #[test]
    fn exists_looks_up_the_values_of_its_row() {
        let w = work(
            "ASK { ?a ?p ?b FILTER NOT EXISTS { ?b ?q ?c } }",
            &chain(1000),
        );
        assert!((1_000.0..5_000.0).contains(&w), "{w}");
        let w = work(
            "ASK { ?a ?p ?b FILTER NOT EXISTS { ?b <http://a/p>+ ?c } }",
            &chain(200),
        );
        // Each row walks the chain from its own `?b` (once reading the graph's
        // statements), not from every node: about 200 × 1,000, not 200 × 200².
        assert!(w < 500_000.0, "{w}");
        let w = work(
            "ASK { ?a ?p ?b OPTIONAL { ?b <http://a/q> ?x } FILTER NOT EXISTS { ?x ?q ?c } }",
            &chain(1000),
        );
        assert!(w >= 1_000_000.0, "{w}");
    }

    /// A quoted triple end whose variables the row gives only in part is no single
    /// node: spareval walks the path from every node, as from an open end.
    #[test]
    fn a_quoted_end_given_in_part_stays_open() {
        let w = work(
            "ASK { ?a ?p ?b FILTER EXISTS { ?z <http://a/p>* <<( ?b <http://a/q> ?y )>> } }",
            &chain(200),
        );
        // 200 rows, each pairing the chain's nodes.
        assert!(w >= 200.0 * 201.0 * 201.0, "{w}");
        // Given whole, it is one node: one walk per row.
        let w = work(
            "ASK { ?a ?p ?b FILTER EXISTS { ?z <http://a/p>* <<( ?b <http://a/q> ?a )>> } }",
            &chain(200),
        );
        assert!(w < 500_000.0, "{w}");
    }

    #[test]
    fn values_degrees_are_counted() {
        // Each statement matches one row of the table: 100 joined rows, not 100 × 50.
        let values: Vec<String> = (0..50).map(|i| format!("<http://a/s{i}>")).collect();
        let q = format!("ASK {{ ?a ?p ?b VALUES ?a {{ {} }} }}", values.join(" "));
        let w = work(&q, &chain(100));
        assert!(w < 1_000.0, "{w}");
    }

    #[test]
    fn closures_pair_nodes() {
        let w = work("ASK { ?a <http://a/p>* ?b }", &chain(100));
        assert!(w >= 101.0 * 101.0, "{w}");
        // From a constant, one walk.
        let w = work("ASK { <http://a/s0> <http://a/p>* ?b }", &chain(100));
        assert!(w < 1_000.0, "{w}");
    }
}
