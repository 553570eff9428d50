//! The WebSocket front-end on real loopback sockets, with a real WebSocket client
//! (tokio-tungstenite) and reqwest.

mod support;

use std::time::Duration;

use futures_util::{SinkExt as _, StreamExt as _};
use jelly::{Decoder, Encoder, Statement, StreamOptions, Term};
use jelly_server::{Server, ServerConfig};
use serde_json::Value;
use support::{DecodedFrame as Got, iri, triple};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{Bytes, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream, connect_async};

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// How long to wait for something that should happen.
const WAIT: Duration = Duration::from_secs(10);

async fn start_with(f: impl FnOnce(&mut ServerConfig)) -> Server {
    let mut c = ServerConfig {
        sse_keepalive_secs: 1,
        ..ServerConfig::ephemeral()
    };
    f(&mut c);
    Server::start(c).await.unwrap()
}

async fn start() -> Server {
    start_with(|_| {}).await
}

fn ws_url(srv: &Server, path: &str) -> String {
    format!("ws://{}{path}", srv.local_addr())
}

async fn connect(url: &str) -> Ws {
    connect_async(url).await.unwrap().0
}

/// Item `i` of the sample data: two triples, the first with object `r{i}`.
fn sample(i: usize) -> Vec<Statement> {
    vec![
        triple(
            "http://ex.org/sensor",
            "http://ex.org/reading",
            &format!("http://ex.org/r{i}"),
        ),
        triple(
            &format!("http://ex.org/r{i}"),
            "http://ex.org/value",
            "http://ex.org/v",
        ),
    ]
}

/// Bare frames of one publisher stream (tables carry over: later frames depend on
/// earlier ones), one per item `start..start+n`.
struct Publisher {
    enc: Encoder,
}

impl Publisher {
    fn new() -> Self {
        Publisher {
            enc: Encoder::new(StreamOptions::small()).unwrap(),
        }
    }

    fn frame(&mut self, i: usize) -> Vec<u8> {
        for st in sample(i) {
            self.enc.add(st.as_ref()).unwrap();
        }
        self.enc.finish_frame()
    }
}

/// The next message that is not a ping or pong, within [`WAIT`].
async fn next_msg(ws: &mut Ws) -> Message {
    // One deadline for the whole wait: the test servers ping every second, and a
    // timeout started anew after each ping would wait for ever for a missing message.
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let m = tokio::time::timeout_at(deadline, ws.next())
            .await
            .expect("no message in time")
            .expect("connection ended")
            .expect("read error");
        if !matches!(m, Message::Ping(_) | Message::Pong(_)) {
            return m;
        }
    }
}

async fn next_json(ws: &mut Ws) -> Value {
    match next_msg(ws).await {
        Message::Text(t) => serde_json::from_str(&t).unwrap(),
        m => panic!("expected a JSON text message, got {m:?}"),
    }
}

/// Publishes items `start..start+n` over one WebSocket publish connection and returns
/// the acknowledged offsets.
async fn ws_publish(srv: &Server, topic: &str, start: usize, n: usize) -> Vec<u64> {
    let mut ws = connect(&ws_url(srv, &format!("/topics/{topic}/ws/publish"))).await;
    let mut p = Publisher::new();
    for i in start..start + n {
        ws.send(Message::Binary(p.frame(i).into())).await.unwrap();
    }
    let mut offsets = Vec::new();
    for k in 0..n {
        let ack = next_json(&mut ws).await;
        assert_eq!(ack["frame"], k as u64, "{ack}");
        offsets.push(ack["offset"].as_u64().unwrap());
    }
    ws.close(None).await.unwrap();
    offsets
}

/// One decoded item; the default graph is written as no graph, as the tests' inputs do.
fn decode(dec: &mut Decoder, bytes: &[u8]) -> Got {
    let mut got = Got::decode(dec, bytes);
    for s in &mut got.statements {
        if s.graph == Some(Term::DefaultGraph) {
            s.graph = None;
        }
    }
    got
}

