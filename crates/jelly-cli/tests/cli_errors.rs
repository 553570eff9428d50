//! Bad input and usage through the real binary: nonzero exit, a clear one-line
//! message, never a panic (the helper fails the test if "panicked" reaches stderr).

mod cli_support;

use cli_support::*;

const NANOPUBS: &str = "nanopubs-fair-pkd/nanopubs-fair-pkd.nq";

fn small_jelly(d: &std::path::Path) -> std::path::PathBuf {
    let src = head(NANOPUBS, 300, d, "np.nq");
    let j = d.join("np.jelly");
    ok(&["rdf", "to-jelly", s(&src), "-o", s(&j)], None);
    j
}

#[test]
fn truncated_jelly_is_invalid_with_frame_position() {
    let d = tmp("truncated");
    let j = small_jelly(&d);
    let bytes = std::fs::read(&j).unwrap();
    let cut = d.join("cut.jelly");
    for len in [1, 7, bytes.len() / 2, bytes.len() - 1] {
        std::fs::write(&cut, &bytes[..len]).unwrap();
        for verb in ["from-jelly", "inspect", "validate", "transcode"] {
            let r = jelly(&["rdf", verb, s(&cut)], None);
            assert_eq!(r.code, 1, "{verb} on {len} bytes: {}", r.stderr);
            assert!(r.stderr.starts_with("jelly: "), "{}", r.stderr);
            assert!(r.stderr.contains("cut.jelly"), "{}", r.stderr);
            assert_eq!(r.stderr.trim_end().lines().count(), 1, "{}", r.stderr);
        }
    }
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let r = jelly(&["rdf", "from-jelly", s(&cut)], None);
    assert!(r.stderr.contains(":frame "), "{}", r.stderr);
}

#[test]
fn corrupted_bytes_never_panic() {
    let d = tmp("corrupt");
    let j = small_jelly(&d);
    let bytes = std::fs::read(&j).unwrap();
    let bad = d.join("bad.jelly");
    for (i, pos) in [3usize, 10, 40, 100, 500, 1000].into_iter().enumerate() {
        let mut b = bytes.clone();
        let p = pos.min(b.len() - 1);
        b[p] ^= 0x5a + i as u8;
        std::fs::write(&bad, &b).unwrap();
        let r = jelly(&["rdf", "validate", s(&bad)], None);
        assert!(r.code == 0 || r.code == 1, "{}", r.stderr);
        let r = jelly(&["rdf", "from-jelly", s(&bad)], None);
        assert!(r.code == 0 || r.code == 1, "{}", r.stderr);
    }
}

#[test]
fn wrong_format_is_explained() {
    let d = tmp("wrong-format");
    let src = head(NANOPUBS, 20, &d, "np.nq");
    let r = jelly(&["rdf", "from-jelly", s(&src)], None);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("is this a Jelly file?"), "{}", r.stderr);
    // A Jelly file given to to-jelly.
    let j = small_jelly(&d);
    let r = jelly(&["rdf", "to-jelly", s(&j)], None);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("transcode"), "{}", r.stderr);
    // Turtle read as N-Triples: syntax error with line and column.
    let ttl = d.join("x.ttl");
    std::fs::write(&ttl, "@prefix ex: <http://e/> .\nex:a ex:b ex:c .\n").unwrap();
    let r = jelly(&["rdf", "to-jelly", s(&ttl), "--in-format", "nt"], None);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("x.ttl:1:"), "{}", r.stderr);
    // Unknown extension.
    let odd = d.join("data.xyz");
    std::fs::write(&odd, "x").unwrap();
    let r = jelly(&["rdf", "to-jelly", s(&odd)], None);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("--in-format"), "{}", r.stderr);
}

#[test]
fn invalid_utf8_is_reported_with_position() {
    let d = tmp("utf8");
    let nt = d.join("bad.nt");
    std::fs::write(
        &nt,
        b"<http://a> <http://b> \"ok\" .\n<http://a> <http://b> \"\xff\xfe\" .\n",
    )
    .unwrap();
    let r = jelly(&["rdf", "to-jelly", s(&nt)], None);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("bad.nt:2:"), "{}", r.stderr);
    // Our tolerant parser (RDF-star mode) reports it too.
    let r = jelly(&["rdf", "to-jelly", s(&nt), "--opt.rdf-star"], None);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("bad.nt:2:") && r.stderr.contains("UTF-8"),
        "{}",
        r.stderr
    );
    let ttl = d.join("bad.ttl");
    std::fs::write(&ttl, b"<http://a> <http://b> \"\xc3\x28\" .\n").unwrap();
    let r = jelly(&["rdf", "to-jelly", s(&ttl)], None);
    assert_eq!(r.code, 1, "{}", r.stderr);
}

#[test]
fn empty_files() {
    let d = tmp("empty");
    let e = d.join("empty.jelly");
    std::fs::write(&e, b"").unwrap();
    for verb in ["from-jelly", "inspect", "validate", "transcode"] {
        let r = jelly(&["rdf", verb, s(&e)], None);
        assert_eq!(r.code, 1, "{verb}: {}", r.stderr);
        assert!(r.stderr.contains("empty"), "{verb}: {}", r.stderr);
        assert!(r.stderr.contains("empty.jelly"), "{verb}: {}", r.stderr);
    }
    // Several empty inputs to transcode are all named.
    let e2 = d.join("empty2.jelly");
    std::fs::write(&e2, b"").unwrap();
    let r = jelly(&["rdf", "transcode", s(&e), s(&e2)], None);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("empty.jelly") && r.stderr.contains("empty2.jelly"),
        "{}",
        r.stderr
    );
    let r = jelly(&["rdf", "from-jelly"], Some(b""));
    assert_eq!(r.code, 1);
    // An empty RDF file is a valid empty graph: a stream with only the options.
    let nt = d.join("empty.nt");
    std::fs::write(&nt, b"").unwrap();
    let j = ok(&["rdf", "to-jelly", s(&nt)], None).stdout;
    assert!(!j.is_empty());
    let out = ok(&["rdf", "from-jelly"], Some(&j));
    assert!(out.stdout.is_empty());
}

