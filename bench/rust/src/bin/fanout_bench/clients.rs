//! The load generator: one process holding many long-lived subscriptions (HTTP chunked
//! streams or WebSockets), each on its own socket bound to a 127.0.0.x source address.
//! It counts every item of the measurement window once per subscription and records
//! its delivery delay (receive time − the publisher's `h:sent`, same machine clock).
//!
//! Protocol with the driver (lines): it prints `{"event":"connected",…}` once every
//! subscription is up (or failed), then reads `measure <first seq>`, any number of
//! `progress` (answered with `{"event":"progress","received":…}`) and
//! `report <last seq>` from stdin and prints `{"event":"report",…}`; it exits when
//! stdin closes.

use std::io::BufRead as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::Semaphore;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

use crate::body::{Chunked, Decoding, parse_head};
use crate::frames::{Splitter, item_meta};
use crate::hist::Histogram;
use crate::unix_us;

/// How subscriptions talk to the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// `GET /topics/{t}/items` (chunked).
    Http,
    /// `GET /topics/{t}/ws` (one binary message per item).
    Ws,
}

impl Transport {
    pub fn parse(s: &str) -> Option<Transport> {
        match s {
            "http" => Some(Transport::Http),
            "ws" => Some(Transport::Ws),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Transport::Http => "http",
            Transport::Ws => "ws",
        }
    }
}

/// What one load-generator process does.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    pub target: SocketAddr,
    pub topic: String,
    pub transport: Transport,
    /// `?window=` in ms (0: not sent).
    pub window_ms: u64,
    /// `Accept-Encoding` value (HTTP only), e.g. `gzip`.
    pub accept_encoding: Option<String>,
    /// Subscriptions of this process.
    pub count: usize,
    /// Global index of this process's first subscription (picks source addresses).
    pub first_index: usize,
    /// Subscriptions per source address 127.0.0.x (x from 2).
    pub per_ip: usize,
    /// Connections being set up at once.
    pub connect_parallel: usize,
    /// Only subscriptions whose global index is a multiple of this decode and check
    /// what they receive; the others read and discard the bytes (as Ztreamy's
    /// many-clients tool did, to save the load generator's CPU). 1: all of them.
    pub verify_every: usize,
    /// Give up setting up subscriptions after this long.
    pub ramp_timeout: Duration,
}

/// Statistics of the items received in the window, per shard.
#[derive(Default)]
struct Shard {
    delays: Histogram,
    received: u64,
    duplicates: u64,
    no_timestamp: u64,
    bytes: u64,
}

/// Shared by all subscriptions of the process.
struct Recorder {
    /// First sequence number of the window (`u64::MAX` before `measure`).
    window_start: AtomicU64,
    shards: Vec<Mutex<Shard>>,
    connected: AtomicUsize,
    /// Connected subscriptions that decode and check their items.
    verifying: AtomicUsize,
    failed: AtomicUsize,
    /// Subscriptions that ended after being set up.
    ended: AtomicUsize,
    retries: AtomicUsize,
    /// Subscriptions whose response came with a content coding (HTTP).
    compressed: AtomicUsize,
    errors: Mutex<Vec<String>>,
}

const SHARDS: usize = 16;

impl Recorder {
    fn new() -> Recorder {
        Recorder {
            window_start: AtomicU64::new(u64::MAX),
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            connected: AtomicUsize::new(0),
            verifying: AtomicUsize::new(0),
            failed: AtomicUsize::new(0),
            ended: AtomicUsize::new(0),
            retries: AtomicUsize::new(0),
            compressed: AtomicUsize::new(0),
            errors: Mutex::new(Vec::new()),
        }
    }

    fn note_error(&self, e: String) {
        if let Ok(mut v) = self.errors.lock()
            && v.len() < 5
        {
            v.push(e);
        }
    }
}

/// Per-subscription state: the last sequence number seen, to catch duplicates and
/// reordering (neither can happen on one healthy stream).
struct Sub<'a> {
    rec: &'a Recorder,
    shard: usize,
    last: Option<u64>,
    /// Whether this subscription decodes and checks its items.
    verify: bool,
}

