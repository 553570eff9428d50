//! Repeaters: a topic copied from another jellyfish server, with the same offsets.
//!
//! One task per mirrored topic ([`crate::config::MirrorConfig`]). Each session:
//! 1. `GET {upstream}/topics/{name}`: the upstream topic's options and offsets. The
//!    local topic is created with those options if it does not exist (a local topic
//!    whose stream options differ stops the mirror).
//! 2. `GET {upstream}/topics/{name}/items?from=<local next offset>&format=jelly`: the
//!    chunked splice stream. Each delivered frame becomes the stored item again
//!    ([`Unsplicer`]: options row + rows, metadata stripped, no decoding) and
//!    is appended with [`crate::log::Log::append_at`]: same offset, timestamp, source
//!    and headers. Items that arrive together are appended as one batch.
//!
//! On any failure (upstream down, connection dropped, a 5xx, a bad frame) the task
//! waits (100 ms, doubling up to 5 s) and starts a new session from the local log's
//! next offset, so nothing is duplicated or skipped; after a crash the same happens
//! on restart. If the upstream no longer retains that offset (410), the mirror stops
//! or, with `on_gone = "skip"`, starts the local log over at the upstream's first
//! retained offset. An empty local log simply starts at the upstream's first offset.
//! Only the mirror writes a mirrored topic: local publishes are refused (409).

mod frame;
mod status;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::{Buf as _, BytesMut};
use futures_util::FutureExt as _;
use serde_json::Value;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use frame::{FrameError, Unsplicer};
pub use status::{MirrorState, MirrorStatus};

use crate::config::{MirrorConfig, OnGone};
use crate::http::AppState;
use crate::item::Item;
use crate::log::ReadLimits;
use crate::topic::{Topic, TopicOptions};

/// First pause after a failure.
const MIN_BACKOFF: Duration = Duration::from_millis(100);
/// Longest pause between attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// A session connected this long counts as a success (the pause is reset).
const STABLE_SESSION: Duration = Duration::from_secs(1);
/// Time allowed for connecting, and for the describe request as a whole.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Append once this many items are pending, even if more data is ready.
const BATCH_ITEMS: usize = 256;
/// Append once the pending frames add up to this many bytes.
const BATCH_BYTES: usize = 1 << 20;
/// Largest topic description read from the upstream (it lists the subscribers).
const DESCRIBE_BYTES: usize = 16 << 20;
/// Largest error answer read from the upstream.
const ERROR_BYTES: usize = 64 << 10;
/// Metadata allowance of a delivered frame over the stored item's size limit.
const METADATA_BYTES: usize = 64 << 10;

/// An HTTP client error with its causes (`error sending request: …: invalid peer
/// certificate: UnknownIssuer`): reqwest's own message names only the outermost.
///
/// ```text
/// error sending request for url (https://…): client error (Connect): invalid peer certificate: UnknownIssuer
/// ```
pub fn describe(e: &reqwest::Error) -> String {
    crate::error_chain::with_causes(e)
}

/// The HTTP client of a mirror (HTTP/1.1, no proxy). An `https://` upstream is
/// checked against the system's roots and the certificates of the mirror's `ca` (a
/// PEM file); its connections have the mirror's TCP keepalive.
pub fn client(mirror: &MirrorConfig) -> Result<reqwest::Client, String> {
    crate::tls::install_crypto_provider();
    let mut b = reqwest::Client::builder();
    if let Some(path) = &mirror.ca {
        let certs = std::fs::read(path)
            .map_err(|e| e.to_string())
            .and_then(|pem| crate::tls::root_certificates(&pem))
            .map_err(|e| format!("mirror ca {}: {e}", path.display()))?;
        for c in certs {
            b = b.add_root_certificate(c);
        }
    }
    // An idle topic sends nothing: keepalive probes find a dead upstream (by default
    // in about 30 s) where the stream alone would wait forever.
    let idle = mirror.keepalive();
    let interval = idle.map(|i| (i / 3).max(Duration::from_secs(1)));
    b.no_proxy()
        .connect_timeout(REQUEST_TIMEOUT)
        .tcp_nodelay(true)
        .tcp_keepalive(idle)
        .tcp_keepalive_interval(interval)
        .tcp_keepalive_retries(idle.map(|_| 3))
        .http1_only()
        .build()
        .map_err(|e| format!("mirror HTTP client: {e}"))
}