#[test]
fn usage_and_io_errors_exit_2() {
    let d = tmp("usage");
    let r = jelly(&["rdf", "from-jelly", s(&d.join("missing.jelly"))], None);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("missing.jelly"), "{}", r.stderr);
    assert_eq!(jelly(&["rdf", "bogus"], None).code, 2);
    // A folder, or a file that is not there, is named as such, not as a name whose
    // format is unknown.
    for args in [
        vec!["rdf", "to-jelly", s(&d)],
        vec!["publish", "t", s(&d)],
        vec!["patch", "diff", s(&d), s(&d)],
        vec!["rdf", "validate", "--compare-to-rdf-file", s(&d)],
    ] {
        let mut args = args;
        if args[1] == "validate" {
            args.insert(2, "-");
        }
        let r = jelly(&args, Some(b""));
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(
            r.stderr.contains("is a directory"),
            "{args:?}: {}",
            r.stderr
        );
    }
    let r = jelly(&["rdf", "to-jelly", s(&d.join("missing"))], None);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("No such file"), "{}", r.stderr);
    assert_eq!(
        jelly(&["rdf", "to-jelly", "--opt.physical-type", "trees"], None).code,
        2
    );
    let r = jelly(&["rdf", "from-jelly", "--take-frames", "x..y"], Some(b""));
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("frame range"), "{}", r.stderr);
    // stdin cannot be both the stream and what it is compared with.
    for args in [
        vec!["rdf", "validate", "-", "--compare-to-rdf-file", "-"],
        vec!["rdf", "validate", "--compare-to-rdf-file", "-"],
        vec!["rdf", "to-jelly", "-", "-"],
    ] {
        let r = jelly(&args, Some(b""));
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains("only once"), "{args:?}: {}", r.stderr);
    }
    let r = jelly(
        &[
            "rdf",
            "to-jelly",
            "--in-format",
            "nt",
            "--opt.max-name-table-size",
            "4",
        ],
        Some(b""),
    );
    assert_eq!(r.code, 2);
    let r = jelly(
        &[
            "rdf",
            "to-jelly",
            "--in-format",
            "nt",
            "-o",
            s(&d.join("no/such/dir/x.jelly")),
        ],
        Some(b""),
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    // A mirror that is not URL/topics/NAME, or not http(s): exit 2 before serving.
    for bad in [
        "http://127.0.0.1:1/weather",
        "ftp://h:1/topics/w",
        "http://127.0.0.1:1/topics/w?x=1",
    ] {
        let r = jelly(&["serve", "--listen", "127.0.0.1:0", "--mirror", bad], None);
        assert_eq!(r.code, 2, "{bad}: {}", r.stderr);
        assert!(r.stderr.contains("mirror"), "{}", r.stderr);
        if bad.contains('?') {
            assert!(r.stderr.contains("has a query"), "{}", r.stderr);
        }
    }
    // A --set of no known key, a bad value, or no `=`: exit 2 naming it.
    for (set, needle) in [
        ("max_topic=5", "unknown field `max_topic`"),
        ("durability=sometimes", "sometimes"),
        ("max_topics", "expected KEY=VALUE"),
        ("max_topics.x=1", "expected usize\nin `max_topics`"),
        ("max_topics=-1", "max_topics"),
        (
            "max_body_bytes=0",
            "max_body_bytes = 0 would refuse every publish",
        ),
        ("segment_bytes=0", "segment_bytes = 0"),
    ] {
        usage_error(&["serve", "--listen", "127.0.0.1:0", "--set", set], needle);
    }
    // A demo rate at which the demo would stall (or run away).
    for rate in ["0", "-1", "1e9", "nan"] {
        let flag = format!("--demo-rate={rate}");
        usage_error(
            &["serve", "--listen", "127.0.0.1:0", "--demo", &flag],
            "--demo-rate",
        );
    }
    // A --mirror-ca that holds no certificate: exit 2 naming the file.
    usage_error(
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--mirror",
            "https://h:1/topics/w",
            "--mirror-ca",
            "Cargo.toml",
        ],
        "Cargo.toml",
    );
    // A --server that is no http(s) URL is a usage error at once: subscribe would
    // otherwise retry a connection that can never be made.
    for (args, needle) in [
        (
            &[
                "subscribe",
                "t",
                "--no-follow",
                "--server",
                "localhost:8686",
            ][..],
            "did you mean http://localhost:8686",
        ),
        (&["publish", "t", "--server", "htp://h:1"][..], "not htp:"),
        (
            &["topics", "list", "--server", "127.0.0.1:1"][..],
            "did you mean http://",
        ),
        (
            &["topics", "list", "--server", "http://h:1/?x=1"][..],
            "without a query",
        ),
    ] {
        usage_error(args, needle);
    }
}

#[test]
fn statement_that_does_not_fit_the_stream() {
    let d = tmp("nofit");
    let src = head(NANOPUBS, 10, &d, "np.nq");
    let r = jelly(
        &["rdf", "to-jelly", s(&src), "--opt.physical-type", "triples"],
        None,
    );
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("np.nq") && r.stderr.contains("triples"),
        "{}",
        r.stderr
    );
    let j = small_jelly(&d);
    let r = jelly(&["rdf", "from-jelly", s(&j), "--out-format", "nt"], None);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("N-Triples"), "{}", r.stderr);
}

#[test]
fn hostile_real_world_files_never_panic() {
    let root = dataset("hostile-real-world");
    let mut seen = 0;
    for sub in ["lov", "sdw", "wikidata", "lubm"] {
        let Ok(rd) = std::fs::read_dir(root.join(sub)) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let r = jelly(&["rdf", "to-jelly", s(&p)], None);
            assert!(r.code == 0 || r.code == 1, "{}: {}", p.display(), r.stderr);
            if r.code == 1 {
                assert!(r.stderr.starts_with("jelly: "), "{}", r.stderr);
            }
            seen += 1;
        }
    }
    assert!(seen >= 5, "hostile files found: {seen}");
}

/// Every verb (each command without subcommands: `rdf to-jelly`, `topics alter`,
/// `completions`, …), as the binary prints its help: with an example and its exit codes (README's promise).
#[test]
fn help_has_examples_and_exit_codes() {
    use clap::CommandFactory;
    fn verbs(cmd: &clap::Command, path: Vec<String>, out: &mut Vec<Vec<String>>) {
        for sub in cmd.get_subcommands() {
            let mut p = path.clone();
            p.push(sub.get_name().to_string());
            if sub.has_subcommands() {
                verbs(sub, p, out);
            } else {
                out.push(p);
            }
        }
    }
    let mut all = Vec::new();
    verbs(&jelly_cli::cli::Cli::command(), Vec::new(), &mut all);
    assert!(all.len() >= 15, "{all:?}");
    for path in &all {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let r = ok(&args, None).out();
        assert!(r.contains("Example"), "{path:?}: {r}");
        assert!(r.contains("Exit codes"), "{path:?}: {r}");
    }
    let top = ok(&["--help"], None).out();
    assert!(top.contains("Exit codes:"), "{top}");
}

#[test]
fn completions() {
    for sh in ["bash", "zsh", "fish"] {
        let r = ok(&["completions", sh], None).out();
        assert!(r.contains("jelly") && r.contains("to-jelly"), "{sh}");
    }
    // A reader that has gone (`| head -1`) ends it quietly; a failed write is an I/O error.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_jelly"))
        .args(["completions", "bash"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.is_empty(), "{stderr}");
    if std::path::Path::new("/dev/full").exists() {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_jelly"))
            .args(["completions", "bash"])
            .stdout(full)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.starts_with("jelly: <stdout>: "), "{stderr}");
        assert!(!stderr.contains("internal error"), "{stderr}");
        // So does help or the version that cannot be written.
        for args in [
            &["--help"][..],
            &["--version"],
            &["version"],
            &["rdf", "to-jelly", "--help"],
        ] {
            let full = std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .unwrap();
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_jelly"))
                .args(args)
                .stdout(full)
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
            assert!(
                stderr.starts_with("jelly: <stdout>: "),
                "{args:?}: {stderr}"
            );
        }
    }
    // Help to a reader that has gone is still success, and a usage error keeps its
    // code and message.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_jelly"))
        .arg("--help")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_jelly"))
        .arg("--no-such-flag")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--no-such-flag"),
        "{out:?}"
    );
}

/// N-Triples are parsed in ~1 MiB chunks on a second thread: a syntax error far into the
/// file must still name its real line, and nothing after it is accepted.
#[test]
fn syntax_error_line_is_exact_beyond_the_first_chunk() {
    let d = tmp("late-error");
    let mut text = String::new();
    for i in 0..40_000 {
        if i == 33_333 {
            text.push_str("<http://e/s> <http://e/p> \"never closed .\n");
        } else {
            text.push_str(&format!(
                "<http://e/s{i}> <http://e/p> \"value number {i}\" .\n"
            ));
        }
    }
    assert!(
        text.len() > 2 << 20,
        "the error must sit beyond the first chunks"
    );
    let nt = d.join("late.nt");
    std::fs::write(&nt, &text).unwrap();
    let r = jelly(
        &["rdf", "to-jelly", s(&nt), "-o", s(&d.join("late.jelly"))],
        None,
    );
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("late.nt:33334:"), "{}", r.stderr);
    // The same data without the bad line converts completely, statement count intact.
    let good: String = text
        .lines()
        .filter(|l| !l.contains("never closed"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&nt, good).unwrap();
    let out = d.join("good.jelly");
    ok(&["rdf", "to-jelly", s(&nt), "-o", s(&out)], None);
    let n: usize = frames(&out).iter().map(Vec::len).sum();
    assert_eq!(n, 39_999);
}

