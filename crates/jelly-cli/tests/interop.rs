//! Interoperability with independent Jelly-RDF implementations:
//!
//! - **pyjelly** (Python, `bench/py/pyjelly_peer.py`), located by `JELLY_PYTHON` (the venv
//!   python) or set up with `bench/py/setup.sh`;
//! - **Jelly-JVM** with Apache Jena (`bench/jvm`), located by `JELLY_JVM_JAR` or built with
//!   `bench/jvm/build.sh`.
//!
//! A peer that cannot be set up fails the tests, unless `JELLY_SKIP_INTEROP=1` is set (then
//! the tests print `SKIPPED interop: …` to stderr and pass).
//!
//! Directions covered: our encoder → peer decoder (statements compared with the input), peer
//! encoder → our decoder (statements, frame layout and options compared), frame metadata and
//! namespace declarations as seen by pyjelly, and stream options as seen by pyjelly; and
//! jelly-text (frames in the protobuf text format) against protobuf-java's `TextFormat`,
//! which the JVM jelly-cli uses, both ways.
//!
//! Statement comparison ([`assert_same`]) is twofold: all three implementations keep stream
//! order, so the statement lists must be equal position by position up to one consistent
//! bijective renaming of blank nodes (exact, and cheap for any number of blank nodes); and
//! the two lists must be isomorphic as RDF datasets by `jelly::iso::isomorphic`.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use jelly::iso::{IsoResult, isomorphic};
use jelly::nquads::parse_document;
use jelly::{
    Event, FramePolicy, JellyReader, JellyWriterBuilder, Literal, LogicalType, OwnedLiteralKind,
    PhysicalType, Statement, StreamOptions, Term, TermRef,
};

// ---------------------------------------------------------------------------------------
// Peers
// ---------------------------------------------------------------------------------------

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn datasets_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/datasets")
}

/// An external program that speaks the peer tool's command line.
#[derive(Debug)]
struct Peer {
    name: &'static str,
    program: PathBuf,
    /// Arguments before the subcommand (`pyjelly_peer.py`, or `-jar X.jar`).
    lead: Vec<PathBuf>,
    /// The peer writes language tags in canonical BCP 47 case (Jena: `en-uk` → `en-UK`).
    /// Tags are case-insensitive in RDF 1.1, so its output is compared ignoring their case.
    recases_lang_tags: bool,
}

/// Output of one peer run.
struct Run {
    stdout: String,
    stderr: String,
}

impl Run {
    /// The last JSON line the peer printed on stderr (its summary).
    fn summary(&self) -> Json {
        let line = self
            .stderr
            .lines()
            .rev()
            .find(|l| l.trim_start().starts_with('{'))
            .unwrap_or_else(|| panic!("no JSON summary on stderr:\n{}", self.stderr));
        Json::parse(line)
    }
}

impl Peer {
    fn run<S: AsRef<OsStr>>(&self, args: &[S]) -> Run {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.lead).args(args);
        let out = cmd
            .output()
            .unwrap_or_else(|e| panic!("{}: cannot run {:?}: {e}", self.name, cmd));
        let run = Run {
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        };
        assert!(
            out.status.success(),
            "{} failed ({}): {:?}\nstderr:\n{}",
            self.name,
            out.status,
            cmd,
            run.stderr
        );
        run
    }

    /// Peer decodes `jelly` to N-Quads; returns the statements and the peer's summary.
    fn decode_to_nquads(&self, jelly: &Path, out: &Path) -> (Vec<Statement>, Json) {
        let run = self.run(&[OsStr::new("from-jelly"), jelly.as_os_str(), out.as_os_str()]);
        let text = fs::read_to_string(out).expect("peer output readable");
        let st = parse_document(&text)
            .unwrap_or_else(|e| panic!("{}: output {} unparseable: {e}", self.name, out.display()));
        (st, run.summary())
    }

    /// Peer encodes an N-Triples/N-Quads file; returns the peer's summary.
    fn encode_file(&self, input: &Path, out: &Path, extra: &[&str]) -> Json {
        let mut args: Vec<&OsStr> =
            vec![OsStr::new("to-jelly"), input.as_os_str(), out.as_os_str()];
        args.extend(extra.iter().map(OsStr::new));
        self.run(&args).summary()
    }
}

fn skip_requested() -> bool {
    std::env::var("JELLY_SKIP_INTEROP").is_ok_and(|v| v == "1")
}

/// Runs a repository script that prints a path on its last stdout line.
fn path_from_script(script: &str) -> Result<PathBuf, String> {
    let out = Command::new("bash")
        .arg(repo_root().join(script))
        .current_dir(repo_root())
        .output()
        .map_err(|e| format!("cannot run {script}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{script} failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or("").trim();
    if last.is_empty() {
        return Err(format!("{script} printed no path"));
    }
    Ok(PathBuf::from(last))
}

/// The env var's path, or the script's output.
fn locate(var: &str, script: &str) -> Result<PathBuf, String> {
    let path = match std::env::var_os(var).filter(|v| !v.is_empty()) {
        Some(v) => PathBuf::from(v),
        None => path_from_script(script)
            .map_err(|e| format!("{var} is unset and set-up failed: {e}"))?,
    };
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!("{var}: {} is not a file", path.display()))
    }
}

/// Checks a peer answers at all (the interpreter / JVM starts and finds its libraries).
fn smoke(program: &Path, args: &[&str]) -> Result<(), String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`{} {}` failed: {}",
            program.display(),
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn setup_pyjelly() -> Result<Peer, String> {
    let python = locate("JELLY_PYTHON", "bench/py/setup.sh")?;
    smoke(
        &python,
        &["-c", "import pyjelly.integrations.generic.parse, rdflib"],
    )?;
    Ok(Peer {
        name: "pyjelly",
        program: python,
        lead: vec![repo_root().join("bench/py/pyjelly_peer.py")],
        recases_lang_tags: false,
    })
}

fn setup_jvm() -> Result<Peer, String> {
    let jar = locate("JELLY_JVM_JAR", "bench/jvm/build.sh")?;
    smoke(Path::new("java"), &["-version"])?;
    Ok(Peer {
        name: "jelly-jvm",
        program: PathBuf::from("java"),
        lead: vec![PathBuf::from("-jar"), jar],
        recases_lang_tags: true,
    })
}

fn available(name: &str, r: &'static Result<Peer, String>) -> Option<&'static Peer> {
    match r {
        Ok(p) => Some(p),
        Err(e) if skip_requested() => {
            eprintln!("SKIPPED interop: {name} peer unavailable: {e}");
            None
        }
        Err(e) => panic!(
            "interop peer {name} unavailable: {e}\n(set JELLY_SKIP_INTEROP=1 to skip interop tests)"
        ),
    }
}

fn pyjelly() -> Option<&'static Peer> {
    static P: OnceLock<Result<Peer, String>> = OnceLock::new();
    available("pyjelly", P.get_or_init(setup_pyjelly))
}

fn jvm() -> Option<&'static Peer> {
    static P: OnceLock<Result<Peer, String>> = OnceLock::new();
    available("jelly-jvm", P.get_or_init(setup_jvm))
}

/// Both peers, or `None` (after a SKIPPED line) when skipping is allowed and one is missing.
fn both_peers() -> Option<[&'static Peer; 2]> {
    let py = pyjelly();
    let jvm = jvm();
    Some([py?, jvm?])
}

// ---------------------------------------------------------------------------------------
// Scratch files and inputs
// ---------------------------------------------------------------------------------------

/// A per-test directory, removed when the test passes (kept for inspection when it fails).
struct Scratch(PathBuf);

impl Scratch {
    fn new(test: &str) -> Self {
        let d =
            std::env::temp_dir().join(format!("jellyfish-interop-{}-{test}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).expect("create scratch dir");
        Scratch(d)
    }
    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("interop scratch files kept in {}", self.0.display());
        } else {
            let _ = fs::remove_dir_all(&self.0);
        }
    }
}

/// A dataset (or its first lines), as parsed statements and as a file the peers can read.
struct Input {
    name: String,
    file: PathBuf,
    statements: Vec<Statement>,
    /// Also check with `jelly::iso::isomorphic` (off where its search gives up, slowly).
    iso: bool,
}

