//! `jelly patch …` through the real binary: text ↔ binary round trips, stream types,
//! inspect, validate, diff and apply, compression, and bad input.

mod cli_support;

use std::path::Path;

use cli_support::*;
use jelly::patch::{
    PatchEncoder, PatchEvent, PatchOptions, PatchReader, PatchStatementType, PatchStreamType,
};
use jelly::rdf_patch::{PatchRow, parse_str};
use jelly::{StatementRef, TermRef};
use jelly_proto::wire::{Reader, put_varint};

const NANOPUBS: &str = "nanopubs-fair-pkd/nanopubs-fair-pkd.nq";

const HAND: &str = r#"H id <uuid:0686c69d-8f89-4496-acb5-744f0157a8db> .
H prev <uuid:00000000-0000-0000-0000-000000000000> .
TX .
PA "ex" "http://example.org/" .
PA "g" "http://example.org/g#" <http://example.org/g> .
A <http://example.org/s> <http://example.org/p> "o"@en .
A _:b0 <http://example.org/p> "42"^^<http://www.w3.org/2001/XMLSchema#integer> <http://example.org/g> .
A <http://example.org/s> <http://example.org/p> "multi\nline \"quoted\" \u00e9" .
A _:b0 <http://example.org/q> _:b1 _:graph1 .
TC .
TX .
D <http://example.org/s> <http://example.org/p> "o"@en .
PD "ex" .
TA .
TX .
D _:b0 <http://example.org/p> "42"^^<http://www.w3.org/2001/XMLSchema#integer> <http://example.org/g> .
PD "g" <http://example.org/g> .
TC .
A <http://example.org/outside> <http://example.org/p> <http://example.org/o> .
"#;

/// The rows of a text patch (segments dropped: they are patch boundaries).
fn rows(text: &[u8]) -> Vec<PatchRow> {
    let text = std::str::from_utf8(text).expect("utf-8");
    parse_str(text)
        .expect("valid RDF Patch")
        .into_iter()
        .filter(|r| *r != PatchRow::Segment)
        .collect()
}

/// Counts frames and punctuation rows of a Jelly-Patch file, and checks it decodes.
fn binary_shape(path: &Path) -> (u64, u64, PatchOptions) {
    let bytes = read_maybe_compressed(path);
    let mut r = PatchReader::new(&bytes[..]);
    let mut punct = 0;
    let mut opts = None;
    r.for_each_event(|_, ev| match ev {
        PatchEvent::Punctuation => punct += 1,
        PatchEvent::Options(o) => opts = Some(o.clone()),
        _ => {}
    })
    .expect("decodes");
    (r.decoder().stats().frames, punct, opts.expect("options"))
}

fn read_maybe_compressed(path: &Path) -> Vec<u8> {
    use std::io::Read;
    let raw = std::fs::read(path).expect("read");
    let mut out = Vec::new();
    if raw.starts_with(&[0x1f, 0x8b]) {
        flate2::read::MultiGzDecoder::new(&raw[..])
            .read_to_end(&mut out)
            .expect("gunzip");
    } else if raw.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        out = zstd::decode_all(&raw[..]).expect("unzstd");
    } else {
        out = raw;
    }
    out
}

/// A delimited stream of the given frames.
fn delimited(frames: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for f in frames {
        put_varint(&mut out, f.len() as u64);
        out.extend_from_slice(f);
    }
    out
}

/// One raw row `RdfPatchRow{field: {}}` as a frame entry.
fn marker_row(field: u8) -> [u8; 4] {
    [0x0a, 0x02, (field << 3) | 2, 0x00]
}

fn iri(s: &str) -> TermRef<'_> {
    TermRef::Iri(s)
}

#[test]
fn hand_built_round_trip_all_stream_types() {
    let d = tmp("patch-hand");
    let src = d.join("hand.rdfp");
    std::fs::write(&src, HAND).expect("write");
    let want = rows(HAND.as_bytes());
    assert_eq!(want.len(), 19);
    for st in ["frame", "flat", "punctuated"] {
        for extra in [&[][..], &["--preset", "small", "--rows-per-frame", "3"][..]] {
            let bin = d.join(format!("hand-{st}.jellyp"));
            let mut args = vec![
                "patch",
                "to-jelly",
                s(&src),
                "--stream-type",
                st,
                "-o",
                s(&bin),
            ];
            args.extend_from_slice(extra);
            ok(&args, None);
            let (frames, punct, opts) = binary_shape(&bin);
            assert_eq!(opts.stream_type.name(), st);
            assert_eq!(opts.statement_type, PatchStatementType::Quads);
            match st {
                "frame" => assert_eq!((frames, punct), (1, 0)),
                "punctuated" => assert_eq!(punct, 1),
                _ => assert_eq!(punct, 0),
            }
            if !extra.is_empty() && st != "frame" {
                assert!(frames > 3, "{st}: {frames} frames with 3 rows per frame");
            }
            let back = ok(&["patch", "from-jelly", s(&bin)], None);
            assert_eq!(rows(&back.stdout), want, "{st} {extra:?}");
        }
    }
    // Through pipes, with the text parser's synonyms and Jena's forms.
    let jena = "TB .\nA <_:x> <http://e/p> 42 .\nA <http://e/s> <http://e/p> <<( <http://e/a> <http://e/b> true )>> .\nTC .\n";
    let bin = ok(
        &["patch", "to-jelly", "--opt.rdf-star"],
        Some(jena.as_bytes()),
    );
    let back = ok(&["patch", "from-jelly"], Some(&bin.stdout));
    assert_eq!(rows(&back.stdout), rows(jena.as_bytes()));
    assert!(back.out().contains("A <_:x> <http://e/p> \"42\"^^"));
    let r = jelly(&["patch", "to-jelly"], Some(jena.as_bytes()));
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("<stdin>:3: ") && r.stderr.contains("--opt.rdf-star"),
        "{}",
        r.stderr
    );
}