/// RDF/XML errors name the line and column too (the parser only tells a byte offset),
/// from a file, from stdin, deep into the input, and through the readers of
/// `rdf validate --compare-to-rdf-file` and `patch diff`.
#[test]
fn rdfxml_syntax_errors_have_line_and_column() {
    let d = tmp("rdfxml-error");
    let mut xml = String::from(
        "<?xml version=\"1.0\"?>\n<rdf:RDF xmlns:rdf=\"http://www.w3.org/1999/02/22-rdf-syntax-ns#\" xmlns:ex=\"http://ex.org/\">\n",
    );
    // About 1 MB of good descriptions (lines 3 to 20002), far past what the position
    // tracker keeps, then a bad IRI on line 20003, after `   <ex:q rdf:resource=`.
    for i in 0..20_000 {
        xml.push_str(&format!(
            "<rdf:Description rdf:about=\"http://ex.org/s{i}\"><ex:p>é {i}</ex:p></rdf:Description>\n"
        ));
    }
    xml.push_str("<rdf:Description rdf:about=\"http://ex.org/z\"><ex:q rdf:resource=\"bad iri\"/></rdf:Description>\n</rdf:RDF>\n");
    let file = d.join("late.rdf");
    std::fs::write(&file, &xml).unwrap();
    let out = d.join("late.jelly");
    let r = jelly(&["rdf", "to-jelly", s(&file), "-o", s(&out)], None);
    assert_eq!(r.code, 1, "{}", r.stderr);
    // The parser stands at the end of the `<ex:q …/>` tag: column 76.
    let want = "late.rdf:20003:76: error while parsing IRI 'bad iri'";
    assert!(r.stderr.contains(want), "{}", r.stderr);
    let r = jelly(
        &["rdf", "to-jelly", "--in-format", "rdfxml", "-o", s(&out)],
        Some(xml.as_bytes()),
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("<stdin>:20003:76: "), "{}", r.stderr);
    let small = d.join("small.nt");
    std::fs::write(&small, "<http://ex.org/s0> <http://ex.org/p> \"x\" .\n").unwrap();
    let small_jelly = d.join("small.jelly");
    ok(&["rdf", "to-jelly", s(&small), "-o", s(&small_jelly)], None);
    for args in [
        vec![
            "rdf",
            "validate",
            s(&small_jelly),
            "--compare-to-rdf-file",
            s(&file),
        ],
        vec!["patch", "diff", s(&small), s(&file)],
    ] {
        let r = jelly(&args, None);
        assert_eq!(r.code, 1, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains(want), "{args:?}: {}", r.stderr);
    }
    // Without the bad line it converts completely.
    let good = xml.replace(
        " rdf:resource=\"bad iri\"",
        " rdf:resource=\"http://ex.org/o\"",
    );
    std::fs::write(&file, good).unwrap();
    ok(&["rdf", "to-jelly", s(&file), "-o", s(&out)], None);
    let n: usize = frames(&out).iter().map(Vec::len).sum();
    assert_eq!(n, 20_001);
}

/// A failing command leaves its output file as it was (bad arguments, a missing input,
/// bad input halfway through), and an output that is also the input is read whole
/// before it is replaced.
#[test]
fn failed_commands_leave_the_output_file_alone() {
    let d = tmp("output-kept");
    let src = head(NANOPUBS, 200, &d, "np.nq");
    let keep = d.join("keep.jelly");
    let before = b"earlier output".to_vec();
    let mut bad_src = std::fs::read(&src).unwrap();
    bad_src.extend_from_slice(b"<http://a> <http://b> .\n");
    let bad = d.join("bad.nq");
    std::fs::write(&bad, &bad_src).unwrap();
    let runs: [&[&str]; 4] = [
        &["rdf", "to-jelly", s(&src), "--opt.max-name-table-size", "7"],
        &["rdf", "to-jelly", "/nonexistent/in.nq"],
        &["rdf", "to-jelly", s(&bad)],
        &["rdf", "transcode", s(&src)],
    ];
    for args in runs {
        std::fs::write(&keep, &before).unwrap();
        let mut args = args.to_vec();
        args.extend(["-o", s(&keep)]);
        let r = jelly(&args, None);
        assert_ne!(r.code, 0, "{args:?}");
        assert_eq!(
            std::fs::read(&keep).unwrap(),
            before,
            "{args:?}: {}",
            r.stderr
        );
    }
    // No temporary file is left behind.
    let names: Vec<_> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");

    // In place: a text file is not replaced by Jelly (refused, left as it was), and a
    // Jelly file is transcoded into itself, not emptied.
    let text = d.join("text.nq");
    std::fs::copy(&src, &text).unwrap();
    let r = jelly(&["rdf", "to-jelly", s(&text), "-o", s(&text)], None);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert_eq!(std::fs::read(&text).unwrap(), std::fs::read(&src).unwrap());
    let same = d.join("same.jelly");
    ok(&["rdf", "to-jelly", s(&src), "-o", s(&same)], None);
    let back = ok(&["rdf", "from-jelly", s(&same)], None);
    assert_iso(
        &parse(&back.stdout),
        &parse(&std::fs::read(&src).unwrap()),
        "in-place to-jelly",
    );
    ok(&["rdf", "transcode", s(&same), "-o", s(&same)], None);
    let again = ok(&["rdf", "from-jelly", s(&same)], None);
    assert_eq!(again.stdout, back.stdout);
}

/// A stream with tables beyond the readers' default caps is written with a note, refused
/// by default, and read with the `--max-*` reader limits raised; lowered limits refuse.
#[test]
fn reader_limits_are_flags() {
    let d = tmp("reader-limits");
    let src = head(NANOPUBS, 100, &d, "np.nq");
    let big = d.join("big.jelly");
    let r = ok(
        &[
            "rdf",
            "to-jelly",
            s(&src),
            "--opt.max-name-table-size",
            "100000",
            "-o",
            s(&big),
        ],
        None,
    );
    assert!(r.stderr.contains("name table 100000"), "{}", r.stderr);
    assert!(r.stderr.contains("--max-name-table"), "{}", r.stderr);
    for verb in ["from-jelly", "inspect", "validate", "transcode"] {
        let r = jelly(&["rdf", verb, s(&big)], None);
        assert_eq!(r.code, 1, "{verb}: {}", r.stderr);
        assert!(r.stderr.contains("limit of 4096"), "{verb}: {}", r.stderr);
        ok(&["rdf", verb, s(&big), "--max-name-table", "100000"], None);
    }
    let back = ok(
        &["rdf", "from-jelly", s(&big), "--max-name-table", "100000"],
        None,
    );
    assert_iso(
        &parse(&back.stdout),
        &parse(&std::fs::read(&src).unwrap()),
        "big tables",
    );
    let r = jelly(
        &[
            "rdf",
            "from-jelly",
            s(&big),
            "--max-name-table",
            "100000",
            "--max-frame-size",
            "100",
        ],
        None,
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("100"), "{}", r.stderr);
}

