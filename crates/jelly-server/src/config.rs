//! Server configuration: embedded defaults, optionally overridden by a TOML file and
//! then by command-line flags.
//!
//! ```toml
//! listen = "127.0.0.1:8686"
//! data = "./data"
//! log = "file"              # or "memory" (lost on restart)
//! durability = "fsync"      # fsync | interval:<ms> | none
//! segment_bytes = 67108864
//! tail_cache_bytes = 33554432        # file log: each topic's newest items kept in memory for live readers; 0: none
//! max_tail_cache_bytes = 1073741824  # what those caches hold together, server-wide; 0: unlimited
//! max_body_bytes = 67108864
//! max_item_bytes = 16777216
//! max_publish_memory_bytes = 1073741824  # bodies and items of atomic publishes in progress, server-wide (then 503); default: 1 GiB, or 6 × max_body_bytes if more; 0: unlimited
//! max_connections_per_ip = 0  # 0: unlimited; over it new connections are closed at once
//! max_publishes_per_connection = 4  # publishes at once on one (HTTP/2) connection; 0: unlimited
//! max_topics = 10000          # more topics are refused (507) until one is deleted; 0: unlimited
//! reuse_port = false          # SO_REUSEPORT: several servers may share the port
//! cors_origins = []           # browser pages allowed to read the API from other origins; "*": any
//! header_read_timeout_ms = 30000  # a request head (and a connection's first request); 0: none
//! body_read_timeout_ms = 60000    # longest pause in an atomic publish's body (then 408); 0: none
//! body_min_bytes_per_s = 1024     # slowest average rate of that body, after the first body_read_timeout_ms; 0: none
//! http2_keepalive_ms = 60000      # HTTP/2: PING a quiet connection (dropped without an answer)
//! http2_max_concurrent_streams = 200  # HTTP/2: requests open at once on one connection
//! tcp_keepalive_ms = 60000        # TCP keepalive probes on a quiet connection; 0: off
//! send_timeout_ms = 120000        # sent data unacknowledged this long drops the connection (default: keepalive's give-up time); 0: off
//!
//! [topic_defaults]
//! physical = "quads"        # triples | quads
//! logical = "datasets"      # flat-triples, flat-quads, graphs, datasets, named-graphs, …
//! retention_items = 1000000
//! retention_bytes = 0       # default 0 (no limit) with the file log, 256 MiB with the memory log
//!
//! [[mirror]]                # a repeater: copy a topic of another jellyfish server
//! topic = "weather"         # the local topic
//! upstream = "http://origin:8686"
//! upstream_topic = "weather"  # default: the same name
//! token = "…"               # optional bearer token for the upstream
//! on_gone = "stop"          # or "skip" (see `MirrorConfig::on_gone`)
//! keepalive_ms = 15000      # TCP keepalive probes to the upstream; 0: off
//! [tls]                     # absent: plain TCP
//! cert = "cert.pem"         # PEM chain, leaf first
//! key = "key.pem"
//!
//! [auth]                    # absent: an open server (see `auth`)
//! tokens = [ { name = "ingest", token = "…", publish = ["sensors.*"], subscribe = [] } ]
//! token_file = "tokens.toml"
//! anonymous_subscribe = ["public.*"]
//! ```
//!
//! Relative paths (`data`, the TLS files, `token_file`) are relative to the working
//! directory of the server.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;

use crate::auth::AuthConfig;
use crate::tls::TlsConfig;
use crate::topic::TopicOptions;

/// Which log implementation backs topics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum LogKind {
    /// Durable segment files under the data directory (the default).
    #[default]
    File,
    /// In memory: lost on restart (tests, demos).
    Memory,
}

