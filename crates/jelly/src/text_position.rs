//! Line and column of a byte offset in a text, for syntax errors of parsers that only
//! tell a byte offset (the RDF/XML parser's `buffer_position`, the end of the valid
//! part of text that is not UTF-8: [`utf8_error_position`]).
//!
//! [`position_in`] works on text in memory. [`PositionTracker`] wraps a streaming
//! reader and keeps only the last [`PositionTracker::KEPT`] bytes it passed on, with
//! the line and column where they start: an error's offset lies near the end of what
//! a parser has read, so memory stays bounded whatever the input's size.

use std::cell::RefCell;
use std::io::{self, Read};
use std::rc::Rc;

/// A place in a text: 1-based line and 1-based column, in characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextPosition {
    /// Line, from 1; a line ends at `\n`, `\r\n` or a lone `\r`.
    pub line: u64,
    /// Column in characters (not bytes), from 1.
    pub column: u64,
}

/// The position of byte `offset` of `text` (the end of the text when past it).
///
/// ```
/// use jelly::text_position::{TextPosition, position_in};
/// let text = "<a>\n  <é x='1'/>\n".as_bytes();
/// assert_eq!(position_in(text, 0), TextPosition { line: 1, column: 1 });
/// // `x` is the sixth character of line 2 (é is two bytes).
/// assert_eq!(position_in(text, 10), TextPosition { line: 2, column: 6 });
/// ```
pub fn position_in(text: &[u8], offset: usize) -> TextPosition {
    let mut at = LineColumn::default();
    at.advance(&text[..offset.min(text.len())]);
    at.position()
}

/// Where the invalid UTF-8 that `error` reports on `bytes` starts.
///
/// Lines end as [`crate::nquads::lines`] ends them (LF, CRLF or a lone CR), so the line
/// is the one an N-Triples / N-Quads parser of the text would name; the column counts
/// the characters before the bad byte on its line, as [`crate::nquads::SyntaxError`]'s
/// does.
///
/// ```
/// use jelly::text_position::{TextPosition, utf8_error_position};
/// let bytes = b"<a> <b> <c> .\r<d> <e> \"\xC3\xA9\xFF\" .\r";
/// let e = std::str::from_utf8(bytes).unwrap_err();
/// assert_eq!(utf8_error_position(bytes, &e), TextPosition { line: 2, column: 11 });
/// ```
pub fn utf8_error_position(bytes: &[u8], error: &std::str::Utf8Error) -> TextPosition {
    position_in(bytes, error.valid_up_to())
}

/// 0-based line and column (characters) after some bytes.
#[derive(Debug, Clone, Copy, Default)]
struct LineColumn {
    line: u64,
    column: u64,
    /// The last byte seen was `\r`: a `\n` right after it ends no second line.
    after_cr: bool,
}

impl LineColumn {
    /// Moves past `bytes`. A line ends at `\n`, `\r\n` or a lone `\r`, as in XML.
    fn advance(&mut self, bytes: &[u8]) {
        let Some(&last) = bytes.last() else { return };
        let mut tail_from = None;
        for i in memchr::memchr2_iter(b'\n', b'\r', bytes) {
            let crlf = bytes[i] == b'\n'
                && match i.checked_sub(1) {
                    Some(p) => bytes[p] == b'\r',
                    None => self.after_cr,
                };
            if !crlf {
                self.line += 1;
            }
            tail_from = Some(i + 1);
        }
        let tail = match tail_from {
            Some(from) => {
                self.column = 0;
                &bytes[from..]
            }
            None => bytes,
        };
        // A character starts at every byte that is not a UTF-8 continuation byte.
        self.column += tail.iter().filter(|&&b| b & 0xC0 != 0x80).count() as u64;
        self.after_cr = last == b'\r';
    }

    fn position(self) -> TextPosition {
        TextPosition {
            line: self.line + 1,
            column: self.column + 1,
        }
    }
}

/// The bytes a [`PositionTracker`] passed on last, and where they start.
#[derive(Debug, Default)]
struct Window {
    bytes: Vec<u8>,
    /// Stream offset of `bytes[0]`.
    start: u64,
    /// Line and column at `bytes[0]`.
    at_start: LineColumn,
}

