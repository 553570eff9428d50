//! Writing: the single writer that appends, group-commits, rolls segments and applies retention.

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::recovery::{NEWEST_SEGMENT_FILE, note_newest_segment, sync_dir};
use super::{
    Deleting, Durability, FileLogOptions, Reply, Request, Shared, ToWriter, corrupt, io_err, lock,
};
use crate::item::Item;
use crate::log::LogError;
use crate::log::record;
use crate::log::segment::{self, IndexEntry, Segment};

pub(super) struct Writer {
    shared: Arc<Shared>,
    pub(super) opts: FileLogOptions,
    active: Arc<File>,
    active_path: PathBuf,
    /// Bytes written to the active segment.
    len: u64,
    /// Next offset to assign.
    next: u64,
    /// Newest timestamp assigned; timestamps never go backwards.
    last_ts: u64,
    /// Position of the active segment's newest index entry.
    last_indexed: Option<u64>,
    /// Written but not yet fsynced.
    dirty: bool,
    last_sync: Instant,
    last_retention: Instant,
    /// Set after a failed write or fsync; later appends fail with it until
    /// [`Writer::recover`] clears it.
    failed: Option<Failed>,
    /// The failure cannot be recovered from in place: after a failed fsync the state
    /// of the file's unsynced pages is unknown, and a failed restart leaves the
    /// segments half replaced. Reopening the log (a restart) recovers from the files.
    failed_for_good: bool,
    /// Set by [`Log::close`]: appends fail with [`LogError::Closed`], and neither
    /// fsyncs nor retention touch the files any more (they are being deleted).
    pub(super) closed: bool,
    /// Records of the group being written, not yet written to the file.
    buf: Vec<u8>,
    /// Bytes of the group's records already written after `len` ([`Writer::spill`])
    /// but not yet published to readers: a large group goes out in pieces, so that
    /// its records are not held in memory a second time beside its items.
    spilled: u64,
    /// Tests: the most bytes written at once.
    #[cfg(test)]
    most_written_at_once: usize,
    /// Tests: the next fsync of the active segment fails.
    #[cfg(test)]
    fail_next_sync: bool,
}

/// A failure that refuses appends: the file it happened on (the active segment, or a
/// new one that could not be created) and the error.
#[derive(Clone)]
struct Failed {
    path: PathBuf,
    kind: std::io::ErrorKind,
    message: String,
}

/// An I/O error and the file it happened on.
type Fail = (PathBuf, std::io::Error);

/// The largest write buffer kept between batches (a larger one is freed).
const KEPT_BUFFER_BYTES: usize = 4 << 20;

/// Under a size limit, segments roll at most at this fraction of it (see
/// [`Writer::roll_bytes`]), so that retention keeps a topic within about one eighth
/// above or below its limit.
const RETENTION_SEGMENTS: u64 = 8;

/// Segments roll under a size limit no smaller than this: tiny limits would make many tiny files (each an open
/// file handle while the topic is open).
const MIN_ROLL_BYTES: u64 = 64 << 10;

/// Records of a group not yet written, for the active segment.
#[derive(Default)]
struct Pending {
    count: u64,
    first_ts: u64,
    /// Newest timestamp of the records.
    last_ts: u64,
    index: Vec<IndexEntry>,
    /// The items, for the tail cache.
    items: Vec<Item>,
}

impl Writer {
    /// A writer for the log in `shared`, whose newest timestamp (on record, or of its
    /// newest item) is `last_ts`.
    pub(super) fn new(
        shared: Arc<Shared>,
        opts: FileLogOptions,
        last_ts: u64,
    ) -> Result<Writer, LogError> {
        let st = shared.read_state();
        let Some(seg) = st.segments.last() else {
            return Err(corrupt(&shared.dir, 0, "no segment"));
        };
        let active = seg.file.clone();
        let active_path = seg.path.clone();
        let len = seg.len;
        let next = st.next;
        let last_indexed = seg.index.last().map(|e| e.pos);
        drop(st);
        let now = Instant::now();
        Ok(Writer {
            shared,
            opts,
            active,
            active_path,
            len,
            next,
            last_ts,
            last_indexed,
            dirty: false,
            last_sync: now,
            last_retention: now,
            failed: None,
            failed_for_good: false,
            closed: false,
            buf: Vec::new(),
            spilled: 0,
            #[cfg(test)]
            most_written_at_once: 0,
            #[cfg(test)]
            fail_next_sync: false,
        })
    }