/// Loads `rel` (relative to the shared datasets) keeping at most `max_lines` lines, and
/// writes that text to the scratch directory under the same file name.
fn load(scratch: &Scratch, rel: &str, max_lines: Option<usize>) -> Input {
    let src = datasets_dir().join(rel);
    let text = fs::read_to_string(&src)
        .unwrap_or_else(|e| panic!("dataset {} unreadable: {e}", src.display()));
    let text = match max_lines {
        Some(n) => {
            let end = text
                .match_indices('\n')
                .nth(n - 1)
                .map_or(text.len(), |(i, _)| i + 1);
            text[..end].to_owned()
        }
        None => text,
    };
    let file_name = Path::new(rel).file_name().unwrap().to_str().unwrap();
    let file = scratch.path(file_name);
    fs::write(&file, &text).unwrap();
    let statements = parse_document(&text).unwrap_or_else(|e| panic!("{rel}: {e}"));
    if let Some(n) = max_lines {
        assert_eq!(
            statements.len(),
            n,
            "{rel}: expected one statement per line"
        );
    }
    Input {
        name: file_name.to_owned(),
        file,
        statements,
        iso: true,
    }
}

// ---------------------------------------------------------------------------------------
// Encoding and decoding with our codec
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// `FramePolicy::Rows(n)`, logical type FLAT_*.
    Rows(usize),
    /// One frame per run of statements with the same graph, logical type DATASETS.
    PerGraph,
    /// The whole stream in one non-delimited frame.
    SingleNonDelimited,
}

#[derive(Debug, Clone, Copy)]
struct Config {
    preset: &'static str,
    physical: PhysicalType,
    framing: Framing,
}

impl Config {
    fn label(&self) -> String {
        format!(
            "{}-{}-{}",
            self.preset,
            self.physical.name(),
            match self.framing {
                Framing::Rows(n) => format!("rows{n}"),
                Framing::PerGraph => "pergraph".into(),
                Framing::SingleNonDelimited => "single".into(),
            }
        )
    }

    fn options(&self, rdf_star: bool) -> StreamOptions {
        let base = match self.preset {
            "big" => StreamOptions::big(),
            "small" => StreamOptions::small(),
            other => panic!("unknown preset {other}"),
        };
        let logical = match (self.framing, self.physical) {
            (Framing::PerGraph, _) => LogicalType::DATASETS,
            (_, PhysicalType::Triples) => LogicalType::FLAT_TRIPLES,
            _ => LogicalType::FLAT_QUADS,
        };
        base.with_physical_type(self.physical)
            .with_logical_type(logical)
            .with_rdf_star(rdf_star)
    }
}

fn graph_of(s: &Statement) -> TermRef<'_> {
    s.graph.as_ref().map_or(TermRef::DefaultGraph, Term::as_ref)
}

/// Number of runs of consecutive statements with the same graph.
fn graph_runs(statements: &[Statement]) -> usize {
    let mut runs = 0;
    let mut prev = None;
    for s in statements {
        let g = graph_of(s);
        if prev != Some(g) {
            runs += 1;
        }
        prev = Some(g);
    }
    runs
}

/// Encodes with our writer.
fn encode(statements: &[Statement], cfg: Config, rdf_star: bool) -> Vec<u8> {
    let policy = match cfg.framing {
        Framing::Rows(n) => FramePolicy::Rows(n),
        Framing::PerGraph | Framing::SingleNonDelimited => FramePolicy::Manual,
    };
    let mut w = JellyWriterBuilder::new(cfg.options(rdf_star))
        .frame_policy(policy)
        .delimited(cfg.framing != Framing::SingleNonDelimited)
        .build(Vec::new())
        .unwrap();
    let mut prev: Option<TermRef<'_>> = None;
    for s in statements {
        let g = graph_of(s);
        if cfg.framing == Framing::PerGraph
            && let Some(p) = prev
            && p != g
        {
            if w.encoder().graph_open() {
                w.encoder().end_graph().unwrap();
            }
            w.flush_frame().unwrap();
        }
        prev = Some(g);
        w.add(s.as_ref())
            .unwrap_or_else(|e| panic!("{}: encoding {s}: {e}", cfg.label()));
    }
    w.finish().unwrap()
}

/// A stream decoded by our reader.
#[derive(Debug, Default)]
struct Decoded {
    options: Option<StreamOptions>,
    frames: Vec<Vec<Statement>>,
    metadata: Vec<Vec<(String, Vec<u8>)>>,
    /// (statements decoded before the declaration, name, iri)
    namespaces: Vec<(usize, String, String)>,
}

impl Decoded {
    fn statements(&self) -> Vec<Statement> {
        self.frames.iter().flatten().cloned().collect()
    }
}

fn decode(bytes: &[u8]) -> Decoded {
    let mut r = JellyReader::new(bytes);
    let mut d = Decoded::default();
    let mut count = 0usize;
    while let Some(mut frame) = r.next_frame().expect("frame readable") {
        let meta = frame
            .metadata()
            .expect("metadata readable")
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_vec()))
            .collect();
        d.metadata.push(meta);
        let mut stmts = Vec::new();
        while let Some(ev) = frame
            .next_event()
            .unwrap_or_else(|e| panic!("decoding: {e}"))
        {
            match ev {
                Event::Options(o) => {
                    d.options.get_or_insert_with(|| o.clone());
                }
                Event::Statement(s) => {
                    stmts.push(s.to_owned());
                    count += 1;
                }
                Event::Namespace { name, iri } => {
                    d.namespaces.push((count, name.to_owned(), iri.to_owned()))
                }
                Event::GraphStart(_) | Event::GraphEnd => {}
            }
        }
        d.frames.push(stmts);
    }
    d
}

// ---------------------------------------------------------------------------------------
// Comparison
// ---------------------------------------------------------------------------------------

/// The statements with language tags in lower case (see [`Peer::recases_lang_tags`]).
fn lower_lang_tags(st: &[Statement]) -> Vec<Statement> {
    fn lower(t: &Term) -> Term {
        match t {
            Term::Literal(Literal {
                lex,
                kind: OwnedLiteralKind::Lang(l),
            }) => Term::Literal(Literal {
                lex: lex.clone(),
                kind: OwnedLiteralKind::Lang(l.to_ascii_lowercase()),
            }),
            Term::Triple(tr) => Term::Triple(Box::new(jelly::Triple {
                subject: lower(&tr.subject),
                predicate: lower(&tr.predicate),
                object: lower(&tr.object),
            })),
            other => other.clone(),
        }
    }
    st.iter()
        .map(|s| Statement {
            subject: lower(&s.subject),
            predicate: lower(&s.predicate),
            object: lower(&s.object),
            graph: s.graph.as_ref().map(lower),
        })
        .collect()
}

fn norm_literal(l: &Literal) -> Literal {
    match &l.kind {
        OwnedLiteralKind::Typed(dt) if dt == "http://www.w3.org/2001/XMLSchema#string" => Literal {
            lex: l.lex.clone(),
            kind: OwnedLiteralKind::Simple,
        },
        _ => l.clone(),
    }
}

/// Term equality up to the blank node bijection built so far (extended as needed).
fn match_term(
    e: &Term,
    a: &Term,
    fwd: &mut HashMap<String, String>,
    bwd: &mut HashMap<String, String>,
) -> bool {
    match (e, a) {
        (Term::BlankNode(x), Term::BlankNode(y)) => {
            fwd.entry(x.clone()).or_insert_with(|| y.clone()) == y
                && bwd.entry(y.clone()).or_insert_with(|| x.clone()) == x
        }
        (Term::Triple(x), Term::Triple(y)) => {
            match_term(&x.subject, &y.subject, fwd, bwd)
                && match_term(&x.predicate, &y.predicate, fwd, bwd)
                && match_term(&x.object, &y.object, fwd, bwd)
        }
        (Term::Literal(x), Term::Literal(y)) => norm_literal(x) == norm_literal(y),
        _ => e == a,
    }
}

fn graph_term(s: &Statement) -> Term {
    s.graph.clone().unwrap_or(Term::DefaultGraph)
}

