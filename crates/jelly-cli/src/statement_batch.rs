//! Statements and prefix declarations handed from one thread to another in one text
//! buffer, without an allocation per term.
//!
//! Why: handing over oxrdf quads (a `String` per term) made every term be allocated by
//! the parser thread and freed by the encoding one. glibc's malloc then found its
//! per-thread cache of the parser thread empty and that of the other full; on bsbm-1m
//! as Turtle, malloc and free took a tenth of the time and the two threads together
//! were no faster than one. A batch copies the terms' text into one buffer instead
//! and is sent back to be filled again.

use jelly::{LiteralKind, LiteralRef, Statement, StatementRef, TermRef};

/// Bytes of text a cleared batch keeps room for.
pub const KEPT_TEXT: usize = 1 << 20;

/// Where a string lies in the batch's text.
#[derive(Debug, Clone, Copy)]
struct Span {
    start: usize,
    end: usize,
}

/// A term, as spans of the batch's text.
#[derive(Debug, Clone, Copy)]
enum SpanTerm {
    Iri(Span),
    BlankNode(Span),
    Simple(Span),
    Lang(Span, Span),
    Typed(Span, Span),
    DefaultGraph,
}

/// One entry of a batch.
#[derive(Debug)]
enum Entry {
    /// A statement of plain terms; no graph for a triple.
    Spans([SpanTerm; 3], Option<SpanTerm>),
    /// A statement with a triple term, owned (rare: it is not worth spans).
    Owned(Box<Statement>),
    /// A prefix declaration: its name and IRI.
    Prefix {
        prefix: Span,
        iri: Span,
        at_end: bool,
    },
}

/// One entry of a batch, borrowed.
#[derive(Debug, Clone, Copy)]
pub enum BatchEntry<'a> {
    /// A statement.
    Statement(StatementRef<'a>),
    /// A prefix to declare: before the next statement, or at the end of the input.
    Prefix {
        /// The prefix name.
        prefix: &'a str,
        /// Its IRI.
        iri: &'a str,
        /// Found at the end of the input (after the last statement).
        at_end: bool,
    },
}

/// Statements and prefixes, in order, their text in one buffer.
///
/// ```
/// use jelly::{StatementRef, TermRef};
/// use jelly_cli::statement_batch::{BatchEntry, StatementBatch};
/// let mut b = StatementBatch::default();
/// b.push_prefix("ex", "http://ex/", false);
/// b.push_statement(StatementRef::triple(
///     TermRef::Iri("http://ex/s"),
///     TermRef::Iri("http://ex/p"),
///     TermRef::BlankNode("b0"),
/// ));
/// assert_eq!(b.len(), 2);
/// assert!(matches!(b.get(0), Some(BatchEntry::Prefix { prefix: "ex", .. })));
/// let Some(BatchEntry::Statement(st)) = b.get(1) else { panic!() };
/// assert_eq!(st.object, TermRef::BlankNode("b0"));
/// b.clear();
/// assert!(b.is_empty() && b.get(0).is_none());
/// ```
#[derive(Debug, Default)]
pub struct StatementBatch {
    text: String,
    entries: Vec<Entry>,
    statements: usize,
}

impl StatementBatch {
    /// Entries (statements and prefixes).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there is no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Statements.
    pub fn statements(&self) -> usize {
        self.statements
    }

    /// Bytes of text held.
    pub fn text_len(&self) -> usize {
        self.text.len()
    }

    /// Empties the batch, keeping its buffers for the next use (the text's up to
    /// [`KEPT_TEXT`]: a batch that held a huge literal gives that memory back).
    pub fn clear(&mut self) {
        self.text.clear();
        self.text.shrink_to(KEPT_TEXT);
        self.entries.clear();
        self.statements = 0;
    }

    fn span(&mut self, s: &str) -> Span {
        let start = self.text.len();
        self.text.push_str(s);
        Span {
            start,
            end: self.text.len(),
        }
    }

    /// The term as spans, or `None` for a triple term.
    fn span_term(&mut self, t: TermRef<'_>) -> Option<SpanTerm> {
        Some(match t {
            TermRef::Iri(i) => SpanTerm::Iri(self.span(i)),
            TermRef::BlankNode(b) => SpanTerm::BlankNode(self.span(b)),
            TermRef::Literal(LiteralRef { lex, kind }) => {
                let lex = self.span(lex);
                match kind {
                    LiteralKind::Simple => SpanTerm::Simple(lex),
                    LiteralKind::Lang(l) => SpanTerm::Lang(lex, self.span(l)),
                    LiteralKind::Typed(d) => SpanTerm::Typed(lex, self.span(d)),
                }
            }
            TermRef::Triple(_) => return None,
            TermRef::DefaultGraph => SpanTerm::DefaultGraph,
        })
    }

