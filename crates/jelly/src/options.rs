//! Stream options (`RdfStreamOptions`) and presets.

use jelly_proto::fields::{logical_type as lt, options as f, physical_type as pt};
use jelly_proto::wire::{
    Reader, WireError, WireType, put_bool_field, put_str_field_nonempty, put_uint_field,
};

/// Physical stream type: how statements are laid out in rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PhysicalType {
    /// `PHYSICAL_STREAM_TYPE_UNSPECIFIED`: invalid in a stream, kept so a decoder can report it.
    #[default]
    Unspecified,
    /// Triple rows only.
    Triples,
    /// Quad rows only.
    Quads,
    /// Triples grouped between `graph_start` and `graph_end` rows.
    Graphs,
    /// A value this implementation does not know.
    Unknown(u32),
}

impl PhysicalType {
    /// Wire value.
    pub fn to_u32(self) -> u32 {
        match self {
            PhysicalType::Unspecified => pt::UNSPECIFIED,
            PhysicalType::Triples => pt::TRIPLES,
            PhysicalType::Quads => pt::QUADS,
            PhysicalType::Graphs => pt::GRAPHS,
            PhysicalType::Unknown(v) => v,
        }
    }

    /// From the wire value.
    pub fn from_u32(v: u32) -> Self {
        match v {
            pt::UNSPECIFIED => PhysicalType::Unspecified,
            pt::TRIPLES => PhysicalType::Triples,
            pt::QUADS => PhysicalType::Quads,
            pt::GRAPHS => PhysicalType::Graphs,
            other => PhysicalType::Unknown(other),
        }
    }

    /// Lower-case name used by the CLI and reports.
    pub fn name(self) -> &'static str {
        match self {
            PhysicalType::Unspecified => "unspecified",
            PhysicalType::Triples => "triples",
            PhysicalType::Quads => "quads",
            PhysicalType::Graphs => "graphs",
            PhysicalType::Unknown(_) => "unknown",
        }
    }
}

/// Logical stream type (RDF-STaX). Kept as the raw number, since subtypes are open-ended
/// and the base type is `value % 10`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct LogicalType(pub u32);

impl LogicalType {
    pub const UNSPECIFIED: LogicalType = LogicalType(lt::UNSPECIFIED);
    pub const FLAT_TRIPLES: LogicalType = LogicalType(lt::FLAT_TRIPLES);
    pub const FLAT_QUADS: LogicalType = LogicalType(lt::FLAT_QUADS);
    pub const GRAPHS: LogicalType = LogicalType(lt::GRAPHS);
    pub const DATASETS: LogicalType = LogicalType(lt::DATASETS);
    pub const SUBJECT_GRAPHS: LogicalType = LogicalType(lt::SUBJECT_GRAPHS);
    pub const NAMED_GRAPHS: LogicalType = LogicalType(lt::NAMED_GRAPHS);
    pub const TIMESTAMPED_NAMED_GRAPHS: LogicalType = LogicalType(lt::TIMESTAMPED_NAMED_GRAPHS);

    /// The base type (1–4, or 0): the spec defines it as `value % 10`.
    pub fn base(self) -> LogicalType {
        LogicalType(self.0 % 10)
    }

    /// True for the "framed" types, where one frame is one element (graph or dataset).
    pub fn is_grouped(self) -> bool {
        matches!(self.base().0, lt::GRAPHS | lt::DATASETS)
    }

    /// Whether the combination with `physical` is one the spec recommends (its support
    /// matrix marks the others "✘").
    pub fn fits(self, physical: PhysicalType) -> bool {
        matches!(
            (self.base().0, physical),
            (lt::UNSPECIFIED, _)
                | (lt::FLAT_TRIPLES | lt::GRAPHS, PhysicalType::Triples)
                | (
                    lt::FLAT_QUADS | lt::DATASETS,
                    PhysicalType::Quads | PhysicalType::Graphs
                )
        )
    }

