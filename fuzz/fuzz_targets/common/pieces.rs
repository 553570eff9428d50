//! An input cut into pieces of sizes the fuzzer picks, handed out one by one or by a
//! reader: for the properties that say the pieces an input arrives in change nothing.

// Each target uses some of this.
#![allow(dead_code)]

use std::io::{self, Read};

/// Piece sizes, taken in turn: `0` is an empty piece (fed like any other), others
/// are `1..=32` bytes (small, so that every boundary is tried somewhere).
pub struct Cuts(Vec<usize>);

impl Cuts {
    /// Sizes from `bytes` (at least one size; all-empty sizes become one byte each).
    pub fn new(bytes: &[u8]) -> Cuts {
        let mut sizes: Vec<usize> = bytes.iter().map(|&b| usize::from(b % 33)).collect();
        if sizes.iter().all(|&s| s == 0) {
            sizes = vec![1];
        }
        Cuts(sizes)
    }

    /// `data` cut into pieces; every byte is in exactly one of them, in order.
    pub fn pieces<'a>(&self, data: &'a [u8]) -> Vec<&'a [u8]> {
        let mut out = Vec::new();
        let mut rest = data;
        let mut i = 0;
        while !rest.is_empty() {
            let (piece, after) = rest.split_at(self.0[i % self.0.len()].min(rest.len()));
            out.push(piece);
            rest = after;
            i += 1;
        }
        out
    }

    /// A reader of `data` whose reads return at most the next size (at least one byte).
    pub fn reader<'a>(&self, data: &'a [u8]) -> PieceReader<'a> {
        PieceReader {
            rest: data,
            sizes: self.0.iter().map(|&s| s.max(1)).collect(),
            next: 0,
        }
    }
}

/// See [`Cuts::reader`].
pub struct PieceReader<'a> {
    rest: &'a [u8],
    sizes: Vec<usize>,
    next: usize,
}

impl Read for PieceReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.sizes[self.next % self.sizes.len()]
            .min(buf.len())
            .min(self.rest.len());
        self.next += 1;
        buf[..n].copy_from_slice(&self.rest[..n]);
        self.rest = &self.rest[n..];
        Ok(n)
    }
}