    /// The writer thread: takes queued appends as one group, and between them runs
    /// timed fsyncs and retention. Ends when the log is dropped.
    pub(super) fn run(w: &Mutex<Writer>, rx: &mpsc::Receiver<ToWriter>) {
        retain_all(w);
        loop {
            let wait = lock(w).wait_time();
            match rx.recv_timeout(wait) {
                Ok(ToWriter::Append(first)) => {
                    let mut group = vec![first];
                    while let Ok(more) = rx.try_recv() {
                        if let ToWriter::Append(req) = more {
                            group.push(req);
                        }
                    }
                    lock(w).commit(group);
                }
                // New limits were applied by the sender; the wait is worked out again.
                Ok(ToWriter::LimitsChanged) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            let mut g = lock(w);
            if g.dirty
                && let Durability::Interval(d) = g.opts.durability
                && g.last_sync.elapsed() >= d
            {
                g.sync_quietly();
            }
            let check = g.last_retention.elapsed() >= g.retention_check_interval();
            drop(g);
            if check {
                retain_all(w);
                lock(w).trim_tail_to_share();
            }
        }
        let mut g = lock(w);
        if g.dirty {
            g.sync_quietly();
        }
    }

    /// How often retention is checked without appends ([`check_interval`]).
    fn retention_check_interval(&self) -> Duration {
        check_interval(self.opts.retention_age, self.opts.retention_check_interval)
    }

    fn wait_time(&self) -> Duration {
        let mut wait = self
            .retention_check_interval()
            .saturating_sub(self.last_retention.elapsed());
        if self.dirty
            && let Durability::Interval(d) = self.opts.durability
        {
            wait = wait.min(d.saturating_sub(self.last_sync.elapsed()));
        }
        wait.max(Duration::from_millis(1))
    }

    fn sync_quietly(&mut self) {
        if self.failed.is_some() || self.closed {
            return;
        }
        if let Err(e) = self.active.sync_data() {
            tracing::error!(path = %self.active_path.display(), error = %e, "log: fsync failed");
            self.failed_for_good = true;
            self.set_failed(self.active_path.clone(), &e);
        } else {
            self.dirty = false;
            self.last_sync = Instant::now();
        }
    }

    /// Writes a group of appends, makes it durable per the policy, publishes it, applies
    /// retention and answers the appenders.
    pub(super) fn commit(&mut self, group: Vec<Request>) {
        if self.closed {
            for req in group {
                let _ = req.reply.send(Err(LogError::Closed));
            }
            return;
        }
        let mut replies = Vec::with_capacity(group.len());
        let mut written = 0;
        let result = self.write_group(group, &mut replies, &mut written);
        let next = self.shared.read_state().next;
        self.shared.watch.publish(next);
        // Before answering, so that an appender sees the retention its append caused.
        // A few segments at most: an append makes about one more, and a backlog (new
        // limits, a clock jump) is for `retain_all`, which lets appends go on meanwhile.
        self.retain_some(RETAIN_PER_COMMIT);
        match result {
            Ok(()) => {
                for (reply, answer) in replies {
                    // The appender may have gone away; its items are written anyway.
                    let _ = reply.send(answer);
                }
            }
            Err((path, e)) => {
                tracing::error!(path = %path.display(), error = %e, "log: write failed");
                if self.failed.is_none() {
                    self.set_failed(path, &e);
                }
                // The first `written` requests were written (and synced) before the
                // failure, and readers see their items: they succeeded, and are told
                // so, or a publisher would retry what is stored. Refusals of their own
                // keep their reason.
                for (i, (reply, answer)) in replies.into_iter().enumerate() {
                    let answer = match answer {
                        Ok(_) if i >= written => Err(self.failure()),
                        a => a,
                    };
                    let _ = reply.send(answer);
                }
            }
        }
    }

    /// Tries to write again after a failed write or segment roll (a full disk, no
    /// inodes left): the active segment is cut back to its last whole record, which is
    /// where the writer stands, and the failure is cleared. Not after a failed fsync
    /// or restart ([`Writer::failed_for_good`]). Each later group tries once, so a disk
    /// with room again takes appends again without a restart.
    fn recover(&mut self) -> bool {
        if self.failed_for_good || self.closed {
            return false;
        }
        let at_record_end = match self.active.metadata() {
            Ok(m) if m.len() == self.len => true,
            Ok(_) => self.active.set_len(self.len).is_ok(),
            Err(_) => false,
        };
        if !at_record_end {
            return false;
        }
        tracing::info!(path = %self.active_path.display(), "log: writing again after an earlier failure");
        self.failed = None;
        *lock(&self.shared.failure) = None;
        true
    }

    /// Records a failure: appends are refused until [`Writer::recover`] clears it.
    fn set_failed(&mut self, path: PathBuf, e: &std::io::Error) {
        let how = if self.failed_for_good {
            "appends are refused until the server restarts"
        } else {
            "appends are refused until one can be written again"
        };
        *lock(&self.shared.failure) = Some(format!("{}: {e}; {how}", path.display()));
        self.failed = Some(Failed {
            path,
            kind: e.kind(),
            message: e.to_string(),
        });
    }

    /// The error that appends get while the log refuses them: the failure and what
    /// it means for appends, which differ between a failed write (appends go on once
    /// one can be written) and a failed fsync (only after a restart).
    fn failure(&self) -> LogError {
        let (path, kind, message) = match &self.failed {
            Some(f) => (&f.path, f.kind, f.message.as_str()),
            None => (
                &self.active_path,
                std::io::ErrorKind::Other,
                "unknown failure",
            ),
        };
        let how = if self.failed_for_good {
            "an fsync failed, so the log takes no appends until the server restarts"
        } else {
            "a write failed; the log takes appends again once one can be written"
        };
        io_err(
            path,
            std::io::Error::new(kind, format!("{message} ({how})")),
        )
    }

    /// Writes the records of a group. A request refused on its own (an
    /// [`Log::append_at`] at the wrong offset) gets its error in `replies` and does not
    /// fail the group; an I/O error does. `written` counts the replies whose records
    /// were written and synced before such an error.
    fn write_group(
        &mut self,
        group: Vec<Request>,
        replies: &mut Vec<(Reply, Result<Vec<u64>, LogError>)>,
        written: &mut usize,
    ) -> Result<(), Fail> {
        if self.failed.is_some() && !self.recover() {
            for req in group {
                replies.push((req.reply, Ok(Vec::new())));
            }
            let path = self.failed.as_ref().map_or(&self.active_path, |f| &f.path);
            return Err((
                path.clone(),
                std::io::Error::other("refused: the log failed before and cannot write yet"),
            ));
        }
        let now = self.opts.clock.now_ms().max(self.last_ts);
        let mut pending = Pending::default();
        self.buf.clear();
        self.spilled = 0;
        let mut result = Ok(());
        for req in group {
            if result.is_ok() {
                // `next` (and so `next + pending.count`) never passes `u64::MAX`:
                // requests that would take it further are refused here, before an
                // offset is assigned, a segment rolled or a restart made.
                let first = req
                    .placed
                    .as_ref()
                    .map_or(self.next + pending.count, |p| p.first);
                if let Err(e) = crate::log::check_room(first, req.items.len() as u64) {
                    replies.push((req.reply, Err(e)));
                    continue;
                }
            }
            if result.is_ok()
                && let Some(p) = &req.placed
            {
                let expected = self.next + pending.count;
                if p.first != expected {
                    let empty = self.shared.read_state().first() == expected;
                    if p.first < expected || !(p.restart || empty) {
                        let e = LogError::OffsetMismatch {
                            expected,
                            got: p.first,
                        };
                        replies.push((req.reply, Err(e)));
                        continue;
                    }
                    // Not counted as written: a restart that fails may have deleted
                    // them already (it drops every earlier record).
                    result = self
                        .flush(&mut pending, true)
                        .and_then(|()| self.restart_at(p.first))
                        .inspect_err(|_| self.failed_for_good = true)
                        .map_err(|e| (self.active_path.clone(), e));
                }
            }
            if result.is_ok() {
                let used = self.len + self.spilled + self.buf.len() as u64;
                if used > 0
                    && (used + req.bytes > self.roll_bytes()
                        || self.active_older_than_retention(now, &pending))
                {
                    result = self
                        .flush(&mut pending, true)
                        .map_err(|e| (self.active_path.clone(), e))
                        .inspect(|()| *written = replies.len())
                        .and_then(|()| self.roll());
                }
            }
            if result.is_err() {
                replies.push((req.reply, Ok(Vec::new())));
                continue;
            }
            let mut offsets = Vec::with_capacity(req.items.len());
            let mut spill_failed = None;
            for (i, item) in req.items.iter().enumerate() {
                let offset = self.next + pending.count;
                let ts = match &req.placed {
                    Some(p) => p.timestamps.get(i).copied().unwrap_or(now),
                    None => now.max(pending.last_ts),
                };
                let pos = self.len + self.spilled + self.buf.len() as u64;
                if self
                    .last_indexed
                    .is_none_or(|p| pos.saturating_sub(p) >= self.opts.index_interval_bytes)
                {
                    pending.index.push(IndexEntry {
                        offset,
                        pos,
                        timestamp_ms: ts,
                    });
                    self.last_indexed = Some(pos);
                }
                record::encode(offset, ts, item, &mut self.buf);
                if self.opts.tail_cache_bytes > 0 {
                    pending.items.push(Item {
                        offset,
                        timestamp_ms: ts,
                        frame: item.frame.clone(),
                        statements: item.statements,
                        source: item.source.clone(),
                        headers: item.headers.clone(),
                    });
                }
                if pending.count == 0 {
                    pending.first_ts = ts;
                }
                pending.last_ts = pending.last_ts.max(ts);
                pending.count += 1;
                offsets.push(offset);
                if self.buf.len() >= self.opts.group_piece_bytes
                    && let Err(e) = self.spill()
                {
                    spill_failed = Some(e);
                    break;
                }
            }
            if let Some(e) = spill_failed {
                // Nothing of the group was published; the file is cut back to `len`.
                result = Err((self.active_path.clone(), e));
                replies.push((req.reply, Ok(Vec::new())));
                continue;
            }
            replies.push((req.reply, Ok(offsets)));
        }
        if let Err(e) = result {
            self.forget_unpublished();
            return Err(e);
        }
        let sync = match self.opts.durability {
            Durability::Fsync => true,
            Durability::Interval(d) => self.last_sync.elapsed() >= d,
            Durability::None => false,
        };
        self.flush(&mut pending, sync).map_err(|e| {
            self.forget_unpublished();
            (self.active_path.clone(), e)
        })
    }

    /// After a group failed (a write or an fsync): its records that were not
    /// published go, from the file and from what the writer noted of them (its index
    /// position: the next group's first record would be placed before it), and a
    /// large buffer is freed while the log waits.
    fn forget_unpublished(&mut self) {
        // Best effort (the disk that failed may fail this too): no partial record is
        // left behind a later one, and after a failed fsync, the restart it requires
        // does not bring back items whose publishers were told they failed.
        let _ = self.active.set_len(self.len);
        self.spilled = 0;
        self.last_indexed = self
            .shared
            .read_state()
            .segments
            .last()
            .and_then(|s| s.index.last())
            .map(|e| e.pos);
        self.release_buf();
    }

    /// Empties the write buffer, and frees it when it is large: one large batch must
    /// not pin its buffer for the topic's lifetime.
    fn release_buf(&mut self) {
        self.buf.clear();
        if self.buf.capacity() > KEPT_BUFFER_BYTES {
            self.buf = Vec::new();
        }
    }

    /// Fsyncs the active segment (failing on request in tests).
    fn sync_active(&mut self) -> std::io::Result<()> {
        #[cfg(test)]
        if std::mem::take(&mut self.fail_next_sync) {
            return Err(std::io::Error::from_raw_os_error(5)); // EIO
        }
        self.active.sync_data()
    }

    /// Writes the buffered records after those already spilled, unpublished. On a
    /// failure, the group fails and [`Writer::forget_unpublished`] cuts the file back
    /// to `len`, the end of the published records.
    fn spill(&mut self) -> std::io::Result<()> {
        #[cfg(test)]
        {
            self.most_written_at_once = self.most_written_at_once.max(self.buf.len());
        }
        self.active
            .write_all_at(&self.buf, self.len + self.spilled)?;
        self.dirty = true;
        self.spilled += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }

    /// Writes the buffered records to the active segment, fsyncs if `sync` (or if
    /// asked to and earlier writes are unsynced), and publishes them (with those
    /// spilled before) to readers.
    fn flush(&mut self, pending: &mut Pending, sync: bool) -> std::io::Result<()> {
        if !self.buf.is_empty() {
            self.spill()?;
        }
        if sync && self.dirty {
            // The group then fails, and its records are cut from the file.
            self.sync_active()
                .inspect_err(|_| self.failed_for_good = true)?;
            self.dirty = false;
            self.last_sync = Instant::now();
        }
        if pending.count > 0 {
            let written = self.spilled;
            let mut st = self.shared.write_state();
            if let Some(seg) = st.segments.last_mut() {
                if seg.is_empty() {
                    seg.first_ts = pending.first_ts;
                }
                seg.last_ts = seg.last_ts.max(pending.last_ts);
                seg.len += written;
                seg.next += pending.count;
                seg.index.append(&mut pending.index);
            }
            st.next += pending.count;
            let pool = &self.opts.tail_cache_pool;
            for item in pending.items.drain(..) {
                // Metadata counted too: 16 KiB of headers on each of many tiny items
                // would otherwise be held far beyond the cache's size.
                let held = item.held_bytes();
                st.tail_bytes += held;
                pool.take(held);
                st.tail.push_back(item);
            }
            // Within this log's own bound, and then within what all logs share: over
            // it, this log gives up its oldest cached items (they are read from disk).
            while st.tail_bytes > self.opts.tail_cache_bytes || pool.over() {
                if st.tail_bytes <= self.opts.tail_cache_bytes {
                    // For want of room in the pool, not over its own bound.
                    pool.note_pressure();
                }
                if !st.drop_oldest_cached(pool) {
                    break;
                }
            }
            drop(st);
            self.len += written;
            self.next += pending.count;
            self.last_ts = self.last_ts.max(pending.last_ts);
        }
        self.spilled = 0;
        self.release_buf();
        *pending = Pending::default();
        Ok(())
    }

    /// Drops every record and starts over with an empty segment at `first` (for an
    /// [`Log::append_at`] past the end). Segments are deleted oldest first, each
    /// deletion durable before the next, and the new segment is only created once
    /// they are all gone: a crash in between leaves a log that recovers (a suffix of
    /// the old one, or an empty log at 0), never one with a gap.
    fn restart_at(&mut self, first: u64) -> std::io::Result<()> {
        // Retention must not delete (or keep) one of them meanwhile.
        let shared = self.shared.clone();
        let mut deleting = lock(&shared.deleting);
        deleting.stuck = None;
        let old: Vec<PathBuf> = self
            .shared
            .read_state()
            .segments
            .iter()
            .map(|s| s.path.clone())
            .collect();
        tracing::info!(dir = %self.shared.dir.display(), from = self.next, to = first, "log: starting over at a later offset");
        // Off record first: a crash while the old segments go must leave a log that
        // recovers (a suffix of the old one, or none), not one that looks damaged.
        match fs::remove_file(self.shared.dir.join(NEWEST_SEGMENT_FILE)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => crate::log::sync_dir(&self.shared.dir)?,
        }
        for path in old {
            fs::remove_file(&path)?;
            crate::log::sync_dir(&self.shared.dir)?;
        }
        let path = self.shared.dir.join(segment::file_name(first));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)?;
        crate::log::sync_dir(&self.shared.dir)?;
        note_newest_segment(&self.shared.dir, first, self.last_ts)?;
        let file = Arc::new(file);
        {
            let mut st = self.shared.write_state();
            st.segments = vec![Segment {
                base: first,
                path: path.clone(),
                file: file.clone(),
                len: 0,
                next: first,
                first_ts: 0,
                last_ts: 0,
                index: Vec::new(),
            }];
            st.next = first;
            st.tail.clear();
            self.opts.tail_cache_pool.give(st.tail_bytes);
            st.tail_bytes = 0;
        }
        self.active = file;
        self.active_path = path;
        self.len = 0;
        self.next = first;
        self.last_indexed = None;
        self.dirty = false;
        Ok(())
    }

