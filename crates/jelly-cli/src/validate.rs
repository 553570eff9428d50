//! `jelly rdf validate`: decode a stream fully with the spec checks on, and optionally
//! compare it with RDF data and with expected stream options.

use std::io::Read;

use jelly::iso::{IsoResult, isomorphic};
use jelly::{
    DecodeError, DecodeErrorKind, DecoderOptions, Delimiting, Event, JellyReader, Statement,
    StreamOptions,
};

use crate::cli::{DelimitedArg, ValidateArgs};
use crate::common::FrameRange;
use crate::conformance::read_raw_options;
use crate::error::{CliError, CliResult, decode_error, not_jelly_hint};
use crate::io::{Progress, open_input};
use crate::rdf_read::read_rdf_file;

/// Runs the command.
pub fn run(args: &ValidateArgs, quiet: bool) -> CliResult {
    let in_path = args.input.as_deref().unwrap_or("-");
    let stdin_readers = [
        Some(in_path),
        args.compare_to_rdf_file.as_deref(),
        args.options_file.as_deref(),
    ]
    .into_iter()
    .filter(|p| *p == Some("-"))
    .count();
    if stdin_readers > 1 {
        return Err(CliError::usage("stdin (`-`) can be read only once"));
    }
    let range = match &args.compare_frame_indices {
        Some(r) => FrameRange::parse(r)?,
        None => FrameRange::ALL,
    };
    // The input opened and the expectations read before the work, so that usage
    // errors (a missing file) come first; the input first of all, as reading a large
    // RDF file to compare with takes a while.
    let input = open_input(in_path)?;
    let expected_options = match &args.options_file {
        Some(p) => Some(read_options_file(p)?),
        None => None,
    };
    let expected = match &args.compare_to_rdf_file {
        Some(p) => Some(read_rdf_file(p, args.compare_to_format)?),
        None => None,
    };
    let name = input.name.clone();
    let delimiting = match args.delimited {
        DelimitedArg::Either => Delimiting::Auto,
        DelimitedArg::True => Delimiting::Delimited,
        DelimitedArg::False => Delimiting::Single,
    };
    let cfg = DecoderOptions {
        check_features: true,
        ..crate::limits::decoder_options()
    };
    let mut progress = Progress::new(quiet, input.bytes_read.clone());
    let mut reader = JellyReader::with_options(input.reader, cfg, delimiting);
    // A required framing that the input does not have fails in its first frame, in
    // wire terms: say what was required.
    let framing_hint = |mut e: CliError, frame: u64| {
        if frame == 0 {
            match args.delimited {
                DelimitedArg::True => e
                    .message
                    .push_str(" (read as delimited, as --delimited true requires: is it?)"),
                DelimitedArg::False => e.message.push_str(
                    " (read as one non-delimited frame, as --delimited false requires: is it?)",
                ),
                DelimitedArg::Either => {}
            }
        }
        e
    };
    let located = |e: &DecodeError| {
        framing_hint(
            not_jelly_hint(decode_error(&name, e), in_path, e.frame),
            e.frame,
        )
    };
    let mut got: Vec<Statement> = Vec::new();
    let mut statements = 0u64;
    let mut frames = 0u64;
    let result = (|| -> CliResult {
        while let Some(mut frame) = reader.next_frame().map_err(|e| located(&e))? {
            let i = frame.index();
            frames += 1;
            let keep = expected.is_some() && range.contains(i);
            while let Some(ev) = frame.next_event().map_err(|e| located(&e))? {
                let (statement, namespace) = match ev {
                    Event::Statement(s) => {
                        statements += 1;
                        progress.statement();
                        if keep {
                            got.push(s.to_owned());
                        }
                        (true, false)
                    }
                    Event::Namespace { .. } => (false, true),
                    _ => (false, false),
                };
                // Asked of the decoder once the event is done with (it borrows the frame).
                if statement
                    && let Some(why) = crate::rdf_check::last_statement_problem(frame.decoder())
                {
                    let kind = DecodeErrorKind::NotRdf(why);
                    return Err(located(&frame.row_error(kind)));
                }
                // Namespace declarations came with version 2 (the decoder accepts them
                // in any version, for streams that only mislabel their version).
                if namespace {
                    let version = frame.decoder().options().map_or(0, |o| o.version);
                    if version < 2 {
                        let kind = DecodeErrorKind::NamespaceBeforeVersion2(version);
                        return Err(located(&frame.row_error(kind)));
                    }
                }
            }
            // Metadata keys are proto `string`s, so UTF-8 (values are any bytes). Read
            // after the rows, so that damage earlier in the frame is reported first.
            frame.metadata().map_err(|e| located(&e))?;
        }
        Ok(())
    })();
    progress.finish();
    result?;
    if frames == 0 {
        return Err(CliError::invalid(format!(
            "{name}: the stream has no frames (empty input)"
        )));
    }
    let Some(options) = reader.decoder().options().cloned() else {
        return Err(CliError::invalid(format!(
            "{name}: the stream has no options row"
        )));
    };
    if let Some(want) = expected_options {
        let diffs = option_differences(&options, &want);
        if !diffs.is_empty() {
            return Err(CliError::invalid(format!(
                "{name}: stream options differ from the options file: {}",
                diffs.join(", ")
            )));
        }
    }
    if let Some(want) = expected {
        if args.compare_ordered {
            jelly::iso::OrderedIso::default()
                .compare(&got, &want)
                .map_err(|e| {
                    CliError::invalid(format!("{name}: differs from the RDF file: {e}"))
                })?;
        } else if jelly::iso::normalize(&got) == jelly::iso::normalize(&want) {
            // Same statements with the same blank node labels: isomorphic without a search.
        } else {
            match isomorphic(&got, &want) {
                IsoResult::Isomorphic => {}
                IsoResult::Different(why) => {
                    return Err(CliError::invalid(format!(
                        "{name}: differs from the RDF file: {why}"
                    )));
                }
                IsoResult::TooHard => {
                    return Err(CliError::invalid(format!(
                        "{name}: could not decide whether it matches the RDF file (blank node search gave up)"
                    )));
                }
            }
        }
    }
    if !quiet {
        // Valid (the spec lets readers take or refuse it), but worth knowing: Jelly-JVM
        // and pyjelly refuse these combinations.
        if !options.logical_type.fits(options.physical_type) {
            eprintln!(
                "{name}: note: logical type {} with physical type {} is a combination the \
                 spec does not recommend; Jelly-JVM and pyjelly refuse it",
                options.logical_type.name(),
                options.physical_type.name()
            );
        }
        eprintln!("{name}: valid ({frames} frames, {statements} statements)");
    }
    Ok(())
}

