//! A group: the subscribers of one [`GroupKey`], and the one task that follows the
//! topic's log for all of them, writing (and compressing) each batch once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use tokio::sync::{Notify, oneshot, watch};
use tokio::time::Instant;

use super::encode::{BatchEncoder, Wire};
use super::key::GroupKey;
use super::ring::{GroupEnd, Ring};
use crate::compress::Block;
use crate::item::Item;
use crate::log::{LogError, ReadLimits};
use crate::metrics::Metrics;
use crate::topic::{AppendListener, Topic};

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
    /// The topic it follows: a topic deleted and created again under the same name
    /// is another topic, whose subscribers must not join this group.
    topic: Weak<Topic>,
    metrics: Arc<Metrics>,
    /// Window 0: the appenders' way into the group (also held by its task).
    _pump: Option<Arc<Pump>>,
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

/// Who writes a group's blocks.
enum Writer {
    /// The appending tasks, inline (no window).
    Inline(Arc<Pump>),
    /// The group's own task (with a window, it has to wait anyway).
    Task(Producer),
}

/// What turns a group's log items into ring blocks.
pub(super) struct Producer {
    pub topic: Arc<Topic>,
    pub key: GroupKey,
    pub ring: Arc<Ring>,
    pub batch: ReadLimits,
    pub metrics: Arc<Metrics>,
}

