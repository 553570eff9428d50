//! Byte framing of Jelly streams: delimited (varint length before each frame) or not
//! (exactly one frame), with the autodetection the other implementations use.

use std::io::{self, BufRead, BufReader, Read, Write};

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
/// - `0A 0A 0A` → non-delimited.
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
        [] => Delimiting::Delimited,
        [b0, ..] if *b0 != 0x0a => Delimiting::Delimited,
        [_] => Delimiting::Single,
        [_, b1, ..] if *b1 != 0x0a => Delimiting::Single,
        [_, _] => Delimiting::Single,
        [_, _, b2, ..] if *b2 != 0x0a => Delimiting::Delimited,
        _ => Delimiting::Single,
    }
}

/// A reader that can look at its first three bytes before handing them on.
struct PeekReader<R> {
    head: [u8; 3],
    head_len: usize,
    head_pos: usize,
    inner: R,
}

impl<R: Read> PeekReader<R> {
    /// Reads up to three bytes ahead (fewer only at the end of input).
    fn peek3(&mut self) -> io::Result<&[u8]> {
        while self.head_len < 3 {
            match self.inner.read(&mut self.head[self.head_len..]) {
                Ok(0) => break,
                Ok(n) => self.head_len += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(&self.head[..self.head_len])
    }
}

impl<R: Read> Read for PeekReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.head_pos < self.head_len {
            let n = (self.head_len - self.head_pos).min(buf.len());
            buf[..n].copy_from_slice(&self.head[self.head_pos..self.head_pos + n]);
            self.head_pos += n;
            return Ok(n);
        }
        self.inner.read(buf)
    }
}

type Source<R> = BufReader<PeekReader<R>>;

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
            while let Some(ev) = frame.next_event()? {
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
/// never allocates more than the declared frame length's worth of bytes actually read.
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
    src: Source<R>,
    buf: Vec<u8>,
    delimiting: Delimiting,
    max_frame_bytes: u64,
    /// Bytes consumed so far.
    offset: u64,
    /// Frames read so far (the index of the next frame).
    frames_read: u64,
    done: bool,
}

impl<R: Read> FrameReader<R> {
    /// A frame reader over `inner`.
    pub fn new(inner: R, delimiting: Delimiting, max_frame_bytes: u64) -> Self {
        let src = BufReader::with_capacity(
            256 * 1024,
            PeekReader {
                head: [0; 3],
                head_len: 0,
                head_pos: 0,
                inner,
            },
        );
        FrameReader {
            src,
            buf: Vec::new(),
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

    fn detect(&mut self) -> Result<(), DecodeError> {
        // Nothing has gone through the BufReader yet, so the peeked bytes come first.
        let head = self.src.get_mut().peek3().map_err(|e| DecodeError {
            frame: 0,
            row: None,
            offset: Some(0),
            kind: e.into(),
        })?;
        self.delimiting = detect_delimiting(head);
        Ok(())
    }

    /// Reads the next frame's bytes into the buffer. Returns false at the end of the stream.
    fn load_frame(&mut self) -> Result<bool, DecodeError> {
        if self.done {
            return Ok(false);
        }
        if self.delimiting == Delimiting::Auto {
            self.detect()?;
        }
        let max = self.max_frame_bytes;
        self.buf.clear();
        match self.delimiting {
            Delimiting::Single => {
                self.done = true;
                let n = (&mut self.src)
                    .take(max + 1)
                    .read_to_end(&mut self.buf)
                    .map_err(|e| self.err(e.into()))?;
                if n as u64 > max {
                    return Err(self.err(DecodeErrorKind::FrameTooLarge { len: n as u64, max }));
                }
                if self.frames_read == 0 && n == 0 {
                    return Err(self.err(DecodeErrorKind::EmptyInput));
                }
                Ok(true)
            }
            _ => {
                let Some((len, len_bytes)) = read_varint(&mut self.src).map_err(|e| self.err(e))?
                else {
                    self.done = true;
                    return Ok(false);
                };
                if len > max {
                    return Err(self.err(DecodeErrorKind::FrameTooLarge { len, max }));
                }
                self.offset += len_bytes;
                let got = (&mut self.src)
                    .take(len)
                    .read_to_end(&mut self.buf)
                    .map_err(|e| self.err(e.into()))?;
                if (got as u64) < len {
                    return Err(self.err(DecodeErrorKind::TruncatedFrame {
                        expected: len,
                        got: got as u64,
                    }));
                }
                Ok(true)
            }
        }
    }

    /// The next frame, or `None` at the end of the stream.
    pub fn next_frame(&mut self) -> Result<Option<RawFrame<'_>>, DecodeError> {
        if !self.load_frame()? {
            return Ok(None);
        }
        let offset = self.offset;
        self.offset += self.buf.len() as u64;
        let index = self.frames_read;
        self.frames_read += 1;
        Ok(Some(RawFrame {
            bytes: &self.buf,
            index,
            offset,
        }))
    }
}

/// Reads a varint from `r`. `Ok(None)` at a clean end of input.
fn read_varint(r: &mut impl BufRead) -> Result<Option<(u64, u64)>, DecodeErrorKind> {
    let mut value = 0u64;
    let mut shift = 0;
    let mut n = 0u64;
    loop {
        let buf = match r.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        };
        let Some(&b) = buf.first() else {
            return if n == 0 {
                Ok(None)
            } else {
                Err(DecodeErrorKind::TruncatedFrame {
                    expected: n + 1,
                    got: n,
                })
            };
        };
        r.consume(1);
        n += 1;
        if shift >= 63 && b > 1 {
            return Err(jelly_proto::wire::WireError::BadVarint(0).into());
        }
        value |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Ok(Some((value, n)));
        }
        shift += 7;
    }
}

