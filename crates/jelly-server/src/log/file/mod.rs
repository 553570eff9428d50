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
//! - Only one `FileLog` may have a directory open at a time; the server's registry makes
//!   sure of it by locking the whole data directory (`topic::LOCK_FILE`).
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

mod read;
mod recovery;
mod tail_pool;
mod writer;

use read::{offset_for_timestamp_blocking, read_blocking};
use recovery::recover;
pub use tail_pool::TailCachePool;
use writer::{Writer, retain_all};

use std::collections::VecDeque;
use std::fmt;
use std::fs::{self};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot, watch};

use super::record::{self, HEADER_LEN};
use super::segment::{self, ScanError, Segment};
use super::{Clock, Log, LogError, OffsetWatch, ReadLimits, check_consecutive};
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
    /// Besides after every append, retention is checked at least this often. Under
    /// an age limit, more often: every half of the limit, but not more often than
    /// every 100 ms, so that a quiet topic's items outlive the limit by about half
    /// of it (a topic without an age limit is not woken more often for it).
    pub retention_check_interval: Duration,
    /// Bytes of appends that may wait for the writer before `append` waits too.
    pub max_inflight_bytes: usize,
    /// Time source for timestamps and age retention.
    pub clock: Clock,
    /// Bytes of the newest items (frames) kept in memory for readers at the end of
    /// the log. 0 turns the cache off.
    pub tail_cache_bytes: usize,
    /// The memory this log's tail cache shares with those of other logs (a server's
    /// topics share one): see [`TailCachePool`].
    pub tail_cache_pool: Arc<TailCachePool>,
    /// A group of appends whose records grow past this is written in pieces of about
    /// this size (published to readers only once all are written), so that its
    /// records are not held in memory whole beside its items. The price: a crash
    /// while such a group is written may leave its first pieces in the log, whole
    /// records that were never acknowledged. Smaller groups are written in one call.
    pub group_piece_bytes: usize,
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
            tail_cache_pool: Arc::new(TailCachePool::default()),
            group_piece_bytes: 32 << 20,
        }
    }
}

/// A durable [`Log`] in a directory of segment files. See the module docs.
pub struct FileLog {
    shared: Arc<Shared>,
    tx: Option<mpsc::Sender<ToWriter>>,
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
    /// Held while an expired segment's file is deleted and the segment taken out (and
    /// the directory synced), and while a restart replaces the segments, so that
    /// deletions stay in order; taken after the writer's lock, never before.
    deleting: Mutex<Deleting>,
    /// The writer's failure while appends are refused (see [`Writer::failed`]), for
    /// describe and `/metrics` without taking the writer's lock.
    failure: Mutex<Option<String>>,
    /// Where the tail cache's bytes are counted.
    tail_pool: Arc<TailCachePool>,
    /// The first damage a read found after the log was opened (see [`FileLog::damage`]).
    damage: Mutex<Option<String>>,
}

impl Shared {
    /// Passes a read's result through, noting the first one that found the files
    /// damaged: a record that fails its check, or an I/O error reading one.
    fn note_read<T>(&self, r: Result<T, LogError>) -> Result<T, LogError> {
        if let Err(e) = &r {
            self.note_damage(e);
        }
        r
    }

    /// Notes `e` as the log's damage when it is the first, and is damage: a record
    /// that fails its check, or an I/O error reading one.
    fn note_damage(&self, e: &LogError) {
        if matches!(e, LogError::Corrupt { .. } | LogError::Io { .. }) {
            let mut damage = lock(&self.damage);
            if damage.is_none() {
                tracing::error!(log = %self.dir.display(), error = %e, "a read found the log damaged");
                *damage = Some(e.to_string());
            }
        }
    }
}

impl Drop for Shared {
    /// The cache goes with the log: its bytes go back to the pool.
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        self.tail_pool.give(st.tail_bytes);
        self.tail_pool.log_closed();
    }
}

/// What retention remembers between its deletions.
#[derive(Default)]
struct Deleting {
    /// Base of the oldest segment, whose file could not be deleted (a failed unlink:
    /// `EPERM` on an immutable file, `EIO`, `EROFS`). It stays in the log, and only the
    /// periodic retention pass tries it again, not every append.
    stuck: Option<u64>,
    /// Tests: deleting this file fails, as an unlink refused by the file system would.
    #[cfg(test)]
    refuse: Option<PathBuf>,
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

