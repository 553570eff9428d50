//! The memory that atomic publishes in progress may hold, server-wide.
//!
//! Why: one atomic publish holds its whole body and all the items made from it until
//! they are appended, which its own limits bound (`max_body_bytes`, and
//! [`ITEMS_PER_BODY_LIMIT`] times that for the items). Nothing bounded how many such
//! requests run at once: eight concurrent hostile bodies of 6 MB, each making 256 MiB
//! of items before its 413, took the server from 49 MB to 1.9 GB. Every atomic publish
//! now counts what it holds, as it reads its body and as it makes items, against one
//! pool of `max_publish_memory_bytes`; a request that would pass it is refused with 503
//! (and `Retry-After`) and holds nothing more. Refused at once rather than queued, so
//! that requests that each hold part of the pool never wait on each other.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// The items of one atomic publish may take at most this many times `max_body_bytes`
/// (frames and metadata; see [`crate::ingest::IngestError::ItemsTooLarge`]).
pub const ITEMS_PER_BODY_LIMIT: usize = 4;

/// What one atomic publish may hold at most: its body, once more while its pieces are
/// joined, and its items. `max_publish_memory_bytes` must leave room for one such
/// request, or the largest bodies allowed could never be published.
pub fn one_publish_at_most(max_body_bytes: usize) -> usize {
    max_body_bytes.saturating_mul(2 + ITEMS_PER_BODY_LIMIT)
}

/// How many large atomic publishes may make their items at once: as many as the pool
/// holds at their worst ([`one_publish_at_most`]), at most one per CPU, at least one.
///
/// ```
/// use jelly_server::publish_memory::{large_ingests, one_publish_at_most};
///
/// assert_eq!(large_ingests(one_publish_at_most(1 << 20), 1 << 20), 1);
/// ```
pub fn large_ingests(pool: usize, max_body_bytes: usize) -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let fit = match pool {
        0 => cpus,
        _ => pool / one_publish_at_most(max_body_bytes).max(1),
    };
    fit.clamp(1, cpus)
}

/// The pool: bytes held by atomic publishes in progress, and its bound.
///
/// ```
/// use jelly_server::publish_memory::PublishMemory;
///
/// let pool = PublishMemory::new(100);
/// let mut a = pool.reservation();
/// a.grow(60).unwrap();
/// let mut b = pool.reservation();
/// assert!(b.grow(50).is_err(), "60 + 50 is over 100");
/// drop(a);
/// b.grow(50).unwrap();
/// assert_eq!(pool.in_use(), 50);
/// ```
#[derive(Debug)]
pub struct PublishMemory {
    used: AtomicUsize,
    /// 0: no bound.
    max: usize,
    /// Requests refused for want of room (for `/metrics`).
    refused: AtomicU64,
}

/// The pool has no room for what a publish asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the server is holding its most memory for publishes in progress \
     ({max} bytes, max_publish_memory_bytes); retry in a moment, or publish in smaller parts"
)]
pub struct PublishMemoryFull {
    /// The pool's bound.
    pub max: usize,
}

impl PublishMemory {
    /// A pool of `max` bytes (0: no bound).
    pub fn new(max: usize) -> Arc<PublishMemory> {
        Arc::new(PublishMemory {
            used: AtomicUsize::new(0),
            max,
            refused: AtomicU64::new(0),
        })
    }

    /// An empty share of the pool, for one publish.
    pub fn reservation(self: &Arc<Self>) -> Reservation {
        Reservation {
            pool: Arc::clone(self),
            held: 0,
        }
    }

    /// Bytes held now.
    pub fn in_use(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// The bound (0: none).
    pub fn max(&self) -> usize {
        self.max
    }

    /// How many times a share could not grow: publishes refused for want of room.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// The pool in Prometheus text format: what it holds, its bound and its refusals.
    pub fn render_metrics(&self, out: &mut String) {
        use std::fmt::Write as _;
        let _ = writeln!(
            out,
            "# HELP jelly_publish_memory_bytes Bytes held by atomic publishes in progress (bodies and items).\n\
             # TYPE jelly_publish_memory_bytes gauge\njelly_publish_memory_bytes {}\n\
             # HELP jelly_publish_memory_max_bytes Their bound, max_publish_memory_bytes (0: none).\n\
             # TYPE jelly_publish_memory_max_bytes gauge\njelly_publish_memory_max_bytes {}\n\
             # HELP jelly_publish_memory_refused_total Atomic publishes refused (503) because the bound was reached.\n\
             # TYPE jelly_publish_memory_refused_total counter\njelly_publish_memory_refused_total {}",
            self.in_use(),
            self.max,
            self.refused()
        );
    }
}

/// One publish's share of a [`PublishMemory`], given back when dropped.
#[derive(Debug)]
pub struct Reservation {
    pool: Arc<PublishMemory>,
    held: usize,
}

impl Reservation {
    /// Takes `bytes` more from the pool, or nothing if they do not fit.
    pub fn grow(&mut self, bytes: usize) -> Result<(), PublishMemoryFull> {
        let max = self.pool.max;
        if max == 0 {
            // Still counted, so that `in_use` tells what publishes hold.
            self.pool.used.fetch_add(bytes, Ordering::Relaxed);
        } else {
            self.pool
                .used
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                    used.checked_add(bytes).filter(|&total| total <= max)
                })
                .map_err(|_| {
                    self.pool.refused.fetch_add(1, Ordering::Relaxed);
                    PublishMemoryFull { max }
                })?;
        }
        self.held += bytes;
        Ok(())
    }

    /// Gives `bytes` back (at most what is held), for memory freed before the end.
    pub fn shrink(&mut self, bytes: usize) {
        let bytes = bytes.min(self.held);
        self.pool.used.fetch_sub(bytes, Ordering::Relaxed);
        self.held -= bytes;
    }

    /// Bytes this share holds.
    pub fn held(&self) -> usize {
        self.held
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.pool.used.fetch_sub(self.held, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up_to_the_bound_and_go_back_when_dropped() {
        let pool = PublishMemory::new(1000);
        let mut a = pool.reservation();
        let mut b = pool.reservation();
        a.grow(600).unwrap();
        assert_eq!(b.grow(401), Err(PublishMemoryFull { max: 1000 }));
        // A refused request takes nothing.
        assert_eq!(pool.in_use(), 600);
        b.grow(400).unwrap();
        assert_eq!(pool.in_use(), 1000);
        a.shrink(100);
        assert_eq!((a.held(), pool.in_use()), (500, 900));
        // Giving back more than is held gives back what is held.
        b.shrink(usize::MAX);
        assert_eq!((b.held(), pool.in_use()), (0, 500));
        drop(a);
        assert_eq!(pool.in_use(), 0);
        // A sum past usize::MAX is refused, not wrapped.
        let mut c = pool.reservation();
        c.grow(1).unwrap();
        assert!(c.grow(usize::MAX).is_err());
        assert_eq!(c.held(), 1);
    }

    #[test]
    fn no_bound_still_counts() {
        let pool = PublishMemory::new(0);
        let mut a = pool.reservation();
        a.grow(usize::MAX / 2).unwrap();
        assert_eq!(pool.in_use(), usize::MAX / 2);
        drop(a);
        assert_eq!(pool.in_use(), 0);
    }
}
