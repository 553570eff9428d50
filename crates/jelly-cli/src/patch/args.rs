//! Command-line definitions of `jelly patch …` (clap derive).

use clap::{Args, Subcommand, ValueEnum};

use crate::cli::Preset;
use crate::format::Format;

#[derive(Debug, Subcommand)]
pub enum PatchCommand {
    /// Convert RDF Patch text (.rdfp) to a Jelly-Patch stream (.jellyp).
    #[command(name = "to-jelly", after_help = TO_JELLY_HELP)]
    ToJelly(PatchToJellyArgs),
    /// Convert a Jelly-Patch stream to RDF Patch text.
    #[command(name = "from-jelly", after_help = FROM_JELLY_HELP)]
    FromJelly(PatchFromJellyArgs),
    /// Print statistics about a Jelly-Patch stream (YAML or JSON).
    #[command(after_help = INSPECT_HELP)]
    Inspect(PatchInspectArgs),
    /// Check a Jelly-Patch stream or an RDF Patch text file against the specification.
    #[command(after_help = VALIDATE_HELP)]
    Validate(PatchValidateArgs),
    /// Write the patch that turns one RDF file into another.
    #[command(after_help = DIFF_HELP)]
    Diff(PatchDiffArgs),
    /// Apply patches to an RDF dataset and write the result.
    #[command(after_help = APPLY_HELP)]
    Apply(PatchApplyArgs),
}

const TO_JELLY_HELP: &str = "\
Examples:
  jelly patch to-jelly changes.rdfp -o changes.jellyp
  cat changes.rdfp | jelly patch to-jelly > changes.jellyp
  jelly patch to-jelly day1.rdfp day2.rdfp --stream-type frame -o log.jellyp.gz
  jelly patch to-jelly log.rdfp --stream-type frame --patch-per transaction -o log.jellyp
  jelly patch to-jelly log.rdfp --stream-type punctuated --preset small -o log.jellyp.zst

Input is RDF Patch text (a Jelly-Patch input is re-encoded with the new options).
The statement type defaults to QUADS: it can carry every patch and, thanks to repeated
terms, costs next to nothing when all statements are in the default graph. With
--statement-type triples a row naming a graph is an error.

Patches (--stream-type frame: one frame each; punctuated: each ends with a punctuation
row; flat: the whole stream is one patch) end at the end of each input file, at each
`Z .` segment row, and with --patch-per transaction after each top-level TC/TA.
In FLAT and PUNCTUATED streams a frame ends after 256 rows (--rows-per-frame) or once
its rows take 512 KiB (--bytes-per-frame), whichever comes first; a frame larger than
readers accept by default (64 MiB: a huge row, or a huge patch in a FRAME stream) is
told in a note.
Empty patches are not written, except that input with no rows at all still makes a
stream: its options row, which in a FRAME stream is a frame and so one empty patch.
A Jelly-Patch input is re-encoded row by row: a PD row keeps its IRI.

Exit codes: 0 success, 1 invalid input, 2 usage or I/O error.";

const FROM_JELLY_HELP: &str = "\
Examples:
  jelly patch from-jelly changes.jellyp -o changes.rdfp
  cat changes.jellyp.gz | jelly patch from-jelly > changes.rdfp
  jelly patch from-jelly log.jellyp --take-frames 2..5
  jelly patch from-jelly log.jellyp --patch-separator segment | jelly patch to-jelly --stream-type frame

In FRAME and PUNCTUATED streams the end of each patch (a frame end or a punctuation
row) is written as `# end of patch N` (--patch-separator comment, the default), a blank
line (blank), a `Z .` segment row that `jelly patch to-jelly` turns back into a patch
boundary (segment), or nothing (none). FLAT streams are one patch and get no separator.
A namespace delete (PD) carrying an IRI loses the IRI: RDF Patch text has no place for it.

Exit codes: 0 success, 1 invalid input, 2 usage or I/O error.";

const INSPECT_HELP: &str = "\
Examples:
  jelly patch inspect changes.jellyp
  jelly patch inspect log.jellyp.gz --per-frame --json

Exit codes: 0 success, 1 invalid input, 2 usage or I/O error.";

const VALIDATE_HELP: &str = "\
Examples:
  jelly patch validate changes.jellyp
  jelly patch validate changes.rdfp
  cat changes.rdfp | jelly patch validate --in-format rdfp

Binary input is decoded with every Jelly-Patch rule checked (options, lookup tables,
transactions that neither nest nor span frames of a FRAME stream, punctuation). Text
input is parsed strictly and its structure checked: headers first, transactions that
neither nest nor end without starting, none left open. The kind of input is taken from
--in-format, else from the extension (.jellyp, .rdfp), else from the first bytes.

Exit codes:
  0  valid
  1  invalid (the message gives FILE:frame N:row M or FILE:LINE:COLUMN)
  2  usage error, or an I/O error";

const DIFF_HELP: &str = "\
Examples:
  jelly patch diff old.nq new.nq -o changes.rdfp
  jelly patch diff old.ttl new.ttl --format jelly -o changes.jellyp
  jelly patch diff v1.trig v2.trig.gz | jelly patch apply v1.trig - -o v2.nq

