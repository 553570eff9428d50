//! Byte framing of Jelly streams: delimited (varint length before each frame) or not
//! (exactly one frame), with the autodetection the other implementations use.

use std::io::{self, Read, Write};

use crate::decoder::{Decoder, DecoderOptions, Event, FrameCursor};
use crate::encoder::{Encoder, EncoderConfig};
use crate::error::{DecodeError, DecodeErrorKind, EncodeError};
use crate::options::StreamOptions;
use crate::term::{Statement, StatementRef};

/// How frames are separated in a byte stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Delimiting {
    /// Look at the first bytes and decide (see [`detect_delimiting`]).
    #[default]
    Auto,
    /// Each frame is preceded by its length as a varint (files, sockets).
    Delimited,
    /// The input is exactly one frame (gRPC, Kafka, MQTT messages).
    Single,
}

/// Decides whether a stream starting with `head` (its first three bytes, or fewer if
/// the stream is shorter) is delimited, by the rule Jelly-JVM, pyjelly and jelly-cli use:
///
/// - first byte not `0x0A` → delimited (a length varint);
/// - `0A NN` with `NN` ≠ `0A` → one non-delimited frame (field 1, length NN);
/// - `0A 0A NN` with `NN` ≠ `0A` → delimited (a 10-byte frame starting with a row);
/// - `0A 0A 0A` → non-delimited;
/// - one or two bytes → non-delimited; no bytes → delimited (a stream of no frames).
///
/// ```
/// use jelly::{detect_delimiting, Delimiting};
/// assert_eq!(detect_delimiting(&[0x1f, 0x0a, 0x1d]), Delimiting::Delimited);
/// assert_eq!(detect_delimiting(&[0x0a, 0x1d, 0x0a]), Delimiting::Single);
/// assert_eq!(detect_delimiting(&[0x0a, 0x0a, 0x08]), Delimiting::Delimited);
/// assert_eq!(detect_delimiting(&[0x0a, 0x0a, 0x0a]), Delimiting::Single);
/// ```
pub fn detect_delimiting(head: &[u8]) -> Delimiting {
    match head {
        // Empty: a delimited stream of zero frames.
        [] => Delimiting::Delimited,
        // One or two bytes: non-delimited, as Jelly-JVM and pyjelly decide (they call
        // input delimited only from three bytes that say so).
        [_] | [_, _] => Delimiting::Single,
        [b0, ..] if *b0 != 0x0a => Delimiting::Delimited,
        [_, b1, ..] if *b1 != 0x0a => Delimiting::Single,
        [_, _, b2, ..] if *b2 != 0x0a => Delimiting::Delimited,
        _ => Delimiting::Single,
    }
}

/// Reads a Jelly-RDF stream frame by frame in bounded memory.
///
/// ```
/// use jelly::{JellyReader, JellyWriter, StreamOptions, StatementRef, TermRef};
/// let mut out = Vec::new();
/// let mut w = JellyWriter::new(&mut out, StreamOptions::small()).unwrap();
/// w.add(StatementRef::triple(TermRef::Iri("http://a"), TermRef::Iri("http://b"), TermRef::Iri("http://c"))).unwrap();
/// w.finish().unwrap();
///
/// let mut r = JellyReader::new(&out[..]);
/// let mut count = 0;
/// r.for_each_statement(|_st| count += 1).unwrap();
/// assert_eq!(count, 1);
/// ```
pub struct JellyReader<R: Read> {
    frames: FrameReader<R>,
    dec: Decoder,
}

impl<R: Read> JellyReader<R> {
    /// A reader with default limits and delimiting autodetection.
    pub fn new(inner: R) -> Self {
        Self::with_options(inner, DecoderOptions::default(), Delimiting::Auto)
    }

    /// A reader with explicit limits and delimiting.
    pub fn with_options(inner: R, cfg: DecoderOptions, delimiting: Delimiting) -> Self {
        JellyReader {
            frames: FrameReader::new(inner, delimiting, cfg.max_frame_bytes),
            dec: Decoder::new(cfg),
        }
    }

    /// The decoder (options, stats).
    pub fn decoder(&self) -> &Decoder {
        &self.dec
    }

    /// The framing in use, once known (after the first frame is read).
    pub fn delimiting(&self) -> Delimiting {
        self.frames.delimiting()
    }

    /// Bytes consumed from the input.
    pub fn bytes_read(&self) -> u64 {
        self.frames.bytes_read()
    }

