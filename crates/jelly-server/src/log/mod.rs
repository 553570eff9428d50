//! The per-topic log: append-only, offset-addressed, durable (file implementation).
//!
//! [`Log`] is the seam where a Kafka-backed topic will slot in later; the server only
//! talks to this trait.

mod file;
mod memory;
mod record;
mod segment;

use std::fmt;
use std::future::Future;
use std::sync::Arc;

pub use file::{Durability, FileLog, FileLogOptions, TailCachePool};
pub use memory::{MemoryLog, MemoryRetention};
use thiserror::Error;
use tokio::sync::watch;

use crate::item::{Item, NewItem};

/// Makes the entries of a directory (files created, renamed or deleted) durable.
pub(crate) fn sync_dir(dir: &std::path::Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// What went wrong in a log.
#[derive(Debug, Error)]
pub enum LogError {
    #[error("I/O error on {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("corrupt log segment {path} at byte {offset}: {reason}")]
    Corrupt {
        path: String,
        offset: u64,
        reason: String,
    },
    #[error("offset {requested} is no longer retained (first retained offset is {first})")]
    Truncated { requested: u64, first: u64 },
    #[error("item of {size} bytes exceeds the limit of {max}")]
    ItemTooLarge { size: usize, max: usize },
    #[error("the log is closed")]
    Closed,
    /// An item of [`Log::append_at`] whose offset does not continue the log (or the batch).
    #[error("item offset {got} does not continue the log: expected offset {expected}")]
    OffsetMismatch { expected: u64, got: u64 },
    /// Items that would take offsets past the largest one (the next offset after them
    /// would not fit in a `u64`). Offsets never wrap around: that would hand out
    /// offset 0 again under the same topic id.
    #[error(
        "the log has no offsets left: {count} item(s) from offset {first} would pass \
         the largest offset, {}",
        u64::MAX - 1
    )]
    OffsetsExhausted { first: u64, count: u64 },
}

/// Bounds of one read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadLimits {
    /// At most this many items.
    pub max_items: usize,
    /// At most this many bytes of frames (at least one item is returned if any exists).
    pub max_bytes: usize,
}

impl Default for ReadLimits {
    fn default() -> Self {
        ReadLimits {
            max_items: 1000,
            max_bytes: 4 << 20,
        }
    }
}

/// An append-only log of items for one topic.
///
/// Offsets are dense: the first item has offset [`Log::first_offset`] (0 until
/// retention drops old items) and the next append gets [`Log::next_offset`].
pub trait Log: Send + Sync + 'static {
    /// Appends items atomically as a batch and returns their offsets once they are
    /// durable according to the log's durability policy (for the file log: after
    /// fsync, shared with concurrent appends — group commit).
    fn append(
        &self,
        items: Vec<NewItem>,
    ) -> impl Future<Output = Result<Vec<u64>, LogError>> + Send;

    /// Appends items that already carry their offsets and timestamps (a copy of another
    /// log: a mirror), atomically as a batch, durable as for [`Log::append`].
    ///
    /// The items' offsets must be consecutive and the first must be
    /// [`Log::next_offset`], with one exception: when the log holds no items, or when
    /// `restart` is true, a first offset above `next_offset` makes the log start over
    /// there, dropping whatever it held (readers positioned before it see
    /// [`LogError::Truncated`]). Anything else is [`LogError::OffsetMismatch`] and
    /// appends nothing. Timestamps are stored as given (they should not go backwards).
    fn append_at(
        &self,
        items: Vec<Item>,
        restart: bool,
    ) -> impl Future<Output = Result<(), LogError>> + Send;

    /// Reads items from `from` (inclusive), bounded by `limits`. An offset below
    /// [`Log::first_offset`] is [`LogError::Truncated`]; at or past the end, the result is empty.
    fn read(
        &self,
        from: u64,
        limits: ReadLimits,
    ) -> impl Future<Output = Result<Vec<Item>, LogError>> + Send;

    /// Reads like [`Log::read`] when that needs no I/O (the items are in memory), and
    /// `None` when it would have to wait. Lets a producer hand new items on inline,
    /// on the appending task, instead of waking another task to read them.
    fn read_now(&self, from: u64, limits: ReadLimits) -> Option<Result<Vec<Item>, LogError>>;

    /// First retained offset.
    fn first_offset(&self) -> u64;

    /// Offset the next appended item will get.
    fn next_offset(&self) -> u64;

    /// First offset whose timestamp is at or after `timestamp_ms` (or `next_offset`).
    fn offset_for_timestamp(
        &self,
        timestamp_ms: u64,
    ) -> impl Future<Output = Result<u64, LogError>> + Send;

    /// Watches `next_offset`: subscribers wait on it for new items. Once the log is
    /// closed, the receivers' waits end with an error (the sender is gone).
    fn watch(&self) -> watch::Receiver<u64>;

    /// Closes the log for good (its topic is being deleted): an append in progress
    /// completes first, every later append and read is [`LogError::Closed`], and
    /// every watch ends, so that waiting subscribers stop. Nothing more is written
    /// to the log's files after it returns. Closing twice does nothing.
    fn close(&self);
}

/// The sender of a log's [`Log::watch`] channel, which [`Log::close`] drops.
pub(crate) struct OffsetWatch(std::sync::Mutex<Option<watch::Sender<u64>>>);

impl OffsetWatch {
    pub(crate) fn new(next: u64) -> Self {
        OffsetWatch(std::sync::Mutex::new(Some(watch::channel(next).0)))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<watch::Sender<u64>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Tells the receivers of a new `next_offset` (nothing once closed).
    pub(crate) fn publish(&self, next: u64) {
        if let Some(tx) = &*self.lock() {
            tx.send_replace(next);
        }
    }

    /// A receiver; after [`OffsetWatch::close`], one whose sender is already gone.
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        match &*self.lock() {
            Some(tx) => tx.subscribe(),
            None => watch::channel(0).1,
        }
    }

    /// Drops the sender: every receiver's wait ends with an error.
    pub(crate) fn close(&self) {
        drop(self.lock().take());
    }
}

/// Refuses `count` items from offset `first` when the offset after them would not fit
/// in a `u64` ([`LogError::OffsetsExhausted`]): offsets never wrap around.
pub(crate) fn check_room(first: u64, count: u64) -> Result<(), LogError> {
    match first.checked_add(count) {
        Some(_) => Ok(()),
        None => Err(LogError::OffsetsExhausted { first, count }),
    }
}

/// Checks that the offsets of an [`Log::append_at`] batch are consecutive.
fn check_consecutive(items: &[Item]) -> Result<(), LogError> {
    if let Some(first) = items.first().map(|i| i.offset) {
        check_room(first, items.len() as u64)?;
    }
    for pair in items.windows(2) {
        if pair[1].offset != pair[0].offset.wrapping_add(1) {
            return Err(LogError::OffsetMismatch {
                expected: pair[0].offset.wrapping_add(1),
                got: pair[1].offset,
            });
        }
    }
    Ok(())
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The time source of a log: append timestamps and (file log) age retention, in
/// milliseconds since the Unix epoch. Tests inject their own, to move it at will
/// (backwards too, as a wall clock may be stepped).
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
