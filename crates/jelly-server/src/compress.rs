//! PLACEHOLDER for task B's shared-block compression module (same public API).
//!
//! The coordinator replaces this file with task B's `compress.rs`. It implements
//! identity, gzip (one member per subscriber: raw deflate blocks ended by a sync flush,
//! stitched with a per-subscriber header and trailer) and zstd (one frame per block)
//! so that the fan-out can be tested; brotli is never negotiated here.

use std::io::Write as _;

use bytes::Bytes;

/// A content coding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encoding {
    Identity,
    Gzip,
    Zstd,
    Brotli,
}

impl Encoding {
    /// The coding to use for an `Accept-Encoding` header (q-values; identity if none fits).
    pub fn negotiate(accept_encoding: Option<&str>) -> Encoding {
        let Some(a) = accept_encoding else {
            return Encoding::Identity;
        };
        let mut best: Option<(f32, u8, Encoding)> = None;
        for part in a.split(',') {
            let mut it = part.split(';');
            let name = it.next().unwrap_or("").trim().to_ascii_lowercase();
            let mut q = 1.0f32;
            for p in it {
                if let Some(v) = p.trim().strip_prefix("q=") {
                    q = v.trim().parse().unwrap_or(0.0);
                }
            }
            let (enc, pref) = match name.as_str() {
                "zstd" => (Encoding::Zstd, 3),
                "gzip" | "x-gzip" => (Encoding::Gzip, 1),
                _ => continue,
            };
            if q > 0.0 && best.is_none_or(|(bq, bp, _)| q > bq || (q == bq && pref > bp)) {
                best = Some((q, pref, enc));
            }
        }
        best.map_or(Encoding::Identity, |(_, _, e)| e)
    }

    /// The `Content-Encoding` value.
    pub fn content_encoding(self) -> Option<&'static str> {
        match self {
            Encoding::Identity => None,
            Encoding::Gzip => Some("gzip"),
            Encoding::Zstd => Some("zstd"),
            Encoding::Brotli => Some("br"),
        }
    }

    /// The coding for a `grpc-accept-encoding` list (gzip or zstd; identity otherwise).
    pub fn from_grpc(grpc_accept_encoding: Option<&str>) -> Encoding {
        let Some(a) = grpc_accept_encoding else {
            return Encoding::Identity;
        };
        let names: Vec<String> = a
            .split(',')
            .map(|s| s.trim().to_ascii_lowercase())
            .collect();
        if names.iter().any(|n| n == "zstd") {
            Encoding::Zstd
        } else if names.iter().any(|n| n == "gzip") {
            Encoding::Gzip
        } else {
            Encoding::Identity
        }
    }

    /// The `grpc-encoding` value.
    pub fn grpc_name(self) -> Option<&'static str> {
        match self {
            Encoding::Gzip => Some("gzip"),
            Encoding::Zstd => Some("zstd"),
            _ => None,
        }
    }

    /// Short name (metrics, group keys).
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Identity => "identity",
            Encoding::Gzip => "gzip",
            Encoding::Zstd => "zstd",
            Encoding::Brotli => "br",
        }
    }
}

/// An independently compressed chunk.
#[derive(Debug, Clone)]
pub struct Block {
    pub data: Bytes,
    pub raw_len: u64,
    pub crc32: u32,
}

/// Compresses `raw` as one independent block.
pub fn compress_block(enc: Encoding, raw: &[u8]) -> Block {
    let crc32 = crc32fast::hash(raw);
    let raw_len = raw.len() as u64;
    let data = match enc {
        Encoding::Identity | Encoding::Brotli => Bytes::copy_from_slice(raw),
        Encoding::Gzip => {
            let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
            let _ = e.write_all(raw);
            let _ = e.flush();
            Bytes::from(std::mem::take(e.get_mut()))
        }
        Encoding::Zstd => Bytes::from(zstd::bulk::compress(raw, 1).unwrap_or_default()),
    };
    Block {
        data,
        raw_len,
        crc32,
    }
}

/// Stitches shared blocks into one valid stream for one subscriber.
pub struct Stitcher {
    enc: Encoding,
    crc: crc32fast::Hasher,
    len: u64,
}

impl Stitcher {
    pub fn new(enc: Encoding) -> Stitcher {
        Stitcher {
            enc,
            crc: crc32fast::Hasher::new(),
            len: 0,
        }
    }

    pub fn header(&mut self) -> Bytes {
        match self.enc {
            Encoding::Gzip => Bytes::from_static(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff]),
            _ => Bytes::new(),
        }
    }

    pub fn block(&mut self, b: &Block) -> Bytes {
        if self.enc == Encoding::Gzip {
            self.crc
                .combine(&crc32fast::Hasher::new_with_initial_len(b.crc32, b.raw_len));
            self.len += b.raw_len;
        }
        b.data.clone()
    }

    pub fn trailer(&mut self) -> Bytes {
        match self.enc {
            Encoding::Gzip => {
                let mut t = vec![0x03, 0x00];
                t.extend_from_slice(&self.crc.clone().finalize().to_le_bytes());
                t.extend_from_slice(&(self.len as u32).to_le_bytes());
                Bytes::from(t)
            }
            _ => Bytes::new(),
        }
    }
}

/// One gRPC message payload compressed with `enc` (gzip member or zstd frame).
pub fn compress_grpc_message(enc: Encoding, msg: &[u8]) -> Bytes {
    match enc {
        Encoding::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            let _ = e.write_all(msg);
            Bytes::from(e.finish().unwrap_or_default())
        }
        Encoding::Zstd => Bytes::from(zstd::bulk::compress(msg, 1).unwrap_or_default()),
        _ => Bytes::copy_from_slice(msg),
    }
}