    /// Reads the next frame and opens it for decoding. Returns `None` at the end of the stream.
    pub fn next_frame(&mut self) -> Result<Option<FrameCursor<'_, '_>>, DecodeError> {
        match self.frames.next_frame()? {
            Some(f) => Ok(Some(self.dec.frame_at(f.bytes, f.offset))),
            None => Ok(None),
        }
    }

    /// Runs `f` on every event of the stream, with the index of the frame it is in.
    pub fn for_each_event(&mut self, mut f: impl FnMut(u64, Event<'_>)) -> Result<(), DecodeError> {
        while let Some(mut frame) = self.next_frame()? {
            let i = frame.index();
            while let Some(ev) = frame.next_event_inline()? {
                f(i, ev);
            }
        }
        Ok(())
    }

    /// Runs `f` on every statement of the stream.
    pub fn for_each_statement(
        &mut self,
        mut f: impl FnMut(StatementRef<'_>),
    ) -> Result<(), DecodeError> {
        self.for_each_event(|_, ev| {
            if let Event::Statement(s) = ev {
                f(s)
            }
        })
    }

    /// Decodes the whole stream into owned statements, one `Vec` per frame.
    /// Convenient for tests and small inputs; it holds everything in memory.
    pub fn read_all_frames(&mut self) -> Result<Vec<Vec<Statement>>, DecodeError> {
        let mut frames: Vec<Vec<Statement>> = Vec::new();
        while let Some(mut frame) = self.next_frame()? {
            let mut v = Vec::new();
            while let Some(ev) = frame.next_event()? {
                if let Event::Statement(s) = ev {
                    v.push(s.to_owned());
                }
            }
            frames.push(v);
        }
        Ok(frames)
    }
}

impl<'a> JellyReader<&'a [u8]> {
    /// A reader over a stream already in memory, with default limits and delimiting
    /// autodetection. It decodes the frames where they are, without copying them.
    pub fn from_slice(bytes: &'a [u8]) -> Self {
        Self::from_slice_with_options(bytes, DecoderOptions::default(), Delimiting::Auto)
    }

    /// [`JellyReader::from_slice`] with explicit limits and delimiting.
    pub fn from_slice_with_options(
        bytes: &'a [u8],
        cfg: DecoderOptions,
        delimiting: Delimiting,
    ) -> Self {
        JellyReader {
            frames: FrameReader::from_slice(bytes, delimiting, cfg.max_frame_bytes),
            dec: Decoder::new(cfg),
        }
    }
}

/// One frame's bytes as read by a [`FrameReader`].
#[derive(Debug, Clone, Copy)]
pub struct RawFrame<'a> {
    /// The frame message (no length prefix).
    pub bytes: &'a [u8],
    /// Index of the frame in the stream, from 0.
    pub index: u64,
    /// Offset of `bytes` in the input.
    pub offset: u64,
}

/// Splits a byte stream into frames (delimited, or a single non-delimited frame,
/// autodetected by default) without decoding them. Holds one frame at a time, and
/// never allocates more than twice the bytes actually read, whatever length a frame
/// declares.
///
/// Frames are handed out in place from the reader's own buffer: the input is copied
/// once, by the inner reader's `read`.
///
/// Jelly-RDF and Jelly-Patch streams share this framing.
///
/// ```
/// use jelly::{FrameReader, Delimiting};
/// let stream = [2u8, 0x0a, 0x00, 1, 0x00]; // two delimited frames
/// let mut r = FrameReader::new(&stream[..], Delimiting::Auto, 1 << 20);
/// assert_eq!(r.next_frame().unwrap().unwrap().bytes, &[0x0a, 0x00]);
/// assert_eq!(r.next_frame().unwrap().unwrap().index, 1);
/// assert!(r.next_frame().unwrap().is_none());
/// ```
pub struct FrameReader<R: Read> {
    inner: R,
    /// Set by [`FrameReader::from_slice`]: the whole input as a slice, which frames
    /// are then borrowed from (`buf` stays empty; `start` and `end` index the slice).
    as_slice: Option<fn(&R) -> &[u8]>,
    /// Bytes read from `inner`; `buf[start..end]` is not consumed yet. Its length is
    /// its initialised size, which grows (doubling) only when unconsumed bytes fill it.
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// `inner` reported the end of its input.
    eof: bool,
    delimiting: Delimiting,
    max_frame_bytes: u64,
    /// Bytes consumed so far.
    offset: u64,
    /// Frames read so far (the index of the next frame).
    frames_read: u64,
    done: bool,
}

/// Smallest size of a [`FrameReader`]'s buffer once it reads.
const MIN_READ_BUFFER: usize = 64 * 1024;

impl<R: Read> FrameReader<R> {
    /// A frame reader over `inner`.
    pub fn new(inner: R, delimiting: Delimiting, max_frame_bytes: u64) -> Self {
        FrameReader {
            inner,
            as_slice: None,
            buf: Vec::new(),
            start: 0,
            end: 0,
            eof: false,
            delimiting,
            max_frame_bytes,
            offset: 0,
            frames_read: 0,
            done: false,
        }
    }

