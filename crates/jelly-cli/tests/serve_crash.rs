//! `kill -9` of a `jelly serve` process while publishers push, then a restart on the
//! same data directory, three times over. The publishers use three paths: one-shot
//! HTTP POSTs (publishers 0 and 1), a WebSocket publish acknowledged per message
//! (publisher 2), and streaming POSTs of a delimited Jelly stream, five frames each,
//! acknowledged with the offset ranges of their items (publisher 3). After each restart:
//! - every acknowledged item is present at the offset it was given, exactly once;
//! - offsets run from 0 without gaps, and each publisher's items keep their order;
//! - every stored item decodes whole (nothing torn is served);
//! - publishing goes on at the next offset.

mod cli_support;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use cli_support::serve::{ServeProc, temp_dir};
use jelly::{Event, JellyReader, Term};

const PUBLISHERS: usize = 4;

/// An acknowledged publish: the payload it carried and the offset it was given.
#[derive(Debug, Clone)]
struct Ack {
    offset: u64,
    payload: String,
}

/// One item body: its payload is the object literal `"<publisher>-<seq>"`, so every
/// item is unique and says who sent it.
fn body(publisher: usize, seq: u64) -> String {
    let mut s = String::new();
    for i in 0..5 {
        s.push_str(&format!(
            "<http://ex.org/p{publisher}/s{seq}> <http://ex.org/v{i}> \"{publisher}-{seq}\" .\n"
        ));
    }
    s
}

/// Publishes until `stop` over the path of publisher `id`, recording
/// acknowledgements. Connection errors (the server being killed) end the loop;
/// unacknowledged items may or may not be stored.
async fn publisher(url: String, id: usize, first_seq: u64, stop: Arc<AtomicBool>) -> Vec<Ack> {
    match id {
        2 => ws_publisher(url, id, first_seq, stop).await,
        3 => stream_publisher(url, id, first_seq, stop).await,
        _ => post_publisher(url, id, first_seq, stop).await,
    }
}

/// The JSON answer of a publish that succeeded; `None` when the connection broke or
/// the server refused it (the server being killed), which ends a publisher's loop.
async fn acknowledged(post: reqwest::RequestBuilder) -> Option<serde_json::Value> {
    let r = post.send().await.ok()?;
    if !r.status().is_success() {
        return None;
    }
    r.json().await.ok()
}

/// One-shot POSTs of N-Triples, one item each.
async fn post_publisher(url: String, id: usize, first_seq: u64, stop: Arc<AtomicBool>) -> Vec<Ack> {
    let client = jelly_cli::server_client::client(None, None).unwrap();
    let mut acks = Vec::new();
    let mut seq = first_seq;
    while !stop.load(Ordering::Relaxed) {
        let post = client
            .post(format!("{url}/topics/crash/items"))
            .header("content-type", "application/n-triples")
            .body(body(id, seq));
        let Some(v) = acknowledged(post).await else {
            break;
        };
        let offset = v["offsets"][0].as_u64().expect("an offset in the answer");
        acks.push(Ack {
            offset,
            payload: format!("{id}-{seq}"),
        });
        seq += 1;
    }
    acks
}

/// A WebSocket publish: one N-Triples text message per item, each acknowledged with
/// `{"frame": F, "offset": N}` before the next is sent.
async fn ws_publisher(url: String, id: usize, first_seq: u64, stop: Arc<AtomicBool>) -> Vec<Ack> {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let ws_url = format!(
        "{}/topics/crash/ws/publish",
        url.replacen("http://", "ws://", 1)
    );
    let mut acks = Vec::new();
    let Ok((mut ws, _)) = tokio_tungstenite::connect_async(ws_url.as_str()).await else {
        return acks;
    };
    let mut seq = first_seq;
    while !stop.load(Ordering::Relaxed) {
        if ws.send(Message::text(body(id, seq))).await.is_err() {
            break;
        }
        let offset = loop {
            match ws.next().await {
                Some(Ok(Message::Text(t))) => {
                    let v: serde_json::Value = serde_json::from_str(&t).expect("a JSON answer");
                    break v["offset"].as_u64();
                }
                Some(Ok(_)) => continue,
                _ => break None,
            }
        };
        let Some(offset) = offset else { break };
        acks.push(Ack {
            offset,
            payload: format!("{id}-{seq}"),
        });
        seq += 1;
    }
    acks
}

/// Streaming POSTs (`?stream=true`) of a delimited Jelly stream of five frames, one
/// item each; the answer's `ranges` give the items' offsets in order.
async fn stream_publisher(
    url: String,
    id: usize,
    first_seq: u64,
    stop: Arc<AtomicBool>,
) -> Vec<Ack> {
    let client = jelly_cli::server_client::client(None, None).unwrap();
    let mut acks = Vec::new();
    let mut seq = first_seq;
    while !stop.load(Ordering::Relaxed) {
        let mut stream = Vec::new();
        let mut w = jelly::JellyWriterBuilder::new(jelly::StreamOptions::small())
            .frame_policy(jelly::FramePolicy::Manual)
            .build_vec(&mut stream)
            .unwrap();
        for k in 0..5 {
            for st in jelly::nquads::parse_document(&body(id, seq + k)).unwrap() {
                w.add(st.as_ref()).unwrap();
            }
            w.flush_frame().unwrap();
        }
        w.finish().unwrap();
        let post = client
            .post(format!("{url}/topics/crash/items?stream=true"))
            .header("content-type", "application/x-jelly-rdf")
            .body(stream);
        let Some(v) = acknowledged(post).await else {
            break;
        };
        let offsets: Vec<u64> = v["ranges"]
            .as_array()
            .expect("ranges in the answer")
            .iter()
            .flat_map(|r| r[0].as_u64().unwrap()..=r[1].as_u64().unwrap())
            .collect();
        assert_eq!(offsets.len(), 5, "{v}");
        for (k, offset) in offsets.into_iter().enumerate() {
            acks.push(Ack {
                offset,
                payload: format!("{id}-{}", seq + k as u64),
            });
        }
        seq += 5;
    }
    acks
}

