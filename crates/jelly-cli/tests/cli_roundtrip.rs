//! Round trips through the real `jelly` binary: every RDF format, pipes, compression,
//! framing options, transcoding.

mod cli_support;

use cli_support::*;

const NANOPUBS: &str = "nanopubs-fair-pkd/nanopubs-fair-pkd.nq";
const DBPEDIA: &str = "dbpedia-ontology/dbpedia-ontology.nt";

#[test]
fn nquads_round_trip_is_byte_exact() {
    let d = tmp("nq-exact");
    let src = head(NANOPUBS, 400, &d, "np.nq");
    let jf = d.join("np.jelly");
    ok(&["rdf", "to-jelly", s(&src), "--to", s(&jf)], None);
    let back = d.join("back.nq");
    ok(&["rdf", "from-jelly", s(&jf), "-o", s(&back)], None);
    assert_eq!(
        std::fs::read(&src).unwrap(),
        std::fs::read(&back).unwrap(),
        "N-Quads round trip must be exact"
    );
}

/// Two Jelly files of the same options joined with `cat` decode as the two streams
/// they are: each begins with explicit lookup ids (it does not lean on the start of a
/// stream's delta state), so the second's entries do not resolve against the first's
/// tables. (Before, the joined file decoded to wrong statements, with exit 0.)
#[test]
fn jelly_files_joined_by_cat_decode_to_both() {
    let d = tmp("cat");
    let a = d.join("a.nt");
    let b = d.join("b.nt");
    std::fs::write(&a, "<http://a/s1> <http://a/p1> <http://a/o1> .\n").unwrap();
    let b_text = head(DBPEDIA, 200, &d, "b.nt");
    assert_eq!(b_text, b);
    let (ja, jb) = (d.join("a.jelly"), d.join("b.jelly"));
    ok(&["rdf", "to-jelly", s(&a), "--to", s(&ja)], None);
    ok(&["rdf", "to-jelly", s(&b), "--to", s(&jb)], None);
    let mut joined = std::fs::read(&ja).unwrap();
    joined.extend(std::fs::read(&jb).unwrap());
    let jab = d.join("ab.jelly");
    std::fs::write(&jab, joined).unwrap();
    let back = d.join("ab.nt");
    ok(&["rdf", "from-jelly", s(&jab), "-o", s(&back)], None);
    let mut want = std::fs::read(&a).unwrap();
    want.extend(std::fs::read(&b).unwrap());
    assert_eq!(parse(&std::fs::read(&back).unwrap()), parse(&want));
}

#[test]
fn every_graph_format_round_trips() {
    let d = tmp("graph-formats");
    let src = head(DBPEDIA, 300, &d, "db.nt");
    let original = parse(&std::fs::read(&src).unwrap());
    let jf = d.join("db.jelly");
    ok(&["rdf", "to-jelly", s(&src), "-o", s(&jf)], None);
    for ext in ["nt", "ttl", "rdf", "jsonld"] {
        // Jelly -> format (chosen by the extension) -> Jelly -> N-Triples.
        let text = d.join(format!("db-out.{ext}"));
        ok(&["rdf", "from-jelly", s(&jf), "--to", s(&text)], None);
        // A text file ends with a newline, whatever the format's serializer ends with.
        let bytes = std::fs::read(&text).unwrap();
        assert!(bytes.ends_with(b"\n") && !bytes.ends_with(b"\n\n"), "{ext}");
        let again = d.join(format!("db-{ext}.jelly"));
        ok(&["rdf", "to-jelly", s(&text), "--to", s(&again)], None);
        let nt = ok(
            &["rdf", "from-jelly", s(&again), "--out-format", "nt"],
            None,
        );
        assert_iso(&parse(&nt.stdout), &original, ext);
    }
}

#[test]
fn every_dataset_format_round_trips() {
    let d = tmp("dataset-formats");
    let src = head(NANOPUBS, 300, &d, "np.nq");
    let original = parse(&std::fs::read(&src).unwrap());
    let jf = d.join("np.jelly");
    ok(&["rdf", "to-jelly", s(&src), "-o", s(&jf)], None);
    for fmt in ["trig", "jsonld", "nq"] {
        let text = d.join(format!("np-out.{fmt}"));
        ok(
            &[
                "rdf",
                "from-jelly",
                s(&jf),
                "--out-format",
                fmt,
                "-o",
                s(&text),
            ],
            None,
        );
        let bytes = std::fs::read(&text).unwrap();
        assert!(bytes.ends_with(b"\n") && !bytes.ends_with(b"\n\n"), "{fmt}");
        let again = d.join(format!("np-{fmt}.jelly"));
        ok(&["rdf", "to-jelly", s(&text), "-o", s(&again)], None);
        // Dataset formats default to the QUADS physical type.
        let insp = ok(&["rdf", "inspect", s(&again)], None).out();
        assert!(insp.contains("physical_type: quads"), "{fmt}: {insp}");
        let nq = ok(&["rdf", "from-jelly", s(&again)], None);
        assert_iso(&parse(&nq.stdout), &original, fmt);
    }
}

#[test]
fn pipes_stdin_to_stdout() {
    let d = tmp("pipes");
    let src = head(NANOPUBS, 200, &d, "np.nq");
    let text = std::fs::read(&src).unwrap();
    let jf = ok(&["rdf", "to-jelly"], Some(&text)).stdout;
    assert!(!jf.is_empty());
    let back = ok(&["rdf", "from-jelly", "-"], Some(&jf)).stdout;
    assert_eq!(back, text);
    // A dataset cannot be written as Turtle: a clear error, not a panic.
    let ttl = jelly(&["rdf", "from-jelly", "--out-format", "ttl"], Some(&jf));
    assert_eq!(ttl.code, 1);
    assert!(
        ttl.stderr.starts_with("jelly: <stdin>:frame 0"),
        "{}",
        ttl.stderr
    );
    // Other formats through stdin need --in-format.
    let nt = b"<http://a/s> <http://a/p> \"o\" .\n<http://a/s> <http://a/p> _:b .\n";
    let j = ok(&["rdf", "to-jelly", "--in-format", "nt"], Some(nt)).stdout;
    let ttl = ok(&["rdf", "from-jelly", "--out-format", "ttl"], Some(&j)).stdout;
    let j2 = ok(&["rdf", "to-jelly", "--in-format", "ttl"], Some(&ttl)).stdout;
    let back = ok(&["rdf", "from-jelly", "--out-format", "nt"], Some(&j2)).stdout;
    assert_iso(&parse(&back), &parse(nt), "turtle via stdin");
}

