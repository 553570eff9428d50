//! Where topics live on disk: their folders, option and id files, and logs.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{TopicError, TopicLog, TopicOptions};
use crate::config::LogKind;
use crate::log::{Durability, FileLog, FileLogOptions, MemoryLog, sync_dir};

/// Where the logs live and how they are opened.
#[derive(Clone)]
pub(super) struct Storage {
    pub(super) kind: LogKind,
    pub(super) data: PathBuf,
    pub(super) file: FileLogOptions,
}

/// The file with a topic's options, next to its `log/` directory.
pub(super) const TOPIC_FILE: &str = "topic.json";

/// Name prefix of a deleted topic's directory until its files are removed. It starts
/// with `.`, which no topic name does.
pub(super) const TRASH_PREFIX: &str = ".deleted.";

/// The file with a topic's id ([`Topic::id`]), next to `topic.json`.
pub(super) const ID_FILE: &str = "id";

/// The file with the id of the upstream topic a mirrored topic copies, next to `id`.
pub(super) const MIRROR_SOURCE_FILE: &str = "upstream-id";

/// A new topic id: the creation time in nanoseconds and a counter, in hex. Unique
/// among the topics one data directory ever holds, unless the clock goes back.
pub(super) fn new_topic_id() -> String {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let seq = SEQ.fetch_add(1, Ordering::Relaxed) & 0xffff;
    format!("{nanos:x}{seq:04x}")
}

/// When the id [`new_topic_id`] made was made, in ms since the epoch; `None` for an
/// id of another shape or an implausible time (before 2020 or after 2200).
pub(super) fn id_created_ms(id: &str) -> Option<u64> {
    let nanos_hex = id.get(..id.len().checked_sub(4)?)?;
    if nanos_hex.is_empty() || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let ms = u64::try_from(u128::from_str_radix(nanos_hex, 16).ok()? / 1_000_000).ok()?;
    (1_577_836_800_000..7_258_118_400_000)
        .contains(&ms)
        .then_some(ms)
}

#[cfg(test)]
fn now_ms_for_tests() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The reason an [`Registry::unavailable`] name gives while its deletion runs.
pub(super) const BEING_DELETED: &str = "it is being deleted";

impl Storage {
    pub(super) fn topic_dir(&self, name: &str) -> PathBuf {
        self.data.join(name)
    }

    /// The folder of a topic's file log.
    pub(super) fn log_dir(&self, name: &str) -> PathBuf {
        self.topic_dir(name).join("log")
    }

