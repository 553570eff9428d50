//! Compression shared among subscribers: compress each batch of output once, send
//! the same bytes to every subscriber, and still give each subscriber's body one
//! valid `Content-Encoding` stream, whenever it joined.
//!
//! # Blocks and stitchers
//!
//! [`compress_block`] turns one batch of raw output into a [`Block`] that depends on
//! nothing outside itself: its compressed bytes make no reference to data before
//! the block, and start and end on a byte boundary. The fan-out compresses a batch
//! once and hands the block (a cheap [`Bytes`] clone) to all subscribers that are
//! due that batch.
//!
//! Each subscriber owns a [`Stitcher`] for its negotiated [`Encoding`]: it writes
//! [`Stitcher::header`] first, then [`Stitcher::block`] for every shared block in
//! order, from whichever block it joined at, and [`Stitcher::trailer`] at the end.
//! `block` returns the shared bytes themselves; the only per-subscriber work is
//! folding the block's CRC into the stream's for gzip (a few table look-ups), no
//! recompression and no copy. Header + any run of blocks + trailer is one valid stream:
//!
//! | coding   | header                         | block                                            | trailer |
//! |----------|--------------------------------|--------------------------------------------------|---------|
//! | identity | —                              | the raw bytes                                    | — |
//! | gzip     | 10-byte member header          | raw deflate from a fresh compressor, sync-flushed, not final | empty final deflate block, CRC-32, length mod 2^32 |
//! | zstd     | —                              | one complete frame                               | an empty frame if no block had one |
//! | br       | WBITS + empty metadata block   | bare catable meta-blocks, byte-aligned           | ISLAST + ISLASTEMPTY |
//!
//! gzip stays a single member because many clients stop after the first member of
//! a multi-member body. Why each layout is valid is written down in the codec
//! submodules. An empty batch compresses to an empty block in every coding.
//!
//! If a compressor fails (it should not: inputs are in memory), the block falls
//! back to that coding's uncompressed form (stored deflate blocks, a raw-block zstd
//! frame, uncompressed brotli meta-blocks), which stitches the same way, so the
//! negotiated `Content-Encoding` never has to change mid-body.
//!
//! # gRPC
//!
//! gRPC compresses each message on its own ([`compress_grpc_message`]): a whole
//! gzip member or zstd frame per message, as `grpc-encoding` defines.

mod brotli_blocks;
mod deflate_blocks;
mod encoding;
mod gzip_crc;
mod zstd_frames;

use std::cell::RefCell;

use bytes::Bytes;

pub use encoding::Encoding;
pub(crate) use encoding::parse_qvalue as qvalue;

/// One batch of output, compressed independently of every other block.
#[derive(Debug, Clone)]
pub struct Block {
    /// The compressed bytes, ready to send between a [`Stitcher`]'s header and
    /// trailer. Empty when the raw batch was empty.
    pub data: Bytes,
    /// The length of the raw (uncompressed) batch.
    pub raw_len: u64,
    /// The CRC-32 (IEEE, as gzip uses) of the raw batch.
    pub crc32: u32,
}

