//! Arbitrary bytes as one frame → the splicing helpers (`options_row_len`,
//! `push_metadata`). Properties:
//! - they never panic;
//! - metadata appended to a frame the decoder accepts leaves its statements as they
//!   were, and reads back as the frame's last entry;
//! - a frame the decoder accepts that starts with an options row decodes, cut after
//!   that row into two frames of one stream, to the same statements.
//!
//! Byte 0 is the key's length, byte 1 the value's; then the key, the value and a stream
//! whose first frame (delimiting autodetected) is the frame, so that streams seed it.
#![no_main]

#[path = "common/alloc_limit.rs"]
mod alloc_limit;

#[path = "common/small_limits.rs"]
mod small_limits;

use jelly::decoder::frame_metadata;
use jelly::splice::{options_row_len, push_metadata};
use jelly::{Decoder, Delimiting, Event, FrameReader, Statement};
use libfuzzer_sys::fuzz_target;
use small_limits::small_limits;

/// The statements of `frames` decoded in order by one decoder, or `None` if it
/// refuses any of them.
fn statements(frames: &[&[u8]]) -> Option<Vec<Statement>> {
    let mut dec = Decoder::new(small_limits(true));
    let mut out = Vec::new();
    for f in frames {
        let mut cur = dec.frame(f);
        while let Some(ev) = cur.next_event().ok()? {
            if let Event::Statement(s) = ev {
                out.push(s.to_owned());
            }
        }
    }
    Some(out)
}

fuzz_target!(|data: &[u8]| {
    let [k, v, rest @ ..] = data else { return };
    let (key, rest) = rest.split_at(usize::from(*k).min(rest.len()));
    let (value, stream) = rest.split_at(usize::from(*v).min(rest.len()));
    let Ok(key) = std::str::from_utf8(key) else {
        return;
    };
    let mut frames = FrameReader::from_slice(stream, Delimiting::Auto, 1 << 20);
    let Ok(Some(first)) = frames.next_frame() else {
        return;
    };
    let frame = first.bytes;

    let row = options_row_len(frame);
    if let Some(n) = row {
        assert!(
            n > 0 && n <= frame.len(),
            "options row of {n} bytes in {}",
            frame.len()
        );
    }
    let Some(whole) = statements(&[frame]) else {
        return;
    };

    let mut tagged = frame.to_vec();
    push_metadata(&mut tagged, key, value);
    assert_eq!(
        statements(&[&tagged]).as_ref(),
        Some(&whole),
        "metadata changed the statements"
    );
    // Rows are decoded without reading the metadata: it is checked only where it reads.
    if frame_metadata(frame).is_ok() {
        let entries = frame_metadata(&tagged).expect("appended metadata reads back");
        assert_eq!(
            entries.last(),
            Some(&(key, value)),
            "appended metadata is not the last entry"
        );
    }

    if let Some(n) = row {
        let (options, rows) = frame.split_at(n);
        assert_eq!(
            statements(&[options, rows]),
            Some(whole),
            "cut after the options row"
        );
    }
});
