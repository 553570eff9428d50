//! Topics: named logs with their options, counters and live subscriptions.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};

use jelly::{LogicalType, PhysicalType, StreamOptions};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::config::{LogKind, ServerConfig};
use crate::item::{Item, NewItem};
use crate::log::{
    Durability, FileLog, FileLogOptions, Log, LogError, MemoryLog, ReadLimits, now_ms, sync_dir,
};
use crate::mirror::MirrorStatus;

/// Physical stream type of a topic's items.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Physical {
    Triples,
    #[default]
    Quads,
}

impl Physical {
    pub fn jelly(self) -> PhysicalType {
        match self {
            Physical::Triples => PhysicalType::Triples,
            Physical::Quads => PhysicalType::Quads,
        }
    }
}

/// A logical type given as a name (`"graphs"`), a number in a string (`"3"`) or a JSON
/// number (`3`), kept as text (`logical_type` reads both).
fn name_or_number<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum NameOrNumber {
        Name(String),
        Number(u64),
    }
    Ok(Option::<NameOrNumber>::deserialize(d)?.map(|v| match v {
        NameOrNumber::Name(s) => s,
        NameOrNumber::Number(n) => n.to_string(),
    }))
}

/// Options of a topic: given when it is created; only retention can change later
/// ([`Registry::alter`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TopicOptions {
    /// `triples` (named graphs are refused) or `quads`.
    pub physical: Physical,
    /// Logical stream type name (`graphs`, `datasets`, `named-graphs`, `flat-quads`, …).
    /// Default: `graphs` for triples topics, `datasets` for quads topics (one item is one frame).
    /// Given as a name or as the RDF-STaX number (a JSON string or number).
    #[serde(deserialize_with = "name_or_number")]
    pub logical: Option<String>,
    /// Allow RDF-star quoted triples in items.
    pub rdf_star: bool,
    /// Allow generalized statements in items.
    pub generalized: bool,
    /// Keep at most this many items (memory log only).
    pub retention_items: u64,
    /// Keep at most about this many bytes (file log; 0 = no limit).
    pub retention_bytes: u64,
    /// Drop items older than this, in milliseconds (file log; 0 = no limit).
    pub retention_ms: u64,
}

impl Default for TopicOptions {
    fn default() -> Self {
        TopicOptions {
            physical: Physical::Quads,
            logical: None,
            rdf_star: false,
            generalized: false,
            retention_items: 1_000_000,
            retention_bytes: 0,
            retention_ms: 0,
        }
    }
}

impl TopicOptions {
    /// The logical type (explicit, or the default for the physical type).
    pub fn logical_type(&self) -> Result<LogicalType, String> {
        match &self.logical {
            None => Ok(match self.physical {
                Physical::Triples => LogicalType::GRAPHS,
                Physical::Quads => LogicalType::DATASETS,
            }),
            Some(s) => LogicalType::parse(s).ok_or_else(|| {
                format!(
                    "unknown logical type `{s}` (flat-triples, flat-quads, graphs, datasets, \
                     subject-graphs, named-graphs, timestamped-named-graphs, or a number)"
                )
            }),
        }
    }

    /// Checks the options; returns a reason when they are unusable.
    pub fn validate(&self) -> Result<(), String> {
        let lt = self.logical_type()?;
        // RDF-STaX numbers a subtype with its base type as the last digit (14 is a
        // kind of 4); a base beyond the four types is no type at all.
        if lt.base().0 > LogicalType::DATASETS.0 {
            return Err(format!(
                "unknown logical type {}: its base type {} is none of 1 (flat-triples), \
                 2 (flat-quads), 3 (graphs), 4 (datasets)",
                lt.0,
                lt.base().0
            ));
        }
        if !lt.fits(self.physical.jelly()) {
            return Err(format!(
                "logical type {} does not fit physical type {}",
                lt.name(),
                self.physical.jelly().name()
            ));
        }
        if self.retention_items == 0 {
            return Err("retention_items must be at least 1".into());
        }
        Ok(())
    }

    /// Stream options of the topic's items and of its subscriptions' Jelly streams.
    pub fn stream_options(&self) -> StreamOptions {
        StreamOptions::big()
            .with_physical_type(self.physical.jelly())
            .with_logical_type(self.logical_type().unwrap_or_default())
            .with_rdf_star(self.rdf_star)
            .with_generalized_statements(self.generalized)
    }

    /// These options with the retention limits `change` gives (the others unchanged).
    pub fn with_retention(&self, change: &RetentionChange) -> TopicOptions {
        let mut o = self.clone();
        if let Some(v) = change.retention_items {
            o.retention_items = v;
        }
        if let Some(v) = change.retention_bytes {
            o.retention_bytes = v;
        }
        if let Some(v) = change.retention_ms {
            o.retention_ms = v;
        }
        o
    }

    /// Whether items (and subscribers' streams) under `other` are as under these: the
    /// same stream options. Retention may differ.
    pub fn same_items(&self, other: &TopicOptions) -> bool {
        self.stream_options() == other.stream_options()
    }

    /// Whether `other` describes the same topic: the same items and the same retention.
    /// A logical type given by name or number, or left to its default, counts as the
    /// same type, so that options read back from a description match.
    pub fn same_as(&self, other: &TopicOptions) -> bool {
        self.same_items(other)
            && self.retention_items == other.retention_items
            && self.retention_bytes == other.retention_bytes
            && self.retention_ms == other.retention_ms
    }

