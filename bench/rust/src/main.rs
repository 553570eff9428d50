//! `jelly-bench`: measures jellyfish's codec the same way `bench/jvm` and `bench/py`
//! measure their peers: load the data into memory first, warm up, then loop for a
//! fixed time and print one JSON line.
//!
//! ```text
//! jelly-bench encode IN.nt|nq[.gz] [--preset big|small] [--rows-per-frame 512] [--grouped] [--seconds 5] [--out F]
//! jelly-bench decode IN.jelly [--seconds 5]
//! jelly-bench oxttl-parse IN.nt|nq[.gz] [--seconds 5]
//! jelly-bench oxttl-write IN.nt|nq[.gz] [--seconds 5]
//! jelly-bench paired IN --op encode-shared|encode|decode --jvm JAR [--slices 24] [--slice-ms 250] [encode flags]
//! ```
//!
//! `paired` measures jellyfish and Jelly-JVM in alternating slices of a few hundred
//! milliseconds within one run, rather than one tool for several seconds and then the
//! other: the JVM peer (`bench-slices`) stays loaded and warm, waiting on its stdin, while
//! this process runs its slice, and the other way round. Both tools then see the same
//! phases of a shared host, so a slow minute falls on both. Each pair runs in turn in
//! the order AB then BA. `encode-shared` is compared with Jelly-JVM on its parsed input,
//! `encode` (owned statements) with its `--unshared` input, `decode` with its decoder.

use std::time::{Duration, Instant};

use jelly::{
    Event, FramePolicy, JellyReader, JellyWriterBuilder, LogicalType, PhysicalType, Statement,
    StreamOptions,
};
use jelly_bench::encode_loop::{write_all, write_owned};
use jelly_bench::input::{is_quads, load_statements, read_input};

struct Args {
    cmd: String,
    input: String,
    preset: String,
    rows: usize,
    grouped: bool,
    seconds: f64,
    out: Option<String>,
    /// `paired`: the operation, the JVM peer's jar, slice count and length.
    op: String,
    jvm: Option<String>,
    slices: usize,
    slice_ms: f64,
}

fn parse_args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let cmd = it.next().ok_or("missing command")?;
    let input = it.next().ok_or("missing input")?;
    let mut a = Args {
        cmd,
        input,
        preset: "big".into(),
        rows: 512,
        grouped: false,
        seconds: 5.0,
        out: None,
        op: "encode-shared".into(),
        jvm: None,
        slices: 24,
        slice_ms: 250.0,
    };
    // The value after `flag`, and the same parsed as a number.
    fn value(it: &mut impl Iterator<Item = String>, flag: &str) -> Result<String, String> {
        it.next().ok_or_else(|| format!("{flag} needs a value"))
    }
    fn number<T: std::str::FromStr>(
        it: &mut impl Iterator<Item = String>,
        flag: &str,
    ) -> Result<T, String> {
        value(it, flag)?
            .parse()
            .map_err(|_| format!("{flag}: bad number"))
    }
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--preset" => a.preset = value(&mut it, &flag)?,
            "--rows-per-frame" => a.rows = number(&mut it, &flag)?,
            "--grouped" => a.grouped = true,
            "--seconds" => a.seconds = number(&mut it, &flag)?,
            "--out" => a.out = Some(value(&mut it, &flag)?),
            "--op" => a.op = value(&mut it, &flag)?,
            "--jvm" => a.jvm = Some(value(&mut it, &flag)?),
            "--slices" => a.slices = number(&mut it, &flag)?,
            "--slice-ms" => a.slice_ms = number(&mut it, &flag)?,
            other => return Err(format!("unknown flag {other}")),
        }
    }
    Ok(a)
}

thread_local! {
    /// Fastest single iteration of the last [`time_loop`].
    static BEST: std::cell::Cell<f64> = const { std::cell::Cell::new(f64::MAX) };
    static MEDIAN: std::cell::Cell<f64> = const { std::cell::Cell::new(f64::MAX) };
}

