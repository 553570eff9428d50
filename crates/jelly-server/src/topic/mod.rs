//! Topics: named logs with their options, counters and live subscriptions.

mod options;
mod registry;
mod storage;

pub(crate) use options::name_or_number;
pub use options::{Physical, RetentionChange, TopicOptions};
pub use registry::{LOCK_FILE, Registry};
use storage::new_topic_id;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};

use tokio::sync::watch;

use crate::item::{Item, NewItem};
use crate::log::{FileLog, Log, LogError, MemoryLog, ReadLimits, now_ms};
use crate::mirror::MirrorStatus;

/// The log behind a topic. An enum rather than `dyn Log`, since the trait's async
/// methods are not object safe.
pub enum TopicLog {
    Memory(MemoryLog),
    File(FileLog),
}

macro_rules! dispatch {
    ($self:ident, $l:ident => $e:expr) => {
        match $self {
            TopicLog::Memory($l) => $e,
            TopicLog::File($l) => $e,
        }
    };
}

impl TopicLog {
    pub async fn append(&self, items: Vec<NewItem>) -> Result<Vec<u64>, LogError> {
        dispatch!(self, l => l.append(items).await)
    }
    /// Whether an append waits for something (the file log's writer, with fsync),
    /// rather than completing in its first poll.
    pub fn append_waits(&self) -> bool {
        match self {
            TopicLog::Memory(_) => false,
            TopicLog::File(l) => !l.commits_inline(),
        }
    }
    pub async fn append_at(&self, items: Vec<Item>, restart: bool) -> Result<(), LogError> {
        dispatch!(self, l => l.append_at(items, restart).await)
    }
    pub async fn read(&self, from: u64, limits: ReadLimits) -> Result<Vec<Item>, LogError> {
        dispatch!(self, l => l.read(from, limits).await)
    }
    pub fn read_now(&self, from: u64, limits: ReadLimits) -> Option<Result<Vec<Item>, LogError>> {
        dispatch!(self, l => l.read_now(from, limits))
    }
    pub fn first_offset(&self) -> u64 {
        dispatch!(self, l => l.first_offset())
    }
    pub fn next_offset(&self) -> u64 {
        dispatch!(self, l => l.next_offset())
    }
    pub async fn offset_for_timestamp(&self, ts: u64) -> Result<u64, LogError> {
        dispatch!(self, l => l.offset_for_timestamp(ts).await)
    }
    pub fn watch(&self) -> watch::Receiver<u64> {
        dispatch!(self, l => l.watch())
    }
    pub fn close(&self) {
        dispatch!(self, l => l.close())
    }
    /// Bytes the log holds: the file log's records on disk, the memory log's items
    /// (frames and metadata; expired ones count until they are dropped).
    pub fn retained_bytes(&self) -> u64 {
        match self {
            TopicLog::Memory(l) => l.held_bytes(),
            TopicLog::File(l) => l.size_bytes(),
        }
    }
    /// Drops a memory log's expired items (see [`MemoryLog::drop_expired`]); the file
    /// log's writer applies its own retention.
    pub fn drop_expired(&self) {
        if let TopicLog::Memory(l) = self {
            l.drop_expired();
        }
    }
    /// Why the log refuses appends (a failed write or fsync), while it does.
    pub fn failure(&self) -> Option<String> {
        match self {
            TopicLog::Memory(_) => None,
            TopicLog::File(l) => l.failure(),
        }
    }
    /// The damage a read found in the log's files, if one did (see [`FileLog::damage`]).
    pub fn damage(&self) -> Option<String> {
        match self {
            TopicLog::Memory(_) => None,
            TopicLog::File(l) => l.damage(),
        }
    }
    /// Applies the retention limits of `options` to the live log. Items beyond the new
    /// limits go at once, so it may delete files: call it off the async threads.
    pub fn set_retention(&self, options: &TopicOptions) {
        match self {
            TopicLog::Memory(l) => l.set_retention(options.memory_retention()),
            TopicLog::File(l) => {
                l.set_retention(options.retention_bytes_limit(), options.retention_age())
            }
        }
    }
}

/// Counters of one topic (since the server started).
#[derive(Debug, Default)]
pub struct TopicStats {
    pub items_in: AtomicU64,
    pub bytes_in: AtomicU64,
    pub statements_in: AtomicU64,
    pub items_out: AtomicU64,
    pub bytes_out: AtomicU64,
}

