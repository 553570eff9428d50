//! Publisher and subscriber clients of each transport.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::{SinkExt as _, StreamExt as _};
use http::uri::PathAndQuery;
use jelly::{Decoder, Event, PhysicalType};
use jelly_proto::wire::put_varint;
use jelly_server::grpc::codec::JellyCodec;
use jelly_server::grpc::messages::{Frame, Received, Subscribe};
use jelly_server::grpc::{PUBLISH_PATH, SUBSCRIBE_PATH};
use tokio::sync::Notify;
use tokio::sync::mpsc::UnboundedSender;
use tokio_tungstenite::tungstenite::Message;
use tonic::client::Grpc;
use tonic::transport::Channel;

/// How the benchmark talks to the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Publish: POST of delimited Jelly; subscribe: chunked GET.
    Http,
    /// WebSocket publish and subscribe, one frame per message.
    Ws,
    /// gRPC `PublishRdf` and `SubscribeRdf`.
    Grpc,
}

impl Transport {
    pub fn parse(s: &str) -> Option<Transport> {
        match s {
            "http" => Some(Transport::Http),
            "ws" => Some(Transport::Ws),
            "grpc" => Some(Transport::Grpc),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Transport::Http => "http",
            Transport::Ws => "ws",
            Transport::Grpc => "grpc",
        }
    }

    /// Whether each publish request starts a new Jelly stream (so items must be
    /// encoded as independent streams rather than as one continuous stream).
    pub fn one_stream_per_request(self) -> bool {
        self == Transport::Http
    }
}

/// One item as decoded by the subscriber.
#[derive(Debug, Clone, Copy)]
pub struct Arrival {
    pub offset: u64,
    pub statements: usize,
    pub at: Instant,
}

fn client() -> reqwest::Client {
    jelly_server::tls::install_crypto_provider();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(600))
        .build()
        .expect("http client")
}

/// Creates the topic with the stream's physical type.
pub async fn create_topic(url: &str, topic: &str, physical: PhysicalType) -> Result<(), String> {
    let physical = if physical == PhysicalType::Quads {
        "quads"
    } else {
        "triples"
    };
    let put = client()
        .put(format!("{url}/topics/{topic}"))
        .json(&serde_json::json!({ "physical": physical }));
    expect_success(put, "create topic").await
}

/// Deletes the topic.
pub async fn delete_topic(url: &str, topic: &str) -> Result<(), String> {
    expect_success(
        client().delete(format!("{url}/topics/{topic}")),
        "delete topic",
    )
    .await
}

/// Sends `req`; anything but a 2xx answer is an error naming `what` and the status.
async fn expect_success(req: reqwest::RequestBuilder, what: &str) -> Result<(), String> {
    let r = req.send().await.map_err(|e| e.to_string())?;
    if !r.status().is_success() {
        return Err(format!("{what}: {}", r.status()));
    }
    Ok(())
}