/// A UTF-8 byte-order mark at the start of a text file is skipped (by `to-jelly`,
/// `validate --compare-to-rdf-file` and `patch diff` alike); Turtle on stdin
/// without --in-format gets a hint that stdin is read as N-Quads; a Jelly-Patch file
/// given to an RDF verb (and the other way round) is named as such.
#[test]
fn misread_inputs_are_explained() {
    let d = tmp("misread");
    // Named graphs asked for in a graph format: the formats that hold them are named.
    let nq = d.join("g.nq");
    std::fs::write(
        &nq,
        "<http://a/s> <http://a/p> <http://a/o> <http://a/g> .\n",
    )
    .unwrap();
    let j = ok(&["rdf", "to-jelly", s(&nq)], None);
    for f in ["ttl", "nt", "rdfxml"] {
        let r = jelly(&["rdf", "from-jelly", "--out-format", f], Some(&j.stdout));
        assert_eq!(r.code, 1, "{f}: {}", r.stderr);
        assert!(
            r.stderr.contains("named graph cannot be written as"),
            "{f}: {}",
            r.stderr
        );
    }
    // validate: a missing input is named before the file to compare with is read
    // (which may be large, or bad).
    let bad_nt = d.join("bad.nt");
    std::fs::write(&bad_nt, "not n-triples\n").unwrap();
    let missing = d.join("missing.jelly");
    usage_error(
        &[
            "rdf",
            "validate",
            s(&missing),
            "--compare-to-rdf-file",
            s(&bad_nt),
        ],
        "missing.jelly",
    );
    let j_path = d.join("g.jelly");
    std::fs::write(&j_path, &j.stdout).unwrap();
    // --take-frames past the end: an empty answer, with a note saying so.
    let r = ok(
        &["rdf", "from-jelly", s(&j_path), "--take-frames", "100..200"],
        None,
    );
    assert!(r.out().is_empty());
    assert!(
        r.stderr.contains("selects no frame") && r.stderr.contains("which has 1"),
        "{}",
        r.stderr
    );
    // --split-frames names a folder; a file there is said to be one.
    let file = d.join("afile");
    std::fs::write(&file, "").unwrap();
    usage_error(
        &["rdf", "from-jelly", s(&j_path), "--split-frames", s(&file)],
        "is not a directory",
    );
    // A triple term in an RDF 1.2 file without --opt.rdf-star: the flag is named.
    let tt = d.join("tt.nt");
    std::fs::write(
        &tt,
        "<http://a/s> <http://a/p> <<( <http://a/x> <http://a/y> <http://a/z> )>> .\n",
    )
    .unwrap();
    let r = jelly(&["rdf", "to-jelly", s(&tt), "-o", "/dev/null"], None);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("rdf_star is off (use --opt.rdf-star)"),
        "{}",
        r.stderr
    );
    // The JVM jelly-cli's name for the flag works too.
    ok(
        &[
            "rdf",
            "to-jelly",
            s(&tt),
            "--opt.triple-terms",
            "-o",
            "/dev/null",
        ],
        None,
    );
    let bom = d.join("bom.nt");
    std::fs::write(&bom, b"\xEF\xBB\xBF<http://a/s> <http://a/p> \"x\" .\n").unwrap();
    let j = ok(&["rdf", "to-jelly", s(&bom)], None);
    let back = ok(&["rdf", "from-jelly"], Some(&j.stdout));
    assert_eq!(back.out(), "<http://a/s> <http://a/p> \"x\" .\n");
    let ttl = d.join("bom.ttl");
    std::fs::write(
        &ttl,
        b"\xEF\xBB\xBF@prefix a: <http://a/> .\na:s a:p \"x\" .\n",
    )
    .unwrap();
    let j = ok(&["rdf", "to-jelly", s(&ttl)], None);
    let back = ok(&["rdf", "from-jelly"], Some(&j.stdout));
    assert_eq!(back.out(), "<http://a/s> <http://a/p> \"x\" .\n");
    let jelly_file = d.join("x.jelly");
    std::fs::write(&jelly_file, &j.stdout).unwrap();
    for with_bom in [&bom, &ttl] {
        ok(
            &[
                "rdf",
                "validate",
                s(&jelly_file),
                "--compare-to-rdf-file",
                s(with_bom),
            ],
            None,
        );
        // The same statements: an empty patch (a transaction, and the prefix).
        let diff = ok(&["patch", "diff", s(&bom), s(with_bom)], None);
        let changes = diff
            .out()
            .lines()
            .filter(|l| l.starts_with("A ") || l.starts_with("D "))
            .count();
        assert_eq!(changes, 0, "{}", diff.out());
    }

    let r = jelly(
        &["rdf", "to-jelly"],
        Some(b"@prefix a: <http://a/> .\na:s a:p \"x\" .\n"),
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("--in-format"), "{}", r.stderr);

    let nq = head(NANOPUBS, 20, &d, "np.nq");
    let rdfp = d.join("p.rdfp");
    std::fs::write(&rdfp, "TX .\nA <http://a/s> <http://a/p> \"x\" .\nTC .\n").unwrap();
    let patch = d.join("p.jellyp");
    ok(&["patch", "to-jelly", s(&rdfp), "-o", s(&patch)], None);
    let r = jelly(&["rdf", "from-jelly", s(&patch)], None);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("jelly patch"), "{}", r.stderr);
    let rdf = d.join("np.jelly");
    ok(&["rdf", "to-jelly", s(&nq), "-o", s(&rdf)], None);
    let r = jelly(&["patch", "inspect", s(&rdf)], None);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("jelly rdf"), "{}", r.stderr);
}

/// Flags that would silently do nothing are refused, and validate compares with a
/// Jelly file as well as with RDF text.
#[test]
fn flags_that_would_do_nothing_are_refused() {
    let d = tmp("no-op-flags");
    let j = small_jelly(&d);
    usage_error(
        &["rdf", "from-jelly", s(&j), "--take-frames", "5..2"],
        "empty",
    );
    usage_error(
        &["rdf", "from-jelly", s(&j), "--take-frames", "3..3"],
        "empty",
    );
    let src = head(NANOPUBS, 10, &d, "ten.nq");
    usage_error(
        &["rdf", "to-jelly", s(&src), "--rows-per-frame", "0"],
        "at least 1",
    );
    usage_error(
        &["rdf", "validate", s(&j), "--compare-frame-indices", "0"],
        "--compare-to-rdf-file",
    );
    usage_error(
        &["rdf", "validate", s(&j), "--compare-to-format", "nq"],
        "--compare-to-rdf-file",
    );
    // Against another Jelly file: the same statements pass, others fail.
    let copy = d.join("copy.jelly");
    ok(
        &[
            "rdf",
            "transcode",
            s(&j),
            "--preset",
            "small",
            "-o",
            s(&copy),
        ],
        None,
    );
    ok(
        &["rdf", "validate", s(&j), "--compare-to-rdf-file", s(&copy)],
        None,
    );
    ok(
        &[
            "rdf",
            "validate",
            s(&j),
            "--compare-to-rdf-file",
            s(&copy),
            "--compare-ordered",
            "true",
        ],
        None,
    );
    let other = d.join("other.jelly");
    ok(&["rdf", "to-jelly", s(&src), "-o", s(&other)], None);
    let r = jelly(
        &["rdf", "validate", s(&j), "--compare-to-rdf-file", s(&other)],
        None,
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    // A required framing the input does not have is named in the error.
    let r = jelly(&["rdf", "validate", s(&j), "--delimited", "false"], None);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("--delimited false"), "{}", r.stderr);
}

#[test]
fn a_stream_broken_midway_leaves_well_formed_text_on_stdout() {
    // What a pipe got before the error ends after a complete statement, so that the
    // reader of the pipe can parse it (Turtle keeps a subject's block open until the
    // next subject; JSON-LD needs its closing brackets).
    let d = tmp("broken-midway");
    let src = head(
        "iot-assist-weather/iot-assist-weather.nt",
        30_000,
        &d,
        "w.nt",
    );
    let jf = d.join("w.jelly");
    ok(&["rdf", "to-jelly", s(&src), "-o", s(&jf)], None);
    let mut bytes = std::fs::read(&jf).unwrap();
    let at = bytes.len() * 7 / 10;
    bytes[at] ^= 0xff;
    bytes[at + 1] ^= 0xff;
    let bad = d.join("bad.jelly");
    std::fs::write(&bad, &bytes).unwrap();
    for (fmt, ext) in [("ttl", "ttl"), ("jsonld", "jsonld"), ("trig", "trig")] {
        let r = jelly(&["rdf", "from-jelly", s(&bad), "--out-format", fmt], None);
        assert_eq!(r.code, 1, "{fmt}: {}", r.stderr);
        assert!(r.stderr.contains("frame"), "{fmt}: {}", r.stderr);
        assert!(r.stdout.ends_with(b"\n"), "{fmt}");
        let text = d.join(format!("partial.{ext}"));
        std::fs::write(&text, &r.stdout).unwrap();
        let again = d.join(format!("partial-{ext}.jelly"));
        ok(&["rdf", "to-jelly", s(&text), "-o", s(&again)], None);
        let back = ok(&["rdf", "from-jelly", s(&again)], None);
        let n = parse(&back.stdout).len();
        assert!(n > 10_000 && n < 30_000, "{fmt}: {n} statements");
    }
    // Nothing decoded: nothing on stdout (an empty document would read as an empty
    // dataset).
    for fmt in ["jsonld", "rdfxml", "ttl"] {
        let r = jelly(&["rdf", "from-jelly", s(&src), "--out-format", fmt], None);
        assert_eq!(r.code, 1, "{fmt}: {}", r.stderr);
        assert!(r.stdout.is_empty(), "{fmt}: {}", r.out());
    }
}