/// Runs `f` repeatedly (after warm-up calls) for about `seconds`; returns (iterations,
/// elapsed) and records the fastest iteration for the report.
fn time_loop(seconds: f64, mut f: impl FnMut()) -> (u64, Duration) {
    for _ in 0..3 {
        f();
    }
    let start = Instant::now();
    let mut n = 0;
    let mut times = Vec::with_capacity(1 << 16);
    while n == 0 || start.elapsed().as_secs_f64() < seconds {
        let t = Instant::now();
        f();
        times.push(t.elapsed().as_secs_f64());
        n += 1;
    }
    times.sort_by(f64::total_cmp);
    BEST.with(|b| b.set(times[0]));
    MEDIAN.with(|m| m.set(times[times.len() / 2]));
    (n, start.elapsed())
}

fn encode(statements: &[Statement], quads: bool, a: &Args, out: &mut Vec<u8>) {
    // A borrowed view per statement, as a caller holding owned statements would pass them.
    encode_with(quads, a, out, |w| write_owned(statements, a.grouped, w))
}

/// Encodes interned input; with `shared`, through a shared-input session of the writer
/// (`JellyVecWriter::shared`): the strings outlive it, so IRIs are known by address.
fn encode_refs(
    refs: &[jelly::StatementRef<'_>],
    quads: bool,
    a: &Args,
    shared: bool,
    out: &mut Vec<u8>,
) {
    if shared {
        // Each statement read where it sits (`add_ref`), as Jena's writer gets a
        // reference to each `Triple`; by value it would be copied (152 bytes) first.
        encode_with(quads, a, out, |w| {
            write_all(refs, a.grouped, &mut w.shared())
        })
    } else {
        encode_with(quads, a, out, |w| write_all(refs, a.grouped, w))
    }
}

/// Encodes into `out`, which is cleared first, what `feed` adds to the writer. Its
/// capacity carries over from one iteration to the next, as the JVM peer sizes its
/// output buffer by the previous iteration's output (and allocates it from a heap that
/// is already mapped).
#[inline(always)]
fn encode_with(
    quads: bool,
    a: &Args,
    out: &mut Vec<u8>,
    feed: impl FnOnce(&mut jelly::JellyVecWriter<'_>) -> Result<(), jelly::WriteError>,
) {
    out.clear();
    let base = if a.preset == "small" {
        StreamOptions::small()
    } else {
        StreamOptions::big()
    };
    let physical = if quads {
        PhysicalType::Quads
    } else {
        PhysicalType::Triples
    };
    let logical = match (quads, a.grouped) {
        (false, false) => LogicalType::FLAT_TRIPLES,
        (true, false) => LogicalType::FLAT_QUADS,
        (false, true) => LogicalType::GRAPHS,
        (true, true) => LogicalType::DATASETS,
    };
    let opts = base.with_physical_type(physical).with_logical_type(logical);
    let policy = if a.grouped {
        FramePolicy::Manual
    } else {
        FramePolicy::Rows(a.rows)
    };
    let Ok(mut w) = JellyWriterBuilder::new(opts)
        .frame_policy(policy)
        .build_vec(out)
    else {
        return;
    };
    if let Err(e) = feed(&mut w) {
        eprintln!("encode error: {e}");
        std::process::exit(1);
    }
    let _ = w.finish();
}

fn decode(bytes: &[u8]) -> (u64, u64) {
    let mut n = 0u64;
    let mut checksum = 0u64;
    let mut r = JellyReader::from_slice(bytes);
    let res = r.for_each_event(|_, ev| {
        if let Event::Statement(st) = ev {
            n += 1;
            if let jelly::TermRef::Iri(s) = st.subject {
                checksum = checksum.wrapping_add(s.len() as u64);
            }
        }
    });
    if let Err(e) = res {
        eprintln!("decode error: {e}");
        std::process::exit(1);
    }
    (n, checksum)
}

fn report(
    op: &str,
    input: &str,
    statements: u64,
    iters: u64,
    elapsed: Duration,
    bytes: usize,
    extra: &str,
) {
    let secs = elapsed.as_secs_f64() / iters as f64;
    let best = BEST.with(|b| b.get());
    let median = MEDIAN.with(|m| m.get());
    println!(
        "{{\"tool\":\"jellyfish\",\"op\":\"{op}\",\"input\":\"{input}\",\"statements\":{statements},\"iterations\":{iters},\"seconds\":{secs:.6},\"best_seconds\":{best:.6},\"median_seconds\":{median:.6},\"stmts_per_sec\":{:.0},\"bytes\":{bytes}{extra}}}",
        statements as f64 / secs
    );
}

fn main() {
    let a = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("jelly-bench: {e}");
            std::process::exit(2);
        }
    };
    let result = run(&a);
    if let Err(e) = result {
        eprintln!("jelly-bench: {e}");
        std::process::exit(1);
    }
}

