//! A topic's life on real loopback sockets: `DELETE /topics/{name}` ends every
//! subscription as deleted, takes its files out of the data directory and holds across
//! a restart; a publish of the same name starts a new topic (new id, offsets from 0)
//! that clients resuming with the old id are told about; `max_topics` bounds how many
//! topics publishes to new names can create.

mod support;

use std::path::Path;
use std::time::Duration;

use axum::http::uri::PathAndQuery;
use futures_util::StreamExt as _;
use jelly::{Statement, StreamOptions};
use jelly_server::config::LogKind;
use jelly_server::grpc::codec::JellyCodec;
use jelly_server::grpc::messages::Frame;
use jelly_server::{Server, ServerConfig};
use reqwest::StatusCode;
use serde_json::Value;
use support::{
    TempDir, client, frames_with_metadata, get, grpc_subscribe, jelly_stream, start_file, triple,
};
use tokio_tungstenite::connect_async;
use tokio_tungstenite::tungstenite::Message;
use tonic::client::Grpc;
use tonic::{Code, Request};

const JELLY: &str = "application/x-jelly-rdf";
const WAIT: Duration = Duration::from_secs(10);

/// `n` one-statement frames, numbered from `start`.
fn items(n: usize, start: usize) -> Vec<u8> {
    let frames: Vec<Vec<Statement>> = (start..start + n)
        .map(|i| {
            vec![triple(
                &format!("http://example.org/s{i}"),
                "http://example.org/p",
                "http://example.org/o",
            )]
        })
        .collect();
    jelly_stream(&frames, StreamOptions::small())
}

/// Posts a Jelly body to `topic`, whatever the answer.
async fn post_items(
    c: &reqwest::Client,
    base: &str,
    topic: &str,
    body: Vec<u8>,
) -> reqwest::Response {
    c.post(format!("{base}/topics/{topic}/items"))
        .header("content-type", JELLY)
        .body(body)
        .send()
        .await
        .unwrap()
}

/// Publishes a Jelly body to `topic`, which must succeed: the answer's JSON.
async fn publish(c: &reqwest::Client, base: &str, topic: &str, body: Vec<u8>) -> Value {
    let r = post_items(c, base, topic, body).await;
    assert_eq!(r.status(), StatusCode::OK);
    r.json().await.unwrap()
}

async fn delete(c: &reqwest::Client, base: &str, topic: &str) -> (StatusCode, Value) {
    let r = c
        .delete(format!("{base}/topics/{topic}"))
        .send()
        .await
        .unwrap();
    (r.status(), r.json().await.unwrap())
}

/// Every entry of the data directory, by name, but the server's lock file.
fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != jelly_server::topic::LOCK_FILE)
        .collect();
    v.sort();
    v
}

