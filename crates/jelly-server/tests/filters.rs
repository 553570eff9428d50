//! Subscription filters (source, prefix, pattern, SPARQL ASK) on a real loopback
//! server, over every subscribe path: HTTP stream, long-poll, SSE, WebSocket, gRPC.

mod support;

use std::time::Duration;

use futures_util::StreamExt as _;
use jelly::Decoder;
use jelly_server::grpc::messages::Frame;
use jelly_server::{Server, ServerConfig};
use reqwest::StatusCode;
use serde_json::Value;
use support::{DecodedFrame, grpc_subscribe};
use tokio_tungstenite::tungstenite::Message;
use tonic::{Code, Streaming};

/// Guard against a hung test (never asserted on).
const LIMIT: Duration = Duration::from_secs(30);

const XSD_INTEGER: &str = "http://www.w3.org/2001/XMLSchema#integer";

/// The items of topic `f`, one per entry: (source, N-Quads body).
fn sample_items() -> Vec<(&'static str, String)> {
    vec![
        // 0
        (
            "alice",
            "<http://ex.org/a1> <http://schema.org/name> \"Alice\"@en .\n".into(),
        ),
        // 1
        (
            "bob",
            format!(
                "<http://ex.org/b1> <http://xmlns.com/foaf/0.1/name> \"Bob\" .\n\
                 <http://ex.org/b1> <http://ex.org/age> \"30\"^^<{XSD_INTEGER}> .\n"
            ),
        ),
        // 2
        (
            "carol",
            "<http://ex.org/c1> <http://schema.org/name> \"Carol\" <http://ex.org/g1> .\n".into(),
        ),
        // 3
        (
            "alice",
            format!(
                "<http://ex.org/a2> <http://ex.org/age> \"45\"^^<{XSD_INTEGER}> .\n\
                 _:x <http://ex.org/knows> _:x .\n"
            ),
        ),
        // 4
        (
            "dave",
            "<http://ex.org/d1> <http://schema.org/knows> <http://ex.org/a1> .\n".into(),
        ),
    ]
}

async fn start() -> Server {
    let c = ServerConfig {
        sse_keepalive_secs: 1,
        ..ServerConfig::ephemeral()
    };
    Server::start(c).await.unwrap()
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
}

/// Publishes one item (an N-Quads body) with a source id; returns its offset.
async fn publish(c: &reqwest::Client, srv: &Server, topic: &str, source: &str, body: &str) -> u64 {
    let r = c
        .post(format!("{}/topics/{topic}/items", srv.url()))
        .header("content-type", "application/n-quads")
        .header("x-jelly-source", source)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = r.status();
    let v: Value = r.json().await.unwrap();
    assert_eq!(status, StatusCode::OK, "{v}");
    let offsets = v["offsets"].as_array().unwrap();
    assert_eq!(offsets.len(), 1, "{v}");
    offsets[0].as_u64().unwrap()
}

/// A server with topic `f` holding [`sample_items`] at offsets 0..5.
async fn start_with_items() -> (Server, reqwest::Client) {
    let srv = start().await;
    let c = client();
    for (i, (source, body)) in sample_items().iter().enumerate() {
        assert_eq!(publish(&c, &srv, "f", source, body).await, i as u64);
    }
    (srv, c)
}

/// Offsets of the frames of a delimited Jelly stream (decoded with one decoder).
fn delimited_offsets(stream: &[u8]) -> Vec<u64> {
    let mut dec = Decoder::default();
    let mut out = Vec::new();
    let mut i = 0;
    while i < stream.len() {
        let (mut len, mut shift) = (0usize, 0);
        loop {
            let b = stream[i];
            len |= ((b & 0x7f) as usize) << shift;
            i += 1;
            if b < 0x80 {
                break;
            }
            shift += 7;
        }
        out.push(DecodedFrame::decode(&mut dec, &stream[i..i + len]).offset());
        i += len;
    }
    out
}

