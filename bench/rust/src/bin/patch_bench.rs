//! `patch_bench`: workload generator and measurement driver for RDF Patch text vs
//! Jelly-Patch (see `bench/patch/README.md`).
//!
//! ```text
//! patch_bench gen-cdc OUT.rdfp [--source bsbm.nq.gz] [--adds 50] [--deletes 10] [--seed 42]
//! patch_bench gen-iot OUT.rdfp [--source iot.nt] [--frames frames.txt]
//! patch_bench seeds DIR                      # small Jelly-Patch files (fuzz seeds)
//! patch_bench measure IN.rdfp [--seconds 3] [--runs 2]
//! ```
//!
//! `measure` loads the patch into memory (rows), then prints one JSON line per
//! measurement: sizes (text, gzip of text, Jelly-Patch BIG FLAT / FRAME / PUNCTUATED) and,
//! for each codec, the mean time per iteration over `--seconds` after one warm-up call;
//! each measurement is run `--runs` times and the fastest run is kept.

use std::collections::HashSet;
use std::fs::File;
use std::hint::black_box;
use std::io::Write;
use std::time::Instant;

use jelly::patch::{
    PatchEvent, PatchOptions, PatchReader, PatchStatementType, PatchStreamType, PatchWriter,
};
use jelly::rdf_patch::{PatchRow, RdfPatchParser, RdfPatchWriter};
use jelly::{Statement, Term, TermRef};
use jelly_bench::input::{load_statements, read_input};

type Res<T> = Result<T, String>;

fn write_rows(path: &str, rows: &[PatchRow]) -> Res<()> {
    let f = File::create(path).map_err(|e| format!("{path}: {e}"))?;
    let mut w = RdfPatchWriter::new(std::io::BufWriter::new(f));
    for r in rows {
        w.write(r).map_err(|e| e.to_string())?;
    }
    w.finish().map_err(|e| e.to_string())?;
    Ok(())
}

/// splitmix64: a deterministic generator with no dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn iri(s: &str) -> Term {
    Term::Iri(s.to_owned())
}

fn flag<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

fn num<T: std::str::FromStr>(args: &[String], name: &str, def: T) -> Res<T> {
    match flag(args, name) {
        Some(v) => v.parse().map_err(|_| format!("bad value for {name}: {v}")),
        None => Ok(def),
    }
}

const DATASETS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/datasets");

/// Change-data-capture log: every transaction adds the next `adds` quads of the source
/// (in source order) and deletes `deletes` quads picked at random among those added
/// earlier and still present.
fn gen_cdc(args: &[String]) -> Res<Vec<PatchRow>> {
    let default = format!("{DATASETS}/bsbm-200k-graphs/bsbm-200k-graphs.nq.gz");
    let source = flag(args, "--source").unwrap_or(&default);
    let adds: usize = num(args, "--adds", 50)?;
    let deletes: usize = num(args, "--deletes", 10)?;
    let mut rng = Rng(num(args, "--seed", 42)?);
    let quads = load_statements(source)?;
    let mut rows = vec![
        PatchRow::Header {
            key: "id".into(),
            value: iri("uuid:6f1c1a4e-2b7d-4c1e-9a59-bsbm-cdc-0000"),
        },
        PatchRow::PrefixAdd {
            prefix: "bsbm".into(),
            iri: "http://www4.wiwiss.fu-berlin.de/bizer/bsbm/v01/vocabulary/".into(),
            graph: None,
        },
        PatchRow::PrefixAdd {
            prefix: "bsbm-inst".into(),
            iri: "http://www4.wiwiss.fu-berlin.de/bizer/bsbm/v01/instances/".into(),
            graph: None,
        },
    ];
    let mut live: Vec<Statement> = Vec::new();
    let mut present: HashSet<Statement> = HashSet::new();
    for batch in quads.chunks(adds) {
        rows.push(PatchRow::TxStart);
        for q in batch {
            rows.push(PatchRow::Add(q.clone()));
            if present.insert(q.clone()) {
                live.push(q.clone());
            }
        }
        for _ in 0..deletes.min(live.len()) {
            let q = live.swap_remove(rng.below(live.len()));
            present.remove(&q);
            rows.push(PatchRow::Delete(q));
        }
        rows.push(PatchRow::TxCommit);
    }
    Ok(rows)
}

