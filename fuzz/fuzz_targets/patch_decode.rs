//! Arbitrary bytes → `PatchReader` (delimiting autodetected) with small limits, and a raw
//! `PatchDecoder` frame; every event is consumed and turned into owned terms. Must never
//! panic, hang or allocate without bound: run with `-malloc_limit_mb`.
#![no_main]

#[path = "common/alloc_limit.rs"]
mod alloc_limit;

#[path = "common/small_limits.rs"]
mod small_limits;

use jelly::Delimiting;
use jelly::patch::{PatchDecoder, PatchEvent, PatchReader};
use libfuzzer_sys::fuzz_target;
use small_limits::small_limits;

fn consume(ev: PatchEvent<'_>, sink: &mut usize) {
    match ev {
        PatchEvent::Add(s) | PatchEvent::Delete(s) => {
            let owned = s.to_owned();
            assert_eq!(owned.as_ref(), s);
            *sink += owned.to_string().len();
        }
        PatchEvent::Header { key, value } => {
            let owned = value.to_owned();
            assert_eq!(owned.as_ref(), value);
            *sink += key.len() + owned.to_string().len();
        }
        PatchEvent::AddNamespace { name, iri, graph } => {
            *sink += name.len() + iri.len() + graph.map_or(0, |g| g.to_owned().to_string().len());
        }
        PatchEvent::DeleteNamespace { name, iri, graph } => {
            *sink += name.len()
                + iri.map_or(0, str::len)
                + graph.map_or(0, |g| g.to_owned().to_string().len());
        }
        PatchEvent::Options(o) => *sink += o.max_name_table_size as usize,
        PatchEvent::TransactionStart
        | PatchEvent::TransactionCommit
        | PatchEvent::TransactionAbort
        | PatchEvent::Punctuation => *sink += 1,
    }
}

fuzz_target!(|data: &[u8]| {
    let mut sink = 0usize;
    // The byte-stream path, as a user would read a file.
    let mut r = PatchReader::with_options(data, small_limits(true), Delimiting::Auto);
    'frames: loop {
        match r.next_frame() {
            Ok(Some(mut f)) => loop {
                match f.next_event() {
                    Ok(Some(ev)) => consume(ev, &mut sink),
                    Ok(None) => break,
                    Err(e) => {
                        sink += e.to_string().len();
                        break 'frames;
                    }
                }
            },
            Ok(None) => break,
            Err(e) => {
                sink += e.to_string().len();
                break;
            }
        }
    }
    let _ = r.decoder().stats();
    // The raw-frame path (no framing), features unchecked; the same bytes twice, so a
    // second frame sees the tables and options left by the first.
    let mut d = PatchDecoder::new(small_limits(false));
    for _ in 0..2 {
        let mut f = d.frame_at(data, 0);
        loop {
            match f.next_event() {
                Ok(Some(ev)) => consume(ev, &mut sink),
                Ok(None) => break,
                Err(e) => {
                    sink += e.to_string().len();
                    break;
                }
            }
        }
    }
    let _ = d.finish();
    std::hint::black_box(sink);
});