    /// Items a memory log keeps.
    fn memory_capacity(&self) -> usize {
        self.retention_items.min(usize::MAX as u64) as usize
    }

    /// The size limit of a file log, if there is one.
    fn retention_bytes_limit(&self) -> Option<u64> {
        (self.retention_bytes > 0).then_some(self.retention_bytes)
    }

    /// The age limit of a file log, if there is one.
    fn retention_age(&self) -> Option<std::time::Duration> {
        (self.retention_ms > 0).then(|| std::time::Duration::from_millis(self.retention_ms))
    }
}

/// A change of a live topic's options ([`Registry::alter`]). Only retention can
/// change: the other options shape the topic's items and its subscribers' streams, so
/// they are fixed when it is created. They may be given (a description's `options`
/// sent back) as long as they are the topic's. An absent field stays as it is.
///
/// ```
/// use jelly_server::topic::{RetentionChange, TopicOptions};
/// let change = RetentionChange::from_json(br#"{"retention_ms": 60000}"#).unwrap();
/// let options = TopicOptions::default().with_retention(&change);
/// assert_eq!(options.retention_ms, 60_000);
/// let refused = RetentionChange::from_json(br#"{"retention_ms": "1h"}"#).unwrap_err();
/// assert!(refused.contains("`retention_ms` must be"));
/// let quads = TopicOptions::default();
/// let same = RetentionChange::from_json(br#"{"physical": "quads", "retention_ms": 5}"#);
/// assert!(same.unwrap().check_fixed(&quads).is_ok());
/// let other = RetentionChange::from_json(br#"{"physical": "triples", "retention_ms": 5}"#);
/// assert!(other.unwrap().check_fixed(&quads).unwrap_err().contains("`physical` is fixed"));
/// let alone = RetentionChange::from_json(br#"{"rdf_star": true}"#).unwrap_err();
/// assert!(alone.contains("`rdf_star` is fixed"));
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RetentionChange {
    pub retention_items: Option<u64>,
    pub retention_bytes: Option<u64>,
    pub retention_ms: Option<u64>,
    /// Fixed options given with the change, which must be the topic's.
    pub fixed: Vec<(String, serde_json::Value)>,
}

impl RetentionChange {
    /// Reads a change from a JSON object; the error names the field that is wrong.
    pub fn from_json(body: &[u8]) -> Result<RetentionChange, String> {
        let value: serde_json::Value =
            serde_json::from_slice(body).map_err(|e| format!("not JSON: {e}"))?;
        let Some(fields) = value.as_object() else {
            return Err("expected a JSON object of retention options".into());
        };
        let mut change = RetentionChange::default();
        for (key, v) in fields {
            let slot = match key.as_str() {
                "retention_items" => &mut change.retention_items,
                "retention_bytes" => &mut change.retention_bytes,
                "retention_ms" => &mut change.retention_ms,
                "physical" | "logical" | "rdf_star" | "generalized" => {
                    change.fixed.push((key.clone(), v.clone()));
                    continue;
                }
                _ => {
                    return Err(format!(
                        "unknown field `{key}` (retention_items, retention_bytes or retention_ms)"
                    ));
                }
            };
            *slot =
                Some(v.as_u64().ok_or_else(|| {
                    format!("`{key}` must be a whole number of at least 0, not {v}")
                })?);
        }
        if (
            change.retention_items,
            change.retention_bytes,
            change.retention_ms,
        ) == (None, None, None)
        {
            if let Some((key, _)) = change.fixed.first() {
                return Err(format!(
                    "nothing to change: `{key}` is fixed when a topic is created; only \
                     retention_items, retention_bytes and retention_ms can change"
                ));
            }
            return Err(
                "nothing to change: give retention_items, retention_bytes or retention_ms".into(),
            );
        }
        Ok(change)
    }

