//! The memory that the tail caches of many file logs share.
//!
//! Each file log keeps its newest items in memory for live readers, up to
//! [`super::FileLogOptions::tail_cache_bytes`]. That bounds one topic; a server of
//! thousands of topics would still hold thousands of times that. The logs of one
//! server therefore count their caches in one [`TailCachePool`]: a log that adds to
//! its cache while the pool is over its bound drops its own oldest cached items until
//! the pool is back under it (or its cache is empty). Items dropped from a cache stay
//! in the log and are read from their segment instead; nothing else changes.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Bytes held by the tail caches of the file logs that share it, and their bound.
///
/// ```
/// use jelly_server::log::TailCachePool;
/// let pool = TailCachePool::new(Some(64 << 20));
/// assert_eq!((pool.used(), pool.max()), (0, Some(64 << 20)));
/// ```
#[derive(Debug)]
pub struct TailCachePool {
    used: AtomicUsize,
    max: Option<usize>,
}

impl TailCachePool {
    /// A pool bounded by `max` bytes (`None`: counted, not bounded).
    pub fn new(max: Option<usize>) -> TailCachePool {
        TailCachePool {
            used: AtomicUsize::new(0),
            max,
        }
    }

    /// Bytes held now by the caches that share the pool.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// The bound.
    pub fn max(&self) -> Option<usize> {
        self.max
    }

    pub(super) fn take(&self, bytes: usize) {
        self.used.fetch_add(bytes, Ordering::Relaxed);
    }

    pub(super) fn give(&self, bytes: usize) {
        self.used.fetch_sub(bytes, Ordering::Relaxed);
    }

    /// Whether the caches hold more than the bound.
    pub(super) fn over(&self) -> bool {
        self.max.is_some_and(|m| self.used() > m)
    }
}

impl Default for TailCachePool {
    /// Counted, not bounded (each log still keeps to its own `tail_cache_bytes`).
    fn default() -> Self {
        TailCachePool::new(None)
    }
}
