//! The registry: every topic of a server, created, altered and deleted by name.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, RwLock};

use super::storage::{BEING_DELETED, Storage, TOPIC_FILE, TRASH_PREFIX, new_topic_id};
use super::{DeletedTopic, RetentionChange, Topic, TopicError, TopicOptions, valid_name};
use crate::config::{LogKind, ServerConfig};
use crate::log::{FileLogOptions, TailCachePool};
use crate::mirror::MirrorStatus;

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
    /// With the file log: the data directory's lock file, locked for as long as the
    /// registry lives (see [`lock_data_dir`]).
    _data_lock: Option<std::fs::File>,
}

/// The file in a data directory that a server locks while it uses the directory.
pub const LOCK_FILE: &str = ".lock";

/// Locks `data` for this process (an exclusive `flock` on `data/.lock`, released when
/// the file is closed, at exit or a crash alike). Two servers on one directory would
/// give the same offsets to different items and write over each other's segments:
/// the second one is refused instead, whether it listens on the same port
/// (`reuse_port`) or not.
fn lock_data_dir(data: &std::path::Path) -> Result<std::fs::File, TopicError> {
    let path = data.join(LOCK_FILE);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| TopicError::Storage(format!("{}: {e}", path.display())))?;
    // A server of this process that is shutting down may still hold it for a moment
    // (its last tasks drop the registry after `shutdown` returns): wait a little.
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(3);
    let mut locked = file.try_lock();
    while matches!(locked, Err(std::fs::TryLockError::WouldBlock))
        && std::time::Instant::now() < give_up
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
        locked = file.try_lock();
    }
    match locked {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(TopicError::Storage(format!(
            "{} is in use by another server (it holds {}); each server needs its own \
             data directory (--data)",
            data.display(),
            path.display()
        ))),
        Err(std::fs::TryLockError::Error(e)) => Err(TopicError::Storage(format!(
            "cannot lock {}: {e}",
            path.display()
        ))),
    }
}

/// See [`Registry::creating`].
#[derive(Default)]
struct Creating {
    gates: BTreeMap<String, Arc<Mutex<()>>>,
    in_flight: usize,
}

