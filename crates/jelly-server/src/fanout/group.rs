//! A group: the subscribers of one [`GroupKey`], and the one task that follows the
//! topic's log for all of them, writing (and compressing) each batch once.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

use super::encode::{BatchEncoder, Wire};
use super::key::GroupKey;
use super::ring::{GroupEnd, Ring};
use crate::compress::Block;
use crate::item::Item;
use crate::log::{LogError, ReadLimits};
use crate::metrics::Metrics;
use crate::topic::Topic;

/// Live groups by key (a group removes itself when its last subscriber leaves).
pub(super) type GroupMap = Mutex<HashMap<GroupKey, Weak<Group>>>;

/// The most a group gathers into one block within its window.
const MAX_BLOCK_RAW_BYTES: usize = 1 << 20;

/// A group of subscribers sharing one stream of blocks. Held by its subscribers;
/// when the last one drops it, its task stops.
pub struct Group {
    pub(super) key: GroupKey,
    pub(super) ring: Arc<Ring>,
    /// An SSE keep-alive comment, compressed once ([`super::key::Framing::Sse`]).
    pub(super) keepalive: Block,
    map: Weak<GroupMap>,
    metrics: Arc<Metrics>,
    /// Dropping it stops the task.
    _stop: oneshot::Sender<()>,
}

impl Drop for Group {
    fn drop(&mut self) {
        self.metrics.fanout_groups.fetch_sub(1, Ordering::Relaxed);
        if let Some(map) = self.map.upgrade() {
            let mut m = map.lock().unwrap_or_else(|e| e.into_inner());
            // A new group may already have taken the key.
            if m.get(&self.key).is_some_and(|w| w.strong_count() == 0) {
                m.remove(&self.key);
            }
        }
    }
}

/// What a group's task needs.
pub(super) struct GroupTask {
    pub topic: Arc<Topic>,
    pub key: GroupKey,
    pub ring: Arc<Ring>,
    pub start: u64,
    pub batch: ReadLimits,
    pub stop: oneshot::Receiver<()>,
    pub shutdown: watch::Receiver<bool>,
    pub metrics: Arc<Metrics>,
}

impl Group {
    /// The group for `key`, made (and its task started at the log's head) if there
    /// is none.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn get_or_start(
        map: &Arc<GroupMap>,
        topic: &Arc<Topic>,
        key: GroupKey,
        limits: super::ring::RingLimits,
        batch: ReadLimits,
        shutdown: &watch::Receiver<bool>,
        metrics: &Arc<Metrics>,
    ) -> Arc<Group> {
        let mut m = map.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(g) = m.get(&key).and_then(Weak::upgrade) {
            return g;
        }
        let start = topic.log.next_offset();
        let ring = Arc::new(Ring::new(start, limits));
        let (stop_tx, stop) = oneshot::channel();
        let keepalive = super::encode::block(key.encoding, b": keep-alive\n\n".to_vec());
        let g = Arc::new(Group {
            key: key.clone(),
            ring: ring.clone(),
            keepalive,
            map: Arc::downgrade(map),
            metrics: metrics.clone(),
            _stop: stop_tx,
        });
        m.insert(key.clone(), Arc::downgrade(&g));
        drop(m);
        metrics.fanout_groups.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(?key, start, "fan-out group started");
        tokio::spawn(
            GroupTask {
                topic: topic.clone(),
                key,
                ring,
                start,
                batch,
                stop,
                shutdown: shutdown.clone(),
                metrics: metrics.clone(),
            }
            .run(),
        );
        g
    }

    /// The group's key.
    pub fn key(&self) -> &GroupKey {
        &self.key
    }
}

/// How a wait of the group's task ended.
enum Woke {
    /// The log has items past the group's position.
    Items,
    /// The window is over.
    Deadline,
    /// The group or the server is done.
    Stop,
    /// The log was closed.
    Closed,
}