    /// The framing in use, once known (after the first frame is read).
    pub fn delimiting(&self) -> Delimiting {
        self.delimiting
    }

    /// Bytes consumed from the input.
    pub fn bytes_read(&self) -> u64 {
        self.offset
    }

    /// Frames read so far.
    pub fn frames_read(&self) -> u64 {
        self.frames_read
    }

    fn err(&self, kind: DecodeErrorKind) -> DecodeError {
        DecodeError {
            frame: self.frames_read,
            row: None,
            offset: Some(self.offset),
            kind,
        }
    }

    /// The bytes read so far (`start..end` not consumed yet).
    #[inline]
    fn data(&self) -> &[u8] {
        match self.as_slice {
            Some(slice) => slice(&self.inner),
            None => &self.buf,
        }
    }

    /// Reads until at least `need` unconsumed bytes are buffered or the input ends.
    fn fill(&mut self, need: usize) -> io::Result<()> {
        if let Some(slice) = self.as_slice {
            self.end = slice(&self.inner).len();
            self.eof = true;
            return Ok(());
        }
        while self.end - self.start < need && !self.eof {
            if self.end == self.buf.len() {
                if self.start > 0 {
                    // Move the unconsumed tail (part of one frame) to the front.
                    self.buf.copy_within(self.start..self.end, 0);
                    self.end -= self.start;
                    self.start = 0;
                }
                if self.end == self.buf.len() {
                    // Full of unconsumed bytes: grow, at most doubling what was read.
                    let size = (self.buf.len() * 2).max(MIN_READ_BUFFER);
                    self.buf.resize(size, 0);
                }
            }
            match self.inner.read(&mut self.buf[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(n) => self.end += n.min(self.buf.len() - self.end),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn detect(&mut self) -> Result<(), DecodeError> {
        self.fill(3).map_err(|e| DecodeError {
            frame: 0,
            row: None,
            offset: Some(0),
            kind: e.into(),
        })?;
        let head = &self.data()[self.start..self.end.min(self.start + 3)];
        self.delimiting = detect_delimiting(head);
        Ok(())
    }

    /// Reads a varint at the start of the unconsumed bytes and consumes it.
    /// `Ok(None)` at a clean end of input; otherwise `(value, bytes)`.
    fn read_varint(&mut self) -> Result<Option<(u64, u64)>, DecodeErrorKind> {
        let mut value = 0u64;
        let mut shift = 0;
        let mut n = 0usize;
        loop {
            if self.start + n == self.end {
                self.fill(n + 1)?;
            }
            let Some(&b) = self
                .data()
                .get(self.start + n)
                .filter(|_| self.start + n < self.end)
            else {
                return if n == 0 {
                    Ok(None)
                } else {
                    Err(DecodeErrorKind::TruncatedFrame {
                        expected: n as u64 + 1,
                        got: n as u64,
                    })
                };
            };
            n += 1;
            if shift >= 63 && b > 1 {
                // Where the varint starts in the input (not yet consumed: `self.offset`).
                let at = usize::try_from(self.offset).unwrap_or(usize::MAX);
                return Err(jelly_proto::wire::WireError::BadVarint(at).into());
            }
            value |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                self.start += n;
                return Ok(Some((value, n as u64)));
            }
            shift += 7;
        }
    }

    /// Finds the next frame in the buffer and consumes it. Returns its range in the
    /// buffer, or `None` at the end of the stream.
    fn load_frame(&mut self) -> Result<Option<(usize, usize)>, DecodeError> {
        if self.done {
            return Ok(None);
        }
        if self.delimiting == Delimiting::Auto {
            self.detect()?;
        }
        let max = self.max_frame_bytes;
        match self.delimiting {
            Delimiting::Single => {
                self.done = true;
                let cap = usize::try_from(max.saturating_add(1)).unwrap_or(usize::MAX);
                self.fill(cap).map_err(|e| self.err(e.into()))?;
                let n = self.end - self.start;
                if n as u64 > max {
                    // What is known of the length without reading on: more than `max`.
                    let len = max.saturating_add(1);
                    return Err(self.err(DecodeErrorKind::FrameTooLarge { len, max }));
                }
                if self.frames_read == 0 && n == 0 {
                    return Err(self.err(DecodeErrorKind::EmptyInput));
                }
                let range = (self.start, self.end);
                self.start = self.end;
                Ok(Some(range))
            }
            _ => {
                let Some((len, len_bytes)) = self.read_varint().map_err(|e| self.err(e))? else {
                    self.done = true;
                    return Ok(None);
                };
                if len > max {
                    return Err(self.err(DecodeErrorKind::FrameTooLarge { len, max }));
                }
                self.offset += len_bytes;
                // `len` is at most `max_frame_bytes`, which the buffer may grow to hold.
                let want = usize::try_from(len).unwrap_or(usize::MAX);
                self.fill(want).map_err(|e| self.err(e.into()))?;
                let got = self.end - self.start;
                if got < want {
                    return Err(self.err(DecodeErrorKind::TruncatedFrame {
                        expected: len,
                        got: got as u64,
                    }));
                }
                let range = (self.start, self.start + want);
                self.start += want;
                Ok(Some(range))
            }
        }
    }

    /// The next frame, or `None` at the end of the stream.
    pub fn next_frame(&mut self) -> Result<Option<RawFrame<'_>>, DecodeError> {
        let Some((from, to)) = self.load_frame()? else {
            return Ok(None);
        };
        let offset = self.offset;
        self.offset += (to - from) as u64;
        let index = self.frames_read;
        self.frames_read += 1;
        Ok(Some(RawFrame {
            bytes: &self.data()[from..to],
            index,
            offset,
        }))
    }
}

impl<'a> FrameReader<&'a [u8]> {
    /// A frame reader over input already in memory: frames are borrowed from `bytes`
    /// rather than copied out of it (the same frames and errors as
    /// [`FrameReader::new`] over the slice).
    ///
    /// ```
    /// use jelly::{FrameReader, Delimiting};
    /// let stream = [2u8, 0x0a, 0x00];
    /// let mut r = FrameReader::from_slice(&stream, Delimiting::Auto, 1 << 20);
    /// let f = r.next_frame().unwrap().unwrap();
    /// assert!(std::ptr::eq(f.bytes, &stream[1..]));
    /// ```
    pub fn from_slice(bytes: &'a [u8], delimiting: Delimiting, max_frame_bytes: u64) -> Self {
        let mut r = FrameReader::new(bytes, delimiting, max_frame_bytes);
        r.as_slice = Some(|inner: &&[u8]| -> &[u8] { inner });
        r
    }
}

/// When the writer ends a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FramePolicy {
    /// After this many rows (checked after each statement). Jelly-JVM's default is 256.
    /// With [`JellyWriterBuilder::frame_byte_target`], also once the frame reaches that
    /// many bytes.
    Rows(usize),
    /// Only when [`JellyWriter::flush_frame`] is called (one frame per graph, dataset, or input).
    Manual,
}

/// Writes a Jelly-RDF stream to `W`.
///
/// ```
/// use jelly::{JellyWriterBuilder, FramePolicy, StreamOptions, StatementRef, TermRef};
/// let mut out = Vec::new();
/// let mut w = JellyWriterBuilder::new(StreamOptions::big())
///     .frame_policy(FramePolicy::Rows(512))
///     .build(&mut out)
///     .unwrap();
/// w.add(StatementRef::triple(TermRef::Iri("http://a"), TermRef::Iri("http://b"), TermRef::Iri("http://c"))).unwrap();
/// w.finish().unwrap();
/// assert!(!out.is_empty());
/// ```
pub struct JellyWriter<W: Write> {
    out: W,
    enc: Encoder,
    frames: Frames,
}

/// When a writer ends its frames, and how many it wrote: what [`JellyWriter`] and
/// [`JellyVecWriter`] share (they differ in where a finished frame goes).
#[derive(Debug, Clone, Copy)]
struct Frames {
    policy: FramePolicy,
    /// With [`FramePolicy::Rows`] and delimited output, a frame also ends once its
    /// rows take this many bytes.
    byte_target: Option<usize>,
    delimited: bool,
    written: u64,
    bytes: u64,
    /// Bytes of the largest frame written, without its length prefix.
    largest: u64,
}

impl Frames {
    fn new(policy: FramePolicy, byte_target: Option<usize>, delimited: bool) -> Frames {
        Frames {
            policy,
            // Non-delimited output is one frame: a cut would only fail.
            byte_target: byte_target.filter(|_| delimited),
            delimited,
            written: 0,
            bytes: 0,
            largest: 0,
        }
    }

