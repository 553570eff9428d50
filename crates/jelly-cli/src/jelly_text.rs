//! `jelly-text` on the command line: `rdf from-jelly --out-format jelly-text` prints a
//! stream's frames in the protobuf text format, and `rdf to-jelly` turns such text
//! (`--in-format jelly-text`, or inputs named `*.jelly.txt`) back into a Jelly stream,
//! frame for frame, byte for byte, as the JVM `jelly-cli` does. The text is of rows,
//! not statements: nothing is decoded or re-encoded (see [`jelly::text_format`]).

use std::io::{BufRead, BufReader, Read, Write};
use std::sync::LazyLock;

use clap::ValueEnum;
use clap::builder::PossibleValue;
use jelly::text_format::{TextFormatError, TextFrameReader, print_frame};
use jelly::{Delimiting, FrameReader};

use crate::cli::{FromJellyArgs, ToJellyArgs};
use crate::common::{FrameRange, input_io_err};
use crate::error::{CliError, CliResult, decode_error, not_jelly_hint};
use crate::format::Format;
use crate::io::{Input, display_name, open_input, open_output, strip_compression};

/// The file extension of `jelly-text`, as the JVM CLI names it.
pub const EXTENSION: &str = ".jelly.txt";

/// The warning printed before text is read, as the JVM CLI prints it.
pub const UNSTABLE_WARNING: &str = "jelly: warning: the Jelly text format (jelly-text) is not \
    stable and may change in incompatible ways; it is meant for testing and development, \
    never for production (--quiet silences this warning)";

/// A format of `--in-format` / `--out-format` of to-jelly and from-jelly: an RDF
/// syntax, or `jelly-text`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextFormat {
    /// An RDF syntax.
    Rdf(Format),
    /// Jelly frames in the protobuf text format.
    JellyText,
}

impl TextFormat {
    /// The RDF syntax, if it is one.
    pub fn rdf(self) -> Option<Format> {
        match self {
            TextFormat::Rdf(f) => Some(f),
            TextFormat::JellyText => None,
        }
    }
}

static ALL_TEXT_FORMATS: LazyLock<Vec<TextFormat>> = LazyLock::new(|| {
    Format::value_variants()
        .iter()
        .map(|f| TextFormat::Rdf(*f))
        .chain([TextFormat::JellyText])
        .collect()
});

impl ValueEnum for TextFormat {
    fn value_variants<'a>() -> &'a [Self] {
        &ALL_TEXT_FORMATS
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        match self {
            TextFormat::Rdf(f) => f.to_possible_value(),
            TextFormat::JellyText => Some(PossibleValue::new("jelly-text").help(
                "Jelly frames in the protobuf text format (`.jelly.txt`; not a stable format)",
            )),
        }
    }
}

/// True if `path` is named as `jelly-text` (`.jelly.txt`, any case, before `.gz`/`.zst`).
///
/// ```
/// use jelly_cli::jelly_text::is_jelly_text_path;
/// assert!(is_jelly_text_path("a.Jelly.TXT.gz"));
/// assert!(!is_jelly_text_path("a.txt") && !is_jelly_text_path("a.jelly"));
/// ```
pub fn is_jelly_text_path(path: &str) -> bool {
    let (base, _) = strip_compression(path);
    base.to_ascii_lowercase().ends_with(EXTENSION)
}

/// Whether to-jelly reads `jelly-text`: `--in-format jelly-text`, or (no `--in-format`)
/// every input named `*.jelly.txt`. Some inputs named so and others not is refused.
pub fn reads_jelly_text(given: Option<TextFormat>, inputs: &[String]) -> CliResult<bool> {
    if let Some(f) = given {
        return Ok(f == TextFormat::JellyText);
    }
    let named = inputs.iter().filter(|i| is_jelly_text_path(i)).count();
    if named > 0 && named < inputs.len() {
        return Err(CliError::usage(
            "some inputs are jelly-text (.jelly.txt) and some RDF: convert them in separate runs",
        ));
    }
    Ok(named > 0)
}

