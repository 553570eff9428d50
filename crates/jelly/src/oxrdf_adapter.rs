//! Conversions between Jelly terms and oxrdf terms.
//!
//! oxrdf (RDF 1.2) has no generalized statements and allows triple terms only in the
//! object position; statements outside that model give [`NotRepresentable`].

use oxrdf::{
    BlankNodeRef, GraphNameRef, LiteralRef as OxLiteralRef, NamedNodeRef, NamedOrBlankNodeRef,
    QuadRef, TermRef as OxTermRef, TripleRef as OxTripleRef,
};

use crate::framing::{FrameSink, SharedWriter, WriteError};
use crate::term::{LiteralKind, LiteralRef, StatementRef, Term, TermRef, Triple, XSD_STRING};

/// A Jelly statement that oxrdf cannot hold (generalized term, quoted triple as subject).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} in {position} position cannot be represented in oxrdf (RDF 1.2)")]
pub struct NotRepresentable {
    pub kind: &'static str,
    pub position: &'static str,
}

/// What a stream of `options` may hold that oxrdf (RDF 1.2), and so any Turtle or TriG
/// written from it, cannot; `None` when every statement it allows fits. Writers decide
/// from this rather than at the first statement that does not fit, which a resumed
/// reader would meet again.
///
/// ```
/// use jelly::StreamOptions;
/// use jelly::oxrdf_adapter::not_representable_in;
///
/// assert_eq!(not_representable_in(&StreamOptions::big()), None);
/// assert!(not_representable_in(&StreamOptions::big().with_rdf_star(true)).is_some());
/// ```
pub fn not_representable_in(options: &crate::StreamOptions) -> Option<&'static str> {
    if options.generalized_statements {
        Some("generalized statements")
    } else if options.rdf_star {
        Some("RDF-star quoted triples, which RDF 1.2 cannot hold as subjects")
    } else {
        None
    }
}

fn nr(t: TermRef<'_>, position: &'static str) -> NotRepresentable {
    NotRepresentable {
        kind: t.kind_name(),
        position,
    }
}

