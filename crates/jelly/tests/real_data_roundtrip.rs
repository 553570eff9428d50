//! Real-data round trips: N-Triples / N-Quads files from `shared/datasets`, parsed with
//! `jelly::nquads`, encoded with the SMALL and BIG presets, decoded, and compared
//! statement by statement. Skipped (with a message) when the datasets are absent.

use std::path::PathBuf;

use jelly::iso::normalize_term;
use jelly::{
    FramePolicy, JellyReader, JellyWriterBuilder, PhysicalType, Statement, StreamOptions, Term,
};

fn datasets() -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/datasets");
    if p.is_dir() {
        Some(p)
    } else {
        eprintln!("skipping: {} not found", p.display());
        None
    }
}

fn has_quoted(s: &Statement) -> bool {
    [&s.subject, &s.predicate, &s.object]
        .into_iter()
        .chain(&s.graph)
        .any(|t| matches!(t, Term::Triple(_)))
}

/// Parses `rel` (must parse without error), then round-trips it with both presets.
/// Returns the number of statements.
fn round_trip_file(rel: &str) -> usize {
    let Some(dir) = datasets() else { return 0 };
    let path = dir.join(rel);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let input = jelly::nquads::parse_document(&text)
        .unwrap_or_else(|e| panic!("jelly::nquads rejects {rel}: {e}"));
    let lines = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .count();
    assert_eq!(input.len(), lines, "{rel}: one statement per line");
    let quads = input.iter().any(|s| s.graph.is_some());
    let star = input.iter().any(has_quoted);
    let physical = if quads {
        PhysicalType::Quads
    } else {
        PhysicalType::Triples
    };
    let expected: Vec<Statement> = input
        .iter()
        .cloned()
        .map(|mut s| {
            for t in [&mut s.subject, &mut s.predicate, &mut s.object] {
                *t = normalize_term(t);
            }
            if quads {
                s.graph = Some(s.graph.unwrap_or(Term::DefaultGraph));
            }
            s
        })
        .collect();
    for (preset, opts) in [
        ("SMALL", StreamOptions::small()),
        ("BIG", StreamOptions::big()),
    ] {
        for policy in [FramePolicy::Rows(256), FramePolicy::Rows(7)] {
            let opts = opts
                .clone()
                .with_physical_type(physical)
                .with_rdf_star(star);
            let mut out = Vec::new();
            let mut w = JellyWriterBuilder::new(opts)
                .frame_policy(policy)
                .build(&mut out)
                .unwrap();
            for s in &input {
                w.add(s.as_ref())
                    .unwrap_or_else(|e| panic!("{rel} {preset}: encoder refused {s}: {e}"));
            }
            w.finish().unwrap();
            let got: Vec<Statement> = JellyReader::new(&out[..])
                .read_all_frames()
                .unwrap_or_else(|e| panic!("{rel} {preset}: {e}"))
                .into_iter()
                .flatten()
                .collect();
            assert_eq!(got.len(), expected.len(), "{rel} {preset} {policy:?}");
            for (k, (g, e)) in got.iter().zip(&expected).enumerate() {
                assert_eq!(g, e, "{rel} {preset} {policy:?}: statement {k}");
            }
        }
    }
    input.len()
}

#[test]
fn iot_sosa_ssn_examples() {
    let n = round_trip_file("iot-sosa-ssn-examples/iot-sosa-ssn-examples.nt");
    assert!(n == 0 || n == 4106, "{n}");
}

#[test]
fn nanopubs_gdpr_fines() {
    let n = round_trip_file("nanopubs-gdpr-fines/nanopubs-gdpr-fines.nq");
    assert!(n == 0 || n == 4504, "{n}");
}

#[test]
fn rdf_star_cg_tests() {
    let n = round_trip_file("rdf-star-cg-tests/rdf-star-cg-positive.nq");
    assert!(n == 0 || n == 174, "{n}");
}

#[test]
fn w3c_rdf11_tests() {
    let n = round_trip_file("w3c-rdf-tests/rdf11-positive.nq");
    assert!(n == 0 || n == 1485, "{n}");
}

#[test]
fn w3c_rdf12_tests() {
    let n = round_trip_file("w3c-rdf-tests/rdf12-positive.nq");
    assert!(n == 0 || n == 511, "{n}");
}