/// Waits until the server lists a subscriber on the topic.
pub async fn wait_subscribed(url: &str, topic: &str) -> Result<(), String> {
    let c = client();
    for _ in 0..500 {
        let v: serde_json::Value = c
            .get(format!("{url}/topics/{topic}"))
            .send()
            .await
            .map_err(|e| e.to_string())?
            .json()
            .await
            .map_err(|e| e.to_string())?;
        if v["subscribers"].as_array().is_some_and(|s| !s.is_empty()) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Err("the subscriber never registered".into())
}

/// Decodes one frame: its statement count and `offset` metadata.
fn decode_frame(dec: &mut Decoder, frame: &[u8]) -> Result<(u64, usize), String> {
    let mut cur = dec.frame(frame);
    let mut n = 0;
    while let Some(ev) = cur.next_event().map_err(|e| e.to_string())? {
        if let Event::Statement(_) = ev {
            n += 1;
        }
    }
    let offset = cur
        .metadata()
        .map_err(|e| e.to_string())?
        .into_iter()
        .find(|(k, _)| *k == "offset")
        .and_then(|(_, v)| std::str::from_utf8(v).ok()?.parse().ok())
        .ok_or("a frame without offset metadata")?;
    Ok((offset, n))
}

/// Splits a delimited byte stream into frames as chunks arrive.
#[derive(Default)]
struct Splitter {
    buf: Vec<u8>,
}

impl Splitter {
    /// Appends a chunk and hands every complete frame to `f`.
    fn push(
        &mut self,
        chunk: &[u8],
        mut f: impl FnMut(&[u8]) -> Result<(), String>,
    ) -> Result<(), String> {
        self.buf.extend_from_slice(chunk);
        let mut pos = 0;
        loop {
            let mut len: u64 = 0;
            let mut shift = 0;
            let mut i = pos;
            let mut complete = false;
            while i < self.buf.len() && shift < 64 {
                let b = self.buf[i];
                len |= u64::from(b & 0x7f) << shift;
                i += 1;
                if b & 0x80 == 0 {
                    complete = true;
                    break;
                }
                shift += 7;
            }
            if !complete || self.buf.len() - i < len as usize {
                break;
            }
            let end = i + len as usize;
            f(&self.buf[i..end])?;
            pos = end;
        }
        self.buf.drain(..pos);
        Ok(())
    }
}

/// Follows the topic from offset 0, sending one [`Arrival`] per decoded item. `ready`
/// is notified once the server has answered the subscription (its response headers:
/// a server that sends them on registering the subscriber, as the peer relay does,
/// will deliver every item published after that).
pub async fn subscribe(
    transport: Transport,
    url: String,
    topic: String,
    tx: UnboundedSender<Arrival>,
    ready: Arc<Notify>,
) -> Result<(), String> {
    match transport {
        Transport::Http => {
            let mut r = client()
                .get(format!("{url}/topics/{topic}/items?from=earliest"))
                .send()
                .await
                .map_err(|e| e.to_string())?;
            ready.notify_one();
            let mut dec = Decoder::default();
            let mut split = Splitter::default();
            while let Some(chunk) = r.chunk().await.map_err(|e| e.to_string())? {
                let at = Instant::now();
                split.push(&chunk, |frame| {
                    let (offset, statements) = decode_frame(&mut dec, frame)?;
                    let _ = tx.send(Arrival {
                        offset,
                        statements,
                        at,
                    });
                    Ok(())
                })?;
            }
            Ok(())
        }
        Transport::Grpc => {
            let mut g = Grpc::new(channel(&url).await?);
            g.ready().await.map_err(|e| e.to_string())?;
            let r = tonic::Request::new(Subscribe {
                topic,
                requested_options: None,
            });
            let mut stream = g
                .server_streaming(
                    r,
                    PathAndQuery::from_static(SUBSCRIBE_PATH),
                    JellyCodec::<Subscribe, Frame>::new(),
                )
                .await
                .map_err(|e| e.to_string())?
                .into_inner();
            ready.notify_one();
            let mut dec = Decoder::default();
            while let Some(Frame(frame)) = stream.message().await.map_err(|e| e.to_string())? {
                let at = Instant::now();
                let (offset, statements) = decode_frame(&mut dec, &frame)?;
                let _ = tx.send(Arrival {
                    offset,
                    statements,
                    at,
                });
            }
            Ok(())
        }
        Transport::Ws => {
            let ws_url = format!(
                "{}/topics/{topic}/ws?from=earliest",
                url.replacen("http", "ws", 1)
            );
            let (mut ws, _) = tokio_tungstenite::connect_async(ws_url)
                .await
                .map_err(|e| e.to_string())?;
            ready.notify_one();
            let mut dec = Decoder::default();
            while let Some(msg) = ws.next().await {
                let at = Instant::now();
                match msg.map_err(|e| e.to_string())? {
                    Message::Binary(frame) => {
                        let (offset, statements) = decode_frame(&mut dec, &frame)?;
                        let _ = tx.send(Arrival {
                            offset,
                            statements,
                            at,
                        });
                    }
                    Message::Close(_) => break,
                    _ => {}
                }
            }
            Ok(())
        }
    }
}

/// [`subscribe`] on a thread of its own with a current-thread runtime. Aborting the
/// handle cannot stop a blocking thread, so it stops when the receiver of `tx` is
/// dropped (or the server closes): otherwise a server that outlives the benchmark (one
/// started under a profiler that detaches it) would keep the runtime from shutting
/// down. With `busy_poll` the thread polls for I/O instead of sleeping between items.
pub fn subscribe_on_own_thread(
    transport: Transport,
    url: String,
    topic: String,
    tx: UnboundedSender<Arrival>,
    ready: Arc<Notify>,
    busy_poll: bool,
) -> tokio::task::JoinHandle<Result<(), String>> {
    on_own_thread(move || async move {
        if busy_poll {
            tokio::spawn(jelly_server::runtime::poll_without_sleeping());
        }
        let stop = tx.clone();
        tokio::select! {
            r = subscribe(transport, url, topic, tx, ready) => r,
            () = stop.closed() => Ok(()),
        }
    })
}

/// Runs the future `work` makes on a thread of its own, with a current-thread runtime:
/// its socket wake-ups go straight to the task that waits, with no hand-off between
/// runtime workers.
fn on_own_thread<T, F>(
    work: impl FnOnce() -> F + Send + 'static,
) -> tokio::task::JoinHandle<Result<T, String>>
where
    T: Send + 'static,
    F: std::future::Future<Output = Result<T, String>>,
{
    tokio::task::spawn_blocking(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        rt.block_on(work())
    })
}

