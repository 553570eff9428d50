//! `jelly-text` through the real binary: from-jelly prints frames, to-jelly reads them
//! back byte for byte, errors name file, line and column.

mod cli_support;

use cli_support::*;

const NANOPUBS: &str = "nanopubs-fair-pkd/nanopubs-fair-pkd.nq";

#[test]
fn binary_to_text_to_binary_is_byte_identical() {
    let d = tmp("jelly-text-roundtrip");
    let src = head(NANOPUBS, 600, &d, "np.nq");
    let jf = d.join("np.jelly");
    ok(
        &[
            "rdf",
            "to-jelly",
            s(&src),
            "--rows-per-frame",
            "50",
            "--to",
            s(&jf),
        ],
        None,
    );
    // By the extension of --to, and by --out-format to stdout: the same text.
    let txt = d.join("np.jelly.txt");
    ok(&["rdf", "from-jelly", s(&jf), "--to", s(&txt)], None);
    let stdout = ok(
        &["rdf", "from-jelly", s(&jf), "--out-format", "jelly-text"],
        None,
    );
    let text = std::fs::read_to_string(&txt).unwrap();
    assert_eq!(text.as_bytes(), &stdout.stdout[..]);
    assert!(
        text.starts_with("# Frame 0\nrows {\n  options {\n"),
        "{text:.200}"
    );
    assert!(text.contains("\n# Frame 1\nrows {\n"));
    // Back: by the extension of the input, with the warning; by --in-format from stdin.
    let back = d.join("back.jelly");
    let r = ok(&["rdf", "to-jelly", s(&txt), "--to", s(&back)], None);
    assert!(r.stderr.contains("not stable"), "{}", r.stderr);
    assert_eq!(std::fs::read(&back).unwrap(), std::fs::read(&jf).unwrap());
    let r = ok(
        &["rdf", "to-jelly", "--in-format", "jelly-text", "--quiet"],
        Some(text.as_bytes()),
    );
    assert!(r.stderr.is_empty(), "{}", r.stderr);
    assert_eq!(r.stdout, std::fs::read(&jf).unwrap());
}

#[test]
fn take_frames_prints_the_chosen_frames_with_their_indices() {
    let d = tmp("jelly-text-take");
    let src = head(NANOPUBS, 300, &d, "np.nq");
    let jf = d.join("np.jelly");
    ok(
        &[
            "rdf",
            "to-jelly",
            s(&src),
            "--rows-per-frame",
            "40",
            "--to",
            s(&jf),
        ],
        None,
    );
    let r = ok(
        &[
            "rdf",
            "from-jelly",
            s(&jf),
            "--out-format",
            "jelly-text",
            "--take-frames",
            "2..4",
        ],
        None,
    );
    let text = r.out();
    let markers: Vec<&str> = text.lines().filter(|l| l.starts_with("# Frame")).collect();
    assert_eq!(markers, ["# Frame 2", "# Frame 3"]);
}

#[test]
fn hand_written_text_makes_a_stream_even_an_invalid_one() {
    // A triple before any options row: invalid Jelly, but the text says so.
    let text = "# Frame 0\nrows { triple { s_bnode: \"a\" p_bnode: \"b\" o_bnode: \"c\" } }\n";
    let r = ok(
        &["rdf", "to-jelly", "--in-format", "jelly-text", "-q"],
        Some(text.as_bytes()),
    );
    let mut expected = vec![13, 0x0a, 11, 0x12, 9];
    expected.extend_from_slice(&[0x12, 1, b'a', 0x32, 1, b'b', 0x52, 1, b'c']);
    assert_eq!(r.stdout, expected);
    // Non-delimited: the frames' bytes back to back (one frame of all their rows).
    let two = format!("{text}# Frame 1\nrows {{ graph_end {{}} }}\n");
    let r = ok(
        &[
            "rdf",
            "to-jelly",
            "--in-format",
            "jelly-text",
            "-q",
            "--delimited=false",
        ],
        Some(two.as_bytes()),
    );
    assert_eq!(r.stdout.len(), 13 + 4);
    assert_eq!(&r.stdout[13..], &[0x0a, 2, 0x2a, 0]);
}

