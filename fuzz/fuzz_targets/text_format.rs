//! jelly-text (Jelly frames in the protobuf text format). Byte 0 picks the direction:
//! - even: the rest is text. `parse_frame` never panics, hangs or allocates without
//!   bound; text it accepts gives bytes that print, and the printed text parses back to
//!   the same bytes;
//! - odd: the rest is a frame's bytes. `print_frame` never panics; a frame it prints
//!   parses back to exactly its bytes, and `TextFrameReader` reads the printed text as
//!   that one frame.
#![no_main]

#[path = "common/alloc_limit.rs"]
mod alloc_limit;

use jelly::text_format::{TextFrameReader, parse_frame, print_frame};
use libfuzzer_sys::fuzz_target;

const MAX_FRAME: u64 = 1 << 20;

fn printed(frame: &[u8]) -> Option<String> {
    let mut out = Vec::new();
    print_frame(0, frame, 0, &mut out).ok()?;
    Some(String::from_utf8(out).expect("printed text is UTF-8"))
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode % 2 == 0 {
        let Ok(text) = std::str::from_utf8(rest) else {
            return;
        };
        let Ok(bytes) = parse_frame(text, MAX_FRAME) else {
            return;
        };
        if let Some(t) = printed(&bytes) {
            let again = parse_frame(&t, MAX_FRAME).expect("printed text parses");
            assert_eq!(again, bytes, "{t}");
        }
    } else {
        let Some(t) = printed(rest) else {
            return;
        };
        let again = parse_frame(&t, MAX_FRAME).expect("printed text parses");
        assert_eq!(again, rest, "{t}");
        let mut reader = TextFrameReader::new(t.as_bytes(), MAX_FRAME);
        let first = reader.next_frame().expect("printed text reads");
        assert_eq!(first.as_deref(), Some(rest));
        assert!(reader.next_frame().expect("nothing after").is_none());
    }
});
