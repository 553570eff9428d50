//! Arbitrary bytes → the RDF/XML guards (`MarkupBounds`, `EntityGuard`, `XmlGuard`, a
//! small run bound), fed whole and fed in pieces. Properties:
//! - they never panic;
//! - `MarkupBounds` reads byte by byte: the same verdict (the same message) and depth,
//!   whole or in pieces;
//! - `EntityGuard` and `XmlGuard` refuse in pieces all they refuse whole; in pieces they
//!   may refuse more only by the expansion budget, which is checked after each piece
//!   against the bytes read so far.
//!
//! Byte 0 picks the run bound, bytes 1..5 the piece sizes; the rest is the document.
#![no_main]

#[path = "common/alloc_limit.rs"]
mod alloc_limit;

#[path = "common/pieces.rs"]
mod pieces;

use jelly::xml_guard::{EntityGuard, MarkupBounds, XmlGuard, XmlRefused};
use libfuzzer_sys::fuzz_target;
use pieces::Cuts;

fn feed_all<'a>(
    feed: impl FnMut(&[u8]) -> Result<(), XmlRefused>,
    pieces: impl IntoIterator<Item = &'a [u8]>,
) -> Result<(), XmlRefused> {
    pieces.into_iter().try_for_each(feed)
}

/// The refusal only pieces may add: the references read so far expand past the
/// budget of the bytes read so far.
fn budget_refusal(e: &XmlRefused) -> bool {
    e.0.contains("XML entity references of the first")
}

/// What is refused whole (`whole`) is refused in pieces (`cut`), and pieces refuse more
/// only by the expansion budget.
fn assert_refuses_alike(whole: &Result<(), XmlRefused>, cut: &Result<(), XmlRefused>) {
    match (whole, cut) {
        (Ok(()), Ok(())) | (Err(_), Err(_)) => {}
        (Ok(()), Err(e)) => assert!(budget_refusal(e), "refused only in pieces: {e}"),
        (Err(e), Ok(())) => panic!("refused whole, accepted in pieces: {e}"),
    }
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 5 {
        return;
    }
    let (head, doc) = data.split_at(5);
    let max_run = 8 + u64::from(head[0]) * 4;
    let cuts = Cuts::new(&head[1..5]);
    let pieces = cuts.pieces(doc);

    let mut whole = MarkupBounds::with_max_run(max_run);
    let mut cut = MarkupBounds::with_max_run(max_run);
    let w = whole.feed(doc);
    let c = feed_all(|p| cut.feed(p), pieces.iter().copied());
    assert_eq!(w, c, "pieces changed the markup verdict");
    assert_eq!(whole.depth(), cut.depth(), "pieces changed the depth");

    let mut whole = EntityGuard::default();
    let mut cut = EntityGuard::default();
    let w = whole.feed(doc);
    let c = feed_all(|p| cut.feed(p), pieces.iter().copied());
    assert_refuses_alike(&w, &c);

    let mut whole = XmlGuard::with_max_run(max_run);
    let mut cut = XmlGuard::with_max_run(max_run);
    let w = whole.feed(doc);
    let c = feed_all(|p| cut.feed(p), pieces.iter().copied());
    assert_refuses_alike(&w, &c);
});
