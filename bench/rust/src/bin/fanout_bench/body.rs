//! The body of a streamed HTTP/1.1 response, as a subscriber sees it: the head, the
//! chunked transfer coding, then the content coding (identity, gzip or zstd), decoded
//! incrementally as bytes arrive, with small per-connection buffers.

use std::io::Write as _;

/// What the response head says.
#[derive(Debug)]
pub struct Head {
    pub status: u16,
    pub chunked: bool,
    pub content_encoding: Option<String>,
    /// Bytes after the head that were read with it (the start of the body).
    pub rest_start: usize,
}

/// Parses the response head in `buf`, or `None` if it is not complete yet.
pub fn parse_head(buf: &[u8]) -> Result<Option<Head>, String> {
    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
        if buf.len() > 16 << 10 {
            return Err("response head over 16 KiB".into());
        }
        return Ok(None);
    };
    let text = std::str::from_utf8(&buf[..end]).map_err(|_| "response head is not UTF-8")?;
    let mut lines = text.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line `{status_line}`"))?;
    let mut chunked = false;
    let mut content_encoding = None;
    for l in lines {
        let Some((k, v)) = l.split_once(':') else {
            continue;
        };
        let v = v.trim();
        if k.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked") {
            chunked = true;
        } else if k.eq_ignore_ascii_case("content-encoding") {
            content_encoding = Some(v.to_ascii_lowercase());
        }
    }
    Ok(Some(Head {
        status,
        chunked,
        content_encoding,
        rest_start: end + 4,
    }))
}

/// Incremental decoder of the chunked transfer coding.
#[derive(Debug, Default)]
pub struct Chunked {
    state: ChunkState,
    /// Hex digits of the size line read so far.
    size: u64,
    /// Inside a chunk extension (ignored up to the line end).
    in_ext: bool,
}

#[derive(Debug, Default, PartialEq, Eq)]
enum ChunkState {
    #[default]
    Size,
    SizeLf,
    Data(u64),
    DataCr,
    DataLf,
    /// The last chunk was read; trailers and the final CRLF are ignored.
    Done,
}

impl Chunked {
    /// Feeds raw bytes; calls `out` with each piece of chunk data.
    pub fn push(
        &mut self,
        mut buf: &[u8],
        mut out: impl FnMut(&[u8]) -> Result<(), String>,
    ) -> Result<(), String> {
        while !buf.is_empty() {
            match self.state {
                ChunkState::Size => {
                    let b = buf[0];
                    buf = &buf[1..];
                    match b {
                        b'\r' => self.state = ChunkState::SizeLf,
                        _ if self.in_ext => {}
                        b';' => self.in_ext = true,
                        _ => {
                            let d = (b as char)
                                .to_digit(16)
                                .ok_or_else(|| format!("bad chunk size byte {b:#x}"))?;
                            if self.size > (1 << 40) {
                                return Err("chunk size too large".into());
                            }
                            self.size = self.size * 16 + u64::from(d);
                        }
                    }
                }
                ChunkState::SizeLf => {
                    if buf[0] != b'\n' {
                        return Err("chunk size line without LF".into());
                    }
                    buf = &buf[1..];
                    self.in_ext = false;
                    self.state = if self.size == 0 {
                        ChunkState::Done
                    } else {
                        ChunkState::Data(self.size)
                    };
                    self.size = 0;
                }
                ChunkState::Data(left) => {
                    let n = (left as usize).min(buf.len());
                    out(&buf[..n])?;
                    buf = &buf[n..];
                    self.state = if n as u64 == left {
                        ChunkState::DataCr
                    } else {
                        ChunkState::Data(left - n as u64)
                    };
                }
                ChunkState::DataCr | ChunkState::DataLf => {
                    let want = if self.state == ChunkState::DataCr {
                        b'\r'
                    } else {
                        b'\n'
                    };
                    if buf[0] != want {
                        return Err("chunk data not followed by CRLF".into());
                    }
                    buf = &buf[1..];
                    self.state = if want == b'\r' {
                        ChunkState::DataLf
                    } else {
                        ChunkState::Size
                    };
                }
                ChunkState::Done => return Ok(()),
            }
        }
        Ok(())
    }