    /// Checks that the fixed options given with the change are those of `current`.
    pub fn check_fixed(&self, current: &TopicOptions) -> Result<(), String> {
        for (key, given) in &self.fixed {
            let same = match key.as_str() {
                "physical" => serde_json::to_value(current.physical).ok().as_ref() == Some(given),
                "logical" => {
                    let name = match given {
                        serde_json::Value::String(s) => Some(s.clone()),
                        serde_json::Value::Number(n) => Some(n.to_string()),
                        _ => None,
                    };
                    name.and_then(|n| LogicalType::parse(&n)) == current.logical_type().ok()
                }
                "rdf_star" => given.as_bool() == Some(current.rdf_star),
                "generalized" => given.as_bool() == Some(current.generalized),
                _ => false,
            };
            if !same {
                let now = match key.as_str() {
                    "logical" => current
                        .logical_type()
                        .map_or_else(|_| "?".into(), |l| l.name().to_string()),
                    _ => serde_json::to_value(current)
                        .ok()
                        .and_then(|v| v.get(key).map(ToString::to_string))
                        .unwrap_or_default(),
                };
                return Err(format!(
                    "`{key}` is fixed when a topic is created (it is {now}, not {given}); only \
                     retention_items, retention_bytes and retention_ms can change"
                ));
            }
        }
        Ok(())
    }
}

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
    /// Why the log refuses appends (a failed write or fsync), while it does.
    pub fn failure(&self) -> Option<String> {
        match self {
            TopicLog::Memory(_) => None,
            TopicLog::File(l) => l.failure(),
        }
    }
    /// Applies the retention limits of `options` to the live log. Items beyond the new
    /// limits go at once, so it may delete files: call it off the async threads.
    pub fn set_retention(&self, options: &TopicOptions) {
        match self {
            TopicLog::Memory(l) => l.set_capacity(options.memory_capacity()),
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

/// Where the logs live and how they are opened.
#[derive(Clone)]
struct Storage {
    kind: LogKind,
    data: PathBuf,
    file: FileLogOptions,
}

/// The file with a topic's options, next to its `log/` directory.
const TOPIC_FILE: &str = "topic.json";

/// Name prefix of a deleted topic's directory until its files are removed. It starts
/// with `.`, which no topic name does.
const TRASH_PREFIX: &str = ".deleted.";

/// The file with a topic's id ([`Topic::id`]), next to `topic.json`.
const ID_FILE: &str = "id";

/// A new topic id: the creation time in nanoseconds and a counter, in hex. Unique
/// among the topics one data directory ever holds, unless the clock goes back.
fn new_topic_id() -> String {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let seq = SEQ.fetch_add(1, Ordering::Relaxed) & 0xffff;
    format!("{nanos:x}{seq:04x}")
}

/// The reason an [`Registry::unavailable`] name gives while its deletion runs.
const BEING_DELETED: &str = "it is being deleted";

impl Storage {
    fn topic_dir(&self, name: &str) -> PathBuf {
        self.data.join(name)
    }

    /// The folder of a topic's file log.
    fn log_dir(&self, name: &str) -> PathBuf {
        self.topic_dir(name).join("log")
    }

    /// Why a topic's folder may not be made a new topic: its log holds items although
    /// its `topic.json` is missing (lost or removed by hand). Its options and id are
    /// unknown, so its items would be served under the new topic's; it needs an
    /// operator. `None` when the folder holds no items (or the log is in memory).
    fn orphan_log(&self, name: &str) -> Option<String> {
        if self.kind != LogKind::File {
            return None;
        }
        let log = self.log_dir(name);
        let held = std::fs::read_dir(&log).ok()?.flatten().any(|e| {
            e.path().extension().is_some_and(|x| x == "seg")
                && e.metadata().is_ok_and(|m| m.len() > 0)
        });
        held.then(|| {
            format!(
                "{} holds items but {} is missing: restore it (or move the folder away) \
                 and restart",
                log.display(),
                self.topic_dir(name).join(TOPIC_FILE).display()
            )
        })
    }

    /// Removes the `log` folder of a topic that is being created, if one is there
    /// (holding no items: [`Storage::orphan_log`] refused those), so that the topic
    /// starts at offset 0.
    fn clear_stale_log(&self, name: &str) -> Result<(), TopicError> {
        if self.kind != LogKind::File {
            return Ok(());
        }
        let log = self.log_dir(name);
        match std::fs::remove_dir_all(&log) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(TopicError::Storage(format!("{}: {e}", log.display())))
            }
            _ => Ok(()),
        }
    }

    /// Opens (or creates) the log of a topic.
    fn open(&self, name: &str, options: &TopicOptions) -> Result<TopicLog, TopicError> {
        match self.kind {
            LogKind::Memory => Ok(TopicLog::Memory(MemoryLog::new(options.memory_capacity()))),
            LogKind::File => {
                let mut fo = self.file.clone();
                fo.retention_bytes = options.retention_bytes_limit();
                fo.retention_age = options.retention_age();
                FileLog::open(self.log_dir(name), fo)
                    .map(TopicLog::File)
                    .map_err(|e| TopicError::Storage(e.to_string()))
            }
        }
    }

    /// Opens a topic found on disk: its options from `file` (its `topic.json`) and its
    /// log. The error is the reason, naming the file and, for a corrupt segment, the
    /// byte.
    fn open_existing(
        &self,
        name: &str,
        file: &std::path::Path,
    ) -> Result<(TopicOptions, TopicLog, String), String> {
        let text = std::fs::read(file).map_err(|e| format!("{}: {e}", file.display()))?;
        let options: TopicOptions =
            serde_json::from_slice(&text).map_err(|e| format!("{}: {e}", file.display()))?;
        let log = self.open(name, &options).map_err(|e| match e {
            TopicError::Storage(m) => m,
            e => e.to_string(),
        })?;
        // A topic from before ids were kept gets one now.
        let id_file = file.with_file_name(ID_FILE);
        let id = match std::fs::read_to_string(&id_file) {
            Ok(id) if !id.trim().is_empty() => id.trim().to_string(),
            _ => {
                let id = new_topic_id();
                if let Err(e) = std::fs::write(&id_file, &id) {
                    tracing::warn!(path = %id_file.display(), error = %e, "cannot keep the topic's id; it changes at the next start");
                }
                id
            }
        };
        Ok((options, log, id))
    }

    /// Takes a deleted topic's directory out of the data directory (file log): it is
    /// renamed to a hidden name, which startup never opens as a topic, and the data
    /// directory is synced, so the deletion holds after a crash. Returns the hidden
    /// directory, for [`Storage::purge`]; `None` when there is nothing on disk.
    fn remove(&self, name: &str) -> Result<Option<PathBuf>, TopicError> {
        if self.kind != LogKind::File {
            return Ok(None);
        }
        let dir = self.topic_dir(name);
        if !dir.exists() {
            return Ok(None);
        }
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let trash = self.data.join(format!("{TRASH_PREFIX}{name}.{nanos}"));
        let err = |e: std::io::Error| TopicError::Storage(format!("{}: {e}", dir.display()));
        std::fs::rename(&dir, &trash).map_err(err)?;
        if let Err(e) = sync_dir(&self.data) {
            // The rename is done; only its durability across a power loss is in doubt
            // (the topic could come back after one), which is no reason to fail.
            tracing::warn!(path = %self.data.display(), error = %e, "cannot sync the data directory after a deletion");
        }
        Ok(Some(trash))
    }

    /// Deletes a directory [`Storage::remove`] hid (or startup found). A failure is
    /// logged: the next start tries again.
    fn purge(trash: &std::path::Path) {
        match std::fs::remove_dir_all(trash) {
            Ok(()) => tracing::debug!(path = %trash.display(), "deleted topic's files removed"),
            Err(e) => tracing::warn!(
                path = %trash.display(),
                error = %e,
                "cannot remove a deleted topic's files; the next start tries again"
            ),
        }
    }

    /// Writes a new topic's id and options (file log), each atomically, and durably
    /// unless the log's durability is `none` (see [`Storage::write_file`]).
    fn save(&self, name: &str, options: &TopicOptions, id: &str) -> Result<(), TopicError> {
        if self.kind != LogKind::File {
            return Ok(());
        }
        let dir = self.topic_dir(name);
        let err = |e: std::io::Error| TopicError::Storage(format!("{}: {e}", dir.display()));
        std::fs::create_dir_all(&dir).map_err(err)?;
        if self.syncs() {
            // The topic's directory entry, so that a crash cannot lose it.
            sync_dir(&self.data).map_err(err)?;
        }
        self.write_file(name, ID_FILE, id.as_bytes())?;
        self.save_options(name, options)
    }

    /// Writes a topic's options (file log) over the old ones, as [`Storage::save`].
    fn save_options(&self, name: &str, options: &TopicOptions) -> Result<(), TopicError> {
        if self.kind != LogKind::File {
            return Ok(());
        }
        let json = serde_json::to_vec_pretty(options).expect("options serialize");
        self.write_file(name, TOPIC_FILE, &json)
    }

    /// Whether topic files are synced: as the items are, so with any durability but
    /// `none`, under which a crash may lose recent items and so recent topics too.
    fn syncs(&self) -> bool {
        self.file.durability != Durability::None
    }

    /// Writes `file` of a topic's directory through a temporary file and a rename, so
    /// that it is whole or absent, and (see [`Storage::syncs`]) syncs both before it
    /// returns, so that a change that was answered holds after a crash.
    fn write_file(&self, name: &str, file: &str, bytes: &[u8]) -> Result<(), TopicError> {
        let dir = self.topic_dir(name);
        let write = || -> std::io::Result<()> {
            let tmp = dir.join(format!("{file}.tmp"));
            let mut f = std::fs::File::create(&tmp)?;
            std::io::Write::write_all(&mut f, bytes)?;
            if self.syncs() {
                f.sync_all()?;
            }
            std::fs::rename(&tmp, dir.join(file))?;
            if self.syncs() {
                sync_dir(&dir)?;
            }
            Ok(())
        };
        write().map_err(|e| TopicError::Storage(format!("{}: {e}", dir.join(file).display())))
    }
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
    #[error("topic `{0}` already exists with other options")]
    Conflict(String),
    #[error("topic `{0}` does not exist")]
    NotFound(String),
    /// Creating it would exceed [`ServerConfig::max_topics`].
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
        "topic `{topic}` is a mirror of {upstream}: only its mirror writes it (publish upstream)"
    )]
    Mirrored { topic: String, upstream: String },
    /// The topic exists on disk but could not be opened at startup (a corrupt log
    /// segment, an unreadable `topic.json`): it stays down until an operator repairs
    /// it and restarts the server.
    #[error("topic `{topic}` is unavailable: {reason}")]
    Unavailable { topic: String, reason: String },
}

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

