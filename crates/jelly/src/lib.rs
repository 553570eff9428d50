//! # jelly
//!
//! A streaming codec for [Jelly-RDF](https://w3id.org/jelly) 1.1: a compact binary
//! serialization of RDF graphs, datasets and streams on top of protobuf.
//!
//! - [`Decoder`] turns frames into [`Event`]s that borrow the decoder: no allocation
//!   per statement.
//! - [`Encoder`] turns statements into frames with LRU lookup tables, the 0-id rules
//!   and repeated terms.
//! - [`JellyReader`] / [`JellyWriter`] add byte framing (delimited or not, autodetected).
//! - [`oxrdf_adapter`] converts to and from oxrdf terms.
//!
//! ```
//! use jelly::{JellyReader, JellyWriter, StreamOptions, StatementRef, TermRef};
//! let mut buf = Vec::new();
//! let mut w = JellyWriter::new(&mut buf, StreamOptions::big()).unwrap();
//! w.add(StatementRef::triple(TermRef::Iri("http://ex.org/s"), TermRef::Iri("http://ex.org/p"), TermRef::Iri("http://ex.org/o"))).unwrap();
//! w.finish().unwrap();
//! let frames = JellyReader::new(&buf[..]).read_all_frames().unwrap();
//! assert_eq!(frames[0][0].object, jelly::Term::Iri("http://ex.org/o".into()));
//! ```

pub mod decoder;
pub mod encoder;
pub mod error;
pub mod framing;
pub mod input_check;
pub mod iso;
pub mod jsonld_parts;
mod lookup;
pub mod nquads;
pub mod options;
pub mod oxrdf_adapter;
pub mod patch;
pub mod rdf_patch;
pub mod rebase;
pub mod splice;
pub mod strict_terms;
pub mod term;
mod term_decoder;
mod term_encoder;
pub mod text_format;
pub mod text_nesting;
pub mod text_position;
pub mod xml_guard;

pub use decoder::{
    DEFAULT_MAX_FRAMES_BEFORE_OPTIONS, Decoder, DecoderOptions, DecoderStats, Event, FrameCursor,
    MAX_NESTING_CAP, frame_metadata,
};
pub use encoder::{Encoder, EncoderConfig, SharedEncoder};
pub use error::{DecodeError, DecodeErrorKind, EncodeError, Table};
pub use framing::{
    Delimiting, FramePolicy, FrameReader, FrameSink, JellyReader, JellyVecWriter, JellyWriter,
    JellyWriterBuilder, RawFrame, SharedWriter, WriteError, detect_delimiting,
};
pub use options::{LogicalType, PhysicalType, StreamOptions};
pub use term::{
    Literal, LiteralKind, LiteralRef, OwnedLiteralKind, Statement, StatementRef, Term, TermRef,
    Triple, TripleRef,
};
pub use term_encoder::split_iri;
