//! `jelly patch validate`: a Jelly-Patch stream decoded with every rule checked, or
//! RDF Patch text parsed strictly and its structure checked.

use jelly::rdf_patch::{RdfPatchParser, RdfPatchValidator};

use super::args::{PatchFormat, PatchValidateArgs};
use super::common::{detect, read_binary, text_err};
use crate::common::FrameRange;
use crate::error::{CliError, CliResult};
use crate::io::{Progress, open_input};

/// At most this many structure problems of a text patch are listed.
const MAX_LISTED: usize = 20;

/// Runs the command.
pub fn run(args: &PatchValidateArgs, quiet: bool) -> CliResult {
    let in_path = args.input.as_deref().unwrap_or("-");
    let mut input = open_input(in_path)?;
    let name = input.name.clone();
    let kind = detect(&mut input, in_path, args.in_format)?;
    let mut progress = Progress::new(quiet, input.bytes_read.clone());
    match kind {
        PatchFormat::Jellyp => {
            let mut ops = 0u64;
            // A PUNCTUATED stream's last patch without its punctuation (cut short) is
            // refused by read_binary.
            let r = read_binary(
                input.reader,
                &name,
                FrameRange::ALL,
                &mut progress,
                false,
                |_, op| {
                    match op {
                        super::common::Op::Row { .. } => ops += 1,
                        super::common::Op::Punctuation
                        | super::common::Op::FrameEnd { .. }
                        | super::common::Op::FrameSkipped { .. } => {}
                    }
                    Ok(())
                },
            );
            progress.finish();
            let s = r?;
            if !quiet {
                eprintln!(
                    "{name}: valid Jelly-Patch ({} frames, {ops} rows, {} stream)",
                    s.frames,
                    s.options.map(|o| o.stream_type.name()).unwrap_or("?")
                );
            }
            Ok(())
        }
        PatchFormat::Rdfp => {
            let mut parser = RdfPatchParser::new(input.reader);
            let mut v = RdfPatchValidator::new().allow_late_headers(args.allow_late_headers);
            let mut problems = Vec::new();
            let mut rows = 0u64;
            let mut failure = None;
            while let Some(r) = parser.next() {
                match r {
                    Ok(row) => {
                        rows += 1;
                        progress.statement();
                        problems.extend(v.check(parser.line(), &row));
                    }
                    Err(e) => {
                        failure = Some(text_err(&name, e));
                        break;
                    }
                }
            }
            progress.finish();
            if failure.is_none() {
                problems.extend(v.finish());
            }
            let n = problems.len();
            let mut listed: Vec<String> = problems
                .iter()
                .take(MAX_LISTED)
                .map(|p| format!("{name}:{}: {}", p.line, p.kind))
                .collect();
            if let Some(f) = failure {
                // Structure problems found before the syntax error come first.
                for l in &listed {
                    eprintln!("jelly: {l}");
                }
                return Err(f);
            }
            match n {
                0 => {
                    if !quiet {
                        eprintln!("{name}: valid RDF Patch ({rows} rows)");
                    }
                    Ok(())
                }
                1 => Err(CliError::invalid(listed.remove(0))),
                _ => {
                    for l in &listed {
                        eprintln!("jelly: {l}");
                    }
                    let more = if n > MAX_LISTED {
                        format!(" ({} not listed)", n - MAX_LISTED)
                    } else {
                        String::new()
                    };
                    Err(CliError::invalid(format!(
                        "{name}: invalid RDF Patch: {n} problems{more}"
                    )))
                }
            }
        }
    }
}
