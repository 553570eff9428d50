//! The error type of the command line, with its exit code.

use std::fmt;
use std::io;

/// Exit code for success.
pub const EXIT_OK: u8 = 0;
/// Exit code for invalid input data, a failed validation or comparison, or failed conformance cases.
pub const EXIT_INVALID: u8 = 1;
/// Exit code for usage errors and I/O errors (missing file, unwritable output).
pub const EXIT_USAGE: u8 = 2;

/// An error shown to the user as `jelly: <message>` with an exit code.
#[derive(Debug)]
pub struct CliError {
    /// Exit code ([`EXIT_INVALID`] or [`EXIT_USAGE`]; 130 or 143 for a command that
    /// a signal stopped and that still reports what it did).
    pub code: u8,
    /// The message, already prefixed with the file and position when known.
    pub message: String,
    /// Output was closed by the reader (e.g. `| head`): exit quietly.
    pub broken_pipe: bool,
}

impl CliError {
    /// Invalid input data (exit 1).
    pub fn invalid(message: impl Into<String>) -> Self {
        CliError {
            code: EXIT_INVALID,
            message: message.into(),
            broken_pipe: false,
        }
    }

    /// Usage error (exit 2).
    pub fn usage(message: impl Into<String>) -> Self {
        CliError {
            code: EXIT_USAGE,
            message: message.into(),
            broken_pipe: false,
        }
    }

    /// I/O error on `what` (exit 2; a broken pipe is remembered so it can exit quietly).
    pub fn io(what: &str, e: &io::Error) -> Self {
        CliError {
            code: EXIT_USAGE,
            message: format!("{what}: {e}"),
            broken_pipe: e.kind() == io::ErrorKind::BrokenPipe,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CliError {}

/// Result of a command.
pub type CliResult<T = ()> = Result<T, CliError>;

/// What a frame-limit error adds: the limit is this reader's choice, not the
/// stream's fault, so it says how to raise it.
pub const FRAME_LIMIT_HINT: &str = " (to read it, raise the limit with --max-frame-size BYTES)";

/// What the error for a stream with no options row in its first frames adds.
pub const OPTIONS_LIMIT_HINT: &str =
    " (if it is Jelly, raise the limit with --max-frames-before-options N)";

/// The error for a Jelly-RDF stream of frames none of which has a row: a stream's
/// first row is its options row, which the spec requires, so this is not a stream of
/// no statements (every verb that reads a whole stream refuses it, as the patch verbs
/// refuse a patch stream without options).
pub fn no_options_row(name: &str, frames: u64) -> CliError {
    CliError::invalid(format!(
        "{name}: the stream has no options row ({frames} frame(s), none with a row)"
    ))
}

/// Formats a decoding error as `FILE:frame N:row M: message`.
pub fn decode_error(file: &str, e: &jelly::DecodeError) -> CliError {
    if let jelly::DecodeErrorKind::Io(io) = &e.kind
        && let Some(t) = io
            .get_ref()
            .and_then(|i| i.downcast_ref::<crate::jelly_text::TextSyntaxError>())
    {
        return CliError::invalid(t.to_string());
    }
    let mut s = format!("{file}:frame {}", e.frame);
    if let Some(r) = e.row {
        s.push_str(&format!(":row {r}"));
    }
    if let Some(o) = e.offset {
        s.push_str(&format!(" (byte {o})"));
    }
    s.push_str(": ");
    s.push_str(&e.kind.to_string());
    if matches!(
        e.kind,
        jelly::DecodeErrorKind::FrameTooLarge { .. } | jelly::DecodeErrorKind::QuotedTooLarge(_)
    ) {
        s.push_str(FRAME_LIMIT_HINT);
    }
    if matches!(e.kind, jelly::DecodeErrorKind::NoOptionsInFirstFrames(_)) {
        s.push_str(OPTIONS_LIMIT_HINT);
    }
    if let jelly::DecodeErrorKind::Io(io) = &e.kind {
        // Decompression failures and unreadable input are I/O errors, but they mean the
        // input is not a valid stream.
        let mut err = CliError::invalid(s);
        err.broken_pipe = io.kind() == io::ErrorKind::BrokenPipe;
        return err;
    }
    CliError::invalid(s)
}

/// Adds a hint to a decoding error of the first frame of a Jelly-RDF verb when the file
/// name says it is RDF text, or Jelly-Patch.
pub fn not_jelly_hint(mut e: CliError, path: &str, frame: u64) -> CliError {
    if frame != 0 {
        return e;
    }
    if let Some(f) = crate::format::Format::from_path(path) {
        e.message.push_str(&format!(
            " (the file name says {}: is this a Jelly file?)",
            f.name()
        ));
    } else if crate::patch::common::format_from_path(path)
        == Some(crate::patch::args::PatchFormat::Jellyp)
    {
        e.message
            .push_str(" (a .jellyp file is Jelly-Patch: use `jelly patch …`)");
    }
    e
}