    /// Starts a new active segment at `self.next` (the old one is written and synced).
    /// On failure the old one stays active, as it was; the error names the new
    /// segment's file, which is what could not be made (not the active one, which is
    /// fine).
    fn roll(&mut self) -> Result<(), Fail> {
        let path = self.shared.dir.join(segment::file_name(self.next));
        let failed = |e: std::io::Error| {
            let e = std::io::Error::new(e.kind(), format!("creating segment: {e}"));
            (path.clone(), e)
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(failed)?;
        // Synced whatever the durability policy (one roll per segment, so the cost is
        // small): the record must never name a segment that a crash could still lose,
        // or recovery would call a log that merely lost unsynced writes damaged.
        if let Err(e) = crate::log::sync_dir(&self.shared.dir)
            .and_then(|()| note_newest_segment(&self.shared.dir, self.next, self.last_ts))
        {
            // Not left behind to make the next attempt's `create_new` fail.
            let _ = fs::remove_file(&path);
            return Err(failed(e));
        }
        let file = Arc::new(file);
        self.shared.write_state().segments.push(Segment {
            base: self.next,
            path: path.clone(),
            file: file.clone(),
            len: 0,
            next: self.next,
            first_ts: 0,
            last_ts: 0,
            index: Vec::new(),
        });
        self.active = file;
        self.active_path = path;
        self.len = 0;
        self.last_indexed = None;
        Ok(())
    }

    /// The age limit of retention in milliseconds, if there is one.
    fn age_limit_ms(&self) -> Option<u64> {
        self.opts
            .retention_age
            .map(|age| u64::try_from(age.as_millis()).unwrap_or(u64::MAX))
    }

    /// Whether the active segment's first item is older than the age limit, so that
    /// the next item starts a new segment: retention deletes whole segments, and a
    /// segment that a slow topic takes months to fill would otherwise keep its first
    /// items that long. With this, no item outlives the limit by more than about the
    /// limit again.
    fn active_older_than_retention(&self, now: u64, pending: &Pending) -> bool {
        let Some(age_ms) = self.age_limit_ms() else {
            return false;
        };
        let first = match self.shared.read_state().segments.last() {
            Some(seg) if !seg.is_empty() => seg.first_ts,
            // Nothing flushed into it yet: its first item is the pending batch's.
            _ if pending.count > 0 => pending.first_ts,
            _ => return false,
        };
        now.saturating_sub(first) > age_ms
    }

    /// On a quiet topic all the items may sit in the active segment, which retention
    /// never deletes: once every item in it is past the age limit, a new active
    /// segment is started, so that the old one can go. The old one is synced first,
    /// so that a crash cannot leave it shorter than where the new one begins.
    fn roll_if_expired(&mut self, now: u64) {
        let Some(age_ms) = self.age_limit_ms() else {
            return;
        };
        if self.failed.is_some() {
            return;
        }
        let expired = self
            .shared
            .read_state()
            .segments
            .last()
            .is_some_and(|s| !s.is_empty() && now.saturating_sub(s.last_ts) > age_ms);
        if !expired {
            return;
        }
        let rolled = if self.dirty {
            self.active
                .sync_data()
                .map(|()| self.dirty = false)
                .map_err(|e| (self.active_path.clone(), e))
        } else {
            Ok(())
        }
        .and_then(|()| self.roll());
        if let Err((path, e)) = rolled {
            tracing::warn!(path = %path.display(), error = %e, "log: cannot roll an expired segment");
        }
    }

    /// While the caches of all logs are under pressure, gives back this log's
    /// cached items beyond its share of it, oldest first (see [`super::TailCachePool`]):
    /// a topic that went quiet makes room for busy ones.
    pub(super) fn trim_tail_to_share(&self) {
        let pool = &self.opts.tail_cache_pool;
        if !pool.under_pressure() {
            return;
        }
        let share = pool.share();
        let mut st = self.shared.write_state();
        while st.tail_bytes > share && st.drop_oldest_cached(pool) {}
    }

    /// The size past which the next batch starts a new segment: `segment_bytes`, or
    /// under a size limit an eighth of it if less (not under [`MIN_ROLL_BYTES`]).
    /// Retention deletes whole segments and never the active one, so with the default
    /// 64 MiB segments a limit of, say, 1 MiB would keep 64 MiB: a segment per eighth
    /// of the limit keeps the topic near its limit.
    fn roll_bytes(&self) -> u64 {
        match self.opts.retention_bytes {
            Some(limit) => self
                .opts
                .segment_bytes
                .min((limit / RETENTION_SEGMENTS).max(MIN_ROLL_BYTES)),
            None => self.opts.segment_bytes,
        }
    }

    /// The time of a retention pass, after the active segment is closed if all of it
    /// is too old; `None` when there is nothing to retain by (no limit, or closed).
    fn start_retention(&mut self) -> Option<u64> {
        if self.closed || (self.opts.retention_bytes.is_none() && self.opts.retention_age.is_none())
        {
            return None;
        }
        let now = self.opts.clock.now_ms();
        self.roll_if_expired(now);
        Some(now)
    }

    /// Deletes up to `most` old segments beyond the size or age limit (never the
    /// active one, which [`Writer::roll_if_expired`] first replaces when all of it is
    /// too old). Not while the oldest segment's file could not be deleted: that is
    /// retried by the periodic pass ([`retain_all`]), not at every append.
    fn retain_some(&mut self, most: usize) {
        let Some(now) = self.start_retention() else {
            return;
        };
        for _ in 0..most {
            let mut deleting = lock(&self.shared.deleting);
            if deleting.stuck.is_some() {
                break;
            }
            let Some(victim) = self.expired_segment(now) else {
                break;
            };
            if !delete_segment(&self.shared, &mut deleting, victim) {
                break;
            }
        }
    }

    /// The oldest segment if it is beyond the size or age limit (never the active
    /// one): its base and file, for [`delete_segment`], which takes it out of the log.
    fn expired_segment(&self, now: u64) -> Option<(u64, PathBuf)> {
        if self.closed {
            return None;
        }
        let st = self.shared.read_state();
        if st.segments.len() <= 1 {
            return None;
        }
        let total: u64 = st.segments.iter().map(|s| s.len).sum();
        let oldest = &st.segments[0];
        let too_big = self.opts.retention_bytes.is_some_and(|max| total > max);
        let too_old = self
            .age_limit_ms()
            .is_some_and(|age_ms| now.saturating_sub(oldest.last_ts) > age_ms);
        (too_big || too_old).then(|| (oldest.base, oldest.path.clone()))
    }
}

/// Deletes the file of the oldest segment and then takes the segment out of the log,
/// and makes that durable before the next one goes: a crash must not bring back an
/// old segment with a gap after it (recovery would call that corrupt). Called with
/// `deleting` held. Returns whether the segment is gone.
///
/// The file goes first and the segment only leaves the log once it is gone: a file
/// that cannot be deleted (an immutable file, a read-only or failing disk) keeps its
/// segment in the log, readable as before, and blocks the deletion of the newer ones,
/// which must go after it. Taking it out anyway would leave the file behind, and once
/// newer segments were deleted, the next start would find it before a gap and refuse
/// the topic as corrupt. So a stuck deletion only holds the topic above its retention
/// limit (with a WARN at each periodic try) until the file can go.
fn delete_segment(shared: &Shared, deleting: &mut Deleting, (base, path): (u64, PathBuf)) -> bool {
    tracing::debug!(path = %path.display(), "log: retention deletes segment");
    match remove_segment_file(deleting, &path) {
        // Gone already (removed by hand): what retention wanted.
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            tracing::warn!(
                path = %path.display(),
                error = %e,
                "log: cannot delete segment; it is kept (and served) and retention tries \
                 again at its next periodic check, deleting no newer segment before it"
            );
            deleting.stuck = Some(base);
            return false;
        }
        _ => {}
    }
    deleting.stuck = None;
    {
        let mut st = shared.write_state();
        // Always the oldest: deletions and restarts both hold `deleting`.
        if st.segments.len() > 1 && st.segments[0].base == base {
            st.segments.remove(0);
            // Its items leave the tail cache too: no read can ask for them any more,
            // and a topic retaining less than the cache's size would otherwise keep a
            // whole cache of dropped items in memory.
            let first = st.first();
            while st.tail.front().is_some_and(|i| i.offset < first)
                && st.drop_oldest_cached(&shared.tail_pool)
            {}
        }
    }
    if let Err(e) = sync_dir(&shared.dir) {
        tracing::warn!(error = %e, "log: cannot sync directory after retention");
    }
    true
}