/// All topics of a server.
pub struct Registry {
    topics: RwLock<BTreeMap<String, Arc<Topic>>>,
    storage: Storage,
    defaults: TopicOptions,
    auto_create: bool,
    /// [`ServerConfig::max_topics`] (0: no limit).
    max_topics: usize,
    /// The mirrored topics (whether they exist yet or not), by local name.
    mirrors: BTreeMap<String, Arc<MirrorStatus>>,
    /// Topics found at startup that could not be opened, with the reason. Fixed once
    /// open: such a topic is neither served nor re-created (that would overwrite its
    /// options and append after the damage) until it is repaired and the server
    /// restarted, or deleted ([`Registry::delete`]).
    unavailable: RwLock<BTreeMap<String, String>>,
    /// Topics being created: a gate per name, so that creators of one name wait for
    /// each other while their files are made without the registry's lock (other
    /// requests go on), and how many creations are in flight (for `max_topics`).
    creating: Mutex<Creating>,
}

/// See [`Registry::creating`].
#[derive(Default)]
struct Creating {
    gates: BTreeMap<String, Arc<Mutex<()>>>,
    in_flight: usize,
}

impl Registry {
    /// Opens the registry; with the file log, every topic found in the data directory
    /// (a folder with a `topic.json`) is opened and recovered. Blocks on file I/O.
    ///
    /// A topic that cannot be opened (a corrupt segment, an unreadable `topic.json`)
    /// fails alone: it is logged at ERROR and answers 503 on its endpoints, while the
    /// other topics are served. Damage to one topic's files says nothing about the
    /// others, and refusing to start would take them all down until an operator
    /// repairs it. Errors of the data directory itself still fail the start.
    pub fn open(config: &ServerConfig) -> Result<Registry, TopicError> {
        let durability = config.durability().map_err(TopicError::Storage)?;
        let storage = Storage {
            kind: config.log,
            data: config.data.clone(),
            file: FileLogOptions {
                durability,
                segment_bytes: config.segment_bytes.max(1),
                // A record holds the frame plus its metadata.
                max_item_bytes: config.max_item_bytes.saturating_add(64 << 10),
                ..FileLogOptions::default()
            },
        };
        let mirrors: BTreeMap<String, Arc<MirrorStatus>> = config
            .mirrors
            .iter()
            .map(|m| (m.topic.clone(), Arc::new(MirrorStatus::new(m))))
            .collect();
        let mut topics = BTreeMap::new();
        let mut unavailable = BTreeMap::new();
        if storage.kind == LogKind::File {
            let err =
                |e: std::io::Error| TopicError::Storage(format!("{}: {e}", storage.data.display()));
            std::fs::create_dir_all(&storage.data).map_err(err)?;
            for entry in std::fs::read_dir(&storage.data).map_err(err)? {
                let path = entry.map_err(err)?.path();
                let file = path.join(TOPIC_FILE);
                let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
                    continue;
                };
                if name.starts_with(TRASH_PREFIX) && path.is_dir() {
                    // A topic deleted before a crash (or whose removal failed).
                    Storage::purge(&path);
                    continue;
                }
                if !valid_name(name) {
                    continue;
                }
                if !file.is_file() {
                    if let Some(reason) = storage.orphan_log(name) {
                        tracing::error!(topic = name, error = %reason, "topic unavailable");
                        unavailable.insert(name.to_string(), reason);
                    }
                    continue;
                }
                let (options, log, id) = match storage.open_existing(name, &file) {
                    Ok(opened) => opened,
                    Err(reason) => {
                        tracing::error!(
                            topic = name,
                            error = %reason,
                            "topic unavailable: it cannot be opened, so it answers 503 while \
                             the other topics are served; see docs/server-design.md, \
                             \"Recovery\", for how to repair it"
                        );
                        unavailable.insert(name.to_string(), reason);
                        continue;
                    }
                };
                tracing::info!(
                    topic = name,
                    next_offset = log.next_offset(),
                    "topic opened"
                );
                let mirror = mirrors.get(name).cloned();
                topics.insert(
                    name.to_string(),
                    Arc::new(Topic::new(name.to_string(), options, log, mirror).with_id(id)),
                );
            }
        }
        Ok(Registry {
            topics: RwLock::new(topics),
            storage,
            defaults: config.topic_defaults.clone(),
            auto_create: config.auto_create_topics,
            max_topics: config.max_topics,
            mirrors,
            unavailable: RwLock::new(unavailable),
            creating: Mutex::new(Creating::default()),
        })
    }

    /// [`TopicError::Unavailable`] for a topic that could not be opened at startup, one
    /// being deleted, or one whose deletion failed with its files still in place.
    pub fn check_available(&self, name: &str) -> Result<(), TopicError> {
        match self
            .unavailable
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
        {
            Some(reason) => Err(TopicError::Unavailable {
                topic: name.to_string(),
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    /// The unavailable topic names (see [`Registry::check_available`]), with the
    /// reason, by name.
    pub fn unavailable(&self) -> BTreeMap<String, String> {
        self.unavailable
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The mirror of a topic name, if it is mirrored (the topic may not exist yet).
    pub fn mirror(&self, name: &str) -> Option<Arc<MirrorStatus>> {
        self.mirrors.get(name).cloned()
    }

    /// All mirrors, by local topic name.
    pub fn mirrors(&self) -> Vec<Arc<MirrorStatus>> {
        self.mirrors.values().cloned().collect()
    }

    /// Refuses a local publish to a mirrored topic ([`TopicError::Mirrored`]): its
    /// offsets are the upstream's; and to an unavailable one
    /// ([`TopicError::Unavailable`]).
    pub fn check_publish(&self, name: &str) -> Result<(), TopicError> {
        self.check_available(name)?;
        self.check_not_mirrored(name)
    }

    /// Refuses a mirrored topic's name ([`TopicError::Mirrored`]): only its mirror
    /// writes it.
    fn check_not_mirrored(&self, name: &str) -> Result<(), TopicError> {
        match self.mirrors.get(name) {
            Some(m) => Err(TopicError::Mirrored {
                topic: name.to_string(),
                upstream: m.upstream_topic_url(),
            }),
            None => Ok(()),
        }
    }

    /// The topic, if it exists.
    pub fn get(&self, name: &str) -> Option<Arc<Topic>> {
        self.topics
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }

    /// All topics, by name.
    pub fn list(&self) -> Vec<Arc<Topic>> {
        self.topics
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// Creates a topic, or returns the existing one if its options are the same.
    /// The flag is true when the topic was created.
    /// A mirrored topic is created by its mirror only: until then, this refuses it
    /// ([`TopicError::Mirrored`]).
    pub fn create(
        &self,
        name: &str,
        options: Option<TopicOptions>,
    ) -> Result<(Arc<Topic>, bool), TopicError> {
        if self.get(name).is_none() {
            self.check_publish(name)?;
            // A retention limit this server's log would ignore is refused at creation
            // as at a change, rather than stored and ignored.
            if let Some(o) = &options {
                self.check_has_effect(&self.defaults, o)?;
            }
        }
        self.create_inner(name, options)
    }

    /// Creates a mirrored topic (for its mirror), or returns it if it exists with
    /// the same options.
    pub(crate) fn create_mirrored(
        &self,
        name: &str,
        options: TopicOptions,
    ) -> Result<(Arc<Topic>, bool), TopicError> {
        self.create_inner(name, Some(options))
    }

    fn create_inner(
        &self,
        name: &str,
        options: Option<TopicOptions>,
    ) -> Result<(Arc<Topic>, bool), TopicError> {
        if !valid_name(name) {
            return Err(TopicError::BadName(name.to_string()));
        }
        let options = options.unwrap_or_else(|| self.defaults.clone());
        options.validate().map_err(TopicError::BadOptions)?;
        // One creator of this name at a time; the others wait here, then find its topic.
        let gate = self
            .creating()
            .gates
            .entry(name.to_string())
            .or_default()
            .clone();
        let created = {
            let _one_at_a_time = gate.lock().unwrap_or_else(|e| e.into_inner());
            self.create_alone(name, options)
        };
        // The gate goes when no other creator of the name waits on it.
        let mut c = self.creating();
        if Arc::strong_count(&gate) == 2 {
            c.gates.remove(name);
        }
        created
    }

    fn creating(&self) -> std::sync::MutexGuard<'_, Creating> {
        self.creating.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// [`Registry::create_inner`] with the name's gate held. The files are made
    /// without the registry's lock: they take milliseconds under `fsync`, and every
    /// request of every topic looks topics up under that lock.
    fn create_alone(
        &self,
        name: &str,
        options: TopicOptions,
    ) -> Result<(Arc<Topic>, bool), TopicError> {
        {
            let g = self.topics.read().unwrap_or_else(|e| e.into_inner());
            // A deletion takes the name out of service under the registry's lock.
            self.check_available(name)?;
            if let Some(t) = g.get(name) {
                return if t.options().same_as(&options) {
                    Ok((t.clone(), false))
                } else {
                    Err(TopicError::Conflict(name.to_string()))
                };
            }
            let mut c = self.creating();
            let held = g.len()
                + c.in_flight
                + self
                    .unavailable
                    .read()
                    .unwrap_or_else(|e| e.into_inner())
                    .len();
            if self.max_topics > 0 && held >= self.max_topics {
                return Err(TopicError::TooMany {
                    topic: name.to_string(),
                    max: self.max_topics,
                });
            }
            c.in_flight += 1;
        }
        let made = (|| {
            if let Some(reason) = self.storage.orphan_log(name) {
                return Err(TopicError::Storage(reason));
            }
            // A log without items left from an earlier topic (its topic.json lost) would
            // start the new topic at that log's old offset, not at 0.
            self.storage.clear_stale_log(name)?;
            let id = new_topic_id();
            self.storage.save(name, &options, &id)?;
            let log = self.storage.open(name, &options)?;
            let mirror = self.mirrors.get(name).cloned();
            Ok(Arc::new(
                Topic::new(name.to_string(), options, log, mirror).with_id(id),
            ))
        })();
        let mut g = self.topics.write().unwrap_or_else(|e| e.into_inner());
        self.creating().in_flight -= 1;
        let t = made?;
        g.insert(name.to_string(), t.clone());
        tracing::info!(topic = name, "topic created");
        Ok((t, true))
    }

    /// Deletes a topic: it leaves the registry, its log closes (an append in progress
    /// completes first; later ones fail), its subscribers' streams end, and its files
    /// leave the data directory before this returns (removed on a blocking call:
    /// run it off the async threads). A topic of the same name created afterwards is
    /// a new one, whose offsets start at 0.
    ///
    /// A mirrored topic is refused ([`TopicError::Mirrored`]: its mirror would create
    /// it again); an unavailable one (see [`Registry::check_available`]) is deleted
    /// too, which is one way to recover from a damaged log.
    ///
    /// ```
    /// let r = jelly_server::topic::Registry::open(&jelly_server::ServerConfig::ephemeral()).unwrap();
    /// r.create("t", None).unwrap();
    /// let gone = r.delete("t").unwrap();
    /// assert_eq!(gone.next_offset, 0);
    /// assert!(r.get("t").is_none());
    /// assert!(r.delete("t").is_err());
    /// ```
    pub fn delete(&self, name: &str) -> Result<DeletedTopic, TopicError> {
        self.check_own_name(name)?;
        // Under the write lock the name goes out of service: the topic leaves the
        // registry and the name becomes unavailable, so that a create of the same name
        // (which checks under the same lock) cannot open the old files. The slow part
        // (waiting for an append in progress, the rename, the sync) runs after it.
        let topic = {
            let mut g = self.topics.write().unwrap_or_else(|e| e.into_inner());
            let mut unavailable = self.unavailable.write().unwrap_or_else(|e| e.into_inner());
            let topic = match g.remove(name) {
                Some(t) => Some(t),
                None => match unavailable.get(name).map(String::as_str) {
                    None => return Err(TopicError::NotFound(name.to_string())),
                    Some(BEING_DELETED) => {
                        return Err(TopicError::Unavailable {
                            topic: name.to_string(),
                            reason: BEING_DELETED.to_string(),
                        });
                    }
                    Some(_) => None,
                },
            };
            unavailable.insert(name.to_string(), BEING_DELETED.to_string());
            topic
        };
        let deleted = match &topic {
            Some(t) => {
                t.deleted.store(true, Ordering::Release);
                // Waits for a change of its options in progress, which writes into its
                // directory; a later one sees the flag and stops.
                drop(t.altering.lock().unwrap_or_else(|e| e.into_inner()));
                t.log.close();
                t.tell_closed();
                // After the close: no append can move them any more.
                DeletedTopic {
                    first_offset: t.log.first_offset(),
                    next_offset: t.log.next_offset(),
                    was_unavailable: false,
                }
            }
            None => DeletedTopic {
                first_offset: 0,
                next_offset: 0,
                was_unavailable: true,
            },
        };
        let moved = self.storage.remove(name);
        let mut unavailable = self.unavailable.write().unwrap_or_else(|e| e.into_inner());
        match moved {
            Ok(trash) => {
                unavailable.remove(name);
                drop(unavailable);
                if let Some(trash) = trash {
                    Storage::purge(&trash);
                }
                tracing::info!(
                    topic = name,
                    next_offset = deleted.next_offset,
                    "topic deleted"
                );
                Ok(deleted)
            }
            Err(e) => {
                // Its files are still in place: the name stays unavailable (neither
                // served nor created again over them) until a DELETE succeeds, or an
                // operator removes them and restarts.
                tracing::error!(topic = name, error = %e, "deleted topic's files could not be moved away");
                unavailable.insert(
                    name.to_string(),
                    format!(
                        "its deletion failed ({e}); its files are still in place: retry the \
                         DELETE, or remove them and restart"
                    ),
                );
                Err(e)
            }
        }
    }

    /// Changes a topic's retention: saved to its `topic.json` first, so that it holds
    /// after a restart, then applied to its log at once (items beyond the new limits
    /// go now). Blocks on file I/O. A mirrored topic is refused: it keeps its
    /// upstream's options.
    ///
    /// ```
    /// use jelly_server::topic::{Registry, RetentionChange};
    /// let topics = Registry::open(&jelly_server::ServerConfig::ephemeral()).unwrap();
    /// topics.create("t", None).unwrap();
    /// let change = RetentionChange { retention_items: Some(5), ..Default::default() };
    /// assert_eq!(topics.alter("t", &change).unwrap().options().retention_items, 5);
    /// assert!(topics.alter("nope", &change).is_err());
    /// ```
    pub fn alter(&self, name: &str, change: &RetentionChange) -> Result<Arc<Topic>, TopicError> {
        self.check_own_name(name)?;
        self.check_available(name)?;
        let topic = self
            .get(name)
            .ok_or_else(|| TopicError::NotFound(name.to_string()))?;
        // One change at a time, each saved and applied whole; a deletion waits for it.
        let altering = topic.altering.lock().unwrap_or_else(|e| e.into_inner());
        if topic.is_deleted() {
            return Err(TopicError::Deleted(name.to_string()));
        }
        let current = topic.options();
        change
            .check_fixed(&current)
            .map_err(TopicError::BadOptions)?;
        let options = current.with_retention(change);
        options.validate().map_err(TopicError::BadOptions)?;
        self.check_has_effect(&current, &options)?;
        self.storage.save_options(name, &options)?;
        topic.log.set_retention(&options);
        tracing::info!(
            topic = name,
            retention_items = options.retention_items,
            retention_bytes = options.retention_bytes,
            retention_ms = options.retention_ms,
            "topic retention changed"
        );
        *topic.options.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(options);
        drop(altering);
        Ok(topic)
    }

    /// Refuses a name that [`Registry::alter`] and [`Registry::delete`] cannot take: an
    /// invalid one, or a mirrored topic's (only its mirror writes it).
    fn check_own_name(&self, name: &str) -> Result<(), TopicError> {
        if !valid_name(name) {
            return Err(TopicError::BadName(name.to_string()));
        }
        self.check_not_mirrored(name)
    }

    /// Refuses a retention change that this server's log would not act on (a limit of
    /// the other kind of log), rather than answer that it was made.
    fn check_has_effect(
        &self,
        current: &TopicOptions,
        new: &TopicOptions,
    ) -> Result<(), TopicError> {
        let refuse = |field: &str, kind: &str, use_instead: &str| {
            Err(TopicError::BadOptions(format!(
                "{field} does nothing here: this server keeps its topics in {kind} \
                 (use {use_instead})"
            )))
        };
        match self.storage.kind {
            LogKind::File if new.retention_items != current.retention_items => refuse(
                "retention_items",
                "files",
                "retention_bytes or retention_ms",
            ),
            LogKind::Memory if new.retention_bytes != current.retention_bytes => {
                refuse("retention_bytes", "memory", "retention_items")
            }
            LogKind::Memory if new.retention_ms != current.retention_ms => {
                refuse("retention_ms", "memory", "retention_items")
            }
            _ => Ok(()),
        }
    }

    /// The topic for a publish: created with the default options on first use when
    /// auto-creation is on.
    pub fn for_publish(&self, name: &str) -> Result<Arc<Topic>, TopicError> {
        self.check_publish(name)?;
        if let Some(t) = self.get(name) {
            return Ok(t);
        }
        if !self.auto_create {
            return Err(TopicError::NotFound(name.to_string()));
        }
        // A concurrent create with other options wins; use whatever is there.
        match self.create(name, None) {
            Ok((t, _)) => Ok(t),
            Err(TopicError::Conflict(_)) => self
                .get(name)
                .ok_or_else(|| TopicError::NotFound(name.to_string())),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A publisher dropped while its append waits for the fsync (its client gone)
    /// cannot cancel what follows the commit: the item is counted and the listeners
    /// (the fan-out's pumps) hear of it, rather than at the topic's next append.
    #[tokio::test]
    async fn an_append_whose_caller_is_dropped_still_tells_the_listeners() {
        struct Count(std::sync::atomic::AtomicUsize);
        impl AppendListener for Count {
            fn appended(&self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let dir = std::env::temp_dir().join(format!("jelly-topic-drop-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let config = ServerConfig {
            log: crate::config::LogKind::File,
            data: dir.clone(),
            durability: "fsync".into(),
            ..ServerConfig::ephemeral()
        };
        let r = Registry::open(&config).unwrap();
        let topic = r.for_publish("t").unwrap();
        assert!(topic.log.append_waits());
        let heard = Arc::new(Count(std::sync::atomic::AtomicUsize::new(0)));
        let weak: std::sync::Weak<dyn AppendListener> = Arc::downgrade(&heard) as _;
        topic.listen(weak);
        let metrics = Arc::new(crate::metrics::Metrics::default());
        let items = crate::ingest::ingest(
            b"<http://e/s> <http://e/p> \"1\" .\n",
            crate::ingest::InputFormat::NQuads,
            &topic.options(),
            &crate::ingest::PublishMeta::default(),
            1 << 20,
        )
        .unwrap();
        // Polled once (the items reach the writer), then dropped.
        let mut append = Box::pin(topic.append(items, &metrics));
        tokio::select! {
            biased;
            _ = &mut append => panic!("the fsync append completed in its first poll"),
            () = std::future::ready(()) => {}
        }
        drop(append);
        for _ in 0..500 {
            if heard.0.load(Ordering::SeqCst) > 0 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(
            heard.0.load(Ordering::SeqCst),
            1,
            "the listeners were not told"
        );
        assert_eq!(topic.stats.items_in.load(Ordering::Relaxed), 1);
        assert_eq!(topic.log.next_offset(), 1);
        drop(r);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn names() {
        assert!(valid_name("weather.v1_a-b"));
        assert!(!valid_name(""));
        assert!(!valid_name(".hidden"));
        assert!(!valid_name("a/b"));
        assert!(!valid_name(&"x".repeat(201)));
    }

    #[test]
    fn options_validate() {
        let mut o = TopicOptions::default();
        assert!(o.validate().is_ok());
        o.logical = Some("graphs".into());
        assert!(o.validate().is_err(), "graphs does not fit quads");
        o.physical = Physical::Triples;
        assert!(o.validate().is_ok());
        o.logical = Some("nonsense".into());
        assert!(o.validate().is_err());
        // By number: 0 is unspecified (fits anything), 13 is a kind of graphs, 99
        // names no type.
        o.logical = Some("0".into());
        assert!(o.validate().is_ok());
        o.logical = Some("13".into());
        assert!(o.validate().is_ok());
        o.logical = Some("99".into());
        let e = o.validate().unwrap_err();
        assert!(e.contains("unknown logical type 99"), "{e}");
    }

    #[test]
    fn concurrent_creations_make_each_topic_once_and_respect_max_topics() {
        let config = ServerConfig {
            max_topics: 5,
            ..ServerConfig::ephemeral()
        };
        let r = Registry::open(&config).unwrap();
        // One name from many threads: one creates it, all get that topic.
        let results: Vec<(Arc<Topic>, bool)> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..16)
                .map(|_| scope.spawn(|| r.create("same", None).unwrap()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(results.iter().filter(|(_, created)| *created).count(), 1);
        assert!(results.iter().all(|(t, _)| Arc::ptr_eq(t, &results[0].0)));
        // Many names at once: no more than the limit, whatever the interleaving.
        let outcomes: Vec<Result<(Arc<Topic>, bool), TopicError>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..12)
                .map(|i| {
                    let r = &r;
                    scope.spawn(move || r.create(&format!("t{i}"), None))
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let made = outcomes.iter().filter(|o| o.is_ok()).count();
        let refused = outcomes
            .iter()
            .filter(|o| matches!(o, Err(TopicError::TooMany { .. })))
            .count();
        assert_eq!((made, refused), (4, 8), "`same` holds one of the five");
        assert_eq!(r.list().len(), 5);
        let c = r.creating();
        assert!(c.gates.is_empty() && c.in_flight == 0);
    }

    #[test]
    fn create_is_idempotent_for_same_options() {
        let r = Registry::open(&ServerConfig::ephemeral()).unwrap();
        let (_, created) = r.create("t", None).unwrap();
        assert!(created);
        let (_, created) = r.create("t", None).unwrap();
        assert!(!created);
        let other = TopicOptions {
            physical: Physical::Triples,
            ..Default::default()
        };
        assert!(matches!(
            r.create("t", Some(other)),
            Err(TopicError::Conflict(_))
        ));
        // The default logical type by name or by its RDF-STaX number is the same topic.
        for logical in ["datasets", "4"] {
            let named = TopicOptions {
                logical: Some(logical.into()),
                ..Default::default()
            };
            assert!(!r.create("t", Some(named)).unwrap().1, "{logical}");
        }
        let graphs = TopicOptions {
            logical: Some("graphs".into()),
            ..Default::default()
        };
        assert!(graphs.validate().is_err(), "graphs do not fit quads");
        let flat = TopicOptions {
            logical: Some("flat-quads".into()),
            ..Default::default()
        };
        assert!(matches!(
            r.create("t", Some(flat)),
            Err(TopicError::Conflict(_))
        ));
    }
}