/// Every stored item in order: `(offset, payload)`, read back as Jelly with metadata.
async fn read_all(url: &str) -> Vec<(u64, String)> {
    let r = jelly_cli::server_client::client(None, None)
        .unwrap()
        .get(format!(
            "{url}/topics/crash/items?follow=false&format=jelly"
        ))
        .send()
        .await
        .expect("subscribe");
    if r.status() == reqwest::StatusCode::NOT_FOUND {
        return Vec::new(); // nothing published yet
    }
    assert!(r.status().is_success(), "{}", r.status());
    let bytes = r.bytes().await.expect("body");
    let mut rd = JellyReader::new(&bytes[..]);
    let mut out = Vec::new();
    while let Some(mut f) = rd.next_frame().expect("a whole, decodable frame") {
        let mut payloads = Vec::new();
        while let Some(ev) = f.next_event().expect("a whole, decodable item") {
            if let Event::Statement(st) = ev {
                let Term::Literal(l) = st.object.to_owned() else {
                    panic!("unexpected object")
                };
                payloads.push(l.lex.to_string());
            }
        }
        let meta = f.metadata().expect("metadata");
        let offset: u64 = meta
            .iter()
            .find(|(k, _)| *k == "offset")
            .map(|(_, v)| std::str::from_utf8(v).unwrap().parse().unwrap())
            .expect("offset metadata");
        assert_eq!(payloads.len(), 5, "item {offset} is whole");
        assert!(
            payloads.iter().all(|p| *p == payloads[0]),
            "item {offset} holds one publish"
        );
        out.push((offset, payloads.swap_remove(0)));
    }
    out
}

#[test]
fn kill_9_while_publishing_loses_nothing_acknowledged() {
    let dir = temp_dir("crash");
    let data = dir.join("data");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut acked: Vec<Ack> = Vec::new();
    let mut next_seq = [0u64; PUBLISHERS];
    let mut acked_by = [0usize; PUBLISHERS];

    for round in 0..3 {
        let mut srv = ServeProc::start(&data);
        let url = srv.url.clone();

        // What survived the previous kill.
        let stored = rt.block_on(read_all(&url));
        check(&stored, &acked, round);
        // Sequence numbers go on after anything stored, acknowledged or not.
        for (_, p) in &stored {
            let (id, seq) = p.split_once('-').unwrap();
            let (id, seq): (usize, u64) = (id.parse().unwrap(), seq.parse().unwrap());
            next_seq[id] = next_seq[id].max(seq + 1);
        }

        let stop = Arc::new(AtomicBool::new(false));
        let tasks: Vec<_> = (0..PUBLISHERS)
            .map(|id| rt.spawn(publisher(url.clone(), id, next_seq[id], stop.clone())))
            .collect();
        // Let them push, wait until some items are acknowledged, then kill -9 mid-stream.
        std::thread::sleep(Duration::from_millis(400));
        srv.kill9();
        stop.store(true, Ordering::Relaxed);
        let mut got = 0;
        for (id, t) in tasks.into_iter().enumerate() {
            let acks = rt.block_on(t).unwrap();
            got += acks.len();
            acked_by[id] += acks.len();
            acked.extend(acks);
        }
        assert!(got > 0, "round {round}: publishers got acknowledgements");
        eprintln!("round {round}: {got} acknowledged before kill -9");
    }

    // Every path was exercised: each publisher had items acknowledged.
    eprintln!("acknowledged per publisher (POST, POST, WebSocket, streaming POST): {acked_by:?}");
    assert!(acked_by.iter().all(|&n| n > 0), "{acked_by:?}");

    // A last restart: everything checks, and a publish gets the next offset.
    let srv = ServeProc::start(&data);
    let stored = rt.block_on(read_all(&srv.url));
    check(&stored, &acked, 3);
    let next = rt.block_on(async {
        let v: serde_json::Value = jelly_cli::server_client::client(None, None)
            .unwrap()
            .post(format!("{}/topics/crash/items", srv.url))
            .header("content-type", "application/n-triples")
            .body(body(9, 0))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        v["offsets"][0].as_u64().unwrap()
    });
    assert_eq!(
        next,
        stored.len() as u64,
        "publishing goes on at the next offset"
    );
    assert_eq!(srv.stop(), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

fn check(stored: &[(u64, String)], acked: &[Ack], round: usize) {
    for (i, (o, _)) in stored.iter().enumerate() {
        assert_eq!(*o, i as u64, "round {round}: offsets without gaps");
    }
    let mut seen: HashMap<&str, u64> = HashMap::new();
    for (o, p) in stored {
        assert!(
            seen.insert(p.as_str(), *o).is_none(),
            "round {round}: payload {p} stored twice"
        );
    }
    for a in acked {
        let at = stored.get(a.offset as usize).map(|(_, p)| p.as_str());
        assert_eq!(
            at,
            Some(a.payload.as_str()),
            "round {round}: acknowledged item {} at offset {}",
            a.payload,
            a.offset
        );
    }
    // Each publisher's items in the order it sent them.
    let mut last: HashMap<&str, u64> = HashMap::new();
    for (_, p) in stored {
        let (id, seq) = p.split_once('-').unwrap();
        let seq: u64 = seq.parse().unwrap();
        if let Some(prev) = last.insert(id, seq) {
            assert!(seq > prev, "round {round}: publisher {id} out of order");
        }
    }
}
