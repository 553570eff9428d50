//! Command-line definitions (clap derive).

use clap::{ArgAction, Args, Parser, Subcommand, ValueEnum};
use jelly::LogicalType;

use crate::format::Format;

const EXIT_CODES: &str = "\
Exit codes:
  0  success (for validate: the stream is valid and matches)
  1  invalid input data, failed validation or comparison, failed conformance cases
  2  usage error, or an I/O error (missing file, unwritable output)
  130, 143  stopped by SIGINT (Ctrl-C) or SIGTERM; an output file being written is
     removed, and the file it would have replaced is left as it was";

/// Convert, inspect, validate and transcode Jelly-RDF and Jelly-Patch streams.
#[derive(Debug, Parser)]
#[command(name = "jelly", version, about, after_help = EXIT_CODES)]
pub struct Cli {
    /// No progress display and no summary lines on stderr.
    #[arg(short, long, global = true)]
    pub quiet: bool,
    #[command(flatten)]
    pub limits: ReaderLimitArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Commands on RDF data and Jelly-RDF streams.
    #[command(subcommand)]
    Rdf(RdfCommand),
    /// Commands on RDF Patch text and Jelly-Patch streams.
    #[command(subcommand)]
    Patch(crate::patch::args::PatchCommand),
    /// Run the stream server: topics published and followed over HTTP, SSE, WebSocket and gRPC.
    #[command(after_help = crate::serve::SERVE_HELP)]
    Serve(crate::serve::ServeArgs),
    /// Publish RDF files or Jelly streams to a topic of a running server.
    #[command(after_help = crate::publish::PUBLISH_HELP)]
    Publish(crate::publish::PublishArgs),
    /// Follow a topic of a running server; resumes after a disconnect.
    #[command(after_help = crate::subscribe::SUBSCRIBE_HELP)]
    Subscribe(crate::subscribe::SubscribeArgs),
    /// List, describe, create, alter and delete the topics of a running server.
    #[command(after_help = crate::topics::TOPICS_HELP)]
    Topics(crate::topics::TopicsArgs),
    /// Run the official Jelly-RDF conformance suite and write an EARL report.
    #[command(after_help = CONFORMANCE_HELP)]
    Conformance(ConformanceArgs),
    /// Print the version of `jelly` and of the protocols it speaks.
    #[command(
        after_help = "Example:\n  jelly version\n\nExit codes: 0 printed, 2 usage error or the output could not be written."
    )]
    Version,
    /// Print a shell completion script.
    #[command(
        after_help = "Example:\n  jelly completions bash > /etc/bash_completion.d/jelly\n\n\
                      Exit codes: 0 printed, 2 usage error (an unknown shell) or the script\n\
                      could not be written."
    )]
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: Shell,
    },
}

/// Limits on the Jelly streams read (defaults: the library's, 4096 / 1024 / 256 table
/// entries, nesting 100, 64 MiB frames, an options row within the first 1024 frames). A
/// stream that asks for more is refused with an error that names the limit.
#[derive(Debug, Args, Default)]
pub struct ReaderLimitArgs {
    /// Largest name table a Jelly input may ask for.
    #[arg(long, global = true, value_name = "N", help_heading = "Reader limits")]
    pub max_name_table: Option<u32>,
    /// Largest prefix table a Jelly input may ask for.
    #[arg(long, global = true, value_name = "N", help_heading = "Reader limits")]
    pub max_prefix_table: Option<u32>,
    /// Largest datatype table a Jelly input may ask for.
    #[arg(long, global = true, value_name = "N", help_heading = "Reader limits")]
    pub max_datatype_table: Option<u32>,
    /// Deepest nesting of quoted triples accepted in a Jelly input (at most 256).
    #[arg(
        long,
        global = true,
        value_name = "N",
        value_parser = nesting_limit,
        help_heading = "Reader limits"
    )]
    pub max_nesting: Option<usize>,
    /// Largest Jelly frame accepted, in bytes.
    #[arg(
        long,
        global = true,
        value_name = "BYTES",
        help_heading = "Reader limits"
    )]
    pub max_frame_size: Option<u64>,
    /// Most frames a Jelly input may have before its options row (frames with no rows
    /// are valid, but thousands of them mean the input is not Jelly, e.g. zeros).
    #[arg(
        long,
        global = true,
        value_name = "N",
        value_parser = clap::value_parser!(u64).range(1..),
        help_heading = "Reader limits"
    )]
    pub max_frames_before_options: Option<u64>,
}