fn count_blank_nodes(st: &[Statement]) -> usize {
    fn walk<'a>(t: &'a Term, out: &mut std::collections::HashSet<&'a str>) {
        match t {
            Term::BlankNode(b) => {
                out.insert(b);
            }
            Term::Triple(tr) => {
                walk(&tr.subject, out);
                walk(&tr.predicate, out);
                walk(&tr.object, out);
            }
            _ => {}
        }
    }
    let mut set = std::collections::HashSet::new();
    for s in st {
        walk(&s.subject, &mut set);
        walk(&s.predicate, &mut set);
        walk(&s.object, &mut set);
        if let Some(g) = &s.graph {
            walk(g, &mut set);
        }
    }
    set.len()
}

/// Asserts `actual` is `expected`: same statement count, same blank node count, equal in
/// stream order up to one bijective blank node renaming, and (with `iso`) isomorphic by
/// `jelly::iso::isomorphic`.
fn assert_same(ctx: &str, expected: &[Statement], actual: &[Statement], iso: bool) {
    assert_eq!(
        actual.len(),
        expected.len(),
        "{ctx}: statement count (actual vs expected)"
    );
    assert_eq!(
        count_blank_nodes(actual),
        count_blank_nodes(expected),
        "{ctx}: distinct blank nodes (actual vs expected)"
    );
    let (mut fwd, mut bwd) = (HashMap::new(), HashMap::new());
    for (i, (e, a)) in expected.iter().zip(actual).enumerate() {
        let ok = match_term(&e.subject, &a.subject, &mut fwd, &mut bwd)
            && match_term(&e.predicate, &a.predicate, &mut fwd, &mut bwd)
            && match_term(&e.object, &a.object, &mut fwd, &mut bwd)
            && match_term(&graph_term(e), &graph_term(a), &mut fwd, &mut bwd);
        assert!(
            ok,
            "{ctx}: statement #{i} differs (blank nodes compared up to renaming)\n expected: {e}\n   actual: {a}"
        );
    }
    if !iso {
        return;
    }
    // `isomorphic` recurses once per blank node: give it room (see the report on
    // iot-citybench-metadata, which overflows the default 2 MiB test thread stack).
    let iso = std::thread::scope(|sc| {
        std::thread::Builder::new()
            .stack_size(1 << 30)
            .spawn_scoped(sc, || isomorphic(expected, actual))
            .unwrap()
            .join()
            .unwrap()
    });
    match iso {
        IsoResult::Isomorphic => {}
        // The ordered comparison above already found a bijection that maps one list onto
        // the other, so a search that gives up is not a failure.
        IsoResult::TooHard => eprintln!("{ctx}: isomorphism search gave up (ordered match holds)"),
        IsoResult::Different(why) => panic!("{ctx}: not isomorphic: {why}"),
    }
}

// ---------------------------------------------------------------------------------------
// A small JSON reader for the peers' summaries and frame dumps
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum Json {
    Null,
    Bool(bool),
    Num(f64),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

impl Json {
    fn parse(text: &str) -> Json {
        let mut p = JsonParser {
            s: text.as_bytes(),
            i: 0,
        };
        let v = p.value();
        p.ws();
        assert_eq!(p.i, p.s.len(), "trailing text after JSON: {text}");
        v
    }
    fn get(&self, key: &str) -> &Json {
        match self {
            Json::Obj(kv) => kv
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v)
                .unwrap_or(&Json::Null),
            _ => &Json::Null,
        }
    }
    fn u64(&self) -> u64 {
        match self {
            Json::Num(n) if *n >= 0.0 && n.fract() == 0.0 => *n as u64,
            other => panic!("not a count: {other:?}"),
        }
    }
    fn str(&self) -> &str {
        match self {
            Json::Str(s) => s,
            other => panic!("not a string: {other:?}"),
        }
    }
    fn bool(&self) -> bool {
        match self {
            Json::Bool(b) => *b,
            other => panic!("not a bool: {other:?}"),
        }
    }
    fn entries(&self) -> Vec<(String, Json)> {
        match self {
            Json::Obj(kv) => kv.clone(),
            Json::Null => Vec::new(),
            other => panic!("not an object: {other:?}"),
        }
    }
}

struct JsonParser<'a> {
    s: &'a [u8],
    i: usize,
}

impl JsonParser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }
    fn eat(&mut self, lit: &str) -> bool {
        if self.s[self.i..].starts_with(lit.as_bytes()) {
            self.i += lit.len();
            true
        } else {
            false
        }
    }
    fn value(&mut self) -> Json {
        self.ws();
        match self.s.get(self.i) {
            Some(b'{') => {
                self.i += 1;
                let mut kv = Vec::new();
                self.ws();
                if self.eat("}") {
                    return Json::Obj(kv);
                }
                loop {
                    self.ws();
                    let Json::Str(k) = self.value() else {
                        panic!("object key is not a string at {}", self.i)
                    };
                    self.ws();
                    assert!(self.eat(":"), "expected ':' at {}", self.i);
                    kv.push((k, self.value()));
                    self.ws();
                    if self.eat("}") {
                        return Json::Obj(kv);
                    }
                    assert!(self.eat(","), "expected ',' at {}", self.i);
                }
            }
            Some(b'[') => {
                self.i += 1;
                let mut v = Vec::new();
                self.ws();
                if self.eat("]") {
                    return Json::Arr(v);
                }
                loop {
                    v.push(self.value());
                    self.ws();
                    if self.eat("]") {
                        return Json::Arr(v);
                    }
                    assert!(self.eat(","), "expected ',' at {}", self.i);
                }
            }
            Some(b'"') => {
                self.i += 1;
                let mut out = String::new();
                loop {
                    let c = self.s[self.i];
                    self.i += 1;
                    match c {
                        b'"' => return Json::Str(out),
                        b'\\' => {
                            let e = self.s[self.i];
                            self.i += 1;
                            match e {
                                b'n' => out.push('\n'),
                                b't' => out.push('\t'),
                                b'r' => out.push('\r'),
                                b'b' => out.push('\u{8}'),
                                b'f' => out.push('\u{c}'),
                                b'u' => {
                                    let mut cp = self.hex4();
                                    if (0xd800..0xdc00).contains(&cp) && self.eat("\\u") {
                                        let lo = self.hex4();
                                        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                                    }
                                    out.push(char::from_u32(cp).unwrap_or('\u{fffd}'));
                                }
                                other => out.push(other as char),
                            }
                        }
                        _ => {
                            // Copy one UTF-8 sequence.
                            let start = self.i - 1;
                            while self.i < self.s.len() && (self.s[self.i] & 0xc0) == 0x80 {
                                self.i += 1;
                            }
                            out.push_str(std::str::from_utf8(&self.s[start..self.i]).unwrap());
                        }
                    }
                }
            }
            _ if self.eat("true") => Json::Bool(true),
            _ if self.eat("false") => Json::Bool(false),
            _ if self.eat("null") => Json::Null,
            _ => {
                let start = self.i;
                while self.i < self.s.len() && b"+-0123456789.eE".contains(&self.s[self.i]) {
                    self.i += 1;
                }
                let t = std::str::from_utf8(&self.s[start..self.i]).unwrap();
                Json::Num(
                    t.parse()
                        .unwrap_or_else(|_| panic!("bad JSON at {start}: {t:?}")),
                )
            }
        }
    }
    fn hex4(&mut self) -> u32 {
        let t = std::str::from_utf8(&self.s[self.i..self.i + 4]).unwrap();
        self.i += 4;
        u32::from_str_radix(t, 16).unwrap()
    }
}

/// pyjelly's `dump-frames` output.
struct FrameDump {
    options: Json,
    frames: Vec<Json>,
}

fn dump_frames(py: &Peer, jelly: &Path) -> FrameDump {
    let run = py.run(&[OsStr::new("dump-frames"), jelly.as_os_str()]);
    let mut options = Json::Null;
    let mut frames = Vec::new();
    let mut end = None;
    for line in run.stdout.lines().filter(|l| !l.trim().is_empty()) {
        let j = Json::parse(line);
        match j.get("type").str() {
            "options" => options = j,
            "frame" => frames.push(j),
            "end" => end = Some(j.get("frames").u64()),
            other => panic!("unknown dump-frames record {other}"),
        }
    }
    assert_eq!(end, Some(frames.len() as u64), "dump-frames end record");
    FrameDump { options, frames }
}

