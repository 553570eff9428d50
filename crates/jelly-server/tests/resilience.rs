//! What the server does about damage and slow clients, on real loopback sockets: a
//! topic whose log is corrupt fails alone (503) while the others are served, and
//! clients that send half a request head or stall in a body are disconnected or
//! answered 408 instead of holding a connection for ever; and the tail caches of many
//! topics stay under one bound.

mod support;

use std::time::{Duration, Instant};

use jelly::{Statement, StreamOptions};
use jelly_server::{Server, ServerConfig};
use reqwest::StatusCode;
use serde_json::Value;
use support::{TempDir, client, jelly_stream, metrics_text, split_delimited, start_file, triple};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

const JELLY: &str = "application/x-jelly-rdf";
const NQ: &str = "application/n-quads";

/// `n` frames of `per` statements each, numbered from `start`.
fn frames(n: usize, per: usize, start: usize) -> Vec<Vec<Statement>> {
    (start..start + n)
        .map(|i| {
            (0..per)
                .map(|k| {
                    triple(
                        &format!("http://example.org/item/{i}/statement/{k}"),
                        "http://example.org/some/long/predicate/name",
                        &format!("http://example.org/object/{i}-{k}-with-some-padding"),
                    )
                })
                .collect()
        })
        .collect()
}

async fn json(r: reqwest::Response) -> Value {
    r.json().await.unwrap()
}