impl Sub<'_> {
    fn on_frame(&mut self, frame: &[u8], now_us: u64) -> Result<(), String> {
        let Some(meta) = item_meta(frame)? else {
            return Ok(());
        };
        let start = self.rec.window_start.load(Ordering::Relaxed);
        let dup = self.last.is_some_and(|l| meta.seq <= l);
        if !dup {
            self.last = Some(meta.seq);
        }
        if meta.seq < start {
            return Ok(());
        }
        let mut s = self.rec.shards[self.shard]
            .lock()
            .map_err(|_| "poisoned shard")?;
        if dup {
            s.duplicates += 1;
            return Ok(());
        }
        s.received += 1;
        s.bytes += frame.len() as u64;
        match meta.sent_us {
            Some(sent) => s.delays.record(now_us.saturating_sub(sent)),
            None => s.no_timestamp += 1,
        }
        Ok(())
    }
}

fn source_ip(cfg: &ClientConfig, i: usize) -> IpAddr {
    let k = (cfg.first_index + i) / cfg.per_ip.max(1);
    let x = 2 + k as u32;
    IpAddr::V4(Ipv4Addr::new(127, (x >> 16) as u8, (x >> 8) as u8, x as u8))
}

/// Lets `connect` pick the source port, knowing the destination.
///
/// Without it, `bind(ip:0)` must choose a port that is free for every destination,
/// and ports in TIME_WAIT from the previous run count as taken: with tens of thousands
/// of them, binds get slow (ramp-up of 10k subscribers took 50 s instead of 5 s) and
/// finally fail. With it, ports are chosen per 4-tuple at `connect`, where loopback
/// TIME_WAIT ports can be reused (`net.ipv4.tcp_tw_reuse` = 2, the default).
fn bind_address_no_port(sock: &TcpSocket) -> std::io::Result<()> {
    use std::os::fd::AsRawFd as _;
    let on: libc::c_int = 1;
    // SAFETY: a valid socket fd, a pointer to a c_int that outlives the call, and its size.
    let r = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_BIND_ADDRESS_NO_PORT,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

async fn connect(cfg: &ClientConfig, src: IpAddr) -> std::io::Result<TcpStream> {
    let sock = TcpSocket::new_v4()?;
    bind_address_no_port(&sock)?;
    sock.bind(SocketAddr::new(src, 0))?;
    let s = sock.connect(cfg.target).await?;
    s.set_nodelay(true)?;
    Ok(s)
}

fn query(cfg: &ClientConfig) -> String {
    let mut q = format!("/topics/{}/", cfg.topic);
    q += match cfg.transport {
        Transport::Http => "items?from=latest&format=jelly",
        Transport::Ws => "ws?from=latest&format=jelly",
    };
    if cfg.window_ms > 0 {
        q += &format!("&window={}", cfg.window_ms);
    }
    q
}

/// An HTTP subscription up to its response head; returns the stream, the body bytes
/// read with the head, and the head.
async fn http_open(
    cfg: &ClientConfig,
    src: IpAddr,
    buf: &mut [u8],
) -> Result<(TcpStream, crate::body::Head, usize), String> {
    let mut s = connect(cfg, src)
        .await
        .map_err(|e| format!("connect from {src}: {e}"))?;
    let mut req = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nAccept: application/x-jelly-rdf\r\n",
        query(cfg),
        cfg.target
    );
    if let Some(enc) = &cfg.accept_encoding {
        req += &format!("Accept-Encoding: {enc}\r\n");
    }
    req += "\r\n";
    s.write_all(req.as_bytes())
        .await
        .map_err(|e| format!("send request: {e}"))?;
    let mut filled = 0;
    loop {
        if filled == buf.len() {
            return Err("response head larger than the read buffer".into());
        }
        let n = s
            .read(&mut buf[filled..])
            .await
            .map_err(|e| format!("read head: {e}"))?;
        if n == 0 {
            return Err("connection closed before the response head".into());
        }
        filled += n;
        if let Some(head) = parse_head(&buf[..filled])? {
            if head.status != 200 {
                let body = String::from_utf8_lossy(&buf[head.rest_start..filled]).into_owned();
                return Err(format!("status {}: {body}", head.status));
            }
            return Ok((s, head, filled));
        }
    }
}

