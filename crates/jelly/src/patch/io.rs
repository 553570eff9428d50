//! Reading and writing Jelly-Patch byte streams (delimited `RdfPatchFrame`s).

use std::io::{Read, Write};

use crate::decoder::DecoderOptions;
use crate::error::{DecodeError, EncodeError};
use crate::framing::{Delimiting, FrameReader, WriteError};

use super::decoder::{PatchDecoder, PatchEvent, PatchFrameCursor};
use super::encoder::PatchEncoder;
use super::options::{PatchOptions, PatchStreamType};

/// Reads a Jelly-Patch stream frame by frame in bounded memory.
pub struct PatchReader<R: Read> {
    frames: FrameReader<R>,
    dec: PatchDecoder,
}

impl<R: Read> PatchReader<R> {
    /// Default limits, delimiting autodetected.
    pub fn new(inner: R) -> Self {
        Self::with_options(inner, DecoderOptions::default(), Delimiting::Auto)
    }

    /// Explicit limits and delimiting.
    pub fn with_options(inner: R, cfg: DecoderOptions, delimiting: Delimiting) -> Self {
        PatchReader {
            frames: FrameReader::new(inner, delimiting, cfg.max_frame_bytes),
            dec: PatchDecoder::new(cfg),
        }
    }

    /// The decoder (options, stats).
    pub fn decoder(&self) -> &PatchDecoder {
        &self.dec
    }

    /// Bytes consumed.
    pub fn bytes_read(&self) -> u64 {
        self.frames.bytes_read()
    }

    /// The next frame, or `None` at the end of the stream (after checking that no
    /// transaction was left open).
    pub fn next_frame(&mut self) -> Result<Option<PatchFrameCursor<'_, '_>>, DecodeError> {
        // Reaching the end does not move these counters. An open transaction at the end
        // is reported against the last frame of the stream.
        let (frame, offset) = (
            self.frames.frames_read().saturating_sub(1),
            self.frames.bytes_read(),
        );
        match self.frames.next_frame()? {
            Some(f) => Ok(Some(self.dec.frame_at(f.bytes, f.offset))),
            None => {
                self.dec.finish().map_err(|kind| DecodeError {
                    frame,
                    row: None,
                    offset: Some(offset),
                    kind,
                })?;
                Ok(None)
            }
        }
    }

    /// Runs `f` on every event, with the index of its frame.
    pub fn for_each_event(
        &mut self,
        mut f: impl FnMut(u64, PatchEvent<'_>),
    ) -> Result<(), DecodeError> {
        while let Some(mut frame) = self.next_frame()? {
            let i = frame.index();
            while let Some(ev) = frame.next_event()? {
                f(i, ev);
            }
        }
        Ok(())
    }
}

/// Writes a Jelly-Patch stream.
///
/// - FRAME streams: [`PatchWriter::end_patch`] ends the frame (one frame per patch).
/// - PUNCTUATED streams: `end_patch` writes a punctuation row; frames end every
///   `rows_per_frame` rows, outside transactions or not.
/// - FLAT streams: `end_patch` only flushes; frames end every `rows_per_frame` rows.
pub struct PatchWriter<W: Write> {
    out: W,
    enc: PatchEncoder,
    rows_per_frame: usize,
    buf: Vec<u8>,
    frames_written: u64,
}

impl<W: Write> PatchWriter<W> {
    /// A delimited writer with 256 rows per frame (FLAT and PUNCTUATED streams).
    pub fn new(out: W, options: PatchOptions) -> Result<Self, EncodeError> {
        Ok(PatchWriter {
            out,
            enc: PatchEncoder::new(options)?,
            rows_per_frame: 256,
            buf: Vec::new(),
            frames_written: 0,
        })
    }

    /// Sets the frame size for FLAT and PUNCTUATED streams.
    pub fn with_rows_per_frame(mut self, rows: usize) -> Self {
        self.rows_per_frame = rows.max(1);
        self
    }

    /// The encoder, to add operations. Call [`PatchWriter::maybe_flush`] after each
    /// operation to apply the frame size (the `add`/`delete` helpers do it).
    pub fn encoder(&mut self) -> &mut PatchEncoder {
        &mut self.enc
    }

    /// Frames written so far.
    pub fn frames_written(&self) -> u64 {
        self.frames_written
    }

    /// Ends the frame if the frame size is reached (FLAT and PUNCTUATED streams).
    pub fn maybe_flush(&mut self) -> Result<(), WriteError> {
        if self.enc.options().stream_type != PatchStreamType::Frame
            && self.enc.frame_rows() >= self.rows_per_frame
        {
            self.flush_frame()?;
        }
        Ok(())
    }

    /// Adds a statement and applies the frame size.
    pub fn add(&mut self, s: crate::StatementRef<'_>) -> Result<(), WriteError> {
        self.enc.add(s)?;
        self.maybe_flush()
    }

    /// Deletes a statement and applies the frame size.
    pub fn delete(&mut self, s: crate::StatementRef<'_>) -> Result<(), WriteError> {
        self.enc.delete(s)?;
        self.maybe_flush()
    }

    fn flush_frame(&mut self) -> Result<(), WriteError> {
        if self.enc.frame_rows() == 0 && self.frames_written > 0 {
            return Ok(());
        }
        self.buf.clear();
        self.enc.finish_frame_into(&mut self.buf, true);
        self.out.write_all(&self.buf)?;
        self.frames_written += 1;
        Ok(())
    }

    /// Ends the current patch (see the type's documentation).
    pub fn end_patch(&mut self) -> Result<(), WriteError> {
        match self.enc.options().stream_type {
            PatchStreamType::Frame => {
                if self.enc.in_transaction() {
                    return Err(
                        EncodeError::PatchRule("a transaction must end within its frame").into(),
                    );
                }
                self.flush_frame()
            }
            PatchStreamType::Punctuated => {
                self.enc.punctuation()?;
                self.maybe_flush()
            }
            _ => self.maybe_flush(),
        }
    }

    /// Writes the last frame and flushes; refuses to end inside a transaction.
    pub fn finish(mut self) -> Result<W, WriteError> {
        if self.enc.in_transaction() {
            return Err(EncodeError::PatchRule("the stream ends inside a transaction").into());
        }
        self.flush_frame()?;
        self.out.flush()?;
        Ok(self.out)
    }
}