async fn publish(c: &reqwest::Client, base: &str, topic: &str, body: Vec<u8>) -> reqwest::Response {
    c.post(format!("{base}/topics/{topic}/items"))
        .header("content-type", JELLY)
        .body(body)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_corrupt_topic_fails_alone_and_nothing_is_truncated() {
    // The audit's case: 5 publishes of 5 frames into `r`, then one byte flipped in
    // the middle of its only (so: newest) segment.
    let dir = TempDir::new("corrupt");
    let srv = start_file(&dir.0).await;
    let c = client();
    let base = srv.url();
    for p in 0..5 {
        let body = jelly_stream(&frames(5, 40, p * 5), StreamOptions::small());
        let r = publish(&c, &base, "r", body).await;
        assert_eq!(r.status(), StatusCode::OK);
    }
    let body = jelly_stream(&frames(3, 2, 0), StreamOptions::small());
    assert_eq!(
        publish(&c, &base, "ok", body).await.status(),
        StatusCode::OK
    );
    srv.shutdown().await.unwrap();

    let seg = dir.0.join("r/log/00000000000000000000.seg");
    let mut bytes = std::fs::read(&seg).unwrap();
    let at = bytes.len() * 3 / 10;
    bytes[at] ^= 0x20;
    std::fs::write(&seg, &bytes).unwrap();

    // The server starts, and serves the other topic.
    let srv = start_file(&dir.0).await;
    let base = srv.url();
    let r = c.get(format!("{base}/topics/ok")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(json(r).await["next_offset"], 3);
    let body = jelly_stream(&frames(1, 2, 3), StreamOptions::small());
    let r = publish(&c, &base, "ok", body).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(json(r).await["offsets"], serde_json::json!([3]));

    // `r` answers 503 with the reason on every endpoint, and cannot be re-created.
    let seg_name = seg.display().to_string();
    let endpoints = [
        c.get(format!("{base}/topics/r")),
        c.get(format!("{base}/topics/r/items?follow=false")),
        c.get(format!("{base}/topics/r/poll?wait_ms=0")),
        c.post(format!("{base}/topics/r/items"))
            .header("content-type", JELLY)
            .body(jelly_stream(&frames(1, 2, 99), StreamOptions::small())),
        c.put(format!("{base}/topics/r")),
    ];
    for req in endpoints {
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        let v = json(r).await;
        assert_eq!(v["topic"], "r", "{v}");
        let e = v["error"].as_str().unwrap();
        assert!(
            e.contains("corrupt log segment")
                && e.contains(&seg_name)
                && e.contains("at byte")
                && e.contains("valid record(s)"),
            "{e}"
        );
    }
    // The list shows the topics served, and `r` apart with its reason.
    let list = json(c.get(format!("{base}/topics")).send().await.unwrap()).await;
    let names: Vec<&str> = list["topics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ok"], "{list}");
    let un = list["unavailable"].as_array().unwrap();
    assert_eq!(un.len(), 1, "{list}");
    assert_eq!(un[0]["name"], "r", "{list}");
    assert!(
        un[0]["reason"]
            .as_str()
            .unwrap()
            .contains("corrupt log segment"),
        "{list}"
    );
    let h = json(c.get(format!("{base}/health")).send().await.unwrap()).await;
    assert_eq!(
        (&h["topics"], &h["unavailable"]),
        (&1.into(), &1.into()),
        "{h}"
    );
    // Alive but degraded; not ready, with the reason.
    assert_eq!(h["status"], "degraded", "{h}");
    let r = c.get(format!("{base}/ready")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    let v = json(r).await;
    assert_eq!(v["unavailable"], 1, "{v}");
    assert_eq!(v["problems"][0]["topic"], "r", "{v}");
    assert_eq!(v["problems"][0]["kind"], "unavailable", "{v}");
    assert!(
        v["problems"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("corrupt log segment"),
        "{v}"
    );
    let m = metrics_text(&c, &base).await;
    assert!(
        m.lines()
            .any(|l| l == "jelly_topic_unavailable{topic=\"r\"} 1"),
        "{m}"
    );
    srv.shutdown().await.unwrap();
    // Nothing was cut off or written: every acknowledged record is still there.
    assert_eq!(std::fs::read(&seg).unwrap(), bytes);
}

/// A topic folder whose `topic.json` is gone while its log holds items is reported
/// (503 with the reason), never taken over by a new topic with other options; a
/// folder with an empty log is not in the way.
#[tokio::test]
async fn a_log_without_its_topic_json_is_reported_not_reused() {
    let dir = TempDir::new("orphan");
    let srv = start_file(&dir.0).await;
    let c = client();
    let base = srv.url();
    let body = jelly_stream(&frames(3, 2, 0), StreamOptions::small());
    assert_eq!(
        publish(&c, &base, "lost", body).await.status(),
        StatusCode::OK
    );
    srv.shutdown().await.unwrap();
    std::fs::remove_file(dir.0.join("lost/topic.json")).unwrap();
    // A log emptied by retention, at a base other than 0, whose topic.json is gone:
    // not in the way, and the new topic starts at 0.
    std::fs::create_dir_all(dir.0.join("empty/log")).unwrap();
    std::fs::write(dir.0.join("empty/log/00000000000000000003.seg"), b"").unwrap();

    let srv = start_file(&dir.0).await;
    let base = srv.url();
    let body = jelly_stream(&frames(1, 2, 9), StreamOptions::small());
    for req in [
        c.get(format!("{base}/topics/lost")),
        c.post(format!("{base}/topics/lost/items"))
            .header("content-type", JELLY)
            .body(body.clone()),
    ] {
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        let e = json(r).await["error"].as_str().unwrap().to_string();
        assert!(e.contains("topic.json is missing"), "{e}");
    }
    let r = publish(&c, &base, "empty", body).await;
    assert_eq!(json(r).await["offsets"], serde_json::json!([0]));
    srv.shutdown().await.unwrap();
    // The items of `lost` are untouched.
    let seg = dir.0.join("lost/log/00000000000000000000.seg");
    assert!(std::fs::metadata(seg).unwrap().len() > 0);
}

/// A log that cannot start its next segment (here: the file names are taken, as on a
/// disk out of inodes) refuses appends and says so in the description and in
/// `/metrics`; once the cause is gone it takes appends again, without a restart.
#[tokio::test]
async fn a_topic_whose_log_cannot_write_says_so_and_recovers_by_itself() {
    let dir = TempDir::new("logfail");
    let srv = Server::start(jelly_server::ServerConfig {
        log: jelly_server::config::LogKind::File,
        data: dir.0.clone(),
        segment_bytes: 2048,
        ..jelly_server::ServerConfig::ephemeral()
    })
    .await
    .unwrap();
    let c = client();
    let base = srv.url();
    let body = |i: usize| jelly_stream(&frames(1, 4, i), StreamOptions::small());
    assert_eq!(
        publish(&c, &base, "f", body(0)).await.status(),
        StatusCode::OK
    );
    // Every segment name the next appends could roll to is taken.
    let log = dir.0.join("f/log");
    let blockers: Vec<_> = (1..200)
        .map(|o| log.join(format!("{o:020}.seg")))
        .filter(|p| !p.exists())
        .collect();
    for p in &blockers {
        std::fs::write(p, b"").unwrap();
    }
    let mut refused = 0;
    for i in 1..200 {
        let r = publish(&c, &base, "f", body(i)).await;
        if r.status() == StatusCode::SERVICE_UNAVAILABLE {
            refused = i;
            break;
        }
        assert_eq!(r.status(), StatusCode::OK);
    }
    assert!(refused > 0, "no append needed a new segment");
    let d = json(c.get(format!("{base}/topics/f")).send().await.unwrap()).await;
    let why = d["log_failed"].as_str().unwrap_or_default();
    assert!(why.contains("until one can be written again"), "{d}");
    let m = metrics_text(&c, &base).await;
    assert!(
        m.lines()
            .any(|l| l == "jelly_topic_log_failed{topic=\"f\"} 1"),
        "{m}"
    );
    let next = d["next_offset"].as_u64().unwrap();

    for p in &blockers {
        std::fs::remove_file(p).unwrap();
    }
    let r = publish(&c, &base, "f", body(refused)).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(json(r).await["offsets"], serde_json::json!([next]));
    let d = json(c.get(format!("{base}/topics/f")).send().await.unwrap()).await;
    assert!(d.get("log_failed").is_none(), "{d}");
    let m = metrics_text(&c, &base).await;
    assert!(!m.contains("jelly_topic_log_failed{"), "{m}");

    // A streaming publish whose append fails: none of the failed batch is appended,
    // so the error names the batch's first frame, not where the reader stood.
    let blockers: Vec<_> = (next + 1..next + 200)
        .map(|o| log.join(format!("{o:020}.seg")))
        .collect();
    for p in &blockers {
        std::fs::write(p, b"").unwrap();
    }
    // Items larger than a segment: each needs a new one.
    let big = jelly_stream(&frames(5, 40, 500), StreamOptions::small());
    let r = c
        .post(format!("{base}/topics/f/items?stream=true"))
        .header("content-type", JELLY)
        .body(big.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    let v = json(r).await;
    assert_eq!(v["items_accepted"], 0, "{v}");
    assert_eq!(v["frame"], 0, "{v}");
    let first_message =
        jelly_proto::wire::varint_len(jelly_proto::wire::Reader::new(&big).varint().unwrap());
    assert_eq!(v["byte_offset"], first_message as u64, "{v}");
    srv.shutdown().await.unwrap();
}

// ---------------------------------------------------------------------------------
// Slow clients

const SHORT: Duration = Duration::from_millis(300);

/// A server whose head and body timeouts are [`SHORT`], with the default body pace
/// (`body_min_bytes_per_s` 1024).
async fn start_short() -> Server {
    start_short_paced(1024).await
}

async fn start_short_paced(body_min_bytes_per_s: u64) -> Server {
    let c = ServerConfig {
        header_read_timeout_ms: SHORT.as_millis() as u64,
        body_read_timeout_ms: SHORT.as_millis() as u64,
        body_min_bytes_per_s,
        ..ServerConfig::ephemeral()
    };
    Server::start(c).await.unwrap()
}

/// Reads until the server closes the connection (EOF or reset) and returns what it
/// sent, or `None` if it is still open after `limit`.
async fn read_until_closed(
    tcp: &mut (impl tokio::io::AsyncRead + Unpin),
    limit: Duration,
) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let read = async {
        let mut buf = [0u8; 4096];
        loop {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(limit, read).await.ok()?;
    Some(out)
}

#[tokio::test]
async fn partial_request_heads_are_disconnected() {
    let srv = start_short().await;
    let addr = srv.local_addr();
    let heads: [&[u8]; 4] = [
        // Half an HTTP/1 head: no blank line.
        b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: 1\r\n",
        // Nothing at all (the protocol is never known).
        b"",
        // Part of the HTTP/2 preface.
        b"PRI * HTTP/2.0\r\n",
        // The whole preface, and then no SETTINGS nor any stream.
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    ];
    for head in heads {
        // Twenty at once, as in the audit.
        let t0 = Instant::now();
        let mut conns = Vec::new();
        for _ in 0..20 {
            let mut tcp = TcpStream::connect(addr).await.unwrap();
            tcp.write_all(head).await.unwrap();
            conns.push(tcp);
        }
        for tcp in &mut conns {
            let got = read_until_closed(tcp, Duration::from_secs(5)).await;
            let head = String::from_utf8_lossy(head);
            assert!(got.is_some(), "{head:?}: still open after 5 s");
        }
        let took = t0.elapsed();
        assert!(
            took >= SHORT - Duration::from_millis(50),
            "{:?}: closed after {took:?}, before the timeout",
            String::from_utf8_lossy(head)
        );
    }
    // The server still answers, and counted them.
    let m = metrics_text(&client(), &srv.url()).await;
    let timed_out: u64 = m
        .lines()
        .find_map(|l| l.strip_prefix("jelly_connections_timed_out_total "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(timed_out >= 80, "{timed_out}");
}

#[tokio::test]
async fn complete_requests_are_served_and_idle_keep_alive_is_closed() {
    let srv = start_short().await;
    let mut tcp = TcpStream::connect(srv.local_addr()).await.unwrap();
    tcp.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let t0 = Instant::now();
    let got = read_until_closed(&mut tcp, Duration::from_secs(5))
        .await
        .expect("an idle keep-alive connection is closed after the header timeout");
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("\"status\":\"ok\""), "{text}");
    assert!(t0.elapsed() >= SHORT - Duration::from_millis(50));
    // And an ordinary client is not affected.
    let r = client()
        .get(format!("{}/health", srv.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
}

/// A malformed chunked body is refused with what was wrong in it (hyper's own
/// message names only "error reading a body from connection"), on the atomic and the
/// streaming publish, and appends nothing.
#[tokio::test]
async fn a_malformed_chunked_body_is_named() {
    let srv = Server::start(ServerConfig::ephemeral()).await.unwrap();
    for (query, ctype) in [
        ("", "application/n-triples"),
        ("?stream=true", "application/x-jelly-rdf"),
    ] {
        let mut tcp = TcpStream::connect(srv.local_addr()).await.unwrap();
        let head = format!(
            "POST /topics/c/items{query} HTTP/1.1\r\nHost: x\r\n\
             Content-Type: {ctype}\r\nTransfer-Encoding: chunked\r\n\
             Connection: close\r\n\r\nzz\r\nabc\r\n0\r\n\r\n"
        );
        tcp.write_all(head.as_bytes()).await.unwrap();
        let got = read_until_closed(&mut tcp, Duration::from_secs(10))
            .await
            .expect("an answer and a close");
        let text = String::from_utf8_lossy(&got);
        assert!(text.starts_with("HTTP/1.1 400"), "{query}: {text}");
        let detail = text
            .split("cannot read the request body: ")
            .nth(1)
            .unwrap_or_else(|| panic!("{query}: {text}"));
        assert!(detail.to_lowercase().contains("chunk"), "{query}: {text}");
    }
    assert!(
        srv.state()
            .topics
            .get("c")
            .is_none_or(|t| t.log.next_offset() == 0)
    );
}

fn nquads(n: usize) -> String {
    (0..n)
        .map(|i| format!("<http://ex.org/s{i}> <http://ex.org/p> <http://ex.org/o{i}> .\n"))
        .collect()
}

#[tokio::test]
async fn a_stalled_publish_body_gets_408() {
    // Without a pace, so that the pause limit alone answers (with one, a slow start
    // of the test could let the pace's deadline come first).
    let srv = start_short_paced(0).await;
    let mut tcp = TcpStream::connect(srv.local_addr()).await.unwrap();
    let body = nquads(30);
    let head = format!(
        "POST /topics/slow/items HTTP/1.1\r\nHost: x\r\nContent-Type: {NQ}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    tcp.write_all(head.as_bytes()).await.unwrap();
    tcp.write_all(&body.as_bytes()[..36]).await.unwrap();
    let t0 = Instant::now();
    let got = read_until_closed(&mut tcp, Duration::from_secs(5))
        .await
        .expect("answered and closed");
    assert!(t0.elapsed() >= SHORT - Duration::from_millis(50));
    let v = json_of_408(&got);
    assert_eq!(v["body_read_timeout_ms"], 300, "{v}");
    assert_eq!(v["received_bytes"], 36, "{v}");
    assert!(v["error"].as_str().unwrap().contains("incomplete"), "{v}");
    assert_no_topic(&srv, "slow").await;
}

/// The JSON body of a raw HTTP/1 answer that must be a 408.
fn json_of_408(answer: &[u8]) -> Value {
    let text = String::from_utf8_lossy(answer);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    serde_json::from_str(&text[text.find("\r\n\r\n").unwrap() + 4..]).unwrap()
}

/// Nothing was published to `topic`: it was never created.
async fn assert_no_topic(srv: &Server, topic: &str) {
    let r = client()
        .get(format!("{}/topics/{topic}", srv.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
}

/// Publishes `body` to `topic` over a raw connection: its first `burst` bytes at once,
/// then two bytes every 100 ms (never a pause of the 300 ms limit, 20 bytes/s). The
/// server's answer, which must come within 5 s, and how long it took.
async fn drip_feed(srv: &Server, topic: &str, body: String, burst: usize) -> (Value, Duration) {
    let tcp = TcpStream::connect(srv.local_addr()).await.unwrap();
    let (mut rd, mut wr) = tcp.into_split();
    let head = format!(
        "POST /topics/{topic}/items HTTP/1.1\r\nHost: x\r\nContent-Type: {NQ}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    wr.write_all(head.as_bytes()).await.unwrap();
    let t0 = Instant::now();
    let drip = tokio::spawn(async move {
        let (first, rest) = body.as_bytes().split_at(burst);
        if wr.write_all(first).await.is_err() {
            return;
        }
        for piece in rest.chunks(2) {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if wr.write_all(piece).await.is_err() {
                return;
            }
        }
    });
    let got = read_until_closed(&mut rd, Duration::from_secs(5))
        .await
        .expect("answered and closed within 5 s");
    let took = t0.elapsed();
    drip.abort();
    (json_of_408(&got), took)
}

#[tokio::test]
async fn a_drip_fed_publish_body_gets_408() {
    // Two bytes every 100 ms average 20 bytes/s, far under the default
    // body_min_bytes_per_s (1024): the body is due 300 ms after the start plus a
    // second per 1024 bytes, and is answered 408 then.
    let srv = start_short().await;
    let (v, took) = drip_feed(&srv, "drip", nquads(30), 0).await;
    assert!(took >= SHORT - Duration::from_millis(50), "{took:?}");
    assert_eq!(v["body_min_bytes_per_s"], 1024, "{v}");
    let received = v["received_bytes"].as_u64().unwrap();
    assert!((2..100).contains(&received), "{v}");
    assert!(v["error"].as_str().unwrap().contains("too slow"), "{v}");
    assert_no_topic(&srv, "drip").await;
}

#[tokio::test]
async fn a_fast_start_banks_no_time_for_a_drip() {
    // All but 200 bytes of a 16 kB body at once would earn 16 s at 1 KiB/s; the drip
    // after it earns from one pause ahead of each piece, so it is still answered 408
    // within a second or so, not after 16 s (the helper waits 5 s at most).
    let srv = start_short().await;
    let body = nquads(300);
    let burst = body.len() - 200;
    assert!(burst > 15_000, "{burst}");
    let (v, _) = drip_feed(&srv, "burst", body, burst).await;
    let received = v["received_bytes"].as_u64().unwrap() as usize;
    assert!(received > burst && received < burst + 100, "{v}");
    assert!(v["error"].as_str().unwrap().contains("too slow"), "{v}");
    assert_no_topic(&srv, "burst").await;
}

#[tokio::test]
async fn a_slow_but_steady_publish_body_is_accepted() {
    // Pauses under the limit at a pace over 1 KiB/s go through, however long the
    // upload: three pieces 200 ms apart (600 ms in all, twice the pause limit).
    let srv = start_short().await;
    let body = nquads(30).into_bytes();
    let pieces: Vec<Vec<u8>> = body
        .chunks(body.len() / 3 + 1)
        .map(<[u8]>::to_vec)
        .collect();
    let stream = futures_util::stream::unfold(pieces.into_iter(), |mut it| async move {
        let p = it.next()?;
        tokio::time::sleep(Duration::from_millis(200)).await;
        Some((Ok::<_, std::io::Error>(p), it))
    });
    let r = client()
        .post(format!("{}/topics/steady/items", srv.url()))
        .header("content-type", NQ)
        .body(reqwest::Body::wrap_stream(stream))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(json(r).await["offsets"], serde_json::json!([0]));
}

#[tokio::test]
async fn a_streaming_publish_may_be_idle_longer_than_the_body_timeout() {
    let srv = start_short().await;
    let stream = jelly_stream(&frames(2, 2, 0), StreamOptions::small());
    let parts = split_delimited(&stream);
    assert_eq!(parts.len(), 2);
    let body = futures_util::stream::unfold((0, parts), |(i, parts)| async move {
        let p = parts.get(i)?.clone();
        if i > 0 {
            // Idle for three times the body timeout between two items.
            tokio::time::sleep(SHORT * 3).await;
        }
        Some((Ok::<_, std::io::Error>(p), (i + 1, parts)))
    });
    let r = client()
        .post(format!("{}/topics/live/items?stream=true", srv.url()))
        .header("content-type", JELLY)
        .body(reqwest::Body::wrap_stream(body))
        .send()
        .await
        .unwrap();
    let status = r.status();
    let v = json(r).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["items"], 2, "{v}");
}

#[tokio::test]
async fn a_streaming_publish_stalled_inside_a_frame_gets_408_and_keeps_the_frames_before() {
    // Between frames it may wait; inside one, the server holds what came of the frame,
    // so the pause is bounded as an atomic body's is.
    let srv = start_short().await;
    let stream = jelly_stream(&frames(2, 2, 0), StreamOptions::small());
    let parts = split_delimited(&stream);
    let (first, second) = (parts[0].clone(), parts[1].clone());
    let half = second[..second.len() / 2].to_vec();
    let body = futures_util::stream::unfold(0, move |i| {
        let (first, half) = (first.clone(), half.clone());
        async move {
            match i {
                0 => Some((Ok::<_, std::io::Error>(first), 1)),
                1 => {
                    tokio::time::sleep(SHORT * 3).await;
                    Some((Ok(half), 2))
                }
                _ => {
                    // Then nothing more, and the body never ends.
                    std::future::pending::<()>().await;
                    None
                }
            }
        }
    });
    let r = tokio::time::timeout(
        Duration::from_secs(30),
        client()
            .post(format!("{}/topics/stalled/items?stream=true", srv.url()))
            .header("content-type", JELLY)
            .body(reqwest::Body::wrap_stream(body))
            .send(),
    )
    .await
    .expect("a publish stalled inside a frame was not answered")
    .unwrap();
    let status = r.status();
    let v = json(r).await;
    assert_eq!(status, StatusCode::REQUEST_TIMEOUT, "{v}");
    let e = v["error"].as_str().unwrap();
    assert!(
        e.contains("frame 1") && e.contains("body_read_timeout_ms"),
        "{v}"
    );
    let d: Value = json(
        client()
            .get(format!("{}/topics/stalled", srv.url()))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(d["items"], 1, "the whole frame before it stays: {d}");
}

#[tokio::test]
async fn long_lived_responses_outlast_the_header_timeout() {
    // The head timeout bounds reading a request's head, not the answer: a live
    // subscription and a long-poll wait run for several times the limit.
    let srv = start_short().await;
    let c = client();
    let base = srv.url();
    let post = |i: usize| {
        c.post(format!("{base}/topics/t/items"))
            .header("content-type", NQ)
            .body(format!(
                "<http://ex.org/s{i}> <http://ex.org/p> <http://ex.org/o> .\n"
            ))
            .send()
    };
    assert_eq!(post(0).await.unwrap().status(), StatusCode::OK);
    let mut sub = c
        .get(format!("{base}/topics/t/items?from=0&format=nquads"))
        .send()
        .await
        .unwrap();
    assert_eq!(sub.status(), StatusCode::OK);
    let poll = c
        .get(format!(
            "{base}/topics/t/poll?from=1&wait_ms=5000&format=nquads"
        ))
        .send();
    let publish_later = async {
        tokio::time::sleep(SHORT * 4).await;
        assert_eq!(post(1).await.unwrap().status(), StatusCode::OK);
        tokio::time::sleep(SHORT * 4).await;
        assert_eq!(post(2).await.unwrap().status(), StatusCode::OK);
    };
    let (poll, ()) = tokio::join!(poll, publish_later);
    let poll = poll.unwrap();
    assert_eq!(poll.status(), StatusCode::OK);
    // Answered when item 1 arrived, four times the head timeout after the request.
    assert!(poll.text().await.unwrap().contains("ex.org/s1"));
    let mut got = String::new();
    while !got.contains("ex.org/s2") {
        let chunk = tokio::time::timeout(Duration::from_secs(5), sub.chunk())
            .await
            .expect("the subscription is still live")
            .unwrap()
            .expect("the subscription is still open");
        got.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(
        got.contains("ex.org/s0") && got.contains("ex.org/s1"),
        "{got}"
    );
}

/// The kernel's timer state (`tr` of `/proc/net/tcp`) of the server's end of the
/// connection from `client`: 2 is a pending keepalive timer, 0 none.
fn server_side_timer(server: std::net::SocketAddr, client: std::net::SocketAddr) -> Option<u32> {
    let text = std::fs::read_to_string("/proc/net/tcp").ok()?;
    let local = format!(":{:04X}", server.port());
    let remote = format!(":{:04X}", client.port());
    text.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() > 5 && f[1].ends_with(&local) && f[2].ends_with(&remote))
            .then(|| f[5].split(':').next()?.parse().ok())
            .flatten()
    })
}

#[tokio::test]
async fn accepted_connections_get_tcp_keepalive_unless_it_is_off() {
    // A peer that vanishes without closing (power or network lost) is only noticed by
    // keepalive probes while the connection is quiet: an HTTP/1 subscription of a
    // quiet topic, or a streaming publisher between frames.
    for (keepalive_ms, want) in [(5_000, 2), (0, 0)] {
        let c = ServerConfig {
            tcp_keepalive_ms: keepalive_ms,
            ..ServerConfig::ephemeral()
        };
        let srv = Server::start(c).await.unwrap();
        let tcp = TcpStream::connect(srv.local_addr()).await.unwrap();
        let me = tcp.local_addr().unwrap();
        let mut timer = None;
        for _ in 0..200 {
            timer = server_side_timer(srv.local_addr(), me);
            if timer == Some(want) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(timer, Some(want), "tcp_keepalive_ms = {keepalive_ms}");
        drop(tcp);
        srv.shutdown().await.unwrap();
    }
}

#[tokio::test]
async fn a_stalled_topic_options_body_gets_408_and_cannot_hold_up_shutdown() {
    // PUT/PATCH bodies have the publish body's pause limit.
    let srv = start_short_paced(0).await;
    let mut tcp = TcpStream::connect(srv.local_addr()).await.unwrap();
    tcp.write_all(b"PUT /topics/x HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        .await
        .unwrap();
    let got = read_until_closed(&mut tcp, Duration::from_secs(5))
        .await
        .expect("answered and closed");
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("topic options did not arrive"), "{text}");
    srv.shutdown().await.unwrap();

    // With no body limit at all, shutdown still ends: the connection gets a grace.
    let c = ServerConfig {
        body_read_timeout_ms: 0,
        shutdown_grace_ms: 300,
        ..ServerConfig::ephemeral()
    };
    let srv = Server::start(c).await.unwrap();
    let mut tcp = TcpStream::connect(srv.local_addr()).await.unwrap();
    tcp.write_all(b"PUT /topics/x HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        .await
        .unwrap();
    // The request is being read when shutdown begins.
    tokio::time::sleep(Duration::from_millis(100)).await;
    tokio::time::timeout(Duration::from_secs(30), srv.shutdown())
        .await
        .expect("shutdown waited for a stalled request")
        .unwrap();
    assert!(
        read_until_closed(&mut tcp, Duration::from_secs(5))
            .await
            .is_some(),
        "the stalled connection is closed"
    );
}

/// The file logs' tail caches of all topics stay together under
/// `max_tail_cache_bytes` (here far below what the topics hold), and every item is
/// still served, from the segments once it is no longer cached.
#[tokio::test]
async fn the_tail_caches_of_all_topics_share_one_bound() {
    let dir = TempDir::new("tailpool");
    let srv = Server::start(ServerConfig {
        log: jelly_server::config::LogKind::File,
        data: dir.0.clone(),
        durability: "none".into(),
        tail_cache_bytes: 150_000,
        max_tail_cache_bytes: 200_000,
        ..ServerConfig::ephemeral()
    })
    .await
    .unwrap();
    let c = client();
    let base = srv.url();
    let metric = |text: &str, name: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in\n{text}"))
    };
    // Eight topics of 10 items of 400 statements (about 200 KB of Jelly each topic:
    // unbounded, the caches would hold 8 × 150 KB).
    for t in 0..8 {
        for i in 0..10 {
            let body = jelly_stream(&frames(1, 400, t * 100 + i), StreamOptions::small());
            let r = publish(&c, &base, &format!("t{t}"), body).await;
            assert_eq!(r.status(), StatusCode::OK);
        }
        let m = metrics_text(&c, &base).await;
        let used = metric(&m, "jelly_log_tail_cache_bytes");
        assert!(used > 0 && used <= 200_000, "after topic {t}: {used}");
        assert_eq!(metric(&m, "jelly_log_tail_cache_max_bytes"), 200_000);
    }
    // Every topic serves all its items, cached or not.
    for t in 0..8 {
        let got = c
            .get(format!(
                "{base}/topics/t{t}/items?follow=false&format=nquads"
            ))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let lines: Vec<&str> = got.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(lines.len(), 4000, "topic t{t}");
        for i in [0, 9] {
            let subject = format!("<http://example.org/item/{}/statement/0>", t * 100 + i);
            assert!(
                lines.iter().any(|l| l.starts_with(&subject)),
                "t{t}: {subject}"
            );
        }
    }
    srv.shutdown().await.unwrap();
}

/// A segment damaged while the server runs (here one byte flipped under it): a read
/// that reaches the damaged record fails and cuts its response off, the items before
/// it are still served, and `/health`, `/ready`, the topic's description and
/// `/metrics` say which log is damaged and where, while the other topics stay ok.
#[tokio::test]
async fn damage_found_by_a_read_at_runtime_is_reported() {
    use std::os::unix::fs::FileExt as _;
    let dir = TempDir::new("rtdamage");
    let srv = Server::start(ServerConfig {
        log: jelly_server::config::LogKind::File,
        data: dir.0.clone(),
        durability: "none".into(),
        // No cache: every read goes to the segment file.
        tail_cache_bytes: 0,
        ..ServerConfig::ephemeral()
    })
    .await
    .unwrap();
    let c = client();
    let base = srv.url();
    for i in 0..5 {
        let body = jelly_stream(&frames(1, 40, i), StreamOptions::small());
        assert_eq!(publish(&c, &base, "d", body).await.status(), StatusCode::OK);
    }
    let body = jelly_stream(&frames(1, 2, 0), StreamOptions::small());
    assert_eq!(
        publish(&c, &base, "ok", body).await.status(),
        StatusCode::OK
    );
    let health = json(c.get(format!("{base}/health")).send().await.unwrap()).await;
    assert_eq!(health["status"], "ok", "{health}");

    let seg = dir.0.join("d/log/00000000000000000000.seg");
    let len = std::fs::metadata(&seg).unwrap().len();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&seg)
        .unwrap();
    let at = len * 7 / 10;
    let mut b = [0u8; 1];
    file.read_exact_at(&mut b, at).unwrap();
    file.write_all_at(&[b[0] ^ 0x20], at).unwrap();
    drop(file);

    // A replay that reaches the damaged record never ends cleanly (the head may be
    // cut off with the first items).
    let whole = async {
        let r = c
            .get(format!("{base}/topics/d/items?follow=false&format=nquads"))
            .send()
            .await?;
        assert_eq!(r.status(), StatusCode::OK);
        r.bytes().await
    };
    assert!(whole.await.is_err(), "a clean end after a damaged record");
    // The item before it is still served.
    let r = c
        .get(format!(
            "{base}/topics/d/poll?from=0&max_items=1&format=nquads"
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["x-jelly-next-offset"], "1");
    let text = r.text().await.unwrap();
    assert!(
        text.contains("<http://example.org/item/0/statement/0>"),
        "{text}"
    );

    // The items before the damaged one come in one page; its offset is where it ends.
    let r = c
        .get(format!(
            "{base}/topics/d/poll?from=0&max_items=10&format=nquads"
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let bad: u64 = r.headers()["x-jelly-next-offset"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..5).contains(&bad), "damaged item {bad}");
    // A stream starting at the damaged item is refused with the reason, before a
    // status line (its body would have failed before its first byte: no answer at all).
    for path in ["items?follow=false&", "items?", "sse?"] {
        let r = c
            .get(format!("{base}/topics/d/{path}from={bad}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE, "{path}");
        let e = json(r).await;
        assert!(
            e["error"]
                .as_str()
                .is_some_and(|m| m.contains("corrupt log segment")),
            "{path}: {e}"
        );
    }
    let ws_url = format!("{}/topics/d/ws?from={bad}", base.replace("http", "ws"));
    match tokio_tungstenite::connect_async(ws_url).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) => {
            assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE)
        }
        other => panic!("expected a 503 upgrade refusal, got {other:?}"),
    }

    let seg_name = seg.display().to_string();
    let health = json(c.get(format!("{base}/health")).send().await.unwrap()).await;
    assert_eq!(health["status"], "degraded", "{health}");
    assert_eq!(health["log_damaged"], 1, "{health}");
    let r = c.get(format!("{base}/ready")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    let ready = json(r).await;
    let problems = ready["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{ready}");
    assert_eq!(problems[0]["topic"], "d", "{ready}");
    assert_eq!(problems[0]["kind"], "log_damaged", "{ready}");
    let reason = problems[0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("corrupt log segment") && reason.contains(&seg_name),
        "{reason}"
    );
    let d = json(c.get(format!("{base}/topics/d")).send().await.unwrap()).await;
    assert!(
        d["log_damaged"]
            .as_str()
            .is_some_and(|w| w.contains(&seg_name)),
        "{d}"
    );
    let ok = json(c.get(format!("{base}/topics/ok")).send().await.unwrap()).await;
    assert!(ok.get("log_damaged").is_none(), "{ok}");
    let m = metrics_text(&c, &base).await;
    assert!(m.contains("jelly_topic_log_damaged{topic=\"d\"} 1"), "{m}");
    assert!(!m.contains("jelly_topic_log_damaged{topic=\"ok\"}"), "{m}");
    srv.shutdown().await.unwrap();
}
