//! `inspect`, `validate` and `conformance` through the real binary.

mod cli_support;

use cli_support::*;

const NANOPUBS: &str = "nanopubs-fair-pkd/nanopubs-fair-pkd.nq";

/// The first 400 nanopub quads as Jelly in `d`, 100 rows a frame.
fn nanopubs_jelly(d: &std::path::Path) -> std::path::PathBuf {
    let src = head(NANOPUBS, 400, d, "np.nq");
    let j = d.join("np.jelly");
    ok(
        &[
            "rdf",
            "to-jelly",
            s(&src),
            "--rows-per-frame",
            "100",
            "-o",
            s(&j),
        ],
        None,
    );
    j
}

#[test]
fn inspect_yaml_and_json() {
    let d = tmp("inspect");
    let j = nanopubs_jelly(&d);
    let nframes = frames(&j).len();
    let y = ok(&["rdf", "inspect", s(&j)], None).out();
    for want in [
        "options:\n",
        "  physical_type: quads\n",
        "  max_name_table_size: 4000\n",
        &format!("frames: {nframes}\n"),
        "statements: 400\n",
        "rows:\n",
        "  quad: 400\n",
        "distinct_terms:\n",
        "  iris: ",
        "  literals: ",
        "  approximate: false\n",
        "lookup_tables:\n",
        "    max_id_used: ",
        "bytes_per_statement: ",
    ] {
        assert!(y.contains(want), "YAML lacks {want:?}:\n{y}");
    }
    assert!(!y.contains("frames_detail"));
    let js = ok(&["rdf", "inspect", s(&j), "--json", "--per-frame"], None).out();
    for want in [
        "\"statements\": 400",
        "\"physical_type\": \"quads\"",
        "\"frames_detail\": [",
        "\"index\": 0",
        "\"blank_nodes\": 0",
        "\"bytes_per_statement\": ",
    ] {
        assert!(js.contains(want), "JSON lacks {want:?}:\n{js}");
    }
    assert_eq!(js.matches("\"index\": ").count(), nframes);
    assert!(js.trim_start().starts_with('{') && js.trim_end().ends_with('}'));
    // Per-frame statement counts add up.
    let per: u64 = js
        .lines()
        .filter(|l| l.trim_start().starts_with("\"statements\": ") && l.starts_with("      "))
        .filter_map(|l| {
            l.trim()
                .trim_start_matches("\"statements\": ")
                .trim_end_matches(',')
                .parse::<u64>()
                .ok()
        })
        .sum();
    assert_eq!(per, 400, "{js}");
}

#[test]
fn inspect_counts_distinct_terms() {
    let d = tmp("inspect-distinct");
    let nt = d.join("x.nt");
    std::fs::write(
        &nt,
        "<http://e/a> <http://e/p> \"x\" .\n<http://e/a> <http://e/p> \"y\"@en .\n\
         _:b1 <http://e/p> <http://e/a> .\n_:b2 <http://e/q> \"x\" .\n",
    )
    .unwrap();
    let j = ok(&["rdf", "to-jelly", s(&nt)], None).stdout;
    let y = ok(&["rdf", "inspect"], Some(&j)).out();
    assert!(y.contains("  iris: 3\n"), "{y}");
    assert!(y.contains("  blank_nodes: 2\n"), "{y}");
    assert!(y.contains("  literals: 2\n"), "{y}");
    assert!(y.contains("statements: 4\n"), "{y}");
}