/// IoT diff stream: frame i of the source is one observation graph; each step is one
/// patch `TX, D (frame i-1 minus frame i), A (frame i minus frame i-1), TC`; step 0 adds
/// frame 0.
fn gen_iot(args: &[String]) -> Res<Vec<PatchRow>> {
    let d_src = format!("{DATASETS}/iot-assist-weather/iot-assist-weather.nt");
    let d_frames = format!("{DATASETS}/iot-assist-weather/frames.txt");
    let source = flag(args, "--source").unwrap_or(&d_src);
    let frames_file = flag(args, "--frames").unwrap_or(&d_frames);
    let triples = load_statements(source)?;
    let frames_text = String::from_utf8(read_input(frames_file)?).map_err(|e| e.to_string())?;
    let mut frames: Vec<&[Statement]> = Vec::new();
    let mut at = 0;
    for line in frames_text.lines() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let n: usize = l.parse().map_err(|_| format!("bad frame size {l}"))?;
        let end = (at + n).min(triples.len());
        frames.push(&triples[at..end]);
        at = end;
    }
    if at < triples.len() {
        frames.push(&triples[at..]);
    }
    let mut rows = vec![PatchRow::Header {
        key: "id".into(),
        value: iri("uuid:0b5e7f3a-91c2-4d8e-a1f0-iot-diff-00000"),
    }];
    let mut prev: HashSet<&Statement> = HashSet::new();
    let mut prev_frame: &[Statement] = &[];
    for frame in frames {
        let cur: HashSet<&Statement> = frame.iter().collect();
        rows.push(PatchRow::TxStart);
        // Deletions in the previous frame's order, additions in this frame's order.
        let mut seen = HashSet::new();
        for s in prev_frame {
            if !cur.contains(s) && seen.insert(s) {
                rows.push(PatchRow::Delete(s.clone()));
            }
        }
        for s in frame {
            if !prev.contains(s) && seen.insert(s) {
                rows.push(PatchRow::Add(s.clone()));
            }
        }
        rows.push(PatchRow::TxCommit);
        prev = cur;
        prev_frame = frame;
    }
    Ok(rows)
}

// ---------------------------------------------------------------------------------------
// Jelly-Patch encoding of rows
// ---------------------------------------------------------------------------------------

fn is_quads(rows: &[PatchRow]) -> bool {
    let named = |g: &Option<Term>| matches!(g, Some(g) if *g != Term::DefaultGraph);
    rows.iter().any(|r| match r {
        PatchRow::Add(s) | PatchRow::Delete(s) => named(&s.graph),
        PatchRow::PrefixAdd { graph, .. } | PatchRow::PrefixDelete { graph, .. } => named(graph),
        _ => false,
    })
}

fn encode_jelly(rows: &[PatchRow], quads: bool, stream: PatchStreamType, out: Vec<u8>) -> Vec<u8> {
    let st = if quads {
        PatchStatementType::Quads
    } else {
        PatchStatementType::Triples
    };
    let mut w = PatchWriter::new(out, PatchOptions::big(st, stream)).unwrap();
    for r in rows {
        match r {
            PatchRow::Header { key, value } => w.encoder().header(key, value.as_ref()).unwrap(),
            PatchRow::TxStart => w.encoder().transaction_start().unwrap(),
            PatchRow::TxCommit => {
                w.encoder().transaction_commit().unwrap();
                w.end_patch().unwrap();
            }
            PatchRow::TxAbort => {
                w.encoder().transaction_abort().unwrap();
                w.end_patch().unwrap();
            }
            PatchRow::Segment => {}
            PatchRow::PrefixAdd { prefix, iri, graph } => w
                .encoder()
                .add_namespace(prefix, iri, graph.as_ref().map(Term::as_ref))
                .unwrap(),
            PatchRow::PrefixDelete { prefix, graph } => w
                .encoder()
                .delete_namespace(prefix, None, graph.as_ref().map(Term::as_ref))
                .unwrap(),
            PatchRow::Add(s) => w.add(s.as_ref()).unwrap(),
            PatchRow::Delete(s) => w.delete(s.as_ref()).unwrap(),
        }
        if !matches!(r, PatchRow::Add(_) | PatchRow::Delete(_)) {
            w.maybe_flush().unwrap();
        }
    }
    w.finish().unwrap()
}