impl Registry {
    /// Where the file logs of the server's topics count their tail caches.
    pub fn tail_cache_pool(&self) -> &TailCachePool {
        &self.storage.file.tail_cache_pool
    }

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
                tail_cache_bytes: config.tail_cache_bytes,
                // One pool for all the server's topics.
                // (A memory log has no tail cache: no bound to report.)
                tail_cache_pool: Arc::new(TailCachePool::new(
                    (config.log == LogKind::File && config.max_tail_cache_bytes != 0)
                        .then_some(config.max_tail_cache_bytes),
                )),
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
        let mut data_lock = None;
        if storage.kind == LogKind::File {
            let err =
                |e: std::io::Error| TopicError::Storage(format!("{}: {e}", storage.data.display()));
            if storage.data.exists() && !storage.data.is_dir() {
                return Err(TopicError::Storage(format!(
                    "{} is not a directory",
                    storage.data.display()
                )));
            }
            std::fs::create_dir_all(&storage.data).map_err(err)?;
            data_lock = Some(lock_data_dir(&storage.data)?);
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
            defaults: config.default_topic_options(),
            auto_create: config.auto_create_topics,
            max_topics: config.max_topics,
            mirrors,
            unavailable: RwLock::new(unavailable),
            creating: Mutex::new(Creating::default()),
            _data_lock: data_lock,
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

    /// The unavailable topic names that need an operator: [`Registry::unavailable`]
    /// without those whose deletion is running (unavailable for that moment only).
    pub fn unavailable_lasting(&self) -> BTreeMap<String, String> {
        let mut names = self.unavailable();
        names.retain(|_, reason| reason != BEING_DELETED);
        names
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

    /// Drops the expired items of every memory topic, so that idle topics return
    /// their memory (see [`crate::topic::TopicLog::drop_expired`]).
    pub fn drop_expired_items(&self) {
        for t in self.list() {
            t.log.drop_expired();
        }
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

    /// Creates a mirrored topic (for its mirror), or returns it if it exists: the
    /// upstream topic's stream options (its items are copied as they are) with this
    /// server's default retention. Retention is this server's business: the
    /// upstream's may be for another kind of log, and a mirror often keeps more or
    /// less than its upstream. It is changed with [`Registry::alter`] like any topic's.
    pub(crate) fn create_mirrored(
        &self,
        name: &str,
        upstream: &TopicOptions,
    ) -> Result<(Arc<Topic>, bool), TopicError> {
        let options = TopicOptions {
            physical: upstream.physical,
            logical: upstream.logical.clone(),
            rdf_star: upstream.rdf_star,
            generalized: upstream.generalized,
            ..self.defaults.clone()
        };
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
                    Err(TopicError::Conflict {
                        topic: name.to_string(),
                        differences: t.options().differences(&options),
                    })
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
        self.delete_unchecked(name)
    }

    /// Deletes a mirrored topic, for its mirror (its upstream topic was replaced by
    /// another of the same name, whose copy starts over).
    pub(crate) fn delete_mirrored(&self, name: &str) -> Result<DeletedTopic, TopicError> {
        self.delete_unchecked(name)
    }

    /// The id of the upstream topic a mirrored topic is a copy of, as its mirror
    /// recorded it (file log; `None` with the memory log, or before the first copy).
    pub(crate) fn mirror_source(&self, name: &str) -> Option<String> {
        self.storage.mirror_source(name)
    }

    /// Records the id of the upstream topic a mirrored topic copies (file log: in
    /// its folder, durably as the items are).
    pub(crate) fn save_mirror_source(&self, name: &str, id: &str) -> Result<(), TopicError> {
        self.storage.save_mirror_source(name, id)
    }

    fn delete_unchecked(&self, name: &str) -> Result<DeletedTopic, TopicError> {
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
        // A mirrored topic's retention is local too (its items and offsets are not).
        if !valid_name(name) {
            return Err(TopicError::BadName(name.to_string()));
        }
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

    /// Refuses a retention change that this server's log would not act on (the file
    /// log keeps no item count), rather than answer that it was made.
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
            _ => Ok(()),
        }
    }

    /// The options a topic is created with when none are given (`[topic_defaults]`).
    pub fn defaults(&self) -> &TopicOptions {
        &self.defaults
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
            Err(TopicError::Conflict { .. }) => self
                .get(name)
                .ok_or_else(|| TopicError::NotFound(name.to_string())),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topic::{AppendListener, Physical};

    #[test]
    fn a_data_directory_serves_one_registry_at_a_time() {
        let dir = std::env::temp_dir().join(format!("jelly-topic-lock-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let config = ServerConfig {
            log: crate::config::LogKind::File,
            data: dir.clone(),
            ..ServerConfig::ephemeral()
        };
        let first = Registry::open(&config).unwrap();
        first.for_publish("t").unwrap();
        let e = Registry::open(&config)
            .err()
            .expect("a second registry on the directory");
        assert!(e.to_string().contains("in use by another server"), "{e}");
        // The lock goes with the registry: a restart opens the directory again.
        drop(first);
        let again = Registry::open(&config).unwrap();
        assert!(again.get("t").is_some());
        drop(again);
        // A file where the directory should be is named as such.
        let file = dir.join("t").join("topic.json");
        let config = ServerConfig {
            data: file.clone(),
            ..config
        };
        let e = Registry::open(&config)
            .err()
            .expect("a file is no data directory");
        assert!(e.to_string().contains("is not a directory"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// While a deletion runs its name answers an error that passes (and says so, for
    /// a `Retry-After`); a topic that could not be opened stays down until an operator
    /// acts, which is no error to retry.
    #[test]
    fn a_deletion_in_progress_is_an_error_that_passes() {
        let topics = Registry::open(&ServerConfig::ephemeral()).unwrap();
        let mark = |name: &str, reason: &str| {
            topics
                .unavailable
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .insert(name.to_string(), reason.to_string());
        };
        mark("going", BEING_DELETED);
        mark(
            "broken",
            "corrupt log segment 0.log at byte 12: bad checksum",
        );
        let going = topics.check_available("going").unwrap_err();
        assert!(going.is_passing(), "{going}");
        assert!(going.to_string().contains("being deleted"), "{going}");
        let broken = topics.check_available("broken").unwrap_err();
        assert!(!broken.is_passing(), "{broken}");
        assert!(!TopicError::NotFound("x".into()).is_passing());
    }

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
        let Err(e) = r.create("t", Some(other)) else {
            panic!("a create with other options succeeded");
        };
        assert!(matches!(e, TopicError::Conflict { .. }), "{e}");
        // The error says which options differ, the existing topic's first.
        assert_eq!(
            e.to_string(),
            "topic `t` already exists with other options: physical is quads, not triples; \
             logical is datasets, not graphs; retention_bytes is 268435456, not 0"
        );
        // The default logical type by name or by its RDF-STaX number is the same topic.
        for logical in ["datasets", "4"] {
            let named = TopicOptions {
                logical: Some(logical.into()),
                ..r.defaults().clone()
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
            Err(TopicError::Conflict { .. })
        ));
    }
}
