//! What a mirror is doing, for `GET /topics/{name}` and `/metrics`.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};

use crate::config::{MirrorConfig, OnGone};
use crate::log::now_ms;

/// The state of a mirror.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MirrorState {
    /// Not connected yet (the server just started).
    Starting,
    /// Subscribed to the upstream; items are copied as they come.
    Connected,
    /// The last attempt failed (see the last error); trying again after a pause.
    Retrying,
    /// Given up: the upstream no longer retains the items needed next, or the
    /// upstream topic's options differ from the local topic's. Needs an operator.
    Stopped,
    /// The server is shutting down.
    Ended,
}

impl MirrorState {
    /// Lower-case name (JSON, metrics).
    pub fn name(self) -> &'static str {
        match self {
            MirrorState::Starting => "starting",
            MirrorState::Connected => "connected",
            MirrorState::Retrying => "retrying",
            MirrorState::Stopped => "stopped",
            MirrorState::Ended => "ended",
        }
    }
}

/// The shared, live status of one mirrored topic.
#[derive(Debug)]
pub struct MirrorStatus {
    topic: String,
    upstream: String,
    upstream_topic: String,
    on_gone: OnGone,
    inner: Mutex<Inner>,
    /// Items copied since the server started.
    pub items: AtomicU64,
    /// Successful subscriptions to the upstream since the server started.
    pub connects: AtomicU64,
}

#[derive(Debug)]
struct Inner {
    state: MirrorState,
    since_ms: u64,
    last_error: Option<(String, u64)>,
    /// The upstream's next offset, as last seen (at connect time, then raised by
    /// the items received, and by a description every few seconds).
    upstream_next: Option<u64>,
    /// When the upstream last answered: a description, or items (ms since the epoch).
    upstream_seen_ms: Option<u64>,
    /// Why no new items will come from further up: the upstream topic is itself a
    /// mirror that stopped, or one whose own upstream stopped (as its description
    /// said when last seen).
    upstream_stopped: Option<String>,
    /// The upstream refused this server at the last try (a 401 or 403, or a
    /// certificate this server does not trust): retried, but only an operator on one
    /// side changes it. Cleared by a session that ends otherwise, and by any state but
    /// retrying.
    refused: bool,
}

impl MirrorStatus {
    /// A mirror that has not started yet.
    pub fn new(c: &MirrorConfig) -> MirrorStatus {
        MirrorStatus {
            topic: c.topic.clone(),
            upstream: c.upstream.trim_end_matches('/').to_string(),
            upstream_topic: c.upstream_topic().to_string(),
            on_gone: c.on_gone,
            inner: Mutex::new(Inner {
                state: MirrorState::Starting,
                since_ms: now_ms(),
                last_error: None,
                upstream_next: None,
                upstream_seen_ms: None,
                upstream_stopped: None,
                refused: false,
            }),
            items: AtomicU64::new(0),
            connects: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // Every change is a plain assignment: a panic cannot leave it half-done.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The local topic.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The upstream server's base URL.
    pub fn upstream(&self) -> &str {
        &self.upstream
    }

    /// The topic's name on the upstream.
    pub fn upstream_topic(&self) -> &str {
        &self.upstream_topic
    }

    /// `<upstream>/topics/<name>`.
    pub fn upstream_topic_url(&self) -> String {
        format!("{}/topics/{}", self.upstream, self.upstream_topic)
    }

    pub fn state(&self) -> MirrorState {
        self.lock().state
    }

    /// The last error and when it happened (ms since the epoch).
    pub fn last_error(&self) -> Option<(String, u64)> {
        self.lock().last_error.clone()
    }

    /// The upstream's next offset as last seen.
    pub fn upstream_next(&self) -> Option<u64> {
        self.lock().upstream_next
    }

    /// When the upstream last answered or sent items (ms since the epoch): how old
    /// [`MirrorStatus::upstream_next`] and so the lag are.
    pub fn upstream_seen_ms(&self) -> Option<u64> {
        self.lock().upstream_seen_ms
    }

    /// Why the upstream gets no new items (a mirror that stopped further up the
    /// chain), as its description said when last seen; `None` while it does.
    pub fn upstream_stopped(&self) -> Option<String> {
        self.lock().upstream_stopped.clone()
    }

    pub(crate) fn set_upstream_stopped(&self, why: Option<String>) {
        self.lock().upstream_stopped = why;
    }

    /// Whether the upstream refused this server at the last try (see `Inner::refused`):
    /// set by a session that ended so, cleared by any other end and by any state but
    /// retrying, so the mirror is retrying while it holds.
    pub fn refused(&self) -> bool {
        self.lock().refused
    }

    pub(crate) fn set_refused(&self, refused: bool) {
        self.lock().refused = refused;
    }

    pub(crate) fn set_state(&self, state: MirrorState) {
        let mut g = self.lock();
        // Refused only ever describes a mirror that is retrying.
        if state != MirrorState::Retrying {
            g.refused = false;
        }
        if g.state != state {
            g.state = state;
            g.since_ms = now_ms();
        }
    }

    pub(crate) fn set_error(&self, state: MirrorState, error: String) {
        let mut g = self.lock();
        g.last_error = Some((error, now_ms()));
        if g.state != state {
            g.state = state;
            g.since_ms = now_ms();
        }
    }

    /// Records the upstream's next offset (it only grows, except on a reconnect,
    /// which sets it to what the upstream says).
    pub(crate) fn set_upstream_next(&self, next: u64, reset: bool) {
        let mut g = self.lock();
        g.upstream_next = Some(match g.upstream_next {
            Some(n) if !reset => n.max(next),
            _ => next,
        });
        g.upstream_seen_ms = Some(now_ms());
    }

    /// Items the local topic lacks of what the upstream had when last seen, given
    /// the local next offset.
    pub fn lag(&self, local_next: u64) -> Option<u64> {
        self.upstream_next().map(|n| n.saturating_sub(local_next))
    }

    /// The status as JSON (`mirror` in `GET /topics/{name}`).
    pub fn to_json(&self, local_next: Option<u64>) -> Value {
        let g = self.lock();
        let lag = match (g.upstream_next, local_next) {
            (Some(up), Some(local)) => json!(up.saturating_sub(local)),
            _ => Value::Null,
        };
        json!({
            "upstream": self.upstream,
            "upstream_topic": self.upstream_topic,
            "on_gone": match self.on_gone { OnGone::Stop => "stop", OnGone::Skip => "skip" },
            "state": g.state.name(),
            "since_ms": g.since_ms,
            "last_error": g.last_error.as_ref().map(|(e, _)| e.clone()),
            "last_error_ms": g.last_error.as_ref().map(|(_, t)| *t),
            "upstream_next_offset": g.upstream_next,
            "upstream_seen_ms": g.upstream_seen_ms,
            "upstream_stopped": g.upstream_stopped,
            "refused": g.refused,
            "lag": lag,
            "items_copied": self.items.load(Ordering::Relaxed),
            "connects": self.connects.load(Ordering::Relaxed),
        })
    }
}
