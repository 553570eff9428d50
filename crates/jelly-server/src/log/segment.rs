//! Segment files: naming, the in-memory view of one segment, and a buffered record
//! reader over positioned reads (`pread`), shared by recovery and by `read`.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::record::{self, HEADER_LEN, MIN_BODY_LEN};

/// File name of the segment whose first record has offset `base`.
pub(crate) fn file_name(base: u64) -> String {
    format!("{base:020}.seg")
}

/// The base offset encoded in a segment file name, if `name` is one.
pub(crate) fn parse_file_name(name: &str) -> Option<u64> {
    let stem = name.strip_suffix(".seg")?;
    if stem.is_empty() || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

/// One sparse-index entry: the record holding `offset` starts at byte `pos`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IndexEntry {
    pub offset: u64,
    pub pos: u64,
    pub timestamp_ms: u64,
}

/// What the log knows about one segment. Only the writer changes it (under the
/// state lock); readers look at it under the lock and then read the file without it.
#[derive(Debug)]
pub(crate) struct Segment {
    pub base: u64,
    pub path: PathBuf,
    pub file: Arc<File>,
    /// Bytes of complete, written records (readers never look past this).
    pub len: u64,
    /// Offset after the last record.
    pub next: u64,
    /// Timestamps of the first and the last record (0 while empty).
    pub first_ts: u64,
    pub last_ts: u64,
    /// Sorted by offset (and, timestamps being monotonic, by timestamp).
    pub index: Vec<IndexEntry>,
}

impl Segment {
    pub fn is_empty(&self) -> bool {
        self.next == self.base
    }

    /// Position of a record at or before `offset` to start scanning from.
    pub fn position_for_offset(&self, offset: u64) -> u64 {
        let i = self.index.partition_point(|e| e.offset <= offset);
        if i == 0 { 0 } else { self.index[i - 1].pos }
    }

    /// Position of a record at or before the first record with a timestamp at or
    /// after `ts`.
    pub fn position_for_timestamp(&self, ts: u64) -> u64 {
        let i = self.index.partition_point(|e| e.timestamp_ms < ts);
        if i == 0 { 0 } else { self.index[i - 1].pos }
    }
}

/// Why a record could not be read.
#[derive(Debug)]
pub(crate) enum ScanError {
    Io(std::io::Error),
    /// A record that is incomplete or fails its checksum, starting at `pos`.
    Bad {
        pos: u64,
        reason: String,
    },
}

impl From<std::io::Error> for ScanError {
    fn from(e: std::io::Error) -> Self {
        ScanError::Io(e)
    }
}

const WINDOW: usize = 256 << 10;

/// Reads checked records from `pos` up to `end` of a segment file.
pub(crate) struct RecordReader<'a> {
    file: &'a File,
    pos: u64,
    end: u64,
    window: Vec<u8>,
    window_start: u64,
    big: Vec<u8>,
    body: Body,
}

#[derive(Clone, Copy)]
enum Body {
    None,
    Window { start: usize, len: usize },
    Big,
}

impl<'a> RecordReader<'a> {
    pub fn new(file: &'a File, pos: u64, end: u64) -> Self {
        RecordReader {
            file,
            pos,
            end,
            window: Vec::new(),
            window_start: 0,
            big: Vec::new(),
            body: Body::None,
        }
    }

    /// Position of the next record (after a successful [`RecordReader::next`], the
    /// end of the record just returned).
    pub fn pos(&self) -> u64 {
        self.pos
    }

    /// The body of the record last returned by [`RecordReader::next`].
    pub fn body(&self) -> &[u8] {
        match self.body {
            Body::None => &[],
            Body::Window { start, len } => &self.window[start..start + len],
            Body::Big => &self.big,
        }
    }

    /// Advances to the next record and returns its position, or `None` at `end`.
    /// Checks the length against `end` and the CRC of the body.
    pub fn next(&mut self) -> Result<Option<u64>, ScanError> {
        self.body = Body::None;
        let pos = self.pos;
        if pos >= self.end {
            return Ok(None);
        }
        let remaining = self.end - pos;
        if remaining < HEADER_LEN as u64 {
            return Err(ScanError::Bad {
                pos,
                reason: format!("partial record header ({remaining} bytes)"),
            });
        }
        let h: [u8; HEADER_LEN] = self
            .slice(pos, HEADER_LEN)?
            .try_into()
            .map_err(|_| bad(pos, "short header read"))?;
        let (len, crc) = record::parse_header(&h);
        let len = len as usize;
        if len < MIN_BODY_LEN {
            return Err(bad(pos, &format!("record length {len} below the minimum")));
        }
        if (len as u64) > remaining - HEADER_LEN as u64 {
            return Err(bad(
                pos,
                &format!(
                    "record length {len} runs past the end of the segment ({} bytes left)",
                    remaining - HEADER_LEN as u64
                ),
            ));
        }
        let body_pos = pos + HEADER_LEN as u64;
        if len <= WINDOW {
            self.slice(body_pos, len)?;
            let start = (body_pos - self.window_start) as usize;
            self.body = Body::Window { start, len };
        } else {
            self.big.clear();
            self.big.resize(len, 0);
            self.file.read_exact_at(&mut self.big, body_pos)?;
            self.body = Body::Big;
        }
        let actual = record::crc32c(self.body());
        if actual != crc {
            self.body = Body::None;
            return Err(bad(
                pos,
                &format!("CRC mismatch (stored {crc:08x}, computed {actual:08x})"),
            ));
        }
        self.pos = body_pos + len as u64;
        Ok(Some(pos))
    }

    /// `n` (at most `WINDOW`) bytes at `pos` (with `pos + n <= end`), from the window.
    fn slice(&mut self, pos: u64, n: usize) -> std::io::Result<&[u8]> {
        let in_window = pos >= self.window_start
            && pos + n as u64 <= self.window_start + self.window.len() as u64;
        if !in_window {
            let want = (self.end - pos).min(WINDOW as u64) as usize;
            self.window.clear();
            self.window.resize(want, 0);
            self.file.read_exact_at(&mut self.window, pos)?;
            self.window_start = pos;
        }
        let start = (pos - self.window_start) as usize;
        Ok(&self.window[start..start + n])
    }
}

fn bad(pos: u64, reason: &str) -> ScanError {
    ScanError::Bad {
        pos,
        reason: reason.to_owned(),
    }
}

/// Path display used in errors.
pub(crate) fn display(path: &Path) -> String {
    path.display().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(file_name(42), "00000000000000000042.seg");
        assert_eq!(parse_file_name(&file_name(42)), Some(42));
        assert_eq!(parse_file_name(&file_name(u64::MAX)), Some(u64::MAX));
        assert_eq!(parse_file_name("42.seg.tmp"), None);
        assert_eq!(parse_file_name("+42.seg"), None);
        assert_eq!(parse_file_name(".seg"), None);
    }
}
