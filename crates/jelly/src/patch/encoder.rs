//! Jelly-Patch encoder: patch operations in, `RdfPatchFrame` bytes out.

use jelly_proto::fields::patch::{header as hf, namespace as nf, row};
use jelly_proto::wire::{put_bytes_field, put_varint};

use crate::error::EncodeError;
use crate::term::{StatementRef, TermRef};
use crate::term_encoder::{AT_PATCH_HEADER, AT_PATCH_NAMESPACE_GRAPH, EntryFields, TermEncoder};

use super::options::{PATCH_VERSION, PatchOptions, PatchStatementType, PatchStreamType};

/// Encodes patch operations into frames, refusing what the Jelly-Patch rules forbid.
///
/// ```
/// use jelly::patch::{PatchEncoder, PatchOptions, PatchStatementType, PatchStreamType};
/// use jelly::{StatementRef, TermRef};
/// let mut enc = PatchEncoder::new(PatchOptions::small(PatchStatementType::Quads, PatchStreamType::Flat)).unwrap();
/// enc.add_namespace("ex", "http://example.org/", Some(TermRef::DefaultGraph)).unwrap();
/// let q = StatementRef::quad(TermRef::Iri("http://example.org/s"), TermRef::Iri("http://example.org/p"),
///     TermRef::BlankNode("b0"), TermRef::DefaultGraph);
/// enc.delete(q).unwrap();
/// assert!(enc.transaction_commit().is_err()); // no transaction open
/// let frame = enc.finish_frame();
/// assert!(!frame.is_empty());
/// ```
#[derive(Debug)]
pub struct PatchEncoder {
    opts: PatchOptions,
    terms: TermEncoder,
    options_written: bool,
    in_tx: bool,
    operations: u64,
}

impl PatchEncoder {
    /// An encoder for a stream with these options (`version` 0 becomes 1).
    pub fn new(mut opts: PatchOptions) -> Result<Self, EncodeError> {
        if opts.max_name_table_size < 8 {
            return Err(EncodeError::NameTableTooSmall(opts.max_name_table_size));
        }
        if !matches!(
            opts.statement_type,
            PatchStatementType::Triples | PatchStatementType::Quads
        ) || !matches!(
            opts.stream_type,
            PatchStreamType::Frame | PatchStreamType::Flat | PatchStreamType::Punctuated
        ) {
            return Err(EncodeError::PatchRule(
                "statement type and stream type must be set",
            ));
        }
        if opts.version == 0 {
            opts.version = PATCH_VERSION;
        }
        let mut terms = TermEncoder::new(
            opts.max_name_table_size,
            opts.max_prefix_table_size,
            opts.max_datatype_table_size,
            opts.generalized_statements,
            opts.rdf_star,
            EntryFields {
                name: row::NAME,
                prefix: row::PREFIX,
                datatype: row::DATATYPE,
            },
        );
        // Explicit ids at the start, as Jelly-RDF streams have by default: two patch
        // files of the same options joined with `cat` decode as both.
        terms.forget_delta_state();
        Ok(PatchEncoder {
            terms,
            opts,
            options_written: false,
            in_tx: false,
            operations: 0,
        })
    }

    /// The options written to the stream.
    pub fn options(&self) -> &PatchOptions {
        &self.opts
    }

    /// Rows in the current frame.
    pub fn frame_rows(&self) -> usize {
        self.terms.rows
    }

    /// Bytes in the current (unfinished) frame.
    pub fn frame_bytes(&self) -> usize {
        self.terms.buf.len()
    }

    /// True while a transaction is open.
    pub fn in_transaction(&self) -> bool {
        self.in_tx
    }

    /// Operations (rows other than options and lookup entries) written so far.
    pub fn operations(&self) -> u64 {
        self.operations
    }

    fn ensure_options(&mut self) {
        if !self.options_written {
            self.options_written = true;
            let body = self.opts.encode_to_vec();
            self.terms.push_row(row::OPTIONS, &body);
        }
    }

    fn quads(&self) -> bool {
        self.opts.statement_type == PatchStatementType::Quads
    }

    fn statement(&mut self, field: u32, s: StatementRef<'_>) -> Result<(), EncodeError> {
        let quads = self.quads();
        let g = match (quads, s.graph) {
            (true, g) => Some(g.unwrap_or(TermRef::DefaultGraph)),
            (false, None | Some(TermRef::DefaultGraph)) => None,
            (false, Some(_)) => {
                return Err(EncodeError::PatchRule(
                    "a TRIPLES patch stream cannot name a graph",
                ));
            }
        };
        let s = StatementRef { graph: g, ..s };
        self.terms.check_statement(&s, quads)?;
        self.ensure_options();
        self.terms.write_statement(field, &s, quads)?;
        self.operations += 1;
        Ok(())
    }

    /// `A`: adds a triple or quad.
    pub fn add(&mut self, s: StatementRef<'_>) -> Result<(), EncodeError> {
        self.statement(row::STATEMENT_ADD, s)
    }

    /// `D`: deletes a triple or quad.
    pub fn delete(&mut self, s: StatementRef<'_>) -> Result<(), EncodeError> {
        self.statement(row::STATEMENT_DELETE, s)
    }

