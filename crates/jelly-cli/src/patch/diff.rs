//! `jelly patch diff`: the patch from one RDF file to another, as one transaction.

use jelly::patch::{PatchOptions, PatchStatementType, PatchStreamType};
use jelly::rdf_patch::{PatchRowRef, RdfPatchWriter};

use super::args::{PatchDiffArgs, PatchFormat};
use super::common::{FrameSize, PatchOut, format_from_path, text_write_err};
use super::rdf::load_rdf;
use crate::error::{CliError, CliResult};
use crate::held::HeldLimit;
use crate::io::{display_name, open_output};

/// Runs the command.
pub fn run(args: &PatchDiffArgs, quiet: bool) -> CliResult {
    if args.old == "-" && args.new == "-" {
        return Err(CliError::usage("stdin (`-`) can be read only once"));
    }
    let out_format = args
        .format
        .or_else(|| args.to.as_deref().and_then(format_from_path))
        .unwrap_or(PatchFormat::Rdfp);
    let limit = HeldLimit::new(args.max_statements);
    let why = "diff holds both files";
    let old = load_rdf(&args.old, args.in_format, quiet, limit, why)?;
    let new = load_rdf(&args.new, args.in_format, quiet, limit, why)?;

    let mut rows: Vec<PatchRowRef<'_>> = Vec::new();
    rows.push(PatchRowRef::TxStart);
    for (name, iri) in &old.prefixes {
        if !new.prefixes.iter().any(|(n, _)| n == name) {
            rows.push(PatchRowRef::PrefixDelete {
                prefix: name,
                graph: None,
            });
        }
        let _ = iri;
    }
    for (name, iri) in &new.prefixes {
        if !old.prefixes.iter().any(|(n, i)| n == name && i == iri) {
            rows.push(PatchRowRef::PrefixAdd {
                prefix: name,
                iri,
                graph: None,
            });
        }
    }
    let mut deletes = 0u64;
    for st in old.data.ordered() {
        if !new.data.contains(st) {
            rows.push(PatchRowRef::Delete(st.as_ref()));
            deletes += 1;
        }
    }
    let mut adds = 0u64;
    for st in new.data.ordered() {
        if !old.data.contains(st) {
            rows.push(PatchRowRef::Add(st.as_ref()));
            adds += 1;
        }
    }
    rows.push(PatchRowRef::TxCommit);

    let out_name = display_name(args.to.as_deref().unwrap_or("-"), false);
    let out = open_output(args.to.as_deref())?;
    let at = |i: usize| format!("{out_name}: row {}", i + 1);
    let out = match out_format {
        PatchFormat::Rdfp => {
            let mut w = RdfPatchWriter::new(out);
            for (i, r) in rows.iter().enumerate() {
                w.write(*r)
                    .map_err(|e| text_write_err(e, &|| at(i), &out_name))?;
            }
            w.finish().map_err(|e| CliError::io(&out_name, &e))?
        }
        PatchFormat::Jellyp => {
            let quads = old.data.has_named_graphs() || new.data.has_named_graphs();
            let st = if quads {
                PatchStatementType::Quads
            } else {
                PatchStatementType::Triples
            };
            let mut o = PatchOptions::big(st, PatchStreamType::Flat);
            o.rdf_star = old.data.has_triple_terms() || new.data.has_triple_terms();
            o.generalized_statements = old.data.has_generalized() || new.data.has_generalized();
            let mut w = PatchOut::new(out, &out_name, o, FrameSize::from_flags(None, None), true)?;
            for (i, r) in rows.iter().enumerate() {
                w.row(*r, None, &|| at(i))?;
            }
            w.finish(&|| format!("{out_name}: end"), quiet)?
        }
    };
    out.finish().map_err(|e| CliError::io(&out_name, &e))?;
    if !quiet {
        eprintln!(
            "{}: {deletes} deleted, {adds} added ({} → {} statements)",
            out_name,
            old.data.len(),
            new.data.len()
        );
    }
    Ok(())
}
