//! Reading a whole RDF file into statements (for comparisons).

use std::io::Read;

use jelly::oxrdf_adapter::from_ox_quad;
use jelly::{Statement, Term};

use crate::error::{CliError, CliResult};
use crate::format::Format;
use crate::io::open_input;
use crate::rdf_source::RdfSource;

/// The statements of a Jelly file, in order (a stream written by another tool, to
/// compare with).
fn read_jelly_file(path: &str) -> CliResult<Vec<Statement>> {
    let input = open_input(path)?;
    let name = input.name.clone();
    let mut reader = crate::limits::jelly_reader(input.reader);
    let frames = reader
        .read_all_frames()
        .map_err(|e| crate::error::decode_error(&name, &e))?;
    Ok(frames.into_iter().flatten().collect())
}

/// Reads `path` (format from `format` or the extension; a `.jelly` file as a Jelly
/// stream) into owned statements.
/// N-Triples and N-Quads use Jelly's tolerant parser (RDF-star, generalized statements).
pub fn read_rdf_file(path: &str, format: Option<Format>) -> CliResult<Vec<Statement>> {
    if format.is_none() && crate::format::is_jelly_path(path) {
        return read_jelly_file(path);
    }
    let format = match format.or_else(|| Format::from_path(path)) {
        Some(f) => f,
        None => {
            return Err(crate::format::unknown_format(path, "--compare-to-format"));
        }
    };
    let mut input = open_input(path)?;
    input.skip_bom()?;
    let name = input.name.clone();
    let mut reader = input.reader;
    match format {
        Format::Nt | Format::Nq => {
            let mut bytes = Vec::new();
            reader
                .read_to_end(&mut bytes)
                .map_err(|e| CliError::io(&name, &e))?;
            let text = String::from_utf8(bytes).map_err(|e| {
                CliError::invalid(format!(
                    "{name}: invalid UTF-8 at byte {}",
                    e.utf8_error().valid_up_to()
                ))
            })?;
            jelly::nquads::parse_document(&text).map_err(|e| {
                CliError::invalid(format!("{name}:{}:{}: {}", e.line, e.column, e.message))
            })
        }
        _ => {
            let mut out = Vec::new();
            let mut it = RdfSource::new(format, None, reader)?;
            while let Some(q) = it.next_quad(&name) {
                let q = q?;
                let mut holder = None;
                let mut st = from_ox_quad(q.as_ref(), &mut holder).to_owned();
                if st.graph == Some(Term::DefaultGraph) {
                    st.graph = None;
                }
                out.push(st);
            }
            Ok(out)
        }
    }
}