impl<'a> StatementRef<'a> {
    /// Borrows the statement as an oxrdf quad without allocating (triples land in the
    /// default graph). Fails for generalized statements and any quoted triple, since
    /// oxrdf's `TermRef::Triple` needs an owned triple; use [`StatementRef::to_oxrdf_quad`] for those.
    ///
    /// ```
    /// use jelly::{StatementRef, TermRef};
    /// let st = StatementRef::triple(TermRef::Iri("http://s"), TermRef::Iri("http://p"), TermRef::BlankNode("b"));
    /// let q = st.as_oxrdf_quad().unwrap();
    /// assert_eq!(q.subject.to_string(), "<http://s>");
    /// ```
    ///
    /// A blank node whose label is not [plain](crate::term::plain_blank_node_label)
    /// is refused too: oxrdf's writers (Turtle, TriG) write labels as they are, so such
    /// a label could break out of its term. [`StatementRef::to_oxrdf_quad`] gives it
    /// the [escaped](crate::term::escaped_blank_node_label) label instead.
    pub fn as_oxrdf_quad(&self) -> Result<QuadRef<'a>, NotRepresentable> {
        for (t, position) in [
            (Some(self.subject), "subject"),
            (Some(self.object), "object"),
            (self.graph, "graph"),
        ] {
            if let Some(TermRef::BlankNode(b)) = t
                && !crate::term::plain_blank_node_label(b)
            {
                return Err(NotRepresentable {
                    kind: "blank node with a label other than ASCII letters, digits and `_`",
                    position,
                });
            }
        }
        self.as_oxrdf_quad_unchecked()
    }

    /// [`StatementRef::as_oxrdf_quad`] with blank node labels as they are.
    fn as_oxrdf_quad_unchecked(&self) -> Result<QuadRef<'a>, NotRepresentable> {
        let subject = match self.subject {
            TermRef::Iri(i) => NamedOrBlankNodeRef::NamedNode(NamedNodeRef::new_unchecked(i)),
            TermRef::BlankNode(b) => NamedOrBlankNodeRef::BlankNode(BlankNodeRef::new_unchecked(b)),
            t => return Err(nr(t, "subject")),
        };
        let predicate = match self.predicate {
            TermRef::Iri(i) => NamedNodeRef::new_unchecked(i),
            t => return Err(nr(t, "predicate")),
        };
        let object = match self.object {
            TermRef::Iri(i) => OxTermRef::NamedNode(NamedNodeRef::new_unchecked(i)),
            TermRef::BlankNode(b) => OxTermRef::BlankNode(BlankNodeRef::new_unchecked(b)),
            TermRef::Literal(l) => OxTermRef::Literal(ox_literal(l)),
            t => return Err(nr(t, "object")),
        };
        let graph_name = match self.graph {
            None | Some(TermRef::DefaultGraph) => GraphNameRef::DefaultGraph,
            Some(TermRef::Iri(i)) => GraphNameRef::NamedNode(NamedNodeRef::new_unchecked(i)),
            Some(TermRef::BlankNode(b)) => GraphNameRef::BlankNode(BlankNodeRef::new_unchecked(b)),
            Some(t) => return Err(nr(t, "graph")),
        };
        Ok(QuadRef {
            subject,
            predicate,
            object,
            graph_name,
        })
    }

    /// Borrows the statement as an oxrdf triple (ignoring its graph), without allocating.
    pub fn as_oxrdf_triple(&self) -> Result<OxTripleRef<'a>, NotRepresentable> {
        let q = StatementRef {
            graph: None,
            ..*self
        }
        .as_oxrdf_quad()?;
        Ok(OxTripleRef {
            subject: q.subject,
            predicate: q.predicate,
            object: q.object,
        })
    }

    /// Converts to an owned oxrdf quad; quoted triples in the object become RDF 1.2 triple
    /// terms. Blank node labels that are not [plain](crate::term::plain_blank_node_label)
    /// are [escaped](crate::term::escaped_blank_node_label), as the N-Quads writer does.
    ///
    /// ```
    /// use jelly::{StatementRef, TermRef};
    /// let st = StatementRef::triple(TermRef::BlankNode("a b"), TermRef::Iri("http://p"), TermRef::Iri("http://o"));
    /// assert_eq!(st.to_oxrdf_quad().unwrap().subject.to_string(), "_:e-612062");
    /// ```
    pub fn to_oxrdf_quad(&self) -> Result<oxrdf::Quad, NotRepresentable> {
        let mut q = if let TermRef::Triple(t) = self.object {
            let base = StatementRef {
                object: TermRef::Iri(""),
                ..*self
            }
            .as_oxrdf_quad_unchecked()?;
            let tt = to_ox_triple(t.to_owned())?;
            let mut q = base.into_owned();
            q.object = oxrdf::Term::Triple(Box::new(tt));
            q
        } else {
            self.as_oxrdf_quad_unchecked()?.into_owned()
        };
        if let oxrdf::NamedOrBlankNode::BlankNode(b) = &mut q.subject {
            escape_label(b);
        }
        if let oxrdf::Term::BlankNode(b) = &mut q.object {
            escape_label(b);
        }
        if let oxrdf::GraphName::BlankNode(b) = &mut q.graph_name {
            escape_label(b);
        }
        Ok(q)
    }
}

/// Jelly-RDF 1.1 has no base direction; like pyjelly, we carry an RDF 1.2 base
/// direction inside the language tag as `lang--ltr` / `lang--rtl`.
fn split_direction(tag: &str) -> (&str, Option<oxrdf::BaseDirection>) {
    match tag.rsplit_once("--") {
        Some((lang, "ltr")) => (lang, Some(oxrdf::BaseDirection::Ltr)),
        Some((lang, "rtl")) => (lang, Some(oxrdf::BaseDirection::Rtl)),
        _ => (tag, None),
    }
}