/// Starts the mirror of `config.topic` (whose status the registry holds).
pub fn spawn(
    state: AppState,
    config: MirrorConfig,
    client: reqwest::Client,
    shutdown: watch::Receiver<bool>,
) -> Option<JoinHandle<()>> {
    let status = state.topics.mirror(&config.topic)?;
    let base = config.upstream_url().ok()?;
    let m = Mirror {
        state,
        base: base.as_str().trim_end_matches('/').to_string(),
        config,
        client,
        status,
        shutdown,
        skip_to_first: false,
        connected_at: None,
        source: None,
    };
    Some(tokio::spawn(m.run()))
}

/// How a session ended.
#[derive(Debug)]
enum End {
    /// The server is shutting down.
    Shutdown,
    /// Try again after a pause.
    Retry(String),
    /// The upstream refused this server (401, 403, or a certificate this server does
    /// not trust): tried again after a pause, and reported as needing an operator.
    Refused(String),
    /// The upstream no longer retains the next offset.
    Gone { requested: u64, first: u64 },
    /// Cannot go on without an operator.
    Fatal(String),
    /// The upstream's item at an offset the local copy holds is another item: the
    /// upstream lost items (a crash without fsync, a restore from a backup) and has
    /// taken those offsets again. The message says where.
    Diverged(String),
}

struct Mirror {
    state: AppState,
    config: MirrorConfig,
    /// Upstream base URL without a trailing slash.
    base: String,
    client: reqwest::Client,
    status: Arc<MirrorStatus>,
    shutdown: watch::Receiver<bool>,
    /// `on_gone = "skip"` after a 410: the next session starts at the upstream's
    /// first retained offset, dropping the local items.
    skip_to_first: bool,
    /// When the current session's subscription was answered.
    connected_at: Option<Instant>,
    /// The id of the upstream topic the local copy is of (from the topic's folder
    /// once, then kept here): an upstream topic deleted and created again under the
    /// same name is another topic, whose offsets start over.
    source: Option<String>,
}

/// What the upstream says about its topic.
struct Upstream {
    options: TopicOptions,
    first: u64,
    next: u64,
    /// Which topic of that name it is (`None` from a server that does not say).
    id: Option<String>,
    /// Why it gets no new items, when it is a mirror that stopped or follows one
    /// ([`upstream_stopped`]).
    stopped: Option<String>,
}