impl GroupTask {
    /// Follows the log from `start` until the last subscriber leaves, the server
    /// shuts down or the log fails.
    async fn run(mut self) {
        let mut watch = self.topic.log.watch();
        let mut next = self.start;
        let window = Duration::from_millis(self.key.window_ms);
        loop {
            // The first items of a block.
            let items = match self.read(next).await {
                Ok(items) => items,
                Err(first) => {
                    self.ring.restart_at(first);
                    next = first;
                    continue;
                }
            };
            let Some(items) = items else { return };
            if items.is_empty() {
                match self.wait(&mut watch, next, None).await {
                    Woke::Items | Woke::Deadline => continue,
                    Woke::Stop => return,
                    Woke::Closed => return self.ring.end(GroupEnd::Closed),
                }
            }
            let deadline = Instant::now() + window;
            let mut enc = BatchEncoder::new(&self.key, false);
            let mut failed = self.encode(&items, &mut enc, &mut next);
            // More items within the window (none with a window of 0).
            while failed.is_none()
                && !window.is_zero()
                && enc.raw_len() < MAX_BLOCK_RAW_BYTES
                && enc.items() < self.batch.max_items
            {
                match self.read(next).await {
                    Ok(Some(items)) if !items.is_empty() => {
                        failed = self.encode(&items, &mut enc, &mut next);
                        continue;
                    }
                    Ok(Some(_)) => {}
                    Ok(None) => return,
                    // Retention overtook the group: what it gathered is lost with the rest.
                    Err(first) => {
                        self.ring.restart_at(first);
                        next = first;
                        enc = BatchEncoder::new(&self.key, false);
                        break;
                    }
                }
                match self.wait(&mut watch, next, Some(deadline)).await {
                    Woke::Items => {}
                    Woke::Deadline => break,
                    Woke::Stop => return,
                    Woke::Closed => {
                        failed = Some(GroupEnd::Closed);
                    }
                }
            }
            self.flush(enc, next);
            if let Some(why) = failed {
                tracing::error!(topic = %self.topic.name, ?why, "fan-out group ended");
                return self.ring.end(why);
            }
        }
    }

    /// Reads from `next`: `Ok(None)` when the group ended (the ring is told why),
    /// `Err(first)` when retention dropped `next` (the caller restarts at `first`).
    async fn read(&mut self, next: u64) -> Result<Option<Vec<Item>>, u64> {
        match self.topic.log.read(next, self.batch).await {
            Ok(items) => Ok(Some(items)),
            Err(LogError::Truncated { first, .. }) => {
                tracing::warn!(
                    topic = %self.topic.name,
                    next,
                    first,
                    "fan-out group fell behind retention; restarting at the first retained offset"
                );
                Err(first)
            }
            Err(e) => {
                tracing::error!(topic = %self.topic.name, error = %e, "fan-out group: log read failed");
                self.ring.end(GroupEnd::ReadFailed(e.to_string()));
                Ok(None)
            }
        }
    }

    /// Writes the items the filter accepts; `next` moves past every item handled.
    fn encode(&self, items: &[Item], enc: &mut BatchEncoder, next: &mut u64) -> Option<GroupEnd> {
        for it in items {
            if accepts(&self.key, it)
                && let Err(e) = enc.push(it)
            {
                return Some(GroupEnd::DeliverFailed {
                    offset: e.offset,
                    message: e.message,
                });
            }
            *next = it.offset + 1;
        }
        None
    }

    /// Publishes the batch as a block covering everything below `next`.
    fn flush(&self, enc: BatchEncoder, next: u64) {
        if enc.items() == 0 {
            if next > self.ring.read().processed() {
                self.ring.skip_to(next);
            }
            return;
        }
        let items = enc.items() as u32;
        let wire: Wire = enc.finish();
        self.metrics
            .fanout_encoded_bytes
            .fetch_add(wire.len() as u64, Ordering::Relaxed);
        self.ring.push(next, items, wire);
    }

    /// Waits for items past `next`, the deadline, or the end.
    async fn wait(
        &mut self,
        watch: &mut watch::Receiver<u64>,
        next: u64,
        deadline: Option<Instant>,
    ) -> Woke {
        let sleep = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            r = watch.wait_for(|n| *n > next) => if r.is_err() { Woke::Closed } else { Woke::Items },
            _ = sleep => Woke::Deadline,
            _ = &mut self.stop => Woke::Stop,
            _ = self.shutdown.wait_for(|s| *s) => Woke::Stop,
        }
    }
}

/// Whether the key's filter takes the item. A filter that cannot be evaluated on an
/// item leaves it out (the item is not the subscriber's fault, nor the filter's).
pub(super) fn accepts(key: &GroupKey, item: &Item) -> bool {
    match &key.filter {
        None => true,
        Some(f) => f.accepts(item).unwrap_or_else(|e| {
            tracing::debug!(offset = item.offset, error = %e, "filter failed on an item; left out");
            false
        }),
    }
}
