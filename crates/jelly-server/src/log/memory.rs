//! A log kept in memory: for tests and for topics that need no durability.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::watch;

use super::{Clock, Log, LogError, OffsetWatch, ReadLimits, check_consecutive};
use crate::item::{Item, NewItem};

/// How much a [`MemoryLog`] keeps: the oldest items go once any limit is passed.
///
/// ```
/// use jelly_server::log::MemoryRetention;
/// let r = MemoryRetention { bytes: Some(64 << 20), ..MemoryRetention::items(1000) };
/// assert_eq!((r.items, r.age), (1000, None));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryRetention {
    /// Most items kept (at least 1).
    pub items: usize,
    /// Most bytes kept ([`Item::held_bytes`] summed), if limited. The newest item is
    /// kept even when it alone is larger, so a subscriber reading live still gets it.
    pub bytes: Option<u64>,
    /// Items older than this go, if limited.
    pub age: Option<Duration>,
}

impl MemoryRetention {
    /// At most `items` items, no other limit.
    pub fn items(items: usize) -> Self {
        MemoryRetention {
            items,
            bytes: None,
            age: None,
        }
    }
}

/// An in-memory [`Log`] that keeps what its [`MemoryRetention`] allows (older items are
/// dropped): at most `capacity` items when made with [`MemoryLog::new`].
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
    retention: MemoryRetention,
    /// [`Item::held_bytes`] of `items`, summed.
    bytes: u64,
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
        Self::with_retention(MemoryRetention::items(capacity), clock)
    }

    /// A log keeping what `retention` allows, stamping appends with `clock` (whose
    /// readings also age the items).
    ///
    /// ```
    /// use jelly_server::log::{Clock, Log, MemoryLog, MemoryRetention, ReadLimits};
    /// use jelly_server::item::NewItem;
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let item = NewItem { frame: bytes::Bytes::from(vec![0; 100]), statements: 0, source: String::new(), headers: vec![] };
    /// let retention = MemoryRetention { bytes: Some(250), ..MemoryRetention::items(10) };
    /// let log = MemoryLog::with_retention(retention, Clock::system());
    /// log.append(vec![item.clone(), item.clone(), item]).await.unwrap();
    /// // 300 bytes do not fit in 250: the oldest item went.
    /// assert_eq!((log.first_offset(), log.next_offset()), (1, 3));
    /// # });
    /// ```
    pub fn with_retention(retention: MemoryRetention, clock: Clock) -> Self {
        MemoryLog {
            inner: Mutex::new(Inner {
                items: VecDeque::new(),
                retention: MemoryRetention {
                    items: retention.items.max(1),
                    ..retention
                },
                bytes: 0,
                next: 0,
                last_ts: 0,
                closed: false,
            }),
            tx: OffsetWatch::new(0),
            clock,
        }
    }

    /// What the log keeps (its limits, not what it holds).
    pub fn retention(&self) -> MemoryRetention {
        self.lock().retention
    }

    /// Keeps what `retention` allows from now on; items beyond it go at once.
    ///
    /// ```
    /// # use jelly_server::log::{Log, MemoryLog, MemoryRetention};
    /// # let item = jelly_server::item::NewItem { frame: bytes::Bytes::from_static(b"\x00"), statements: 0, source: "s".into(), headers: vec![] };
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let log = MemoryLog::new(10);
    /// log.append(vec![item.clone(), item.clone(), item]).await.unwrap();
    /// log.set_retention(MemoryRetention::items(1));
    /// assert_eq!((log.first_offset(), log.next_offset()), (2, 3));
    /// # });
    /// ```
    pub fn set_retention(&self, retention: MemoryRetention) {
        let now = self.clock.now_ms();
        let mut g = self.lock();
        g.retention = MemoryRetention {
            items: retention.items.max(1),
            ..retention
        };
        g.trim(now);
    }

    /// Items from `from`, bounded by `limits` (everything is in memory).
    fn read_in_memory(&self, from: u64, limits: ReadLimits) -> Result<Vec<Item>, LogError> {
        let g = self.trimmed();
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

    /// Drops the items that aged out, so that their memory is returned even when
    /// nobody looks at the log (the server's sweep calls it every second). Cheap when
    /// nothing expired: one look at the oldest item.
    pub fn drop_expired(&self) {
        drop(self.trimmed());
    }

    /// Bytes the log holds ([`Item::held_bytes`] summed), as they are: expired items
    /// not dropped yet count (this does not drop them).
    pub fn held_bytes(&self) -> u64 {
        self.lock().bytes
    }

    /// The lock, after dropping the items that aged out. Readers thus never see an
    /// expired item; an idle log's items go at the server's sweep
    /// ([`MemoryLog::drop_expired`]).
    fn trimmed(&self) -> std::sync::MutexGuard<'_, Inner> {
        let now = self.clock.now_ms();
        let mut g = self.lock();
        if g.retention.age.is_some() {
            g.trim(now);
        }
        g
    }
}

impl Inner {
    /// Drops the oldest items beyond the retention limits, as of `now_ms`.
    fn trim(&mut self, now_ms: u64) {
        let r = self.retention;
        let oldest_kept = r
            .age
            .map(|age| now_ms.saturating_sub(u64::try_from(age.as_millis()).unwrap_or(u64::MAX)));
        while let Some(front) = self.items.front() {
            let too_many = self.items.len() > r.items;
            let too_big = r.bytes.is_some_and(|max| self.bytes > max) && self.items.len() > 1;
            let too_old = oldest_kept.is_some_and(|t| front.timestamp_ms < t);
            if !(too_many || too_big || too_old) {
                break;
            }
            self.bytes -= front.held_bytes() as u64;
            self.items.pop_front();
        }
    }

