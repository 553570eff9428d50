//! One subscriber of a group: a first output with the Jelly options row (a block's
//! shared opening form, or its own read when it starts inside a block), a private
//! catch-up from the log while it is behind the group, then the group's shared
//! blocks; back to catch-up if it lags out of the ring.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use futures_util::Stream;
use tokio::sync::watch;

use super::encode::{BatchEncoder, Wire};
use super::group::{Group, accepts};
use super::key::Framing;
use super::ring::{GroupEnd, Lookup, Place};
use crate::compress::{Encoding, Stitcher};
use crate::deliver::{DeliverError, EndReason, FollowEnd, OutFormat};
use crate::log::{LogError, ReadLimits};
use crate::metrics::Metrics;
use crate::topic::{SubscriberGuard, Topic};

/// One step of a [`Subscription`].
#[derive(Debug)]
pub enum Step {
    /// Buffers to send in order: parts of the HTTP body ([`Framing::Stream`],
    /// [`Framing::Sse`], [`Framing::Grpc`]) or one WebSocket message each.
    Data(Vec<Bytes>),
    /// Nothing to send yet (SSE keep-alive comments come as `Data`).
    KeepAlive,
    /// The subscription is over; for HTTP bodies the stream's trailer came before.
    End(EndReason),
}

/// A live subscription served by a fan-out group.
pub struct Subscription {
    group: Arc<Group>,
    topic: Arc<Topic>,
    guard: SubscriberGuard,
    /// Every offset below it was sent (or rejected by the filter).
    next: u64,
    /// Reading shared blocks from this one on; `None` while reading privately.
    seq: Option<u64>,
    /// The next output must begin with the Jelly options row.
    owes_options: bool,
    /// Turns blocks into one `Content-Encoding` stream (HTTP bodies).
    stitcher: Stitcher,
    header_sent: bool,
    version: watch::Receiver<u64>,
    shutdown: watch::Receiver<bool>,
    keepalive: Duration,
    /// When output last went out: a keep-alive is due `keepalive` after it, also while
    /// a filter skips every item (blocks come, but nothing of them is sent).
    last_output: tokio::time::Instant,
    batch: ReadLimits,
    metrics: Arc<Metrics>,
    ended: Option<FollowEnd>,
    /// The end, to report after the trailer went out.
    pending_end: Option<EndReason>,
}

/// What a look at the ring found.
enum Next {
    Block(Arc<super::ring::SharedBlock>),
    /// Block `seq`, in its opening form.
    Open(u64, Arc<super::ring::SharedBlock>),
    Private(u64),
    Wait,
    End(GroupEnd),
}

