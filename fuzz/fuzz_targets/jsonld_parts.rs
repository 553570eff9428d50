//! Arbitrary bytes → `JsonLdParts` with small limits, read in pieces. Properties:
//! - it never panics, hangs or allocates without bound: no part is larger than the
//!   limits allow;
//! - every place it gives (of a piece of a part, of a refusal) is the line and column
//!   of its byte offset in the input;
//! - a whole part is the input from its start; every node or element of a cut part is
//!   the input's bytes at the place its map gives.
//!
//! Byte 0 picks the size held whole, byte 1 the batch size, bytes 2..6 the piece
//! sizes; the rest is the document.
#![no_main]

#[path = "common/alloc_limit.rs"]
mod alloc_limit;

#[path = "common/pieces.rs"]
mod pieces;

use jelly::jsonld_parts::{JsonLdInputError, JsonLdParts, Part, Place};
use libfuzzer_sys::fuzz_target;
use pieces::Cuts;

/// Asserts that `at` is where its offset is in `input` (lines end at `\n`, columns
/// count bytes).
fn check_place(input: &[u8], at: Place, what: &str) {
    let o = usize::try_from(at.offset).unwrap_or(usize::MAX);
    assert!(o <= input.len(), "{what}: offset {o} past the input");
    let before = &input[..o];
    let line = 1 + before.iter().filter(|&&b| b == b'\n').count() as u64;
    let column = 1 + before.iter().rev().take_while(|&&b| b != b'\n').count() as u64;
    assert_eq!(
        (at.line, at.column),
        (line, column),
        "{what}: place of offset {o}"
    );
}

/// Byte index in `text` where 0-based `line` starts.
fn line_start(text: &[u8], line: u64) -> usize {
    if line == 0 {
        return 0;
    }
    text.iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .nth(usize::try_from(line - 1).unwrap_or(usize::MAX))
        .map_or(text.len(), |(i, _)| i + 1)
}

fn check_part(input: &[u8], part: &Part, max_held: usize, batch: usize) {
    let text = &part.text;
    let map = &part.map;
    assert!(
        text.len() <= 3 * max_held + batch + 64,
        "a part of {} bytes (held {max_held}, batch {batch})",
        text.len()
    );
    for (i, (_, at)) in map.pieces.iter().enumerate() {
        check_place(input, *at, &format!("piece {i}"));
    }
    if map.whole {
        assert_eq!(map.pieces.len(), 1);
        let start = map.pieces[0].1.offset as usize;
        assert_eq!(
            &input[start..start + text.len()],
            &text[..],
            "a whole part is not the input"
        );
        return;
    }
    // Nodes or elements: each runs to the `,\n` before the next, or to the close.
    let close = if text.first() == Some(&b'{') { 2 } else { 1 };
    let nodes = &map.pieces[map.head..];
    for (j, (line, at)) in nodes.iter().enumerate() {
        let from = line_start(text, *line);
        let to = match nodes.get(j + 1) {
            Some((next, _)) => line_start(text, *next).saturating_sub(2),
            None => text.len().saturating_sub(close),
        };
        assert!(from <= to, "node {j}: lines out of order");
        let o = at.offset as usize;
        assert_eq!(
            input.get(o..o + (to - from)),
            Some(&text[from..to]),
            "node {j} is not the input at offset {o}"
        );
    }
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 6 {
        return;
    }
    let (head, input) = data.split_at(6);
    let max_held = 1 + usize::from(head[0]);
    let batch = 1 + usize::from(head[1]) / 4;
    let mut parts = JsonLdParts::with_limits(Cuts::new(&head[2..6]).reader(input), max_held, batch);
    for _ in 0..=input.len() + 1 {
        match parts.next_part() {
            Ok(Some(part)) => check_part(input, &part, max_held, batch),
            Ok(None) => return,
            Err(JsonLdInputError::Refused { at, message }) => {
                check_place(input, at, &message);
                return;
            }
            Err(JsonLdInputError::Io(e)) => panic!("reading memory failed: {e}"),
        }
    }
    panic!("more parts than bytes of input");
});