    /// Whether the policy ends the frame now.
    #[inline]
    fn full(&self, enc: &Encoder) -> bool {
        match self.policy {
            FramePolicy::Rows(n) => {
                enc.frame_rows() >= n || self.byte_target.is_some_and(|b| enc.frame_bytes() >= b)
            }
            FramePolicy::Manual => false,
        }
    }

    /// Whether ending the frame now writes one: not for an empty frame after the first
    /// (the first is always written, so the options reach the reader) unless it
    /// carries metadata; an error for a second frame of non-delimited output.
    fn writes_frame(&self, enc: &Encoder) -> Result<bool, WriteError> {
        if enc.frame_rows() == 0 && self.written > 0 && !enc.has_frame_metadata() {
            return Ok(false);
        }
        if !self.delimited && self.written > 0 {
            return Err(WriteError::SecondFrameNonDelimited);
        }
        Ok(true)
    }

    /// Counts a frame of `n` bytes written (its length prefix included).
    fn wrote(&mut self, n: usize) {
        self.written += 1;
        self.bytes += n as u64;
        // The body is what a reader's frame limit is compared to: `n` less the varint
        // of the body's own length, the one prefix length that is consistent.
        let n = n as u64;
        let body = if self.delimited {
            (1..=10u64)
                .map(|p| n.saturating_sub(p))
                .find(|&b| n - b == varint_len(b))
                .unwrap_or(n)
        } else {
            n
        };
        self.largest = self.largest.max(body);
    }
}

/// Bytes of `v` as a protobuf varint.
fn varint_len(v: u64) -> u64 {
    u64::from((64 - v.leading_zeros()).max(1).div_ceil(7))
}

/// Builder for [`JellyWriter`].
#[derive(Debug, Clone)]
pub struct JellyWriterBuilder {
    options: StreamOptions,
    config: EncoderConfig,
    policy: FramePolicy,
    byte_target: Option<usize>,
    delimited: bool,
}

impl JellyWriterBuilder {
    /// Delimited output, 256 rows per frame, no namespace declarations.
    pub fn new(options: StreamOptions) -> Self {
        JellyWriterBuilder {
            options,
            config: EncoderConfig::default(),
            policy: FramePolicy::Rows(256),
            byte_target: None,
            delimited: true,
        }
    }
    /// Frame policy (default: 256 rows).
    pub fn frame_policy(mut self, p: FramePolicy) -> Self {
        self.policy = p;
        self
    }
    /// With [`FramePolicy::Rows`], also ends a frame once its encoded rows (lookup
    /// entries included) take `bytes` or more, so that large rows do not make
    /// frames of hundreds of rows' worth of megabytes (the spec asks for frames
    /// under 1 MB). A soft bound: the row that reaches it stays in its frame, so a row
    /// larger than `bytes` is a frame of its own. Not applied to
    /// [`FramePolicy::Manual`], whose frames are the caller's units, nor to
    /// non-delimited output, which is one frame. Default: none.
    ///
    /// ```
    /// use jelly::{FramePolicy, JellyReader, JellyWriterBuilder, LiteralKind, LiteralRef, StatementRef, StreamOptions, TermRef};
    /// let mut out = Vec::new();
    /// let mut w = JellyWriterBuilder::new(StreamOptions::small())
    ///     .frame_policy(FramePolicy::Rows(256))
    ///     .frame_byte_target(2500)
    ///     .build(&mut out)
    ///     .unwrap();
    /// for i in 0..9 {
    ///     // Distinct literals (a repeated one would be a repeated term, a few bytes).
    ///     let big = format!("{i}{}", "x".repeat(1000));
    ///     let lit = TermRef::Literal(LiteralRef { lex: &big, kind: LiteralKind::Simple });
    ///     w.add(StatementRef::triple(TermRef::Iri("http://a"), TermRef::Iri("http://b"), lit)).unwrap();
    /// }
    /// w.finish().unwrap();
    /// // Three rows of about 1000 bytes reach 2500 bytes: 3 frames of 3 rows.
    /// assert_eq!(JellyReader::new(&out[..]).read_all_frames().unwrap().len(), 3);
    /// ```
    pub fn frame_byte_target(mut self, bytes: usize) -> Self {
        self.byte_target = Some(bytes.max(1));
        self
    }
    /// Delimited output (default true). Non-delimited output holds exactly one frame.
    pub fn delimited(mut self, d: bool) -> Self {
        self.delimited = d;
        self
    }
    /// Allow namespace declarations (version 2).
    pub fn namespace_declarations(mut self, on: bool) -> Self {
        self.config.namespace_declarations = on;
        self
    }
    /// Builds the writer.
    pub fn build<W: Write>(self, out: W) -> Result<JellyWriter<W>, EncodeError> {
        Ok(JellyWriter {
            out,
            enc: Encoder::with_config(self.options, self.config)?,
            frames: Frames::new(self.policy, self.byte_target, self.delimited),
        })
    }
}

impl JellyWriterBuilder {
    /// Builds a writer that appends to `out` in place: each frame is encoded at the end
    /// of `out` and finished there (its length prefix filled in afterwards), so frames
    /// are not copied as [`JellyWriterBuilder::build`] copies them into a
    /// [`Write`]. The bytes are the same.
    ///
    /// ```
    /// use jelly::{JellyWriterBuilder, FramePolicy, StreamOptions, StatementRef, TermRef};
    /// let st = StatementRef::triple(TermRef::Iri("http://a"), TermRef::Iri("http://b"), TermRef::Iri("http://c"));
    /// let b = JellyWriterBuilder::new(StreamOptions::big()).frame_policy(FramePolicy::Rows(1));
    /// let (mut copied, mut in_place) = (Vec::new(), b"kept".to_vec());
    /// let mut w = b.clone().build(&mut copied).unwrap();
    /// w.add(st).unwrap();
    /// w.add(st).unwrap();
    /// w.finish().unwrap();
    /// let mut w = b.build_vec(&mut in_place).unwrap();
    /// w.add(st).unwrap();
    /// w.add(st).unwrap();
    /// w.finish().unwrap();
    /// assert_eq!(&in_place[..4], b"kept");
    /// assert_eq!(in_place[4..], copied[..]);
    /// ```
    pub fn build_vec(self, out: &mut Vec<u8>) -> Result<JellyVecWriter<'_>, EncodeError> {
        let mut enc = Encoder::with_config(self.options, self.config)?;
        enc.attach_output(std::mem::take(out), self.delimited);
        Ok(JellyVecWriter {
            out,
            enc,
            frames: Frames::new(self.policy, self.byte_target, self.delimited),
        })
    }
}

/// Writes a Jelly-RDF stream at the end of a `Vec<u8>`, encoding each frame in place
/// (see [`JellyWriterBuilder::build_vec`]). The vector holds the frames finished so
/// far when the writer is finished or dropped; an unfinished frame is discarded.
pub struct JellyVecWriter<'a> {
    out: &'a mut Vec<u8>,
    enc: Encoder,
    frames: Frames,
}