/// Everything `jelly serve` can be told.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Address to listen on (port 0 picks a free port).
    #[serde(deserialize_with = "deserialize_listen_address")]
    pub listen: SocketAddr,
    /// Directory of the durable logs (one sub-directory per topic).
    pub data: PathBuf,
    /// Log implementation of the topics.
    pub log: LogKind,
    /// File log: `fsync` (default), `interval:<ms>` or `none`.
    pub durability: String,
    /// File log: size at which a new segment starts.
    pub segment_bytes: u64,
    /// File log: bytes of each topic's newest items kept in memory, so that live
    /// subscribers are served without a file read (0: none).
    pub tail_cache_bytes: usize,
    /// File log: what the tail caches of all topics hold together (0: no bound). A
    /// topic that adds to its cache while they hold more gives up its own oldest
    /// cached items, which are then read from its segments (see
    /// [`crate::log::TailCachePool`]).
    pub max_tail_cache_bytes: usize,
    /// Largest accepted request body, in bytes.
    pub max_body_bytes: usize,
    /// Largest accepted item (its self-contained Jelly frame), in bytes.
    pub max_item_bytes: usize,
    /// What atomic publishes in progress may hold in all, server-wide: their bodies
    /// and the items made from them, until appended (see [`crate::publish_memory`]).
    /// A publish that would pass it is refused (503, `Retry-After`). At least
    /// [`crate::publish_memory::one_publish_at_most`] of `max_body_bytes`; 0: no limit;
    /// unset: [`DEFAULT_PUBLISH_MEMORY_BYTES`], or that minimum if more (see
    /// [`ServerConfig::publish_memory_bytes`]).
    pub max_publish_memory_bytes: Option<usize>,
    /// Create a topic on its first publish (otherwise `PUT /topics/{name}` first).
    pub auto_create_topics: bool,
    /// Most topics the server holds (unavailable ones included). Each topic has a
    /// directory, open files and, with the file log, a writer thread: without a bound,
    /// publishes to ever new names (auto-creation) would use them up. Creating one
    /// more is refused (507) until a topic is deleted. 0: no limit.
    pub max_topics: usize,
    /// Options of topics created without explicit options (as resolved by
    /// [`ServerConfig::default_topic_options`]): `retention_bytes` left unset is
    /// [`MEMORY_RETENTION_BYTES`] with the memory log and 0 (no bound) with the file
    /// log, however the configuration was made.
    pub topic_defaults: TopicDefaults,
    /// Items per read while delivering (bounds the memory of one subscription step).
    pub delivery_batch_items: usize,
    /// Seconds between SSE keep-alive comments.
    pub sse_keepalive_secs: u64,
    /// Fan-out: most blocks a group keeps for subscribers that lag behind it.
    pub fanout_ring_blocks: usize,
    /// Fan-out: most bytes of blocks a group keeps (the newest block is always kept).
    pub fanout_ring_bytes: usize,
    /// Most open connections from one client address (0: no limit). A connection
    /// over the limit is closed as soon as it is accepted.
    pub max_connections_per_ip: usize,
    /// Most publishes in progress at once on one connection (0: no limit): atomic and
    /// streaming `POST`s, WebSocket publish sockets (over HTTP/2) and `PublishRdf`
    /// calls. One more is refused (HTTP 429, gRPC `RESOURCE_EXHAUSTED`). An HTTP/1
    /// connection runs one request at a time, but an HTTP/2 connection runs up to
    /// `http2_max_concurrent_streams`, and each publish may buffer a whole message or
    /// body: 50 `PublishRdf` calls that each stalled one byte short of a 16 MiB
    /// message held 820 MB.
    pub max_publishes_per_connection: usize,
    /// `SO_REUSEPORT` on the listener, so several servers can share one port.
    pub reuse_port: bool,
    /// Runtime worker threads (0: one per CPU). See [`crate::runtime`].
    pub worker_threads: usize,
    /// Run on one worker thread that polls for I/O instead of sleeping between items:
    /// lower latency for sparse items (up to `busy_poll_idle_ms` apart), at the cost
    /// of one CPU kept busy while they flow. See
    /// [`crate::runtime`].
    pub busy_poll: bool,
    /// With `busy_poll`: stop polling after this many milliseconds without an append
    /// or a new connection, until the next one (0: poll at all times). See
    /// [`crate::runtime`].
    pub busy_poll_idle_ms: u64,
    /// Bearer tokens and rights; `None`: everything is open.
    pub auth: Option<AuthConfig>,
    /// TLS on the listener; `None`: plain TCP.
    pub tls: Option<TlsConfig>,
    /// Topics copied from other servers (`[[mirror]]` tables).
    #[serde(rename = "mirror")]
    pub mirrors: Vec<MirrorConfig>,
    /// Origins (`https://app.example.org`) whose browser pages may read and write the
    /// HTTP API across origins (CORS), for example an `EventSource` on `/sse`; `"*"`
    /// allows any origin. Empty (the default): no CORS headers, so only pages served
    /// from the server's own origin can read its answers.
    pub cors_origins: Vec<String>,
    /// Longest wait, in milliseconds, for a request's head: on HTTP/1, the request
    /// line and headers (also the wait for the next request on an idle keep-alive
    /// connection); on any connection, its first request. A client that takes longer
    /// is disconnected without an answer. Without it, a client that sends half a
    /// request holds a connection (and a file descriptor) for ever (slowloris).
    /// 0: no limit.
    pub header_read_timeout_ms: u64,
    /// On shutdown (SIGTERM, Ctrl-C), how long connections get, in milliseconds, to
    /// finish the requests they are in (publishes are answered, subscriptions told)
    /// before they are closed regardless; a client that stalls a request (a body
    /// that never comes) cannot hold the server up for longer. 0: wait for them.
    pub shutdown_grace_ms: u64,
    /// Longest pause, in milliseconds, in the body of an atomic publish (`POST
    /// /topics/{name}/items`): no body bytes for this long is answered with 408.
    /// Long-lived bodies (a streaming publish, WebSocket, gRPC) may be quiet for any
    /// time between their frames or messages, but one they have started may pause
    /// this long at most: see [`crate::http`]. 0: no limit.
    pub body_read_timeout_ms: u64,
    /// Slowest average rate, in bytes per second, at which the body of an atomic
    /// publish may arrive. The body is due `body_read_timeout_ms` after the server
    /// starts reading it, plus one second for every this many bytes received, each
    /// piece earning from at most `body_read_timeout_ms` after its arrival (so a fast
    /// start banks no time for a later drip); a body still incomplete then is answered
    /// with 408. Without it, a client that sends one byte just inside every
    /// `body_read_timeout_ms` pause holds the connection for as long as the body is
    /// long (64 MiB at one byte a minute: over a century). The default (1 KiB/s) lets
    /// any real link through; a body produced slowly belongs in a streaming publish.
    /// 0: no limit.
    pub body_min_bytes_per_s: u64,
    /// HTTP/2: a connection that has received nothing for this many milliseconds is
    /// sent a PING, and closed if the answer takes over 20 s, so that dead peers
    /// (long-lived subscriptions and publishes included) are dropped. 0: off.
    pub http2_keepalive_ms: u64,
    /// HTTP/2: most requests (streams) open at once on one connection, announced to
    /// the client (`SETTINGS_MAX_CONCURRENT_STREAMS`); a stream over it is refused
    /// (`REFUSED_STREAM`, which clients retry). Each live subscription on a client
    /// that stopped reading holds one batch of output, so this multiplies what one
    /// connection can hold: 200 stalled `SubscribeRdf` streams held 50–100 MB.
    pub http2_max_concurrent_streams: u32,
    /// TCP keepalive: a connection that has carried nothing for this many
    /// milliseconds is probed by the kernel (4 probes, a quarter of this apart, at
    /// least 1 s) and closed when the peer does not answer, so a peer that vanished
    /// without closing (a host that lost power or network) does not hold a connection,
    /// a subscription or a streaming publish for ever. Covers HTTP/1, where nothing
    /// else checks a quiet connection. 0: off.
    pub tcp_keepalive_ms: u64,
    /// Linux: the longest time, in milliseconds, that data sent on a connection may
    /// stay unacknowledged (`TCP_USER_TIMEOUT`) before the connection is dropped. A
    /// peer that vanished in the middle of a busy stream is then dropped as soon as a
    /// quiet one is by keepalive (the kernel would otherwise retransmit for about 15
    /// minutes), and so is one that reads nothing while data waits for it (its
    /// receive buffer full): a send timeout. A subscriber resumes from its offset.
    /// `None` (not given): the time keepalive takes to give up on a quiet peer
    /// ([`keepalive_give_up_ms`] of `tcp_keepalive_ms`, about twice it; off when that
    /// is off), worked out where it is used ([`ServerConfig::send_timeout`]), so it
    /// follows a `tcp_keepalive_ms` set in code as it does one set in a file. `Some(0)`:
    /// off.
    pub send_timeout_ms: Option<u64>,
}

/// `[topic_defaults]`: the options of topics created without options of their own.
/// The fields of [`TopicOptions`], except that `retention_bytes` may be left unset
/// (`None`), for a default that depends on the log ([`TopicDefaults::options`]).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TopicDefaults {
    /// As [`TopicOptions::physical`].
    pub physical: crate::topic::Physical,
    /// As [`TopicOptions::logical`].
    #[serde(deserialize_with = "crate::topic::name_or_number")]
    pub logical: Option<String>,
    /// As [`TopicOptions::rdf_star`].
    pub rdf_star: bool,
    /// As [`TopicOptions::generalized`].
    pub generalized: bool,
    /// As [`TopicOptions::retention_items`].
    pub retention_items: u64,
    /// As [`TopicOptions::retention_bytes`]; `None`: [`MEMORY_RETENTION_BYTES`] with
    /// the memory log, 0 (no bound) with the file log. `Some(0)`: no bound.
    pub retention_bytes: Option<u64>,
    /// As [`TopicOptions::retention_ms`].
    pub retention_ms: u64,
}

impl Default for TopicDefaults {
    fn default() -> Self {
        let o = TopicOptions::default();
        TopicDefaults {
            physical: o.physical,
            logical: o.logical,
            rdf_star: o.rdf_star,
            generalized: o.generalized,
            retention_items: o.retention_items,
            retention_bytes: None,
            retention_ms: o.retention_ms,
        }
    }
}

impl TopicDefaults {
    /// The options a new topic gets on a server whose topics use `log`.
    pub fn options(&self, log: LogKind) -> TopicOptions {
        TopicOptions {
            physical: self.physical,
            logical: self.logical.clone(),
            rdf_star: self.rdf_star,
            generalized: self.generalized,
            retention_items: self.retention_items,
            retention_bytes: self.retention_bytes.unwrap_or(match log {
                LogKind::Memory => MEMORY_RETENTION_BYTES,
                LogKind::File => 0,
            }),
            retention_ms: self.retention_ms,
        }
    }
}

/// Reads a listen address: an IP address and a port (`127.0.0.1:8686`,
/// `0.0.0.0:8686`, `[::1]:8686`), for `listen` and `jelly serve --listen`.
///
/// Why not `SocketAddr`'s parser alone: its error, "invalid socket address syntax",
/// does not say what is wrong with the likely mistakes: a host name such as
/// `localhost:8686` (not looked up: a server binds the address it is told, not
/// whichever one a resolver gives first) or a port alone.
pub fn parse_listen_address(s: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = s.parse() {
        return Ok(a);
    }
    let examples = |port: &str| {
        format!(
            "e.g. 127.0.0.1:{port} (this host only), 0.0.0.0:{port} (every IPv4 interface) \
             or [::1]:{port}"
        )
    };
    let port = s.strip_prefix(':').unwrap_or(s);
    if port.parse::<u16>().is_ok() {
        return Err(format!(
            "`{s}` is a port alone: give an IP address and the port, {}",
            examples(port)
        ));
    }
    match s.rsplit_once(':') {
        Some((host, port)) if port.parse::<u16>().is_ok() && !host.is_empty() => Err(format!(
            "`{s}`: `{host}` is not an IP address (host names are not looked up): {}",
            examples(port)
        )),
        _ => Err(format!(
            "`{s}` is not an IP address and port: {}",
            examples("8686")
        )),
    }
}

