//! Subscription filters: which items a subscriber receives.
//!
//! A filter is checked on each stored item, and the item is delivered whole or not
//! at all: an item is one graph or dataset (a nanopublication, a sensor reading with
//! its context), and cutting statements out of it would break it. Every kind given
//! must hold (AND):
//!
//! - `source=<id>[,<id>...]`: the item's source id (set by its publisher) is one of
//!   the listed ids. Needs no decoding.
//! - `prefix=<iri>[ <iri>...]`: some IRI in the item starts with one of the prefixes
//!   (space-separated; each may be written bare or as `<iri>`, and must be an absolute
//!   IRI). IRIs are looked for in every position (subject, predicate, object, graph),
//!   in literal datatypes (`xsd:` is a vocabulary too; not the `xsd:string` of a
//!   simple literal, even written out, nor the `rdf:` datatypes of language-tagged
//!   strings) and inside quoted triples; literal values are not IRIs, even when they
//!   look like one. The comparison is on the IRI text as stored, byte by byte.
//! - `pattern=<s> <p> <o> [<g>]`: some statement of the item matches. Each position
//!   is an N-Triples term (`<iri>`, a literal such as `"v"`, `"v"@en`,
//!   `"1"^^<http://www.w3.org/2001/XMLSchema#integer>`, a quoted triple
//!   `<<( s p o )>>`), `*` (anything), `?name` (anything; the same name in two
//!   positions must be the same term) or `_:name` (any blank node; the same name in
//!   two positions must be the same blank node — publishers' labels are local to an
//!   item, so matching them by label would mean nothing). With three terms the
//!   statement may be in any graph; a fourth term matches the graph name, and then
//!   only statements in a named graph match. Terms inside a quoted triple are
//!   matched exactly.
//! - `ask=<SPARQL ASK query>`: the query answers true on the item. Triples form the
//!   default graph, quads in a named graph form that named graph (the default graph is
//!   not their union). Only `ASK` is allowed; `SERVICE` calls fail. Inside quoted
//!   triples, literals match by value (`"042"^^xsd:integer` is `42`), because
//!   spareval builds every triple term it compares from values. Statements
//!   oxrdf cannot hold (generalized terms, quoted triples outside the object) are left
//!   out of the dataset. The evaluation is bounded by a work budget
//!   ([`ASK_WORK_BUDGET`] units: statement visits, and term conversions by size);
//!   an item whose evaluation runs out of it is not delivered. Work inside one
//!   function call is not counted there, so the strings the query can build are
//!   bounded before evaluation (module `string_bound`): an item on which one could exceed
//!   [`MAX_ASK_STRING_BYTES`] is out of budget too, and a query over that bound even
//!   on one-byte terms is refused when the filter is built. So is a query naming
//!   `SUBSTR`, `REGEX` or `REPLACE` more than [`MAX_ASK_OPTIONAL_ARG_CALLS`] times,
//!   before it is parsed: the parser's time doubles with each one nested in another.
//!   Joining rows spends no budget either: parts that join without a shared variable
//!   are refused when both read the item (a cross product), and the parts that read
//!   nothing (`VALUES`, aggregates without `GROUP BY`) may produce at most
//!   [`MAX_UNREAD_ROWS`] rows together (module `unread_rows`); both are checked
//!   once, when the filter is built. On each item, before evaluating, the rows every
//!   operator of the query's plan (sparopt's, as spareval runs it) may produce are
//!   bounded from the item's own statements: joins by how many statements share a
//!   value of their keys, `EXISTS` once per row, property paths by the item's nodes
//!   and statements (module `row_bound`); an item over [`MAX_ASK_ROWS`] is out of
//!   budget too. The bound holds whatever the values, so a filter that would keep
//!   no row does not lower it.
//!
//! A filter is built once per subscription ([`FilterParams::build`]); equal filters
//! have equal [`ItemFilter::key`]s, so subscribers with the same filter can share its
//! evaluation and its output bytes.
//!
//! Bad parameters are [`FilterError`]s that name the parameter (HTTP 400, gRPC
//! `INVALID_ARGUMENT`). An error while checking one item (an item that does not decode,
//! an ASK evaluation error) is not the subscriber's fault: the delivery treats the
//! item as not accepted and goes on.

use std::cell::Cell;
use std::str::FromStr;
use std::sync::Arc;

use jelly::{Decoder, Event, LiteralKind, LiteralRef, StatementRef, TermRef, TripleRef};
use oxrdf::{BaseDirection, Dataset};
use serde::Deserialize;
use spareval::{InternalQuad, QueryEvaluator, QueryResults, QueryableDataset};
use spargebra::{Query, SparqlParser};
use tonic::metadata::MetadataMap;

use crate::item::Item;

mod ask_key;
mod row_bound;
mod string_bound;
mod unread_rows;

pub use row_bound::MAX_ASK_ROWS;
use row_bound::RowBound;
pub use string_bound::MAX_ASK_STRING_BYTES;
use string_bound::StringBound;
pub use unread_rows::MAX_UNREAD_ROWS;

/// Longest `source`, `prefix` or `pattern` value, in bytes.
pub const MAX_PARAM_BYTES: usize = 4096;
/// Longest `ask` query, in bytes.
pub const MAX_ASK_BYTES: usize = 16 << 10;
/// Most source ids in one `source` list, and most prefixes in one `prefix` list.
pub const MAX_LIST_ENTRIES: usize = 64;
/// Deepest nesting of quoted triples in a `pattern` term.
const MAX_PATTERN_NESTING: usize = 16;
/// Work units (statements visited, terms converted, by size) one ASK evaluation may
/// spend on one item. A join that explodes (a cartesian product filtered at the end) runs out
/// of it instead of holding a CPU.
pub const ASK_WORK_BUDGET: u64 = 2_000_000;

/// The filter parameters of a subscription, as given (HTTP query string, gRPC metadata).
#[derive(Debug, Default, Clone, Deserialize)]
pub struct FilterParams {
    /// Comma-separated source ids: the item's source is one of them.
    pub source: Option<String>,
    /// Space-separated IRI prefixes: some IRI of the item starts with one of them.
    pub prefix: Option<String>,
    /// A statement pattern `s p o [g]`: some statement of the item matches it.
    pub pattern: Option<String>,
    /// A SPARQL ASK query: true on the item.
    pub ask: Option<String>,
}

/// A bad filter parameter, or an item a filter could not be checked on.
#[derive(Debug, thiserror::Error)]
pub enum FilterError {
    /// A parameter value over its size limit.
    #[error("{param}: {len} bytes is too long (at most {max})")]
    TooLong {
        param: &'static str,
        len: usize,
        max: usize,
    },
    /// A parameter value that cannot be used.
    #[error("{param}: {message}")]
    Invalid {
        param: &'static str,
        message: String,
    },
    /// `ask` is not valid SPARQL; `message` is the parser's, with the position.
    #[error("ask: SPARQL syntax error: {message}")]
    AskSyntax { message: String },
    /// `ask` is valid SPARQL but not an ASK query.
    #[error("ask: SERVICE is not available in filters (items are matched on their own)")]
    Service,
    #[error("ask: only ASK queries are allowed, this is a {form} query")]
    NotAsk { form: &'static str },
    /// A gRPC metadata value that is not usable text.
    #[error("metadata {key}: {message}")]
    Metadata { key: String, message: String },
    /// The item at `offset` could not be checked (not a parameter error).
    #[error("item {offset}: {message}")]
    Item { offset: u64, message: String },
}

impl FilterError {
    /// The parameter at fault (`source`, `prefix`, `pattern`, `ask`), if any.
    pub fn parameter(&self) -> Option<&'static str> {
        match self {
            FilterError::TooLong { param, .. } | FilterError::Invalid { param, .. } => Some(param),
            FilterError::AskSyntax { .. } | FilterError::NotAsk { .. } | FilterError::Service => {
                Some("ask")
            }
            FilterError::Metadata { .. } | FilterError::Item { .. } => None,
        }
    }
}

fn invalid(param: &'static str, message: impl Into<String>) -> FilterError {
    FilterError::Invalid {
        param,
        message: message.into(),
    }
}

fn check_len(param: &'static str, value: &str, max: usize) -> Result<(), FilterError> {
    if value.len() > max {
        return Err(FilterError::TooLong {
            param,
            len: value.len(),
            max,
        });
    }
    Ok(())
}

impl FilterParams {
    /// Whether no filter is given.
    pub fn is_empty(&self) -> bool {
        self.source.is_none()
            && self.prefix.is_none()
            && self.pattern.is_none()
            && self.ask.is_none()
    }

    /// Checks and compiles the parameters: `None` when no filter is given.
    pub fn build(&self) -> Result<Option<Arc<ItemFilter>>, FilterError> {
        if self.is_empty() {
            return Ok(None);
        }
        let sources = self.source.as_deref().map(parse_sources).transpose()?;
        let prefixes = self.prefix.as_deref().map(parse_prefixes).transpose()?;
        let pattern = self
            .pattern
            .as_deref()
            .map(StatementPattern::parse)
            .transpose()?;
        let ask = self.ask.as_deref().map(parse_ask).transpose()?;
        let mut key = serde_json::Map::new();
        if let Some(s) = &sources {
            key.insert("source".into(), s.clone().into());
        }
        if let Some(p) = &prefixes {
            key.insert("prefix".into(), p.clone().into());
        }
        if let Some(p) = &pattern {
            key.insert("pattern".into(), p.canonical().into());
        }
        if let Some(a) = &ask {
            key.insert("ask".into(), a.key.clone().into());
        }
        Ok(Some(Arc::new(ItemFilter {
            key: serde_json::Value::Object(key).to_string(),
            sources,
            prefixes,
            pattern,
            ask,
            ask_budget: ASK_WORK_BUDGET,
            ask_row_limit: MAX_ASK_ROWS,
        })))
    }

    /// The parameters of a gRPC request: metadata `x-jelly-source`, `x-jelly-prefix`,
    /// `x-jelly-pattern` and `x-jelly-ask` (visible ASCII), or the same keys with
    /// `-bin` (binary metadata holding UTF-8, for values with other characters).
    pub fn from_grpc_metadata(md: &MetadataMap) -> Result<FilterParams, FilterError> {
        Ok(FilterParams {
            source: metadata_text(md, "x-jelly-source")?,
            prefix: metadata_text(md, "x-jelly-prefix")?,
            pattern: metadata_text(md, "x-jelly-pattern")?,
            ask: metadata_text(md, "x-jelly-ask")?,
        })
    }
}

/// The text of an ASCII metadata entry `key` or a binary entry `key-bin`.
fn metadata_text(md: &MetadataMap, key: &str) -> Result<Option<String>, FilterError> {
    let bin_key = format!("{key}-bin");
    let err = |key: &str, message: &str| FilterError::Metadata {
        key: key.to_string(),
        message: message.to_string(),
    };
    let ascii = md
        .get(key)
        .map(|v| {
            v.to_str()
                .map(str::to_string)
                .map_err(|_| err(key, "not visible ASCII (use the -bin key for UTF-8)"))
        })
        .transpose()?;
    let binary = md
        .get_bin(bin_key.as_str())
        .map(|v| {
            let bytes = v
                .to_bytes()
                .map_err(|_| err(&bin_key, "not valid base64"))?;
            String::from_utf8(bytes.to_vec()).map_err(|_| err(&bin_key, "not UTF-8"))
        })
        .transpose()?;
    match (ascii, binary) {
        (Some(_), Some(_)) => Err(err(key, &format!("given both as {key} and {bin_key}"))),
        (a, b) => Ok(a.or(b)),
    }
}

/// `source`: a sorted, deduplicated list of ids.
fn parse_sources(value: &str) -> Result<Vec<String>, FilterError> {
    check_len("source", value, MAX_PARAM_BYTES)?;
    let mut ids = Vec::new();
    for id in value.split(',').map(str::trim) {
        if id.is_empty() {
            return Err(invalid(
                "source",
                "empty source id (give one or more ids separated by commas)",
            ));
        }
        ids.push(id.to_string());
    }
    if ids.len() > MAX_LIST_ENTRIES {
        return Err(invalid(
            "source",
            format!("{} ids (at most {MAX_LIST_ENTRIES})", ids.len()),
        ));
    }
    ids.sort();
    ids.dedup();
    Ok(ids)
}