fn read_options_file(path: &str) -> CliResult<StreamOptions> {
    let input = open_input(path)?;
    let name = input.name.clone();
    let mut bytes = Vec::new();
    input
        .reader
        .take(16 << 20)
        .read_to_end(&mut bytes)
        .map_err(|e| CliError::io(&name, &e))?;
    read_raw_options(&bytes).map_err(|e| CliError::usage(format!("{name}: {e}")))
}

/// The fields in which `got` differs from `want`, each as `FIELD is GOT, expected WANT`.
pub(crate) fn option_differences(got: &StreamOptions, want: &StreamOptions) -> Vec<String> {
    let mut d = Vec::new();
    macro_rules! cmp {
        ($f:ident) => {
            if got.$f != want.$f {
                d.push(format!(
                    "{} is {:?}, expected {:?}",
                    stringify!($f),
                    got.$f,
                    want.$f
                ));
            }
        };
        // Stream types by their names (their Debug form is a bare number for some).
        ($f:ident, name) => {
            if got.$f != want.$f {
                d.push(format!(
                    "{} is {}, expected {}",
                    stringify!($f),
                    got.$f.name(),
                    want.$f.name()
                ));
            }
        };
    }
    cmp!(stream_name);
    cmp!(physical_type, name);
    cmp!(logical_type, name);
    cmp!(generalized_statements);
    cmp!(rdf_star);
    cmp!(max_name_table_size);
    cmp!(max_prefix_table_size);
    cmp!(max_datatype_table_size);
    cmp!(version);
    d
}
