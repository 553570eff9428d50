//! Jelly-Patch: RDF Patch (add/delete statements and namespaces, transactions,
//! headers) in Jelly's binary form (`application/x-jelly-rdf-patch`, `.jellyp`).
//!
//! It shares lookup tables, IRI compression and repeated terms with Jelly-RDF:
//! [`PatchDecoder`] and [`PatchEncoder`] are thin layers over the same term machinery
//! as [`crate::Decoder`] and [`crate::Encoder`].
//!
//! ```
//! use jelly::patch::{PatchEvent, PatchOptions, PatchReader, PatchStatementType, PatchStreamType, PatchWriter};
//! use jelly::{StatementRef, TermRef};
//! let mut buf = Vec::new();
//! let opts = PatchOptions::big(PatchStatementType::Triples, PatchStreamType::Frame);
//! let mut w = PatchWriter::new(&mut buf, opts).unwrap();
//! w.encoder().transaction_start().unwrap();
//! w.encoder().add(StatementRef::triple(TermRef::Iri("http://s"), TermRef::Iri("http://p"), TermRef::Iri("http://o"))).unwrap();
//! w.encoder().transaction_commit().unwrap();
//! w.end_patch().unwrap();
//! w.finish().unwrap();
//!
//! let mut adds = 0;
//! PatchReader::new(&buf[..]).for_each_event(|_, ev| if let PatchEvent::Add(_) = ev { adds += 1 }).unwrap();
//! assert_eq!(adds, 1);
//! ```

mod decoder;
mod encoder;
mod io;
mod options;

pub use decoder::{PatchDecoder, PatchEvent, PatchFrameCursor, PatchStats};
pub use encoder::PatchEncoder;
pub use io::{PatchReader, PatchWriter};
pub use options::{PATCH_VERSION, PatchOptions, PatchStatementType, PatchStreamType};