impl JellyVecWriter<'_> {
    /// The encoder (options, counters, frame metadata).
    pub fn encoder(&mut self) -> &mut Encoder {
        &mut self.enc
    }

    /// Frames written so far.
    pub fn frames_written(&self) -> u64 {
        self.frames.written
    }

    /// Bytes written so far.
    pub fn bytes_written(&self) -> u64 {
        self.frames.bytes
    }

    /// Bytes of the largest frame written so far, without its length prefix: what a
    /// reader's [`DecoderOptions::max_frame_bytes`](crate::DecoderOptions) is compared
    /// to, so a writer can warn that its output needs a raised limit.
    pub fn largest_frame_bytes(&self) -> u64 {
        self.frames.largest
    }

    /// Adds a statement, ending the frame when the policy says so.
    pub fn add(&mut self, s: StatementRef<'_>) -> Result<(), WriteError> {
        self.enc.add(s)?;
        self.maybe_flush()
    }

    /// Ends the frame when the policy says so.
    #[inline]
    fn maybe_flush(&mut self) -> Result<(), WriteError> {
        if self.frames.full(&self.enc) {
            self.flush_frame()?;
        }
        Ok(())
    }

    /// A shared-input session of this writer: see [`SharedWriter`].
    pub fn shared<'s>(&mut self) -> SharedWriter<'_, 's, Self> {
        SharedWriter::new(self)
    }

    /// Declares a namespace.
    pub fn declare_namespace(&mut self, name: &str, iri: &str) -> Result<(), WriteError> {
        self.enc.declare_namespace(name, iri)?;
        Ok(())
    }

    /// Ends the current frame, if it has any rows (the first frame is always written,
    /// so the options reach the reader).
    pub fn flush_frame(&mut self) -> Result<(), WriteError> {
        if self.frames.writes_frame(&self.enc)? {
            let n = self.enc.finish_frame_in_place(self.frames.delimited);
            self.frames.wrote(n);
        }
        Ok(())
    }

    /// Writes the last frame; the vector then holds the whole stream.
    pub fn finish(mut self) -> Result<(), WriteError> {
        if self.enc.graph_open() {
            self.enc.end_graph()?;
        }
        self.flush_frame()
    }
}

