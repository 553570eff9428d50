//! Protobuf wire-format primitives: varints, tags, length-delimited fields.

use thiserror::Error;

/// Protobuf wire types. Groups (3, 4) are deprecated and never used by Jelly; they are rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireType {
    /// Wire type 0.
    Varint,
    /// Wire type 1 (8 bytes).
    Fixed64,
    /// Wire type 2.
    Len,
    /// Wire type 5 (4 bytes).
    Fixed32,
}

/// What went wrong while reading protobuf bytes.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WireError {
    #[error("truncated message at byte {0}")]
    Truncated(usize),
    #[error("malformed varint at byte {0}")]
    BadVarint(usize),
    #[error("unsupported wire type {wire_type} at byte {offset}")]
    BadWireType { wire_type: u8, offset: usize },
    #[error("field number 0 at byte {0}")]
    ZeroField(usize),
    #[error("invalid UTF-8 in string field at byte {0}")]
    BadUtf8(usize),
    #[error("value {value} does not fit in 32 bits at byte {offset}")]
    Overflow32 { value: u64, offset: usize },
}

impl WireError {
    /// Byte offset where the problem is: in the buffer given to the [`Reader`], plus the
    /// base it was given ([`Reader::with_base`]).
    pub fn offset(&self) -> usize {
        match *self {
            WireError::Truncated(o)
            | WireError::BadVarint(o)
            | WireError::ZeroField(o)
            | WireError::BadUtf8(o) => o,
            WireError::BadWireType { offset, .. } | WireError::Overflow32 { offset, .. } => offset,
        }
    }

    /// The same error with its offset moved `by` bytes on: for an error found in a
    /// buffer that starts `by` bytes into the input, its position in the input.
    ///
    /// ```
    /// use jelly_proto::wire::WireError;
    /// assert_eq!(WireError::BadUtf8(3).shifted(10), WireError::BadUtf8(13));
    /// ```
    #[must_use]
    pub fn shifted(self, by: usize) -> Self {
        let at = |o: usize| o.saturating_add(by);
        match self {
            WireError::Truncated(o) => WireError::Truncated(at(o)),
            WireError::BadVarint(o) => WireError::BadVarint(at(o)),
            WireError::ZeroField(o) => WireError::ZeroField(at(o)),
            WireError::BadUtf8(o) => WireError::BadUtf8(at(o)),
            WireError::BadWireType { wire_type, offset } => WireError::BadWireType {
                wire_type,
                offset: at(offset),
            },
            WireError::Overflow32 { value, offset } => WireError::Overflow32 {
                value,
                offset: at(offset),
            },
        }
    }
}

/// A cursor over one protobuf message. Borrowed slices returned by [`Reader::bytes`]
/// and [`Reader::str`] point into the original buffer.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Offset of `buf[0]` in the outermost buffer, so errors report absolute positions.
    base: usize,
}