/// Whether from-jelly writes `jelly-text`: `--out-format jelly-text`, or (no
/// `--out-format`) an output named `*.jelly.txt`.
pub fn writes_jelly_text(args: &FromJellyArgs) -> bool {
    match args.out_format {
        Some(f) => f == TextFormat::JellyText,
        None => args.to.as_deref().is_some_and(is_jelly_text_path),
    }
}

/// The flags of to-jelly that encode statements, which text input has none of.
fn encoding_flags(args: &ToJellyArgs) -> Vec<&'static str> {
    let o = &args.opts;
    let f = &args.framing;
    [
        (o.preset.is_some(), "--preset"),
        (o.options_from.is_some(), "--options-from"),
        (o.physical_type.is_some(), "--opt.physical-type"),
        (o.logical_type.is_some(), "--opt.logical-type"),
        (o.max_name_table_size.is_some(), "--opt.max-name-table-size"),
        (
            o.max_prefix_table_size.is_some(),
            "--opt.max-prefix-table-size",
        ),
        (
            o.max_datatype_table_size.is_some(),
            "--opt.max-datatype-table-size",
        ),
        (o.rdf_star.is_some(), "--opt.rdf-star"),
        (
            o.generalized_statements.is_some(),
            "--opt.generalized-statements",
        ),
        (o.stream_name.is_some(), "--opt.stream-name"),
        (f.rows_per_frame.is_some(), "--rows-per-frame"),
        (f.bytes_per_frame.is_some(), "--bytes-per-frame"),
        (f.frame_per.is_some(), "--frame-per"),
        (
            f.enable_namespace_declarations,
            "--enable-namespace-declarations",
        ),
        (args.base_iri.is_some(), "--base-iri"),
    ]
    .into_iter()
    .filter_map(|(set, name)| set.then_some(name))
    .collect()
}

/// `rdf to-jelly` of `jelly-text` inputs: their frames, one after another, as a Jelly
/// stream (delimited; with `--delimited=false`, the frames' bytes back to back, which
/// protobuf reads as one frame holding all their rows and metadata).
pub fn to_jelly(args: &ToJellyArgs, inputs: &[String], quiet: bool) -> CliResult {
    let flags = encoding_flags(args);
    if !flags.is_empty() {
        return Err(CliError::usage(format!(
            "{} do(es) not apply to jelly-text input: its rows and frames are written as they are",
            flags.join(", ")
        )));
    }
    crate::format::check_jelly_output("to-jelly", args.to.as_deref())?;
    if !quiet {
        eprintln!("{UNSTABLE_WARNING}");
    }
    let delimited = args.framing.delimited.unwrap_or(true);
    let max_frame_bytes = crate::limits::decoder_options().max_frame_bytes;
    let out_name = display_name(args.to.as_deref().unwrap_or("-"), false);
    let mut out = open_output(args.to.as_deref())?;
    for path in inputs {
        let input = open_input(path)?;
        let name = input.name.clone();
        let mut frames = TextFrameReader::new(input.reader, max_frame_bytes);
        loop {
            let frame = match frames.next_frame() {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(TextFormatError::Syntax {
                    line,
                    column,
                    message,
                }) => {
                    return Err(CliError::invalid(format!(
                        "{name}:{line}:{column}: {message}"
                    )));
                }
                Err(TextFormatError::Io(e)) => return Err(input_io_err(&name, e)),
                Err(e) => return Err(CliError::invalid(format!("{name}: {e}"))),
            };
            let mut head = Vec::with_capacity(10);
            if delimited {
                jelly_proto::wire::put_varint(&mut head, frame.len() as u64);
            }
            out.write_all(&head)
                .and_then(|()| out.write_all(&frame))
                .map_err(|e| CliError::io(&out_name, &e))?;
        }
    }
    out.finish().map_err(|e| CliError::io(&out_name, &e))
}

/// A syntax error of a `jelly-text` input read as Jelly, already placed
/// (`FILE:LINE:COLUMN: …`): [`crate::error::decode_error`] prints it as it is, without
/// the binary stream's frame and byte, which say nothing about the text.
#[derive(Debug)]
pub struct TextSyntaxError(pub String);