/// Decodes and touches every event (borrowed); returns (patch rows, frames).
fn decode_jelly(bytes: &[u8]) -> (u64, u64) {
    let mut rows = 0u64;
    let mut frames = 0u64;
    PatchReader::new(bytes)
        .for_each_event(|f, ev| {
            frames = f + 1;
            match ev {
                PatchEvent::Options(_) | PatchEvent::Punctuation => {}
                ev => {
                    rows += 1;
                    black_box(ev);
                }
            }
        })
        .unwrap();
    (rows, frames)
}

/// Decodes into owned rows (what the text parser produces).
fn decode_jelly_owned(bytes: &[u8]) -> Vec<PatchRow> {
    let mut out = Vec::new();
    // QUADS streams carry the default graph explicitly; RDF Patch text leaves it out.
    let g = |g: Option<TermRef<'_>>| {
        g.filter(|t| *t != TermRef::DefaultGraph)
            .map(|t| t.to_owned())
    };
    let st = |s: jelly::StatementRef<'_>| {
        let mut s = s.to_owned();
        if s.graph == Some(Term::DefaultGraph) {
            s.graph = None;
        }
        s
    };
    PatchReader::new(bytes)
        .for_each_event(|_, ev| {
            let row = match ev {
                PatchEvent::Options(_) | PatchEvent::Punctuation => return,
                PatchEvent::Header { key, value } => PatchRow::Header {
                    key: key.to_owned(),
                    value: value.to_owned(),
                },
                PatchEvent::TransactionStart => PatchRow::TxStart,
                PatchEvent::TransactionCommit => PatchRow::TxCommit,
                PatchEvent::TransactionAbort => PatchRow::TxAbort,
                PatchEvent::AddNamespace { name, iri, graph } => PatchRow::PrefixAdd {
                    prefix: name.to_owned(),
                    iri: iri.to_owned(),
                    graph: g(graph),
                },
                PatchEvent::DeleteNamespace { name, graph, .. } => PatchRow::PrefixDelete {
                    prefix: name.to_owned(),
                    graph: g(graph),
                },
                PatchEvent::Add(s) => PatchRow::Add(st(s)),
                PatchEvent::Delete(s) => PatchRow::Delete(st(s)),
            };
            out.push(row);
        })
        .unwrap();
    out
}

fn write_text(rows: &[PatchRow], out: Vec<u8>) -> Vec<u8> {
    let mut w = RdfPatchWriter::new(out);
    for r in rows {
        w.write(r).unwrap();
    }
    w.finish().unwrap()
}