#[test]
fn triples_statement_type() {
    let d = tmp("patch-triples");
    let text =
        "TX .\nPA \"ex\" \"http://e/\" .\nA <http://e/s> <http://e/p> <http://e/o> .\nTC .\n";
    let bin = d.join("t.jellyp");
    ok(
        &[
            "patch",
            "to-jelly",
            "--statement-type",
            "triples",
            "-o",
            s(&bin),
        ],
        Some(text.as_bytes()),
    );
    let (_, _, opts) = binary_shape(&bin);
    assert_eq!(opts.statement_type, PatchStatementType::Triples);
    let back = ok(&["patch", "from-jelly", s(&bin)], None);
    assert_eq!(rows(&back.stdout), rows(text.as_bytes()));
    // A graph in a TRIPLES stream is refused, with the line.
    let r = jelly(
        &["patch", "to-jelly", "--statement-type", "triples"],
        Some(b"TX .\nA <http://e/s> <http://e/p> <http://e/o> <http://e/g> .\nTC .\n"),
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("<stdin>:2: "), "{}", r.stderr);
    assert!(r.stderr.contains("TRIPLES"), "{}", r.stderr);
}

#[test]
fn patch_boundaries_and_separators() {
    let d = tmp("patch-bounds");
    let a = d.join("a.rdfp");
    let b = d.join("b.rdfp");
    std::fs::write(&a, "TX .\nA <http://e/a> <http://e/p> \"1\" .\nTC .\nTX .\nA <http://e/a> <http://e/p> \"2\" .\nTA .\n").expect("write");
    std::fs::write(
        &b,
        "A <http://e/b> <http://e/p> \"3\" .\nZ .\nD <http://e/b> <http://e/p> \"3\" .\n",
    )
    .expect("write");
    let out = d.join("o.jellyp");
    let run = |extra: &[&str]| -> (u64, u64) {
        let mut args = vec!["patch", "to-jelly", s(&a), s(&b), "-o", s(&out)];
        args.extend_from_slice(extra);
        ok(&args, None);
        let (f, p, _) = binary_shape(&out);
        (f, p)
    };
    // Per input, and at the Z segment of b: 3 patches.
    assert_eq!(run(&["--stream-type", "frame"]), (3, 0));
    assert_eq!(run(&["--stream-type", "punctuated"]).1, 3);
    // Per transaction: a has two, b's rows outside transactions make two more.
    assert_eq!(
        run(&["--stream-type", "frame", "--patch-per", "transaction"]),
        (4, 0)
    );
    assert_eq!(
        run(&["--stream-type", "punctuated", "--patch-per", "transaction"]).1,
        4
    );
    assert_eq!(run(&["--stream-type", "flat"]), (1, 0));

    // from-jelly separators.
    run(&["--stream-type", "frame"]);
    let c = ok(&["patch", "from-jelly", s(&out)], None).out();
    assert_eq!(c.matches("# end of patch ").count(), 3, "{c}");
    assert!(c.contains("# end of patch 2\n"), "{c}");
    let blank = ok(
        &["patch", "from-jelly", s(&out), "--patch-separator", "blank"],
        None,
    )
    .out();
    assert_eq!(blank.matches("\n\n").count(), 3, "{blank}");
    let none = ok(
        &["patch", "from-jelly", s(&out), "--patch-separator", "none"],
        None,
    )
    .out();
    assert!(!none.contains("\n\n") && !none.contains('#'), "{none}");
    // Segments carry the boundaries back through text.
    let seg = ok(
        &[
            "patch",
            "from-jelly",
            s(&out),
            "--patch-separator",
            "segment",
        ],
        None,
    );
    assert_eq!(seg.out().matches("Z .\n").count(), 3);
    let again = ok(
        &["patch", "to-jelly", "--stream-type", "frame"],
        Some(&seg.stdout),
    );
    let again_path = d.join("again.jellyp");
    std::fs::write(&again_path, &again.stdout).expect("write");
    assert_eq!(binary_shape(&again_path).0, 3);
    // A Jelly-Patch input is re-encoded, its patches kept.
    let re = d.join("re.jellyp");
    ok(
        &[
            "patch",
            "to-jelly",
            s(&out),
            "--stream-type",
            "punctuated",
            "-o",
            s(&re),
        ],
        None,
    );
    assert_eq!(binary_shape(&re).1, 3);
    // --take-frames picks patches of a FRAME stream.
    let one = ok(
        &["patch", "from-jelly", s(&out), "--take-frames", "1"],
        None,
    );
    assert_eq!(
        rows(&one.stdout),
        rows(b"A <http://e/b> <http://e/p> \"3\" .\n")
    );
    // A FRAME stream cannot end a patch inside a transaction.
    let r = jelly(
        &["patch", "to-jelly", "--stream-type", "frame"],
        Some(b"TX .\nZ .\nTC .\n"),
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("<stdin>:2: "), "{}", r.stderr);
}

#[test]
fn non_delimited_output() {
    let d = tmp("patch-nondelim");
    let out = d.join("one.jellyp");
    ok(
        &["patch", "to-jelly", "--delimited=false", "-o", s(&out)],
        Some(HAND.as_bytes()),
    );
    let bytes = std::fs::read(&out).expect("read");
    assert_eq!(bytes[0], 0x0a, "a bare frame starts with its first row");
    let back = ok(&["patch", "from-jelly", s(&out)], None);
    assert_eq!(rows(&back.stdout), rows(HAND.as_bytes()));
    let y = ok(&["patch", "inspect", s(&out)], None).out();
    assert!(y.contains("delimited: false\n"), "{y}");
    let r = jelly(
        &[
            "patch",
            "to-jelly",
            "--delimited=false",
            "--stream-type",
            "frame",
        ],
        Some(b"TX .\nTC .\nZ .\nTX .\nTC .\n"),
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("exactly one frame"), "{}", r.stderr);
}