fn hex(b: &[u8]) -> String {
    b.iter().fold(String::new(), |mut s, x| {
        let _ = write!(s, "{x:02x}");
        s
    })
}

// ---------------------------------------------------------------------------------------
// Direction 1: we write, the peers read
// ---------------------------------------------------------------------------------------

const BIG_ROWS: Config = Config {
    preset: "big",
    physical: PhysicalType::Triples,
    framing: Framing::Rows(512),
};

fn cfg(preset: &'static str, physical: PhysicalType, framing: Framing) -> Config {
    Config {
        preset,
        physical,
        framing,
    }
}

/// Encodes `input` with every config and has every peer decode it.
fn we_write_peers_read(
    scratch: &Scratch,
    input: &Input,
    configs: &[Config],
    peers: &[&Peer],
    rdf_star: bool,
) {
    for c in configs {
        let bytes = encode(&input.statements, *c, rdf_star);
        // Our own decoder first: a failure here is not an interop problem.
        let ours = decode(&bytes);
        let frames = ours.frames.len() as u64;
        if c.framing == Framing::PerGraph {
            assert_eq!(
                frames as usize,
                graph_runs(&input.statements),
                "{}: one frame per graph",
                c.label()
            );
        }
        assert_same(
            &format!("{} {} (our own decoder)", input.name, c.label()),
            &input.statements,
            &ours.statements(),
            false,
        );
        let jelly_path = scratch.path(&format!("{}.{}.jelly", input.name, c.label()));
        fs::write(&jelly_path, &bytes).unwrap();
        for peer in peers {
            let out = scratch.path(&format!("{}.{}.{}.nq", input.name, c.label(), peer.name));
            let (got, summary) = peer.decode_to_nquads(&jelly_path, &out);
            let ctx = format!(
                "{} encoded by us ({}), decoded by {}",
                input.name,
                c.label(),
                peer.name
            );
            assert_eq!(
                summary.get("statements").u64(),
                input.statements.len() as u64,
                "{ctx}: statements reported by the peer"
            );
            if let Json::Num(_) = summary.get("frames") {
                assert_eq!(
                    summary.get("frames").u64(),
                    frames,
                    "{ctx}: frames reported by the peer"
                );
            }
            if peer.recases_lang_tags {
                let (e, a) = (lower_lang_tags(&input.statements), lower_lang_tags(&got));
                assert_same(&ctx, &e, &a, input.iso);
            } else {
                assert_same(&ctx, &input.statements, &got, input.iso);
            }
        }
    }
}

#[test]
fn we_write_peers_read_iot_weather() {
    let Some(peers) = both_peers() else { return };
    let s = Scratch::new("w-iot");
    let input = load(&s, "iot-assist-weather/iot-assist-weather.nt", Some(20_000));
    let configs = [
        BIG_ROWS,
        cfg("small", PhysicalType::Triples, Framing::Rows(512)),
        cfg("big", PhysicalType::Triples, Framing::SingleNonDelimited),
        // Triples of the default graph in QUADS and GRAPHS streams.
        cfg("small", PhysicalType::Quads, Framing::Rows(512)),
        cfg("big", PhysicalType::Graphs, Framing::Rows(512)),
    ];
    we_write_peers_read(&s, &input, &configs, &peers, false);
}

#[test]
fn we_write_peers_read_nanopubs_fair_pkd() {
    let Some(peers) = both_peers() else { return };
    let s = Scratch::new("w-np");
    let input = load(&s, "nanopubs-fair-pkd/nanopubs-fair-pkd.nq", Some(10_000));
    let configs = [
        cfg("big", PhysicalType::Quads, Framing::Rows(512)),
        cfg("small", PhysicalType::Quads, Framing::PerGraph),
        cfg("big", PhysicalType::Graphs, Framing::PerGraph),
        cfg("small", PhysicalType::Graphs, Framing::Rows(512)),
    ];
    we_write_peers_read(&s, &input, &configs, &peers, false);
}

#[test]
fn we_write_peers_read_nanopubs_gdpr_fines() {
    let Some(peers) = both_peers() else { return };
    let s = Scratch::new("w-gdpr");
    let input = load(&s, "nanopubs-gdpr-fines/nanopubs-gdpr-fines.nq", None);
    let configs = [
        cfg("big", PhysicalType::Quads, Framing::PerGraph),
        cfg("small", PhysicalType::Graphs, Framing::Rows(512)),
    ];
    we_write_peers_read(&s, &input, &configs, &peers, false);
}

#[test]
fn we_write_peers_read_dbpedia_lang_literals() {
    let Some(peers) = both_peers() else { return };
    let s = Scratch::new("w-dbpedia");
    let input = load(&s, "dbpedia-ontology/dbpedia-ontology.nt", Some(15_000));
    let configs = [
        BIG_ROWS,
        cfg("small", PhysicalType::Triples, Framing::Rows(512)),
    ];
    we_write_peers_read(&s, &input, &configs, &peers, false);
}

#[test]
fn we_write_peers_read_citybench_blank_nodes() {
    let Some(peers) = both_peers() else { return };
    let s = Scratch::new("w-citybench");
    let input = load(
        &s,
        "iot-citybench-metadata/iot-citybench-metadata.nt",
        Some(20_000),
    );
    assert!(count_blank_nodes(&input.statements) > 1000);
    let configs = [
        BIG_ROWS,
        cfg("small", PhysicalType::Triples, Framing::Rows(512)),
        cfg("small", PhysicalType::Quads, Framing::Rows(512)),
    ];
    we_write_peers_read(&s, &input, &configs, &peers, false);
}

#[test]
fn we_write_peers_read_w3c_rdf11_tests() {
    let Some(peers) = both_peers() else { return };
    let s = Scratch::new("w-w3c");
    let mut input = load(&s, "w3c-rdf-tests/rdf11-positive.nq", None);
    // Dozens of interchangeable blank nodes (`<s> <p> _:b0 . <s> <p> _:b1 .`): the
    // isomorphism search of `jelly::iso` finds no mapping within its step budget (it only
    // checks complete mappings) and takes minutes in debug builds to give up. The ordered
    // comparison still maps blank nodes one to one.
    input.iso = false;
    let configs = [
        cfg("big", PhysicalType::Quads, Framing::Rows(512)),
        cfg("small", PhysicalType::Graphs, Framing::PerGraph),
        cfg("small", PhysicalType::Quads, Framing::SingleNonDelimited),
    ];
    we_write_peers_read(&s, &input, &configs, &peers, false);
}

#[test]
fn we_write_peers_read_rdf_star() {
    let Some(peers) = both_peers() else { return };
    let s = Scratch::new("w-star");
    let input = load(&s, "rdf-star-cg-tests/rdf-star-cg-positive.nq", None);
    let configs = [
        cfg("big", PhysicalType::Quads, Framing::Rows(512)),
        cfg("small", PhysicalType::Quads, Framing::Rows(16)),
        cfg("small", PhysicalType::Graphs, Framing::PerGraph),
    ];
    we_write_peers_read(&s, &input, &configs, &peers, true);
}

// ---------------------------------------------------------------------------------------
// Direction 2: the peers write, we read
// ---------------------------------------------------------------------------------------

/// Has `peer` encode `input.file` with `args`, decodes the result with our reader and
/// compares it with the input. Checks the statement and frame counts the peer reports.
fn peer_writes_we_read(
    scratch: &Scratch,
    input: &Input,
    peer: &Peer,
    label: &str,
    args: &[&str],
) -> Decoded {
    let out = scratch.path(&format!("{}.{}.{label}.jelly", input.name, peer.name));
    let summary = peer.encode_file(&input.file, &out, args);
    let ctx = format!(
        "{} encoded by {} ({label}), decoded by us",
        input.name, peer.name
    );
    let bytes = fs::read(&out).unwrap();
    let d = decode(&bytes);
    assert_eq!(
        summary.get("statements").u64(),
        input.statements.len() as u64,
        "{ctx}: statements reported by the peer"
    );
    assert_eq!(
        d.frames.len() as u64,
        summary.get("frames").u64(),
        "{ctx}: frames we read vs frames the peer wrote"
    );
    assert!(d.options.is_some(), "{ctx}: no options row");
    let got = d.statements();
    if peer.recases_lang_tags {
        let (e, a) = (lower_lang_tags(&input.statements), lower_lang_tags(&got));
        assert_same(&ctx, &e, &a, input.iso);
    } else {
        assert_same(&ctx, &input.statements, &got, input.iso);
    }
    d
}