/// `listen` of the configuration file, read by [`parse_listen_address`].
fn deserialize_listen_address<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<SocketAddr, D::Error> {
    let s = String::deserialize(d)?;
    parse_listen_address(&s).map_err(serde::de::Error::custom)
}

/// How long TCP keepalive with an idle time of `keepalive_ms` takes to drop a peer
/// that does not answer: the idle time, then 4 probes a quarter of it apart (at
/// least 1 s). 0 when keepalive is off.
pub fn keepalive_give_up_ms(keepalive_ms: u64) -> u64 {
    if keepalive_ms == 0 {
        return 0;
    }
    keepalive_ms.saturating_add(4 * (keepalive_ms / 4).max(1000))
}

/// What a mirror does when the upstream no longer retains the next item it needs
/// (it was down or behind for longer than the upstream's retention).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum OnGone {
    /// Stop mirroring the topic and report it (`GET /topics/{name}`, `/metrics`).
    #[default]
    Stop,
    /// Drop the local items and go on from the upstream's first retained offset
    /// (offsets stay the upstream's; the skipped items are lost here).
    Skip,
}

/// One mirrored topic (a `[[mirror]]` table, or `jelly serve --mirror`).
#[derive(Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct MirrorConfig {
    /// The local topic: created with the upstream topic's options, then written only
    /// by the mirror.
    pub topic: String,
    /// The upstream server's base URL, `http://host:port` (a path prefix is kept).
    pub upstream: String,
    /// The topic's name on the upstream (default: `topic`).
    #[serde(default)]
    pub upstream_topic: Option<String>,
    /// Sent as `Authorization: Bearer <token>` to the upstream.
    #[serde(default)]
    pub token: Option<String>,
    /// PEM file of certificate authorities to trust for an `https://` upstream, in
    /// addition to the system's (for an upstream with a private CA).
    #[serde(default)]
    pub ca: Option<PathBuf>,
    /// See [`OnGone`].
    #[serde(default)]
    pub on_gone: OnGone,
    /// TCP keepalive on the connection to the upstream, in milliseconds: probes after
    /// this long without traffic (3 probes, a third of it apart, at least 1 s), so a
    /// vanished upstream of a quiet topic is noticed after about twice this and the
    /// mirror reconnects, where the stream alone would wait for ever. 0: off.
    #[serde(default = "default_mirror_keepalive_ms")]
    pub keepalive_ms: u64,
}

/// [`MirrorConfig::keepalive_ms`] when not given: 15 s, so a dead upstream is found in
/// about 30 s.
pub const MIRROR_KEEPALIVE_MS: u64 = 15_000;

fn default_mirror_keepalive_ms() -> u64 {
    MIRROR_KEEPALIVE_MS
}

impl std::fmt::Debug for MirrorConfig {
    /// Everything but the token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MirrorConfig")
            .field("topic", &self.topic)
            .field("upstream", &self.upstream)
            .field("upstream_topic", &self.upstream_topic)
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("ca", &self.ca)
            .field("on_gone", &self.on_gone)
            .field("keepalive_ms", &self.keepalive_ms)
            .finish()
    }
}

impl MirrorConfig {
    /// From `URL/topics/NAME[=LOCAL]` (the `--mirror` flag): upstream `URL`, upstream
    /// topic `NAME`, local topic `LOCAL` (default `NAME`).
    pub fn from_topic_url(spec: &str) -> Result<MirrorConfig, String> {
        let bad = || {
            format!(
                "bad mirror `{spec}`: expected http(s)://host:port/topics/NAME or …/topics/NAME=LOCAL"
            )
        };
        if spec.contains(['?', '#']) {
            return Err(format!(
                "bad mirror `{spec}`: the URL has a query or fragment; a mirror takes \
                 http(s)://host:port/topics/NAME (or …/topics/NAME=LOCAL) and nothing after"
            ));
        }
        let (upstream, rest) = spec.rsplit_once("/topics/").ok_or_else(bad)?;
        let (name, local) = match rest.split_once('=') {
            Some((n, l)) => (n, l),
            None => (rest, rest),
        };
        let c = MirrorConfig {
            topic: local.to_string(),
            upstream: upstream.to_string(),
            upstream_topic: Some(name.to_string()),
            token: None,
            ca: None,
            on_gone: OnGone::Stop,
            keepalive_ms: MIRROR_KEEPALIVE_MS,
        };
        c.check()?;
        Ok(c)
    }

    /// The topic's name on the upstream.
    pub fn upstream_topic(&self) -> &str {
        self.upstream_topic.as_deref().unwrap_or(&self.topic)
    }

    /// The upstream base URL, checked: `http` or `https`, with a host.
    pub fn upstream_url(&self) -> Result<reqwest::Url, String> {
        let u = reqwest::Url::parse(&self.upstream).map_err(|e| {
            format!(
                "mirror of `{}`: bad upstream URL `{}`: {e}",
                self.topic, self.upstream
            )
        })?;
        if !matches!(u.scheme(), "http" | "https") || u.host().is_none() {
            return Err(format!(
                "mirror of `{}`: upstream `{}` must be an http(s)://host:port URL",
                self.topic, self.upstream
            ));
        }
        // It would be shown wherever the upstream is (topic descriptions, metrics,
        // error answers, logs), and the server takes bearer tokens anyway.
        if !u.username().is_empty() || u.password().is_some() {
            return Err(format!(
                "mirror of `{}`: upstream `{}` has a user name or password in it; give \
                 the upstream's bearer token as `token` (--mirror-token) instead",
                self.topic,
                redacted(&u)
            ));
        }
        if u.query().is_some() || u.fragment().is_some() {
            return Err(format!(
                "mirror of `{}`: upstream `{}` must not have a query or fragment",
                self.topic, self.upstream
            ));
        }
        Ok(u)
    }

    /// The keepalive idle time on the connection to the upstream (`None`: off).
    pub fn keepalive(&self) -> Option<std::time::Duration> {
        millis(self.keepalive_ms)
    }

    /// Checks names, the URL and the keepalive.
    pub fn check(&self) -> Result<(), String> {
        if self.keepalive_ms > MAX_TCP_KEEPALIVE_MS {
            return Err(format!(
                "mirror of `{}`: keepalive_ms = {}: at most {MAX_TCP_KEEPALIVE_MS} (32,767 s; 0: off)",
                self.topic, self.keepalive_ms
            ));
        }
        for (what, name) in [
            ("topic", &self.topic[..]),
            ("upstream_topic", self.upstream_topic()),
        ] {
            if !crate::topic::valid_name(name) {
                return Err(format!("mirror: invalid {what} name `{name}`"));
            }
        }
        self.upstream_url().map(|_| ())
    }
}

/// `u` with its password, if any, replaced by `***`, for messages.
fn redacted(u: &reqwest::Url) -> String {
    let mut u = u.clone();
    if u.password().is_some() {
        let _ = u.set_password(Some("***"));
    }
    u.to_string()
}

/// The byte bound of a memory topic when `topic_defaults.retention_bytes` is not
/// given (with `log = "memory"`; the file log's default is 0, no bound).
///
/// Without it a memory topic could hold `retention_items` (1,000,000) items of up to
/// `max_item_bytes` (16 MiB) each, far more than any machine's memory: a publisher
/// could take the server down by publishing. 256 MiB holds about 100,000 items of a
/// few KB (a 50-statement item is about 2.5 KB) and keeps the worst case at 256 MiB
/// times the number of topics; a server with many memory topics should set less. An
/// explicit `retention_bytes = 0` still means no bound.
pub const MEMORY_RETENTION_BYTES: u64 = 256 << 20;