#[test]
fn gzip_and_zstd_in_and_out() {
    let d = tmp("compression");
    let src = head(NANOPUBS, 300, &d, "np.nq");
    let text = std::fs::read(&src).unwrap();
    let gz = d.join("np.jelly.gz");
    ok(&["rdf", "to-jelly", s(&src), "--to", s(&gz)], None);
    assert_eq!(
        &std::fs::read(&gz).unwrap()[..2],
        &[0x1f, 0x8b],
        "gzip magic"
    );
    let zst = d.join("np.nq.zst");
    ok(&["rdf", "from-jelly", s(&gz), "--to", s(&zst)], None);
    let z = std::fs::read(&zst).unwrap();
    assert_eq!(&z[..4], &[0x28, 0xb5, 0x2f, 0xfd], "zstd magic");
    // Compressed RDF input (detected by magic bytes, not by name).
    let renamed = d.join("compressed-input.nq");
    std::fs::write(&renamed, &z).unwrap();
    let j = d.join("from-zst.jelly.zst");
    ok(&["rdf", "to-jelly", s(&renamed), "-o", s(&j)], None);
    let back = ok(&["rdf", "from-jelly", s(&j)], None);
    assert_eq!(back.stdout, text);
    // gzip through stdin.
    let gz_bytes = std::fs::read(&gz).unwrap();
    let back = ok(&["rdf", "from-jelly"], Some(&gz_bytes));
    assert_eq!(back.stdout, text);
}

/// A pipe may deliver an input's first byte alone: what is read from its start (the
/// compression magic, Jelly's delimiting, Jelly-Patch or RDF Patch text) is decided
/// from enough bytes all the same.
#[test]
fn inputs_whose_first_read_is_one_byte_are_recognised() {
    use std::io::Write as _;
    let d = tmp("trickle");
    let src = head(NANOPUBS, 50, &d, "np.nq");
    let text = std::fs::read(&src).unwrap();
    let gz = d.join("np.jelly.gz");
    ok(&["rdf", "to-jelly", s(&src), "--to", s(&gz)], None);
    let plain = d.join("np.jelly");
    ok(&["rdf", "to-jelly", s(&src), "--to", s(&plain)], None);
    let patch = d.join("p.jellyp");
    std::fs::write(
        d.join("p.rdfp"),
        "TX .\nA <http://e/s> <http://e/p> <http://e/o> .\nTC .\n",
    )
    .unwrap();
    ok(
        &["patch", "to-jelly", s(&d.join("p.rdfp")), "--to", s(&patch)],
        None,
    );
    // Runs `jelly ARGS` on `input` given through a pipe first one byte, then after a
    // pause the rest.
    let trickle = |args: &[&str], input: &[u8]| {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_jelly"))
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(&input[..1]).unwrap();
        stdin.flush().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
        stdin.write_all(&input[1..]).unwrap();
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{args:?}: {stderr}");
        out.stdout
    };
    let gz_bytes = std::fs::read(&gz).unwrap();
    assert_eq!(trickle(&["-q", "rdf", "from-jelly", "-"], &gz_bytes), text);
    let plain_bytes = std::fs::read(&plain).unwrap();
    assert_eq!(
        trickle(&["-q", "rdf", "from-jelly", "-"], &plain_bytes),
        text
    );
    let p = trickle(
        &["-q", "patch", "from-jelly", "-"],
        &std::fs::read(&patch).unwrap(),
    );
    assert!(
        String::from_utf8(p).unwrap().contains("A <http://e/s>"),
        "patch text"
    );
}

#[test]
fn take_frames_and_split_frames() {
    let d = tmp("take-frames");
    let src = head(NANOPUBS, 200, &d, "np.nq");
    let jf = d.join("np.jelly");
    ok(
        &[
            "rdf",
            "to-jelly",
            s(&src),
            "--rows-per-frame",
            "20",
            "-o",
            s(&jf),
        ],
        None,
    );
    let all = frames(&jf);
    assert!(all.len() >= 6, "{} frames", all.len());
    let one = ok(&["rdf", "from-jelly", s(&jf), "--take-frames", "3"], None);
    assert_eq!(parse(&one.stdout), all[3]);
    let range = ok(
        &["rdf", "from-jelly", s(&jf), "--take-frames", "1..3"],
        None,
    );
    let want: Vec<_> = all[1..3].concat();
    assert_eq!(parse(&range.stdout), want);
    let upto = ok(&["rdf", "from-jelly", s(&jf), "--take-frames", "..2"], None);
    assert_eq!(parse(&upto.stdout), all[..2].concat());
    let from = ok(&["rdf", "from-jelly", s(&jf), "--take-frames", "4.."], None);
    assert_eq!(parse(&from.stdout), all[4..].concat());
    let split = d.join("split");
    ok(
        &[
            "rdf",
            "from-jelly",
            s(&jf),
            "--take-frames",
            "0..=2",
            "--split-frames",
            s(&split),
        ],
        None,
    );
    for (i, f) in all.iter().enumerate().take(3) {
        let p = split.join(format!("frame-{i:06}.nq"));
        assert_eq!(&parse(&std::fs::read(&p).unwrap()), f, "frame {i}");
    }
    assert!(!split.join("frame-000003.nq").exists());
}

#[test]
fn frame_per_graph_gives_one_frame_per_graph_run() {
    let d = tmp("frame-per-graph");
    let src = dataset(NANOPUBS);
    let jf = d.join("np.jelly");
    ok(
        &[
            "rdf",
            "to-jelly",
            s(&src),
            "--frame-per",
            "graph",
            "-o",
            s(&jf),
        ],
        None,
    );
    // Runs of consecutive statements with the same graph in the source.
    let text = std::fs::read_to_string(&src).unwrap();
    let mut runs = 0;
    let mut last = None;
    let mut total = 0;
    for (i, line) in text.lines().enumerate() {
        if let Some(st) = jelly::nquads::parse_line(line, i + 1).unwrap() {
            total += 1;
            if last.as_ref() != Some(&st.graph) {
                runs += 1;
                last = Some(st.graph);
            }
        }
    }
    let got = frames(&jf);
    assert_eq!(got.len(), runs, "one frame per graph");
    assert_eq!(got.iter().map(Vec::len).sum::<usize>(), total);
    for (i, f) in got.iter().enumerate() {
        assert!(
            f.iter().all(|st| st.graph == f[0].graph),
            "frame {i} mixes graphs"
        );
        if i > 0 {
            assert_ne!(
                got[i - 1][0].graph,
                f[0].graph,
                "frames {i} and before share a graph"
            );
        }
    }
    let insp = ok(&["rdf", "inspect", s(&jf)], None).out();
    assert!(insp.contains("logical_type: named-graphs"), "{insp}");
    assert!(insp.contains(&format!("frames: {runs}\n")), "{insp}");
}

