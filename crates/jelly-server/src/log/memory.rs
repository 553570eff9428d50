//! A log kept in memory: for tests and for topics that need no durability.

use std::collections::VecDeque;
use std::sync::Mutex;

use tokio::sync::watch;

use super::{Clock, Log, LogError, OffsetWatch, ReadLimits, check_consecutive};
use crate::item::{Item, NewItem};

/// An in-memory [`Log`] that keeps at most `capacity` items (older ones are dropped).
///
/// ```
/// use jelly_server::log::{Log, MemoryLog, ReadLimits};
/// use jelly_server::item::NewItem;
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let log = MemoryLog::new(10);
/// let item = NewItem { frame: bytes::Bytes::from_static(b"\x00"), statements: 0, source: "s".into(), headers: vec![] };
/// assert_eq!(log.append(vec![item.clone(), item]).await.unwrap(), vec![0, 1]);
/// assert_eq!(log.read(1, ReadLimits::default()).await.unwrap()[0].offset, 1);
/// # });
/// ```
pub struct MemoryLog {
    inner: Mutex<Inner>,
    tx: OffsetWatch,
    clock: Clock,
}

struct Inner {
    items: VecDeque<Item>,
    /// Most items kept.
    capacity: usize,
    next: u64,
    /// Newest timestamp given out or placed. Appends never stamp an older one, even
    /// when the wall clock is stepped back: readers resume by time
    /// ([`Log::offset_for_timestamp`]), and an item stamped before its predecessor
    /// would be skipped by a reader resuming just after that predecessor.
    last_ts: u64,
    /// Set by [`Log::close`].
    closed: bool,
}

impl MemoryLog {
    /// A log retaining at most `capacity` items.
    pub fn new(capacity: usize) -> Self {
        Self::with_clock(capacity, Clock::system())
    }

    /// A log retaining at most `capacity` items, stamping appends with `clock`.
    pub fn with_clock(capacity: usize, clock: Clock) -> Self {
        MemoryLog {
            inner: Mutex::new(Inner {
                items: VecDeque::new(),
                capacity: capacity.max(1),
                next: 0,
                last_ts: 0,
                closed: false,
            }),
            tx: OffsetWatch::new(0),
            clock,
        }
    }

    /// Keeps at most `capacity` items from now on; older ones beyond it go at once.
    ///
    /// ```
    /// # use jelly_server::log::{Log, MemoryLog};
    /// # let item = jelly_server::item::NewItem { frame: bytes::Bytes::from_static(b"\x00"), statements: 0, source: "s".into(), headers: vec![] };
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let log = MemoryLog::new(10);
    /// log.append(vec![item.clone(), item.clone(), item]).await.unwrap();
    /// log.set_capacity(1);
    /// assert_eq!((log.first_offset(), log.next_offset()), (2, 3));
    /// # });
    /// ```
    pub fn set_capacity(&self, capacity: usize) {
        let mut g = self.lock();
        g.capacity = capacity.max(1);
        g.trim();
    }