fn run(a: &Args) -> Result<(), String> {
    match a.cmd.as_str() {
        "encode" => {
            let statements = load_statements(&a.input)?;
            let quads = is_quads(&a.input);
            let mut bytes = Vec::new();
            let (iters, el) = time_loop(a.seconds, || encode(&statements, quads, a, &mut bytes));
            if let Some(out) = &a.out {
                std::fs::write(out, &bytes).map_err(|e| e.to_string())?;
            }
            let extra = format!(",\"preset\":\"{}\",\"grouped\":{}", a.preset, a.grouped);
            report(
                "encode",
                &a.input,
                statements.len() as u64,
                iters,
                el,
                bytes.len(),
                &extra,
            );
        }
        "encode-interned" | "encode-shared" => {
            let shared = a.cmd == "encode-shared";
            let statements = load_statements(&a.input)?;
            let quads = is_quads(&a.input);
            if statements.iter().any(|s| {
                matches!(s.subject, jelly::Term::Triple(_))
                    || matches!(s.object, jelly::Term::Triple(_))
            }) {
                return Err("encode-interned does not handle quoted triples".into());
            }
            let arena = jelly_bench::interned::intern(&statements);
            drop(statements);
            let refs = jelly_bench::interned::arena_refs(&arena, quads);
            let mut bytes = Vec::new();
            let (iters, el) = time_loop(a.seconds, || {
                encode_refs(&refs, quads, a, shared, &mut bytes)
            });
            let extra = format!(
                ",\"preset\":\"{}\",\"grouped\":{},\"input_form\":\"{}\"",
                a.preset,
                a.grouped,
                if shared {
                    "interned-shared"
                } else {
                    "interned"
                }
            );
            report(
                "encode",
                &a.input,
                refs.len() as u64,
                iters,
                el,
                bytes.len(),
                &extra,
            );
        }
        "decode" => {
            let bytes = read_input(&a.input)?;
            let mut n = 0;
            let (iters, el) = time_loop(a.seconds, || n = decode(&bytes).0);
            report("decode", &a.input, n, iters, el, bytes.len(), "");
        }
        "decode-owned" => {
            // Decoding into owned oxrdf quads (one allocation per term), for comparison
            // with peers that build term objects.
            let bytes = read_input(&a.input)?;
            let mut n = 0u64;
            let (iters, el) = time_loop(a.seconds, || {
                n = 0;
                let r = JellyReader::from_slice(&bytes).for_each_statement(|st| {
                    if let Ok(q) = st.to_oxrdf_quad() {
                        std::hint::black_box(q);
                        n += 1;
                    }
                });
                if r.is_err() {
                    n = 0;
                }
            });
            report("decode-owned", &a.input, n, iters, el, bytes.len(), "");
        }
        "oxttl-parse" => {
            let bytes = read_input(&a.input)?;
            let quads = is_quads(&a.input);
            let mut n = 0u64;
            let (iters, el) = time_loop(a.seconds, || {
                n = 0;
                if quads {
                    for q in oxttl::NQuadsParser::new().for_slice(&bytes) {
                        if q.is_ok() {
                            n += 1;
                        }
                    }
                } else {
                    for t in oxttl::NTriplesParser::new().for_slice(&bytes) {
                        if t.is_ok() {
                            n += 1;
                        }
                    }
                }
            });
            report("oxttl-parse", &a.input, n, iters, el, bytes.len(), "");
        }
        "oxttl-write" => {
            let bytes = read_input(&a.input)?;
            let quads: Vec<oxrdf::Quad> = oxttl::NQuadsParser::new()
                .for_slice(&bytes)
                .filter_map(Result::ok)
                .collect();
            let mut size = 0;
            let (iters, el) = time_loop(a.seconds, || {
                let mut w =
                    oxttl::NQuadsSerializer::new().for_writer(Vec::with_capacity(bytes.len()));
                for q in &quads {
                    let _ = w.serialize_quad(q);
                }
                size = w.finish().len();
            });
            report(
                "oxttl-write",
                &a.input,
                quads.len() as u64,
                iters,
                el,
                size,
                "",
            );
        }
        "paired" => paired(a)?,
        other => return Err(format!("unknown command {other}")),
    }
    Ok(())
}

