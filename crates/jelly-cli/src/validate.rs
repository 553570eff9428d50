//! `jelly rdf validate`: decode a stream fully with the spec checks on, and optionally
//! compare it with RDF data and with expected stream options.

use std::io::Read;

use jelly::iso::{IsoResult, OrderedIso, isomorphic_sides};
use jelly::{
    DecodeError, DecodeErrorKind, DecoderOptions, Delimiting, Event, JellyReader, Statement,
    StreamOptions,
};

use crate::cli::{DelimitedArg, ValidateArgs};
use crate::common::FrameRange;
use crate::conformance::read_raw_options;
use crate::error::{CliError, CliResult, decode_error, not_jelly_hint};
use crate::held::HeldLimit;
use crate::io::{Progress, open_input};
use crate::rdf_read::StatementReader;

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
    // The input opened and the expectations read (or, for an ordered comparison,
    // opened) before the work, so that usage errors (a missing file) come first; the
    // input first of all, as reading a large RDF file to compare with takes a while.
    let input = crate::jelly_text::open_jelly_input(in_path, quiet)?;
    let expected_options = match &args.options_file {
        Some(p) => Some(read_options_file(p)?),
        None => None,
    };
    let limit = HeldLimit::new(args.max_statements);
    // Ordered: the RDF file is read as the stream is, statement by statement, in
    // bounded memory. Unordered: both sides are held, within --max-statements.
    let mut expected = match &args.compare_to_rdf_file {
        Some(p) => {
            let reader = StatementReader::open(p, args.compare_to_format)?;
            Some(if args.compare_ordered {
                Expected::Ordered(Box::new(OrderedComparison::new(reader)))
            } else {
                Expected::Held(reader.read_all(limit, HELD_WHY)?)
            })
        }
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
            let at = || format!("{name}:frame {i}");
            while let Some(ev) = frame.next_event().map_err(|e| located(&e))? {
                let (statement, namespace) = match ev {
                    Event::Statement(s) => {
                        statements += 1;
                        progress.statement();
                        if keep {
                            match &mut expected {
                                Some(Expected::Ordered(c)) => c.next(s.to_owned())?,
                                _ => {
                                    let held = got.len() as u64 + 1;
                                    limit.check(held, &at(), HELD_WHY)?;
                                    got.try_reserve(1).map_err(|_| {
                                        limit.out_of_memory(held - 1, &at(), HELD_WHY)
                                    })?;
                                    got.push(s.to_owned());
                                }
                            }
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
        return Err(crate::error::no_options_row(&name, frames));
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
    match expected {
        None => {}
        Some(Expected::Ordered(c)) => c.finish().map_err(|e| match e {
            Mismatch::Differs(e) => {
                CliError::invalid(format!("{name}: differs from the RDF file: {e}"))
            }
            Mismatch::Unreadable(e) => e,
        })?,
        Some(Expected::Held(want)) => compare_unordered(&name, got, want, limit)?,
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

/// Why the unordered comparison holds statements (for the error past the limit).
const HELD_WHY: &str = "an unordered comparison holds both sides; --compare-ordered true \
                        compares statement by statement without holding them";

/// The RDF file to compare with, as the comparison needs it.
enum Expected {
    /// Read as the stream is, for an ordered comparison.
    Ordered(Box<OrderedComparison>),
    /// Held whole, for an unordered one (datasets compared as sets, up to isomorphism).
    Held(Vec<Statement>),
}

/// Why an ordered comparison failed.
enum Mismatch {
    /// The two sides differ (the message says where).
    Differs(String),
    /// The RDF file could not be read.
    Unreadable(CliError),
}

/// An ordered comparison ("ordered RDF dataset isomorphism", as the conformance suite
/// compares): each statement of the stream against the RDF file's statement at the
/// same place, read then. Only the blank node mapping is held.
struct OrderedComparison {
    want: StatementReader,
    iso: OrderedIso,
    /// Statements of the stream so far.
    got: u64,
    /// Statements of the RDF file read so far.
    want_count: u64,
    /// The RDF file ended before the stream: `got` goes on counting.
    want_ended: bool,
    /// The first difference found; nothing is compared after it.
    differs: Option<String>,
}

impl OrderedComparison {
    fn new(want: StatementReader) -> Self {
        OrderedComparison {
            want,
            iso: OrderedIso::default(),
            got: 0,
            want_count: 0,
            want_ended: false,
            differs: None,
        }
    }

    /// The stream's next statement. A difference is kept for the end (the stream is
    /// still validated to its end, and an invalid stream is told first); an RDF file
    /// that cannot be read is an error at once.
    fn next(&mut self, got: Statement) -> CliResult {
        let index = self.got;
        self.got += 1;
        if self.differs.is_some() || self.want_ended {
            return Ok(());
        }
        match self.want.next_statement()? {
            Some(want) => {
                self.want_count += 1;
                if let Err(e) = self.iso.compare_statement(index, &got, &want) {
                    self.differs = Some(e);
                }
            }
            None => self.want_ended = true,
        }
        Ok(())
    }

    /// The outcome once the stream has ended: the first difference, or different
    /// counts (the rest of the RDF file is read to count it).
    fn finish(mut self) -> Result<(), Mismatch> {
        if let Some(e) = self.differs {
            return Err(Mismatch::Differs(e));
        }
        if !self.want_ended {
            while self
                .want
                .next_statement()
                .map_err(Mismatch::Unreadable)?
                .is_some()
            {
                self.want_count += 1;
            }
        }
        if self.want_count != self.got {
            return Err(Mismatch::Differs(format!(
                "{} statements, {} expected",
                self.got, self.want_count
            )));
        }
        Ok(())
    }
}

/// The unordered comparison: the same statements (with the same labels), else an
/// isomorphism search. The fast path normalizes both sides in place and compares sets
/// of references to them: `jelly::iso::normalize` copies every statement into a set,
/// the largest allocation of this verb (a 470 MB table for a million statements, which
/// aborted the process where memory was short); this one is fallible and a twentieth
/// of that.
fn compare_unordered(
    name: &str,
    mut got: Vec<Statement>,
    mut want: Vec<Statement>,
    limit: HeldLimit,
) -> CliResult {
    for st in got.iter_mut().chain(want.iter_mut()) {
        *st = jelly::iso::normalize_statement(st);
    }
    let held = (got.len() + want.len()) as u64;
    let set = |v| statement_set(v).map_err(|_| limit.out_of_memory(held, name, HELD_WHY));
    if set(&got)? == set(&want)? {
        // Same statements with the same blank node labels: isomorphic without a search.
        return Ok(());
    }
    match isomorphic_sides(&got, &want, ["the stream", "the RDF file"]) {
        IsoResult::Isomorphic => Ok(()),
        IsoResult::Different(why) => Err(CliError::invalid(format!(
            "{name}: differs from the RDF file: {why}"
        ))),
        IsoResult::TooHard => Err(CliError::invalid(format!(
            "{name}: could not decide whether it matches the RDF file (blank node search gave up)"
        ))),
    }
}

/// The set of the statements of `v`, or the error of an allocation that failed.
fn statement_set(
    v: &[Statement],
) -> Result<std::collections::HashSet<&Statement>, std::collections::TryReserveError> {
    let mut set = std::collections::HashSet::new();
    set.try_reserve(v.len())?;
    set.extend(v);
    Ok(set)
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