#[test]
fn inspect_fields() {
    let d = tmp("patch-inspect");
    let src = d.join("hand.rdfp");
    std::fs::write(&src, HAND).expect("write");
    let bin = d.join("hand.jellyp.zst");
    ok(
        &[
            "patch",
            "to-jelly",
            s(&src),
            "--stream-type",
            "punctuated",
            "--rows-per-frame",
            "4",
            "-o",
            s(&bin),
        ],
        None,
    );
    let y = ok(&["patch", "inspect", s(&bin)], None).out();
    for want in [
        "options:\n",
        "  statement_type: quads\n",
        "  stream_type: punctuated\n",
        "  max_name_table_size: 4000\n",
        "  version: 1\n",
        "delimited: true\n",
        "patches: 1\n",
        "operations: 20\n",
        "statements: 7\n",
        "rows:\n",
        "  add: 5\n",
        "  delete: 2\n",
        "  namespace_add: 2\n",
        "  namespace_delete: 2\n",
        "  header: 2\n",
        "  transaction_start: 3\n",
        "  transaction_commit: 2\n",
        "  transaction_abort: 1\n",
        "  punctuation: 1\n",
        "transactions:\n",
        "  started: 3\n",
        "  committed: 2\n",
        "  aborted: 1\n",
        "compressed_bytes: ",
        "bytes_per_operation: ",
    ] {
        assert!(y.contains(want), "YAML lacks {want:?}:\n{y}");
    }
    assert!(!y.contains("frames_detail"));
    let js = ok(
        &["patch", "inspect", s(&bin), "--json", "--per-frame"],
        None,
    )
    .out();
    let (frames, _, _) = binary_shape(&bin);
    assert!(frames > 1);
    assert!(js.contains(&format!("\"frames\": {frames},")), "{js}");
    assert_eq!(js.matches("\"index\": ").count() as u64, frames, "{js}");
    assert!(js.contains("\"stream_type\": \"punctuated\""), "{js}");
    // Per-frame operations add up to the total.
    let per: u64 = js
        .lines()
        .filter(|l| l.starts_with("      \"operations\": "))
        .filter_map(|l| {
            l.trim()
                .trim_start_matches("\"operations\": ")
                .trim_end_matches(',')
                .parse::<u64>()
                .ok()
        })
        .sum();
    assert_eq!(per, 20, "{js}");
    // Text is not inspected.
    let r = jelly(&["patch", "inspect", s(&src)], None);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("RDF Patch text"), "{}", r.stderr);
}

fn encoder(stream: PatchStreamType) -> PatchEncoder {
    PatchEncoder::new(PatchOptions::small(PatchStatementType::Triples, stream)).expect("encoder")
}

#[test]
fn validate_text_and_binary() {
    let d = tmp("patch-validate");
    let good = d.join("good.rdfp");
    std::fs::write(&good, HAND).expect("write");
    let r = ok(&["patch", "validate", s(&good)], None);
    assert!(
        r.stderr.contains("valid RDF Patch (19 rows)"),
        "{}",
        r.stderr
    );
    let bin = d.join("good.jellyp");
    ok(&["patch", "to-jelly", s(&good), "-o", s(&bin)], None);
    let r = ok(&["patch", "validate", s(&bin)], None);
    assert!(r.stderr.contains("valid Jelly-Patch"), "{}", r.stderr);
    // Content sniffing, stdin, --quiet.
    let r = ok(
        &["patch", "validate", "-q"],
        Some(&std::fs::read(&bin).expect("read")),
    );
    assert!(r.stderr.is_empty());
    ok(&["patch", "validate"], Some(HAND.as_bytes()));

    // Bad text.
    for (text, code, want) in [
        (
            "TX .\nTX .\nTC .\n",
            1,
            "<stdin>:2: TX inside the transaction started on line 1",
        ),
        ("TC .\n", 1, "<stdin>:1: TC without a transaction"),
        ("TA .\n", 1, "<stdin>:1: TA without a transaction"),
        (
            "TX .\nA <http://e/s> <http://e/p> <http://e/o> .\n",
            1,
            "<stdin>:1: the transaction started here is not ended",
        ),
        (
            "TX .\nTC .\nH id <uuid:1> .\n",
            1,
            "<stdin>:3: header row after the header",
        ),
        (
            "TX .\nA <http://e/s> <http://e/p> <http://e/o>\n",
            1,
            "<stdin>:2:",
        ),
        (
            "A \"lit\" <http://e/p> <http://e/o> .\n",
            1,
            "<stdin>:1:3: ",
        ),
        ("Q .\n", 1, "<stdin>:1:1: "),
    ] {
        let r = jelly(
            &["patch", "validate", "--in-format", "rdfp"],
            Some(text.as_bytes()),
        );
        assert_eq!(r.code, code, "{text:?}: {}", r.stderr);
        assert!(r.stderr.contains(want), "{text:?}: {}", r.stderr);
    }
    ok(
        &["patch", "validate", "--allow-late-headers"],
        Some(b"TX .\nTC .\nH id <uuid:1> .\n"),
    );

    // Bad binary, built with the encoder plus hand-made rows.
    let s1 = || StatementRef::triple(iri("http://e/s"), iri("http://e/p"), iri("http://e/o"));
    // Nested TX: options, TX (rows 0-1 after the lookup entries), then a raw TX row.
    let mut e = encoder(PatchStreamType::Flat);
    e.transaction_start().expect("tx");
    let mut f = e.finish_frame();
    f.extend_from_slice(&marker_row(6));
    let nested = delimited(&[f]);
    // TC outside a transaction.
    let mut e = encoder(PatchStreamType::Flat);
    e.add(s1()).expect("add");
    let mut f = e.finish_frame();
    f.extend_from_slice(&marker_row(7));
    let tc_outside = delimited(&[f]);
    // A transaction spanning frames of a FRAME stream.
    let mut e = encoder(PatchStreamType::Frame);
    e.transaction_start().expect("tx");
    e.add(s1()).expect("add");
    let f0 = e.finish_frame();
    e.transaction_commit().expect("tc");
    let f1 = e.finish_frame();
    let spanning = delimited(&[f0, f1]);
    // The same frames are fine in a FLAT stream.
    let mut e = encoder(PatchStreamType::Flat);
    e.transaction_start().expect("tx");
    e.add(s1()).expect("add");
    let f0 = e.finish_frame();
    e.transaction_commit().expect("tc");
    let f1 = e.finish_frame();
    let flat_spanning = delimited(&[f0, f1]);
    // Punctuation in a FLAT stream.
    let mut e = encoder(PatchStreamType::Flat);
    e.add(s1()).expect("add");
    let mut f = e.finish_frame();
    f.extend_from_slice(&marker_row(15));
    let punct_flat = delimited(&[f]);
    // A transaction left open at the end.
    let mut e = encoder(PatchStreamType::Flat);
    e.transaction_start().expect("tx");
    let open_tx = delimited(&[e.finish_frame()]);
    // No options row.
    let no_options = delimited(&[marker_row(6).to_vec()]);

    let p = d.join("flat-spanning.jellyp");
    std::fs::write(&p, &flat_spanning).expect("write");
    ok(&["patch", "validate", s(&p)], None);

    for (name, bytes, want) in [
        ("nested", &nested, "frame 0:row 2 (byte "),
        (
            "tc-outside",
            &tc_outside,
            "commit (TC) outside a transaction",
        ),
        ("spanning", &spanning, "frame 0"),
        (
            "punct-flat",
            &punct_flat,
            "punctuation is only allowed in PUNCTUATED",
        ),
        ("open-tx", &open_tx, "transaction still open at the end"),
        ("no-options", &no_options, "frame 0:row 0"),
    ] {
        let p = d.join(format!("{name}.jellyp"));
        std::fs::write(&p, bytes).expect("write");
        let r = jelly(&["patch", "validate", s(&p)], None);
        assert_eq!(r.code, 1, "{name}: {}", r.stderr);
        assert!(r.stderr.contains(want), "{name}: {}", r.stderr);
        assert!(
            r.stderr.starts_with(&format!("jelly: {}", s(&p))),
            "{name}: {}",
            r.stderr
        );
        // Every reader of binary patches refuses it the same way.
        let r = jelly(&["patch", "from-jelly", s(&p)], None);
        assert_eq!(r.code, 1, "{name}: {}", r.stderr);
    }
    let r = jelly(&["patch", "validate", "-"], Some(&nested));
    assert!(r.stderr.contains("nest"), "{}", r.stderr);
    let r = jelly(&["patch", "validate", "-"], Some(&spanning));
    assert!(r.stderr.to_lowercase().contains("frame"), "{}", r.stderr);
    // Empty input.
    let r = jelly(&["patch", "validate", "--in-format", "jellyp"], Some(b""));
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("empty"), "{}", r.stderr);
    // Text forced to binary gets a hint; a real decode error does not.
    let r = jelly(
        &["patch", "validate", "--in-format", "jellyp", s(&good)],
        None,
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("is this a Jelly-Patch file?"),
        "{}",
        r.stderr
    );
    let r = jelly(&["patch", "validate", "-"], Some(&nested));
    assert!(!r.stderr.contains("is this"), "{}", r.stderr);
    // Missing file.
    let r = jelly(&["patch", "validate", s(&d.join("missing.jellyp"))], None);
    assert_eq!(r.code, 2, "{}", r.stderr);
}