/// Text into a file named `.jelly` is refused before anything is written, unless
/// `--out-format` says text is meant.
#[test]
fn text_output_to_a_jelly_name_is_refused() {
    let d = tmp("other-kind");
    let j = small_jelly(&d);
    let text_in_jelly = d.join("back.jelly");
    usage_error(
        &["rdf", "from-jelly", s(&j), "-o", s(&text_in_jelly)],
        "names a Jelly file, but from-jelly writes RDF text",
    );
    usage_error(
        &[
            "rdf",
            "from-jelly",
            s(&j),
            "-o",
            &format!("{}.gz", s(&text_in_jelly)),
        ],
        "names a Jelly file",
    );
    assert!(!text_in_jelly.exists());
    // Asked for: TriG into a `.jelly` name.
    ok(
        &[
            "rdf",
            "from-jelly",
            s(&j),
            "--out-format",
            "trig",
            "-o",
            s(&text_in_jelly),
        ],
        None,
    );
    let text = std::fs::read_to_string(&text_in_jelly).unwrap();
    assert!(text.contains("GRAPH") || text.contains('{'), "{text}");
    // A name that says nothing keeps the default, N-Quads.
    let txt = d.join("out.txt");
    ok(&["rdf", "from-jelly", s(&j), "-o", s(&txt)], None);
    let stdout = ok(&["rdf", "from-jelly", s(&j)], None).stdout;
    assert_eq!(std::fs::read(&txt).unwrap(), stdout);
}

/// Triple terms nested 100,000 deep overflowed the parsers' stack: every text syntax
/// that has them now refuses the input with exit 1 and the place, as bad data.
#[test]
fn deeply_nested_triple_terms_are_refused() {
    let n = 100_000;
    let nested = format!(
        "<http://e/s> <http://e/p> {}<http://e/o>{} .\n",
        "<<( <http://e/s> <http://e/p> ".repeat(n),
        " )>>".repeat(n)
    );
    for fmt in ["nt", "nq", "ttl", "trig"] {
        let r = jelly(
            &["rdf", "to-jelly", "--in-format", fmt, "-o", "/dev/null"],
            Some(nested.as_bytes()),
        );
        assert_eq!(r.code, 1, "{fmt}: {}", r.stderr);
        assert!(r.stderr.contains("deeper than 100"), "{fmt}: {}", r.stderr);
    }
}

/// An RDF/XML entity bomb is refused (exit 1) before the parser expands it.
#[test]
fn rdf_xml_entity_bombs_are_refused() {
    let mut lol = String::from("<?xml version=\"1.0\"?>\n<!DOCTYPE rdf:RDF [<!ENTITY l0 \"lol\">");
    for i in 1..10 {
        lol += &format!("<!ENTITY l{i} \"{}\">", format!("&l{};", i - 1).repeat(10));
    }
    lol += "]>\n<rdf:RDF xmlns:rdf=\"http://www.w3.org/1999/02/22-rdf-syntax-ns#\">\
            <rdf:Description rdf:about=\"http://e/s\"><rdf:value>&l9;</rdf:value>\
            </rdf:Description></rdf:RDF>\n";
    let r = jelly(
        &[
            "rdf",
            "to-jelly",
            "--in-format",
            "rdfxml",
            "-o",
            "/dev/null",
        ],
        Some(lol.as_bytes()),
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("expansion bomb"), "{}", r.stderr);
}