#[tokio::test]
async fn deleting_a_topic_ends_every_subscription_and_removes_its_files() {
    let dir = TempDir::new("delete");
    let srv = start_file(&dir.0).await;
    let c = client();
    let base = srv.url();
    publish(&c, &base, "t", items(5, 0)).await;
    publish(&c, &base, "other", items(2, 0)).await;

    // Subscribers of every kind, caught up and waiting for more.
    let chunked = get(
        &c,
        &format!("{base}/topics/t/items?from=earliest&format=jelly"),
    )
    .await;
    assert_eq!(chunked.status(), StatusCode::OK);
    let shared = get(
        &c,
        &format!("{base}/topics/t/items?from=latest&format=jelly"),
    )
    .await;
    assert_eq!(shared.status(), StatusCode::OK);
    let sse = get(
        &c,
        &format!("{base}/topics/t/sse?from=earliest&format=nquads"),
    )
    .await;
    assert_eq!(sse.status(), StatusCode::OK);
    let ws_url = format!("{}/topics/t/ws?from=earliest", base.replace("http", "ws"));
    let (mut ws, _) = connect_async(ws_url).await.unwrap();
    let mut grpc = grpc_subscribe(&base, "t", &[("x-jelly-from", "earliest")], &[])
        .await
        .unwrap();
    let poll = tokio::spawn({
        let c = c.clone();
        let base = base.clone();
        async move {
            let r = get(&c, &format!("{base}/topics/t/poll?from=5&wait_ms=8000")).await;
            (r.status(), r.json::<Value>().await.unwrap())
        }
    });
    // The gRPC and WebSocket subscribers have their five items before the delete.
    for _ in 0..5 {
        tokio::time::timeout(WAIT, grpc.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
    }
    let mut ws_items = 0;
    while ws_items < 5 {
        match tokio::time::timeout(WAIT, ws.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            Message::Binary(_) => ws_items += 1,
            Message::Ping(_) | Message::Pong(_) => {}
            m => panic!("unexpected {m:?}"),
        }
    }
    support::wait_delivered(&srv, "t", 5).await;

    let (status, v) = delete(&c, &base, "t").await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["deleted"], true);
    assert_eq!(v["next_offset"], 5);
    assert_eq!(v["first_offset"], 0);

    // Chunked streams end after what they had; the earliest one got all five.
    let body = tokio::time::timeout(WAIT, chunked.bytes())
        .await
        .expect("the chunked stream ends")
        .unwrap();
    let offsets: Vec<String> = frames_with_metadata(&body)
        .into_iter()
        .map(|m| m["offset"].clone())
        .collect();
    assert_eq!(offsets, ["0", "1", "2", "3", "4"]);
    tokio::time::timeout(WAIT, shared.bytes())
        .await
        .expect("the shared-group stream ends")
        .unwrap();
    let events = tokio::time::timeout(WAIT, sse.text())
        .await
        .expect("the SSE stream ends")
        .unwrap();
    assert_eq!(events.matches("event: item").count(), 5, "{events}");
    // The last event says why the stream ended, so that EventSource stops.
    let last = events.trim_end().rsplit("\n\n").next().unwrap();
    assert!(
        last.starts_with("event: end\ndata: ") && last.contains("\"reason\":\"deleted\""),
        "{last}"
    );
    // WebSocket: a close frame with the deletion's code; gRPC: NOT_FOUND.
    let close = loop {
        match tokio::time::timeout(WAIT, ws.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            Message::Close(f) => break f.expect("a close code"),
            Message::Ping(_) | Message::Pong(_) => {}
            m => panic!("unexpected {m:?}"),
        }
    };
    assert_eq!(u16::from(close.code), 4404);
    assert!(close.reason.contains("deleted"), "{}", close.reason);
    let st = tokio::time::timeout(WAIT, grpc.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap_err();
    assert_eq!(st.code(), Code::NotFound, "{st:?}");
    assert!(st.message().contains("deleted"), "{}", st.message());
    // The long-poll that was waiting answers 404, naming the deletion.
    let (status, v) = tokio::time::timeout(WAIT, poll).await.unwrap().unwrap();
    assert_eq!(status, StatusCode::NOT_FOUND, "{v}");
    assert!(v["error"].as_str().unwrap().contains("was deleted"), "{v}");

    // Gone from the API and from the disk; the other topic is untouched.
    let r = c.get(format!("{base}/topics/t")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let list: Value = get(&c, &format!("{base}/topics"))
        .await
        .json()
        .await
        .unwrap();
    let names: Vec<&str> = list["topics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["other"]);
    assert_eq!(entries(&dir.0), ["other"]);
    let (status, _) = delete(&c, &base, "t").await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // A publish of the same name is a new topic, at offset 0, and a new subscriber
    // (of a new fan-out group, not the old topic's) follows it.
    let v = publish(&c, &base, "t", items(1, 100)).await;
    assert_eq!(v["offsets"], serde_json::json!([0]));
    let fresh = get(
        &c,
        &format!("{base}/topics/t/items?from=latest&format=jelly"),
    )
    .await;
    assert_eq!(fresh.status(), StatusCode::OK);
    support::wait_delivered(&srv, "t", 1).await;
    let v = publish(&c, &base, "t", items(1, 101)).await;
    assert_eq!(v["offsets"], serde_json::json!([1]));
    let mut fresh = fresh.bytes_stream();
    let chunk = tokio::time::timeout(WAIT, fresh.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(
        chunk.windows(4).any(|w| w == b"s101"),
        "the new topic's item reaches its subscriber"
    );
    drop(fresh);
    srv.shutdown().await.unwrap();

    // After a restart: the new topic, not the old one.
    let srv = start_file(&dir.0).await;
    let v: Value = get(&c, &format!("{}/topics/t", srv.url()))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(v["next_offset"], 2, "{v}");
    srv.shutdown().await.unwrap();
}

#[tokio::test]
async fn delete_answers_unknown_and_bad_names_and_a_publish_after_it_is_told() {
    let srv = Server::start(ServerConfig::ephemeral()).await.unwrap();
    let c = client();
    let base = srv.url();
    let (status, v) = delete(&c, &base, "nope").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(v["topic"], "nope");
    let (status, _) = delete(&c, &base, ".hidden").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    // In-memory topics delete the same way.
    publish(&c, &base, "m", items(3, 0)).await;
    let (status, v) = delete(&c, &base, "m").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(v["next_offset"], 3);
    let v = publish(&c, &base, "m", items(1, 0)).await;
    assert_eq!(v["offsets"], serde_json::json!([0]));
    srv.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_unavailable_topic_can_be_deleted_and_published_again() {
    let dir = TempDir::new("delete-corrupt");
    let srv = start_file(&dir.0).await;
    let c = client();
    publish(&c, &srv.url(), "r", items(20, 0)).await;
    srv.shutdown().await.unwrap();
    let seg = dir.0.join("r/log/00000000000000000000.seg");
    let mut bytes = std::fs::read(&seg).unwrap();
    let at = bytes.len() / 3;
    bytes[at] ^= 0x20;
    std::fs::write(&seg, &bytes).unwrap();

    let srv = start_file(&dir.0).await;
    let base = srv.url();
    let r = c.get(format!("{base}/topics/r")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    let (status, v) = delete(&c, &base, "r").await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["was_unavailable"], true);
    assert!(entries(&dir.0).is_empty(), "{:?}", entries(&dir.0));
    let v = publish(&c, &base, "r", items(1, 0)).await;
    assert_eq!(v["offsets"], serde_json::json!([0]));
    let metrics = support::metrics_text(&c, &base).await;
    assert!(
        !metrics.contains("jelly_topic_unavailable{topic=\"r\"} 1"),
        "{metrics}"
    );
    srv.shutdown().await.unwrap();
}

/// Makes `dir` refuse to have entries renamed or removed, until dropped: immutable
/// (`chattr +i`) for root, whom permissions do not stop, else read-only. Checked with
/// a probe rename, so a machine where neither works fails here, loudly.
struct NoRenames<'a>(&'a Path);

impl<'a> NoRenames<'a> {
    fn new(dir: &'a Path) -> NoRenames<'a> {
        use std::os::unix::fs::PermissionsExt as _;
        let probe = dir.join("probe");
        std::fs::create_dir(&probe).unwrap();
        let root = std::fs::read_to_string("/proc/self/status")
            .unwrap()
            .lines()
            // Real, effective, saved, file-system: permissions go by the effective one.
            .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"));
        if root {
            let st = std::process::Command::new("chattr")
                .arg("+i")
                .arg(dir)
                .status()
                .unwrap();
            assert!(st.success(), "chattr +i {} failed", dir.display());
        } else {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o555)).unwrap();
        }
        let guard = NoRenames(dir);
        assert!(
            std::fs::rename(&probe, dir.join("probe2")).is_err(),
            "{} still allows renames (root: {root})",
            dir.display()
        );
        guard
    }
}

impl Drop for NoRenames<'_> {
    fn drop(&mut self) {
        use std::os::unix::fs::PermissionsExt as _;
        let _ = std::process::Command::new("chattr")
            .arg("-i")
            .arg(self.0)
            .status();
        let _ = std::fs::set_permissions(self.0, std::fs::Permissions::from_mode(0o755));
        let _ = std::fs::remove_dir(self.0.join("probe"));
    }
}

#[tokio::test]
async fn a_deletion_whose_files_cannot_move_leaves_them_and_can_be_retried() {
    // The topic's directory cannot be renamed away: the DELETE fails, the files stay
    // whole, the name is neither served nor created again over them, and a DELETE
    // after the cause is gone succeeds.
    let dir = TempDir::new("delete-stuck");
    let srv = start_file(&dir.0).await;
    let (c, base) = (client(), srv.url());
    publish(&c, &base, "t", items(3, 0)).await;
    let seg = dir.0.join("t/log/00000000000000000000.seg");
    let before = std::fs::read(&seg).unwrap();
    {
        let _locked = NoRenames::new(&dir.0);
        let (status, v) = delete(&c, &base, "t").await;
        assert!(status.is_server_error(), "{status} {v}");
        assert!(v["error"].as_str().unwrap().contains("/t"), "{v}");
        let r = get(&c, &format!("{base}/topics/t")).await;
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        let v: Value = r.json().await.unwrap();
        assert!(
            v["error"].as_str().unwrap().contains("deletion failed"),
            "{v}"
        );
        let r = post_items(&c, &base, "t", items(1, 9)).await;
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    }
    assert_eq!(std::fs::read(&seg).unwrap(), before, "files changed");
    let (status, v) = delete(&c, &base, "t").await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert!(entries(&dir.0).is_empty(), "{:?}", entries(&dir.0));
    let v = publish(&c, &base, "t", items(1, 0)).await;
    assert_eq!(v["offsets"], serde_json::json!([0]));
    srv.shutdown().await.unwrap();
}

#[tokio::test]
async fn files_of_a_deletion_cut_short_are_removed_at_startup() {
    // A crash after the rename that takes a deleted topic's directory away, before
    // its files were removed, leaves a hidden directory: the next start removes it
    // and does not serve it.
    let dir = TempDir::new("delete-leftover");
    let srv = start_file(&dir.0).await;
    let c = client();
    publish(&c, &srv.url(), "t", items(3, 0)).await;
    srv.shutdown().await.unwrap();
    std::fs::rename(dir.0.join("t"), dir.0.join(".deleted.t.12345")).unwrap();

    let srv = start_file(&dir.0).await;
    assert!(entries(&dir.0).is_empty(), "{:?}", entries(&dir.0));
    let r = get(&c, &format!("{}/topics/t", srv.url())).await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    srv.shutdown().await.unwrap();
}

/// Frames of one continuous Jelly stream (options row in the first), one statement each.
fn stream_frames(n: usize) -> Vec<Vec<u8>> {
    let mut enc = jelly::Encoder::new(StreamOptions::small()).unwrap();
    (0..n)
        .map(|i| {
            let st = triple(
                &format!("http://example.org/ws{i}"),
                "http://example.org/p",
                "http://example.org/o",
            );
            enc.add(st.as_ref()).unwrap();
            enc.finish_frame()
        })
        .collect()
}

#[tokio::test]
async fn a_topic_id_tells_a_re_created_topic_from_the_deleted_one() {
    let dir = TempDir::new("delete-id");
    let srv = start_file(&dir.0).await;
    let c = client();
    let base = srv.url();
    publish(&c, &base, "t", items(3, 0)).await;
    let r = get(&c, &format!("{base}/topics/t/items?follow=false")).await;
    let old_id = r.headers()["x-jelly-topic-id"]
        .to_str()
        .unwrap()
        .to_string();
    let d: Value = get(&c, &format!("{base}/topics/t"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(d["id"], old_id.as_str());
    // Resuming with the id works while it is the same topic, across a restart too.
    srv.shutdown().await.unwrap();
    let srv = start_file(&dir.0).await;
    let base = srv.url();
    for (path, extra) in [
        ("items", "follow=false&"),
        ("poll", ""),
        ("sse", "follow=false&"),
    ] {
        let r = get(
            &c,
            &format!("{base}/topics/t/{path}?{extra}from=1&topic_id={old_id}"),
        )
        .await;
        assert_eq!(r.status(), StatusCode::OK, "{path}");
        assert_eq!(r.headers()["x-jelly-topic-id"], old_id.as_str(), "{path}");
    }

    // Deleted and published again at once (auto-created): a client resuming with the
    // old id is told, on every subscribe path, instead of reading the new items.
    let (status, _) = delete(&c, &base, "t").await;
    assert_eq!(status, StatusCode::OK);
    publish(&c, &base, "t", items(5, 10)).await;
    for path in ["items", "poll", "sse"] {
        let r = get(
            &c,
            &format!("{base}/topics/t/{path}?from=3&topic_id={old_id}"),
        )
        .await;
        assert_eq!(r.status(), StatusCode::NOT_FOUND, "{path}");
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["topic"], "t");
        let e = v["error"].as_str().unwrap();
        assert!(
            e.contains("was deleted") && e.contains(&old_id),
            "{path}: {e}"
        );
    }
    let ws_url = format!(
        "{}/topics/t/ws?from=3&topic_id={old_id}",
        base.replace("http", "ws")
    );
    match connect_async(ws_url).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) => {
            assert_eq!(r.status(), StatusCode::NOT_FOUND)
        }
        other => panic!("expected a 404 upgrade refusal, got {other:?}"),
    }
    let st = grpc_subscribe(
        &base,
        "t",
        &[("x-jelly-from", "3"), ("x-jelly-topic-id", &old_id)],
        &[],
    )
    .await
    .unwrap_err();
    assert_eq!(st.code(), Code::NotFound, "{st:?}");
    // The new topic's id is another one, and works.
    let r = get(&c, &format!("{base}/topics/t/poll?from=0")).await;
    let new_id = r.headers()["x-jelly-topic-id"]
        .to_str()
        .unwrap()
        .to_string();
    assert_ne!(new_id, old_id);
    let r = get(
        &c,
        &format!("{base}/topics/t/poll?from=3&topic_id={new_id}"),
    )
    .await;
    assert_eq!(r.status(), StatusCode::OK);
    // An empty id is refused, not taken as none: the check asked for would be skipped.
    for path in ["items?", "poll?", "sse?"] {
        let r = get(&c, &format!("{base}/topics/t/{path}from=3&topic_id=")).await;
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{path}");
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["parameter"], "topic_id", "{path}: {v}");
    }
    let st = grpc_subscribe(&base, "t", &[("x-jelly-topic-id", "")], &[])
        .await
        .unwrap_err();
    assert_eq!(st.code(), Code::InvalidArgument, "{st:?}");
    srv.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_websocket_publisher_is_told_which_frames_the_deletion_refused() {
    let srv = Server::start(ServerConfig::ephemeral()).await.unwrap();
    let c = client();
    let base = srv.url();
    let url = format!("{}/topics/w/ws/publish", base.replace("http", "ws"));
    let (mut publ, _) = connect_async(url).await.unwrap();
    let frames = stream_frames(3);
    let next_text = |m: Message| match m {
        Message::Text(t) => serde_json::from_str::<Value>(&t).unwrap(),
        m => panic!("expected text, got {m:?}"),
    };
    use futures_util::SinkExt as _;
    publ.send(Message::Binary(frames[0].clone().into()))
        .await
        .unwrap();
    let ack = next_text(
        tokio::time::timeout(WAIT, publ.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap(),
    );
    assert_eq!(ack["offset"], 0, "{ack}");
    let (status, _) = delete(&c, &base, "w").await;
    assert_eq!(status, StatusCode::OK);
    publ.send(Message::Binary(frames[1].clone().into()))
        .await
        .unwrap();
    // No acknowledgement for frame 1: an error that names it, then close code 4404.
    let mut texts = Vec::new();
    let close = loop {
        match tokio::time::timeout(WAIT, publ.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            Message::Text(t) => texts.push(serde_json::from_str::<Value>(&t).unwrap()),
            Message::Close(f) => break f.expect("a close code"),
            Message::Ping(_) | Message::Pong(_) => {}
            m => panic!("unexpected {m:?}"),
        }
    };
    assert_eq!(texts.len(), 1, "{texts:?}");
    let e = &texts[0];
    assert_eq!(e["frame"], 1, "{e}");
    assert_eq!(e["status"], 404, "{e}");
    assert_eq!(e["items_accepted"], 1, "{e}");
    assert!(
        e["error"]
            .as_str()
            .unwrap()
            .contains("topic `w` was deleted"),
        "{e}"
    );
    assert_eq!(u16::from(close.code), 4404);
    srv.shutdown().await.unwrap();
}

#[tokio::test]
async fn max_topics_bounds_what_publishes_to_new_names_can_create() {
    // Each topic holds a directory, files and a writer thread: publishes to ever new
    // names must not be able to use them up.
    let dir = TempDir::new("max-topics");
    let c = ServerConfig {
        log: LogKind::File,
        data: dir.0.clone(),
        max_topics: 2,
        ..ServerConfig::ephemeral()
    };
    let srv = Server::start(c).await.unwrap();
    let c = client();
    let base = srv.url();
    publish(&c, &base, "a", items(1, 0)).await;
    publish(&c, &base, "b", items(1, 0)).await;
    // A third name: refused on every way of creating it, nothing created.
    let r = post_items(&c, &base, "c", items(1, 0)).await;
    assert_eq!(r.status(), StatusCode::INSUFFICIENT_STORAGE);
    let v: Value = r.json().await.unwrap();
    assert!(
        v["error"].as_str().unwrap().contains("maximum of 2 topics"),
        "{v}"
    );
    let r = c.put(format!("{base}/topics/c")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::INSUFFICIENT_STORAGE);
    let mut g = Grpc::new(support::grpc_channel(&base).await);
    g.ready().await.unwrap();
    let mut req = Request::new(futures_util::stream::iter(
        stream_frames(1).into_iter().map(|f| Frame(f.into())),
    ));
    req.metadata_mut()
        .insert("x-jelly-topic", "c".parse().unwrap());
    let st = g
        .client_streaming(
            req,
            PathAndQuery::from_static(jelly_server::grpc::PUBLISH_PATH),
            JellyCodec::<Frame, jelly_server::grpc::messages::Received>::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(st.code(), Code::ResourceExhausted, "{st:?}");
    assert_eq!(entries(&dir.0), ["a", "b"]);
    // Publishing to the existing ones goes on; after a delete there is room again.
    publish(&c, &base, "a", items(1, 1)).await;
    let (status, _) = delete(&c, &base, "b").await;
    assert_eq!(status, StatusCode::OK);
    publish(&c, &base, "c", items(1, 0)).await;
    assert_eq!(entries(&dir.0), ["a", "c"]);
    srv.shutdown().await.unwrap();
}

async fn patch(c: &reqwest::Client, base: &str, topic: &str, body: &str) -> (StatusCode, Value) {
    let r = c
        .patch(format!("{base}/topics/{topic}"))
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    (r.status(), r.json().await.unwrap())
}

/// The first and next offset of a topic's description.
fn held(description: &Value) -> (u64, u64) {
    let offset = |k: &str| description[k].as_u64().unwrap_or(u64::MAX);
    (offset("first_offset"), offset("next_offset"))
}

/// Defaults that depend on other settings follow them in a configuration built in
/// code as in a parsed one: the memory log bounds a topic's bytes unless
/// `retention_bytes` is set (0 included), the file log does not, and the send timeout
/// follows TCP keepalive unless it is set.
#[tokio::test]
async fn defaults_of_a_config_built_in_code_follow_its_other_settings() {
    let in_code = ServerConfig {
        listen: ([127, 0, 0, 1], 0).into(),
        log: LogKind::Memory,
        tcp_keepalive_ms: 10_000,
        ..ServerConfig::default()
    };
    let parsed = ServerConfig::from_toml(
        "listen = \"127.0.0.1:0\"\nlog = \"memory\"\ntcp_keepalive_ms = 10000\n",
        "x.toml",
    )
    .unwrap();
    for cfg in [in_code.clone(), parsed] {
        assert_eq!(cfg.send_timeout(), Some(Duration::from_secs(20)));
        let srv = Server::start(cfg).await.unwrap();
        let r = client()
            .put(format!("{}/topics/t", srv.url()))
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::CREATED);
        let t: Value = client()
            .get(format!("{}/topics/t", srv.url()))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(t["options"]["retention_bytes"], 256 << 20, "{t}");
        srv.shutdown().await.unwrap();
    }
    let mut unbounded = in_code.clone();
    unbounded.topic_defaults.retention_bytes = Some(0);
    unbounded.send_timeout_ms = Some(5000);
    assert_eq!(unbounded.default_topic_options().retention_bytes, 0);
    assert_eq!(unbounded.send_timeout(), Some(Duration::from_secs(5)));
    let file = ServerConfig {
        log: LogKind::File,
        tcp_keepalive_ms: 0,
        ..in_code
    };
    assert_eq!(file.default_topic_options().retention_bytes, 0);
    assert_eq!(file.send_timeout(), None);
}

#[tokio::test]
async fn options_given_at_creation_go_over_the_server_defaults() {
    let dir = TempDir::new("defaults");
    let mut cfg = ServerConfig {
        log: LogKind::File,
        data: dir.0.clone(),
        ..ServerConfig::ephemeral()
    };
    cfg.topic_defaults.physical = jelly_server::topic::Physical::Triples;
    cfg.topic_defaults.retention_bytes = Some(1_000_000);
    let srv = Server::start(cfg).await.unwrap();
    let c = client();
    let base = srv.url();
    let put = |name: &'static str, body: &'static str| {
        let c = c.clone();
        let base = base.clone();
        async move {
            let r = c
                .put(format!("{base}/topics/{name}"))
                .body(body)
                .send()
                .await
                .unwrap();
            let status = r.status();
            (status, r.json::<Value>().await.unwrap())
        }
    };
    // The fields not given are the server's defaults, as with no body at all.
    let (status, t) = put("t", r#"{"rdf_star": true}"#).await;
    assert_eq!(status, StatusCode::CREATED, "{t}");
    assert_eq!(t["options"]["physical"], "triples", "{t}");
    assert_eq!(t["options"]["retention_bytes"], 1_000_000, "{t}");
    assert_eq!(t["options"]["rdf_star"], true, "{t}");
    let (status, plain) = put("plain", "").await;
    assert_eq!(status, StatusCode::CREATED, "{plain}");
    // The same topic asked for again with a body naming a default: the same options.
    let (status, again) = put("plain", r#"{"rdf_star": false}"#).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    // Not an object, or a field twice: refused, nothing created.
    for (body, why) in [
        (r#"["triples", "graphs", true]"#, "expected a JSON object"),
        (r#"{"rdf_star": true, "rdf_star": false}"#, "given twice"),
    ] {
        let (status, err) = put("bad", body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {err}");
        assert!(
            err["error"].as_str().unwrap().contains(why),
            "{body}: {err}"
        );
    }
    // A body that does not decompress is a bad request, not one too large.
    let r = c
        .put(format!("{base}/topics/bad"))
        .header("content-encoding", "gzip")
        .body("notgzip")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let r = c.get(format!("{base}/topics/bad")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
}

/// A file-log server in `data` whose every publish starts a segment of its own, so
/// that retention (which deletes whole segments) can drop items one publish at a time.
async fn start_small_segments(data: &Path) -> Server {
    let mut c = ServerConfig {
        log: LogKind::File,
        data: data.to_path_buf(),
        ..ServerConfig::ephemeral()
    };
    c.segment_bytes = 1;
    Server::start(c).await.unwrap()
}

#[tokio::test]
async fn changing_retention_applies_at_once_and_holds_across_a_restart() {
    let dir = TempDir::new("alter");
    let srv = start_small_segments(&dir.0).await;
    let c = client();
    let base = srv.url();
    for i in 0..10 {
        publish(&c, &base, "t", items(1, i)).await;
    }
    let before = support::get_json(&c, &format!("{base}/topics/t")).await;
    assert_eq!(before["first_offset"], 0, "{before}");

    // Refused changes change nothing.
    for (body, why) in [
        (
            r#"{"physical": "triples", "retention_bytes": 5}"#,
            "`physical` is fixed when a topic is created (it is \"quads\", not \"triples\")",
        ),
        (
            r#"{"rdf_star": true, "retention_bytes": 5}"#,
            "`rdf_star` is fixed",
        ),
        (
            r#"{"logical": "flat-quads", "retention_ms": 5}"#,
            "`logical` is fixed",
        ),
        (
            r#"{"retention_items": 0}"#,
            "retention_items must be at least 1",
        ),
        (
            r#"{"retention_items": 5}"#,
            "retention_items does nothing here: this server keeps its topics in files",
        ),
        (
            r#"{"retention_ms": "1h"}"#,
            "`retention_ms` must be a whole number",
        ),
        (
            r#"{"retention_bytes": -1}"#,
            "`retention_bytes` must be a whole number",
        ),
        (r#"{"retention_days": 3}"#, "unknown field `retention_days`"),
        (
            r#"{"physical": "quads"}"#,
            "nothing to change: `physical` is fixed when a topic is created",
        ),
        (
            r#"{"rdf_star": true}"#,
            "nothing to change: `rdf_star` is fixed when a topic is created",
        ),
        ("{}", "nothing to change"),
        ("[1]", "expected a JSON object"),
        ("retention", "not JSON"),
        (
            r#"{"retention_ms": 1, "retention_ms": 2}"#,
            "field `retention_ms` is given twice",
        ),
    ] {
        let (status, err) = patch(&c, &base, "t", body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {err}");
        assert!(
            err["error"].as_str().unwrap().contains(why),
            "{body}: {err}"
        );
    }
    // A new topic may not ask for what the log would ignore either.
    let r = c
        .put(format!("{base}/topics/fresh"))
        .body(r#"{"retention_items": 5}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let err: serde_json::Value = r.json().await.unwrap();
    assert!(
        err["error"]
            .as_str()
            .unwrap()
            .contains("retention_items does nothing here"),
        "{err}"
    );
    let r = c.get(format!("{base}/topics/fresh")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let (status, err) = patch(&c, &base, "nope", r#"{"retention_ms": 1}"#).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{err}");
    assert_eq!(
        support::get_json(&c, &format!("{base}/topics/t")).await,
        before,
        "a refused change leaves the topic as it was"
    );

    // Keep about 1 byte: every segment but the active one (the last item) goes now.
    // Sent as a description's options, changed: the fixed ones are the topic's.
    let mut change = before["options"].clone();
    change["retention_bytes"] = 1.into();
    let (status, after) = patch(&c, &base, "t", &change.to_string()).await;
    assert_eq!(status, StatusCode::OK, "{after}");
    assert_eq!(after["options"]["retention_bytes"], 1, "{after}");
    assert_eq!(after["options"]["physical"], before["options"]["physical"]);
    assert_eq!(after["first_offset"], 9, "{after}");
    assert_eq!(after["next_offset"], 10, "{after}");
    assert_eq!(after["id"], before["id"], "the same topic");
    let old = get(&c, &format!("{base}/topics/t/poll?from=0")).await;
    assert_eq!(old.status(), StatusCode::GONE);
    let log_dir = dir.0.join("t").join("log");
    let segments = || {
        entries(&log_dir)
            .iter()
            .filter(|n| n.ends_with(".seg"))
            .count()
    };
    assert_eq!(segments(), 1, "{:?}", entries(&log_dir));

    // Creating it again with its new options is idempotent; with the old ones, a conflict.
    let mut options = after["options"].clone();
    let r = c
        .put(format!("{base}/topics/t"))
        .body(options.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    options["retention_bytes"] = 0.into();
    let r = c
        .put(format!("{base}/topics/t"))
        .body(options.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CONFLICT);

    // The change holds after a restart, and so does its effect on new items.
    srv.shutdown().await.unwrap();
    let srv = start_small_segments(&dir.0).await;
    let base = srv.url();
    let t = support::get_json(&c, &format!("{base}/topics/t")).await;
    assert_eq!(t["options"]["retention_bytes"], 1, "{t}");
    assert_eq!(held(&t), (9, 10), "{t}");
    publish(&c, &base, "t", items(1, 10)).await;
    let t = support::get_json(&c, &format!("{base}/topics/t")).await;
    assert_eq!(t["first_offset"], 10, "{t}");

    // Lifting the limit keeps what is left and every later item.
    let (status, t) = patch(&c, &base, "t", r#"{"retention_bytes": 0}"#).await;
    assert_eq!(status, StatusCode::OK, "{t}");
    for i in 11..14 {
        publish(&c, &base, "t", items(1, i)).await;
    }
    let t = support::get_json(&c, &format!("{base}/topics/t")).await;
    assert_eq!(held(&t), (10, 14), "{t}");
    srv.shutdown().await.unwrap();
}

#[tokio::test]
async fn changing_the_retention_of_a_memory_topic_drops_its_oldest_items() {
    let srv = Server::start(ServerConfig::ephemeral()).await.unwrap();
    let c = client();
    let base = srv.url();
    publish(&c, &base, "m", items(10, 0)).await;
    let (status, t) = patch(&c, &base, "m", r#"{"retention_items": 3}"#).await;
    assert_eq!(status, StatusCode::OK, "{t}");
    assert_eq!(held(&t), (7, 10), "{t}");
    assert_eq!(t["options"]["retention_items"], 3);
    publish(&c, &base, "m", items(2, 10)).await;
    // What is left is the newest three, in order.
    let body = get(
        &c,
        &format!("{base}/topics/m/poll?from=earliest&format=jelly"),
    )
    .await;
    assert_eq!(body.status(), StatusCode::OK);
    let offsets: Vec<u64> = support::frames(&body.bytes().await.unwrap())
        .iter()
        .map(|(o, _)| *o)
        .collect();
    assert_eq!(offsets, vec![9, 10, 11]);
    // A byte limit smaller than one item keeps only the newest.
    let (status, t) = patch(&c, &base, "m", r#"{"retention_bytes": 1}"#).await;
    assert_eq!(status, StatusCode::OK, "{t}");
    assert_eq!(held(&t), (11, 12), "{t}");
    assert_eq!(t["options"]["retention_bytes"], 1);
    // An age limit empties the topic once its items are older, with no append.
    let (status, t) = patch(
        &c,
        &base,
        "m",
        r#"{"retention_bytes": 0, "retention_ms": 1}"#,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{t}");
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let t: Value = get(&c, &format!("{base}/topics/m"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(held(&t), (12, 12), "{t}");
    srv.shutdown().await.unwrap();
}

/// A memory topic is bounded by the memory log's default byte bound unless told
/// otherwise: its description shows the bound, those options sent back with `PUT`
/// match, and 0 (at creation or with `PATCH`) lifts it, in the live log too.
#[tokio::test]
async fn memory_topics_have_a_default_byte_bound_that_zero_lifts() {
    use jelly_server::config::MEMORY_RETENTION_BYTES;
    use jelly_server::topic::TopicLog;
    let srv = Server::start(ServerConfig::ephemeral()).await.unwrap();
    let c = client();
    let base = srv.url();
    let bound = |name: &str| match &srv.state().topics.get(name).unwrap().log {
        TopicLog::Memory(l) => l.retention().bytes,
        TopicLog::File(_) => panic!("a memory server"),
    };
    let put = |name: &'static str, body: String| {
        let c = c.clone();
        let base = base.clone();
        async move {
            let r = c
                .put(format!("{base}/topics/{name}"))
                .body(body)
                .send()
                .await
                .unwrap();
            (r.status(), r.json::<Value>().await.unwrap())
        }
    };
    let (status, t) = put("t", String::new()).await;
    assert_eq!(status, StatusCode::CREATED, "{t}");
    assert_eq!(
        t["options"]["retention_bytes"], MEMORY_RETENTION_BYTES,
        "{t}"
    );
    assert_eq!(bound("t"), Some(MEMORY_RETENTION_BYTES));
    let (status, again) = put("t", t["options"].to_string()).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    let (status, u) = put("u", r#"{"retention_bytes": 0}"#.into()).await;
    assert_eq!(status, StatusCode::CREATED, "{u}");
    assert_eq!(u["options"]["retention_bytes"], 0, "{u}");
    assert_eq!(bound("u"), None);
    let (status, t) = patch(&c, &base, "t", r#"{"retention_bytes": 0}"#).await;
    assert_eq!(status, StatusCode::OK, "{t}");
    assert_eq!(t["options"]["retention_bytes"], 0, "{t}");
    assert_eq!(bound("t"), None);
    srv.shutdown().await.unwrap();
}

/// An idle memory topic returns the memory of its expired items: the server's sweep
/// drops them with nobody appending or reading (`/metrics` reports what the log holds
/// without dropping anything).
#[tokio::test]
async fn an_idle_memory_topic_returns_the_memory_of_expired_items() {
    let mut cfg = ServerConfig::ephemeral();
    cfg.topic_defaults.retention_ms = 100;
    let srv = Server::start(cfg).await.unwrap();
    let c = client();
    let base = srv.url();
    let answer = publish(&c, &base, "t", items(3, 0)).await;
    assert_eq!(answer["offsets"], serde_json::json!([0, 1, 2]), "{answer}");
    let retained = || async {
        support::metrics_text(&c, &base)
            .await
            .lines()
            .find_map(|l| {
                l.strip_prefix("jelly_topic_retained_bytes{topic=\"t\"} ")?
                    .parse::<u64>()
                    .ok()
            })
            .expect("the topic's retained bytes")
    };
    let t0 = std::time::Instant::now();
    while retained().await > 0 {
        assert!(t0.elapsed() < WAIT, "the expired items still hold memory");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let t = support::get_json(&c, &format!("{base}/topics/t")).await;
    assert_eq!(
        (&t["first_offset"], &t["retained_bytes"]),
        (&3.into(), &0.into()),
        "{t}"
    );
    srv.shutdown().await.unwrap();
}

/// An `id` file that is there but cannot be read is not taken for a lost one: the
/// topic is unavailable, naming the file, rather than given a new id (which would tell
/// every resuming client that the topic was deleted); once the file is repaired the
/// topic comes back under its old id. A lost `id` file still gives a new id.
#[tokio::test]
async fn an_unreadable_id_file_makes_the_topic_unavailable_not_renamed() {
    let dir = TempDir::new("id-unreadable");
    let srv = start_file(&dir.0).await;
    let c = client();
    let base = srv.url();
    publish(&c, &base, "t", items(2, 0)).await;
    let d: Value = get(&c, &format!("{base}/topics/t"))
        .await
        .json()
        .await
        .unwrap();
    let old_id = d["id"].as_str().unwrap().to_string();
    srv.shutdown().await.unwrap();

    let id_file = dir.0.join("t/id");
    std::fs::write(&id_file, [0xff, 0xfe, 0x00, 0x41]).unwrap();
    let srv = start_file(&dir.0).await;
    let base = srv.url();
    let r = get(&c, &format!("{base}/topics/t")).await;
    assert_eq!(r.status(), reqwest::StatusCode::SERVICE_UNAVAILABLE);
    let v: Value = r.json().await.unwrap();
    let e = v["error"].as_str().unwrap();
    assert!(
        e.contains(&id_file.display().to_string()) && e.contains("id cannot be read"),
        "{e}"
    );
    srv.shutdown().await.unwrap();

    std::fs::write(&id_file, &old_id).unwrap();
    let srv = start_file(&dir.0).await;
    let base = srv.url();
    let d: Value = get(&c, &format!("{base}/topics/t"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(d["id"], old_id.as_str(), "{d}");
    assert_eq!(d["next_offset"], 2, "{d}");
    srv.shutdown().await.unwrap();

    std::fs::remove_file(&id_file).unwrap();
    let srv = start_file(&dir.0).await;
    let base = srv.url();
    let d: Value = get(&c, &format!("{base}/topics/t"))
        .await
        .json()
        .await
        .unwrap();
    assert!(d["id"].as_str().is_some_and(|id| id != old_id), "{d}");
    assert_eq!(d["next_offset"], 2, "{d}");
    srv.shutdown().await.unwrap();
}