/// `prefix`: a sorted, deduplicated list of absolute IRIs (`<...>` removed).
fn parse_prefixes(value: &str) -> Result<Vec<String>, FilterError> {
    check_len("prefix", value, MAX_PARAM_BYTES)?;
    let mut prefixes = Vec::new();
    for p in value.split_ascii_whitespace() {
        let bare = p
            .strip_prefix('<')
            .and_then(|p| p.strip_suffix('>'))
            .unwrap_or(p);
        oxrdf::NamedNode::new(bare).map_err(|e| {
            invalid(
                "prefix",
                format!("`{p}` is not an absolute IRI prefix: {e}"),
            )
        })?;
        prefixes.push(bare.to_string());
    }
    if prefixes.is_empty() {
        return Err(invalid("prefix", "no prefix given"));
    }
    if prefixes.len() > MAX_LIST_ENTRIES {
        return Err(invalid(
            "prefix",
            format!("{} prefixes (at most {MAX_LIST_ENTRIES})", prefixes.len()),
        ));
    }
    prefixes.sort();
    prefixes.dedup();
    Ok(prefixes)
}

/// Stack of the thread that parses an `ask` query and measures it: the parser
/// recurses once per level of nesting (brackets, `<<`, operators, `UNION`s), which
/// a query of a few kilobytes took past a worker thread's 2 MiB. Only what the query
/// uses is ever touched; 16 KiB of query stays far below this.
const ASK_PARSE_STACK: usize = 256 << 20;
/// Deepest structure accepted in a parsed `ask` query, counted as the nesting of its
/// debug form (one or more levels per level of the query). Evaluating the query
/// recurses as deep; a legitimate filter stays far below.
const MAX_ASK_DEPTH: usize = 96;

/// Most triple patterns (path steps included) in an `ask` query: evaluation joins them
/// one inside the other, and its cost grows faster than their number. A filter
/// rarely needs more than a dozen.
const MAX_ASK_PATTERNS: usize = 64;

/// Whether `p` joins two parts that both read the item and share no variable: a
/// cross product, evaluated in memory (no dataset access, so no work budget spent)
/// at a cost that is the product of the parts' sizes. Parts that do not read the item
/// (`VALUES`, `BIND`) give a few rows and are left alone.
fn has_cross_product(p: &spargebra::algebra::GraphPattern) -> bool {
    use spargebra::algebra::GraphPattern as G;
    match p {
        // OPTIONAL with nothing in common is a cross product too; MINUS with nothing
        // in common removes nothing and costs nothing.
        G::Join { left, right } | G::LeftJoin { left, right, .. } if crosses(left, right) => true,
        // The parser merges adjacent groups into one BGP: patterns in parts that
        // share no variable are a cross product too.
        G::Bgp { patterns } => bgp_parts(patterns) > 1,
        _ => children(p).into_iter().any(has_cross_product),
    }
}

/// The patterns directly inside `p`.
fn children(p: &spargebra::algebra::GraphPattern) -> Vec<&spargebra::algebra::GraphPattern> {
    use spargebra::algebra::GraphPattern as G;
    match p {
        G::Join { left, right }
        | G::LeftJoin { left, right, .. }
        | G::Union { left, right }
        | G::Minus { left, right } => vec![left, right],
        G::Filter { inner, .. }
        | G::Graph { inner, .. }
        | G::Extend { inner, .. }
        | G::OrderBy { inner, .. }
        | G::Project { inner, .. }
        | G::Distinct { inner }
        | G::Reduced { inner }
        | G::Slice { inner, .. }
        | G::Group { inner, .. }
        | G::Service { inner, .. } => vec![inner],
        G::Bgp { .. } | G::Path { .. } | G::Values { .. } => Vec::new(),
    }
}

/// The expressions directly inside `e` (an `EXISTS` pattern is no expression).
fn operands(e: &spargebra::algebra::Expression) -> Vec<&spargebra::algebra::Expression> {
    use spargebra::algebra::Expression as E;
    match e {
        E::Or(a, b)
        | E::And(a, b)
        | E::Equal(a, b)
        | E::SameTerm(a, b)
        | E::Greater(a, b)
        | E::GreaterOrEqual(a, b)
        | E::Less(a, b)
        | E::LessOrEqual(a, b)
        | E::Add(a, b)
        | E::Subtract(a, b)
        | E::Multiply(a, b)
        | E::Divide(a, b) => vec![a, b],
        E::UnaryPlus(a) | E::UnaryMinus(a) | E::Not(a) => vec![a],
        E::If(a, b, c) => vec![a, b, c],
        E::In(a, xs) => std::iter::once(&**a).chain(xs).collect(),
        E::Coalesce(xs) | E::FunctionCall(_, xs) => xs.iter().collect(),
        E::NamedNode(_) | E::Literal(_) | E::Variable(_) | E::Bound(_) | E::Exists(_) => Vec::new(),
    }
}

/// Whether joining `a` and `b` is a cross product of two parts that read the item.
fn crosses(a: &spargebra::algebra::GraphPattern, b: &spargebra::algebra::GraphPattern) -> bool {
    if !reads_item(a) || !reads_item(b) {
        return false;
    }
    let mut left = std::collections::HashSet::new();
    a.on_in_scope_variable(|v| {
        left.insert(v.as_str());
    });
    let mut right = Vec::new();
    b.on_in_scope_variable(|v| right.push(v.as_str()));
    !left.is_empty() && !right.is_empty() && right.iter().all(|v| !left.contains(v))
}

/// Whether a pattern matches statements of the item (a BGP or a path somewhere in it).
fn reads_item(p: &spargebra::algebra::GraphPattern) -> bool {
    use spargebra::algebra::GraphPattern as G;
    match p {
        G::Bgp { patterns } => !patterns.is_empty(),
        G::Path { .. } => true,
        // An aggregate without GROUP BY gives one row, whatever it reads.
        G::Group { variables, .. } if variables.is_empty() => false,
        // `GRAPH ?g` gives a row per graph name of the item, whatever is inside.
        G::Graph {
            name: spargebra::term::NamedNodePattern::Variable(_),
            ..
        } => true,
        _ => children(p).into_iter().any(reads_item),
    }
}

/// How many parts the patterns with variables form, two patterns being in one part
/// when they share a variable (blank nodes of a query are variables).
fn bgp_parts(patterns: &[spargebra::term::TriplePattern]) -> usize {
    use spargebra::term::{NamedNodePattern, TermPattern, TriplePattern};
    fn vars(t: &TriplePattern, out: &mut Vec<String>) {
        fn term(t: &TermPattern, out: &mut Vec<String>) {
            match t {
                TermPattern::Variable(v) => out.push(format!("?{}", v.as_str())),
                TermPattern::BlankNode(b) => out.push(format!("_:{}", b.as_str())),
                TermPattern::Triple(t) => vars(t, out),
                TermPattern::NamedNode(_) | TermPattern::Literal(_) => {}
            }
        }
        term(&t.subject, out);
        if let NamedNodePattern::Variable(v) = &t.predicate {
            out.push(format!("?{}", v.as_str()));
        }
        term(&t.object, out);
    }
    // Each pattern's variables; parts merged while any two share one.
    let mut parts: Vec<std::collections::HashSet<String>> = Vec::new();
    for p in patterns {
        let mut v = Vec::new();
        vars(p, &mut v);
        if v.is_empty() {
            continue;
        }
        let mut merged: std::collections::HashSet<String> = v.into_iter().collect();
        parts.retain(|part| {
            if part.is_disjoint(&merged) {
                true
            } else {
                merged.extend(part.iter().cloned());
                false
            }
        });
        parts.push(merged);
    }
    parts.len()
}