#[test]
fn frame_per_input_and_options() {
    let d = tmp("frame-per-input");
    let a = head(DBPEDIA, 100, &d, "a.nt");
    let b = head(NANOPUBS, 50, &d, "b.nq");
    let jf = d.join("ab.jelly");
    ok(
        &[
            "rdf",
            "to-jelly",
            s(&a),
            s(&b),
            "--frame-per",
            "input",
            "--preset",
            "small",
            "--opt.stream-name",
            "demo",
            "--opt.max-name-table-size",
            "64",
            "-o",
            s(&jf),
        ],
        None,
    );
    let f = frames(&jf);
    assert_eq!(f.iter().map(Vec::len).collect::<Vec<_>>(), vec![100, 50]);
    let insp = ok(&["rdf", "inspect", s(&jf), "--json"], None).out();
    for want in [
        "\"stream_name\": \"demo\"",
        "\"logical_type\": \"datasets\"",
        "\"physical_type\": \"quads\"",
        "\"max_name_table_size\": 64",
        "\"max_prefix_table_size\": 16",
    ] {
        assert!(insp.contains(want), "{want} missing in {insp}");
    }
    // --options-from copies them.
    let c = d.join("c.jelly");
    ok(
        &[
            "rdf",
            "to-jelly",
            s(&a),
            "--options-from",
            s(&jf),
            "-o",
            s(&c),
        ],
        None,
    );
    let insp = ok(&["rdf", "inspect", s(&c)], None).out();
    assert!(insp.contains("stream_name: demo"), "{insp}");
    assert!(insp.contains("max_name_table_size: 64"), "{insp}");
}

#[test]
fn namespace_declarations_become_prefixes() {
    let d = tmp("namespaces");
    let ttl = d.join("ns.ttl");
    std::fs::write(
        &ttl,
        "@prefix ex: <http://example.org/> .\n@prefix foaf: <http://xmlns.com/foaf/0.1/> .\n\
         ex:alice foaf:knows ex:bob .\nex:bob foaf:name \"Bob\" .\n",
    )
    .unwrap();
    let jf = d.join("ns.jelly");
    ok(
        &[
            "rdf",
            "to-jelly",
            s(&ttl),
            "--enable-namespace-declarations",
            "-o",
            s(&jf),
        ],
        None,
    );
    let insp = ok(&["rdf", "inspect", s(&jf)], None).out();
    assert!(insp.contains("version: 2"), "{insp}");
    assert!(insp.contains("namespace: 2"), "{insp}");
    let out = ok(&["rdf", "from-jelly", s(&jf), "--out-format", "ttl"], None).out();
    assert!(out.contains("@prefix ex: <http://example.org/>"), "{out}");
    assert!(out.contains("ex:alice foaf:knows ex:bob"), "{out}");
    // Without the flag: no declarations, version 1.
    let plain = d.join("plain.jelly");
    ok(&["rdf", "to-jelly", s(&ttl), "-o", s(&plain)], None);
    let insp = ok(&["rdf", "inspect", s(&plain)], None).out();
    assert!(
        insp.contains("version: 1") && insp.contains("namespace: 0"),
        "{insp}"
    );
}

/// A prefix bound again to another IRI is declared again, in RDF/XML too (where two
/// sibling elements binding it in turn once looked like no change), and in Turtle
/// between statements.
#[test]
fn namespace_rebindings_are_declared() {
    let d = tmp("rebind");
    let xml = d.join("rebind.rdf");
    std::fs::write(
        &xml,
        "<?xml version=\"1.0\"?>\n<rdf:RDF xmlns:rdf=\"http://www.w3.org/1999/02/22-rdf-syntax-ns#\">\n\
         <rdf:Description xmlns:ex=\"http://a.example/\" rdf:about=\"http://s/1\"><ex:p>1</ex:p></rdf:Description>\n\
         <rdf:Description xmlns:ex=\"http://b.example/\" rdf:about=\"http://s/2\"><ex:p>2</ex:p></rdf:Description>\n\
         </rdf:RDF>\n",
    )
    .unwrap();
    let ttl = d.join("rebind.ttl");
    std::fs::write(
        &ttl,
        "@prefix ex: <http://a.example/> .\nex:s ex:p 1 .\n# @prefix ex: <http://no/> .\n\
         ex:s ex:p \"PREFIX ex: <http://no/>\" .\nPREFIX ex: <http://b.example/>\nex:s ex:p 2 .\n",
    )
    .unwrap();
    for input in [&xml, &ttl] {
        let jf = d.join("rebind.jelly");
        ok(
            &[
                "rdf",
                "to-jelly",
                s(input),
                "--enable-namespace-declarations",
                "-o",
                s(&jf),
            ],
            None,
        );
        let insp = ok(&["rdf", "inspect", s(&jf)], None).out();
        let want = if input == &xml { 3 } else { 2 };
        assert!(insp.contains(&format!("namespace: {want}")), "{insp}");
    }
}