/// The byte an error names, if it names one.
fn named_byte(stderr: &str) -> Option<u64> {
    let at = stderr.find("byte ")? + 5;
    let digits: String = stderr[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// The verbs that decode row by row name the same byte for the same damage (inspect
/// named a byte one length prefix too early). `transcode` checks a frame's protobuf
/// before its rows, so its errors may name other damage first.
#[test]
fn verbs_name_the_same_byte_for_the_same_damage() {
    let d = tmp("same-byte");
    let j = small_jelly(&d);
    let bytes = std::fs::read(&j).unwrap();
    let bad = d.join("bad.jelly");
    let mut compared = 0;
    for at in (bytes.len() / 3..bytes.len()).step_by(97) {
        let mut b = bytes.clone();
        b[at] ^= 0x5a;
        std::fs::write(&bad, &b).unwrap();
        let named: Vec<Option<u64>> = ["from-jelly", "inspect", "validate"]
            .iter()
            .map(|verb| named_byte(&jelly(&["rdf", verb, s(&bad)], None).stderr))
            .collect();
        if named.iter().all(Option::is_some) {
            assert!(
                named.windows(2).all(|w| w[0] == w[1]),
                "flip at {at}: {named:?}"
            );
            compared += 1;
        }
    }
    assert!(compared > 0, "no damage was named by every verb");
}

/// Jelly is never written into a file named as RDF text.
#[test]
fn jelly_output_never_goes_to_a_text_name() {
    let d = tmp("text-name");
    let src = head(NANOPUBS, 50, &d, "np.nq");
    let j = small_jelly(&d);
    for (verb, input, out) in [
        ("to-jelly", s(&src), "out.nt"),
        ("transcode", s(&j), "out.nq"),
    ] {
        let out = d.join(out);
        let r = jelly(&["rdf", verb, input, "-o", s(&out)], None);
        assert_eq!(r.code, 2, "{verb}: {}", r.stderr);
        assert!(r.stderr.contains("writes Jelly"), "{verb}: {}", r.stderr);
        assert!(!out.exists(), "{verb}");
    }
}

/// N3 formula contents are not asserted: they are refused in a triples stream, and
/// kept in their graph in a quads stream, never written as default-graph triples.
#[test]
fn n3_formulas_stay_in_their_graphs() {
    let d = tmp("n3-formula");
    let n3 = d.join("f.n3");
    std::fs::write(
        &n3,
        "@prefix : <http://ex.org/> .\n:x :y :z .\n{ :a :b :c } => { :a :d :c } .\n",
    )
    .unwrap();
    let out = d.join("f.jelly");
    let r = jelly(&["rdf", "to-jelly", s(&n3), "-o", s(&out)], None);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("N3 formula"), "{}", r.stderr);
    ok(
        &[
            "rdf",
            "to-jelly",
            s(&n3),
            "--opt.physical-type",
            "quads",
            "-o",
            s(&out),
        ],
        None,
    );
    let st = parse(&ok(&["rdf", "from-jelly", s(&out)], None).stdout);
    assert_eq!(st.len(), 4);
    let in_graphs = st
        .iter()
        .filter(|q| q.graph.is_some() && q.graph != Some(jelly::Term::DefaultGraph))
        .count();
    assert_eq!(in_graphs, 2, "{st:?}");
}

/// A command stopped by a signal (Ctrl-C, `timeout`) removes its temporary output and
/// leaves the file it would have replaced as it was, exiting as the signal would.
#[test]
fn an_interrupted_command_removes_its_temporary_output() {
    let d = tmp("interrupt");
    let out = d.join("out.jelly");
    std::fs::write(&out, b"the old output").unwrap();
    for (signal, code) in [("-INT", 130), ("-TERM", 143)] {
        // stdin stays open: the command waits for more input with its output pending.
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_jelly"))
            .args(["rdf", "to-jelly", "--in-format", "nt", "-q", "-o", s(&out)])
            .stdin(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let temp = || {
            std::fs::read_dir(&d)
                .unwrap()
                .filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".tmp"))
                .collect::<Vec<_>>()
        };
        let t0 = std::time::Instant::now();
        while temp().is_empty() {
            assert!(
                t0.elapsed() < std::time::Duration::from_secs(10),
                "no temporary file"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        // Held until the child has exited: `Child::wait` would close it first, and the
        // child could then see the end of its input and finish before the signal lands.
        let stdin = child.stdin.take();
        let st = std::process::Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status()
            .unwrap();
        assert!(st.success());
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            assert!(
                t0.elapsed() < std::time::Duration::from_secs(30),
                "{signal}: the command did not stop"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        };
        drop(stdin);
        assert_eq!(status.code(), Some(code), "{signal}");
        assert!(temp().is_empty(), "{signal}: {:?}", temp());
        assert_eq!(std::fs::read(&out).unwrap(), b"the old output");
    }
}

/// N-Triples lines may end with a lone CR (EOL is `[#xD#xA]+`), on both parsers; and
/// input with no line break at all is refused at 64 MiB instead of read whole.
#[test]
fn line_ends_and_the_longest_line() {
    let d = tmp("line-ends");
    let nt = d.join("cr.nt");
    std::fs::write(
        &nt,
        "<http://e/a> <http://e/b> <http://e/c> .\r<http://e/d> <http://e/e> <http://e/f> .\r",
    )
    .unwrap();
    for extra in [&[][..], &["--opt.rdf-star=true"]] {
        let mut args = vec!["rdf", "to-jelly", s(&nt)];
        args.extend_from_slice(extra);
        let j = ok(&args, None).stdout;
        let out = ok(&["rdf", "from-jelly"], Some(&j));
        assert_eq!(out.out().lines().count(), 2, "{extra:?}: {}", out.out());
    }
    // Two short lines, then one too long: the error says where it starts.
    let short = b"<http://e/a> <http://e/b> <http://e/c> .\n";
    let mut long = [&short[..], &short[..]].concat();
    long.extend_from_slice(b"<http://e/a> <http://e/b> \"");
    long.resize(70 << 20, b'x');
    let r = jelly(&["rdf", "to-jelly", "--in-format", "nt"], Some(&long));
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("a line longer than"), "{}", r.stderr);
    let at = format!("the line starting at byte {}", 2 * short.len());
    assert!(r.stderr.contains(&at), "{at}: {}", r.stderr);
}

/// A delimited Jelly stream (RDF-star, TRIPLES) of one triple whose subject nests
/// quoted triples `depth` levels deep, built byte by byte: the library's own encoder and
/// terms recurse per level, which is what is being tested.
fn nested_quoted_stream(depth: usize) -> Vec<u8> {
    fn varint(mut n: u64, out: &mut Vec<u8>) {
        while n >= 0x80 {
            out.push((n as u8 & 0x7f) | 0x80);
            n >>= 7;
        }
        out.push(n as u8);
    }
    fn uint(field: u64, v: u64) -> Vec<u8> {
        let mut o = Vec::new();
        varint(field << 3, &mut o);
        varint(v, &mut o);
        o
    }
    fn msg(field: u64, body: &[u8]) -> Vec<u8> {
        let mut o = Vec::new();
        varint(field << 3 | 2, &mut o);
        varint(body.len() as u64, &mut o);
        o.extend_from_slice(body);
        o
    }
    // Options: TRIPLES, rdf_star, name table 8, no prefix or datatype table, version 1.
    let opts = [
        uint(2, 1),
        uint(4, 1),
        uint(9, 8),
        uint(10, 0),
        uint(11, 0),
        uint(15, 1),
    ]
    .concat();
    let iri = uint(2, 1); // name id 1, no prefix
    let mut t = [msg(1, &iri), msg(5, &iri), msg(9, &iri)].concat();
    for _ in 0..depth {
        t = [msg(4, &t), msg(5, &iri), msg(9, &iri)].concat();
    }
    let name = [uint(1, 1), msg(2, b"http://a/x")].concat();
    let frame = [
        msg(1, &msg(1, &opts)),
        msg(1, &msg(9, &name)),
        msg(1, &msg(2, &t)),
    ]
    .concat();
    let mut out = Vec::new();
    varint(frame.len() as u64, &mut out);
    out.extend_from_slice(&frame);
    out
}

/// `--max-nesting 1000000` let 20,000 levels of quoted triples through to code that
/// recurses per level, and the process aborted with a stack overflow. The flag now
/// stops at the decoder's hard cap (a usage error naming it), and at the cap a deeper
/// stream is refused as bad data by every reading verb.
#[test]
fn nesting_limit_is_capped_and_deep_streams_are_refused() {
    let cap = jelly::MAX_NESTING_CAP.to_string();
    let over = (jelly::MAX_NESTING_CAP + 1).to_string();
    usage_error(
        &["rdf", "from-jelly", "--max-nesting", "1000000", "-"],
        &format!("the largest value is {cap}"),
    );
    usage_error(
        &["rdf", "inspect", "--max-nesting", &over, "-"],
        "--max-nesting",
    );
    let deep = nested_quoted_stream(20_000);
    for verb in [
        &["rdf", "from-jelly", "--max-nesting", &cap, "-"][..],
        &["rdf", "inspect", "--max-nesting", &cap, "-"],
        &["rdf", "validate", "--max-nesting", &cap, "-"],
        &["rdf", "transcode", "--max-nesting", &cap, "-"],
    ] {
        let r = jelly(verb, Some(&deep));
        assert_eq!(r.code, 1, "{verb:?}: {}", r.stderr);
        assert!(
            r.stderr
                .contains(&format!("nested deeper than the limit of {cap}")),
            "{verb:?}: {}",
            r.stderr
        );
    }
    // Exactly at the cap, every verb (with its per-level recursion) still works.
    let at_cap = nested_quoted_stream(jelly::MAX_NESTING_CAP);
    for verb in [
        &["rdf", "from-jelly", "--max-nesting", &cap, "-"][..],
        &["rdf", "inspect", "--max-nesting", &cap, "-"],
        &["rdf", "validate", "--max-nesting", &cap, "-"],
        &["rdf", "transcode", "--max-nesting", &cap, "-"],
    ] {
        ok(verb, Some(&at_cap));
    }
}

/// `--rows-per-frame` was silently ignored next to `--frame-per`: the combination is
/// now a usage error naming both flags, in to-jelly and transcode.
#[test]
fn rows_per_frame_with_frame_per_is_refused() {
    for verb in ["to-jelly", "transcode"] {
        let args = [
            "rdf",
            verb,
            "--frame-per",
            "graph",
            "--rows-per-frame",
            "10",
            "-",
        ];
        let r = jelly(&args, Some(b""));
        assert_eq!(r.code, 2, "{verb}: {}", r.stderr);
        assert!(
            r.stderr.contains("--rows-per-frame") && r.stderr.contains("--frame-per"),
            "{verb}: {}",
            r.stderr
        );
    }
}

#[test]
fn token_over_the_parser_buffer_is_invalid_input_with_advice() {
    let d = tmp("bigtoken");
    // A 17 MiB literal: past the 16 MiB buffer of the Turtle-family and JSON parsers,
    // which hold a token whole.
    let big = "x".repeat(17 << 20);
    let ttl = d.join("big.ttl");
    std::fs::write(
        &ttl,
        format!(
            "<http://a/s> <http://a/p> <http://a/o> .\n<http://a/s> <http://a/p> \"{big}\" .\n"
        ),
    )
    .unwrap();
    for (f, parser) in [(&ttl, "Turtle")] {
        let r = jelly(
            &["rdf", "to-jelly", s(f), "-o", s(&d.join("o.jelly"))],
            None,
        );
        assert_eq!(r.code, 1, "{}", r.stderr);
        let name = f.file_name().unwrap().to_str().unwrap();
        for needle in [
            format!("{name}: byte "),
            format!("{parser} parser's buffer of 16 MiB"),
            "N-Triples or N-Quads".to_string(),
        ] {
            assert!(r.stderr.contains(&needle), "{needle}: {}", r.stderr);
        }
    }
    // JSON-LD over 16 MiB is read in parts of elements or nodes of up to 16 MiB (the
    // parser holds an object whole, at about twenty times its size): a larger one, or
    // a document it cannot cut, is refused before the parser, with its place.
    let array = d.join("array.jsonld");
    let node = format!("{{\"@id\": \"http://a/s\", \"http://a/p\": \"{big}\"}}");
    std::fs::write(&array, format!("[{{\"@id\": \"http://a/t\"}},\n {node}]\n")).unwrap();
    let object = d.join("object.jsonld");
    std::fs::write(&object, format!("{node}\n")).unwrap();
    for (f, needle) in [
        (
            &array,
            "array.jsonld: line 2, byte offset 25: a JSON-LD value of over 16 MiB",
        ),
        (
            &object,
            "object.jsonld: line 1, byte offset 22: a JSON-LD document of over 16 MiB is read in parts only if",
        ),
    ] {
        let r = jelly(
            &["rdf", "to-jelly", s(f), "-o", s(&d.join("o.jelly"))],
            None,
        );
        assert_eq!(r.code, 1, "{}", r.stderr);
        assert!(r.stderr.contains(needle), "{needle}: {}", r.stderr);
        assert!(r.stderr.contains("N-Triples or N-Quads"), "{}", r.stderr);
    }
    // A read error of the input during parsing is still an I/O error (exit 2): stdin
    // that is a folder fails at the first read.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_jelly"))
        .args([
            "rdf",
            "to-jelly",
            "-",
            "--in-format",
            "ttl",
            "-o",
            s(&d.join("o.jelly")),
        ])
        .stdin(std::fs::File::open(&*d).unwrap())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("<stdin>: Is a directory"), "{err}");
}