impl Mirror {
    async fn run(mut self) {
        let mut backoff = MIN_BACKOFF;
        tracing::info!(topic = %self.config.topic, upstream = %self.status.upstream_topic_url(), "mirror: starting");
        loop {
            if *self.shutdown.borrow() {
                break;
            }
            let copied_before = self.status.items.load(Ordering::Relaxed);
            self.connected_at = None;
            let end = self.session().await;
            // A session that copied items, or stayed connected a while (an idle
            // topic), was a success: the next attempt starts with a short pause.
            let progressed = self.status.items.load(Ordering::Relaxed) > copied_before
                || self
                    .connected_at
                    .is_some_and(|t| t.elapsed() >= STABLE_SESSION);
            // Refused is the outcome of this session alone: any other clears it.
            self.status.set_refused(matches!(end, End::Refused(_)));
            match end {
                End::Shutdown => break,
                End::Fatal(e) => {
                    tracing::error!(topic = %self.config.topic, error = %e, "mirror: stopped");
                    self.status.set_error(MirrorState::Stopped, e);
                    return;
                }
                End::Gone { requested, first } => {
                    let e = format!(
                        "the upstream no longer retains offset {requested} (its first retained offset is {first})"
                    );
                    if self.config.on_gone == OnGone::Skip {
                        tracing::error!(topic = %self.config.topic, error = %e, "mirror: skipping to the upstream's first retained offset");
                        self.status.set_error(MirrorState::Retrying, e);
                        self.skip_to_first = true;
                    } else {
                        let e = format!("{e}; mirroring stopped (on_gone = \"stop\")");
                        tracing::error!(topic = %self.config.topic, error = %e, "mirror: stopped");
                        self.status.set_error(MirrorState::Stopped, e);
                        return;
                    }
                }
                End::Retry(e) => {
                    tracing::warn!(topic = %self.config.topic, error = %e, "mirror: will retry");
                    self.status.set_error(MirrorState::Retrying, e);
                }
                End::Refused(e) => {
                    tracing::error!(topic = %self.config.topic, error = %e, "mirror: refused by the upstream; will retry");
                    self.status.set_error(MirrorState::Retrying, e);
                }
                End::Diverged(e) => {
                    if self.config.on_gone == OnGone::Stop {
                        let e =
                            format!("{e}; mirroring stopped (on_gone = \"stop\"){STOPPED_HINT}");
                        tracing::error!(topic = %self.config.topic, error = %e, "mirror: stopped");
                        self.status.set_error(MirrorState::Stopped, e);
                        return;
                    }
                    tracing::warn!(topic = %self.config.topic, error = %e, "mirror: starting the local copy over");
                    let e = match self.start_over().await {
                        Ok(()) => format!("{e}; the local copy was deleted and is copied again"),
                        Err(err) => format!("{e}; {err}"),
                    };
                    self.status.set_error(MirrorState::Retrying, e);
                }
            }
            if progressed {
                backoff = MIN_BACKOFF;
            }
            tokio::select! {
                _ = tokio::time::sleep(backoff) => {}
                _ = crate::http::wait_shutdown(&mut self.shutdown) => break,
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
        self.status.set_state(MirrorState::Ended);
    }

    fn get(&self, path: &str) -> reqwest::RequestBuilder {
        let r = self.client.get(format!("{}{path}", self.base));
        match &self.config.token {
            Some(t) => r.bearer_auth(t),
            None => r,
        }
    }

    /// One subscription to the upstream, until it fails or the server shuts down.
    async fn session(&mut self) -> End {
        let name = self.config.upstream_topic().to_string();
        let mut shutdown = self.shutdown.clone();
        let up = tokio::select! {
            r = self.describe(&name) => match r {
                Ok(up) => up,
                Err(e) => return e,
            },
            _ = crate::http::wait_shutdown(&mut shutdown) => return End::Shutdown,
        };
        self.status.set_upstream_stopped(up.stopped.clone());
        if let Err(e) = self.check_source(&up).await {
            return e;
        }
        let topic = match self.local_topic(&up.options) {
            Ok(t) => t,
            Err(e) => return e,
        };
        // Recorded before anything is copied, so that a restart checks against it.
        if let Some(id) = &up.id
            && self.source.as_deref() != Some(id)
        {
            if let Err(e) = self.state.topics.save_mirror_source(&self.config.topic, id) {
                return End::Retry(format!("cannot record the upstream topic's id: {e}"));
            }
            self.source = Some(id.clone());
        }
        let local_first = topic.log.first_offset();
        let local_next = topic.log.next_offset();
        // An empty local log starts at the upstream's first retained item.
        let restart = self.skip_to_first || local_first == local_next;
        let from = if restart {
            local_next.max(up.first)
        } else {
            local_next
        };
        // Resuming a copy, the stream starts one item early, at the newest local item,
        // which the upstream must still have as it is: offsets alone would not tell an
        // upstream that lost its newest items and took those offsets again (a crash
        // with `durability = "none"`, a restore) from the topic the copy is of.
        let overlap = if !restart && from > up.first && from <= up.next {
            match topic
                .log
                .read(
                    from - 1,
                    ReadLimits {
                        max_items: 1,
                        max_bytes: 0,
                    },
                )
                .await
            {
                Ok(mut items) if items.first().is_some_and(|i| i.offset == from - 1) => items.pop(),
                Ok(_) => None,
                Err(e) => return End::Retry(format!("cannot read the local topic: {e}")),
            }
        } else {
            None
        };
        let request_from = if overlap.is_some() { from - 1 } else { from };
        self.status.set_upstream_next(up.next, true);
        if from > up.next {
            return End::Retry(format!(
                "the local topic is ahead of the upstream (local next offset {from}, upstream next offset {}): \
                 the upstream lost items or is another topic",
                up.next
            ));
        }
        // With the id, a topic replaced between the describe and this request is
        // refused (404) rather than read from `from`.
        let id_param = match &up.id {
            Some(id) => format!("&topic_id={id}"),
            None => String::new(),
        };
        let resp = tokio::select! {
            r = tokio::time::timeout(
                REQUEST_TIMEOUT,
                self.get(&format!("/topics/{name}/items?from={request_from}&format=jelly{id_param}")).send(),
            ) => match r {
                Ok(r) => r,
                Err(_) => return End::Retry("the upstream did not answer the subscription".into()),
            },
            _ = crate::http::wait_shutdown(&mut shutdown) => return End::Shutdown,
        };
        let resp = match resp {
            Ok(r) => r,
            Err(e) => return request_failed("cannot subscribe to the upstream", &e),
        };
        let status = resp.status();
        if status == reqwest::StatusCode::GONE {
            let first = error_body(resp).await["first_offset"]
                .as_u64()
                .unwrap_or(up.first);
            if restart {
                // Retention moved on since the describe; an empty log just follows it.
                return End::Retry(format!(
                    "the upstream's first offset moved past {from} meanwhile"
                ));
            }
            return End::Gone {
                requested: from,
                first,
            };
        }
        if !status.is_success() {
            let body = error_body(resp).await;
            return answer_failed("subscribing to the upstream", status, &body);
        }
        let start = resp
            .headers()
            .get("x-jelly-start-offset")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if start != Some(request_from) {
            return End::Retry(format!(
                "the upstream started the stream at {start:?}, not at offset {request_from}"
            ));
        }
        self.status.connects.fetch_add(1, Ordering::Relaxed);
        self.status.set_state(MirrorState::Connected);
        self.connected_at = Some(Instant::now());
        tracing::info!(topic = %self.config.topic, from, "mirror: connected");
        // The stream alone says nothing of what it has not delivered yet (a slow
        // link): the upstream's next offset is asked for beside it, for the lag.
        let _refresh = AbortOnDrop(tokio::spawn(refresh_upstream_next(
            self.get(&format!("/topics/{name}")),
            self.status.clone(),
        )));
        self.copy(resp, &topic, request_from, overlap, restart)
            .await
    }

    /// Deletes the local copy, so that the next session copies the upstream topic
    /// from its start under a new local id (its subscribers see their topic end).
    async fn start_over(&mut self) -> Result<(), String> {
        let name = self.config.topic.clone();
        let state = self.state.clone();
        let deleted = tokio::task::spawn_blocking(move || state.topics.delete_mirrored(&name))
            .await
            .map_err(|e| format!("deleting the local copy: {e}"))?;
        match deleted {
            Ok(_) | Err(crate::topic::TopicError::NotFound(_)) => {}
            Err(err) => return Err(format!("cannot delete the local copy: {err}")),
        }
        self.source = None;
        self.skip_to_first = false;
        Ok(())
    }

    /// Checks that the upstream topic is the one the local copy is of. One deleted
    /// and created again under the same name (a new id) stops the mirror, or with
    /// `on_gone = "skip"` deletes the local copy, so that the new topic is copied
    /// from its start under a new local id: its subscribers see their topic end, as
    /// the upstream's did, rather than the other topic's items spliced on at the old
    /// offsets.
    async fn check_source(&mut self, up: &Upstream) -> Result<(), End> {
        let name = self.config.topic.clone();
        if self.source.is_none() {
            self.source = self.state.topics.mirror_source(&name);
        }
        let (Some(known), Some(id)) = (&self.source, &up.id) else {
            return Ok(());
        };
        if known == id {
            return Ok(());
        }
        let e = format!(
            "the upstream topic was deleted and created again: its id is now {id}, the local \
             copy is of {known}"
        );
        if self.config.on_gone == OnGone::Stop {
            return Err(End::Fatal(format!(
                "{e}; mirroring stopped (on_gone = \"stop\"){STOPPED_HINT}"
            )));
        }
        tracing::warn!(topic = %name, error = %e, "mirror: starting the local copy over");
        self.start_over()
            .await
            .map_err(|err| End::Retry(format!("{e}; {err}")))
    }

    /// `GET /topics/{name}` on the upstream.
    async fn describe(&self, name: &str) -> Result<Upstream, End> {
        describe_upstream(self.get(&format!("/topics/{name}"))).await
    }

    /// The local topic, created with the upstream's options when missing.
    fn local_topic(&self, options: &TopicOptions) -> Result<Arc<Topic>, End> {
        let name = &self.config.topic;
        let topic = match self.state.topics.get(name) {
            Some(t) => t,
            None => match self.state.topics.create_mirrored(name, options) {
                Ok((t, _)) => t,
                Err(e) => return Err(End::Retry(format!("cannot create the local topic: {e}"))),
            },
        };
        if !topic.options().same_items(options) {
            return Err(End::Fatal(format!(
                "the local topic `{name}` has other stream options than the upstream topic \
                 (local {}, upstream {})",
                serde_json::to_string(&*topic.options()).unwrap_or_default(),
                serde_json::to_string(options).unwrap_or_default()
            )));
        }
        Ok(topic)
    }

    /// Copies items from the upstream stream into the local topic.
    async fn copy(
        &mut self,
        mut resp: reqwest::Response,
        topic: &Topic,
        from: u64,
        mut overlap: Option<Item>,
        mut restart: bool,
    ) -> End {
        let max_frame = self.state.config.max_item_bytes as u64 + METADATA_BYTES as u64;
        let mut unsplice = Unsplicer::new();
        // The stream's options row once checked against the local topic's options.
        let mut checked_options = false;
        let mut buf = BytesMut::new();
        let mut batch: Vec<Item> = Vec::new();
        let mut batch_bytes = 0usize;
        let mut expect = from;
        let mut shutdown = self.shutdown.clone();
        loop {
            // Data that is ready is taken at once; when the stream stalls, the
            // pending items are appended before waiting.
            let next = match resp.chunk().now_or_never() {
                Some(next) => next,
                None => {
                    if let Err(e) = self.append(topic, &mut batch, &mut restart).await {
                        return e;
                    }
                    batch_bytes = 0;
                    tokio::select! {
                        next = resp.chunk() => next,
                        _ = crate::http::wait_shutdown(&mut shutdown) => return End::Shutdown,
                    }
                }
            };
            let chunk = match next {
                Ok(Some(c)) => c,
                Ok(None) => {
                    return self
                        .append(topic, &mut batch, &mut restart)
                        .await
                        .err()
                        .unwrap_or_else(|| End::Retry("the upstream ended the stream".into()));
                }
                Err(e) => {
                    return self
                        .append(topic, &mut batch, &mut restart)
                        .await
                        .err()
                        .unwrap_or_else(|| {
                            End::Retry(format!("the upstream stream broke: {}", describe(&e)))
                        });
                }
            };
            buf.extend_from_slice(&chunk);
            // A bad frame ends the session, but the good items before it are kept.
            let failed = 'frames: loop {
                let (len, n) = match crate::http::publish_stream::varint(&buf) {
                    Ok(Some(v)) => v,
                    Ok(None) => break 'frames None,
                    Err(()) => {
                        break 'frames Some(End::Retry(format!("item {expect}: bad frame length")));
                    }
                };
                // Retrying would fetch the same item again and again: an operator
                // has to raise the limit (or the upstream's items are not what they seem).
                if len > max_frame {
                    break 'frames Some(End::Fatal(format!(
                        "item {expect}: a frame of {len} bytes, over this server's limit of \
                         {max_frame} (max_item_bytes and 64 KiB of metadata): give it at least \
                         the upstream's max_item_bytes"
                    )));
                }
                let len = len as usize;
                if buf.len() < n + len {
                    buf.reserve(n + len - buf.len());
                    break 'frames None;
                }
                buf.advance(n);
                let delivered = buf.split_to(len).freeze();
                let item = match unsplice.item(delivered) {
                    Ok(it) => it,
                    Err(e) => break 'frames Some(End::Retry(format!("item {expect}: {e}"))),
                };
                if !checked_options {
                    if let Err(e) = check_item_options(topic, &item.frame) {
                        break 'frames Some(End::Fatal(format!("item {expect}: {e}")));
                    }
                    checked_options = true;
                }
                let max_item = self.state.config.max_item_bytes;
                if item.frame.len() > max_item {
                    break 'frames Some(End::Fatal(format!(
                        "item {expect}: {} bytes, over this server's max_item_bytes of \
                         {max_item}: give it at least the upstream's",
                        item.frame.len()
                    )));
                }
                if item.offset != expect {
                    break 'frames Some(End::Retry(format!(
                        "the upstream sent offset {} where {expect} was expected",
                        item.offset
                    )));
                }
                expect += 1;
                // The item both sides hold: checked, not stored again.
                if let Some(local) = overlap.take() {
                    if !same_item(&local, &item) {
                        break 'frames Some(End::Diverged(format!(
                            "the upstream's item at offset {} is not the local copy's (stamped \
                             {} ms, {} bytes, upstream {} ms, {} bytes): the upstream lost \
                             items and took their offsets again",
                            item.offset,
                            local.timestamp_ms,
                            local.frame.len(),
                            item.timestamp_ms,
                            item.frame.len()
                        )));
                    }
                    continue;
                }
                batch_bytes += item.frame.len();
                batch.push(item);
                if batch.len() >= BATCH_ITEMS || batch_bytes >= BATCH_BYTES {
                    if let Err(e) = self.append(topic, &mut batch, &mut restart).await {
                        return e;
                    }
                    batch_bytes = 0;
                }
            };
            if let Some(end) = failed {
                return self
                    .append(topic, &mut batch, &mut restart)
                    .await
                    .err()
                    .unwrap_or(end);
            }
        }
    }

    /// Appends the pending items (not cancelled by shutdown: once read, they are
    /// stored before the mirror stops).
    async fn append(
        &mut self,
        topic: &Topic,
        batch: &mut Vec<Item>,
        restart: &mut bool,
    ) -> Result<(), End> {
        if batch.is_empty() {
            return Ok(());
        }
        let items = std::mem::take(batch);
        let n = items.len() as u64;
        let next = items.last().map_or(0, |i| i.offset + 1);
        topic
            .append_at(items, *restart, &self.state.metrics)
            .await
            .map_err(|e| End::Retry(format!("cannot append to the local topic: {e}")))?;
        *restart = false;
        self.skip_to_first = false;
        self.status.items.fetch_add(n, Ordering::Relaxed);
        self.status.set_upstream_next(next, false);
        Ok(())
    }
}

