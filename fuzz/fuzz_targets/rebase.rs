//! Arbitrary bytes → the server's ingest path: each frame of a stream goes through a
//! `Rebaser` (which reads publisher input before the decoder has checked it) and then
//! the stream's decoder. Properties:
//! - neither panics, hangs or allocates without bound;
//! - a frame the decoder accepts and the rebaser rewrites decodes, with a fresh
//!   decoder, to exactly the statements the original decoded to in its stream;
//! - the rewritten frames, and frames the rebaser refused re-encoded by a spliceable
//!   encoder, served back to back (options row once) decode to the same statements.
//!
//! The first byte picks the target options (physical type, RDF-star, generalized
//! statements, table sizes); the rest is the stream, delimited or a single frame.
#![no_main]

#[path = "common/alloc_limit.rs"]
mod alloc_limit;

use jelly::iso::normalize_term;
use jelly::rebase::{Rebased, Rebaser};
use jelly::splice::options_row_len;
use jelly::{
    Decoder, DecoderOptions, Delimiting, Encoder, EncoderConfig, Event, FrameReader, PhysicalType,
    Statement, StreamOptions, Term,
};
use libfuzzer_sys::fuzz_target;

const MAX_FRAME: u64 = 1 << 20;

fn limits() -> DecoderOptions {
    DecoderOptions {
        max_name_table_size: 4096,
        max_prefix_table_size: 256,
        max_datatype_table_size: 64,
        max_nesting: 24,
        max_frame_bytes: MAX_FRAME,
        check_features: true,
        max_frames_before_options: jelly::DEFAULT_MAX_FRAMES_BEFORE_OPTIONS,
    }
}

fn target(b: u8) -> StreamOptions {
    let (name, prefix, datatype) = match (b >> 3) & 3 {
        0 => (8, 0, 0),
        1 => (16, 4, 2),
        2 => (128, 16, 16),
        _ => (4000, 150, 32),
    };
    let mut o = StreamOptions::with_tables(name, prefix, datatype);
    o.physical_type = if b & 1 == 0 {
        PhysicalType::Triples
    } else {
        PhysicalType::Quads
    };
    o.rdf_star = b & 2 != 0;
    o.generalized_statements = b & 4 != 0;
    // Namespace declarations kept (1.1) or dropped (1.0).
    o.version = if b & 32 != 0 { 2 } else { 1 };
    o
}

/// The statements of one frame, or `None` when the decoder refuses it. A statement in
/// the default graph is kept as a triple (`graph: None`) whichever way it was written:
/// a TRIPLES target writes default-graph quads as triples, a QUADS target triples as
/// default-graph quads.
fn decode_frame(dec: &mut Decoder, frame: &[u8]) -> Option<Vec<Statement>> {
    let mut cur = dec.frame(frame);
    let mut out = Vec::new();
    loop {
        match cur.next_event() {
            Ok(Some(Event::Statement(st))) => {
                let mut st = st.to_owned();
                if st.graph == Some(Term::DefaultGraph) {
                    st.graph = None;
                }
                // `"x"^^xsd:string` comes back as `"x"`, the same RDF term.
                for t in [&mut st.subject, &mut st.predicate, &mut st.object] {
                    *t = normalize_term(t);
                }
                if let Some(g) = &mut st.graph {
                    *g = normalize_term(g);
                }
                out.push(st);
            }
            Ok(Some(_)) => {}
            Ok(None) => return Some(out),
            Err(_) => return None,
        }
    }
}

/// Panics with the first statement where `got` and `want` differ.
fn same(got: Option<Vec<Statement>>, want: &[Statement], what: &str) {
    let Some(got) = got else {
        panic!("{what}: refused by the decoder");
    };
    if let Some(i) = (0..got.len().max(want.len())).find(|&i| got.get(i) != want.get(i)) {
        panic!(
            "{what}: statement {i} of {}/{}:\n got {:?}\nwant {:?}",
            got.len(),
            want.len(),
            got.get(i),
            want.get(i)
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, stream)) = data.split_first() else {
        return;
    };
    let target = target(pick);
    let mut frames = FrameReader::from_slice(stream, Delimiting::Auto, MAX_FRAME);
    let mut dec = Decoder::new(limits());
    let mut rebaser = Rebaser::new(&target);
    let mut spliced = Decoder::new(limits());
    let mut first_item = true;
    let Ok(mut reencoder) = Encoder::with_config(
        target.clone(),
        EncoderConfig {
            spliceable: true,
            ..EncoderConfig::default()
        },
    ) else {
        return;
    };
    let mut out = Vec::new();
    let mut index = 0usize;
    while let Ok(Some(f)) = frames.next_frame() {
        let r = rebaser.rebase(f.bytes, &dec, &mut out);
        // A refused frame ends the stream, as it does for the server.
        let Some(want) = decode_frame(&mut dec, f.bytes) else {
            break;
        };
        let item = match r {
            Rebased::Frame { statements } => {
                assert_eq!(statements as usize, want.len(), "frame {index}: count");
                let alone = decode_frame(&mut Decoder::new(limits()), &out);
                same(alone, &want, &format!("frame {index} alone"));
                out.clone()
            }
            Rebased::NoStatements => {
                assert!(want.is_empty(), "frame {index}: statements lost");
                index += 1;
                continue;
            }
            Rebased::Unsupported(_) => {
                if want.is_empty() {
                    index += 1;
                    continue;
                }
                reencoder.reset();
                let mut fits = true;
                for s in &want {
                    match reencoder.add(s.as_ref()) {
                        Ok(()) => {}
                        // A first statement written in full that needs more entries
                        // than a small table holds, or a term the target cannot hold
                        // (a quoted triple without RDF-star): the server refuses the
                        // item.
                        Err(_) => fits = false,
                    }
                }
                if !fits {
                    index += 1;
                    continue;
                }
                reencoder.finish_frame()
            }
        };
        let skip = if first_item {
            0
        } else {
            options_row_len(&item).expect("every item starts with an options row")
        };
        first_item = false;
        let got = decode_frame(&mut spliced, &item[skip..]);
        same(got, &want, &format!("frame {index} spliced ({r:?})"));
        index += 1;
    }
});