#[test]
fn validate_against_matching_and_different_rdf() {
    let d = tmp("validate");
    let src = head(NANOPUBS, 300, &d, "np.nq");
    let j = d.join("np.jelly");
    ok(&["rdf", "to-jelly", s(&src), "-o", s(&j)], None);
    let r = ok(
        &["rdf", "validate", s(&j), "--compare-to-rdf-file", s(&src)],
        None,
    );
    assert!(r.stderr.contains("valid"), "{}", r.stderr);
    // Ordered comparison of the same order passes; a shuffled file fails ordered, passes unordered.
    ok(
        &[
            "rdf",
            "validate",
            s(&j),
            "--compare-to-rdf-file",
            s(&src),
            "--compare-ordered",
            "true",
        ],
        None,
    );
    let text = std::fs::read_to_string(&src).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.reverse();
    let rev = d.join("rev.nq");
    std::fs::write(&rev, lines.join("\n") + "\n").unwrap();
    ok(
        &["rdf", "validate", s(&j), "--compare-to-rdf-file", s(&rev)],
        None,
    );
    let r = jelly(
        &[
            "rdf",
            "validate",
            s(&j),
            "--compare-to-rdf-file",
            s(&rev),
            "--compare-ordered",
            "true",
        ],
        None,
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    // `--compare-ordered` alone means true, as the JVM jelly-cli's flag does.
    let r = jelly(
        &[
            "rdf",
            "validate",
            s(&j),
            "--compare-to-rdf-file",
            s(&rev),
            "--compare-ordered",
        ],
        None,
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    // A statement missing.
    let fewer = d.join("fewer.nq");
    std::fs::write(&fewer, lines[1..].join("\n") + "\n").unwrap();
    let r = jelly(
        &["rdf", "validate", s(&j), "--compare-to-rdf-file", s(&fewer)],
        None,
    );
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("differs"), "{}", r.stderr);
    // The message says which side has what.
    let n = lines.len();
    let sides = format!(
        "the stream has {n} distinct statements, the RDF file {}",
        n - 1
    );
    assert!(r.stderr.contains(&sides), "{sides}: {}", r.stderr);
    // ... and which statement only the stream holds (the one left out of the file).
    assert!(
        r.stderr
            .contains(&format!("only in the stream: {}", lines[0].trim_end())),
        "{}",
        r.stderr
    );
    // A statement changed: the message names the side that has it.
    let changed = d.join("changed.nq");
    let mut other = lines.clone();
    let edited = other[0].replacen("<http://", "<http://changed.example/", 1);
    other[0] = &edited;
    std::fs::write(&changed, other.join("\n") + "\n").unwrap();
    let r = jelly(
        &[
            "rdf",
            "validate",
            s(&j),
            "--compare-to-rdf-file",
            s(&changed),
        ],
        None,
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains(": only in the "), "{}", r.stderr);
    // Through another format (TriG).
    let trig = d.join("np.trig");
    ok(&["rdf", "from-jelly", s(&j), "-o", s(&trig)], None);
    ok(
        &["rdf", "validate", s(&j), "--compare-to-rdf-file", s(&trig)],
        None,
    );
}

#[test]
fn validate_frame_indices_options_and_delimiting() {
    let d = tmp("validate-opts");
    let src = head(NANOPUBS, 200, &d, "np.nq");
    let j = d.join("np.jelly");
    ok(
        &[
            "rdf",
            "to-jelly",
            s(&src),
            "--rows-per-frame",
            "30",
            "-o",
            s(&j),
        ],
        None,
    );
    let f = frames(&j);
    let f2 = d.join("f2.nq");
    ok(
        &[
            "rdf",
            "from-jelly",
            s(&j),
            "--take-frames",
            "2",
            "-o",
            s(&f2),
        ],
        None,
    );
    ok(
        &[
            "rdf",
            "validate",
            s(&j),
            "--compare-to-rdf-file",
            s(&f2),
            "--compare-frame-indices",
            "2",
            "--compare-ordered",
            "true",
        ],
        None,
    );
    assert!(!f[2].is_empty());
    let r = jelly(
        &[
            "rdf",
            "validate",
            s(&j),
            "--compare-to-rdf-file",
            s(&f2),
            "--compare-frame-indices",
            "3",
        ],
        None,
    );
    assert_eq!(r.code, 1);
    // Exact options.
    ok(&["rdf", "validate", s(&j), "--options-file", s(&j)], None);
    let small = d.join("small.jelly");
    ok(
        &[
            "rdf",
            "to-jelly",
            s(&src),
            "--preset",
            "small",
            "-o",
            s(&small),
        ],
        None,
    );
    let r = jelly(
        &["rdf", "validate", s(&j), "--options-file", s(&small)],
        None,
    );
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("max_name_table_size"), "{}", r.stderr);
    // Delimiting.
    ok(&["rdf", "validate", s(&j), "--delimited", "true"], None);
    assert_eq!(
        jelly(&["rdf", "validate", s(&j), "--delimited", "false"], None).code,
        1
    );
    let single = d.join("single.jelly");
    ok(
        &[
            "rdf",
            "to-jelly",
            s(&src),
            "--frame-per",
            "input",
            "--delimited=false",
            "-o",
            s(&single),
        ],
        None,
    );
    ok(
        &[
            "rdf",
            "validate",
            s(&single),
            "--delimited",
            "false",
            "--compare-to-rdf-file",
            s(&src),
        ],
        None,
    );
    ok(&["rdf", "validate", s(&single)], None);
}

