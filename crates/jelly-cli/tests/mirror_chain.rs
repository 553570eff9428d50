//! A chain of three `jelly serve` processes, A → B → C (B mirrors A, C mirrors B),
//! with file logs. Publishers push to A the whole time; B is killed with SIGKILL twice
//! and restarted on the same data directory and port. In the end C holds every item
//! of A exactly once: same offsets, in order, byte-identical.

mod cli_support;

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use cli_support::serve::{ServeProc, temp_dir};
use jelly::{Event, JellyReader, Term};

const TOPIC: &str = "chain";
const PUBLISHERS: usize = 2;

/// Publishes items `"<id>-<seq>"` until `stop`; returns how many were acknowledged.
async fn publisher(url: String, id: usize, stop: Arc<AtomicBool>) -> u64 {
    let client = jelly_cli::server_client::client(None, None).unwrap();
    let mut seq = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let body = format!(
            "<http://ex.org/p{id}/s{seq}> <http://ex.org/v> \"{id}-{seq}\" .\n\
             <http://ex.org/p{id}/s{seq}> <http://ex.org/w> \"{id}-{seq}\" .\n"
        );
        let r = client
            .post(format!("{url}/topics/{TOPIC}/items"))
            .header("content-type", "application/n-triples")
            .header("x-jelly-source", format!("publisher-{id}"))
            .header("x-jelly-header-seq", seq.to_string())
            .body(body)
            .send()
            .await
            .expect("A stays up");
        assert!(r.status().is_success(), "{}", r.status());
        seq += 1;
        // Keep the item rate modest: the test is about the chain, not throughput.
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    seq
}

/// `GET /topics/{topic}/items?follow=false&format=jelly`: the whole topic as one
/// delimited Jelly stream (splice mode, with each item's metadata).
async fn dump(url: &str, topic: &str) -> Vec<u8> {
    let r = jelly_cli::server_client::client(None, None)
        .unwrap()
        .get(format!(
            "{url}/topics/{topic}/items?follow=false&format=jelly"
        ))
        .send()
        .await
        .expect("subscribe");
    assert!(r.status().is_success(), "{url}: {}", r.status());
    r.bytes().await.expect("body").to_vec()
}

async fn next_offset(url: &str, topic: &str) -> Option<u64> {
    let r = jelly_cli::server_client::client(None, None)
        .unwrap()
        .get(format!("{url}/topics/{topic}"))
        .send()
        .await
        .ok()?;
    if !r.status().is_success() {
        return None;
    }
    let v: serde_json::Value = r.json().await.ok()?;
    v["next_offset"].as_u64()
}

/// B on `port`: retried a few times in case the port is briefly held elsewhere.
fn start_b(data: &Path, port: u16, a_url: &str) -> ServeProc {
    let mirror = vec!["--mirror".to_string(), format!("{a_url}/topics/{TOPIC}")];
    for _ in 0..20 {
        if let Some(p) = ServeProc::try_start_with(data, &format!("127.0.0.1:{port}"), &mirror) {
            return p;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("B could not listen on port {port} again");
}

#[test]
fn a_chain_survives_kill_9_of_the_middle_server() {
    let dir = temp_dir("mirror-chain");
    let a = ServeProc::start(&dir.join("a"));
    let b_data = dir.join("b");
    let mut b = ServeProc::try_start_with(
        &b_data,
        "127.0.0.1:0",
        &["--mirror".to_string(), format!("{}/topics/{TOPIC}", a.url)],
    )
    .expect("B starts");
    let b_port: u16 = b.url.rsplit(':').next().unwrap().parse().unwrap();
    let c = ServeProc::try_start_with(
        &dir.join("c"),
        "127.0.0.1:0",
        &[
            "--mirror".to_string(),
            format!("{}/topics/{TOPIC}=copy", b.url),
        ],
    )
    .expect("C starts");

    let rt = tokio::runtime::Runtime::new().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let pubs: Vec<_> = (0..PUBLISHERS)
        .map(|id| rt.spawn(publisher(a.url.clone(), id, stop.clone())))
        .collect();
    std::thread::sleep(Duration::from_millis(800));
    for _ in 0..2 {
        b.kill9();
        std::thread::sleep(Duration::from_millis(300));
        b = start_b(&b_data, b_port, &a.url);
        std::thread::sleep(Duration::from_millis(800));
    }
    stop.store(true, Ordering::Relaxed);
    let published: u64 = pubs.into_iter().map(|p| rt.block_on(p).unwrap()).sum();
    assert!(published > 0);

    let a_next = rt.block_on(next_offset(&a.url, TOPIC)).expect("A's topic");
    assert_eq!(a_next, published, "A acknowledged every publish once");
    let t0 = Instant::now();
    loop {
        let got = rt.block_on(next_offset(&c.url, "copy"));
        if got == Some(a_next) {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "C did not catch up: next offset {got:?}, A has {a_next}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // Byte for byte, the same stream from A, B and C: offsets, timestamps, sources,
    // headers, frames.
    let from_a = rt.block_on(dump(&a.url, TOPIC));
    let from_b = rt.block_on(dump(&b.url, TOPIC));
    let from_c = rt.block_on(dump(&c.url, "copy"));
    assert!(from_a == from_b, "B differs from A");
    assert!(from_a == from_c, "C differs from A");

    // And C holds every item exactly once, in offset order from 0.
    let mut rd = JellyReader::new(&from_c[..]);
    let mut offsets = Vec::new();
    let mut payloads = HashSet::new();
    while let Some(mut f) = rd.next_frame().expect("a whole frame") {
        let mut payload = None;
        while let Some(ev) = f.next_event().expect("a whole item") {
            if let Event::Statement(st) = ev
                && let Term::Literal(l) = st.object.to_owned()
            {
                payload = Some(l.lex.to_string());
            }
        }
        let offset: u64 = f
            .metadata()
            .unwrap()
            .iter()
            .find(|(k, _)| *k == "offset")
            .map(|(_, v)| std::str::from_utf8(v).unwrap().parse().unwrap())
            .unwrap();
        offsets.push(offset);
        assert!(
            payloads.insert(payload.expect("a payload")),
            "item {offset} is a duplicate"
        );
    }
    assert_eq!(offsets, (0..a_next).collect::<Vec<_>>());
    assert_eq!(payloads.len() as u64, published);
    // C lost B twice and came back each time.
    let c_topic: serde_json::Value = rt.block_on(async {
        jelly_cli::server_client::client(None, None)
            .unwrap()
            .get(format!("{}/topics/copy", c.url))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    });
    let connects = c_topic["mirror"]["connects"].as_u64().unwrap();
    assert!(connects >= 3, "C connected {connects} time(s): {c_topic}");
    eprintln!("mirror chain: {published} items; C connected to B {connects} times");
    drop((a, b, c));
    let _ = std::fs::remove_dir_all(&dir);
}