/// How often a connected mirror asks the upstream for its next offset.
const LAG_REFRESH: Duration = Duration::from_secs(5);

/// Aborts a task when dropped: the task lives as long as the value.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Asks the upstream for its topic's next offset every [`LAG_REFRESH`], for the
/// mirror's lag; runs until aborted. A failed request is left to the stream, which
/// breaks by itself when the upstream is gone.
async fn refresh_upstream_next(request: reqwest::RequestBuilder, status: Arc<MirrorStatus>) {
    loop {
        tokio::time::sleep(LAG_REFRESH).await;
        let Some(req) = request.try_clone() else {
            return;
        };
        if let Ok(up) = describe_upstream(req).await {
            status.set_upstream_next(up.next, false);
            status.set_upstream_stopped(up.stopped);
        }
    }
}

/// How a session whose request to the upstream (`what`) failed ends: refused when the
/// upstream's certificate is not trusted (saying where the trusted authorities come
/// from), else retried.
fn request_failed(what: &str, e: &reqwest::Error) -> End {
    let why = format!("{what}: {}", describe(e));
    if crate::tls::is_certificate_error(e) {
        End::Refused(format!(
            "{why} (the mirror's `ca` / --mirror-ca names the authorities it trusts)"
        ))
    } else {
        End::Retry(why)
    }
}

