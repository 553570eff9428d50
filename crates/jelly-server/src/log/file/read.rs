//! Reading: positioned reads of finished records, guided by the sparse index.

use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;

use super::{Shared, corrupt, scan_err};
use crate::item::Item;
use crate::log::record;
use crate::log::segment::RecordReader;
use crate::log::{LogError, ReadLimits};

/// Where a read continues: a segment file and a position in it.
struct Cursor {
    path: PathBuf,
    file: Arc<File>,
    pos: u64,
    end: u64,
}

/// Reads items from `from`, within `limits`.
///
/// Damage cuts a read off where it is, no earlier: a read that reaches a damaged
/// record returns the items before it (the next read, from the damaged record, fails
/// with the damage), and a read from beyond a damaged record steps over it when its
/// length was sound (only its checksum failed), noting the damage in `shared`.
pub(super) fn read_blocking(
    shared: &Shared,
    from: u64,
    limits: ReadLimits,
) -> Result<Vec<Item>, LogError> {
    let mut out: Vec<Item> = Vec::new();
    let mut bytes = 0usize;
    let mut offset = from;
    loop {
        let cur = {
            let st = shared.read_state();
            let first = st.first();
            if offset < first {
                // Retention removed the segment while we were reading earlier ones.
                if out.is_empty() {
                    return Err(LogError::Truncated {
                        requested: offset,
                        first,
                    });
                }
                break;
            }
            if offset >= st.next {
                break;
            }
            let seg = &st.segments[st.find(offset)];
            Cursor {
                path: seg.path.clone(),
                file: seg.file.clone(),
                pos: seg.position_for_offset(offset),
                end: seg.len,
            }
        };
        let start = offset;
        let mut reader = RecordReader::new(&cur.file, cur.pos, cur.end);
        // A damaged record stepped over on the way to `offset`: if `offset` turns out
        // to be the damaged one, this is the read's error.
        let mut stepped_over: Option<LogError> = None;
        loop {
            let pos = match reader.next() {
                Ok(Some(pos)) => pos,
                Ok(None) => break,
                Err(e) => {
                    let e = scan_err(&cur.path, e);
                    if !out.is_empty() {
                        return Ok(out);
                    }
                    if stepped_over.is_none() && reader.step_over_bad() {
                        stepped_over = Some(e);
                        continue;
                    }
                    return Err(stepped_over.unwrap_or(e));
                }
            };
            let body = reader.body();
            let Some((off, _)) = record::peek(body) else {
                return partial(out, corrupt(&cur.path, pos, "record body too short"));
            };
            if off < offset {
                continue;
            }
            if off != offset {
                let e = corrupt(
                    &cur.path,
                    pos,
                    format!("record has offset {off}, expected {offset}"),
                );
                return partial(out, stepped_over.unwrap_or(e));
            }
            if let Some(e) = stepped_over.take() {
                // `offset` lies beyond the damage: served, and the damage noted.
                shared.note_damage(&e);
            }
            let item = match record::decode(Bytes::copy_from_slice(body)) {
                Ok(item) => item,
                Err(r) => return partial(out, corrupt(&cur.path, pos, r)),
            };
            if !out.is_empty() && bytes + item.frame.len() > limits.max_bytes {
                return Ok(out);
            }
            bytes += item.frame.len();
            out.push(item);
            offset += 1;
            if out.len() >= limits.max_items {
                return Ok(out);
            }
        }
        if offset == start {
            // The segment had nothing at `offset` although the state said it should.
            let e = stepped_over.unwrap_or_else(|| {
                corrupt(
                    &cur.path,
                    cur.pos,
                    format!("offset {offset} not found in segment"),
                )
            });
            return partial(out, e);
        }
    }
    Ok(out)
}

/// The items read so far, or the error when there are none.
fn partial(out: Vec<Item>, e: LogError) -> Result<Vec<Item>, LogError> {
    if out.is_empty() { Err(e) } else { Ok(out) }
}

pub(super) fn offset_for_timestamp_blocking(shared: &Shared, ts: u64) -> Result<u64, LogError> {
    let cur = {
        let st = shared.read_state();
        let i = st
            .segments
            .partition_point(|s| !s.is_empty() && s.last_ts < ts);
        let Some(seg) = st.segments.get(i) else {
            return Ok(st.next);
        };
        if seg.is_empty() {
            return Ok(st.next);
        }
        if seg.first_ts >= ts {
            return Ok(seg.base);
        }
        Cursor {
            path: seg.path.clone(),
            file: seg.file.clone(),
            pos: seg.position_for_timestamp(ts),
            end: seg.len,
        }
    };
    let mut reader = RecordReader::new(&cur.file, cur.pos, cur.end);
    while let Some(pos) = reader.next().map_err(|e| scan_err(&cur.path, e))? {
        let Some((offset, rec_ts)) = record::peek(reader.body()) else {
            return Err(corrupt(&cur.path, pos, "record body too short"));
        };
        if rec_ts >= ts {
            return Ok(offset);
        }
    }
    // The segment's last timestamp said a record would match; retention or a
    // concurrent change cannot remove records from a segment, so this is corruption.
    Err(corrupt(
        &cur.path,
        cur.pos,
        format!("no record at or after timestamp {ts} although the segment ends later"),
    ))
}