/// A frame over the reader's frame limit is refused by every reading verb with an
/// error that names `--max-frame-size`, and reads once the limit is raised.
#[test]
fn frame_limit_error_names_the_flag() {
    let d = tmp("frame-limit");
    let nt = d.join("two.nt");
    std::fs::write(
        &nt,
        format!(
            "<http://a/s> <http://a/p> \"{}\" .\n<http://a/s> <http://a/p> \"y\" .\n",
            "x".repeat(2000)
        ),
    )
    .unwrap();
    let j = d.join("two.jelly");
    let r = ok(
        &[
            "rdf",
            "to-jelly",
            s(&nt),
            "--frame-per",
            "input",
            "-o",
            s(&j),
        ],
        None,
    );
    // A small frame is no reason for a note.
    assert!(!r.stderr.contains("--max-frame-size"), "{}", r.stderr);
    for verb in ["from-jelly", "inspect", "validate", "transcode"] {
        let r = jelly(&["rdf", verb, s(&j), "--max-frame-size", "1000"], None);
        assert_eq!(r.code, 1, "{verb}: {}", r.stderr);
        assert!(
            r.stderr.contains("limit of 1000 bytes"),
            "{verb}: {}",
            r.stderr
        );
        assert!(
            r.stderr.contains("--max-frame-size"),
            "{verb}: {}",
            r.stderr
        );
        ok(&["rdf", verb, s(&j), "--max-frame-size", "100000"], None);
    }
}

/// A JSON-LD document whose `@context` is a URL is refused without fetching it, and
/// the message names the context and why, not the parser's "No LoadDocumentCallback".
#[test]
fn json_ld_remote_context_is_named_and_not_fetched() {
    let d = tmp("jsonld-remote-context");
    let f = d.join("remote.jsonld");
    std::fs::write(
        &f,
        r#"{"@context": "http://schema.org/", "@id": "http://ex.org/a", "name": "x"}"#,
    )
    .unwrap();
    let r = jelly(
        &["rdf", "to-jelly", s(&f), "-o", s(&d.join("o.jelly"))],
        None,
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    for needle in [
        "remote.jsonld",
        "http://schema.org/",
        "remote JSON-LD contexts are not fetched",
    ] {
        assert!(r.stderr.contains(needle), "{needle}: {}", r.stderr);
    }
    assert!(!r.stderr.contains("LoadDocumentCallback"), "{}", r.stderr);
}

/// `serve --listen` with a host name or a port alone says what it takes, not only
/// "invalid socket address syntax"; nothing is started (exit 2).
#[test]
fn serve_listen_mistakes_are_explained() {
    let d = tmp("listen-mistakes");
    for (listen, needle) in [
        ("localhost:8686", "host names are not looked up"),
        ("8686", "is a port alone"),
    ] {
        let r = jelly(&["serve", "--listen", listen, "--data", s(&d)], None);
        assert_eq!(r.code, 2, "{listen}: {}", r.stderr);
        assert!(r.stderr.contains(needle), "{listen}: {}", r.stderr);
        assert!(
            r.stderr.contains("127.0.0.1:8686"),
            "{listen}: {}",
            r.stderr
        );
    }
}

/// A `--demo-data` folder that is missing or holds no `.nt` file is named with its
/// flag; nothing is started.
#[test]
fn serve_demo_data_mistakes_name_the_flag() {
    let d = tmp("demo-data-mistakes");
    let empty = d.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    for (dir, needle) in [
        (d.join("missing"), "No such file"),
        (empty, "no .nt file for the demo"),
    ] {
        let r = jelly(
            &[
                "serve",
                "--demo",
                "--demo-data",
                s(&dir),
                "--listen",
                "127.0.0.1:0",
                "--data",
                s(&d.join("data")),
            ],
            None,
        );
        assert_ne!(r.code, 0, "{}", r.stderr);
        assert!(
            r.stderr.contains(&format!("--demo-data {}", dir.display())),
            "{}",
            r.stderr
        );
        assert!(r.stderr.contains(needle), "{}", r.stderr);
    }
}

/// `--opt.rdf-star true` (the value after a space) makes `true` an input file: the
/// error says how these flags take their value, not only that `true` does not exist.
#[test]
fn bool_flag_value_after_a_space_is_explained() {
    let d = tmp("bool-flag-space");
    let src = head(NANOPUBS, 5, &d, "np.nq");
    let out = d.join("o.jelly");
    for (flag, value) in [("--opt.rdf-star", "true"), ("--delimited", "false")] {
        let r = jelly(
            &["rdf", "to-jelly", s(&src), flag, value, "-o", s(&out)],
            None,
        );
        assert_eq!(r.code, 2, "{flag} {value}: {}", r.stderr);
        for needle in [
            format!("jelly: {value}: "),
            "takes it after `=`".to_string(),
            format!("--opt.rdf-star={value}"),
        ] {
            assert!(r.stderr.contains(&needle), "{needle}: {}", r.stderr);
        }
    }
}

/// `transcode` keeps the first input's options: a quads input after a triples one is
/// refused with the flag that makes room for it, and that flag works.
#[test]
fn transcode_of_quads_after_triples_names_the_flag() {
    let d = tmp("transcode-physical");
    let nt = head(
        "iot-sosa-ssn-examples/iot-sosa-ssn-examples.nt",
        20,
        &d,
        "t.nt",
    );
    let nq = head(NANOPUBS, 20, &d, "q.nq");
    let (tj, qj, out) = (d.join("t.jelly"), d.join("q.jelly"), d.join("o.jelly"));
    ok(&["rdf", "to-jelly", s(&nt), "-o", s(&tj)], None);
    ok(&["rdf", "to-jelly", s(&nq), "-o", s(&qj)], None);
    let r = jelly(&["rdf", "transcode", s(&tj), s(&qj), "-o", s(&out)], None);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("q.jelly") && r.stderr.contains("(use --opt.physical-type quads)"),
        "{}",
        r.stderr
    );
    ok(
        &[
            "rdf",
            "transcode",
            s(&tj),
            s(&qj),
            "--opt.physical-type",
            "quads",
            "-o",
            s(&out),
        ],
        None,
    );
}

/// `jelly version` (the JVM CLI's verb) names the build as `--version` does, and the
/// protocol versions it reads and writes.
#[test]
fn version_names_the_build_and_the_protocol_versions() {
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_jelly"))
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let short = run(&["--version"]);
    let long = run(&["version"]);
    assert_eq!(long.lines().next(), short.lines().next(), "{long}");
    assert!(
        long.contains("reads protocol versions 1 to 2, writes 1 (or 2 for a stream with namespace declarations)"),
        "{long}"
    );
    assert!(long.contains("Jelly-Patch: protocol version 1"), "{long}");
    assert!(
        long.contains("eu.ostrzyciel.jelly.core.proto.v1.RdfStreamService"),
        "{long}"
    );
}

/// The W3C N-Triples / N-Quads syntax tests (vendored in crates/jelly/tests/data/w3c-nt)
/// through `to-jelly`: each negative one is refused with the file's name, each positive
/// one is converted to the statements oxttl reads.
#[test]
fn w3c_syntax_tests_through_to_jelly() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../jelly/tests/data/w3c-nt");
    let d = tmp("w3c-nt");
    let out = d.join("out.jelly");
    let (mut negatives, mut positives) = (0, 0);
    for (suite, format) in [("rdf-n-triples", "nt"), ("rdf-n-quads", "nq")] {
        for e in std::fs::read_dir(root.join(suite)).unwrap() {
            let p = e.unwrap().path();
            let r = jelly(
                &[
                    "rdf",
                    "to-jelly",
                    "--in-format",
                    format,
                    s(&p),
                    "-o",
                    s(&out),
                ],
                None,
            );
            let name = p.file_name().unwrap().to_str().unwrap();
            if name.contains("-bad-") {
                negatives += 1;
                assert_eq!(r.code, 1, "{name} accepted: {}", r.stderr);
                assert!(
                    r.stderr.starts_with("jelly: ") && r.stderr.contains(name),
                    "{}",
                    r.stderr
                );
                continue;
            }
            positives += 1;
            assert_eq!(r.code, 0, "{name}: {}", r.stderr);
            let back = ok(&["rdf", "from-jelly", s(&out), "--out-format", "nq"], None);
            let expected: Vec<jelly::Statement> =
                oxrdfio::RdfParser::from_format(if format == "nt" {
                    oxrdfio::RdfFormat::NTriples
                } else {
                    oxrdfio::RdfFormat::NQuads
                })
                .for_slice(&std::fs::read(&p).unwrap())
                .map(|q| {
                    let q = q.unwrap();
                    let mut holder = None;
                    let mut st =
                        jelly::oxrdf_adapter::from_ox_quad(q.as_ref(), &mut holder).to_owned();
                    if st.graph == Some(jelly::Term::DefaultGraph) {
                        st.graph = None;
                    }
                    st
                })
                .collect();
            assert_iso(&parse(&back.stdout), &expected, name);
        }
    }
    assert_eq!((negatives, positives), (63, 98));
}

