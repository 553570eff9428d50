//! Repeaters: servers on real loopback sockets mirroring each other's topics.

mod support;

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::http::uri::PathAndQuery;
use bytes::Bytes;
use jelly::{Encoder, StatementRef, StreamOptions, TermRef};
use jelly_server::config::{LogKind, MirrorConfig, OnGone};
use jelly_server::grpc::PUBLISH_PATH;
use jelly_server::grpc::codec::JellyCodec;
use jelly_server::grpc::messages::{Frame, Received};
use jelly_server::item::Item;
use jelly_server::log::ReadLimits;
use jelly_server::{Server, ServerConfig};
use reqwest::StatusCode;
use serde_json::{Value, json};
use support::TempDir;

/// A test HTTP client (reqwest's TLS needs the process's crypto provider, which
/// `Server::start` installs, and these tests may build a client first).
fn client() -> reqwest::Client {
    jelly_server::tls::install_crypto_provider();
    reqwest::Client::new()
}

/// Guard against a hung test (never asserted on).
const LIMIT: Duration = Duration::from_secs(20);

fn mirror_of(upstream: &Server, topic: &str, local: &str) -> MirrorConfig {
    MirrorConfig::from_topic_url(&format!("{}/topics/{topic}={local}", upstream.url())).unwrap()
}

async fn start(f: impl FnOnce(&mut ServerConfig)) -> Server {
    let mut c = ServerConfig::ephemeral();
    f(&mut c);
    Server::start(c).await.unwrap()
}

/// A server with the file log in `dir` (fsync off: these tests do not crash machines).
fn file_config(dir: &Path, listen: SocketAddr) -> ServerConfig {
    ServerConfig {
        listen,
        log: LogKind::File,
        data: dir.to_path_buf(),
        durability: "none".into(),
        ..ServerConfig::ephemeral()
    }
}

/// A server with the file log in `dir` mirroring `topic` of `upstream` (same name).
fn file_mirror_of(upstream: &Server, topic: &str, dir: &Path, on_gone: OnGone) -> ServerConfig {
    ServerConfig {
        mirrors: vec![MirrorConfig {
            on_gone,
            ..mirror_of(upstream, topic, topic)
        }],
        ..file_config(dir, "127.0.0.1:0".parse().unwrap())
    }
}

/// Waits until the mirror of `topic` on `s` has stopped.
async fn wait_stopped(s: &Server, topic: &str) {
    let m = s.state().topics.mirror(topic).unwrap();
    wait_for("the mirror to stop", || async {
        m.state() == jelly_server::mirror::MirrorState::Stopped
    })
    .await;
}

