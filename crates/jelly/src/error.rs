//! Errors of the codec. Decoding errors name the frame, the row and the byte offset.

use std::fmt;

use jelly_proto::wire::WireError;
use thiserror::Error;

/// Which lookup table an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    Name,
    Prefix,
    Datatype,
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Table::Name => "name",
            Table::Prefix => "prefix",
            Table::Datatype => "datatype",
        })
    }
}

/// Statement position, for error messages.
pub(crate) const POSITIONS: [&str; 4] = ["subject", "predicate", "object", "graph"];

/// What is wrong with a Jelly stream.
#[derive(Debug, Error)]
pub enum DecodeErrorKind {
    #[error("malformed protobuf: {0}")]
    Wire(#[from] WireError),
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    #[error("the input ends in the middle of a frame (expected {expected} bytes, got {got})")]
    TruncatedFrame { expected: u64, got: u64 },
    #[error("frame of {len} bytes exceeds the limit of {max} bytes")]
    FrameTooLarge { len: u64, max: u64 },
    #[error("the first row of the stream must be the stream options")]
    MissingOptions,
    #[error(
        "no options row in the first {0} frames: a stream starts with its options row, and \
         frames without rows before it are not expected by the thousand (is the input \
         Jelly, or zero-filled?)"
    )]
    NoOptionsInFirstFrames(u64),
    #[error("stream options differ from the options at the start of the stream")]
    OptionsChanged,
    #[error("stream version 0 is invalid (version is required and must be > 0)")]
    ZeroVersion,
    #[error("stream version {0} is newer than supported (max {max})", max = crate::options::MAX_SUPPORTED_VERSION)]
    UnsupportedVersion(u32),
    #[error("physical stream type is UNSPECIFIED")]
    PhysicalTypeUnspecified,
    #[error("unknown physical stream type {0}")]
    UnknownPhysicalType(u32),
    #[error("name table size {0} is below the minimum of 8")]
    NameTableTooSmall(u32),
    #[error("requested {table} table size {requested} exceeds this decoder's limit of {limit}")]
    TableTooLarge {
        table: Table,
        requested: u32,
        limit: u32,
    },
    #[error("{row} row is not allowed in a {physical} stream")]
    RowNotAllowed {
        row: &'static str,
        physical: &'static str,
    },
    #[error("row sets no field")]
    EmptyRow,
    #[error("row sets more than one field of its oneof (field {0})")]
    MultipleRowFields(u32),
    /// An entry row's id, or a term's reference to an entry, beyond the table's size
    /// (the row's place in the error tells which).
    #[error("{table} id {id} is outside the table (size {max})")]
    EntryIdOutOfRange { table: Table, id: u64, max: u32 },
    #[error("prefix entry or reference while the prefix table is disabled (size 0)")]
    PrefixTableDisabled,
    #[error("reference to undefined {table} entry {id}")]
    UndefinedEntry { table: Table, id: u64 },
    #[error("repeated {position} in the first statement of the stream")]
    RepeatedTermFirst { position: &'static str },
    #[error("missing {position} in a quoted triple (repeated terms are not allowed there)")]
    RepeatedTermInQuoted { position: &'static str },
    #[error("{position} sets more than one term field")]
    MultipleTermFields { position: &'static str },
    #[error("literal datatype is 0 (datatype ids start at 1)")]
    DatatypeZero,
    #[error("literal sets both a language tag and a datatype")]
    LangAndDatatype,
    #[error("invalid language tag {0:?} (letters, then `-`-separated letters and digits)")]
    InvalidLanguageTag(String),
    #[error("{table} entry {id} holds {ch:?}, which an IRI cannot contain")]
    InvalidIriChar { table: Table, id: u32, ch: char },
    #[error("quoted triples nested deeper than the limit of {0}")]
    TooDeep(usize),
    #[error(
        "the terms inside a quoted triple exceed the limit of {0} bytes (the largest frame accepted)"
    )]
    QuotedTooLarge(u64),
    #[error("graph_start row sets no graph")]
    GraphStartUnset,
    #[error("triple outside a graph in a GRAPHS stream")]
    TripleOutsideGraph,
    #[error("graph_start inside a graph (missing graph_end)")]
    NestedGraphStart,
    #[error("{kind} in {position} position requires generalized_statements")]
    GeneralizedNotAllowed {
        kind: &'static str,
        position: &'static str,
    },
    #[error("quoted triple in {position} position requires rdf_star")]
    RdfStarNotAllowed { position: &'static str },
    #[error("namespace declaration has no IRI value")]
    NamespaceWithoutIri,
    /// Not reported by the decoder itself (see `Decoder`'s namespace rows), but by
    /// stricter checks such as `jelly rdf validate`.
    #[error(
        "namespace declaration in a version {0} stream (namespace declarations came with version 2)"
    )]
    NamespaceBeforeVersion2(u32),
    /// A term the decoder reads but RDF does not allow (a relative IRI, say); raised by
    /// validators, which hold streams to RDF, not by the decoder.
    #[error("{0}")]
    NotRdf(String),
    #[error("field {field} has wire type {got}, expected {expected}")]
    WrongWireType {
        field: u32,
        got: &'static str,
        expected: &'static str,
    },
    #[error("input is empty")]
    EmptyInput,
    #[error("graph set on a statement or namespace in a TRIPLES patch stream")]
    GraphInTriplesPatch,
    #[error("patch statement type is UNSPECIFIED or unknown ({0})")]
    PatchStatementType(u32),
    #[error("patch stream type is UNSPECIFIED or unknown ({0})")]
    PatchStreamType(u32),
    #[error("patch version {0} is not supported (Jelly-Patch 1.0.x is version 1)")]
    PatchVersion(u32),
    #[error("transaction start inside a transaction (transactions do not nest)")]
    NestedTransaction,
    #[error("{0} outside a transaction")]
    NoTransaction(&'static str),
    #[error(
        "transaction still open at the end of the frame (in a FRAME stream a transaction must not span frames)"
    )]
    TransactionSpansFrames,
    #[error("transaction still open at the end of the patch")]
    UnterminatedTransaction,
    #[error(
        "the last patch is not ended: {0} row(s) after the last punctuation (each patch of a PUNCTUATED stream ends with one; was the stream cut short?)"
    )]
    UnendedPatch(u64),
    #[error("punctuation inside a transaction")]
    PunctuationInTransaction,
    #[error("punctuation is only allowed in PUNCTUATED patch streams")]
    PunctuationNotAllowed,
    #[error("namespace add (PA) without an IRI value")]
    PatchNamespaceWithoutIri,
    #[error("header without a value")]
    HeaderWithoutValue,
    /// Tables grow with the entries a stream sets, up to the size it asked for; this
    /// is an entry whose slot could not be allocated (a limit raised past memory).
    #[error("cannot allocate room for entry {id} of the {table} table")]
    TableAllocation { table: Table, id: u64 },
}

