//! The CRC-32 of a concatenation from the CRC-32s of its parts, in a few table
//! look-ups: the gzip [`Stitcher`](super::Stitcher) does this once per block per
//! subscriber, so it has to be cheap.
//!
//! CRC(A ‖ B) = CRC(A) · x^(8·|B|) ⊕ CRC(B) over GF(2) modulo the CRC polynomial
//! (the identity behind zlib's `crc32_combine`). Multiplying by x^(8·|B|) is a
//! product of the factors x^(8·2^i) for the bits i set in |B|; multiplying by a
//! fixed factor is linear, so each factor gets four 256-entry tables (one per
//! byte of the CRC) and a multiplication is four look-ups. `crc32fast`'s own
//! `combine` does each multiplication bit by bit, about 20 times slower.

use std::sync::LazyLock;

/// The CRC-32 (IEEE) polynomial, bit-reflected.
const POLY: u32 = 0xedb8_8320;

/// `TABLES[i][k][b]` = (b · x^(8k)) · x^(8·2^i), reflected: multiplying a value
/// by x^(8·2^i) is the XOR of its four bytes' entries. 32 tables are all there
/// are: the polynomial's order divides 2^32 - 1, so x^(2^(n+32)) = x^(2^n) and the
/// factors repeat with period 32 in i (zlib relies on the same).
static TABLES: LazyLock<Box<[[[u32; 256]; 4]; 32]>> = LazyLock::new(|| {
    let mut tables = Box::new([[[0u32; 256]; 4]; 32]);
    // x^8, reflected; then square for each next factor.
    let mut factor: u32 = 0x0080_0000;
    for table in tables.iter_mut() {
        for (k, bytes) in table.iter_mut().enumerate() {
            for (b, entry) in bytes.iter_mut().enumerate() {
                *entry = multiply(factor, (b as u32) << (8 * k));
            }
        }
        factor = multiply(factor, factor);
    }
    tables
});

/// a · b modulo the polynomial, both reflected (bit 31 is x^0).
fn multiply(a: u32, mut b: u32) -> u32 {
    let mut product = 0;
    for i in 0..32 {
        product ^= b & ((a >> (31 - i)) & 1).wrapping_neg();
        b = (b >> 1) ^ ((b & 1).wrapping_neg() & POLY);
    }
    product
}

/// The CRC-32 of A ‖ B, given `crc_a` = CRC-32(A), `crc_b` = CRC-32(B) and
/// `len_b` = |B|.
pub(super) fn crc32_append(crc_a: u32, crc_b: u32, len_b: u64) -> u32 {
    let tables = &*TABLES;
    let mut shifted = crc_a;
    let mut rest = len_b;
    let mut i = 0;
    while rest != 0 {
        if rest & 1 != 0 {
            let t = &tables[i & 31];
            shifted = t[0][(shifted & 0xff) as usize]
                ^ t[1][((shifted >> 8) & 0xff) as usize]
                ^ t[2][((shifted >> 16) & 0xff) as usize]
                ^ t[3][(shifted >> 24) as usize];
        }
        rest >>= 1;
        i += 1;
    }
    shifted ^ crc_b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_matches_the_crc_of_the_concatenation() {
        let data: Vec<u8> = (0..70_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for split in [0, 1, 2, 3, 255, 256, 4096, 65_535, 65_536, 69_999, 70_000] {
            for end in [split, split + (data.len() - split) / 2, data.len()] {
                let (a, b) = (&data[..split], &data[split..end]);
                assert_eq!(
                    crc32_append(crc32fast::hash(a), crc32fast::hash(b), b.len() as u64),
                    crc32fast::hash(&data[..end]),
                    "split {split}, end {end}"
                );
            }
        }
    }

    #[test]
    fn append_agrees_with_crc32fast_combine_for_huge_lengths() {
        for len in [1u64 << 32, (1 << 32) + 12_345, u64::MAX, 0xdead_beef_cafe] {
            let mut expected = crc32fast::Hasher::new_with_initial_len(0x1234_5678, 0);
            expected.combine(&crc32fast::Hasher::new_with_initial_len(0x9abc_def0, len));
            assert_eq!(
                crc32_append(0x1234_5678, 0x9abc_def0, len),
                expected.finalize(),
                "len {len:#x}"
            );
        }
    }
}
