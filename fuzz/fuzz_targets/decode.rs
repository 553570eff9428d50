//! Arbitrary bytes → `JellyReader` (delimiting autodetected) with small limits; every
//! event is consumed and turned into owned terms. Must never panic, hang or allocate
//! without bound: run with `-malloc_limit_mb` to catch large allocations.
#![no_main]

#[path = "common/alloc_limit.rs"]
mod alloc_limit;

#[path = "common/small_limits.rs"]
mod small_limits;

use jelly::{Decoder, Delimiting, Event, JellyReader};
use libfuzzer_sys::fuzz_target;
use small_limits::small_limits;

fn consume(ev: Event<'_>, sink: &mut usize) {
    match ev {
        Event::Statement(s) => {
            let owned = s.to_owned();
            assert_eq!(owned.as_ref(), s);
            *sink += owned.to_string().len();
        }
        Event::Namespace { name, iri } => *sink += name.len() + iri.len(),
        Event::GraphStart(g) => *sink += g.to_owned().to_string().len(),
        Event::Options(o) => *sink += o.stream_name.len(),
        Event::GraphEnd => {}
    }
}

fuzz_target!(|data: &[u8]| {
    let mut sink = 0usize;
    // The byte-stream path, as a user would read a file.
    let mut r = JellyReader::with_options(data, small_limits(true), Delimiting::Auto);
    'frames: loop {
        match r.next_frame() {
            Ok(Some(mut f)) => {
                let _ = f.metadata();
                loop {
                    match f.next_event() {
                        Ok(Some(ev)) => consume(ev, &mut sink),
                        Ok(None) => break,
                        Err(e) => {
                            sink += e.to_string().len();
                            break 'frames;
                        }
                    }
                }
            }
            Ok(None) => break,
            Err(e) => {
                sink += e.to_string().len();
                break;
            }
        }
    }
    // The raw-frame path (no framing), with features unchecked, as a gRPC server would.
    let mut dec = Decoder::new(small_limits(false));
    let mut f = dec.frame(data);
    while let Ok(Some(ev)) = f.next_event() {
        consume(ev, &mut sink);
    }
    std::hint::black_box(sink);
});