#[test]
fn validate_rejects_spec_violations() {
    // A negative case of the conformance suite: repeated term in a quoted triple.
    let suite = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/jelly-conformance/rdf/from_jelly");
    let mut checked = 0;
    for cat in ["triples_rdf_1_1", "quads_rdf_1_1"] {
        for n in ["neg_001", "neg_002"] {
            let p = suite.join(cat).join(n).join("in.jelly");
            if p.exists() {
                let r = jelly(&["rdf", "validate", s(&p)], None);
                assert_eq!(r.code, 1, "{}: {}", p.display(), r.stderr);
                checked += 1;
            }
        }
    }
    assert!(checked >= 2);
}

#[test]
fn conformance_command_writes_earl() {
    let d = tmp("conformance");
    let suite = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/jelly-conformance");
    let earl = d.join("reports/earl.ttl");
    let r = ok(
        &[
            "conformance",
            "--suite",
            s(&suite),
            "--earl",
            s(&earl),
            "--out-dir",
            s(&d.join("out")),
        ],
        None,
    );
    assert_eq!(
        r.out().trim(),
        "from_jelly: 110/110 passed, to_jelly: 77/77 passed"
    );
    let text = std::fs::read_to_string(&earl).unwrap();
    assert_eq!(text.matches("a earl:Assertion").count(), 187);
    assert!(text.contains("^^xsd:dateTime"));
    let bad = jelly(&["conformance", "--suite", s(&d)], None);
    assert_eq!(bad.code, 2);
}

/// `--per-frame` entries are written as frames are read (not collected), so a stream
/// that breaks partway still gets the entries of the frames before the break, in valid
/// JSON or YAML, and the error with exit 1.
#[test]
fn inspect_per_frame_reports_frames_before_an_error() {
    let d = tmp("inspect-partial");
    let j = nanopubs_jelly(&d);
    let nframes = frames(&j).len();
    let whole = std::fs::read(&j).unwrap();
    // The stream, then the length prefix of a frame whose bytes never come.
    let mut broken = whole.clone();
    broken.extend_from_slice(&[0x40, 0x0a]);
    let r = jelly(
        &["rdf", "inspect", "--per-frame", "--json", "-"],
        Some(&broken),
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!("frame {nframes} (byte ")),
        "{}",
        r.stderr
    );
    let v: serde_json::Value = serde_json::from_slice(&r.stdout).expect("valid JSON");
    let detail = v["frames_detail"].as_array().expect("frames_detail");
    assert_eq!(detail.len(), nframes);
    assert_eq!(v["frames"], nframes);
    let y = jelly(&["rdf", "inspect", "--per-frame", "-"], Some(&broken));
    assert_eq!(y.code, 1, "{}", y.stderr);
    assert_eq!(
        y.out().matches("  - index: ").count(),
        nframes,
        "{}",
        y.out()
    );
    // A stream that is whole gives the same entries and exit 0.
    let good = ok(
        &["rdf", "inspect", "--per-frame", "--json", "-"],
        Some(&whole),
    );
    let g: serde_json::Value = serde_json::from_slice(&good.stdout).expect("valid JSON");
    assert_eq!(g["frames_detail"], v["frames_detail"]);
}

// ---- hand-built streams ------------------------------------------------------------