/// Reads an HTTP subscription's body until it ends.
async fn http_follow(
    mut s: TcpStream,
    head: crate::body::Head,
    buf: &mut [u8],
    filled: usize,
    sub: &mut Sub<'_>,
) -> Result<(), String> {
    if !sub.verify {
        // Read and discard; a clean end of the chunked body is not looked for.
        loop {
            let n = s.read(buf).await.map_err(|e| format!("read body: {e}"))?;
            if n == 0 {
                return Err("connection closed mid-stream".into());
            }
        }
    }
    let mut chunked = Chunked::default();
    let mut dec = Decoding::for_encoding(head.content_encoding.as_deref())?;
    let mut split = Splitter::default();
    let (mut lo, mut hi) = (head.rest_start, filled);
    loop {
        let now = unix_us();
        let data = &buf[lo..hi];
        let mut on_plain = |p: &[u8]| split.push(p, |f| sub.on_frame(f, now));
        if head.chunked {
            chunked.push(data, |d| dec.push(d, &mut on_plain))?;
            if chunked.done() {
                return Ok(());
            }
        } else {
            dec.push(data, &mut on_plain)?;
        }
        let n = s.read(buf).await.map_err(|e| format!("read body: {e}"))?;
        if n == 0 {
            return Err("connection closed mid-stream".into());
        }
        (lo, hi) = (0, n);
    }
}

fn ws_config() -> WebSocketConfig {
    // Small buffers: tungstenite allocates its read buffer eagerly (128 KiB by default).
    WebSocketConfig::default()
        .read_buffer_size(4096)
        .write_buffer_size(0)
        .max_message_size(Some(16 << 20))
}

type Ws = tokio_tungstenite::WebSocketStream<TcpStream>;

async fn ws_open(cfg: &ClientConfig, src: IpAddr) -> Result<Ws, String> {
    let s = connect(cfg, src)
        .await
        .map_err(|e| format!("connect from {src}: {e}"))?;
    let url = format!("ws://{}{}", cfg.target, query(cfg));
    let (ws, _) = tokio_tungstenite::client_async_with_config(url, s, Some(ws_config()))
        .await
        .map_err(|e| format!("websocket handshake: {e}"))?;
    Ok(ws)
}

async fn ws_follow(mut ws: Ws, sub: &mut Sub<'_>) -> Result<(), String> {
    while let Some(msg) = ws.next().await {
        let now = unix_us();
        match msg.map_err(|e| format!("websocket: {e}"))? {
            Message::Binary(b) if sub.verify => sub.on_frame(&b, now)?,
            Message::Close(c) => return Err(format!("closed by the server: {c:?}")),
            _ => {}
        }
    }
    Err("websocket ended".into())
}

/// Connection attempts per subscription before it counts as failed.
const ATTEMPTS: usize = 3;

/// One subscription: set up (with a few retries), then follow until it ends.
async fn run_sub(cfg: Arc<ClientConfig>, rec: Arc<Recorder>, sem: Arc<Semaphore>, i: usize) {
    let src = source_ip(&cfg, i);
    let verify = (cfg.first_index + i).is_multiple_of(cfg.verify_every.max(1));
    let mut sub = Sub {
        rec: &rec,
        shard: i % SHARDS,
        last: None,
        verify,
    };
    let mut buf = vec![0u8; 4096];
    let mut last_err = String::new();
    for attempt in 0..ATTEMPTS {
        if attempt > 0 {
            rec.retries.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(200 << attempt)).await;
        }
        let Ok(permit) = sem.acquire().await else {
            return;
        };
        let r = match cfg.transport {
            Transport::Http => match http_open(&cfg, src, &mut buf).await {
                Ok((s, head, filled)) => {
                    drop(permit);
                    if head
                        .content_encoding
                        .as_deref()
                        .is_some_and(|e| e != "identity")
                    {
                        rec.compressed.fetch_add(1, Ordering::Relaxed);
                    }
                    rec.connected.fetch_add(1, Ordering::Relaxed);
                    if verify {
                        rec.verifying.fetch_add(1, Ordering::Relaxed);
                    }
                    Some(http_follow(s, head, &mut buf, filled, &mut sub).await)
                }
                Err(e) => {
                    last_err = e;
                    None
                }
            },
            Transport::Ws => match ws_open(&cfg, src).await {
                Ok(ws) => {
                    drop(permit);
                    drop(buf);
                    rec.connected.fetch_add(1, Ordering::Relaxed);
                    if verify {
                        rec.verifying.fetch_add(1, Ordering::Relaxed);
                    }
                    let r = ws_follow(ws, &mut sub).await;
                    rec.ended.fetch_add(1, Ordering::Relaxed);
                    if let Err(e) = r {
                        rec.note_error(e);
                    }
                    return;
                }
                Err(e) => {
                    last_err = e;
                    None
                }
            },
        };
        if let Some(r) = r {
            rec.ended.fetch_add(1, Ordering::Relaxed);
            if let Err(e) = r {
                rec.note_error(e);
            }
            return;
        }
    }
    rec.failed.fetch_add(1, Ordering::Relaxed);
    rec.note_error(last_err);
}

