//! Delimited Jelly frames and the two metadata entries the benchmark reads from each:
//! `h:seq` (the publisher's sequence number) and `h:sent` (its send time, unix µs).
//! Only field 15 of the frame is looked at; rows are skipped without decoding.

use jelly_proto::fields::frame;
use jelly_proto::wire::{Reader, WireType};

/// What one delivered item says about itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ItemMeta {
    /// `h:seq`, else the server's `offset`.
    pub seq: u64,
    /// `h:sent`, unix µs.
    pub sent_us: Option<u64>,
}

fn number(v: &[u8]) -> Option<u64> {
    std::str::from_utf8(v).ok()?.parse().ok()
}

/// Reads the metadata of one frame (without its length prefix). A frame without any
/// metadata (the options row of a splice stream) gives `None`.
pub fn item_meta(bytes: &[u8]) -> Result<Option<ItemMeta>, String> {
    let mut r = Reader::new(bytes);
    let (mut seq, mut offset, mut sent) = (None, None, None);
    while let Some((field, wt)) = r.tag().map_err(|e| e.to_string())? {
        if field == frame::METADATA && wt == WireType::Len {
            let mut e = r.message().map_err(|e| e.to_string())?;
            let (mut k, mut v): (&[u8], &[u8]) = (&[], &[]);
            while let Some((f, wt)) = e.tag().map_err(|e| e.to_string())? {
                match (f, wt) {
                    (frame::MAP_KEY, WireType::Len) => k = e.bytes().map_err(|e| e.to_string())?,
                    (frame::MAP_VALUE, WireType::Len) => {
                        v = e.bytes().map_err(|e| e.to_string())?
                    }
                    _ => e.skip(wt).map_err(|e| e.to_string())?,
                }
            }
            match k {
                b"h:seq" => seq = number(v),
                b"offset" => offset = number(v),
                b"h:sent" => sent = number(v),
                _ => {}
            }
        } else {
            r.skip(wt).map_err(|e| e.to_string())?;
        }
    }
    Ok(seq.or(offset).map(|seq| ItemMeta { seq, sent_us: sent }))
}

/// Splits a stream of varint-delimited frames, as pieces of it arrive.
#[derive(Default)]
pub struct Splitter {
    buf: Vec<u8>,
}

/// Largest frame accepted (the benchmark's items are about 1 KiB).
const MAX_FRAME: u64 = 16 << 20;

impl Splitter {
    /// Appends a piece and calls `f` with every complete frame.
    pub fn push(
        &mut self,
        piece: &[u8],
        mut f: impl FnMut(&[u8]) -> Result<(), String>,
    ) -> Result<(), String> {
        // Fast path: frames entirely inside `piece` with nothing buffered are not copied.
        let rest = if self.buf.is_empty() {
            let used = Self::frames_in(piece, &mut f)?;
            &piece[used..]
        } else {
            piece
        };
        if rest.is_empty() {
            return Ok(());
        }
        self.buf.extend_from_slice(rest);
        let used = Self::frames_in(&self.buf, &mut f)?;
        self.buf.drain(..used);
        if self.buf.is_empty() && self.buf.capacity() > 64 << 10 {
            self.buf = Vec::new();
        }
        Ok(())
    }

    /// Hands out the complete frames at the start of `buf`; returns the bytes used.
    fn frames_in(
        buf: &[u8],
        f: &mut impl FnMut(&[u8]) -> Result<(), String>,
    ) -> Result<usize, String> {
        let mut pos = 0;
        loop {
            let mut len: u64 = 0;
            let mut i = pos;
            let mut complete = false;
            for shift in (0..64).step_by(7) {
                let Some(&b) = buf.get(i) else { break };
                len |= u64::from(b & 0x7f) << shift;
                i += 1;
                if b & 0x80 == 0 {
                    complete = true;
                    break;
                }
            }
            if !complete {
                if i - pos >= 10 {
                    return Err("malformed frame length".into());
                }
                return Ok(pos);
            }
            if len > MAX_FRAME {
                return Err(format!("frame of {len} bytes"));
            }
            if ((buf.len() - i) as u64) < len {
                return Ok(pos);
            }
            let end = i + len as usize;
            f(&buf[i..end])?;
            pos = end;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jelly::splice::push_metadata;
    use jelly_proto::wire::put_varint;

    fn frame(seq: u64, sent: u64) -> Vec<u8> {
        // A row field (skipped) and the metadata as the server writes it.
        let mut f = vec![0x0a, 0x02, 0x08, 0x01];
        push_metadata(&mut f, "offset", b"77");
        push_metadata(&mut f, "h:sent", sent.to_string().as_bytes());
        push_metadata(&mut f, "h:seq", seq.to_string().as_bytes());
        f
    }

    #[test]
    fn metadata_and_splitting() {
        let mut wire = Vec::new();
        for i in 0..5 {
            let f = frame(i, 1000 + i);
            put_varint(&mut wire, f.len() as u64);
            wire.extend_from_slice(&f);
        }
        for split in 1..wire.len() {
            let mut s = Splitter::default();
            let mut got = Vec::new();
            for p in wire.chunks(split) {
                s.push(p, |f| {
                    got.push(item_meta(f)?.unwrap());
                    Ok(())
                })
                .unwrap();
            }
            let want: Vec<ItemMeta> = (0..5)
                .map(|i| ItemMeta {
                    seq: i,
                    sent_us: Some(1000 + i),
                })
                .collect();
            assert_eq!(got, want, "split {split}");
        }
    }

    #[test]
    fn offset_without_seq() {
        let mut f = Vec::new();
        push_metadata(&mut f, "offset", b"12");
        assert_eq!(
            item_meta(&f).unwrap(),
            Some(ItemMeta {
                seq: 12,
                sent_us: None
            })
        );
        assert_eq!(item_meta(&[0x0a, 0x00]).unwrap(), None);
    }
}