async fn wait_for<F: Future<Output = bool>>(what: &str, mut cond: impl FnMut() -> F) {
    let t0 = std::time::Instant::now();
    while !cond().await {
        assert!(t0.elapsed() < LIMIT, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn next_offset(s: &Server, topic: &str) -> Option<u64> {
    s.state().topics.get(topic).map(|t| t.log.next_offset())
}

/// Every stored item of a topic, straight from its log.
async fn items(s: &Server, topic: &str) -> Vec<Item> {
    let t = s.state().topics.get(topic).expect("topic exists");
    let limits = ReadLimits {
        max_items: 100_000,
        max_bytes: usize::MAX,
    };
    t.log.read(t.log.first_offset(), limits).await.unwrap()
}

/// Publishes item `i` (two quads, one in a named graph) with a source and headers
/// that say which it is.
async fn publish(c: &reqwest::Client, s: &Server, topic: &str, i: u64) -> u64 {
    let body = format!(
        "<http://ex.org/s{i}> <http://ex.org/p> \"v{i}\" .\n\
         <http://ex.org/s{i}> <http://ex.org/q> <http://ex.org/o> <http://ex.org/g{}> .\n",
        i % 3
    );
    let mut r = c
        .post(format!("{}/topics/{topic}/items", s.url()))
        .header("content-type", "application/n-quads")
        .header("x-jelly-header-seq", i.to_string());
    if i.is_multiple_of(2) {
        r = r
            .header("x-jelly-source", format!("pub-{}", i % 4))
            .header("x-jelly-header-even", "yes");
    }
    let r = r.body(body).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK, "{}", r.text().await.unwrap());
    let v: Value = r.json().await.unwrap();
    v["offsets"][0].as_u64().unwrap()
}

async fn describe(c: &reqwest::Client, s: &Server, topic: &str) -> (StatusCode, Value) {
    let r = c
        .get(format!("{}/topics/{topic}", s.url()))
        .send()
        .await
        .unwrap();
    (r.status(), r.json().await.unwrap())
}

/// Waits until `b` holds everything `a` holds, then checks that they are the same
/// items: offsets, timestamps, frames byte for byte, statement counts, sources, headers.
async fn assert_mirrored(a: &Server, b: &Server, topic_a: &str, topic_b: &str) {
    let want = next_offset(a, topic_a).unwrap();
    wait_for(&format!("{topic_b} to reach offset {want}"), || async {
        next_offset(b, topic_b) == Some(want)
    })
    .await;
    let (ia, ib) = (items(a, topic_a).await, items(b, topic_b).await);
    assert!(!ia.is_empty());
    assert_eq!(ia.len(), ib.len());
    for (x, y) in ia.iter().zip(&ib) {
        assert_eq!(x, y, "item {}", x.offset);
    }
    let ta = a.state().topics.get(topic_a).unwrap();
    let tb = b.state().topics.get(topic_b).unwrap();
    assert_eq!(tb.log.first_offset(), ta.log.first_offset());
    assert_eq!(
        tb.options().stream_options(),
        ta.options().stream_options(),
        "same options"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_of_mirrors_copies_items_exactly() {
    let c = client();
    let a = start(|_| {}).await;
    for i in 0..30 {
        publish(&c, &a, "t", i).await;
    }
    // B mirrors A's `t` as `copy`; C mirrors B's `copy`. Both start with A full.
    let b = start(|cfg| cfg.mirrors = vec![mirror_of(&a, "t", "copy")]).await;
    let cc = start(|cfg| cfg.mirrors = vec![mirror_of(&b, "copy", "copy")]).await;
    assert_mirrored(&a, &b, "t", "copy").await;
    assert_mirrored(&a, &cc, "t", "copy").await;

    // Live: new items travel down the chain.
    for i in 30..60 {
        publish(&c, &a, "t", i).await;
    }
    assert_mirrored(&a, &b, "t", "copy").await;
    assert_mirrored(&a, &cc, "t", "copy").await;

    let (st, d) = describe(&c, &b, "copy").await;
    assert_eq!(st, StatusCode::OK);
    let m = &d["mirror"];
    assert_eq!(m["state"], "connected", "{d}");
    assert_eq!(m["upstream"], a.url());
    assert_eq!(m["upstream_topic"], "t");
    assert_eq!(m["lag"], 0);
    assert_eq!(m["items_copied"], 60);
    assert_eq!(m["connects"], 1);
    assert_eq!(d["next_offset"], 60);
    let metrics = support::metrics_text(&c, &b.url()).await;
    let label = format!("{{topic=\"copy\",upstream=\"{}/topics/t\"}}", a.url());
    for line in [
        format!("jelly_mirror_connected{label} 1"),
        format!("jelly_mirror_stopped{label} 0"),
        format!("jelly_mirror_items_total{label} 60"),
        format!("jelly_mirror_lag_items{label} 0"),
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in\n{metrics}");
    }
    // A subscriber of the last server sees A's offsets and metadata.
    let body = c
        .get(format!(
            "{}/topics/copy/items?from=58&follow=false&format=nquads",
            cc.url()
        ))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        body.contains("\"v58\"") && body.contains("\"v59\""),
        "{body}"
    );

    cc.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
    a.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirror_starts_at_the_upstreams_first_retained_offset() {
    let c = client();
    let a = start(|_| {}).await;
    let r = c
        .put(format!("{}/topics/short", a.url()))
        .json(&json!({ "physical": "triples", "retention_items": 5 }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    for i in 0..12 {
        let r = c
            .post(format!("{}/topics/short/items", a.url()))
            .header("content-type", "application/n-triples")
            .body(format!("<http://ex.org/s> <http://ex.org/p> \"{i}\" .\n"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
    }
    let dir = TempDir::new("first");
    let b = Server::start(ServerConfig {
        mirrors: vec![mirror_of(&a, "short", "short")],
        ..file_config(dir.path(), "127.0.0.1:0".parse().unwrap())
    })
    .await
    .unwrap();
    assert_mirrored(&a, &b, "short", "short").await;
    let t = b.state().topics.get("short").unwrap();
    assert_eq!((t.log.first_offset(), t.log.next_offset()), (7, 12));
    // Its stream options are the upstream's; its retention is this server's default
    // (a memory log's item count means nothing to B's file log).
    assert_eq!(t.options().physical, jelly_server::topic::Physical::Triples);
    assert_eq!(
        t.options().retention_items,
        ServerConfig::ephemeral().topic_defaults.retention_items
    );
    // And it is changed here like any topic's: a byte limit for the file log.
    let r = c
        .patch(format!("{}/topics/short", b.url()))
        .json(&json!({ "retention_bytes": 1_000_000 }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK, "{}", r.text().await.unwrap());
    assert_eq!(t.options().retention_bytes, 1_000_000);
    // Its items stay the mirror's: deleting it is refused.
    let r = c
        .delete(format!("{}/topics/short", b.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CONFLICT);
    let err: serde_json::Value = r.json().await.unwrap();
    assert!(
        err["error"].as_str().unwrap().contains("is a mirror of"),
        "{err}"
    );
    // New items still arrive after the change.
    let r = c
        .post(format!("{}/topics/short/items", a.url()))
        .header("content-type", "application/n-triples")
        .body("<http://ex.org/s> <http://ex.org/p> \"12\" .\n")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    wait_for("item 12", || async { next_offset(&b, "short") == Some(13) }).await;
    b.shutdown().await.unwrap();
    a.shutdown().await.unwrap();
}

/// One Jelly frame with one quad, for the streaming publish paths.
fn jelly_frame() -> Vec<u8> {
    let mut enc = Encoder::new(StreamOptions::small()).unwrap();
    enc.add(StatementRef::triple(
        TermRef::Iri("http://ex.org/s"),
        TermRef::Iri("http://ex.org/p"),
        TermRef::Iri("http://ex.org/o"),
    ))
    .unwrap();
    enc.finish_frame()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_publishes_to_a_mirrored_topic_are_refused() {
    let c = client();
    // The upstream does not exist: the mirror keeps retrying, and the topic does
    // not exist yet. Publishing must not create it.
    let nowhere = MirrorConfig::from_topic_url("http://127.0.0.1:9/topics/t").unwrap();
    let b = start(|cfg| cfg.mirrors = vec![nowhere]).await;
    let url = b.url();
    let conflict = |r: reqwest::Response| async move {
        let st = r.status();
        let v: Value = r.json().await.unwrap();
        assert_eq!(st, StatusCode::CONFLICT, "{v}");
        assert!(
            v["error"].as_str().unwrap().contains("is a mirror of"),
            "{v}"
        );
    };
    let atomic = c
        .post(format!("{url}/topics/t/items"))
        .header("content-type", "application/n-triples")
        .body("<http://ex.org/s> <http://ex.org/p> <http://ex.org/o> .\n");
    conflict(atomic.send().await.unwrap()).await;
    let mut delimited = Vec::new();
    jelly_proto::wire::put_varint(&mut delimited, jelly_frame().len() as u64);
    delimited.extend(jelly_frame());
    let streaming = c
        .post(format!("{url}/topics/t/items?stream=true"))
        .header("content-type", "application/x-jelly-rdf")
        .body(delimited);
    conflict(streaming.send().await.unwrap()).await;
    conflict(c.put(format!("{url}/topics/t")).send().await.unwrap()).await;
    let ws =
        tokio_tungstenite::connect_async(format!("ws://{}/topics/t/ws/publish", b.local_addr()))
            .await;
    match ws {
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) => {
            assert_eq!(r.status().as_u16(), 409)
        }
        other => panic!("expected a refused WebSocket upgrade, got {other:?}"),
    }
    let mut g = tonic::client::Grpc::new(support::grpc_channel(&url).await);
    g.ready().await.unwrap();
    let mut req = tonic::Request::new(futures_util::stream::iter([Frame(Bytes::from(
        jelly_frame(),
    ))]));
    req.metadata_mut()
        .insert("x-jelly-topic", "t".parse().unwrap());
    let st = g
        .client_streaming(
            req,
            PathAndQuery::from_static(PUBLISH_PATH),
            JellyCodec::<Frame, Received>::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(st.code(), tonic::Code::Aborted, "{st:?}");
    assert!(st.message().contains("is a mirror of"), "{st:?}");

    assert!(b.state().topics.get("t").is_none(), "nothing created it");
    // The description says what the mirror is doing.
    let (st, d) = describe(&c, &b, "t").await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    wait_for("the mirror to report its failure", || {
        let c = c.clone();
        let url = url.clone();
        async move {
            let d: Value = c
                .get(format!("{url}/topics/t"))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            d["mirror"]["state"] == "retrying"
        }
    })
    .await;
    assert_eq!(d["mirror"]["upstream_topic"], "t");
    // Other topics are not affected.
    let r = c
        .post(format!("{url}/topics/other/items"))
        .header("content-type", "application/n-triples")
        .body("<http://ex.org/s> <http://ex.org/p> <http://ex.org/o> .\n")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirror_resumes_after_the_upstream_restarts() {
    let c = client();
    let dir_a = TempDir::new("up-a");
    let dir_b = TempDir::new("up-b");
    let a = Server::start(file_config(dir_a.path(), "127.0.0.1:0".parse().unwrap()))
        .await
        .unwrap();
    let addr = a.local_addr();
    for i in 0..20 {
        publish(&c, &a, "t", i).await;
    }
    let b = Server::start(ServerConfig {
        mirrors: vec![mirror_of(&a, "t", "t")],
        ..file_config(dir_b.path(), "127.0.0.1:0".parse().unwrap())
    })
    .await
    .unwrap();
    assert_mirrored(&a, &b, "t", "t").await;
    let a_items = items(&a, "t").await;
    a.shutdown().await.unwrap();
    wait_for("the mirror to notice", || async {
        b.state().topics.mirror("t").unwrap().state()
            != jelly_server::mirror::MirrorState::Connected
    })
    .await;

    // The upstream comes back on the same address and data; more items follow.
    let a = Server::start(file_config(dir_a.path(), addr))
        .await
        .unwrap();
    assert_eq!(items(&a, "t").await, a_items);
    for i in 20..40 {
        publish(&c, &a, "t", i).await;
    }
    assert_mirrored(&a, &b, "t", "t").await;
    let m = b.state().topics.mirror("t").unwrap();
    assert!(m.connects.load(Ordering::Relaxed) >= 2);
    assert_eq!(m.items.load(Ordering::Relaxed), 40, "each item copied once");

    // The mirror restarts too (on its own log): it goes on from its next offset.
    b.shutdown().await.unwrap();
    for i in 40..45 {
        publish(&c, &a, "t", i).await;
    }
    let b = Server::start(ServerConfig {
        mirrors: vec![mirror_of(&a, "t", "t")],
        ..file_config(dir_b.path(), "127.0.0.1:0".parse().unwrap())
    })
    .await
    .unwrap();
    assert_mirrored(&a, &b, "t", "t").await;
    let m = b.state().topics.mirror("t").unwrap();
    assert_eq!(m.items.load(Ordering::Relaxed), 5, "only the new items");
    b.shutdown().await.unwrap();
    a.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_behind_upstream_retention_stops_or_skips() {
    let c = client();
    let a = start(|cfg| cfg.topic_defaults.retention_items = 5).await;
    for i in 0..5 {
        publish(&c, &a, "t", i).await;
    }
    let dir = TempDir::new("gone");
    let b_config = |on_gone| file_mirror_of(&a, "t", dir.path(), on_gone);
    let b = Server::start(b_config(OnGone::Stop)).await.unwrap();
    assert_mirrored(&a, &b, "t", "t").await;
    b.shutdown().await.unwrap();
    // While B is down, A drops what B would need next.
    for i in 5..20 {
        publish(&c, &a, "t", i).await;
    }
    let b = Server::start(b_config(OnGone::Stop)).await.unwrap();
    wait_stopped(&b, "t").await;
    let (_, d) = describe(&c, &b, "t").await;
    let err = d["mirror"]["last_error"].as_str().unwrap();
    assert!(err.contains("no longer retains offset 5"), "{err}");
    assert_eq!(d["mirror"]["state"], "stopped");
    assert_eq!(d["next_offset"], 5, "the local items stay");
    let metrics = support::metrics_text(&c, &b.url()).await;
    assert!(
        metrics.contains(&format!(
            "jelly_mirror_stopped{{topic=\"t\",upstream=\"{}/topics/t\"}} 1",
            a.url()
        )),
        "{metrics}"
    );
    b.shutdown().await.unwrap();

    // With on_gone = "skip", the local log starts over at A's first retained item.
    let b = Server::start(b_config(OnGone::Skip)).await.unwrap();
    assert_mirrored(&a, &b, "t", "t").await;
    let t = b.state().topics.get("t").unwrap();
    assert_eq!((t.log.first_offset(), t.log.next_offset()), (15, 20));
    publish(&c, &a, "t", 20).await;
    wait_for("item 20", || async { next_offset(&b, "t") == Some(21) }).await;
    // A's memory log keeps 5 items; B's file log does not apply `retention_items`.
    assert_eq!(items(&b, "t").await[1..], items(&a, "t").await[..]);
    b.shutdown().await.unwrap();
    a.shutdown().await.unwrap();
}

/// An upstream topic deleted and created again is another topic (a new id, offsets
/// from 0): the mirror does not splice its items onto the old copy. By default it
/// stops, even across its own restart (the id is kept in the topic's folder); with
/// `on_gone = "skip"` it deletes the local copy and copies the new topic from its
/// start under a new local id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_of_a_replaced_upstream_topic_stops_or_starts_over() {
    let c = client();
    let a = start(|_| {}).await;
    for i in 0..6 {
        publish(&c, &a, "t", i).await;
    }
    let dir = TempDir::new("replaced");
    let b_config = |on_gone| file_mirror_of(&a, "t", dir.path(), on_gone);
    let b = Server::start(b_config(OnGone::Stop)).await.unwrap();
    assert_mirrored(&a, &b, "t", "t").await;
    let old_local_id = b.state().topics.get("t").unwrap().id.clone();
    b.shutdown().await.unwrap();
    // While B is down, A's topic is replaced by one that grows past B's offset.
    let r = c
        .delete(format!("{}/topics/t", a.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    for i in 100..110 {
        publish(&c, &a, "t", i).await;
    }
    let b = Server::start(b_config(OnGone::Stop)).await.unwrap();
    wait_stopped(&b, "t").await;
    let (_, d) = describe(&c, &b, "t").await;
    let err = d["mirror"]["last_error"].as_str().unwrap();
    assert!(err.contains("deleted and created again"), "{err}");
    assert_eq!(d["next_offset"], 6, "nothing of the new topic was appended");
    assert_eq!(d["id"], old_local_id.as_str());
    b.shutdown().await.unwrap();

    // With on_gone = "skip": a new local topic, the new upstream topic's items only.
    let b = Server::start(b_config(OnGone::Skip)).await.unwrap();
    assert_mirrored(&a, &b, "t", "t").await;
    let t = b.state().topics.get("t").unwrap();
    assert_ne!(t.id, old_local_id, "the local copy is a new topic");
    assert_eq!((t.log.first_offset(), t.log.next_offset()), (0, 10));
    // And it goes on following the new topic, live.
    publish(&c, &a, "t", 110).await;
    wait_for("item 10", || async { next_offset(&b, "t") == Some(11) }).await;
    b.shutdown().await.unwrap();
    a.shutdown().await.unwrap();
}

/// While connected, the mirror asks the upstream for its next offset every few
/// seconds, so the lag and when it was last known (`upstream_seen_ms`) move even when
/// the stream delivers nothing (a slow link, an idle topic).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connected_mirror_refreshes_what_it_knows_of_the_upstream() {
    let c = client();
    let a = start(|_| {}).await;
    for i in 0..3 {
        publish(&c, &a, "t", i).await;
    }
    let b = start(|cfg| cfg.mirrors = vec![mirror_of(&a, "t", "t")]).await;
    assert_mirrored(&a, &b, "t", "t").await;
    let (_, d) = describe(&c, &b, "t").await;
    let seen = d["mirror"]["upstream_seen_ms"]
        .as_u64()
        .expect("seen once connected");
    assert_eq!(d["mirror"]["lag"], 0, "{d}");
    wait_for("a newer sighting of the upstream", || async {
        let (_, d) = describe(&c, &b, "t").await;
        d["mirror"]["upstream_seen_ms"].as_u64() > Some(seen)
    })
    .await;
    let metrics = support::metrics_text(&c, &b.url()).await;
    assert!(
        metrics.contains("jelly_mirror_upstream_seen_ms{topic=\"t\""),
        "{metrics}"
    );
    b.shutdown().await.unwrap();
    a.shutdown().await.unwrap();
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

/// An upstream that lost its newest items but kept its topic (restored from a backup,
/// or a crash without fsync) and then took those offsets again has other items where
/// the mirror's copy has its own: offsets alone look fine. The mirror checks the item
/// it resumes after and stops (or with `on_gone = "skip"` copies the topic again),
/// rather than go on from offsets that hold other items upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_of_an_upstream_that_lost_items_stops_or_starts_over() {
    let c = client();
    let dir_a = TempDir::new("lost-a");
    let backup = TempDir::new("lost-backup");
    let dir_b = TempDir::new("lost-b");
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let a = Server::start(file_config(dir_a.path(), any)).await.unwrap();
    for i in 0..6 {
        publish(&c, &a, "t", i).await;
    }
    a.shutdown().await.unwrap();
    copy_dir(dir_a.path(), backup.path());
    let a = Server::start(file_config(dir_a.path(), any)).await.unwrap();
    for i in 6..10 {
        publish(&c, &a, "t", i).await;
    }
    let b = Server::start(file_mirror_of(&a, "t", dir_b.path(), OnGone::Stop))
        .await
        .unwrap();
    assert_mirrored(&a, &b, "t", "t").await;
    let old_local_id = b.state().topics.get("t").unwrap().id.clone();
    b.shutdown().await.unwrap();
    a.shutdown().await.unwrap();

    // The upstream comes back from the backup (items 0..6, same topic id) and takes
    // offsets 6.. again with other items, past the mirror's next offset.
    let a = Server::start(file_config(backup.path(), any))
        .await
        .unwrap();
    for i in 100..106 {
        publish(&c, &a, "t", i).await;
    }
    let b = Server::start(file_mirror_of(&a, "t", dir_b.path(), OnGone::Stop))
        .await
        .unwrap();
    wait_stopped(&b, "t").await;
    let (_, d) = describe(&c, &b, "t").await;
    let err = d["mirror"]["last_error"].as_str().unwrap();
    assert!(
        err.contains("the upstream's item at offset 9 is not the local copy's"),
        "{err}"
    );
    assert!(err.contains("remove the local topic's folder"), "{err}");
    assert_eq!(d["next_offset"], 10, "nothing appended after the check");
    b.shutdown().await.unwrap();

    // With on_gone = "skip": the copy starts over, a new local topic equal to A's.
    let b = Server::start(file_mirror_of(&a, "t", dir_b.path(), OnGone::Skip))
        .await
        .unwrap();
    assert_mirrored(&a, &b, "t", "t").await;
    let t = b.state().topics.get("t").unwrap();
    assert_ne!(t.id, old_local_id, "the local copy is a new topic");
    assert_eq!((t.log.first_offset(), t.log.next_offset()), (0, 12));
    b.shutdown().await.unwrap();
    a.shutdown().await.unwrap();
}

/// Publishes an item of about 250 KB: more than a server with `max_item_bytes =
/// 50_000` takes.
async fn publish_big(c: &reqwest::Client, s: &Server, topic: &str) {
    let big: String = (0..2000)
        .map(|i| {
            format!(
                "<http://ex.org/s{i}> <http://ex.org/p> \"{i}{}\" .\n",
                "x".repeat(100)
            )
        })
        .collect();
    let r = c
        .post(format!("{}/topics/{topic}/items", s.url()))
        .header("content-type", "application/n-quads")
        .body(big)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
}

/// An upstream item larger than this server takes (`max_item_bytes`) stops the mirror
/// with the reason, instead of fetching the same item again every few seconds for ever;
/// the items before it are kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_item_over_max_item_bytes_stops_the_mirror() {
    let c = client();
    let a = start(|_| {}).await;
    publish(&c, &a, "t", 0).await;
    publish_big(&c, &a, "t").await;
    let b = start(|cfg| {
        cfg.max_item_bytes = 50_000;
        cfg.mirrors = vec![mirror_of(&a, "t", "t")];
    })
    .await;
    wait_stopped(&b, "t").await;
    let (_, d) = describe(&c, &b, "t").await;
    let err = d["mirror"]["last_error"].as_str().unwrap();
    assert!(
        err.contains("item 1") && err.contains("max_item_bytes"),
        "{err}"
    );
    assert_eq!(d["next_offset"], 1, "the item before it is kept");
    b.shutdown().await.unwrap();
    a.shutdown().await.unwrap();
}

/// A stopped mirror needs an operator: `/health` stays 200 (the server is alive) but
/// says `degraded` with the count, and `/ready` answers 503 with the reason. Anyone
/// may ask (probes carry no tokens); the reason, which names the topic and its
/// upstream, is shown only to a caller who may subscribe to the topic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_readiness_report_a_stopped_mirror() {
    let c = client();
    let a = start(|_| {}).await;
    publish(&c, &a, "t", 0).await;
    publish_big(&c, &a, "t").await;
    // A server with nothing wrong is ready.
    let r = c.get(format!("{}/ready", a.url())).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.json::<Value>().await.unwrap()["status"], "ok");
    let b = start(|cfg| {
        cfg.max_item_bytes = 50_000;
        cfg.mirrors = vec![mirror_of(&a, "t", "t")];
        cfg.auth = Some(jelly_server::auth::AuthConfig {
            tokens: vec![jelly_server::auth::TokenConfig {
                name: Some("ops".into()),
                token: Some("ops-token".into()),
                admin: true,
                ..Default::default()
            }],
            anonymous_subscribe: vec!["public-*".into()],
            ..Default::default()
        });
    })
    .await;
    wait_stopped(&b, "t").await;
    let h: Value = support::get_json(&c, &format!("{}/health", b.url())).await;
    assert_eq!(h["status"], "degraded", "{h}");
    assert_eq!(
        (&h["mirrors"], &h["mirrors_stopped"]),
        (&json!(1), &json!(1)),
        "{h}"
    );
    // Without a token: the counts, not the reason.
    let r = c.get(format!("{}/ready", b.url())).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["status"], "degraded", "{v}");
    assert_eq!(v["mirrors_stopped"], 1, "{v}");
    assert!(
        v["error"].as_str().unwrap().contains("1 mirror stopped"),
        "{v}"
    );
    assert_eq!(v["problems"], json!([]), "{v}");
    // With a token that may read the topic: which one, and why.
    let r = c
        .get(format!("{}/ready", b.url()))
        .bearer_auth("ops-token")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    let v: Value = r.json().await.unwrap();
    let p = &v["problems"][0];
    assert_eq!(
        (&p["topic"], &p["kind"]),
        (&json!("t"), &json!("mirror_stopped")),
        "{v}"
    );
    assert!(
        p["reason"].as_str().unwrap().contains("max_item_bytes"),
        "{v}"
    );
    b.shutdown().await.unwrap();
    a.shutdown().await.unwrap();
}

/// A mirror that its upstream refuses (no token, where the upstream asks for one) is
/// retried, but needs an operator: `/health` is degraded and `/ready` 503 with the
/// reason, until a session connects. (Before, it was retried with `/ready` 200.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_refused_by_its_upstream_is_reported() {
    let c = client();
    let a = start(|cfg| {
        cfg.auth = Some(jelly_server::auth::AuthConfig {
            tokens: vec![jelly_server::auth::TokenConfig {
                name: Some("reader".into()),
                token: Some("reader-token".into()),
                subscribe: vec!["*".into()],
                ..Default::default()
            }],
            ..Default::default()
        });
    })
    .await;
    let b = start(|cfg| cfg.mirrors = vec![mirror_of(&a, "t", "t")]).await;
    wait_for("the refusal reported", || async {
        let h: Value = support::get_json(&c, &format!("{}/health", b.url())).await;
        h["mirrors_refused"] == 1
    })
    .await;
    let r = c.get(format!("{}/ready", b.url())).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    let v: Value = r.json().await.unwrap();
    let p = &v["problems"][0];
    assert_eq!(p["kind"], "mirror_refused", "{v}");
    assert!(p["reason"].as_str().unwrap().contains("401"), "{v}");
    let (_, d) = describe(&c, &b, "t").await;
    assert_eq!(d["mirror"]["state"], "retrying", "{d}");
    assert_eq!(d["mirror"]["refused"], true, "{d}");
    let m = support::metrics_text(&c, &b.url()).await;
    assert!(
        m.lines()
            .any(|l| l.starts_with("jelly_mirror_refused{topic=\"t\"") && l.ends_with(" 1")),
        "{m}"
    );
    // The upstream lets it in (here: started again, at the same address, open): the
    // next session connects and the refusal is no longer reported.
    let addr = a.local_addr();
    a.shutdown().await.unwrap();
    let a = start(|cfg| cfg.listen = addr).await;
    publish(&c, &a, "t", 0).await;
    wait_for("the mirror connected", || async {
        let (_, d) = describe(&c, &b, "t").await;
        d["mirror"]["state"] == "connected"
    })
    .await;
    let (_, d) = describe(&c, &b, "t").await;
    assert_eq!(d["mirror"]["refused"], false, "{d}");
    let h: Value = support::get_json(&c, &format!("{}/health", b.url())).await;
    assert_eq!(
        (&h["status"], &h["mirrors_refused"]),
        (&json!("ok"), &json!(0)),
        "{h}"
    );
    b.shutdown().await.unwrap();
    a.shutdown().await.unwrap();
}

/// A mirror of a mirror that stopped learns it from the upstream's description: its
/// status, `/health` and `/metrics` say that nothing new will come and why. It stays
/// ready: it serves what it has, and the stopped mirror is reported (and not ready)
/// on its own server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_of_a_stopped_mirror_shows_it() {
    let c = client();
    let a = start(|_| {}).await;
    publish(&c, &a, "t", 0).await;
    publish_big(&c, &a, "t").await;
    let b = start(|cfg| {
        cfg.max_item_bytes = 50_000;
        cfg.mirrors = vec![mirror_of(&a, "t", "t")];
    })
    .await;
    let cc = start(|cfg| cfg.mirrors = vec![mirror_of(&b, "t", "t")]).await;
    wait_stopped(&b, "t").await;
    let m = cc.state().topics.mirror("t").unwrap();
    // The stop upstream can be seen (in the upstream's description, read before the
    // first connect) while this mirror is still starting: wait for both.
    wait_for("the stop upstream to be seen, connected", || async {
        m.upstream_stopped().is_some() && m.state() == jelly_server::mirror::MirrorState::Connected
    })
    .await;
    let (_, d) = describe(&c, &cc, "t").await;
    let why = d["mirror"]["upstream_stopped"].as_str().unwrap();
    assert!(
        why.contains(&format!("{}/topics/t", a.url())) && why.contains("max_item_bytes"),
        "{d}"
    );
    assert_eq!(d["mirror"]["state"], "connected", "{d}");
    let h: Value = support::get_json(&c, &format!("{}/health", cc.url())).await;
    assert_eq!(h["status"], "ok", "{h}");
    assert_eq!(h["mirrors_upstream_stopped"], 1, "{h}");
    let r = c.get(format!("{}/ready", cc.url())).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let metrics = support::metrics_text(&c, &cc.url()).await;
    let line = format!(
        "jelly_mirror_upstream_stopped{{topic=\"t\",upstream=\"{}/topics/t\"}} 1",
        b.url()
    );
    assert!(metrics.lines().any(|l| l == line), "{line} in\n{metrics}");
    cc.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
    a.shutdown().await.unwrap();
}

/// What a mirror spends per item: unsplicing a delivered frame (what it does) or
/// decoding and re-encoding it (`JellyIngest`, the alternative). Prints numbers,
/// asserts none about speed:
///
/// ```text
/// cargo test --release -p jelly-server --test mirror -- --ignored --nocapture
/// ```
#[test]
#[ignore = "a measurement; run by hand"]
fn unsplice_versus_reingest_cost() {
    use jelly_server::deliver::{Delivery, OutFormat};
    use jelly_server::ingest::{InputFormat, JellyIngest, PublishMeta, ingest};
    use jelly_server::mirror::Unsplicer;
    use jelly_server::topic::TopicOptions;
    use std::time::Instant;

    const ITEMS: u64 = 2000;
    const STATEMENTS: u64 = 20;
    let topic = TopicOptions::default();
    let meta = PublishMeta::default();
    let mut delivery = Delivery::new(OutFormat::Jelly, false);
    let mut delivered = Vec::new();
    for i in 0..ITEMS {
        let text: String = (0..STATEMENTS)
            .map(|k| {
                format!(
                    "<http://ex.org/sensor/{}> <http://ex.org/p{k}> \"{i}.{k}\"^^<http://www.w3.org/2001/XMLSchema#decimal> <http://ex.org/g{}> .\n",
                    i % 50,
                    i % 7
                )
            })
            .collect();
        let stored = ingest(text.as_bytes(), InputFormat::NQuads, &topic, &meta, 1 << 20)
            .unwrap()
            .remove(0);
        let item = Item {
            offset: i,
            timestamp_ms: 1_700_000_000_000 + i,
            frame: stored.frame,
            statements: stored.statements,
            source: "bench".into(),
            headers: vec![("seq".into(), i.to_string())],
        };
        let mut out = Vec::new();
        delivery.write_item(&item, &mut out).unwrap();
        delivered.push(Bytes::from(out));
    }
    let bytes: usize = delivered.iter().map(Bytes::len).sum();
    for round in 0..3 {
        let t0 = Instant::now();
        let mut u = Unsplicer::new();
        for f in &delivered {
            std::hint::black_box(u.item(f.clone()).unwrap());
        }
        let unsplice = t0.elapsed();
        let t0 = Instant::now();
        let mut ing = JellyIngest::new(&topic, meta.clone(), 1 << 20);
        for f in &delivered {
            std::hint::black_box(ing.frame(f).unwrap());
        }
        let reingest = t0.elapsed();
        let per = |d: Duration| d.as_nanos() as f64 / ITEMS as f64;
        println!(
            "round {round}: {ITEMS} items of {STATEMENTS} quads ({bytes} bytes delivered): \
             unsplice {:.0} ns/item, re-ingest {:.0} ns/item ({:.1}x)",
            per(unsplice),
            per(reingest),
            reingest.as_secs_f64() / unsplice.as_secs_f64()
        );
    }
}