/// A `--max-nesting` value: refused above the decoder's hard cap, which it would
/// otherwise apply silently (deeper nesting could overflow the stack).
fn nesting_limit(s: &str) -> Result<usize, String> {
    let n = s.parse::<usize>().map_err(|e| e.to_string())?;
    if n > jelly::MAX_NESTING_CAP {
        return Err(format!(
            "the largest value is {} (each level of nesting takes stack space when \
             the term is decoded and written)",
            jelly::MAX_NESTING_CAP
        ));
    }
    Ok(n)
}

/// Shells for completion scripts.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
    Elvish,
    Powershell,
}

#[derive(Debug, Subcommand)]
pub enum RdfCommand {
    /// Convert RDF (N-Triples, N-Quads, Turtle, TriG, RDF/XML, JSON-LD, N3) to a Jelly stream.
    #[command(name = "to-jelly", after_help = TO_JELLY_HELP)]
    ToJelly(ToJellyArgs),
    /// Convert a Jelly stream to RDF text.
    #[command(name = "from-jelly", after_help = FROM_JELLY_HELP)]
    FromJelly(FromJellyArgs),
    /// Merge, re-frame or re-encode Jelly streams.
    #[command(after_help = TRANSCODE_HELP)]
    Transcode(TranscodeArgs),
    /// Print statistics about a Jelly stream (YAML or JSON).
    #[command(after_help = INSPECT_HELP)]
    Inspect(InspectArgs),
    /// Check a Jelly stream against the specification, and optionally against RDF data.
    #[command(after_help = VALIDATE_HELP)]
    Validate(ValidateArgs),
}

const TO_JELLY_HELP: &str = "\
Examples:
  jelly rdf to-jelly data.ttl --to data.jelly
  cat data.nq | jelly rdf to-jelly --in-format nq > data.jelly
  jelly rdf to-jelly a.trig b.trig --frame-per graph --to graphs.jelly.gz
  jelly rdf to-jelly data.nt --preset small --rows-per-frame 1000 --to data.jelly.zst
  jelly rdf to-jelly data.ttl --enable-namespace-declarations --to data.jelly
  jelly rdf to-jelly star.nq --opt.rdf-star --opt.generalized-statements --to star.jelly

Input from stdin (no INPUT or `-`) is read as N-Quads unless --in-format says otherwise.
gzip and zstd input is detected by its magic bytes; output is compressed when --to ends
in .gz or .zst. The physical type defaults to QUADS for dataset formats (N-Quads, TriG,
JSON-LD) and TRIPLES otherwise. --frame-per sets the logical type when not given:
graph -> GRAPHS (triples) or NAMED_GRAPHS, dataset -> DATASETS (GRAPHS for triples),
input -> GRAPHS or DATASETS. Without --frame-per, a frame ends at the first statement
that brings it to 256 rows (--rows-per-frame) or 512 KiB of rows (--bytes-per-frame),
whichever comes first (a statement's lookup entry rows stay in its frame, so a frame
may hold a few rows more); a frame larger than readers accept by default (64 MiB: a single huge row) is
told in a note.

--enable-namespace-declarations declares each prefix (@prefix, xmlns, a JSON-LD context
term) before the first statement after it. In an input of over 32 prefixes that keeps
declaring them between statements, a declaration may come up to (prefixes / 32)
statements later.

Text input is read with bounded memory, and refused (naming the byte offset) where it
would be held whole or nest without bound: a Turtle, TriG, N3 or JSON-LD token over
16 MiB, an N-Triples or N-Quads line over 64 MiB, an RDF/XML text, tag or literal over
64 MiB; triple terms nested over 100 levels, `[ ]`, `( )` and `{ }` over 1024. A JSON-LD
document over 16 MiB is read in parts if it is a top-level array, or an object of
\"@context\", \"@id\" and \"@graph\" (an array, last); any other is refused, as is
an element or node over 16 MiB.

