//! Field numbers of the Jelly protobuf messages (row layout, Jelly-RDF 1.1.x).
//!
//! Transcribed from the specification's `rdf.proto` (package
//! `eu.ostrzyciel.jelly.core.proto.v1`). Constants are grouped by message.

/// `RdfStreamFrame`.
pub mod frame {
    /// `repeated RdfStreamRow rows = 1`
    pub const ROWS: u32 = 1;
    /// `map<string, bytes> metadata = 15`
    pub const METADATA: u32 = 15;
    /// Map entry key field.
    pub const MAP_KEY: u32 = 1;
    /// Map entry value field.
    pub const MAP_VALUE: u32 = 2;
}

/// `RdfStreamRow` oneof `row`.
pub mod row {
    pub const OPTIONS: u32 = 1;
    pub const TRIPLE: u32 = 2;
    pub const QUAD: u32 = 3;
    pub const GRAPH_START: u32 = 4;
    pub const GRAPH_END: u32 = 5;
    pub const NAMESPACE: u32 = 6;
    pub const NAME: u32 = 9;
    pub const PREFIX: u32 = 10;
    pub const DATATYPE: u32 = 11;

    /// Whether `field` is one of the `row` oneof's fields (others are unknown fields).
    ///
    /// ```
    /// use jelly_proto::fields::row;
    /// assert!(row::is_row_field(row::QUAD) && !row::is_row_field(7));
    /// ```
    #[inline(always)]
    pub const fn is_row_field(field: u32) -> bool {
        matches!(
            field,
            OPTIONS
                | TRIPLE
                | QUAD
                | GRAPH_START
                | GRAPH_END
                | NAMESPACE
                | NAME
                | PREFIX
                | DATATYPE
        )
    }
}

/// `RdfStreamOptions`.
pub mod options {
    pub const STREAM_NAME: u32 = 1;
    pub const PHYSICAL_TYPE: u32 = 2;
    pub const GENERALIZED_STATEMENTS: u32 = 3;
    pub const RDF_STAR: u32 = 4;
    pub const MAX_NAME_TABLE_SIZE: u32 = 9;
    pub const MAX_PREFIX_TABLE_SIZE: u32 = 10;
    pub const MAX_DATATYPE_TABLE_SIZE: u32 = 11;
    pub const LOGICAL_TYPE: u32 = 14;
    pub const VERSION: u32 = 15;
}

/// Term fields of `RdfTriple` and `RdfQuad`: S/P/O positions use four consecutive
/// numbers each (IRI, blank node, literal, quoted triple); the graph of `RdfQuad`
/// uses 13–16 (IRI, blank node, default graph, literal).
pub mod statement {
    pub const S_IRI: u32 = 1;
    pub const S_BNODE: u32 = 2;
    pub const S_LITERAL: u32 = 3;
    pub const S_TRIPLE: u32 = 4;
    pub const P_IRI: u32 = 5;
    pub const P_BNODE: u32 = 6;
    pub const P_LITERAL: u32 = 7;
    pub const P_TRIPLE: u32 = 8;
    pub const O_IRI: u32 = 9;
    pub const O_BNODE: u32 = 10;
    pub const O_LITERAL: u32 = 11;
    pub const O_TRIPLE: u32 = 12;
    pub const G_IRI: u32 = 13;
    pub const G_BNODE: u32 = 14;
    pub const G_DEFAULT: u32 = 15;
    pub const G_LITERAL: u32 = 16;
}

/// `RdfGraphStart` oneof `graph`.
pub mod graph_start {
    pub const G_IRI: u32 = 1;
    pub const G_BNODE: u32 = 2;
    pub const G_DEFAULT: u32 = 3;
    pub const G_LITERAL: u32 = 4;
}

/// `RdfIri`.
pub mod iri {
    pub const PREFIX_ID: u32 = 1;
    pub const NAME_ID: u32 = 2;
}

/// `RdfLiteral`.
pub mod literal {
    pub const LEX: u32 = 1;
    pub const LANGTAG: u32 = 2;
    pub const DATATYPE: u32 = 3;
}

/// `RdfNameEntry`, `RdfPrefixEntry`, `RdfDatatypeEntry` (one wire shape).
pub mod entry {
    pub const ID: u32 = 1;
    pub const VALUE: u32 = 2;
}