    /// This type carried over to a stream of `physical` type: itself where it fits,
    /// else its counterpart (flat triples and flat quads; graphs and datasets, the
    /// framed kinds), else unspecified. For re-encoding a stream as another physical
    /// type without leaving a logical type its readers may refuse.
    ///
    /// ```
    /// use jelly::{LogicalType, PhysicalType};
    /// assert_eq!(LogicalType::FLAT_TRIPLES.for_physical(PhysicalType::Quads), LogicalType::FLAT_QUADS);
    /// assert_eq!(LogicalType::NAMED_GRAPHS.for_physical(PhysicalType::Triples), LogicalType::GRAPHS);
    /// assert_eq!(LogicalType::SUBJECT_GRAPHS.for_physical(PhysicalType::Triples), LogicalType::SUBJECT_GRAPHS);
    /// ```
    pub fn for_physical(self, physical: PhysicalType) -> LogicalType {
        if self.fits(physical) {
            return self;
        }
        match (self.base().0, physical) {
            (lt::FLAT_QUADS, PhysicalType::Triples) => LogicalType::FLAT_TRIPLES,
            (lt::DATASETS, PhysicalType::Triples) => LogicalType::GRAPHS,
            (lt::FLAT_TRIPLES, PhysicalType::Quads | PhysicalType::Graphs) => {
                LogicalType::FLAT_QUADS
            }
            (lt::GRAPHS, PhysicalType::Quads | PhysicalType::Graphs) => LogicalType::DATASETS,
            _ => LogicalType::UNSPECIFIED,
        }
    }

    /// Parses a CLI-style name (`flat-triples`, `named-graphs`, …) or a number.
    pub fn parse(s: &str) -> Option<LogicalType> {
        let norm = s.to_ascii_lowercase().replace('_', "-");
        let v = match norm.as_str() {
            "unspecified" => lt::UNSPECIFIED,
            "flat-triples" => lt::FLAT_TRIPLES,
            "flat-quads" => lt::FLAT_QUADS,
            "graphs" => lt::GRAPHS,
            "datasets" => lt::DATASETS,
            "subject-graphs" => lt::SUBJECT_GRAPHS,
            "named-graphs" => lt::NAMED_GRAPHS,
            "timestamped-named-graphs" => lt::TIMESTAMPED_NAMED_GRAPHS,
            other => other.parse().ok()?,
        };
        Some(LogicalType(v))
    }

    /// Lower-case name, or the number for unknown subtypes.
    pub fn name(self) -> String {
        match self.0 {
            lt::UNSPECIFIED => "unspecified".into(),
            lt::FLAT_TRIPLES => "flat-triples".into(),
            lt::FLAT_QUADS => "flat-quads".into(),
            lt::GRAPHS => "graphs".into(),
            lt::DATASETS => "datasets".into(),
            lt::SUBJECT_GRAPHS => "subject-graphs".into(),
            lt::NAMED_GRAPHS => "named-graphs".into(),
            lt::TIMESTAMPED_NAMED_GRAPHS => "timestamped-named-graphs".into(),
            other => other.to_string(),
        }
    }
}

/// Protocol version tag for Jelly-RDF 1.0.x.
pub const VERSION_1_0: u32 = 1;
/// Protocol version tag for Jelly-RDF 1.1.x (namespace declarations, frame metadata).
pub const VERSION_1_1: u32 = 2;
/// Highest version tag this implementation reads.
pub const MAX_SUPPORTED_VERSION: u32 = VERSION_1_1;

/// `RdfStreamOptions`: the header row of every Jelly-RDF stream.
///
/// ```
/// use jelly::{StreamOptions, PhysicalType};
/// let o = StreamOptions::big().with_physical_type(PhysicalType::Quads);
/// assert_eq!(o.max_name_table_size, 4000);
/// let bytes = o.encode_to_vec();
/// assert_eq!(StreamOptions::decode(&bytes).unwrap(), o);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct StreamOptions {
    /// Optional stream name (field 1).
    pub stream_name: String,
    /// Physical type (field 2).
    pub physical_type: PhysicalType,
    /// Generalized statements allowed (field 3).
    pub generalized_statements: bool,
    /// RDF-star quoted triples allowed (field 4).
    pub rdf_star: bool,
    /// Name table size (field 9); at least 8.
    pub max_name_table_size: u32,
    /// Prefix table size (field 10); 0 disables the table.
    pub max_prefix_table_size: u32,
    /// Datatype table size (field 11); 0 forbids typed literals.
    pub max_datatype_table_size: u32,
    /// Logical type (field 14).
    pub logical_type: LogicalType,
    /// Protocol version (field 15). When encoding, 0 means "pick the lowest that fits".
    pub version: u32,
}

impl StreamOptions {
    /// The SMALL preset: name 128, prefix 16, datatype 16.
    pub fn small() -> Self {
        Self::with_tables(128, 16, 16)
    }

    /// The BIG preset: name 4000, prefix 150, datatype 32.
    pub fn big() -> Self {
        Self::with_tables(4000, 150, 32)
    }

    /// Custom table sizes, TRIPLES physical type, no RDF-star or generalized statements.
    pub fn with_tables(name: u32, prefix: u32, datatype: u32) -> Self {
        StreamOptions {
            physical_type: PhysicalType::Triples,
            max_name_table_size: name,
            max_prefix_table_size: prefix,
            max_datatype_table_size: datatype,
            ..Default::default()
        }
    }

