//! `codec_profile`: one encode or decode pass in a function of its own, for
//! instruction counting (`valgrind --tool=callgrind --toggle-collect='*encode_pass*'`
//! or `'*decode_pass*'`) and `perf stat`, without the timing loop of `jelly-bench`.
//!
//! ```text
//! codec_profile encode IN.nt|nq[.gz] [--grouped] [--iters N] [--out F]
//! codec_profile encode-interned|encode-shared IN.nt|nq[.gz] [--grouped] [--iters N] [--out F]
//! codec_profile decode IN.jelly [--iters N]
//! codec_profile items IN.nt|nq[.gz] [--per-item 50] [--iters N]
//! codec_profile rebase IN.nt|nq[.gz] [--per-item 50] [--iters N]
//! ```
//! `encode-interned` encodes the input from one copy of each distinct string (the
//! measured function is `encode_refs_pass`), `encode-shared` the same through a
//! shared-input session of the writer.
//! `items` encodes the input as the server's ingest writes items: one self-contained,
//! spliceable frame of `--per-item` statements each, BIG preset, from one encoder
//! reset between items; the measured function is `items_pass` (the unmeasured first
//! pass outside it is left out with `--toggle-collect`, but not its call count).
//! `rebase` encodes the input as one continuous stream in frames of `--per-item`
//! statements (BIG preset), then in `rebase_pass` rebases and decodes each frame as the
//! server's ingest does (`--toggle-collect='*Rebaser*rebase*'` counts the rebaser alone).
//! Frames as `jelly-bench`: "flat" is 512 rows per frame with the BIG preset, "grouped"
//! one frame per run of quads with the same graph. As in `jelly-bench`, the output
//! buffer's capacity carries over between passes (an unmeasured first pass sizes it).

use jelly::{
    Encoder, EncoderConfig, Event, FramePolicy, JellyReader, JellyWriterBuilder, LogicalType,
    PhysicalType, Statement, StreamOptions,
};
use jelly_bench::encode_loop::{write_all, write_owned};
use jelly_bench::input;

/// Rebases and decodes every frame of one stream, as the server's ingest does; returns
/// the frames rebased and the bytes written.
#[inline(never)]
fn rebase_pass(frames: &[Vec<u8>], opts: &StreamOptions) -> (usize, usize) {
    use jelly::rebase::{Rebased, Rebaser};
    let mut dec = jelly::Decoder::default();
    let mut rebaser = Rebaser::new(opts);
    let mut out = Vec::new();
    let (mut rebased, mut bytes) = (0, 0);
    for f in frames {
        if let Rebased::Frame { .. } = rebaser.rebase(f, &dec, &mut out) {
            rebased += 1;
            bytes += out.len();
        }
        let mut cur = dec.frame(f);
        while cur.next_event().expect("valid").is_some() {}
    }
    (rebased, bytes)
}

/// One measured encode (the function `--toggle-collect='*encode_pass*'` selects).
#[inline(never)]
fn encode_pass(statements: &[Statement], quads: bool, grouped: bool, out: &mut Vec<u8>) {
    encode_into(statements, quads, grouped, out);
}

