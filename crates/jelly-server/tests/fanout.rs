//! Encode-once fan-out on real loopback sockets: many subscribers share one group and
//! get the same bytes, joiners (from the start, mid-stream, at the head) decode
//! correctly, buffer windows batch items, and a subscriber that stops reading holds
//! up nobody and catches up (or is closed) by the documented policy.

mod support;
use support::{frames, metric, wait_delivered};

use std::time::Duration;

use jelly::{Event, Statement};
use jelly_server::{Server, ServerConfig};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

async fn start_with(f: impl FnOnce(&mut ServerConfig)) -> Server {
    let mut c = ServerConfig {
        sse_keepalive_secs: 1,
        ..ServerConfig::ephemeral()
    };
    f(&mut c);
    Server::start(c).await.unwrap()
}

/// A client that asks for no compression (raw bytes, as sent).
fn plain_client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_gzip()
        .no_zstd()
        .no_brotli()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap()
}

/// `n` items (one graph each, `per` triples), offsets `first..first+n` in the
/// subjects so that every item's statements differ.
fn nquads(first: usize, n: usize, per: usize) -> String {
    let mut s = String::new();
    for i in first..first + n {
        for j in 0..per {
            s.push_str(&format!(
                "<http://example.org/item/{i}> <http://example.org/p/{}> \"value {i} {j} {}\" <http://example.org/g/{i}> .\n",
                j % 7,
                "x".repeat(j % 13)
            ));
        }
    }
    s
}

/// `n` items of about `size` bytes each: one triple with a long literal.
fn big_nquads(first: usize, n: usize, size: usize) -> String {
    let mut s = String::new();
    for i in first..first + n {
        s.push_str(&format!(
            "<http://example.org/item/{i}> <http://example.org/p> \"{}\" <http://example.org/g/{i}> .\n",
            "y".repeat(size)
        ));
    }
    s
}

/// Publishes `n` items of about `size` bytes each (one append).
async fn publish_sized(
    c: &reqwest::Client,
    srv: &Server,
    topic: &str,
    first: usize,
    n: usize,
    size: usize,
) {
    let r = c
        .post(format!("{}/topics/{topic}/items?split=graph", srv.url()))
        .header("content-type", "application/n-quads")
        .body(big_nquads(first, n, size))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "publish: {}", r.status());
}

/// Publishes `n` big items (100 KB each, one append).
async fn publish_big(c: &reqwest::Client, srv: &Server, topic: &str, first: usize, n: usize) {
    publish_sized(c, srv, topic, first, n, 100_000).await;
}

/// Publishes `n` items (one append).
async fn publish(c: &reqwest::Client, srv: &Server, topic: &str, first: usize, n: usize) {
    let per = 5;
    let r = c
        .post(format!("{}/topics/{topic}/items?split=graph", srv.url()))
        .header("content-type", "application/n-quads")
        .body(nquads(first, n, per))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "publish: {}", r.status());
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["offsets"].as_array().unwrap().len(), n);
}

/// Complete delimited frames at the start of `bytes`.
fn complete_frames(bytes: &[u8]) -> usize {
    let (mut pos, mut n) = (0usize, 0);
    loop {
        let mut len = 0usize;
        let mut shift = 0;
        let mut p = pos;
        loop {
            let Some(&b) = bytes.get(p) else { return n };
            len |= ((b & 0x7f) as usize) << shift;
            shift += 7;
            p += 1;
            if b & 0x80 == 0 {
                break;
            }
        }
        if p + len > bytes.len() {
            return n;
        }
        pos = p + len;
        n += 1;
    }
}

/// Reads a live (uncompressed) Jelly stream until it holds `n` frames; also counts
/// the chunks that arrived.
async fn read_frames(r: &mut reqwest::Response, n: usize) -> (Vec<u8>, usize) {
    let mut buf = Vec::new();
    let mut chunks = 0;
    while complete_frames(&buf) < n {
        let c = tokio::time::timeout(Duration::from_secs(30), r.chunk())
            .await
            .expect("items arrive")
            .unwrap()
            .expect("the stream goes on");
        buf.extend_from_slice(&c);
        chunks += 1;
    }
    (buf, chunks)
}

/// The whole topic, as one private (follow=false) stream.
async fn everything(c: &reqwest::Client, srv: &Server, topic: &str) -> Vec<u8> {
    let r = c
        .get(format!(
            "{}/topics/{topic}/items?follow=false&format=jelly",
            srv.url()
        ))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    r.bytes().await.unwrap().to_vec()
}