/// `GET /topics/f/items?follow=false` with filter parameters: the offsets delivered.
async fn stream_offsets(c: &reqwest::Client, srv: &Server, filter: &[(&str, &str)]) -> Vec<u64> {
    let r = c
        .get(with_query(
            &format!("{}/topics/f/items?follow=false", srv.url()),
            filter,
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK, "{filter:?}");
    delimited_offsets(&r.bytes().await.unwrap())
}

#[tokio::test]
async fn http_stream_every_kind_of_filter() {
    let (srv, c) = start_with_items().await;
    let got = |f: &'static [(&'static str, &'static str)]| stream_offsets(&c, &srv, f);

    // No filter: everything.
    assert_eq!(got(&[]).await, [0, 1, 2, 3, 4]);

    // Source: one id, a list, none that match.
    assert_eq!(got(&[("source", "alice")]).await, [0, 3]);
    assert_eq!(got(&[("source", "dave, alice")]).await, [0, 3, 4]);
    assert_eq!(got(&[("source", "nobody")]).await, [] as [u64; 0]);

    // Prefix: any position (graph names too), datatypes, several prefixes.
    assert_eq!(got(&[("prefix", "http://schema.org/")]).await, [0, 2, 4]);
    assert_eq!(
        got(&[(
            "prefix",
            "<http://xmlns.com/foaf/0.1/> http://www.w3.org/2001/XMLSchema#"
        )])
        .await,
        [1, 3]
    );

    // Pattern: literals (language-tagged, typed), graph, wildcards, repeated terms.
    assert_eq!(
        got(&[("pattern", "* <http://schema.org/name> \"Alice\"@en")]).await,
        [0]
    );
    assert_eq!(
        got(&[(
            "pattern",
            "?s <http://ex.org/age> \"30\"^^<http://www.w3.org/2001/XMLSchema#integer>"
        )])
        .await,
        [1]
    );
    assert_eq!(got(&[("pattern", "* * * <http://ex.org/g1>")]).await, [2]);
    assert_eq!(got(&[("pattern", "?x * ?x")]).await, [3]);
    assert_eq!(got(&[("pattern", "_:b * *")]).await, [3]);
    assert_eq!(
        got(&[("pattern", "* <http://schema.org/name> \"Carol\"")]).await,
        [2]
    );

    // ASK that matches some items, and one that matches none.
    assert_eq!(
        got(&[("ask", "ASK { ?s <http://ex.org/age> ?a FILTER(?a > 40) }")]).await,
        [3]
    );
    assert_eq!(
        got(&[("ask", "ASK { ?s <http://ex.org/age> ?a FILTER(?a > 100) }")]).await,
        [] as [u64; 0]
    );
    // Quads are in their named graph, not in the default graph.
    assert_eq!(
        got(&[(
            "ask",
            "PREFIX s: <http://schema.org/> ASK { GRAPH ?g { ?x s:name ?n } }"
        )])
        .await,
        [2]
    );

    // Every kind at once (AND).
    assert_eq!(
        got(&[
            ("source", "alice,bob"),
            ("prefix", "http://ex.org/"),
            ("pattern", "* <http://ex.org/age> *"),
            ("ask", "ASK { ?s ?p ?o FILTER(isBlank(?s)) }"),
        ])
        .await,
        [3]
    );
    assert_eq!(
        got(&[
            ("source", "bob"),
            ("ask", "ASK { ?s <http://ex.org/age> ?a FILTER(?a > 40) }"),
        ])
        .await,
        [] as [u64; 0]
    );
    srv.shutdown().await.unwrap();
}

/// A 400 JSON error naming the parameter; returns the message.
async fn bad_request(r: reqwest::Response, parameter: &str) -> String {
    let status = r.status();
    let v: Value = r.json().await.unwrap();
    assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(v["parameter"], parameter, "{v}");
    v["error"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn bad_filters_are_refused_on_every_path() {
    let (srv, c) = start_with_items().await;
    let base = srv.url();
    let paths = ["items", "poll", "sse", "ws"];

    for path in paths {
        let get = |q: &'static [(&'static str, &'static str)]| {
            c.get(with_query(&format!("{base}/topics/f/{path}?"), q))
                .send()
        };
        // Malformed ASK: the parser's message with its position.
        let m = bad_request(get(&[("ask", "ASK { ?s ?p }")]).await.unwrap(), "ask").await;
        assert!(
            m.starts_with("ask: SPARQL syntax error: error at 1:"),
            "{path}: {m}"
        );
        // Not an ASK query.
        let m = bad_request(
            get(&[("ask", "SELECT * WHERE { ?s ?p ?o }")])
                .await
                .unwrap(),
            "ask",
        )
        .await;
        assert_eq!(
            m, "ask: only ASK queries are allowed, this is a SELECT query",
            "{path}"
        );
        let m = bad_request(
            get(&[("pattern", "<http://ex.org/s> <http://ex.org/p")])
                .await
                .unwrap(),
            "pattern",
        )
        .await;
        assert!(
            m.contains("term 2") && m.contains("closing `>`"),
            "{path}: {m}"
        );
        let m = bad_request(get(&[("prefix", "schema")]).await.unwrap(), "prefix").await;
        assert!(m.contains("not an absolute IRI"), "{path}: {m}");
        let m = bad_request(get(&[("source", ",")]).await.unwrap(), "source").await;
        assert!(m.contains("empty source id"), "{path}: {m}");
    }
    // A query over the size limit.
    let long = format!("ASK {{ ?s ?p \"{}\" }}", "x".repeat(20_000));
    let r = c
        .get(with_query(
            &format!("{base}/topics/f/items?"),
            &[("ask", long.as_str())],
        ))
        .send()
        .await
        .unwrap();
    let m = bad_request(r, "ask").await;
    assert!(m.contains("too long"), "{m}");
    srv.shutdown().await.unwrap();
}

#[tokio::test]
async fn long_poll_moves_past_skipped_items_and_waits_for_a_match() {
    let (srv, c) = start_with_items().await;
    let base = srv.url();
    let poll = |from: u64, q: Vec<(&'static str, String)>| {
        let c = c.clone();
        let url = format!("{base}/topics/f/poll");
        async move {
            let q: Vec<(&str, &str)> = q.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let r = c
                .get(with_query(&format!("{url}?from={from}"), &q))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), StatusCode::OK);
            let h = |k: &str| -> u64 { r.headers()[k].to_str().unwrap().parse().unwrap() };
            let (next, n) = (h("x-jelly-next-offset"), h("x-jelly-items"));
            let offsets = delimited_offsets(&r.bytes().await.unwrap());
            assert_eq!(offsets.len() as u64, n);
            (offsets, next)
        }
    };
    let bob = || vec![("source", "bob".to_string())];
    // A page of two items read, one sent.
    let mut q = bob();
    q.push(("max_items", "2".into()));
    assert_eq!(poll(0, q).await, (vec![1], 2));
    // Nothing passes in the rest: no items, but the next offset moves past them.
    assert_eq!(poll(2, bob()).await, (vec![], 5));
    // Waiting: skipped items do not end the wait, a matching one does.
    let mut q = bob();
    q.push(("wait_ms", "20000".into()));
    let waiting = tokio::spawn(poll(5, q));
    assert_eq!(
        publish(
            &c,
            &srv,
            "f",
            "dave",
            "<http://x/s> <http://x/p> <http://x/o> ."
        )
        .await,
        5
    );
    assert_eq!(
        publish(
            &c,
            &srv,
            "f",
            "bob",
            "<http://x/s> <http://x/p> <http://x/o> ."
        )
        .await,
        6
    );
    let (offsets, next) = tokio::time::timeout(LIMIT, waiting).await.unwrap().unwrap();
    assert_eq!((offsets, next), (vec![6], 7));
    // Prefix and pattern over the long-poll too.
    let q = vec![("prefix", "http://schema.org/".to_string())];
    assert_eq!(poll(0, q).await, (vec![0, 2, 4], 7));
    let q = vec![("pattern", "* <http://x/p> *".to_string())];
    assert_eq!(poll(0, q).await, (vec![5, 6], 7));
    // With no wait, pages that are skipped whole are read past while the log has
    // items: one-item pages from 2 skip 2 to 5 and answer with 6.
    let mut q = bob();
    q.push(("max_items", "1".into()));
    q.push(("wait_ms", "0".into()));
    assert_eq!(poll(2, q).await, (vec![6], 7));
    srv.shutdown().await.unwrap();
}