impl<'a> Reader<'a> {
    /// Reads the message in `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader {
            buf,
            pos: 0,
            base: 0,
        }
    }

    /// Reads `buf`, reporting offsets as if `buf` started at `base`.
    pub fn with_base(buf: &'a [u8], base: usize) -> Self {
        Reader { buf, pos: 0, base }
    }

    /// Absolute offset of the cursor.
    #[inline]
    pub fn offset(&self) -> usize {
        self.base + self.pos
    }

    /// True when the whole message has been read.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    /// Reads a varint (up to 10 bytes).
    #[inline(always)]
    pub fn varint(&mut self) -> Result<u64, WireError> {
        // Fast path: one byte, which is almost every tag, length and id in Jelly.
        if let Some(&b) = self.buf.get(self.pos)
            && b < 0x80
        {
            self.pos += 1;
            return Ok(u64::from(b));
        }
        self.varint_slow()
    }

    #[cold]
    #[inline(never)]
    fn varint_slow(&mut self) -> Result<u64, WireError> {
        let buf = self.buf;
        let mut pos = self.pos;
        let start = pos;
        let mut value: u64 = 0;
        let mut shift = 0u32;
        loop {
            let Some(&b) = buf.get(pos) else {
                return Err(WireError::Truncated(self.base + pos));
            };
            pos += 1;
            if shift == 63 && b > 1 {
                return Err(WireError::BadVarint(self.base + start));
            }
            value |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                self.pos = pos;
                return Ok(value);
            }
            shift += 7;
            if shift > 63 {
                return Err(WireError::BadVarint(self.base + start));
            }
        }
    }

    /// Reads a varint that must fit in 32 bits (proto `uint32`).
    ///
    /// Protobuf parsers truncate larger values silently; we reject them, because a
    /// lookup id of 2^32+1 silently becoming 1 would decode the wrong term.
    #[inline]
    pub fn varint32(&mut self) -> Result<u32, WireError> {
        let offset = self.offset();
        let v = self.varint()?;
        u32::try_from(v).map_err(|_| WireError::Overflow32 { value: v, offset })
    }

    /// Reads a field tag. Returns `None` at the end of the message.
    #[inline(always)]
    pub fn tag(&mut self) -> Result<Option<(u32, WireType)>, WireError> {
        let Some(&b) = self.buf.get(self.pos) else {
            return Ok(None);
        };
        // Fast path: single-byte key (fields 1–15) of a supported wire type.
        if (8..0x80).contains(&b) {
            let wt = match b & 7 {
                0 => Some(WireType::Varint),
                2 => Some(WireType::Len),
                1 => Some(WireType::Fixed64),
                5 => Some(WireType::Fixed32),
                _ => None,
            };
            if let Some(wt) = wt {
                self.pos += 1;
                return Ok(Some((u32::from(b >> 3), wt)));
            }
        }
        self.tag_slow()
    }

    #[cold]
    #[inline(never)]
    fn tag_slow(&mut self) -> Result<Option<(u32, WireType)>, WireError> {
        let offset = self.offset();
        let key = self.varint()?;
        let wt = match key & 7 {
            0 => WireType::Varint,
            1 => WireType::Fixed64,
            2 => WireType::Len,
            5 => WireType::Fixed32,
            other => {
                return Err(WireError::BadWireType {
                    wire_type: other as u8,
                    offset,
                });
            }
        };
        let field = key >> 3;
        if field == 0 {
            return Err(WireError::ZeroField(offset));
        }
        let field = u32::try_from(field).map_err(|_| WireError::BadVarint(offset))?;
        Ok(Some((field, wt)))
    }

    /// Reads a length-delimited field's payload.
    #[inline]
    pub fn bytes(&mut self) -> Result<&'a [u8], WireError> {
        let len = self.varint()?;
        let start = self.pos;
        let remaining = (self.buf.len() - start) as u64;
        if len > remaining {
            return Err(WireError::Truncated(self.base + self.buf.len()));
        }
        let end = start + len as usize;
        self.pos = end;
        Ok(&self.buf[start..end])
    }

    /// Reads a length-delimited field as a sub-message reader with absolute offsets.
    #[inline]
    pub fn message(&mut self) -> Result<Reader<'a>, WireError> {
        let bytes = self.bytes()?;
        let base = self.base + self.pos - bytes.len();
        Ok(Reader::with_base(bytes, base))
    }

    /// Reads a length-delimited field as UTF-8.
    #[inline]
    pub fn str(&mut self) -> Result<&'a str, WireError> {
        let bytes = self.bytes()?;
        let start = self.base + self.pos - bytes.len();
        utf8(bytes).map_err(|e| WireError::BadUtf8(start + e.valid_up_to()))
    }

    /// The unread bytes, without consuming them.
    #[inline]
    pub fn unread(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }

    /// Consumes and returns everything left (the payload of a string field opened with [`Reader::message`]).
    #[inline]
    pub fn remaining(&mut self) -> &'a [u8] {
        let rest = &self.buf[self.pos..];
        self.pos = self.buf.len();
        rest
    }

    /// Skips a field's payload of the given wire type (for unknown fields).
    pub fn skip(&mut self, wt: WireType) -> Result<(), WireError> {
        match wt {
            WireType::Varint => {
                self.varint()?;
            }
            WireType::Len => {
                self.bytes()?;
            }
            WireType::Fixed64 => self.advance(8)?,
            WireType::Fixed32 => self.advance(4)?,
        }
        Ok(())
    }

    fn advance(&mut self, n: usize) -> Result<(), WireError> {
        if self.buf.len() - self.pos < n {
            return Err(WireError::Truncated(self.base + self.buf.len()));
        }
        self.pos += n;
        Ok(())
    }
}