async fn create(c: &reqwest::Client, srv: &Server, topic: &str, body: serde_json::Value) {
    let r = c
        .put(format!("{}/topics/{topic}", srv.url()))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "create: {}", r.status());
}

#[tokio::test]
async fn many_subscribers_share_one_group_and_get_the_same_bytes() {
    let srv = start_with(|_| {}).await;
    let c = plain_client();
    publish(&c, &srv, "t", 0, 10).await;
    let url = |from: &str| format!("{}/topics/t/items?format=jelly&from={from}", srv.url());
    // Half from the start (private catch-up, then shared), half from the head.
    let mut early = Vec::new();
    let mut late = Vec::new();
    for i in 0..200 {
        let from = if i % 2 == 0 { "earliest" } else { "latest" };
        let r = c.get(url(from)).send().await.unwrap();
        assert!(r.status().is_success());
        assert_eq!(
            r.headers()["x-jelly-start-offset"],
            if i % 2 == 0 { "0" } else { "10" }
        );
        assert!(r.headers().get("content-encoding").is_none());
        if i % 2 == 0 {
            early.push(r)
        } else {
            late.push(r)
        }
    }
    assert_eq!(
        metric(&c, &srv, "jelly_fanout_groups").await,
        1,
        "one group for all"
    );
    for k in 0..4 {
        publish(&c, &srv, "t", 10 + 5 * k, 5).await;
    }
    let full = everything(&c, &srv, "t").await;
    let all = frames(&full);
    assert_eq!(all.len(), 30);

    let mut first: Option<Vec<u8>> = None;
    for r in &mut early {
        let (bytes, _) = read_frames(r, 30).await;
        // From the start: exactly what a private reader of the whole log gets.
        assert_eq!(bytes, full);
        if let Some(f) = &first {
            assert_eq!(&bytes, f);
        }
        first = Some(bytes);
    }
    let mut first: Option<Vec<u8>> = None;
    for r in &mut late {
        let (bytes, _) = read_frames(r, 20).await;
        assert_eq!(frames(&bytes), all[10..].to_vec(), "a joiner at the head");
        if let Some(f) = &first {
            assert_eq!(&bytes, f, "subscribers at the head get the same bytes");
        }
        first = Some(bytes);
    }
    assert!(metric(&c, &srv, "jelly_fanout_shared_bytes_total").await > 0);
    // Another format is another group; all gone once the subscribers leave.
    let nq = c
        .get(format!("{}/topics/t/items?format=nquads", srv.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(metric(&c, &srv, "jelly_fanout_groups").await, 2);
    drop((early, late, nq));
    for _ in 0..500 {
        if metric(&c, &srv, "jelly_fanout_groups").await == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(metric(&c, &srv, "jelly_fanout_groups").await, 0);
    srv.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_joiner_mid_stream_decodes_from_its_offset() {
    let srv = start_with(|_| {}).await;
    let c = plain_client();
    create(&c, &srv, "t", serde_json::json!({})).await;
    let url = |q: &str| format!("{}/topics/t/items?format=jelly&{q}", srv.url());
    let mut a = c.get(url("from=latest")).send().await.unwrap();
    publish(&c, &srv, "t", 0, 10).await; // one block [0, 10)
    read_frames(&mut a, 10).await;
    // Joins inside the group's block: items 5..9 privately, then shared blocks.
    let mut b = c.get(url("from=5")).send().await.unwrap();
    publish(&c, &srv, "t", 10, 10).await;
    let all = frames(&everything(&c, &srv, "t").await);
    let (bytes, _) = read_frames(&mut b, 15).await;
    assert_eq!(frames(&bytes), all[5..].to_vec());
    assert_eq!(metric(&c, &srv, "jelly_fanout_groups").await, 1);
    // Text formats share too, and a joiner gets whole items.
    let mut t = c
        .get(format!(
            "{}/topics/t/items?format=nquads&from=12",
            srv.url()
        ))
        .send()
        .await
        .unwrap();
    publish(&c, &srv, "t", 20, 1).await;
    let mut text = String::new();
    // Statement lines only: each item also starts with a `# offset N` comment.
    while text.lines().filter(|l| !l.starts_with('#')).count() < 9 * 5 {
        text.push_str(std::str::from_utf8(&t.chunk().await.unwrap().unwrap()).unwrap());
    }
    let want: Vec<Statement> = all[12..].iter().flat_map(|(_, s)| s.clone()).collect();
    let got = jelly::nquads::parse_document(&text).unwrap();
    assert_eq!(got.len(), want.len() + 5);
    assert_eq!(got[..want.len()].to_vec(), want);
    srv.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_window_batches_items_and_zero_sends_each_read() {
    let srv = start_with(|_| {}).await;
    let c = plain_client();
    create(&c, &srv, "t", serde_json::json!({})).await;
    let url = |w: u64| format!("{}/topics/t/items?from=latest&window={w}", srv.url());
    let mut windowed = c.get(url(300)).send().await.unwrap();
    let mut immediate = c.get(url(0)).send().await.unwrap();
    // A compact subscription is its own (no group), and honours its window too.
    let mut compact = c
        .get(format!("{}&format=jelly&mode=compact", url(300)))
        .send()
        .await
        .unwrap();
    assert_eq!(metric(&c, &srv, "jelly_fanout_groups").await, 2);
    let n = 20;
    for i in 0..n {
        publish(&c, &srv, "t", i, 1).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (wb, w_chunks) = read_frames(&mut windowed, n).await;
    let (ib, _) = read_frames(&mut immediate, n).await;
    assert_eq!(wb, ib, "the same bytes, cut differently");
    assert!(
        w_chunks < n / 2,
        "items published 20 ms apart come in a few batches with a 300 ms window: {w_chunks} chunks for {n} items"
    );
    let (_, c_chunks) = read_frames(&mut compact, n).await;
    assert!(
        c_chunks < n / 2,
        "a compact subscription with a 300 ms window: {c_chunks} chunks for {n} items"
    );
    let bad = c.get(url(3_600_000)).send().await.unwrap();
    assert_eq!(bad.status(), reqwest::StatusCode::BAD_REQUEST);
    assert!(bad.text().await.unwrap().contains("window"));
    srv.shutdown().await.unwrap();
}

/// Sends a GET on a raw socket with a small receive buffer and reads nothing.
async fn stalled_subscriber(srv: &Server, path: &str) -> tokio::net::TcpStream {
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    let mut s = sock.connect(srv.local_addr()).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").as_bytes())
        .await
        .unwrap();
    s
}

/// Reads a raw HTTP/1.1 chunked response to its end: the body.
async fn read_chunked_body(s: &mut tokio::net::TcpStream) -> Vec<u8> {
    read_chunks(s, |_| false).await.0.concat()
}

/// Reads a raw HTTP/1.1 chunked response to its end, or until `enough` says so of the
/// body so far: its chunks, and whether it ended with the last chunk (an orderly end,
/// not a connection closed). Panics after 30 s without either.
async fn read_chunks(
    s: &mut tokio::net::TcpStream,
    enough: impl Fn(&[u8]) -> bool,
) -> (Vec<Vec<u8>>, bool) {
    let mut raw = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match tokio::time::timeout(Duration::from_secs(30), s.read(&mut buf)).await {
            Ok(Ok(0)) => break,
            Ok(Ok(n)) => raw.extend_from_slice(&buf[..n]),
            Ok(Err(e)) => panic!("read: {e}"),
            // A response that neither ends nor is cut off is a hang, not an end.
            Err(_) => panic!("the response did not end within 30 s"),
        }
        if raw.ends_with(b"\r\n0\r\n\r\n") || enough(&raw) {
            break;
        }
    }
    let head_end = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8_lossy(&raw[..head_end]).to_lowercase();
    assert!(head.contains("transfer-encoding: chunked"), "{head}");
    let mut chunks = Vec::new();
    let mut p = head_end;
    while let Some(eol) = raw[p..].windows(2).position(|w| w == b"\r\n") {
        let size =
            usize::from_str_radix(std::str::from_utf8(&raw[p..p + eol]).unwrap(), 16).unwrap();
        p += eol + 2;
        if size == 0 || p + size > raw.len() {
            break;
        }
        chunks.push(raw[p..p + size].to_vec());
        p += size + 2;
    }
    (chunks, raw.ends_with(b"\r\n0\r\n\r\n"))
}

#[tokio::test]
async fn text_output_goes_out_in_bounded_chunks() {
    // A subscriber that does not read holds one chunk of output: 150 items of 20 KB
    // as N-Quads must not become one multi-MiB chunk, on a replay (its own reader) or
    // on a live subscription catching up from the log.
    let srv = start_with(|_| {}).await;
    let c = plain_client();
    let r = c
        .post(format!("{}/topics/t/items?split=graph", srv.url()))
        .header("content-type", "application/n-quads")
        .body(big_nquads(0, 150, 20_000))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    let limit = jelly_server::deliver::OUTPUT_CHUNK_BYTES + 21_000;
    for path in [
        "/topics/t/items?from=earliest&format=nquads&follow=false",
        "/topics/t/items?from=earliest&format=nquads",
    ] {
        let mut s = tokio::net::TcpStream::connect(srv.local_addr())
            .await
            .unwrap();
        s.write_all(format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let last = b"<http://example.org/g/149> .\n";
        let (chunks, _) =
            read_chunks(&mut s, |raw| raw.windows(last.len()).any(|w| w == last)).await;
        let body = chunks.concat();
        let items = body
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty() && l[0] == b'<');
        assert_eq!(items.count(), 150, "{path}: every item");
        let biggest = chunks.iter().map(Vec::len).max().unwrap();
        assert!(biggest <= limit, "{path}: a chunk of {biggest} bytes");
    }
    srv.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_stalled_subscriber_holds_up_nobody_and_catches_up_from_the_log() {
    // A tiny ring, so that the stalled subscriber lags out of it.
    let srv = start_with(|c| {
        c.fanout_ring_blocks = 4;
        c.fanout_ring_bytes = 64 << 10;
    })
    .await;
    let c = plain_client();
    create(&c, &srv, "t", serde_json::json!({})).await;
    let mut stalled = stalled_subscriber(&srv, "/topics/t/items?from=latest").await;
    let mut healthy = c
        .get(format!("{}/topics/t/items?from=latest", srv.url()))
        .send()
        .await
        .unwrap();
    wait_subscribers(&srv, "t", 2).await;
    // Far more than socket buffers hold (about 10 MB): the stalled connection's
    // writes block, and its place in the ring is dropped.
    let n = 100;
    for k in 0..n / 10 {
        publish_big(&c, &srv, "t", k * 10, 10).await;
    }
    let (bytes, _) = read_frames(&mut healthy, n).await;
    let all = frames(&everything(&c, &srv, "t").await);
    assert_eq!(frames(&bytes), all, "the healthy subscriber got everything");
    // The stalled one reads again: everything, in order, via catch-up from the log.
    let reader = tokio::spawn(async move { read_chunked_body(&mut stalled).await });
    wait_delivered(&srv, "t", 2).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let catchups = metric(&c, &srv, "jelly_fanout_catchups_total").await;
    srv.shutdown().await.unwrap();
    let body = reader.await.unwrap();
    assert_eq!(
        frames(&body),
        all,
        "the stalled subscriber got everything too"
    );
    assert!(catchups >= 1, "it lagged out of the ring and caught up");
}

/// A server with a tiny fan-out ring, a live subscriber of topic `t` at `path` that
/// reads nothing, and 100 large items published past the topic's retention of 20:
/// the subscriber has fallen behind retention by the time it reads again.
async fn stalled_behind_retention(path: &str) -> (Server, tokio::net::TcpStream) {
    let srv = start_with(|c| {
        c.fanout_ring_blocks = 2;
        c.fanout_ring_bytes = 16 << 10;
    })
    .await;
    let c = plain_client();
    create(&c, &srv, "t", serde_json::json!({"retention_items": 20})).await;
    let stalled = stalled_subscriber(&srv, path).await;
    wait_subscribers(&srv, "t", 1).await;
    for k in 0..10 {
        publish_big(&c, &srv, "t", k * 10, 10).await;
    }
    (srv, stalled)
}

#[tokio::test]
async fn a_stalled_subscriber_behind_retention_is_closed() {
    let (srv, mut stalled) = stalled_behind_retention("/topics/t/items?from=latest").await;
    let n = 100;
    // When it reads again it gets a prefix of the items, then the stream is cut off:
    // it missed items, so it must not end like a stream the server closed in order.
    let (chunks, ended_in_order) = read_chunks(&mut stalled, |_| false).await;
    let got = frames(&chunks.concat());
    assert!(got.len() < n, "items beyond retention are not sent");
    assert!(
        !ended_in_order,
        "a live stream that missed items ended in order"
    );
    for (i, (offset, _)) in got.iter().enumerate() {
        assert_eq!(*offset, i as u64, "in order from the start");
    }
    let t = srv.state().topics.get("t").unwrap();
    for _ in 0..500 {
        if t.subscribers().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(t.subscribers().is_empty(), "the subscription is closed");
    srv.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_stalled_sse_subscriber_behind_retention_gets_an_end_event() {
    // SSE says why in its last event, which pages read to stop reconnecting: that
    // stream ends in order.
    let (srv, mut stalled) =
        stalled_behind_retention("/topics/t/sse?from=latest&format=nquads").await;
    let (chunks, ended_in_order) = read_chunks(&mut stalled, |_| false).await;
    let body = String::from_utf8_lossy(&chunks.concat()).into_owned();
    let tail = &body[body.len().saturating_sub(400)..];
    assert!(
        tail.contains("event: end") && tail.contains("\"reason\":\"fell_behind\""),
        "{tail}"
    );
    assert!(ended_in_order, "{tail}");
    srv.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_replay_cut_short_by_retention_does_not_end_in_order() {
    // `follow=false` asks for a whole range: a reply missing its tail must not end
    // like a complete one (a client would take it for all of it).
    let srv = start_with(|_| {}).await;
    let c = plain_client();
    create(&c, &srv, "t", serde_json::json!({"retention_items": 20})).await;
    publish_sized(&c, &srv, "t", 0, 20, 500_000).await;
    let mut stalled = stalled_subscriber(
        &srv,
        "/topics/t/items?from=earliest&follow=false&format=nquads",
    )
    .await;
    // Time to start the replay (its end is fixed then). A replay started after the
    // publishes below would get 20 whole items and fail the test, not pass it.
    tokio::time::sleep(Duration::from_millis(500)).await;
    for k in 0..10 {
        publish_sized(&c, &srv, "t", 20 + k * 10, 10, 500_000).await;
    }
    let (chunks, ended_in_order) = read_chunks(&mut stalled, |_| false).await;
    let body = chunks.concat();
    let got = body
        .split(|b| *b == b'\n')
        .filter(|l| l.first() == Some(&b'<'))
        .count();
    assert!(got < 20, "items beyond retention are not sent ({got})");
    assert!(
        !ended_in_order,
        "a replay of {got} of 20 items ended like a whole one"
    );
    // A whole replay still ends in order.
    let mut s = tokio::net::TcpStream::connect(srv.local_addr())
        .await
        .unwrap();
    s.write_all(
        b"GET /topics/t/items?from=earliest&follow=false&format=nquads HTTP/1.1\r\nhost: x\r\n\r\n",
    )
    .await
    .unwrap();
    let (chunks, ended_in_order) = read_chunks(&mut s, |_| false).await;
    assert!(ended_in_order);
    let got = chunks
        .concat()
        .split(|b| *b == b'\n')
        .filter(|l| l.first() == Some(&b'<'))
        .count();
    assert_eq!(got, 20);
    srv.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_subscriber_at_the_head_is_not_carried_past_items_retention_dropped() {
    // One publish larger than retention: the group is overtaken and starts again at
    // the first retained item. A subscriber waiting at the head must not go on from
    // there as if nothing was lost: its stream is cut off, as for any subscriber
    // behind.
    let srv = start_with(|_| {}).await;
    let c = plain_client();
    create(&c, &srv, "t", serde_json::json!({"retention_items": 10})).await;
    publish(&c, &srv, "t", 0, 5).await;
    let mut s = tokio::net::TcpStream::connect(srv.local_addr())
        .await
        .unwrap();
    s.write_all(b"GET /topics/t/items?from=latest&format=nquads HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    wait_subscribers(&srv, "t", 1).await;
    publish(&c, &srv, "t", 5, 50).await; // offsets 5..55: only 45..55 are kept
    publish(&c, &srv, "t", 55, 3).await;
    let (chunks, ended) = read_chunks(&mut s, |_| false).await;
    let body = String::from_utf8(chunks.concat()).unwrap();
    assert!(
        !body.contains("<http://example.org/g/45>"),
        "items after the lost ones were sent as if none were lost: {}",
        &body[..body.len().min(300)]
    );
    assert!(
        !ended,
        "the stream is cut off (it missed items), not ended in order"
    );
    srv.shutdown().await.unwrap();
}

async fn wait_subscribers(srv: &Server, topic: &str, n: usize) {
    let t = srv.state().topics.get(topic).unwrap();
    for _ in 0..1000 {
        if t.subscribers().len() >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{n} subscribers of {topic} did not come");
}

#[tokio::test]
async fn websocket_and_sse_subscribers_share_groups_too() {
    use futures_util::StreamExt as _;
    use tokio_tungstenite::tungstenite::Message;

    let srv = start_with(|_| {}).await;
    let c = plain_client();
    publish(&c, &srv, "t", 0, 4).await;
    let ws_url = |q: &str| format!("ws://{}/topics/t/ws?{q}", srv.local_addr());
    let (mut w1, _) = tokio_tungstenite::connect_async(ws_url("from=earliest"))
        .await
        .unwrap();
    let (mut w2, _) = tokio_tungstenite::connect_async(ws_url("from=2&window=0"))
        .await
        .unwrap();
    let sse = |from: &str| {
        c.get(format!(
            "{}/topics/t/sse?format=jelly&from={from}",
            srv.url()
        ))
        .send()
    };
    let mut s1 = sse("0").await.unwrap();
    let mut s2 = sse("3").await.unwrap();
    assert_eq!(
        metric(&c, &srv, "jelly_fanout_groups").await,
        2,
        "one WebSocket group, one SSE group"
    );
    publish(&c, &srv, "t", 4, 4).await;
    let all = frames(&everything(&c, &srv, "t").await);

    // WebSocket: one binary message per item, one Jelly stream per connection.
    for (ws, from) in [(&mut w1, 0usize), (&mut w2, 2)] {
        let mut dec = jelly::Decoder::default();
        let mut got = Vec::new();
        while got.len() < all.len() - from {
            let m = tokio::time::timeout(Duration::from_secs(30), ws.next())
                .await
                .expect("a message in time")
                .unwrap()
                .unwrap();
            let Message::Binary(b) = m else { continue };
            let mut cur = dec.frame(&b);
            let meta = cur.metadata().unwrap();
            let (_, off) = meta.iter().find(|(k, _)| *k == "offset").unwrap();
            let off: u64 = std::str::from_utf8(off).unwrap().parse().unwrap();
            let mut st = Vec::new();
            while let Some(ev) = cur.next_event().unwrap() {
                if let Event::Statement(s) = ev {
                    st.push(s.to_owned());
                }
            }
            got.push((off, st));
        }
        assert_eq!(got, all[from..].to_vec(), "WebSocket from {from}");
    }

    // SSE: every Jelly event decodes alone (it keeps its options row).
    for (r, from) in [(&mut s1, 0usize), (&mut s2, 3)] {
        let mut text = String::new();
        let complete = |t: &str| {
            let parts: Vec<&str> = t.split("\n\n").collect();
            parts[..parts.len() - 1]
                .iter()
                .filter(|e| e.contains("event: item"))
                .count()
        };
        while complete(&text) < all.len() - from {
            let chunk = tokio::time::timeout(Duration::from_secs(30), r.chunk())
                .await
                .unwrap()
                .unwrap()
                .unwrap();
            text.push_str(std::str::from_utf8(&chunk).unwrap());
        }
        let events: Vec<&str> = text
            .split("\n\n")
            .filter(|e| e.contains("event: item"))
            .collect();
        assert_eq!(events.len(), all.len() - from);
        for (e, (offset, st)) in events.iter().zip(&all[from..]) {
            assert!(e.starts_with(&format!("id: {offset}\n")), "{e}");
            let data = e.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
            let mut dec = jelly::Decoder::default();
            let bytes = unbase64(data);
            let mut cur = dec.frame(&bytes);
            let mut got = Vec::new();
            while let Some(ev) = cur.next_event().unwrap() {
                if let Event::Statement(s) = ev {
                    got.push(s.to_owned());
                }
            }
            assert_eq!(&got, st, "SSE event {offset} decodes alone");
        }
    }
    srv.shutdown().await.unwrap();
}

/// Standard base64 (the data of an SSE Jelly event).
fn unbase64(s: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        _ => 63,
    };
    let bytes: Vec<u8> = s.bytes().filter(|&c| c != b'=').collect();
    let mut out = Vec::new();
    for chunk in bytes.chunks(4) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= u32::from(val(c)) << (18 - 6 * i);
        }
        let k = chunk.len() * 6 / 8;
        for i in 0..k {
            out.push((n >> (16 - 8 * i)) as u8);
        }
    }
    out
}

/// A live N-Quads subscription to `topic` from now, filtered by query parameter
/// `param` = `value`.
async fn subscribe_filtered(
    c: &reqwest::Client,
    srv: &Server,
    topic: &str,
    param: &str,
    value: &str,
) -> reqwest::Result<reqwest::Response> {
    let value: String = form_urlencoded::byte_serialize(value.as_bytes()).collect();
    c.get(format!(
        "{}/topics/{topic}/items?format=nquads&from=latest&{param}={value}",
        srv.url()
    ))
    .send()
    .await
}

/// `ask` filters that ask the same share a group: the same text (with an aggregate,
/// which the SPARQL parser names at random), other spacing, and the query as the
/// SPARQL printer writes it (a nested SELECT).
#[tokio::test]
async fn subscribers_with_the_same_ask_filter_share_its_group() {
    let srv = start_with(|_| {}).await;
    let c = plain_client();
    publish(&c, &srv, "t", 0, 4).await;
    let count = "ASK { { SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o } } FILTER(?n > 4) }";
    let mut subscribers = Vec::new();
    for ask in [
        count,
        count,
        "ask {{select (count(*) as ?n) {?s ?p ?o}}\nfilter(?n>4)}",
    ] {
        subscribers.push(subscribe_filtered(&c, &srv, "t", "ask", ask).await.unwrap());
    }
    assert_eq!(metric(&c, &srv, "jelly_fanout_groups").await, 1);
    for ask in [
        "ASK { ?s <http://example.org/p> ?o }",
        "ASK WHERE { SELECT ?o ?s WHERE { ?s <http://example.org/p> ?o . } }",
    ] {
        subscribers.push(subscribe_filtered(&c, &srv, "t", "ask", ask).await.unwrap());
    }
    for r in &subscribers {
        assert!(r.status().is_success(), "{}", r.status());
    }
    assert_eq!(
        metric(&c, &srv, "jelly_fanout_groups").await,
        2,
        "equal filters share one group, a different filter has its own"
    );
    drop(subscribers);
    srv.shutdown().await.unwrap();
}

#[tokio::test]
async fn subscribers_with_the_same_filter_share_its_group() {
    let srv = start_with(|_| {}).await;
    let c = plain_client();
    publish(&c, &srv, "t", 0, 4).await;
    // The same pattern written twice (other spacing), and a different one.
    let a = subscribe_filtered(&c, &srv, "t", "pattern", "<http://example.org/item/5> * *")
        .await
        .unwrap();
    let b = subscribe_filtered(
        &c,
        &srv,
        "t",
        "pattern",
        "  <http://example.org/item/5>   *  * ",
    )
    .await
    .unwrap();
    let other = subscribe_filtered(&c, &srv, "t", "pattern", "<http://example.org/item/6> * *")
        .await
        .unwrap();
    for r in [&a, &b, &other] {
        assert!(r.status().is_success(), "{}", r.status());
    }
    assert_eq!(
        metric(&c, &srv, "jelly_fanout_groups").await,
        2,
        "equal filters share one group, a different filter has its own"
    );
    publish(&c, &srv, "t", 4, 4).await;
    let mut texts = Vec::new();
    for (mut r, want) in [(a, "item/5>"), (b, "item/5>"), (other, "item/6>")] {
        // The item's 5 statements, whole.
        let mut text = String::new();
        while text.matches(want).count() < 5 || !text.ends_with('\n') {
            let chunk = tokio::time::timeout(Duration::from_secs(10), r.chunk())
                .await
                .expect("an item within 10 s")
                .unwrap()
                .expect("the stream goes on");
            text.push_str(std::str::from_utf8(&chunk).unwrap());
        }
        texts.push(text);
    }
    assert!(texts[0].contains("<http://example.org/item/5>"));
    assert!(!texts[0].contains("item/4>") && !texts[0].contains("item/6>"));
    assert_eq!(texts[0], texts[1], "the same filter, the same bytes");
    assert!(texts[2].contains("<http://example.org/item/6>"));
    assert!(!texts[2].contains("item/5>"));
    srv.shutdown().await.unwrap();
}
