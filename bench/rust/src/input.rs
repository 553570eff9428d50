//! Reading the benchmarks' input files: RDF or Jelly, gzipped or not.

use std::fs::File;
use std::io::{BufReader, Read};

use jelly::Statement;

/// The bytes of `path`, gunzipped when it ends in `.gz`.
pub fn read_input(path: &str) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    let f = File::open(path).map_err(|e| format!("{path}: {e}"))?;
    if path.ends_with(".gz") {
        flate2::read::GzDecoder::new(BufReader::new(f)).read_to_end(&mut bytes)
    } else {
        BufReader::new(f).read_to_end(&mut bytes)
    }
    .map_err(|e| format!("{path}: {e}"))?;
    Ok(bytes)
}

/// Whether `path` holds N-Quads rather than N-Triples, by its extension.
pub fn is_quads(path: &str) -> bool {
    path.trim_end_matches(".gz").ends_with(".nq")
}

/// The statements of an N-Triples or N-Quads file (gzipped or not).
pub fn load_statements(path: &str) -> Result<Vec<Statement>, String> {
    let text = String::from_utf8(read_input(path)?).map_err(|e| format!("{path}: {e}"))?;
    jelly::nquads::parse_document(&text).map_err(|e| format!("{path}: {e}"))
}