impl Subscription {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        group: Arc<Group>,
        topic: Arc<Topic>,
        guard: SubscriberGuard,
        start: u64,
        shutdown: watch::Receiver<bool>,
        keepalive: Duration,
        batch: ReadLimits,
        metrics: Arc<Metrics>,
    ) -> Subscription {
        let key = &group.key;
        let owes_options = key.format == OutFormat::Jelly && key.framing != Framing::Sse;
        // Only HTTP bodies are one compressed stream; gRPC messages are compressed
        // one by one and WebSocket messages not at all.
        let stitcher = Stitcher::new(match key.framing {
            Framing::Stream | Framing::Sse => key.encoding,
            Framing::Messages | Framing::Grpc => Encoding::Identity,
        });
        let version = group.ring.watch();
        Subscription {
            group,
            topic,
            guard,
            next: start,
            seq: None,
            owes_options,
            stitcher,
            header_sent: false,
            version,
            shutdown,
            keepalive,
            last_output: tokio::time::Instant::now(),
            batch,
            metrics,
            ended: None,
            pending_end: None,
        }
    }

    /// The next offset this subscriber will be sent.
    pub fn next_offset(&self) -> u64 {
        self.next
    }

    /// The group serving it.
    pub fn group(&self) -> &Arc<Group> {
        &self.group
    }

    /// Why the subscription ended (once [`Subscription::next_step`] gave `End`).
    pub fn end_reason(&self) -> Option<FollowEnd> {
        self.ended.clone()
    }

    fn stream_framing(&self) -> bool {
        matches!(self.group.key.framing, Framing::Stream | Framing::Sse)
    }

    /// The next output: data (waiting for it when there is none), a keep-alive, or
    /// the end and why. HTTP bodies get their compression header first and trailer
    /// last as data. Cancel-safe: nothing is lost when the future is dropped.
    pub async fn next_step(&mut self) -> Step {
        if let Some(reason) = self.pending_end.take() {
            return Step::End(reason);
        }
        if self.ended.is_some() {
            return Step::End(EndReason::Closed);
        }
        if !self.header_sent {
            self.header_sent = true;
            let h = self.stitcher.header();
            if !h.is_empty() {
                return Step::Data(vec![h]);
            }
        }
        match self.step().await {
            Step::Data(d) => {
                if d.iter().any(|b| !b.is_empty()) {
                    self.last_output = tokio::time::Instant::now();
                }
                Step::Data(d)
            }
            Step::End(reason) => {
                let reason = reason.of_topic(&self.topic);
                self.ended = Some(reason.summary());
                let sse = self.group.key.framing == Framing::Sse;
                if reason.body_error(false, sse).is_some() {
                    // Cut off without the compression trailer, as for a failure.
                    return Step::End(reason);
                }
                let mut last = Vec::new();
                if self.group.key.framing == Framing::Sse
                    && let Some(ev) = crate::deliver::sse_end_event(&reason)
                {
                    let b = super::encode::block(self.group.key.encoding, ev);
                    last.push(self.stitcher.block(&b));
                }
                if self.stream_framing() {
                    last.push(self.stitcher.trailer());
                }
                last.retain(|b| !b.is_empty());
                if last.is_empty() {
                    Step::End(reason)
                } else {
                    self.pending_end = Some(reason);
                    Step::Data(last)
                }
            }
            other => other,
        }
    }

    async fn step(&mut self) -> Step {
        loop {
            if *self.shutdown.borrow() {
                return Step::End(EndReason::Shutdown);
            }
            // Marks the current version seen before looking, so a change made after
            // the look wakes the wait below.
            self.version.borrow_and_update();
            let found = {
                let st = self.group.ring.read();
                match self.seq {
                    Some(seq) => match st.get(seq) {
                        Lookup::Block(b) => Next::Block(b),
                        Lookup::Dropped => {
                            // Lagged out of the ring: catch up from the log.
                            self.seq = None;
                            self.metrics.fanout_catchups.fetch_add(1, Ordering::Relaxed);
                            continue;
                        }
                        Lookup::Pending => Next::Wait,
                        Lookup::Ended(e) => Next::End(e),
                    },
                    None => match st.place(self.next, self.owes_options) {
                        Place::Join(seq) => {
                            self.seq = Some(seq);
                            continue;
                        }
                        Place::Open(seq) => match st.get(seq) {
                            Lookup::Block(b) => Next::Open(seq, b),
                            // Dropped since: look again.
                            _ => continue,
                        },
                        Place::Private { stop } => Next::Private(stop),
                        Place::Wait => match st.ended() {
                            Some(e) => Next::End(e.clone()),
                            None => Next::Wait,
                        },
                    },
                }
            };
            match found {
                Next::Block(b) => {
                    if let Some(seq) = &mut self.seq {
                        *seq += 1;
                    }
                    self.next = b.end;
                    let data = self.wire(&b.wire);
                    let bytes = data.iter().map(Bytes::len).sum::<usize>();
                    self.metrics
                        .fanout_shared_bytes
                        .fetch_add(bytes as u64, Ordering::Relaxed);
                    self.count(b.items as usize, bytes);
                    return Step::Data(data);
                }
                Next::Open(seq, b) => {
                    let opening = b
                        .opening
                        .get_or_try_init(|| {
                            let (topic, key) = (self.topic.clone(), self.group.key.clone());
                            encode_range(topic, key, b.start, b.end, self.batch)
                        })
                        .await;
                    match opening {
                        Ok(w) => {
                            // Only now, so that a cancelled wait changes nothing.
                            let w = w.clone();
                            self.seq = Some(seq + 1);
                            self.next = b.end;
                            self.owes_options = false;
                            let data = self.wire(&w);
                            let bytes = data.iter().map(Bytes::len).sum::<usize>();
                            self.metrics
                                .fanout_shared_bytes
                                .fetch_add(bytes as u64, Ordering::Relaxed);
                            self.count(b.items as usize, bytes);
                            return Step::Data(data);
                        }
                        Err(reason) => return Step::End(reason),
                    }
                }
                Next::Private(stop) => match self.private(stop).await {
                    Ok(Some(data)) => return Step::Data(data),
                    Ok(None) => continue,
                    Err(reason) => return Step::End(reason),
                },
                Next::End(e) => return Step::End(end_reason(e)),
                Next::Wait => {
                    if let Some(step) = self.wait().await {
                        return step;
                    }
                }
            }
        }
    }

    /// Waits for the group to change; a keep-alive (SSE) or the end may come first.
    async fn wait(&mut self) -> Option<Step> {
        // Only SSE sends keep-alives; the other framings arm no timer per wait.
        let sse = self.group.key.framing == Framing::Sse;
        let due = self.last_output + self.keepalive;
        let keepalive = async {
            if sse {
                tokio::time::sleep_until(due).await
            } else {
                std::future::pending().await
            }
        };
        tokio::select! {
            r = self.version.changed() => match r {
                Ok(()) => None,
                // The group is gone (cannot happen while we hold it).
                Err(_) => Some(Step::End(EndReason::Closed)),
            },
            _ = self.shutdown.wait_for(|s| *s) => Some(Step::End(EndReason::Shutdown)),
            _ = keepalive => {
                // Counted as output here, not only when the step reaches the caller:
                // a private read that waits drops the keep-alive, and a due time left
                // in the past would wake every later wait at once.
                self.last_output = tokio::time::Instant::now();
                Some(Step::Data(vec![self.stitcher.block(&self.group.keepalive)]))
            }
        }
    }

    /// Reads the log from `next` (up to `stop`) and writes the accepted items itself:
    /// `Ok(None)` when they were all rejected.
    async fn private(&mut self, stop: u64) -> Result<Option<Vec<Bytes>>, EndReason> {
        let mut limits = self.batch;
        limits.max_items = limits.max_items.min((stop - self.next) as usize).max(1);
        let items = match self.topic.log.read(self.next, limits).await {
            Ok(items) => items,
            Err(LogError::Truncated { requested, first }) => {
                tracing::warn!(
                    topic = %self.topic.name,
                    requested,
                    first,
                    "subscriber fell behind retention; closing its stream"
                );
                return Err(EndReason::Truncated { requested, first });
            }
            Err(LogError::Closed) => return Err(EndReason::Closed),
            Err(e) => {
                tracing::error!(topic = %self.topic.name, error = %e, "log read failed");
                return Err(EndReason::ReadFailed(e.to_string()));
            }
        };
        if items.is_empty() {
            // Below what the group has handled, so the log has it: only a log that
            // lost items gets here. Wait for a change rather than spin.
            return match self.wait().await {
                None => Ok(None),
                Some(Step::End(r)) => Err(r),
                Some(_) => Ok(None),
            };
        }
        let mut enc = BatchEncoder::new(&self.group.key, self.owes_options);
        let mut failed: Option<DeliverError> = None;
        let mut next = self.next;
        for it in items.iter().take_while(|it| it.offset < stop) {
            if accepts(&self.group.key, it)
                && let Err(e) = enc.push(it)
            {
                failed = Some(e);
                break;
            }
            next = it.offset + 1;
            if enc.written() >= crate::deliver::OUTPUT_CHUNK_BYTES {
                // The rest is read again next time (see OUTPUT_CHUNK_BYTES).
                break;
            }
        }
        self.next = next;
        let n = enc.items();
        if n == 0 {
            self.guard.advance(self.next);
            return match failed {
                Some(e) => {
                    // Usually the subscriber's own choice (for example a datatype table of 0 asked
                    // over gRPC) that an item does not fit: not a server fault.
                    tracing::warn!(topic = %self.topic.name, error = %e, "cannot deliver item");
                    Err(EndReason::DeliverFailed(e))
                }
                None => Ok(None),
            };
        }
        // A failing item fails again on the next read, and ends the subscription then.
        self.owes_options = false;
        let wire = enc.finish();
        let data = self.wire(&wire);
        self.count(n, data.iter().map(Bytes::len).sum());
        Ok(Some(data))
    }

    /// The buffers to send for a block.
    fn wire(&mut self, w: &Wire) -> Vec<Bytes> {
        match w {
            Wire::Stream(b) => vec![self.stitcher.block(b)],
            Wire::Messages(m) => m.clone(),
        }
    }

    /// Counts delivered items and bytes (topic and server counters, position).
    fn count(&self, items: usize, bytes: usize) {
        self.metrics
            .count_out(&self.topic.stats, items as u64, bytes as u64);
        self.guard.advance(self.next);
    }

    /// The subscription as an HTTP body ([`Framing::Stream`], [`Framing::Sse`]).
    pub fn into_stream(self) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Send {
        let state = (Some(self), VecDeque::<Bytes>::new());
        futures_util::stream::unfold(state, |(sub, mut queue)| async move {
            let mut sub = sub?;
            loop {
                if let Some(b) = queue.pop_front() {
                    return Some((Ok(b), (Some(sub), queue)));
                }
                match sub.next_step().await {
                    Step::Data(d) => queue.extend(d),
                    Step::KeepAlive => {}
                    // A failure cuts the body off (see `EndReason::body_error`).
                    Step::End(reason) => {
                        // A shared subscription follows live: it has no end to miss.
                        let sse = sub.group.key.framing == Framing::Sse;
                        let e = reason.of_topic(&sub.topic).body_error(false, sse)?;
                        return Some((Err(e), (None, queue)));
                    }
                }
            }
        })
    }
}