/// Errors past the first 1 MiB chunk of N-Triples name their own line and column
/// (the parser thread counts the lines of the chunks, CRLF ones included).
#[test]
fn n_triples_errors_past_the_first_chunk_name_their_line() {
    let d = tmp("late-error");
    let mut text = Vec::new();
    for i in 0..40_000 {
        text.extend_from_slice(format!("<http://e/s{i}> <http://e/p> \"v\" .\r\n").as_bytes());
    }
    let good = text.len();
    for (bad, position) in [
        (
            &b"<http://e/s> <http://e/p> \"x\"@en-abcdefghi .\n"[..],
            ":40001:31: ",
        ),
        (
            &b"<http://e/s> <http://e/p> \"\xff\" .\n"[..],
            ":40001:28: invalid UTF-8",
        ),
        (
            &b"<http://e/s> <http://e/p> <http://e/o> <http://e/g> .\n"[..],
            ":40001: ",
        ),
    ] {
        text.truncate(good);
        text.extend_from_slice(bad);
        text.extend_from_slice(b"<http://e/s> <http://e/p> <http://e/o> .\n");
        let p = d.join("big.nt");
        std::fs::write(&p, &text).unwrap();
        let r = jelly(
            &["rdf", "to-jelly", s(&p), "-o", s(&d.join("o.jelly"))],
            None,
        );
        assert_eq!(r.code, 1, "{}", r.stderr);
        assert!(
            r.stderr.contains(&format!("big.nt{position}")),
            "{}",
            r.stderr
        );
    }
}

/// With `--opt.rdf-star` or `--opt.generalized-statements` the lines are read by the
/// parser that takes quoted triples and terms in any position, but their IRIs and
/// language tags are checked as in plain N-Triples.
#[test]
fn extended_ntriples_checks_iris_and_language_tags_as_plain_ntriples() {
    let d = tmp("extended-strict");
    let out = d.join("o.jelly");
    for (line, needle) in [
        (
            "<< <http://s> <http://p> <rel> >> <http://p> <http://o> .",
            "relative",
        ),
        ("<http://s> <http://p> \"x\"@abcdefghi .", "language tag"),
        ("\"lit\" <http://e:80x/> <http://o> .", "http://e:80x/"),
    ] {
        let f = d.join("in.nt");
        std::fs::write(&f, format!("<http://a> <http://b> <http://c> .\n{line}\n")).unwrap();
        for flag in ["--opt.rdf-star", "--opt.generalized-statements"] {
            let r = jelly(&["rdf", "to-jelly", s(&f), flag, "-o", s(&out), "-q"], None);
            assert_eq!(r.code, 1, "{flag} {line}: {}", r.stderr);
            assert!(
                r.stderr.contains("in.nt:2:") && r.stderr.contains(needle),
                "{flag} {line}: {}",
                r.stderr
            );
        }
    }
    // What the extensions are for still goes through.
    let f = d.join("ok.nt");
    std::fs::write(
        &f,
        "<< <http://s> <http://p> \"o\"@en-GB >> <http://p> _:b .\n\"lit\" _:p <http://o> .\n",
    )
    .unwrap();
    ok(
        &[
            "rdf",
            "to-jelly",
            s(&f),
            "--opt.rdf-star",
            "--opt.generalized-statements",
            "-o",
            s(&out),
            "-q",
        ],
        None,
    );
    let st = parse(&ok(&["rdf", "from-jelly", s(&out)], None).stdout);
    assert_eq!(st.len(), 2);
}

/// Turtle and TriG are parsed on a second thread, many chunks ahead of the encoder:
/// the stream is the one the same statements give as N-Triples / N-Quads (so in the
/// same order), from a file and from stdin, and a syntax error deep in the input keeps
/// its line and column, with no statement from after it written before it.
#[test]
fn turtle_and_trig_deep_in_the_input_keep_order_and_error_places() {
    let d = tmp("turtle-deep");
    // About 2.5 MB: 20,000 subjects of two statements, subject i on lines 2i+2 and 2i+3.
    let mut ttl = String::from("@prefix ex: <http://ex.org/> .\n");
    let mut nt = String::new();
    for i in 0..20_000 {
        let lex = format!("é {i} {}", "x".repeat(i % 50));
        ttl.push_str(&format!("ex:s{i} ex:p \"{lex}\" ;\n  ex:q ex:o{i} .\n"));
        nt.push_str(&format!(
            "<http://ex.org/s{i}> <http://ex.org/p> \"{lex}\" .\n\
             <http://ex.org/s{i}> <http://ex.org/q> <http://ex.org/o{i}> .\n"
        ));
    }
    let trig = format!(
        "<http://ex.org/g> {{\n{}}}\n",
        ttl.replacen("@prefix ex: <http://ex.org/> .\n", "", 1)
    );
    let trig = format!("@prefix ex: <http://ex.org/> .\n{trig}");
    let nq = nt.replace(" .\n", " <http://ex.org/g> .\n");
    for (text, ext, lines, lines_ext) in [(&ttl, "ttl", &nt, "nt"), (&trig, "trig", &nq, "nq")] {
        let file = d.join(format!("in.{ext}"));
        let as_lines = d.join(format!("in.{lines_ext}"));
        std::fs::write(&file, text).unwrap();
        std::fs::write(&as_lines, lines).unwrap();
        let out = d.join(format!("{ext}.jelly"));
        let out_lines = d.join(format!("{lines_ext}.jelly"));
        ok(&["rdf", "to-jelly", s(&file), "-o", s(&out)], None);
        ok(
            &["rdf", "to-jelly", s(&as_lines), "-o", s(&out_lines)],
            None,
        );
        let jelly_bytes = std::fs::read(&out).unwrap();
        assert!(jelly_bytes == std::fs::read(&out_lines).unwrap(), "{ext}");
        let r = ok(
            &["rdf", "to-jelly", "--in-format", ext],
            Some(text.as_bytes()),
        );
        assert!(r.stdout == jelly_bytes, "{ext} on stdin");

        // A bad escape in subject 15,000's literal, on line 30,002 (30,003 in TriG).
        let bad = text.replacen("ex:s15000 ex:p \"", "ex:s15000 ex:p \"\\u00ZZ", 1);
        let line = if ext == "ttl" { 30_002 } else { 30_003 };
        let bad_file = d.join(format!("bad.{ext}"));
        std::fs::write(&bad_file, &bad).unwrap();
        for (stdin, name) in [
            (None, s(&bad_file).to_string()),
            (Some(bad.as_bytes()), "<stdin>".to_string()),
        ] {
            let args = match stdin {
                None => vec!["rdf", "to-jelly", s(&bad_file)],
                Some(_) => vec!["rdf", "to-jelly", "--in-format", ext],
            };
            let r = jelly(&args, stdin);
            assert_eq!(r.code, 1, "{}", r.stderr);
            let want = format!(
                "jelly: {name}:{line}:21: Parser error at line {line} column 21: \
                 The escape sequence '\\u00ZZ' is not a valid hexadecimal string\n"
            );
            assert_eq!(r.stderr, want);
            // The frames written before the error hold statements of earlier subjects.
            let frames = jelly::JellyReader::new(&r.stdout[..])
                .read_all_frames()
                .expect("whole frames");
            let mut n = 0;
            for st in frames.iter().flatten() {
                n += 1;
                let jelly::Term::Iri(subject) = &st.subject else {
                    panic!("{st:?}");
                };
                let i: usize = subject["http://ex.org/s".len()..].parse().unwrap();
                assert!(i < 15_000, "{subject}");
            }
            assert!(n > 10_000, "{n}");
        }
    }
}