The patch is one transaction: TX, PD/PA rows for prefixes removed or changed, D rows
for statements of OLD missing from NEW (in OLD's order), A rows for statements of NEW
missing from OLD (in NEW's order), TC. Statements are compared as written: blank nodes
by their labels (as RDF Patch intends: labels are store identifiers), literals by
lexical form (\"x\" and \"x\"^^xsd:string are the same). Anonymous blank nodes ([] in
Turtle) get fresh labels on every read, so use N-Triples or N-Quads for stable labels.
Both files are held in memory, a few hundred bytes per statement: at most
--max-statements (default 2000000) each, past which diff stops with an error naming
the count.

Output is RDF Patch text, or Jelly-Patch when -o ends in .jellyp (.gz, .zst) or with
--format jelly (then TRIPLES unless a statement is in a named graph, FLAT stream).

Exit codes: 0 success, 1 invalid input, 2 usage or I/O error.";

const APPLY_HELP: &str = "\
Examples:
  jelly patch apply base.nq changes.rdfp -o result.nq
  jelly patch apply base.ttl p1.jellyp p2.rdfp.gz -o result.ttl
  jelly patch apply base.nq changes.rdfp --strict
  cat changes.jellyp | jelly patch apply base.nq - > result.nq

BASE is any RDF file the rdf verbs read (or a .jelly file). Patches (text or binary,
detected by extension or content) are applied in order. Rows inside TX…TC take effect
at TC; an aborted transaction (TX…TA) changes nothing. Rows outside transactions take
effect at once. PA/PD rows edit the prefix map used for Turtle and TriG output (the
prefix graph is ignored); H headers and Z segments are ignored. The result keeps BASE's
order, with added statements after it. The dataset is held in memory, a few hundred
bytes per statement: at most --max-statements (default 2000000) statements, counting
those an open transaction added, past which apply stops with an error naming the count.

Without --strict, deleting an absent statement or adding a present one does nothing.
With --strict either one is an error naming the patch and the row.

Output format: --out-format, else the extension of -o, else N-Quads.

Exit codes: 0 success, 1 invalid input or a --strict failure, 2 usage or I/O error.";

/// Statement type of a Jelly-Patch stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StatementTypeArg {
    Triples,
    Quads,
}

/// Stream type of a Jelly-Patch stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum StreamTypeArg {
    /// One frame per patch.
    Frame,
    /// The whole stream is one patch.
    #[default]
    Flat,
    /// Patches end with punctuation rows.
    Punctuated,
}

/// Where patches end in to-jelly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PatchPer {
    /// One patch per input file (and per `Z .` segment).
    Input,
    /// A patch ends after each top-level TC or TA.
    Transaction,
}

/// The two patch syntaxes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PatchFormat {
    /// RDF Patch text (`.rdfp`)
    #[value(alias = "rdf-patch", alias = "text")]
    Rdfp,
    /// Jelly-Patch (`.jellyp`)
    #[value(alias = "jelly", alias = "binary")]
    Jellyp,
}

/// What marks the end of a patch in from-jelly output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Separator {
    /// `# end of patch N`
    Comment,
    /// An empty line.
    Blank,
    /// `Z .` (read back as a patch boundary by to-jelly)
    Segment,
    /// Nothing.
    None,
}

/// Jelly-Patch stream option flags.
#[derive(Debug, Clone, Args, Default)]
pub struct PatchOptionArgs {
    /// Statement type (default quads, see below).
    #[arg(long = "statement-type", value_enum, value_name = "TYPE")]
    pub statement_type: Option<StatementTypeArg>,
    /// Stream type.
    #[arg(
        long = "stream-type",
        value_enum,
        default_value = "flat",
        value_name = "TYPE"
    )]
    pub stream_type: StreamTypeArg,
    /// Table sizes preset (default big).
    #[arg(long, value_enum)]
    pub preset: Option<Preset>,
    /// Name lookup table size (at least 8).
    #[arg(long = "opt.max-name-table-size", value_name = "N")]
    pub max_name_table_size: Option<u32>,
    /// Prefix lookup table size (0 disables it).
    #[arg(long = "opt.max-prefix-table-size", value_name = "N")]
    pub max_prefix_table_size: Option<u32>,
    /// Datatype lookup table size (0 disables typed literals).
    #[arg(long = "opt.max-datatype-table-size", value_name = "N")]
    pub max_datatype_table_size: Option<u32>,
    /// Allow RDF-star triple terms.
    #[arg(long = "opt.rdf-star", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_name = "BOOL")]
    pub rdf_star: Option<bool>,
    /// Allow generalized statements (also makes the text parser accept them).
    #[arg(long = "opt.generalized-statements", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_name = "BOOL")]
    pub generalized_statements: Option<bool>,
    /// Rows per frame for FLAT and PUNCTUATED streams (default 256).
    #[arg(long = "rows-per-frame", value_name = "N", value_parser = crate::cli::at_least_one)]
    pub rows_per_frame: Option<usize>,
    /// FLAT and PUNCTUATED streams: also end a frame once its rows take N bytes
    /// (default 524288, 512 KiB); a row larger than N is a frame of its own. A FRAME
    /// stream's frame is its patch, whatever its size.
    #[arg(long = "bytes-per-frame", value_name = "N", value_parser = crate::cli::at_least_one)]
    pub bytes_per_frame: Option<usize>,
    /// Write delimited frames (default true; `--delimited=false` writes exactly one frame).
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_name = "BOOL")]
    pub delimited: Option<bool>,
}