    fn push(&mut self, item: Item) {
        self.bytes += item.held_bytes() as u64;
        self.items.push_back(item);
    }

    fn clear(&mut self) {
        self.items.clear();
        self.bytes = 0;
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
            g.push(Item {
                offset,
                timestamp_ms: ts,
                frame: it.frame,
                statements: it.statements,
                source: it.source,
                headers: it.headers,
            });
            offsets.push(offset);
        }
        g.trim(ts);
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
            g.clear();
        }
        g.next = first + items.len() as u64;
        // Placed timestamps are the upstream's, stored as given; later appends do not
        // go below them either.
        let newest = items.iter().map(|i| i.timestamp_ms).max().unwrap_or(0);
        g.last_ts = g.last_ts.max(newest);
        for item in items {
            g.push(item);
        }
        let now = self.clock.now_ms();
        g.trim(now);
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
        let g = self.trimmed();
        g.items.front().map_or(g.next, |i| i.offset)
    }

    fn next_offset(&self) -> u64 {
        self.lock().next
    }

    async fn offset_for_timestamp(&self, timestamp_ms: u64) -> Result<u64, LogError> {
        let g = self.trimmed();
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

    fn sized(n: usize) -> NewItem {
        NewItem {
            frame: Bytes::from(vec![0; n]),
            source: "ab".into(),
            ..item()
        }
    }

    fn offsets(log: &MemoryLog) -> (u64, u64) {
        (log.first_offset(), log.next_offset())
    }

    /// A byte limit counts frames and metadata, drops the oldest items first, and
    /// keeps the newest item even when it alone is larger than the limit.
    #[tokio::test]
    async fn byte_retention_drops_the_oldest_items() {
        let retention = MemoryRetention {
            bytes: Some(250),
            ..MemoryRetention::items(100)
        };
        let log = MemoryLog::with_retention(retention, Clock::system());
        // 98 + 2 bytes each: two fit in 250, three do not.
        log.append(vec![sized(98), sized(98)]).await.unwrap();
        assert_eq!(offsets(&log), (0, 2));
        log.append(vec![sized(98)]).await.unwrap();
        assert_eq!(offsets(&log), (1, 3));
        log.append(vec![sized(1000)]).await.unwrap();
        assert_eq!(offsets(&log), (3, 4));
        assert_eq!(log.read(3, ReadLimits::default()).await.unwrap().len(), 1);
        // Reading what went is refused as with any truncated log.
        assert!(matches!(
            log.read(1, ReadLimits::default()).await,
            Err(LogError::Truncated { first: 3, .. })
        ));
        // Lowering the limit applies at once; dropping it keeps what is there.
        log.append(vec![sized(8), sized(8)]).await.unwrap();
        assert_eq!(offsets(&log), (4, 6));
        log.set_retention(MemoryRetention {
            bytes: Some(10),
            ..retention
        });
        assert_eq!(offsets(&log), (5, 6));
        log.set_retention(MemoryRetention::items(100));
        log.append(vec![sized(500), sized(500)]).await.unwrap();
        assert_eq!(offsets(&log), (5, 8));
    }

    /// Expired items keep their memory until the log is looked at or swept; the
    /// sweep returns it.
    #[tokio::test]
    async fn drop_expired_returns_the_memory_of_expired_items() {
        let now = Arc::new(AtomicU64::new(1_000_000));
        let read = now.clone();
        let retention = MemoryRetention {
            age: Some(Duration::from_millis(500)),
            ..MemoryRetention::items(100)
        };
        let log = MemoryLog::with_retention(
            retention,
            Clock::from_fn(move || read.load(Ordering::SeqCst)),
        );
        log.append(vec![sized(98), sized(98)]).await.unwrap();
        assert_eq!(log.held_bytes(), 200);
        now.store(1_000_400, Ordering::SeqCst);
        log.drop_expired();
        assert_eq!(log.held_bytes(), 200, "not expired yet");
        now.store(1_000_501, Ordering::SeqCst);
        assert_eq!(log.held_bytes(), 200, "held until swept");
        log.drop_expired();
        assert_eq!(log.held_bytes(), 0);
        assert_eq!(offsets(&log), (2, 2));
    }

    /// Items older than the age limit are gone for readers even when nothing is
    /// appended after they expire.
    #[tokio::test]
    async fn age_retention_applies_without_appends() {
        let now = Arc::new(AtomicU64::new(1_000_000));
        let read = now.clone();
        let retention = MemoryRetention {
            age: Some(Duration::from_millis(500)),
            ..MemoryRetention::items(100)
        };
        let log = MemoryLog::with_retention(
            retention,
            Clock::from_fn(move || read.load(Ordering::SeqCst)),
        );
        log.append(vec![item()]).await.unwrap();
        now.store(1_000_300, Ordering::SeqCst);
        log.append(vec![item(), item()]).await.unwrap();
        now.store(1_000_600, Ordering::SeqCst);
        assert_eq!(offsets(&log), (1, 3));
        assert!(log.read(0, ReadLimits::default()).await.is_err());
        assert_eq!(log.offset_for_timestamp(0).await.unwrap(), 1);
        now.store(1_000_801, Ordering::SeqCst);
        assert_eq!(offsets(&log), (3, 3));
        assert!(log.read(3, ReadLimits::default()).await.unwrap().is_empty());
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