fn ox_literal(l: LiteralRef<'_>) -> OxLiteralRef<'_> {
    match l.kind {
        LiteralKind::Simple => OxLiteralRef::new_simple_literal(l.lex),
        LiteralKind::Lang(tag) => match split_direction(tag) {
            (lang, Some(dir)) => {
                OxLiteralRef::new_directional_language_tagged_literal_unchecked(l.lex, lang, dir)
            }
            (_, None) => OxLiteralRef::new_language_tagged_literal_unchecked(l.lex, tag),
        },
        LiteralKind::Typed(dt) if dt == XSD_STRING => OxLiteralRef::new_simple_literal(l.lex),
        LiteralKind::Typed(dt) => {
            OxLiteralRef::new_typed_literal(l.lex, NamedNodeRef::new_unchecked(dt))
        }
    }
}

/// Gives `b` its [escaped](crate::term::escaped_blank_node_label) label if it is not
/// plain.
fn escape_label(b: &mut oxrdf::BlankNode) {
    if !crate::term::plain_blank_node_label(b.as_str()) {
        *b = oxrdf::BlankNode::new_unchecked(crate::term::escaped_blank_node_label(b.as_str()));
    }
}

fn to_ox_triple(t: Triple) -> Result<oxrdf::Triple, NotRepresentable> {
    let st = StatementRef::triple(t.subject.as_ref(), t.predicate.as_ref(), t.object.as_ref());
    let q = st.to_oxrdf_quad()?;
    Ok(oxrdf::Triple::new(q.subject, q.predicate, q.object))
}

/// Views an oxrdf term as a Jelly term. Triple terms become owned [`Term`]s, so they are
/// returned through `holder`, which must outlive the view.
pub fn from_ox_term<'a>(t: OxTermRef<'a>, holder: &'a mut Option<Term>) -> TermRef<'a> {
    if let Some(view) = borrowed_term(t) {
        return view;
    }
    // What `borrowed_term` cannot view is built here.
    *holder = match t {
        OxTermRef::Literal(l) => match (l.language(), l.direction()) {
            (Some(lang), Some(dir)) => {
                let dir = match dir {
                    oxrdf::BaseDirection::Ltr => "ltr",
                    oxrdf::BaseDirection::Rtl => "rtl",
                };
                Some(Term::Literal(crate::term::Literal {
                    lex: l.value().to_owned(),
                    kind: crate::term::OwnedLiteralKind::Lang(format!("{lang}--{dir}")),
                }))
            }
            _ => None,
        },
        OxTermRef::Triple(tr) => Some(owned_from_ox_triple(tr.as_ref())),
        OxTermRef::NamedNode(_) | OxTermRef::BlankNode(_) => None,
    };
    match holder {
        Some(t) => t.as_ref(),
        None => TermRef::DefaultGraph,
    }
}

/// `t` as a Jelly term borrowing only from `t`'s own strings, unless it has to be built
/// anew: a triple term, or a literal with a base direction (carried in the language
/// tag, see [`split_direction`]).
fn borrowed_term(t: OxTermRef<'_>) -> Option<TermRef<'_>> {
    Some(match t {
        OxTermRef::NamedNode(n) => TermRef::Iri(n.as_str()),
        OxTermRef::BlankNode(b) => TermRef::BlankNode(b.as_str()),
        OxTermRef::Literal(l) => match (l.language(), l.direction()) {
            (Some(_), Some(_)) => return None,
            _ => TermRef::Literal(literal_from_ox(l)),
        },
        OxTermRef::Triple(_) => return None,
    })
}

fn literal_from_ox(l: OxLiteralRef<'_>) -> LiteralRef<'_> {
    let kind = if let Some(lang) = l.language() {
        LiteralKind::Lang(lang)
    } else if l.datatype().as_str() == XSD_STRING {
        LiteralKind::Simple
    } else {
        LiteralKind::Typed(l.datatype().as_str())
    };
    LiteralRef {
        lex: l.value(),
        kind,
    }
}

fn owned_from_ox_triple(t: OxTripleRef<'_>) -> Term {
    let mut h = None;
    let o = from_ox_term(t.object, &mut h).to_owned();
    let s = match t.subject {
        NamedOrBlankNodeRef::NamedNode(n) => Term::Iri(n.as_str().to_owned()),
        NamedOrBlankNodeRef::BlankNode(b) => Term::BlankNode(b.as_str().to_owned()),
    };
    Term::Triple(Box::new(Triple {
        subject: s,
        predicate: Term::Iri(t.predicate.as_str().to_owned()),
        object: o,
    }))
}

/// Views an oxrdf quad as a Jelly statement (a quad; use [`from_ox_triple`] for triples).
/// `holder` keeps an object triple term alive.
pub fn from_ox_quad<'a>(q: QuadRef<'a>, holder: &'a mut Option<Term>) -> StatementRef<'a> {
    StatementRef {
        subject: subject_of(q.subject),
        predicate: TermRef::Iri(q.predicate.as_str()),
        object: from_ox_term(q.object, holder),
        graph: Some(graph_of(q.graph_name)),
    }
}

/// Views an oxrdf triple as a Jelly statement.
pub fn from_ox_triple<'a>(t: OxTripleRef<'a>, holder: &'a mut Option<Term>) -> StatementRef<'a> {
    let object = from_ox_term(t.object, holder);
    StatementRef::triple(
        subject_of(t.subject),
        TermRef::Iri(t.predicate.as_str()),
        object,
    )
}

fn subject_of(s: NamedOrBlankNodeRef<'_>) -> TermRef<'_> {
    match s {
        NamedOrBlankNodeRef::NamedNode(n) => TermRef::Iri(n.as_str()),
        NamedOrBlankNodeRef::BlankNode(b) => TermRef::BlankNode(b.as_str()),
    }
}

fn graph_of(g: GraphNameRef<'_>) -> TermRef<'_> {
    match g {
        GraphNameRef::NamedNode(n) => TermRef::Iri(n.as_str()),
        GraphNameRef::BlankNode(b) => TermRef::BlankNode(b.as_str()),
        GraphNameRef::DefaultGraph => TermRef::DefaultGraph,
    }
}

/// The quad `q` as a statement borrowing only from `q`'s own strings, if its object
/// need not be built anew (see [`borrowed_term`]).
fn borrowed_view(q: QuadRef<'_>) -> Option<StatementRef<'_>> {
    Some(StatementRef {
        subject: subject_of(q.subject),
        predicate: TermRef::Iri(q.predicate.as_str()),
        object: borrowed_term(q.object)?,
        graph: Some(graph_of(q.graph_name)),
    })
}

/// Writes every quad of an oxrdf [`Dataset`](oxrdf::Dataset) to `writer`, in the
/// dataset's order, through a shared-input session: the dataset holds one copy of each
/// distinct string, so IRIs are known by address (see [`crate::Encoder::shared`]). A
/// quad with a term that has to be built anew (a triple term, or a literal with a base
/// direction) is added beside the session, as by the writer's `add`. Returns the number
/// of quads written.
///
/// ```
/// use jelly::{JellyWriterBuilder, JellyReader, PhysicalType, StreamOptions};
/// use oxrdf::{Dataset, GraphNameRef, NamedNodeRef, QuadRef};
/// let ex = |s| NamedNodeRef::new_unchecked(s);
/// let mut ds = Dataset::new();
/// ds.insert(QuadRef::new(ex("http://ex.org/s"), ex("http://ex.org/p"), ex("http://ex.org/o"), GraphNameRef::DefaultGraph));
/// ds.insert(QuadRef::new(ex("http://ex.org/s"), ex("http://ex.org/p"), ex("http://ex.org/o"), ex("http://ex.org/g")));
/// let mut out = Vec::new();
/// let opts = StreamOptions::big().with_physical_type(PhysicalType::Quads);
/// let mut w = JellyWriterBuilder::new(opts).build_vec(&mut out).unwrap();
/// assert_eq!(jelly::oxrdf_adapter::write_dataset(&mut w, &ds).unwrap(), 2);
/// w.finish().unwrap();
/// let back: Vec<_> = JellyReader::from_slice(&out).read_all_frames().unwrap().concat();
/// assert_eq!(back.len(), 2);
/// ```
pub fn write_dataset<T: FrameSink>(
    writer: &mut T,
    dataset: &oxrdf::Dataset,
) -> Result<u64, WriteError> {
    write_quads(writer, dataset.iter())
}

/// [`write_dataset`] for an oxrdf [`Graph`](oxrdf::Graph): its triples, in the graph's
/// order.
pub fn write_graph<T: FrameSink>(writer: &mut T, graph: &oxrdf::Graph) -> Result<u64, WriteError> {
    write_quads(
        writer,
        graph.iter().map(|t| t.in_graph(GraphNameRef::DefaultGraph)),
    )
}

/// Writes `quads` (whose strings all live as long as `'s`) through one shared-input
/// session of `writer`, each quad that needs terms built anew beside it.
fn write_quads<'s, T: FrameSink>(
    writer: &mut T,
    quads: impl Iterator<Item = QuadRef<'s>>,
) -> Result<u64, WriteError> {
    let mut session = SharedWriter::new(writer);
    let mut n = 0;
    for q in quads {
        match borrowed_view(q) {
            Some(st) => session.add(st)?,
            None => {
                let mut holder = None;
                session.add_outside(from_ox_quad(q, &mut holder))?;
            }
        }
        n += 1;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Event, JellyReader, JellyWriter, PhysicalType, StreamOptions};
    use oxrdf::{GraphName, Literal, NamedNode, Quad};

    fn sample() -> Vec<Quad> {
        let ex = |s: &str| NamedNode::new_unchecked(format!("http://example.org/{s}"));
        vec![
            Quad::new(
                ex("s"),
                ex("p"),
                Literal::new_simple_literal("plain"),
                GraphName::DefaultGraph,
            ),
            Quad::new(
                ex("s"),
                ex("p"),
                Literal::new_language_tagged_literal_unchecked("hallo", "de"),
                ex("g"),
            ),
            Quad::new(
                oxrdf::BlankNode::new_unchecked("b1"),
                ex("q"),
                Literal::new_typed_literal(
                    "1",
                    NamedNode::new_unchecked("http://www.w3.org/2001/XMLSchema#integer"),
                ),
                oxrdf::BlankNode::new_unchecked("g2"),
            ),
        ]
    }

    #[test]
    fn oxrdf_quads_round_trip_borrowed_and_owned() {
        let quads = sample();
        let mut buf = Vec::new();
        let mut w = JellyWriter::new(
            &mut buf,
            StreamOptions::small().with_physical_type(PhysicalType::Quads),
        )
        .unwrap();
        for q in &quads {
            let mut holder = None;
            w.add(from_ox_quad(q.as_ref(), &mut holder)).unwrap();
        }
        w.finish().unwrap();
        let mut borrowed = Vec::new();
        let mut owned = Vec::new();
        JellyReader::new(&buf[..])
            .for_each_event(|_, ev| {
                if let Event::Statement(st) = ev {
                    borrowed.push(st.as_oxrdf_quad().unwrap().into_owned());
                    owned.push(st.to_oxrdf_quad().unwrap());
                }
            })
            .unwrap();
        assert_eq!(borrowed, quads);
        assert_eq!(owned, quads);
    }

    #[test]
    fn base_direction_travels_in_the_language_tag() {
        let ex = NamedNode::new_unchecked("http://example.org/p");
        let lit = Literal::new_directional_language_tagged_literal_unchecked(
            "chat",
            "en",
            oxrdf::BaseDirection::Rtl,
        );
        let t = oxrdf::Triple::new(ex.clone(), ex.clone(), lit.clone());
        let mut holder = None;
        let st = from_ox_triple(t.as_ref(), &mut holder);
        assert_eq!(
            st.object,
            TermRef::Literal(LiteralRef {
                lex: "chat",
                kind: LiteralKind::Lang("en--rtl")
            })
        );
        let back = st.as_oxrdf_quad().unwrap();
        assert_eq!(back.object, oxrdf::TermRef::Literal(lit.as_ref()));
    }

    #[test]
    fn rdf12_triple_terms_in_object_position_convert() {
        let ex = |s: &str| NamedNode::new_unchecked(format!("http://example.org/{s}"));
        let inner = oxrdf::Triple::new(ex("a"), ex("b"), ex("c"));
        let t = oxrdf::Triple::new(ex("s"), ex("says"), inner);
        let mut holder = None;
        let st = from_ox_triple(t.as_ref(), &mut holder);
        assert!(matches!(st.object, TermRef::Triple(_)));
        let back = st.to_oxrdf_quad().unwrap();
        assert_eq!(oxrdf::Triple::from(back), t);
        // The zero-copy view cannot hold a triple term.
        assert!(st.as_oxrdf_quad().is_err());
    }

    #[test]
    fn generalized_and_subject_quoted_triples_are_refused_clearly() {
        let lit = TermRef::Literal(LiteralRef {
            lex: "x",
            kind: LiteralKind::Simple,
        });
        let st = StatementRef::triple(lit, TermRef::Iri("http://p"), TermRef::Iri("http://o"));
        let e = st.as_oxrdf_quad().unwrap_err();
        assert_eq!((e.kind, e.position), ("literal", "subject"));
        let inner = [
            TermRef::Iri("http://a"),
            TermRef::Iri("http://b"),
            TermRef::Iri("http://c"),
        ];
        let st = StatementRef::triple(
            TermRef::Triple(crate::TripleRef::from_terms(&inner)),
            TermRef::Iri("http://p"),
            lit,
        );
        assert_eq!(st.to_oxrdf_quad().unwrap_err().position, "subject");
        let t = st.as_oxrdf_triple();
        assert!(t.is_err());
        let ok = StatementRef::triple(TermRef::Iri("http://s"), TermRef::Iri("http://p"), lit);
        assert_eq!(
            ok.as_oxrdf_triple().unwrap().to_string(),
            "<http://s> <http://p> \"x\""
        );
    }
}