/// When the writer ends a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FramePolicy {
    /// After this many rows (checked after each statement). Jelly-JVM's default is 256.
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
    policy: FramePolicy,
    delimited: bool,
    frames_written: u64,
    bytes_written: u64,
}

/// Builder for [`JellyWriter`].
#[derive(Debug, Clone)]
pub struct JellyWriterBuilder {
    options: StreamOptions,
    config: EncoderConfig,
    policy: FramePolicy,
    delimited: bool,
}

impl JellyWriterBuilder {
    /// Delimited output, 256 rows per frame, no namespace declarations.
    pub fn new(options: StreamOptions) -> Self {
        JellyWriterBuilder {
            options,
            config: EncoderConfig::default(),
            policy: FramePolicy::Rows(256),
            delimited: true,
        }
    }
    /// Frame policy (default: 256 rows).
    pub fn frame_policy(mut self, p: FramePolicy) -> Self {
        self.policy = p;
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
            policy: self.policy,
            delimited: self.delimited,
            frames_written: 0,
            bytes_written: 0,
        })
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
        JellyWriterBuilder {
            options,
            config: EncoderConfig::default(),
            policy: FramePolicy::Rows(256),
            delimited: true,
        }
    }

    /// The encoder (options, counters, frame metadata).
    pub fn encoder(&mut self) -> &mut Encoder {
        &mut self.enc
    }

    /// Frames written so far.
    pub fn frames_written(&self) -> u64 {
        self.frames_written
    }

    /// Bytes written so far.
    pub fn bytes_written(&self) -> u64 {
        self.bytes_written
    }

    /// Adds a statement, ending the frame when the policy says so.
    pub fn add(&mut self, s: StatementRef<'_>) -> Result<(), WriteError> {
        self.enc.add(s)?;
        self.maybe_flush()
    }

    /// Declares a namespace.
    pub fn declare_namespace(&mut self, name: &str, iri: &str) -> Result<(), WriteError> {
        self.enc.declare_namespace(name, iri)?;
        Ok(())
    }

    #[inline]
    fn maybe_flush(&mut self) -> Result<(), WriteError> {
        if let FramePolicy::Rows(n) = self.policy
            && self.enc.frame_rows() >= n
        {
            self.flush_frame()?;
        }
        Ok(())
    }

    /// Ends the current frame and writes it, if it has any rows (the first frame is
    /// always written, so the options reach the reader).
    pub fn flush_frame(&mut self) -> Result<(), WriteError> {
        if self.enc.frame_rows() == 0 && self.frames_written > 0 {
            return Ok(());
        }
        if !self.delimited && self.frames_written > 0 {
            return Err(WriteError::SecondFrameNonDelimited);
        }
        let n = self.enc.write_frame(&mut self.out, self.delimited)?;
        self.frames_written += 1;
        self.bytes_written += n as u64;
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
