//! Splicing stored frames into one stream without re-encoding them.
//!
//! A frame written by a fresh encoder with [`EncoderConfig::spliceable`](crate::EncoderConfig)
//! starts with the options row and never relies on earlier delta state, so frames of
//! the same options can be sent back to back as one stream. These helpers do the byte
//! work: find the leading options row (to send it only once) and append frame
//! metadata to an encoded frame (a protobuf message may be extended by appending
//! fields, so the stored bytes stay untouched).

use jelly_proto::fields::{frame, row};
use jelly_proto::wire::{Reader, WireType, put_bytes_field, put_tag, put_varint, varint_len};

/// Length in bytes of the frame's first row when that row is a stream options row;
/// `None` when the frame does not start with one (or is malformed there).
///
/// ```
/// use jelly::{Encoder, StreamOptions, StatementRef, TermRef, splice::options_row_len};
/// let mut enc = Encoder::new(StreamOptions::small()).unwrap();
/// enc.add(StatementRef::triple(TermRef::Iri("http://ex.org/s"), TermRef::Iri("http://ex.org/p"), TermRef::Iri("http://ex.org/o"))).unwrap();
/// let first = enc.finish_frame();
/// assert!(options_row_len(&first).is_some_and(|n| n > 0 && n < first.len()));
/// enc.add(StatementRef::triple(TermRef::Iri("http://ex.org/s"), TermRef::Iri("http://ex.org/p"), TermRef::Iri("http://ex.org/o"))).unwrap();
/// assert_eq!(options_row_len(&enc.finish_frame()), None);
/// ```
pub fn options_row_len(frame_bytes: &[u8]) -> Option<usize> {
    let mut r = Reader::new(frame_bytes);
    match r.tag() {
        Ok(Some((frame::ROWS, WireType::Len))) => {}
        _ => return None,
    }
    let mut row_reader = r.message().ok()?;
    match row_reader.tag() {
        Ok(Some((row::OPTIONS, WireType::Len))) => Some(r.offset()),
        _ => None,
    }
}

/// Appends one `metadata` map entry (`key` → `value`) to an encoded frame.
///
/// ```
/// use jelly::{Decoder, Encoder, StreamOptions, StatementRef, TermRef, splice::push_metadata};
/// let mut enc = Encoder::new(StreamOptions::small()).unwrap();
/// enc.add(StatementRef::triple(TermRef::Iri("http://ex.org/s"), TermRef::Iri("http://ex.org/p"), TermRef::Iri("http://ex.org/o"))).unwrap();
/// let mut f = enc.finish_frame();
/// push_metadata(&mut f, "offset", b"42");
/// let mut dec = Decoder::default();
/// let mut cur = dec.frame(&f);
/// while cur.next_event().unwrap().is_some() {}
/// assert_eq!(cur.metadata().unwrap(), vec![("offset", &b"42"[..])]);
/// ```
pub fn push_metadata(out: &mut Vec<u8>, key: &str, value: &[u8]) {
    let entry_len = 1
        + varint_len(key.len() as u64)
        + key.len()
        + 1
        + varint_len(value.len() as u64)
        + value.len();
    put_tag(out, frame::METADATA, WireType::Len);
    put_varint(out, entry_len as u64);
    put_bytes_field(out, frame::MAP_KEY, key.as_bytes());
    put_bytes_field(out, frame::MAP_VALUE, value);
}