/// How a session whose request (`what`) got an error answer ends: refused on a 401 or
/// 403 (the upstream does not let this server in: its token), else retried.
fn answer_failed(what: &str, status: reqwest::StatusCode, body: &Value) -> End {
    let why = format!(
        "{what}: HTTP {status}: {}",
        body["error"].as_str().unwrap_or("")
    );
    match status {
        reqwest::StatusCode::UNAUTHORIZED | reqwest::StatusCode::FORBIDDEN => End::Refused(why),
        _ => End::Retry(why),
    }
}

/// `GET /topics/{name}` on the upstream (`request`).
async fn describe_upstream(request: reqwest::RequestBuilder) -> Result<Upstream, End> {
    let resp = request
        .timeout(REQUEST_TIMEOUT)
        .send()
        .await
        .map_err(|e| request_failed("cannot reach the upstream", &e))?;
    let status = resp.status();
    if !status.is_success() {
        let body = error_body(resp).await;
        return Err(answer_failed(
            "describing the upstream topic",
            status,
            &body,
        ));
    }
    let body = read_capped(resp, DESCRIBE_BYTES)
        .await
        .map_err(|e| End::Retry(format!("describing the upstream topic: {e}")))?;
    let v: Value = serde_json::from_slice(&body)
        .map_err(|e| End::Retry(format!("describing the upstream topic: {e}")))?;
    // An answer without options is not a topic description (the wrong service
    // behind a proxy, say): retried like any unusable answer. Options that are
    // there but not understood need an operator.
    if !v["options"].is_object() {
        return Err(End::Retry(
            "the upstream's answer is not a topic description (no `options`)".into(),
        ));
    }
    let options: TopicOptions = serde_json::from_value(v["options"].clone()).map_err(|e| {
        End::Fatal(format!(
            "the upstream topic's options are not understood: {e}"
        ))
    })?;
    let offset = |k: &str| {
        v[k].as_u64()
            .ok_or_else(|| End::Retry(format!("the upstream topic description has no `{k}`")))
    };
    Ok(Upstream {
        options,
        first: offset("first_offset")?,
        next: offset("next_offset")?,
        id: v["id"].as_str().map(str::to_string),
        stopped: upstream_stopped(&v),
    })
}