/// The line of `text` (a TOML file) that sets the key a check's `message` is about:
/// of the keys set in the file that the message names as words, the one it names
/// first (messages start with the key they refuse), at its first line. `None` when
/// the message names none of them.
fn line_of_key_in(text: &str, message: &str) -> Option<usize> {
    let word_at = |key: &str| {
        message.match_indices(key).map(|(i, _)| i).find(|&i| {
            let before = message[..i].chars().next_back();
            let after = message[i + key.len()..].chars().next();
            let edge = |c: Option<char>| !c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
            edge(before) && edge(after)
        })
    };
    text.lines()
        .enumerate()
        .filter_map(|(n, line)| {
            let (key, _) = line.trim_start().split_once('=')?;
            let key = key.trim().trim_matches('"');
            if key.is_empty() || key.starts_with('#') || key.starts_with('[') {
                return None;
            }
            Some((word_at(key)?, n + 1))
        })
        .min_by_key(|&(at, line)| (at, line))
        .map(|(_, line)| line)
}

/// What atomic publishes in progress may hold in all when
/// `max_publish_memory_bytes` is not set (unless one publish of `max_body_bytes` may
/// hold more: then that).
pub const DEFAULT_PUBLISH_MEMORY_BYTES: usize = 1 << 30;

/// The most runtime worker threads a configuration may ask for.
pub const MAX_WORKER_THREADS: usize = 1024;

/// The longest TCP keepalive idle time Linux accepts, in milliseconds.
pub const MAX_TCP_KEEPALIVE_MS: u64 = 32_767_000;

/// The longest `TCP_USER_TIMEOUT` Linux accepts (a C `int` of milliseconds, about
/// 24.8 days).
pub const MAX_SEND_TIMEOUT_MS: u64 = i32::MAX as u64;

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 8686)),
            data: PathBuf::from("./data"),
            log: LogKind::File,
            durability: "fsync".into(),
            segment_bytes: 64 << 20,
            tail_cache_bytes: 32 << 20,
            max_tail_cache_bytes: 1 << 30,
            max_body_bytes: 64 << 20,
            max_item_bytes: 16 << 20,
            max_publish_memory_bytes: None,
            auto_create_topics: true,
            max_topics: 10_000,
            topic_defaults: TopicDefaults::default(),
            delivery_batch_items: 256,
            sse_keepalive_secs: 15,
            mirrors: Vec::new(),
            max_connections_per_ip: 0,
            max_publishes_per_connection: 4,
            reuse_port: false,
            worker_threads: 0,
            busy_poll: false,
            busy_poll_idle_ms: 10_000,
            auth: None,
            tls: None,
            fanout_ring_blocks: 256,
            fanout_ring_bytes: 4 << 20,
            cors_origins: Vec::new(),
            header_read_timeout_ms: 30_000,
            shutdown_grace_ms: 10_000,
            body_read_timeout_ms: 60_000,
            body_min_bytes_per_s: 1024,
            http2_keepalive_ms: 60_000,
            http2_max_concurrent_streams: 200,
            tcp_keepalive_ms: 60_000,
            send_timeout_ms: None,
        }
    }
}

/// A configuration file that could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parse { path: String, message: String },
}