/// One tool's slices: statements per second of each, and the totals.
#[derive(Default)]
struct Slices {
    rates: Vec<f64>,
    statements: f64,
    seconds: f64,
}

impl Slices {
    fn push(&mut self, statements: f64, seconds: f64) {
        self.rates.push(statements / seconds);
        self.statements += statements;
        self.seconds += seconds;
    }

    fn rate(&self) -> f64 {
        self.statements / self.seconds
    }
}

/// Runs whole iterations of `f` until `ms` milliseconds have passed (at least one);
/// returns (iterations, seconds).
fn slice(ms: f64, f: &mut dyn FnMut()) -> (u64, f64) {
    let start = Instant::now();
    let mut n = 0;
    loop {
        f();
        n += 1;
        let el = start.elapsed().as_secs_f64();
        if el * 1e3 >= ms {
            return (n, el);
        }
    }
}

/// The JVM peer in `bench-slices` mode: loaded, warmed up, waiting for slices.
struct JvmSlices {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: std::io::BufReader<std::process::ChildStdout>,
}

impl JvmSlices {
    fn start(jar: &str, args: &[String]) -> Result<(Self, serde_json::Value), String> {
        use std::process::{Command, Stdio};
        let mut child = Command::new("java")
            .args(["-Xmx8g", "-jar", jar, "bench-slices"])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting java: {e}"))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err("java: no pipes".into());
        };
        let mut jvm = JvmSlices {
            child,
            stdin,
            stdout: std::io::BufReader::new(stdout),
        };
        let ready = jvm.read_json("ready")?;
        Ok((jvm, ready))
    }

    /// The next stdout line that is a JSON object with `key` (Jena may print other lines).
    fn read_json(&mut self, key: &str) -> Result<serde_json::Value, String> {
        use std::io::BufRead;
        let mut line = String::new();
        loop {
            line.clear();
            let n = self
                .stdout
                .read_line(&mut line)
                .map_err(|e| format!("reading the JVM peer: {e}"))?;
            if n == 0 {
                return Err("the JVM peer exited early (run it alone to see why)".into());
            }
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(line.trim())
                && v.get(key).is_some()
            {
                return Ok(v);
            }
        }
    }

    /// Runs one slice in the JVM; returns (iterations, seconds).
    fn slice(&mut self, ms: f64) -> Result<(u64, f64), String> {
        use std::io::Write;
        writeln!(self.stdin, "{ms}").map_err(|e| format!("writing to the JVM peer: {e}"))?;
        self.stdin.flush().map_err(|e| e.to_string())?;
        let v = self.read_json("iterations")?;
        let iters = v["iterations"].as_u64().ok_or("bad JVM slice line")?;
        let secs = v["seconds"].as_f64().ok_or("bad JVM slice line")?;
        Ok((iters, secs))
    }
}