/// A reader that passes its input on and can tell the line and column of any of the
/// last [`PositionTracker::KEPT`] bytes it passed on, through the [`PositionProbe`]
/// made with it (which stays with the caller when the tracker goes into a parser).
///
/// ```
/// use std::io::Read;
/// use jelly::text_position::{PositionTracker, TextPosition};
/// let (mut r, probe) = PositionTracker::new("line 1\nline 2\n".as_bytes());
/// let mut all = String::new();
/// r.read_to_string(&mut all).unwrap();
/// assert_eq!(probe.position(9), Some(TextPosition { line: 2, column: 3 }));
/// ```
pub struct PositionTracker<R> {
    inner: R,
    window: Rc<RefCell<Window>>,
}

/// Asks a [`PositionTracker`] where a byte offset is.
pub struct PositionProbe(Rc<RefCell<Window>>);

impl<R: Read> PositionTracker<R> {
    /// Bytes kept for [`PositionProbe::position`] (between this and twice this).
    pub const KEPT: usize = 64 << 10;

    /// A tracker over `inner` and its probe.
    pub fn new(inner: R) -> (PositionTracker<R>, PositionProbe) {
        let window = Rc::new(RefCell::new(Window::default()));
        (
            PositionTracker {
                inner,
                window: window.clone(),
            },
            PositionProbe(window),
        )
    }
}

impl<R: Read> Read for PositionTracker<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        let mut w = self.window.borrow_mut();
        w.bytes.extend_from_slice(&buf[..n]);
        if w.bytes.len() > 2 * Self::KEPT {
            // Forget all but the last KEPT bytes, moving the start past them.
            let cut = w.bytes.len() - Self::KEPT;
            let Window {
                bytes,
                start,
                at_start,
            } = &mut *w;
            at_start.advance(&bytes[..cut]);
            bytes.drain(..cut);
            *start += cut as u64;
        }
        Ok(n)
    }
}

impl PositionProbe {
    /// Line and column of stream offset `offset`: `None` when the tracker no longer
    /// keeps it, the end of what it passed on when `offset` is past that.
    pub fn position(&self, offset: u64) -> Option<TextPosition> {
        let w = self.0.borrow();
        let rel = usize::try_from(offset.checked_sub(w.start)?).unwrap_or(usize::MAX);
        let mut at = w.at_start;
        at.advance(&w.bytes[..rel.min(w.bytes.len())]);
        Some(at.position())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_xml_line_end_counts_once() {
        let text = b"a\r\nb\rc\nd";
        // `d` is on line 4, however the text is cut into pieces.
        assert_eq!(position_in(text, 7), TextPosition { line: 4, column: 1 });
        assert_eq!(position_in(text, 1), TextPosition { line: 1, column: 2 });
        assert_eq!(position_in(text, 3), TextPosition { line: 2, column: 1 });
        for cut in 0..=7 {
            let mut at = LineColumn::default();
            at.advance(&text[..cut]);
            at.advance(&text[cut..7]);
            assert_eq!(
                at.position(),
                TextPosition { line: 4, column: 1 },
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn positions_far_into_a_stream_match_the_text_in_memory() {
        // Lines of varied lengths with multi-byte characters, well past KEPT, read in
        // odd-sized pieces.
        let text: String = (0..40_000)
            .map(|i| format!("{}é{}\n", "x".repeat(i % 17), i))
            .collect();
        let (mut r, probe) = PositionTracker::new(text.as_bytes());
        let mut buf = vec![0u8; 3001];
        let mut read = 0usize;
        loop {
            let n = r.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            read += n;
        }
        assert_eq!(read, text.len());
        // Forgotten bytes are none of its business; kept ones match.
        assert_eq!(probe.position(0), None);
        let kept_from = text.len() - PositionTracker::<&[u8]>::KEPT;
        for offset in [kept_from, kept_from + 1, text.len() - 5, text.len()] {
            assert_eq!(
                probe.position(offset as u64),
                Some(position_in(text.as_bytes(), offset)),
                "{offset}"
            );
        }
        let last = position_in(text.as_bytes(), text.len());
        assert_eq!(
            last,
            TextPosition {
                line: 40_001,
                column: 1
            }
        );
        assert_eq!(probe.position(u64::MAX), Some(last));
    }
}