impl ServerConfig {
    /// A configuration for tests: memory log (with its default byte bound,
    /// [`MEMORY_RETENTION_BYTES`]), port 0 on loopback.
    pub fn ephemeral() -> Self {
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            log: LogKind::Memory,
            ..Default::default()
        }
    }

    /// The options of a topic created without options of its own: `topic_defaults`
    /// with the defaults that depend on the log filled in.
    pub fn default_topic_options(&self) -> TopicOptions {
        self.topic_defaults.options(self.log)
    }

    /// Parses TOML text (missing keys keep their defaults, see
    /// [`MEMORY_RETENTION_BYTES`] for the one that depends on the log).
    pub fn from_toml(text: &str, path: &str) -> Result<Self, ConfigError> {
        let parse_error = |e: toml::de::Error| ConfigError::Parse {
            path: path.to_string(),
            message: e.to_string(),
        };
        let c: ServerConfig = toml::from_str(text).map_err(parse_error)?;
        c.check().map_err(|m| ConfigError::Parse {
            path: match line_of_key_in(text, &m) {
                Some(line) => format!("{path}, line {line}"),
                None => path.to_string(),
            },
            message: m,
        })?;
        Ok(c)
    }

    /// Parses TOML text (as [`ServerConfig::from_toml`]), then applies `sets` over it:
    /// `KEY=VALUE` settings (`jelly serve --set`), where the key is one of the file's,
    /// dotted for a key of a table (`topic_defaults.retention_ms`), and the value is
    /// written as in the file (`128`, `true`, `"none"`). A value that is not TOML is
    /// taken as a string, so `durability=none` works without quotes.
    ///
    /// ```
    /// use jelly_server::ServerConfig;
    /// let sets = ["durability=none".to_string(), "topic_defaults.retention_ms=60000".to_string()];
    /// let c = ServerConfig::from_toml_with("max_topics = 5\n", "x.toml", &sets).unwrap();
    /// assert_eq!((c.durability.as_str(), c.max_topics), ("none", 5));
    /// assert_eq!(c.topic_defaults.retention_ms, 60_000);
    /// let e = ServerConfig::from_toml_with("", "x.toml", &["max_topic=5".into()]).unwrap_err();
    /// assert!(e.to_string().contains("max_topic"));
    /// ```
    pub fn from_toml_with(text: &str, path: &str, sets: &[String]) -> Result<Self, ConfigError> {
        if sets.is_empty() {
            return Self::from_toml(text, path);
        }
        let file: toml::Table = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_string(),
            message: e.to_string(),
        })?;
        // The file with the first `n` settings; an error names the setting that is not
        // KEY=VALUE, if one is.
        let with_sets = |n: usize| -> Result<ServerConfig, (Option<&String>, String)> {
            let mut table = file.clone();
            for set in &sets[..n] {
                apply_set(&mut table, set).map_err(|m| (Some(set), m))?;
            }
            let c: ServerConfig = toml::Value::Table(table)
                .try_into()
                .map_err(|e: toml::de::Error| (None, e.to_string()))?;
            c.check().map_err(|m| (None, m))?;
            Ok(c)
        };
        let (mut culprit, mut message) = match with_sets(sets.len()) {
            Ok(c) => return Ok(c),
            Err(e) => e,
        };
        if culprit.is_none() {
            // The file alone is wrong and the settings do not mend it: its own error,
            // which names the line.
            Self::from_toml(text, path)?;
            // Otherwise the first setting that makes it wrong, with its error.
            if let Some((n, (_, m))) =
                (1..=sets.len()).find_map(|n| with_sets(n).err().map(|e| (n, e)))
            {
                (culprit, message) = (Some(&sets[n - 1]), m);
            }
        }
        Err(ConfigError::Parse {
            path: match culprit {
                Some(set) => format!("--set {set}"),
                None => format!("--set {}", sets.join(" --set ")),
            },
            message,
        })
    }

    /// Reads a TOML config file and applies `sets` over it (as
    /// [`ServerConfig::from_toml_with`]).
    pub fn from_file_with(path: &std::path::Path, sets: &[String]) -> Result<Self, ConfigError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: p.clone(),
            source,
        })?;
        Self::from_toml_with(&text, &p, sets)
    }

    /// How long busy polling goes on without activity (`None`: for ever).
    pub fn busy_poll_idle(&self) -> Option<std::time::Duration> {
        millis(self.busy_poll_idle_ms)
    }

    /// True when `u` names this server's listener by address: its IP (or, for a
    /// listener on all addresses, a loopback one) and port. A host name is not looked
    /// up, so a mirror of itself under a name goes unnoticed here.
    fn is_own_address(&self, u: &reqwest::Url) -> bool {
        let Some(ip) = u.host_str().and_then(|h| {
            h.trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<std::net::IpAddr>()
                .ok()
        }) else {
            return false;
        };
        let port = u.port_or_known_default();
        port == Some(self.listen.port())
            && self.listen.port() != 0
            && (ip == self.listen.ip() || (self.listen.ip().is_unspecified() && ip.is_loopback()))
    }

    /// Checks what serde cannot: the durability policy, the runtime and the mirrors.
    pub fn check(&self) -> Result<(), String> {
        self.durability()?;
        // Sizes where 0 would not mean "no limit" but refuse every publish, or start a
        // segment file for every batch.
        for (key, value, what) in [
            (
                "max_body_bytes",
                self.max_body_bytes as u64,
                "refuse every publish",
            ),
            (
                "max_item_bytes",
                self.max_item_bytes as u64,
                "refuse every publish",
            ),
            (
                "segment_bytes",
                self.segment_bytes,
                "start a segment file for every batch",
            ),
        ] {
            if value == 0 {
                return Err(format!(
                    "{key} = 0 would {what} (0 is not \"no limit\" here); give a size in bytes"
                ));
            }
        }
        if self.busy_poll && self.worker_threads > 1 {
            return Err(format!(
                "busy_poll runs one worker thread, but worker_threads = {}",
                self.worker_threads
            ));
        }
        let mut seen = std::collections::HashSet::new();
        for m in &self.mirrors {
            m.check()?;
            if !seen.insert(&m.topic) {
                return Err(format!("topic `{}` is mirrored twice", m.topic));
            }
            if m.topic == m.upstream_topic() && self.is_own_address(&m.upstream_url()?) {
                return Err(format!(
                    "mirror of `{}`: the upstream {} is this server's own listener and topic \
                     (a mirror of itself never gets an item)",
                    m.topic, m.upstream
                ));
            }
        }
        // Each worker is a thread with its own stack; far more than CPUs only costs.
        if self.worker_threads > MAX_WORKER_THREADS {
            return Err(format!(
                "worker_threads = {}: at most {MAX_WORKER_THREADS} (0: one per CPU)",
                self.worker_threads
            ));
        }
        let one = crate::publish_memory::one_publish_at_most(self.max_body_bytes);
        if let Some(max) = self.max_publish_memory_bytes.filter(|&m| m != 0 && m < one) {
            return Err(format!(
                "max_publish_memory_bytes = {max}: at least {one} with max_body_bytes = {} \
                 (a body, its copy while joined and its items), or the largest bodies \
                 could never be published (0: no limit)",
                self.max_body_bytes
            ));
        }
        // 0 would announce that no request may be made at all.
        if self.http2_max_concurrent_streams == 0 {
            return Err(
                "http2_max_concurrent_streams = 0: at least 1 (an HTTP/2 connection needs a stream per request)"
                    .into(),
            );
        }
        // Linux takes a keepalive idle time of at most 32,767 s (TCP_KEEPIDLE); a longer
        // one would be refused on each connection and the kernel default (2 h) kept.
        if self.tcp_keepalive_ms > MAX_TCP_KEEPALIVE_MS {
            return Err(format!(
                "tcp_keepalive_ms = {}: at most {MAX_TCP_KEEPALIVE_MS} (32,767 s; 0: off)",
                self.tcp_keepalive_ms
            ));
        }
        if let Some(ms) = self.send_timeout_ms.filter(|&ms| ms > MAX_SEND_TIMEOUT_MS) {
            return Err(format!(
                "send_timeout_ms = {ms}: at most {MAX_SEND_TIMEOUT_MS} (about 24.8 days; 0: off)"
            ));
        }
        // Topics are created with these: options no topic can have would refuse every
        // publish to a new name, and an item count would be ignored by the file log.
        self.default_topic_options()
            .validate()
            .map_err(|e| format!("topic_defaults: {e}"))?;
        let builtin = TopicOptions::default();
        if self.log == LogKind::File
            && self.topic_defaults.retention_items != builtin.retention_items
        {
            return Err(
                "topic_defaults.retention_items does nothing with log = \"file\" \
                 (use retention_bytes or retention_ms)"
                    .into(),
            );
        }
        for o in &self.cors_origins {
            // An origin is a scheme and a host (and port), nothing after them.
            let host = o
                .strip_prefix("https://")
                .or_else(|| o.strip_prefix("http://"));
            let ok = o == "*"
                || (host.is_some_and(|h| !h.is_empty() && !h.contains('/'))
                    && axum::http::HeaderValue::from_str(o).is_ok());
            if !ok {
                return Err(format!(
                    "cors_origins: `{o}` is not an origin (scheme://host[:port], or `*`)"
                ));
            }
        }
        Ok(())
    }

    /// The bound of the server's memory for atomic publishes in progress (0: none):
    /// `max_publish_memory_bytes`, or its default.
    pub fn publish_memory_bytes(&self) -> usize {
        self.max_publish_memory_bytes.unwrap_or_else(|| {
            DEFAULT_PUBLISH_MEMORY_BYTES.max(crate::publish_memory::one_publish_at_most(
                self.max_body_bytes,
            ))
        })
    }

    /// [`ServerConfig::shutdown_grace_ms`], `None` when off.
    pub fn shutdown_grace(&self) -> Option<std::time::Duration> {
        millis(self.shutdown_grace_ms)
    }

    /// [`ServerConfig::header_read_timeout_ms`], `None` when off.
    pub fn header_read_timeout(&self) -> Option<std::time::Duration> {
        millis(self.header_read_timeout_ms)
    }

    /// [`ServerConfig::body_read_timeout_ms`], `None` when off.
    pub fn body_read_timeout(&self) -> Option<std::time::Duration> {
        millis(self.body_read_timeout_ms)
    }

    /// [`ServerConfig::http2_keepalive_ms`], `None` when off.
    pub fn http2_keepalive(&self) -> Option<std::time::Duration> {
        millis(self.http2_keepalive_ms)
    }

    /// [`ServerConfig::tcp_keepalive_ms`], `None` when off.
    pub fn tcp_keepalive(&self) -> Option<std::time::Duration> {
        millis(self.tcp_keepalive_ms)
    }

    /// [`ServerConfig::send_timeout_ms`], or when not given the time keepalive takes
    /// to give up on a quiet peer; `None` when off.
    pub fn send_timeout(&self) -> Option<std::time::Duration> {
        millis(
            self.send_timeout_ms
                .unwrap_or_else(|| keepalive_give_up_ms(self.tcp_keepalive_ms)),
        )
    }

    /// The file log's durability policy.
    pub fn durability(&self) -> Result<crate::log::Durability, String> {
        self.durability.parse()
    }

    /// Reads a TOML file.
    pub fn from_file(path: &std::path::Path) -> Result<Self, ConfigError> {
        Self::from_file_with(path, &[])
    }
}

/// Sets one `KEY=VALUE` of `--set` in a parsed config file (see
/// [`ServerConfig::from_toml_with`]).
fn apply_set(table: &mut toml::Table, set: &str) -> Result<(), String> {
    let (key, value) = set
        .split_once('=')
        .ok_or_else(|| "expected KEY=VALUE".to_string())?;
    let value = value.trim();
    let value = match toml::from_str::<toml::Table>(&format!("v = {value}")) {
        Ok(mut t) if t.len() == 1 => t
            .remove("v")
            .ok_or_else(|| "the value must be one TOML value".to_string())?,
        Ok(_) => return Err("the value must be one TOML value".into()),
        Err(_) if value.contains('\n') => return Err("the value must be one line".into()),
        // TOML integers are 64-bit signed: a larger one would otherwise be taken for a
        // bare word (a string) and refused as the wrong type.
        Err(_) if value.parse::<u64>().is_ok() => {
            return Err(format!(
                "{value} is above the largest number --set takes ({}); put it in the \
                 configuration file",
                i64::MAX
            ));
        }
        Err(_) => toml::Value::String(value.to_string()),
    };
    let parts = key_path(key.trim())?;
    let (last, tables) = parts.split_last().ok_or("empty key")?;
    let mut at = table;
    for part in tables {
        let entry = at
            .entry(part.clone())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        at = match entry {
            toml::Value::Table(t) => t,
            _ => return Err(format!("`{part}` is not a table")),
        };
    }
    at.insert(last.clone(), value);
    Ok(())
}

