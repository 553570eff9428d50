//! The durable log: a directory of segment files per topic.
//!
//! Layout and record format are described in `docs/server-design.md` and in
//! [`super::record`]. In short: segments are named `<base-offset>.seg` (20-digit
//! zero-padded decimal) and hold records `u32 len | u32 crc32c(body) | body`.
//!
//! Under [`Durability::Fsync`], one writer thread does the writing. [`FileLog::append`]
//! validates the items, sends them with a reply channel to the writer and waits. The
//! writer takes everything queued, writes it with one `pwrite` per segment touched,
//! fsyncs once, publishes the new end to readers and the watch channel, and then
//! answers every appender of the group (**group commit**). Under `None` and `Interval`
//! there is no fsync to share, so an append does the same work itself, under the
//! writer's lock: that saves two thread wake-ups per append, which on this kind of
//! machine are most of the time from publish to delivery. The thread then only runs
//! the timed fsyncs and retention.
//!
//! Readers never wait for the writer: they look up the segment and the sparse index
//! under a short lock and read the file with positioned reads on a blocking thread.
//! They only ever see bytes that the writer has finished (and, under `Fsync`, synced).
//!
//! The newest items (up to [`FileLogOptions::tail_cache_bytes`]) are also kept in
//! memory, published together with the new end. Live subscribers read at the end of
//! the log, so they are served from there without a blocking thread or a file read:
//! with many subscribers, that is the difference between one read per item and one
//! read per item per subscriber.
//!
//! Limits worth knowing:
//! - Only one `FileLog` may have a directory open at a time; nothing enforces that yet.
//! - After a failed write or segment roll (a full disk), appends fail until one can be
//!   made again: each later batch first cuts the active segment back to its last
//!   whole record and retries. After a failed fsync the state of unsynced pages is
//!   unknown, so the log refuses appends until it is reopened (a restart).
//! - Requests of a batch written before an error in the same batch are answered as
//!   appended (they are stored and served); only the rest get the error.
//! - An append whose future is dropped may still be written. After a crash, a batch
//!   that was never acknowledged can be present in full, in part (a prefix), or not at
//!   all; acknowledged batches are always present in full.
//! - Recovery verifies the CRC of every record of every segment, so opening reads the
//!   whole topic once. Only a damaged end of the newest segment with nothing valid
//!   after it is cut off as a torn tail; any other damage is [`LogError::Corrupt`].
//!   A crash that left holes (unwritten pages) in the middle of an unacknowledged,
//!   unsynced group can look like such damage too: recovery then refuses rather than
//!   guess, since guessing wrong would drop acknowledged items.

use std::collections::VecDeque;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot, watch};

use super::record::{self, HEADER_LEN};
use super::segment::{self, After, IndexEntry, RecordReader, ScanError, Segment};
use super::{Log, LogError, OffsetWatch, ReadLimits, check_consecutive, now_ms};
use crate::item::{Item, NewItem};

/// When an append counts as done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// After the records are written and fsynced (the default). Concurrent appends
    /// share one fsync.
    #[default]
    Fsync,
    /// After the records are written; the writer fsyncs at most this long after a
    /// write. A crash of the machine (not of the process) can lose that much.
    Interval(Duration),
    /// After the records are written; fsync only when a segment is sealed and on
    /// close. For benchmarks.
    None,
}

impl fmt::Display for Durability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Durability::Fsync => f.write_str("fsync"),
            Durability::Interval(d) => write!(f, "interval:{}", d.as_millis()),
            Durability::None => f.write_str("none"),
        }
    }
}

impl FromStr for Durability {
    type Err = String;

    /// `fsync`, `interval:<ms>` or `none`.
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "fsync" => Ok(Durability::Fsync),
            "none" => Ok(Durability::None),
            _ => match s.strip_prefix("interval:").map(str::parse::<u64>) {
                Some(Ok(ms)) => Ok(Durability::Interval(Duration::from_millis(ms))),
                _ => Err(format!(
                    "unknown durability {s:?} (expected fsync, interval:<ms> or none)"
                )),
            },
        }
    }
}

/// The time source for append timestamps and age retention, in milliseconds since
/// the Unix epoch. Tests inject their own.
#[derive(Clone)]
pub struct Clock(Arc<dyn Fn() -> u64 + Send + Sync>);