impl Drop for JellyVecWriter<'_> {
    fn drop(&mut self) {
        *self.out = self.enc.detach_output();
    }
}

/// The writers a [`SharedWriter`] session can run on: [`JellyWriter`] and
/// [`JellyVecWriter`].
pub trait FrameSink: sealed::Sealed {
    /// The writer's encoder.
    fn encoder(&mut self) -> &mut Encoder;
    /// Adds a statement outside any session, as the writer's `add` does.
    fn add(&mut self, s: StatementRef<'_>) -> Result<(), WriteError>;
    /// Ends the current frame when the writer's frame policy says so.
    fn flush_if_full(&mut self) -> Result<(), WriteError>;
    /// Ends the current frame, as the writer's `flush_frame` does.
    fn flush_frame(&mut self) -> Result<(), WriteError>;
}

mod sealed {
    pub trait Sealed {}
    impl<W: std::io::Write> Sealed for super::JellyWriter<W> {}
    impl Sealed for super::JellyVecWriter<'_> {}
}

impl<W: Write> FrameSink for JellyWriter<W> {
    fn encoder(&mut self) -> &mut Encoder {
        &mut self.enc
    }
    fn add(&mut self, s: StatementRef<'_>) -> Result<(), WriteError> {
        JellyWriter::add(self, s)
    }
    #[inline]
    fn flush_if_full(&mut self) -> Result<(), WriteError> {
        self.maybe_flush()
    }
    fn flush_frame(&mut self) -> Result<(), WriteError> {
        JellyWriter::flush_frame(self)
    }
}

impl FrameSink for JellyVecWriter<'_> {
    fn encoder(&mut self) -> &mut Encoder {
        &mut self.enc
    }
    fn add(&mut self, s: StatementRef<'_>) -> Result<(), WriteError> {
        JellyVecWriter::add(self, s)
    }
    #[inline]
    fn flush_if_full(&mut self) -> Result<(), WriteError> {
        self.maybe_flush()
    }
    fn flush_frame(&mut self) -> Result<(), WriteError> {
        JellyVecWriter::flush_frame(self)
    }
}