#[test]
fn rdf_star_and_generalized_input() {
    let d = tmp("star");
    let src = dataset("rdf-star-cg-tests/rdf-star-cg-positive.nq");
    let jf = d.join("star.jelly");
    let refused = jelly_run_to(&src, &jf, &[]);
    assert_eq!(refused.code, 1);
    assert!(
        refused.stderr.contains("--opt.rdf-star"),
        "{}",
        refused.stderr
    );
    let r = jelly_run_to(
        &src,
        &jf,
        &["--opt.rdf-star", "--opt.generalized-statements"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    ok(
        &["rdf", "validate", s(&jf), "--compare-to-rdf-file", s(&src)],
        None,
    );
    let out = ok(&["rdf", "from-jelly", s(&jf)], None);
    assert_iso(
        &parse(&out.stdout),
        &parse(&std::fs::read(&src).unwrap()),
        "rdf-star",
    );
    // Quoted triples as subjects do not fit TriG (RDF 1.2): a clear error.
    let trig = jelly(&["rdf", "from-jelly", s(&jf), "--out-format", "trig"], None);
    assert_eq!(trig.code, 1);
    assert!(trig.stderr.contains("cannot"), "{}", trig.stderr);
}

/// The optional-value flags (`--opt.rdf-star`, `--opt.generalized-statements`,
/// `--delimited`) took the next argument as their value, so an input file after them
/// was refused as "invalid value". A value now needs `=`: the flag alone is true, and a
/// following argument stays an input.
#[test]
fn boolean_flags_leave_the_next_argument_alone() {
    let d = tmp("bool-flags");
    let src = dataset("rdf-star-cg-tests/rdf-star-cg-positive.nq");
    let jf = d.join("star.jelly");
    ok(
        &[
            "rdf",
            "to-jelly",
            "--opt.rdf-star",
            s(&src),
            "--opt.generalized-statements",
            s(&src),
            "--delimited",
            "-o",
            s(&jf),
        ],
        None,
    );
    let insp = ok(&["rdf", "inspect", s(&jf)], None).out();
    assert!(insp.contains("  rdf_star: true\n"), "{insp}");
    assert!(insp.contains("  generalized_statements: true\n"), "{insp}");
    assert!(insp.contains("delimited: true\n"), "{insp}");
    // `=false` still turns a flag off; the input after it is an input.
    let single = d.join("single.jelly");
    ok(
        &[
            "rdf",
            "transcode",
            "--delimited=false",
            s(&jf),
            "--frame-per",
            "input",
            "--opt.rdf-star=true",
            "-o",
            s(&single),
        ],
        None,
    );
    let insp = ok(&["rdf", "inspect", s(&single)], None).out();
    assert!(insp.contains("delimited: false\n"), "{insp}");
    // A value given with a space is an input file now, named in the error.
    let r = jelly(
        &["rdf", "to-jelly", "--opt.rdf-star", "false", "-o", s(&jf)],
        None,
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("false"), "{}", r.stderr);
}

fn jelly_run_to(src: &std::path::Path, out: &std::path::Path, extra: &[&str]) -> Run {
    let mut args = vec!["rdf", "to-jelly", s(src), "-o", s(out)];
    args.extend_from_slice(extra);
    jelly(&args, None)
}

#[test]
fn transcode_merges_reframes_and_changes_options() {
    let d = tmp("transcode");
    let a = head(NANOPUBS, 150, &d, "a.nq");
    let b = head(
        "nanopubs-gdpr-fines/nanopubs-gdpr-fines.nq",
        120,
        &d,
        "b.nq",
    );
    let (ja, jb) = (d.join("a.jelly"), d.join("b.jelly"));
    ok(&["rdf", "to-jelly", s(&a), "-o", s(&ja)], None);
    ok(&["rdf", "to-jelly", s(&b), "-o", s(&jb)], None);
    let merged = d.join("m.jelly");
    ok(
        &[
            "rdf",
            "transcode",
            s(&ja),
            s(&jb),
            "--rows-per-frame",
            "32",
            "--preset",
            "small",
            "-o",
            s(&merged),
        ],
        None,
    );
    let mut want = parse(&std::fs::read(&a).unwrap());
    want.extend(parse(&std::fs::read(&b).unwrap()));
    let got: Vec<_> = frames(&merged).concat();
    assert_eq!(got, want, "merged statements in order");
    let insp = ok(&["rdf", "inspect", s(&merged)], None).out();
    assert!(insp.contains("max_name_table_size: 128"), "{insp}");
    // Default: keep options and frame boundaries.
    let same = d.join("same.jelly");
    ok(&["rdf", "transcode", s(&ja), "-o", s(&same)], None);
    assert_eq!(frames(&same), frames(&ja));
    // Change the physical type; stdin works too.
    let bytes = std::fs::read(&ja).unwrap();
    let g = ok(
        &["rdf", "transcode", "--opt.physical-type", "graphs"],
        Some(&bytes),
    );
    let gj = d.join("g.jelly");
    std::fs::write(&gj, &g.stdout).unwrap();
    let insp = ok(&["rdf", "inspect", s(&gj)], None).out();
    assert!(insp.contains("physical_type: graphs"), "{insp}");
    assert_iso(&frames(&gj).concat(), &frames(&ja).concat(), "graphs");
}

/// Blank-node labels are scoped to their input: `_:b0` in two files is two nodes in
/// the merged output (to-jelly and transcode), while one input keeps its labels.
#[test]
fn blank_nodes_of_different_inputs_stay_apart() {
    let d = tmp("bnode-scope");
    let (a, b) = (d.join("a.nt"), d.join("b.nt"));
    std::fs::write(
        &a,
        "_:b0 <http://ex.org/p> \"A\" .\n_:b0 <http://ex.org/q> _:b1 .\n",
    )
    .unwrap();
    std::fs::write(&b, "_:b0 <http://ex.org/p> \"B\" .\n").unwrap();
    let expected = parse(
        b"_:x <http://ex.org/p> \"A\" .\n_:x <http://ex.org/q> _:y .\n_:z <http://ex.org/p> \"B\" .\n",
    );
    let merged = ok(&["rdf", "to-jelly", s(&a), s(&b)], None);
    let text = ok(&["rdf", "from-jelly"], Some(&merged.stdout));
    assert_iso(&parse(&text.stdout), &expected, "to-jelly of two inputs");

    let (ja, jb) = (d.join("a.jelly"), d.join("b.jelly"));
    ok(&["rdf", "to-jelly", s(&a), "-o", s(&ja)], None);
    ok(&["rdf", "to-jelly", s(&b), "-o", s(&jb)], None);
    let single = ok(&["rdf", "from-jelly", s(&ja)], None);
    assert_eq!(single.out(), std::fs::read_to_string(&a).unwrap());
    let merged = ok(&["rdf", "transcode", s(&ja), s(&jb)], None);
    let text = ok(&["rdf", "from-jelly"], Some(&merged.stdout));
    assert_iso(&parse(&text.stdout), &expected, "transcode of two inputs");
}

/// `transcode` keeps each frame's metadata when it keeps the frames.
#[test]
fn transcode_keeps_frame_metadata() {
    use jelly::{Encoder, StatementRef, StreamOptions, TermRef};
    let d = tmp("transcode-metadata");
    let mut enc = Encoder::new(StreamOptions::small()).unwrap();
    let mut stream = Vec::new();
    for (i, o) in ["a", "b"].into_iter().enumerate() {
        enc.set_frame_metadata("offset", i.to_string());
        enc.set_frame_metadata("source", format!("sensor-{o}"));
        let st = StatementRef::triple(
            TermRef::Iri("http://ex.org/s"),
            TermRef::Iri("http://ex.org/p"),
            TermRef::Iri(if i == 0 {
                "http://ex.org/a"
            } else {
                "http://ex.org/b"
            }),
        );
        enc.add(st).unwrap();
        let frame = enc.finish_frame();
        jelly_proto::wire::put_varint(&mut stream, frame.len() as u64);
        stream.extend_from_slice(&frame);
    }
    let src = d.join("meta.jelly");
    std::fs::write(&src, &stream).unwrap();
    let out = ok(&["rdf", "transcode", s(&src), "--preset", "big"], None);
    let mut reader = jelly::JellyReader::new(&out.stdout[..]);
    let mut seen = Vec::new();
    while let Some(frame) = reader.next_frame().unwrap() {
        let m: Vec<(String, Vec<u8>)> = frame
            .metadata()
            .unwrap()
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_vec()))
            .collect();
        seen.push(m);
    }
    let want = |i: &str, src: &str| {
        vec![
            ("offset".to_owned(), i.as_bytes().to_vec()),
            ("source".to_owned(), src.as_bytes().to_vec()),
        ]
    };
    assert_eq!(seen, vec![want("0", "sensor-a"), want("1", "sensor-b")]);
}