impl Clock {
    /// The system clock ([`now_ms`]).
    pub fn system() -> Self {
        Clock(Arc::new(now_ms))
    }

    /// A clock reading `f`.
    pub fn from_fn(f: impl Fn() -> u64 + Send + Sync + 'static) -> Self {
        Clock(Arc::new(f))
    }

    pub fn now_ms(&self) -> u64 {
        (self.0)()
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::system()
    }
}

impl fmt::Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Clock")
    }
}

/// Settings of a [`FileLog`].
#[derive(Debug, Clone)]
pub struct FileLogOptions {
    pub durability: Durability,
    /// A new segment starts when the next batch would take the active one past this
    /// size (a segment always takes at least one batch).
    pub segment_bytes: u64,
    /// The sparse index gets an entry every this many bytes of records.
    pub index_interval_bytes: u64,
    /// Largest item, as the size of its record body (frame plus metadata). Larger
    /// items are refused with [`LogError::ItemTooLarge`]. At most `u32::MAX`.
    pub max_item_bytes: usize,
    /// Delete the oldest segments while the topic is larger than this.
    pub retention_bytes: Option<u64>,
    /// Delete segments whose newest record is older than this.
    pub retention_age: Option<Duration>,
    /// Besides after every append, retention is checked this often.
    pub retention_check_interval: Duration,
    /// Bytes of appends that may wait for the writer before `append` waits too.
    pub max_inflight_bytes: usize,
    /// Time source for timestamps and age retention.
    pub clock: Clock,
    /// Bytes of the newest items (frames) kept in memory for readers at the end of
    /// the log. 0 turns the cache off.
    pub tail_cache_bytes: usize,
}

impl Default for FileLogOptions {
    fn default() -> Self {
        FileLogOptions {
            durability: Durability::Fsync,
            segment_bytes: 64 << 20,
            index_interval_bytes: 4096,
            max_item_bytes: 16 << 20,
            retention_bytes: None,
            retention_age: None,
            retention_check_interval: Duration::from_secs(10),
            max_inflight_bytes: 64 << 20,
            clock: Clock::system(),
            tail_cache_bytes: 32 << 20,
        }
    }
}

/// A durable [`Log`] in a directory of segment files. See the module docs.
pub struct FileLog {
    shared: Arc<Shared>,
    tx: Option<mpsc::Sender<Request>>,
    /// The writer thread: group commits under `Fsync`, timed fsyncs and retention.
    thread: Option<JoinHandle<()>>,
    /// The write side, shared with the thread. Under `None` and `Interval` an append
    /// commits inline under this lock: without an fsync to share there is nothing to
    /// gain from a hand-off, and each thread wake costs tens of microseconds of
    /// latency on the path from publish to delivery.
    writer: Arc<Mutex<Writer>>,
    inline: bool,
    inflight: Arc<Semaphore>,
    max_inflight: u32,
    max_item_bytes: usize,
}

struct Shared {
    dir: PathBuf,
    state: RwLock<State>,
    watch: OffsetWatch,
    /// Set by [`Log::close`]; reads check it, the writer has its own flag.
    closed: AtomicBool,
    /// Held while a retained segment is taken out and its file deleted (and the
    /// directory synced), so that deletions stay in order; taken after the writer's
    /// lock, never before.
    deleting: Mutex<()>,
    /// The writer's failure while appends are refused (see [`Writer::failed`]), for
    /// describe and `/metrics` without taking the writer's lock.
    failure: Mutex<Option<String>>,
}

struct State {
    /// Never empty; the last one is the active segment.
    segments: Vec<Segment>,
    next: u64,
    /// The newest items, in offset order, ending at `next - 1` (may be empty).
    tail: VecDeque<Item>,
    /// Frame bytes held in `tail`.
    tail_bytes: usize,
}

impl State {
    fn first(&self) -> u64 {
        self.segments.first().map_or(self.next, |s| s.base)
    }

    /// Items from `from` out of the tail cache, or `None` when `from` is older than
    /// the cache (then the files must be read). `from` must be retained and below `next`.
    fn read_tail(&self, from: u64, limits: ReadLimits) -> Option<Vec<Item>> {
        let first = self.tail.front()?.offset;
        if from < first {
            return None;
        }
        let mut out = Vec::new();
        let mut bytes = 0usize;
        for item in self.tail.range((from - first) as usize..) {
            if !out.is_empty() && bytes + item.frame.len() > limits.max_bytes {
                break;
            }
            bytes += item.frame.len();
            out.push(item.clone());
            if out.len() >= limits.max_items {
                break;
            }
        }
        Some(out)
    }