/// Checks that `b` is UTF-8, as `std::str::from_utf8` does, with fast paths:
/// - short ASCII strings, which most RDF names, lexical forms and tags are: a few word
///   operations inline instead of a call that walks the bytes one at a time until they
///   are aligned;
/// - longer ASCII strings (long IRIs, English descriptions): the word-at-a-time
///   `is_ascii` of `core`;
/// - long non-ASCII strings (descriptions in other scripts): a vectorised validator.
///
/// Only a string that fails is checked again by `std`, for the error's position.
#[inline(always)]
pub fn utf8(b: &[u8]) -> Result<&str, std::str::Utf8Error> {
    let ascii = if b.len() <= 32 {
        short_ascii(b)
    } else {
        b.is_ascii()
    };
    if ascii {
        // SAFETY: every byte of `b` is below 0x80, so `b` is ASCII, which is valid UTF-8.
        return Ok(unsafe { std::str::from_utf8_unchecked(b) });
    }
    if b.len() >= LONG_UTF8
        && let Ok(s) = simdutf8::basic::from_utf8(b)
    {
        return Ok(s);
    }
    std::str::from_utf8(b)
}

/// Length from which [`utf8`] hands a non-ASCII string to the vectorised validator
/// (below it, the validator's own set-up costs more than `std`'s loop).
const LONG_UTF8: usize = 64;

/// True if every byte of `b` (at most 32 bytes) is ASCII.
#[inline(always)]
fn short_ascii(b: &[u8]) -> bool {
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let word = |i: usize| -> u64 {
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[i..i + 8]);
        u64::from_le_bytes(w)
    };
    let half = |i: usize| -> u64 {
        let mut w = [0u8; 4];
        w.copy_from_slice(&b[i..i + 4]);
        u64::from(u32::from_le_bytes(w))
    };
    let n = b.len();
    let acc = if n >= 8 {
        // Words from the start, the last one ending at the end (overlapping).
        let mut acc = word(n - 8);
        let mut i = 0;
        while i + 8 < n {
            acc |= word(i);
            i += 8;
        }
        acc
    } else if n >= 4 {
        half(0) | half(n - 4)
    } else {
        b.iter().fold(0u64, |a, &x| a | u64::from(x))
    };
    acc & HIGH == 0
}