#[test]
fn errors_name_file_line_and_column() {
    let d = tmp("jelly-text-errors");
    let bad = d.join("bad.jelly.txt");
    std::fs::write(
        &bad,
        "# Frame 0\nrows {}\n# Frame 1\nrows { name { id: -1 } }\n",
    )
    .unwrap();
    let r = jelly(&["rdf", "to-jelly", s(&bad), "-q"], None);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("bad.jelly.txt:4:19: expected a number, found `-`"),
        "{}",
        r.stderr
    );
    // A text frame over the reader's frame limit is refused.
    let big = d.join("big.jelly.txt");
    std::fs::write(
        &big,
        format!("rows {{ name {{ value: \"{}\" }} }}\n", "x".repeat(5000)),
    )
    .unwrap();
    let r = jelly(
        &["rdf", "to-jelly", s(&big), "-q", "--max-frame-size", "1000"],
        None,
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("over 1000 bytes"), "{}", r.stderr);
    // Flags that encode statements do not apply; mixed inputs are refused.
    usage_error(
        &["rdf", "to-jelly", s(&bad), "--rows-per-frame", "3"],
        "--rows-per-frame do(es) not apply to jelly-text input",
    );
    let nt = d.join("x.nt");
    std::fs::write(&nt, "").unwrap();
    usage_error(
        &["rdf", "to-jelly", s(&bad), s(&nt)],
        "some inputs are jelly-text",
    );
    // A frame that is no protobuf message has no text form.
    let r = jelly(
        &["rdf", "from-jelly", "--out-format", "jelly-text"],
        Some(&[3, 0x0a, 9, 0]),
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("frame 0: truncated message at byte"),
        "{}",
        r.stderr
    );
}

#[test]
fn help_lists_jelly_text() {
    for verb in ["to-jelly", "from-jelly"] {
        let r = ok(&["rdf", verb, "--help"], None);
        assert!(r.out().contains("jelly-text"), "{verb}: {}", r.out());
    }
}

#[test]
fn the_verbs_reading_jelly_take_jelly_text_files() {
    let d = tmp("jelly-text-verbs");
    let src = head(NANOPUBS, 200, &d, "np.nq");
    let jf = d.join("np.jelly");
    ok(&["rdf", "to-jelly", s(&src), "--to", s(&jf)], None);
    let txt = d.join("np.jelly.txt");
    ok(&["rdf", "from-jelly", s(&jf), "--to", s(&txt)], None);
    // The same answers as for the binary stream.
    for verb in [
        &["rdf", "from-jelly"][..],
        &["rdf", "transcode"],
        &["rdf", "inspect"],
        &["rdf", "validate"],
    ] {
        let run = |input: &std::path::Path| {
            let mut args = verb.to_vec();
            args.extend([s(input), "-q"]);
            ok(&args, None).stdout
        };
        // Text answers name the input: the text file's name, put back to the binary's.
        let text_answer = match String::from_utf8(run(&txt)) {
            Ok(t) => t.replace("np.jelly.txt", "np.jelly").into_bytes(),
            Err(binary) => binary.into_bytes(),
        };
        assert!(text_answer == run(&jf), "{verb:?}");
    }
    // A crafted invalid stream: validate names the row.
    let bad = d.join("bad.jelly.txt");
    std::fs::write(
        &bad,
        "# Frame 0\nrows { options { physical_type: PHYSICAL_STREAM_TYPE_TRIPLES version: 1 max_name_table_size: 8 } }\n\
         rows { triple { s_bnode: \"a\" s_bnode: \"b\" p_bnode: \"p\" o_bnode: \"o\" } }\n",
    )
    .unwrap();
    let r = jelly(&["rdf", "validate", s(&bad)], None);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("not stable"), "{}", r.stderr);
    assert!(
        r.stderr.contains("frame 0:row 1") && r.stderr.contains("more than one term field"),
        "{}",
        r.stderr
    );
    // A syntax error names the line and column.
    std::fs::write(&bad, "rows { options {\n version: x } }\n").unwrap();
    let r = jelly(&["rdf", "inspect", s(&bad), "-q"], None);
    assert_eq!(r.code, 1, "{}", r.stderr);
    // Placed in the text only: the binary stream's frame and byte would mislead.
    assert!(
        r.stderr
            .contains("bad.jelly.txt:2:11: jelly-text: expected a number")
            && !r.stderr.contains("I/O error")
            && !r.stderr.contains("(byte"),
        "{}",
        r.stderr
    );
}

/// The verbs that write binary Jelly refuse an output named as jelly-text (a later
/// reader would take it for text), and say how to get the text.
#[test]
fn binary_output_named_as_jelly_text_is_refused() {
    let d = tmp("named-text");
    let out = d.join("out.jelly.txt");
    let nt = d.join("in.nt");
    std::fs::write(&nt, "<http://s> <http://p> <http://o> .\n").unwrap();
    let r = jelly(&["rdf", "to-jelly", s(&nt), "-o", s(&out)], None);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("is named as jelly-text") && r.stderr.contains("--out-format jelly-text"),
        "{}",
        r.stderr
    );
    assert!(!out.exists());
}
