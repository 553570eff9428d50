//! gzip as one member made of independently compressed deflate blocks.
//!
//! A block is raw deflate (RFC 1951) from a fresh compressor, ended with a sync
//! flush and never finished: its last deflate block is an empty non-final stored
//! block, so it ends on a byte boundary, and a fresh compressor makes no back
//! reference before the block's first byte. Any sequence of such blocks is therefore
//! a valid (unfinished) deflate stream. The member around them is the fixed 10-byte
//! header and a trailer of an empty final deflate block, the CRC-32 of the whole
//! input and its length mod 2^32.

use std::cell::RefCell;

use flate2::{Compress, Compression, FlushCompress};

/// gzip header: magic, CM=deflate, no flags, no mtime, no extra flags, OS unknown.
pub(super) const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];

/// An empty final deflate block with fixed codes: BFINAL=1, BTYPE=01, then the
/// 7-bit end-of-block code, padded to a byte.
pub(super) const FINAL_EMPTY_BLOCK: [u8; 2] = [0x03, 0x00];

/// Level 2 (zlib-rs, i.e. zlib-ng's `deflate_fast`). Informal, noisy measurement
/// on Jelly output (IoT weather data): level 1 (`deflate_quick`, static Huffman
/// codes only) compressed 64 KiB batches 7.5x and 1 KiB items 1.46x; level 2 gave
/// 9.2x and 1.68x for about 1.5x the time; level 3 9.9x for about 2x. A batch is
/// compressed once for all its subscribers, so ratio is worth a little CPU, but
/// gzip is the fallback coding: clients that care ask for zstd or br.
const LEVEL: u32 = 2;

/// Stored blocks carry at most this many bytes (LEN is 16 bits).
const MAX_STORED: usize = 0xffff;

thread_local! {
    /// One compressor per thread, reset before each block: its window and hash
    /// tables are allocated once, not per flush.
    static COMPRESSOR: RefCell<Compress> = RefCell::new(Compress::new(Compression::new(LEVEL), false));
}

/// Appends `raw` to `out` as byte-aligned, non-final raw deflate with no
/// reference outside `raw`.
pub(super) fn deflate_block(raw: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    let done = COMPRESSOR.with(|c| {
        let mut c = c.borrow_mut();
        // A full reset also forgets the window: nothing before `raw` can be referenced.
        c.reset();
        deflate_sync_flushed(&mut c, raw, out)
    });
    if !done {
        tracing::warn!(
            raw_len = raw.len(),
            "deflate failed; sending the block as stored deflate blocks"
        );
        out.truncate(start);
        stored_blocks(raw, out);
    }
}

/// Runs `c` over all of `raw` with a sync flush; false if it errs or stalls.
fn deflate_sync_flushed(c: &mut Compress, raw: &[u8], out: &mut Vec<u8>) -> bool {
    out.reserve(raw.len() / 2 + 64);
    loop {
        let (in_before, out_before) = (c.total_in(), c.total_out());
        let Ok(consumed) = usize::try_from(in_before) else {
            return false;
        };
        let Some(rest) = raw.get(consumed..) else {
            return false;
        };
        if c.compress_vec(rest, out, FlushCompress::Sync).is_err() {
            return false;
        }
        let all_in = c.total_in() == raw.len() as u64;
        // zlib's rule: the flush is complete once a call leaves output space unused.
        if all_in && out.len() < out.capacity() {
            return true;
        }
        let progressed = c.total_in() != in_before || c.total_out() != out_before;
        if !progressed && out.len() < out.capacity() {
            return false;
        }
        out.reserve(out.capacity().max(64));
    }
}

/// `raw` as non-final stored deflate blocks: always valid, never smaller.
fn stored_blocks(raw: &[u8], out: &mut Vec<u8>) {
    for chunk in raw.chunks(MAX_STORED) {
        // BFINAL=0, BTYPE=00 and five padding bits: one zero byte, as we start aligned.
        out.push(0);
        let len = chunk.len() as u16;
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(chunk);
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    fn member(body: &[u8], raw: &[u8]) -> Vec<u8> {
        let mut m = GZIP_HEADER.to_vec();
        m.extend_from_slice(body);
        m.extend_from_slice(&FINAL_EMPTY_BLOCK);
        m.extend_from_slice(&crc32fast::hash(raw).to_le_bytes());
        m.extend_from_slice(&(raw.len() as u32).to_le_bytes());
        m
    }

    fn gunzip(m: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(m)
            .read_to_end(&mut out)
            .unwrap();
        out
    }

    #[test]
    fn stored_fallback_is_valid_deflate() {
        let raw: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        for len in [0, 1, MAX_STORED, MAX_STORED + 1, raw.len()] {
            let mut body = Vec::new();
            stored_blocks(&raw[..len], &mut body);
            assert_eq!(gunzip(&member(&body, &raw[..len])), &raw[..len]);
        }
    }

    #[test]
    fn compressed_block_ends_byte_aligned_with_sync_marker() {
        let raw = b"abcabcabcabcabcabc".repeat(100);
        let mut body = Vec::new();
        deflate_block(&raw, &mut body);
        assert!(body.len() < raw.len() / 4, "{} bytes", body.len());
        assert_eq!(&body[body.len() - 4..], [0, 0, 0xff, 0xff]);
        assert_eq!(gunzip(&member(&body, &raw)), raw);
    }
}