    /// Whether the last chunk was seen.
    pub fn done(&self) -> bool {
        self.state == ChunkState::Done
    }
}

/// The content coding of a body, decoded incrementally.
pub enum Decoding {
    Identity,
    Gzip(Box<Gunzip>),
    Zstd(Box<zstd::stream::write::Decoder<'static, Vec<u8>>>),
}

/// A streaming gzip decoder that keeps only the inflate state per connection (about
/// 43 KiB) and inflates into a buffer shared by the thread: `flate2::write::GzDecoder`
/// adds a 32 KiB buffer of its own, which is 2 GB over 60,000 subscribers.
pub struct Gunzip {
    /// Header bytes while the gzip header is incomplete.
    header: Vec<u8>,
    in_body: bool,
    done: bool,
    inflate: flate2::Decompress,
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0; 64 << 10]);
}

impl Gunzip {
    fn new() -> Gunzip {
        Gunzip {
            header: Vec::new(),
            in_body: false,
            done: false,
            inflate: flate2::Decompress::new(false),
        }
    }

    /// The length of a complete gzip header at the start of `h` (RFC 1952), if complete.
    fn header_len(h: &[u8]) -> Result<Option<usize>, String> {
        if h.len() < 10 {
            return Ok(None);
        }
        if h[0] != 0x1f || h[1] != 0x8b || h[2] != 8 {
            return Err("not a gzip (deflate) stream".into());
        }
        let flags = h[3];
        let mut pos = 10;
        if flags & 4 != 0 {
            let Some(x) = h.get(pos..pos + 2) else {
                return Ok(None);
            };
            pos += 2 + usize::from(u16::from_le_bytes([x[0], x[1]]));
        }
        for bit in [8, 16] {
            if flags & bit != 0 {
                let Some(z) = h.get(pos..).and_then(|r| r.iter().position(|&b| b == 0)) else {
                    return Ok(None);
                };
                pos += z + 1;
            }
        }
        if flags & 2 != 0 {
            pos += 2;
        }
        Ok((h.len() >= pos).then_some(pos))
    }

    fn push(
        &mut self,
        input: &[u8],
        out: &mut impl FnMut(&[u8]) -> Result<(), String>,
    ) -> Result<(), String> {
        if self.done {
            return Ok(());
        }
        let owned;
        let mut data = input;
        if !self.in_body {
            self.header.extend_from_slice(input);
            let Some(n) = Self::header_len(&self.header)? else {
                if self.header.len() > 64 << 10 {
                    return Err("gzip header over 64 KiB".into());
                }
                return Ok(());
            };
            self.in_body = true;
            owned = std::mem::take(&mut self.header);
            data = &owned[n..];
        }
        SCRATCH.with(|scratch| {
            let mut buf = scratch.borrow_mut();
            loop {
                let (in0, out0) = (self.inflate.total_in(), self.inflate.total_out());
                let status = self
                    .inflate
                    .decompress(data, &mut buf, flate2::FlushDecompress::Sync)
                    .map_err(|e| format!("gzip: {e}"))?;
                let used = (self.inflate.total_in() - in0) as usize;
                let made = (self.inflate.total_out() - out0) as usize;
                data = &data[used..];
                if made > 0 {
                    out(&buf[..made])?;
                }
                if status == flate2::Status::StreamEnd {
                    // The CRC32/ISIZE trailer follows; the stream is over.
                    self.done = true;
                    return Ok(());
                }
                if data.is_empty() && made < buf.len() {
                    return Ok(());
                }
                if used == 0 && made == 0 {
                    return Err("gzip: no progress".into());
                }
            }
        })
    }
}