    /// Why a topic's folder may not be made a new topic: its log holds items although
    /// its `topic.json` is missing (lost or removed by hand). Its options and id are
    /// unknown, so its items would be served under the new topic's; it needs an
    /// operator. `None` when the folder holds no items (or the log is in memory).
    pub(super) fn orphan_log(&self, name: &str) -> Option<String> {
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
    pub(super) fn clear_stale_log(&self, name: &str) -> Result<(), TopicError> {
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
    pub(super) fn open(&self, name: &str, options: &TopicOptions) -> Result<TopicLog, TopicError> {
        match self.kind {
            LogKind::Memory => Ok(TopicLog::Memory(MemoryLog::with_retention(
                options.memory_retention(),
                crate::log::Clock::system(),
            ))),
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
    pub(super) fn open_existing(
        &self,
        name: &str,
        file: &std::path::Path,
    ) -> Result<(TopicOptions, TopicLog, String), String> {
        let text = std::fs::read(file).map_err(|e| format!("{}: {e}", file.display()))?;
        let options: TopicOptions =
            serde_json::from_slice(&text).map_err(|e| format!("{}: {e}", file.display()))?;
        // `save` makes the log's folder before `topic.json`, so a topic without one has
        // lost it. Making a new, empty log would start the topic over at offset 0
        // under its old id, and readers resuming with their offsets would skip items.
        let log_dir = self.log_dir(name);
        if self.kind == LogKind::File && !log_dir.exists() {
            return Err(format!(
                "{} is missing although {} is there: the topic's items are lost, and its \
                 offsets would be handed out again; restore the folder, or remove the \
                 topic's folder to start the topic over (under a new id)",
                log_dir.display(),
                file.display()
            ));
        }
        let log = self.open(name, &options).map_err(|e| match e {
            TopicError::Storage(m) => m,
            e => e.to_string(),
        })?;
        // A topic from before ids were kept gets one now; so does one whose id file
        // was lost, which its subscribers must hear of: a resume with the old
        // `topic_id` is now told the topic was deleted. An id file that is there but
        // cannot be read (permissions, an I/O error, bytes that are not text) is no
        // lost id: replacing it would tell every subscriber the topic was deleted, for
        // good, over what may be a passing fault, so the topic waits for an operator.
        let id_file = file.with_file_name(ID_FILE);
        let id = match std::fs::read_to_string(&id_file) {
            Ok(id) if !id.trim().is_empty() => id.trim().to_string(),
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(format!(
                    "{}: {e}: the topic's id cannot be read; repair the file (or remove it, \
                     to give the topic a new id: clients resuming with the old one are then \
                     told the topic was deleted)",
                    id_file.display()
                ));
            }
            got => {
                let id = new_topic_id();
                let why = match got {
                    Err(e) => e.to_string(),
                    Ok(_) => "it is empty".to_string(),
                };
                tracing::warn!(
                    path = %id_file.display(),
                    reason = %why,
                    new_id = %id,
                    "the topic's id cannot be read; it gets a new one (clients resuming with \
                     an earlier topic_id, if it had one, are told the topic was deleted)"
                );
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
    pub(super) fn remove(&self, name: &str) -> Result<Option<PathBuf>, TopicError> {
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
    pub(super) fn purge(trash: &std::path::Path) {
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
    pub(super) fn save(
        &self,
        name: &str,
        options: &TopicOptions,
        id: &str,
    ) -> Result<(), TopicError> {
        if self.kind != LogKind::File {
            return Ok(());
        }
        let dir = self.topic_dir(name);
        let err = |e: std::io::Error| TopicError::Storage(format!("{}: {e}", dir.display()));
        // The log's folder before `topic.json`: a topic.json without it means the
        // folder was lost (see `open_existing`), never a crash during creation.
        let log_dir = self.log_dir(name);
        std::fs::create_dir_all(&log_dir)
            .map_err(|e| TopicError::Storage(format!("{}: {e}", log_dir.display())))?;
        let write = || {
            if self.syncs() {
                // The topic's directory entry, and its log's, so a crash cannot lose them.
                sync_dir(&self.data).map_err(err)?;
                sync_dir(&dir).map_err(err)?;
            }
            self.write_file(name, ID_FILE, id.as_bytes())?;
            self.save_options(name, options)
        };
        write().inspect_err(|_| {
            // No topic was made (a full disk): its empty folders go too, best effort
            // (`remove_dir` leaves a folder that holds anything).
            let _ = std::fs::remove_dir(&log_dir);
            let _ = std::fs::remove_dir(&dir);
        })
    }

    /// The recorded upstream topic id of a mirrored topic (file log).
    pub(super) fn mirror_source(&self, name: &str) -> Option<String> {
        if self.kind != LogKind::File {
            return None;
        }
        let text = std::fs::read_to_string(self.topic_dir(name).join(MIRROR_SOURCE_FILE)).ok()?;
        let id = text.trim();
        (!id.is_empty()).then(|| id.to_string())
    }

    /// Records the upstream topic id of a mirrored topic (file log), as
    /// [`Storage::write_file`] writes.
    pub(super) fn save_mirror_source(&self, name: &str, id: &str) -> Result<(), TopicError> {
        if self.kind != LogKind::File {
            return Ok(());
        }
        self.write_file(name, MIRROR_SOURCE_FILE, id.as_bytes())
    }

    /// Writes a topic's options (file log) over the old ones, as [`Storage::save`].
    pub(super) fn save_options(
        &self,
        name: &str,
        options: &TopicOptions,
    ) -> Result<(), TopicError> {
        if self.kind != LogKind::File {
            return Ok(());
        }
        let json = serde_json::to_vec_pretty(options).expect("options serialize");
        self.write_file(name, TOPIC_FILE, &json)
    }

    /// Whether topic files are synced: as the items are, so with any durability but
    /// `none`, under which a crash may lose recent items and so recent topics too.
    pub(super) fn syncs(&self) -> bool {
        self.file.durability != Durability::None
    }

    /// Writes `file` of a topic's directory through a temporary file and a rename, so
    /// that it is whole or absent, and (see [`Storage::syncs`]) syncs both before it
    /// returns, so that a change that was answered holds after a crash.
    pub(super) fn write_file(
        &self,
        name: &str,
        file: &str,
        bytes: &[u8],
    ) -> Result<(), TopicError> {
        let dir = self.topic_dir(name);
        let tmp = dir.join(format!("{file}.tmp"));
        let write = || -> std::io::Result<()> {
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
        write().map_err(|e| {
            // Best effort: a half-written temporary file is of no use to anyone.
            let _ = std::fs::remove_file(&tmp);
            TopicError::Storage(format!("{}: {e}", dir.join(file).display()))
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{LogKind, ServerConfig};
    use crate::topic::Registry;

    /// An id says when it was made; ids of other shapes say nothing.
    #[test]
    fn an_id_tells_its_creation_time() {
        let before = super::now_ms_for_tests();
        let id = super::new_topic_id();
        let ms = super::id_created_ms(&id).unwrap();
        assert!(
            ms >= before && ms <= super::now_ms_for_tests(),
            "{id}: {ms}"
        );
        for other in [
            "",
            "abcd",
            "xyz0000",
            "my-topic-id",
            "ffffffffffffffffffffffffffff0000",
        ] {
            assert_eq!(super::id_created_ms(other), None, "{other}");
        }
    }

    /// A file-log server config on an empty data directory of its own, and the directory.
    fn file_log_config(tag: &str) -> (std::path::PathBuf, ServerConfig) {
        let dir = std::env::temp_dir().join(format!("jelly-topic-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let config = ServerConfig {
            log: LogKind::File,
            data: dir.clone(),
            ..ServerConfig::ephemeral()
        };
        (dir, config)
    }

    /// A topic whose files cannot be written (a full disk; here its `id` cannot be put
    /// in place) is not made, and leaves no `log/` folder nor temporary file behind.
    #[test]
    fn a_topic_that_cannot_be_written_leaves_nothing_behind() {
        let (dir, config) = file_log_config("nowrite");
        let r = Registry::open(&config).unwrap();
        let blocker = dir.join("n").join(super::ID_FILE).join("x");
        std::fs::create_dir_all(&blocker).unwrap();
        let e = r.for_publish("n").err().expect("the id cannot be written");
        assert!(e.to_string().contains("topic storage"), "{e}");
        assert!(r.get("n").is_none());
        let left: Vec<String> = std::fs::read_dir(dir.join("n"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(left, [super::ID_FILE], "{left:?}");
        // Once the way is clear the name works.
        std::fs::remove_dir_all(dir.join("n").join(super::ID_FILE)).unwrap();
        r.for_publish("n").unwrap();
        drop(r);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A topic whose `log/` folder is gone (its `topic.json` still there) is reported
    /// unavailable at startup, not given a new, empty log at offset 0 under its id.
    #[test]
    fn a_topic_whose_log_folder_is_gone_is_unavailable() {
        let (dir, config) = file_log_config("nolog");
        let r = Registry::open(&config).unwrap();
        r.for_publish("t").unwrap();
        drop(r);
        // Reopened as it is, the topic is there.
        let r = Registry::open(&config).unwrap();
        assert!(r.get("t").is_some());
        drop(r);
        std::fs::remove_dir_all(dir.join("t").join("log")).unwrap();
        let r = Registry::open(&config).unwrap();
        assert!(r.get("t").is_none());
        let why = r.unavailable().get("t").cloned().unwrap_or_default();
        assert!(why.contains("is missing although"), "{why}");
        drop(r);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