async fn channel(url: &str) -> Result<Channel, String> {
    Channel::from_shared(url.to_string())
        .map_err(|e| e.to_string())?
        .initial_stream_window_size(8 << 20)
        .initial_connection_window_size(16 << 20)
        .connect()
        .await
        .map_err(|e| e.to_string())
}

/// A `PublishRdf` call of `frames` (one continuous stream).
async fn grpc_publish(
    url: &str,
    topic: &str,
    frames: impl futures_util::Stream<Item = Frame> + Send + 'static,
) -> Result<(), String> {
    let mut g = Grpc::new(channel(url).await?);
    g.ready().await.map_err(|e| e.to_string())?;
    let mut r = tonic::Request::new(frames);
    r.metadata_mut().insert(
        jelly_server::grpc::TOPIC_METADATA,
        topic.parse().map_err(|_| "bad topic")?,
    );
    g.client_streaming(
        r,
        PathAndQuery::from_static(PUBLISH_PATH),
        JellyCodec::<Frame, Received>::new(),
    )
    .await
    .map_err(|e| e.to_string())?;
    Ok(())
}

type WsStream =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Opens a WebSocket publish connection.
async fn ws_publisher(url: &str, topic: &str) -> Result<WsStream, String> {
    let ws_url = format!(
        "{}/topics/{topic}/ws/publish",
        url.replacen("http", "ws", 1)
    );
    // No Nagle, as the gRPC client (tonic sets TCP_NODELAY): at short intervals an item
    // would otherwise wait for the TCP acknowledgement of the one before.
    let (ws, _) = tokio_tungstenite::connect_async_with_config(ws_url, None, true)
        .await
        .map_err(|e| e.to_string())?;
    Ok(ws)
}

/// Reads acknowledgements until `n` frames are acknowledged.
async fn ws_acks(
    mut rx: futures_util::stream::SplitStream<WsStream>,
    n: usize,
) -> Result<(), String> {
    let mut acked = 0;
    while acked < n {
        match rx.next().await {
            Some(Ok(Message::Text(t))) => {
                if t.contains("\"error\"") {
                    return Err(format!("ws publish: {t}"));
                }
                acked += 1;
            }
            Some(Ok(Message::Close(c))) => return Err(format!("ws publish closed: {c:?}")),
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(e.to_string()),
            None => return Err(format!("ws publish ended after {acked} acks")),
        }
    }
    Ok(())
}

/// Items of one HTTP request (independent spliceable streams, so they concatenate).
const HTTP_BATCH: usize = 64;

/// Publishes every frame as fast as the transport takes them.
pub async fn publish_all(
    transport: Transport,
    url: String,
    topic: String,
    frames: Arc<Vec<Vec<u8>>>,
) -> Result<(), String> {
    match transport {
        Transport::Http => {
            let c = client();
            for batch in frames.chunks(HTTP_BATCH) {
                let mut body = Vec::new();
                for f in batch {
                    put_varint(&mut body, f.len() as u64);
                    body.extend_from_slice(f);
                }
                post(&c, &url, &topic, body).await?;
            }
            Ok(())
        }
        Transport::Grpc => {
            let n = frames.len();
            let stream = futures_util::stream::iter(
                (0..n).map(move |i| Frame(Bytes::copy_from_slice(&frames[i]))),
            );
            grpc_publish(&url, &topic, stream).await
        }
        Transport::Ws => {
            let (mut tx, rx) = ws_publisher(&url, &topic).await?.split();
            let acks = tokio::spawn(ws_acks(rx, frames.len()));
            for f in frames.iter() {
                tx.send(Message::Binary(Bytes::copy_from_slice(f)))
                    .await
                    .map_err(|e| e.to_string())?;
            }
            acks.await.map_err(|e| e.to_string())??;
            let _ = tx.send(Message::Close(None)).await;
            Ok(())
        }
    }
}