impl Drop for JvmSlices {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `paired`: jellyfish and Jelly-JVM in alternating slices (see the module docs).
fn paired(a: &Args) -> Result<(), String> {
    let jar = a.jvm.as_deref().ok_or("paired needs --jvm JAR")?;
    if a.slices == 0 {
        return Err("paired needs --slices of at least 1".into());
    }
    let mut jvm_args: Vec<String> = Vec::new();
    let encode_flags = |v: &mut Vec<String>| {
        v.extend(["--preset".into(), a.preset.clone()]);
        v.extend(["--rows-per-frame".into(), a.rows.to_string()]);
        if a.grouped {
            v.push("--grouped-per-graph".into());
        }
    };
    // Our side's input and loop, built per operation; they live to the end of the run.
    let quads = is_quads(&a.input);
    let mut bytes = Vec::new();
    let owned;
    let arena;
    let refs;
    let decode_input;
    let mut once: Box<dyn FnMut()>;
    let statements: u64;
    match a.op.as_str() {
        "encode-shared" | "encode" => {
            jvm_args.extend(["encode".into(), a.input.clone()]);
            encode_flags(&mut jvm_args);
            let loaded = load_statements(&a.input)?;
            statements = loaded.len() as u64;
            if a.op == "encode" {
                jvm_args.push("--unshared".into());
                owned = loaded;
                let (owned, bytes) = (&owned, &mut bytes);
                once = Box::new(move || encode(owned, quads, a, bytes));
            } else {
                arena = jelly_bench::interned::intern(&loaded);
                drop(loaded);
                refs = jelly_bench::interned::arena_refs(&arena, quads);
                let (refs, bytes) = (&refs, &mut bytes);
                once = Box::new(move || encode_refs(refs, quads, a, true, bytes));
            }
        }
        "decode" => {
            jvm_args.extend(["decode".into(), a.input.clone()]);
            decode_input = read_input(&a.input)?;
            statements = decode(&decode_input).0;
            let input = &decode_input;
            once = Box::new(move || {
                std::hint::black_box(decode(input));
            });
        }
        other => return Err(format!("paired: unknown --op {other}")),
    }
    let (mut jvm, ready) = JvmSlices::start(jar, &jvm_args)?;
    if ready["statements"].as_u64() != Some(statements) {
        return Err(format!(
            "the JVM peer loaded {} statements, jellyfish {statements}",
            ready["statements"]
        ));
    }
    for _ in 0..3 {
        once();
    }
    let n = statements as f64;
    let (mut ours, mut theirs) = (Slices::default(), Slices::default());
    for i in 0..a.slices {
        // AB, then BA: neither tool always runs right after the other's slice.
        let mut run_ours = |s: &mut Slices| {
            let (it, secs) = slice(a.slice_ms, &mut *once);
            s.push(n * it as f64, secs);
        };
        if i % 2 == 0 {
            run_ours(&mut ours);
            let (it, secs) = jvm.slice(a.slice_ms)?;
            theirs.push(n * it as f64, secs);
        } else {
            let (it, secs) = jvm.slice(a.slice_ms)?;
            theirs.push(n * it as f64, secs);
            run_ours(&mut ours);
        }
    }
    drop(jvm);
    drop(once);
    let mut ratios: Vec<f64> = ours
        .rates
        .iter()
        .zip(&theirs.rates)
        .map(|(o, t)| o / t)
        .collect();
    let list = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.3}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    let ratio_list = list(&ratios);
    ratios.sort_by(f64::total_cmp);
    println!(
        "{{\"tool\":\"paired\",\"op\":\"{}\",\"input\":\"{}\",\"statements\":{statements},\"slices\":{},\"slice_ms\":{},\"jellyfish_stmts_per_sec\":{:.0},\"jvm_stmts_per_sec\":{:.0},\"ratio\":{:.3},\"median_slice_ratio\":{:.3},\"min_slice_ratio\":{:.3},\"slice_ratios\":[{ratio_list}],\"bytes\":{}}}",
        a.op,
        a.input,
        a.slices,
        a.slice_ms,
        ours.rate(),
        theirs.rate(),
        ours.rate() / theirs.rate(),
        ratios[ratios.len() / 2],
        ratios[0],
        bytes.len(),
    );
    Ok(())
}