    /// Builder: sets the physical type.
    pub fn with_physical_type(mut self, t: PhysicalType) -> Self {
        self.physical_type = t;
        self
    }

    /// Builder: sets the logical type.
    pub fn with_logical_type(mut self, t: LogicalType) -> Self {
        self.logical_type = t;
        self
    }

    /// Builder: allows RDF-star quoted triples.
    pub fn with_rdf_star(mut self, on: bool) -> Self {
        self.rdf_star = on;
        self
    }

    /// Builder: allows generalized statements.
    pub fn with_generalized_statements(mut self, on: bool) -> Self {
        self.generalized_statements = on;
        self
    }

    /// Builder: sets the stream name.
    pub fn with_stream_name(mut self, name: impl Into<String>) -> Self {
        self.stream_name = name.into();
        self
    }

    /// Appends the message body (without a length prefix).
    pub fn encode(&self, out: &mut Vec<u8>) {
        put_str_field_nonempty(out, f::STREAM_NAME, &self.stream_name);
        put_uint_field(
            out,
            f::PHYSICAL_TYPE,
            u64::from(self.physical_type.to_u32()),
        );
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
        put_uint_field(out, f::LOGICAL_TYPE, u64::from(self.logical_type.0));
        put_uint_field(out, f::VERSION, u64::from(self.version));
    }

    /// The message body as a new vector.
    pub fn encode_to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(32);
        self.encode(&mut v);
        v
    }

    /// Decodes a message body. Unknown fields are skipped (forward compatibility).
    pub fn decode(bytes: &[u8]) -> Result<Self, WireError> {
        Self::decode_from(Reader::new(bytes))
    }

    /// Decodes from a positioned reader (offsets in errors stay absolute).
    pub fn decode_from(mut r: Reader<'_>) -> Result<Self, WireError> {
        let mut o = StreamOptions::default();
        while let Some((field, wt)) = r.tag()? {
            match (field, wt) {
                (f::STREAM_NAME, WireType::Len) => o.stream_name = r.str()?.to_owned(),
                (f::PHYSICAL_TYPE, WireType::Varint) => {
                    o.physical_type = PhysicalType::from_u32(r.varint()? as u32)
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
                (f::LOGICAL_TYPE, WireType::Varint) => {
                    o.logical_type = LogicalType(r.varint()? as u32)
                }
                (f::VERSION, WireType::Varint) => o.version = r.varint32()?,
                (_, wt) => r.skip(wt)?,
            }
        }
        Ok(o)
    }

    /// Checks the gRPC compatibility rule (streaming spec): can a server that produces
    /// `self` satisfy a client that requested `requested`?
    pub fn is_compatible_with_request(&self, requested: &StreamOptions) -> bool {
        self.physical_type == requested.physical_type
            && (!self.generalized_statements || requested.generalized_statements)
            && (!self.rdf_star || requested.rdf_star)
            && self.max_name_table_size <= requested.max_name_table_size
            && self.max_prefix_table_size <= requested.max_prefix_table_size
            && self.max_datatype_table_size <= requested.max_datatype_table_size
            && self.version <= requested.version
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets() {
        let s = StreamOptions::small();
        assert_eq!(
            (
                s.max_name_table_size,
                s.max_prefix_table_size,
                s.max_datatype_table_size
            ),
            (128, 16, 16)
        );
        let b = StreamOptions::big();
        assert_eq!(
            (
                b.max_name_table_size,
                b.max_prefix_table_size,
                b.max_datatype_table_size
            ),
            (4000, 150, 32)
        );
    }

    #[test]
    fn logical_base_type_is_mod_10() {
        assert_eq!(LogicalType(114).base(), LogicalType::DATASETS);
        assert_eq!(LogicalType(13).base(), LogicalType::GRAPHS);
        assert_eq!(LogicalType(1234).base(), LogicalType::DATASETS);
        assert!(LogicalType(114).fits(PhysicalType::Quads));
        assert!(!LogicalType(13).fits(PhysicalType::Quads));
    }

    #[test]
    fn round_trip_all_fields() {
        let o = StreamOptions {
            stream_name: "s".into(),
            physical_type: PhysicalType::Graphs,
            generalized_statements: true,
            rdf_star: true,
            max_name_table_size: 9,
            max_prefix_table_size: 1,
            max_datatype_table_size: 300,
            logical_type: LogicalType(114),
            version: 2,
        };
        assert_eq!(StreamOptions::decode(&o.encode_to_vec()).unwrap(), o);
    }
}
