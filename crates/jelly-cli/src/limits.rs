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
        max_frames_before_options: a
            .max_frames_before_options
            .unwrap_or(d.max_frames_before_options),
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

/// A note for the user when a writer wrote a frame of `largest` bytes, more than
/// readers accept by default (this tool without `--max-frame-size`), or `None`.
///
/// ```
/// use jelly_cli::limits::frame_note;
/// assert_eq!(frame_note(64 << 20), None);
/// let n = frame_note(70_000_071).unwrap();
/// assert!(n.contains("70000071 bytes") && n.contains("--max-frame-size 70000071"), "{n}");
/// ```
pub fn frame_note(largest: u64) -> Option<String> {
    let cap = DecoderOptions::default().max_frame_bytes;
    (largest > cap).then(|| {
        format!(
            "note: the output has a frame of {largest} bytes; readers with default limits \
             refuse frames over {cap} bytes (jelly: read it with --max-frame-size {largest})"
        )
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_note_only_past_the_default_reader_limit_and_names_the_flag() {
        let cap = DecoderOptions::default().max_frame_bytes;
        assert_eq!(frame_note(0), None);
        assert_eq!(frame_note(cap), None);
        let n = frame_note(cap + 1).expect("a note past the cap");
        assert!(n.contains(&format!("frame of {} bytes", cap + 1)), "{n}");
        assert!(n.contains(&format!("over {cap} bytes")), "{n}");
        assert!(n.contains(&format!("--max-frame-size {}", cap + 1)), "{n}");
    }
}
