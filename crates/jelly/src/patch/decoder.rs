//! Jelly-Patch decoder: frame bytes in, [`PatchEvent`]s out, with the stream rules
//! of the Jelly-Patch specification checked as rows arrive.

use jelly_proto::fields::patch::{header as hf, namespace as nf, row};
use jelly_proto::wire::{Reader, WireError};

use crate::decoder::DecoderOptions;
use crate::error::{DecodeError, DecodeErrorKind as K, Table};
use crate::term::{StatementRef, TermBuf, TermRef};
use crate::term_decoder::{RawSlot, TermDecoder, TermField, expect_len, varint_at};

use super::options::{PATCH_VERSION, PatchOptions, PatchStatementType, PatchStreamType};

/// One decoded row of a patch stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchEvent<'a> {
    /// The options row (first occurrence only).
    Options(&'a PatchOptions),
    /// `H key value`.
    Header { key: &'a str, value: TermRef<'a> },
    /// `TX`.
    TransactionStart,
    /// `TC`.
    TransactionCommit,
    /// `TA`.
    TransactionAbort,
    /// `PA name iri [graph]`.
    AddNamespace {
        name: &'a str,
        iri: &'a str,
        graph: Option<TermRef<'a>>,
    },
    /// `PD name [iri] [graph]`.
    DeleteNamespace {
        name: &'a str,
        iri: Option<&'a str>,
        graph: Option<TermRef<'a>>,
    },
    /// `A s p o [g]` (`graph` is `None` in TRIPLES streams).
    Add(StatementRef<'a>),
    /// `D s p o [g]`.
    Delete(StatementRef<'a>),
    /// End of a patch in a PUNCTUATED stream.
    Punctuation,
}

/// Row counters, for `inspect`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PatchStats {
    pub frames: u64,
    pub adds: u64,
    pub deletes: u64,
    pub namespace_adds: u64,
    pub namespace_deletes: u64,
    pub headers: u64,
    pub transactions: u64,
    pub commits: u64,
    pub aborts: u64,
    pub punctuations: u64,
    pub lookup_entries: u64,
}

enum Produced {
    Nothing,
    Options,
    Header,
    Tx,
    Commit,
    Abort,
    NsAdd,
    NsDelete,
    Add,
    Delete,
    Punctuation,
}

/// Decoder state for one Jelly-Patch stream.
#[derive(Debug, Default)]
pub struct PatchDecoder {
    cfg: DecoderOptions,
    options: Option<PatchOptions>,
    terms: TermDecoder,
    in_tx: bool,
    header_key: String,
    header_value: TermBuf,
    ns_name: String,
    ns_iri: TermBuf,
    ns_has_iri: bool,
    ns_has_graph: bool,
    stats: PatchStats,
    /// Rows of the patch since the last punctuation (a PUNCTUATED stream must end
    /// each patch with one, the last included).
    unpunctuated: u64,
}

impl PatchDecoder {
    /// A decoder with the given limits (the same limits as Jelly-RDF decoding).
    pub fn new(cfg: DecoderOptions) -> Self {
        PatchDecoder {
            terms: TermDecoder::new(&cfg),
            cfg,
            ..Default::default()
        }
    }

    /// The stream options, once read.
    pub fn options(&self) -> Option<&PatchOptions> {
        self.options.as_ref()
    }

    /// Limits in force.
    pub fn config(&self) -> &DecoderOptions {
        &self.cfg
    }

    /// Counters so far.
    pub fn stats(&self) -> &PatchStats {
        &self.stats
    }

    /// True while a transaction is open.
    pub fn in_transaction(&self) -> bool {
        self.in_tx
    }

    /// Opens one `RdfPatchFrame`; `offset` is its position in the input, for errors.
    pub fn frame_at<'d, 'b>(
        &'d mut self,
        bytes: &'b [u8],
        offset: u64,
    ) -> PatchFrameCursor<'d, 'b> {
        let index = self.stats.frames;
        self.stats.frames += 1;
        PatchFrameCursor {
            dec: self,
            bytes,
            pos: 0,
            base: offset,
            index,
            row: 0,
            row_start: 0,
            ended: false,
        }
    }

    /// Checks the end of the stream: no transaction may be left open, and in a
    /// PUNCTUATED stream the last patch must be ended by its punctuation (a stream cut
    /// short would otherwise read as a shorter, complete patch).
    pub fn finish(&self) -> Result<(), K> {
        if self.in_tx {
            Err(K::UnterminatedTransaction)
        } else if self.unpunctuated > 0 && self.stream_type() == PatchStreamType::Punctuated {
            Err(K::UnendedPatch(self.unpunctuated))
        } else {
            Ok(())
        }
    }

    fn apply_options(&mut self, o: PatchOptions) -> Result<Produced, K> {
        if let Some(first) = &self.options {
            return if *first == o {
                Ok(Produced::Nothing)
            } else {
                Err(K::OptionsChanged)
            };
        }
        match o.version {
            0 => return Err(K::ZeroVersion),
            v if v > PATCH_VERSION => return Err(K::PatchVersion(v)),
            _ => {}
        }
        match o.statement_type {
            PatchStatementType::Triples | PatchStatementType::Quads => {}
            PatchStatementType::Unknown(v) => return Err(K::PatchStatementType(v)),
            PatchStatementType::Unspecified => return Err(K::PatchStatementType(0)),
        }
        match o.stream_type {
            PatchStreamType::Frame | PatchStreamType::Flat | PatchStreamType::Punctuated => {}
            PatchStreamType::Unknown(v) => return Err(K::PatchStreamType(v)),
            PatchStreamType::Unspecified => return Err(K::PatchStreamType(0)),
        }
        self.cfg.check_table_sizes(
            o.max_name_table_size,
            o.max_prefix_table_size,
            o.max_datatype_table_size,
        )?;
        self.terms.reset(
            o.max_name_table_size,
            o.max_prefix_table_size,
            o.max_datatype_table_size,
            o.generalized_statements,
            o.rdf_star,
        );
        self.terms.forbid_graph = o.statement_type == PatchStatementType::Triples;
        self.options = Some(o);
        Ok(Produced::Options)
    }

    fn quads(&self) -> bool {
        self.options
            .as_ref()
            .is_some_and(|o| o.statement_type == PatchStatementType::Quads)
    }

    fn stream_type(&self) -> PatchStreamType {
        self.options
            .as_ref()
            .map_or(PatchStreamType::Unspecified, |o| o.stream_type)
    }

    fn namespace(&mut self, mut r: Reader<'_>, add: bool) -> Result<(), K> {
        let mut value: Option<Reader<'_>> = None;
        let mut graph: RawSlot<'_> = None;
        let mut graph_at = 0;
        self.ns_name.clear();
        while let Some((field, wt)) = r.tag()? {
            let kind = match field {
                nf::NAME => {
                    expect_len(field, wt)?;
                    let s = r.str()?;
                    self.ns_name.clear();
                    self.ns_name.push_str(s);
                    continue;
                }
                nf::VALUE => {
                    expect_len(field, wt)?;
                    value = Some(r.message()?);
                    continue;
                }
                nf::G_IRI => TermField::Iri,
                nf::G_BNODE => TermField::Bnode,
                nf::G_DEFAULT => TermField::DefaultGraph,
                nf::G_LITERAL => TermField::Literal,
                _ => {
                    r.skip(wt)?;
                    continue;
                }
            };
            expect_len(field, wt)?;
            let p = r.message()?;
            if graph.is_some() {
                return Err(K::MultipleTermFields { position: "graph" });
            }
            graph = Some((kind, p.unread()));
            graph_at = p.offset();
        }
        // The spec orders the value IRI before the graph in the IRI delta state.
        self.ns_has_iri = value.is_some();
        match value {
            Some(v) => self.terms.state.resolve_iri(v, &mut self.ns_iri)?,
            None if add => return Err(K::PatchNamespaceWithoutIri),
            None => {}
        }
        if self.quads() {
            // Shares the graph slot (and its repeated term) with statements.
            self.terms.slot(3, graph).map_err(|e| e.shifted(graph_at))?;
            self.ns_has_graph = true;
        } else if graph.is_some() {
            return Err(K::GraphInTriplesPatch);
        } else {
            self.ns_has_graph = false;
        }
        Ok(())
    }

    fn header(&mut self, mut r: Reader<'_>) -> Result<(), K> {
        let mut value: Option<(TermField, Reader<'_>)> = None;
        self.header_key.clear();
        while let Some((field, wt)) = r.tag()? {
            let kind = match field {
                hf::KEY => {
                    expect_len(field, wt)?;
                    let s = r.str()?;
                    self.header_key.clear();
                    self.header_key.push_str(s);
                    continue;
                }
                hf::H_IRI => TermField::Iri,
                hf::H_BNODE => TermField::Bnode,
                hf::H_LITERAL => TermField::Literal,
                hf::H_TRIPLE => TermField::Triple,
                _ => {
                    r.skip(wt)?;
                    continue;
                }
            };
            expect_len(field, wt)?;
            let p = r.message()?;
            if value.is_some() {
                return Err(K::MultipleTermFields {
                    position: "header value",
                });
            }
            value = Some((kind, p));
        }
        let Some((kind, p)) = value else {
            return Err(K::HeaderWithoutValue);
        };
        // Checked as an object: any term kind, quoted triples only with rdf_star.
        self.terms
            .state
            .resolve_term(kind, p, &mut self.header_value, 2, 0)
    }

    fn row(&mut self, mut r: Reader<'_>) -> Result<Produced, K> {
        let mut found: Option<(u32, Reader<'_>)> = None;
        while let Some((field, wt)) = r.tag()? {
            match field {
                row::OPTIONS..=row::TRANSACTION_ABORT | row::NAME..=row::PUNCTUATION => {
                    expect_len(field, wt)?;
                    let m = r.message()?;
                    if found.is_some() {
                        return Err(K::MultipleRowFields(field));
                    }
                    found = Some((field, m));
                }
                _ => r.skip(wt)?,
            }
        }
        let Some((field, m)) = found else {
            return Err(K::EmptyRow);
        };
        if self.options.is_none() && field != row::OPTIONS {
            return Err(K::MissingOptions);
        }
        let n = if self.quads() { 4 } else { 3 };
        match field {
            row::OPTIONS => self.apply_options(PatchOptions::decode_from(m)?),
            row::STATEMENT_ADD => {
                self.stats.adds += 1;
                let at = m.offset();
                self.terms
                    .statement(m.unread(), n)
                    .map_err(|e| e.shifted(at))?;
                Ok(Produced::Add)
            }
            row::STATEMENT_DELETE => {
                self.stats.deletes += 1;
                let at = m.offset();
                self.terms
                    .statement(m.unread(), n)
                    .map_err(|e| e.shifted(at))?;
                Ok(Produced::Delete)
            }
            row::NAMESPACE_ADD => {
                self.stats.namespace_adds += 1;
                self.namespace(m, true)?;
                Ok(Produced::NsAdd)
            }
            row::NAMESPACE_DELETE => {
                self.stats.namespace_deletes += 1;
                self.namespace(m, false)?;
                Ok(Produced::NsDelete)
            }
            row::TRANSACTION_START => {
                if self.in_tx {
                    return Err(K::NestedTransaction);
                }
                self.stats.transactions += 1;
                self.in_tx = true;
                Ok(Produced::Tx)
            }
            row::TRANSACTION_COMMIT | row::TRANSACTION_ABORT => {
                let commit = field == row::TRANSACTION_COMMIT;
                if !self.in_tx {
                    return Err(K::NoTransaction(if commit {
                        "commit (TC)"
                    } else {
                        "abort (TA)"
                    }));
                }
                self.in_tx = false;
                if commit {
                    self.stats.commits += 1;
                    Ok(Produced::Commit)
                } else {
                    self.stats.aborts += 1;
                    Ok(Produced::Abort)
                }
            }
            row::NAME | row::PREFIX | row::DATATYPE => {
                self.stats.lookup_entries += 1;
                let table = match field {
                    row::NAME => Table::Name,
                    row::PREFIX => Table::Prefix,
                    _ => Table::Datatype,
                };
                self.terms.entry_row(table, m)?;
                Ok(Produced::Nothing)
            }
            row::HEADER => {
                self.stats.headers += 1;
                self.header(m)?;
                Ok(Produced::Header)
            }
            _ => {
                // row::PUNCTUATION
                if self.stream_type() != PatchStreamType::Punctuated {
                    return Err(K::PunctuationNotAllowed);
                }
                if self.in_tx {
                    return Err(K::PunctuationInTransaction);
                }
                self.stats.punctuations += 1;
                self.unpunctuated = 0;
                Ok(Produced::Punctuation)
            }
        }
    }

    fn statement_ref(&self) -> StatementRef<'_> {
        let t = &self.terms;
        StatementRef {
            subject: t.term_ref(&t.cur[0]),
            predicate: t.term_ref(&t.cur[1]),
            object: t.term_ref(&t.cur[2]),
            graph: self.quads().then(|| t.term_ref(&t.cur[3])),
        }
    }

    fn ns_graph(&self) -> Option<TermRef<'_>> {
        self.ns_has_graph
            .then(|| self.terms.term_ref(&self.terms.cur[3]))
    }
}

/// An open patch frame; call [`PatchFrameCursor::next_event`] until it returns `None`.
pub struct PatchFrameCursor<'d, 'b> {
    dec: &'d mut PatchDecoder,
    bytes: &'b [u8],
    pos: usize,
    base: u64,
    index: u64,
    row: u64,
    row_start: usize,
    ended: bool,
}

impl PatchFrameCursor<'_, '_> {
    /// Index of the frame in the stream.
    pub fn index(&self) -> u64 {
        self.index
    }

    /// Index within the frame of the row the last event came from (rows count from 0,
    /// including lookup-entry rows, as in error messages).
    pub fn row(&self) -> u64 {
        self.row.saturating_sub(1)
    }

    /// Locates an error of the row that starts at `row_start`; offsets in `kind` are
    /// offsets in the frame, moved here to the input's (as the Jelly-RDF decoder does).
    #[cold]
    fn err(&self, kind: K, row: Option<u64>) -> DecodeError {
        DecodeError {
            frame: self.index,
            row,
            offset: Some(self.base + self.row_start as u64),
            kind: kind.shifted(usize::try_from(self.base).unwrap_or(usize::MAX)),
        }
    }

    /// The next event of the frame, or `None` at its end. At the end of a frame of a
    /// FRAME stream, an open transaction is an error.
    pub fn next_event(&mut self) -> Result<Option<PatchEvent<'_>>, DecodeError> {
        let produced = loop {
            let b = self.bytes;
            if self.pos >= b.len() {
                if !self.ended {
                    self.ended = true;
                    self.row_start = self.pos;
                    if self.dec.stream_type() == PatchStreamType::Frame && self.dec.in_tx {
                        return Err(self.err(K::TransactionSpansFrames, None));
                    }
                }
                // As in Jelly-RDF streams (see `DecoderOptions::max_frames_before_options`).
                let max = self.dec.cfg.max_frames_before_options;
                if self.dec.options.is_none() && self.index + 1 > max {
                    return Err(self.err(K::NoOptionsInFirstFrames(max), None));
                }
                return Ok(None);
            }
            self.row_start = self.pos;
            let mut pos = self.pos;
            let key = varint_at(b, &mut pos).map_err(|e| self.err(e, None))?;
            if key >> 3 != 1 {
                let mut r = Reader::with_base(&b[self.pos..], self.pos);
                let skipped = r.tag().and_then(|t| match t {
                    Some((_, wt)) => r.skip(wt),
                    None => Ok(()),
                });
                skipped.map_err(|e| self.err(e.into(), None))?;
                self.pos = r.offset();
                continue;
            }
            let row_index = self.row;
            self.row += 1;
            if key & 7 != 2 {
                let kind = K::WrongWireType {
                    field: 1,
                    got: "non-length-delimited",
                    expected: "length-delimited",
                };
                return Err(self.err(kind, Some(row_index)));
            }
            let len = varint_at(b, &mut pos).map_err(|e| self.err(e, Some(row_index)))?;
            if len > (b.len() - pos) as u64 {
                return Err(self.err(WireError::Truncated(b.len()).into(), Some(row_index)));
            }
            let row = &b[pos..pos + len as usize];
            self.pos = pos + len as usize;
            match self.dec.row(Reader::with_base(row, pos)) {
                Ok(Produced::Nothing) => {}
                Ok(p @ (Produced::Options | Produced::Punctuation)) => break p,
                Ok(p) => {
                    self.dec.unpunctuated += 1;
                    break p;
                }
                Err(e) => return Err(self.err(e, Some(row_index))),
            }
        };
        let d: &PatchDecoder = self.dec;
        Ok(Some(match produced {
            Produced::Add => PatchEvent::Add(d.statement_ref()),
            Produced::Delete => PatchEvent::Delete(d.statement_ref()),
            Produced::Header => PatchEvent::Header {
                key: &d.header_key,
                value: d.header_value.as_ref(),
            },
            Produced::Tx => PatchEvent::TransactionStart,
            Produced::Commit => PatchEvent::TransactionCommit,
            Produced::Abort => PatchEvent::TransactionAbort,
            Produced::NsAdd => PatchEvent::AddNamespace {
                name: &d.ns_name,
                iri: &d.ns_iri.a,
                graph: d.ns_graph(),
            },
            Produced::NsDelete => PatchEvent::DeleteNamespace {
                name: &d.ns_name,
                iri: d.ns_has_iri.then_some(d.ns_iri.a.as_str()),
                graph: d.ns_graph(),
            },
            Produced::Punctuation => PatchEvent::Punctuation,
            Produced::Options | Produced::Nothing => match &d.options {
                Some(o) => PatchEvent::Options(o),
                None => return Ok(None),
            },
        }))
    }
}