/// How deeply `(`, `[` and `{` nest in `debug`, outside its quoted strings (a debug
/// form escapes `"` and `\` inside them).
fn debug_depth(debug: &str) -> usize {
    let (mut depth, mut max, mut quoted, mut escaped) = (0usize, 0usize, false, false);
    for b in debug.bytes() {
        if quoted {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => quoted = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => quoted = true,
            b'(' | b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// Parses `text` on a thread with a large stack and measures it there, so neither a
/// deep query nor its drop can overflow a worker's stack; what comes back is shallow.
fn parse_ask_deep(text: &str) -> Result<ParsedAsk, FilterError> {
    let text = text.to_string();
    let parse = move || {
        let query = SparqlParser::new()
            .parse_query(&text)
            .map_err(|e| FilterError::AskSyntax {
                message: e.to_string(),
            })?;
        let debug = format!("{query:?}");
        let depth = debug_depth(&debug);
        if depth > MAX_ASK_DEPTH {
            return Err(FilterError::Invalid {
                param: "ask",
                message: format!(
                    "the query nests {depth} levels deep; at most {MAX_ASK_DEPTH} are accepted"
                ),
            });
        }
        // A sequence path `a/b/c/…` is parsed as a flat list of patterns, which the
        // depth above does not see but evaluation joins one inside the other.
        let patterns = debug.matches("TriplePattern {").count() + debug.matches("Path {").count();
        if patterns > MAX_ASK_PATTERNS {
            return Err(FilterError::Invalid {
                param: "ask",
                message: format!(
                    "the query has {patterns} triple patterns (path steps included); at most \
                     {MAX_ASK_PATTERNS} are accepted"
                ),
            });
        }
        if let Query::Ask { pattern, .. } = &query
            && has_cross_product(pattern)
        {
            return Err(FilterError::Invalid {
                param: "ask",
                message: "the query joins groups that share no variable (a cross product, \
                          whose cost is the product of the groups' sizes on every item): \
                          give them a variable in common"
                    .into(),
            });
        }
        if let Query::Ask { pattern, .. } = &query {
            let rows = unread_rows::most_unread_rows(pattern);
            if rows > MAX_UNREAD_ROWS as f64 {
                let rows = if rows.is_finite() && rows < 1e18 {
                    format!("{}", rows as u64)
                } else {
                    format!("{rows:e}")
                };
                return Err(FilterError::Invalid {
                    param: "ask",
                    message: format!(
                        "parts of the query that read nothing from the item (VALUES, \
                         aggregates without GROUP BY) join into up to {rows} rows; at most \
                         {MAX_UNREAD_ROWS} are accepted, since joining them costs no work \
                         budget (join fewer or smaller VALUES tables)"
                    ),
                });
            }
        }
        if calls_service(&query.to_string()) {
            return Err(FilterError::Service);
        }
        let strings = match &query {
            Query::Ask {
                pattern, base_iri, ..
            } => StringBound::of(pattern, base_iri.as_ref().map_or(0, |b| b.as_str().len())),
            _ => StringBound::of(&spargebra::algebra::GraphPattern::default(), 0),
        };
        // Measured on the smallest item that has a term: one statement, one-byte
        // terms. A query over the cap there is over it on every item.
        if let Some(longest) = strings.over_cap(1, 1) {
            return Err(FilterError::Invalid {
                param: "ask",
                message: format!(
                    "{} can build a string of {} even from one-byte terms, over the {} MiB \
                     an ASK evaluation may build (nest fewer growing functions)",
                    longest.built_by.as_deref().unwrap_or("the query"),
                    bytes_text(longest.bytes),
                    MAX_ASK_STRING_BYTES >> 20
                ),
            });
        }
        // The optimizer recurses as deep as the query: planned here too.
        let rows = RowBound::of(&query);
        Ok(ParsedAsk {
            key: ask_key::ask_key(&text, &query, &debug),
            query,
            strings,
            rows,
        })
    };
    let failed = |what: &str| FilterError::Invalid {
        param: "ask",
        message: format!("the query parser {what}"),
    };
    std::thread::Builder::new()
        .name("ask-parse".into())
        .stack_size(ASK_PARSE_STACK)
        .spawn(parse)
        .map_err(|_| failed("could not start"))?
        .join()
        .map_err(|_| failed("failed"))?
}

/// A string bound in bytes, for messages: exact up to 10^18, then in scientific
/// notation (`2.5e30 bytes`), and `∞` once the bound overflows an `f64` (a chain of
/// growing functions can multiply past 1.8e308).
fn bytes_text(bytes: f64) -> String {
    format!("{} bytes", count_text(bytes))
}

/// A bound (bytes, rows) for messages: an integer up to 10^18, then in exponent form
/// (`2.5e30`), and `∞` once it overflows an `f64`.
fn count_text(n: f64) -> String {
    if n.is_finite() && n < 1e18 {
        format!("{}", n as u64)
    } else if n.is_finite() {
        format!("{n:e}")
    } else {
        "∞".to_string()
    }
}

/// Most calls of `SUBSTR`, `REGEX` and `REPLACE` in one `ask` query. Their last
/// argument is optional, and the SPARQL parser reads the first arguments of such a
/// call twice (once for each form), so its time doubles with each one nested in
/// another: 18 nested calls took 12 s in a debug build, 30 would take days. Calls are
/// counted rather than their nesting, so that no string, IRI or comment can hide one.
pub const MAX_ASK_OPTIONAL_ARG_CALLS: usize = 8;

/// Whole-word occurrences of `SUBSTR`, `REGEX` and `REPLACE` (any case) anywhere in
/// `text`: an upper bound of the calls the parser may meet (a word in a string, an IRI
/// or a comment counts too, which only errs on the safe side).
fn optional_arg_calls(text: &str) -> usize {
    let b = text.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut n = 0;
    let mut i = 0;
    while i < b.len() {
        if word(b[i]) && (i == 0 || !word(b[i - 1])) {
            let end = b[i..]
                .iter()
                .position(|&c| !word(c))
                .map_or(b.len(), |k| i + k);
            let w = &text[i..end];
            if ["SUBSTR", "REGEX", "REPLACE"]
                .iter()
                .any(|k| w.eq_ignore_ascii_case(k))
            {
                n += 1;
            }
            i = end;
        } else {
            i += 1;
        }
    }
    n
}

/// A parsed `ask` query, with what bounds its evaluation on an item.
#[derive(Debug)]
struct ParsedAsk {
    query: Query,
    /// What tells it apart from other queries in fan-out group keys.
    key: String,
    /// The strings it can build.
    strings: StringBound,
    /// The rows its plan can produce.
    rows: RowBound,
}

/// `ask`: a parsed SPARQL ASK query, and the bounds of its evaluation.
fn parse_ask(text: &str) -> Result<ParsedAsk, FilterError> {
    check_len("ask", text, MAX_ASK_BYTES)?;
    let calls = optional_arg_calls(text);
    if calls > MAX_ASK_OPTIONAL_ARG_CALLS {
        return Err(FilterError::Invalid {
            param: "ask",
            message: format!(
                "the query names SUBSTR, REGEX or REPLACE {calls} times; at most \
                 {MAX_ASK_OPTIONAL_ARG_CALLS} are accepted (the parser's work doubles with \
                 each of them nested in another)"
            ),
        });
    }
    let parsed = parse_ask_deep(text)?;
    let form = match &parsed.query {
        Query::Ask { .. } => return Ok(parsed),
        Query::Select { .. } => "SELECT",
        Query::Construct { .. } => "CONSTRUCT",
        Query::Describe { .. } => "DESCRIBE",
    };
    Err(FilterError::NotAsk { form })
}

/// Whether the SPARQL text `q` (the parsed query written out again, so keywords are
/// upper case) has a `SERVICE` pattern: the keyword outside IRIs, strings and comments.
fn calls_service(q: &str) -> bool {
    let b = q.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'<' => i += q[i..].find('>').unwrap_or(q.len() - i),
            quote @ (b'"' | b'\'') => {
                i += 1;
                while i < b.len() && b[i] != quote {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'#' => i += q[i..].find('\n').unwrap_or(q.len() - i),
            _ if q[i..].starts_with("SERVICE")
                && (i == 0 || !b[i - 1].is_ascii_alphanumeric())
                && !b
                    .get(i + 7)
                    .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_') =>
            {
                return true;
            }
            _ => {}
        }
        i += 1;
    }
    false
}

/// A compiled filter. Cheap to share between subscriptions (`Arc`).
#[derive(Debug)]
pub struct ItemFilter {
    key: String,
    sources: Option<Vec<String>>,
    prefixes: Option<Vec<String>>,
    pattern: Option<StatementPattern>,
    ask: Option<ParsedAsk>,
    ask_budget: u64,
    /// Most rows (module `row_bound`) an evaluation may produce on one item.
    ask_row_limit: f64,
}

impl ItemFilter {
    /// A canonical text of the filter: equal filters (whatever the order of the listed
    /// sources and prefixes, the names of pattern variables, the spacing of the query)
    /// have equal keys.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// True if checking an item may take long (an `ask` query, which runs up to its
    /// work budget on every item): callers then let other tasks run, and a dropped
    /// request stop, between items.
    pub fn is_costly(&self) -> bool {
        self.ask.is_some()
    }

    /// Whether the item passes; an item the filter cannot be evaluated on is left out
    /// (it is not the subscriber's fault, nor the filter's), and logged.
    pub fn takes(&self, item: &Item) -> bool {
        self.accepts(item).unwrap_or_else(|e| {
            tracing::debug!(offset = item.offset, error = %e, "filter cannot check item; left out");
            false
        })
    }

    /// [`ItemFilter::takes`] for each of `items`, in order, on a blocking thread: for
    /// a costly filter, whose evaluation must hold no async worker. Stops (leaving
    /// the rest without a verdict) once `stopped` is set, between items.
    pub async fn takes_each(
        self: &Arc<Self>,
        items: &[Item],
        stopped: Arc<std::sync::atomic::AtomicBool>,
    ) -> Vec<bool> {
        let (f, items) = (self.clone(), items.to_vec());
        tokio::task::spawn_blocking(move || {
            items
                .iter()
                .take_while(|_| !stopped.load(std::sync::atomic::Ordering::Relaxed))
                .map(|it| f.takes(it))
                .collect()
        })
        .await
        .unwrap_or_default()
    }

    /// [`ItemFilter::takes`] for one item, on a blocking thread (see
    /// [`ItemFilter::takes_each`]).
    pub async fn takes_off_thread(self: &Arc<Self>, item: &Item) -> bool {
        let verdict = self
            .takes_each(std::slice::from_ref(item), Arc::default())
            .await;
        verdict.first().copied().unwrap_or(false)
    }

    /// Whether the item passes every part of the filter. Cheap parts are checked
    /// first: the source (no decoding), then prefixes and the pattern (one decoding
    /// pass, no allocation per statement), then the ASK query.
    pub fn accepts(&self, item: &Item) -> Result<bool, FilterError> {
        if let Some(sources) = &self.sources
            && !sources.contains(&item.source)
        {
            return Ok(false);
        }
        if (self.prefixes.is_some() || self.pattern.is_some()) && !self.scan(item)? {
            return Ok(false);
        }
        match &self.ask {
            Some(ask) => self.ask(ask, item),
            None => Ok(true),
        }
    }

    /// Prefixes and pattern, in one pass over the item's statements.
    fn scan(&self, item: &Item) -> Result<bool, FilterError> {
        let mut need_prefix = self.prefixes.as_deref();
        let mut need_pattern = self.pattern.as_ref();
        let mut dec = Decoder::default();
        let mut cur = dec.frame(&item.frame);
        while let Some(ev) = cur.next_event().map_err(|e| item_error(item, e))? {
            let Event::Statement(st) = ev else { continue };
            if let Some(prefixes) = need_prefix
                && statement_has_prefix(&st, prefixes)
            {
                need_prefix = None;
            }
            if let Some(p) = need_pattern
                && p.matches(&st)
            {
                need_pattern = None;
            }
            if need_prefix.is_none() && need_pattern.is_none() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Evaluates the ASK query on the item's statements.
    fn ask(&self, ask: &ParsedAsk, item: &Item) -> Result<bool, FilterError> {
        let mut dataset = Dataset::new();
        let mut longest_term = 0;
        let mut dec = Decoder::default();
        let mut cur = dec.frame(&item.frame);
        while let Some(ev) = cur.next_event().map_err(|e| item_error(item, e))? {
            if let Event::Statement(st) = ev
                && let Ok(q) = st.to_oxrdf_quad()
            {
                let q = as_evaluated(q);
                let graph = match q.graph_name.as_ref() {
                    oxrdf::GraphNameRef::NamedNode(n) => n.as_str().len(),
                    oxrdf::GraphNameRef::BlankNode(b) => b.as_str().len(),
                    oxrdf::GraphNameRef::DefaultGraph => 0,
                };
                longest_term = [
                    term_bytes(q.subject.as_ref().into()),
                    q.predicate.as_str().len(),
                    term_bytes(q.object.as_ref()),
                    graph,
                ]
                .into_iter()
                .fold(longest_term, usize::max);
                dataset.insert(q.as_ref());
            }
        }
        // Checked before evaluating: a string past the cap would be built inside one
        // function call, where neither the budget nor the cancellation can stop it.
        if let Some(longest) = ask.strings.over_cap(longest_term, dataset.len()) {
            return Err(FilterError::Item {
                offset: item.offset,
                message: format!(
                    "ASK evaluation failed: {BudgetExceeded} ({} could build a string of {} \
                     from its {longest_term}-byte term, over the {} MiB cap)",
                    longest.built_by.as_deref().unwrap_or("the query"),
                    bytes_text(longest.bytes),
                    MAX_ASK_STRING_BYTES >> 20
                ),
            });
        }
        // Checked before evaluating too: joining rows spends no budget (module
        // `row_bound`).
        let rows = ask.rows.work(&dataset);
        if rows > self.ask_row_limit {
            return Err(FilterError::Item {
                offset: item.offset,
                message: format!(
                    "ASK evaluation failed: {BudgetExceeded} (its joins, paths and EXISTS \
                     could produce up to {} rows on this item's {} statements, over the {} \
                     an evaluation may produce)",
                    count_text(rows),
                    dataset.len(),
                    count_text(self.ask_row_limit)
                ),
            });
        }
        let budget = Budget::new(self.ask_budget);
        let data = Budgeted {
            inner: &dataset,
            budget: &budget,
        };
        let evaluator = QueryEvaluator::new().with_cancellation_token(budget.stop.clone());
        let answer = evaluator.prepare(&ask.query).execute(data);
        // spareval takes a failed conversion inside an expression for an expression
        // error (a FILTER false, a COALESCE moving on) and may still answer: an
        // answer given after the budget ran out is not trusted.
        if budget.ran_out.get() {
            return Err(FilterError::Item {
                offset: item.offset,
                message: format!("ASK evaluation failed: {BudgetExceeded}"),
            });
        }
        match answer {
            Ok(QueryResults::Boolean(b)) => Ok(b),
            Ok(_) => Err(FilterError::Item {
                offset: item.offset,
                message: "the ASK query gave no boolean".into(),
            }),
            Err(e) => Err(FilterError::Item {
                offset: item.offset,
                message: format!("ASK evaluation failed: {e}"),
            }),
        }
    }

    #[cfg(test)]
    fn with_ask_budget(mut self, budget: u64) -> ItemFilter {
        self.ask_budget = budget;
        self
    }

    #[cfg(test)]
    fn with_ask_row_limit(mut self, rows: f64) -> ItemFilter {
        self.ask_row_limit = rows;
        self
    }
}

/// The quad in the form the SPARQL evaluator compares terms in:
///
/// - language tags in lower case, as the SPARQL parser writes the query's (tags are
///   case-insensitive; `"x"@en-US` in a query must match the item's);
/// - the literals inside a triple term in the canonical form of their value
///   (`"042"^^xsd:integer` as `"42"^^xsd:integer`): spareval builds every triple term
///   it compares from values, the `<<( s p o )>>` of a query as well as the one a
///   `<<( ?s ?p ?o )>>` is matched against, so a stored triple term holding another
///   form would match no triple term of any query.
fn as_evaluated(q: oxrdf::Quad) -> oxrdf::Quad {
    let q = lower_case_tags(q);
    match q.object {
        object @ oxrdf::Term::Triple(_) => oxrdf::Quad {
            object: spareval::ExpressionTerm::from(object).into(),
            ..q
        },
        _ => q,
    }
}

/// The quad with its language tags in lower case (see [`as_evaluated`]).
fn lower_case_tags(q: oxrdf::Quad) -> oxrdf::Quad {
    fn term(t: oxrdf::Term) -> oxrdf::Term {
        match t {
            oxrdf::Term::Literal(l) => match l.language() {
                Some(tag) if tag.bytes().any(|b| b.is_ascii_uppercase()) => {
                    let tag = tag.to_ascii_lowercase();
                    let (value, _, _, direction) = l.destruct();
                    let lit = match direction {
                        Some(d) => {
                            oxrdf::Literal::new_directional_language_tagged_literal_unchecked(
                                value, tag, d,
                            )
                        }
                        None => oxrdf::Literal::new_language_tagged_literal_unchecked(value, tag),
                    };
                    oxrdf::Term::Literal(lit)
                }
                _ => oxrdf::Term::Literal(l),
            },
            oxrdf::Term::Triple(tr) => {
                let tr = *tr;
                oxrdf::Term::Triple(Box::new(oxrdf::Triple {
                    subject: tr.subject,
                    predicate: tr.predicate,
                    object: term(tr.object),
                }))
            }
            t => t,
        }
    }
    oxrdf::Quad {
        object: term(q.object),
        ..q
    }
}

fn item_error(item: &Item, e: impl std::fmt::Display) -> FilterError {
    FilterError::Item {
        offset: item.offset,
        message: e.to_string(),
    }
}

/// Whether an IRI of the statement (any position, datatypes, quoted triples) starts
/// with one of the prefixes.
fn statement_has_prefix(st: &StatementRef<'_>, prefixes: &[String]) -> bool {
    let hit = |iri: &str| prefixes.iter().any(|p| iri.starts_with(p.as_str()));
    term_has_prefix(st.subject, &hit)
        || term_has_prefix(st.predicate, &hit)
        || term_has_prefix(st.object, &hit)
        || st.graph.is_some_and(|g| term_has_prefix(g, &hit))
}

fn term_has_prefix(t: TermRef<'_>, hit: &impl Fn(&str) -> bool) -> bool {
    match t {
        TermRef::Iri(i) => hit(i),
        // `"v"^^xsd:string` is the simple literal `"v"`, whose datatype is implicit:
        // whether a publisher wrote it must not matter (rebased frames keep it,
        // re-encoded ones and text bodies drop it).
        TermRef::Literal(LiteralRef {
            kind: LiteralKind::Typed(dt),
            ..
        }) => dt != jelly::term::XSD_STRING && hit(dt),
        TermRef::Triple(tr) => (0..3).any(|i| term_has_prefix(tr.term(i), hit)),
        TermRef::BlankNode(_) | TermRef::Literal(_) | TermRef::DefaultGraph => false,
    }
}

/// One position of a [`StatementPattern`].
#[derive(Debug, Clone, PartialEq)]
enum PatternTerm {
    /// `*`, or a variable used once.
    Any,
    /// A variable used in more than one position: slot of its binding.
    Var(usize),
    /// `_:name`: any blank node; slot of its binding.
    Blank(usize),
    /// A term that must be equal.
    Term(oxrdf::Term),
}

/// A parsed `pattern`: three positions, and the graph when a fourth is given.
#[derive(Debug, Clone, PartialEq)]
struct StatementPattern {
    terms: Vec<PatternTerm>,
}

impl StatementPattern {
    fn parse(text: &str) -> Result<StatementPattern, FilterError> {
        check_len("pattern", text, MAX_PARAM_BYTES)?;
        let tokens = split_terms(text)?;
        if !(3..=4).contains(&tokens.len()) {
            return Err(invalid(
                "pattern",
                format!(
                    "expected 3 or 4 terms (subject predicate object [graph]), found {}",
                    tokens.len()
                ),
            ));
        }
        // Variables and blank nodes get slots in order of first use; a variable used
        // once is a wildcard (so `?s <p> ?o` and `* <p> *` are the same filter).
        let mut names: Vec<(bool, String)> = Vec::new();
        let mut terms = Vec::with_capacity(tokens.len());
        for (i, &(col, tok)) in tokens.iter().enumerate() {
            let bad = |m: String| {
                invalid(
                    "pattern",
                    format!("term {} `{tok}` (column {col}): {m}", i + 1),
                )
            };
            let t = if tok == "*" {
                PatternTerm::Any
            } else if tok.starts_with('?') || tok.starts_with('$') {
                let v = oxrdf::Variable::from_str(tok).map_err(|e| bad(e.to_string()))?;
                PatternTerm::Var(slot(&mut names, false, v.as_str()))
            } else if tok.starts_with("_:") {
                let b = oxrdf::BlankNode::from_str(tok).map_err(|e| bad(e.to_string()))?;
                PatternTerm::Blank(slot(&mut names, true, b.as_str()))
            } else {
                if tok.starts_with("<<(") && has_wildcard_inside(tok) {
                    return Err(bad(
                        "a quoted triple in a pattern is matched exactly: give its three \
                         terms (IRIs and literals), not `*`, `?name` or `_:name` (blank node \
                         labels are the publisher's, so they are never matched by label)"
                            .into(),
                    ));
                }
                let t = oxrdf::Term::from_str(tok).map_err(|e| bad(e.to_string()))?;
                if i == 3 && !matches!(t, oxrdf::Term::NamedNode(_)) {
                    return Err(bad(
                        "a graph name is an IRI, a blank node or a wildcard".into()
                    ));
                }
                PatternTerm::Term(t)
            };
            terms.push(t);
        }
        // Renumber slots densely, turning single-use variables into wildcards.
        let uses = |s: usize| {
            terms
                .iter()
                .filter(|t| matches!(t, PatternTerm::Var(x) | PatternTerm::Blank(x) if *x == s))
                .count()
        };
        let mut renumber = Vec::new();
        let mut out = Vec::with_capacity(terms.len());
        for t in &terms {
            out.push(match t {
                PatternTerm::Var(s) if uses(*s) == 1 => PatternTerm::Any,
                PatternTerm::Var(s) | PatternTerm::Blank(s) => {
                    let n = match renumber.iter().position(|x| x == s) {
                        Some(n) => n,
                        None => {
                            renumber.push(*s);
                            renumber.len() - 1
                        }
                    };
                    if matches!(t, PatternTerm::Var(_)) {
                        PatternTerm::Var(n)
                    } else {
                        PatternTerm::Blank(n)
                    }
                }
                other => other.clone(),
            });
        }
        Ok(StatementPattern { terms: out })
    }

    /// The pattern in canonical syntax (slots as `?vN` / `_:bN`).
    fn canonical(&self) -> String {
        let parts: Vec<String> = self
            .terms
            .iter()
            .map(|t| match t {
                PatternTerm::Any => "*".to_string(),
                PatternTerm::Var(n) => format!("?v{n}"),
                PatternTerm::Blank(n) => format!("_:b{n}"),
                PatternTerm::Term(t) => t.to_string(),
            })
            .collect();
        parts.join(" ")
    }

    fn matches(&self, st: &StatementRef<'_>) -> bool {
        let graph = match (self.terms.len(), st.graph) {
            (3, _) => None,
            (_, None | Some(TermRef::DefaultGraph)) => return false,
            (_, Some(g)) => Some(g),
        };
        let values = [Some(st.subject), Some(st.predicate), Some(st.object), graph];
        let mut bound: [Option<TermRef<'_>>; 4] = [None; 4];
        for (p, v) in self.terms.iter().zip(values) {
            let Some(v) = v else { continue };
            let ok = match p {
                PatternTerm::Any => true,
                PatternTerm::Term(t) => term_eq(t.as_ref(), v),
                PatternTerm::Blank(_) if !matches!(v, TermRef::BlankNode(_)) => false,
                PatternTerm::Var(s) | PatternTerm::Blank(s) => match bound[*s] {
                    Some(b) => same_term(b, v),
                    None => {
                        bound[*s] = Some(v);
                        true
                    }
                },
            };
            if !ok {
                return false;
            }
        }
        true
    }
}

/// The slot of a variable (`blank == false`) or blank node name, added when new.
fn slot(names: &mut Vec<(bool, String)>, blank: bool, name: &str) -> usize {
    match names.iter().position(|(b, n)| *b == blank && n == name) {
        Some(i) => i,
        None => {
            names.push((blank, name.to_string()));
            names.len() - 1
        }
    }
}

/// Splits a pattern into its terms: `(column, text)`, column counted in characters
/// from 1. Only finds where terms end; each term is then parsed by oxrdf.
fn split_terms(text: &str) -> Result<Vec<(usize, &str)>, FilterError> {
    let mut out = Vec::new();
    let mut pos = 0;
    loop {
        let rest = &text[pos..];
        let trimmed = rest.trim_start();
        pos += rest.len() - trimmed.len();
        if trimmed.is_empty() {
            return Ok(out);
        }
        let col = text[..pos].chars().count() + 1;
        let len = term_len(trimmed, 0).map_err(|m| {
            invalid(
                "pattern",
                format!("term {} (column {col}): {m}", out.len() + 1),
            )
        })?;
        out.push((col, &trimmed[..len]));
        pos += len;
        if out.len() > 4 {
            return Err(invalid(
                "pattern",
                "more than 4 terms (subject predicate object [graph])",
            ));
        }
    }
}

/// True if the quoted triple `tok` (as split by [`term_len`]) holds a `*` or a
/// variable as one of its terms, at any depth.
fn has_wildcard_inside(tok: &str) -> bool {
    let inner = tok
        .strip_prefix("<<(")
        .and_then(|t| t.strip_suffix(")>>"))
        .unwrap_or(tok);
    let mut rest = inner;
    loop {
        let t = rest.trim_start();
        if t.is_empty() {
            return false;
        }
        if t.starts_with('*') || t.starts_with('?') || t.starts_with('$') || t.starts_with("_:") {
            return true;
        }
        let Ok(n) = term_len(t, 0) else {
            return false;
        };
        if t.starts_with("<<(") && has_wildcard_inside(&t[..n]) {
            return true;
        }
        rest = &t[n..];
    }
}

/// Byte length of the term at the start of `s` (not empty, no leading space).
fn term_len(s: &str, depth: usize) -> Result<usize, String> {
    let b = s.as_bytes();
    if let Some(inner) = s.strip_prefix("<<(") {
        if depth >= MAX_PATTERN_NESTING {
            return Err(format!(
                "quoted triples nested deeper than {MAX_PATTERN_NESTING}"
            ));
        }
        let mut i = 3;
        let mut rest = inner;
        loop {
            let t = rest.trim_start();
            i += rest.len() - t.len();
            if t.starts_with(")>>") {
                return Ok(i + 3);
            }
            if t.is_empty() {
                return Err("`<<(` without `)>>`".into());
            }
            let n = term_len(t, depth + 1)?;
            i += n;
            rest = &t[n..];
        }
    }
    match b[0] {
        b'<' => s
            .find('>')
            .map(|e| e + 1)
            .ok_or_else(|| "IRI without closing `>`".to_string()),
        b'"' => {
            let mut i = 1;
            loop {
                match b.get(i) {
                    None => return Err("literal without closing quote".into()),
                    Some(b'\\') => i += 2,
                    Some(b'"') => {
                        i += 1;
                        break;
                    }
                    Some(_) => i += 1,
                }
            }
            if b.get(i) == Some(&b'@') {
                i += 1;
                while b
                    .get(i)
                    .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'-')
                {
                    i += 1;
                }
            } else if s[i..].starts_with("^^<") {
                let end = s[i..]
                    .find('>')
                    .ok_or_else(|| "datatype IRI without closing `>`".to_string())?;
                i += end + 1;
            }
            Ok(i)
        }
        _ => Ok(s
            .find(|c: char| c.is_whitespace() || c == ')')
            .unwrap_or(s.len())
            .max(1)),
    }
}

/// Whether an oxrdf term (from a pattern) equals a stored term.
fn term_eq(p: oxrdf::TermRef<'_>, t: TermRef<'_>) -> bool {
    match (p, t) {
        (oxrdf::TermRef::NamedNode(n), TermRef::Iri(i)) => n.as_str() == i,
        (oxrdf::TermRef::BlankNode(n), TermRef::BlankNode(b)) => n.as_str() == b,
        (oxrdf::TermRef::Literal(l), TermRef::Literal(j)) => literal_eq(l, j),
        (oxrdf::TermRef::Triple(pt), TermRef::Triple(jt)) => triple_eq(pt, jt),
        _ => false,
    }
}

fn triple_eq(p: &oxrdf::Triple, t: TripleRef<'_>) -> bool {
    term_eq(p.subject.as_ref().into(), t.subject())
        && term_eq(p.predicate.as_ref().into(), t.predicate())
        && term_eq(p.object.as_ref(), t.object())
}

/// Literal equality across the two models: a simple literal is `xsd:string`; language
/// tags compare case-insensitively; Jelly carries a base direction as `lang--ltr`.
fn literal_eq(l: oxrdf::LiteralRef<'_>, j: LiteralRef<'_>) -> bool {
    if l.value() != j.lex {
        return false;
    }
    match j.kind {
        LiteralKind::Simple => l.language().is_none() && l.datatype() == oxrdf::vocab::xsd::STRING,
        LiteralKind::Typed(dt) => l.language().is_none() && l.datatype().as_str() == dt,
        LiteralKind::Lang(tag) => {
            let Some(lang) = l.language() else {
                return false;
            };
            let (tag, dir) = lang_and_direction(tag);
            tag.eq_ignore_ascii_case(lang) && dir == l.direction()
        }
    }
}

/// A Jelly language tag split into the tag and the base direction it carries as
/// `lang--ltr` / `lang--rtl`.
fn lang_and_direction(tag: &str) -> (&str, Option<BaseDirection>) {
    match tag.rsplit_once("--") {
        Some((t, "ltr")) => (t, Some(BaseDirection::Ltr)),
        Some((t, "rtl")) => (t, Some(BaseDirection::Rtl)),
        _ => (tag, None),
    }
}

/// Whether two stored terms are one RDF term, as [`literal_eq`] compares a pattern's
/// term with a stored one: language tags in any case, `"v"^^xsd:string` the simple
/// literal `"v"`. A variable used twice in a pattern binds terms, not their spelling.
fn same_term(a: TermRef<'_>, b: TermRef<'_>) -> bool {
    fn datatype<'a>(k: LiteralKind<'a>) -> Option<&'a str> {
        match k {
            LiteralKind::Simple => Some(jelly::term::XSD_STRING),
            LiteralKind::Typed(dt) => Some(dt),
            LiteralKind::Lang(_) => None,
        }
    }
    match (a, b) {
        (TermRef::Literal(x), TermRef::Literal(y)) => {
            x.lex == y.lex
                && match (x.kind, y.kind) {
                    (LiteralKind::Lang(s), LiteralKind::Lang(t)) => {
                        let ((s, sd), (t, td)) = (lang_and_direction(s), lang_and_direction(t));
                        s.eq_ignore_ascii_case(t) && sd == td
                    }
                    (k, l) => datatype(k).is_some() && datatype(k) == datatype(l),
                }
        }
        (TermRef::Triple(x), TermRef::Triple(y)) => (0..3).all(|i| same_term(x.term(i), y.term(i))),
        _ => a == b,
    }
}

/// An item's dataset with a work budget: every statement visited and every term
/// converted by the evaluator spends from it; once it runs out the evaluation fails.
struct Budgeted<'a> {
    inner: &'a Dataset,
    budget: &'a Budget,
}

/// What one ASK evaluation may still spend.
struct Budget {
    left: Cell<u64>,
    /// Set once a spending was refused: whatever the evaluator answers after that is
    /// not trusted (it takes a failed conversion in an expression for an expression
    /// error, and goes on).
    ran_out: Cell<bool>,
    /// Cancelled once the budget ran out, so that the evaluator stops at its next
    /// statement visit instead of going on with expressions that fail.
    stop: spareval::CancellationToken,
}

impl Budget {
    fn new(units: u64) -> Budget {
        Budget {
            left: Cell::new(units),
            ran_out: Cell::new(false),
            stop: spareval::CancellationToken::new(),
        }
    }

    fn spend(&self, units: u64) -> Result<(), BudgetExceeded> {
        match self.left.get().checked_sub(units) {
            Some(left) if !self.ran_out.get() => {
                self.left.set(left);
                Ok(())
            }
            _ => {
                self.ran_out.set(true);
                self.stop.cancel();
                Err(BudgetExceeded)
            }
        }
    }
}

/// Bytes of term text one work unit pays for when a term is converted (copied): one
/// unit for a short term, and a large literal converted on every row of a join runs
/// out of the budget after [`ASK_WORK_BUDGET`] × this many bytes (128 MiB) instead of
/// copying gigabytes.
const CONVERSION_BYTES_PER_UNIT: usize = 64;

/// Work units of converting `t`: one, plus one per [`CONVERSION_BYTES_PER_UNIT`]
/// bytes of its text.
fn conversion_units(t: oxrdf::TermRef<'_>) -> u64 {
    1 + (term_bytes(t) / CONVERSION_BYTES_PER_UNIT) as u64
}

/// Bytes of `t`'s text: an IRI, a blank node label, a literal's value with its
/// language tag or datatype IRI, or the sum of a triple term's parts.
fn term_bytes(t: oxrdf::TermRef<'_>) -> usize {
    match t {
        oxrdf::TermRef::NamedNode(n) => n.as_str().len(),
        oxrdf::TermRef::BlankNode(b) => b.as_str().len(),
        oxrdf::TermRef::Literal(l) => {
            l.value().len() + l.language().map_or(l.datatype().as_str().len(), str::len)
        }
        oxrdf::TermRef::Triple(tr) => {
            term_bytes(tr.subject.as_ref().into())
                + tr.predicate.as_str().len()
                + term_bytes(tr.object.as_ref())
        }
    }
}

/// The ASK evaluation ran out of its work budget.
#[derive(Debug, thiserror::Error)]
#[error("the query needs more than its work budget on this item")]
struct BudgetExceeded;

type InnerTerm<'a> = <&'a Dataset as QueryableDataset<'a>>::InternalTerm;

impl<'a> QueryableDataset<'a> for Budgeted<'a> {
    type InternalTerm = InnerTerm<'a>;
    type Error = BudgetExceeded;

    fn internal_quads_for_pattern(
        &self,
        subject: Option<&Self::InternalTerm>,
        predicate: Option<&Self::InternalTerm>,
        object: Option<&Self::InternalTerm>,
        graph_name: Option<Option<&Self::InternalTerm>>,
    ) -> impl Iterator<Item = Result<InternalQuad<Self::InternalTerm>, BudgetExceeded>> + use<'a>
    {
        let budget = self.budget;
        self.inner
            .internal_quads_for_pattern(subject, predicate, object, graph_name)
            .map(move |r| {
                budget.spend(1)?;
                match r {
                    Ok(q) => Ok(q),
                    Err(never) => match never {},
                }
            })
    }

    fn internalize_term(&self, term: oxrdf::Term) -> Result<Self::InternalTerm, BudgetExceeded> {
        self.budget.spend(conversion_units(term.as_ref()))?;
        match self.inner.internalize_term(term) {
            Ok(t) => Ok(t),
            Err(never) => match never {},
        }
    }

    fn externalize_term(&self, term: Self::InternalTerm) -> Result<oxrdf::Term, BudgetExceeded> {
        self.budget
            .spend(conversion_units(oxrdf::TermRef::from(&term)))?;
        match self.inner.externalize_term(term) {
            Ok(t) => Ok(t),
            Err(never) => match never {},
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use jelly::{Encoder, PhysicalType, Statement, StreamOptions, Term};

    fn iri(s: &str) -> Term {
        Term::Iri(s.to_string())
    }

    fn lit(lex: &str, kind: jelly::OwnedLiteralKind) -> Term {
        Term::Literal(jelly::Literal {
            lex: lex.to_string(),
            kind,
        })
    }

    fn st(s: Term, p: Term, o: Term, g: Option<Term>) -> Statement {
        Statement {
            subject: s,
            predicate: p,
            object: o,
            graph: g,
        }
    }

    const RDF_TYPE: &str = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type";
    const SOSA_OBS: &str = "http://www.w3.org/ns/sosa/Observation";
    const SOSA_SENSOR: &str = "http://www.w3.org/ns/sosa/madeBySensor";
    const SOSA_RESULT: &str = "http://www.w3.org/ns/sosa/hasResult";
    const OM: &str = "http://www.ontology-of-units-of-measure.org/resource/om-2/";
    const OM_MEASURE: &str = "http://www.ontology-of-units-of-measure.org/resource/om-2/Measure";
    const OM_VALUE: &str =
        "http://www.ontology-of-units-of-measure.org/resource/om-2/hasNumericalValue";
    const XSD_INT: &str = "http://www.w3.org/2001/XMLSchema#integer";

    /// An item holding `statements`, encoded as the server stores items.
    fn item(source: &str, statements: &[Statement]) -> Item {
        let opts = StreamOptions::small()
            .with_physical_type(PhysicalType::Quads)
            .with_rdf_star(true)
            .with_generalized_statements(true);
        let mut enc = Encoder::new(opts).unwrap();
        for s in statements {
            enc.add(s.as_ref()).unwrap();
        }
        Item {
            offset: 7,
            timestamp_ms: 0,
            frame: Bytes::from(enc.finish_frame()),
            statements: statements.len() as u32,
            source: source.to_string(),
            headers: Vec::new(),
        }
    }

    fn filter(f: impl FnOnce(&mut FilterParams)) -> Result<Arc<ItemFilter>, FilterError> {
        let mut p = FilterParams::default();
        f(&mut p);
        Ok(p.build()?.expect("a filter was given"))
    }

    fn pattern(p: &str) -> Arc<ItemFilter> {
        filter(|f| f.pattern = Some(p.into())).unwrap()
    }

    fn sample() -> Item {
        item(
            "sensor-1",
            &[
                st(
                    iri("http://ex.org/s"),
                    iri("http://schema.org/name"),
                    lit("Anna", jelly::OwnedLiteralKind::Lang("en".into())),
                    None,
                ),
                st(
                    iri("http://ex.org/s"),
                    iri("http://ex.org/age"),
                    lit(
                        "42",
                        jelly::OwnedLiteralKind::Typed(
                            "http://www.w3.org/2001/XMLSchema#integer".into(),
                        ),
                    ),
                    Some(iri("http://ex.org/g")),
                ),
                st(
                    Term::BlankNode("b1".into()),
                    iri("http://ex.org/knows"),
                    Term::BlankNode("b1".into()),
                    None,
                ),
            ],
        )
    }

    #[test]
    fn no_parameters_is_no_filter() {
        assert!(FilterParams::default().build().unwrap().is_none());
    }

    #[test]
    fn sources_any_of_a_list() {
        let it = sample();
        let f = filter(|f| f.source = Some("a, sensor-1".into())).unwrap();
        assert!(f.accepts(&it).unwrap());
        let f = filter(|f| f.source = Some("sensor-2".into())).unwrap();
        assert!(!f.accepts(&it).unwrap());
        let e = filter(|f| f.source = Some("a,,b".into())).unwrap_err();
        assert_eq!(e.parameter(), Some("source"));
        assert!(e.to_string().contains("empty source id"), "{e}");
    }

    #[test]
    fn prefixes_in_any_position_and_datatypes() {
        let it = sample();
        let ok = |p: &str| {
            filter(|f| f.prefix = Some(p.into()))
                .unwrap()
                .accepts(&it)
                .unwrap()
        };
        assert!(ok("http://schema.org/"));
        assert!(ok("<http://nowhere.org/> <http://ex.org/g>"));
        assert!(ok("http://www.w3.org/2001/XMLSchema#"));
        assert!(!ok("http://nowhere.org/"));
        // Literal values are not IRIs.
        let text = item(
            "",
            &[st(
                iri("http://a/s"),
                iri("http://a/p"),
                lit("http://schema.org/x", jelly::OwnedLiteralKind::Simple),
                None,
            )],
        );
        let f = filter(|f| f.prefix = Some("http://schema.org/".into())).unwrap();
        assert!(!f.accepts(&text).unwrap());
        let e = filter(|f| f.prefix = Some("not an iri".into())).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("prefix: `not` is not an absolute IRI"),
            "{e}"
        );
    }

    /// `"v"^^xsd:string` is the simple literal `"v"` (RDF 1.1): whether a publisher's
    /// frame writes the datatype (stored as sent when rebased) or not (text bodies, and
    /// frames re-encoded, drop it) must not change what `prefix` sees.
    #[test]
    fn prefixes_skip_an_explicit_xsd_string_datatype() {
        let xsd_string = "http://www.w3.org/2001/XMLSchema#string";
        // The encoder drops an xsd:string datatype, so the frame is written with
        // another datatype of the same length and patched.
        let stand_in = "http://www.w3.org/2001/XMLSchema#strinX";
        let mut it = item(
            "",
            &[st(
                iri("http://a/s"),
                iri("http://a/p"),
                lit("v", jelly::OwnedLiteralKind::Typed(stand_in.into())),
                None,
            )],
        );
        let mut frame = it.frame.to_vec();
        let at = frame
            .windows(stand_in.len())
            .position(|w| w == stand_in.as_bytes())
            .unwrap();
        frame[at..at + stand_in.len()].copy_from_slice(xsd_string.as_bytes());
        it.frame = Bytes::from(frame);
        let mut dec = Decoder::default();
        let mut cur = dec.frame(&it.frame);
        let s = loop {
            if let Event::Statement(s) = cur.next_event().unwrap().unwrap() {
                break s;
            }
        };
        assert_eq!(
            s.object.to_owned(),
            lit("v", jelly::OwnedLiteralKind::Typed(xsd_string.into()))
        );
        let f = filter(|f| f.prefix = Some("http://www.w3.org/2001/XMLSchema#".into())).unwrap();
        assert!(!f.accepts(&it).unwrap());
        // The same literal as the pattern and the ASK query see it: `"v"`.
        assert!(pattern("* * \"v\"").accepts(&it).unwrap());
        let f =
            filter(|f| f.ask = Some("ASK { ?s ?p ?o FILTER(isLiteral(?o) && ?o = \"v\") }".into()))
                .unwrap();
        assert!(f.accepts(&it).unwrap());
    }

    #[test]
    fn prefixes_inside_quoted_triples() {
        let quoted = Term::Triple(Box::new(jelly::Triple {
            subject: iri("http://a/s"),
            predicate: iri("http://vocab.org/said"),
            object: iri("http://a/o"),
        }));
        let it = item(
            "",
            &[st(
                quoted,
                iri("http://a/certainty"),
                iri("http://a/high"),
                None,
            )],
        );
        let f = filter(|f| f.prefix = Some("http://vocab.org/".into())).unwrap();
        assert!(f.accepts(&it).unwrap());
        let f = pattern("<<( <http://a/s> <http://vocab.org/said> <http://a/o> )>> * *");
        assert!(f.accepts(&it).unwrap());
        let f = pattern("<<( <http://a/s> <http://vocab.org/said> <http://a/x> )>> * *");
        assert!(!f.accepts(&it).unwrap());
    }

    #[test]
    fn patterns_with_literals_wildcards_and_graphs() {
        let it = sample();
        let m = |p: &str| pattern(p).accepts(&it).unwrap();
        assert!(m("<http://ex.org/s> <http://schema.org/name> \"Anna\"@en"));
        assert!(m("* <http://schema.org/name> \"Anna\"@EN"));
        assert!(!m("* <http://schema.org/name> \"Anna\""));
        assert!(!m("* <http://schema.org/name> \"Anna\"@de"));
        assert!(m("?s * \"42\"^^<http://www.w3.org/2001/XMLSchema#integer>"));
        assert!(!m("?s * \"42\""));
        // A graph term: only statements in a named graph.
        assert!(m("* <http://ex.org/age> * <http://ex.org/g>"));
        assert!(m("* <http://ex.org/age> * ?g"));
        assert!(!m("* <http://schema.org/name> * ?g"));
        // Repeated variables and blank nodes.
        assert!(m("?x <http://ex.org/knows> ?x"));
        assert!(!m("?x <http://schema.org/name> ?x"));
        assert!(m("_:a * _:a"));
        assert!(!m("_:a <http://schema.org/name> *"));
    }

    /// A variable in two positions binds one RDF term, however it is written: a
    /// language tag in another case, `xsd:string` written out or not (as an exact
    /// term in the pattern matches them).
    #[test]
    fn pattern_variables_bind_terms_not_spellings() {
        let quoted = |o: Term| {
            Term::Triple(Box::new(jelly::Triple {
                subject: iri("http://a/s"),
                predicate: iri("http://a/p"),
                object: o,
            }))
        };
        let en = |tag: &str| lit("v", jelly::OwnedLiteralKind::Lang(tag.into()));
        let same = [
            (quoted(en("en-US")), quoted(en("EN-us"))),
            (en("en"), en("EN")),
            (
                lit("v", jelly::OwnedLiteralKind::Simple),
                lit(
                    "v",
                    jelly::OwnedLiteralKind::Typed(
                        "http://www.w3.org/2001/XMLSchema#string".into(),
                    ),
                ),
            ),
        ];
        for (a, b) in same {
            let it = item("", &[st(a.clone(), iri("http://a/q"), b.clone(), None)]);
            assert!(
                pattern("?x <http://a/q> ?x").accepts(&it).unwrap(),
                "{a:?} {b:?}"
            );
        }
        let it = item("", &[st(en("en"), iri("http://a/q"), en("de"), None)]);
        assert!(!pattern("?x <http://a/q> ?x").accepts(&it).unwrap());
    }

    #[test]
    fn pattern_errors_name_the_term() {
        let e = |p: &str| {
            filter(|f| f.pattern = Some(p.into()))
                .unwrap_err()
                .to_string()
        };
        assert!(e("<http://a> <http://b>").contains("expected 3 or 4 terms"));
        assert!(e("<a> <b> <c> <d> <e>").contains("more than 4 terms"));
        let m = e("* <http://b * *");
        assert!(m.starts_with("pattern: term 2"), "{m}");
        let m = e("* * \"open");
        assert!(
            m.contains("term 3 (column 5)") && m.contains("closing quote"),
            "{m}"
        );
        let m = e("* * * \"lit\"");
        assert!(m.contains("graph name"), "{m}");
        let m = e("?a-b * *");
        assert!(m.starts_with("pattern: term 1 `?a-b` (column 1)"), "{m}");
        let m = e("* * <not an iri>");
        assert!(m.starts_with("pattern:"), "{m}");
    }

    #[test]
    fn equal_filters_have_equal_keys() {
        let k = |f: &FilterParams| f.build().unwrap().unwrap().key().to_string();
        let a = FilterParams {
            source: Some("b,a".into()),
            prefix: Some("<http://x.org/> http://y.org/".into()),
            pattern: Some("?s <http://p> ?o".into()),
            ask: Some("ASK { ?s ?p ?o }".into()),
        };
        let b = FilterParams {
            source: Some("a, b, a".into()),
            prefix: Some("http://y.org/ http://x.org/".into()),
            pattern: Some("*   <http://p>   ?anything".into()),
            ask: Some("ask   where {?s ?p ?o}".into()),
        };
        assert_eq!(k(&a), k(&b));
        let c = FilterParams {
            pattern: Some("?s <http://p> ?s".into()),
            ..a.clone()
        };
        assert_ne!(k(&a), k(&c));
        let d = FilterParams {
            source: Some("a".into()),
            ..FilterParams::default()
        };
        let e = FilterParams {
            prefix: Some("a:".into()),
            ..FilterParams::default()
        };
        assert_ne!(k(&d), k(&e));
    }

    #[test]
    fn ask_matches_and_does_not() {
        let it = sample();
        let ask = |q: &str| {
            filter(|f| f.ask = Some(q.into()))
                .unwrap()
                .accepts(&it)
                .unwrap()
        };
        assert!(ask("ASK { ?s <http://schema.org/name> \"Anna\"@en }"));
        assert!(!ask("ASK { ?s <http://schema.org/name> \"Bob\"@en }"));
        // Quads in a named graph are in that graph, not in the default graph.
        assert!(!ask("ASK { ?s <http://ex.org/age> ?a }"));
        assert!(ask(
            "ASK { GRAPH <http://ex.org/g> { ?s <http://ex.org/age> ?a FILTER(?a > 40) } }"
        ));
        assert!(!ask(
            "ASK { GRAPH ?g { ?s <http://ex.org/age> ?a FILTER(?a > 50) } }"
        ));
        assert!(ask(
            "PREFIX s: <http://schema.org/> ASK { ?x s:name ?n FILTER(lang(?n) = 'en') }"
        ));
    }

    #[test]
    fn service_and_quoted_wildcards_are_refused_up_front() {
        let e =
            filter(|f| f.ask = Some("ASK { SERVICE <http://ex.org/sparql> { ?s ?p ?o } }".into()))
                .unwrap_err();
        assert!(matches!(e, FilterError::Service), "{e:?}");
        assert_eq!(e.parameter(), Some("ask"));
        // The word inside a string or an IRI is not the keyword.
        for q in [
            "ASK { ?s ?p \"SERVICE <x>\" }",
            "ASK { ?s <http://ex.org/SERVICE> ?o }",
        ] {
            assert!(filter(|f| f.ask = Some(q.into())).is_ok(), "{q}");
        }
        let e = filter(|f| f.pattern = Some("<<( * * * )>> * *".into())).unwrap_err();
        assert!(e.to_string().contains("matched exactly"), "{e}");
        let e = filter(|f| {
            f.pattern = Some(
                "<<( <http://a/s> <http://a/p> <<( ?x <http://a/q> <http://a/o> )>> )>> * *".into(),
            )
        })
        .unwrap_err();
        assert!(e.to_string().contains("matched exactly"), "{e}");
        // A blank node inside is refused too: labels are the publisher's.
        let e = filter(|f| {
            f.pattern = Some("<http://a/s> * <<( <http://a/x> <http://a/p> _:q )>>".into())
        })
        .unwrap_err();
        assert!(e.to_string().contains("never matched by label"), "{e}");
        assert!(
            filter(
                |f| f.pattern = Some("<<( <http://a/s> <http://a/p> <http://a/o> )>> * *".into())
            )
            .is_ok()
        );
    }

    #[test]
    fn ask_errors_are_clear() {
        let e = filter(|f| f.ask = Some("ASK { ?s ?p }".into())).unwrap_err();
        assert!(matches!(e, FilterError::AskSyntax { .. }), "{e:?}");
        let m = e.to_string();
        assert!(
            m.starts_with("ask: SPARQL syntax error") && m.contains("1:"),
            "{m}"
        );
        let e = filter(|f| f.ask = Some("SELECT * { ?s ?p ?o }".into())).unwrap_err();
        assert_eq!(
            e.to_string(),
            "ask: only ASK queries are allowed, this is a SELECT query"
        );
        let e = filter(|f| f.ask = Some("CONSTRUCT WHERE { ?s ?p ?o }".into())).unwrap_err();
        assert!(e.to_string().contains("CONSTRUCT"));
        let long = format!("ASK {{ ?s ?p \"{}\" }}", "x".repeat(MAX_ASK_BYTES));
        let e = filter(|f| f.ask = Some(long)).unwrap_err();
        assert!(
            matches!(e, FilterError::TooLong { param: "ask", .. }),
            "{e:?}"
        );
    }

    /// Queries that overflowed a worker's stack (and aborted the server) in the parser
    /// or in evaluation are refused; ordinary ones, and strings full of brackets or
    /// `!`, pass.
    #[test]
    fn deeply_nested_ask_is_refused() {
        let filter_of = |body: String| format!("ASK {{ ?s ?p ?o FILTER({body}) }}");
        for q in [
            format!(
                "ASK {}?s ?p ?o{}",
                "{ ?s ?p ?o ".repeat(1000),
                "}".repeat(1000)
            ),
            filter_of(format!("{}true{}", "(".repeat(1000), ")".repeat(1000))),
            filter_of(format!("{}true", "!".repeat(1000))),
            format!("ASK {{ ?s {}<http://p> ?o }}", "^".repeat(3000)),
            format!(
                "ASK {{ ?s ?p {}?o{} }}",
                "<< ?s ?p ".repeat(1300),
                " >>".repeat(1300)
            ),
            filter_of(format!("{}1 = 2", "1+".repeat(5000))),
            filter_of(format!("{}true", "true||".repeat(3000))),
            format!("ASK {{ {{}} {}}}", "UNION {} ".repeat(1700)),
        ] {
            // Refused, or (when the parser folds it, as brackets around one term)
            // accepted as a shallow query; never a crash.
            match filter(|f| f.ask = Some(q.clone())) {
                Err(e) => {
                    let m = e.to_string();
                    assert!(m.starts_with("ask: "), "{m}");
                    assert!(
                        !m.contains("could not start") && !m.contains("failed"),
                        "{m}"
                    );
                }
                Ok(f) => assert!(debug_depth(&format!("{f:?}")) <= MAX_ASK_DEPTH + 8, "{q}"),
            }
        }
        for q in [
            format!("ASK {{ {{}} {}}}", "UNION {} ".repeat(1700)),
            filter_of(format!("{}?o", "?o||".repeat(3000))),
            filter_of(format!("{}1 = 2", "1+".repeat(200))),
        ] {
            let Err(e) = filter(|f| f.ask = Some(q.clone())) else {
                panic!("accepted: {}…", &q[..60]);
            };
            assert!(e.to_string().contains("nests"), "{e}");
        }
        let ok = "ASK { { ?s ?p ?o FILTER((?o = \"1\"^^<http://www.w3.org/2001/XMLSchema#integer>) \
                  && !(?s = ?o) || ?o = \"wow!!!!!!!!!! ((((((((((\") } }";
        filter(|f| f.ask = Some(ok.into())).unwrap();
        filter(|f| {
            f.ask = Some(filter_of(format!(
                "{}true{}",
                "(".repeat(20),
                ")".repeat(20)
            )))
        })
        .unwrap();
    }

    /// `n` statements `s_i <p> s_{i+1}`: one predicate, a chain of `n + 1` nodes.
    fn chain(n: usize) -> Item {
        let statements: Vec<Statement> = (0..n)
            .map(|i| {
                st(
                    iri(&format!("http://a/s{i}")),
                    iri("http://a/p"),
                    iri(&format!("http://a/s{}", i + 1)),
                    None,
                )
            })
            .collect();
        item("", &statements)
    }

    /// The filter of `query`, with at most `rows` rows per evaluation.
    fn ask_with_row_limit(query: &str, rows: f64) -> ItemFilter {
        let f = filter(|f| f.ask = Some(query.into())).unwrap();
        Arc::try_unwrap(f).unwrap().with_ask_row_limit(rows)
    }

    /// Whether `e` is the row bound's out-of-budget error.
    fn is_over_rows(e: &FilterError) -> bool {
        let text = e.to_string();
        e.parameter().is_none() && text.contains("work budget") && text.contains("rows")
    }

    /// Joined rows spend no budget: `N^3` rows for `3N` statement visits, 8·10^9 on
    /// 2,000 statements. The bound refuses the item before evaluating.
    #[test]
    fn joins_that_multiply_rows_are_out_of_budget() {
        let q = "ASK { ?a ?p ?b . ?c ?p ?d . ?e ?p ?f \
                 FILTER(STR(?a) = CONCAT(STR(?c), STR(?e))) }";
        let e = ask_with_row_limit(q, MAX_ASK_ROWS)
            .accepts(&chain(2000))
            .unwrap_err();
        assert!(is_over_rows(&e), "{e}");
        // The same on a smaller item, which evaluates (and answers false) within the
        // statement-visit budget when rows are not bounded.
        let e = ask_with_row_limit(q, 10_000.0)
            .accepts(&chain(30))
            .unwrap_err();
        assert!(is_over_rows(&e), "{e}");
    }

    /// A `VALUES` table shares no variable with the item's pattern: each statement
    /// joins every one of its rows, for no budget.
    #[test]
    fn item_rows_times_values_rows_are_bounded() {
        let values: Vec<String> = (0..1000).map(|i| i.to_string()).collect();
        let q = format!(
            "ASK {{ ?a ?p ?b VALUES ?x {{ {} }} FILTER(STR(?a) = STR(?x)) }}",
            values.join(" ")
        );
        let f = ask_with_row_limit(&q, 10_000.0);
        assert!(is_over_rows(&f.accepts(&chain(30)).unwrap_err()));
        // 2 × 1,000 rows fit.
        assert!(!f.accepts(&chain(2)).unwrap());
    }

    /// `FILTER EXISTS` evaluates its pattern anew for each row, `EXISTS { VALUES … }`
    /// included (which reads nothing, so spends no budget at all).
    #[test]
    fn exists_is_bounded_per_row() {
        let q = "ASK { ?a ?p ?b FILTER EXISTS { ?c ?q ?d FILTER(STR(?d) = 'never') } }";
        let f = ask_with_row_limit(q, 10_000.0);
        assert!(is_over_rows(&f.accepts(&chain(200)).unwrap_err()));
        assert!(!f.accepts(&chain(20)).unwrap());
        let values: Vec<String> = (0..1000).map(|i| i.to_string()).collect();
        let q = format!(
            "ASK {{ ?a ?p ?b FILTER EXISTS {{ VALUES ?x {{ {} }} FILTER(?x = -1) }} }}",
            values.join(" ")
        );
        let f = ask_with_row_limit(&q, 10_000.0);
        assert!(is_over_rows(&f.accepts(&chain(30)).unwrap_err()));
        assert!(!f.accepts(&chain(3)).unwrap());
    }

    /// A closure path pairs nodes: `n^2` rows on a chain of `n` nodes, each start
    /// walking the chain.
    #[test]
    fn property_paths_are_bounded() {
        for q in [
            "ASK { ?a <http://a/p>* ?b FILTER(?a = <urn:none>) }",
            "ASK { ?a (<http://a/p>|^<http://a/p>)+ ?b FILTER(?a = <urn:none>) }",
        ] {
            let f = ask_with_row_limit(q, 10_000.0);
            assert!(is_over_rows(&f.accepts(&chain(200)).unwrap_err()), "{q}");
            assert!(!f.accepts(&chain(10)).unwrap(), "{q}");
        }
    }

    /// Ordinary queries on an item of 1,000 statements stay far below the bound (the
    /// `NOT EXISTS` looks up each row's `?r`: about 200 rows times one statement).
    #[test]
    fn ordinary_queries_are_delivered() {
        let mut statements = Vec::new();
        for i in 0..200 {
            let obs = format!("http://a/obs{i}");
            let res = format!("http://a/res{i}");
            let sensor = format!("http://a/sensor{}", i % 7);
            statements.push(st(iri(&obs), iri(RDF_TYPE), iri(SOSA_OBS), None));
            statements.push(st(iri(&obs), iri(SOSA_SENSOR), iri(&sensor), None));
            statements.push(st(iri(&obs), iri(SOSA_RESULT), iri(&res), None));
            statements.push(st(iri(&res), iri(RDF_TYPE), iri(OM_MEASURE), None));
            statements.push(st(
                iri(&res),
                iri(OM_VALUE),
                lit(
                    &i.to_string(),
                    jelly::OwnedLiteralKind::Typed(XSD_INT.into()),
                ),
                None,
            ));
        }
        let it = item("", &statements);
        let pre = format!("PREFIX sosa: <http://www.w3.org/ns/sosa/> PREFIX om: <{OM}> ");
        for (q, answer) in [
            (
                "ASK { ?o a sosa:Observation ; sosa:madeBySensor ?s ; sosa:hasResult ?r .                  ?r om:hasNumericalValue ?v FILTER(?v > 150) }",
                true,
            ),
            (
                "ASK { ?o sosa:hasResult ?r . ?r a ?t . OPTIONAL { ?o sosa:madeBySensor ?s }                  FILTER(!BOUND(?s)) }",
                false,
            ),
            (
                "ASK { ?o sosa:hasResult ?r FILTER NOT EXISTS { ?r om:hasNumericalValue ?v } }",
                false,
            ),
            ("ASK { ?o sosa:hasResult/om:hasNumericalValue 199 }", true),
        ] {
            let f = ask_with_row_limit(&format!("{pre}{q}"), MAX_ASK_ROWS / 50.0);
            assert_eq!(f.accepts(&it).unwrap(), answer, "{q}");
        }
    }

    #[test]
    fn ask_that_explodes_runs_out_of_budget() {
        let statements: Vec<Statement> = (0..40)
            .map(|i| {
                st(
                    iri(&format!("http://a/s{i}")),
                    iri("http://a/p"),
                    iri(&format!("http://a/o{i}")),
                    None,
                )
            })
            .collect();
        let it = item("", &statements);
        // Connected through the shared predicate, yet 40^3 rows on this item.
        let q = "ASK { ?a ?p ?b . ?c ?p ?d . ?e ?p ?f \
                 FILTER(STR(?a) = CONCAT(STR(?c), STR(?e), 'never')) }";
        let f = FilterParams {
            ask: Some(q.into()),
            ..FilterParams::default()
        }
        .build()
        .unwrap()
        .unwrap();
        let f = Arc::try_unwrap(f).unwrap().with_ask_budget(20_000);
        let e = f.accepts(&it).unwrap_err();
        assert!(e.to_string().contains("work budget"), "{e}");
        assert_eq!(e.parameter(), None);
    }

    /// spareval takes a failed term conversion inside an expression for an expression
    /// error (the FILTER is false, COALESCE moves on), so running out of the budget
    /// there gave an answer, even a wrong one, instead of "out of budget".
    #[test]
    fn running_out_inside_a_filter_is_out_of_budget() {
        let it = item(
            "",
            &[st(
                iri("http://a/s"),
                iri("http://a/p"),
                lit("v", jelly::OwnedLiteralKind::Simple),
                None,
            )],
        );
        // False on this item: "vvvvvvvv" is not "never".
        let q = "ASK { ?s ?p ?o FILTER(COALESCE(CONCAT(?o, ?o, ?o, ?o, ?o, ?o, ?o, ?o) = \"never\", \
                 true)) }";
        let f = || {
            let f = filter(|f| f.ask = Some(q.into())).unwrap();
            Arc::try_unwrap(f).unwrap()
        };
        assert!(!f().accepts(&it).unwrap());
        let e = f().with_ask_budget(4).accepts(&it).unwrap_err();
        assert!(e.to_string().contains("work budget"), "{e}");
    }

    /// Converting a term copies it: a large literal read once per row of a join cost
    /// one unit each time, so an item with a few MiB of literal and a query of a few
    /// thousand rows copied gigabytes within the budget (3.3 s for a 100 KB literal
    /// over 90,000 rows, unoptimized). Conversions spend by size.
    #[test]
    fn converting_large_terms_spends_by_size() {
        let mut statements: Vec<Statement> = (0..40)
            .map(|i| {
                st(
                    iri("http://a/s"),
                    iri(&format!("http://a/p{i}")),
                    lit(&format!("o{i}"), jelly::OwnedLiteralKind::Simple),
                    None,
                )
            })
            .collect();
        statements.push(st(
            iri("http://a/s"),
            iri("http://a/big"),
            lit(&"x".repeat(4 << 20), jelly::OwnedLiteralKind::Simple),
            None,
        ));
        let it = item("", &statements);
        // 41 × 41 rows, about 3,400 statement visits and 3,400 conversions: well
        // within the budget if a conversion of 4 MiB cost what one of 2 bytes does.
        let q = "ASK { ?s ?p ?o . ?s ?q ?o2 FILTER(STRLEN(CONCAT(?o, ?o2)) < 0) }";
        let e = filter(|f| f.ask = Some(q.into()))
            .unwrap()
            .accepts(&it)
            .unwrap_err();
        assert!(e.to_string().contains("work budget"), "{e}");
        // Small terms: the same query answers.
        let small = item("", &statements[..40]);
        let f = filter(|f| f.ask = Some(q.into())).unwrap();
        assert!(!f.accepts(&small).unwrap());
    }

    /// Queries whose evaluation cost escapes the work budget are refused up front: a
    /// long sequence path (a flat list of patterns, joined one inside the other: 1,400
    /// steps overflowed a worker's stack), and groups joined with no variable in
    /// common (a cross product computed in memory). Joins that share a variable, or
    /// whose other side reads nothing (VALUES, an aggregate), are fine.
    #[test]
    fn asks_that_cost_beyond_the_budget_are_refused() {
        let refused = |q: &str| match filter(|f| f.ask = Some(q.into())) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("accepted: {q}"),
        };
        let path = format!("ASK {{ ?s {} ?o }}", vec!["<http://p>"; 1400].join("/"));
        assert!(refused(&path).contains("triple patterns"), "{path}");
        let chain: String = (0..100)
            .map(|i| format!("?v{i} <http://p> ?v{} . ", i + 1))
            .collect();
        assert!(refused(&format!("ASK {{ {chain} }}")).contains("at most 64"));
        for q in [
            "ASK { {?a ?b ?c} {?d ?e ?f} {?g ?h ?i} FILTER(!sameTerm(?c, ?i)) }",
            "ASK { {?a ?b ?c} {?d ?e ?f} }",
            "ASK { ?a ?b ?c OPTIONAL { ?d ?e ?f } }",
        ] {
            assert!(refused(q).contains("cross product"), "{q}");
        }
        for q in [
            "ASK { {?s ?p ?o} {?s ?q ?r} }",
            "ASK { ?s ?p ?o OPTIONAL { ?o ?q ?r } }",
            "ASK { VALUES ?v { 1 2 } ?s ?p ?o }",
            "ASK { ?s ?p ?o { SELECT (COUNT(*) AS ?n) WHERE { ?a ?b ?c } } }",
            &format!("ASK {{ ?s {} ?o }}", vec!["<http://p>"; 20].join("/")),
        ] {
            assert!(filter(|f| f.ask = Some(q.into())).is_ok(), "{q}");
        }
    }

    /// Joining rows costs no work budget, and parts that read nothing from the item
    /// may stand apart from its patterns: three VALUES tables of 2,700 rows fit in
    /// 16 KiB and joined into 2·10^10 rows, hours of CPU on every item. Such joins
    /// are refused when the filter is built; a table every statement matches at most
    /// once, and small products, are accepted.
    #[test]
    fn asks_joining_tables_that_read_nothing_are_refused() {
        let table = |var: &str, rows: usize| format!("VALUES ?{var} {{ {}}}", "1 ".repeat(rows));
        let q = format!(
            "ASK {{ {} {} {} }}",
            table("a", 2700),
            table("b", 2700),
            table("c", 2700)
        );
        assert!(q.len() <= MAX_ASK_BYTES);
        // The same tables sharing a variable, or beside the item's patterns, or
        // inside a subquery's aggregate.
        let shared = q.replace("?b", "?a").replace("?c", "?a");
        let beside = format!("ASK {{ ?s ?p ?o {} {} }}", table("a", 200), table("b", 100));
        let counted = format!(
            "ASK {{ ?s ?p ?o {{ SELECT (COUNT(*) AS ?n) WHERE {{ {} {} }} }} }}",
            table("a", 200),
            table("b", 100)
        );
        for q in [q, shared, beside, counted] {
            let Err(e) = filter(|f| f.ask = Some(q.clone())) else {
                panic!("accepted: {}", &q[..80]);
            };
            assert_eq!(e.parameter(), Some("ask"));
            let msg = e.to_string();
            assert!(
                msg.contains("read nothing") && msg.contains("at most 10000"),
                "{msg}"
            );
        }
        let msg =
            filter(|f| f.ask = Some(format!("ASK {{ {} {} }}", table("a", 200), table("b", 100))))
                .unwrap_err()
                .to_string();
        assert!(msg.contains("up to 20000 rows"), "{msg}");
        // Accepted: a product within the limit, and tables whose distinct values
        // each statement matches at most once.
        let it = sample();
        let distinct = |var: &str, n: usize| {
            let rows: Vec<String> = (0..n).map(|i| format!("<x:{i}>")).collect();
            format!("VALUES ?{var} {{ {} }}", rows.join(" "))
        };
        for q in [
            format!("ASK {{ ?s ?p ?o {} {} }}", table("a", 100), table("b", 100)),
            format!(
                "ASK {{ ?s ?p ?o {} {} }}",
                distinct("s", 500),
                distinct("o", 500)
            ),
        ] {
            let f = filter(|f| f.ask = Some(q.clone())).unwrap();
            f.accepts(&it).unwrap();
        }
    }

    /// Nested calls with an optional last argument make the parser's time double per
    /// level; past MAX_ASK_OPTIONAL_ARG_CALLS of them the query is refused before it
    /// is parsed (30 nested SUBSTRs would keep the parse thread busy for days), in any
    /// case and spacing, and also when the words sit in strings or comments.
    #[test]
    fn asks_with_many_optional_argument_calls_are_refused_before_parsing() {
        let nested = |n: usize, call: &str| {
            let mut e = "?o".to_string();
            for _ in 0..n {
                e = format!("{call}({e}, 1)");
            }
            format!("ASK {{ ?s ?p ?o FILTER({e} = \"x\") }}")
        };
        for q in [
            nested(30, "SUBSTR"),
            nested(9, "substr"),
            nested(30, "Regex"),
            format!("{} # REPLACE", nested(8, "SUBSTR")),
            nested(9, "SUBSTR").replace("SUBSTR(", "SUBSTR #x\n ("),
        ] {
            let msg = filter(|f| f.ask = Some(q.clone())).unwrap_err().to_string();
            assert!(
                msg.contains("SUBSTR, REGEX or REPLACE") && msg.contains("at most 8"),
                "{q}: {msg}"
            );
        }
        // Eight, and names that only contain the words, are parsed.
        assert!(filter(|f| f.ask = Some(nested(8, "SUBSTR"))).is_ok());
        let q = "ASK { ?s <http://e/substring> ?o ; <http://e/p> ?regexes FILTER(?o != ?regexes) }";
        assert!(filter(|f| f.ask = Some(q.into())).is_ok());
        assert_eq!(optional_arg_calls("SUBSTR substrate REGEX_ x:replace"), 2);
    }

    #[test]
    fn string_bounds_read_as_bytes_then_scientific_then_infinite() {
        assert_eq!(bytes_text(67_108_865.0), "67108865 bytes");
        assert_eq!(bytes_text(2.5e30), "2.5e30 bytes");
        assert_eq!(bytes_text(f64::MAX * 2.0), "∞ bytes");
    }

    /// `REPLACE(?o, ".", "$0$0$0$0")` quadruples its text in one call that no budget
    /// or cancellation can stop. Nested deep enough to pass the string cap on any
    /// item, the query is refused when built; a little shallower, it is out of
    /// budget on an item whose longest term is a 10-character literal (unchecked, 6
    /// levels of 16 copies build 160 MiB there, and take minutes).
    #[test]
    fn asks_that_multiply_text_are_refused_or_out_of_budget() {
        let nested = |levels: usize, refs: usize| {
            let mut e = "?o".to_string();
            for _ in 0..levels {
                e = format!(r#"REPLACE({e}, ".", "{}")"#, "$0".repeat(refs));
            }
            format!("ASK {{ ?s ?p ?o FILTER(STRLEN({e}) > 0) }}")
        };
        // At most MAX_ASK_OPTIONAL_ARG_CALLS levels: the SPARQL parser's time doubles
        // with each level of nested calls (18 levels take 12 s in a debug build).
        for (levels, refs) in [(8, 16), (7, 16)] {
            let e = filter(|f| f.ask = Some(nested(levels, refs))).unwrap_err();
            assert_eq!(e.parameter(), Some("ask"));
            let msg = e.to_string();
            assert!(msg.contains("REPLACE") && msg.contains("64 MiB"), "{msg}");
        }
        let it = item(
            "",
            &[st(
                iri("http://a/s"),
                iri("http://a/p"),
                lit("0123456789", jelly::OwnedLiteralKind::Simple),
                None,
            )],
        );
        let f = filter(|f| f.ask = Some(nested(6, 16))).unwrap();
        let e = f.accepts(&it).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("work budget") && msg.contains("REPLACE"),
            "{msg}"
        );
        assert!(!f.takes(&it));
        // A chain of BINDs doubling a variable counts as nesting does.
        let chain = |levels: usize| {
            let mut q = "ASK { ?s ?p ?o BIND(?o AS ?v0) ".to_string();
            for i in 0..levels {
                q += &format!("BIND(CONCAT(?v{i}, ?v{i}) AS ?v{}) ", i + 1);
            }
            q + &format!("FILTER(STRLEN(?v{levels}) > 0) }}")
        };
        let msg = filter(|f| f.ask = Some(chain(27))).unwrap_err().to_string();
        assert!(msg.contains("CONCAT"), "{msg}");
        let f = filter(|f| f.ask = Some(chain(21))).unwrap();
        assert!(
            f.accepts(&it)
                .unwrap_err()
                .to_string()
                .contains("work budget")
        );
        // Shallow enough for this item, the same queries answer.
        for q in [nested(3, 4), chain(10)] {
            assert!(
                filter(|f| f.ask = Some(q.clone()))
                    .unwrap()
                    .accepts(&it)
                    .unwrap(),
                "{q}"
            );
        }
    }

    /// Copying and concatenating a few terms passes on items with large literals
    /// (every term up to 16 MiB may be concatenated with three others); more copies
    /// of a large literal than the cap holds are out of budget.
    #[test]
    fn plain_asks_pass_on_large_literals() {
        let big = lit(&"x".repeat(9 << 20), jelly::OwnedLiteralKind::Simple);
        let it = item("", &[st(iri("http://a/s"), iri("http://a/p"), big, None)]);
        for q in [
            "ASK { ?s ?p ?a . ?s ?q ?b FILTER(CONCAT(?a, ?b) = \"x\") }",
            "ASK { ?s ?p ?o FILTER(CONTAINS(UCASE(?o), \"Y\")) }",
            "ASK { ?s ?p ?o FILTER(STRLEN(CONCAT(?o, ?o, ?o, ?o)) < 10) }",
        ] {
            let f = filter(|f| f.ask = Some(q.into())).unwrap();
            assert!(!f.accepts(&it).unwrap(), "{q}");
        }
        let q = "ASK { ?s ?p ?o FILTER(STRLEN(CONCAT(?o, ?o, ?o, ?o, ?o, ?o, ?o, ?o)) > 0) }";
        let e = filter(|f| f.ask = Some(q.into()))
            .unwrap()
            .accepts(&it)
            .unwrap_err();
        assert!(e.to_string().contains("work budget"), "{e}");
    }

    /// Language tags are case-insensitive: a query's tag (which the SPARQL parser
    /// lower-cases) matches the item's in any case.
    #[test]
    fn ask_matches_language_tags_in_any_case() {
        let it = item(
            "",
            &[st(
                iri("http://a/s"),
                iri("http://a/p"),
                Term::Literal(jelly::Literal {
                    lex: "color".into(),
                    kind: jelly::OwnedLiteralKind::Lang("en-US".into()),
                }),
                None,
            )],
        );
        for q in [
            "ASK { ?s ?p \"color\"@en-US }",
            "ASK { ?s ?p \"color\"@en-us }",
            "ASK { ?s ?p ?o FILTER(sameTerm(?o, \"color\"@EN-us)) }",
        ] {
            let f = filter(|f| f.ask = Some(q.into())).unwrap();
            assert!(f.accepts(&it).unwrap(), "{q}");
        }
    }

    /// spareval builds the triple terms of a query from values (`"01"^^xsd:integer`
    /// becomes `"1"^^xsd:integer`): a quoted triple stored with a literal not in its
    /// canonical form was matched by no `<<( … )>>` of a query, not even its own text.
    #[test]
    fn ask_matches_quoted_triples_holding_non_canonical_literals() {
        let xsd_integer = "http://www.w3.org/2001/XMLSchema#integer";
        let it = item(
            "",
            &[
                st(
                    iri("http://a/s"),
                    iri("http://a/p"),
                    Term::Triple(Box::new(jelly::Triple {
                        subject: iri("http://a/x"),
                        predicate: iri("http://a/age"),
                        object: lit("042", jelly::OwnedLiteralKind::Typed(xsd_integer.into())),
                    })),
                    None,
                ),
                st(
                    iri("http://a/s"),
                    iri("http://a/q"),
                    lit("042", jelly::OwnedLiteralKind::Typed(xsd_integer.into())),
                    None,
                ),
            ],
        );
        let ask = |q: &str| {
            filter(|f| f.ask = Some(q.into()))
                .unwrap()
                .accepts(&it)
                .unwrap()
        };
        let quoted = |o: &str| format!("ASK {{ ?s ?p <<( <http://a/x> <http://a/age> {o} )>> }}");
        assert!(ask(&quoted(&format!("\"042\"^^<{xsd_integer}>"))));
        assert!(ask(&quoted("42")));
        assert!(!ask(&quoted("43")));
        assert!(ask(
            "ASK { ?s ?p <<( <http://a/x> <http://a/age> ?age )>> FILTER(?age = 42) }"
        ));
        // Outside quoted triples, terms are matched as they are.
        assert!(ask(&format!("ASK {{ ?s ?q \"042\"^^<{xsd_integer}> }}")));
        assert!(!ask("ASK { ?s ?q 42 }"));
    }

    #[test]
    fn kinds_combine_with_and() {
        let it = sample();
        let f = FilterParams {
            source: Some("sensor-1".into()),
            prefix: Some("http://schema.org/".into()),
            pattern: Some("* <http://ex.org/knows> *".into()),
            ask: Some("ASK { ?s ?p ?o }".into()),
        };
        assert!(f.build().unwrap().unwrap().accepts(&it).unwrap());
        for bad in [
            FilterParams {
                source: Some("other".into()),
                ..f.clone()
            },
            FilterParams {
                prefix: Some("http://other.org/".into()),
                ..f.clone()
            },
            FilterParams {
                pattern: Some("* <http://other.org/p> *".into()),
                ..f.clone()
            },
            FilterParams {
                ask: Some("ASK { ?s <http://other.org/p> ?o }".into()),
                ..f.clone()
            },
        ] {
            assert!(
                !bad.build().unwrap().unwrap().accepts(&it).unwrap(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn grpc_metadata_ascii_and_binary() {
        let mut md = MetadataMap::new();
        md.insert("x-jelly-source", "a,b".parse().unwrap());
        md.insert_bin(
            "x-jelly-ask-bin",
            tonic::metadata::MetadataValue::from_bytes("ASK { ?s ?p \"é\" }".as_bytes()),
        );
        let p = FilterParams::from_grpc_metadata(&md).unwrap();
        assert_eq!(p.source.as_deref(), Some("a,b"));
        assert_eq!(p.ask.as_deref(), Some("ASK { ?s ?p \"é\" }"));
        assert!(p.prefix.is_none() && p.pattern.is_none());
        md.insert("x-jelly-ask", "ASK {}".parse().unwrap());
        let e = FilterParams::from_grpc_metadata(&md).unwrap_err();
        assert!(e.to_string().contains("both"), "{e}");
    }

    #[test]
    fn undecodable_item_is_an_item_error() {
        let mut it = sample();
        it.frame = Bytes::from_static(b"\x0a\x05garbage");
        let e = pattern("* * *").accepts(&it).unwrap_err();
        assert!(matches!(e, FilterError::Item { offset: 7, .. }), "{e:?}");
    }
}
