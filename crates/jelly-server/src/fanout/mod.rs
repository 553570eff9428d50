//! Encode-once fan-out: subscribers that want the same bytes share them.
//!
//! Subscriptions with equal [`GroupKey`]s (topic, format, framing, filter,
//! compression, window) form a [`Group`]. A group follows the topic's log from its
//! head (a task per group with a window; the appending task itself without one, see
//! [`group`]), writes each batch of accepted items once (Jelly items spliced
//! without their options row), compresses it once as an independent block and puts
//! it in the group's bounded [`ring`]. Each [`Subscription`] starts with a block's
//! opening form (the options row in its first item; built once per block and shared
//! by all that start there), catches up privately from the log while it is behind
//! the ring, then passes the shared blocks on (`Bytes` clones), a
//! per-subscriber [`crate::compress::Stitcher`] making them one `Content-Encoding`
//! stream. A subscriber that lags out of the ring catches up from the log again; one
//! that falls behind retention is closed. Producers never wait for subscribers.
//! `docs/fanout-design.md` describes the design.

pub mod encode;
pub mod group;
pub mod key;
pub mod ring;
pub mod subscriber;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

pub use group::Group;
pub use key::{Framing, GroupKey};
pub use ring::RingLimits;
pub use subscriber::{Step, Subscription};

use crate::log::ReadLimits;
use crate::metrics::Metrics;
use crate::topic::Topic;

/// Yields once, so that the subscriber tasks an append just woke write their items
/// before the appending task answers its publisher.
///
/// The woken tasks wait on this worker until the current task yields; answering
/// first (an HTTP response, a WebSocket acknowledgement) put one more write, and for
/// HTTP the rest of the connection's turn, on every item's path to its subscribers.
pub async fn let_subscribers_write() {
    tokio::task::yield_now().await;
}

/// The longest buffer window a subscriber may ask for, in milliseconds.
pub const MAX_WINDOW_MS: u64 = 60_000;

/// The server's fan-out groups.
pub struct Fanout {
    groups: Arc<group::GroupMap>,
    limits: RingLimits,
    batch: ReadLimits,
    keepalive: Duration,
    shutdown: watch::Receiver<bool>,
    metrics: Arc<Metrics>,
}

impl Fanout {
    /// No groups yet. `batch` bounds each log read (of groups and of catch-ups);
    /// `keepalive` is the SSE keep-alive interval.
    pub fn new(
        limits: RingLimits,
        batch: ReadLimits,
        keepalive: Duration,
        shutdown: watch::Receiver<bool>,
        metrics: Arc<Metrics>,
    ) -> Fanout {
        Fanout {
            groups: Arc::new(Mutex::new(HashMap::new())),
            limits,
            batch,
            keepalive,
            shutdown,
            metrics,
        }
    }

    /// A subscription of `topic` from offset `start` (already checked against
    /// retention), served by the group of `key` (joined, or started at the log's
    /// head). `kind` names the front-end in describe and `/metrics`.
    pub fn subscribe(
        &self,
        topic: Arc<Topic>,
        key: GroupKey,
        kind: &'static str,
        start: u64,
    ) -> Subscription {
        let format = key.format.name();
        let g = Group::get_or_start(
            &self.groups,
            &topic,
            key,
            self.limits,
            self.batch,
            &self.shutdown,
            &self.metrics,
        );
        let guard = topic.subscribe(kind, format, start);
        Subscription::new(
            g,
            topic,
            guard,
            start,
            self.shutdown.clone(),
            self.keepalive,
            self.batch,
            self.metrics.clone(),
        )
    }

    /// Live groups.
    pub fn groups(&self) -> usize {
        let m = self.groups.lock().unwrap_or_else(|e| e.into_inner());
        m.values().filter(|w| w.strong_count() > 0).count()
    }
}
