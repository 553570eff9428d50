//! Opening a log: finding its segments, checking every record, cutting a torn tail.

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{corrupt, io_err, scan_err};
use crate::log::LogError;
use crate::log::record;
use crate::log::segment::{self, After, IndexEntry, RecordReader, ScanError, Segment};

/// The file that records the first offset of the newest segment ever started, so that
/// recovery notices newest segments that went missing (deleted by hand, lost with a
/// disk): without it, their offsets would be handed out again under the same topic
/// id, and a reader resuming past them would silently skip the new items.
///
/// It also records the newest timestamp of the log when that segment was started
/// (a second line, `last-timestamp-ms <ms>`, left out while it is 0): retention
/// deletes only segments that are no longer active, that is older than the newest
/// start, so this is at least the timestamp of every item retention ever deleted.
/// When retention has emptied the log, it is all that is left of the items' times,
/// and new items are never stamped before it (a clock set back across a restart).
/// Written at each roll, never on the append path.
pub(super) const NEWEST_SEGMENT_FILE: &str = "newest-segment";

/// The key of the line of [`NEWEST_SEGMENT_FILE`] with the newest timestamp.
const LAST_TIMESTAMP_KEY: &str = "last-timestamp-ms";

/// What [`NEWEST_SEGMENT_FILE`] records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Noted {
    /// First offset of the newest segment started.
    base: u64,
    /// Newest item timestamp when it was started (0: none recorded).
    last_ts: u64,
}

/// Records that segments up to `base` were started, when the log's newest timestamp
/// was `last_ts` (atomically: a temporary file, synced, renamed over the old record,
/// and the directory synced).
pub(super) fn note_newest_segment(dir: &Path, base: u64, last_ts: u64) -> std::io::Result<()> {
    let tmp = dir.join(format!("{NEWEST_SEGMENT_FILE}.tmp"));
    // Without a timestamp the file stays as it was before timestamps were recorded
    // (the offset alone), which older servers read too.
    let mut text = format!("{base}\n");
    if last_ts > 0 {
        text.push_str(&format!("{LAST_TIMESTAMP_KEY} {last_ts}\n"));
    }
    {
        let f = File::create(&tmp)?;
        f.write_all_at(text.as_bytes(), 0)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, dir.join(NEWEST_SEGMENT_FILE))?;
    crate::log::sync_dir(dir)
}

/// The record in [`NEWEST_SEGMENT_FILE`], if there is one. Files from before the
/// timestamp was recorded hold the offset alone.
fn noted_newest_segment(dir: &Path) -> Result<Option<Noted>, LogError> {
    let path = dir.join(NEWEST_SEGMENT_FILE);
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err(&path, e)),
    };
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or("");
    let base = first
        .parse()
        .map_err(|_| corrupt(&path, 0, format!("`{first}` is not an offset")))?;
    let mut last_ts = 0;
    for line in lines {
        // Anything else means the file is not what this server wrote: refused like
        // a bad offset, rather than trusted in part.
        last_ts = line
            .strip_prefix(LAST_TIMESTAMP_KEY)
            .and_then(|v| v.trim().parse().ok())
            .ok_or_else(|| {
                corrupt(
                    &path,
                    0,
                    format!("`{line}` is not `{LAST_TIMESTAMP_KEY} <milliseconds>`"),
                )
            })?;
    }
    Ok(Some(Noted { base, last_ts }))
}

/// Refuses a log whose newest segment starts before the newest one on record.
/// Returns the record, if there is one.
fn check_newest_segment(dir: &Path, newest: Option<u64>) -> Result<Option<Noted>, LogError> {
    let Some(record) = noted_newest_segment(dir)? else {
        return Ok(None);
    };
    let noted = record.base;
    if newest.is_none_or(|base| base < noted) {
        let found = match newest {
            Some(base) => format!("the newest segment found starts at offset {base}"),
            None => "no segment is left".to_string(),
        };
        return Err(corrupt(
            &dir.join(NEWEST_SEGMENT_FILE),
            0,
            format!(
                "a segment starting at offset {noted} was written, but {found}: the newest \
                 segments are missing (removed or lost), and their offsets would be handed \
                 out again"
            ),
        ));
    }
    Ok(Some(record))
}

/// A log as recovery found it.
pub(super) struct Recovered {
    /// Never empty; the last one is the active segment.
    pub segments: Vec<Segment>,
    /// The newest timestamp the log has given out, as far as its files tell: that of
    /// its newest record, or the one on record in [`NEWEST_SEGMENT_FILE`] if later
    /// (retention deleted the items it belonged to). New items get none older.
    pub last_ts: u64,
}