/// An empty named graph of a GRAPHS stream (graph_start right after graph_end, which
/// the spec allows) survives `transcode` to GRAPHS output, in its place among the
/// other graphs, also with `--frame-per graph` (a frame of its own) and with several
/// inputs (its blank-node name prefixed like the statements'). QUADS output, which
/// cannot hold it, still gets the statements, and a note says what was left out.
#[test]
fn transcode_keeps_empty_graphs() {
    use jelly::{Encoder, Event, PhysicalType, StatementRef, StreamOptions, TermRef};
    let d = tmp("transcode-empty-graph");
    let mut enc =
        Encoder::new(StreamOptions::small().with_physical_type(PhysicalType::Graphs)).unwrap();
    enc.start_graph(TermRef::Iri("http://a/g")).unwrap();
    enc.end_graph().unwrap();
    let x = TermRef::Iri("http://a/x");
    enc.add(StatementRef::quad(x, x, x, x)).unwrap();
    enc.end_graph().unwrap();
    enc.start_graph(TermRef::BlankNode("e")).unwrap();
    enc.end_graph().unwrap();
    let frame = enc.finish_frame();
    let mut stream = Vec::new();
    jelly_proto::wire::put_varint(&mut stream, frame.len() as u64);
    stream.extend_from_slice(&frame);
    let src = d.join("eg.jelly");
    std::fs::write(&src, &stream).unwrap();

    // Graph rows and statements as text, with the frame each is in.
    let events = |bytes: &[u8]| {
        let mut seen = Vec::new();
        jelly::JellyReader::new(bytes)
            .for_each_event(|i, ev| match ev {
                Event::GraphStart(g) => seen.push(format!("{i} start {g:?}")),
                Event::GraphEnd => seen.push(format!("{i} end")),
                Event::Statement(st) => seen.push(format!("{i} {:?}", st.to_owned())),
                _ => {}
            })
            .unwrap();
        seen
    };
    let original = events(&stream);
    assert_eq!(original.len(), 7, "{original:?}");
    let out = ok(&["rdf", "transcode", s(&src)], None);
    assert_eq!(events(&out.stdout), original);

    let per_graph =
        events(&ok(&["rdf", "transcode", s(&src), "--frame-per", "graph"], None).stdout);
    let frames_of: Vec<&str> = per_graph.iter().map(|e| &e[..1]).collect();
    assert_eq!(
        frames_of,
        ["0", "0", "1", "1", "1", "2", "2"],
        "{per_graph:?}"
    );

    let two = events(&ok(&["rdf", "transcode", s(&src), s(&src)], None).stdout);
    assert_eq!(two.len(), 14, "{two:?}");
    assert!(
        two[5].contains("i1_e") && two[12].contains("i2_e"),
        "{two:?}"
    );

    let quads = ok(
        &["rdf", "transcode", s(&src), "--opt.physical-type", "quads"],
        None,
    );
    let q = events(&quads.stdout);
    assert_eq!(q.len(), 1, "{q:?}");
    // It says so, as from-jelly does (its text outputs hold statements only), unless -q.
    assert!(
        quads
            .stderr
            .contains("2 empty named graph(s) of the input left out")
            && quads.stderr.contains("QUADS"),
        "{}",
        quads.stderr
    );
    let nq = ok(&["rdf", "from-jelly", s(&src)], None);
    assert_eq!(nq.out().lines().count(), 1, "{}", nq.out());
    assert!(
        nq.stderr.contains("2 empty named graph(s) of") && nq.stderr.contains("left out"),
        "{}",
        nq.stderr
    );
    let full = ok(&["rdf", "transcode", s(&src)], None);
    assert!(!full.stderr.contains("left out"), "{}", full.stderr);
    let quiet = ok(&["-q", "rdf", "from-jelly", s(&src)], None);
    assert!(!quiet.stderr.contains("left out"), "{}", quiet.stderr);
}

/// What RDF/XML cannot hold is refused with the statement named, not written as
/// broken XML; a namespace whose name Turtle cannot declare is left out of the prefixes.
#[test]
fn output_formats_refuse_what_they_cannot_write() {
    let d = tmp("unwritable");
    let ctrl = d.join("ctrl.nt");
    std::fs::write(&ctrl, "<http://a/s> <http://a/p> \"x\\u0001y\" .\n").unwrap();
    let j = ok(&["rdf", "to-jelly", s(&ctrl)], None);
    let r = jelly(
        &["rdf", "from-jelly", "--out-format", "rdfxml"],
        Some(&j.stdout),
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("U+0001") && r.stderr.contains("frame 0"),
        "{}",
        r.stderr
    );
    // The same statement is fine in N-Triples.
    ok(
        &["rdf", "from-jelly", "--out-format", "nt"],
        Some(&j.stdout),
    );

    let num = d.join("num.nt");
    std::fs::write(&num, "<http://a/s> <http://a/123> \"x\" .\n").unwrap();
    let j = ok(&["rdf", "to-jelly", s(&num)], None);
    let r = jelly(
        &["rdf", "from-jelly", "--out-format", "rdfxml"],
        Some(&j.stdout),
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("<http://a/123>"), "{}", r.stderr);
    // A predicate that ends in a name is written, and reads back.
    let fine = d.join("fine.nt");
    std::fs::write(&fine, "<http://a/s> <http://a/1x> \"x\" .\n").unwrap();
    let j = ok(&["rdf", "to-jelly", s(&fine)], None);
    let xml = ok(
        &["rdf", "from-jelly", "--out-format", "rdfxml"],
        Some(&j.stdout),
    );
    let xml_file = d.join("fine.rdf");
    std::fs::write(&xml_file, &xml.stdout).unwrap();
    let again = ok(&["rdf", "to-jelly", s(&xml_file)], None);
    let nt = ok(
        &["rdf", "from-jelly", "--out-format", "nt"],
        Some(&again.stdout),
    );
    assert_eq!(nt.out(), std::fs::read_to_string(&fine).unwrap());

    let mut w = jelly::JellyWriterBuilder::new(jelly::StreamOptions::small())
        .namespace_declarations(true)
        .build(Vec::new())
        .unwrap();
    w.declare_namespace("bad:name x", "http://a/").unwrap();
    w.declare_namespace("ok", "http://a/").unwrap();
    w.add(jelly::StatementRef::triple(
        jelly::TermRef::Iri("http://a/s"),
        jelly::TermRef::Iri("http://a/p"),
        jelly::TermRef::Iri("http://a/o"),
    ))
    .unwrap();
    let stream = w.finish().unwrap();
    let ttl = ok(&["rdf", "from-jelly", "--out-format", "ttl"], Some(&stream));
    assert!(!ttl.out().contains("bad:name"), "{}", ttl.out());
    assert!(
        ttl.out().contains("@prefix ok: <http://a/>"),
        "{}",
        ttl.out()
    );
}