/// A live subscription, as shown by describe and `/metrics`.
#[derive(Debug)]
pub struct SubscriberInfo {
    pub id: u64,
    /// `stream`, `sse` or `ws`.
    pub kind: &'static str,
    /// Output format name.
    pub format: &'static str,
    /// Next offset this subscriber will be sent.
    pub position: AtomicU64,
    pub since_ms: u64,
}

/// Told after every append to a topic, on the appending task ([`Topic::listen`]).
///
/// Fan-out groups without a buffer window use it to write new items for their
/// subscribers right away, instead of waking a task of their own to do it (one task
/// hop, often a thread wake-up, less on the way from publisher to subscriber).
pub trait AppendListener: Send + Sync {
    /// Items were appended. Must not block: it runs on the publisher's task.
    fn appended(&self);

    /// The topic was deleted and its log closed: nothing more will be appended.
    fn closed(&self) {}
}

/// A topic.
pub struct Topic {
    pub name: String,
    /// Which topic of this name it is: a topic deleted and created again under the
    /// same name gets a new id (its offsets start over), so a client resuming by
    /// offset can tell (`topic_id` on the subscribe endpoints). Kept in the topic's
    /// `id` file, so it survives restarts.
    pub id: String,
    /// Its options: fixed when it is created, except retention ([`Registry::alter`]).
    options: RwLock<Arc<TopicOptions>>,
    /// Held while its options are changed, and by its deletion before the files move,
    /// so that a change never writes into a directory being deleted.
    altering: Mutex<()>,
    pub log: TopicLog,
    pub created_ms: u64,
    pub stats: TopicStats,
    /// Set when the topic is a copy of another server's topic (only its mirror writes it).
    pub mirror: Option<Arc<MirrorStatus>>,
    subs: Mutex<HashMap<u64, Arc<SubscriberInfo>>>,
    next_sub: AtomicU64,
    /// Told after each append; dropped listeners are pruned then.
    listeners: Mutex<Vec<Weak<dyn AppendListener>>>,
    /// Set when the topic is deleted ([`Registry::delete`]), before its log closes:
    /// whoever still holds it can tell a deletion from a failure.
    deleted: AtomicBool,
}

impl Topic {
    pub(crate) fn new(
        name: String,
        options: TopicOptions,
        log: TopicLog,
        mirror: Option<Arc<MirrorStatus>>,
    ) -> Topic {
        Topic {
            name,
            id: new_topic_id(),
            options: RwLock::new(Arc::new(options)),
            altering: Mutex::new(()),
            log,
            created_ms: now_ms(),
            stats: TopicStats::default(),
            mirror,
            subs: Mutex::new(HashMap::new()),
            next_sub: AtomicU64::new(1),
            listeners: Mutex::new(Vec::new()),
            deleted: AtomicBool::new(false),
        }
    }