/// Two overlapping slices of the nanopubs dataset, as N-Quads files.
fn two_versions(d: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let text = std::fs::read_to_string(dataset(NANOPUBS)).expect("dataset");
    let lines: Vec<&str> = text.lines().collect();
    let old: String = lines[..3000].iter().map(|l| format!("{l}\n")).collect();
    // Drop every 7th statement, add the next 1200, and a blank node or two.
    let mut new: String = lines[..3000]
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 7 != 3)
        .map(|(_, l)| format!("{l}\n"))
        .collect();
    for l in &lines[3000..4200] {
        new.push_str(l);
        new.push('\n');
    }
    new.push_str("_:b1 <http://e/p> \"x\"@en <http://e/g> .\n_:b1 <http://e/q> _:b2 .\n");
    let (o, n) = (d.join("old.nq"), d.join("new.nq"));
    std::fs::write(&o, old).expect("write");
    std::fs::write(&n, new).expect("write");
    (o, n)
}

#[test]
fn change_log_round_trip_and_diff_apply() {
    let d = tmp("patch-difflog");
    let (old, new) = two_versions(&d);
    let patch = d.join("d.rdfp");
    let r = ok(&["patch", "diff", s(&old), s(&new), "-o", s(&patch)], None);
    assert!(r.stderr.contains("429 deleted, 1202 added"), "{}", r.stderr);
    let text = std::fs::read(&patch).expect("read");
    let want = rows(&text);
    assert_eq!(want.first(), Some(&PatchRow::TxStart));
    assert_eq!(want.last(), Some(&PatchRow::TxCommit));
    assert_eq!(want.len(), 429 + 1202 + 2);
    ok(&["patch", "validate", s(&patch)], None);

    // Text → binary → text, every stream type, compressed too.
    for (st, ext) in [
        ("flat", "jellyp"),
        ("frame", "jellyp.gz"),
        ("punctuated", "jellyp.zst"),
    ] {
        let bin = d.join(format!("d-{st}.{ext}"));
        ok(
            &[
                "patch",
                "to-jelly",
                s(&patch),
                "--stream-type",
                st,
                "-o",
                s(&bin),
            ],
            None,
        );
        let back = ok(&["patch", "from-jelly", s(&bin)], None);
        assert_eq!(rows(&back.stdout), want, "{st}");
        // Binary is smaller than text.
        assert!(std::fs::metadata(&bin).expect("meta").len() < text.len() as u64 / 2);
    }
    // diff straight to binary gives the same rows.
    let bin = d.join("direct.jellyp");
    ok(&["patch", "diff", s(&old), s(&new), "-o", s(&bin)], None);
    let (_, _, opts) = binary_shape(&bin);
    assert_eq!(opts.statement_type, PatchStatementType::Quads);
    let back = ok(&["patch", "from-jelly", s(&bin)], None);
    assert_eq!(rows(&back.stdout), want);

    // apply reproduces NEW exactly, from text, binary or compressed patches.
    let want_new = parse(&std::fs::read(&new).expect("read"));
    for p in [&patch, &bin, &d.join("d-frame.jellyp.gz")] {
        let out = d.join("result.nq");
        ok(
            &["patch", "apply", s(&old), s(p), "--strict", "-o", s(&out)],
            None,
        );
        let got = parse(&std::fs::read(&out).expect("read"));
        assert_eq!(got.len(), want_new.len());
        let set =
            |v: &[jelly::Statement]| v.iter().cloned().collect::<std::collections::HashSet<_>>();
        assert_eq!(set(&got), set(&want_new), "{}", s(p));
    }
    // JSON-LD output: the same dataset, in a file that ends with a newline.
    let out = d.join("result.jsonld");
    ok(&["patch", "apply", s(&old), s(&patch), "-o", s(&out)], None);
    let bytes = std::fs::read(&out).expect("read");
    assert!(
        bytes.ends_with(b"}\n") || bytes.ends_with(b"]\n"),
        "JSON-LD ends with a newline"
    );
    ok(
        &["rdf", "to-jelly", s(&out), "-o", s(&d.join("r.jelly"))],
        None,
    );
    let back = ok(&["rdf", "from-jelly", s(&d.join("r.jelly"))], None);
    assert_iso(&parse(&back.stdout), &want_new, "apply to JSON-LD");
    // The patch from stdin, and gzip output.
    let out = d.join("result.nq.gz");
    ok(
        &["patch", "apply", s(&old), "-", "-o", s(&out)],
        Some(&std::fs::read(&bin).expect("read")),
    );
    let got = parse(&read_maybe_compressed(&out));
    assert_iso(&got, &want_new, "apply from stdin");
    // Applying twice: non-strict changes nothing more, strict names the first row.
    let r = ok(
        &[
            "patch",
            "apply",
            s(&new),
            s(&patch),
            "-o",
            s(&d.join("x.nq")),
        ],
        None,
    );
    assert!(r.stderr.contains("rows changed nothing"), "{}", r.stderr);
    let r = jelly(&["patch", "apply", s(&new), s(&patch), "--strict"], None);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "{}:2: D deletes a statement that is not in the dataset",
            s(&patch)
        )),
        "{}",
        r.stderr
    );
    // Reverse diff then apply goes back.
    let rev = d.join("rev.rdfp");
    ok(&["patch", "diff", s(&new), s(&old), "-o", s(&rev)], None);
    let out = d.join("back.nq");
    ok(
        &[
            "patch",
            "apply",
            s(&new),
            s(&rev),
            "--strict",
            "-o",
            s(&out),
        ],
        None,
    );
    assert_iso(
        &parse(&std::fs::read(&out).expect("read")),
        &parse(&std::fs::read(&old).expect("read")),
        "reverse",
    );
}

