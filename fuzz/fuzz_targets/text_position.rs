//! Arbitrary text → `position_in` and a `PositionTracker` read in pieces. Properties:
//! - they never panic;
//! - `position_in` counts lines (`\n`, `\r\n`, a lone `\r`) and columns (characters:
//!   bytes that are no UTF-8 continuation byte) as a plain byte-by-byte count does;
//! - the tracker tells the same place for every offset it still keeps, and keeps at
//!   least the last `KEPT` bytes; the input is repeated past `2 * KEPT` bytes when
//!   byte 0 is 1 modulo 8 (it costs), so that the tracker forgets.
//!
//! Byte 0 picks the repetition, bytes 1..5 the piece sizes; the rest is the text.
#![no_main]

#[path = "common/alloc_limit.rs"]
mod alloc_limit;

#[path = "common/pieces.rs"]
mod pieces;

use std::io::Read;

use jelly::text_position::{PositionTracker, TextPosition, position_in};
use libfuzzer_sys::fuzz_target;
use pieces::Cuts;

/// Line and column after `text[..o]` for each of the sorted `offsets`, counted one
/// byte at a time in one pass.
fn plain(text: &[u8], offsets: &[usize]) -> Vec<TextPosition> {
    let (mut line, mut column) = (1, 1);
    let mut out = Vec::with_capacity(offsets.len());
    let mut next = offsets.iter().peekable();
    for i in 0..=text.len() {
        while next.next_if(|&&o| o.min(text.len()) == i).is_some() {
            out.push(TextPosition { line, column });
        }
        let Some(&b) = text.get(i) else { break };
        match b {
            b'\n' if i > 0 && text[i - 1] == b'\r' => {}
            b'\n' | b'\r' => {
                line += 1;
                column = 1;
            }
            _ if b & 0xC0 != 0x80 => column += 1,
            _ => {}
        }
    }
    out
}

type Tracker<'a> = PositionTracker<pieces::PieceReader<'a>>;

fuzz_target!(|data: &[u8]| {
    if data.len() < 5 {
        return;
    }
    let (head, text) = data.split_at(5);
    let kept = Tracker::KEPT;
    let text = if head[0] % 8 == 1 && !text.is_empty() {
        text.repeat((2 * kept + 3 * kept / 2) / text.len() + 1)
    } else {
        text.to_vec()
    };
    // Offsets to check: the first bytes, the last ones, and some picked by the input.
    // Few of them: each costs a count over up to the whole (repeated) text.
    let mut offsets = vec![
        0,
        1,
        text.len().saturating_sub(1),
        text.len(),
        text.len() + 1,
    ];
    offsets.extend(
        data.iter()
            .take(4)
            .map(|&b| text.len().saturating_sub(usize::from(b) * 700)),
    );
    offsets.extend(data.iter().take(4).map(|&b| usize::from(b) * 13));

    offsets.sort_unstable();
    let expected = plain(&text, &offsets);
    for (&o, &want) in offsets.iter().zip(&expected) {
        assert_eq!(position_in(&text, o), want, "position_in at {o}");
    }

    let (mut tracker, probe) = PositionTracker::new(Cuts::new(&head[1..5]).reader(&text));
    // Large reads, as a parser makes them: pieces of up to 32 bytes would pass the
    // text on too slowly to repeat it.
    let mut buf = vec![0u8; 8192];
    loop {
        let n = tracker.read(&mut buf).expect("reading memory");
        if n == 0 {
            break;
        }
    }
    for (&o, &want) in offsets.iter().zip(&expected) {
        let got = probe.position(o as u64);
        if o + kept >= text.len() {
            assert_eq!(got, Some(want), "tracker at {o} of {}", text.len());
        } else if let Some(p) = got {
            assert_eq!(p, want, "tracker at {o} of {}", text.len());
        }
    }
});