/// `RdfNamespaceDeclaration`.
pub mod namespace {
    pub const NAME: u32 = 1;
    pub const VALUE: u32 = 2;
}

/// `RdfStreamSubscribe` (grpc.proto).
pub mod subscribe {
    pub const TOPIC: u32 = 1;
    pub const REQUESTED_OPTIONS: u32 = 2;
}

/// Values of the `PhysicalStreamType` enum.
pub mod physical_type {
    pub const UNSPECIFIED: u32 = 0;
    pub const TRIPLES: u32 = 1;
    pub const QUADS: u32 = 2;
    pub const GRAPHS: u32 = 3;
}

/// Values of the `LogicalStreamType` enum (RDF-STaX).
pub mod logical_type {
    pub const UNSPECIFIED: u32 = 0;
    pub const FLAT_TRIPLES: u32 = 1;
    pub const FLAT_QUADS: u32 = 2;
    pub const GRAPHS: u32 = 3;
    pub const DATASETS: u32 = 4;
    pub const SUBJECT_GRAPHS: u32 = 13;
    pub const NAMED_GRAPHS: u32 = 14;
    pub const TIMESTAMPED_NAMED_GRAPHS: u32 = 114;
}

/// Jelly-Patch (`patch.proto`, package `eu.ostrzyciel.jelly.core.proto.v1.patch`).
pub mod patch {
    /// `RdfPatchFrame.rows = 1`.
    pub const FRAME_ROWS: u32 = 1;

    /// `RdfPatchRow` oneof `row`.
    pub mod row {
        pub const OPTIONS: u32 = 1;
        pub const STATEMENT_ADD: u32 = 2;
        pub const STATEMENT_DELETE: u32 = 3;
        pub const NAMESPACE_ADD: u32 = 4;
        pub const NAMESPACE_DELETE: u32 = 5;
        pub const TRANSACTION_START: u32 = 6;
        pub const TRANSACTION_COMMIT: u32 = 7;
        pub const TRANSACTION_ABORT: u32 = 8;
        pub const NAME: u32 = 11;
        pub const PREFIX: u32 = 12;
        pub const DATATYPE: u32 = 13;
        pub const HEADER: u32 = 14;
        pub const PUNCTUATION: u32 = 15;
    }

    /// `RdfPatchOptions`.
    pub mod options {
        pub const STATEMENT_TYPE: u32 = 1;
        pub const STREAM_TYPE: u32 = 2;
        pub const GENERALIZED_STATEMENTS: u32 = 3;
        pub const RDF_STAR: u32 = 4;
        pub const MAX_NAME_TABLE_SIZE: u32 = 9;
        pub const MAX_PREFIX_TABLE_SIZE: u32 = 10;
        pub const MAX_DATATYPE_TABLE_SIZE: u32 = 11;
        pub const VERSION: u32 = 15;
    }

    /// `RdfPatchNamespace`: name, value IRI, and a graph oneof (IRI, blank node,
    /// default graph, literal) that shares the repeated-term state of statements.
    pub mod namespace {
        pub const NAME: u32 = 1;
        pub const VALUE: u32 = 2;
        pub const G_IRI: u32 = 3;
        pub const G_BNODE: u32 = 4;
        pub const G_DEFAULT: u32 = 5;
        pub const G_LITERAL: u32 = 6;
    }

    /// `RdfPatchHeader`: key and a value oneof (IRI, blank node, literal, quoted triple).
    pub mod header {
        pub const KEY: u32 = 1;
        pub const H_IRI: u32 = 2;
        pub const H_BNODE: u32 = 3;
        pub const H_LITERAL: u32 = 4;
        pub const H_TRIPLE: u32 = 5;
    }

    /// Values of `PatchStatementType`.
    pub mod statement_type {
        pub const UNSPECIFIED: u32 = 0;
        pub const TRIPLES: u32 = 1;
        pub const QUADS: u32 = 2;
    }

    /// Values of `PatchStreamType`.
    pub mod stream_type {
        pub const UNSPECIFIED: u32 = 0;
        pub const FRAME: u32 = 1;
        pub const FLAT: u32 = 2;
        pub const PUNCTUATED: u32 = 3;
    }
}