/// Reads `n` binary items from a WebSocket subscription, decoded with one decoder.
async fn read_items(ws: &mut Ws, dec: &mut Decoder, n: usize) -> Vec<Got> {
    let mut v = Vec::new();
    while v.len() < n {
        match next_msg(ws).await {
            Message::Binary(b) => v.push(decode(dec, &b)),
            m => panic!("expected a binary message, got {m:?}"),
        }
    }
    v
}

/// The close frame that ends the connection (after any remaining data messages).
async fn expect_close(ws: &mut Ws) -> (CloseCode, String) {
    loop {
        match next_msg(ws).await {
            Message::Close(Some(f)) => return (f.code, f.reason.to_string()),
            Message::Close(None) => panic!("close frame without a code"),
            _ => {}
        }
    }
}

async fn describe(base: &str, topic: &str) -> Value {
    reqwest::get(format!("{base}/topics/{topic}"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test]
async fn ws_publish_then_subscribe_over_ws_and_http_and_resume() {
    let srv = start().await;
    let base = srv.url();

    // Publish with a source header on the upgrade request.
    let mut req = ws_url(&srv, "/topics/w/ws/publish")
        .into_client_request()
        .unwrap();
    req.headers_mut()
        .insert("x-jelly-source", "ws-station".parse().unwrap());
    let (mut publ, _) = connect_async(req).await.unwrap();
    let mut p = Publisher::new();
    for i in 0..3 {
        publ.send(Message::Binary(p.frame(i).into())).await.unwrap();
    }
    for k in 0..3u64 {
        let ack = next_json(&mut publ).await;
        assert_eq!(ack["frame"], k);
        assert_eq!(ack["offset"], k, "{ack}");
    }
    let d = describe(&base, "w").await;
    assert_eq!(d["next_offset"], 3, "acknowledged items are appended: {d}");

    // Subscribe over WebSocket: one binary message per item, one Jelly stream.
    let mut sub = connect(&ws_url(&srv, "/topics/w/ws")).await;
    let mut dec = Decoder::default();
    let got = read_items(&mut sub, &mut dec, 3).await;
    for (i, g) in got.iter().enumerate() {
        assert_eq!(g.offset(), i as u64);
        assert_eq!(g.meta["source"], "ws-station");
        assert!(g.meta["ts"].parse::<u64>().unwrap() > 1_600_000_000_000);
        assert_eq!(g.statements, sample(i));
    }
    let d = describe(&base, "w").await;
    let kinds: Vec<_> = d["subscribers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["kind"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(kinds, ["ws"]);

    // Live: the same publisher connection goes on (tables carry over), the open
    // subscription sees the new items.
    for i in 3..5 {
        publ.send(Message::Binary(p.frame(i).into())).await.unwrap();
    }
    for k in 3..5u64 {
        assert_eq!(next_json(&mut publ).await["offset"], k);
    }
    let live = read_items(&mut sub, &mut dec, 2).await;
    assert_eq!(live[0].offset(), 3);
    assert_eq!(live[1].statements, sample(4));
    let mut seen: Vec<u64> = got.iter().chain(&live).map(Got::offset).collect();
    // The subscriber goes away; more is published meanwhile.
    sub.close(None).await.unwrap();
    drop(sub);
    assert_eq!(ws_publish(&srv, "w", 5, 3).await, [5, 6, 7]);

    // Resume from the last offset seen + 1: no gaps, no duplicates.
    let last = *seen.last().unwrap();
    let mut sub = connect(&ws_url(&srv, &format!("/topics/w/ws?from={}", last + 1))).await;
    let mut dec = Decoder::default();
    for g in read_items(&mut sub, &mut dec, 3).await {
        assert_eq!(g.statements, sample(g.offset() as usize));
        seen.push(g.offset());
    }
    assert_eq!(seen, (0..8).collect::<Vec<u64>>());

    // The same items over the chunked HTTP stream (delimited Jelly).
    let body = reqwest::get(format!("{base}/topics/w/items?follow=false"))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let mut r = jelly::JellyReader::with_options(
        &body[..],
        jelly::DecoderOptions::default(),
        jelly::Delimiting::Delimited,
    );
    let frames = r.read_all_frames().unwrap();
    assert_eq!(frames.len(), 8);
    assert_eq!(frames[6][0].object, iri("http://ex.org/r6"));

    // follow=false over WebSocket: the items, then a normal close.
    let mut sub2 = connect(&ws_url(&srv, "/topics/w/ws?from=last:2&follow=false")).await;
    let mut dec = Decoder::default();
    let got = read_items(&mut sub2, &mut dec, 2).await;
    assert_eq!(got.iter().map(Got::offset).collect::<Vec<_>>(), [6, 7]);
    assert_eq!(expect_close(&mut sub2).await.0, CloseCode::Normal);

    // mode=compact: tables carry over between messages; still one item per message.
    let mut sub3 = connect(&ws_url(&srv, "/topics/w/ws?mode=compact&follow=false")).await;
    let mut dec = Decoder::default();
    let got = read_items(&mut sub3, &mut dec, 8).await;
    for g in &got {
        assert_eq!(g.statements, sample(g.offset() as usize));
    }
    assert_eq!(expect_close(&mut sub3).await.0, CloseCode::Normal);

    publ.close(None).await.unwrap();
    drop(sub);
    srv.shutdown().await.unwrap();
}

#[tokio::test]
async fn ws_text_formats_both_ways() {
    let srv = start().await;
    let mut publ = connect(&ws_url(&srv, "/topics/t/ws/publish")).await;
    // A text message is one item of N-Quads.
    let nq = "<http://ex.org/a> <http://ex.org/p> \"one\" .\n<http://ex.org/a> <http://ex.org/p> \"two\"@en <http://ex.org/g1> .\n";
    publ.send(Message::Text(nq.into())).await.unwrap();
    assert_eq!(next_json(&mut publ).await["offset"], 0);
    // Jelly frames on the same connection.
    let mut p = Publisher::new();
    publ.send(Message::Binary(p.frame(1).into())).await.unwrap();
    let ack = next_json(&mut publ).await;
    assert_eq!(
        (ack["frame"].as_u64(), ack["offset"].as_u64()),
        (Some(1), Some(1))
    );
    // Text of no statements (empty, or comments only) makes no item, as a Jelly frame
    // without statements does: acknowledged with a null offset, not refused.
    for (i, text) in ["", "# a comment\n\n"].into_iter().enumerate() {
        publ.send(Message::Text(text.into())).await.unwrap();
        let ack = next_json(&mut publ).await;
        assert_eq!(ack["frame"].as_u64(), Some(2 + i as u64), "{ack}");
        assert!(ack["offset"].is_null(), "{ack}");
    }

    let mut sub = connect(&ws_url(&srv, "/topics/t/ws?format=nquads")).await;
    let mut texts = Vec::new();
    while texts.len() < 2 {
        match next_msg(&mut sub).await {
            Message::Text(t) => texts.push(t.to_string()),
            m => panic!("expected text, got {m:?}"),
        }
    }
    let first = jelly::nquads::parse_document(&texts[0]).unwrap();
    assert_eq!(first.len(), 2);
    assert_eq!(first[1].graph, Some(iri("http://ex.org/g1")));
    let second = jelly::nquads::parse_document(&texts[1]).unwrap();
    assert_eq!(second, sample(1));

    // TriG: one message per item, each parses on its own.
    let mut sub = connect(&ws_url(&srv, "/topics/t/ws?format=trig&follow=false")).await;
    let mut n = 0;
    loop {
        match next_msg(&mut sub).await {
            Message::Text(t) => {
                let quads = oxttl::TriGParser::new()
                    .for_slice(t.as_bytes())
                    .collect::<Result<Vec<_>, _>>()
                    .unwrap();
                assert_eq!(quads.len(), 2);
                n += 1;
            }
            Message::Close(f) => {
                assert_eq!(f.unwrap().code, CloseCode::Normal);
                break;
            }
            m => panic!("unexpected {m:?}"),
        }
    }
    assert_eq!(n, 2);
    srv.shutdown().await.unwrap();
}

#[tokio::test]
async fn ws_bad_frame_gives_an_error_then_a_close_and_keeps_earlier_items() {
    let srv = start().await;
    let base = srv.url();
    let mut publ = connect(&ws_url(&srv, "/topics/bad/ws/publish")).await;
    let mut p = Publisher::new();
    for i in 0..2 {
        publ.send(Message::Binary(p.frame(i).into())).await.unwrap();
    }
    // A frame whose row claims 0x7f bytes but ends early.
    publ.send(Message::Binary(Bytes::from_static(&[0x0a, 0x7f, 0x01])))
        .await
        .unwrap();
    let mut acks = Vec::new();
    let err = loop {
        let v = next_json(&mut publ).await;
        if v.get("error").is_some() {
            break v;
        }
        acks.push(v["offset"].as_u64().unwrap());
    };
    assert_eq!(acks, [0, 1]);
    assert_eq!(err["frame"], 2, "{err}");
    assert_eq!(err["items_accepted"], 2);
    assert_eq!(err["status"], 400);
    assert_eq!(err["last_offset"], 1);
    assert!(err["error"].as_str().unwrap().contains("frame 2"), "{err}");
    let (code, reason) = expect_close(&mut publ).await;
    assert_eq!(code, CloseCode::Invalid);
    assert!(reason.starts_with("frame 2"), "{reason}");
    assert_eq!(describe(&base, "bad").await["next_offset"], 2);

    // A named graph in a triples topic: well-formed but not allowed → 1008.
    let r = reqwest::Client::new()
        .put(format!("{base}/topics/tri"))
        .body(r#"{"physical":"triples"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let mut publ = connect(&ws_url(&srv, "/topics/tri/ws/publish")).await;
    publ.send(Message::Text(
        "<http://ex.org/s> <http://ex.org/p> <http://ex.org/o> <http://ex.org/g> .\n".into(),
    ))
    .await
    .unwrap();
    let err = next_json(&mut publ).await;
    assert_eq!(err["status"], 422, "{err}");
    assert_eq!(err["items_accepted"], 0);
    assert_eq!(expect_close(&mut publ).await.0, CloseCode::Policy);
    assert_eq!(describe(&base, "tri").await["next_offset"], 0);
    srv.shutdown().await.unwrap();
}

#[tokio::test]
async fn ws_message_over_the_limit_is_refused_with_1009() {
    let srv = start_with(|c| c.max_item_bytes = 4096).await;
    let mut publ = connect(&ws_url(&srv, "/topics/big/ws/publish")).await;
    let mut p = Publisher::new();
    publ.send(Message::Binary(p.frame(0).into())).await.unwrap();
    assert_eq!(next_json(&mut publ).await["offset"], 0);
    publ.send(Message::Binary(vec![0u8; 10_000].into()))
        .await
        .unwrap();
    let err = next_json(&mut publ).await;
    assert_eq!(err["status"], 413, "{err}");
    assert_eq!(err["frame"], 1);
    assert_eq!(expect_close(&mut publ).await.0, CloseCode::Size);
    srv.shutdown().await.unwrap();
}

#[tokio::test]
async fn ws_refusals_before_the_upgrade() {
    let srv = start_with(|c| c.auto_create_topics = false).await;
    let base = srv.url();
    // Unknown topic: the upgrade is refused with 404 and a JSON body.
    for path in ["/topics/nope/ws", "/topics/nope/ws/publish"] {
        match connect_async(ws_url(&srv, path)).await {
            Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => {
                assert_eq!(resp.status(), 404, "{path}");
                let body: Value = serde_json::from_slice(resp.body().as_deref().unwrap()).unwrap();
                assert_eq!(body["topic"], "nope");
            }
            Err(e) => panic!("{path}: unexpected error {e}"),
            Ok(_) => panic!("{path}: upgrade accepted for an unknown topic"),
        }
    }
    let c = reqwest::Client::new();
    assert_eq!(
        c.put(format!("{base}/topics/here"))
            .send()
            .await
            .unwrap()
            .status(),
        201
    );
    // Bad parameters are refused before the upgrade too.
    match connect_async(ws_url(&srv, "/topics/here/ws?from=99")).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => assert_eq!(resp.status(), 416),
        r => panic!("expected 416, got {:?}", r.map(|_| ())),
    }
    // A plain GET without the upgrade: 426 with a JSON error.
    let r = c
        .get(format!("{base}/topics/here/ws"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 426);
    // What to upgrade to (RFC 9110 §15.5.22, RFC 6455 §4.2.2).
    assert_eq!(r.headers()["upgrade"], "websocket");
    assert_eq!(r.headers()["sec-websocket-version"], "13");
    let v: Value = r.json().await.unwrap();
    assert!(v["error"].as_str().unwrap().contains("WebSocket"), "{v}");
    srv.shutdown().await.unwrap();
}

#[tokio::test]
async fn ws_ping_pong_metrics_and_close_on_shutdown() {
    let srv = start().await;
    let base = srv.url();
    assert_eq!(ws_publish(&srv, "s", 0, 1).await, [0]);
    let mut sub = connect(&ws_url(&srv, "/topics/s/ws?format=nquads")).await;
    assert!(matches!(next_msg(&mut sub).await, Message::Text(_)));

    // A ping from the client is answered with a pong carrying the same payload.
    sub.send(Message::Ping(Bytes::from_static(b"hello")))
        .await
        .unwrap();
    let pong = loop {
        let m = tokio::time::timeout(WAIT, sub.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        if let Message::Pong(p) = m {
            break p;
        }
    };
    assert_eq!(&pong[..], b"hello");
    // The server pings an idle subscriber (every sse_keepalive_secs, 1 s here).
    let ping = tokio::time::timeout(WAIT, async {
        loop {
            if let Message::Ping(_) = sub.next().await.unwrap().unwrap() {
                return;
            }
        }
    })
    .await;
    assert!(ping.is_ok(), "no ping from the server");

    let m = support::metrics_text(&reqwest::Client::new(), &base).await;
    for want in [
        "jelly_topic_subscribers{topic=\"s\"} 1",
        "kind=\"ws\",format=\"nquads\"} 0",
        "jelly_items_out_total 1",
        "jelly_publish_requests_total 1",
    ] {
        assert!(m.contains(want), "missing `{want}` in\n{m}");
    }

    // Shutdown: a close frame with a reason.
    tokio::time::timeout(WAIT, srv.shutdown())
        .await
        .expect("shutdown waits for the WebSocket")
        .unwrap();
    let (code, reason) = expect_close(&mut sub).await;
    assert_eq!(code, CloseCode::Away);
    assert_eq!(reason, "server shutting down");
}

#[tokio::test]
async fn ws_publish_is_closed_on_shutdown() {
    let srv = start().await;
    let mut publ = connect(&ws_url(&srv, "/topics/sd/ws/publish")).await;
    let mut p = Publisher::new();
    publ.send(Message::Binary(p.frame(0).into())).await.unwrap();
    assert_eq!(next_json(&mut publ).await["offset"], 0);
    tokio::time::timeout(WAIT, srv.shutdown())
        .await
        .expect("shutdown waits for the WebSocket publisher")
        .unwrap();
    let (code, reason) = expect_close(&mut publ).await;
    assert_eq!(code, CloseCode::Away);
    assert_eq!(reason, "server shutting down");
}

#[tokio::test]
async fn ws_a_close_from_the_client_is_answered_with_a_close_frame() {
    let srv = start().await;
    // A publisher closing after its acknowledgements, and one closing before them.
    let mut publ = connect(&ws_url(&srv, "/topics/cl/ws/publish")).await;
    let mut p = Publisher::new();
    publ.send(Message::Binary(p.frame(0).into())).await.unwrap();
    assert_eq!(next_json(&mut publ).await["offset"], 0);
    publ.close(None).await.unwrap();
    assert!(matches!(next_msg(&mut publ).await, Message::Close(_)));
    let mut publ = connect(&ws_url(&srv, "/topics/cl/ws/publish")).await;
    let mut p = Publisher::new();
    publ.send(Message::Binary(p.frame(1).into())).await.unwrap();
    publ.close(None).await.unwrap();
    loop {
        match next_msg(&mut publ).await {
            Message::Close(_) => break,
            Message::Text(_) => {} // its acknowledgement, if it came first
            m => panic!("unexpected {m:?}"),
        }
    }
    let base = format!("http://{}", srv.local_addr());
    assert_eq!(describe(&base, "cl").await["next_offset"], 2);
    // A subscriber.
    let mut sub = connect(&ws_url(&srv, "/topics/cl/ws")).await;
    let mut dec = Decoder::default();
    assert_eq!(read_items(&mut sub, &mut dec, 2).await.len(), 2);
    sub.close(None).await.unwrap();
    loop {
        match next_msg(&mut sub).await {
            Message::Close(_) => break,
            Message::Binary(_) => {}
            m => panic!("unexpected {m:?}"),
        }
    }
    srv.shutdown().await.unwrap();
}

/// Opens a WebSocket by hand, so that frames a client library would never send can be
/// written on the raw socket; returns the socket after the 101 answer.
async fn raw_upgrade(srv: &Server, path: &str) -> TcpStream {
    let s = TcpStream::connect(srv.local_addr()).await.unwrap();
    support::raw_ws_upgrade(s, srv, path).await
}

#[tokio::test]
async fn ws_protocol_violations_close_with_1002_and_big_subscriber_messages_with_1009() {
    use tokio::io::AsyncWriteExt as _;
    use tokio_tungstenite::tungstenite::protocol::Role;
    let srv = start().await;
    // A publisher's unmasked frame: an error naming it, then 1002; nothing appended.
    let mut s = raw_upgrade(&srv, "/topics/pv-pub/ws/publish").await;
    s.write_all(&[0x82, 0x03, 1, 2, 3]).await.unwrap();
    let mut ws =
        WebSocketStream::from_raw_socket(MaybeTlsStream::Plain(s), Role::Client, None).await;
    let err = next_json(&mut ws).await;
    assert_eq!(err["status"], 400, "{err}");
    assert!(err["error"].as_str().unwrap().contains("unmasked"), "{err}");
    assert_eq!(expect_close(&mut ws).await.0, CloseCode::Protocol);
    // A subscriber's frame with a reserved opcode (3), masked: 1002.
    assert_eq!(ws_publish(&srv, "pv", 0, 1).await, [0]);
    let mut s = raw_upgrade(&srv, "/topics/pv/ws?from=latest").await;
    s.write_all(&[0x83, 0x80, 0, 0, 0, 0]).await.unwrap();
    let mut ws =
        WebSocketStream::from_raw_socket(MaybeTlsStream::Plain(s), Role::Client, None).await;
    assert_eq!(expect_close(&mut ws).await.0, CloseCode::Protocol);
    // A subscriber's message over 64 KiB: 1009 (smaller ones are ignored).
    let mut sub = connect(&ws_url(&srv, "/topics/pv/ws?from=latest")).await;
    sub.send(Message::Binary(vec![0u8; 64 << 10].into()))
        .await
        .unwrap();
    sub.send(Message::Binary(vec![0u8; (64 << 10) + 1].into()))
        .await
        .unwrap();
    assert_eq!(expect_close(&mut sub).await.0, CloseCode::Size);
    // A subscriber's single frame announced at 16 MiB: 1009 at its header, without
    // waiting for (and buffering) its payload.
    let mut s = raw_upgrade(&srv, "/topics/pv/ws?from=latest").await;
    let mut header = vec![0x82, 0x80 | 127];
    header.extend_from_slice(&(16u64 << 20).to_be_bytes());
    header.extend_from_slice(&[1, 2, 3, 4]);
    s.write_all(&header).await.unwrap();
    s.write_all(&[0u8; 1024]).await.unwrap();
    let mut ws =
        WebSocketStream::from_raw_socket(MaybeTlsStream::Plain(s), Role::Client, None).await;
    assert_eq!(expect_close(&mut ws).await.0, CloseCode::Size);
    let base = format!("http://{}", srv.local_addr());
    let r = reqwest::get(format!("{base}/topics/pv-pub")).await.unwrap();
    assert_eq!(r.status(), 404, "the refused publish created no topic");
    srv.shutdown().await.unwrap();
}

#[tokio::test]
async fn ws_messages_from_the_subscriber_lose_no_item_of_an_ask_subscription() {
    // An ASK filter is evaluated item by item off the async threads; a client message
    // (or a ping) arriving meanwhile must not cut a read short and lose what it had
    // written, nor break the compact stream's tables.
    let srv = start().await;
    let n = 300;
    ws_publish(&srv, "a", 0, n).await;
    let ask = "ASK%20%7B%20%3Fs%20%3Fp%20%3Fo%20%7D";
    for mode in ["splice", "compact"] {
        let url = ws_url(
            &srv,
            &format!("/topics/a/ws?follow=false&mode={mode}&ask={ask}"),
        );
        let (mut tx, mut rx) = connect(&url).await.split();
        let chatter = tokio::spawn(async move {
            for i in 0.. {
                if tx
                    .send(Message::Text(format!("hi {i}").into()))
                    .await
                    .is_err()
                {
                    return;
                }
                tokio::time::sleep(Duration::from_micros(500)).await;
            }
        });
        let mut dec = Decoder::new(Default::default());
        let mut objects = Vec::new();
        loop {
            let m = tokio::time::timeout(WAIT, rx.next())
                .await
                .expect("no message in time")
                .expect("connection ended")
                .expect("read error");
            match m {
                Message::Binary(b) => {
                    let got = decode(&mut dec, &b);
                    objects.push(got.statements[0].object.clone());
                }
                Message::Close(f) => {
                    assert_eq!(f.map(|f| f.code), Some(CloseCode::Normal), "{mode}");
                    break;
                }
                _ => {}
            }
        }
        chatter.abort();
        let want: Vec<Term> = (0..n)
            .map(|i| iri(&format!("http://ex.org/r{i}")))
            .collect();
        assert_eq!(objects.len(), n, "{mode}: every item, once");
        assert_eq!(objects, want, "{mode}: in order");
    }
}

#[tokio::test]
async fn websockets_count_as_open_connections_for_the_per_address_limit() {
    // An upgraded connection is the WebSocket's, no longer hyper's: it must still hold
    // its place in the per-address limit (and the open-connections gauge).
    let srv = start_with(|c| c.max_connections_per_ip = 3).await;
    ws_publish(&srv, "lim", 0, 1).await;
    let url = ws_url(&srv, "/topics/lim/ws?from=latest");
    let mut open = Vec::new();
    for _ in 0..3 {
        open.push(connect(&url).await);
    }
    assert_eq!(
        srv.state()
            .metrics
            .connections_open
            .load(std::sync::atomic::Ordering::Relaxed),
        3
    );
    // A fourth connection from this address is refused.
    assert!(
        connect_async(url.as_str()).await.is_err(),
        "a fourth connection was taken"
    );
    // Once one WebSocket closes, its place is free again.
    let mut first = open.remove(0);
    first.close(None).await.unwrap();
    drop(first);
    let mut again = None;
    for _ in 0..100 {
        if let Ok((ws, _)) = connect_async(url.as_str()).await {
            again = Some(ws);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        again.is_some(),
        "the closed WebSocket's place was not freed"
    );
    drop(open);
    drop(again);
    srv.shutdown().await.unwrap();
}

/// A masked client frame written by hand (mask key 0: the payload is sent as it is).
fn raw_frame(fin: bool, opcode: u8, payload: &[u8], announced: usize) -> Vec<u8> {
    assert!(announced < 126);
    let mut f = vec![if fin { 0x80 } else { 0 } | opcode, 0x80 | announced as u8];
    f.extend_from_slice(&[0, 0, 0, 0]);
    f.extend_from_slice(payload);
    f
}

#[tokio::test]
async fn ws_publish_stalled_inside_a_message_is_closed_and_keeps_earlier_items() {
    use tokio::io::AsyncWriteExt as _;
    use tokio_tungstenite::tungstenite::protocol::Role;
    let pause = Duration::from_millis(300);
    let srv = start_with(|c| c.body_read_timeout_ms = pause.as_millis() as u64).await;
    let base = srv.url();
    // Two stalls: the first fragment of a message (no FIN), and a frame whose payload
    // stops short of the length its header announced.
    let stalls = [
        (
            "fragment",
            raw_frame(false, 2, &[0x0a], 1),
            "before its final fragment",
        ),
        ("short", raw_frame(true, 2, &[0x0a; 10], 100), "90 byte(s)"),
    ];
    for (topic, stall, says) in stalls {
        let s = raw_upgrade(&srv, &format!("/topics/{topic}/ws/publish")).await;
        let mut ws =
            WebSocketStream::from_raw_socket(MaybeTlsStream::Plain(s), Role::Client, None).await;
        let mut p = Publisher::new();
        for i in 0..2 {
            ws.send(Message::Binary(p.frame(i).into())).await.unwrap();
            assert_eq!(next_json(&mut ws).await["offset"], i as u64);
        }
        let MaybeTlsStream::Plain(raw) = ws.get_mut() else {
            unreachable!("a plain socket")
        };
        raw.write_all(&stall).await.unwrap();
        // Bounded as a whole: the server's pings (every second) would renew
        // `next_msg`'s own wait for ever.
        let err = tokio::time::timeout(WAIT, next_json(&mut ws))
            .await
            .expect("the stalled message is answered");
        assert_eq!(err["status"], 408, "{err}");
        assert_eq!(err["frame"], 2, "{err}");
        assert_eq!(err["items_accepted"], 2, "{err}");
        let text = err["error"].as_str().unwrap();
        assert!(
            text.contains("body_read_timeout_ms") && text.contains(says),
            "{err}"
        );
        let (code, reason) = expect_close(&mut ws).await;
        assert_eq!(code, CloseCode::Policy);
        assert!(
            reason.starts_with("frame 2: the message stopped"),
            "{reason}"
        );
        // The acknowledged items stay, nothing of the stalled message was appended.
        assert_eq!(describe(&base, topic).await["next_offset"], 2);
    }
    // Quiet between messages for many times the pause: the socket stays open.
    let mut ws = connect(&ws_url(&srv, "/topics/quiet/ws/publish")).await;
    let mut p = Publisher::new();
    ws.send(Message::Binary(p.frame(0).into())).await.unwrap();
    assert_eq!(next_json(&mut ws).await["offset"], 0);
    tokio::time::sleep(pause * 5).await;
    ws.send(Message::Binary(p.frame(1).into())).await.unwrap();
    assert_eq!(next_json(&mut ws).await["offset"], 1);
    ws.close(None).await.unwrap();
    srv.shutdown().await.unwrap();
}

/// A stored item the subscription cannot write (a damaged frame, as a faulty mirror
/// upstream could plant): the items before it arrive, then a 1011 close whose reason
/// says what failed, not merely that something did.
#[tokio::test]
async fn ws_a_failed_delivery_closes_with_1011_and_names_the_cause() {
    let srv = start().await;
    let r = reqwest::Client::new()
        .post(format!("{}/topics/np/items", srv.url()))
        .header("content-type", "application/n-quads")
        .body("<http://ex.org/s> <http://ex.org/p> \"good\" <http://ex.org/g> .\n")
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    let t = srv.state().topics.get("np").unwrap();
    let damaged = jelly_server::item::Item {
        offset: 1,
        timestamp_ms: 1,
        // Not a whole frame: the subscription cannot decode it to write N-Quads.
        frame: Bytes::from_static(&[
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
    for follow in ["false", "true"] {
        let mut sub = connect(&ws_url(
            &srv,
            &format!("/topics/np/ws?format=nquads&from=earliest&follow={follow}"),
        ))
        .await;
        match next_msg(&mut sub).await {
            Message::Text(t) => assert!(t.contains("\"good\""), "{t}"),
            m => panic!("expected the good item first, got {m:?}"),
        }
        let (code, reason) = expect_close(&mut sub).await;
        assert_eq!(code, CloseCode::Error, "follow={follow}: {reason}");
        assert!(
            reason.starts_with("subscription failed: item 1: "),
            "follow={follow}: {reason}"
        );
    }
    srv.shutdown().await.unwrap();
}