/// Unlinks a segment file (failing on request in tests).
fn remove_segment_file(deleting: &Deleting, path: &std::path::Path) -> std::io::Result<()> {
    #[cfg(test)]
    if deleting.refuse.as_deref() == Some(path) {
        return Err(std::io::Error::from_raw_os_error(1)); // EPERM
    }
    #[cfg(not(test))]
    let _ = deleting;
    fs::remove_file(path)
}

/// The shortest interval of periodic retention checks under an age limit.
const MIN_RETENTION_CHECK: Duration = Duration::from_millis(100);

/// How often retention is checked on a topic without appends: under an age limit,
/// every half of it (at least [`MIN_RETENTION_CHECK`] apart), so that an item of a
/// quiet topic is gone within about one and a half times the limit (its segment
/// rolled and deleted by the first check after it expired), as documented; at most
/// `ceiling` apart. Without an age limit only the size limit counts, which appends
/// apply themselves, so the ceiling is enough and idle topics are not woken often.
fn check_interval(age: Option<Duration>, ceiling: Duration) -> Duration {
    match age {
        Some(age) => (age / 2).max(MIN_RETENTION_CHECK).min(ceiling),
        None => ceiling,
    }
}

/// Segments an append's commit deletes at most ([`Writer::retain_some`]).
const RETAIN_PER_COMMIT: usize = 4;