/// Runs a load-generator process (the `clients` command) until stdin closes.
pub fn run(cfg: ClientConfig) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let rec = Arc::new(Recorder::new());
    let cfg = Arc::new(cfg);
    let t0 = Instant::now();
    let sem = Arc::new(Semaphore::new(cfg.connect_parallel.max(1)));
    let _guard = rt.enter();
    for i in 0..cfg.count {
        rt.spawn(run_sub(cfg.clone(), rec.clone(), sem.clone(), i));
    }
    // Wait (driving the runtime) until every subscription is up or failed.
    rt.block_on(async {
        while rec.connected.load(Ordering::Relaxed) + rec.failed.load(Ordering::Relaxed) < cfg.count
            && t0.elapsed() < cfg.ramp_timeout
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    let errors = rec.errors.lock().map(|v| v.clone()).unwrap_or_default();
    println!(
        "{}",
        serde_json::json!({
            "event": "connected",
            "ok": rec.connected.load(Ordering::Relaxed),
            "failed": rec.failed.load(Ordering::Relaxed),
            "retries": rec.retries.load(Ordering::Relaxed),
            "compressed": rec.compressed.load(Ordering::Relaxed),
            "verifying": rec.verifying.load(Ordering::Relaxed),
            "ramp_secs": t0.elapsed().as_secs_f64(),
            "errors": errors,
        })
    );
    // Commands arrive on a plain thread; the runtime keeps driving the subscriptions.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rt.block_on(async {
        let mut ended_at_measure = 0;
        let mut live_at_measure = 0;
        while let Some(line) = rx.recv().await {
            let mut parts = line.split_whitespace();
            let (cmd, arg) = (
                parts.next(),
                parts.next().and_then(|v| v.parse::<u64>().ok()),
            );
            match (cmd, arg) {
                (Some("measure"), Some(first)) => {
                    ended_at_measure = rec.ended.load(Ordering::Relaxed);
                    live_at_measure = rec.connected.load(Ordering::Relaxed) - ended_at_measure;
                    rec.window_start.store(first, Ordering::Relaxed);
                }
                (Some("progress"), _) => {
                    let received: u64 = rec
                        .shards
                        .iter()
                        .filter_map(|s| s.lock().ok().map(|s| s.received))
                        .sum();
                    println!(
                        "{}",
                        serde_json::json!({ "event": "progress", "received": received })
                    );
                }
                (Some("report"), Some(_last)) => {
                    let mut all = Shard::default();
                    for s in &rec.shards {
                        let Ok(s) = s.lock() else { continue };
                        all.delays.merge(&s.delays);
                        all.received += s.received;
                        all.duplicates += s.duplicates;
                        all.no_timestamp += s.no_timestamp;
                        all.bytes += s.bytes;
                    }
                    let errors = rec.errors.lock().map(|v| v.clone()).unwrap_or_default();
                    println!(
                        "{}",
                        serde_json::json!({
                            "event": "report",
                            "live_at_measure": live_at_measure,
                            "ended_in_window": rec.ended.load(Ordering::Relaxed) - ended_at_measure,
                            "received": all.received,
                            "duplicates": all.duplicates,
                            "no_timestamp": all.no_timestamp,
                            "bytes": all.bytes,
                            "delays": all.delays.to_json(),
                            "errors": errors,
                        })
                    );
                }
                _ => eprintln!("fanout_bench clients: unknown command `{line}`"),
            }
        }
    });
    // Do not wait for the subscriptions to wind down.
    std::process::exit(0);
}