impl std::fmt::Display for TextSyntaxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TextSyntaxError {}

/// A `jelly-text` input read as the binary Jelly stream it stands for (delimited
/// frames, one frame in memory at a time), so that the verbs reading Jelly take
/// `*.jelly.txt` files too. A syntax error is a read error of kind `InvalidData` that
/// names the file, line and column.
struct TextAsJelly<R: BufRead> {
    frames: TextFrameReader<R>,
    name: String,
    /// The current frame, length first; `buf[pos..]` is not read yet.
    buf: Vec<u8>,
    pos: usize,
}

impl<R: BufRead> Read for TextAsJelly<R> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.pos == self.buf.len() {
            let frame = match self.frames.next_frame() {
                Ok(Some(f)) => f,
                Ok(None) => return Ok(0),
                Err(TextFormatError::Io(e)) => return Err(e),
                Err(TextFormatError::Syntax {
                    line,
                    column,
                    message,
                }) => {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        TextSyntaxError(format!(
                            "{}:{line}:{column}: jelly-text: {message}",
                            self.name
                        )),
                    ));
                }
                Err(e) => return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, e)),
            };
            self.buf.clear();
            jelly_proto::wire::put_varint(&mut self.buf, frame.len() as u64);
            self.buf.extend_from_slice(&frame);
            self.pos = 0;
        }
        let n = out.len().min(self.buf.len() - self.pos);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// Opens an input of a verb that reads Jelly (`from-jelly`, `transcode`, `inspect`,
/// `validate`): a file named `*.jelly.txt` is read as `jelly-text` (after the warning
/// that the format is not stable, unless `quiet`), anything else as it is.
pub fn open_jelly_input(path: &str, quiet: bool) -> CliResult<Input> {
    let mut input = open_input(path)?;
    if is_jelly_text_path(path) {
        if !quiet {
            eprintln!("{UNSTABLE_WARNING}");
        }
        let max_frame_bytes = crate::limits::decoder_options().max_frame_bytes;
        let text = std::mem::replace(&mut input.reader, Box::new(std::io::empty()));
        input.reader = Box::new(BufReader::new(TextAsJelly {
            frames: TextFrameReader::new(text, max_frame_bytes),
            name: input.name.clone(),
            buf: Vec::new(),
            pos: 0,
        }));
    }
    Ok(input)
}

/// `rdf from-jelly --out-format jelly-text`: each frame (of `--take-frames`, if given)
/// as a comment line `# Frame N` and its fields, in the order of its bytes.
pub fn from_jelly(args: &FromJellyArgs, quiet: bool) -> CliResult {
    if args.split_frames.is_some() {
        return Err(CliError::usage(
            "--split-frames writes RDF files; for jelly-text, take the frames with --take-frames",
        ));
    }
    let in_path = args.input.as_deref().unwrap_or("-");
    let range = match &args.take_frames {
        Some(r) => FrameRange::parse(r)?,
        None => FrameRange::ALL,
    };
    let input = open_jelly_input(in_path, quiet)?;
    let name = input.name.clone();
    let max_frame_bytes = crate::limits::decoder_options().max_frame_bytes;
    let mut frames = FrameReader::new(input.reader, Delimiting::Auto, max_frame_bytes);
    let out_name = display_name(args.to.as_deref().unwrap_or("-"), false);
    let mut out = open_output(args.to.as_deref())?;
    while let Some(frame) = frames
        .next_frame()
        .map_err(|e| not_jelly_hint(decode_error(&name, &e), in_path, e.frame))?
    {
        if range.done(frame.index) {
            break;
        }
        if !range.contains(frame.index) {
            continue;
        }
        match print_frame(frame.index, frame.bytes, frame.offset, &mut out) {
            Ok(()) => {}
            Err(TextFormatError::Io(e)) => return Err(CliError::io(&out_name, &e)),
            Err(e) => {
                let e = CliError::invalid(format!("{name}: {e}"));
                return Err(not_jelly_hint(e, in_path, frame.index));
            }
        }
    }
    out.finish().map_err(|e| CliError::io(&out_name, &e))
}