/// Asserts the options we decoded: physical and logical type and the preset's table sizes.
fn assert_options(
    ctx: &str,
    d: &Decoded,
    physical: PhysicalType,
    logical: LogicalType,
    preset: &str,
) {
    let o = d.options.as_ref().unwrap();
    let tables = match preset {
        "big" => (4000, 150, 32),
        "small" => (128, 16, 16),
        other => panic!("unknown preset {other}"),
    };
    assert_eq!(
        (
            o.physical_type,
            o.logical_type,
            (
                o.max_name_table_size,
                o.max_prefix_table_size,
                o.max_datatype_table_size
            ),
            o.version
        ),
        (physical, logical, tables, 1),
        "{ctx}: stream options"
    );
}

/// Asserts frame `i` holds exactly the `i`-th run of same-graph statements.
fn assert_one_frame_per_graph(ctx: &str, input: &[Statement], d: &Decoded) {
    assert_eq!(
        d.frames.len(),
        graph_runs(input),
        "{ctx}: one frame per graph"
    );
    let mut at = 0;
    for (i, f) in d.frames.iter().enumerate() {
        assert!(!f.is_empty(), "{ctx}: frame {i} is empty");
        let g = graph_of(&input[at]);
        let run = input[at..].iter().take_while(|s| graph_of(s) == g).count();
        assert_eq!(f.len(), run, "{ctx}: frame {i} should hold the graph {g}");
        at += run;
    }
}

#[test]
fn peers_write_we_read_iot_weather() {
    let Some([py, jvm]) = both_peers() else {
        return;
    };
    let s = Scratch::new("r-iot");
    let input = load(&s, "iot-assist-weather/iot-assist-weather.nt", Some(20_000));
    let n = input.statements.len();

    let d = peer_writes_we_read(&s, &input, py, "big512", &["--rows-per-frame", "512"]);
    assert_options(
        "pyjelly big",
        &d,
        PhysicalType::Triples,
        LogicalType::FLAT_TRIPLES,
        "big",
    );
    let d = peer_writes_we_read(
        &s,
        &input,
        py,
        "small100-quads",
        &[
            "--preset",
            "small",
            "--rows-per-frame",
            "100",
            "--physical",
            "quads",
        ],
    );
    assert_options(
        "pyjelly small",
        &d,
        PhysicalType::Quads,
        LogicalType::FLAT_QUADS,
        "small",
    );

    // Jelly-JVM replays the source stream's frame layout (statements per frame).
    let frames_txt =
        fs::read_to_string(datasets_dir().join("iot-assist-weather/frames.txt")).unwrap();
    let mut plan = Vec::new();
    let mut total = 0;
    for line in frames_txt
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let k: usize = line.trim().parse().unwrap();
        let k = k.min(n - total);
        plan.push(k);
        total += k;
        if total == n {
            break;
        }
    }
    let plan_file = s.path("frames.txt");
    fs::write(
        &plan_file,
        plan.iter().map(|k| format!("{k}\n")).collect::<String>(),
    )
    .unwrap();
    let d = peer_writes_we_read(
        &s,
        &input,
        jvm,
        "frames-file",
        &["--frames-file", plan_file.to_str().unwrap()],
    );
    assert_options(
        "jelly-jvm big",
        &d,
        PhysicalType::Triples,
        LogicalType::FLAT_TRIPLES,
        "big",
    );
    let per_frame: Vec<usize> = d.frames.iter().map(Vec::len).collect();
    assert_eq!(
        per_frame, plan,
        "jelly-jvm --frames-file: statements per frame"
    );

    let d = peer_writes_we_read(
        &s,
        &input,
        jvm,
        "small100",
        &["--preset", "small", "--rows-per-frame", "100"],
    );
    assert_options(
        "jelly-jvm small",
        &d,
        PhysicalType::Triples,
        LogicalType::FLAT_TRIPLES,
        "small",
    );
}

#[test]
fn peers_write_we_read_nanopubs() {
    let Some([py, jvm]) = both_peers() else {
        return;
    };
    let s = Scratch::new("r-np");
    let input = load(&s, "nanopubs-fair-pkd/nanopubs-fair-pkd.nq", Some(10_000));
    let st = &input.statements;

    let d = peer_writes_we_read(&s, &input, py, "grouped", &["--grouped-per-graph"]);
    assert_options(
        "pyjelly grouped",
        &d,
        PhysicalType::Quads,
        LogicalType::DATASETS,
        "big",
    );
    assert_one_frame_per_graph("pyjelly grouped", st, &d);
    let d = peer_writes_we_read(
        &s,
        &input,
        py,
        "grouped-graphs-small",
        &[
            "--grouped-per-graph",
            "--physical",
            "graphs",
            "--preset",
            "small",
        ],
    );
    assert_options(
        "pyjelly graphs",
        &d,
        PhysicalType::Graphs,
        LogicalType::DATASETS,
        "small",
    );
    assert_one_frame_per_graph("pyjelly graphs", st, &d);
    let d = peer_writes_we_read(&s, &input, py, "flat", &[]);
    assert_options(
        "pyjelly flat",
        &d,
        PhysicalType::Quads,
        LogicalType::FLAT_QUADS,
        "big",
    );

    let d = peer_writes_we_read(
        &s,
        &input,
        jvm,
        "frame-per-graph",
        &["--frame-per-graph", "--logical", "datasets"],
    );
    assert_options(
        "jelly-jvm grouped",
        &d,
        PhysicalType::Quads,
        LogicalType::DATASETS,
        "big",
    );
    assert_one_frame_per_graph("jelly-jvm grouped", st, &d);
    let d = peer_writes_we_read(&s, &input, jvm, "small", &["--preset", "small"]);
    assert_options(
        "jelly-jvm small",
        &d,
        PhysicalType::Quads,
        LogicalType::FLAT_QUADS,
        "small",
    );

    let input = load(&s, "nanopubs-gdpr-fines/nanopubs-gdpr-fines.nq", None);
    let d = peer_writes_we_read(
        &s,
        &input,
        py,
        "grouped-graphs",
        &["--grouped-per-graph", "--physical", "graphs"],
    );
    assert_one_frame_per_graph("pyjelly gdpr graphs", &input.statements, &d);
    peer_writes_we_read(
        &s,
        &input,
        jvm,
        "small64",
        &["--preset", "small", "--rows-per-frame", "64"],
    );
}

#[test]
fn peers_write_we_read_blank_nodes_and_lang_literals() {
    let Some([py, jvm]) = both_peers() else {
        return;
    };
    let s = Scratch::new("r-bn-lang");
    let input = load(
        &s,
        "iot-citybench-metadata/iot-citybench-metadata.nt",
        Some(20_000),
    );
    peer_writes_we_read(&s, &input, py, "big", &[]);
    peer_writes_we_read(&s, &input, jvm, "small", &["--preset", "small"]);
    let input = load(&s, "dbpedia-ontology/dbpedia-ontology.nt", Some(15_000));
    peer_writes_we_read(&s, &input, py, "small", &["--preset", "small"]);
    peer_writes_we_read(&s, &input, jvm, "big", &[]);
}

#[test]
fn peers_write_we_read_w3c_tests_and_rdf_star() {
    let Some([py, jvm]) = both_peers() else {
        return;
    };
    let s = Scratch::new("r-w3c-star");
    let mut input = load(&s, "w3c-rdf-tests/rdf11-positive.nq", None);
    input.iso = false; // see we_write_peers_read_w3c_rdf11_tests
    peer_writes_we_read(&s, &input, py, "big", &[]);
    peer_writes_we_read(&s, &input, jvm, "small", &["--preset", "small"]);

    // RDF-star: pyjelly only. Jelly-JVM's to-jelly parses its input with Jena, whose
    // N-Quads parser (5.6, RDF 1.2) rejects quoted triples in subject position.
    let input = load(&s, "rdf-star-cg-tests/rdf-star-cg-positive.nq", None);
    let d = peer_writes_we_read(
        &s,
        &input,
        py,
        "small16",
        &["--preset", "small", "--rows-per-frame", "16"],
    );
    let o = d.options.as_ref().unwrap();
    assert!(
        o.rdf_star && !o.generalized_statements,
        "pyjelly RDF-star options: {o:?}"
    );
    let d = peer_writes_we_read(
        &s,
        &input,
        py,
        "grouped-graphs",
        &["--grouped-per-graph", "--physical", "graphs"],
    );
    assert_one_frame_per_graph("pyjelly RDF-star graphs", &input.statements, &d);
}