/// A carriage return in a literal survives RDF/XML: it is written as `&#13;`, since
/// XML readers turn a raw one into a line feed.
#[test]
fn carriage_returns_survive_rdfxml() {
    let d = tmp("rdfxml-cr");
    let nq = d.join("cr.nq");
    std::fs::write(
        &nq,
        "<http://ex.org/s> <http://ex.org/p> \"line1\\r\\nline2\\r\" .\n",
    )
    .unwrap();
    let j = d.join("cr.jelly");
    ok(&["rdf", "to-jelly", s(&nq), "-o", s(&j)], None);
    let xml = d.join("cr.rdf");
    ok(&["rdf", "from-jelly", s(&j), "-o", s(&xml)], None);
    let text = std::fs::read(&xml).unwrap();
    assert!(!text.contains(&b'\r'), "{}", String::from_utf8_lossy(&text));
    assert_eq!(
        String::from_utf8_lossy(&text).matches("&#13;").count(),
        2,
        "{}",
        String::from_utf8_lossy(&text)
    );
    let back = d.join("back.jelly");
    ok(&["rdf", "to-jelly", s(&xml), "-o", s(&back)], None);
    let out = ok(&["rdf", "from-jelly", s(&back)], None);
    assert_iso(
        &parse(&out.stdout),
        &parse(&std::fs::read(&nq).unwrap()),
        "CR",
    );
}