#[test]
fn strict_apply_names_binary_row() {
    let d = tmp("patch-strict");
    let base = d.join("base.nt");
    std::fs::write(&base, "<http://e/s> <http://e/p> <http://e/o> .\n").expect("write");
    let text = "TX .\nA <http://e/s> <http://e/p> <http://e/o2> .\nD <http://e/s> <http://e/p> <http://e/missing> .\nTC .\n";
    let bin = d.join("p.jellyp");
    ok(&["patch", "to-jelly", "-o", s(&bin)], Some(text.as_bytes()));
    let r = jelly(&["patch", "apply", s(&base), s(&bin), "--strict"], None);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let prefix = format!("jelly: {}:frame 0:row ", s(&bin));
    assert!(r.stderr.starts_with(&prefix), "{}", r.stderr);
    assert!(r.stderr.contains("D deletes a statement that is not in the dataset: <http://e/s> <http://e/p> <http://e/missing>"), "{}", r.stderr);
    // The row named is the D row of the frame.
    let row: usize = r.stderr[prefix.len()..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .expect("row number");
    let bytes = std::fs::read(&bin).expect("read");
    let mut outer = Reader::new(&bytes);
    let frame = outer.bytes().expect("frame");
    let mut fr = Reader::new(frame);
    let mut kinds = Vec::new();
    while let Some((_, _)) = fr.tag().expect("tag") {
        let mut row = fr.message().expect("row");
        let (field, _) = row.tag().expect("tag").expect("field");
        kinds.push(field);
    }
    assert_eq!(kinds[row], 3, "row {row} of {kinds:?}");
    // Text: the line. Adding a present statement fails too.
    let r = jelly(
        &["patch", "apply", s(&base), "-", "--strict"],
        Some(b"A <http://e/s> <http://e/p> <http://e/o> .\n"),
    );
    assert_eq!(r.code, 1);
    assert!(
        r.stderr
            .contains("<stdin>:1: A adds a statement already in the dataset"),
        "{}",
        r.stderr
    );
    // Without --strict both are no-ops.
    let r = ok(&["patch", "apply", s(&base), s(&bin)], None);
    assert_eq!(parse(&r.stdout).len(), 2);
}

#[test]
fn apply_transactions_and_prefixes() {
    let d = tmp("patch-apply-tx");
    let base = d.join("base.ttl");
    std::fs::write(
        &base,
        "@prefix ex: <http://example.org/> .\nex:s ex:p ex:o .\nex:s ex:p ex:gone .\n",
    )
    .expect("write");
    let p1 = d.join("p1.rdfp");
    std::fs::write(
        &p1,
        "TX .\nPA \"foaf\" \"http://xmlns.com/foaf/0.1/\" .\nA <http://example.org/s> <http://xmlns.com/foaf/0.1/name> \"S\" .\nD <http://example.org/s> <http://example.org/p> <http://example.org/gone> .\nTC .\n\
         TX .\nPD \"ex\" .\nA <http://example.org/aborted> <http://example.org/p> \"no\" .\nD <http://example.org/s> <http://example.org/p> <http://example.org/o> .\nTA .\n",
    )
    .expect("write");
    // A second patch, binary and gzipped, outside any transaction.
    let p2 = d.join("p2.jellyp.gz");
    ok(
        &["patch", "to-jelly", "-o", s(&p2)],
        Some(b"A <http://example.org/t> <http://example.org/p> _:b0 .\n"),
    );
    let out = d.join("out.ttl");
    let r = ok(
        &[
            "patch",
            "apply",
            s(&base),
            s(&p1),
            s(&p2),
            "--strict",
            "-o",
            s(&out),
        ],
        None,
    );
    assert!(
        r.stderr
            .contains("3 statements (2 added, 1 deleted, 1 aborted transactions)"),
        "{}",
        r.stderr
    );
    let ttl = std::fs::read_to_string(&out).expect("read");
    assert!(ttl.contains("@prefix ex: <http://example.org/>"), "{ttl}");
    assert!(
        ttl.contains("@prefix foaf: <http://xmlns.com/foaf/0.1/>"),
        "{ttl}"
    );
    assert!(ttl.contains("foaf:name"), "{ttl}");
    assert!(!ttl.contains("aborted") && !ttl.contains("gone"), "{ttl}");
    // N-Quads by default, on stdout; base order first.
    let nq = ok(&["patch", "apply", s(&base), s(&p1), s(&p2)], None).out();
    let lines: Vec<&str> = nq.lines().collect();
    assert_eq!(lines.len(), 3, "{nq}");
    assert!(
        lines[0]
            .starts_with("<http://example.org/s> <http://example.org/p> <http://example.org/o>")
    );
    // A named graph cannot go to Turtle.
    let r = jelly(
        &["patch", "apply", s(&base), "-", "--out-format", "ttl"],
        Some(b"A <http://e/s> <http://e/p> <http://e/o> <http://e/g> .\n"),
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    // An unterminated transaction in a text patch is an error.
    let r = jelly(
        &["patch", "apply", s(&base), "-"],
        Some(b"TX .\nA <http://e/s> <http://e/p> <http://e/o> .\n"),
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("<stdin>:1: the transaction started here is not ended"),
        "{}",
        r.stderr
    );
    // Usage errors.
    let r = jelly(&["patch", "apply", s(&base), "-", "-"], None);
    assert_eq!(r.code, 2);
    let r = jelly(&["patch", "apply", s(&base)], None);
    assert_eq!(r.code, 2);
}

#[test]
fn diff_prefixes_and_turtle() {
    let d = tmp("patch-diff-ttl");
    let a = d.join("a.ttl");
    let b = d.join("b.ttl");
    std::fs::write(
        &a,
        "@prefix ex: <http://example.org/> .\n@prefix old: <http://old/> .\nex:s ex:p \"1\" .\n",
    )
    .expect("write");
    std::fs::write(
        &b,
        "@prefix ex: <http://example.org/> .\n@prefix new: <http://new/> .\nex:s ex:p \"2\" .\n",
    )
    .expect("write");
    let r = ok(&["patch", "diff", s(&a), s(&b)], None);
    let got = rows(&r.stdout);
    let want = rows(
        b"TX .\nPD \"old\" .\nPA \"new\" \"http://new/\" .\nD <http://example.org/s> <http://example.org/p> \"1\" .\nA <http://example.org/s> <http://example.org/p> \"2\" .\nTC .\n",
    );
    assert_eq!(got, want);
    // --format jelly on stdout, TRIPLES because nothing is in a named graph.
    let bin = ok(&["patch", "diff", s(&a), s(&b), "--format", "jelly"], None);
    let p = d.join("d.jellyp");
    std::fs::write(&p, &bin.stdout).expect("write");
    assert_eq!(
        binary_shape(&p).2.statement_type,
        PatchStatementType::Triples
    );
    let out = d.join("b2.ttl");
    ok(&["patch", "apply", s(&a), s(&p), "-o", s(&out)], None);
    let ttl = std::fs::read_to_string(&out).expect("read");
    assert!(
        ttl.contains("@prefix new: <http://new/>") && !ttl.contains("old:"),
        "{ttl}"
    );
    // Unknown extension.
    let r = jelly(&["patch", "diff", s(&a), s(&d.join("x.unknown"))], None);
    assert_eq!(r.code, 2, "{}", r.stderr);
}

#[test]
fn bad_input_never_panics() {
    let d = tmp("patch-fuzz");
    let src = d.join("hand.rdfp");
    std::fs::write(&src, HAND).expect("write");
    let bin = d.join("hand.jellyp");
    ok(
        &[
            "patch",
            "to-jelly",
            s(&src),
            "--stream-type",
            "punctuated",
            "--rows-per-frame",
            "5",
            "-o",
            s(&bin),
        ],
        None,
    );
    let good = std::fs::read(&bin).expect("read");
    let base = d.join("base.nq");
    std::fs::write(&base, "").expect("write");
    // Truncations and byte flips through every binary reader.
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut cases: Vec<Vec<u8>> =
        vec![vec![0xff; 16], vec![0x0a], b"\x05\x0a\x03\x08\x01".to_vec()];
    for cut in [1, 2, 5, good.len() / 2, good.len() - 1] {
        cases.push(good[..cut].to_vec());
    }
    for _ in 0..24 {
        let mut m = good.clone();
        for _ in 0..3 {
            let i = (next() % m.len() as u64) as usize;
            m[i] = next() as u8;
        }
        cases.push(m);
    }
    for (i, c) in cases.iter().enumerate() {
        let verb = ["from-jelly", "inspect", "validate"][i % 3];
        let args: &[&str] = if verb == "validate" {
            &["patch", "validate", "--in-format", "jellyp"]
        } else {
            &["patch", verb]
        };
        let r = jelly(args, Some(c));
        assert!(
            r.code == 0 || r.code == 1,
            "{verb} case {i}: {} {}",
            r.code,
            r.stderr
        );
        if r.code == 1 {
            assert!(r.stderr.starts_with("jelly: "), "{}", r.stderr);
        }
        let r = jelly(
            &["patch", "apply", s(&base), "-", "--in-format", "nq"],
            Some(c),
        );
        assert!(r.code == 0 || r.code == 1, "apply case {i}: {}", r.stderr);
    }
    // Garbage text.
    for t in [
        &b"A <unterminated\n"[..],
        b"\xff\xfe\n",
        b"TX .\nA <a> <b> \"x\"^^ .\n",
        b"PA \"x\" .\n",
    ] {
        let r = jelly(&["patch", "to-jelly"], Some(t));
        assert_eq!(r.code, 1, "{t:?}: {}", r.stderr);
        assert!(r.stderr.contains("<stdin>:"), "{}", r.stderr);
    }
}

/// A Jelly-Patch `PD` row may carry the prefix's IRI, which RDF Patch text has no place
/// for: re-encoding Jelly-Patch to Jelly-Patch keeps it.
#[test]
fn binary_to_binary_keeps_the_iri_of_a_prefix_delete() {
    let d = tmp("patch-pd-iri");
    let mut e = encoder(PatchStreamType::Frame);
    e.transaction_start().expect("tx");
    e.delete_namespace("ex", Some("http://example.org/"), None)
        .expect("pd");
    e.delete_namespace("g", None, None).expect("pd");
    e.transaction_commit().expect("tc");
    let input = d.join("in.jellyp");
    std::fs::write(&input, delimited(&[e.finish_frame()])).expect("write");
    let out = d.join("out.jellyp");
    ok(&["patch", "to-jelly", s(&input), "-o", s(&out)], None);
    let bytes = std::fs::read(&out).expect("read");
    let mut pds = Vec::new();
    PatchReader::new(&bytes[..])
        .for_each_event(|_, ev| {
            if let PatchEvent::DeleteNamespace { name, iri, .. } = ev {
                pds.push((name.to_string(), iri.map(str::to_string)));
            }
        })
        .expect("decodes");
    assert_eq!(
        pds,
        [
            ("ex".to_string(), Some("http://example.org/".to_string())),
            ("g".to_string(), None)
        ]
    );
}

/// Messages name the real trouble: a damaged compressed file is not "empty", empty
/// input is not "RDF Patch text", and tables that default readers refuse get a note.
#[test]
fn patch_messages_name_the_real_trouble() {
    use std::io::Write as _;
    let d = tmp("patch-messages");
    let text = d.join("p.rdfp");
    std::fs::write(
        &text,
        "TX .\nA <http://e/s> <http://e/p> <http://e/o> .\nTC .\n",
    )
    .expect("write");
    let bin = d.join("p.jellyp");
    ok(&["patch", "to-jelly", s(&text), "-o", s(&bin)], None);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&std::fs::read(&bin).expect("read"))
        .expect("gzip");
    let gz = gz.finish().expect("gzip");
    let cut = d.join("cut.jellyp.gz");
    std::fs::write(&cut, &gz[..12]).expect("write");
    for verb in ["from-jelly", "inspect", "validate"] {
        let r = jelly(&["patch", verb, s(&cut)], None);
        assert_eq!(r.code, 1, "{verb}: {}", r.stderr);
        assert!(!r.stderr.contains("empty"), "{verb}: {}", r.stderr);
        assert!(r.stderr.contains("cut.jellyp.gz"), "{verb}: {}", r.stderr);
    }
    // A cut compressed text patch: named once, with the line.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&std::fs::read(&text).expect("read"))
        .expect("gzip");
    let gz = gz.finish().expect("gzip");
    let cut_text = d.join("cut.rdfp.gz");
    std::fs::write(&cut_text, &gz[..gz.len() / 2]).expect("write");
    let r = jelly(&["patch", "validate", s(&cut_text)], None);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert_eq!(r.stderr.matches("cut.rdfp.gz").count(), 1, "{}", r.stderr);
    for verb in ["from-jelly", "inspect"] {
        let r = jelly(&["patch", verb], Some(b""));
        assert_eq!(r.code, 1, "{verb}: {}", r.stderr);
        assert!(r.stderr.contains("input is empty"), "{verb}: {}", r.stderr);
    }
    let r = ok(
        &[
            "patch",
            "to-jelly",
            s(&text),
            "--opt.max-name-table-size",
            "5000",
            "-o",
            s(&d.join("big.jellyp")),
        ],
        None,
    );
    assert!(r.stderr.contains("name table 5000"), "{}", r.stderr);
}

/// A PUNCTUATED stream whose rows go on after its last punctuation (a stream cut at a
/// frame boundary, say) is not valid: validate, from-jelly and apply refuse it, and
/// inspect counts and flags that last patch.
#[test]
fn an_unended_last_patch_of_a_punctuated_stream() {
    let d = tmp("patch-unended");
    let mut e = encoder(PatchStreamType::Punctuated);
    e.transaction_start().expect("tx");
    e.add(StatementRef::triple(
        iri("http://e/s"),
        iri("http://e/p"),
        iri("http://e/o"),
    ))
    .expect("add");
    e.transaction_commit().expect("tc");
    e.punctuation().expect("punct");
    let ended = e.finish_frame();
    e.transaction_start().expect("tx");
    e.transaction_commit().expect("tc");
    let cut = d.join("cut.jellyp");
    std::fs::write(&cut, delimited(&[ended.clone(), e.finish_frame()])).expect("write");
    let r = jelly(&["patch", "validate", s(&cut)], None);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("2 row(s) after the last punctuation"),
        "{}",
        r.stderr
    );
    let r = ok(&["patch", "inspect", s(&cut), "--json"], None);
    let v: serde_json::Value = serde_json::from_slice(&r.stdout).expect("json");
    assert_eq!(v["patches"], 2, "{v}");
    assert_eq!(v["last_patch_unterminated"], true, "{v}");
    // Nor is it converted or applied as if the cut patch were whole: the dataset is
    // left as it was.
    let r = jelly(&["patch", "from-jelly", s(&cut)], None);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("last patch is not ended"), "{}", r.stderr);
    let base = d.join("base.nq");
    std::fs::write(&base, "<http://e/a> <http://e/b> <http://e/c> .\n").expect("write");
    let r = jelly(&["patch", "apply", s(&base), s(&cut), "-o", s(&base)], None);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("last patch is not ended"), "{}", r.stderr);
    assert_eq!(
        std::fs::read_to_string(&base).expect("read"),
        "<http://e/a> <http://e/b> <http://e/c> .\n"
    );
    // The stream that ends with its punctuation is valid and not flagged.
    let whole = d.join("whole.jellyp");
    std::fs::write(&whole, delimited(&[ended])).expect("write");
    ok(&["patch", "validate", s(&whole)], None);
    let r = ok(&["patch", "inspect", s(&whole), "--json"], None);
    let v: serde_json::Value = serde_json::from_slice(&r.stdout).expect("json");
    assert_eq!(
        (
            v["patches"].as_u64(),
            v["last_patch_unterminated"].as_bool()
        ),
        (Some(1), Some(false))
    );
}