// ---------------------------------------------------------------------------------------
// Frame metadata and namespace declarations
// ---------------------------------------------------------------------------------------

/// Prints pyjelly's view of namespace declarations through its rdflib integration (which,
/// unlike 0.8.2's generic decoder, handles namespace rows): `NS\t<statements before>\t<name>\t<iri>`
/// lines, then `N\t<statement count>`.
const PY_NAMESPACES: &str = r#"
import sys
import rdflib
rdflib.NORMALIZE_LITERALS = False
from pyjelly.integrations.rdflib.parse import Prefix, parse_jelly_flat
n = 0
with open(sys.argv[1], "rb") as f:
    for item in parse_jelly_flat(f):
        if isinstance(item, Prefix):
            print("NS\t%d\t%s\t%s" % (n, item.prefix, str(item.iri)))
        else:
            n += 1
print("N\t%d" % n)
"#;

#[test]
fn frame_metadata_and_namespace_declarations() {
    let Some([py, jvm]) = both_peers() else {
        return;
    };
    let s = Scratch::new("meta-ns");
    let input = load(&s, "iot-assist-weather/iot-assist-weather.nt", Some(3000));
    let all_bytes: Vec<u8> = (0..=255u8).collect();
    // Per frame: metadata entries (keys are unique within a frame: it is a proto map).
    let metadata: Vec<Vec<(&str, Vec<u8>)>> = vec![
        vec![
            ("source", b"iot-assist-weather".to_vec()),
            // Not UTF-8: the values are `bytes`.
            ("raw", vec![0x00, 0xff, 0xfe, 0x80, 0xc3, 0x28, 0x0a, 0x0d]),
            ("schlüssel/ключ", "värde ✓".as_bytes().to_vec()),
        ],
        vec![("seq", 1u64.to_be_bytes().to_vec())],
        vec![],
        vec![("empty", Vec::new()), ("all-bytes", all_bytes)],
    ];
    // Per frame: namespaces declared before its first statement.
    let namespaces: Vec<Vec<(&str, &str)>> = vec![
        vec![
            ("sosa", "http://www.w3.org/ns/sosa/"),
            ("xsd", "http://www.w3.org/2001/XMLSchema#"),
            ("", "https://assist-iot.eu/pilot2_rdf/"),
        ],
        vec![],
        vec![
            (
                "om",
                "http://www.ontology-of-units-of-measure.org/resource/om-2/",
            ),
            // Re-declared, and a non-ASCII IRI.
            ("sosa", "http://example.org/sösa#"),
        ],
        vec![("rdf", "http://www.w3.org/1999/02/22-rdf-syntax-ns#")],
    ];
    let per_frame = input.statements.len() / metadata.len();
    let mut w = JellyWriterBuilder::new(
        StreamOptions::small().with_logical_type(LogicalType::FLAT_TRIPLES),
    )
    .namespace_declarations(true)
    .frame_policy(FramePolicy::Manual)
    .build(Vec::new())
    .unwrap();
    let mut expected_ns = Vec::new();
    for (i, chunk) in input.statements.chunks(per_frame).enumerate() {
        if i > 0 {
            w.flush_frame().unwrap();
        }
        for (k, v) in &metadata[i] {
            w.encoder().set_frame_metadata(*k, v.clone());
        }
        for (name, iri) in &namespaces[i] {
            w.declare_namespace(name, iri).unwrap();
            expected_ns.push((i * per_frame, name.to_string(), iri.to_string()));
        }
        for st in chunk {
            w.add(st.as_ref()).unwrap();
        }
    }
    let bytes = w.finish().unwrap();
    let path = s.path("meta-ns.jelly");
    fs::write(&path, &bytes).unwrap();

    // Our own reader, for reference.
    let ours = decode(&bytes);
    let owned_meta: Vec<Vec<(String, Vec<u8>)>> = metadata
        .iter()
        .map(|m| m.iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
        .collect();
    assert_eq!(ours.metadata, owned_meta, "our reader: frame metadata");
    assert_eq!(ours.namespaces, expected_ns, "our reader: namespaces");
    assert_eq!(
        ours.options.as_ref().unwrap().version,
        2,
        "namespaces need version 2"
    );
    assert_same("our reader", &input.statements, &ours.statements(), false);

    // pyjelly's frame dump: options, row kinds and metadata (hex) per frame.
    let dump = dump_frames(py, &path);
    assert_eq!(dump.options.get("version").u64(), 2, "pyjelly: version");
    assert_eq!(dump.frames.len(), metadata.len(), "pyjelly: frames");
    for (i, f) in dump.frames.iter().enumerate() {
        let mut want: Vec<(String, String)> = metadata[i]
            .iter()
            .map(|(k, v)| (k.to_string(), hex(v)))
            .collect();
        want.sort();
        let mut got: Vec<(String, String)> = f
            .get("metadata")
            .entries()
            .into_iter()
            .map(|(k, v)| (k, v.str().to_owned()))
            .collect();
        got.sort();
        assert_eq!(got, want, "pyjelly: metadata of frame {i}");
        let kinds = f.get("row_kinds");
        let count = |k: &str| match kinds.get(k) {
            Json::Null => 0,
            v => v.u64(),
        };
        assert_eq!(
            count("namespace"),
            namespaces[i].len() as u64,
            "pyjelly: namespace rows of frame {i}"
        );
        assert_eq!(
            count("triple"),
            per_frame as u64,
            "pyjelly: triple rows of frame {i}"
        );
        assert_eq!(
            count("options"),
            u64::from(i == 0),
            "pyjelly: options rows of frame {i}"
        );
        assert_eq!(
            f.get("rows").u64(),
            kinds.entries().iter().map(|(_, v)| v.u64()).sum::<u64>()
        );
    }

    // pyjelly's decoders: statements (generic API, via the peer tool's namespace-row
    // workaround) and namespace declarations with their positions (rdflib API).
    let (got, _) = py.decode_to_nquads(&path, &s.path("meta-ns.pyjelly.nq"));
    assert_same(
        "pyjelly (generic) on a stream with metadata and namespaces",
        &input.statements,
        &got,
        true,
    );
    let run = py_snippet(py, PY_NAMESPACES, &path);
    let mut py_ns = Vec::new();
    let mut py_count = None;
    for line in run.stdout.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        match f[..] {
            ["NS", n, name, iri] => {
                py_ns.push((n.parse::<usize>().unwrap(), name.to_owned(), iri.to_owned()))
            }
            ["N", n] => py_count = Some(n.parse::<usize>().unwrap()),
            _ => panic!("unexpected line from pyjelly snippet: {line:?}"),
        }
    }
    assert_eq!(
        py_count,
        Some(input.statements.len()),
        "pyjelly (rdflib): statements"
    );
    assert_eq!(
        py_ns, expected_ns,
        "pyjelly (rdflib): namespace declarations and positions"
    );

    // Jelly-JVM decodes the statements (its N-Quads output drops namespaces and metadata).
    let (got, summary) = jvm.decode_to_nquads(&path, &s.path("meta-ns.jvm.nq"));
    assert_eq!(
        summary.get("frames").u64(),
        metadata.len() as u64,
        "jelly-jvm: frames"
    );
    assert_same(
        "jelly-jvm on a stream with metadata and namespaces",
        &lower_lang_tags(&input.statements),
        &lower_lang_tags(&got),
        true,
    );
}

/// Runs a Python snippet with the pyjelly venv's interpreter.
fn py_snippet(py: &Peer, code: &str, arg: &Path) -> Run {
    let python = Peer {
        name: "pyjelly (snippet)",
        program: py.program.clone(),
        lead: Vec::new(),
        recases_lang_tags: false,
    };
    python.run(&[OsStr::new("-c"), OsStr::new(code), arg.as_os_str()])
}