    /// Its current options (retention may change while it lives: [`Registry::alter`]).
    pub fn options(&self) -> Arc<TopicOptions> {
        self.options
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The topic with the id it was given when it was created (see [`Topic::id`]).
    pub(crate) fn with_id(mut self, id: String) -> Topic {
        // An id says when it was made (see `new_topic_id`): a reopened topic keeps
        // its creation time across restarts. An id of another shape (hand-made) keeps
        // the time it was opened.
        if let Some(ms) = storage::id_created_ms(&id) {
            self.created_ms = ms;
        }
        self.id = id;
        self
    }

    /// [`TopicError::Replaced`] when a client's `expected` id is not this topic's: the
    /// topic it read from was deleted and this is another one of the same name.
    pub fn check_id(&self, expected: Option<&str>) -> Result<(), TopicError> {
        match expected {
            Some(id) if !id.is_empty() && id != self.id => Err(TopicError::Replaced {
                topic: self.name.clone(),
                expected: id.to_string(),
                actual: self.id.clone(),
            }),
            _ => Ok(()),
        }
    }

    /// Whether the topic was deleted. Its log is closed then: appends and reads fail
    /// with [`LogError::Closed`], and a topic of the same name, if any, is a new one.
    pub fn is_deleted(&self) -> bool {
        self.deleted.load(Ordering::Acquire)
    }

    fn subs(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<SubscriberInfo>>> {
        self.subs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a subscription; it is removed when the guard is dropped.
    pub fn subscribe(
        self: &Arc<Self>,
        kind: &'static str,
        format: &'static str,
        position: u64,
    ) -> SubscriberGuard {
        let id = self.next_sub.fetch_add(1, Ordering::Relaxed);
        let info = Arc::new(SubscriberInfo {
            id,
            kind,
            format,
            position: AtomicU64::new(position),
            since_ms: now_ms(),
        });
        self.subs().insert(id, info.clone());
        SubscriberGuard {
            topic: self.clone(),
            info,
        }
    }

    /// Registers `listener` to be told of every append until it is dropped.
    pub fn listen(&self, listener: Weak<dyn AppendListener>) {
        let mut l = self.listeners.lock().unwrap_or_else(|e| e.into_inner());
        l.retain(|w| w.strong_count() > 0);
        l.push(listener);
    }

    /// After an append: tells the live listeners, then counts it.
    fn appended(&self, count: Appended, metrics: &crate::metrics::Metrics) {
        self.tell_listeners();
        // Keeps a busy-polling runtime polling while items flow.
        crate::runtime::note_activity();
        self.stats
            .items_in
            .fetch_add(count.items, Ordering::Relaxed);
        self.stats
            .bytes_in
            .fetch_add(count.bytes, Ordering::Relaxed);
        self.stats
            .statements_in
            .fetch_add(count.statements, Ordering::Relaxed);
        metrics.items_in.fetch_add(count.items, Ordering::Relaxed);
        metrics.bytes_in.fetch_add(count.bytes, Ordering::Relaxed);
    }

    /// Tells the live listeners of an append (outside the lock: they may take time).
    fn tell_listeners(&self) {
        let live: Vec<Arc<dyn AppendListener>> = {
            let mut l = self.listeners.lock().unwrap_or_else(|e| e.into_inner());
            if l.is_empty() {
                return;
            }
            l.retain(|w| w.strong_count() > 0);
            l.iter().filter_map(Weak::upgrade).collect()
        };
        for listener in live {
            listener.appended();
        }
    }

    /// Tells the live listeners that the topic was deleted.
    fn tell_closed(&self) {
        let live: Vec<Arc<dyn AppendListener>> = {
            let l = self.listeners.lock().unwrap_or_else(|e| e.into_inner());
            l.iter().filter_map(Weak::upgrade).collect()
        };
        for listener in live {
            listener.closed();
        }
    }

    /// Appends a batch, counts it (topic and server counters) and tells the listeners.
    ///
    /// When the log makes the append wait (for the writer's fsync), the append runs as
    /// a task of its own: a caller dropped meanwhile (a publisher whose connection
    /// closed) cannot cancel what follows the commit, so the items are counted and
    /// the fan-out hears of them at once, not at the topic's next append. Without a
    /// wait the append completes in one poll, and nothing can come between.
    pub async fn append(
        self: &Arc<Self>,
        items: Vec<NewItem>,
        metrics: &Arc<crate::metrics::Metrics>,
    ) -> Result<Vec<u64>, LogError> {
        let count = Appended::of(items.iter().map(|i| (i.frame.len(), i.statements)));
        if self.log.append_waits() {
            let (topic, metrics) = (self.clone(), metrics.clone());
            let task = tokio::spawn(async move {
                let offsets = topic.log.append(items).await?;
                topic.appended(count, &metrics);
                Ok(offsets)
            });
            return task.await.unwrap_or(Err(LogError::Closed));
        }
        let offsets = self.log.append(items).await?;
        self.appended(count, metrics);
        Ok(offsets)
    }

    /// Appends items that carry their offsets and timestamps (see
    /// [`crate::log::Log::append_at`]) and counts them like [`Topic::append`].
    pub async fn append_at(
        &self,
        items: Vec<Item>,
        restart: bool,
        metrics: &crate::metrics::Metrics,
    ) -> Result<(), LogError> {
        let count = Appended::of(items.iter().map(|i| (i.frame.len(), i.statements)));
        self.log.append_at(items, restart).await?;
        self.appended(count, metrics);
        Ok(())
    }

    /// The live subscriptions.
    pub fn subscribers(&self) -> Vec<Arc<SubscriberInfo>> {
        let mut v: Vec<_> = self.subs().values().cloned().collect();
        v.sort_by_key(|s| s.id);
        v
    }
}

/// What one append added, for the counters.
struct Appended {
    items: u64,
    bytes: u64,
    statements: u64,
}

impl Appended {
    /// From each item's frame size and statement count.
    fn of(items: impl Iterator<Item = (usize, u32)>) -> Appended {
        let mut a = Appended {
            items: 0,
            bytes: 0,
            statements: 0,
        };
        for (bytes, statements) in items {
            a.items += 1;
            a.bytes += bytes as u64;
            a.statements += u64::from(statements);
        }
        a
    }
}

/// What [`Registry::delete`] deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeletedTopic {
    /// The first offset the topic still held.
    pub first_offset: u64,
    /// The offset its next item would have had.
    pub next_offset: u64,
    /// The topic could not be opened at startup (its files were deleted unread).
    pub was_unavailable: bool,
}

/// Keeps a subscription registered while it lives.
pub struct SubscriberGuard {
    pub topic: Arc<Topic>,
    pub info: Arc<SubscriberInfo>,
}

impl SubscriberGuard {
    /// Records that everything before `next` has been sent.
    pub fn advance(&self, next: u64) {
        self.info.position.store(next, Ordering::Relaxed);
    }
}

impl Drop for SubscriberGuard {
    fn drop(&mut self) {
        self.topic.subs().remove(&self.info.id);
    }
}

/// Why a topic could not be created.
#[derive(Debug, thiserror::Error)]
pub enum TopicError {
    #[error(
        "invalid topic name `{0}`: use 1 to 200 characters of A-Z, a-z, 0-9, `.`, `_` and `-`, not starting with `.`"
    )]
    BadName(String),
    #[error("invalid topic options: {0}")]
    BadOptions(String),
    /// A create asked for other options than the existing topic's.
    #[error("topic `{topic}` already exists with other options: {differences}")]
    Conflict {
        topic: String,
        /// Which options differ: [`TopicOptions::differences`].
        differences: String,
    },
    #[error("topic `{0}` does not exist")]
    NotFound(String),
    /// Creating it would exceed [`ServerConfig::max_topics`](crate::ServerConfig::max_topics).
    #[error(
        "cannot create topic `{topic}`: the server holds its maximum of {max} topics (max_topics); delete one or raise the limit"
    )]
    TooMany { topic: String, max: usize },
    /// The topic was deleted while a request used it.
    #[error("topic `{0}` was deleted")]
    Deleted(String),
    /// The request names a topic id (`topic_id`) that is not the topic's: the topic it
    /// was reading was deleted, and this is another one of the same name.
    #[error(
        "topic `{topic}` with id {expected} was deleted (or the id was never this topic's): the topic of that name now is another one (id {actual}), whose offsets started over"
    )]
    Replaced {
        topic: String,
        expected: String,
        actual: String,
    },
    #[error("topic storage: {0}")]
    Storage(String),
    #[error(
        "topic `{topic}` is a mirror of {upstream}: only its mirror writes it (publish \
         upstream; to delete it or copy it again, stop this server and remove its `[[mirror]]` \
         table or `--mirror` flag, or the topic's folder)"
    )]
    Mirrored { topic: String, upstream: String },
    /// The topic exists on disk but could not be opened at startup (a corrupt log
    /// segment, an unreadable `topic.json`): it stays down until an operator repairs
    /// it and restarts the server.
    #[error("topic `{topic}` is unavailable: {reason}")]
    Unavailable { topic: String, reason: String },
}

impl TopicError {
    /// Whether the error passes by itself within moments: the topic's deletion is
    /// running (a publish retried after it creates the name's new topic).
    pub fn is_passing(&self) -> bool {
        matches!(self, TopicError::Unavailable { reason, .. } if reason == storage::BEING_DELETED)
    }
}

/// Why an empty expected topic id (`topic_id=`, `x-jelly-topic-id`) is refused rather
/// than taken as none: a client that lost the id it stored would resume without the
/// check it asked for.
pub const EMPTY_TOPIC_ID: &str = "the topic id is empty: give the id a subscribe answer \
     carried (X-Jelly-Topic-Id), or leave it out";

/// Longest topic name, in bytes (all ASCII).
pub const MAX_NAME_LEN: usize = 200;

/// Checks a topic name (it becomes a directory name in the file log).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && !name.starts_with('.')
        && name.chars().all(name_char)
}

/// Whether a topic name may hold `c`: ASCII letters, digits, `.`, `_` and `-`.
pub fn name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
}