/// The parts of a dotted TOML key, read by TOML's own rules: `a.b` is two parts,
/// `a."b.c"` two as well (a quoted part may hold dots), and whitespace around the dots
/// is allowed.
fn key_path(key: &str) -> Result<Vec<String>, String> {
    let bad = || format!("bad key `{key}`");
    // A key alone is not a TOML document; a key with a placeholder value is.
    let mut t: toml::Table = toml::from_str(&format!("{key} = 0")).map_err(|_| bad())?;
    let mut parts = Vec::new();
    loop {
        let mut entries = std::mem::take(&mut t).into_iter();
        let (Some((k, v)), None) = (entries.next(), entries.next()) else {
            return Err(bad());
        };
        parts.push(k);
        match v {
            toml::Value::Table(inner) => t = inner,
            _ => return Ok(parts),
        }
    }
}

/// A duration in milliseconds where 0 means none.
fn millis(ms: u64) -> Option<std::time::Duration> {
    (ms > 0).then(|| std::time::Duration::from_millis(ms))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// The configuration reference in docs/http-api.md tells the truth: its server
    /// keys parse, and the values it shows are the defaults.
    #[test]
    fn the_documented_configuration_parses_to_the_defaults() {
        let doc = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/http-api.md"),
        )
        .unwrap();
        let section = doc.split("## Configuration").nth(1).unwrap();
        let block = section
            .split("```toml\n")
            .nth(1)
            .and_then(|b| b.split("```").next())
            .unwrap();
        // The tables after the server keys name files and servers that are not here.
        let keys = block.split("\n[[mirror]]").next().unwrap();
        let mut c = ServerConfig::from_toml(keys, "http-api.md").unwrap();
        // Three keys are shown with the value their default works out to there (it
        // depends on other keys); left unset, they work out the same.
        let default = ServerConfig::default();
        assert_eq!(c.send_timeout(), default.send_timeout());
        assert_eq!(c.default_topic_options(), default.default_topic_options());
        assert_eq!(c.publish_memory_bytes(), default.publish_memory_bytes());
        c.send_timeout_ms = None;
        c.topic_defaults.retention_bytes = None;
        c.max_publish_memory_bytes = None;
        assert_eq!(format!("{c:?}"), format!("{default:?}"));
        // Every field of the configuration (the top level of its Debug form) is in
        // the reference.
        let debug = format!("{:?}", ServerConfig::default());
        let (mut depth, mut word, mut fields) = (0, String::new(), Vec::new());
        for ch in debug.chars() {
            match ch {
                '{' | '[' | '(' => depth += 1,
                '}' | ']' | ')' => depth -= 1,
                ':' if depth == 1 && word.starts_with(|c: char| c.is_ascii_lowercase()) => {
                    fields.push(std::mem::take(&mut word))
                }
                c if depth == 1 && (c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') => {
                    word.push(c)
                }
                _ => word.clear(),
            }
        }
        assert!(fields.len() > 20, "{fields:?}");
        for mut field in fields {
            if field == "mirrors" {
                field = "mirror".into(); // serde(rename)
            }
            assert!(
                block.lines().any(|l| l.starts_with(&format!("{field} "))
                    || l.starts_with(&format!("[{field}]"))
                    || l.starts_with(&format!("[[{field}]]"))),
                "{field} is not in the configuration reference"
            );
        }
    }

    #[test]
    fn timeouts() {
        let d = ServerConfig::default();
        assert_eq!(d.header_read_timeout(), Some(Duration::from_secs(30)));
        assert_eq!(d.body_read_timeout(), Some(Duration::from_secs(60)));
        assert_eq!(d.http2_keepalive(), Some(Duration::from_secs(60)));
        assert_eq!(d.tcp_keepalive(), Some(Duration::from_secs(60)));
        assert_eq!(d.body_min_bytes_per_s, 1024);
        let c = ServerConfig::from_toml(
            "header_read_timeout_ms = 300\nbody_read_timeout_ms = 0\nhttp2_keepalive_ms = 0\ntcp_keepalive_ms = 0\nbody_min_bytes_per_s = 0\n",
            "x.toml",
        )
        .unwrap();
        assert_eq!(c.header_read_timeout(), Some(Duration::from_millis(300)));
        assert_eq!(c.body_read_timeout(), None);
        assert_eq!(c.http2_keepalive(), None);
        assert_eq!(c.tcp_keepalive(), None);
        assert_eq!(c.body_min_bytes_per_s, 0);
    }

    /// The send timeout follows keepalive unless given (what keepalive finds on a
    /// quiet connection is found as soon on a busy one); given, it stands alone, and
    /// 0 turns it off.
    #[test]
    fn send_timeout_follows_keepalive_unless_given() {
        let send = |text: &str| {
            ServerConfig::from_toml(text, "x.toml")
                .unwrap()
                .send_timeout()
        };
        let secs = |s| Some(Duration::from_secs(s));
        assert_eq!(ServerConfig::default().send_timeout(), secs(120));
        assert_eq!(send(""), secs(120));
        assert_eq!(send("tcp_keepalive_ms = 10000\n"), secs(20));
        // Probes at least 1 s apart.
        assert_eq!(send("tcp_keepalive_ms = 2000\n"), secs(6));
        assert_eq!(send("tcp_keepalive_ms = 0\n"), None);
        assert_eq!(
            send("tcp_keepalive_ms = 10000\nsend_timeout_ms = 5000\n"),
            secs(5)
        );
        assert_eq!(send("send_timeout_ms = 0\n"), None);
        assert_eq!(
            send("tcp_keepalive_ms = 0\nsend_timeout_ms = 9000\n"),
            secs(9)
        );
        let c = ServerConfig::from_toml_with("", "x.toml", &["tcp_keepalive_ms=4000".into()]);
        assert_eq!(c.unwrap().send_timeout(), secs(8));
        let e = ServerConfig::from_toml("send_timeout_ms = 2147483648\n", "x.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("at most 2147483647"), "{e}");
    }

    /// Likely mistakes in a listen address are named: a host name is not looked up,
    /// a port alone needs an address; in the file, with `--set` and on the command line.
    #[test]
    fn listen_address_mistakes_are_explained() {
        assert_eq!(
            parse_listen_address("[::1]:9").unwrap(),
            "[::1]:9".parse::<SocketAddr>().unwrap()
        );
        let e = parse_listen_address("localhost:8686").unwrap_err();
        assert!(
            e.contains("`localhost` is not an IP address (host names are not looked up)")
                && e.contains("127.0.0.1:8686"),
            "{e}"
        );
        for port_alone in ["8686", ":8686"] {
            let e = parse_listen_address(port_alone).unwrap_err();
            assert!(
                e.contains("is a port alone") && e.contains("127.0.0.1:8686"),
                "{e}"
            );
        }
        let e = parse_listen_address("127.0.0.1").unwrap_err();
        assert!(e.contains("is not an IP address and port"), "{e}");
        let e = ServerConfig::from_toml("listen = \"localhost:8686\"\n", "x.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("host names are not looked up"), "{e}");
        let e = ServerConfig::from_toml_with("", "x.toml", &["listen=localhost:1".into()])
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("--set listen=localhost:1: ") && e.contains("host names"),
            "{e}"
        );
    }

    #[test]
    fn toml_overrides_defaults() {
        let c = ServerConfig::from_toml(
            "listen = \"0.0.0.0:9000\"\nmax_body_bytes = 10\n[topic_defaults]\nphysical = \"triples\"\nretention_ms = 5\n",
            "x.toml",
        )
        .unwrap();
        assert_eq!(c.listen.port(), 9000);
        assert_eq!(c.max_body_bytes, 10);
        assert_eq!(c.max_item_bytes, 16 << 20);
        assert_eq!(c.topic_defaults.physical, crate::topic::Physical::Triples);
        assert_eq!(c.topic_defaults.retention_ms, 5);
        assert!(ServerConfig::from_toml("nope = 1", "x.toml").is_err());
        assert!(c.auth.is_none() && c.tls.is_none());
    }

    #[test]
    fn cors_origins_must_be_origins() {
        let c = ServerConfig::from_toml(
            "cors_origins = [\"https://app.example.org\", \"http://localhost:3000\", \"*\"]\n",
            "x.toml",
        )
        .unwrap();
        assert_eq!(c.cors_origins.len(), 3);
        for bad in [
            "app.example.org",
            "https://app.example.org/",
            "https://a/b",
            "https://",
        ] {
            let e = ServerConfig::from_toml(&format!("cors_origins = [\"{bad}\"]\n"), "x.toml")
                .unwrap_err()
                .to_string();
            assert!(e.contains("is not an origin") && e.contains(bad), "{e}");
        }
    }

    #[test]
    fn set_overrides_mend_and_name_what_is_wrong() {
        let sets = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // The error of `file` with `set`, as text.
        let error = |file: &str, set: &[&str]| {
            ServerConfig::from_toml_with(file, "x.toml", &sets(set))
                .unwrap_err()
                .to_string()
        };
        // A number beyond TOML's integers is named as such, not as a wrong type.
        let e = error("", &["busy_poll_idle_ms=18446744073709551615"]);
        assert!(e.contains("above the largest number --set takes"), "{e}");
        // A setting may mend the file.
        let c = ServerConfig::from_toml_with(
            "durability = \"bogus\"\nbusy_poll = true\nworker_threads = 4\n",
            "x.toml",
            &sets(&["durability=none", "worker_threads=1"]),
        )
        .unwrap();
        assert_eq!((c.durability.as_str(), c.worker_threads), ("none", 1));
        // Quoted keys, strings with spaces, arrays.
        let c = ServerConfig::from_toml_with(
            "",
            "x.toml",
            &sets(&[
                "\"max_topics\"=7",
                "cors_origins=[\"https://a\", \"https://b\"]",
            ]),
        )
        .unwrap();
        assert_eq!((c.max_topics, c.cors_origins.len()), (7, 2));
        // Dotted keys by TOML's rules: quoted parts, spaces around the dots.
        let c = ServerConfig::from_toml_with(
            "",
            "x.toml",
            &sets(&[
                "\"topic_defaults\".\"retention_ms\"=5",
                "topic_defaults . retention_bytes=6",
            ]),
        )
        .unwrap();
        assert_eq!(
            (
                c.topic_defaults.retention_ms,
                c.topic_defaults.retention_bytes
            ),
            (5, Some(6))
        );
        // A quoted part keeps its dot: one key `max.topics`, which is unknown.
        let e = error("", &["\"max.topics\"=1"]);
        assert!(e.contains("unknown field `max.topics`"), "{e}");
        // The error names the setting that is wrong, not all of them.
        let e = error("", &["max_topics=5", "durability=bogus", "reuse_port=true"]);
        assert!(e.starts_with("--set durability=bogus: "), "{e}");
        // With its own error, even when a later setting is wrong too.
        let e = error("", &["durability=bogus", "max_topics=-1"]);
        assert!(
            e.starts_with("--set durability=bogus: ") && e.contains("\"bogus\""),
            "{e}"
        );
        // A value that would set more than one key.
        let e = error("", &["max_topics=5\nlisten=\"0.0.0.0:1\""]);
        assert!(e.contains("one TOML value"), "{e}");
        for bad in ["=5", "a..b=1", "max_topics"] {
            assert!(!error("", &[bad]).is_empty(), "{bad}");
        }
        // A file that is wrong whatever the settings: its own error, with its line.
        let e = error("max_topics = 5\nnope = 1\n", &["max_topics=6"]);
        assert!(
            e.starts_with("x.toml: ") && e.contains("nope") && e.contains("line 2"),
            "{e}"
        );
    }

    #[test]
    fn topic_defaults_threads_and_keepalive_are_checked_at_start() {
        let refused = |toml: &str, needle: &str| {
            let e = ServerConfig::from_toml(toml, "x.toml")
                .err()
                .unwrap_or_else(|| panic!("{toml} was taken"))
                .to_string();
            assert!(e.contains(needle), "{toml}: {e}");
        };
        refused(
            "[topic_defaults]\nlogical = \"flat-quads\"\nphysical = \"triples\"\n",
            "topic_defaults: logical type",
        );
        refused("[topic_defaults]\nretention_items = 0\n", "at least 1");
        refused(
            "[topic_defaults]\nretention_items = 5000\n",
            "topic_defaults.retention_items does nothing with log = \"file\"",
        );
        refused("worker_threads = 100000\n", "at most 1024");
        refused("tcp_keepalive_ms = 40000000\n", "at most 32767000");
        refused(
            "max_body_bytes = 0\n",
            "max_body_bytes = 0 would refuse every publish",
        );
        refused(
            "max_item_bytes = 0\n",
            "max_item_bytes = 0 would refuse every publish",
        );
        refused(
            "segment_bytes = 0\n",
            "segment_bytes = 0 would start a segment file",
        );
        // A value refused by the checks names the file's line that sets it.
        refused(
            "max_topics = 5\n# durability below\ndurability = \"sometimes\"\n",
            "x.toml, line 3: unknown durability",
        );
        refused(
            "max_topics = 5\n[topic_defaults]\nphysical = \"triples\"\nlogical = \"flat-quads\"\n",
            "x.toml, line 4: topic_defaults: logical type",
        );
        // What each log acts on is taken.
        ServerConfig::from_toml("[topic_defaults]\nretention_ms = 5\n", "x.toml").unwrap();
        ServerConfig::from_toml(
            "log = \"memory\"\n[topic_defaults]\nretention_items = 5\nretention_bytes = 9\nretention_ms = 5\n",
            "x.toml",
        )
        .unwrap();
        ServerConfig::from_toml(
            "worker_threads = 1024\ntcp_keepalive_ms = 32767000\n",
            "x.toml",
        )
        .unwrap();
    }

    /// A memory log bounds its topics' bytes by default; 0 given in the file or by
    /// `--set` still means no bound, and the file log's default stays 0.
    #[test]
    fn the_memory_log_has_a_default_byte_bound() {
        let bytes = |text: &str, sets: &[&str]| {
            let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
            ServerConfig::from_toml_with(text, "x.toml", &sets)
                .unwrap()
                .default_topic_options()
                .retention_bytes
        };
        let memory = "log = \"memory\"\n";
        assert_eq!(bytes(memory, &[]), MEMORY_RETENTION_BYTES);
        assert_eq!(bytes("", &["log=memory"]), MEMORY_RETENTION_BYTES);
        assert_eq!(bytes("", &[]), 0);
        assert_eq!(bytes("", &["topic_defaults.retention_ms=5"]), 0);
        let unbounded = "log = \"memory\"\n[topic_defaults]\nretention_bytes = 0\n";
        assert_eq!(bytes(unbounded, &[]), 0);
        assert_eq!(bytes(memory, &["topic_defaults.retention_bytes=0"]), 0);
        assert_eq!(bytes(memory, &["topic_defaults.retention_bytes=5"]), 5);
        assert_eq!(
            ServerConfig::ephemeral()
                .default_topic_options()
                .retention_bytes,
            MEMORY_RETENTION_BYTES
        );
    }

    #[test]
    fn busy_poll_needs_one_worker() {
        let c =
            ServerConfig::from_toml("busy_poll = true\nworker_threads = 1\n", "x.toml").unwrap();
        assert!(c.busy_poll);
        assert_eq!(c.worker_threads, 1);
        assert!(!ServerConfig::default().busy_poll);
        let e = ServerConfig::from_toml("busy_poll = true\nworker_threads = 4\n", "x.toml")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("busy_poll") && e.contains("worker_threads = 4"),
            "{e}"
        );
        // It stops after 10 s idle by default; 0 polls for ever.
        let ten = Some(std::time::Duration::from_secs(10));
        assert_eq!(ServerConfig::default().busy_poll_idle(), ten);
        let c = ServerConfig::from_toml("busy_poll_idle_ms = 0\n", "x.toml").unwrap();
        assert_eq!(c.busy_poll_idle(), None);
    }

    #[test]
    fn example_config_is_valid() {
        let text = include_str!("../../../docs/examples/jelly-secure.toml");
        let c = ServerConfig::from_toml(text, "jelly-secure.toml").unwrap();
        assert_eq!(c.max_connections_per_ip, 64);
        assert!(c.tls.is_some());
        assert_eq!(c.auth.unwrap().anonymous_subscribe, ["public-*"]);
    }

    #[test]
    fn publish_memory_leaves_room_for_the_largest_body() {
        let c = ServerConfig::default();
        assert_eq!(c.publish_memory_bytes(), DEFAULT_PUBLISH_MEMORY_BYTES);
        // A larger body limit raises the default with it ...
        let c = ServerConfig::from_toml("max_body_bytes = 268435456\n", "x.toml").unwrap();
        assert_eq!(c.publish_memory_bytes(), 6 * 268_435_456);
        // ... and a bound set by hand too small for it is refused, naming the minimum.
        let e = ServerConfig::from_toml(
            "max_body_bytes = 1048576\nmax_publish_memory_bytes = 6291455\n",
            "x.toml",
        )
        .unwrap_err();
        assert!(e.to_string().contains("at least 6291456"), "{e}");
        let c = ServerConfig::from_toml(
            "max_body_bytes = 1048576\nmax_publish_memory_bytes = 6291456\n",
            "x.toml",
        )
        .unwrap();
        assert_eq!(c.publish_memory_bytes(), 6_291_456);
        let c = ServerConfig::from_toml("max_publish_memory_bytes = 0\n", "x.toml").unwrap();
        assert_eq!(c.publish_memory_bytes(), 0);
    }

    #[test]
    fn security_sections() {
        let c = ServerConfig::from_toml(
            "max_connections_per_ip = 3\nmax_publishes_per_connection = 0\nreuse_port = true\n\
             [tls]\ncert = \"c.pem\"\nkey = \"k.pem\"\n\
             [auth]\nanonymous_subscribe = [\"public.*\"]\n\
             tokens = [ { token = \"t\", publish = [\"a\"], admin = true } ]\n",
            "x.toml",
        )
        .unwrap();
        assert_eq!(c.max_connections_per_ip, 3);
        assert_eq!(c.max_publishes_per_connection, 0);
        assert_eq!(ServerConfig::default().max_publishes_per_connection, 4);
        let e =
            ServerConfig::from_toml("http2_max_concurrent_streams = 0\n", "x.toml").unwrap_err();
        assert!(e.to_string().contains("at least 1"), "{e}");
        assert!(c.reuse_port);
        assert_eq!(c.tls.unwrap().key, PathBuf::from("k.pem"));
        let auth = c.auth.unwrap();
        assert_eq!(auth.tokens.len(), 1);
        assert!(auth.tokens[0].admin);
        assert!(ServerConfig::from_toml("[tls]\ncert = \"c.pem\"\n", "x.toml").is_err());
        assert!(ServerConfig::from_toml("[auth]\ntoken = \"x\"\n", "x.toml").is_err());
    }

    #[test]
    fn mirrors_from_toml_and_flag() {
        let c = ServerConfig::from_toml(
            "[[mirror]]\ntopic = \"a\"\nupstream = \"http://127.0.0.1:1\"\n\
             [[mirror]]\ntopic = \"b\"\nupstream = \"http://h:2/base\"\nupstream_topic = \"x\"\ntoken = \"t\"\non_gone = \"skip\"\n",
            "x.toml",
        )
        .unwrap();
        assert_eq!(c.mirrors.len(), 2);
        assert_eq!(c.mirrors[0].upstream_topic(), "a");
        assert_eq!(c.mirrors[0].on_gone, OnGone::Stop);
        assert_eq!(c.mirrors[1].upstream_topic(), "x");
        assert_eq!(c.mirrors[1].on_gone, OnGone::Skip);
        assert_eq!(c.mirrors[0].keepalive(), Some(Duration::from_secs(15)));
        assert!(
            !format!("{:?}", c.mirrors[1]).contains("\"t\""),
            "token not shown"
        );
        for bad in [
            "[[mirror]]\ntopic = \"a\"\nupstream = \"ftp://h:1\"\n",
            "[[mirror]]\ntopic = \"a/b\"\nupstream = \"http://h:1\"\n",
            "[[mirror]]\ntopic = \"a\"\nupstream = \"h:1\"\n",
            "[[mirror]]\ntopic = \"a\"\nupstream = \"http://h:1\"\n[[mirror]]\ntopic = \"a\"\nupstream = \"http://h:2\"\n",
            "[[mirror]]\ntopic = \"a\"\nupstream = \"http://h:1\"\nextra = 1\n",
            "[[mirror]]\ntopic = \"a\"\nupstream = \"http://h:1\"\nkeepalive_ms = 40000000\n",
        ] {
            assert!(ServerConfig::from_toml(bad, "x.toml").is_err(), "{bad}");
        }
        let ok = "[[mirror]]\ntopic = \"a\"\nupstream = \"https://h:1\"\nca = \"ca.pem\"\nkeepalive_ms = 0\n";
        let c = ServerConfig::from_toml(ok, "x.toml").unwrap();
        assert_eq!(c.mirrors[0].keepalive(), None);
        assert_eq!(
            c.mirrors[0].ca.as_deref(),
            Some(std::path::Path::new("ca.pem"))
        );
        let m = MirrorConfig::from_topic_url("http://127.0.0.1:8686/topics/weather").unwrap();
        assert_eq!(
            (m.topic.as_str(), m.upstream_topic(), m.upstream.as_str()),
            ("weather", "weather", "http://127.0.0.1:8686")
        );
        let m = MirrorConfig::from_topic_url("http://h:1/p/topics/w=local").unwrap();
        assert_eq!(
            (m.topic.as_str(), m.upstream_topic(), m.upstream.as_str()),
            ("local", "w", "http://h:1/p")
        );
        assert!(MirrorConfig::from_topic_url("http://h:1/weather").is_err());
        assert!(MirrorConfig::from_topic_url("http://h:1/topics/").is_err());
        // A mirror of this server's own listener and topic is refused; of another
        // topic on it, or of another port, it is not.
        let on = |listen: &str, url: &str| ServerConfig {
            listen: listen.parse().unwrap(),
            mirrors: vec![MirrorConfig::from_topic_url(url).unwrap()],
            ..ServerConfig::default()
        };
        let e = on("127.0.0.1:8686", "http://127.0.0.1:8686/topics/x")
            .check()
            .unwrap_err();
        assert!(e.contains("mirror of itself"), "{e}");
        assert!(
            on("0.0.0.0:8686", "http://127.0.0.1:8686/topics/x")
                .check()
                .is_err()
        );
        assert!(
            on("127.0.0.1:8686", "http://127.0.0.1:8686/topics/x=y")
                .check()
                .is_ok()
        );
        assert!(
            on("127.0.0.1:8686", "http://127.0.0.1:8687/topics/x")
                .check()
                .is_ok()
        );
        // Credentials in the URL are refused, and the refusal does not repeat the
        // password.
        for url in ["http://u:s3cret@h:1/topics/w", "http://u@h:1/topics/w"] {
            let e = MirrorConfig::from_topic_url(url).unwrap_err();
            assert!(e.contains("token"), "{e}");
            assert!(!e.contains("s3cret"), "{e}");
        }
    }
}
