//! Arbitrary text → `NestingScanner` (small limits, noting directives), fed whole and
//! fed in pieces. Properties:
//! - it never panics;
//! - the pieces change nothing: the same verdict (the same `TooDeep`, or none) and the
//!   same directive ends, whole or in pieces, and through a `CheckedReader`;
//! - a refusal names the line and byte offset of an opening (`<`, `[`, `(`, `{`, `|`).
//!
//! Byte 0 picks the triple-term limit, byte 1 the bracket limit, bytes 2..6 the piece
//! sizes; the rest is the text.
#![no_main]

#[path = "common/alloc_limit.rs"]
mod alloc_limit;

#[path = "common/pieces.rs"]
mod pieces;

use std::io::Read;

use jelly::input_check::CheckedReader;
use jelly::text_nesting::{NestingScanner, TooDeep};
use libfuzzer_sys::fuzz_target;
use pieces::Cuts;

/// The verdict and the directive ends noted (all of them, taken after the last piece).
fn scan<'a>(
    scanner: &mut NestingScanner,
    pieces: impl IntoIterator<Item = &'a [u8]>,
) -> (Result<(), TooDeep>, Vec<u64>) {
    let mut verdict = Ok(());
    for p in pieces {
        verdict = scanner.feed(p);
        if verdict.is_err() {
            break;
        }
    }
    let mut ends = Vec::new();
    while let Some(e) = scanner.take_directive_end() {
        ends.push(e);
    }
    (verdict, ends)
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 6 {
        return;
    }
    let (head, text) = data.split_at(6);
    let scanner = NestingScanner::new(usize::from(head[0] % 8))
        .with_max_brackets(usize::from(head[1] % 16))
        .noting_directives();
    let cuts = Cuts::new(&head[2..6]);

    let (whole, whole_ends) = scan(&mut scanner.clone(), [text]);
    let (cut, cut_ends) = scan(&mut scanner.clone(), cuts.pieces(text));
    assert_eq!(whole, cut, "pieces changed the verdict");
    assert_eq!(whole_ends, cut_ends, "pieces changed the directive ends");
    for &end in &whole_ends {
        assert!(
            end <= text.len() as u64,
            "directive end {end} past the text"
        );
    }

    if let Err(e) = &whole {
        let at = usize::try_from(e.offset).unwrap_or(usize::MAX);
        assert!(at < text.len(), "{e}: offset past the text");
        assert!(
            b"<[({|".contains(&text[at]),
            "{e}: no opening at the offset"
        );
        let lines = 1 + text[..at].iter().filter(|&&b| b == b'\n').count() as u64;
        assert_eq!(e.line, lines, "{e}: wrong line");
    }

    let mut read = Vec::new();
    let through = CheckedReader::new(cuts.reader(text), scanner.clone()).read_to_end(&mut read);
    match (&whole, through) {
        (Ok(()), Ok(n)) => assert_eq!(&read[..n], text),
        (Err(e), Err(io)) => {
            assert_eq!(io.kind(), std::io::ErrorKind::InvalidData);
            assert_eq!(io.to_string(), e.to_string());
        }
        (w, r) => panic!("CheckedReader disagrees: whole {w:?}, reader {r:?}"),
    }
});
