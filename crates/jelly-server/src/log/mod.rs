//! The per-topic log: append-only, offset-addressed, durable (file implementation).
//!
//! [`Log`] is the seam where a Kafka-backed topic will slot in later; the server only
//! talks to this trait.

mod file;
mod memory;
mod record;
mod segment;

use std::future::Future;

pub use file::{Clock, Durability, FileLog, FileLogOptions};
pub use memory::MemoryLog;
use thiserror::Error;
use tokio::sync::watch;

use crate::item::{Item, NewItem};

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

    /// Reads items from `from` (inclusive), bounded by `limits`. An offset below
    /// [`Log::first_offset`] is [`LogError::Truncated`]; at or past the end, the result is empty.
    fn read(
        &self,
        from: u64,
        limits: ReadLimits,
    ) -> impl Future<Output = Result<Vec<Item>, LogError>> + Send;

    /// First retained offset.
    fn first_offset(&self) -> u64;

    /// Offset the next appended item will get.
    fn next_offset(&self) -> u64;

    /// First offset whose timestamp is at or after `timestamp_ms` (or `next_offset`).
    fn offset_for_timestamp(
        &self,
        timestamp_ms: u64,
    ) -> impl Future<Output = Result<u64, LogError>> + Send;

    /// Watches `next_offset`: subscribers wait on it for new items.
    fn watch(&self) -> watch::Receiver<u64>;
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
