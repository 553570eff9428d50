//! Verbs that must work in bounded memory, measured on the real binary: peak resident
//! memory of one run against inputs whose held data would take hundreds of MB.
//!
//! These tests live in a binary of their own, and write their inputs through small
//! buffers: a child's peak memory as the kernel reports it includes the peak of the
//! test process that started it (see [`cli_support::jelly_peak_rss`]), so the test
//! process stays small, and each measure subtracts that floor.

mod cli_support;

use std::io::{BufWriter, Write};

use cli_support::*;
use jelly::patch::{PatchEncoder, PatchOptions, PatchStatementType, PatchStreamType};
use jelly::{StatementRef, TermRef};

/// What a run may take above the floor: a few MB of buffers and tables, far below
/// what holding the data took (reported in each test).
const BOUND_KIB: u64 = 48 * 1024;

/// Peak memory of `jelly args…` in KiB, less the floor every run of the binary shows
/// from this test process (measured just before, with `jelly --version`).
fn peak_above_floor(args: &[&str]) -> (Run, u64) {
    let (_, floor) = jelly_peak_rss(&["--version"], None);
    let (r, peak) = jelly_peak_rss(args, None);
    (r, peak.saturating_sub(floor))
}

/// `patch inspect --per-frame` writes each frame's entry to a spool file as the frame
/// is read; it held them all (about 1.5 KB a frame: 310 MB for these 200,000 frames,
/// 1.55 GB for a million), while `rdf inspect --per-frame` already spooled.
#[test]
fn patch_inspect_per_frame_in_bounded_memory() {
    const FRAMES: u64 = 200_000;
    let d = tmp("mem-patch-inspect");
    let bin = d.join("many.jellyp");
    {
        let opts = PatchOptions::small(PatchStatementType::Triples, PatchStreamType::Flat);
        let mut enc = PatchEncoder::new(opts).expect("encoder");
        let mut out = BufWriter::new(std::fs::File::create(&bin).unwrap());
        let mut frame = Vec::new();
        for i in 0..FRAMES {
            let subject = format!("http://ex.org/s{i}");
            let st = StatementRef::triple(
                TermRef::Iri(&subject),
                TermRef::Iri("http://ex.org/p"),
                TermRef::Iri("http://ex.org/o"),
            );
            enc.add(st).expect("add");
            frame.clear();
            enc.finish_frame_into(&mut frame, true);
            out.write_all(&frame).unwrap();
        }
        out.flush().unwrap();
    }
    for json in [false, true] {
        let mut args = vec!["-q", "patch", "inspect", s(&bin), "--per-frame"];
        if json {
            args.push("--json");
        }
        let (r, peak_kib) = peak_above_floor(&args);
        assert_eq!(r.code, 0, "{}", r.stderr);
        let out = r.out();
        let (index, sep) = if json {
            ("\"index\": ", ",")
        } else {
            ("- index: ", "\n")
        };
        assert_eq!(out.matches(index).count() as u64, FRAMES);
        assert!(out.contains(&format!("{index}{}{sep}", FRAMES - 1)));
        assert!(
            out.contains(&format!("frames: {FRAMES}"))
                || out.contains(&format!("\"frames\": {FRAMES},"))
        );
        assert!(
            peak_kib < BOUND_KIB,
            "json={json}: {peak_kib} KiB above the floor for {FRAMES} frames"
        );
    }
}

/// `rdf validate --compare-ordered true` reads the RDF file beside the stream, statement
/// by statement; it held both sides (660 MB for a million statements, 200 MB for
/// these 300,000).
#[test]
fn ordered_comparison_in_bounded_memory() {
    const N: usize = 300_000;
    let d = tmp("mem-validate-ordered");
    let src = d.join("many.nt");
    {
        let mut out = BufWriter::new(std::fs::File::create(&src).unwrap());
        for i in 0..N {
            let subject = if i % 10 == 0 {
                format!("_:b{i}")
            } else {
                format!("<http://ex.org/s{i}>")
            };
            writeln!(out, "{subject} <http://ex.org/p{}> \"v{i}\" .", i % 7).unwrap();
        }
        out.flush().unwrap();
    }
    let j = d.join("many.jelly");
    ok(&["rdf", "to-jelly", s(&src), "-o", s(&j)], None);
    // Against the text file, and against a Jelly file (read a frame at a time).
    for other in [&src, &j] {
        let (r, peak_kib) = peak_above_floor(&[
            "-q",
            "rdf",
            "validate",
            s(&j),
            "--compare-to-rdf-file",
            s(other),
            "--compare-ordered",
            "true",
        ]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert!(
            peak_kib < BOUND_KIB,
            "{}: {peak_kib} KiB above the floor for {N} statements",
            other.display()
        );
    }
}

/// `rdf validate` comparing as datasets holds both sides (by design, within
/// `--max-statements`), but compares them without copying them: it built a set of
/// normalized copies of each side first (480 MB for these 300,000 statements a side,
/// against about 210 MB without the copies).
#[test]
fn unordered_comparison_copies_no_statement() {
    const N: usize = 300_000;
    let d = tmp("mem-validate-unordered");
    let src = d.join("many.nt");
    {
        let mut out = BufWriter::new(std::fs::File::create(&src).unwrap());
        for i in 0..N {
            writeln!(
                out,
                "<http://ex.org/s{i}> <http://ex.org/p{}> \"v{i}\" .",
                i % 7
            )
            .unwrap();
        }
        out.flush().unwrap();
    }
    let j = d.join("many.jelly");
    ok(&["rdf", "to-jelly", s(&src), "-o", s(&j)], None);
    let (r, peak_kib) = peak_above_floor(&[
        "-q",
        "rdf",
        "validate",
        s(&j),
        "--compare-to-rdf-file",
        s(&src),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        peak_kib < 320 * 1024,
        "{peak_kib} KiB above the floor for {N} statements a side"
    );
}
