//! RDF text formats known to the command line.

use clap::ValueEnum;
use oxrdfio::{JsonLdProfileSet, RdfFormat};

use crate::io::strip_compression;

/// An RDF syntax.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// N-Triples (`.nt`)
    #[value(alias = "ntriples", alias = "n-triples")]
    Nt,
    /// N-Quads (`.nq`)
    #[value(alias = "nquads", alias = "n-quads")]
    Nq,
    /// Turtle (`.ttl`)
    #[value(alias = "turtle")]
    Ttl,
    /// TriG (`.trig`)
    Trig,
    /// RDF/XML (`.rdf`, `.owl`, `.xml`)
    #[value(alias = "rdf-xml", alias = "xml", alias = "rdf")]
    Rdfxml,
    /// JSON-LD (`.jsonld`)
    #[value(alias = "json-ld")]
    Jsonld,
    /// Notation3 (`.n3`, input only)
    N3,
}

impl Format {
    /// Guesses the format from a file name (after stripping `.gz` / `.zst`).
    pub fn from_path(path: &str) -> Option<Format> {
        let (base, _) = strip_compression(path);
        let ext = base.rsplit_once('.')?.1.to_ascii_lowercase();
        Some(match ext.as_str() {
            "nt" | "ntriples" => Format::Nt,
            "nq" | "nquads" => Format::Nq,
            "ttl" | "turtle" => Format::Ttl,
            "trig" => Format::Trig,
            "rdf" | "owl" | "xml" | "rdfxml" => Format::Rdfxml,
            "jsonld" | "json" => Format::Jsonld,
            "n3" => Format::N3,
            _ => return None,
        })
    }

    /// True if the format holds datasets (named graphs).
    pub fn is_dataset(self) -> bool {
        matches!(self, Format::Nq | Format::Trig | Format::Jsonld)
    }

    /// The oxrdfio format.
    pub fn oxrdfio(self) -> RdfFormat {
        match self {
            Format::Nt => RdfFormat::NTriples,
            Format::Nq => RdfFormat::NQuads,
            Format::Ttl => RdfFormat::Turtle,
            Format::Trig => RdfFormat::TriG,
            Format::Rdfxml => RdfFormat::RdfXml,
            Format::Jsonld => RdfFormat::JsonLd {
                profile: JsonLdProfileSet::empty(),
            },
            Format::N3 => RdfFormat::N3,
        }
    }

    /// The usual file extension.
    pub fn extension(self) -> &'static str {
        match self {
            Format::Nt => "nt",
            Format::Nq => "nq",
            Format::Ttl => "ttl",
            Format::Trig => "trig",
            Format::Rdfxml => "rdf",
            Format::Jsonld => "jsonld",
            Format::N3 => "n3",
        }
    }

    /// Human name.
    pub fn name(self) -> &'static str {
        match self {
            Format::Nt => "N-Triples",
            Format::Nq => "N-Quads",
            Format::Ttl => "Turtle",
            Format::Trig => "TriG",
            Format::Rdfxml => "RDF/XML",
            Format::Jsonld => "JSON-LD",
            Format::N3 => "N3",
        }
    }
}

/// True if the path names a Jelly file (`.jelly`, `.jelly.gz`, …).
pub fn is_jelly_path(path: &str) -> bool {
    let (base, _) = strip_compression(path);
    base.to_ascii_lowercase().ends_with(".jelly")
}