jelly-text input (--in-format jelly-text, or files named *.jelly.txt, as the JVM
jelly-cli writes them with `from-jelly --out-format jelly-text`): Jelly frames in the
protobuf text format, turned into a Jelly stream row for row, byte for byte, without
checking them (so invalid streams can be written for tests). A line starting `# Frame`
begins a frame; text without one is one frame. Encoding flags (--preset, --opt.*,
--rows-per-frame, --frame-per, ...) do not apply; --delimited=false writes the frames'
bytes back to back, which readers take as one frame. The format is not stable: a
warning says so on stderr unless --quiet. Errors name the line and column.

Exit codes: 0 success, 1 invalid input, 2 usage or I/O error.";

const FROM_JELLY_HELP: &str = "\
Examples:
  jelly rdf from-jelly data.jelly --to data.nq
  jelly rdf from-jelly data.jelly.gz --out-format ttl > data.ttl
  cat data.jelly | jelly rdf from-jelly --out-format nt
  jelly rdf from-jelly data.jelly --take-frames 2..5 --to part.nq
  jelly rdf from-jelly data.jelly --split-frames frames/ --out-format trig
  jelly rdf from-jelly data.jelly --out-format jelly-text --take-frames 0..2

--take-frames takes 0-based frame indices: `3` (frame 3 only), `1..5` (1 to 4),
`1..=5`, `..10` (0 to 9) or `2..` (2 to the end).
Namespace declarations before the first statement become prefixes in Turtle and TriG
output (the prefixes are written at the start, so later declarations are not used).

--out-format jelly-text (or --to FILE.jelly.txt) prints each frame as the JVM jelly-cli
does: a line `# Frame N`, then the frame's fields in the protobuf text format, in the
order of its bytes (fields rdf.proto does not have, by number), without decoding, so
invalid streams print too (only a frame with an overlong varint in its own fields has
no exact text and is refused). `rdf to-jelly` reads it back. Not a stable format: for
tests and debugging.
An input named *.jelly.txt is read as jelly-text, Jelly frames in the protobuf text
format (see `jelly rdf to-jelly --help`; not a stable format, a warning says so).

Exit codes: 0 success, 1 invalid input or statement not representable, 2 usage or I/O error.";

const TRANSCODE_HELP: &str = "\
Examples:
  jelly rdf transcode a.jelly b.jelly --to merged.jelly
  jelly rdf transcode big.jelly --rows-per-frame 64 --to small-frames.jelly
  jelly rdf transcode in.jelly --preset small --opt.physical-type quads --to out.jelly.gz
  jelly rdf transcode in.jelly --frame-per graph --to per-graph.jelly

By default the first input's options and frame boundaries are kept; --rows-per-frame
or --bytes-per-frame re-frames the output (frames end after 256 rows or at 512 KiB,
whichever comes first, unless these flags say otherwise).

An input named *.jelly.txt is read as jelly-text, Jelly frames in the protobuf text
format (see `jelly rdf to-jelly --help`; not a stable format, a warning says so).

Exit codes: 0 success, 1 invalid input, 2 usage or I/O error.";

const INSPECT_HELP: &str = "\
Examples:
  jelly rdf inspect data.jelly
  jelly rdf inspect data.jelly.gz --per-frame --json

Distinct term counts are exact up to 4,000,000 terms of each kind, approximate after that.
An input named *.jelly.txt is read as jelly-text, Jelly frames in the protobuf text
format (see `jelly rdf to-jelly --help`; not a stable format, a warning says so).
Exit codes: 0 success, 1 invalid input, 2 usage or I/O error.";

const VALIDATE_HELP: &str = "\
Examples:
  jelly rdf validate data.jelly
  jelly rdf validate data.jelly --compare-to-rdf-file data.nq
  jelly rdf validate data.jelly --compare-to-rdf-file frame3.nq --compare-ordered true --compare-frame-indices 3
  jelly rdf validate data.jelly --options-file expected_options.jelly --delimited true