    /// Index of the segment holding `offset` (which must be retained and below `next`).
    fn find(&self, offset: u64) -> usize {
        self.segments
            .partition_point(|s| s.base <= offset)
            .saturating_sub(1)
    }
}

impl Shared {
    fn read_state(&self) -> RwLockReadGuard<'_, State> {
        // Every update of the state is completed before the lock is released, so a
        // panic elsewhere cannot leave it half-changed.
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write_state(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }
}

type Reply = oneshot::Sender<Result<Vec<u64>, LogError>>;

struct Request {
    items: Vec<NewItem>,
    /// Offsets and timestamps chosen by the appender ([`Log::append_at`]).
    placed: Option<Placed>,
    /// Record bytes (headers included) of all items.
    bytes: u64,
    reply: Reply,
    /// Released when the writer is done with the request.
    _permit: Option<OwnedSemaphorePermit>,
}

impl FileLog {
    /// Opens (or creates) the log in `dir` and recovers it: every segment is checked,
    /// a torn tail of the last one (a bad record with nothing valid after it) is cut
    /// off, any other bad record is [`LogError::Corrupt`] and changes nothing. Blocks
    /// on file I/O; call it off the async threads (`spawn_blocking`) where that matters.
    pub fn open(dir: impl AsRef<Path>, options: FileLogOptions) -> Result<FileLog, LogError> {
        let dir = dir.as_ref().to_path_buf();
        fs::create_dir_all(&dir).map_err(|e| io_err(&dir, e))?;
        let segments = recover(&dir, options.index_interval_bytes)?;
        let next = segments.last().map_or(0, |s| s.next);
        let watch = OffsetWatch::new(next);
        let shared = Arc::new(Shared {
            dir,
            state: RwLock::new(State {
                segments,
                next,
                tail: VecDeque::new(),
                tail_bytes: 0,
            }),
            watch,
            closed: AtomicBool::new(false),
            deleting: Mutex::new(()),
            failure: Mutex::new(None),
        });
        let max_item_bytes = options.max_item_bytes.min(u32::MAX as usize);
        let max_inflight = options.max_inflight_bytes.clamp(1, u32::MAX as usize >> 1) as u32;
        let (tx, rx) = mpsc::channel();
        let inline = options.durability != Durability::Fsync;
        let writer = Arc::new(Mutex::new(Writer::new(shared.clone(), options)?));
        let thread_writer = writer.clone();
        let handle = std::thread::Builder::new()
            .name("jelly-log-writer".into())
            .spawn(move || Writer::run(&thread_writer, &rx))
            .map_err(|e| io_err(&shared.dir, e))?;
        Ok(FileLog {
            shared,
            tx: Some(tx),
            thread: Some(handle),
            writer,
            inline,
            inflight: Arc::new(Semaphore::new(max_inflight as usize)),
            max_inflight,
            max_item_bytes,
        })
    }

    /// [`LogError::Closed`] once the log is closed.
    fn check_open(&self) -> Result<(), LogError> {
        if self.shared.closed.load(Ordering::Acquire) {
            return Err(LogError::Closed);
        }
        Ok(())
    }

    /// The topic's directory.
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// Bytes of records on disk (all retained segments).
    pub fn size_bytes(&self) -> u64 {
        self.shared
            .read_state()
            .segments
            .iter()
            .map(|s| s.len)
            .sum()
    }

    /// Applies new retention limits from now on; segments beyond them are deleted
    /// before it returns (so it blocks on file I/O). Under an age limit an active
    /// segment whose items are all too old is first closed, as on every check. Appends
    /// go on meanwhile (see `retain_all`).
    pub fn set_retention(&self, bytes: Option<u64>, age: Option<Duration>) {
        {
            let mut w = lock(&self.writer);
            w.opts.retention_bytes = bytes;
            w.opts.retention_age = age;
        }
        retain_all(&self.writer);
    }