/// A log of patches written with `Z .` separators (from-jelly --patch-separator segment)
/// validates: each segment is a patch with its own header.
#[test]
fn a_segmented_patch_log_validates() {
    let d = tmp("patch-segments");
    let one = d.join("1.rdfp");
    let two = d.join("2.rdfp");
    std::fs::write(
        &one,
        "H id <uuid:1> .\nTX .\nA <http://e/a> <http://e/p> <http://e/o> .\nTC .\n",
    )
    .expect("write");
    std::fs::write(
        &two,
        "H id <uuid:2> .\nH prev <uuid:1> .\nTX .\nD <http://e/a> <http://e/p> <http://e/o> .\nTC .\n",
    )
    .expect("write");
    let log = d.join("log.jellyp");
    ok(
        &[
            "patch",
            "to-jelly",
            s(&one),
            s(&two),
            "--stream-type",
            "frame",
            "-o",
            s(&log),
        ],
        None,
    );
    let text = ok(
        &[
            "patch",
            "from-jelly",
            s(&log),
            "--patch-separator",
            "segment",
        ],
        None,
    )
    .stdout;
    ok(&["patch", "validate", "--in-format", "rdfp"], Some(&text));
    // A transaction cut by a segment is not.
    let r = jelly(
        &["patch", "validate", "--in-format", "rdfp"],
        Some(b"TX .\nA <http://e/a> <http://e/p> <http://e/o> .\nZ .\nTC .\n"),
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("not ended"), "{}", r.stderr);
}