impl DecodeErrorKind {
    /// The same error with its byte offset (if it has one) moved `by` bytes on.
    ///
    /// The decoding functions report offsets in the buffer they were given (a term's or
    /// a statement's payload, a frame), which is all they know; each caller moves them
    /// to its own buffer's, up to the frame cursor, which moves them to the input's, so
    /// that every "at byte N" of a [`DecodeError`] is a position in the input. Only
    /// errors pay for this: the decoding itself carries no offsets around.
    #[must_use]
    pub(crate) fn shifted(self, by: usize) -> Self {
        match self {
            DecodeErrorKind::Wire(e) => DecodeErrorKind::Wire(e.shifted(by)),
            other => other,
        }
    }
}

/// A decoding error with its location.
///
/// `frame` counts from 0, `row` counts from 0 within the frame, `offset` is the byte
/// offset in the input (for a delimited stream, from the start of the stream).
#[derive(Debug, Error)]
pub struct DecodeError {
    pub frame: u64,
    pub row: Option<u64>,
    pub offset: Option<u64>,
    #[source]
    pub kind: DecodeErrorKind,
}

impl DecodeError {
    /// The error with the byte offsets inside its kind moved `by` bytes on (see
    /// [`DecodeErrorKind::shifted`]).
    #[cold]
    #[inline(never)]
    pub(crate) fn moved(mut self, by: u64) -> Self {
        self.kind = self.kind.shifted(usize::try_from(by).unwrap_or(usize::MAX));
        self
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "frame {}", self.frame)?;
        if let Some(r) = self.row {
            write!(f, ", row {r}")?;
        }
        if let Some(o) = self.offset {
            write!(f, " (byte {o})")?;
        }
        write!(f, ": {}", self.kind)
    }
}

/// Why the encoder refused a statement or configuration.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum EncodeError {
    #[error("name table size {0} is below the minimum of 8")]
    NameTableTooSmall(u32),
    #[error("typed literal with datatype <{0}> while the datatype table is disabled (size 0)")]
    DatatypeTableDisabled(String),
    #[error("quoted triple in {0} position while rdf_star is off")]
    RdfStarNotEnabled(&'static str),
    #[error("{kind} in {position} position while generalized_statements is off")]
    GeneralizedNotEnabled {
        kind: &'static str,
        position: &'static str,
    },
    #[error("{op} is not allowed in a {physical} stream")]
    WrongPhysicalType {
        op: &'static str,
        physical: &'static str,
    },
    #[error("physical stream type must be TRIPLES, QUADS or GRAPHS")]
    PhysicalTypeUnspecified,
    #[error("namespace declarations need protocol version 2 or later (options say {0})")]
    VersionTooLowForNamespaces(u32),
    #[error("default graph outside the graph position")]
    DefaultGraphMisplaced,
    #[error("graph_start while a graph is open")]
    GraphAlreadyOpen,
    #[error("triple outside a graph in a GRAPHS stream")]
    NoOpenGraph,
    #[error("one row needs more distinct {table} entries than the {table} table holds ({size})")]
    TableTooSmallForRow { table: Table, size: u32 },
    #[error("Jelly-Patch rule: {0}")]
    PatchRule(&'static str),
}