/// A shared-input session of a writer ([`JellyWriter::shared`],
/// [`JellyVecWriter::shared`]): statements whose strings all live at least as long as
/// `'s` are written as by the writer's `add`, to the same bytes, but an IRI seen
/// before in the session is recognised by the address of its text (see
/// [`Encoder::shared`]). For input that keeps one copy of each distinct string, as an
/// interning parser, an in-memory graph or an arena does.
///
/// ```
/// use jelly::{FramePolicy, JellyWriterBuilder, StatementRef, StreamOptions, TermRef};
/// // One copy of each string; the statements refer to them.
/// let iris: Vec<String> = (0..4).map(|i| format!("http://ex.org/n{i}")).collect();
/// let statements: Vec<StatementRef<'_>> = (0..100)
///     .map(|i| StatementRef::triple(
///         TermRef::Iri(&iris[i % 4]), TermRef::Iri(&iris[0]), TermRef::Iri(&iris[(i + 1) % 4]),
///     ))
///     .collect();
/// let (mut a, mut b) = (Vec::new(), Vec::new());
/// let builder = JellyWriterBuilder::new(StreamOptions::big()).frame_policy(FramePolicy::Rows(32));
/// let mut w = builder.clone().build_vec(&mut a).unwrap();
/// let mut session = w.shared();
/// for st in &statements {
///     session.add(*st).unwrap();
/// }
/// w.finish().unwrap(); // the session ends with its last use
/// let mut w = builder.build_vec(&mut b).unwrap();
/// for st in &statements {
///     w.add(*st).unwrap();
/// }
/// w.finish().unwrap();
/// assert_eq!(a, b);
/// ```
pub struct SharedWriter<'w, 's, T: FrameSink> {
    writer: &'w mut T,
    session: u64,
    /// Invariant in `'s`, so the session cannot be re-typed to a shorter lifetime.
    _strings: std::marker::PhantomData<fn(&'s str) -> &'s str>,
}

impl<'w, 's, T: FrameSink> SharedWriter<'w, 's, T> {
    pub(crate) fn new(writer: &'w mut T) -> Self {
        SharedWriter {
            session: writer.encoder().new_session(),
            writer,
            _strings: std::marker::PhantomData,
        }
    }

    /// Adds a statement, ending the frame when the writer's policy says so.
    #[inline]
    pub fn add(&mut self, s: StatementRef<'s>) -> Result<(), WriteError> {
        self.add_ref(&s)
    }

