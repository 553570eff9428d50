//! Hostile clients on the HTTP/2, gRPC and WebSocket front-ends: floods and stalls
//! that must neither grow the server's memory without bound nor go unanswered.
//! (HTTP/1 slow heads and bodies, per-address limits, auth and TLS are in
//! `resilience.rs` and `security.rs`.)

mod support;

use std::convert::Infallible;
use std::time::Duration;

use axum::http::HeaderMap;
use bytes::Bytes;
use http_body_util::BodyExt as _;
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo};
use jelly::{Encoder, Statement, StreamOptions, Term};
use jelly_server::grpc::PUBLISH_PATH;
use jelly_server::{Server, ServerConfig};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::mpsc;

/// How long writes may make no progress before the server is taken to have stopped
/// reading. Only a stall is looked for: a slow machine makes the test pass more
/// easily, never fail.
const STALL: Duration = Duration::from_secs(1);

async fn start() -> Server {
    Server::start(ServerConfig::ephemeral()).await.unwrap()
}

/// Opens a WebSocket by hand on a socket with small kernel buffers, so that a client
/// that reads nothing backs the server's writes up quickly; returns the socket after
/// the 101 answer.
async fn raw_upgrade(srv: &Server, path: &str) -> TcpStream {
    let sock = TcpSocket::new_v4().unwrap();
    sock.set_recv_buffer_size(4 << 10).unwrap();
    sock.set_send_buffer_size(64 << 10).unwrap();
    let s = sock.connect(srv.local_addr()).await.unwrap();
    support::raw_ws_upgrade(s, srv, path).await
}

/// Writes masked pings with 125-byte payloads (the most a control frame holds) and
/// reads nothing, until `limit` bytes are written or the writes stall; returns the
/// bytes written.
async fn ping_without_reading(s: &mut TcpStream, limit: usize) -> usize {
    let mut ping = vec![0x89, 0x80 | 125, 0, 0, 0, 0];
    ping.extend_from_slice(&[b'p'; 125]);
    let batch = ping.repeat(1000);
    let mut written = 0;
    while written < limit {
        match tokio::time::timeout(STALL, s.write_all(&batch)).await {
            Ok(Ok(())) => written += batch.len(),
            Ok(Err(e)) => panic!("the server dropped the connection after {written} bytes: {e}"),
            Err(_) => break,
        }
    }
    written
}

/// A WebSocket client that sends pings and never reads the pongs: the server stops
/// reading its pings once the pongs back up, rather than queueing every pong (it grew
/// by about 120 bytes per ping, 200 MB for 1.6 million pings), on the subscribe and
/// the publish socket alike.
#[tokio::test]
async fn websocket_pings_from_a_client_that_never_reads_are_held_back() {
    let srv = start().await;
    let base = format!("http://{}", srv.local_addr());
    let r = reqwest::Client::new()
        .put(format!("{base}/topics/pings"))
        .json(&serde_json::json!({}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    const LIMIT: usize = 48 << 20;
    for path in ["/topics/pings/ws?from=latest", "/topics/pings/ws/publish"] {
        let mut s = raw_upgrade(&srv, path).await;
        let written = ping_without_reading(&mut s, LIMIT).await;
        // What the kernel buffers of the two sockets hold, and no more: a server that
        // kept reading would take all of it.
        assert!(
            written < LIMIT / 2,
            "{path}: the server read {written} bytes of pings whose pongs it could not send"
        );
    }
    srv.shutdown().await.unwrap();
}

/// A request body whose data the test sends as it goes; dropping the sender ends it.
type H2Body = http_body_util::StreamBody<
    futures_util::stream::BoxStream<'static, Result<http_body::Frame<Bytes>, Infallible>>,
>;

fn h2_body() -> (mpsc::UnboundedSender<Bytes>, H2Body) {
    let (tx, rx) = mpsc::unbounded_channel::<Bytes>();
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        let data = rx.recv().await?;
        Some((Ok(http_body::Frame::data(data)), rx))
    });
    (tx, http_body_util::StreamBody::new(Box::pin(stream)))
}