/// Deletes every segment beyond the retention limits. The writer's lock is taken for
/// each segment and released before its file is deleted and the directory synced, so
/// appends (which commit under that lock without `fsync`) go on while many go. Also
/// retries a segment whose file could not be deleted before.
pub(super) fn retain_all(w: &Mutex<Writer>) {
    let (shared, now) = {
        let mut g = lock(w);
        g.last_retention = Instant::now();
        let Some(now) = g.start_retention() else {
            return;
        };
        (g.shared.clone(), now)
    };
    loop {
        let g = lock(w);
        let mut deleting = lock(&shared.deleting);
        let victim = g.expired_segment(now);
        drop(g);
        let Some(victim) = victim else {
            // Nothing beyond the limits any more (new limits): nothing is stuck.
            deleting.stuck = None;
            break;
        };
        if !delete_segment(&shared, &mut deleting, victim) {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use std::path::Path;
    use tokio::sync::oneshot;

    use super::*;
    use crate::item::NewItem;
    use crate::log::Log;
    use crate::log::file::FileLog;
    use crate::log::record::HEADER_LEN;

    fn item(i: u64) -> NewItem {
        NewItem {
            frame: Bytes::from(format!("item-{i:04}")),
            statements: 1,
            source: String::new(),
            headers: Vec::new(),
        }
    }

    fn request(items: Vec<NewItem>) -> (Request, oneshot::Receiver<Result<Vec<u64>, LogError>>) {
        let bytes = items
            .iter()
            .map(|it| (HEADER_LEN + record::body_len(it)) as u64)
            .sum();
        let (reply, rx) = oneshot::channel();
        let req = Request {
            items,
            placed: None,
            bytes,
            reply,
            _permit: None,
        };
        (req, rx)
    }

    /// Under an age limit retention is checked every half of it, within a floor and
    /// the configured ceiling; without one, at the ceiling only (no extra wake-ups).
    #[test]
    fn the_retention_check_follows_the_age_limit() {
        let ceiling = Duration::from_secs(10);
        let ms = Duration::from_millis;
        assert_eq!(check_interval(None, ceiling), ceiling);
        assert_eq!(check_interval(Some(ms(1000)), ceiling), ms(500));
        assert_eq!(check_interval(Some(ms(10)), ceiling), MIN_RETENTION_CHECK);
        assert_eq!(
            check_interval(Some(Duration::from_secs(3600)), ceiling),
            ceiling
        );
        // A ceiling below the floor (tests) wins.
        assert_eq!(check_interval(Some(ms(10)), ms(20)), ms(20));
    }

    /// The tail cache counts what its items hold, metadata included: tiny frames with
    /// large headers must not make it hold many times its size.
    #[test]
    fn the_tail_cache_counts_item_metadata() {
        let dir = std::env::temp_dir().join(format!("jelly-log-tailmeta-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let opts = FileLogOptions {
            tail_cache_bytes: 50_000,
            ..FileLogOptions::default()
        };
        let log = FileLog::open(&dir, opts).unwrap();
        let with_headers = |i: u64| NewItem {
            headers: vec![("note".into(), "h".repeat(10_000))],
            ..item(i)
        };
        let (r, rx) = request((0..20).map(with_headers).collect());
        lock(&log.writer).commit(vec![r]);
        assert_eq!(rx.blocking_recv().unwrap().unwrap().len(), 20);
        let st = log.shared.state.read().unwrap_or_else(|e| e.into_inner());
        let held: usize = st.tail.iter().map(Item::held_bytes).sum();
        assert_eq!(held, st.tail_bytes);
        assert!(st.tail_bytes <= 50_000, "{}", st.tail_bytes);
        assert!(st.tail.len() <= 5, "{} items cached", st.tail.len());
        drop(st);
        drop(log);
        let _ = fs::remove_dir_all(&dir);
    }

    /// Items that retention drops leave the tail cache as well: a topic that retains
    /// less than the cache's size holds no more than it retains (the cache held a
    /// whole `tail_cache_bytes` of dropped items).
    #[test]
    fn retention_drops_its_items_from_the_tail_cache() {
        let dir = std::env::temp_dir().join(format!("jelly-log-tailret-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let pool = Arc::new(super::super::TailCachePool::new(None));
        let opts = FileLogOptions {
            tail_cache_bytes: 4 << 20,
            tail_cache_pool: pool.clone(),
            segment_bytes: 40_000,
            retention_bytes: Some(100_000),
            durability: crate::log::Durability::None,
            ..FileLogOptions::default()
        };
        let log = FileLog::open(&dir, opts).unwrap();
        let big = |i: u64| NewItem {
            headers: vec![("note".into(), "h".repeat(10_000))],
            ..item(i)
        };
        for batch in 0..20u64 {
            let (r, rx) = request((batch * 5..batch * 5 + 5).map(big).collect());
            lock(&log.writer).commit(vec![r]);
            assert_eq!(rx.blocking_recv().unwrap().unwrap().len(), 5);
        }
        retain_all(&log.writer);
        let first = log.first_offset();
        assert!(first > 50, "retention kept from {first}");
        assert!(
            log.size_bytes() <= 140_000,
            "{} bytes kept",
            log.size_bytes()
        );
        let st = log.shared.state.read().unwrap_or_else(|e| e.into_inner());
        let cached: Vec<u64> = st.tail.iter().map(|i| i.offset).collect();
        assert_eq!(cached.first(), Some(&first), "cached {cached:?}");
        assert_eq!(cached.last(), Some(&99));
        assert!(st.tail_bytes <= 140_000, "{} bytes cached", st.tail_bytes);
        assert_eq!(pool.used(), st.tail_bytes);
        drop(st);
        drop(log);
        assert_eq!(pool.used(), 0);
        let _ = fs::remove_dir_all(&dir);
    }

    /// A large group is written in pieces of about `group_piece_bytes`, not buffered whole
    /// (its records would be held in memory a second time beside its items), and is
    /// published whole, read back intact, and indexed as before.
    #[test]
    fn a_large_group_is_written_in_pieces() {
        let dir = std::env::temp_dir().join(format!("jelly-log-spill-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let opts = FileLogOptions {
            durability: crate::log::Durability::None,
            tail_cache_bytes: 0,
            group_piece_bytes: 4 << 20,
            ..FileLogOptions::default()
        };
        let log = FileLog::open(&dir, opts).unwrap();
        let big = |i: u64| NewItem {
            frame: Bytes::from(vec![i as u8; 1 << 20]),
            ..item(i)
        };
        let (r1, rx1) = request((0..7).map(big).collect());
        let (r2, rx2) = request((7..12).map(big).collect());
        lock(&log.writer).commit(vec![r1, r2]);
        assert_eq!(
            rx1.blocking_recv().unwrap().unwrap(),
            (0..7).collect::<Vec<_>>()
        );
        assert_eq!(
            rx2.blocking_recv().unwrap().unwrap(),
            (7..12).collect::<Vec<_>>()
        );
        let most = lock(&log.writer).most_written_at_once;
        assert!(
            most < (4 << 20) + (1 << 20) + 4096,
            "{most} bytes written at once"
        );
        let file_len = fs::metadata(dir.join(super::super::segment::file_name(0)))
            .unwrap()
            .len();
        assert_eq!(log.size_bytes(), file_len);
        assert!(file_len > 12 << 20);
        let limits = crate::log::ReadLimits {
            max_items: 100,
            max_bytes: 64 << 20,
        };
        let read = super::super::read::read_blocking(&log.shared, 0, limits).unwrap();
        assert_eq!(read.len(), 12);
        assert!(read.iter().enumerate().all(|(i, it)| it.offset == i as u64
            && it.frame.len() == 1 << 20
            && it.frame.iter().all(|&b| b == i as u8)));
        // Reads from the middle find their record through the index.
        let mid = super::super::read::read_blocking(&log.shared, 9, limits).unwrap();
        assert_eq!(mid.first().map(|i| i.offset), Some(9));
        drop(log);
        let _ = fs::remove_dir_all(&dir);
    }

    /// A group whose first piece cannot be written fails whole: nothing of it is
    /// published, the file keeps the published records alone, and the writer's index
    /// position goes back to the last published entry (it had run ahead of the file,
    /// and the next append's position arithmetic underflowed); the next group is
    /// written and read back from there.
    #[test]
    fn a_group_whose_piece_fails_leaves_nothing_and_the_next_one_writes() {
        let dir = std::env::temp_dir().join(format!("jelly-log-piecefail-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let opts = FileLogOptions {
            durability: crate::log::Durability::None,
            group_piece_bytes: 1 << 20,
            index_interval_bytes: 64,
            ..FileLogOptions::default()
        };
        let log = FileLog::open(&dir, opts).unwrap();
        let (r, rx) = request(vec![item(0)]);
        lock(&log.writer).commit(vec![r]);
        assert_eq!(rx.blocking_recv().unwrap().unwrap(), vec![0]);
        let path = dir.join(segment::file_name(0));
        let published = fs::metadata(&path).unwrap().len();
        // Writes to the segment fail (a handle open for reading only: EBADF).
        let writable = {
            let mut w = lock(&log.writer);
            std::mem::replace(&mut w.active, Arc::new(File::open(&path).unwrap()))
        };
        let big = |i: u64| NewItem {
            frame: Bytes::from(vec![7u8; 300_000]),
            ..item(i)
        };
        let (r, rx) = request((1..8).map(big).collect());
        lock(&log.writer).commit(vec![r]);
        assert!(rx.blocking_recv().unwrap().is_err());
        assert_eq!(log.next_offset(), 1);
        assert_eq!(fs::metadata(&path).unwrap().len(), published);
        let indexed = log.shared.read_state().segments[0]
            .index
            .last()
            .map(|e| e.pos);
        assert_eq!(indexed, Some(0));
        assert_eq!(lock(&log.writer).last_indexed, indexed);
        lock(&log.writer).active = writable;
        let (r, rx) = request(vec![item(1), item(2)]);
        lock(&log.writer).commit(vec![r]);
        assert_eq!(rx.blocking_recv().unwrap().unwrap(), vec![1, 2]);
        let limits = crate::log::ReadLimits::default();
        for from in 0..3 {
            let read = super::super::read::read_blocking(&log.shared, from, limits).unwrap();
            assert_eq!(read.first().map(|i| i.offset), Some(from));
            assert_eq!(read.len(), 3 - from as usize);
        }
        drop(log);
        let _ = fs::remove_dir_all(&dir);
    }

    /// A group whose fsync fails is taken out of the file again: its publishers are
    /// told it failed, so the restart that the failure requires must not bring its
    /// items back (a retry would store them twice).
    #[test]
    fn a_group_whose_fsync_fails_does_not_come_back_after_a_restart() {
        let dir = std::env::temp_dir().join(format!("jelly-log-syncfail-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let log = FileLog::open(&dir, FileLogOptions::default()).unwrap();
        let (r, rx) = request(vec![item(0)]);
        lock(&log.writer).commit(vec![r]);
        assert_eq!(rx.blocking_recv().unwrap().unwrap(), vec![0]);
        let path = dir.join(segment::file_name(0));
        let published = fs::metadata(&path).unwrap().len();
        lock(&log.writer).fail_next_sync = true;
        let (r, rx) = request((1..4).map(item).collect());
        lock(&log.writer).commit(vec![r]);
        assert!(rx.blocking_recv().unwrap().is_err());
        assert_eq!(log.next_offset(), 1);
        assert_eq!(fs::metadata(&path).unwrap().len(), published);
        // Appends are refused until a restart, which finds item 0 alone.
        let (r, rx) = request(vec![item(1)]);
        lock(&log.writer).commit(vec![r]);
        assert!(rx.blocking_recv().unwrap().is_err());
        drop(log);
        let log = FileLog::open(&dir, FileLogOptions::default()).unwrap();
        assert_eq!(log.next_offset(), 1);
        drop(log);
        let _ = fs::remove_dir_all(&dir);
    }

    /// Logs that share a tail-cache pool keep their caches together under its bound:
    /// a log that adds while the pool is full gives up its own oldest items (they are
    /// then read from disk, intact), and a log that goes gives its bytes back.
    #[test]
    fn logs_sharing_a_tail_cache_pool_stay_under_its_bound() {
        let base = std::env::temp_dir().join(format!("jelly-log-tailpool-{}", std::process::id()));
        let _ = fs::remove_dir_all(&base);
        let pool = Arc::new(super::super::TailCachePool::new(Some(60_000)));
        let opts = FileLogOptions {
            tail_cache_bytes: 1 << 20,
            tail_cache_pool: pool.clone(),
            durability: crate::log::Durability::None,
            ..FileLogOptions::default()
        };
        let a = FileLog::open(base.join("a"), opts.clone()).unwrap();
        let b = FileLog::open(base.join("b"), opts).unwrap();
        let big = |i: u64| NewItem {
            headers: vec![("note".into(), "h".repeat(10_000))],
            ..item(i)
        };
        let tail = |l: &FileLog| {
            let st = l.shared.state.read().unwrap_or_else(|e| e.into_inner());
            (st.tail.len(), st.tail_bytes)
        };
        let commit = |l: &FileLog, from: u64, n: u64| {
            let (r, rx) = request((from..from + n).map(big).collect());
            lock(&l.writer).commit(vec![r]);
            assert_eq!(rx.blocking_recv().unwrap().unwrap().len(), n as usize);
        };
        commit(&a, 0, 20);
        let (a_items, a_bytes) = tail(&a);
        assert!(
            a_items > 0 && a_bytes <= 60_000,
            "{a_items} items, {a_bytes} bytes"
        );
        commit(&b, 0, 20);
        let (_, b_bytes) = tail(&b);
        assert_eq!(pool.used(), tail(&a).1 + b_bytes);
        assert!(pool.used() <= 60_000, "{}", pool.used());
        // `a` went quiet: its writer's periodic pass trims it to its share (half the
        // pool), and `b`'s next items are cached in the room it made.
        lock(&a.writer).trim_tail_to_share();
        assert!(tail(&a).1 <= 30_000, "{}", tail(&a).1);
        commit(&b, 20, 2);
        assert!(tail(&b).0 >= 2, "{} items of b cached", tail(&b).0);
        assert!(pool.used() <= 60_000, "{}", pool.used());
        assert_eq!(pool.used(), tail(&a).1 + tail(&b).1);
        // Every item of `b` is still read back whole, from its segment.
        let read =
            super::super::read::read_blocking(&b.shared, 0, crate::log::ReadLimits::default())
                .unwrap();
        assert_eq!(read.len(), 22);
        assert!(read.iter().enumerate().all(|(i, it)| it.offset == i as u64
            && it.frame == format!("item-{i:04}").as_bytes()
            && it.headers[0].1.len() == 10_000));
        // `a` goes: its bytes go back, and `b` caches its new items again.
        let b_bytes = tail(&b).1;
        drop(a);
        assert_eq!(pool.used(), b_bytes);
        commit(&b, 22, 3);
        let (b_items, b_bytes) = tail(&b);
        assert!(b_items >= 3, "{b_items} items cached");
        assert_eq!(pool.used(), b_bytes);
        drop(b);
        assert_eq!(pool.used(), 0);
        let _ = fs::remove_dir_all(&base);
    }

    /// A group whose second request fails to start a new segment: the first was
    /// written, synced and is served, so it is answered with its offset, not the error.
    #[test]
    fn requests_written_before_a_failure_of_their_group_succeed_and_the_log_recovers() {
        let dir = std::env::temp_dir().join(format!("jelly-log-group-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let one = (HEADER_LEN + record::body_len(&item(0))) as u64;
        let opts = FileLogOptions {
            segment_bytes: one * 3,
            ..FileLogOptions::default()
        };
        let log = FileLog::open(&dir, opts).unwrap();
        // Two items in the active segment; the next request that does not fit rolls to
        // a segment at offset 3, whose name is taken so that it cannot be created.
        let (r, _rx) = request(vec![item(0), item(1)]);
        lock(&log.writer).commit(vec![r]);
        fs::write(dir.join(segment::file_name(3)), b"").unwrap();
        let (a, rx_a) = request(vec![item(2)]);
        let (b, rx_b) = request(vec![item(3)]);
        lock(&log.writer).commit(vec![a, b]);
        assert_eq!(rx_a.blocking_recv().unwrap().unwrap(), [2]);
        // The error names the segment that could not be created, not the active one.
        let new_seg = dir.join(segment::file_name(3));
        match rx_b.blocking_recv().unwrap() {
            Err(LogError::Io { path, source }) => {
                assert_eq!(Path::new(&path), new_seg, "{source}");
                assert!(source.to_string().contains("creating segment"), "{source}");
            }
            other => panic!("expected an I/O error, got {other:?}"),
        }
        assert_eq!(log.next_offset(), 3);
        // While the cause stays, appends fail; once it is gone, they go on where the
        // log stands, without a restart.
        let (c, rx_c) = request(vec![item(3)]);
        lock(&log.writer).commit(vec![c]);
        let refused = rx_c.blocking_recv().unwrap().unwrap_err().to_string();
        assert!(
            refused.contains("creating segment")
                && refused.contains("a write failed; the log takes appends again"),
            "{refused}"
        );
        let why = log.failure().unwrap();
        assert!(why.contains("until one can be written again"), "{why}");
        assert!(why.starts_with(&new_seg.display().to_string()), "{why}");
        fs::remove_file(dir.join(segment::file_name(3))).unwrap();
        let (d, rx_d) = request(vec![item(3)]);
        lock(&log.writer).commit(vec![d]);
        assert_eq!(rx_d.blocking_recv().unwrap().unwrap(), [3]);
        assert_eq!(log.next_offset(), 4);
        assert_eq!(log.failure(), None);
        drop(log);
        let _ = fs::remove_dir_all(&dir);
    }

    /// Retention that cannot delete the oldest segment's file (`chattr +i`, `EIO`)
    /// keeps that segment in the log and deletes no newer one before it, so its items
    /// stay readable and the next start finds no gap (which it would call corrupt).
    /// Once the file can go, retention goes on.
    #[test]
    fn a_segment_whose_file_cannot_be_deleted_stays_and_the_log_reopens() {
        let dir = std::env::temp_dir().join(format!("jelly-log-unlink-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let one = (HEADER_LEN + record::body_len(&item(0))) as u64;
        let opts = FileLogOptions {
            segment_bytes: one * 2,
            ..FileLogOptions::default()
        };
        let log = FileLog::open(&dir, opts.clone()).unwrap();
        // Five segments of two items each.
        for i in 0..10 {
            let (r, rx) = request(vec![item(i)]);
            lock(&log.writer).commit(vec![r]);
            assert_eq!(rx.blocking_recv().unwrap().unwrap(), [i]);
        }
        assert_eq!(log.segment_count(), 5);
        let oldest = dir.join(segment::file_name(0));
        lock(&log.shared.deleting).refuse = Some(oldest.clone());
        // Room for two segments: three should go, but the oldest cannot.
        log.set_retention(Some(one * 4), None);
        assert!(oldest.exists());
        assert_eq!((log.first_offset(), log.segment_count()), (0, 5));
        // Appends do not retry it (nor delete newer segments around it).
        let (r, rx) = request(vec![item(10)]);
        lock(&log.writer).commit(vec![r]);
        assert_eq!(rx.blocking_recv().unwrap().unwrap(), [10]);
        assert_eq!((log.first_offset(), log.segment_count()), (0, 6));
        drop(log);

        // The next start finds every segment in order, and retention then deletes
        // the ones it could not (the file can go now).
        let log = FileLog::open(&dir, opts).unwrap();
        assert_eq!((log.first_offset(), log.next_offset()), (0, 11));
        log.set_retention(Some(one * 4), None);
        assert!(!oldest.exists());
        assert_eq!((log.first_offset(), log.segment_count()), (8, 2));
        drop(log);
        let _ = fs::remove_dir_all(&dir);
    }
}
