//! `jelly-bench`: measures jellyfish's codec the same way `bench/jvm` and `bench/py`
//! measure their peers: load the data into memory first, warm up, then loop for a
//! fixed time and print one JSON line.
//!
//! ```text
//! jelly-bench encode IN.nt|nq[.gz] [--preset big|small] [--rows-per-frame 512] [--grouped] [--seconds 5] [--out F]
//! jelly-bench decode IN.jelly [--seconds 5]
//! jelly-bench oxttl-parse IN.nt|nq[.gz] [--seconds 5]
//! jelly-bench oxttl-write IN.nt|nq[.gz] [--seconds 5]
//! ```

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
    };
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--preset" => a.preset = it.next().ok_or("--preset needs a value")?,
            "--rows-per-frame" => {
                a.rows = it
                    .next()
                    .ok_or("--rows-per-frame needs a value")?
                    .parse()
                    .map_err(|_| "bad number")?
            }
            "--grouped" => a.grouped = true,
            "--seconds" => {
                a.seconds = it
                    .next()
                    .ok_or("--seconds needs a value")?
                    .parse()
                    .map_err(|_| "bad number")?
            }
            "--out" => a.out = Some(it.next().ok_or("--out needs a value")?),
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
    let statements = refs.iter().copied();
    if shared {
        encode_with(quads, a, out, |w| {
            write_all(statements, a.grouped, &mut w.shared())
        })
    } else {
        encode_with(quads, a, out, |w| write_all(statements, a.grouped, w))
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
        other => return Err(format!("unknown command {other}")),
    }
    Ok(())
}