    /// Items from `from`, bounded by `limits` (everything is in memory).
    fn read_in_memory(&self, from: u64, limits: ReadLimits) -> Result<Vec<Item>, LogError> {
        let g = self.lock();
        if g.closed {
            return Err(LogError::Closed);
        }
        let first = g.items.front().map_or(g.next, |i| i.offset);
        if from < first {
            return Err(LogError::Truncated {
                requested: from,
                first,
            });
        }
        let mut out = Vec::new();
        let mut bytes = 0;
        for it in g.items.iter().skip((from - first) as usize) {
            if out.len() >= limits.max_items
                || (!out.is_empty() && bytes + it.frame.len() > limits.max_bytes)
            {
                break;
            }
            bytes += it.frame.len();
            out.push(it.clone());
        }
        Ok(out)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the deque inconsistent.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Inner {
    /// Drops the oldest items beyond the capacity.
    fn trim(&mut self) {
        while self.items.len() > self.capacity {
            self.items.pop_front();
        }
    }
}

impl Log for MemoryLog {
    async fn append(&self, items: Vec<NewItem>) -> Result<Vec<u64>, LogError> {
        let mut g = self.lock();
        if g.closed {
            return Err(LogError::Closed);
        }
        super::check_room(g.next, items.len() as u64)?;
        // Clamped as the file log clamps (see `Inner::last_ts`).
        let ts = self.clock.now_ms().max(g.last_ts);
        g.last_ts = ts;
        let mut offsets = Vec::with_capacity(items.len());
        for it in items {
            let offset = g.next;
            g.next += 1;
            g.items.push_back(Item {
                offset,
                timestamp_ms: ts,
                frame: it.frame,
                statements: it.statements,
                source: it.source,
                headers: it.headers,
            });
            offsets.push(offset);
        }
        g.trim();
        let next = g.next;
        drop(g);
        self.tx.publish(next);
        Ok(offsets)
    }

    async fn append_at(&self, items: Vec<Item>, restart: bool) -> Result<(), LogError> {
        let Some(first) = items.first().map(|i| i.offset) else {
            return Ok(());
        };
        check_consecutive(&items)?;
        let mut g = self.lock();
        if g.closed {
            return Err(LogError::Closed);
        }
        if first != g.next {
            if first < g.next || !(restart || g.items.is_empty()) {
                return Err(LogError::OffsetMismatch {
                    expected: g.next,
                    got: first,
                });
            }
            g.items.clear();
        }
        g.next = first + items.len() as u64;
        // Placed timestamps are the upstream's, stored as given; later appends do not
        // go below them either.
        let newest = items.iter().map(|i| i.timestamp_ms).max().unwrap_or(0);
        g.last_ts = g.last_ts.max(newest);
        g.items.extend(items);
        g.trim();
        let next = g.next;
        drop(g);
        self.tx.publish(next);
        Ok(())
    }

    async fn read(&self, from: u64, limits: ReadLimits) -> Result<Vec<Item>, LogError> {
        self.read_in_memory(from, limits)
    }

    fn read_now(&self, from: u64, limits: ReadLimits) -> Option<Result<Vec<Item>, LogError>> {
        Some(self.read_in_memory(from, limits))
    }

    fn first_offset(&self) -> u64 {
        let g = self.lock();
        g.items.front().map_or(g.next, |i| i.offset)
    }

    fn next_offset(&self) -> u64 {
        self.lock().next
    }

    async fn offset_for_timestamp(&self, timestamp_ms: u64) -> Result<u64, LogError> {
        let g = self.lock();
        if g.closed {
            return Err(LogError::Closed);
        }
        Ok(g.items
            .iter()
            .find(|i| i.timestamp_ms >= timestamp_ms)
            .map_or(g.next, |i| i.offset))
    }

    fn watch(&self) -> watch::Receiver<u64> {
        self.tx.subscribe()
    }

    fn close(&self) {
        self.lock().closed = true;
        self.tx.close();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use bytes::Bytes;

    use super::*;

    fn item() -> NewItem {
        NewItem {
            frame: Bytes::from_static(b"\x00"),
            statements: 0,
            source: String::new(),
            headers: Vec::new(),
        }
    }

    /// A wall clock stepped back while the log runs does not stamp items before the
    /// ones already there, so a reader resuming by time just after an item still
    /// gets every later one.
    #[tokio::test]
    async fn timestamps_do_not_follow_the_clock_backwards() {
        let now = Arc::new(AtomicU64::new(5_000_000));
        let read = now.clone();
        let log = MemoryLog::with_clock(100, Clock::from_fn(move || read.load(Ordering::SeqCst)));
        log.append(vec![item()]).await.unwrap();
        now.store(5_000_200, Ordering::SeqCst);
        log.append(vec![item()]).await.unwrap();
        // An hour back.
        now.store(5_000_200 - 3_600_000, Ordering::SeqCst);
        log.append(vec![item(), item()]).await.unwrap();
        let ts: Vec<u64> = log
            .read(0, ReadLimits::default())
            .await
            .unwrap()
            .iter()
            .map(|i| i.timestamp_ms)
            .collect();
        assert_eq!(ts, [5_000_000, 5_000_200, 5_000_200, 5_000_200]);
        // Resuming just after item 0 finds item 1 and everything after it.
        assert_eq!(log.offset_for_timestamp(5_000_001).await.unwrap(), 1);
        // Once the clock is ahead again, it is followed.
        now.store(5_000_300, Ordering::SeqCst);
        log.append(vec![item()]).await.unwrap();
        let last = log.read(4, ReadLimits::default()).await.unwrap();
        assert_eq!(last[0].timestamp_ms, 5_000_300);
    }

    /// Placed items (a mirror's) raise the floor too: a later append behind them in
    /// time is stamped no earlier than the newest placed item.
    #[tokio::test]
    async fn placed_timestamps_raise_the_floor() {
        let log = MemoryLog::with_clock(100, Clock::from_fn(|| 1_000));
        let placed = Item {
            offset: 0,
            timestamp_ms: 9_000,
            frame: Bytes::from_static(b"\x00"),
            statements: 0,
            source: String::new(),
            headers: Vec::new(),
        };
        log.append_at(vec![placed], false).await.unwrap();
        log.append(vec![item()]).await.unwrap();
        let items = log.read(0, ReadLimits::default()).await.unwrap();
        assert_eq!(items[1].timestamp_ms, 9_000);
    }
}