    /// Number of retained segments (the active one included).
    pub fn segment_count(&self) -> usize {
        self.shared.read_state().segments.len()
    }
}

impl Drop for FileLog {
    /// Closes the channel; the writer finishes what is queued, fsyncs and exits.
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(h) = self.thread.take() {
            let _ = h.join();
        }
    }
}

impl FileLog {
    /// Why appends are refused (a failed write or fsync), while they are.
    pub fn failure(&self) -> Option<String> {
        lock(&self.shared.failure).clone()
    }

    /// Whether appends commit inline, under the writer's lock, completing in their
    /// first poll (without fsync), rather than waiting for the writer's thread.
    pub fn commits_inline(&self) -> bool {
        self.inline
    }

    /// Checks the items and hands them to the writer (inline, or to its thread).
    async fn submit(
        &self,
        items: Vec<NewItem>,
        placed: Option<Placed>,
    ) -> Result<Vec<u64>, LogError> {
        if items.is_empty() {
            return Ok(Vec::new());
        }
        let mut bytes = 0u64;
        for it in &items {
            let size = record::body_len(it);
            if size > self.max_item_bytes || it.headers.len() > usize::from(u16::MAX) {
                return Err(LogError::ItemTooLarge {
                    size,
                    max: self.max_item_bytes,
                });
            }
            bytes += (HEADER_LEN + size) as u64;
        }
        let tx = self.tx.as_ref().ok_or(LogError::Closed)?;
        if self.inline {
            let (reply, rx) = oneshot::channel();
            lock(&self.writer).commit(vec![Request {
                items,
                placed,
                bytes,
                reply,
                _permit: None,
            }]);
            return rx.await.map_err(|_| LogError::Closed)?;
        }
        let permits = bytes.min(u64::from(self.max_inflight)) as u32;
        let permit = self
            .inflight
            .clone()
            .acquire_many_owned(permits)
            .await
            .map_err(|_| LogError::Closed)?;
        let (reply, rx) = oneshot::channel();
        tx.send(Request {
            items,
            placed,
            bytes,
            reply,
            _permit: Some(permit),
        })
        .map_err(|_| LogError::Closed)?;
        rx.await.map_err(|_| LogError::Closed)?
    }
}

impl Log for FileLog {
    async fn append(&self, items: Vec<NewItem>) -> Result<Vec<u64>, LogError> {
        self.submit(items, None).await
    }

    async fn append_at(&self, items: Vec<Item>, restart: bool) -> Result<(), LogError> {
        let Some(first) = items.first().map(|i| i.offset) else {
            return Ok(());
        };
        check_consecutive(&items)?;
        let mut timestamps = Vec::with_capacity(items.len());
        let items = items
            .into_iter()
            .map(|it| {
                timestamps.push(it.timestamp_ms);
                NewItem {
                    frame: it.frame,
                    statements: it.statements,
                    source: it.source,
                    headers: it.headers,
                }
            })
            .collect();
        let placed = Placed {
            first,
            timestamps,
            restart,
        };
        self.submit(items, Some(placed)).await.map(|_| ())
    }

    async fn read(&self, from: u64, limits: ReadLimits) -> Result<Vec<Item>, LogError> {
        self.check_open()?;
        if let Some(r) = self.read_now(from, limits) {
            return r;
        }
        let shared = self.shared.clone();
        let dir = self.shared.dir.clone();
        tokio::task::spawn_blocking(move || read_blocking(&shared, from, limits))
            .await
            .map_err(|e| io_err(&dir, std::io::Error::other(e.to_string())))?
    }

    fn read_now(&self, from: u64, limits: ReadLimits) -> Option<Result<Vec<Item>, LogError>> {
        if let Err(e) = self.check_open() {
            return Some(Err(e));
        }
        let st = self.shared.read_state();
        let first = st.first();
        if from < first {
            return Some(Err(LogError::Truncated {
                requested: from,
                first,
            }));
        }
        if from >= st.next || limits.max_items == 0 {
            return Some(Ok(Vec::new()));
        }
        st.read_tail(from, limits).map(Ok)
    }

    fn first_offset(&self) -> u64 {
        self.shared.read_state().first()
    }

    fn next_offset(&self) -> u64 {
        self.shared.read_state().next
    }