/// One HTTP/2 connection (cleartext, prior knowledge): every request sent on it is a
/// stream of the same connection.
async fn h2_connection(srv: &Server) -> SendRequest<H2Body> {
    let tcp = TcpStream::connect(srv.local_addr()).await.unwrap();
    let (send, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
            .await
            .unwrap();
    tokio::spawn(conn);
    send
}

/// A `PublishRdf` call on `send`'s connection; its answer's headers and trailers
/// together, once the call ends.
fn grpc_publish(
    send: &SendRequest<H2Body>,
    srv: &Server,
    topic: &str,
    body: H2Body,
) -> tokio::task::JoinHandle<HeaderMap> {
    let mut send = send.clone();
    let req = hyper::Request::post(format!("{}{PUBLISH_PATH}", srv.url()))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .header("x-jelly-topic", topic)
        .body(body)
        .unwrap();
    tokio::spawn(async move {
        let resp = send.send_request(req).await.unwrap();
        let mut all = resp.headers().clone();
        let collected = resp.into_body().collect().await.unwrap();
        all.extend(collected.trailers().cloned().unwrap_or_default());
        all
    })
}

/// A publisher's first frame (the options row and one triple), as a gRPC message.
fn grpc_frame(i: usize) -> Bytes {
    let mut enc = Encoder::new(StreamOptions::small()).unwrap();
    let st = Statement {
        subject: Term::Iri(format!("http://ex.org/s{i}")),
        predicate: Term::Iri("http://ex.org/p".into()),
        object: Term::Iri("http://ex.org/o".into()),
        graph: None,
    };
    enc.add(st.as_ref()).unwrap();
    let frame = enc.finish_frame();
    let mut msg = vec![0];
    msg.extend_from_slice(&(frame.len() as u32).to_be_bytes());
    msg.extend_from_slice(&frame);
    Bytes::from(msg)
}

async fn items(srv: &Server, topic: &str) -> u64 {
    let v: serde_json::Value = reqwest::get(format!("{}/topics/{topic}", srv.url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    v["items"].as_u64().unwrap_or(0)
}

/// HTTP/2 runs many requests on one connection, and each publish may buffer a whole
/// message or body (50 `PublishRdf` calls stalled one byte short of a 16 MiB message
/// held 820 MB). `max_publishes_per_connection` bounds them: one more is refused, over
/// gRPC and HTTP alike, with a message naming the setting, while other connections
/// publish as before and an ended publish gives its place back.
#[tokio::test]
async fn publishes_at_once_on_one_http2_connection_are_limited() {
    let srv = Server::start(ServerConfig {
        max_publishes_per_connection: 2,
        ..ServerConfig::ephemeral()
    })
    .await
    .unwrap();
    let send = h2_connection(&srv).await;
    // Two calls in progress: each has sent a frame (appended) and goes on.
    let mut open = Vec::new();
    for i in 0..2 {
        let (tx, body) = h2_body();
        tx.send(grpc_frame(i)).unwrap();
        open.push((tx, grpc_publish(&send, &srv, "limited", body)));
    }
    while items(&srv, "limited").await < 2 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A third call on the same connection, complete in itself: refused.
    let (tx, body) = h2_body();
    tx.send(grpc_frame(2)).unwrap();
    drop(tx);
    let third = grpc_publish(&send, &srv, "limited", body).await.unwrap();
    assert_eq!(third["grpc-status"], "8", "{third:?}");
    let message = third["grpc-message"].to_str().unwrap();
    assert!(
        message.contains("max_publishes_per_connection"),
        "{message}"
    );
    // An atomic HTTP publish on the same connection: 429 with a JSON error.
    let req = hyper::Request::post(format!("{}/topics/limited/items", srv.url()))
        .header("content-type", "application/n-quads")
        .body({
            let (tx, body) = h2_body();
            tx.send(Bytes::from_static(
                b"<http://ex.org/a> <http://ex.org/p> <http://ex.org/b> .\n",
            ))
            .unwrap();
            body
        })
        .unwrap();
    let resp = send.clone().send_request(req).await.unwrap();
    assert_eq!(resp.status(), 429);
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    let err: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert!(
        err["error"]
            .as_str()
            .unwrap()
            .contains("max_publishes_per_connection"),
        "{err}"
    );
    assert_eq!(
        items(&srv, "limited").await,
        2,
        "nothing refused was appended"
    );
    // Another connection publishes as before.
    let r = reqwest::Client::new()
        .post(format!("{}/topics/limited/items", srv.url()))
        .header("content-type", "application/n-quads")
        .body("<http://ex.org/a> <http://ex.org/p> <http://ex.org/b> .\n")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    // One call ends; its place is free again on the first connection.
    let (tx, first) = open.remove(0);
    drop(tx);
    assert_eq!(first.await.unwrap()["grpc-status"], "0");
    let (tx, body) = h2_body();
    tx.send(grpc_frame(3)).unwrap();
    drop(tx);
    let again = grpc_publish(&send, &srv, "limited", body).await.unwrap();
    assert_eq!(again["grpc-status"], "0", "{again:?}");
    drop(open);
    srv.shutdown().await.unwrap();
}

/// An HTTP/2 frame: 9-byte header, then the payload.
fn h2_frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let n = payload.len();
    let mut f = vec![(n >> 16) as u8, (n >> 8) as u8, n as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// A HPACK block for `GET path` over `http` (literals without indexing; short values).
fn get_headers(path: &str) -> Vec<u8> {
    // :method GET, :scheme http (static table entries 2 and 6).
    let mut h = vec![0x82, 0x86];
    for (index, value) in [(4u8, path), (1, "localhost")] {
        assert!(value.len() < 127);
        h.extend_from_slice(&[index, value.len() as u8]);
        h.extend_from_slice(value.as_bytes());
    }
    h
}

/// Reads one frame: kind, flags, stream and payload.
async fn read_h2_frame(s: &mut TcpStream) -> (u8, u8, u32, Vec<u8>) {
    let mut head = [0u8; 9];
    s.read_exact(&mut head).await.unwrap();
    let n = (head[0] as usize) << 16 | (head[1] as usize) << 8 | head[2] as usize;
    let mut payload = vec![0u8; n];
    s.read_exact(&mut payload).await.unwrap();
    let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
    (head[3], head[4], stream, payload)
}

/// `http2_max_concurrent_streams` is announced in the server's SETTINGS, and a client
/// that opens more live subscriptions than that on one connection has the extra one
/// refused (`REFUSED_STREAM`) while the others are answered.
#[tokio::test]
async fn http2_streams_over_the_configured_limit_are_refused() {
    const SETTINGS: u8 = 4;
    const HEADERS: u8 = 1;
    const RST_STREAM: u8 = 3;
    let srv = Server::start(ServerConfig {
        http2_max_concurrent_streams: 3,
        ..ServerConfig::ephemeral()
    })
    .await
    .unwrap();
    reqwest::Client::new()
        .put(format!("{}/topics/streams", srv.url()))
        .json(&serde_json::json!({}))
        .send()
        .await
        .unwrap();
    let mut s = TcpStream::connect(srv.local_addr()).await.unwrap();
    let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    hello.extend(h2_frame(SETTINGS, 0, 0, &[]));
    s.write_all(&hello).await.unwrap();
    let (kind, _, _, settings) = read_h2_frame(&mut s).await;
    assert_eq!(kind, SETTINGS);
    let announced: Vec<(u16, u32)> = settings
        .chunks(6)
        .map(|c| {
            (
                u16::from_be_bytes([c[0], c[1]]),
                u32::from_be_bytes([c[2], c[3], c[4], c[5]]),
            )
        })
        .collect();
    // SETTINGS_MAX_CONCURRENT_STREAMS is setting 3.
    assert!(announced.contains(&(3, 3)), "{announced:?}");
    // Four live subscriptions (END_STREAM | END_HEADERS) on streams 1, 3, 5, 7.
    let block = get_headers("/topics/streams/items?from=earliest");
    let mut opens = Vec::new();
    for i in 0..4 {
        opens.extend(h2_frame(HEADERS, 0x5, 2 * i + 1, &block));
    }
    s.write_all(&opens).await.unwrap();
    let (mut answered, mut refused) = (Vec::new(), Vec::new());
    while answered.len() + refused.len() < 4 {
        let (kind, _, stream, payload) =
            tokio::time::timeout(Duration::from_secs(10), read_h2_frame(&mut s))
                .await
                .expect("an answer for every stream");
        match kind {
            HEADERS => answered.push(stream),
            // REFUSED_STREAM is error code 7.
            RST_STREAM => {
                assert_eq!(payload, 7u32.to_be_bytes(), "stream {stream}");
                refused.push(stream);
            }
            _ => {}
        }
    }
    answered.sort();
    assert_eq!((answered, refused), (vec![1, 3, 5], vec![7]));
    drop(s);
    srv.shutdown().await.unwrap();
}

/// An HTTP/2 connection of `srv` and the task that drives it: the task ends when the
/// connection does.
async fn h2_connection_watched(
    srv: &Server,
) -> (
    SendRequest<http_body_util::Empty<Bytes>>,
    tokio::task::JoinHandle<()>,
) {
    let tcp = TcpStream::connect(srv.local_addr()).await.unwrap();
    let (send, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
            .await
            .unwrap();
    let task = tokio::spawn(async move {
        let _ = conn.await;
    });
    (send, task)
}

fn h2_get(srv: &Server, path: &str) -> hyper::Request<http_body_util::Empty<Bytes>> {
    hyper::Request::get(format!("http://{}{path}", srv.local_addr()))
        .body(http_body_util::Empty::new())
        .unwrap()
}

/// An HTTP/2 connection with no request open is closed after the header read timeout,
/// as an idle HTTP/1 keep-alive connection is; one with a live subscription open is
/// not, however long it is quiet, and is closed once that ends.
#[tokio::test]
async fn idle_http2_connections_are_closed_but_open_streams_keep_theirs() {
    let timeout = Duration::from_millis(300);
    let srv = Server::start(ServerConfig {
        header_read_timeout_ms: timeout.as_millis() as u64,
        ..ServerConfig::ephemeral()
    })
    .await
    .unwrap();
    reqwest::Client::new()
        .put(format!("{}/topics/idle", srv.url()))
        .json(&serde_json::json!({}))
        .send()
        .await
        .unwrap();
    // One request, then nothing: the connection ends (the bound only catches a hang).
    let (mut send, conn) = h2_connection_watched(&srv).await;
    let r = send.send_request(h2_get(&srv, "/health")).await.unwrap();
    assert_eq!(r.status(), 200);
    r.into_body().collect().await.unwrap();
    tokio::time::timeout(Duration::from_secs(30), conn)
        .await
        .expect("an idle HTTP/2 connection was not closed")
        .unwrap();

    // A live subscription, quiet for ten times the timeout, still gets the next item.
    let (mut send, conn) = h2_connection_watched(&srv).await;
    let r = send
        .send_request(h2_get(&srv, "/topics/idle/items?from=latest&format=nquads"))
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let mut body = r.into_body();
    tokio::time::sleep(timeout * 10).await;
    assert!(!conn.is_finished(), "closed with a stream open");
    let line = "<http://ex.org/s> <http://ex.org/p> \"quiet\" .\n";
    let p = reqwest::Client::new()
        .post(format!("{}/topics/idle/items", srv.url()))
        .header("content-type", "application/n-quads")
        .body(line)
        .send()
        .await
        .unwrap();
    assert!(p.status().is_success(), "{}", p.status());
    let mut got = Vec::new();
    while !String::from_utf8_lossy(&got).contains("quiet") {
        let frame = tokio::time::timeout(Duration::from_secs(30), body.frame())
            .await
            .expect("the item did not come")
            .expect("the stream ended")
            .unwrap();
        if let Ok(d) = frame.into_data() {
            got.extend_from_slice(&d);
        }
    }
    // The subscription ends: now the connection is idle, and closed.
    drop(body);
    tokio::time::timeout(Duration::from_secs(30), conn)
        .await
        .expect("the connection was not closed once its stream ended")
        .unwrap();
    srv.shutdown().await.unwrap();
}

/// A publish call may be quiet between messages for as long as it likes, but a message
/// it has started must keep coming: stalled inside one (holding the server's buffer
/// for it), the call ends with `DEADLINE_EXCEEDED` after `body_read_timeout_ms`, and
/// the messages before it stay appended.
#[tokio::test]
async fn a_grpc_publish_stalled_inside_a_message_is_ended() {
    let pause = Duration::from_millis(300);
    let srv = Server::start(ServerConfig {
        body_read_timeout_ms: pause.as_millis() as u64,
        ..ServerConfig::ephemeral()
    })
    .await
    .unwrap();
    let send = h2_connection(&srv).await;
    let (tx, body) = h2_body();
    let call = grpc_publish(&send, &srv, "stalled", body);
    // Whole messages with long pauses between them are fine.
    tx.send(grpc_frame(0)).unwrap();
    while items(&srv, "stalled").await < 1 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(pause * 4).await;
    assert!(!call.is_finished(), "ended while between messages");
    // A message announced as 1,000 bytes, of which 10 come.
    let mut part = vec![0u8, 0, 0, 0x03, 0xe8];
    part.extend_from_slice(&[0u8; 10]);
    tx.send(Bytes::from(part)).unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(30), call)
        .await
        .expect("a call stalled inside a message was not ended")
        .unwrap();
    assert_eq!(answer["grpc-status"], "4", "{answer:?}");
    let message = answer["grpc-message"].to_str().unwrap().replace("%20", " ");
    assert!(
        message.contains("frame 1")
            && message.contains("990 byte(s) of it still to come (body_read_timeout_ms)"),
        "{message}"
    );
    assert_eq!(items(&srv, "stalled").await, 1, "the first message stays");
    drop(tx);
    srv.shutdown().await.unwrap();
}