/// One measured encode of interned input (`--toggle-collect='*encode_refs_pass*'`),
/// through a shared-input session when `shared`.
#[inline(never)]
fn encode_refs_pass(
    refs: &[jelly::StatementRef<'_>],
    quads: bool,
    grouped: bool,
    shared: bool,
    out: &mut Vec<u8>,
) {
    encode_refs_into(refs, quads, grouped, shared, out);
}

/// Encodes into `out`, which is cleared first; its capacity carries over from one pass
/// to the next, as in `jelly-bench`'s encode loop, so the profile shows what the
/// benchmark pays (no re-growing of the output).
#[inline(never)]
fn encode_into(statements: &[Statement], quads: bool, grouped: bool, out: &mut Vec<u8>) {
    let mut w = writer(quads, grouped, out);
    write_owned(statements, grouped, &mut w).expect("encode");
    w.finish().expect("finish");
}

/// [`encode_into`] for statements of interned input, through a shared-input session
/// of the writer when `shared`.
#[inline(never)]
fn encode_refs_into(
    refs: &[jelly::StatementRef<'_>],
    quads: bool,
    grouped: bool,
    shared: bool,
    out: &mut Vec<u8>,
) {
    let mut w = writer(quads, grouped, out);
    if shared {
        write_all(refs, grouped, &mut w.shared()).expect("encode");
    } else {
        write_all(refs, grouped, &mut w).expect("encode");
    }
    w.finish().expect("finish");
}

/// The benchmark's writer into `out` (cleared first): BIG preset, 512 rows per frame
/// or (grouped) frames ended by the caller.
fn writer(quads: bool, grouped: bool, out: &mut Vec<u8>) -> jelly::JellyVecWriter<'_> {
    out.clear();
    let physical = physical_of(quads);
    let logical = match (quads, grouped) {
        (false, false) => LogicalType::FLAT_TRIPLES,
        (true, false) => LogicalType::FLAT_QUADS,
        (false, true) => LogicalType::GRAPHS,
        (true, true) => LogicalType::DATASETS,
    };
    let opts = StreamOptions::big()
        .with_physical_type(physical)
        .with_logical_type(logical);
    let policy = if grouped {
        FramePolicy::Manual
    } else {
        FramePolicy::Rows(512)
    };
    JellyWriterBuilder::new(opts)
        .frame_policy(policy)
        .build_vec(out)
        .expect("writer")
}

#[inline(never)]
fn decode_pass(bytes: &[u8]) -> (u64, u64) {
    let mut n = 0u64;
    let mut checksum = 0u64;
    let mut r = JellyReader::from_slice(bytes);
    r.for_each_event(|_, ev| {
        if let Event::Statement(st) = ev {
            n += 1;
            if let jelly::TermRef::Iri(s) = st.subject {
                checksum = checksum.wrapping_add(s.len() as u64);
            }
        }
    })
    .expect("decode");
    (n, checksum)
}

/// Encodes every item of `per_item` statements, as the server's ingest does; returns
/// the bytes of all items.
fn encode_items(enc: &mut Encoder, statements: &[Statement], per_item: usize) -> usize {
    let mut total = 0;
    for chunk in statements.chunks(per_item) {
        enc.reset();
        for st in chunk {
            enc.add(st.as_ref()).expect("encode");
        }
        total += enc.finish_frame().len();
    }
    total
}

/// One measured pass of `items` (the function `--toggle-collect='*items_pass*'` selects).
#[inline(never)]
fn items_pass(enc: &mut Encoder, statements: &[Statement], per_item: usize) -> usize {
    encode_items(enc, statements, per_item)
}

/// The statements of an N-Triples or N-Quads file (gzipped or not), and whether it
/// holds quads (by its extension).
fn load_statements(input: &str) -> (Vec<Statement>, bool) {
    let statements = input::load_statements(input).unwrap_or_else(|e| panic!("{e}"));
    (statements, input::is_quads(input))
}

/// The physical type of a stream of quads or of triples.
fn physical_of(quads: bool) -> PhysicalType {
    if quads {
        PhysicalType::Quads
    } else {
        PhysicalType::Triples
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cmd = args.first().expect("command").as_str();
    let input = args.get(1).expect("input").as_str();
    let flag = |name: &str| args.iter().position(|a| a == name);
    let value = |name: &str| flag(name).and_then(|i| args.get(i + 1)).cloned();
    let iters: usize = value("--iters").map_or(1, |v| v.parse().expect("iters"));
    let per_item = || -> usize { value("--per-item").map_or(50, |v| v.parse().expect("per-item")) };
    match cmd {
        "encode" => {
            let (statements, quads) = load_statements(input);
            let grouped = flag("--grouped").is_some();
            // One pass outside `encode_pass` sizes the output, as `jelly-bench`'s
            // warm-up does.
            let mut bytes = Vec::new();
            encode_into(&statements, quads, grouped, &mut bytes);
            for _ in 0..iters {
                encode_pass(&statements, quads, grouped, &mut bytes);
            }
            if let Some(out) = value("--out") {
                std::fs::write(out, &bytes).expect("write");
            }
            println!("statements {} bytes {}", statements.len(), bytes.len());
        }
        "encode-interned" | "encode-shared" => {
            let (statements, quads) = load_statements(input);
            let grouped = flag("--grouped").is_some();
            let arena = jelly_bench::interned::intern(&statements);
            drop(statements);
            let refs = jelly_bench::interned::arena_refs(&arena, quads);
            let shared = cmd == "encode-shared";
            let mut bytes = Vec::new();
            encode_refs_into(&refs, quads, grouped, shared, &mut bytes);
            for _ in 0..iters {
                encode_refs_pass(&refs, quads, grouped, shared, &mut bytes);
            }
            if let Some(out) = value("--out") {
                std::fs::write(out, &bytes).expect("write");
            }
            println!("statements {} bytes {}", refs.len(), bytes.len());
        }
        "decode" => {
            let bytes = input::read_input(input).unwrap_or_else(|e| panic!("{e}"));
            let mut r = (0, 0);
            for _ in 0..iters {
                r = decode_pass(&bytes);
            }
            println!("statements {} checksum {}", r.0, r.1);
        }
        "items" => {
            let (statements, quads) = load_statements(input);
            let per_item = per_item();
            let physical = physical_of(quads);
            let cfg = EncoderConfig {
                spliceable: true,
                ..EncoderConfig::default()
            };
            let mut enc =
                Encoder::with_config(StreamOptions::big().with_physical_type(physical), cfg)
                    .expect("options");
            let mut bytes = encode_items(&mut enc, &statements, per_item);
            for _ in 0..iters {
                bytes = items_pass(&mut enc, &statements, per_item);
            }
            println!("statements {} item bytes {bytes}", statements.len());
        }
        "rebase" => {
            let (statements, quads) = load_statements(input);
            let per_item = per_item();
            let opts = StreamOptions::big().with_physical_type(physical_of(quads));
            let mut enc = Encoder::new(opts.clone()).expect("options");
            let frames: Vec<Vec<u8>> = statements
                .chunks(per_item)
                .map(|c| {
                    for st in c {
                        enc.add(st.as_ref()).expect("encodable");
                    }
                    enc.finish_frame()
                })
                .collect();
            let mut r = rebase_pass(&frames, &opts);
            for _ in 0..iters {
                r = rebase_pass(&frames, &opts);
            }
            println!(
                "statements {} frames {} rebased {} bytes {}",
                statements.len(),
                frames.len(),
                r.0,
                r.1
            );
        }
        other => panic!("unknown command {other}"),
    }
}