/// Longest reason kept from an upstream's description for [`upstream_stopped`].
const UPSTREAM_STOPPED_CHARS: usize = 2048;

/// Why an upstream topic gets no new items, from its description: it is a mirror
/// that stopped (its `mirror.state`), or one whose own upstream did (its
/// `mirror.upstream_stopped`, passed on as it is, so the reason stays the same down
/// a chain of any length). `None` for a topic that is no mirror or whose mirror runs.
fn upstream_stopped(description: &Value) -> Option<String> {
    let m = description.get("mirror")?;
    let why = if m["state"] == "stopped" {
        format!(
            "the upstream topic is a mirror of {}/topics/{} that stopped: {}",
            m["upstream"].as_str().unwrap_or("?"),
            m["upstream_topic"].as_str().unwrap_or("?"),
            m["last_error"].as_str().unwrap_or("no reason given")
        )
    } else {
        m["upstream_stopped"].as_str()?.to_string()
    };
    Some(why.chars().take(UPSTREAM_STOPPED_CHARS).collect())
}

/// Whether an upstream item is the local copy of it: the same stored frame, stamp and
/// metadata (a mirror stores the upstream's items exactly).
fn same_item(local: &Item, upstream: &Item) -> bool {
    local.offset == upstream.offset
        && local.timestamp_ms == upstream.timestamp_ms
        && local.frame == upstream.frame
        && local.source == upstream.source
        && local.headers == upstream.headers
}