#[derive(Debug, Args)]
pub struct PatchToJellyArgs {
    /// Input files (`-` or none for stdin).
    #[arg(value_name = "INPUT")]
    pub inputs: Vec<String>,
    /// Output file (default stdout).
    #[arg(long = "to", short = 'o', value_name = "FILE")]
    pub to: Option<String>,
    /// Input syntax (default: from the extension, else from the first bytes).
    #[arg(long = "in-format", value_enum, value_name = "FORMAT")]
    pub in_format: Option<PatchFormat>,
    /// Where patches end (FRAME and PUNCTUATED streams).
    #[arg(
        long = "patch-per",
        value_enum,
        default_value = "input",
        value_name = "UNIT"
    )]
    pub patch_per: PatchPer,
    #[command(flatten)]
    pub opts: PatchOptionArgs,
}

#[derive(Debug, Args)]
pub struct PatchFromJellyArgs {
    /// Input Jelly-Patch file (`-` or none for stdin).
    #[arg(value_name = "INPUT")]
    pub input: Option<String>,
    /// Output file (default stdout).
    #[arg(long = "to", short = 'o', value_name = "FILE")]
    pub to: Option<String>,
    /// Only these frames (0-based): `3`, `1..5`, `1..=5`, `..10`, `2..`.
    #[arg(long = "take-frames", value_name = "RANGE")]
    pub take_frames: Option<String>,
    /// What marks the end of each patch of FRAME and PUNCTUATED streams.
    #[arg(
        long = "patch-separator",
        value_enum,
        default_value = "comment",
        value_name = "HOW"
    )]
    pub separator: Separator,
}

#[derive(Debug, Args)]
pub struct PatchInspectArgs {
    /// Input Jelly-Patch file (`-` or none for stdin).
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

#[derive(Debug, Args)]
pub struct PatchValidateArgs {
    /// Input file (`-` or none for stdin).
    #[arg(value_name = "INPUT")]
    pub input: Option<String>,
    /// Input syntax (default: from the extension, else from the first bytes).
    #[arg(long = "in-format", value_enum, value_name = "FORMAT")]
    pub in_format: Option<PatchFormat>,
    /// Text: accept header (H) rows after the first change.
    #[arg(long = "allow-late-headers")]
    pub allow_late_headers: bool,
}

#[derive(Debug, Args)]
pub struct PatchDiffArgs {
    /// The RDF file before the change.
    #[arg(value_name = "OLD")]
    pub old: String,
    /// The RDF file after the change (`-` for stdin).
    #[arg(value_name = "NEW")]
    pub new: String,
    /// Output file (default stdout).
    #[arg(long = "to", short = 'o', value_name = "FILE")]
    pub to: Option<String>,
    /// Format of OLD and NEW (default: from their extensions; N-Quads for stdin).
    #[arg(long = "in-format", value_enum, value_name = "FORMAT")]
    pub in_format: Option<Format>,
    /// Output syntax (default: jellyp when -o ends in .jellyp, else rdfp).
    #[arg(long = "format", value_enum, value_name = "FORMAT")]
    pub format: Option<PatchFormat>,
    /// Most statements held per file (default 2000000); a file with more is refused
    /// with an error naming this option, instead of running out of memory.
    #[arg(long = "max-statements", value_name = "N")]
    pub max_statements: Option<u64>,
}

#[derive(Debug, Args)]
pub struct PatchApplyArgs {
    /// The RDF dataset to start from.
    #[arg(value_name = "BASE")]
    pub base: String,
    /// Patches, applied in order (`-` for stdin).
    #[arg(value_name = "PATCH", required = true)]
    pub patches: Vec<String>,
    /// Output file (default stdout).
    #[arg(long = "to", short = 'o', value_name = "FILE")]
    pub to: Option<String>,
    /// Format of BASE (default: from its extension).
    #[arg(long = "in-format", value_enum, value_name = "FORMAT")]
    pub in_format: Option<Format>,
    /// Output format (default: from the extension of -o, else nq).
    #[arg(long = "out-format", value_enum, value_name = "FORMAT")]
    pub out_format: Option<Format>,
    /// Fail when a D row deletes an absent statement or an A row adds a present one.
    #[arg(long)]
    pub strict: bool,
    /// Most statements held (default 2000000): the dataset, and the statements an open
    /// transaction added (kept to undo them). Past it the command stops with an error
    /// naming this option, instead of running out of memory.
    #[arg(long = "max-statements", value_name = "N")]
    pub max_statements: Option<u64>,
}
