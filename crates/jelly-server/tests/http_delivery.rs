//! Jelly delivery modes on real loopback sockets: spliced items and re-encoded
//! (compact) items decode to the same statements, a subscriber joining mid-stream
//! decodes correctly in both, and every SSE Jelly event decodes on its own.

mod support;
use support::frames;

use std::time::Duration;

use jelly::{Decoder, Event, Statement};
use jelly_server::{Server, ServerConfig};

const NANOPUBS: &str = "../../../shared/datasets/nanopubs-fair-pkd/nanopubs-fair-pkd.nq";

/// The first `n` lines of the nanopubs dataset, or `None` when the datasets are absent.
fn sample(n: usize) -> Option<String> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(NANOPUBS);
    let Ok(text) = std::fs::read_to_string(&p) else {
        eprintln!("skipping: {} not found", p.display());
        return None;
    };
    Some(text.lines().take(n).map(|l| format!("{l}\n")).collect())
}

async fn start_with_items(text: &str) -> (Server, reqwest::Client, usize) {
    let srv = Server::start(ServerConfig::ephemeral()).await.unwrap();
    let c = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let r = c
        .post(format!("{}/topics/np/items?split=graph", srv.url()))
        .header("content-type", "application/n-quads")
        .body(text.to_owned())
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    let v: serde_json::Value = r.json().await.unwrap();
    let items = v["offsets"].as_array().unwrap().len();
    (srv, c, items)
}

async fn get(c: &reqwest::Client, url: String) -> Vec<u8> {
    let r = c.get(url).send().await.unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    r.bytes().await.unwrap().to_vec()
}

#[tokio::test]
async fn splice_and_compact_agree_also_when_joining_mid_stream() {
    let Some(text) = sample(3_000) else { return };
    let input = jelly::nquads::parse_document(&text).unwrap();
    let (srv, c, items) = start_with_items(&text).await;
    assert!(items > 10, "the sample has many graphs");
    let url = |q: &str| {
        format!(
            "{}/topics/np/items?follow=false&format=jelly&{q}",
            srv.url()
        )
    };

    let splice = get(&c, url("mode=splice")).await;
    let compact = get(&c, url("mode=compact")).await;
    let default = get(&c, url("")).await;
    assert_eq!(default, splice, "splice is the default");
    let (fs, fc) = (frames(&splice), frames(&compact));
    assert_eq!(fs, fc, "same items, offsets and statements in both modes");
    assert_eq!(fs.len(), items);
    let all: Vec<Statement> = fs.iter().flat_map(|(_, s)| s.clone()).collect();
    assert_eq!(all.len(), input.len());
    assert!(
        compact.len() < splice.len(),
        "compact carries tables over: {} < {}",
        compact.len(),
        splice.len()
    );

    // Joining at an item in the middle: the tail, item for item, in both modes.
    let k = items / 2;
    for mode in ["splice", "compact"] {
        let tail = frames(&get(&c, url(&format!("mode={mode}&from={k}"))).await);
        assert_eq!(tail, fs[k..].to_vec(), "{mode} from offset {k}");
    }
    // A long-poll page from the middle decodes alone too.
    let page = get(
        &c,
        format!(
            "{}/topics/np/poll?from={}&max_items=3&format=jelly",
            srv.url(),
            k + 1
        ),
    )
    .await;
    assert_eq!(frames(&page), fs[k + 1..k + 4].to_vec());
    let bad = c.get(url("mode=fast")).send().await.unwrap();
    assert_eq!(bad.status(), reqwest::StatusCode::BAD_REQUEST);
    assert!(bad.text().await.unwrap().contains("splice or compact"));
    srv.shutdown().await.unwrap();
}

/// Standard base64 (the SSE data of a Jelly event).
fn unbase64(s: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let b: Vec<u8> = s.bytes().filter(|&c| c != b'=').map(val).collect();
    let mut out = Vec::new();
    for ch in b.chunks(4) {
        let n = ch
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &v)| n | (u32::from(v) << (18 - 6 * i)));
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..ch.len() - 1]);
    }
    out
}

#[tokio::test]
async fn each_sse_jelly_event_decodes_alone() {
    let Some(text) = sample(600) else { return };
    let (srv, c, items) = start_with_items(&text).await;
    let splice = frames(
        &get(
            &c,
            format!("{}/topics/np/items?follow=false&format=jelly", srv.url()),
        )
        .await,
    );
    let body = String::from_utf8(
        get(
            &c,
            format!("{}/topics/np/sse?follow=false&format=jelly", srv.url()),
        )
        .await,
    )
    .unwrap();
    // The replay ends with an `end` event saying so (EventSource would reconnect).
    let last = body.trim_end().rsplit("\n\n").next().unwrap();
    assert!(
        last.starts_with("event: end\ndata: {\"") && last.contains("\"reason\":\"end\""),
        "{last}"
    );
    let mut n = 0;
    for event in body.split("\n\n").filter(|e| e.contains("event: item")) {
        let id: u64 = event
            .lines()
            .find_map(|l| l.strip_prefix("id: "))
            .unwrap()
            .parse()
            .unwrap();
        let data = event
            .lines()
            .find_map(|l| l.strip_prefix("data: "))
            .unwrap();
        // A fresh decoder per event: it must hold its own options row and tables.
        let bytes = unbase64(data);
        let mut dec = Decoder::default();
        let mut cur = dec.frame(&bytes);
        let mut st = Vec::new();
        while let Some(ev) = cur.next_event().unwrap() {
            if let Event::Statement(s) = ev {
                st.push(s.to_owned());
            }
        }
        assert_eq!((id, st), splice[n], "event {n}");
        n += 1;
    }
    assert_eq!(n, items);
    srv.shutdown().await.unwrap();
}