/// With `--take-frames`, patches keep the numbers they have in the whole stream.
#[test]
fn taken_frames_keep_their_patch_numbers() {
    let d = tmp("patch-take");
    let mut inputs = Vec::new();
    for i in 0..4 {
        let p = d.join(format!("{i}.rdfp"));
        std::fs::write(
            &p,
            format!("TX .\nA <http://e/a{i}> <http://e/p> <http://e/o> .\nTC .\n"),
        )
        .expect("write");
        inputs.push(p);
    }
    let names: Vec<&str> = inputs.iter().map(|p| s(p)).collect();
    let log = d.join("log.jellyp");
    let mut args = vec!["patch", "to-jelly"];
    args.extend(&names);
    args.extend(["--stream-type", "frame", "-o", s(&log)]);
    ok(&args, None);
    let out = ok(
        &["patch", "from-jelly", s(&log), "--take-frames", "2.."],
        None,
    )
    .out();
    let ends: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("# end of patch"))
        .collect();
    assert_eq!(ends, ["# end of patch 2", "# end of patch 3"], "{out}");
}

/// RDF Patch text adding `n` statements whose objects are distinct literals of about
/// `len` bytes (the same literal twice would be a repeated term, a few bytes), in one
/// transaction when `tx`.
fn big_adds(n: usize, len: usize, tx: bool) -> String {
    let lit = "x".repeat(len);
    let mut t = String::new();
    if tx {
        t.push_str("TX .\n");
    }
    for i in 0..n {
        t.push_str(&format!(
            "A <http://ex.org/s{i}> <http://ex.org/p> \"{i}{lit}\" .\n"
        ));
    }
    if tx {
        t.push_str("TC .\n");
    }
    t
}