#[test]
fn stream_types_take_the_jvm_cli_spellings() {
    // As the JVM jelly-cli writes them: upper-case physical types and RDF-STaX IRIs.
    let d = tmp("spellings");
    let nt = d.join("a.nt");
    std::fs::write(&nt, "<http://ex.org/s> <http://ex.org/p> \"o\" .\n").unwrap();
    let out = d.join("a.jelly");
    let w = ok(
        &[
            "rdf",
            "to-jelly",
            s(&nt),
            "--opt.physical-type",
            "TRIPLES",
            "--opt.logical-type",
            "https://w3id.org/stax/ontology#flatTripleStream",
            "-o",
            s(&out),
        ],
        None,
    );
    let r = ok(&["rdf", "inspect", s(&out)], None);
    assert!(r.out().contains("physical_type: triples"), "{}", r.out());
    assert!(
        r.out().contains("logical_type: flat-triples"),
        "{}",
        r.out()
    );
    assert!(!w.stderr.contains("not recommend"), "{}", w.stderr);
    let r = jelly(
        &[
            "rdf",
            "to-jelly",
            s(&nt),
            "--opt.logical-type",
            "https://w3id.org/stax/ontology#noSuchStream",
        ],
        None,
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    // A combination the spec marks as not supported: written, with a note (as the JVM
    // jelly-cli warns).
    let r = ok(
        &[
            "rdf",
            "to-jelly",
            s(&nt),
            "--opt.physical-type",
            "triples",
            "--opt.logical-type",
            "datasets",
            "-o",
            s(&out),
        ],
        None,
    );
    assert!(
        r.stderr.contains("datasets with physical type triples"),
        "{}",
        r.stderr
    );
}

/// A language tag gets one spelling whichever parser reads the input (`--opt.rdf-star`
/// switches N-Triples to another), and `validate --compare-to-rdf-file` compares tags
/// ignoring case, as RDF does: our own output checks out against its source.
#[test]
fn language_tags_read_the_same_and_compare_ignoring_case() {
    let d = tmp("lang-case");
    let nt = d.join("in.nt");
    std::fs::write(&nt, "<http://ex.org/s> <http://ex.org/p> \"x\"@en-US .\n").unwrap();
    let mut outs = Vec::new();
    for extra in [&[][..], &["--opt.rdf-star=true"]] {
        let out = d.join(format!("o{}.jelly", outs.len()));
        let mut args = vec!["rdf", "to-jelly", s(&nt), "-q", "-o", s(&out)];
        args.extend_from_slice(extra);
        ok(&args, None);
        let text = ok(&["rdf", "from-jelly", s(&out)], None).out();
        outs.push(text);
        ok(
            &["rdf", "validate", s(&out), "--compare-to-rdf-file", s(&nt)],
            None,
        );
    }
    assert_eq!(outs[0], outs[1]);
    assert!(outs[0].contains("\"x\"@en-us"), "{}", outs[0]);
}

/// Another physical type without a logical type carries the logical type over to its
/// counterpart: a FLAT_TRIPLES stream (as Jelly-JVM and pyjelly always write) transcoded
/// to QUADS says FLAT_QUADS, not a combination those readers refuse; with a note,
/// unless -q.
#[test]
fn a_new_physical_type_carries_the_logical_type_over() {
    let d = tmp("carry-logical");
    let nt = d.join("a.nt");
    std::fs::write(&nt, "<http://ex.org/s> <http://ex.org/p> \"o\" .\n").unwrap();
    let flat = d.join("flat.jelly");
    ok(
        &[
            "rdf",
            "to-jelly",
            s(&nt),
            "--opt.physical-type",
            "triples",
            "--opt.logical-type",
            "flat-triples",
            "-o",
            s(&flat),
        ],
        None,
    );
    let logical = |path: &std::path::Path| {
        let r = ok(&["rdf", "inspect", s(path)], None);
        r.out()
            .lines()
            .find_map(|l| l.trim().strip_prefix("logical_type: ").map(str::to_string))
            .unwrap()
    };
    assert_eq!(logical(&flat), "flat-triples");
    let quads = d.join("quads.jelly");
    let r = ok(
        &[
            "rdf",
            "transcode",
            s(&flat),
            "--opt.physical-type",
            "quads",
            "-o",
            s(&quads),
        ],
        None,
    );
    assert_eq!(logical(&quads), "flat-quads");
    assert!(r.stderr.contains("becomes flat-quads"), "{}", r.stderr);
    let r = ok(
        &[
            "-q",
            "rdf",
            "transcode",
            s(&flat),
            "--opt.physical-type",
            "graphs",
            "-o",
            s(&quads),
        ],
        None,
    );
    assert_eq!(logical(&quads), "flat-quads");
    assert!(r.stderr.is_empty(), "{}", r.stderr);
    // A logical type given is kept, with the note that readers may refuse it.
    let r = ok(
        &[
            "rdf",
            "transcode",
            s(&flat),
            "--opt.physical-type",
            "quads",
            "--opt.logical-type",
            "flat-triples",
            "-o",
            s(&quads),
        ],
        None,
    );
    assert_eq!(logical(&quads), "flat-triples");
    assert!(r.stderr.contains("not recommend"), "{}", r.stderr);
    // validate takes it (readers may), and says that the reference readers do not.
    let v = ok(&["rdf", "validate", s(&quads)], None);
    assert!(
        v.stderr.contains("Jelly-JVM and pyjelly refuse it"),
        "{}",
        v.stderr
    );
    let v = ok(&["rdf", "validate", s(&flat)], None);
    assert!(!v.stderr.contains("refuse"), "{}", v.stderr);
}

/// Blank nodes whose labels start with a digit (`_:1a` in N-Triples) are written to
/// RDF/XML with labels it can hold (an `rdf:nodeID` is an XML name), and read back as
/// the same graph.
#[test]
fn rdfxml_output_gives_digit_labels_xml_names() {
    let d = tmp("rdfxml-digits");
    let nt = d.join("in.nt");
    std::fs::write(
        &nt,
        "_:1a <http://ex.org/p> _:9 .\n_:9 <http://ex.org/p> _:b1 .\n_:b1 <http://ex.org/q> _:1a .\n",
    )
    .unwrap();
    let j = ok(&["rdf", "to-jelly", s(&nt)], None).stdout;
    let xml = ok(&["rdf", "from-jelly", "--out-format", "rdfxml"], Some(&j));
    assert!(!xml.out().contains("nodeID=\"1a\""), "{}", xml.out());
    let xml_file = d.join("out.rdf");
    std::fs::write(&xml_file, &xml.stdout).unwrap();
    let back = ok(&["rdf", "to-jelly", s(&xml_file)], None).stdout;
    let back = ok(&["rdf", "from-jelly"], Some(&back)).stdout;
    assert_iso(
        &parse(&back),
        &parse(&std::fs::read(&nt).unwrap()),
        "rdfxml",
    );
}

/// Terms a stream can carry but RDF cannot (a relative IRI, `rdf:langString` without a
/// tag) are written by from-jelly as they are, with a note saying how many and where
/// the first is (no RDF reader would take the output without it telling); validate
/// refuses them.
#[test]
fn from_jelly_notes_terms_rdf_does_not_allow() {
    use jelly::{Encoder, LiteralKind, LiteralRef, StatementRef, StreamOptions, TermRef};
    let mut enc = Encoder::new(StreamOptions::small()).unwrap();
    let p = TermRef::Iri("http://ex.org/p");
    enc.add(StatementRef::triple(
        TermRef::Iri("http://ex.org/s"),
        p,
        TermRef::Iri("http://ex.org/o"),
    ))
    .unwrap();
    enc.add(StatementRef::triple(
        TermRef::Iri("s"),
        p,
        TermRef::Iri("http://ex.org/o"),
    ))
    .unwrap();
    let ls = LiteralRef {
        lex: "x",
        kind: LiteralKind::Typed(jelly::term::RDF_LANG_STRING),
    };
    enc.add(StatementRef::triple(
        TermRef::Iri("http://ex.org/s"),
        p,
        TermRef::Literal(ls),
    ))
    .unwrap();
    let frame = enc.finish_frame();
    let mut stream = Vec::new();
    jelly_proto::wire::put_varint(&mut stream, frame.len() as u64);
    stream.extend_from_slice(&frame);
    let r = ok(&["rdf", "from-jelly"], Some(&stream));
    assert_eq!(r.out().lines().count(), 3);
    assert!(
        r.stderr.contains("2 statement(s)") && r.stderr.contains("<s> is not absolute"),
        "{}",
        r.stderr
    );
    let q = ok(&["-q", "rdf", "from-jelly"], Some(&stream));
    assert!(q.stderr.is_empty(), "{}", q.stderr);
    // validate holds the stream to RDF: the first such statement, located.
    let v = jelly(&["rdf", "validate"], Some(&stream));
    assert_eq!(v.code, 1, "{}", v.stderr);
    assert!(
        v.stderr.contains("frame 0:row ") && v.stderr.contains("<s> is not absolute"),
        "{}",
        v.stderr
    );
}

/// N-Triples of `n` statements whose objects are distinct literals of about `len`
/// bytes (the same literal twice would be a repeated term, a few bytes), all in one
/// named graph when `graphs` (N-Quads then).
fn big_literals(n: usize, len: usize, graphs: bool) -> String {
    let lit = "x".repeat(len);
    (0..n)
        .map(|i| {
            let g = if graphs { " <http://ex.org/g>" } else { "" };
            format!("<http://ex.org/s{i}> <http://ex.org/p> \"{i}{lit}\"{g} .\n")
        })
        .collect()
}

/// Frames end at 512 KiB as well as at 256 rows (`--bytes-per-frame`), so rows with
/// large literals make frames of a few rows, not one frame of all of them; a row larger
/// than the bound is a frame of its own; `--rows-per-frame` keeps its meaning; frames
/// that are units (`--frame-per`, transcode keeping the input's frames) are not cut.
#[test]
fn frames_also_end_at_a_byte_size() {
    let d = tmp("bytes-per-frame");
    // Six rows of 300 KB: two reach 512 KiB.
    let src = d.join("big.nt");
    std::fs::write(&src, big_literals(6, 300_000, false)).unwrap();
    let j = d.join("big.jelly");
    ok(&["rdf", "to-jelly", s(&src), "-o", s(&j)], None);
    let sizes: Vec<usize> = frames(&j).iter().map(Vec::len).collect();
    assert_eq!(sizes, [2, 2, 2], "default: 512 KiB frames");
    // Every row past the bound: a frame each.
    ok(
        &[
            "rdf",
            "to-jelly",
            s(&src),
            "--bytes-per-frame",
            "1",
            "-o",
            s(&j),
        ],
        None,
    );
    assert_eq!(frames(&j).len(), 6);
    // A larger bound, then the row count first.
    ok(
        &[
            "rdf",
            "to-jelly",
            s(&src),
            "--bytes-per-frame",
            "2000000",
            "-o",
            s(&j),
        ],
        None,
    );
    let sizes: Vec<usize> = frames(&j).iter().map(Vec::len).collect();
    assert_eq!(sizes, [6]);
    ok(
        &[
            "rdf",
            "to-jelly",
            s(&src),
            "--rows-per-frame",
            "1",
            "--bytes-per-frame",
            "2000000",
            "-o",
            s(&j),
        ],
        None,
    );
    assert_eq!(frames(&j).len(), 6);
    // Small rows: the row count decides, as before (the same bytes as with no byte
    // bound to speak of).
    let small = head(NANOPUBS, 1000, &d, "np.nq");
    let (js, unbounded) = (d.join("np.jelly"), d.join("np-unbounded.jelly"));
    ok(&["rdf", "to-jelly", s(&small), "-o", s(&js)], None);
    ok(
        &[
            "rdf",
            "to-jelly",
            s(&small),
            "--bytes-per-frame",
            "1000000000",
            "-o",
            s(&unbounded),
        ],
        None,
    );
    assert!(frames(&js).len() > 1);
    assert_eq!(
        std::fs::read(&js).unwrap(),
        std::fs::read(&unbounded).unwrap()
    );

    // Transcode keeps the input's frames unless asked to re-frame.
    let one = d.join("one.jelly");
    ok(
        &[
            "rdf",
            "to-jelly",
            s(&src),
            "--rows-per-frame",
            "1000",
            "--bytes-per-frame",
            "100000000",
            "-o",
            s(&one),
        ],
        None,
    );
    assert_eq!(frames(&one).len(), 1);
    let kept = d.join("kept.jelly");
    ok(&["rdf", "transcode", s(&one), "-o", s(&kept)], None);
    assert_eq!(frames(&kept).len(), 1, "transcode keeps the input's frames");
    let re = d.join("re.jelly");
    ok(
        &[
            "rdf",
            "transcode",
            s(&one),
            "--bytes-per-frame",
            "700000",
            "-o",
            s(&re),
        ],
        None,
    );
    let sizes: Vec<usize> = frames(&re).iter().map(Vec::len).collect();
    assert_eq!(sizes, [3, 3], "transcode --bytes-per-frame re-frames");
    ok(
        &[
            "rdf",
            "transcode",
            s(&one),
            "--rows-per-frame",
            "100",
            "-o",
            s(&re),
        ],
        None,
    );
    assert_eq!(
        frames(&re).len(),
        3,
        "--rows-per-frame re-frames with the default byte bound"
    );

    // A graph is one frame with --frame-per graph, whatever its size.
    let nq = d.join("big.nq");
    std::fs::write(&nq, big_literals(6, 300_000, true)).unwrap();
    ok(
        &[
            "rdf",
            "to-jelly",
            s(&nq),
            "--frame-per",
            "graph",
            "-o",
            s(&j),
        ],
        None,
    );
    assert_eq!(frames(&j).len(), 1);
    usage_error(
        &[
            "rdf",
            "to-jelly",
            s(&nq),
            "--frame-per",
            "graph",
            "--bytes-per-frame",
            "10",
        ],
        "--bytes-per-frame",
    );
    // Non-delimited output stays one frame.
    ok(
        &["rdf", "to-jelly", s(&src), "--delimited=false", "-o", s(&j)],
        None,
    );
    assert_eq!(frames(&j).len(), 1);
}

/// The decoder checks an IRI when it builds it from a prefix and a name, not per
/// statement: the same ids make another IRI once an entry is replaced, and a prefix
/// and a name can make a scheme only together. The notes must follow the IRIs written.
#[test]
fn from_jelly_notes_follow_entries_replaced_mid_stream() {
    use jelly_proto::fields::{
        entry, frame as ff, iri, literal as lit, options as of, physical_type as pt, row,
        statement as st,
    };
    use jelly_proto::wire::{WireType, put_bytes_field, put_tag, put_uint_field, put_varint};
    let mut rows: Vec<Vec<u8>> = Vec::new();
    let mut add = |field: u32, body: &[u8]| {
        let mut r = Vec::new();
        put_bytes_field(&mut r, field, body);
        rows.push(r);
    };
    let entry_row = |id: u32, v: &str| {
        let mut b = Vec::new();
        put_uint_field(&mut b, entry::ID, id.into());
        put_bytes_field(&mut b, entry::VALUE, v.as_bytes());
        b
    };
    let iri_of = |p: u32, n: u32| {
        let mut b = Vec::new();
        put_uint_field(&mut b, iri::PREFIX_ID, p.into());
        put_uint_field(&mut b, iri::NAME_ID, n.into());
        b
    };
    let statement = |fields: &[(u32, Vec<u8>)]| {
        let mut b = Vec::new();
        for (f, v) in fields {
            put_bytes_field(&mut b, *f, v);
        }
        b
    };
    let mut o = Vec::new();
    for (f, v) in [
        (of::PHYSICAL_TYPE, pt::TRIPLES),
        (of::MAX_NAME_TABLE_SIZE, 8),
        (of::MAX_PREFIX_TABLE_SIZE, 4),
        (of::MAX_DATATYPE_TABLE_SIZE, 4),
        (of::VERSION, 1),
    ] {
        put_uint_field(&mut o, f, v.into());
    }
    add(row::OPTIONS, &o);
    add(row::PREFIX, &entry_row(1, "http://ex.org/"));
    add(row::PREFIX, &entry_row(2, "ht"));
    add(row::NAME, &entry_row(1, "a"));
    add(row::NAME, &entry_row(2, "tp://x"));
    add(row::PREFIX, &entry_row(3, "1"));
    add(row::NAME, &entry_row(3, "a:b"));
    // <http://ex.org/a> <http://x> <http://ex.org/a>: "ht" and "tp://x" make a scheme.
    let all = |s: (u32, u32), p: (u32, u32), o: (u32, u32)| {
        statement(&[
            (st::S_IRI, iri_of(s.0, s.1)),
            (st::P_IRI, iri_of(p.0, p.1)),
            (st::O_IRI, iri_of(o.0, o.1)),
        ])
    };
    add(row::TRIPLE, &all((1, 1), (2, 2), (1, 1)));
    // Prefix 1 replaced: the same ids now make <rel/a> (row 9).
    add(row::PREFIX, &entry_row(1, "rel/"));
    add(row::TRIPLE, &all((1, 1), (2, 2), (2, 2)));
    // Its subject repeated.
    add(row::TRIPLE, &statement(&[(st::O_IRI, iri_of(1, 1))]));
    // Back to an absolute prefix, and a datatype that needs a language tag.
    add(row::PREFIX, &entry_row(1, "urn:x:"));
    add(
        row::DATATYPE,
        &entry_row(1, jelly::term::RDF_DIR_LANG_STRING),
    );
    let mut l = Vec::new();
    put_bytes_field(&mut l, lit::LEX, b"x");
    put_tag(&mut l, lit::DATATYPE, WireType::Varint);
    put_varint(&mut l, 1);
    add(row::TRIPLE, &all((1, 1), (2, 2), (1, 1)));
    add(row::TRIPLE, &statement(&[(st::O_LITERAL, l)]));
    // A name with a scheme, after a prefix that no scheme starts with: <1a:b>. (The
    // other terms are made of names that are absolute alone too.)
    add(row::TRIPLE, &all((2, 2), (2, 2), (3, 3)));
    let mut frame = Vec::new();
    for r in &rows {
        put_bytes_field(&mut frame, ff::ROWS, r);
    }
    let mut stream = Vec::new();
    put_varint(&mut stream, frame.len() as u64);
    stream.extend_from_slice(&frame);

    let r = ok(&["rdf", "from-jelly"], Some(&stream));
    assert_eq!(
        r.out(),
        "<http://ex.org/a> <http://x> <http://ex.org/a> .\n\
         <rel/a> <http://x> <http://x> .\n\
         <rel/a> <http://x> <rel/a> .\n\
         <urn:x:a> <http://x> <urn:x:a> .\n\
         <urn:x:a> <http://x> \"x\"^^<http://www.w3.org/1999/02/22-rdf-syntax-ns#dirLangString> .\n\
         <http://x> <http://x> <1a:b> .\n"
    );
    assert!(
        r.stderr.contains("4 statement(s)") && r.stderr.contains("IRI <rel/a> is not absolute"),
        "{}",
        r.stderr
    );
    let v = jelly(&["rdf", "validate"], Some(&stream));
    assert_eq!(v.code, 1, "{}", v.stderr);
    assert!(
        v.stderr.contains("frame 0:row 9") && v.stderr.contains("IRI <rel/a> is not absolute"),
        "{}",
        v.stderr
    );
}