/// What an operator does about a stopped mirror, after its reason.
const STOPPED_HINT: &str = ": to copy the upstream topic again, stop this server, remove the \
    local topic's folder (or the `[[mirror]]` table) and start it again";

/// Checks that a copied item's stream options (its options row) are what the local
/// topic's items must have: the physical type and features its readers expect. The
/// upstream's description said so; its frames must agree, or the copies would be
/// items that the topic's subscribers cannot read.
fn check_item_options(topic: &Topic, frame: &[u8]) -> Result<(), String> {
    let got = crate::grpc::publish::first_frame_options(frame)?;
    let want = topic.options().stream_options();
    if got.physical_type != want.physical_type
        || got.rdf_star != want.rdf_star
        || got.generalized_statements != want.generalized_statements
    {
        return Err(format!(
            "its stream options ({:?}, rdf_star {}, generalized {}) are not the topic's \
             ({:?}, rdf_star {}, generalized {}): the upstream's items do not match its \
             description",
            got.physical_type,
            got.rdf_star,
            got.generalized_statements,
            want.physical_type,
            want.rdf_star,
            want.generalized_statements
        ));
    }
    Ok(())
}

/// The JSON body of an error answer (`Null` if there is none).
async fn error_body(resp: reqwest::Response) -> Value {
    match read_capped(resp, ERROR_BYTES).await {
        Ok(b) => serde_json::from_slice(&b).unwrap_or(Value::Null),
        Err(_) => Value::Null,
    }
}