/// FLAT and PUNCTUATED frames end at 512 KiB as well as at 256 rows, inside a
/// transaction too (these stream types let transactions span frames); a FRAME stream's
/// frame is its patch, whatever its size. `--rows-per-frame` keeps its meaning.
#[test]
fn patch_frames_also_end_at_a_byte_size() {
    let d = tmp("patch-bytes-per-frame");
    let src = d.join("big.rdfp");
    std::fs::write(&src, big_adds(6, 300_000, true)).unwrap();
    let bin = d.join("big.jellyp");
    for stream in ["flat", "punctuated"] {
        ok(
            &[
                "patch",
                "to-jelly",
                s(&src),
                "--stream-type",
                stream,
                "-o",
                s(&bin),
            ],
            None,
        );
        // Two adds reach 512 KiB: [options, TX, A, A], [A, A], [A, A], [TC (, punctuation)].
        assert_eq!(binary_shape(&bin).0, 4, "{stream}");
        let back = ok(&["patch", "from-jelly", s(&bin)], None);
        assert_eq!(
            rows(&back.stdout),
            rows(std::fs::read(&src).unwrap().as_slice())
        );
    }
    ok(
        &[
            "patch",
            "to-jelly",
            s(&src),
            "--bytes-per-frame",
            "1",
            "-o",
            s(&bin),
        ],
        None,
    );
    // [options, TX], six [A] (each with its lookup entries), [TC].
    assert_eq!(
        binary_shape(&bin).0,
        8,
        "every row past the bound ends a frame"
    );
    ok(
        &[
            "patch",
            "to-jelly",
            s(&src),
            "--rows-per-frame",
            "1",
            "--bytes-per-frame",
            "100000000",
            "-o",
            s(&bin),
        ],
        None,
    );
    assert_eq!(
        binary_shape(&bin).0,
        8,
        "a frame per row (and its lookup entries)"
    );
    ok(
        &[
            "patch",
            "to-jelly",
            s(&src),
            "--stream-type",
            "frame",
            "-o",
            s(&bin),
        ],
        None,
    );
    assert_eq!(
        binary_shape(&bin).0,
        1,
        "a FRAME stream's patch is one frame"
    );
    ok(
        &[
            "patch",
            "to-jelly",
            s(&src),
            "--delimited=false",
            "-o",
            s(&bin),
        ],
        None,
    );
    assert_eq!(binary_shape(&bin).0, 1, "non-delimited output is one frame");
}

/// A frame larger than readers accept by default (64 MiB) is told, as rdf to-jelly
/// tells it: here a FRAME stream's patch of two 34 MB rows.
#[test]
fn patch_to_jelly_notes_a_frame_past_the_reader_limit() {
    let d = tmp("patch-frame-note");
    let src = d.join("huge.rdfp");
    std::fs::write(&src, big_adds(2, 34_000_000, false)).unwrap();
    let bin = d.join("huge.jellyp");
    let r = ok(
        &[
            "patch",
            "to-jelly",
            s(&src),
            "--stream-type",
            "frame",
            "-o",
            s(&bin),
        ],
        None,
    );
    assert!(
        r.stderr.contains("note: the output has a frame of 68000")
            && r.stderr.contains("--max-frame-size 68000"),
        "{}",
        r.stderr
    );
    let r = ok(
        &[
            "-q",
            "patch",
            "to-jelly",
            s(&src),
            "--stream-type",
            "frame",
            "-o",
            s(&bin),
        ],
        None,
    );
    assert!(!r.stderr.contains("note"), "{}", r.stderr);
    // Under the limit (a FLAT stream cuts it): no note.
    let r = ok(&["patch", "to-jelly", s(&src), "-o", s(&bin)], None);
    assert!(!r.stderr.contains("note"), "{}", r.stderr);
    std::fs::remove_file(&src).ok();
    std::fs::remove_file(&bin).ok();
}

/// diff and apply hold their data by design: past `--max-statements` they stop with
/// an error naming the count and the option (not an allocation failure).
#[test]
fn diff_and_apply_hold_at_most_max_statements() {
    let d = tmp("patch-held-limit");
    let (old, new) = two_versions(&d);
    // old has 3000 statements, new about 3770.
    let r = jelly(
        &[
            "patch",
            "diff",
            s(&old),
            s(&new),
            "--max-statements",
            "3500",
        ],
        None,
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("new.nq: more than 3500 statements")
            && r.stderr.contains("--max-statements"),
        "{}",
        r.stderr
    );
    let diff = d.join("d.rdfp");
    ok(
        &[
            "patch",
            "diff",
            s(&old),
            s(&new),
            "--max-statements",
            "4000",
            "-o",
            s(&diff),
        ],
        None,
    );
    // apply: the base alone passes 2999, and the additions pass 3500.
    let r = jelly(
        &[
            "patch",
            "apply",
            s(&old),
            s(&diff),
            "--max-statements",
            "2999",
        ],
        None,
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("old.nq: more than 2999 statements"),
        "{}",
        r.stderr
    );
    let r = jelly(
        &[
            "patch",
            "apply",
            s(&old),
            s(&diff),
            "--max-statements",
            "3500",
        ],
        None,
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("more than 3500 statements") && r.stderr.contains("d.rdfp:"),
        "{}",
        r.stderr
    );
    let out = d.join("applied.nq");
    ok(
        &[
            "patch",
            "apply",
            s(&old),
            s(&diff),
            "--max-statements",
            "8000",
            "-o",
            s(&out),
        ],
        None,
    );
}