/// A message of length-delimited fields.
fn fields(fs: &[(u32, Vec<u8>)]) -> Vec<u8> {
    let mut b = Vec::new();
    for (f, v) in fs {
        jelly_proto::wire::put_bytes_field(&mut b, *f, v);
    }
    b
}

/// A frame of rows, each `(row field, body)`.
fn frame_of(rows: &[(u32, Vec<u8>)]) -> Vec<u8> {
    let rows: Vec<(u32, Vec<u8>)> = rows
        .iter()
        .map(|r| (1, fields(std::slice::from_ref(r))))
        .collect();
    fields(&rows)
}

/// Delimited concatenation of frames.
fn delimited(frames: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for f in frames {
        jelly_proto::wire::put_varint(&mut out, f.len() as u64);
        out.extend_from_slice(f);
    }
    out
}

/// `RdfIri{name_id}`.
fn iri(name_id: u64) -> Vec<u8> {
    let mut b = Vec::new();
    jelly_proto::wire::put_uint_field(&mut b, 2, name_id);
    b
}

/// Options (TRIPLES, name table 8, `version`), three names and `s p o`, with a
/// namespace declaration before the triple when `namespace`.
fn small_frame(version: u64, namespace: bool) -> Vec<u8> {
    let mut o = Vec::new();
    jelly_proto::wire::put_uint_field(&mut o, 2, 1);
    jelly_proto::wire::put_uint_field(&mut o, 9, 8);
    jelly_proto::wire::put_uint_field(&mut o, 15, version);
    let mut rows = vec![(1, o)];
    for n in ["http://ex.org/s", "http://ex.org/p", "http://ex.org/o"] {
        rows.push((9, fields(&[(2, n.as_bytes().to_vec())])));
    }
    if namespace {
        rows.push((6, fields(&[(1, b"ex".to_vec()), (2, iri(1))])));
    }
    rows.push((2, fields(&[(1, iri(1)), (5, iri(2)), (9, iri(3))])));
    frame_of(&rows)
}

/// The only position of `needle` in `hay`.
fn only_pos(hay: &[u8], needle: &[u8]) -> usize {
    let at: Vec<usize> = (0..=hay.len() - needle.len())
        .filter(|&i| hay[i..].starts_with(needle))
        .collect();
    assert_eq!(at.len(), 1, "{needle:02x?} in {hay:02x?}");
    at[0]
}

/// A frame length prefix of 10 bytes that overflows 64 bits is refused by inspect as
/// by the other verbs (it used to wrap to a length of 0 there: an empty frame).
#[test]
fn inspect_refuses_a_frame_length_over_64_bits() {
    let first = delimited(&[small_frame(1, false)]);
    let mut stream = first.clone();
    stream.extend_from_slice(&[0x80; 9]);
    stream.push(0x02);
    stream.extend_from_slice(&first);
    let at = first.len();
    for verb in ["inspect", "validate", "from-jelly"] {
        let r = jelly(&["rdf", verb, "-"], Some(&stream));
        assert_eq!(r.code, 1, "{verb}: {}", r.stderr);
        assert!(
            r.stderr.contains(&format!(
                "frame 1 (byte {at}): malformed protobuf: malformed varint at byte {at}"
            )),
            "{verb}: {}",
            r.stderr
        );
    }
}

/// Metadata keys are proto `string`s: one that is not UTF-8 is an error naming the
/// frame and the byte, in inspect (which counted the frame as one without metadata)
/// and in validate (which did not read metadata). Values may be any bytes.
#[test]
fn metadata_keys_must_be_utf8() {
    let meta = |key: &[u8], value: &[u8]| {
        fields(&[(15, fields(&[(1, key.to_vec()), (2, value.to_vec())]))])
    };
    let good = delimited(&[small_frame(1, false), meta(b"k", b"\xff\xfe")]);
    let y = ok(&["rdf", "inspect", "-"], Some(&good)).out();
    assert!(y.contains("frames_with_metadata: 1\n"), "{y}");
    ok(&["rdf", "validate", "-"], Some(&good));
    // The bad key after the rows of its frame (which decode first).
    let first = delimited(&[small_frame(1, false)]);
    let mut second = small_frame(1, false);
    second.extend_from_slice(&meta(b"k\xc3", b"v"));
    let bad = delimited(&[small_frame(1, false), second.clone()]);
    // Frame 1's message starts after frame 0 and its own length prefix.
    let frame_at = first.len() + jelly_proto::wire::varint_len(second.len() as u64);
    // The byte at fault: the one after `k`.
    let key_at = only_pos(&bad, b"k\xc3") + 1;
    for verb in ["inspect", "validate"] {
        let r = jelly(&["rdf", verb, "-"], Some(&bad));
        assert_eq!(r.code, 1, "{verb}: {}", r.stderr);
        assert!(
            r.stderr.contains(&format!(
                "frame 1 (byte {frame_at}): malformed protobuf: invalid UTF-8 in string field at byte {key_at}"
            )),
            "{verb}: {}",
            r.stderr
        );
    }
}