    fn namespace(
        &mut self,
        field: u32,
        name: &str,
        iri: Option<&str>,
        graph: Option<TermRef<'_>>,
    ) -> Result<(), EncodeError> {
        let graph = match (self.quads(), graph) {
            (true, g) => Some(g.unwrap_or(TermRef::DefaultGraph)),
            (false, None | Some(TermRef::DefaultGraph)) => None,
            (false, Some(_)) => {
                return Err(EncodeError::PatchRule(
                    "a TRIPLES patch stream cannot name a graph",
                ));
            }
        };
        if let Some(g) = graph {
            self.terms.check_term_deep(g, 3)?;
        }
        self.ensure_options();
        self.terms.stamp = self.terms.stamp.wrapping_add(1);
        let mut body = std::mem::take(&mut self.terms.scratch[0]);
        body.clear();
        if !name.is_empty() {
            put_bytes_field(&mut body, nf::NAME, name.as_bytes());
        }
        let mut r = Ok(());
        if let Some(iri) = iri {
            r = self
                .terms
                .iri_ids(iri)
                .map(|ids| TermEncoder::put_iri(&mut body, nf::VALUE, ids));
        }
        if let (Ok(()), Some(g)) = (&r, graph) {
            // The graph shares the repeated-term slot of statement graphs.
            r = self
                .terms
                .repeatable_term(3, g, AT_PATCH_NAMESPACE_GRAPH, &mut body);
        }
        if r.is_ok() {
            self.terms.push_row(field, &body);
            self.operations += 1;
        }
        self.terms.scratch[0] = body;
        r
    }

    /// `PA`: declares a namespace (in QUADS streams, for `graph`; `None` means the default graph).
    pub fn add_namespace(
        &mut self,
        name: &str,
        iri: &str,
        graph: Option<TermRef<'_>>,
    ) -> Result<(), EncodeError> {
        self.namespace(row::NAMESPACE_ADD, name, Some(iri), graph)
    }

    /// `PD`: removes a namespace declaration.
    pub fn delete_namespace(
        &mut self,
        name: &str,
        iri: Option<&str>,
        graph: Option<TermRef<'_>>,
    ) -> Result<(), EncodeError> {
        self.namespace(row::NAMESPACE_DELETE, name, iri, graph)
    }

    /// `H key value`.
    pub fn header(&mut self, key: &str, value: TermRef<'_>) -> Result<(), EncodeError> {
        if matches!(value, TermRef::DefaultGraph) {
            return Err(EncodeError::DefaultGraphMisplaced);
        }
        self.terms.check_term_deep(value, 2)?;
        self.ensure_options();
        self.terms.stamp = self.terms.stamp.wrapping_add(1);
        let mut body = std::mem::take(&mut self.terms.scratch[0]);
        body.clear();
        put_bytes_field(&mut body, hf::KEY, key.as_bytes());
        let r = self.terms.term_field(value, AT_PATCH_HEADER, &mut body, 0);
        if r.is_ok() {
            self.terms.push_row(row::HEADER, &body);
            self.operations += 1;
        }
        self.terms.scratch[0] = body;
        r
    }

    fn marker(&mut self, field: u32) {
        self.ensure_options();
        self.terms.push_row(field, &[]);
        self.operations += 1;
    }

    /// `TX`.
    pub fn transaction_start(&mut self) -> Result<(), EncodeError> {
        if self.in_tx {
            return Err(EncodeError::PatchRule("transactions do not nest"));
        }
        self.marker(row::TRANSACTION_START);
        self.in_tx = true;
        Ok(())
    }

    /// `TC`.
    pub fn transaction_commit(&mut self) -> Result<(), EncodeError> {
        if !self.in_tx {
            return Err(EncodeError::PatchRule("commit (TC) outside a transaction"));
        }
        self.marker(row::TRANSACTION_COMMIT);
        self.in_tx = false;
        Ok(())
    }

    /// `TA`.
    pub fn transaction_abort(&mut self) -> Result<(), EncodeError> {
        if !self.in_tx {
            return Err(EncodeError::PatchRule("abort (TA) outside a transaction"));
        }
        self.marker(row::TRANSACTION_ABORT);
        self.in_tx = false;
        Ok(())
    }

    /// Ends a patch in a PUNCTUATED stream.
    pub fn punctuation(&mut self) -> Result<(), EncodeError> {
        if self.opts.stream_type != PatchStreamType::Punctuated {
            return Err(EncodeError::PatchRule(
                "punctuation is only allowed in PUNCTUATED streams",
            ));
        }
        if self.in_tx {
            return Err(EncodeError::PatchRule("punctuation inside a transaction"));
        }
        self.marker(row::PUNCTUATION);
        Ok(())
    }

    /// Ends the current frame and returns it (no length prefix).
    pub fn finish_frame(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        self.finish_frame_into(&mut out, false);
        out
    }

    /// Ends the current frame, appending it to `out` (length-prefixed when `delimited`),
    /// and returns the frame's length without its prefix.
    /// In FRAME streams a frame is one patch, so callers should not end a frame while a
    /// transaction is open ([`PatchWriter`](super::PatchWriter) refuses to).
    pub fn finish_frame_into(&mut self, out: &mut Vec<u8>, delimited: bool) -> usize {
        self.ensure_options();
        let len = self.terms.buf.len();
        if delimited {
            put_varint(out, len as u64);
        }
        out.extend_from_slice(&self.terms.buf);
        self.terms.buf.clear();
        self.terms.rows = 0;
        len
    }
}