/// A response body of at most `max` bytes.
async fn read_capped(mut resp: reqwest::Response, max: usize) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    while let Some(c) = resp.chunk().await.map_err(|e| describe(&e))? {
        if out.len() + c.len() > max {
            return Err(format!("answer over {max} bytes"));
        }
        out.extend_from_slice(&c);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use jelly::{Encoder, PhysicalType, StatementRef, StreamOptions, TermRef};

    fn frame(physical: PhysicalType) -> Vec<u8> {
        let mut enc = Encoder::new(StreamOptions::big().with_physical_type(physical)).unwrap();
        let (s, p, o) = (
            TermRef::Iri("http://ex.org/s"),
            TermRef::Iri("http://ex.org/p"),
            TermRef::Iri("http://ex.org/o"),
        );
        let st = match physical {
            PhysicalType::Triples => StatementRef::triple(s, p, o),
            _ => StatementRef::quad(s, p, o, TermRef::Iri("http://ex.org/g")),
        };
        enc.add(st).unwrap();
        enc.finish_frame()
    }

    /// The client's connections get the mirror's keepalive: read back from the
    /// kernel's keepalive timer of the connection (Linux `/proc/net/tcp`), which
    /// counts down from the idle time once the request is acknowledged.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn the_client_keeps_its_connections_alive_as_configured() {
        use tokio::io::AsyncReadExt as _;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        // (timer kind, time left in 1/100 s) of the connection to the listener.
        let timer = || {
            let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
            table.lines().skip(1).find_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let remote_port = u16::from_str_radix(f[2].split(':').nth(1)?, 16).ok()?;
                let (kind, left) = f[5].split_once(':')?;
                (remote_port == port && f[3] == "01")
                    .then(|| (kind.to_string(), u64::from_str_radix(left, 16).unwrap_or(0)))
            })
        };
        let mut mirror =
            MirrorConfig::from_topic_url(&format!("http://127.0.0.1:{port}/topics/t")).unwrap();
        mirror.keepalive_ms = 100_000;
        let c = client(&mirror).unwrap();
        let request = tokio::spawn(c.get(format!("http://127.0.0.1:{port}/")).send());
        let (mut conn, _) = listener.accept().await.unwrap();
        let mut head = [0u8; 1024];
        let _ = conn.read(&mut head).await.unwrap();
        // Once the request is acknowledged the keepalive timer runs: 100 s of it,
        // far more than the 15 s default.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            match timer() {
                Some((kind, left)) if kind == "02" => {
                    assert!(left > 5_000, "{left}");
                    break;
                }
                t => assert!(std::time::Instant::now() < deadline, "{t:?}"),
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        request.abort();
    }

    /// A stopped mirror upstream is reported with its reason, and passed on unchanged
    /// from further up; a running mirror or a plain topic is not.
    #[test]
    fn a_stopped_mirror_upstream_is_read_from_its_description() {
        let stopped = serde_json::json!({"mirror": {
            "upstream": "http://a:1", "upstream_topic": "t", "state": "stopped",
            "last_error": "item 1: too big", "upstream_stopped": null}});
        let why = upstream_stopped(&stopped).unwrap();
        assert!(
            why.contains("http://a:1/topics/t") && why.ends_with("item 1: too big"),
            "{why}"
        );
        let below = serde_json::json!({"mirror": {"state": "connected", "upstream_stopped": why}});
        assert_eq!(upstream_stopped(&below).as_deref(), Some(why.as_str()));
        let running =
            serde_json::json!({"mirror": {"state": "connected", "upstream_stopped": null}});
        assert_eq!(upstream_stopped(&running), None);
        assert_eq!(upstream_stopped(&serde_json::json!({"name": "t"})), None);
    }

    /// Copied items must have the stream options the local topic's readers expect.
    #[test]
    fn copied_items_must_match_the_topics_options() {
        let r = crate::topic::Registry::open(&crate::ServerConfig::ephemeral()).unwrap();
        let triples = TopicOptions {
            physical: crate::topic::Physical::Triples,
            ..TopicOptions::default()
        };
        let (t, _) = r.create("t", Some(triples)).unwrap();
        assert!(check_item_options(&t, &frame(PhysicalType::Triples)).is_ok());
        let e = check_item_options(&t, &frame(PhysicalType::Quads)).unwrap_err();
        assert!(e.contains("do not match its description"), "{e}");
        assert!(check_item_options(&t, b"\x0a\x00").is_err());
    }
}