fn parse_text(bytes: &[u8]) -> Vec<PatchRow> {
    RdfPatchParser::new(bytes)
        .collect::<Result<_, _>>()
        .unwrap()
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

/// Best (lowest) mean seconds per iteration over `runs` runs of about `seconds` each.
fn measure(seconds: f64, runs: usize, mut f: impl FnMut()) -> (f64, u64) {
    let mut best = f64::MAX;
    let mut best_iters = 0;
    for _ in 0..runs {
        f(); // warm-up
        let start = Instant::now();
        let mut n = 0u64;
        while n == 0 || start.elapsed().as_secs_f64() < seconds {
            f();
            n += 1;
        }
        let mean = start.elapsed().as_secs_f64() / n as f64;
        if mean < best {
            best = mean;
            best_iters = n;
        }
    }
    (best, best_iters)
}

fn run_measure(args: &[String]) -> Res<()> {
    let input = args.first().ok_or("missing IN.rdfp")?;
    let seconds: f64 = num(args, "--seconds", 3.0)?;
    let runs: usize = num(args, "--runs", 2)?;
    let text = read_input(input)?;
    let rows = parse_text(&text);
    let n = rows.len() as u64;
    let quads = is_quads(&rows);
    let name = input.rsplit('/').next().unwrap_or(input);

    // Sizes.
    let ours = write_text(&rows, Vec::new());
    let gz = gzip(&ours);
    let streams = [
        ("flat", PatchStreamType::Flat),
        ("frame", PatchStreamType::Frame),
        ("punctuated", PatchStreamType::Punctuated),
    ];
    let mut enc = Vec::new();
    for (sname, st) in streams {
        let b = encode_jelly(&rows, quads, st, Vec::new());
        let (dec_rows, frames) = decode_jelly(&b);
        assert_eq!(dec_rows, n, "{sname}: rows");
        assert_eq!(decode_jelly_owned(&b), rows, "{sname}: round trip");
        enc.push((sname, st, b, frames));
    }
    let adds = rows
        .iter()
        .filter(|r| matches!(r, PatchRow::Add(_)))
        .count();
    let dels = rows
        .iter()
        .filter(|r| matches!(r, PatchRow::Delete(_)))
        .count();
    let txs = rows
        .iter()
        .filter(|r| matches!(r, PatchRow::TxStart))
        .count();
    print!(
        "{{\"kind\":\"sizes\",\"input\":\"{name}\",\"rows\":{n},\"adds\":{adds},\"deletes\":{dels},\"transactions\":{txs},\"quads\":{quads},\"text_bytes\":{},\"text_gzip_bytes\":{}",
        ours.len(),
        gz.len()
    );
    for (sname, _, b, frames) in &enc {
        print!(
            ",\"jelly_{sname}_bytes\":{},\"jelly_{sname}_frames\":{frames},\"jelly_{sname}_gzip_bytes\":{}",
            b.len(),
            gzip(b).len()
        );
    }
    println!("}}");

    let report = |op: &str, secs: f64, iters: u64, bytes: usize| {
        println!(
            "{{\"kind\":\"throughput\",\"tool\":\"jellyfish\",\"op\":\"{op}\",\"input\":\"{name}\",\"rows\":{n},\"seconds\":{secs:.6},\"rows_per_sec\":{:.0},\"iterations\":{iters},\"bytes\":{bytes}}}",
            n as f64 / secs
        );
    };

    let cap = ours.len() + 1024;
    let (s, i) = measure(seconds, runs, || {
        black_box(write_text(&rows, Vec::with_capacity(cap)));
    });
    report("rdfpatch-write", s, i, ours.len());
    let (s, i) = measure(seconds, runs, || {
        black_box(parse_text(&ours));
    });
    report("rdfpatch-parse", s, i, ours.len());
    for (sname, st, b, _) in &enc {
        let cap = b.len() + 1024;
        let (s, i) = measure(seconds, runs, || {
            black_box(encode_jelly(&rows, quads, *st, Vec::with_capacity(cap)));
        });
        report(&format!("jelly-{sname}-encode"), s, i, b.len());
        let (s, i) = measure(seconds, runs, || {
            black_box(decode_jelly(b));
        });
        report(&format!("jelly-{sname}-decode"), s, i, b.len());
        let (s, i) = measure(seconds, runs, || {
            black_box(decode_jelly_owned(b));
        });
        report(&format!("jelly-{sname}-decode-owned"), s, i, b.len());
    }
    Ok(())
}

/// A few small Jelly-Patch streams covering every row kind, for the fuzz corpus.
fn seeds(args: &[String]) -> Res<()> {
    let dir = args.first().ok_or("missing DIR")?;
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let text = "H id <uuid:1> .\nH prev <uuid:0> .\nTX .\nPA \"ex\" \"http://example.org/\" .\n\
        A <http://example.org/s> <http://example.org/p> \"o\"@en .\n\
        A _:b0 <http://example.org/p> \"42\"^^<http://www.w3.org/2001/XMLSchema#integer> .\n\
        D <http://example.org/s> <http://example.org/p> <<( <http://a> <http://b> \"c\" )>> .\n\
        PD \"ex\" .\nTC .\nTX .\nA <http://example.org/s2> <http://example.org/p> _:b1 .\nTA .\n";
    let triples = jelly::rdf_patch::parse_str(text).map_err(|e| e.to_string())?;
    let qtext = "TX .\nPA \"ex\" \"http://example.org/\" <http://g> .\n\
        A <http://example.org/s> <http://example.org/p> \"x\\ny\" <http://g> .\n\
        A <http://example.org/s> <http://example.org/p> \"x\" _:g .\n\
        D <http://example.org/s> <http://example.org/p> \"x\" <http://g> .\n\
        D <http://example.org/s> <http://example.org/p> \"x\" .\nTC .\n";
    let quads = jelly::rdf_patch::parse_str(qtext).map_err(|e| e.to_string())?;
    let mut n = 0;
    for (rows, q) in [(&triples, false), (&quads, true)] {
        for st in [
            PatchStreamType::Flat,
            PatchStreamType::Frame,
            PatchStreamType::Punctuated,
        ] {
            let mut rows = rows.clone();
            if st == PatchStreamType::Punctuated {
                // rdf-star needs the flag; keep PUNCTUATED seeds plain.
                rows.retain(|r| !format!("{r:?}").contains("Triple("));
            }
            let opts = if q {
                PatchOptions::small(PatchStatementType::Quads, st)
            } else {
                let mut o = PatchOptions::with_tables(PatchStatementType::Triples, st, 8, 2, 2);
                o.rdf_star = true;
                o
            };
            let mut w = PatchWriter::new(Vec::new(), opts)
                .unwrap()
                .with_rows_per_frame(4);
            for r in &rows {
                match r {
                    PatchRow::Header { key, value } => {
                        w.encoder().header(key, value.as_ref()).unwrap()
                    }
                    PatchRow::TxStart => w.encoder().transaction_start().unwrap(),
                    PatchRow::TxCommit => {
                        w.encoder().transaction_commit().unwrap();
                        w.end_patch().unwrap()
                    }
                    PatchRow::TxAbort => {
                        w.encoder().transaction_abort().unwrap();
                        w.end_patch().unwrap()
                    }
                    PatchRow::PrefixAdd { prefix, iri, graph } => w
                        .encoder()
                        .add_namespace(prefix, iri, graph.as_ref().map(Term::as_ref))
                        .unwrap(),
                    PatchRow::PrefixDelete { prefix, graph } => w
                        .encoder()
                        .delete_namespace(
                            prefix,
                            Some("http://x/"),
                            graph.as_ref().map(Term::as_ref),
                        )
                        .unwrap(),
                    PatchRow::Add(s) => w.add(s.as_ref()).unwrap(),
                    PatchRow::Delete(s) => w.delete(s.as_ref()).unwrap(),
                    PatchRow::Segment => {}
                }
            }
            let bytes = w.finish().unwrap();
            n += 1;
            let path = format!("{dir}/seed_{n}_{}.jellyp", st.name());
            std::fs::write(&path, &bytes).map_err(|e| e.to_string())?;
            // The same stream, non-delimited single frame when it has one frame.
            let mut r = PatchReader::new(&bytes[..]);
            let mut frames = 0;
            while r.next_frame().map_err(|e| e.to_string())?.is_some() {
                frames += 1;
            }
            eprintln!("{path}: {} bytes, {frames} frames", bytes.len());
        }
    }
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(cmd) = args.first() else {
        eprintln!("usage: patch_bench gen-cdc|gen-iot OUT.rdfp | seeds DIR | measure IN.rdfp");
        std::process::exit(2);
    };
    let rest = &args[1..];
    let r = match cmd.as_str() {
        "gen-cdc" | "gen-iot" => (|| {
            let out = rest.first().ok_or("missing OUT.rdfp")?;
            let rows = if cmd == "gen-cdc" {
                gen_cdc(rest)?
            } else {
                gen_iot(rest)?
            };
            write_rows(out, &rows)?;
            eprintln!("{out}: {} rows", rows.len());
            Ok(())
        })(),
        "seeds" => seeds(rest),
        "measure" => run_measure(rest),
        _ => Err(format!("unknown command {cmd}")),
    };
    if let Err(e) = r {
        eprintln!("patch_bench: {e}");
        std::process::exit(1);
    }
}
