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
    /// Where the record that last failed its checksum ends (its length was sound).
    bad_end: Option<u64>,
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
            bad_end: None,
        }
    }

    /// After [`RecordReader::next`] failed on a record's checksum (its length within
    /// the segment), moves past that record and returns `true`; otherwise `false`.
    /// The length is not under the checksum: if it was the damaged part, the position
    /// reached is no record boundary, and what is read there must still pass a
    /// checksum (and, in [`crate::log::FileLog`]'s reads, carry the offset asked for)
    /// before it is served.
    pub fn step_over_bad(&mut self) -> bool {
        match self.bad_end.take() {
            Some(end) => {
                self.pos = end;
                true
            }
            None => false,
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
        self.bad_end = None;
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
            self.bad_end = Some(body_pos + len as u64);
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

/// Smallest record on disk: a header and the smallest body.
const MIN_RECORD: u64 = (HEADER_LEN + MIN_BODY_LEN) as u64;

/// Bytes of a candidate record that the resync looks at before checking its CRC: the
/// header and the body's offset.
const PEEK: usize = HEADER_LEN + 8;

/// Checked records found after a bad one by [`valid_after`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Survivors {
    /// Position of the first of them.
    pub first_pos: u64,
    pub records: u64,
    /// Their bytes, headers included.
    pub bytes: u64,
    pub first_offset: u64,
    pub last_offset: u64,
    /// The search stopped at its work limit: there may be more.
    pub incomplete: bool,
}

impl std::fmt::Display for Survivors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}{} valid record(s) ({} bytes, offsets {} to {}) follow from byte {}",
            if self.incomplete { "at least " } else { "" },
            self.records,
            self.bytes,
            self.first_offset,
            self.last_offset,
            self.first_pos,
        )
    }
}

/// What [`valid_after`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum After {
    /// No checked record anywhere after the bad one: the damage is a tail.
    Nothing,
    /// Checked records follow the bad one.
    Records(Survivors),
    /// The search hit its work limit before finding any record, so it cannot tell.
    Unknown,
}

/// Looks for checked records after the bad record at `bad` (which should have held
/// offset `expected`), up to `end`.
///
/// A torn write only ever damages the end of the newest segment: a record that checks
/// out *after* a bad one means the bad one is damage in the middle of the log, and
/// cutting the file there would drop records that were acknowledged. There is no
/// reliable length to skip by (the bad record's length may be the damaged part), so
/// the search resynchronises byte by byte. A position counts only if its length fits
/// the file, the body's offset could follow `expected` given the distance from the
/// bad record (a record takes at least [`MIN_RECORD`] bytes, so `k` records later is
/// at least `k * MIN_RECORD` bytes later), and the CRC matches. The offset test makes
/// a random match practically impossible and keeps the CRC checks, the expensive
/// part, to real record boundaries; a work limit (about twice the bytes searched)
/// bounds the rest. Once a record is found, the records after it are read in order
/// and counted, resynchronising again at any further damage.
pub(crate) fn valid_after(
    file: &File,
    bad: u64,
    end: u64,
    expected: u64,
) -> std::io::Result<After> {
    let mut budget = end
        .saturating_sub(bad)
        .saturating_mul(2)
        .saturating_add(64 << 20);
    let mut found: Option<Survivors> = None;
    let mut anchor = bad;
    let mut expected = expected;
    loop {
        let q = match resync(file, anchor + 1, end, anchor, expected, &mut budget)? {
            Resync::Found(q) => q,
            Resync::None => break,
            Resync::OutOfBudget => {
                if let Some(s) = &mut found {
                    s.incomplete = true;
                }
                return Ok(found.map_or(After::Unknown, After::Records));
            }
        };
        let mut reader = RecordReader::new(file, q, end);
        let mut run_next: Option<u64> = None;
        loop {
            let pos = match reader.next() {
                Ok(Some(pos)) => pos,
                Ok(None) => return Ok(found.map_or(After::Nothing, After::Records)),
                Err(ScanError::Io(e)) => return Err(e),
                Err(ScanError::Bad { pos, .. }) => {
                    anchor = pos;
                    break;
                }
            };
            let offset = record::peek(reader.body()).map(|(o, _)| o);
            let Some(offset) = offset.filter(|o| run_next.is_none_or(|n| n == *o)) else {
                // Checked, but not the record that comes next: search on after it.
                anchor = pos;
                break;
            };
            let bytes = reader.pos() - pos;
            match &mut found {
                Some(s) => {
                    s.records += 1;
                    s.bytes += bytes;
                    s.last_offset = offset;
                }
                None => {
                    found = Some(Survivors {
                        first_pos: pos,
                        records: 1,
                        bytes,
                        first_offset: offset,
                        last_offset: offset,
                        incomplete: false,
                    })
                }
            }
            run_next = Some(offset.saturating_add(1));
        }
        if let Some(n) = run_next {
            expected = n;
        }
    }
    Ok(found.map_or(After::Nothing, After::Records))
}

enum Resync {
    Found(u64),
    None,
    OutOfBudget,
}

/// The first position from `from` on where a checked record starts that could hold
/// an offset following a bad record at `anchor` that should have held `expected` (see
/// [`valid_after`]). `budget` is in bytes read for CRC checks.
fn resync(
    file: &File,
    from: u64,
    end: u64,
    anchor: u64,
    expected: u64,
    budget: &mut u64,
) -> std::io::Result<Resync> {
    let mut buf: Vec<u8> = Vec::new();
    let mut buf_start = from;
    let mut q = from;
    while q + MIN_RECORD <= end {
        if q + PEEK as u64 > buf_start + buf.len() as u64 {
            // At least MIN_RECORD (> PEEK) bytes, since q + MIN_RECORD <= end.
            let want = (end - q).min(WINDOW as u64) as usize;
            buf.clear();
            buf.resize(want, 0);
            file.read_exact_at(&mut buf, q)?;
            buf_start = q;
        }
        let i = (q - buf_start) as usize;
        let mut head = [0u8; PEEK];
        head.copy_from_slice(&buf[i..i + PEEK]);
        let mut len = [0u8; 4];
        len.copy_from_slice(&head[..4]);
        let len = u64::from(u32::from_le_bytes(len));
        let mut offset = [0u8; 8];
        offset.copy_from_slice(&head[HEADER_LEN..]);
        let offset = u64::from_le_bytes(offset);
        let plausible = len >= MIN_BODY_LEN as u64
            && len <= end - q - HEADER_LEN as u64
            && offset >= expected
            && offset - expected <= (q - anchor) / MIN_RECORD;
        if plausible {
            if *budget < len {
                return Ok(Resync::OutOfBudget);
            }
            *budget -= len;
            let body = i + HEADER_LEN;
            let checked = if body as u64 + len <= buf.len() as u64 {
                let mut crc = [0u8; 4];
                crc.copy_from_slice(&head[4..HEADER_LEN]);
                record::crc32c(&buf[body..body + len as usize]) == u32::from_le_bytes(crc)
            } else {
                match RecordReader::new(file, q, end).next() {
                    Ok(r) => r.is_some(),
                    Err(ScanError::Bad { .. }) => false,
                    Err(ScanError::Io(e)) => return Err(e),
                }
            };
            if checked {
                return Ok(Resync::Found(q));
            }
        }
        q += 1;
    }
    Ok(Resync::None)
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
