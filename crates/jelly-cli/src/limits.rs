//! Limits on the Jelly streams that the reading verbs accept, set once from the
//! global `--max-*` flags. Each reader asks for them here rather than having them passed
//! down through every verb.

use std::sync::OnceLock;

use jelly::{DecoderOptions, Delimiting, JellyReader, StreamOptions};

use crate::cli::ReaderLimitArgs;

static LIMITS: OnceLock<DecoderOptions> = OnceLock::new();

/// Records the limits of this run (the first call wins).
pub fn set(a: &ReaderLimitArgs) {
    let d = DecoderOptions::default();
    let _ = LIMITS.set(DecoderOptions {
        max_name_table_size: a.max_name_table.unwrap_or(d.max_name_table_size),
        max_prefix_table_size: a.max_prefix_table.unwrap_or(d.max_prefix_table_size),
        max_datatype_table_size: a.max_datatype_table.unwrap_or(d.max_datatype_table_size),
        max_nesting: a.max_nesting.unwrap_or(d.max_nesting),
        max_frame_bytes: a.max_frame_size.unwrap_or(d.max_frame_bytes),
        ..d
    });
}

/// The decoder options of this run: the library's defaults unless raised or lowered
/// by the flags.
///
/// ```
/// assert_eq!(jelly_cli::limits::decoder_options().max_name_table_size, 4096);
/// ```
pub fn decoder_options() -> DecoderOptions {
    LIMITS.get().cloned().unwrap_or_default()
}

/// A Jelly-RDF reader over `input` with this run's limits, delimiting autodetected.
pub fn jelly_reader<R: std::io::Read>(input: R) -> JellyReader<R> {
    JellyReader::with_options(input, decoder_options(), Delimiting::Auto)
}

/// A note for the user when `o` asks for tables larger than readers accept by default
/// (this tool without `--max-*`, and other implementations with similar caps), or
/// `None`.
pub fn writer_note(o: &StreamOptions) -> Option<String> {
    table_note(
        o.max_name_table_size,
        o.max_prefix_table_size,
        o.max_datatype_table_size,
    )
}

/// [`writer_note`] for any stream's table sizes (Jelly-RDF or Jelly-Patch).
pub fn table_note(name: u32, prefix: u32, datatype: u32) -> Option<String> {
    let d = DecoderOptions::default();
    let over: Vec<String> = [
        ("name", name, d.max_name_table_size),
        ("prefix", prefix, d.max_prefix_table_size),
        ("datatype", datatype, d.max_datatype_table_size),
    ]
    .into_iter()
    .filter(|(_, asked, cap)| asked > cap)
    .map(|(t, asked, cap)| format!("{t} table {asked} (default cap {cap})"))
    .collect();
    (!over.is_empty()).then(|| {
        format!(
            "note: the stream asks for a {}; readers with default limits refuse it \
             (jelly: read it with --max-name-table/--max-prefix-table/--max-datatype-table)",
            over.join(", a ")
        )
    })
}
