//! Frames before the options row: the spec makes the options row the stream's first
//! row and gives frames no meaning, so frames with no rows may come first; but any run
//! of zero bytes reads as such frames, so the decoders take at most
//! `DecoderOptions::max_frames_before_options` of them (Jelly-RDF and Jelly-Patch).

use jelly::patch::{PatchEncoder, PatchOptions, PatchReader, PatchStatementType, PatchStreamType};
use jelly::{
    DEFAULT_MAX_FRAMES_BEFORE_OPTIONS, DecodeErrorKind, DecoderOptions, Delimiting, Encoder,
    JellyReader, StatementRef, StreamOptions, TermRef,
};
use jelly_proto::wire::put_varint;

fn statement() -> StatementRef<'static> {
    StatementRef::triple(
        TermRef::Iri("http://ex.org/s"),
        TermRef::Iri("http://ex.org/p"),
        TermRef::Iri("http://ex.org/o"),
    )
}

/// `empties` empty frames (a zero length each), then `frame`, delimited.
fn after_empty_frames(empties: usize, frame: &[u8]) -> Vec<u8> {
    let mut bytes = vec![0u8; empties];
    put_varint(&mut bytes, frame.len() as u64);
    bytes.extend_from_slice(frame);
    bytes
}

#[test]
fn rdf_streams_take_a_bounded_number_of_frames_before_the_options_row() {
    let mut enc = Encoder::new(StreamOptions::small()).unwrap();
    enc.add(statement()).unwrap();
    let frame = enc.finish_frame();
    let max = DEFAULT_MAX_FRAMES_BEFORE_OPTIONS as usize;
    for empties in [0, 3, max] {
        let bytes = after_empty_frames(empties, &frame);
        let frames = JellyReader::new(&bytes[..]).read_all_frames().unwrap();
        assert_eq!(frames.len(), empties + 1);
        assert_eq!(frames.concat().len(), 1);
    }
    // The frame past the limit is refused, with its place.
    let bytes = after_empty_frames(max + 1, &frame);
    let e = JellyReader::new(&bytes[..]).read_all_frames().unwrap_err();
    assert!(
        matches!(e.kind, DecodeErrorKind::NoOptionsInFirstFrames(m) if m == max as u64),
        "{e}"
    );
    assert_eq!(
        (e.frame, e.offset),
        (max as u64, Some(max as u64 + 1)),
        "{e}"
    );
    // Empty frames after the options row are not counted.
    let mut bytes = after_empty_frames(0, &frame);
    bytes.extend(vec![0u8; 2 * max]);
    assert_eq!(
        JellyReader::new(&bytes[..])
            .read_all_frames()
            .unwrap()
            .len(),
        2 * max + 1
    );
    // The limit is the reader's choice.
    let cfg = DecoderOptions {
        max_frames_before_options: 2,
        ..DecoderOptions::default()
    };
    let bytes = after_empty_frames(2, &frame);
    assert!(
        JellyReader::with_options(&bytes[..], cfg.clone(), Delimiting::Auto)
            .read_all_frames()
            .is_ok()
    );
    let bytes = after_empty_frames(3, &frame);
    let e = JellyReader::with_options(&bytes[..], cfg, Delimiting::Auto)
        .read_all_frames()
        .unwrap_err();
    assert!(
        matches!(e.kind, DecodeErrorKind::NoOptionsInFirstFrames(2)),
        "{e}"
    );
}

#[test]
fn patch_streams_take_a_bounded_number_of_frames_before_the_options_row() {
    let opts = PatchOptions::small(PatchStatementType::Triples, PatchStreamType::Flat);
    let mut enc = PatchEncoder::new(opts).unwrap();
    enc.add(statement()).unwrap();
    let frame = enc.finish_frame();
    let max = DEFAULT_MAX_FRAMES_BEFORE_OPTIONS as usize;
    let adds = |bytes: &[u8]| {
        let mut r = PatchReader::new(bytes);
        let mut n = 0;
        r.for_each_event(|_, ev| n += u64::from(matches!(ev, jelly::patch::PatchEvent::Add(_))))
            .map(|()| n)
    };
    assert_eq!(adds(&after_empty_frames(max, &frame)).unwrap(), 1);
    let e = adds(&after_empty_frames(max + 1, &frame)).unwrap_err();
    assert!(
        matches!(e.kind, DecodeErrorKind::NoOptionsInFirstFrames(m) if m == max as u64),
        "{e}"
    );
    assert_eq!(e.frame, max as u64, "{e}");
}