/// Namespace declarations came with version 2: validate reports one in a version-1
/// stream; decoding accepts it (a stream only mislabelled is still read).
#[test]
fn validate_refuses_namespaces_in_version_1() {
    let v1 = delimited(&[small_frame(1, true)]);
    let r = jelly(&["rdf", "validate", "-"], Some(&v1));
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("frame 0:row 4 (byte ")
            && r.stderr
                .contains("namespace declaration in a version 1 stream"),
        "{}",
        r.stderr
    );
    ok(
        &["rdf", "validate", "-"],
        Some(&delimited(&[small_frame(2, true)])),
    );
    let nt = ok(&["rdf", "from-jelly", "--out-format", "nt", "-"], Some(&v1)).out();
    assert_eq!(
        nt,
        "<http://ex.org/s> <http://ex.org/p> <http://ex.org/o> .\n"
    );
}

/// Inspect decides the framing from three bytes even when its input arrives in
/// smaller pieces (a pipe whose first read returns two bytes). The pause only makes
/// the short first read likely; without it the test still checks the result.
#[test]
fn inspect_detects_framing_from_a_short_first_read() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let stream = delimited(&[small_frame(1, false), small_frame(1, false)]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_jelly"))
        .args(["-q", "rdf", "inspect", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let data = stream.clone();
    let writer = std::thread::spawn(move || {
        stdin.write_all(&data[..2]).unwrap();
        stdin.flush().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
        stdin.write_all(&data[2..]).unwrap();
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    let y = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(y.contains("delimited: true\n"), "{y}");
    assert!(y.contains("frames: 2\n"), "{y}");
    assert!(y.contains(&format!("bytes: {}\n", stream.len())), "{y}");
}

/// `n` N-Triples statements, a blank node subject every tenth.
fn many_statements(n: usize) -> String {
    (0..n)
        .map(|i| {
            let subject = if i % 10 == 0 {
                format!("_:b{i}")
            } else {
                format!("<http://ex.org/s{i}>")
            };
            format!("{subject} <http://ex.org/p{}> \"v{i}\" .\n", i % 7)
        })
        .collect()
}

/// The ordered comparison's answers: the first statement that differs, or the counts
/// when one side is a prefix of the other; blank nodes mapped one to one across
/// frames; only the frames asked for.
#[test]
fn ordered_comparison_messages() {
    let d = tmp("validate-ordered-messages");
    let text = many_statements(300);
    let src = d.join("s.nt");
    std::fs::write(&src, &text).unwrap();
    let j = d.join("s.jelly");
    ok(
        &[
            "rdf",
            "to-jelly",
            s(&src),
            "--rows-per-frame",
            "50",
            "-o",
            s(&j),
        ],
        None,
    );
    let lines: Vec<&str> = text.lines().collect();
    let write = |name: &str, lines: &[&str]| {
        let p = d.join(name);
        std::fs::write(&p, lines.join("\n") + "\n").unwrap();
        p
    };
    let validate = |other: &std::path::Path, extra: &[&str]| {
        let mut args = vec!["rdf", "validate", s(&j), "--compare-to-rdf-file", s(other)];
        args.extend_from_slice(&["--compare-ordered", "true"]);
        args.extend_from_slice(extra);
        jelly(&args, None)
    };
    let fails_with = |r: Run, needle: &str| {
        assert_eq!(r.code, 1, "{}", r.stderr);
        assert!(r.stderr.contains(needle), "want {needle:?}: {}", r.stderr);
    };
    let fewer = write("fewer.nt", &lines[..299]);
    fails_with(
        validate(&fewer, &[]),
        "differs from the RDF file: 300 statements, 299 expected",
    );
    let mut more_lines = lines.clone();
    more_lines.push("<http://ex.org/x> <http://ex.org/p> <http://ex.org/o> .");
    let more = write("more.nt", &more_lines);
    fails_with(
        validate(&more, &[]),
        "differs from the RDF file: 300 statements, 301 expected",
    );
    let mut swapped = lines.clone();
    swapped.swap(121, 122);
    let swapped = write("swapped.nt", &swapped);
    fails_with(
        validate(&swapped, &[]),
        "statement 121: got `<http://ex.org/s121> <http://ex.org/p2> \"v121\" .`, expected `<http://ex.org/s122>",
    );
    // Labels may differ, but one to one: _:b0 cannot stand for two nodes.
    let relabelled: Vec<String> = lines.iter().map(|l| l.replace("_:b", "_:other")).collect();
    let relabelled: Vec<&str> = relabelled.iter().map(String::as_str).collect();
    ok(
        &[
            "rdf",
            "validate",
            s(&j),
            "--compare-to-rdf-file",
            s(&write("relabelled.nt", &relabelled)),
            "--compare-ordered",
            "true",
        ],
        None,
    );
    let mut merged = lines.clone();
    merged[10] = "_:b0 <http://ex.org/p3> \"v10\" .";
    let merged = write("merged.nt", &merged);
    fails_with(validate(&merged, &[]), "statement 10:");
    // Frames 1 and 2 only.
    let sizes: Vec<usize> = frames(&j).iter().map(Vec::len).collect();
    assert!(sizes.len() > 3, "{sizes:?}");
    let (from, to) = (sizes[0], sizes[0] + sizes[1] + sizes[2]);
    let middle = write("middle.nt", &lines[from..to]);
    let r = validate(&middle, &["--compare-frame-indices", "1..3"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    fails_with(
        validate(&middle, &["--compare-frame-indices", "1..4"]),
        &format!(
            "{} statements, {} expected",
            to - from + sizes[3],
            to - from
        ),
    );
    // A syntax error in the RDF file is told with its place.
    let mut broken = lines.clone();
    broken[200] = "<http://ex.org/s> <http://ex.org/p> .";
    fails_with(
        validate(&write("broken.nt", &broken), &[]),
        "broken.nt:201:",
    );
}

/// An unordered comparison holds both sides: at most `--max-statements` each, past
/// which it stops with an error naming the count and the option.
#[test]
fn unordered_comparison_holds_at_most_max_statements() {
    let d = tmp("validate-held-limit");
    let src = d.join("s.nt");
    std::fs::write(&src, many_statements(300)).unwrap();
    let j = d.join("s.jelly");
    ok(&["rdf", "to-jelly", s(&src), "-o", s(&j)], None);
    let r = jelly(
        &[
            "rdf",
            "validate",
            s(&j),
            "--compare-to-rdf-file",
            s(&src),
            "--max-statements",
            "299",
        ],
        None,
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("s.nt: more than 299 statements")
            && r.stderr.contains("--max-statements"),
        "{}",
        r.stderr
    );
    ok(
        &[
            "rdf",
            "validate",
            s(&j),
            "--compare-to-rdf-file",
            s(&src),
            "--max-statements",
            "300",
        ],
        None,
    );
    // The stream's side: only the frames compared count.
    let part = d.join("part.nt");
    std::fs::write(&part, many_statements(10)).unwrap();
    let r = jelly(
        &[
            "rdf",
            "validate",
            s(&j),
            "--compare-to-rdf-file",
            s(&part),
            "--max-statements",
            "100",
        ],
        None,
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("s.jelly:frame 0: more than 100 statements"),
        "{}",
        r.stderr
    );
    // Ordered comparisons hold nothing, so the limit does not apply.
    ok(
        &[
            "rdf",
            "validate",
            s(&j),
            "--compare-to-rdf-file",
            s(&src),
            "--compare-ordered",
            "true",
            "--max-statements",
            "1",
        ],
        None,
    );
}

/// A stream's first row is its options row. Frames with no rows before it are allowed
/// (the spec gives frames no meaning), but a stream of nothing else has no options:
/// every verb refuses it, as validate and the patch verbs did, rather than read it as
/// an empty dataset; and past 1024 such frames (any run of zero bytes reads as empty
/// frames) the stream is refused without reading on.
#[test]
fn streams_of_empty_frames_have_no_options_row() {
    let d = tmp("empty-frames");
    let empty = d.join("empty-frames.jelly");
    std::fs::write(&empty, [0u8; 10]).unwrap();
    for verb in [
        &["rdf", "from-jelly"][..],
        &["rdf", "inspect"],
        &["rdf", "inspect", "--per-frame"],
        &["rdf", "validate"],
    ] {
        let mut args = verb.to_vec();
        args.push(s(&empty));
        let r = jelly(&args, None);
        assert_eq!(r.code, 1, "{args:?}: {}", r.stderr);
        assert!(
            r.stderr
                .contains("the stream has no options row (10 frame(s), none with a row)"),
            "{args:?}: {}",
            r.stderr
        );
    }
    // Zeros without end: refused at the 1025th frame, not read to the end.
    let zeros = d.join("zeros.jelly");
    std::fs::write(&zeros, vec![0u8; 1 << 20]).unwrap();
    for verb in [
        &["rdf", "from-jelly"][..],
        &["rdf", "inspect"],
        &["rdf", "validate"],
        &["rdf", "transcode"],
        &["patch", "inspect"],
        &["patch", "validate", "--in-format", "jellyp"],
        &["patch", "from-jelly"],
    ] {
        let mut args = verb.to_vec();
        args.push(s(&zeros));
        let r = jelly(&args, None);
        assert_eq!(r.code, 1, "{args:?}: {}", r.stderr);
        assert!(
            r.stderr
                .contains(":frame 1024 (byte 1025): no options row in the first 1024 frames"),
            "{args:?}: {}",
            r.stderr
        );
    }
    // A few empty frames before the options row: a valid stream.
    let src = d.join("s.nt");
    std::fs::write(&src, many_statements(5)).unwrap();
    let j = d.join("s.jelly");
    ok(&["rdf", "to-jelly", s(&src), "-o", s(&j)], None);
    let mut padded = vec![0u8; 3];
    padded.extend(std::fs::read(&j).unwrap());
    let p = d.join("padded.jelly");
    std::fs::write(&p, padded).unwrap();
    let r = ok(&["rdf", "from-jelly", s(&p), "--out-format", "nt"], None);
    assert_eq!(parse(&r.stdout).len(), 5);
    ok(&["rdf", "validate", s(&p)], None);
    let r = ok(&["rdf", "inspect", s(&p)], None);
    assert!(r.out().contains("frames: 4"), "{}", r.out());
    // 1,500 empty frames first: refused by default with the flag to raise it, read
    // with --max-frames-before-options.
    let mut padded = vec![0u8; 1500];
    padded.extend(std::fs::read(&j).unwrap());
    std::fs::write(&p, padded).unwrap();
    let r = jelly(&["rdf", "from-jelly", s(&p)], None);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("no options row in the first 1024 frames")
            && r.stderr.contains("--max-frames-before-options N"),
        "{}",
        r.stderr
    );
    let r = ok(
        &[
            "rdf",
            "from-jelly",
            s(&p),
            "--out-format",
            "nt",
            "--max-frames-before-options",
            "1500",
        ],
        None,
    );
    assert_eq!(parse(&r.stdout).len(), 5);
    let r = jelly(
        &[
            "rdf",
            "validate",
            s(&p),
            "--max-frames-before-options",
            "1499",
        ],
        None,
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("no options row in the first 1499 frames"),
        "{}",
        r.stderr
    );
}