// ---------------------------------------------------------------------------------------
// Stream options
// ---------------------------------------------------------------------------------------

const OPTION_TRIPLES: &str = r#"<http://ex.org/s> <http://ex.org/p> "plain" .
<http://ex.org/s> <http://ex.org/p> "chat"@fr .
_:b1 <http://ex.org/p> <http://ex.org/o> .
<http://ex.org/s> <http://ex.org/p> _:b1 .
"#;
const OPTION_QUADS: &str = r#"<http://ex.org/s> <http://ex.org/p> "plain" <http://ex.org/g1> .
<http://ex.org/s> <http://ex.org/p> "chat"@fr <http://ex.org/g1> .
_:b1 <http://ex.org/p> <http://ex.org/o> .
<http://ex.org/s> <http://ex.org/p> _:b1 _:g .
"#;
const OPTION_TYPED: &str =
    "<http://ex.org/s> <http://ex.org/q> \"1\"^^<http://www.w3.org/2001/XMLSchema#integer> .\n";
const OPTION_STAR: &str =
    "<< <http://ex.org/s> <http://ex.org/p> _:b1 >> <http://ex.org/q> \"x\" .\n";

const OPTION_GENERALIZED: &str = "\"lit\" _:p <http://ex.org/o> .\n_:b1 \"pred\"@en _:b1 .\n";

#[test]
fn stream_options_as_seen_by_peers() {
    let Some([py, jvm]) = both_peers() else {
        return;
    };
    let s = Scratch::new("options");
    let lt = LogicalType;
    let cases: Vec<(&str, StreamOptions, bool)> = vec![
        (
            "big-flat-triples",
            StreamOptions::big().with_logical_type(LogicalType::FLAT_TRIPLES),
            true,
        ),
        (
            "small-unspecified-v1",
            StreamOptions {
                version: 1,
                ..StreamOptions::small()
            },
            true,
        ),
        (
            "custom-8-0-0-graphs",
            StreamOptions::with_tables(8, 0, 0).with_logical_type(LogicalType::GRAPHS),
            true,
        ),
        (
            "max-subject-graphs-named",
            StreamOptions::with_tables(4096, 1024, 256)
                .with_logical_type(LogicalType::SUBJECT_GRAPHS)
                .with_stream_name("weather/ストリーム"),
            true,
        ),
        (
            "quads-flat-star",
            StreamOptions::big()
                .with_physical_type(PhysicalType::Quads)
                .with_logical_type(LogicalType::FLAT_QUADS)
                .with_rdf_star(true),
            true,
        ),
        (
            "quads-named-graphs-nondelimited",
            StreamOptions::small()
                .with_physical_type(PhysicalType::Quads)
                .with_logical_type(LogicalType::NAMED_GRAPHS),
            false,
        ),
        (
            "graphs-datasets",
            StreamOptions::small()
                .with_physical_type(PhysicalType::Graphs)
                .with_logical_type(LogicalType::DATASETS),
            true,
        ),
        (
            "graphs-timestamped-star-v2",
            StreamOptions {
                version: 2,
                ..StreamOptions::with_tables(64, 8, 4)
                    .with_physical_type(PhysicalType::Graphs)
                    .with_logical_type(lt(114))
                    .with_rdf_star(true)
            },
            true,
        ),
        (
            "generalized-star",
            StreamOptions::small()
                .with_generalized_statements(true)
                .with_rdf_star(true),
            true,
        ),
    ];
    for (label, opts, delimited) in cases {
        let mut text = String::from(if opts.physical_type == PhysicalType::Triples {
            OPTION_TRIPLES
        } else {
            OPTION_QUADS
        });
        if opts.max_datatype_table_size > 0 {
            text.push_str(OPTION_TYPED);
        }
        if opts.rdf_star {
            text.push_str(OPTION_STAR);
        }
        if opts.generalized_statements {
            text.push_str(OPTION_GENERALIZED);
        }
        let statements = parse_document(&text).unwrap();
        let mut w = JellyWriterBuilder::new(opts.clone())
            .delimited(delimited)
            .frame_policy(FramePolicy::Manual)
            .build(Vec::new())
            .unwrap();
        for st in &statements {
            w.add(st.as_ref())
                .unwrap_or_else(|e| panic!("{label}: {st}: {e}"));
        }
        let bytes = w.finish().unwrap();
        let path = s.path(&format!("{label}.jelly"));
        fs::write(&path, &bytes).unwrap();
        let want_version = if opts.version == 0 { 1 } else { opts.version };

        let o = dump_frames(py, &path).options;
        let got = (
            o.get("physical_type_value").u64() as u32,
            o.get("logical_type_value").u64() as u32,
            o.get("max_name_table_size").u64() as u32,
            o.get("max_prefix_table_size").u64() as u32,
            o.get("max_datatype_table_size").u64() as u32,
            o.get("version").u64() as u32,
            o.get("stream_name").str().to_owned(),
            o.get("rdf_star").bool(),
            o.get("generalized_statements").bool(),
            o.get("delimited").bool(),
        );
        let want = (
            opts.physical_type.to_u32(),
            opts.logical_type.0,
            opts.max_name_table_size,
            opts.max_prefix_table_size,
            opts.max_datatype_table_size,
            want_version,
            opts.stream_name.clone(),
            opts.rdf_star,
            opts.generalized_statements,
            delimited,
        );
        assert_eq!(got, want, "{label}: options as read by pyjelly");
        let physical_name = format!(
            "PHYSICAL_STREAM_TYPE_{}",
            opts.physical_type.name().to_uppercase()
        );
        assert_eq!(o.get("physical_type").str(), physical_name, "{label}");

        let (from_py, _) = py.decode_to_nquads(&path, &s.path(&format!("{label}.pyjelly.nq")));
        assert_same(&format!("{label}: pyjelly"), &statements, &from_py, true);
        let (from_jvm, summary) = jvm.decode_to_nquads(&path, &s.path(&format!("{label}.jvm.nq")));
        assert_eq!(summary.get("frames").u64(), 1, "{label}: jelly-jvm frames");
        assert_same(&format!("{label}: jelly-jvm"), &statements, &from_jvm, true);
    }
}

// ---------------------------------------------------------------------------------------
// The `jelly` binary against the peers' tools
// ---------------------------------------------------------------------------------------

