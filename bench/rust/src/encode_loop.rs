//! The benchmarks' encode loop: statements into a writer, or into a shared-input
//! session of one, with a frame per graph when grouped.

use jelly::{
    FrameSink, JellyVecWriter, SharedWriter, Statement, StatementRef, TermRef, WriteError,
};

/// Where [`write_all`] puts statements: a writer, or a shared-input session of one.
pub trait StatementSink<'s> {
    /// Adds the statement at `st`: a writer takes a copy (its `add` takes statements
    /// by value), a shared-input session reads it in place.
    fn add_ref(&mut self, st: &StatementRef<'s>) -> Result<(), WriteError>;
    fn flush(&mut self) -> Result<(), WriteError>;
}

impl<'s> StatementSink<'s> for JellyVecWriter<'_> {
    #[inline(always)]
    fn add_ref(&mut self, st: &StatementRef<'s>) -> Result<(), WriteError> {
        JellyVecWriter::add(self, *st)
    }
    fn flush(&mut self) -> Result<(), WriteError> {
        self.flush_frame()
    }
}

impl<'s, T: FrameSink> StatementSink<'s> for SharedWriter<'_, 's, T> {
    #[inline(always)]
    fn add_ref(&mut self, st: &StatementRef<'s>) -> Result<(), WriteError> {
        SharedWriter::add_ref(self, st)
    }
    fn flush(&mut self) -> Result<(), WriteError> {
        self.flush_frame()
    }
}

/// Adds every statement, each read where it sits in the slice ([`StatementSink::add_ref`]);
/// grouped, ends the frame when the graph changes.
#[inline(always)]
pub fn write_all<'a, 's: 'a>(
    statements: &'a [StatementRef<'s>],
    grouped: bool,
    sink: &mut impl StatementSink<'s>,
) -> Result<(), WriteError> {
    let mut prev_graph: Option<TermRef<'_>> = None;
    for st in statements {
        if grouped {
            let g = st.graph;
            if prev_graph.is_some() && !same_graph(prev_graph, g) {
                sink.flush()?;
            }
            prev_graph = g;
        }
        sink.add_ref(st)?;
    }
    Ok(())
}

/// [`write_all`] for owned statements, into a writer. Written out rather than through
/// `write_all(statements.iter().map(Statement::as_ref), ..)`, which counts about 3% more
/// instructions per statement (callgrind, iot-weather), so that the owned-input rows
/// stay comparable with the figures of earlier sessions.
#[inline(always)]
pub fn write_owned(
    statements: &[Statement],
    grouped: bool,
    w: &mut JellyVecWriter<'_>,
) -> Result<(), WriteError> {
    let mut prev_graph: Option<TermRef<'_>> = None;
    for st in statements {
        let st = st.as_ref();
        if grouped {
            let g = st.graph;
            if prev_graph.is_some() && !same_graph(prev_graph, g) {
                w.flush_frame()?;
            }
            prev_graph = g;
        }
        w.add(st)?;
    }
    Ok(())
}

/// Whether two statements' graphs are the same, decided as Jena's `Node.equals` decides
/// it for the JVM peer's frame-per-graph writer: the same object first (here: the same
/// string in memory, as with interned input), then the same text.
#[inline]
pub fn same_graph(a: Option<TermRef<'_>>, b: Option<TermRef<'_>>) -> bool {
    match (a, b) {
        (Some(TermRef::Iri(x)), Some(TermRef::Iri(y))) => std::ptr::eq(x, y) || x == y,
        _ => a == b,
    }
}