pub(super) fn recover(dir: &Path, index_interval: u64) -> Result<Recovered, LogError> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| io_err(dir, e))? {
        let entry = entry.map_err(|e| io_err(dir, e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        match segment::parse_file_name(name) {
            // No offset is ever handed out at `u64::MAX` (the next one would not fit),
            // so no segment starts there.
            Some(u64::MAX) => {
                return Err(corrupt(
                    &entry.path(),
                    0,
                    format!(
                        "segment starts at offset {}, which leaves no room for an offset \
                         after it",
                        u64::MAX
                    ),
                ));
            }
            Some(base) => found.push((base, entry.path())),
            // Named like a segment, but with an offset too large for one: not to be
            // skipped as an unrelated file, since that could leave a gap unnoticed.
            None if is_segment_shaped(name) => {
                return Err(corrupt(
                    &entry.path(),
                    0,
                    format!(
                        "segment name is not an offset (the largest is {})",
                        u64::MAX - 1
                    ),
                ));
            }
            None => {}
        }
    }
    found.sort_unstable_by_key(|(base, _)| *base);
    let noted = check_newest_segment(dir, found.last().map(|(base, _)| *base))?;
    let note = |base: u64, last_ts: u64| {
        note_newest_segment(dir, base, last_ts)
            .map_err(|e| io_err(&dir.join(NEWEST_SEGMENT_FILE), e))
    };
    if found.is_empty() {
        let path = dir.join(segment::file_name(0));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| io_err(&path, e))?;
        sync_dir(dir)?;
        // On record from the start (after the segment, so that a crash in between
        // leaves a log without a record, which opens as new): a log that never rolls
        // and then loses its only segment, or all its items, is refused rather than
        // started over at 0 under the same topic id, where readers resuming with
        // their offsets would skip the new items.
        note(0, 0)?;
        return Ok(Recovered {
            segments: vec![empty_segment(0, path, file)],
            last_ts: 0,
        });
    }
    let n = found.len();
    let mut segments: Vec<Segment> = Vec::with_capacity(n);
    for (i, (base, path)) in found.into_iter().enumerate() {
        if let Some(prev) = segments.last()
            && prev.next != base
        {
            return Err(corrupt(
                &path,
                0,
                // Both files: either side of the gap may be the one out of place (an
                // old segment left behind, or newer ones lost).
                format!(
                    "segment starts at offset {base} but the previous one, {}, ends at {}: \
                     the segments in between are missing",
                    segment::display(&prev.path),
                    prev.next
                ),
            ));
        }
        segments.push(scan_segment(base, path, i + 1 == n, index_interval)?);
    }
    let newest_record = segments.iter().map(|s| s.last_ts).max().unwrap_or(0);
    let last_ts = newest_record.max(noted.map_or(0, |n| n.last_ts));
    // A log from before the record was kept from the start (or whose record was
    // removed to accept a loss) gets one now, so that losing its newest segments
    // from here on is noticed.
    if noted.is_none()
        && let Some(last) = segments.last()
    {
        note(last.base, last_ts)?;
    }
    Ok(Recovered { segments, last_ts })
}

/// Whether `name` looks like a segment's (digits and `.seg`).
fn is_segment_shaped(name: &str) -> bool {
    name.strip_suffix(".seg")
        .is_some_and(|stem| !stem.is_empty() && stem.bytes().all(|b| b.is_ascii_digit()))
}

fn empty_segment(base: u64, path: PathBuf, file: File) -> Segment {
    Segment {
        base,
        path,
        file: Arc::new(file),
        len: 0,
        next: base,
        first_ts: 0,
        last_ts: 0,
        index: Vec::new(),
    }
}