/// Runs the real `jelly` binary and asserts it succeeded.
fn jelly_cli(args: &[&OsStr]) {
    let out = Command::new(env!("CARGO_BIN_EXE_jelly"))
        .args(args)
        .output()
        .expect("jelly binary runs");
    assert!(
        out.status.success(),
        "jelly {:?} failed: {}",
        args,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `jelly rdf to-jelly` output is read correctly by both peers, and `jelly rdf
/// from-jelly` agrees with both peers' decoding of the same file.
#[test]
fn cli_to_jelly_and_from_jelly_agree_with_peers() {
    let Some(peers) = both_peers() else { return };
    let scratch = Scratch::new("cli-crosscheck");
    for (rel, lines) in [
        ("nanopubs-gdpr-fines/nanopubs-gdpr-fines.nq", None),
        (
            "iot-citybench-metadata/iot-citybench-metadata.nt",
            Some(5000),
        ),
        ("dbpedia-ontology/dbpedia-ontology.nt", Some(5000)),
    ] {
        let input = load(&scratch, rel, lines);
        let ours = scratch.path(&format!("{}.jelly", input.name));
        jelly_cli(&[
            OsStr::new("-q"),
            OsStr::new("rdf"),
            OsStr::new("to-jelly"),
            input.file.as_os_str(),
            OsStr::new("-o"),
            ours.as_os_str(),
        ]);
        let our_nq = scratch.path(&format!("{}.ours.nq", input.name));
        jelly_cli(&[
            OsStr::new("-q"),
            OsStr::new("rdf"),
            OsStr::new("from-jelly"),
            ours.as_os_str(),
            OsStr::new("-o"),
            our_nq.as_os_str(),
        ]);
        let ours_decoded = parse_document(&fs::read_to_string(&our_nq).unwrap()).unwrap();
        assert_same(
            &format!("{}: jelly round trip", input.name),
            &input.statements,
            &ours_decoded,
            input.iso,
        );
        for peer in peers {
            let out = scratch.path(&format!("{}.{}.nq", input.name, peer.name));
            let (theirs, _) = peer.decode_to_nquads(&ours, &out);
            let theirs = if peer.recases_lang_tags {
                lower_lang_tags(&theirs)
            } else {
                theirs
            };
            let expected = if peer.recases_lang_tags {
                lower_lang_tags(&ours_decoded)
            } else {
                ours_decoded.clone()
            };
            assert_same(
                &format!(
                    "{}: {} decoding of `jelly rdf to-jelly` output vs `jelly rdf from-jelly`",
                    input.name, peer.name
                ),
                &expected,
                &theirs,
                input.iso,
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// Streams served by `jelly serve`
// ---------------------------------------------------------------------------------------

/// Publishes N-Quads to an in-process server (one item per graph) and fetches the
/// topic as a delimited Jelly stream in `mode` (`splice` or `compact`).
fn served_streams(nquads: &str, modes: &[&str]) -> Vec<Vec<u8>> {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let srv = jelly_server::Server::start(jelly_server::ServerConfig::ephemeral())
            .await
            .unwrap();
        let c = jelly_cli::server_client::client(None, None).unwrap();
        let r = c
            .post(format!("{}/topics/np/items?split=graph", srv.url()))
            .header("content-type", "application/n-quads")
            .header("x-jelly-source", "interop")
            .body(nquads.to_owned())
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{}", r.text().await.unwrap());
        let mut out = Vec::new();
        for mode in modes {
            let r = c
                .get(format!(
                    "{}/topics/np/items?follow=false&format=jelly&mode={mode}",
                    srv.url()
                ))
                .send()
                .await
                .unwrap();
            assert!(r.status().is_success());
            out.push(r.bytes().await.unwrap().to_vec());
        }
        srv.shutdown().await.unwrap();
        out
    })
}

/// The server's Jelly stream (spliced items, and re-encoded items) read by pyjelly and
/// Jelly-JVM: statements, one frame per item, and each frame's metadata.
#[test]
fn served_streams_as_seen_by_peers() {
    let Some([py, jvm]) = both_peers() else {
        return;
    };
    let s = Scratch::new("served");
    let input = load(&s, "nanopubs-fair-pkd/nanopubs-fair-pkd.nq", Some(4_000));
    let text = fs::read_to_string(&input.file).unwrap();
    // Items are graphs in order of first appearance; the dataset lists each graph's
    // statements together, so the served stream keeps the input order.
    let items = graph_runs(&input.statements);
    let streams = served_streams(&text, &["splice", "compact"]);
    for (mode, bytes) in ["splice", "compact"].iter().zip(&streams) {
        let path = s.path(&format!("served-{mode}.jelly"));
        fs::write(&path, bytes).unwrap();

        let dump = dump_frames(py, &path);
        assert_eq!(
            dump.frames.len(),
            items,
            "pyjelly {mode}: one frame per item"
        );
        for (i, f) in dump.frames.iter().enumerate() {
            let meta: HashMap<String, String> = f
                .get("metadata")
                .entries()
                .into_iter()
                .map(|(k, v)| (k, v.str().to_owned()))
                .collect();
            assert_eq!(
                meta.get("offset").map(String::as_str),
                Some(hex(i.to_string().as_bytes()).as_str()),
                "pyjelly {mode}: offset metadata of frame {i}"
            );
            assert_eq!(
                meta.get("source").map(String::as_str),
                Some(hex(b"interop").as_str()),
                "pyjelly {mode}: source metadata of frame {i}"
            );
            assert!(meta.contains_key("ts"), "pyjelly {mode}: ts of frame {i}");
        }
        let (got, _) = py.decode_to_nquads(&path, &s.path(&format!("served-{mode}.py.nq")));
        assert_same(
            &format!("pyjelly on the served {mode} stream"),
            &input.statements,
            &got,
            true,
        );
        let (got, summary) = jvm.decode_to_nquads(&path, &s.path(&format!("served-{mode}.jvm.nq")));
        assert_eq!(
            summary.get("frames").u64(),
            items as u64,
            "jelly-jvm {mode}: frames"
        );
        assert_same(
            &format!("jelly-jvm on the served {mode} stream"),
            &lower_lang_tags(&input.statements),
            &lower_lang_tags(&got),
            true,
        );
    }
    assert!(
        streams[1].len() < streams[0].len(),
        "compact ({}) is smaller than splice ({})",
        streams[1].len(),
        streams[0].len()
    );
}

// ---------------------------------------------------------------------------------------
// jelly-text against protobuf-java's TextFormat (what the JVM jelly-cli prints and parses)
// ---------------------------------------------------------------------------------------

/// The streams of the conformance suite's positive cases, as their encoders wrote them.
fn conformance_positive_streams() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "jelly")
                && p.to_string_lossy().contains("/pos_")
            {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/jelly-conformance/rdf"),
        &mut out,
    );
    out.sort();
    out
}

/// The frames of a Jelly file (delimited or not).
fn frames_of(path: &Path) -> Vec<Vec<u8>> {
    let bytes = fs::read(path).expect("readable");
    let mut r = jelly::FrameReader::new(&bytes[..], jelly::Delimiting::Auto, 1 << 30);
    let mut out = Vec::new();
    while let Some(f) = r.next_frame().expect("framing") {
        out.push(f.bytes.to_vec());
    }
    out
}

/// `jelly rdf from-jelly --out-format jelly-text` prints what protobuf-java's
/// `Message.toString()` prints (the JVM jelly-cli's jelly-text), and each side's parser
/// (`jelly rdf to-jelly`, `TextFormat.merge`) turns the other's text into the original
/// frames, over every positive stream of the conformance suite.
#[test]
fn jelly_text_agrees_with_protobuf_java_text_format() {
    let Some(jvm) = jvm() else { return };
    let scratch = Scratch::new("jelly-text");
    let streams = conformance_positive_streams();
    assert!(streams.len() > 100, "conformance suite: {}", streams.len());
    let name = |i: usize, what: &str| scratch.path(&format!("{i}-{what}"));
    // One JVM run for all streams each way.
    let mut args: Vec<PathBuf> = Vec::new();
    for (i, s) in streams.iter().enumerate() {
        args.push(s.clone());
        args.push(name(i, "jvm.jelly.txt"));
        jelly_cli(&[
            OsStr::new("rdf"),
            OsStr::new("from-jelly"),
            s.as_os_str(),
            OsStr::new("--out-format"),
            OsStr::new("jelly-text"),
            OsStr::new("--to"),
            name(i, "ours.jelly.txt").as_os_str(),
        ]);
    }
    let mut run: Vec<&OsStr> = vec![OsStr::new("text-from-jelly")];
    run.extend(args.iter().map(|p| p.as_os_str()));
    jvm.run(&run);
    let mut back: Vec<PathBuf> = Vec::new();
    for i in 0..streams.len() {
        back.push(name(i, "ours.jelly.txt"));
        back.push(name(i, "by-jvm.jelly"));
    }
    let mut run: Vec<&OsStr> = vec![OsStr::new("text-to-jelly")];
    run.extend(back.iter().map(|p| p.as_os_str()));
    jvm.run(&run);
    for (i, s) in streams.iter().enumerate() {
        let ours = fs::read_to_string(name(i, "ours.jelly.txt")).unwrap();
        let theirs = fs::read_to_string(name(i, "jvm.jelly.txt")).unwrap();
        assert_eq!(ours, theirs, "{}: printed text differs", s.display());
        let by_us = name(i, "by-us.jelly");
        jelly_cli(&[
            OsStr::new("rdf"),
            OsStr::new("to-jelly"),
            name(i, "jvm.jelly.txt").as_os_str(),
            OsStr::new("--quiet"),
            OsStr::new("--to"),
            by_us.as_os_str(),
        ]);
        let original = frames_of(s);
        assert_eq!(
            frames_of(&by_us),
            original,
            "{}: we read the JVM's text",
            s.display()
        );
        assert_eq!(
            frames_of(&name(i, "by-jvm.jelly")),
            original,
            "{}: the JVM reads our text",
            s.display()
        );
    }
}