    /// Drops the oldest item of the tail cache and gives its bytes back to `pool`;
    /// `false` when the cache is empty.
    fn drop_oldest_cached(&mut self, pool: &TailCachePool) -> bool {
        let Some(old) = self.tail.pop_front() else {
            return false;
        };
        let held = old.held_bytes();
        self.tail_bytes -= held;
        pool.give(held);
        true
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

/// Where the items of an [`Log::append_at`] go: their offsets and timestamps.
struct Placed {
    first: u64,
    /// One per item.
    timestamps: Vec<u64>,
    /// The log may start over at `first` even when it holds items.
    restart: bool,
}

/// What the writer thread is sent.
enum ToWriter {
    /// An append to commit (under `Fsync`; otherwise appends commit inline).
    Append(Request),
    /// The retention limits changed: the thread works out again how long it may
    /// sleep, since a lower age limit is checked more often.
    LimitsChanged,
}

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
        let recovered = recover(&dir, options.index_interval_bytes)?;
        let segments = recovered.segments;
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
            deleting: Mutex::new(Deleting::default()),
            failure: Mutex::new(None),
            tail_pool: options.tail_cache_pool.clone(),
            damage: Mutex::new(None),
        });
        options.tail_cache_pool.log_opened();
        let max_item_bytes = options.max_item_bytes.min(u32::MAX as usize);
        let max_inflight = options.max_inflight_bytes.clamp(1, u32::MAX as usize >> 1) as u32;
        let (tx, rx) = mpsc::channel();
        let inline = options.durability != Durability::Fsync;
        let writer = Arc::new(Mutex::new(Writer::new(
            shared.clone(),
            options,
            recovered.last_ts,
        )?));
        let thread_writer = writer.clone();
        let thread_shared = shared.clone();
        let handle = std::thread::Builder::new()
            .name("jelly-log-writer".into())
            .spawn(move || {
                // A bug must not leave the topic silently refusing appends as if closed:
                // its failure is recorded (the description's `log_failed`, the metric).
                let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    Writer::run(&thread_writer, &rx)
                }));
                if let Err(panic) = run {
                    let what = panic
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "a panic".into());
                    tracing::error!(
                        dir = %thread_shared.dir.display(),
                        "log: the writer stopped ({what}); appends are refused until a restart"
                    );
                    *lock(&thread_shared.failure) = Some(format!(
                        "the log writer stopped ({what}); appends are refused until the \
                         server is restarted"
                    ));
                }
            })
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
        // The thread may be asleep for the old interval; a lower age limit must be
        // checked at its own pace from now on, not after that.
        if let Some(tx) = &self.tx {
            let _ = tx.send(ToWriter::LimitsChanged);
        }
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

    /// The first damage a read found since the log was opened: a record that no longer
    /// passes its check (opening checked every record, so the file changed under the
    /// server or the disk returned bad data), or an I/O error reading one. The items
    /// around it are still served; reads that reach it fail, and it stays noted until
    /// the log is opened again (a restart, after an operator has looked).
    pub fn damage(&self) -> Option<String> {
        lock(&self.shared.damage).clone()
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
        tx.send(ToWriter::Append(Request {
            items,
            placed,
            bytes,
            reply,
            _permit: Some(permit),
        }))
        .map_err(|_| self.gone())?;
        rx.await.map_err(|_| self.gone())?
    }

    /// The error of an append whose writer thread is gone: its recorded failure (a
    /// writer that stopped on a bug), else closed.
    fn gone(&self) -> LogError {
        match lock(&self.shared.failure).clone() {
            Some(why) => LogError::Io {
                path: self.shared.dir.display().to_string(),
                source: std::io::Error::other(why),
            },
            None => LogError::Closed,
        }
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
        tokio::task::spawn_blocking(move || shared.note_read(read_blocking(&shared, from, limits)))
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
        tokio::task::spawn_blocking(move || {
            shared.note_read(offset_for_timestamp_blocking(&shared, timestamp_ms))
        })
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