async fn post(c: &reqwest::Client, url: &str, topic: &str, body: Vec<u8>) -> Result<(), String> {
    let r = c
        .post(format!("{url}/topics/{topic}/items"))
        .header("content-type", "application/x-jelly-rdf")
        .body(body)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    if !r.status().is_success() {
        return Err(format!(
            "publish: {} {}",
            r.status(),
            r.text().await.unwrap_or_default()
        ));
    }
    Ok(())
}

/// Waits until `due` by sleeping. The thread's timer slack is set to 1 ns first
/// ([`tight_timers`]), so the sleep ends within microseconds of `due`; the send time
/// is taken after the wake-up, so a late wake-up shifts the schedule, never the
/// latency. (A spinning publisher would hold one of the machine's two vCPUs for
/// itself at 100 µs intervals, starving the server and the subscriber.)
fn wait_until(due: Instant) {
    let now = Instant::now();
    if due > now {
        std::thread::sleep(due - now);
    }
}

/// Sets this thread's timer slack to 1 ns (Linux; the default 50 µs would make
/// every paced sleep up to 50 µs late).
fn tight_timers() {
    // SAFETY: PR_SET_TIMERSLACK takes an integer and affects only this thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

/// Publishes one frame per `interval` on its own thread (open loop) and returns the
/// send time of each.
pub fn publish_paced(
    transport: Transport,
    url: String,
    topic: String,
    frames: Vec<Vec<u8>>,
    interval: Duration,
) -> tokio::task::JoinHandle<Result<Vec<Instant>, String>> {
    on_own_thread(move || {
        tight_timers();
        async move {
            let mut sent = Vec::with_capacity(frames.len());
            match transport {
                Transport::Http => {
                    let c = client();
                    let t0 = Instant::now() + Duration::from_millis(20);
                    for (i, f) in frames.into_iter().enumerate() {
                        wait_until(t0 + interval * i as u32);
                        sent.push(Instant::now());
                        let mut body = Vec::with_capacity(f.len() + 4);
                        put_varint(&mut body, f.len() as u64);
                        body.extend_from_slice(&f);
                        post(&c, &url, &topic, body).await?;
                    }
                    Ok(sent)
                }
                Transport::Grpc => {
                    // Frames go through a channel; each is stamped as it is handed over.
                    let (ftx, frx) = tokio::sync::mpsc::channel::<Frame>(1 << 16);
                    let call = tokio::spawn(async move {
                        grpc_publish(
                            &url,
                            &topic,
                            futures_util::stream::unfold(frx, |mut rx| async move {
                                rx.recv().await.map(|f| (f, rx))
                            }),
                        )
                        .await
                    });
                    let t0 = Instant::now() + Duration::from_millis(200);
                    for (i, f) in frames.into_iter().enumerate() {
                        wait_until(t0 + interval * i as u32);
                        sent.push(Instant::now());
                        if ftx.send(Frame(Bytes::from(f))).await.is_err() {
                            break;
                        }
                        // Let the call task write it now rather than after the next wait.
                        tokio::task::yield_now().await;
                    }
                    drop(ftx);
                    call.await.map_err(|e| e.to_string())??;
                    Ok(sent)
                }
                Transport::Ws => {
                    let n = frames.len();
                    let (mut tx, rx) = ws_publisher(&url, &topic).await?.split();
                    let acks = tokio::spawn(ws_acks(rx, n));
                    let t0 = Instant::now() + Duration::from_millis(50);
                    for (i, f) in frames.into_iter().enumerate() {
                        wait_until(t0 + interval * i as u32);
                        sent.push(Instant::now());
                        tx.send(Message::Binary(Bytes::from(f)))
                            .await
                            .map_err(|e| e.to_string())?;
                        tokio::task::yield_now().await;
                    }
                    acks.await.map_err(|e| e.to_string())??;
                    let _ = tx.send(Message::Close(None)).await;
                    Ok(sent)
                }
            }
        }
    })
}