    async fn offset_for_timestamp(&self, timestamp_ms: u64) -> Result<u64, LogError> {
        self.check_open()?;
        let shared = self.shared.clone();
        let dir = self.shared.dir.clone();
        tokio::task::spawn_blocking(move || offset_for_timestamp_blocking(&shared, timestamp_ms))
            .await
            .map_err(|e| io_err(&dir, std::io::Error::other(e.to_string())))?
    }

    fn watch(&self) -> watch::Receiver<u64> {
        self.shared.watch.subscribe()
    }

    fn close(&self) {
        // Under the writer's lock: an inline commit in progress completes first, and
        // the writer thread writes nothing after (it checks the flag under the lock).
        lock(&self.writer).closed = true;
        self.shared.closed.store(true, Ordering::Release);
        self.shared.watch.close();
    }
}

/// Locks the writer (or the `deleting` gate). The writer is only changed by complete
/// operations, so a panic elsewhere cannot leave it half-changed.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn io_err(path: &Path, source: std::io::Error) -> LogError {
    LogError::Io {
        path: segment::display(path),
        source,
    }
}

fn corrupt(path: &Path, offset: u64, reason: impl Into<String>) -> LogError {
    LogError::Corrupt {
        path: segment::display(path),
        offset,
        reason: reason.into(),
    }
}

fn scan_err(path: &Path, e: ScanError) -> LogError {
    match e {
        ScanError::Io(e) => io_err(path, e),
        ScanError::Bad { pos, reason } => corrupt(path, pos, reason),
    }
}

// ---------------------------------------------------------------------------------
// Recovery

/// The file that records the first offset of the newest segment ever started, so that
/// recovery notices newest segments that went missing (deleted by hand, lost with a
/// disk): without it, their offsets would be handed out again under the same topic
/// id, and a reader resuming past them would silently skip the new items.
const NEWEST_SEGMENT_FILE: &str = "newest-segment";

/// Records that segments up to `base` were started (atomically: a temporary file,
/// synced, renamed over the old record, and the directory synced).
fn note_newest_segment(dir: &Path, base: u64) -> std::io::Result<()> {
    let tmp = dir.join(format!("{NEWEST_SEGMENT_FILE}.tmp"));
    {
        let f = File::create(&tmp)?;
        f.write_all_at(format!("{base}\n").as_bytes(), 0)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, dir.join(NEWEST_SEGMENT_FILE))?;
    super::sync_dir(dir)
}

/// The newest segment start on record, if any.
fn noted_newest_segment(dir: &Path) -> Result<Option<u64>, LogError> {
    let path = dir.join(NEWEST_SEGMENT_FILE);
    match fs::read_to_string(&path) {
        Ok(text) => text
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| corrupt(&path, 0, format!("`{}` is not an offset", text.trim()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err(&path, e)),
    }
}

/// Refuses a log whose newest segment starts before the newest one on record.
fn check_newest_segment(dir: &Path, newest: Option<u64>) -> Result<(), LogError> {
    let Some(noted) = noted_newest_segment(dir)? else {
        return Ok(());
    };
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
    Ok(())
}

fn recover(dir: &Path, index_interval: u64) -> Result<Vec<Segment>, LogError> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| io_err(dir, e))? {
        let entry = entry.map_err(|e| io_err(dir, e))?;
        let name = entry.file_name();
        if let Some(base) = name.to_str().and_then(segment::parse_file_name) {
            found.push((base, entry.path()));
        }
    }
    found.sort_unstable_by_key(|(base, _)| *base);
    check_newest_segment(dir, found.last().map(|(base, _)| *base))?;
    if found.is_empty() {
        let path = dir.join(segment::file_name(0));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| io_err(&path, e))?;
        sync_dir(dir)?;
        return Ok(vec![empty_segment(0, path, file)]);
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
                format!(
                    "segment starts at offset {base} but the previous one ends at {}",
                    prev.next
                ),
            ));
        }
        segments.push(scan_segment(base, path, i + 1 == n, index_interval)?);
    }
    Ok(segments)
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
                seg.next += 1;
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

fn sync_dir(dir: &Path) -> Result<(), LogError> {
    super::sync_dir(dir).map_err(|e| io_err(dir, e))
}

// ---------------------------------------------------------------------------------
// Reading

/// Where a read continues: a segment file and a position in it.
struct Cursor {
    path: PathBuf,
    file: Arc<File>,
    pos: u64,
    end: u64,
}

