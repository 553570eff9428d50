//! `RdfPatchOptions`: the header row of every Jelly-Patch stream.

use jelly_proto::fields::patch::{options as f, statement_type as stt, stream_type as sty};
use jelly_proto::wire::{Reader, WireError, WireType, put_bool_field, put_uint_field};

/// Version tag of Jelly-Patch 1.0.x.
pub const PATCH_VERSION: u32 = 1;

/// Whether statements are triples or quads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PatchStatementType {
    /// `PATCH_STATEMENT_TYPE_UNSPECIFIED` or an unknown value: invalid in a stream.
    #[default]
    Unspecified,
    Triples,
    Quads,
    Unknown(u32),
}

impl PatchStatementType {
    fn to_u32(self) -> u32 {
        match self {
            Self::Unspecified => stt::UNSPECIFIED,
            Self::Triples => stt::TRIPLES,
            Self::Quads => stt::QUADS,
            Self::Unknown(v) => v,
        }
    }
    fn from_u32(v: u32) -> Self {
        match v {
            stt::UNSPECIFIED => Self::Unspecified,
            stt::TRIPLES => Self::Triples,
            stt::QUADS => Self::Quads,
            v => Self::Unknown(v),
        }
    }
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Triples => "triples",
            Self::Quads => "quads",
            _ => "unspecified",
        }
    }
}

/// How patches map onto frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PatchStreamType {
    /// `PATCH_STREAM_TYPE_UNSPECIFIED` or an unknown value: invalid in a stream.
    #[default]
    Unspecified,
    /// Each frame is one patch; transactions never span frames.
    Frame,
    /// The whole stream is one patch.
    Flat,
    /// Patches end with punctuation rows, anywhere in frames.
    Punctuated,
    Unknown(u32),
}

impl PatchStreamType {
    fn to_u32(self) -> u32 {
        match self {
            Self::Unspecified => sty::UNSPECIFIED,
            Self::Frame => sty::FRAME,
            Self::Flat => sty::FLAT,
            Self::Punctuated => sty::PUNCTUATED,
            Self::Unknown(v) => v,
        }
    }
    fn from_u32(v: u32) -> Self {
        match v {
            sty::UNSPECIFIED => Self::Unspecified,
            sty::FRAME => Self::Frame,
            sty::FLAT => Self::Flat,
            sty::PUNCTUATED => Self::Punctuated,
            v => Self::Unknown(v),
        }
    }
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Frame => "frame",
            Self::Flat => "flat",
            Self::Punctuated => "punctuated",
            _ => "unspecified",
        }
    }
}

/// `RdfPatchOptions`.
///
/// ```
/// use jelly::patch::{PatchOptions, PatchStatementType, PatchStreamType};
/// let o = PatchOptions::big(PatchStatementType::Quads, PatchStreamType::Punctuated);
/// assert_eq!(PatchOptions::decode(&o.encode_to_vec()).unwrap(), o);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct PatchOptions {
    pub statement_type: PatchStatementType,
    pub stream_type: PatchStreamType,
    pub generalized_statements: bool,
    pub rdf_star: bool,
    pub max_name_table_size: u32,
    pub max_prefix_table_size: u32,
    pub max_datatype_table_size: u32,
    /// Protocol version; 0 when encoding means [`PATCH_VERSION`].
    pub version: u32,
}

impl PatchOptions {
    /// Table sizes of the BIG preset (4000/150/32).
    pub fn big(statement_type: PatchStatementType, stream_type: PatchStreamType) -> Self {
        Self::with_tables(statement_type, stream_type, 4000, 150, 32)
    }

    /// Table sizes of the SMALL preset (128/16/16).
    pub fn small(statement_type: PatchStatementType, stream_type: PatchStreamType) -> Self {
        Self::with_tables(statement_type, stream_type, 128, 16, 16)
    }

    /// Custom table sizes.
    pub fn with_tables(
        statement_type: PatchStatementType,
        stream_type: PatchStreamType,
        name: u32,
        prefix: u32,
        datatype: u32,
    ) -> Self {
        PatchOptions {
            statement_type,
            stream_type,
            max_name_table_size: name,
            max_prefix_table_size: prefix,
            max_datatype_table_size: datatype,
            version: PATCH_VERSION,
            ..Default::default()
        }
    }

    /// Appends the message body.
    pub fn encode(&self, out: &mut Vec<u8>) {
        put_uint_field(
            out,
            f::STATEMENT_TYPE,
            u64::from(self.statement_type.to_u32()),
        );
        put_uint_field(out, f::STREAM_TYPE, u64::from(self.stream_type.to_u32()));
        put_bool_field(out, f::GENERALIZED_STATEMENTS, self.generalized_statements);
        put_bool_field(out, f::RDF_STAR, self.rdf_star);
        put_uint_field(
            out,
            f::MAX_NAME_TABLE_SIZE,
            u64::from(self.max_name_table_size),
        );
        put_uint_field(
            out,
            f::MAX_PREFIX_TABLE_SIZE,
            u64::from(self.max_prefix_table_size),
        );
        put_uint_field(
            out,
            f::MAX_DATATYPE_TABLE_SIZE,
            u64::from(self.max_datatype_table_size),
        );
        put_uint_field(out, f::VERSION, u64::from(self.version));
    }

    /// The message body as a new vector.
    pub fn encode_to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(24);
        self.encode(&mut v);
        v
    }

    /// Decodes a message body; unknown fields are skipped.
    pub fn decode(bytes: &[u8]) -> Result<Self, WireError> {
        Self::decode_from(Reader::new(bytes))
    }

    pub(crate) fn decode_from(mut r: Reader<'_>) -> Result<Self, WireError> {
        let mut o = PatchOptions::default();
        while let Some((field, wt)) = r.tag()? {
            match (field, wt) {
                (f::STATEMENT_TYPE, WireType::Varint) => {
                    o.statement_type = PatchStatementType::from_u32(r.varint32()?)
                }
                (f::STREAM_TYPE, WireType::Varint) => {
                    o.stream_type = PatchStreamType::from_u32(r.varint32()?)
                }
                (f::GENERALIZED_STATEMENTS, WireType::Varint) => {
                    o.generalized_statements = r.varint()? != 0
                }
                (f::RDF_STAR, WireType::Varint) => o.rdf_star = r.varint()? != 0,
                (f::MAX_NAME_TABLE_SIZE, WireType::Varint) => {
                    o.max_name_table_size = r.varint32()?
                }
                (f::MAX_PREFIX_TABLE_SIZE, WireType::Varint) => {
                    o.max_prefix_table_size = r.varint32()?
                }
                (f::MAX_DATATYPE_TABLE_SIZE, WireType::Varint) => {
                    o.max_datatype_table_size = r.varint32()?
                }
                (f::VERSION, WireType::Varint) => o.version = r.varint32()?,
                (_, wt) => r.skip(wt)?,
            }
        }
        Ok(o)
    }
}