/// A subscriber that stops reading holds only its own bounded buffer: publishers and
/// the other subscribers go on at full speed, and the stalled one shows up as lag.
#[tokio::test]
async fn a_stalled_subscriber_slows_down_nobody() {
    use tokio::io::AsyncWriteExt as _;
    let srv = Server::start(ServerConfig::ephemeral()).await.unwrap();
    let c = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let publish = |body: String| {
        let c = c.clone();
        let url = format!("{}/topics/slow/items", srv.url());
        async move {
            let r = c
                .post(url)
                .header("content-type", "application/n-triples")
                .body(body)
                .send()
                .await
                .unwrap();
            assert!(r.status().is_success());
        }
    };
    publish("<http://ex.org/s> <http://ex.org/p> \"first\" .\n".into()).await;

    // The stalled subscriber: sends its request, then never reads a byte.
    let mut stalled = tokio::net::TcpStream::connect(srv.local_addr())
        .await
        .unwrap();
    stalled
        .write_all(b"GET /topics/slow/items?format=nquads HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    // A healthy subscriber, following live.
    let mut healthy = c
        .get(format!("{}/topics/slow/items?format=nquads", srv.url()))
        .send()
        .await
        .unwrap();

    // Far more than the socket buffers hold: ~40 MB of N-Triples in 200 items.
    let filler = "x".repeat(2000);
    let items = 200;
    for i in 0..items {
        let body: String = (0..100)
            .map(|j| format!("<http://ex.org/s{i}> <http://ex.org/p{j}> \"{filler}\" .\n"))
            .collect();
        publish(body).await;
    }
    // The healthy subscriber receives every item (the first plus 200 × 100 lines).
    let mut lines = 0usize;
    while lines < 1 + items * 100 {
        let chunk = healthy.chunk().await.unwrap().expect("stream open");
        lines += chunk.iter().filter(|&&b| b == b'\n').count();
    }
    assert_eq!(lines, 1 + items * 100);

    // The stalled one is still connected, far behind: its position is its lag.
    let d: serde_json::Value = c
        .get(format!("{}/topics/slow", srv.url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let subs = d["subscribers"].as_array().unwrap();
    assert_eq!(subs.len(), 2, "{d}");
    let positions: Vec<u64> = subs
        .iter()
        .map(|s| s["position"].as_u64().unwrap())
        .collect();
    let next = d["next_offset"].as_u64().unwrap();
    assert!(
        positions.contains(&next),
        "the healthy one is at the end: {d}"
    );
    assert!(
        positions.iter().any(|&p| p < next / 2),
        "the stalled one is far behind: {d}"
    );
    drop(stalled);
    srv.shutdown().await.unwrap();
}

/// A stored item that cannot be delivered (here a damaged frame, as a faulty mirror
/// upstream could plant) cuts the response off: the client gets the items before it
/// and then a broken body, never a clean end it would take for the whole replay.
#[tokio::test]
async fn a_failed_delivery_cuts_the_body_off_rather_than_ending_it() {
    let (srv, c, _) =
        start_with_items("<http://ex.org/s> <http://ex.org/p> \"good\" <http://ex.org/g> .\n")
            .await;
    let t = srv.state().topics.get("np").unwrap();
    let damaged = jelly_server::item::Item {
        offset: 1,
        timestamp_ms: 1,
        // An options row, then a quad row naming name entry 127, never defined.
        frame: bytes::Bytes::from_static(&[
            0x0a, 0x0a, 0x0a, 0x08, 0x10, 0x02, 0x20, 0x80, 0x20, 0x78, 0x01, 0x0a, 0x0a, 0x1a,
            0x08, 0x0a, 0x02, 0x10, 0x7f, 0x12, 0x02, 0x10, 0x7f,
        ]),
        statements: 1,
        source: String::new(),
        headers: Vec::new(),
    };
    t.append_at(vec![damaged], false, &srv.state().metrics)
        .await
        .unwrap();
    for (format, encoding) in [
        ("nquads", "identity"),
        ("nquads", "gzip"),
        ("trig", "identity"),
    ] {
        for follow in ["false", "true"] {
            let whole = async {
                let r = c
                    .get(format!(
                        "{}/topics/np/items?format={format}&follow={follow}",
                        srv.url()
                    ))
                    .header("accept-encoding", encoding)
                    .send()
                    .await?;
                assert!(r.status().is_success());
                r.bytes().await
            };
            // (The head may go out with the first items or be cut off with them.)
            let got = tokio::time::timeout(Duration::from_secs(10), whole)
                .await
                .expect("the response ends");
            assert!(
                got.is_err(),
                "{format} {encoding} follow={follow}: a clean end after a failed item"
            );
        }
    }
    srv.shutdown().await.unwrap();
}
