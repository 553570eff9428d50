//! `jelly patch to-jelly`: RDF Patch text in, Jelly-Patch out, row by row.

use jelly::rdf_patch::PatchRowRef;

use super::args::{PatchFormat, PatchPer, PatchToJellyArgs};
use super::common::{
    FrameSize, Loc, Op, PatchOut, detect, options_from_flags, read_binary, read_text,
};
use crate::common::FrameRange;
use crate::error::{CliError, CliResult};
use crate::io::{Progress, display_name, open_input, open_output};

/// Runs the command.
pub fn run(args: &PatchToJellyArgs, quiet: bool) -> CliResult {
    let inputs: Vec<String> = if args.inputs.is_empty() {
        vec!["-".to_string()]
    } else {
        args.inputs.clone()
    };
    if inputs.iter().filter(|i| *i == "-").count() > 1 {
        return Err(CliError::usage("stdin (`-`) can be read only once"));
    }
    let options = options_from_flags(&args.opts, true)?;
    if !quiet
        && let Some(note) = crate::limits::table_note(
            options.max_name_table_size,
            options.max_prefix_table_size,
            options.max_datatype_table_size,
        )
    {
        eprintln!("jelly: {note}");
    }
    let generalized = options.generalized_statements;
    let out_name = display_name(args.to.as_deref().unwrap_or("-"), false);
    let output = open_output(args.to.as_deref())?;
    let mut w = PatchOut::new(
        output,
        &out_name,
        options,
        FrameSize::from_flags(args.opts.rows_per_frame, args.opts.bytes_per_frame),
        args.opts.delimited.unwrap_or(true),
    )?;
    let per_tx = args.patch_per == PatchPer::Transaction;
    let mut last_name = out_name.clone();
    for path in &inputs {
        let mut input = open_input(path)?;
        let name = input.name.clone();
        last_name = name.clone();
        let kind = detect(&mut input, path, args.in_format)?;
        let mut progress = Progress::new(quiet, input.bytes_read.clone());
        let on_op = |loc: Loc, op: Op<'_>| -> CliResult {
            let at = || loc.at(&name);
            match op {
                Op::Row { row: r, pd_iri } => {
                    w.row(r, pd_iri, &at)?;
                    if per_tx && matches!(r, PatchRowRef::TxCommit | PatchRowRef::TxAbort) {
                        w.end_patch(&at)?;
                    }
                    Ok(())
                }
                // Patch boundaries of a binary input carry over.
                Op::Punctuation => w.end_patch(&at),
                // In a FRAME input each frame is a patch.
                Op::FrameEnd { patch_end, .. } if patch_end => w.end_patch(&at),
                Op::FrameEnd { .. } | Op::FrameSkipped { .. } => Ok(()),
            }
        };
        let r = match kind {
            PatchFormat::Rdfp => read_text(input.reader, &name, generalized, &mut progress, on_op),
            PatchFormat::Jellyp => read_binary(
                input.reader,
                &name,
                FrameRange::ALL,
                &mut progress,
                false,
                on_op,
            )
            .map(|_| ()),
        };
        progress.finish();
        r?;
        w.end_patch(&|| format!("{name}: end"))?;
    }
    let out = w.finish(&|| format!("{last_name}: end"), quiet)?;
    out.finish().map_err(|e| CliError::io(&out_name, &e))
}