With --compare-ordered true the RDF file is read beside the stream, statement by
statement, in bounded memory. An unordered comparison (the default) holds both sides
in memory, a few hundred bytes per statement: at most --max-statements (default
2000000) per side, past which it stops with an error naming the count.

An input named *.jelly.txt is read as jelly-text, Jelly frames in the protobuf text
format (see `jelly rdf to-jelly --help`; not a stable format, a warning says so).

Exit codes:
  0  the stream is valid (and matches the RDF file and the options, when asked)
  1  the stream is invalid, or differs from the RDF file or the options
  2  usage error, or an I/O error";

const CONFORMANCE_HELP: &str = "\
Example:
  jelly conformance --suite ../shared/jelly-conformance --earl docs/conformance/earl.ttl

Exit codes: 0 all cases passed, 1 some case failed, 2 usage or I/O error.";

/// Physical stream type names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PhysicalArg {
    Triples,
    Quads,
    Graphs,
}

/// Option presets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Preset {
    /// name 128, prefix 16, datatype 16
    Small,
    /// name 4000, prefix 150, datatype 32
    Big,
}

/// How output is grouped into frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FramePer {
    /// A new frame whenever the graph changes.
    Graph,
    /// One frame per input file, each a dataset.
    Dataset,
    /// One frame per input file.
    Input,
    /// (transcode) keep the frame boundaries of the input.
    Frame,
}

/// RDF-STaX's IRIs of the logical types (as the JVM jelly-cli takes them), by the
/// name [`LogicalType::parse`] reads.
const STAX_TYPES: [(&str, &str); 7] = [
    ("flatTripleStream", "flat-triples"),
    ("flatQuadStream", "flat-quads"),
    ("graphStream", "graphs"),
    ("datasetStream", "datasets"),
    ("subjectGraphStream", "subject-graphs"),
    ("namedGraphStream", "named-graphs"),
    ("timestampedNamedGraphStream", "timestamped-named-graphs"),
];

fn parse_logical(s: &str) -> Result<LogicalType, String> {
    let stax = s
        .strip_prefix("https://w3id.org/stax/ontology#")
        .and_then(|local| STAX_TYPES.iter().find(|(iri, _)| *iri == local))
        .map(|(_, name)| *name);
    LogicalType::parse(stax.unwrap_or(s)).ok_or_else(|| {
        format!(
            "unknown logical type `{s}` (flat-triples, flat-quads, graphs, datasets, \
             subject-graphs, named-graphs, timestamped-named-graphs, or a number)"
        )
    })
}

/// Stream option flags shared by to-jelly and transcode.
#[derive(Debug, Clone, Args, Default)]
pub struct StreamOptionArgs {
    /// Table sizes preset (default big).
    #[arg(long, value_enum)]
    pub preset: Option<Preset>,
    /// Take the options from an existing Jelly file (flags below still override them).
    #[arg(long = "options-from", value_name = "FILE.jelly")]
    pub options_from: Option<String>,
    /// Physical stream type.
    #[arg(
        long = "opt.physical-type",
        value_enum,
        ignore_case = true,
        value_name = "TYPE"
    )]
    pub physical_type: Option<PhysicalArg>,
    /// Logical stream type (flat-triples, flat-quads, graphs, datasets, subject-graphs, named-graphs, …).
    #[arg(long = "opt.logical-type", value_parser = parse_logical, value_name = "TYPE")]
    pub logical_type: Option<LogicalType>,
    /// Name lookup table size (at least 8).
    #[arg(long = "opt.max-name-table-size", value_name = "N")]
    pub max_name_table_size: Option<u32>,
    /// Prefix lookup table size (0 disables it).
    #[arg(long = "opt.max-prefix-table-size", value_name = "N")]
    pub max_prefix_table_size: Option<u32>,
    /// Datatype lookup table size (0 disables typed literals).
    #[arg(long = "opt.max-datatype-table-size", value_name = "N")]
    pub max_datatype_table_size: Option<u32>,
    /// Allow RDF-star quoted triples / RDF 1.2 triple terms (also reads .nt/.nq with Jelly's own tolerant parser; `=false` turns it off). `--opt.triple-terms` is the same flag (the JVM jelly-cli's name).
    #[arg(long = "opt.rdf-star", alias = "opt.triple-terms", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_name = "BOOL")]
    pub rdf_star: Option<bool>,
    /// Allow generalized statements (also reads .nt/.nq with Jelly's own tolerant parser; `=false` turns it off).
    #[arg(long = "opt.generalized-statements", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_name = "BOOL")]
    pub generalized_statements: Option<bool>,
    /// Stream name.
    #[arg(long = "opt.stream-name", value_name = "NAME")]
    pub stream_name: Option<String>,
}