/// Reads a segment, checking every record and building its sparse index.
///
/// In the last segment, a bad record with nothing valid after it is a torn tail (a
/// write cut short by a crash, which can only hit the end of the newest segment): the
/// file is truncated there. A bad record followed by a valid one is damage in the
/// middle of the log ([`segment::valid_after`]); truncating would drop acknowledged
/// records and hand their offsets out again, so it is [`LogError::Corrupt`] like a
/// bad record in any older segment, and the file is left as it is.
fn scan_segment(base: u64, path: PathBuf, last: bool, interval: u64) -> Result<Segment, LogError> {
    let file = OpenOptions::new()
        .read(true)
        .write(last)
        .open(&path)
        .map_err(|e| io_err(&path, e))?;
    let file_len = file.metadata().map_err(|e| io_err(&path, e))?.len();
    let mut seg = empty_segment(base, path, file);
    let file = seg.file.clone();
    let mut reader = RecordReader::new(&file, 0, file_len);
    let mut last_indexed: Option<u64> = None;
    loop {
        match reader.next() {
            Ok(Some(pos)) => {
                let Some((offset, ts)) = record::peek(reader.body()) else {
                    return Err(corrupt(&seg.path, pos, "record body too short"));
                };
                if offset != seg.next {
                    // A record with a valid checksum but the wrong offset is not a torn
                    // write; cutting it off could drop acknowledged data.
                    return Err(corrupt(
                        &seg.path,
                        pos,
                        format!("record has offset {offset}, expected {}", seg.next),
                    ));
                }
                if seg.is_empty() {
                    seg.first_ts = ts;
                }
                seg.last_ts = seg.last_ts.max(ts);
                if last_indexed.is_none_or(|p| pos - p >= interval) {
                    seg.index.push(IndexEntry {
                        offset,
                        pos,
                        timestamp_ms: ts,
                    });
                    last_indexed = Some(pos);
                }
                // A record at `u64::MAX` is never written (the next offset would not
                // fit), so one that checks out is not the log's.
                let Some(next) = seg.next.checked_add(1) else {
                    return Err(corrupt(
                        &seg.path,
                        pos,
                        format!("record has offset {offset}, which leaves no room after it"),
                    ));
                };
                seg.next = next;
                seg.len = reader.pos();
            }
            Ok(None) => break,
            Err(ScanError::Bad { pos, reason }) => {
                let after = segment::valid_after(&file, pos, file_len, seg.next)
                    .map_err(|e| io_err(&seg.path, e))?;
                if !last || after != After::Nothing {
                    return Err(corrupt(&seg.path, pos, damage_reason(&reason, &after)));
                }
                tracing::warn!(
                    path = %seg.path.display(),
                    pos,
                    dropped_bytes = file_len - pos,
                    %reason,
                    "log: truncating torn tail"
                );
                file.set_len(pos).map_err(|e| io_err(&seg.path, e))?;
                file.sync_all().map_err(|e| io_err(&seg.path, e))?;
                break;
            }
            Err(e) => return Err(scan_err(&seg.path, e)),
        }
    }
    Ok(seg)
}

/// The reason of a [`LogError::Corrupt`] for a bad record, with what follows it.
fn damage_reason(reason: &str, after: &After) -> String {
    match after {
        After::Nothing => format!("{reason}; no valid record follows"),
        After::Records(s) => format!("{reason}; {s}, so this is damage, not a torn write"),
        After::Unknown => format!(
            "{reason}; the search for valid records after it hit its work limit, so it \
             is not treated as a torn write"
        ),
    }
}

pub(super) fn sync_dir(dir: &Path) -> Result<(), LogError> {
    crate::log::sync_dir(dir).map_err(|e| io_err(dir, e))
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::item::NewItem;

    /// A valid record at offset `u64::MAX` (which the writer never makes: the next
    /// offset would not fit) is corruption at that record, not a wrap to offset 0.
    #[test]
    fn a_record_at_the_largest_offset_is_corrupt() {
        let dir = std::env::temp_dir().join(format!("jelly-log-maxrec-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let item = NewItem {
            frame: Bytes::from_static(b"frame"),
            statements: 1,
            source: String::new(),
            headers: Vec::new(),
        };
        let base = u64::MAX - 1;
        let mut buf = Vec::new();
        record::encode(base, 1, &item, &mut buf);
        let second = buf.len() as u64;
        record::encode(u64::MAX, 1, &item, &mut buf);
        let path = dir.join(segment::file_name(base));
        fs::write(&path, &buf).unwrap();
        match recover(&dir, 4096) {
            Err(LogError::Corrupt {
                path: p,
                offset,
                reason,
            }) => {
                assert_eq!(Path::new(&p), path, "{reason}");
                assert_eq!(offset, second, "{reason}");
                assert!(reason.contains("no room"), "{reason}");
            }
            Err(e) => panic!("expected Corrupt, got {e}"),
            Ok(r) => panic!(
                "recovered, next offset {:?}",
                r.segments.last().map(|s| s.next)
            ),
        }
        let _ = fs::remove_dir_all(&dir);
    }
}
