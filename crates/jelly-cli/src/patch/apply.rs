//! `jelly patch apply`: a dataset in memory, patches applied in order, the result out.

use jelly::Statement;
use jelly::rdf_patch::{PatchRowRef, RdfPatchValidator};

use super::args::{PatchApplyArgs, PatchFormat};
use super::common::{Dataset, Loc, Op, detect, normalize, read_binary, read_text};
use super::rdf::{load_rdf, set_prefix, write_rdf};
use crate::common::FrameRange;
use crate::error::{CliError, CliResult};
use crate::format::Format;
use crate::held::HeldLimit;
use crate::io::{Progress, display_name, open_input, open_output};

/// How to undo one change of an open transaction.
enum Undo {
    Added(Statement),
    Removed(Statement, u64),
    Prefix(String, Option<String>),
}

/// Why apply holds statements (for the error past the limit).
const HELD_WHY: &str = "apply holds the dataset";

/// The dataset being patched.
struct State {
    data: Dataset,
    prefixes: Vec<(String, String)>,
    strict: bool,
    /// Bounds the dataset and the undo log together.
    limit: HeldLimit,
    in_tx: bool,
    undo: Vec<Undo>,
    added: u64,
    deleted: u64,
    no_ops: u64,
    aborted: u64,
}

impl State {
    fn prefix(&mut self, name: &str, iri: Option<&str>) {
        let old = self
            .prefixes
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone());
        match iri {
            Some(iri) => set_prefix(&mut self.prefixes, name, iri),
            None => self.prefixes.retain(|(k, _)| k != name),
        }
        if self.in_tx {
            self.undo.push(Undo::Prefix(name.to_string(), old));
        }
    }

    fn row(&mut self, r: PatchRowRef<'_>, at: &dyn Fn() -> String) -> CliResult {
        match r {
            PatchRowRef::TxStart => {
                self.in_tx = true;
                self.undo.clear();
            }
            PatchRowRef::TxCommit => {
                self.in_tx = false;
                self.undo.clear();
            }
            PatchRowRef::TxAbort => {
                self.in_tx = false;
                self.aborted += 1;
                while let Some(u) = self.undo.pop() {
                    match u {
                        Undo::Added(st) => {
                            self.data.remove(&st);
                            self.added -= 1;
                        }
                        Undo::Removed(st, seq) => {
                            self.data.insert_at(st, seq);
                            self.deleted -= 1;
                        }
                        Undo::Prefix(name, None) => self.prefixes.retain(|(k, _)| *k != name),
                        Undo::Prefix(name, Some(iri)) => {
                            set_prefix(&mut self.prefixes, &name, &iri)
                        }
                    }
                }
            }
            PatchRowRef::Add(s) => {
                let st = normalize(s.to_owned());
                if self.data.contains(&st) {
                    if self.strict {
                        return Err(CliError::invalid(format!(
                            "{}: A adds a statement already in the dataset: {st}",
                            at()
                        )));
                    }
                    self.no_ops += 1;
                } else {
                    // An added statement is held once, and once more while its
                    // transaction is open (to undo it).
                    let held = (self.data.len() + self.undo.len()) as u64;
                    let more = if self.in_tx { 2 } else { 1 };
                    self.limit.check(held + more, &at(), HELD_WHY)?;
                    let room = self.data.try_reserve(1).is_ok()
                        && (!self.in_tx || self.undo.try_reserve(1).is_ok());
                    if !room {
                        return Err(self.limit.out_of_memory(held, &at(), HELD_WHY));
                    }
                    if self.in_tx {
                        self.undo.push(Undo::Added(st.clone()));
                    }
                    self.data.insert(st);
                    self.added += 1;
                }
            }
            PatchRowRef::Delete(s) => {
                let st = normalize(s.to_owned());
                match self.data.remove(&st) {
                    Some(seq) => {
                        if self.in_tx {
                            // Moved from the dataset to the undo log: held as before.
                            if self.undo.try_reserve(1).is_err() {
                                let held = (self.data.len() + self.undo.len()) as u64;
                                return Err(self.limit.out_of_memory(held, &at(), HELD_WHY));
                            }
                            self.undo.push(Undo::Removed(st, seq));
                        }
                        self.deleted += 1;
                    }
                    None if self.strict => {
                        return Err(CliError::invalid(format!(
                            "{}: D deletes a statement that is not in the dataset: {st}",
                            at()
                        )));
                    }
                    None => self.no_ops += 1,
                }
            }
            PatchRowRef::PrefixAdd { prefix, iri, .. } => self.prefix(prefix, Some(iri)),
            PatchRowRef::PrefixDelete { prefix, .. } => self.prefix(prefix, None),
            PatchRowRef::Header { .. } | PatchRowRef::Segment => {}
        }
        Ok(())
    }
}