impl Decoding {
    /// The decoder for a `Content-Encoding` value.
    pub fn for_encoding(enc: Option<&str>) -> Result<Decoding, String> {
        match enc {
            None | Some("identity") => Ok(Decoding::Identity),
            Some("gzip") => Ok(Decoding::Gzip(Box::new(Gunzip::new()))),
            Some("zstd") => Ok(Decoding::Zstd(Box::new(
                zstd::stream::write::Decoder::new(Vec::with_capacity(4096))
                    .map_err(|e| format!("zstd decoder: {e}"))?,
            ))),
            Some(other) => Err(format!("unsupported content encoding `{other}`")),
        }
    }

    /// Decodes `data` and calls `out` with whatever plain bytes it yields so far.
    pub fn push(
        &mut self,
        data: &[u8],
        mut out: impl FnMut(&[u8]) -> Result<(), String>,
    ) -> Result<(), String> {
        // The write decoders keep their last output until flushed; flush per piece so
        // an item is seen as soon as its bytes arrive.
        let plain = match self {
            Decoding::Identity => return out(data),
            Decoding::Gzip(d) => return d.push(data, &mut out),
            Decoding::Zstd(d) => {
                d.write_all(data)
                    .and_then(|_| d.flush())
                    .map_err(|e| format!("zstd: {e}"))?;
                d.get_mut()
            }
        };
        if !plain.is_empty() {
            out(plain)?;
            plain.clear();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_in_any_split() {
        let wire = b"5;x=y\r\nhello\r\n1\r\n \r\n6\r\nworld!\r\n0\r\n\r\n";
        for split in 1..wire.len() {
            let mut c = Chunked::default();
            let mut got = Vec::new();
            for part in wire.chunks(split) {
                c.push(part, |d| {
                    got.extend_from_slice(d);
                    Ok(())
                })
                .unwrap();
            }
            assert_eq!(got, b"hello world!");
            assert!(c.done());
        }
    }

    #[test]
    fn gzip_stream_piecewise() {
        use flate2::{Compression, write::GzEncoder};
        let mut enc = GzEncoder::new(Vec::new(), Compression::fast());
        enc.write_all(b"first part ").unwrap();
        enc.flush().unwrap();
        let first_len = enc.get_ref().len();
        enc.write_all(b"second part").unwrap();
        let wire = enc.finish().unwrap();
        let mut d = Decoding::for_encoding(Some("gzip")).unwrap();
        let mut got = Vec::new();
        d.push(&wire[..first_len], |p| {
            got.extend_from_slice(p);
            Ok(())
        })
        .unwrap();
        // Everything before the sync flush is out before the rest arrives.
        assert_eq!(got, b"first part ");
        d.push(&wire[first_len..], |p| {
            got.extend_from_slice(p);
            Ok(())
        })
        .unwrap();
        assert_eq!(got, b"first part second part");
    }

    #[test]
    fn gzip_in_any_split_with_name_header() {
        use flate2::{Compression, GzBuilder};
        let plain: Vec<u8> = (0..20_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        let mut enc = GzBuilder::new()
            .filename("x.jelly")
            .comment("c")
            .write(Vec::new(), Compression::fast());
        enc.write_all(&plain).unwrap();
        let wire = enc.finish().unwrap();
        for split in [1, 7, 100, 4096, wire.len()] {
            let mut d = Decoding::for_encoding(Some("gzip")).unwrap();
            let mut got = Vec::new();
            for part in wire.chunks(split) {
                d.push(part, |p| {
                    got.extend_from_slice(p);
                    Ok(())
                })
                .unwrap();
            }
            assert_eq!(got, plain, "split {split}");
        }
    }

    #[test]
    fn head() {
        let wire =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\ncontent-encoding: gzip\r\n\r\nab";
        let h = parse_head(wire).unwrap().unwrap();
        assert_eq!(h.status, 200);
        assert!(h.chunked);
        assert_eq!(h.content_encoding.as_deref(), Some("gzip"));
        assert_eq!(&wire[h.rest_start..], b"ab");
        assert!(parse_head(b"HTTP/1.1 200 OK\r\n").unwrap().is_none());
    }
}