fn read_blocking(shared: &Shared, from: u64, limits: ReadLimits) -> Result<Vec<Item>, LogError> {
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
        while let Some(pos) = reader.next().map_err(|e| scan_err(&cur.path, e))? {
            let body = reader.body();
            let Some((off, _)) = record::peek(body) else {
                return Err(corrupt(&cur.path, pos, "record body too short"));
            };
            if off < offset {
                continue;
            }
            if off != offset {
                return Err(corrupt(
                    &cur.path,
                    pos,
                    format!("record has offset {off}, expected {offset}"),
                ));
            }
            let item = record::decode(Bytes::copy_from_slice(body))
                .map_err(|r| corrupt(&cur.path, pos, r))?;
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
            return Err(corrupt(
                &cur.path,
                cur.pos,
                format!("offset {offset} not found in segment"),
            ));
        }
    }
    Ok(out)
}

fn offset_for_timestamp_blocking(shared: &Shared, ts: u64) -> Result<u64, LogError> {
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

// ---------------------------------------------------------------------------------
// Writing

struct Writer {
    shared: Arc<Shared>,
    opts: FileLogOptions,
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
    failed: Option<(std::io::ErrorKind, String)>,
    /// The failure cannot be recovered from in place: after a failed fsync the state
    /// of the file's unsynced pages is unknown, and a failed restart leaves the
    /// segments half replaced. Reopening the log (a restart) recovers from the files.
    failed_for_good: bool,
    /// Set by [`Log::close`]: appends fail with [`LogError::Closed`], and neither
    /// fsyncs nor retention touch the files any more (they are being deleted).
    closed: bool,
    buf: Vec<u8>,
}

/// Where the items of an [`Log::append_at`] go: their offsets and timestamps.
struct Placed {
    first: u64,
    /// One per item.
    timestamps: Vec<u64>,
    /// The log may start over at `first` even when it holds items.
    restart: bool,
}

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
    fn new(shared: Arc<Shared>, opts: FileLogOptions) -> Result<Writer, LogError> {
        let st = shared.read_state();
        let Some(seg) = st.segments.last() else {
            return Err(corrupt(&shared.dir, 0, "no segment"));
        };
        let active = seg.file.clone();
        let active_path = seg.path.clone();
        let len = seg.len;
        let next = st.next;
        let last_ts = st.segments.iter().map(|s| s.last_ts).max().unwrap_or(0);
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
        })
    }

    /// The writer thread: takes queued appends as one group, and between them runs
    /// timed fsyncs and retention. Ends when the log is dropped.
    fn run(w: &Mutex<Writer>, rx: &mpsc::Receiver<Request>) {
        retain_all(w);
        loop {
            let wait = lock(w).wait_time();
            match rx.recv_timeout(wait) {
                Ok(first) => {
                    let mut group = vec![first];
                    while let Ok(more) = rx.try_recv() {
                        group.push(more);
                    }
                    lock(w).commit(group);
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            let mut g = lock(w);
            if g.dirty
                && let Durability::Interval(d) = g.opts.durability
                && g.last_sync.elapsed() >= d
            {
                g.sync_quietly();
            }
            let check = g.last_retention.elapsed() >= g.opts.retention_check_interval;
            drop(g);
            if check {
                retain_all(w);
            }
        }
        let mut g = lock(w);
        if g.dirty {
            g.sync_quietly();
        }
    }

    fn wait_time(&self) -> Duration {
        let mut wait = self
            .opts
            .retention_check_interval
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
            self.set_failed(&e);
        } else {
            self.dirty = false;
            self.last_sync = Instant::now();
        }
    }

    /// Writes a group of appends, makes it durable per the policy, publishes it, applies
    /// retention and answers the appenders.
    fn commit(&mut self, group: Vec<Request>) {
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
            Err(e) => {
                tracing::error!(path = %self.active_path.display(), error = %e, "log: write failed");
                if self.failed.is_none() {
                    self.set_failed(&e);
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
    fn set_failed(&mut self, e: &std::io::Error) {
        self.failed = Some((e.kind(), e.to_string()));
        let how = if self.failed_for_good {
            "appends are refused until the server restarts"
        } else {
            "appends are refused until one can be written again"
        };
        *lock(&self.shared.failure) = Some(format!("{}: {e}; {how}", self.active_path.display()));
    }

    fn failure(&self) -> LogError {
        let (kind, msg) = self
            .failed
            .clone()
            .unwrap_or((std::io::ErrorKind::Other, "unknown".into()));
        io_err(
            &self.active_path,
            std::io::Error::new(kind, format!("log failed earlier: {msg}")),
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
    ) -> std::io::Result<()> {
        if self.failed.is_some() && !self.recover() {
            for req in group {
                replies.push((req.reply, Ok(Vec::new())));
            }
            return Err(std::io::Error::other("log failed earlier"));
        }
        let now = self.opts.clock.now_ms().max(self.last_ts);
        let mut pending = Pending::default();
        self.buf.clear();
        let mut result = Ok(());
        for req in group {
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
                        .inspect_err(|_| self.failed_for_good = true);
                }
            }
            if result.is_ok() {
                let used = self.len + self.buf.len() as u64;
                if used > 0
                    && (used + req.bytes > self.opts.segment_bytes
                        || self.active_older_than_retention(now, &pending))
                {
                    result = self
                        .flush(&mut pending, true)
                        .inspect(|()| *written = replies.len())
                        .and_then(|()| self.roll());
                }
            }
            if result.is_err() {
                replies.push((req.reply, Ok(Vec::new())));
                continue;
            }
            let mut offsets = Vec::with_capacity(req.items.len());
            for (i, item) in req.items.iter().enumerate() {
                let offset = self.next + pending.count;
                let ts = match &req.placed {
                    Some(p) => p.timestamps.get(i).copied().unwrap_or(now),
                    None => now.max(pending.last_ts),
                };
                let pos = self.len + self.buf.len() as u64;
                if self
                    .last_indexed
                    .is_none_or(|p| pos - p >= self.opts.index_interval_bytes)
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
            }
            replies.push((req.reply, Ok(offsets)));
        }
        result?;
        let sync = match self.opts.durability {
            Durability::Fsync => true,
            Durability::Interval(d) => self.last_sync.elapsed() >= d,
            Durability::None => false,
        };
        self.flush(&mut pending, sync)
    }

    /// Writes the buffered records to the active segment, fsyncs if `sync` (or if
    /// asked to and earlier writes are unsynced), and publishes them to readers.
    fn flush(&mut self, pending: &mut Pending, sync: bool) -> std::io::Result<()> {
        if !self.buf.is_empty() {
            if let Err(e) = self.active.write_all_at(&self.buf, self.len) {
                // Best effort: do not leave a partial record behind a later one.
                let _ = self.active.set_len(self.len);
                return Err(e);
            }
            self.dirty = true;
        }
        if sync && self.dirty {
            self.active
                .sync_data()
                .inspect_err(|_| self.failed_for_good = true)?;
            self.dirty = false;
            self.last_sync = Instant::now();
        }
        if pending.count > 0 {
            let written = self.buf.len() as u64;
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
            for item in pending.items.drain(..) {
                st.tail_bytes += item.frame.len();
                st.tail.push_back(item);
            }
            while st.tail_bytes > self.opts.tail_cache_bytes {
                let Some(old) = st.tail.pop_front() else {
                    break;
                };
                st.tail_bytes -= old.frame.len();
            }
            drop(st);
            self.len += written;
            self.next += pending.count;
            self.last_ts = self.last_ts.max(pending.last_ts);
        }
        self.buf.clear();
        *pending = Pending::default();
        Ok(())
    }

    /// Drops every record and starts over with an empty segment at `first` (for an
    /// [`Log::append_at`] past the end). Segments are deleted oldest first, each
    /// deletion durable before the next, and the new segment is only created once
    /// they are all gone: a crash in between leaves a log that recovers (a suffix of
    /// the old one, or an empty log at 0), never one with a gap.
    fn restart_at(&mut self, first: u64) -> std::io::Result<()> {
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
            _ => super::sync_dir(&self.shared.dir)?,
        }
        for path in old {
            fs::remove_file(&path)?;
            super::sync_dir(&self.shared.dir)?;
        }
        let path = self.shared.dir.join(segment::file_name(first));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)?;
        super::sync_dir(&self.shared.dir)?;
        note_newest_segment(&self.shared.dir, first)?;
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
    /// On failure the old one stays active, as it was.
    fn roll(&mut self) -> std::io::Result<()> {
        let path = self.shared.dir.join(segment::file_name(self.next));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)?;
        // Synced whatever the durability policy (one roll per segment, so the cost is
        // small): the record must never name a segment that a crash could still lose,
        // or recovery would call a log that merely lost unsynced writes damaged.
        if let Err(e) = super::sync_dir(&self.shared.dir)
            .and_then(|()| note_newest_segment(&self.shared.dir, self.next))
        {
            // Not left behind to make the next attempt's `create_new` fail.
            let _ = fs::remove_file(&path);
            return Err(e);
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
            self.active.sync_data().map(|()| self.dirty = false)
        } else {
            Ok(())
        }
        .and_then(|()| self.roll());
        if let Err(e) = rolled {
            tracing::warn!(path = %self.active_path.display(), error = %e, "log: cannot roll an expired segment");
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
    /// too old).
    fn retain_some(&mut self, most: usize) {
        let Some(now) = self.start_retention() else {
            return;
        };
        for _ in 0..most {
            let _deleting = lock(&self.shared.deleting);
            let Some(victim) = self.take_expired_segment(now) else {
                break;
            };
            delete_segment(&self.shared, &victim);
        }
    }

    /// Takes the oldest segment out of the log if it is beyond the size or age limit
    /// (never the active one). Its file is left for [`delete_segment`].
    fn take_expired_segment(&self, now: u64) -> Option<Segment> {
        if self.closed {
            return None;
        }
        let mut st = self.shared.write_state();
        if st.segments.len() <= 1 {
            return None;
        }
        let total: u64 = st.segments.iter().map(|s| s.len).sum();
        let oldest = &st.segments[0];
        let too_big = self.opts.retention_bytes.is_some_and(|max| total > max);
        let too_old = self
            .age_limit_ms()
            .is_some_and(|age_ms| now.saturating_sub(oldest.last_ts) > age_ms);
        (too_big || too_old).then(|| st.segments.remove(0))
    }
}

/// Deletes the file of a segment taken out of the log, and makes that durable before
/// the next one goes: a crash must not bring back an old segment with a gap after it
/// (recovery would call that corrupt). Called with `deleting` held.
fn delete_segment(shared: &Shared, victim: &Segment) {
    tracing::debug!(path = %victim.path.display(), "log: retention deletes segment");
    if let Err(e) = fs::remove_file(&victim.path) {
        tracing::warn!(path = %victim.path.display(), error = %e, "log: cannot delete segment");
    }
    if let Err(e) = sync_dir(&shared.dir) {
        tracing::warn!(error = %e, "log: cannot sync directory after retention");
    }
}

/// Segments an append's commit deletes at most ([`Writer::retain_some`]).
const RETAIN_PER_COMMIT: usize = 4;

/// Deletes every segment beyond the retention limits. The writer's lock is taken for
/// each segment and released before its file is deleted and the directory synced, so
/// appends (which commit under that lock without `fsync`) go on while many go.
fn retain_all(w: &Mutex<Writer>) {
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
        let deleting = lock(&shared.deleting);
        let victim = g.take_expired_segment(now);
        drop(g);
        let Some(victim) = victim else {
            break;
        };
        delete_segment(&shared, &victim);
        drop(deleting);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(rx_b.blocking_recv().unwrap().is_err());
        assert_eq!(log.next_offset(), 3);
        // While the cause stays, appends fail; once it is gone, they go on where the
        // log stands, without a restart.
        let (c, rx_c) = request(vec![item(3)]);
        lock(&log.writer).commit(vec![c]);
        assert!(rx_c.blocking_recv().unwrap().is_err());
        let why = log.failure().unwrap();
        assert!(why.contains("until one can be written again"), "{why}");
        fs::remove_file(dir.join(segment::file_name(3))).unwrap();
        let (d, rx_d) = request(vec![item(3)]);
        lock(&log.writer).commit(vec![d]);
        assert_eq!(rx_d.blocking_recv().unwrap().unwrap(), [3]);
        assert_eq!(log.next_offset(), 4);
        assert_eq!(log.failure(), None);
        drop(log);
        let _ = fs::remove_dir_all(&dir);
    }
}