/// Runs the command.
pub fn run(args: &PatchApplyArgs, quiet: bool) -> CliResult {
    let stdin_uses = std::iter::once(&args.base)
        .chain(&args.patches)
        .filter(|p| *p == "-")
        .count();
    if stdin_uses > 1 {
        return Err(CliError::usage("stdin (`-`) can be read only once"));
    }
    let out_name = display_name(args.to.as_deref().unwrap_or("-"), false);
    let format = args
        .out_format
        .or_else(|| args.to.as_deref().and_then(Format::from_path))
        .unwrap_or(Format::Nq);
    if format == Format::N3 {
        return Err(CliError::usage(
            "N3 is an input format only; use ttl, trig, nt or nq",
        ));
    }
    let limit = HeldLimit::new(args.max_statements);
    let base = load_rdf(&args.base, args.in_format, quiet, limit, HELD_WHY)?;
    let mut state = State {
        data: base.data,
        prefixes: base.prefixes,
        strict: args.strict,
        limit,
        in_tx: false,
        undo: Vec::new(),
        added: 0,
        deleted: 0,
        no_ops: 0,
        aborted: 0,
    };
    for path in &args.patches {
        let mut input = open_input(path)?;
        let name = input.name.clone();
        let kind = detect(&mut input, path, None)?;
        let mut progress = Progress::new(quiet, input.bytes_read.clone());
        let r = match kind {
            PatchFormat::Rdfp => {
                let mut v = RdfPatchValidator::new().allow_late_headers(true);
                let mut last_line = 0usize;
                read_text(input.reader, &name, true, &mut progress, |loc, op| {
                    let Op::Row { row: r, .. } = op else {
                        return Ok(());
                    };
                    if let Loc::Line(l) = loc {
                        last_line = l;
                        if let Some(p) = v.check(l, r) {
                            return Err(CliError::invalid(format!(
                                "{name}:{}: {}",
                                p.line, p.kind
                            )));
                        }
                    }
                    state.row(r, &|| loc.at(&name))
                })
                .and_then(|()| match v.finish() {
                    Some(p) => Err(CliError::invalid(format!(
                        "{name}:{}: {} (the patch ends at line {last_line})",
                        p.line, p.kind
                    ))),
                    None => Ok(()),
                })
            }
            PatchFormat::Jellyp => read_binary(
                input.reader,
                &name,
                FrameRange::ALL,
                &mut progress,
                false,
                |loc, op| match op {
                    Op::Row { row: r, .. } => state.row(r, &|| loc.at(&name)),
                    _ => Ok(()),
                },
            )
            .map(|_| ()),
        };
        progress.finish();
        r?;
    }
    let out = open_output(args.to.as_deref())?;
    let n = state.data.len();
    write_rdf(
        state.data.ordered(),
        &state.prefixes,
        format,
        out,
        &out_name,
    )?;
    if !quiet {
        let mut extra = String::new();
        if state.aborted > 0 {
            extra.push_str(&format!(", {} aborted transactions", state.aborted));
        }
        if state.no_ops > 0 {
            let rows = if state.no_ops == 1 { "row" } else { "rows" };
            extra.push_str(&format!(", {} {rows} changed nothing", state.no_ops));
        }
        eprintln!(
            "{out_name}: {n} statements ({} added, {} deleted{extra})",
            state.added, state.deleted
        );
    }
    Ok(())
}
