//! The on-disk record format of the file log, and CRC-32C.
//!
//! ```text
//! record = u32 len | u32 crc32c(body) | body            (len = body length in bytes)
//! body   = u64 offset | u64 timestamp_ms | u32 statements
//!        | str source | u16 n | (str key | str value){n} | bytes frame
//! str    = u32 length | UTF-8 bytes
//! bytes  = u32 length | bytes
//! ```
//!
//! All integers are little-endian. The checksum is CRC-32C (Castagnoli, the iSCSI /
//! ext4 / Kafka polynomial `0x1EDC6F41`, reflected), computed over the body only.
//! A body must be consumed exactly by the grammar above; trailing bytes are corruption.

use bytes::Bytes;

use crate::item::{Item, NewItem};

/// Bytes before the body: `len` and `crc`.
pub(crate) const HEADER_LEN: usize = 8;

/// The smallest possible body: offset, timestamp, statements, empty source, no
/// headers, empty frame.
pub(crate) const MIN_BODY_LEN: usize = 8 + 8 + 4 + 4 + 2 + 4;

/// Length of the body an item encodes to.
pub(crate) fn body_len(item: &NewItem) -> usize {
    let headers: usize = item
        .headers
        .iter()
        .map(|(k, v)| 8 + k.len() + v.len())
        .sum();
    MIN_BODY_LEN + item.source.len() + headers + item.frame.len()
}

/// Appends one record (header and body) for `item` to `out`.
///
/// The caller has checked the item with [`body_len`] against the size limit (which
/// is below `u32::MAX`) and that it has at most `u16::MAX` headers, so every length
/// fits its field.
pub(crate) fn encode(offset: u64, timestamp_ms: u64, item: &NewItem, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0; HEADER_LEN]);
    out.extend_from_slice(&offset.to_le_bytes());
    out.extend_from_slice(&timestamp_ms.to_le_bytes());
    out.extend_from_slice(&item.statements.to_le_bytes());
    put_bytes(out, item.source.as_bytes());
    out.extend_from_slice(&(item.headers.len() as u16).to_le_bytes());
    for (k, v) in &item.headers {
        put_bytes(out, k.as_bytes());
        put_bytes(out, v.as_bytes());
    }
    put_bytes(out, &item.frame);
    let body = &out[start + HEADER_LEN..];
    let len = body.len() as u32;
    let crc = crc32c(body);
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

/// Splits a record header into `(len, crc)`.
pub(crate) fn parse_header(h: &[u8; HEADER_LEN]) -> (u32, u32) {
    let len = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
    let crc = u32::from_le_bytes([h[4], h[5], h[6], h[7]]);
    (len, crc)
}

/// Offset and timestamp of a body (which must be at least [`MIN_BODY_LEN`] long).
pub(crate) fn peek(body: &[u8]) -> Option<(u64, u64)> {
    let mut c = Cursor { b: body, pos: 0 };
    Some((c.u64()?, c.u64()?))
}

/// Decodes a checked body into an item. The frame shares `body`'s allocation.
pub(crate) fn decode(body: Bytes) -> Result<Item, &'static str> {
    let mut c = Cursor { b: &body, pos: 0 };
    let offset = c.u64().ok_or("short body")?;
    let timestamp_ms = c.u64().ok_or("short body")?;
    let statements = c.u32().ok_or("short body")?;
    let source = c.str()?;
    let n = c.u16().ok_or("short body")?;
    let mut headers = Vec::with_capacity(usize::from(n).min(64));
    for _ in 0..n {
        let k = c.str()?;
        let v = c.str()?;
        headers.push((k, v));
    }
    let len = c.u32().ok_or("short body")? as usize;
    let start = c.pos;
    let end = start.checked_add(len).ok_or("frame length overflows")?;
    if end != body.len() {
        return Err(if end > body.len() {
            "frame runs past the record"
        } else {
            "trailing bytes after the frame"
        });
    }
    Ok(Item {
        offset,
        timestamp_ms,
        frame: body.slice(start..end),
        statements,
        source,
        headers,
    })
}

struct Cursor<'a> {
    b: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.b.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2)
            .and_then(|s| s.try_into().ok())
            .map(u16::from_le_bytes)
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .and_then(|s| s.try_into().ok())
            .map(u32::from_le_bytes)
    }
    fn u64(&mut self) -> Option<u64> {
        self.take(8)
            .and_then(|s| s.try_into().ok())
            .map(u64::from_le_bytes)
    }
    fn str(&mut self) -> Result<String, &'static str> {
        let len = self.u32().ok_or("short body")? as usize;
        let s = self.take(len).ok_or("string runs past the record")?;
        String::from_utf8(s.to_vec()).map_err(|_| "string is not UTF-8")
    }
}

/// CRC-32C (Castagnoli). With the CPU's CRC instruction where there is one (SSE 4.2,
/// ARMv8 CRC): every appended record is checksummed on the publisher's path, and the
/// software version's 8 KiB of tables were cold cache lines on every item after idle.
pub(crate) fn crc32c(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_check_values() {
        // The standard check value, and the iSCSI test vectors (RFC 3720 B.4).
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(&[0u8; 32]), 0x8A91_36AA);
        assert_eq!(crc32c(&[0xffu8; 32]), 0x62A8_AB43);
        let inc: Vec<u8> = (0u8..32).collect();
        assert_eq!(crc32c(&inc), 0x46DD_794E);
        assert_eq!(crc32c(b""), 0);
    }

    #[test]
    fn encode_decode() {
        let item = NewItem {
            frame: Bytes::from_static(b"frame bytes"),
            statements: 7,
            source: "src".into(),
            headers: vec![("k".into(), "v".into()), ("".into(), "ü".into())],
        };
        let mut out = vec![1, 2, 3];
        encode(42, 1234, &item, &mut out);
        assert_eq!(out.len(), 3 + HEADER_LEN + body_len(&item));
        let rec = &out[3..];
        let (len, crc) = parse_header(rec[..8].try_into().unwrap());
        let body = &rec[8..];
        assert_eq!(len as usize, body.len());
        assert_eq!(crc, crc32c(body));
        assert_eq!(peek(body), Some((42, 1234)));
        let got = decode(Bytes::copy_from_slice(body)).unwrap();
        assert_eq!(got.offset, 42);
        assert_eq!(got.timestamp_ms, 1234);
        assert_eq!(got.statements, 7);
        assert_eq!(got.source, "src");
        assert_eq!(got.headers, item.headers);
        assert_eq!(got.frame, item.frame);
        // One byte too many or too few is an error, not a silently different item.
        let mut longer = body.to_vec();
        longer.push(0);
        assert!(decode(Bytes::from(longer)).is_err());
        assert!(decode(Bytes::copy_from_slice(&body[..body.len() - 1])).is_err());
    }
}
