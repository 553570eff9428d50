//! Spliceable frames: items encoded one by one with fresh encoders, then sent back to
//! back (options row only once, metadata appended), decode as one stream to exactly
//! the input. The control case shows the same splice without `spliceable` goes wrong,
//! so the check has teeth.

use std::path::PathBuf;

use jelly::splice::{options_row_len, push_metadata};
use jelly::{Decoder, Encoder, EncoderConfig, Event, PhysicalType, Statement, StreamOptions};
use jelly_proto::wire::put_varint;

fn load(rel: &str) -> Option<Vec<Statement>> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/datasets")
        .join(rel);
    let Ok(text) = std::fs::read_to_string(&p) else {
        eprintln!("skipping: {} not found", p.display());
        return None;
    };
    let mut all = jelly::nquads::parse_document(&text).expect("dataset parses");
    // Enough for many evictions with SMALL tables; keeps the debug-build test quick.
    all.truncate(10_000);
    Some(all)
}

/// Encodes `chunk`-sized items with fresh encoders and splices them into one
/// delimited stream: the first item whole, later ones without their options row,
/// each with an `offset` metadata entry.
fn splice(input: &[Statement], opts: &StreamOptions, chunk: usize, spliceable: bool) -> Vec<u8> {
    let cfg = EncoderConfig {
        spliceable,
        ..EncoderConfig::default()
    };
    let mut stream = Vec::new();
    for (i, items) in input.chunks(chunk).enumerate() {
        let mut enc = Encoder::with_config(opts.clone(), cfg).unwrap();
        for st in items {
            enc.add(st.as_ref()).unwrap();
        }
        let stored = enc.finish_frame();
        let skip = options_row_len(&stored).expect("a fresh encoder's frame starts with options");
        let mut frame = if i == 0 {
            stored.clone()
        } else {
            stored[skip..].to_vec()
        };
        push_metadata(&mut frame, "offset", i.to_string().as_bytes());
        put_varint(&mut stream, frame.len() as u64);
        stream.extend_from_slice(&frame);
    }
    stream
}

/// Decodes a delimited stream: its statements and each frame's `offset` metadata.
fn decode(stream: &[u8]) -> Result<(Vec<Statement>, Vec<String>), String> {
    let mut reader = jelly::FrameReader::new(stream, jelly::Delimiting::Delimited, 1 << 26);
    let mut dec = Decoder::default();
    let mut out = Vec::new();
    let mut offsets = Vec::new();
    while let Some(frame) = reader.next_frame().map_err(|e| e.to_string())? {
        let mut cur = dec.frame(frame.bytes);
        while let Some(ev) = cur.next_event().map_err(|e| e.to_string())? {
            if let Event::Statement(st) = ev {
                out.push(st.to_owned());
            }
        }
        for (k, v) in cur.metadata().map_err(|e| e.to_string())? {
            if k == "offset" {
                offsets.push(String::from_utf8_lossy(v).into_owned());
            }
        }
    }
    Ok((out, offsets))
}

fn check(rel: &str, physical: PhysicalType) {
    let Some(input) = load(rel) else { return };
    // SMALL forces evictions inside items; BIG is what the server uses.
    for opts in [StreamOptions::small(), StreamOptions::big()] {
        let opts = opts.with_physical_type(physical);
        for chunk in [1, 7, 100] {
            let stream = splice(&input, &opts, chunk, true);
            let (got, offsets) = decode(&stream).unwrap_or_else(|e| panic!("{rel}: {e}"));
            assert_eq!(got.len(), input.len(), "{rel} chunk {chunk}");
            assert!(got == input, "{rel} chunk {chunk}: statements differ");
            let want: Vec<String> = (0..input.len().div_ceil(chunk))
                .map(|i| i.to_string())
                .collect();
            assert_eq!(offsets, want, "{rel}: one offset per item, in order");

            // Control: without `spliceable` the same splice decodes to something else.
            let broken = splice(&input, &opts, chunk, false);
            match decode(&broken) {
                Err(_) => {}
                Ok((got, _)) => assert!(got != input, "{rel} chunk {chunk}: control case"),
            }
        }
    }
}

#[test]
fn spliced_triples_decode_as_the_input() {
    check(
        "iot-assist-weather/iot-assist-weather.nt",
        PhysicalType::Triples,
    );
}

#[test]
fn spliced_quads_decode_as_the_input() {
    check(
        "nanopubs-fair-pkd/nanopubs-fair-pkd.nq",
        PhysicalType::Quads,
    );
}

/// An encoder reset between items writes every item byte for byte as a fresh encoder
/// does: with tables small enough to evict inside an item, with and without
/// `spliceable`, for triples and quads, with frame metadata.
#[test]
fn a_reset_encoder_writes_what_a_fresh_one_writes() {
    let cases = [
        (
            "iot-assist-weather/iot-assist-weather.nt",
            PhysicalType::Triples,
        ),
        (
            "nanopubs-fair-pkd/nanopubs-fair-pkd.nq",
            PhysicalType::Quads,
        ),
    ];
    for (rel, physical) in cases {
        let input = load(rel).expect("dataset present");
        for opts in [StreamOptions::small(), StreamOptions::big()] {
            let opts = opts.with_physical_type(physical);
            for spliceable in [false, true] {
                let cfg = EncoderConfig {
                    spliceable,
                    ..EncoderConfig::default()
                };
                let mut reused = Encoder::with_config(opts.clone(), cfg).unwrap();
                let mut compared = 0;
                for chunk in [1, 7, 50, 300] {
                    for (i, items) in input[..3000].chunks(chunk).enumerate() {
                        let mut fresh = Encoder::with_config(opts.clone(), cfg).unwrap();
                        reused.reset();
                        for st in items {
                            fresh.add(st.as_ref()).unwrap();
                            reused.add(st.as_ref()).unwrap();
                        }
                        fresh.set_frame_metadata("offset", i.to_string());
                        reused.set_frame_metadata("offset", i.to_string());
                        assert_eq!(
                            reused.finish_frame(),
                            fresh.finish_frame(),
                            "{rel}, {} names, spliceable {spliceable}, chunks of {chunk}, item {i}",
                            opts.max_name_table_size
                        );
                        compared += 1;
                    }
                }
                assert!(compared > 3000);
            }
        }
    }
}