    /// Adds a statement.
    pub fn push_statement(&mut self, st: StatementRef<'_>) {
        self.statements += 1;
        let text_before = self.text.len();
        let spans = (|| {
            let terms = [
                self.span_term(st.subject)?,
                self.span_term(st.predicate)?,
                self.span_term(st.object)?,
            ];
            let graph = match st.graph {
                Some(g) => Some(self.span_term(g)?),
                None => None,
            };
            Some(Entry::Spans(terms, graph))
        })();
        let entry = spans.unwrap_or_else(|| {
            self.text.truncate(text_before);
            Entry::Owned(Box::new(st.to_owned()))
        });
        self.entries.push(entry);
    }

    /// Adds a prefix declaration.
    pub fn push_prefix(&mut self, prefix: &str, iri: &str, at_end: bool) {
        let prefix = self.span(prefix);
        let iri = self.span(iri);
        self.entries.push(Entry::Prefix {
            prefix,
            iri,
            at_end,
        });
    }

    fn str(&self, s: Span) -> &str {
        // The spans were made from this text, at char boundaries.
        self.text.get(s.start..s.end).unwrap_or_default()
    }

    fn term(&self, t: SpanTerm) -> TermRef<'_> {
        match t {
            SpanTerm::Iri(s) => TermRef::Iri(self.str(s)),
            SpanTerm::BlankNode(s) => TermRef::BlankNode(self.str(s)),
            SpanTerm::Simple(s) => TermRef::Literal(LiteralRef {
                lex: self.str(s),
                kind: LiteralKind::Simple,
            }),
            SpanTerm::Lang(s, l) => TermRef::Literal(LiteralRef {
                lex: self.str(s),
                kind: LiteralKind::Lang(self.str(l)),
            }),
            SpanTerm::Typed(s, d) => TermRef::Literal(LiteralRef {
                lex: self.str(s),
                kind: LiteralKind::Typed(self.str(d)),
            }),
            SpanTerm::DefaultGraph => TermRef::DefaultGraph,
        }
    }

    /// Entry `i`.
    pub fn get(&self, i: usize) -> Option<BatchEntry<'_>> {
        Some(match self.entries.get(i)? {
            Entry::Spans([s, p, o], g) => BatchEntry::Statement(StatementRef {
                subject: self.term(*s),
                predicate: self.term(*p),
                object: self.term(*o),
                graph: g.map(|g| self.term(g)),
            }),
            Entry::Owned(st) => BatchEntry::Statement(Statement::as_ref(st)),
            Entry::Prefix {
                prefix,
                iri,
                at_end,
            } => BatchEntry::Prefix {
                prefix: self.str(*prefix),
                iri: self.str(*iri),
                at_end: *at_end,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jelly::{Literal, OwnedLiteralKind, Term, Triple};

    #[test]
    fn statements_come_back_as_they_went_in() {
        let lit = |lex: &str, kind| {
            Term::Literal(Literal {
                lex: lex.into(),
                kind,
            })
        };
        let iri = |i: &str| Term::Iri(i.into());
        let quoted = Term::Triple(Box::new(Triple {
            subject: iri("http://ex/a"),
            predicate: iri("http://ex/b"),
            object: lit("c", OwnedLiteralKind::Simple),
        }));
        let statements = [
            Statement {
                subject: iri("http://ex/é"),
                predicate: iri("http://ex/p"),
                object: lit("x\ny", OwnedLiteralKind::Lang("en--ltr".into())),
                graph: Some(Term::BlankNode("g".into())),
            },
            Statement {
                subject: Term::BlankNode("b".into()),
                predicate: iri("http://ex/p"),
                object: lit("1", OwnedLiteralKind::Typed("http://ex/int".into())),
                graph: Some(Term::DefaultGraph),
            },
            Statement {
                subject: iri("http://ex/s"),
                predicate: iri("http://ex/p"),
                object: quoted,
                graph: None,
            },
            Statement {
                subject: iri("http://ex/s"),
                predicate: iri("http://ex/p"),
                object: lit("", OwnedLiteralKind::Simple),
                graph: None,
            },
        ];
        let mut b = StatementBatch::default();
        for round in 0..2 {
            for st in &statements {
                b.push_statement(st.as_ref());
            }
            b.push_prefix("", "http://ex/", true);
            assert_eq!(b.statements(), 4);
            for (i, st) in statements.iter().enumerate() {
                let Some(BatchEntry::Statement(got)) = b.get(i) else {
                    panic!("{i}");
                };
                assert_eq!(got, st.as_ref(), "{round} {i}");
            }
            let Some(BatchEntry::Prefix {
                prefix,
                iri,
                at_end,
            }) = b.get(4)
            else {
                panic!();
            };
            assert_eq!((prefix, iri, at_end), ("", "http://ex/", true));
            b.clear();
        }
        // A huge literal's room is given back when cleared.
        let big = "x".repeat(4 * KEPT_TEXT);
        b.push_statement(StatementRef::triple(
            TermRef::Iri("http://ex/s"),
            TermRef::Iri("http://ex/p"),
            TermRef::Literal(LiteralRef {
                lex: &big,
                kind: LiteralKind::Simple,
            }),
        ));
        b.clear();
        assert!(b.text.capacity() <= KEPT_TEXT);
    }
}
