//! Arbitrary bytes → `FrameReader` (small frame limit), over a slice and over a reader
//! that hands the input out in pieces, with delimiting autodetected and given
//! explicitly as `detect_delimiting` decides. Properties:
//! - it never panics, hangs or allocates without bound;
//! - all three give the same frames (bytes, index, offset) and the same error;
//! - each frame is the input's bytes at its offset; the delimited frames with their
//!   length varints, or the single frame, are exactly the bytes consumed.
//!
//! Byte 0 picks the frame limit, bytes 1..5 the piece sizes; the rest is the stream.
#![no_main]

#[path = "common/alloc_limit.rs"]
mod alloc_limit;

#[path = "common/pieces.rs"]
mod pieces;

use std::io::Read;

use jelly::{Delimiting, FrameReader, detect_delimiting};
use libfuzzer_sys::fuzz_target;
use pieces::Cuts;

/// What a reader gave: the frames, the error that ended them (as text), the framing,
/// and the bytes consumed.
#[derive(Debug, PartialEq)]
struct FramesRead {
    frames: Vec<(Vec<u8>, u64, u64)>,
    error: Option<String>,
    delimiting: Delimiting,
    consumed: u64,
}

fn read_all<R: Read>(mut r: FrameReader<R>) -> FramesRead {
    let mut frames = Vec::new();
    let mut error = None;
    // A frame takes at least one byte of input, but a stream of zero-length delimited
    // frames holds one per byte: bounded by the input either way.
    loop {
        match r.next_frame() {
            Ok(Some(f)) => frames.push((f.bytes.to_vec(), f.index, f.offset)),
            Ok(None) => break,
            Err(e) => {
                error = Some(format!("{e:?}"));
                break;
            }
        }
    }
    FramesRead {
        frames,
        error,
        delimiting: r.delimiting(),
        consumed: r.bytes_read(),
    }
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 5 {
        return;
    }
    let (head, stream) = data.split_at(5);
    let max = u64::from(head[0]) * 3;
    let cuts = Cuts::new(&head[1..5]);
    let explicit = detect_delimiting(&stream[..stream.len().min(3)]);

    let slice = read_all(FrameReader::from_slice(stream, Delimiting::Auto, max));
    let pieces = read_all(FrameReader::new(cuts.reader(stream), Delimiting::Auto, max));
    let given = read_all(FrameReader::new(cuts.reader(stream), explicit, max));
    assert_eq!(
        slice, pieces,
        "a reader in pieces reads other frames than the slice"
    );
    assert_eq!(
        slice, given,
        "autodetection disagrees with detect_delimiting"
    );
    if !slice.frames.is_empty() || slice.error.is_none() {
        assert_eq!(slice.delimiting, explicit);
    }

    // Where the previous frame ended: a delimited frame's length varint fills the gap.
    let mut end = 0usize;
    for (i, (bytes, index, offset)) in slice.frames.iter().enumerate() {
        assert_eq!(*index, i as u64);
        let at = usize::try_from(*offset).unwrap_or(usize::MAX);
        assert_eq!(
            stream.get(at..at + bytes.len()),
            Some(&bytes[..]),
            "frame {i} not at its offset"
        );
        assert!(bytes.len() as u64 <= max, "frame {i} over the limit");
        let gap = &stream[end..at];
        match explicit {
            Delimiting::Delimited => {
                assert_eq!(
                    varint(gap),
                    Some(bytes.len() as u64),
                    "frame {i}: no length before it"
                )
            }
            _ => assert!(gap.is_empty(), "frame {i} does not start the input"),
        }
        end = at + bytes.len();
    }
    if slice.error.is_none() {
        assert_eq!(end, stream.len(), "frames end before the input");
        assert_eq!(slice.consumed, stream.len() as u64);
    }
});

/// The value of `bytes` if it is exactly one varint (not necessarily the shortest).
fn varint(bytes: &[u8]) -> Option<u64> {
    let (last, init) = bytes.split_last()?;
    if *last >= 0x80 || init.iter().any(|&b| b < 0x80) || bytes.len() > 10 {
        return None;
    }
    Some(bytes.iter().enumerate().fold(0u64, |v, (i, &b)| {
        v | u64::from(b & 0x7f).checked_shl(7 * i as u32).unwrap_or(0)
    }))
}