/// The accepted items of `[start, end)` as a subscriber's first output (the options
/// row in the first item), read from the log: a block's opening form.
async fn encode_range(
    topic: Arc<Topic>,
    key: super::key::GroupKey,
    start: u64,
    end: u64,
    batch: ReadLimits,
) -> Result<Arc<Wire>, EndReason> {
    let mut enc = BatchEncoder::new(&key, true);
    let mut next = start;
    while next < end {
        let mut limits = batch;
        limits.max_items = limits.max_items.min((end - next) as usize).max(1);
        let items = match topic.log.read(next, limits).await {
            Ok(items) if !items.is_empty() => items,
            Ok(_) => {
                return Err(EndReason::ReadFailed(format!(
                    "offsets {next}..{end} are missing from the log"
                )));
            }
            Err(LogError::Truncated { requested, first }) => {
                return Err(EndReason::Truncated { requested, first });
            }
            Err(e) => return Err(EndReason::ReadFailed(e.to_string())),
        };
        let items: Vec<crate::item::Item> =
            items.into_iter().take_while(|it| it.offset < end).collect();
        // A costly filter (an ASK query) is evaluated on a blocking thread, so that it
        // holds no async worker.
        let verdicts = match &key.filter {
            Some(f) if f.is_costly() => Some(f.takes_each(&items, Arc::default()).await),
            _ => None,
        };
        for (i, it) in items.iter().enumerate() {
            let taken = match &verdicts {
                Some(v) => v.get(i).copied().unwrap_or(false),
                None => accepts(&key, it),
            };
            if taken {
                enc.push(it).map_err(EndReason::DeliverFailed)?;
            }
            next = it.offset + 1;
        }
    }
    Ok(Arc::new(enc.finish()))
}

/// The subscriber-facing reason for a group's end.
fn end_reason(e: GroupEnd) -> EndReason {
    match e {
        GroupEnd::Closed => EndReason::Closed,
        GroupEnd::ReadFailed(m) => EndReason::ReadFailed(m),
        GroupEnd::DeliverFailed { offset, message } => {
            EndReason::DeliverFailed(DeliverError { offset, message })
        }
    }
}