/// What a group's task needs.
pub(super) struct GroupTask {
    pub producer: Producer,
    pub start: u64,
    pub stop: oneshot::Receiver<()>,
    pub shutdown: watch::Receiver<bool>,
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
        if let Some(g) = m.get(&key).and_then(Weak::upgrade)
            && std::ptr::eq(g.topic.as_ptr(), Arc::as_ptr(topic))
        {
            return g;
        }
        let start = topic.log.next_offset();
        let ring = Arc::new(Ring::new(start, limits));
        let (stop_tx, stop) = oneshot::channel();
        let keepalive = super::encode::block(key.encoding, b": keep-alive\n\n".to_vec());
        let producer = Producer {
            topic: topic.clone(),
            key: key.clone(),
            ring: ring.clone(),
            batch,
            metrics: metrics.clone(),
        };
        // Without a window, appenders write new items into the ring themselves.
        let writer = if writes_inline(&key) {
            Writer::Inline(Arc::new(Pump {
                producer,
                next: Mutex::new(Some(start)),
                pending: AtomicBool::new(false),
                kick: Notify::new(),
            }))
        } else {
            Writer::Task(producer)
        };
        let g = Arc::new(Group {
            key: key.clone(),
            ring,
            keepalive,
            map: Arc::downgrade(map),
            topic: Arc::downgrade(topic),
            metrics: metrics.clone(),
            _pump: match &writer {
                Writer::Inline(pump) => Some(pump.clone()),
                Writer::Task(_) => None,
            },
            _stop: stop_tx,
        });
        m.insert(key.clone(), Arc::downgrade(&g));
        drop(m);
        metrics.fanout_groups.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(?key, start, "fan-out group started");
        let shutdown = shutdown.clone();
        match writer {
            Writer::Inline(pump) => {
                let listener: Arc<dyn AppendListener> = pump.clone();
                topic.listen(Arc::downgrade(&listener));
                // Deleted before the listener was in place (checked after it: one of
                // the two sees the other), it will not be told.
                if topic.is_deleted() {
                    listener.closed();
                }
                // Whatever was appended before the listener was in place.
                pump.run();
                tokio::spawn(pump.serve(stop, shutdown));
            }
            Writer::Task(producer) => {
                tokio::spawn(
                    GroupTask {
                        producer,
                        start,
                        stop,
                        shutdown,
                    }
                    .run(),
                );
            }
        }
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
        let mut watch = self.producer.topic.log.watch();
        let mut next = self.start;
        let window = Duration::from_millis(self.producer.key.window_ms);
        loop {
            // The first items of a block.
            let items = match self.read(next).await {
                Ok(items) => items,
                Err(first) => {
                    next = first;
                    continue;
                }
            };
            let Some(items) = items else { return };
            if items.is_empty() {
                match self.wait(&mut watch, next, None).await {
                    Woke::Items | Woke::Deadline => continue,
                    Woke::Stop => return,
                    Woke::Closed => return self.producer.ring.end(GroupEnd::Closed),
                }
            }
            let deadline = Instant::now() + window;
            let mut enc = BatchEncoder::new(&self.producer.key, false);
            let Some(verdicts) = self.verdicts(&items).await else {
                return;
            };
            let mut failed =
                self.producer
                    .encode_judged(&items, verdicts.as_deref(), &mut enc, &mut next);
            // More items within the window (none with a window of 0).
            while failed.is_none()
                && !window.is_zero()
                && enc.raw_len() < MAX_BLOCK_RAW_BYTES
                && enc.items() < self.producer.batch.max_items
            {
                match self.read(next).await {
                    Ok(Some(items)) if !items.is_empty() => {
                        let Some(verdicts) = self.verdicts(&items).await else {
                            return;
                        };
                        failed = self.producer.encode_judged(
                            &items,
                            verdicts.as_deref(),
                            &mut enc,
                            &mut next,
                        );
                        continue;
                    }
                    Ok(Some(_)) => {}
                    Ok(None) => return,
                    // Retention overtook the group: what it gathered is lost with the rest.
                    Err(first) => {
                        next = first;
                        enc = BatchEncoder::new(&self.producer.key, false);
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
            self.producer.flush(enc, next);
            if let Some(why) = failed {
                // A closed log is a deleted topic or a shutdown, both normal ends.
                if matches!(why, GroupEnd::Closed) {
                    tracing::debug!(topic = %self.producer.topic.name, "fan-out group ended: log closed");
                } else {
                    tracing::error!(topic = %self.producer.topic.name, ?why, "fan-out group ended");
                }
                return self.producer.ring.end(why);
            }
        }
    }

    /// Reads from `next`: `Ok(None)` when the group ended (the ring is told why),
    /// `Err(first)` when retention dropped `next` (the ring restarted at `first`; go on there).
    async fn read(&mut self, next: u64) -> Result<Option<Vec<Item>>, u64> {
        match self
            .producer
            .topic
            .log
            .read(next, self.producer.batch)
            .await
        {
            Ok(items) => Ok(Some(items)),
            Err(e) => self.producer.read_failed(next, e).map_or(Ok(None), Err),
        }
    }

    /// Waits for items past `next`, the deadline, or the end.
    /// With a costly filter, whether it takes each item, worked out on a blocking
    /// thread so that the evaluation holds no async worker (the server's other
    /// requests and subscribers go on meanwhile); `None` inside when the filter is
    /// cheap (checked inline), and `None` outside when the group stopped meanwhile
    /// (its last subscriber left: the evaluation stops at the next item).
    async fn verdicts(&mut self, items: &[Item]) -> Option<Option<Vec<bool>>> {
        let Some(filter) = self.producer.key.filter.clone().filter(|f| f.is_costly()) else {
            return Some(None);
        };
        let stopped = Arc::new(AtomicBool::new(false));
        tokio::select! {
            v = filter.takes_each(items, stopped.clone()) => Some(Some(v)),
            _ = &mut self.stop => {
                stopped.store(true, Ordering::Relaxed);
                None
            }
            _ = self.shutdown.wait_for(|s| *s) => {
                stopped.store(true, Ordering::Relaxed);
                None
            }
        }
    }

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

impl Producer {
    /// Writes the items the filter accepts; `next` moves past every item handled.
    fn encode(&self, items: &[Item], enc: &mut BatchEncoder, next: &mut u64) -> Option<GroupEnd> {
        self.encode_judged(items, None, enc, next)
    }

    /// [`Producer::encode`] with the filter's verdicts worked out beforehand (one per
    /// item, in order; an item without one, as after a stop, is left out).
    fn encode_judged(
        &self,
        items: &[Item],
        verdicts: Option<&[bool]>,
        enc: &mut BatchEncoder,
        next: &mut u64,
    ) -> Option<GroupEnd> {
        for (i, it) in items.iter().enumerate() {
            let taken = match verdicts {
                Some(v) => v.get(i).copied().unwrap_or(false),
                None => accepts(&self.key, it),
            };
            if taken && let Err(e) = enc.push(it) {
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

    /// Reads from `next` what is in memory and writes it into the ring; stops at
    /// the log's end or when a read would need I/O (`false`). `next` becomes `None`
    /// when the group ends.
    fn drain_in_memory(&self, next: &mut Option<u64>) -> bool {
        while let Some(from) = *next {
            match self.topic.log.read_now(from, self.batch) {
                None => return false,
                Some(Ok(items)) if items.is_empty() => break,
                Some(r) => *next = self.take(from, r),
            }
        }
        true
    }

    /// Handles the result of a read from `from`: the group's next position, or
    /// `None` when it ended.
    fn take(&self, from: u64, read: Result<Vec<Item>, LogError>) -> Option<u64> {
        match read {
            Ok(items) => {
                let mut enc = BatchEncoder::new(&self.key, false);
                let mut next = from;
                let failed = self.encode(&items, &mut enc, &mut next);
                self.flush(enc, next);
                match failed {
                    None => Some(next),
                    Some(why) => {
                        tracing::error!(topic = %self.topic.name, ?why, "fan-out group ended");
                        self.ring.end(why);
                        None
                    }
                }
            }
            Err(e) => self.read_failed(from, e),
        }
    }

    /// After a failed read from `from`: where the group goes on, or `None` when it
    /// ended. Retention overtook it: the ring starts over at the first retained offset.
    fn read_failed(&self, from: u64, e: LogError) -> Option<u64> {
        match e {
            LogError::Truncated { first, .. } => {
                tracing::warn!(
                    topic = %self.topic.name,
                    next = from,
                    first,
                    "fan-out group fell behind retention; restarting at the first retained offset"
                );
                self.ring.restart_at(first);
                Some(first)
            }
            LogError::Closed => {
                // The topic was deleted: its subscribers hear so from their topic.
                self.ring.end(GroupEnd::Closed);
                None
            }
            e => {
                tracing::error!(topic = %self.topic.name, error = %e, "fan-out group: log read failed");
                self.ring.end(GroupEnd::ReadFailed(e.to_string()));
                None
            }
        }
    }
}

/// A group without a buffer window. Whoever appends to the topic writes the new
/// items into the ring on its own task ([`AppendListener`]), so a subscriber is one
/// task wake-up away from the publisher, not two. The group's task only reads what
/// is no longer in memory (a group that fell behind) and then hands back.
pub(super) struct Pump {
    producer: Producer,
    /// Every offset below it is in the ring or was rejected; `None` once the group
    /// ended. Appenders only `try_lock` it, so no publisher ever waits here.
    next: Mutex<Option<u64>>,
    /// Set by an appender that found `next` locked: the holder drains again.
    pending: AtomicBool,
    /// Wakes the task: the items are not in memory.
    kick: Notify,
}

impl Pump {
    fn lock(&self) -> MutexGuard<'_, Option<u64>> {
        self.next.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes everything new that is in memory into the ring, unless another caller
    /// is doing so (it will see `pending` and go on). Never blocks.
    fn run(&self) {
        self.pending.store(true, Ordering::Release);
        loop {
            let mut next = match self.next.try_lock() {
                Ok(g) => g,
                Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => return,
            };
            while self.pending.swap(false, Ordering::AcqRel) {
                if !self.producer.drain_in_memory(&mut next) {
                    self.kick.notify_one();
                    break;
                }
            }
            drop(next);
            // An appender may have set `pending` after the last swap and failed its
            // `try_lock` before the unlock: look again.
            if !self.pending.load(Ordering::Acquire) {
                return;
            }
        }
    }

    /// The group's task: reads from the log what is not in memory when kicked, until
    /// the group is dropped or the server shuts down.
    async fn serve(
        self: Arc<Self>,
        mut stop: oneshot::Receiver<()>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        loop {
            tokio::select! {
                _ = self.kick.notified() => {}
                _ = &mut stop => return,
                _ = shutdown.wait_for(|s| *s) => return,
            }
            loop {
                let Some(from) = *self.lock() else { return };
                let read = self
                    .producer
                    .topic
                    .log
                    .read(from, self.producer.batch)
                    .await;
                if matches!(&read, Ok(items) if items.is_empty()) {
                    break;
                }
                {
                    let mut next = self.lock();
                    // Unless an appender moved the group on meanwhile.
                    if *next == Some(from) {
                        *next = self.producer.take(from, read);
                    }
                }
                // What came meanwhile is in memory, probably.
                self.run();
            }
            self.run();
        }
    }
}

impl AppendListener for Pump {
    fn appended(&self) {
        self.run();
    }

    /// Ends the group: its subscribers hear of the deletion from their topic.
    fn closed(&self) {
        *self.lock() = None;
        self.producer.ring.end(GroupEnd::Closed);
    }
}

/// Whether appenders write a group's blocks themselves (see [`Writer`]): without a
/// window, and without a costly filter (an ASK query), whose evaluation would then
/// run in every publisher's request and delay every other subscriber's delivery; the
/// group's task evaluates it on a blocking thread instead.
fn writes_inline(key: &GroupKey) -> bool {
    key.window_ms == 0 && !key.filter.as_ref().is_some_and(|f| f.is_costly())
}

/// Whether the key's filter takes the item. A filter that cannot be evaluated on an
/// item leaves it out (the item is not the subscriber's fault, nor the filter's).
pub(super) fn accepts(key: &GroupKey, item: &Item) -> bool {
    match &key.filter {
        None => true,
        Some(f) => f.takes(item),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::deliver::OutFormat;
    use crate::fanout::{Fanout, Framing, RingLimits, Step};
    use crate::ingest::{InputFormat, PublishMeta, ingest};
    use crate::log::{Durability, FileLog, FileLogOptions, MemoryLog};
    use crate::topic::{TopicLog, TopicOptions};

    /// An ASK filter is evaluated by the group's task (on a blocking thread), not by
    /// the appenders; the subscriber gets exactly the items it takes.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_costly_filter_is_left_to_the_groups_task() {
        let plain = GroupKey::new("t", OutFormat::NQuads, Framing::Stream);
        assert!(writes_inline(&plain));
        let ask = crate::filter::FilterParams {
            ask: Some("ASK { ?s ?p \"keep\" }".into()),
            ..Default::default()
        }
        .build()
        .unwrap();
        let key = GroupKey {
            filter: ask,
            ..plain
        };
        assert!(!writes_inline(&key));
        let log = TopicLog::Memory(MemoryLog::new(usize::MAX));
        let topic = Arc::new(Topic::new("t".into(), TopicOptions::default(), log, None));
        let (_tx, fanout) = fanout();
        let mut sub = fanout.subscribe(topic.clone(), key, "stream", 0);
        let metrics = Arc::new(Metrics::default());
        for i in 0..20 {
            let word = if i % 4 == 0 { "keep" } else { "drop" };
            let body = format!("<http://e/{i}> <http://e/p> \"{word}\" .\n");
            append_nquads(&topic, &body, &metrics).await;
        }
        let text = read_until(&mut sub, |t| t.matches("\"keep\"").count() >= 5).await;
        assert!(!text.contains("drop"), "{text}");
        let offsets: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# offset "))
            .collect();
        assert_eq!(offsets, ["0", "4", "8", "12", "16"]);
    }

    /// A fan-out with pages of 7 items (and the sender that keeps it from shutting down).
    fn fanout() -> (watch::Sender<bool>, Fanout) {
        let (tx, shutdown) = watch::channel(false);
        let fanout = Fanout::new(
            RingLimits::default(),
            ReadLimits {
                max_items: 7,
                max_bytes: 1 << 20,
            },
            Duration::from_secs(60),
            shutdown,
            Arc::new(Metrics::default()),
        );
        (tx, fanout)
    }

    /// The subscription's text output until `enough` says so (a test that waits 20 s
    /// for a step is stuck).
    async fn read_until(
        sub: &mut crate::fanout::Subscription,
        enough: impl Fn(&str) -> bool,
    ) -> String {
        let mut text = String::new();
        while !enough(&text) {
            match tokio::time::timeout(Duration::from_secs(20), sub.next_step()).await {
                Ok(Step::Data(parts)) => {
                    for p in parts {
                        text.push_str(std::str::from_utf8(&p).unwrap());
                    }
                }
                Ok(Step::KeepAlive) => {}
                Ok(Step::End(why)) => panic!("ended: {why:?}"),
                Err(_) => panic!("stuck after {} lines: {text}", text.lines().count()),
            }
        }
        text
    }

    /// Appends `body` (N-Quads) to `topic` as one item.
    async fn append_nquads(topic: &Arc<Topic>, body: &str, metrics: &Arc<Metrics>) {
        let items = ingest(
            body.as_bytes(),
            InputFormat::NQuads,
            &topic.options(),
            &PublishMeta::default(),
            1 << 20,
        )
        .unwrap();
        topic.append(items, metrics).await.unwrap();
    }

    const APPENDERS: usize = 4;
    const EACH: usize = 50;

    /// Appenders on several tasks at once (window 0: each writes into the ring
    /// itself, or leaves it to whoever holds the group); one subscriber must get
    /// every item exactly once, in offset order.
    async fn concurrent_appends_reach_the_subscriber(log: TopicLog) {
        let topic = Arc::new(Topic::new("t".into(), TopicOptions::default(), log, None));
        let (_tx, fanout) = fanout();
        let key = GroupKey::new("t", OutFormat::NQuads, Framing::Stream);
        let mut sub = fanout.subscribe(topic.clone(), key, "stream", 0);
        let mut tasks = Vec::new();
        for a in 0..APPENDERS {
            let topic = topic.clone();
            tasks.push(tokio::spawn(async move {
                let metrics = Arc::new(Metrics::default());
                for i in 0..EACH {
                    let body = format!("<http://e/{a}> <http://e/p> \"{i}\" .\n");
                    append_nquads(&topic, &body, &metrics).await;
                    if i % 8 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
            }));
        }
        // Each item is a `# offset N` comment line and a statement line.
        let text = read_until(&mut sub, |t| t.lines().count() >= 2 * APPENDERS * EACH).await;
        for t in tasks {
            t.await.unwrap();
        }
        // Each appender's items in its own order, each exactly once.
        let mut seen = vec![0usize; APPENDERS];
        let offsets: Vec<usize> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# offset "))
            .map(|v| v.parse().unwrap())
            .collect();
        assert_eq!(offsets, (0..APPENDERS * EACH).collect::<Vec<_>>());
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let a: usize = line[10..11].parse().unwrap();
            let i: usize = line.split('"').nth(1).unwrap().parse().unwrap();
            assert_eq!(i, seen[a], "appender {a}: {line}");
            seen[a] += 1;
        }
        assert_eq!(seen, vec![EACH; APPENDERS]);
        assert_eq!(topic.log.next_offset(), (APPENDERS * EACH) as u64);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn appenders_write_the_ring_themselves_exactly_once() {
        concurrent_appends_reach_the_subscriber(TopicLog::Memory(MemoryLog::new(usize::MAX))).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn items_not_in_memory_are_read_by_the_group_task() {
        let dir = std::env::temp_dir().join(format!("jelly-pump-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let log = FileLog::open(
            dir.join("log"),
            FileLogOptions {
                durability: Durability::None,
                // Nothing stays in memory: every read of the group goes to the files.
                tail_cache_bytes: 0,
                ..FileLogOptions::default()
            },
        )
        .unwrap();
        concurrent_appends_reach_the_subscriber(TopicLog::File(log)).await;
        let _ = std::fs::remove_dir_all(&dir);
    }
}