/// A count of at least 1 (`--rows-per-frame 0` would make no frames).
pub(crate) fn at_least_one(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// Where the writers also end a frame by default (`--bytes-per-frame`): once its rows
/// take this many bytes. The spec asks for frames under 1 MB; half a MiB keeps a frame
/// under it unless its last row alone is larger than the rest of the way.
pub const DEFAULT_BYTES_PER_FRAME: usize = 512 * 1024;

/// Framing flags of the writers.
#[derive(Debug, Clone, Args, Default)]
pub struct FramingArgs {
    /// Rows per frame (default 256; not with --frame-per, whose frames it would not
    /// split, so the two together are refused rather than one silently ignored).
    #[arg(
        long = "rows-per-frame",
        value_name = "N",
        value_parser = at_least_one,
        conflicts_with = "frame_per"
    )]
    pub rows_per_frame: Option<usize>,
    /// Also end a frame once its rows take N bytes (default 524288, 512 KiB), so that
    /// large literals do not make huge frames; a row larger than N is a frame of its
    /// own. Applies with --rows-per-frame (or its default), not with --frame-per, and
    /// not to --delimited=false output (one frame).
    #[arg(
        long = "bytes-per-frame",
        value_name = "N",
        value_parser = at_least_one,
        conflicts_with = "frame_per"
    )]
    pub bytes_per_frame: Option<usize>,
    /// Group frames by graph, dataset or input file instead of by row count.
    #[arg(long = "frame-per", value_enum, value_name = "UNIT")]
    pub frame_per: Option<FramePer>,
    /// Write delimited frames (default true; `--delimited=false` writes exactly one frame).
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_name = "BOOL")]
    pub delimited: Option<bool>,
    /// Carry namespace declarations (@prefix) into the stream (protocol version 2).
    #[arg(long = "enable-namespace-declarations")]
    pub enable_namespace_declarations: bool,
}

#[derive(Debug, Args)]
pub struct ToJellyArgs {
    /// Input files (`-` or none for stdin).
    #[arg(value_name = "INPUT")]
    pub inputs: Vec<String>,
    /// Output file (default stdout).
    #[arg(long = "to", short = 'o', value_name = "FILE")]
    pub to: Option<String>,
    /// Input format (default: from the extension, `.jelly.txt` being jelly-text; N-Quads
    /// for stdin).
    #[arg(long = "in-format", value_enum, value_name = "FORMAT")]
    pub in_format: Option<crate::jelly_text::TextFormat>,
    /// Base IRI for relative IRIs in Turtle, TriG, RDF/XML, JSON-LD and N3.
    #[arg(long = "base-iri", value_name = "IRI")]
    pub base_iri: Option<String>,
    #[command(flatten)]
    pub opts: StreamOptionArgs,
    #[command(flatten)]
    pub framing: FramingArgs,
}

