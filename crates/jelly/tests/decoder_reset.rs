//! `Decoder::reset`: a decoder reused for stream after stream behaves exactly as a
//! fresh one on each, on every `from_jelly` stream of the official conformance suite,
//! the negative ones included (a reset that left repeated terms, the IRI delta state or
//! the options behind would make some of them pass, or fail differently).

use std::path::PathBuf;

use jelly::{Decoder, Delimiting, FrameReader};

/// What decoding a stream gives: each event (debug form), or the first error.
fn decode(dec: &mut Decoder, bytes: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let mut frames = FrameReader::from_slice(bytes, Delimiting::Auto, 1 << 26);
    loop {
        match frames.next_frame() {
            Ok(Some(f)) => {
                let mut cur = dec.frame(f.bytes);
                loop {
                    match cur.next_event() {
                        Ok(Some(ev)) => out.push(format!("{ev:?}")),
                        Ok(None) => break,
                        Err(e) => {
                            out.push(format!("error: {e}"));
                            return out;
                        }
                    }
                }
            }
            Ok(None) => return out,
            Err(e) => {
                out.push(format!("framing error: {e}"));
                return out;
            }
        }
    }
}

#[test]
fn a_reset_decoder_decodes_every_suite_stream_as_a_fresh_one() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/jelly-conformance/rdf/from_jelly");
    let mut inputs = Vec::new();
    for group in std::fs::read_dir(&root)
        .expect("the conformance suite")
        .flatten()
    {
        for case in std::fs::read_dir(group.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let f = case.path().join("in.jelly");
            if f.is_file() {
                inputs.push(f);
            }
        }
    }
    inputs.sort();
    assert!(inputs.len() >= 100, "{} streams", inputs.len());
    let streams: Vec<Vec<u8>> = inputs.iter().map(|p| std::fs::read(p).unwrap()).collect();
    let mut reused = Decoder::default();
    let mut errors = 0;
    // Each stream after every other kind of stream: forwards, then backwards.
    for round in 0..2 {
        for i in 0..streams.len() {
            let i = if round == 0 { i } else { streams.len() - 1 - i };
            let fresh = decode(&mut Decoder::default(), &streams[i]);
            reused.reset();
            let again = decode(&mut reused, &streams[i]);
            assert_eq!(again, fresh, "{}", inputs[i].display());
            errors += usize::from(fresh.last().is_some_and(|l| l.contains("error")));
        }
    }
    assert!(errors >= 20, "the negative cases are in: {errors}");
}