    /// [`SharedWriter::add`] of a statement read in place: no copy of it is made
    /// on the way to the row writer (a `StatementRef` is 152 bytes), which counts for
    /// statements held in a slice or a graph.
    ///
    /// ```
    /// use jelly::{JellyWriterBuilder, StatementRef, StreamOptions, TermRef};
    /// let iris = ["http://ex.org/a".to_string(), "http://ex.org/p".to_string()];
    /// let statements = vec![StatementRef::triple(
    ///     TermRef::Iri(&iris[0]),
    ///     TermRef::Iri(&iris[1]),
    ///     TermRef::Iri(&iris[0]),
    /// )];
    /// let mut out = Vec::new();
    /// let mut w = JellyWriterBuilder::new(StreamOptions::small()).build_vec(&mut out).unwrap();
    /// let mut session = w.shared();
    /// for st in &statements {
    ///     session.add_ref(st).unwrap();
    /// }
    /// w.finish().unwrap();
    /// assert!(!out.is_empty());
    /// ```
    #[inline]
    pub fn add_ref(&mut self, s: &StatementRef<'s>) -> Result<(), WriteError> {
        self.writer.encoder().add_shared(s, self.session)?;
        self.writer.flush_if_full()
    }

    /// Adds a statement whose strings need not live as long as the session's, as the
    /// writer's `add` does; the session goes on.
    pub(crate) fn add_outside(&mut self, s: StatementRef<'_>) -> Result<(), WriteError> {
        self.writer.add(s)
    }

    /// Ends the current frame, as the writer's `flush_frame` does (for example at the
    /// end of a graph with [`FramePolicy::Manual`]).
    pub fn flush_frame(&mut self) -> Result<(), WriteError> {
        self.writer.flush_frame()
    }

    /// The writer's encoder (options, counters, frame metadata).
    pub fn encoder(&mut self) -> &mut Encoder {
        self.writer.encoder()
    }
}

/// Errors of [`JellyWriter`].
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error(transparent)]
    Encode(#[from] EncodeError),
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
    #[error("non-delimited output holds exactly one frame; use delimited output for more")]
    SecondFrameNonDelimited,
}

impl<W: Write> JellyWriter<W> {
    /// A delimited writer with the default frame policy (256 rows).
    pub fn new(out: W, options: StreamOptions) -> Result<Self, EncodeError> {
        JellyWriterBuilder::new(options).build(out)
    }

    /// A builder.
    pub fn builder(options: StreamOptions) -> JellyWriterBuilder {
        JellyWriterBuilder::new(options)
    }

    /// The encoder (options, counters, frame metadata).
    pub fn encoder(&mut self) -> &mut Encoder {
        &mut self.enc
    }

    /// Frames written so far.
    pub fn frames_written(&self) -> u64 {
        self.frames.written
    }

    /// Bytes written so far.
    pub fn bytes_written(&self) -> u64 {
        self.frames.bytes
    }

    /// Bytes of the largest frame written so far, without its length prefix: what a
    /// reader's [`DecoderOptions::max_frame_bytes`](crate::DecoderOptions) is compared
    /// to, so a writer can warn that its output needs a raised limit.
    pub fn largest_frame_bytes(&self) -> u64 {
        self.frames.largest
    }

    /// Adds a statement, ending the frame when the policy says so.
    pub fn add(&mut self, s: StatementRef<'_>) -> Result<(), WriteError> {
        self.enc.add(s)?;
        self.maybe_flush()
    }

    /// A shared-input session of this writer: see [`SharedWriter`].
    pub fn shared<'s>(&mut self) -> SharedWriter<'_, 's, Self> {
        SharedWriter::new(self)
    }

    /// Declares a namespace.
    pub fn declare_namespace(&mut self, name: &str, iri: &str) -> Result<(), WriteError> {
        self.enc.declare_namespace(name, iri)?;
        Ok(())
    }

    #[inline]
    fn maybe_flush(&mut self) -> Result<(), WriteError> {
        if self.frames.full(&self.enc) {
            self.flush_frame()?;
        }
        Ok(())
    }

    /// Ends the current frame and writes it, if it has any rows (the first frame is
    /// always written, so the options reach the reader).
    pub fn flush_frame(&mut self) -> Result<(), WriteError> {
        if self.frames.writes_frame(&self.enc)? {
            let n = self.enc.write_frame(&mut self.out, self.frames.delimited)?;
            self.frames.wrote(n);
        }
        Ok(())
    }

    /// Writes the last frame and flushes; returns the inner writer.
    pub fn finish(mut self) -> Result<W, WriteError> {
        if self.enc.graph_open() {
            self.enc.end_graph()?;
        }
        self.flush_frame()?;
        self.out.flush()?;
        Ok(self.out)
    }
}