thread_local! {
    /// Scratch output for the compressors, reused so a block's `Bytes` is an exact-size
    /// copy rather than a worst-case-size allocation held for the block's lifetime.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Scratch buffers above this size are released after use instead of kept.
const SCRATCH_KEEP: usize = 4 << 20;

/// Compresses one raw batch into a self-contained [`Block`] for `enc`.
pub fn compress_block(enc: Encoding, raw: &[u8]) -> Block {
    let data = if raw.is_empty() {
        Bytes::new()
    } else {
        match enc {
            Encoding::Identity => Bytes::copy_from_slice(raw),
            Encoding::Gzip => with_scratch(|out| deflate_blocks::deflate_block(raw, out)),
            Encoding::Zstd => with_scratch(|out| zstd_frames::zstd_frame(raw, out)),
            Encoding::Brotli => with_scratch(|out| brotli_blocks::brotli_block(raw, out)),
        }
    };
    Block {
        data,
        raw_len: raw.len() as u64,
        crc32: crc32fast::hash(raw),
    }
}

/// Runs `write` on the thread's cleared scratch buffer and copies out the result.
fn with_scratch(write: impl FnOnce(&mut Vec<u8>)) -> Bytes {
    SCRATCH.with(|cell| {
        let mut out = cell.borrow_mut();
        out.clear();
        write(&mut out);
        let data = Bytes::copy_from_slice(&out);
        if out.capacity() > SCRATCH_KEEP {
            *out = Vec::new();
        }
        data
    })
}

/// Turns header + a run of shared [`Block`]s + trailer into one valid stream for
/// one subscriber. Call [`header`](Self::header) once first, then
/// [`block`](Self::block) for each block in order, then [`trailer`](Self::trailer)
/// once; all blocks must have been compressed for this stitcher's encoding.
#[derive(Debug, Clone)]
pub struct Stitcher {
    enc: Encoding,
    /// CRC-32 of the raw bytes of the blocks so far (gzip's trailer needs it).
    crc: u32,
    /// Raw bytes so far.
    raw_len: u64,
    /// Whether any block so far had compressed bytes (zstd needs at least one frame).
    any_data: bool,
}

impl Stitcher {
    /// A stitcher for one subscriber's body in `enc`.
    pub fn new(enc: Encoding) -> Stitcher {
        Stitcher {
            enc,
            crc: 0,
            raw_len: 0,
            any_data: false,
        }
    }

    /// The bytes that start the stream (empty for identity and zstd).
    pub fn header(&mut self) -> Bytes {
        match self.enc {
            Encoding::Identity | Encoding::Zstd => Bytes::new(),
            Encoding::Gzip => Bytes::from_static(&deflate_blocks::GZIP_HEADER),
            Encoding::Brotli => Bytes::from_static(&brotli_blocks::HEADER),
        }
    }

    /// The bytes to send for `b`: its shared data, unchanged.
    pub fn block(&mut self, b: &Block) -> Bytes {
        if self.enc == Encoding::Gzip {
            self.crc = gzip_crc::crc32_append(self.crc, b.crc32, b.raw_len);
        }
        self.raw_len = self.raw_len.wrapping_add(b.raw_len);
        self.any_data |= !b.data.is_empty();
        b.data.clone()
    }

    /// The bytes that end the stream.
    pub fn trailer(&mut self) -> Bytes {
        match self.enc {
            Encoding::Identity => Bytes::new(),
            Encoding::Zstd if self.any_data => Bytes::new(),
            Encoding::Zstd => Bytes::from_static(&zstd_frames::EMPTY_FRAME),
            Encoding::Brotli => Bytes::from_static(&brotli_blocks::TRAILER),
            Encoding::Gzip => {
                let mut t = Vec::with_capacity(10);
                t.extend_from_slice(&deflate_blocks::FINAL_EMPTY_BLOCK);
                t.extend_from_slice(&self.crc.to_le_bytes());
                // ISIZE is the input length mod 2^32.
                t.extend_from_slice(&(self.raw_len as u32).to_le_bytes());
                Bytes::from(t)
            }
        }
    }
}

/// The payload of one gRPC message compressed as its `grpc-encoding` says: a whole
/// gzip member or zstd frame. For encodings without a gRPC name (identity, brotli:
/// see [`Encoding::grpc_name`]) the message is returned uncompressed.
pub fn compress_grpc_message(enc: Encoding, msg: &[u8]) -> Bytes {
    if enc.grpc_name().is_none() {
        return Bytes::copy_from_slice(msg);
    }
    let block = compress_block(enc, msg);
    let mut s = Stitcher::new(enc);
    let parts = [s.header(), s.block(&block), s.trailer()];
    let mut out = Vec::with_capacity(parts.iter().map(Bytes::len).sum());
    for p in &parts {
        out.extend_from_slice(p);
    }
    Bytes::from(out)
}