/// Appends a varint.
#[inline]
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Writes `v` as a varint into `b` at `at` (a buffer on the stack, for headers put
/// together before one copy); returns the position after it. `b` must have room: a
/// varint takes at most 10 bytes.
///
/// ```
/// let mut b = [0u8; 4];
/// let end = jelly_proto::wire::put_varint_at(&mut b, 1, 300);
/// assert_eq!(&b[..end], &[0, 0xac, 0x02]);
/// ```
#[inline(always)]
pub fn put_varint_at<const L: usize>(b: &mut [u8; L], mut at: usize, mut v: u64) -> usize {
    while v >= 0x80 {
        b[at] = (v as u8) | 0x80;
        v >>= 7;
        at += 1;
    }
    b[at] = v as u8;
    at + 1
}

/// Number of bytes [`put_varint`] writes for `v`.
#[inline]
pub fn varint_len(v: u64) -> usize {
    // 1 byte per started 7 bits, at least 1.
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// Appends a field key.
#[inline]
pub fn put_tag(out: &mut Vec<u8>, field: u32, wt: WireType) {
    let w = match wt {
        WireType::Varint => 0,
        WireType::Fixed64 => 1,
        WireType::Len => 2,
        WireType::Fixed32 => 5,
    };
    put_varint(out, (u64::from(field) << 3) | w);
}

/// Appends a varint field, omitting it when it is 0 (proto3 default).
#[inline]
pub fn put_uint_field(out: &mut Vec<u8>, field: u32, v: u64) {
    if v != 0 {
        put_tag(out, field, WireType::Varint);
        put_varint(out, v);
    }
}

/// Appends a bool field, omitting `false`.
#[inline]
pub fn put_bool_field(out: &mut Vec<u8>, field: u32, v: bool) {
    put_uint_field(out, field, u64::from(v));
}

/// Appends a length-delimited field (always written, even when empty).
#[inline]
pub fn put_bytes_field(out: &mut Vec<u8>, field: u32, v: &[u8]) {
    put_tag(out, field, WireType::Len);
    put_varint(out, v.len() as u64);
    out.extend_from_slice(v);
}

/// Appends a string field, omitting the empty string (proto3 default for non-oneof fields).
#[inline]
pub fn put_str_field_nonempty(out: &mut Vec<u8>, field: u32, v: &str) {
    if !v.is_empty() {
        put_bytes_field(out, field, v.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_round_trip_and_len() {
        for v in [
            0u64,
            1,
            127,
            128,
            300,
            16383,
            16384,
            u32::MAX as u64,
            u64::MAX,
        ] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            assert_eq!(b.len(), varint_len(v), "len of {v}");
            let mut r = Reader::new(&b);
            assert_eq!(r.varint().unwrap(), v);
            assert!(r.is_empty());
        }
    }

    #[test]
    fn overlong_varint_rejected() {
        let b = [0xffu8; 11];
        assert!(matches!(
            Reader::new(&b).varint(),
            Err(WireError::BadVarint(0))
        ));
        // 10th byte may only carry one bit.
        let mut b = vec![0xffu8; 9];
        b.push(0x02);
        assert!(Reader::new(&b).varint().is_err());
    }

    #[test]
    fn truncated_bytes_rejected() {
        let b = [0x0a, 0x05, 1, 2];
        let mut r = Reader::new(&b);
        assert_eq!(r.tag().unwrap(), Some((1, WireType::Len)));
        assert!(matches!(r.bytes(), Err(WireError::Truncated(_))));
    }

    #[test]
    fn group_wire_type_rejected() {
        let b = [0x0b];
        assert!(matches!(
            Reader::new(&b).tag(),
            Err(WireError::BadWireType { wire_type: 3, .. })
        ));
    }

    #[test]
    fn uint32_overflow_rejected() {
        let mut b = Vec::new();
        put_varint(&mut b, u64::from(u32::MAX) + 1);
        assert!(matches!(
            Reader::new(&b).varint32(),
            Err(WireError::Overflow32 { .. })
        ));
    }

    #[test]
    fn bad_utf8_reports_offset() {
        let b = [0x0a, 0x03, b'a', 0xff, b'b'];
        let mut r = Reader::new(&b);
        r.tag().unwrap();
        assert_eq!(r.str(), Err(WireError::BadUtf8(3)));
    }

    #[test]
    fn utf8_agrees_with_std_on_short_and_long_inputs() {
        // Every length up to 40, with one byte changed at every place to a non-ASCII
        // byte that starts, continues or breaks a sequence.
        for n in 0..=40usize {
            let base: Vec<u8> = (0..n).map(|i| b'a' + (i % 26) as u8).collect();
            assert_eq!(utf8(&base), std::str::from_utf8(&base));
            for i in 0..n {
                for bad in [0x80u8, 0xc3, 0xe2, 0xff] {
                    let mut b = base.clone();
                    b[i] = bad;
                    assert_eq!(utf8(&b), std::str::from_utf8(&b), "len {n}, byte {i}");
                }
            }
            if n >= 2 {
                let mut b = base.clone();
                b[n - 2..].copy_from_slice("é".as_bytes());
                assert_eq!(utf8(&b), Ok(std::str::from_utf8(&b).unwrap()));
            }
        }
    }

    #[test]
    fn utf8_agrees_with_std_past_the_short_path() {
        // Lengths around the ASCII word loop and the vectorised validator's threshold,
        // in ASCII and in mixed scripts, each intact and then with every byte broken.
        let mixed = "ab é ç 日本語 Ελληνικά русский ";
        for n in 30..=140usize {
            let ascii: Vec<u8> = (0..n).map(|i| b'a' + (i % 26) as u8).collect();
            let mut text = mixed.repeat(n / mixed.len() + 1).into_bytes();
            text.truncate(n);
            for base in [ascii, text] {
                assert_eq!(utf8(&base), std::str::from_utf8(&base), "len {n}");
                for i in 0..n {
                    for bad in [0x80u8, 0xc3, 0xe2, 0xff, b'x'] {
                        let mut b = base.clone();
                        b[i] = bad;
                        assert_eq!(utf8(&b), std::str::from_utf8(&b), "len {n}, byte {i}");
                    }
                }
            }
        }
    }
}
