//! A log kept in memory: for tests and for topics that need no durability.

use std::collections::VecDeque;
use std::sync::Mutex;

use tokio::sync::watch;

use super::{Log, LogError, OffsetWatch, ReadLimits, check_consecutive, now_ms};
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
}

struct Inner {
    items: VecDeque<Item>,
    /// Most items kept.
    capacity: usize,
    next: u64,
    /// Set by [`Log::close`].
    closed: bool,
}

impl MemoryLog {
    /// A log retaining at most `capacity` items.
    pub fn new(capacity: usize) -> Self {
        MemoryLog {
            inner: Mutex::new(Inner {
                items: VecDeque::new(),
                capacity: capacity.max(1),
                next: 0,
                closed: false,
            }),
            tx: OffsetWatch::new(0),
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
        let ts = now_ms();
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
