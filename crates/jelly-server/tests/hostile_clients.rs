//! Hostile clients on the HTTP/2, gRPC and WebSocket front-ends: floods and stalls
//! that must neither grow the server's memory without bound nor go unanswered.
//! (HTTP/1 slow heads and bodies, per-address limits, auth and TLS are in
//! `resilience.rs` and `security.rs`.)

use std::time::Duration;

use jelly_server::{Server, ServerConfig};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpSocket, TcpStream};

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
    let mut s = sock.connect(srv.local_addr()).await.unwrap();
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: {}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        srv.local_addr()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut b = [0u8; 1];
        assert_eq!(
            s.read(&mut b).await.unwrap(),
            1,
            "connection ended in the answer"
        );
        head.push(b[0]);
    }
    assert!(
        head.starts_with(b"HTTP/1.1 101"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    s
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