#[tokio::test]
async fn sse_with_a_pattern_and_an_ask_query() {
    let (srv, c) = start_with_items().await;
    let ids = |q: &'static [(&'static str, &'static str)]| {
        let r = c
            .get(with_query(
                &format!("{}/topics/f/sse?follow=false", srv.url()),
                q,
            ))
            .send();
        async move {
            let r = r.await.unwrap();
            assert_eq!(r.status(), StatusCode::OK);
            let text = r.text().await.unwrap();
            text.lines()
                .filter_map(|l| l.strip_prefix("id: "))
                .map(|v| v.parse::<u64>().unwrap())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        ids(&[("pattern", "* <http://schema.org/name> *")]).await,
        [0, 2]
    );
    assert_eq!(
        ids(&[("ask", "ASK { ?s <http://schema.org/knows> ?o }")]).await,
        [4]
    );
    assert_eq!(
        ids(&[("ask", "ASK { ?s <http://schema.org/nothing> ?o }")]).await,
        [] as [u64; 0]
    );
    srv.shutdown().await.unwrap();
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn ws_connect(srv: &Server, query: &str) -> Ws {
    let url = format!("ws://{}/topics/f/ws?{query}", srv.local_addr());
    tokio_tungstenite::connect_async(url).await.unwrap().0
}

/// The offsets of the next `n` items on a WebSocket subscription.
async fn ws_take(ws: &mut Ws, dec: &mut Decoder, n: usize) -> Vec<u64> {
    let mut out = Vec::new();
    while out.len() < n {
        let m = tokio::time::timeout(LIMIT, ws.next())
            .await
            .expect("no message in time")
            .expect("socket closed")
            .unwrap();
        match m {
            Message::Binary(b) => out.push(DecodedFrame::decode(dec, &b).offset()),
            Message::Ping(_) | Message::Pong(_) => {}
            other => panic!("unexpected message {other:?}"),
        }
    }
    out
}

#[tokio::test]
async fn websocket_subscribers_with_different_filters_on_one_topic() {
    let (srv, c) = start_with_items().await;
    // A prefix filter over stored items, to the end (follow=false closes the socket).
    let mut ws = ws_connect(&srv, "follow=false&prefix=http%3A%2F%2Fschema.org%2F").await;
    let mut dec = Decoder::default();
    assert_eq!(ws_take(&mut ws, &mut dec, 3).await, [0, 2, 4]);
    let end = tokio::time::timeout(LIMIT, ws.next()).await.unwrap();
    assert!(matches!(end, Some(Ok(Message::Close(_)))), "{end:?}");

    // Two live subscribers, different filters, both from the end of the log.
    let mut by_source = ws_connect(&srv, "from=latest&source=alice").await;
    let ask = "ASK { ?s <http://ex.org/age> ?a FILTER(?a >= 18) }";
    let mut by_ask = ws_connect(&srv, &format!("from=latest&ask={}", urlencode(ask))).await;
    let adult =
        |age: u32| format!("<http://ex.org/p> <http://ex.org/age> \"{age}\"^^<{XSD_INTEGER}> .");
    assert_eq!(publish(&c, &srv, "f", "alice", &adult(10)).await, 5);
    assert_eq!(publish(&c, &srv, "f", "bob", &adult(20)).await, 6);
    assert_eq!(publish(&c, &srv, "f", "carol", &adult(5)).await, 7);
    assert_eq!(publish(&c, &srv, "f", "alice", &adult(30)).await, 8);
    let (mut d1, mut d2) = (Decoder::default(), Decoder::default());
    assert_eq!(ws_take(&mut by_source, &mut d1, 2).await, [5, 8]);
    assert_eq!(ws_take(&mut by_ask, &mut d2, 2).await, [6, 8]);
    srv.shutdown().await.unwrap();
}

/// `url` (which has a `?`) with the parameters appended, percent-encoded.
fn with_query(url: &str, params: &[(&str, &str)]) -> String {
    let mut out = url.to_string();
    for (k, v) in params {
        if !out.ends_with('?') {
            out.push('&');
        }
        out.push_str(&format!("{k}={}", urlencode(v)));
    }
    out
}

/// Percent-encodes a query parameter value.
fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

async fn grpc_take(s: &mut Streaming<Frame>, dec: &mut Decoder, n: usize) -> Vec<u64> {
    let mut out = Vec::new();
    for _ in 0..n {
        let f = tokio::time::timeout(LIMIT, s.message())
            .await
            .expect("no frame in time")
            .expect("stream error")
            .expect("stream ended");
        out.push(DecodedFrame::decode(dec, &f.0).offset());
    }
    out
}

#[tokio::test]
async fn grpc_subscribe_with_filter_metadata() {
    let (srv, c) = start_with_items().await;
    // Source and pattern (ASCII metadata): the stream skips what does not pass,
    // then goes on with new items.
    let mut s = grpc_subscribe(
        &srv.url(),
        "f",
        &[
            ("x-jelly-source", "alice,bob"),
            ("x-jelly-pattern", "* <http://ex.org/age> *"),
        ],
        &[],
    )
    .await
    .unwrap();
    let mut dec = Decoder::default();
    assert_eq!(grpc_take(&mut s, &mut dec, 2).await, [1, 3]);
    publish(
        &c,
        &srv,
        "f",
        "carol",
        "<http://x/s> <http://ex.org/age> \"1\" .",
    )
    .await;
    publish(
        &c,
        &srv,
        "f",
        "bob",
        "<http://x/s> <http://ex.org/age> \"2\" .",
    )
    .await;
    assert_eq!(grpc_take(&mut s, &mut dec, 1).await, [6]);

    // ASK in binary metadata (UTF-8), and a prefix.
    let mut s = grpc_subscribe(
        &srv.url(),
        "f",
        &[("x-jelly-prefix", "http://schema.org/")],
        &[(
            "x-jelly-ask-bin",
            "ASK { GRAPH ?g { ?s ?p \"Carol\" } } # ü",
        )],
    )
    .await
    .unwrap();
    let mut dec = Decoder::default();
    assert_eq!(grpc_take(&mut s, &mut dec, 1).await, [2]);

    // A malformed query: INVALID_ARGUMENT before any frame.
    let st = grpc_subscribe(&srv.url(), "f", &[("x-jelly-ask", "ASK { ?s ?p")], &[])
        .await
        .unwrap_err();
    assert_eq!(st.code(), Code::InvalidArgument, "{st:?}");
    assert!(
        st.message()
            .starts_with("ask: SPARQL syntax error: error at 1:"),
        "{}",
        st.message()
    );
    let st = grpc_subscribe(
        &srv.url(),
        "f",
        &[("x-jelly-ask", "DESCRIBE <http://x>")],
        &[],
    )
    .await
    .unwrap_err();
    assert_eq!(st.code(), Code::InvalidArgument);
    assert!(st.message().contains("DESCRIBE"), "{}", st.message());
    srv.shutdown().await.unwrap();
}

/// An SSE stream whose filter skips every item keeps its keep-alives coming while
/// items keep arriving (a proxy's idle timeout would otherwise cut it on a busy topic):
/// items every 300 ms for 6 s, keep-alives every 1 s: two are due after about 2 s.
#[tokio::test]
async fn sse_keep_alives_go_on_while_a_filter_skips_every_item() {
    let srv = start().await;
    let c = client();
    publish(&c, &srv, "busy", "a", &sample_items()[0].1).await;
    let mut r = c
        .get(format!(
            "{}/topics/busy/sse?from=latest&source=nobody",
            srv.url()
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let published = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let publisher = {
        let (c, url, published) = (c.clone(), srv.url(), published.clone());
        tokio::spawn(async move {
            for _ in 0..20 {
                tokio::time::sleep(Duration::from_millis(300)).await;
                let r = c
                    .post(format!("{url}/topics/busy/items"))
                    .header("content-type", "application/n-quads")
                    .header("x-jelly-source", "a")
                    .body("<http://ex.org/s> <http://ex.org/p> <http://ex.org/o> .\n")
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), StatusCode::OK);
                published.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        })
    };
    let mut text = String::new();
    let read = async {
        while let Some(chunk) = r.chunk().await.unwrap() {
            text.push_str(&String::from_utf8_lossy(&chunk));
            if text.matches(": keep-alive").count() >= 2 {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(6), read).await;
    publisher.abort();
    // The topic was busy while the keep-alives came (not idle: then they would come
    // anyway).
    let published = published.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        published >= 5,
        "only {published} items were published meanwhile"
    );
    assert!(
        text.matches(": keep-alive").count() >= 2,
        "keep-alives while items were skipped: {text:?}"
    );
    assert!(
        !text.contains("data:"),
        "the filter passed an item: {text:?}"
    );
    srv.shutdown().await.unwrap();
}