#[derive(Debug, Args)]
pub struct FromJellyArgs {
    /// Input Jelly file (`-` or none for stdin).
    #[arg(value_name = "INPUT")]
    pub input: Option<String>,
    /// Output file (default stdout).
    #[arg(long = "to", short = 'o', value_name = "FILE")]
    pub to: Option<String>,
    /// Output format (default: from the extension of --to, `.jelly.txt` being
    /// jelly-text, else nq).
    #[arg(long = "out-format", value_enum, value_name = "FORMAT")]
    pub out_format: Option<crate::jelly_text::TextFormat>,
    /// Only these frames (0-based): `3`, `1..5`, `1..=5`, `..10`, `2..`.
    #[arg(long = "take-frames", value_name = "RANGE")]
    pub take_frames: Option<String>,
    /// Write each frame to its own file in DIR (frame-000000.nq, …).
    #[arg(long = "split-frames", value_name = "DIR", conflicts_with = "to")]
    pub split_frames: Option<String>,
    /// Write all frames to one output (the default).
    #[arg(long, conflicts_with = "split_frames")]
    pub combine: bool,
}

#[derive(Debug, Args)]
pub struct TranscodeArgs {
    /// Input Jelly files (`-` or none for stdin).
    #[arg(value_name = "INPUT")]
    pub inputs: Vec<String>,
    /// Output file (default stdout).
    #[arg(long = "to", short = 'o', value_name = "FILE")]
    pub to: Option<String>,
    #[command(flatten)]
    pub opts: StreamOptionArgs,
    #[command(flatten)]
    pub framing: FramingArgs,
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// Input Jelly file (`-` or none for stdin).
    #[arg(value_name = "INPUT")]
    pub input: Option<String>,
    /// Also report every frame.
    #[arg(long = "per-frame")]
    pub per_frame: bool,
    /// JSON instead of YAML.
    #[arg(long)]
    pub json: bool,
    /// Output file (default stdout).
    #[arg(long = "to", short = 'o', value_name = "FILE")]
    pub to: Option<String>,
}

/// Delimiting expected by validate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DelimitedArg {
    Either,
    True,
    False,
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Input Jelly file (`-` or none for stdin).
    #[arg(value_name = "INPUT")]
    pub input: Option<String>,
    /// Compare the stream's statements with this RDF file (or another Jelly file). An
    /// unordered comparison holds both sides in memory (see --max-statements); an
    /// ordered one reads the two side by side.
    #[arg(long = "compare-to-rdf-file", value_name = "FILE")]
    pub compare_to_rdf_file: Option<String>,
    /// Format of the RDF file (default: from its extension).
    #[arg(
        long = "compare-to-format",
        value_enum,
        value_name = "FORMAT",
        requires = "compare_to_rdf_file"
    )]
    pub compare_to_format: Option<Format>,
    /// true: statements must appear in the same order; false: compare as datasets
    /// (isomorphism). `--compare-ordered` alone is true, as in the JVM jelly-cli.
    #[arg(
        long = "compare-ordered",
        action = ArgAction::Set,
        num_args = 0..=1,
        default_value = "false",
        default_missing_value = "true",
        value_name = "BOOL"
    )]
    pub compare_ordered: bool,
    /// Most statements an unordered comparison holds per side (default 2000000); a
    /// side with more is refused with an error naming this option, instead of running
    /// out of memory.
    #[arg(long = "max-statements", value_name = "N")]
    pub max_statements: Option<u64>,
    /// Only compare these frames (0-based range, as in from-jelly --take-frames).
    #[arg(
        long = "compare-frame-indices",
        value_name = "RANGE",
        requires = "compare_to_rdf_file"
    )]
    pub compare_frame_indices: Option<String>,
    /// Require these exact stream options (taken from a Jelly file).
    #[arg(long = "options-file", value_name = "FILE.jelly")]
    pub options_file: Option<String>,
    /// Required framing of the input.
    #[arg(long, value_enum, default_value = "either", value_name = "WHICH")]
    pub delimited: DelimitedArg,
}

#[derive(Debug, Args)]
pub struct ConformanceArgs {
    /// The suite folder (the one holding `rdf/from_jelly` and `rdf/to_jelly`).
    #[arg(long, value_name = "DIR")]
    pub suite: String,
    /// Where to write the EARL report (Turtle).
    #[arg(long, value_name = "FILE")]
    pub earl: Option<String>,
    /// Where to leave the to_jelly outputs.
    #[arg(long = "out-dir", value_name = "DIR")]
    pub out_dir: Option<String>,
}
