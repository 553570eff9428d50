//! Brotli as one stream made of independently compressed runs of meta-blocks.
//!
//! Two brotli streams cannot simply be concatenated: each starts with the window
//! size (WBITS) and ends with an ISLAST meta-block, and meta-blocks are not
//! byte-aligned in general. The `brotli` crate's encoder can instead write a *bare
//! catable* stream (RFC 7932 terms in brackets):
//! - no WBITS and no final meta-block (`bare_stream`), starting at bit 0 of its
//!   first byte and ending byte-aligned, behind a padding metadata meta-block if
//!   needed (`byte_align`);
//! - nothing that depends on what the decoder saw before (`catable`): no static
//!   dictionary words (their distances depend on the absolute position in the
//!   stream), no distances from the distance cache it inherits, and the first two
//!   bytes in an uncompressed meta-block, so literal context (the previous two
//!   bytes) comes from the block itself.
//!
//! The crate's `BroCatli` joins *complete* catable streams by bit-shifting each
//! one's header onto the previous one's tail, which is per-subscriber work over the
//! bytes. Bare streams make it unnecessary: every block starts and ends on a byte
//! boundary, so the stream is [`HEADER`] (WBITS and an empty metadata meta-block to
//! reach a byte boundary), the blocks as they are, and [`TRAILER`] (ISLAST,
//! ISLASTEMPTY).

use ::brotli::enc::BrotliEncoderParams;

/// The window (log2 of bytes) the stream header announces: brotli's default, so
/// decoders size their ring buffer as for any brotli body. Each block is encoded
/// with a window just big enough for itself ([`block_lgwin`]), never bigger, so its
/// distances always fit.
const LGWIN: u16 = 22;

/// The smallest window a block is encoded with: at 16 and below the encoder picks
/// hashers whose set-up cost dominated small blocks (milliseconds per 1 KiB item at
/// quality 5 in our measurement).
const MIN_BLOCK_LGWIN: u32 = 18;

/// Blocks below this size use [`SMALL_QUALITY`], the others [`QUALITY`].
const SMALL_BLOCK: usize = 16 << 10;

/// Quality for blocks of [`SMALL_BLOCK`] and more. Informal, noisy measurement on
/// Jelly output (IoT weather data, 64 KiB batches): quality 3 10.8x, 4 11.8x, 5
/// 13.8x, with 5 taking about twice as long as 4 (and brotli is already several
/// times zstd's cost per byte). Brotli runs once per batch, shared by every
/// subscriber, but on the flush path, so the middle one. Qualities 0 and 1 use
/// a fast path that cannot write catable streams.
const QUALITY: i32 = 4;

/// Quality for small blocks (single items): setting up the encoder dominates and
/// quality 3 came within 1% of 4 and 5's ratio on 1 KiB items at about half the time.
const SMALL_QUALITY: i32 = 3;

/// WBITS for windows of 2^18..=2^24: a 1 bit, then LGWIN-17 in three bits.
const WBITS: u16 = ((LGWIN - 17) << 1) | 1;
const WBITS_LEN: u16 = 4;
/// An empty metadata meta-block: ISLAST=0, MNIBBLES=0b11 (metadata), reserved 0,
/// MSKIPBYTES=0 (no length bytes), then zero bits up to the byte boundary.
const EMPTY_METADATA: u16 = 0b00_0110;

/// WBITS and an empty metadata meta-block: 10 bits, padded to two bytes.
pub(super) const HEADER: [u8; 2] = {
    let bits = WBITS | (EMPTY_METADATA << WBITS_LEN);
    [bits as u8, (bits >> 8) as u8]
};

/// An empty last meta-block: ISLAST=1, ISLASTEMPTY=1, padded to a byte.
pub(super) const TRAILER: [u8; 1] = [0b11];

/// Uncompressed meta-blocks here carry at most 2^16 bytes (MNIBBLES=4).
const MAX_UNCOMPRESSED: usize = 1 << 16;

/// Appends `raw` to `out` as a bare catable brotli stream.
pub(super) fn brotli_block(raw: &[u8], out: &mut Vec<u8>) {
    let params = BrotliEncoderParams {
        quality: if raw.len() < SMALL_BLOCK {
            SMALL_QUALITY
        } else {
            QUALITY
        },
        lgwin: block_lgwin(raw.len()),
        size_hint: raw.len(),
        catable: true,
        appendable: true,
        use_dictionary: false,
        byte_align: true,
        bare_stream: true,
        magic_number: false,
        ..BrotliEncoderParams::default()
    };
    let start = out.len();
    if let Err(e) = ::brotli::BrotliCompress(&mut &raw[..], out, &params) {
        tracing::warn!(raw_len = raw.len(), error = %e, "brotli failed; sending the block uncompressed");
        out.truncate(start);
        uncompressed_meta_blocks(raw, out);
    }
}

/// The window for a block of `len` bytes: the smallest power of two holding it,
/// within [`MIN_BLOCK_LGWIN`]..=[`LGWIN`]. A smaller window means smaller encoder
/// tables to set up per block.
fn block_lgwin(len: usize) -> i32 {
    let fit = usize::BITS - len.saturating_sub(1).leading_zeros();
    fit.clamp(MIN_BLOCK_LGWIN, u32::from(LGWIN)) as i32
}

/// `raw` as non-final uncompressed meta-blocks: always valid and independent of
/// what precedes them, never smaller.
fn uncompressed_meta_blocks(raw: &[u8], out: &mut Vec<u8>) {
    for chunk in raw.chunks(MAX_UNCOMPRESSED) {
        // ISLAST=0, MNIBBLES=4 (code 0b00), MLEN-1 in 16 bits, ISUNCOMPRESSED=1,
        // four zero bits to the byte boundary: 24 bits.
        let mlen_minus_1 = (chunk.len() - 1) as u32;
        let header = (mlen_minus_1 << 3) | (1 << 19);
        out.extend_from_slice(&header.to_le_bytes()[..3]);
        out.extend_from_slice(chunk);
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    fn stream(body: &[u8]) -> Vec<u8> {
        [&HEADER[..], body, &TRAILER[..]].concat()
    }

    fn unbrotli(s: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        ::brotli::Decompressor::new(s, 4096)
            .read_to_end(&mut out)
            .unwrap();
        out
    }

    #[test]
    fn header_is_wbits_22_and_an_empty_metadata_block() {
        assert_eq!(HEADER, [0x6b, 0x00]);
        assert!(unbrotli(&stream(&[])).is_empty());
    }

    #[test]
    fn block_windows_fit_the_block_within_the_header_window() {
        assert_eq!(block_lgwin(0), 18);
        assert_eq!(block_lgwin(900), 18);
        assert_eq!(block_lgwin((1 << 19) + 1), 20);
        assert_eq!(block_lgwin(1 << 20), 20);
        assert_eq!(block_lgwin(usize::MAX), 22);
    }

    #[test]
    fn uncompressed_fallback_is_valid_brotli() {
        let raw: Vec<u8> = (0..200_000u32).map(|i| (i % 249) as u8).collect();
        for len in [0, 1, MAX_UNCOMPRESSED, MAX_UNCOMPRESSED + 1, raw.len()] {
            let mut body = Vec::new();
            uncompressed_meta_blocks(&raw[..len], &mut body);
            assert_eq!(unbrotli(&stream(&body)), &raw[..len]);
        }
    }
}
