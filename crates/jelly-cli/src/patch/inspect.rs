//! `jelly patch inspect`: options, frames, patches, rows by kind and transactions of a
//! Jelly-Patch stream, in bounded memory.

use std::io::Write;

use jelly::Delimiting;
use jelly::patch::{PatchOptions, PatchStats, PatchStreamType};

use super::args::{PatchFormat, PatchInspectArgs};
use super::common::{Op, detect, read_binary};
use crate::common::FrameRange;
use crate::error::{CliError, CliResult};
use crate::io::{Compression, Progress, open_input};
use crate::report::{Value, around_top_list, map, top_list_item};
use crate::spool::{SPOOL_NAME, Spool, write_report};

/// The options as a report value.
pub fn options_value(o: &PatchOptions) -> Value {
    map(vec![
        ("statement_type", o.statement_type.name().into()),
        ("stream_type", o.stream_type.name().into()),
        ("generalized_statements", o.generalized_statements.into()),
        ("rdf_star", o.rdf_star.into()),
        ("max_name_table_size", o.max_name_table_size.into()),
        ("max_prefix_table_size", o.max_prefix_table_size.into()),
        ("max_datatype_table_size", o.max_datatype_table_size.into()),
        ("version", o.version.into()),
    ])
}

/// Operations: every row but options and lookup entries.
fn operations(s: &PatchStats) -> u64 {
    s.adds
        + s.deletes
        + s.namespace_adds
        + s.namespace_deletes
        + s.headers
        + s.transactions
        + s.commits
        + s.aborts
        + s.punctuations
}

fn rows_value(s: &PatchStats) -> Value {
    map(vec![
        ("add", s.adds.into()),
        ("delete", s.deletes.into()),
        ("namespace_add", s.namespace_adds.into()),
        ("namespace_delete", s.namespace_deletes.into()),
        ("header", s.headers.into()),
        ("transaction_start", s.transactions.into()),
        ("transaction_commit", s.commits.into()),
        ("transaction_abort", s.aborts.into()),
        ("punctuation", s.punctuations.into()),
        ("lookup_entries", s.lookup_entries.into()),
    ])
}

fn minus(a: &PatchStats, b: &PatchStats) -> PatchStats {
    PatchStats {
        frames: a.frames - b.frames,
        adds: a.adds - b.adds,
        deletes: a.deletes - b.deletes,
        namespace_adds: a.namespace_adds - b.namespace_adds,
        namespace_deletes: a.namespace_deletes - b.namespace_deletes,
        headers: a.headers - b.headers,
        transactions: a.transactions - b.transactions,
        commits: a.commits - b.commits,
        aborts: a.aborts - b.aborts,
        punctuations: a.punctuations - b.punctuations,
        lookup_entries: a.lookup_entries - b.lookup_entries,
    }
}

fn ratio(bytes: u64, n: u64) -> Value {
    if n == 0 {
        Value::Null
    } else {
        (bytes as f64 / n as f64).into()
    }
}

/// What [`inspect`] found.
pub struct Inspected {
    /// The report; with `--per-frame`, its last value `frames_detail` is an empty list
    /// standing for the entries written to the detail writer.
    pub report: Value,
    /// Per-frame entries written.
    pub frames_detail: u64,
}

/// Builds the report of a stream. With `--per-frame`, each frame's entry is written to
/// `detail` as the frame is read (rendered for a top-level list, see
/// [`crate::report::top_list_item`]), so memory does not grow with the frame count.
pub fn inspect(
    args: &PatchInspectArgs,
    quiet: bool,
    mut detail: Option<&mut dyn Write>,
) -> CliResult<Inspected> {
    let in_path = args.input.as_deref().unwrap_or("-");
    let mut input = open_input(in_path)?;
    let name = input.name.clone();
    // Empty input is reported as such below, not as text.
    if detect(&mut input, in_path, None)? == PatchFormat::Rdfp
        && !crate::patch::common::is_empty_input(&mut input)?
    {
        return Err(CliError::invalid(format!(
            "{name}: this looks like RDF Patch text, not Jelly-Patch (`jelly patch validate` checks text patches)"
        )));
    }
    let compression = input.compression;
    let raw_bytes = input.bytes_read.clone();
    let mut progress = Progress::new(quiet, input.bytes_read.clone());
    let mut frames_detail = 0u64;
    let mut prev = PatchStats::default();
    let mut open_rows = 0u64;
    let r = read_binary(
        input.reader,
        &name,
        FrameRange::ALL,
        &mut progress,
        true,
        |_, op| {
            match op {
                Op::Row { .. } => open_rows += 1,
                Op::Punctuation => open_rows = 0,
                Op::FrameEnd { .. } | Op::FrameSkipped { .. } => {}
            }
            if let Op::FrameEnd {
                index,
                bytes,
                stats,
                ..
            } = op
                && let Some(w) = detail.as_deref_mut()
            {
                let d = minus(stats, &prev);
                let ops = operations(&d);
                let entry = map(vec![
                    ("index", index.into()),
                    ("bytes", bytes.into()),
                    ("operations", ops.into()),
                    ("rows", rows_value(&d)),
                ]);
                w.write_all(top_list_item(&entry, frames_detail == 0, args.json).as_bytes())
                    .map_err(|e| CliError::io(SPOOL_NAME, &e))?;
                frames_detail += 1;
                prev = stats.clone();
            }
            Ok(())
        },
    );
    progress.finish();
    let summary = r?;
    let Some(options) = summary.options else {
        return Err(CliError::invalid(format!(
            "{name}: the stream has no options row"
        )));
    };
    let s = &summary.stats;
    let ops = operations(s);
    // Rows after a PUNCTUATED stream's last punctuation are a patch not ended
    // (counted, and flagged below).
    let unterminated = options.stream_type == PatchStreamType::Punctuated && open_rows > 0;
    let patches = match options.stream_type {
        PatchStreamType::Frame => summary.frames,
        PatchStreamType::Punctuated => s.punctuations + u64::from(unterminated),
        _ => 1,
    };
    let mut fields = vec![
        ("options", options_value(&options)),
        (
            "delimited",
            (summary.delimiting != Delimiting::Single).into(),
        ),
        ("frames", summary.frames.into()),
        ("patches", patches.into()),
        ("last_patch_unterminated", unterminated.into()),
        ("operations", ops.into()),
        ("statements", (s.adds + s.deletes).into()),
        ("rows", rows_value(s)),
        (
            "transactions",
            map(vec![
                ("started", s.transactions.into()),
                ("committed", s.commits.into()),
                ("aborted", s.aborts.into()),
            ]),
        ),
        ("bytes", summary.bytes.into()),
    ];
    if compression != Compression::None {
        fields.push(("compressed_bytes", raw_bytes.get().into()));
    }
    fields.push(("bytes_per_operation", ratio(summary.bytes, ops)));
    fields.push((
        "bytes_per_statement",
        ratio(summary.bytes, s.adds + s.deletes),
    ));
    if detail.is_some() {
        fields.push(("frames_detail", Value::List(Vec::new())));
    }
    Ok(Inspected {
        report: map(fields),
        frames_detail,
    })
}

/// Runs the command.
pub fn run(args: &PatchInspectArgs, quiet: bool) -> CliResult {
    let mut spool = if args.per_frame {
        Some(Spool::create()?)
    } else {
        None
    };
    let found = inspect(args, quiet, spool.as_mut().map(Spool::writer))?;
    let (head, tail) = around_top_list(&found.report, found.frames_detail, args.json);
    write_report(args.to.as_deref(), &head, spool.as_mut(), &tail)
}
