//! `jelly patch inspect`: options, frames, patches, rows by kind and transactions of a
//! Jelly-Patch stream, in bounded memory.

use jelly::Delimiting;
use jelly::patch::{PatchOptions, PatchStats, PatchStreamType};

use super::args::{PatchFormat, PatchInspectArgs};
use super::common::{Op, detect, read_binary};
use crate::common::FrameRange;
use crate::error::{CliError, CliResult};
use crate::io::{Compression, Progress, display_name, open_input, open_output};
use crate::report::{Value, map, to_json, to_yaml};

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

/// Builds the report of a stream.
pub fn inspect(args: &PatchInspectArgs, quiet: bool) -> CliResult<Value> {
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
    let mut per_frame = Vec::new();
    let mut prev = PatchStats::default();
    let want_frames = args.per_frame;
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
                && want_frames
            {
                let d = minus(stats, &prev);
                let ops = operations(&d);
                per_frame.push(map(vec![
                    ("index", index.into()),
                    ("bytes", bytes.into()),
                    ("operations", ops.into()),
                    ("rows", rows_value(&d)),
                ]));
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
    if want_frames {
        fields.push(("frames_detail", Value::List(per_frame)));
    }
    Ok(map(fields))
}

/// Runs the command.
pub fn run(args: &PatchInspectArgs, quiet: bool) -> CliResult {
    let v = inspect(args, quiet)?;
    let text = if args.json { to_json(&v) } else { to_yaml(&v) };
    let out_name = display_name(args.to.as_deref().unwrap_or("-"), false);
    let mut out = open_output(args.to.as_deref())?;
    use std::io::Write;
    out.write_all(text.as_bytes())
        .map_err(|e| CliError::io(&out_name, &e))?;
    out.finish().map_err(|e| CliError::io(&out_name, &e))
}
