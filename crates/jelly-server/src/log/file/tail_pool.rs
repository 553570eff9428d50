//! The memory that the tail caches of many file logs share.
//!
//! Each file log keeps its newest items in memory for live readers, up to
//! [`super::FileLogOptions::tail_cache_bytes`]. That bounds one topic; a server of
//! thousands of topics would still hold thousands of times that. The logs of one
//! server therefore count their caches in one [`TailCachePool`]: a log that adds to
//! its cache while the pool is over its bound drops its own oldest cached items until
//! the pool is back under it (or its cache is empty). A log never touches another's
//! cache (that would take another topic's lock on this one's append path); instead
//! each log, on its writer's periodic pass (at least every 10 s), trims its own cache
//! to its share of the pool (the bound divided by the open logs) while the pool is
//! under pressure: nearly full (an eighth of it or less left), or a log had to drop
//! items for want of room in the last 30 s. So caches filled by topics that went
//! quiet make room for busy ones within one pass. Items dropped from a cache stay in the log and are read from their
//! segment instead; nothing else changes.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

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
    /// File logs open on the pool.
    logs: AtomicUsize,
    /// When a log last dropped cached items for want of room: ms after `since`, plus
    /// one (0: never).
    pressed_at: AtomicU64,
    since: Instant,
}

/// How long after a log dropped items for want of room the others trim to their share.
const PRESSURE_LASTS: Duration = Duration::from_secs(30);

impl TailCachePool {
    /// A pool bounded by `max` bytes (`None`: counted, not bounded).
    pub fn new(max: Option<usize>) -> TailCachePool {
        TailCachePool {
            used: AtomicUsize::new(0),
            max,
            logs: AtomicUsize::new(0),
            pressed_at: AtomicU64::new(0),
            since: Instant::now(),
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

    pub(super) fn log_opened(&self) {
        self.logs.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn log_closed(&self) {
        self.logs.fetch_sub(1, Ordering::Relaxed);
    }

    /// Notes that a log dropped cached items because the pool was over its bound.
    pub(super) fn note_pressure(&self) {
        let ms = self.since.elapsed().as_millis() as u64 + 1;
        self.pressed_at.store(ms, Ordering::Relaxed);
    }

    /// Whether logs over their [`TailCachePool::share`] should give back the rest: the
    /// caches hold all but an eighth of the bound or more, or a log had to drop items
    /// for want of room not long ago.
    pub(super) fn under_pressure(&self) -> bool {
        let Some(max) = self.max else {
            return false;
        };
        let at = self.pressed_at.load(Ordering::Relaxed);
        let recent = at != 0
            && (self.since.elapsed().as_millis() as u64 + 1).saturating_sub(at)
                <= PRESSURE_LASTS.as_millis() as u64;
        recent || self.used() >= max - max / 8
    }

    /// One open log's share of the bound (all of it when there is no bound).
    pub(super) fn share(&self) -> usize {
        match self.max {
            Some(m) => m / self.logs.load(Ordering::Relaxed).max(1),
            None => usize::MAX,
        }
    }
}

impl Default for TailCachePool {
    /// Counted, not bounded (each log still keeps to its own `tail_cache_bytes`).
    fn default() -> Self {
        TailCachePool::new(None)
    }
}
