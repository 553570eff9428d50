//! The HTTP API on real loopback sockets, with a real HTTP client (reqwest) and curl.

use std::time::Duration;

use jelly::{Decoder, Event, Statement, StreamOptions, Term};
use jelly_server::{Server, ServerConfig};
use reqwest::StatusCode;
use serde_json::Value;

mod support;

use support::{DecodedFrame as Frame, get_text, iri, jelly_stream, split_delimited, triple};

const JELLY: &str = "application/x-jelly-rdf";
const NQ: &str = "application/n-quads";

async fn start() -> Server {
    start_with(|_| {}).await
}

async fn start_with(f: impl FnOnce(&mut ServerConfig)) -> Server {
    let mut c = ServerConfig {
        max_body_bytes: 256 << 10,
        sse_keepalive_secs: 1,
        ..ServerConfig::ephemeral()
    };
    f(&mut c);
    Server::start(c).await.unwrap()
}

/// The curl tests need curl (every CI image has it); without it they fail, not skip.
fn require_curl() {
    let ok = std::process::Command::new("curl")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "curl is needed by this test: install it (apt-get install curl)"
    );
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
}

fn sample_frames(n: usize, start: usize) -> Vec<Vec<Statement>> {
    (start..start + n)
        .map(|i| {
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
        })
        .collect()
}

/// Incrementally decodes a delimited Jelly response with one decoder (one stream).
struct JellyStream {
    resp: reqwest::Response,
    buf: Vec<u8>,
    dec: Decoder,
}

impl JellyStream {
    fn new(resp: reqwest::Response) -> Self {
        assert_eq!(resp.status(), StatusCode::OK);
        assert_eq!(resp.headers()["content-type"], JELLY);
        JellyStream {
            resp,
            buf: Vec::new(),
            dec: Decoder::default(),
        }
    }

    /// Splits one frame off the buffer, if complete.
    fn try_frame(&mut self) -> Option<Frame> {
        let (mut len, mut shift, mut i) = (0usize, 0, 0);
        loop {
            let b = *self.buf.get(i)?;
            len |= ((b & 0x7f) as usize) << shift;
            i += 1;
            if b < 0x80 {
                break;
            }
            shift += 7;
        }
        if self.buf.len() < i + len {
            return None;
        }
        let bytes: Vec<u8> = self.buf.drain(..i + len).skip(i).collect();
        Some(Frame::decode(&mut self.dec, &bytes))
    }

    /// The next frame, or `None` at the end of the body.
    async fn next(&mut self) -> Option<Frame> {
        loop {
            if let Some(f) = self.try_frame() {
                return Some(f);
            }
            let chunk = tokio::time::timeout(Duration::from_secs(10), self.resp.chunk())
                .await
                .expect("no frame within 10 s")
                .unwrap();
            match chunk {
                Some(c) => self.buf.extend_from_slice(&c),
                None => {
                    assert!(self.buf.is_empty(), "body ended inside a frame");
                    return None;
                }
            }
        }
    }

    async fn all(mut self) -> Vec<Frame> {
        let mut v = Vec::new();
        while let Some(f) = self.next().await {
            v.push(f);
        }
        v
    }
}

async fn publish(c: &reqwest::Client, url: &str, ct: &str, body: Vec<u8>) -> reqwest::Response {
    c.post(url)
        .header("content-type", ct)
        .body(body)
        .send()
        .await
        .unwrap()
}

async fn offsets(resp: reqwest::Response) -> Vec<u64> {
    let status = resp.status();
    let v: Value = resp.json().await.unwrap();
    assert_eq!(status, StatusCode::OK, "{v}");
    v["offsets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o.as_u64().unwrap())
        .collect()
}

async fn describe(c: &reqwest::Client, base: &str, topic: &str) -> Value {
    c.get(format!("{base}/topics/{topic}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test]
async fn publish_jelly_and_subscribe_jelly_with_metadata_and_mid_stream_join() {
    let srv = start().await;
    let c = client();
    let base = srv.url();
    let frames = sample_frames(3, 0);
    let body = jelly_stream(&frames, StreamOptions::small());
    let resp = c
        .post(format!("{base}/topics/sensors/items"))
        .header("content-type", JELLY)
        .header("x-jelly-source", "station-7")
        .header("x-jelly-header-unit", "celsius")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(offsets(resp).await, [0, 1, 2]);

    let resp = c
        .get(format!("{base}/topics/sensors/items?follow=false"))
        .header("accept", JELLY)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["x-jelly-start-offset"], "0");
    let got = JellyStream::new(resp).all().await;
    assert_eq!(got.len(), 3);
    for (i, f) in got.iter().enumerate() {
        assert_eq!(f.offset(), i as u64);
        assert_eq!(f.meta["source"], "station-7");
        assert_eq!(f.meta["h:unit"], "celsius");
        assert!(f.meta["ts"].parse::<u64>().unwrap() > 1_600_000_000_000);
        // Quads topic: statements come back in the default graph.
        let mut st = f.statements.clone();
        for s in &mut st {
            assert!(matches!(s.graph, None | Some(Term::DefaultGraph)));
            s.graph = None;
        }
        assert_eq!(st, frames[i]);
    }

    // A join at offset 2 is a fresh stream: it decodes on its own.
    let resp = c
        .get(format!("{base}/topics/sensors/items?from=2&follow=false"))
        .header("accept", JELLY)
        .send()
        .await
        .unwrap();
    let got = JellyStream::new(resp).all().await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].offset(), 2);
    assert_eq!(got[0].statements[0].object, iri("http://ex.org/r2"));

    // last:1 and latest.
    let resp = c
        .get(format!(
            "{base}/topics/sensors/items?from=last:1&follow=false&format=jelly"
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(JellyStream::new(resp).all().await[0].offset(), 2);
    let resp = c
        .get(format!(
            "{base}/topics/sensors/items?from=latest&follow=false"
        ))
        .send()
        .await
        .unwrap();
    assert!(JellyStream::new(resp).all().await.is_empty());
    srv.shutdown().await.unwrap();
}

#[tokio::test]
async fn publish_text_formats_and_subscribe_in_each_format() {
    let srv = start().await;
    let c = client();
    let base = srv.url();
    let nq = "<http://ex.org/a> <http://ex.org/p> \"one\" .\n<http://ex.org/a> <http://ex.org/p> \"two\"@en <http://ex.org/g1> .\n";
    let r = publish(&c, &format!("{base}/topics/ds/items"), NQ, nq.into()).await;
    assert_eq!(offsets(r).await, [0]);
    let trig = "@prefix ex: <http://ex.org/> .\nex:a ex:p ex:b .\nex:g1 { ex:a ex:p ex:c . }\nex:g2 { ex:a ex:p ex:d . ex:a ex:p ex:e . }\n";
    let r = publish(
        &c,
        &format!("{base}/topics/ds/items?split=graph"),
        "application/trig",
        trig.into(),
    )
    .await;
    assert_eq!(offsets(r).await, [1, 2, 3]);
    let d = describe(&c, &base, "ds").await;
    assert_eq!(d["next_offset"], 4);
    assert_eq!(d["statements_in"], 6);

    // N-Quads out.
    let text = get_text(&c, &format!("{base}/topics/ds/items?follow=false"), NQ).await;
    let st = jelly::nquads::parse_document(&text).unwrap();
    assert_eq!(st.len(), 6);
    assert_eq!(st[1].graph, Some(iri("http://ex.org/g1")));
    assert_eq!(st[5].object, iri("http://ex.org/e"));
    assert_eq!(st[5].graph, Some(iri("http://ex.org/g2")));

    // TriG out: parses back to the same statements.
    let resp = c
        .get(format!("{base}/topics/ds/items?follow=false"))
        .header("accept", "application/trig")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["content-type"], "application/trig");
    let text = resp.text().await.unwrap();
    let quads: Vec<_> = oxttl::TriGParser::new()
        .for_slice(text.as_bytes())
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(quads.len(), 6);

    // A quads topic cannot be served as N-Triples.
    let r = c
        .get(format!("{base}/topics/ds/items"))
        .header("accept", "application/n-triples")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_ACCEPTABLE);
    assert_eq!(r.headers()["vary"], "accept");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["offered"].as_array().map(Vec::len), Some(3), "{body}");
    // A type the server never offers: the answer lists only the types this topic can
    // be served in.
    let r = c
        .get(format!("{base}/topics/ds/items"))
        .header("accept", "image/png")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_ACCEPTABLE);
    assert_eq!(r.headers()["vary"], "accept");
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        body["offered"],
        serde_json::json!([
            "application/x-jelly-rdf",
            "application/n-quads",
            "application/trig"
        ]),
        "{body}"
    );
    assert!(
        !body["error"].as_str().unwrap().contains("turtle"),
        "{body}"
    );
    // ... but a type it can take, accepted further down, is chosen (RFC 9110 §12.5.1),
    // and a response that depends on `Accept` says so to caches.
    for (accept, want) in [
        ("application/n-triples, application/n-quads;q=0.9", NQ),
        ("text/turtle, */*;q=0.1", JELLY),
        ("application/x-jelly-rdf;q=0, */*;q=0.5", NQ),
    ] {
        let r = c
            .get(format!("{base}/topics/ds/items?follow=false"))
            .header("accept", accept)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{accept}");
        assert_eq!(r.headers()["content-type"], want, "{accept}");
        assert_eq!(r.headers()["vary"], "accept, accept-encoding");
    }

    // A triples topic: Turtle in, N-Triples and Turtle out.
    let r = c
        .put(format!("{base}/topics/tr"))
        .body(r#"{"physical":"triples"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let ttl = "@prefix ex: <http://ex.org/> .\nex:s ex:p 42, \"x\" .\n";
    let r = publish(
        &c,
        &format!("{base}/topics/tr/items"),
        "text/turtle",
        ttl.into(),
    )
    .await;
    assert_eq!(offsets(r).await, [0]);
    let nt = c
        .get(format!("{base}/topics/tr/items?follow=false"))
        .header("accept", "application/n-triples")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(jelly::nquads::parse_document(&nt).unwrap().len(), 2);
    let ttl_out = c
        .get(format!("{base}/topics/tr/items?follow=false"))
        .header("accept", "text/turtle")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let n = oxttl::TurtleParser::new()
        .for_slice(ttl_out.as_bytes())
        .count();
    assert_eq!(n, 2, "{ttl_out}");
    srv.shutdown().await.unwrap();
}

/// Topics whose statements RDF 1.2 Turtle and TriG cannot hold (quoted triples as
/// subjects, generalized statements) are not offered in them, whatever is stored yet:
/// before, such a subscription was cut at the first item it could not take, on every
/// resume, and the items before it were lost with it.
#[tokio::test]
async fn turtle_and_trig_are_refused_for_topics_they_cannot_carry() {
    let srv = start().await;
    let c = client();
    let base = srv.url();
    let star = "<< <http://ex.org/a> <http://ex.org/b> <http://ex.org/c> >> <http://ex.org/saidBy> <http://ex.org/bob> .\n";
    let generalized = "\"lit\" <http://ex.org/p> <http://ex.org/o> .\n";
    for (topic, options, body, reason) in [
        (
            "star",
            r#"{"physical":"triples","rdf_star":true}"#,
            star,
            "RDF-star",
        ),
        (
            "gen",
            r#"{"physical":"triples","generalized":true}"#,
            generalized,
            "generalized",
        ),
    ] {
        let r = c
            .put(format!("{base}/topics/{topic}"))
            .body(options)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::CREATED, "{topic}");
        let r = publish(
            &c,
            &format!("{base}/topics/{topic}/items"),
            "application/n-triples",
            body.into(),
        )
        .await;
        assert_eq!(offsets(r).await, [0], "{topic}");

        // The WebSocket path answers a refusal as HTTP, before the upgrade.
        for path in ["items?follow=false&", "poll?", "sse?follow=false&", "ws?"] {
            for format in ["turtle", "trig"] {
                let r = c
                    .get(format!("{base}/topics/{topic}/{path}format={format}"))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(
                    r.status(),
                    StatusCode::NOT_ACCEPTABLE,
                    "{topic} {path} {format}"
                );
                let body: Value = r.json().await.unwrap();
                let error = body["error"].as_str().unwrap_or_default();
                assert!(error.contains(reason), "{topic} {path} {format}: {body}");
                assert_eq!(
                    body["offered"],
                    serde_json::json!([
                        "application/x-jelly-rdf",
                        "application/n-quads",
                        "application/n-triples"
                    ]),
                    "{topic} {path} {format}"
                );
            }
        }
        // Negotiation passes over them to a format that fits.
        let r = c
            .get(format!("{base}/topics/{topic}/items?follow=false"))
            .header(
                "accept",
                "text/turtle, application/trig, application/n-triples;q=0.5",
            )
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{topic}");
        assert_eq!(
            r.headers()["content-type"],
            "application/n-triples",
            "{topic}"
        );
        let text = r.text().await.unwrap();
        assert!(text.contains(body.trim_end()), "{topic}: {text}");
    }
    srv.shutdown().await.unwrap();
}

#[tokio::test]
async fn live_follow_and_resume_after_disconnect_without_gaps_or_duplicates() {
    let srv = start().await;
    let c = client();
    let base = srv.url();
    let url = format!("{base}/topics/live/items");
    let first = jelly_stream(&sample_frames(2, 0), StreamOptions::small());
    assert_eq!(offsets(publish(&c, &url, JELLY, first).await).await, [0, 1]);

    // Subscribe, then publish: the new items arrive on the open stream.
    let resp = c.get(&url).header("accept", JELLY).send().await.unwrap();
    let mut s = JellyStream::new(resp);
    let mut seen = Vec::new();
    for _ in 0..2 {
        seen.push(s.next().await.unwrap().offset());
    }
    let d = describe(&c, &base, "live").await;
    assert_eq!(d["subscribers"].as_array().unwrap().len(), 1);
    let more = jelly_stream(&sample_frames(3, 2), StreamOptions::small());
    assert_eq!(
        offsets(publish(&c, &url, JELLY, more).await).await,
        [2, 3, 4]
    );
    let f = s.next().await.unwrap();
    assert_eq!(f.statements[0].object, iri("http://ex.org/r2"));
    seen.push(f.offset());
    // Disconnect in the middle of the live stream.
    drop(s);
    let more = jelly_stream(&sample_frames(2, 5), StreamOptions::small());
    assert_eq!(offsets(publish(&c, &url, JELLY, more).await).await, [5, 6]);

    // Resume from the last offset seen + 1.
    let last = *seen.last().unwrap();
    let resp = c
        .get(format!("{url}?from={}&follow=false", last + 1))
        .header("accept", JELLY)
        .send()
        .await
        .unwrap();
    for f in JellyStream::new(resp).all().await {
        assert_eq!(
            f.statements[0].object,
            iri(&format!("http://ex.org/r{}", f.offset()))
        );
        seen.push(f.offset());
    }
    assert_eq!(seen, (0..7).collect::<Vec<u64>>());

    // The dropped subscription is gone.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let d = describe(&c, &base, "live").await;
    assert_eq!(d["subscribers"].as_array().unwrap().len(), 0, "{d}");
    srv.shutdown().await.unwrap();
}

#[tokio::test]
async fn long_poll_pages_and_waits() {
    let srv = start().await;
    let c = client();
    let base = srv.url();
    let url = format!("{base}/topics/p/items");
    let body = jelly_stream(&sample_frames(5, 0), StreamOptions::small());
    assert_eq!(offsets(publish(&c, &url, JELLY, body).await).await.len(), 5);

    let mut from = 0u64;
    let mut pages = Vec::new();
    loop {
        let r = c
            .get(format!("{base}/topics/p/poll?from={from}&max_items=2"))
            .header("accept", NQ)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        let next: u64 = r.headers()["x-jelly-next-offset"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        let n = jelly::nquads::parse_document(&r.text().await.unwrap())
            .unwrap()
            .len();
        if next == from {
            assert_eq!(n, 0);
            break;
        }
        pages.push((from, next, n));
        from = next;
    }
    assert_eq!(pages, [(0, 2, 4), (2, 4, 4), (4, 5, 2)]);

    // Jelly page: one fresh stream per page, with offsets in the metadata.
    let r = c
        .get(format!("{base}/topics/p/poll?from=3&max_items=10"))
        .header("accept", JELLY)
        .send()
        .await
        .unwrap();
    let got = JellyStream::new(r).all().await;
    assert_eq!(got.iter().map(Frame::offset).collect::<Vec<_>>(), [3, 4]);

    // Waiting: nothing now, an item 300 ms later.
    let c2 = c.clone();
    let url2 = url.clone();
    let publisher = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let body = jelly_stream(&sample_frames(1, 5), StreamOptions::small());
        offsets(publish(&c2, &url2, JELLY, body).await).await
    });
    let t0 = std::time::Instant::now();
    let r = c
        .get(format!("{base}/topics/p/poll?from=5&wait_ms=10000"))
        .header("accept", NQ)
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-jelly-next-offset"], "6");
    assert!(t0.elapsed() < Duration::from_secs(5));
    assert!(!r.text().await.unwrap().is_empty());
    assert_eq!(publisher.await.unwrap(), [5]);

    // Waiting with nothing arriving: an empty page after wait_ms.
    let t0 = std::time::Instant::now();
    let r = c
        .get(format!("{base}/topics/p/poll?from=6&wait_ms=200"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["x-jelly-next-offset"], "6");
    assert!(t0.elapsed() >= Duration::from_millis(190));
    assert!(r.bytes().await.unwrap().is_empty());

    // A HEAD gets the page's headers, and delivers (and counts) nothing.
    let before = describe(&c, &base, "p").await;
    let r = c
        .head(format!("{base}/topics/p/poll?from=0&max_items=5"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["x-jelly-items"], "5");
    assert!(r.bytes().await.unwrap().is_empty());
    let after = describe(&c, &base, "p").await;
    assert_eq!(after["items_out"], before["items_out"], "{after}");
    assert_eq!(after["bytes_out"], before["bytes_out"], "{after}");
    srv.shutdown().await.unwrap();
}

/// Parses SSE events: (id, data lines).
fn sse_events(text: &str) -> Vec<(u64, Vec<String>)> {
    let mut out = Vec::new();
    for block in text.split("\n\n") {
        let mut id = None;
        let mut data = Vec::new();
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("id: ") {
                id = Some(v.parse().unwrap());
            } else if let Some(v) = line.strip_prefix("data: ") {
                data.push(v.to_string());
            }
        }
        if let Some(id) = id {
            out.push((id, data));
        }
    }
    out
}

#[tokio::test]
async fn sse_events_and_last_event_id_resume() {
    let srv = start().await;
    let c = client();
    let base = srv.url();
    let body = jelly_stream(&sample_frames(4, 0), StreamOptions::small());
    let r = publish(&c, &format!("{base}/topics/e/items"), JELLY, body).await;
    assert_eq!(offsets(r).await, [0, 1, 2, 3]);

    let r = c
        .get(format!("{base}/topics/e/sse?follow=false"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    let ev = sse_events(&r.text().await.unwrap());
    assert_eq!(ev.iter().map(|e| e.0).collect::<Vec<_>>(), [0, 1, 2, 3]);
    let st = jelly::nquads::parse_document(&(ev[2].1.join("\n") + "\n")).unwrap();
    assert_eq!(st[0].object, iri("http://ex.org/r2"));

    // A browser reconnecting sends the last id it saw.
    let r = c
        .get(format!("{base}/topics/e/sse?follow=false"))
        .header("last-event-id", "1")
        .send()
        .await
        .unwrap();
    let ev = sse_events(&r.text().await.unwrap());
    assert_eq!(ev.iter().map(|e| e.0).collect::<Vec<_>>(), [2, 3]);

    // An id no offset can follow is past the end, not a wrap to offset 0; a sign is
    // refused as in `from`.
    let r = c
        .get(format!("{base}/topics/e/sse?follow=false"))
        .header("last-event-id", u64::MAX.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 416);
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["next_offset"], 4);
    assert!(v["error"].as_str().unwrap().contains("past the end"), "{v}");
    let r = c
        .get(format!("{base}/topics/e/sse?follow=false"))
        .header("last-event-id", "+1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let r = c
        .get(format!("{base}/topics/e/sse?follow=false"))
        .header(
            "last-event-id",
            reqwest::header::HeaderValue::from_bytes(b"1\xff").unwrap(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400, "not ignored (a replay from 0)");

    // Live SSE with base64 Jelly frames, decoded in order with one decoder.
    let mut r = c
        .get(format!("{base}/topics/e/sse?from=3&format=jelly"))
        .send()
        .await
        .unwrap();
    let c2 = c.clone();
    let url = format!("{base}/topics/e/items");
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let body = jelly_stream(&sample_frames(1, 4), StreamOptions::small());
        publish(&c2, &url, JELLY, body).await;
    });
    let mut text = String::new();
    while sse_events(&text).len() < 2 {
        let chunk = tokio::time::timeout(Duration::from_secs(10), r.chunk())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        text.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    let ev = sse_events(&text);
    let mut dec = Decoder::default();
    for (i, (id, data)) in ev.iter().enumerate() {
        assert_eq!(*id, 3 + i as u64);
        let bytes = base64_decode(&data[0]);
        let mut cur = dec.frame(&bytes);
        let meta = cur.metadata().unwrap();
        assert_eq!(meta[0], ("offset", id.to_string().as_bytes()));
        let mut objects = Vec::new();
        while let Some(e) = cur.next_event().unwrap() {
            if let Event::Statement(s) = e {
                objects.push(s.object.to_owned());
            }
        }
        assert_eq!(objects[0], iri(&format!("http://ex.org/r{id}")));
    }
    drop(r);
    srv.shutdown().await.unwrap();
}

fn base64_decode(s: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("bad base64"),
    };
    let mut out = Vec::new();
    for chunk in s.trim_end_matches('=').as_bytes().chunks(4) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= u32::from(val(c)) << (18 - 6 * i);
        }
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..chunk.len() - 1]);
    }
    out
}

#[tokio::test]
async fn bad_input_is_refused_and_appends_nothing() {
    let srv = start().await;
    let c = client();
    let base = srv.url();
    let url = format!("{base}/topics/strict/items");
    let r = c
        .put(format!("{base}/topics/strict"))
        .body(r#"{"physical":"triples","retention_items":3}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let good = jelly_stream(&sample_frames(1, 0), StreamOptions::small());
    assert_eq!(
        offsets(publish(&c, &url, JELLY, good.clone()).await).await,
        [0]
    );

    let check = |status: StatusCode, r: reqwest::Response| async move {
        assert_eq!(r.status(), status);
        let v: Value = r.json().await.unwrap();
        assert!(v["error"].as_str().is_some_and(|e| !e.is_empty()), "{v}");
        v
    };
    // A known path with a method it does not take: a JSON 405 with `Allow`.
    let r = c
        .post(format!("{base}/topics/strict"))
        .send()
        .await
        .unwrap();
    let allow = r.headers()["allow"].to_str().unwrap().to_string();
    assert!(
        ["GET", "PUT", "PATCH", "DELETE"]
            .iter()
            .all(|m| allow.contains(m)),
        "{allow}"
    );
    let v = check(StatusCode::METHOD_NOT_ALLOWED, r).await;
    assert!(v["error"].as_str().unwrap().contains("not allowed"), "{v}");
    // A metadata header given twice: no value is picked silently.
    for (h, v1, v2) in [
        ("x-jelly-source", "a", "b"),
        ("x-jelly-header-dup", "1", "2"),
    ] {
        let r = c
            .post(&url)
            .header("content-type", JELLY)
            .header(h, v1)
            .header(h, v2)
            .body(good.clone())
            .send()
            .await
            .unwrap();
        let v = check(StatusCode::BAD_REQUEST, r).await;
        assert!(
            v["error"].as_str().unwrap().contains("more than once"),
            "{v}"
        );
    }
    // `split=graph` on a Jelly body would do nothing (a Jelly body is one item per
    // frame): refused, not ignored; and an unknown split is named.
    for (query, needle) in [
        ("split=graph", "one item per frame"),
        ("split=rows", "`rows` is not a valid value"),
        ("base=notaniri", "`notaniri` is not a valid value"),
    ] {
        let r = c
            .post(format!("{url}?{query}"))
            .header("content-type", JELLY)
            .body(good.clone())
            .send()
            .await
            .unwrap();
        let v = check(StatusCode::BAD_REQUEST, r).await;
        assert!(v["error"].as_str().unwrap().contains(needle), "{v}");
        if query != "split=graph" {
            assert_eq!(v["parameter"], query.split('=').next().unwrap(), "{v}");
        }
    }
    // A header with no name after the prefix, and metadata too large to store with
    // an item: refused before anything is created (the topic of `ghost` stays unknown).
    let ghost = format!("{base}/topics/ghost/items");
    let r = c
        .post(&ghost)
        .header("content-type", JELLY)
        .header("x-jelly-header-", "x")
        .body(good.clone())
        .send()
        .await
        .unwrap();
    let v = check(StatusCode::BAD_REQUEST, r).await;
    assert!(v["error"].as_str().unwrap().contains("no name"), "{v}");
    let big = "v".repeat(9000);
    let r = c
        .post(&ghost)
        .header("content-type", JELLY)
        .header("x-jelly-header-a", &big)
        .header("x-jelly-header-b", &big)
        .body(good.clone())
        .send()
        .await
        .unwrap();
    let v = check(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE, r).await;
    assert!(v["error"].as_str().unwrap().contains("18002 bytes"), "{v}");
    let r = c.get(format!("{base}/topics/ghost")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    // Two good frames, then a truncated one: nothing of the request is appended.
    let mut bad = jelly_stream(&sample_frames(2, 1), StreamOptions::small());
    bad.extend_from_slice(&[0x20, 0x0a, 0x05]);
    let v = check(StatusCode::BAD_REQUEST, publish(&c, &url, JELLY, bad).await).await;
    assert!(
        v["error"].as_str().unwrap().contains("malformed Jelly"),
        "{v}"
    );
    check(
        StatusCode::BAD_REQUEST,
        publish(&c, &url, JELLY, b"\x05garbage".to_vec()).await,
    )
    .await;
    check(
        StatusCode::BAD_REQUEST,
        publish(&c, &url, NQ, b"<http://s> <http://p> .\n".to_vec()).await,
    )
    .await;
    check(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        publish(&c, &url, "application/json", b"{}".to_vec()).await,
    )
    .await;
    // A named graph in a triples topic.
    check(
        StatusCode::UNPROCESSABLE_ENTITY,
        publish(
            &c,
            &url,
            NQ,
            b"<http://s> <http://p> <http://o> .\n<http://s> <http://p> <http://o> <http://g> .\n"
                .to_vec(),
        )
        .await,
    )
    .await;
    // Over the body limit (256 KiB in these tests).
    let mut big = String::new();
    while big.len() < 300 << 10 {
        big.push_str("<http://ex.org/s> <http://ex.org/p> \"padding padding padding\" .\n");
    }
    let v = check(
        StatusCode::PAYLOAD_TOO_LARGE,
        publish(&c, &url, NQ, big.into_bytes()).await,
    )
    .await;
    assert_eq!(v["max_body_bytes"], 256 << 10);
    assert_eq!(describe(&c, &base, "strict").await["next_offset"], 1);

    // Unknown topics, bad names, bad offsets.
    check(
        StatusCode::NOT_FOUND,
        c.get(format!("{base}/topics/nope/items"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    check(
        StatusCode::NOT_FOUND,
        c.get(format!("{base}/topics/nope")).send().await.unwrap(),
    )
    .await;
    check(
        StatusCode::NOT_FOUND,
        c.get(format!("{base}/topics/nope/poll"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    check(
        StatusCode::BAD_REQUEST,
        publish(&c, &format!("{base}/topics/.bad/items"), NQ, b"x".to_vec()).await,
    )
    .await;
    // Reads of a name no topic can have: 400 as for writes, not 404.
    for path in [".bad", ".bad/items", ".bad/poll", ".bad/sse"] {
        check(
            StatusCode::BAD_REQUEST,
            c.get(format!("{base}/topics/{path}")).send().await.unwrap(),
        )
        .await;
    }
    check(
        StatusCode::BAD_REQUEST,
        c.get(format!("{url}?from=soon")).send().await.unwrap(),
    )
    .await;
    check(
        StatusCode::RANGE_NOT_SATISFIABLE,
        c.get(format!("{url}?from=99")).send().await.unwrap(),
    )
    .await;
    check(
        StatusCode::NOT_ACCEPTABLE,
        c.get(&url)
            .header("accept", "image/png")
            .send()
            .await
            .unwrap(),
    )
    .await;
    // The publish that failed did not create its topic.
    check(
        StatusCode::NOT_FOUND,
        c.get(format!("{base}/topics/never")).send().await.unwrap(),
    )
    .await;
    check(
        StatusCode::BAD_REQUEST,
        publish(
            &c,
            &format!("{base}/topics/never/items"),
            NQ,
            b"<a> .".to_vec(),
        )
        .await,
    )
    .await;
    check(
        StatusCode::NOT_FOUND,
        c.get(format!("{base}/topics/never")).send().await.unwrap(),
    )
    .await;

    // Retention: 3 items kept; offset 0 is gone after 4 more appends.
    let more = jelly_stream(&sample_frames(4, 1), StreamOptions::small());
    assert_eq!(
        offsets(publish(&c, &url, JELLY, more).await).await,
        [1, 2, 3, 4]
    );
    let v = check(
        StatusCode::GONE,
        c.get(format!("{url}?from=0")).send().await.unwrap(),
    )
    .await;
    assert_eq!(v["first_offset"], 2);
    let v = check(
        StatusCode::GONE,
        c.get(format!("{base}/topics/strict/poll?from=1"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(v["first_offset"], 2);
    srv.shutdown().await.unwrap();
}

#[tokio::test]
async fn topics_health_and_metrics() {
    let srv = start().await;
    let c = client();
    let base = srv.url();
    let put = |body: &'static str| c.put(format!("{base}/topics/t1")).body(body).send();
    let r = put(r#"{"physical":"quads","logical":"named-graphs","retention_items":50}"#)
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["options"]["logical"], "named-graphs");
    assert_eq!(v["options"]["retention_items"], 50);
    let r = put(r#"{"physical":"quads","logical":"named-graphs","retention_items":50}"#)
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let r = put(r#"{"physical":"triples"}"#).await.unwrap();
    assert_eq!(r.status(), StatusCode::CONFLICT);
    let r = put(r#"{"physical":"quads","retention_items":50}"#)
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CONFLICT);
    let r = c
        .put(format!("{base}/topics/t2"))
        .body(r#"{"physical":"triples","logical":"datasets"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    // The logical type as an RDF-STaX number, in JSON as a number or a string.
    for (topic, body) in [
        ("t3", r#"{"physical":"triples","logical":3}"#),
        ("t4", r#"{"physical":"triples","logical":"3"}"#),
    ] {
        let r = c
            .put(format!("{base}/topics/{topic}"))
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::CREATED, "{body}");
    }
    let r = c
        .put(format!("{base}/topics/t5"))
        .body(r#"{"physical":"triples","logical":4}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        StatusCode::BAD_REQUEST,
        "datasets in a triples topic"
    );
    let r = c
        .put(format!("{base}/topics/t2"))
        .body(r#"{"colour":"blue"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);

    // Auto-created on first publish.
    let body = jelly_stream(&sample_frames(2, 0), StreamOptions::small());
    offsets(publish(&c, &format!("{base}/topics/t0/items"), JELLY, body).await).await;
    let v: Value = c
        .get(format!("{base}/topics"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let names: Vec<_> = v["topics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["t0", "t1", "t3", "t4"]);
    let d = describe(&c, &base, "t0").await;
    assert_eq!(d["first_offset"], 0);
    assert_eq!(d["next_offset"], 2);
    assert_eq!(d["items"], 2);
    assert!(d["bytes_in"].as_u64().unwrap() > 0);
    assert_eq!(d["options"]["physical"], "quads");

    // A subscriber that read one item: lag 1 in the metrics.
    let mut s = JellyStream::new(
        c.get(format!("{base}/topics/t0/items?from=1"))
            .send()
            .await
            .unwrap(),
    );
    assert_eq!(s.next().await.unwrap().offset(), 1);
    let body = jelly_stream(&sample_frames(1, 2), StreamOptions::small());
    offsets(publish(&c, &format!("{base}/topics/t0/items"), JELLY, body).await).await;
    let h: Value = c
        .get(format!("{base}/health"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(h["status"], "ok");
    assert_eq!(s.next().await.unwrap().offset(), 2);
    let m = support::metrics_text(&c, &base).await;
    for want in [
        "jelly_items_in_total 3",
        "jelly_topic_items_in_total{topic=\"t0\"} 3",
        "jelly_topic_subscribers{topic=\"t0\"} 1",
        "jelly_topic_next_offset{topic=\"t1\"} 0",
        "jelly_subscriber_lag_items{topic=\"t0\",subscriber=\"1\",kind=\"stream\",format=\"jelly\"} 0",
    ] {
        assert!(m.contains(want), "missing `{want}` in\n{m}");
    }
    assert!(m.contains("jelly_items_out_total 2"), "{m}");
    let r = c.get(format!("{base}/nothing")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);

    // Shutdown ends the live subscription instead of waiting for it.
    tokio::time::timeout(Duration::from_secs(5), srv.shutdown())
        .await
        .expect("shutdown waits for live subscriptions")
        .unwrap();
    assert!(s.next().await.is_none());
}

#[tokio::test]
async fn curl_follows_a_live_stream() {
    require_curl();
    let srv = start().await;
    let c = client();
    let base = srv.url();
    let url = format!("{base}/topics/c/items");
    let body = jelly_stream(&sample_frames(1, 0), StreamOptions::small());
    offsets(publish(&c, &url, JELLY, body).await).await;
    // curl -N reads the live stream for 1.5 s; an item published meanwhile shows up.
    let curl = tokio::process::Command::new("curl")
        .args([
            "-sN",
            "--max-time",
            "1.5",
            "-H",
            "Accept: application/n-quads",
            &url,
        ])
        .output();
    let c2 = c.clone();
    let url2 = url.clone();
    let publisher = async move {
        tokio::time::sleep(Duration::from_millis(400)).await;
        let body = jelly_stream(&sample_frames(1, 1), StreamOptions::small());
        offsets(publish(&c2, &url2, JELLY, body).await).await
    };
    let (out, offs) = tokio::join!(curl, publisher);
    assert_eq!(offs, [1]);
    let text = String::from_utf8(out.unwrap().stdout).unwrap();
    let st = jelly::nquads::parse_document(&text).unwrap();
    assert_eq!(st.len(), 4, "{text}");
    assert_eq!(st[2].object, iri("http://ex.org/r1"));

    // curl publishes N-Triples from a file body.
    let dir = std::env::temp_dir().join(format!("jelly-http-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("x.nt");
    std::fs::write(&f, "<http://ex.org/x> <http://ex.org/p> \"curl\" .\n").unwrap();
    let out = tokio::process::Command::new("curl")
        .args([
            "-s",
            "-H",
            "Content-Type: application/n-triples",
            "--data-binary",
            &format!("@{}", f.display()),
            &url,
        ])
        .output()
        .await
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["offsets"][0], 2);
    let _ = std::fs::remove_dir_all(&dir);
    srv.shutdown().await.unwrap();
}

#[tokio::test]
async fn file_log_topics_survive_a_restart() {
    let dir = std::env::temp_dir().join(format!("jelly-http-file-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let cfg = |d: &std::path::Path| {
        let d = d.to_path_buf();
        move |c: &mut ServerConfig| {
            c.log = jelly_server::config::LogKind::File;
            c.data = d;
            c.durability = "none".into();
        }
    };
    let srv = start_with(cfg(&dir)).await;
    let c = client();
    let base = srv.url();
    let r = c
        .put(format!("{base}/topics/kept"))
        .body(r#"{"physical":"triples"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let body = jelly_stream(&sample_frames(3, 0), StreamOptions::small());
    let url = format!("{base}/topics/kept/items");
    assert_eq!(
        offsets(publish(&c, &url, JELLY, body).await).await,
        [0, 1, 2]
    );
    let created = describe(&c, &base, "kept").await["created_ms"].clone();
    srv.shutdown().await.unwrap();
    // Long enough for a reopened topic's open time to differ from its creation time.
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;

    let srv = start_with(cfg(&dir)).await;
    let base = srv.url();
    let d = describe(&c, &base, "kept").await;
    assert_eq!(d["next_offset"], 3, "{d}");
    assert_eq!(
        d["created_ms"], created,
        "the creation time survives the restart"
    );
    assert_eq!(d["options"]["physical"], "triples");
    let url = format!("{base}/topics/kept/items");
    let body = jelly_stream(&sample_frames(1, 3), StreamOptions::small());
    assert_eq!(offsets(publish(&c, &url, JELLY, body).await).await, [3]);
    let resp = c
        .get(format!("{url}?follow=false"))
        .header("accept", JELLY)
        .send()
        .await
        .unwrap();
    let got = JellyStream::new(resp).all().await;
    assert_eq!(
        got.iter().map(Frame::offset).collect::<Vec<_>>(),
        [0, 1, 2, 3]
    );
    for f in &got {
        assert_eq!(
            f.statements[0].object,
            iri(&format!("http://ex.org/r{}", f.offset()))
        );
    }
    srv.shutdown().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A request body fed by the test, chunk by chunk, while the request runs.
fn channel_body() -> (tokio::sync::mpsc::Sender<Vec<u8>>, reqwest::Body) {
    let (tx, rx) = tokio::sync::mpsc::channel::<Vec<u8>>(4);
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, std::io::Error>(b), rx))
    });
    (tx, reqwest::Body::wrap_stream(stream))
}

/// Waits until the server's publish memory holds `bytes` (a condition, not a time:
/// the deadline only turns a hang into a failure).
async fn publish_memory_reaches(srv: &Server, bytes: usize) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while srv.state().publish_memory.in_use() != bytes {
        assert!(
            tokio::time::Instant::now() < deadline,
            "publish memory holds {}, not {bytes}",
            srv.state().publish_memory.in_use()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Atomic publishes in progress share one bound, server-wide: before it, each request
/// was bounded alone, and eight hostile ones at once held 1.9 GB.
#[tokio::test]
async fn atomic_publishes_in_progress_share_one_memory_bound() {
    const BODY: usize = 64 << 10;
    let pool = jelly_server::publish_memory::one_publish_at_most(BODY);
    let srv = start_with(|c| {
        c.max_body_bytes = BODY;
        c.max_publish_memory_bytes = Some(pool);
    })
    .await;
    let c = client();
    let base = srv.url();
    let line = |i: usize| {
        format!(
            "<http://ex.org/s{i}> <http://ex.org/p> \"{}\" .\n",
            "v".repeat(90)
        )
    };
    // 600 lines of 128 bytes: 76,800 bytes, over one body's limit, so in two parts.
    let part: String = (0..400).map(line).collect();
    assert!(part.len() < BODY && part.len() > BODY / 2);

    // Bodies that stall half-sent hold what they sent.
    let mut stalled = Vec::new();
    let per = part.len();
    let fit = pool / per;
    assert!(fit > 3, "{fit}");
    for i in 0..fit {
        let (tx, body) = channel_body();
        tx.send(part.clone().into_bytes()).await.unwrap();
        let req = c
            .post(format!("{base}/topics/mem/items"))
            .header("content-type", "application/n-triples")
            .body(body)
            .send();
        stalled.push((tx, tokio::spawn(req)));
        publish_memory_reaches(&srv, (i + 1) * per).await;
    }
    // One more does not fit: 503, to be retried, and nothing appended.
    let r = publish(
        &c,
        &format!("{base}/topics/mem/items"),
        "application/n-triples",
        part.clone().into_bytes(),
    )
    .await;
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(r.headers()["retry-after"], "1");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["max_publish_memory_bytes"], pool, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("max_publish_memory_bytes"),
        "{body}"
    );
    publish_memory_reaches(&srv, fit * per).await;
    assert!(
        srv.state().topics.get("mem").is_none(),
        "a refused publish creates nothing"
    );
    // Operators see the pool, and the refusal, on /metrics.
    let m = support::metrics_text(&c, &base).await;
    for line in [
        format!("jelly_publish_memory_bytes {}", fit * per),
        format!("jelly_publish_memory_max_bytes {pool}"),
        "jelly_publish_memory_refused_total 1".to_string(),
    ] {
        assert!(m.lines().any(|l| l == line), "{line} in\n{m}");
    }

    // Clients that give up give back what their bodies held, and append nothing.
    let keep = 3;
    for (_, req) in stalled.drain(keep..) {
        req.abort();
    }
    publish_memory_reaches(&srv, keep * per).await;
    assert!(srv.state().topics.get("mem").is_none());
    // The others complete their bodies: with the room now free, each is appended.
    for (tx, req) in stalled {
        tx.send(line(1000).into_bytes()).await.unwrap();
        drop(tx);
        let r = req.await.unwrap().unwrap();
        assert_eq!(r.status(), StatusCode::OK);
    }
    publish_memory_reaches(&srv, 0).await;
    let r = publish(
        &c,
        &format!("{base}/topics/mem/items"),
        "application/n-triples",
        part.into_bytes(),
    )
    .await;
    assert_eq!(offsets(r).await, [keep as u64]);
    publish_memory_reaches(&srv, 0).await;
    srv.shutdown().await.unwrap();
}

/// Large atomic publishes that each make far more items than their body take turns:
/// all at once, they shared the pool out and every one was refused with 503 ("retry"),
/// though each alone is refused for good with 413 (its items are over the limit).
#[tokio::test]
async fn concurrent_large_publishes_take_turns_and_get_their_own_answers() {
    const BODY: usize = 256 << 10;
    let pool = jelly_server::publish_memory::one_publish_at_most(BODY);
    assert_eq!(jelly_server::publish_memory::large_ingests(pool, BODY), 1);
    let srv = start_with(|c| {
        c.max_body_bytes = BODY;
        c.max_publish_memory_bytes = Some(pool);
    })
    .await;
    // 60 IRIs of about 1.2 KB written once, then 40 frames of 20 triples using them:
    // each item holds the 60 it uses, about 72 KB, so the items pass 4 × BODY (1 MiB).
    let iris: Vec<String> = (0..60)
        .map(|i| format!("http://ex.org/{}{i:02}", "x".repeat(1200)))
        .collect();
    let mut body = Vec::new();
    let mut w = jelly::JellyWriterBuilder::new(StreamOptions::big())
        .frame_policy(jelly::FramePolicy::Manual)
        .build(&mut body)
        .unwrap();
    for _ in 0..40 {
        for t in 0..20 {
            w.add(jelly::StatementRef::triple(
                jelly::TermRef::Iri(&iris[3 * t]),
                jelly::TermRef::Iri(&iris[3 * t + 1]),
                jelly::TermRef::Iri(&iris[3 * t + 2]),
            ))
            .unwrap();
        }
        w.flush_frame().unwrap();
    }
    w.finish().unwrap();
    // Over the size decoded on the request's task: these take the large path.
    assert!(
        body.len() > 64 << 10 && body.len() < 90 << 10,
        "{}",
        body.len()
    );
    let c = client();
    let url = format!("{}/topics/big/items", srv.url());
    let answers = futures_util::future::join_all((0..4).map(|_| {
        let (c, url, body) = (c.clone(), url.clone(), body.clone());
        async move {
            let r = publish(&c, &url, JELLY, body).await;
            let status = r.status();
            (status, r.text().await.unwrap())
        }
    }))
    .await;
    for (status, text) in answers {
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{text}");
        assert!(text.contains("publish it in parts"), "{text}");
    }
    publish_memory_reaches(&srv, 0).await;
    assert!(srv.state().topics.get("big").is_none());
    srv.shutdown().await.unwrap();
}

#[tokio::test]
async fn streaming_publish_appends_items_while_the_body_is_still_open() {
    let srv = start().await;
    let c = client();
    let base = srv.url();
    let frames = split_delimited(&jelly_stream(&sample_frames(4, 0), StreamOptions::small()));
    assert_eq!(frames.len(), 4);
    let (tx, body) = channel_body();
    let req = c
        .post(format!("{base}/topics/slow/items?stream=true"))
        .header("content-type", JELLY)
        .header("x-jelly-source", "streamer")
        .body(body)
        .send();
    let req = tokio::spawn(req);

    // Frame by frame: each item is visible to a subscriber before the body ends.
    let mut sub = None;
    for (i, f) in frames.iter().enumerate() {
        tx.send(f.clone()).await.unwrap();
        if sub.is_none() {
            // The topic is created by the first append: wait for it.
            let t0 = std::time::Instant::now();
            loop {
                let r = c
                    .get(format!("{base}/topics/slow/items"))
                    .header("accept", JELLY)
                    .send()
                    .await
                    .unwrap();
                if r.status() == StatusCode::OK {
                    sub = Some(JellyStream::new(r));
                    break;
                }
                assert!(
                    t0.elapsed() < Duration::from_secs(10),
                    "topic never created"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        let got = sub.as_mut().unwrap().next().await.unwrap();
        assert_eq!(got.offset(), i as u64);
        assert_eq!(got.meta["source"], "streamer");
        assert_eq!(
            got.statements[0].object,
            iri(&format!("http://ex.org/r{i}"))
        );
        assert!(!req.is_finished(), "the request ended before its body");
    }
    drop(tx);
    let resp = req.await.unwrap().unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["topic"], "slow");
    assert_eq!(v["first_offset"], 0);
    assert_eq!(v["last_offset"], 3);
    assert_eq!(v["items"], 4);
    srv.shutdown().await.unwrap();
}

#[tokio::test]
async fn streaming_publish_bad_frame_mid_stream_keeps_earlier_items() {
    let srv = start().await;
    let c = client();
    let base = srv.url();
    let mut body = jelly_stream(&sample_frames(3, 0), StreamOptions::small());
    let good_len = body.len() as u64;
    // Frame 3: 3 bytes whose row claims 0x7f bytes.
    body.extend_from_slice(&[3, 0x0a, 0x7f, 0x01]);
    body.extend_from_slice(&jelly_stream(&sample_frames(1, 9), StreamOptions::small()));

    // The atomic POST refuses the whole body and appends nothing.
    let r = publish(&c, &format!("{base}/topics/mid/items"), JELLY, body.clone()).await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    // Frame 3's message starts after its one-byte length prefix; both kinds of POST
    // (and the CLI) name that byte.
    let byte = format!("(byte {})", good_len + 1);
    let atomic: Value = r.json().await.unwrap();
    let ae = atomic["error"].as_str().unwrap();
    assert!(ae.contains("frame 3") && ae.contains(&byte), "{atomic}");
    let at = format!("frame 3 {byte}");
    let r = c.get(format!("{base}/topics/mid")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);

    // The streaming POST keeps the three items before the bad frame.
    let (tx, req_body) = channel_body();
    let req = tokio::spawn(
        c.post(format!("{base}/topics/mid/items?stream=true"))
            .header("content-type", JELLY)
            .body(req_body)
            .send(),
    );
    for chunk in body.chunks(7) {
        if tx.send(chunk.to_vec()).await.is_err() {
            break; // the server answered and stopped reading
        }
    }
    drop(tx);
    let r = req.await.unwrap().unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["frame"], 3, "{v}");
    assert_eq!(v["byte_offset"], good_len + 1);
    assert_eq!(v["items_accepted"], 3);
    assert_eq!(v["first_offset"], 0);
    assert_eq!(v["last_offset"], 2);
    let e = v["error"].as_str().unwrap();
    // The location is named once, before the decoder's reason.
    assert!(e.starts_with(&format!("{at}: malformed Jelly: ")), "{v}");
    assert_eq!(e.matches("frame 3").count(), 1, "{v}");
    let d = describe(&c, &base, "mid").await;
    assert_eq!(d["next_offset"], 3);

    // A frame over max_item_bytes is refused from its length prefix alone.
    let limit = 16 << 20;
    let mut big = jelly_stream(&sample_frames(1, 0), StreamOptions::small());
    let first_len = big.len() as u64;
    let mut prefix = Vec::new();
    jelly_proto::wire::put_varint(&mut prefix, limit as u64 + 1);
    big.extend_from_slice(&prefix);
    big.extend_from_slice(&[0x0a; 100]);
    let r = c
        .post(format!("{base}/topics/mid/items?stream=true"))
        .header("content-type", JELLY)
        .body(big)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        (v["frame"].as_u64(), v["byte_offset"].as_u64()),
        (Some(1), Some(first_len + prefix.len() as u64))
    );
    assert_eq!(v["items_accepted"], 1);
    assert_eq!(v["last_offset"], 3);

    // A body that ends inside a frame.
    let whole = jelly_stream(&sample_frames(2, 0), StreamOptions::small());
    let second = jelly_stream(&sample_frames(1, 0), StreamOptions::small()).len();
    let mut cut = whole.clone();
    cut.truncate(cut.len() - 3);
    let r = c
        .post(format!("{base}/topics/mid/items?stream=true"))
        .header("content-type", JELLY)
        .body(cut)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["frame"], 1);
    assert_eq!(v["items_accepted"], 1);
    let e = v["error"].as_str().unwrap();
    assert!(e.contains("ended inside the frame"), "{v}");
    // Frame 1 starts where frame 0 ends; its message after its length prefix.
    let len1 = jelly_proto::wire::Reader::new(&whole[second..])
        .varint()
        .unwrap();
    let message1 = second + jelly_proto::wire::varint_len(len1);
    assert_eq!(v["byte_offset"], message1 as u64, "{v}");
    assert!(
        e.starts_with(&format!("frame 1 (byte {message1}): ")),
        "{v}"
    );
    assert!(
        e.contains(&format!("announced {len1} bytes, {} were sent", len1 - 3)),
        "{v}"
    );

    // A stream of no statements (an options row only) is refused as a whole, with the
    // same fields as any streaming refusal, naming the end of the body.
    let options_only = jelly_stream(&[], StreamOptions::small());
    let r = c
        .post(format!("{base}/topics/mid/items?stream=true"))
        .header("content-type", JELLY)
        .body(options_only.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let v: Value = r.json().await.unwrap();
    assert!(
        v["error"].as_str().unwrap().contains("no statements"),
        "{v}"
    );
    assert_eq!(v["byte_offset"], options_only.len() as u64, "{v}");
    assert_eq!(v["items_accepted"], 0, "{v}");
    assert!(
        v["first_offset"].is_null() && v["last_offset"].is_null(),
        "{v}"
    );
    assert_eq!(v["topic"], "mid", "{v}");

    // Text bodies cannot be streamed.
    let r = c
        .post(format!("{base}/topics/mid/items?stream=true"))
        .header("content-type", NQ)
        .body("<http://a> <http://b> <http://c> .\n")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(describe(&c, &base, "mid").await["next_offset"], 5);
    srv.shutdown().await.unwrap();
}

#[tokio::test]
async fn curl_streams_a_chunked_upload() {
    require_curl();
    use tokio::io::AsyncWriteExt as _;
    let srv = start().await;
    let c = client();
    let base = srv.url();
    // `curl -T -` uploads stdin with chunked transfer encoding.
    let mut child = tokio::process::Command::new("curl")
        .args([
            "-sS",
            "-T",
            "-",
            "-X",
            "POST",
            "-H",
            "Content-Type: application/x-jelly-rdf",
            &format!("{base}/topics/cu/items?stream=true"),
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let frames = split_delimited(&jelly_stream(&sample_frames(3, 0), StreamOptions::small()));
    stdin.write_all(&frames[0]).await.unwrap();
    stdin.flush().await.unwrap();
    // The first item shows up while curl still holds stdin open.
    let t0 = std::time::Instant::now();
    loop {
        let r = c.get(format!("{base}/topics/cu")).send().await.unwrap();
        if r.status() == StatusCode::OK {
            let v: Value = r.json().await.unwrap();
            if v["next_offset"] == 1 {
                break;
            }
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "item 0 never appeared"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for f in &frames[1..] {
        stdin.write_all(f).await.unwrap();
    }
    drop(stdin);
    let out = tokio::time::timeout(Duration::from_secs(20), child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["items"], 3, "{v}");
    assert_eq!(v["first_offset"], 0);
    assert_eq!(v["last_offset"], 2);
    let resp = c
        .get(format!("{base}/topics/cu/items?follow=false"))
        .send()
        .await
        .unwrap();
    let got = JellyStream::new(resp).all().await;
    assert_eq!(got[2].statements[0].object, iri("http://ex.org/r2"));
    srv.shutdown().await.unwrap();
}

#[tokio::test]
async fn streaming_publish_is_not_bounded_by_max_body_bytes() {
    // max_body_bytes is 256 KiB here: the atomic POST refuses this body, the
    // streaming POST takes it (one frame at a time).
    let srv = start().await;
    let c = client();
    let base = srv.url();
    let n = 10_000;
    let body = jelly_stream(&sample_frames(n, 0), StreamOptions::small());
    assert!(body.len() > 256 << 10, "{} bytes", body.len());
    let r = publish(&c, &format!("{base}/topics/big/items"), JELLY, body.clone()).await;
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let r = c
        .post(format!("{base}/topics/big/items?stream=true"))
        .header("content-type", JELLY)
        .body(body)
        .send()
        .await
        .unwrap();
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["items"], n, "{v}");
    assert_eq!(v["last_offset"], n - 1);
    let resp = c
        .get(format!(
            "{base}/topics/big/items?from={}&follow=false",
            n - 1
        ))
        .send()
        .await
        .unwrap();
    let got = JellyStream::new(resp).all().await;
    assert_eq!(
        got[0].statements[0].object,
        iri(&format!("http://ex.org/r{}", n - 1))
    );
    srv.shutdown().await.unwrap();
}

#[tokio::test]
async fn shutdown_ends_a_streaming_publish_and_keeps_its_items() {
    let srv = start().await;
    let c = client();
    let base = srv.url();
    let frames = split_delimited(&jelly_stream(&sample_frames(2, 0), StreamOptions::small()));
    let (tx, body) = channel_body();
    let req = tokio::spawn(
        c.post(format!("{base}/topics/sd/items?stream=true"))
            .header("content-type", JELLY)
            .body(body)
            .send(),
    );
    tx.send(frames[0].clone()).await.unwrap();
    let t0 = std::time::Instant::now();
    while c
        .get(format!("{base}/topics/sd"))
        .send()
        .await
        .unwrap()
        .status()
        != StatusCode::OK
    {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "item 0 never appended"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The body stays open; shutdown does not wait for it.
    tokio::time::timeout(Duration::from_secs(10), srv.shutdown())
        .await
        .expect("shutdown waits for the streaming publish")
        .unwrap();
    let r = req.await.unwrap().unwrap();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["items_accepted"], 1, "{v}");
    assert_eq!(v["frame"], 1);
    drop(tx);
}

/// A long-poll page larger than one chunk of output, in each text format of a quads
/// topic and compressed: the body is sent a chunk at a time, so these check that the
/// chunks join into one valid document (and one valid gzip/zstd/br stream).
#[tokio::test]
async fn long_poll_pages_stream_in_every_format_and_coding() {
    let srv = start().await;
    let base = srv.url();
    let plain = reqwest::Client::builder()
        .no_gzip()
        .no_zstd()
        .no_brotli()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let body = jelly_stream(&sample_frames(1000, 0), StreamOptions::small());
    let r = publish(&plain, &format!("{base}/topics/big/items"), JELLY, body).await;
    assert_eq!(offsets(r).await.len(), 1000);
    let page = |c: &reqwest::Client, format: &str| {
        c.get(format!(
            "{base}/topics/big/poll?from=0&max_items=10000&max_bytes=8388608&format={format}"
        ))
        .send()
    };
    // Past the documented ranges: refused, naming the parameter, not quietly clamped.
    for q in [
        "poll?max_bytes=99999999999",
        "poll?max_bytes=0",
        "poll?max_items=0",
        "poll?max_items=10001",
        "poll?wait_ms=60001",
        "items?window=60001",
        "sse?window=60001",
    ] {
        let r = plain
            .get(format!("{base}/topics/big/{q}&from=0"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{q}");
        let v: serde_json::Value = r.json().await.unwrap();
        let name = q.split(['?', '=']).nth(1).unwrap();
        assert_eq!(v["parameter"], name, "{q}: {v}");
    }
    for format in ["nquads", "trig"] {
        let r = page(&plain, format).await.unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{format}");
        assert_eq!(r.headers()["x-jelly-next-offset"], "1000");
        assert_eq!(r.headers()["x-jelly-items"], "1000");
        let text = r.text().await.unwrap();
        assert!(text.len() > 128 << 10, "{format}: {} bytes", text.len());
        let statements = if format == "trig" {
            let mut n = 0;
            for q in oxttl::TriGParser::new().for_slice(text.as_bytes()) {
                q.unwrap();
                n += 1;
            }
            n
        } else {
            jelly::nquads::parse_document(&text).unwrap().len()
        };
        assert_eq!(statements, 2000, "{format}");
        // The same page through each compression: the same text once decoded.
        for (coding, c) in [
            ("gzip", reqwest::Client::builder().no_zstd().no_brotli()),
            ("zstd", reqwest::Client::builder().no_gzip().no_brotli()),
            ("br", reqwest::Client::builder().no_gzip().no_zstd()),
        ] {
            let c = c.timeout(Duration::from_secs(20)).build().unwrap();
            let got = page(&c, format).await.unwrap().text().await.unwrap();
            assert!(got == text, "{format} over {coding} differs");
        }
    }
    // SSE in TriG and N-Quads: one event per item, each a document of its own.
    for format in ["trig", "nquads"] {
        let r = plain
            .get(format!(
                "{base}/topics/big/sse?follow=false&from=998&format={format}"
            ))
            .send()
            .await
            .unwrap();
        let ev = sse_events(&r.text().await.unwrap());
        assert_eq!(ev.iter().map(|e| e.0).collect::<Vec<_>>(), [998, 999]);
        let doc = ev[1].1.join("\n") + "\n";
        let n = if format == "trig" {
            oxttl::TriGParser::new()
                .for_slice(doc.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .unwrap()
                .len()
        } else {
            jelly::nquads::parse_document(&doc).unwrap().len()
        };
        assert_eq!(n, 2, "{format}: {doc}");
    }
    // A page holds at least one item, however small `max_bytes`.
    let r = plain
        .get(format!("{base}/topics/big/poll?from=7&max_bytes=1"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-jelly-items"], "1");
    assert_eq!(r.headers()["x-jelly-next-offset"], "8");
    srv.shutdown().await.unwrap();
}

/// Query mistakes get the JSON error every other refusal gets, naming the parameter:
/// a malformed value, and a parameter no reader of the endpoint takes, which is
/// refused rather than ignored (a misspelled `from` would replay from another place,
/// a misspelled `max_items` would send the default page). Cache busters
/// (`_`-prefixed), `access_token` and the filters' parameters stay welcome.
#[tokio::test]
async fn query_mistakes_get_json_errors_naming_the_parameter() {
    let srv = start().await;
    let c = client();
    let base = srv.url();
    let body = jelly_stream(&sample_frames(1, 0), StreamOptions::small());
    assert_eq!(
        offsets(publish(&c, &format!("{base}/topics/q/items"), JELLY, body).await)
            .await
            .len(),
        1
    );
    let unknown = "unknown query parameter";
    for (path, param, needle) in [
        (
            "poll?max_items=abc",
            "max_items",
            "`abc` is not a valid value",
        ),
        (
            "items?follow=maybe",
            "follow",
            "`maybe` is not a valid value",
        ),
        ("sse?window=x", "window", "`x` is not a valid value"),
        ("poll?wait_ms=-1", "wait_ms", "wait_ms"),
        ("items?from=soon", "from", "from"),
        ("items?format=xml", "format", "format"),
        ("items?mode=fast", "mode", "mode"),
        ("poll?fromm=1", "fromm", unknown),
        ("poll?max_item=1", "max_item", unknown),
        ("items?follow=false&formatt=nq", "formatt", unknown),
        ("sse?windw=5", "windw", unknown),
        ("ws?souce=a", "souce", unknown),
    ] {
        let r = c
            .get(format!("{base}/topics/q/{path}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{path}");
        let v: Value = r.json().await.unwrap();
        let msg = v["error"].as_str().unwrap();
        assert!(msg.contains(param) && msg.contains(needle), "{path}: {msg}");
        assert_eq!(v["parameter"], param, "{path}: {v}");
    }
    for (query, param) in [("stream=yes", "stream"), ("splt=graph", "splt")] {
        let r = c
            .post(format!("{base}/topics/q/items?{query}"))
            .header("content-type", "application/n-quads")
            .body("<http://a> <http://b> <http://c> <http://g> .\n")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{query}");
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["parameter"], param, "{v}");
    }
    // Counted as refused publishes, as other refusals are.
    let m = c
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(m.contains("\njelly_publish_requests_total 3\n"), "{m}");
    assert!(m.contains("\njelly_publish_rejected_total 2\n"), "{m}");
    // Endpoints that take no parameters refuse them too: `DELETE ?dry_run=1` must not
    // delete. The topic is still there afterwards.
    for (method, path) in [
        (reqwest::Method::GET, "/topics?all=1"),
        (reqwest::Method::GET, "/topics/q?verbose=1"),
        (reqwest::Method::PUT, "/topics/q2?force=1"),
        (reqwest::Method::PATCH, "/topics/q?force=1"),
        (reqwest::Method::DELETE, "/topics/q?dry_run=1"),
        (reqwest::Method::GET, "/topics/q/ws/publish?source=a"),
    ] {
        let r = c
            .request(method.clone(), format!("{base}{path}"))
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{method} {path}");
        let v: Value = r.json().await.unwrap();
        assert!(
            v["error"].as_str().unwrap().contains(unknown),
            "{method} {path}: {v}"
        );
    }
    assert_eq!(describe(&c, &base, "q").await["next_offset"], 1);
    let r = c.get(format!("{base}/topics/q2")).send().await.unwrap();
    assert_eq!(
        r.status(),
        StatusCode::NOT_FOUND,
        "PUT with a bad parameter created it"
    );
    // A cache buster passes.
    let r = c
        .get(format!("{base}/topics/q?_=17000"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    // A parameter given twice is named, as a bad value is (of the endpoint's own
    // parameters and of the filter's).
    for (query, param) in [("from=1&from=2", "from"), ("source=a&source=b", "source")] {
        let r = c
            .get(format!("{base}/topics/q/poll?{query}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::BAD_REQUEST);
        let v: Value = r.json().await.unwrap();
        let msg = v["error"].as_str().unwrap();
        assert_eq!(v["parameter"], param, "{v}");
        assert!(
            msg.contains(&format!("`{param}` is given more than once")),
            "{msg}"
        );
        assert!(!msg.contains(": .:"), "{msg}");
    }
    // Known parameters of both readers together, a cache buster and a token pass.
    let r = c
        .get(format!(
            "{base}/topics/q/poll?from=0&max_items=5&source=x&_=1700000000&access_token=t"
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["x-jelly-next-offset"], "1");
    // Nothing was appended by any of the refused requests.
    assert_eq!(describe(&c, &base, "q").await["next_offset"], 1);
    srv.shutdown().await.unwrap();
}

/// `from=ts:<ms>` starts at the first item stamped at or after that time, over the
/// chunked stream, long-poll and SSE; a later time than the last item's, at the end.
#[tokio::test]
async fn start_from_a_timestamp() {
    let srv = start().await;
    let c = client();
    let base = srv.url();
    let url = format!("{base}/topics/t/items");
    for i in 0..4 {
        let body = jelly_stream(&sample_frames(1, i), StreamOptions::small());
        assert_eq!(
            offsets(publish(&c, &url, JELLY, body).await).await,
            [i as u64]
        );
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    // The items' own timestamps, from their Jelly metadata.
    let r = c
        .get(format!("{base}/topics/t/items?follow=false"))
        .header("accept", JELLY)
        .send()
        .await
        .unwrap();
    let stamps: Vec<u64> = support::frames_with_metadata(&r.bytes().await.unwrap())
        .into_iter()
        .map(|m| m["ts"].parse().unwrap())
        .collect();
    assert_eq!(stamps.len(), 4);
    assert!(stamps.windows(2).all(|w| w[0] < w[1]), "{stamps:?}");
    let from = stamps[2];
    let r = c
        .get(format!("{base}/topics/t/items?follow=false&from=ts:{from}"))
        .header("accept", NQ)
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-jelly-start-offset"], "2");
    let st = jelly::nquads::parse_document(&r.text().await.unwrap()).unwrap();
    assert_eq!(st.len(), 4);
    assert_eq!(st[0].object, iri("http://ex.org/r2"));
    // One millisecond after item 2: item 3.
    let r = c
        .get(format!("{base}/topics/t/poll?from=ts:{}", from + 1))
        .header("accept", NQ)
        .send()
        .await
        .unwrap();
    let st = jelly::nquads::parse_document(&r.text().await.unwrap()).unwrap();
    assert_eq!(st[0].object, iri("http://ex.org/r3"));
    let r = c
        .get(format!("{base}/topics/t/sse?follow=false&from=ts:{from}"))
        .send()
        .await
        .unwrap();
    let ev = sse_events(&r.text().await.unwrap());
    assert_eq!(ev.iter().map(|e| e.0).collect::<Vec<_>>(), [2, 3]);
    // A time after the last item's starts as `latest` does (documented): at the next
    // offset, whatever the next item's time.
    let r = c
        .get(format!(
            "{base}/topics/t/poll?from=ts:{}&wait_ms=0",
            stamps[3] + 3_600_000
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-jelly-next-offset"], "4");
    // A malformed timestamp is a 400.
    let r = c
        .get(format!("{base}/topics/t/items?follow=false&from=ts:soon"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    srv.shutdown().await.unwrap();
}

/// A browser's preflight from `https://app.example.org` for a POST to `url` with the
/// request headers `headers`: the answer (checked to be a success) and its
/// `Access-Control-Allow-Headers`, lower case.
async fn preflight(c: &reqwest::Client, url: &str, headers: &str) -> (reqwest::Response, String) {
    let r = c
        .request(reqwest::Method::OPTIONS, url)
        .header("origin", "https://app.example.org")
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", headers)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    let allowed = r.headers()["access-control-allow-headers"]
        .to_str()
        .unwrap()
        .to_ascii_lowercase();
    (r, allowed)
}

/// CORS is off unless origins are configured; then answers carry the allowed origin
/// and expose the offset headers, and preflights are answered.
#[tokio::test]
async fn cors_is_off_by_default_and_answers_configured_origins() {
    let srv = start().await;
    let c = client();
    let base = srv.url();
    let body = jelly_stream(&sample_frames(1, 0), StreamOptions::small());
    publish(&c, &format!("{base}/topics/c/items"), JELLY, body).await;
    let r = c
        .get(format!("{base}/topics/c/poll"))
        .header("origin", "https://app.example.org")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.headers().get("access-control-allow-origin").is_none());
    srv.shutdown().await.unwrap();

    let srv = start_with(|c| c.cors_origins = vec!["https://app.example.org".into()]).await;
    let base = srv.url();
    let body = jelly_stream(&sample_frames(1, 0), StreamOptions::small());
    publish(&c, &format!("{base}/topics/c/items"), JELLY, body).await;
    let r = c
        .get(format!("{base}/topics/c/sse?follow=false"))
        .header("origin", "https://app.example.org")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(
        r.headers()["access-control-allow-origin"],
        "https://app.example.org"
    );
    assert_eq!(sse_events(&r.text().await.unwrap()).len(), 1);
    let r = c
        .get(format!("{base}/topics/c/poll"))
        .header("origin", "https://app.example.org")
        .send()
        .await
        .unwrap();
    let exposed = r.headers()["access-control-expose-headers"]
        .to_str()
        .unwrap()
        .to_ascii_lowercase();
    assert!(exposed.contains("x-jelly-next-offset"), "{exposed}");
    assert!(exposed.contains("www-authenticate"), "{exposed}");
    // Another origin gets no grant.
    let r = c
        .get(format!("{base}/topics/c/poll"))
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert!(r.headers().get("access-control-allow-origin").is_none());
    // A preflight for a publish with a token and a Jelly body.
    let (r, allowed) = preflight(
        &c,
        &format!("{base}/topics/c/items"),
        "authorization, content-type",
    )
    .await;
    assert_eq!(
        r.headers()["access-control-allow-origin"],
        "https://app.example.org"
    );
    assert!(allowed.contains("authorization"), "{allowed}");
    assert!(exposed.contains("x-jelly-topic-id"), "{exposed}");
    // Headers stored with the items (`X-Jelly-Header-<name>`) and the source id too.
    let (_, allowed) = preflight(
        &c,
        &format!("{base}/topics/c/items"),
        "content-type,x-jelly-header-unit,x-jelly-source",
    )
    .await;
    for h in ["content-type", "x-jelly-header-unit", "x-jelly-source"] {
        assert!(allowed.contains(h), "{h} not in {allowed}");
    }
    // An admin page may delete a topic.
    let r = c
        .request(reqwest::Method::OPTIONS, format!("{base}/topics/c"))
        .header("origin", "https://app.example.org")
        .header("access-control-request-method", "DELETE")
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    let methods = r.headers()["access-control-allow-methods"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        methods.contains("DELETE") && methods.contains("PATCH"),
        "{methods}"
    );
    srv.shutdown().await.unwrap();
}

/// A UTF-8 byte-order mark at the start of a text body (some editors write one) is
/// skipped in every syntax, and the statements are the same as without it.
#[tokio::test]
async fn text_bodies_may_start_with_a_byte_order_mark() {
    let srv = start().await;
    let c = client();
    let base = srv.url();
    let url = format!("{base}/topics/bom/items");
    let bodies: [(&str, &str); 6] = [
        (NQ, "<http://ex.org/s> <http://ex.org/p> \"0\" .\n"),
        (
            "application/n-triples",
            "<http://ex.org/s> <http://ex.org/p> \"1\" .\n",
        ),
        (
            "text/turtle",
            "@prefix ex: <http://ex.org/> .\nex:s ex:p \"2\" .\n",
        ),
        (
            "application/trig",
            "@prefix ex: <http://ex.org/> .\n{ ex:s ex:p \"3\" }\n",
        ),
        (
            "application/ld+json",
            r#"{"@id": "http://ex.org/s", "http://ex.org/p": "4"}"#,
        ),
        (
            "application/rdf+xml",
            r#"<?xml version="1.0"?><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns:ex="http://ex.org/"><rdf:Description rdf:about="http://ex.org/s"><ex:p>5</ex:p></rdf:Description></rdf:RDF>"#,
        ),
    ];
    for (i, (ct, text)) in bodies.iter().enumerate() {
        let mut body = b"\xEF\xBB\xBF".to_vec();
        body.extend_from_slice(text.as_bytes());
        let r = publish(&c, &url, ct, body).await;
        assert_eq!(offsets(r).await, [i as u64], "{ct}");
    }
    let text = get_text(&c, &format!("{url}?follow=false"), NQ).await;
    let st = jelly::nquads::parse_document(&text).unwrap();
    let objects: Vec<Term> = st.iter().map(|s| s.object.clone()).collect();
    let want: Vec<Term> = (0..6)
        .map(|i| Term::simple_literal(i.to_string()))
        .collect();
    assert_eq!(objects, want, "{text}");
}

/// RDF/XML and JSON-LD bodies are taken like the other text syntaxes; a JSON-LD
/// document that needs a remote context is refused (no fetch) and appends nothing.
#[tokio::test]
async fn publish_rdf_xml_and_json_ld() {
    let srv = start().await;
    let c = client();
    let base = srv.url();
    let url = format!("{base}/topics/x/items");
    let rdfxml = r#"<?xml version="1.0"?>
<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns:ex="http://ex.org/">
  <rdf:Description rdf:about="http://ex.org/a"><ex:p>one</ex:p></rdf:Description>
</rdf:RDF>"#;
    let r = publish(&c, &url, "application/rdf+xml", rdfxml.into()).await;
    assert_eq!(offsets(r).await, [0]);
    let jsonld = r#"{"@id": "http://ex.org/b", "http://ex.org/p": [{"@value": "two", "@language": "en"}],
        "@graph": [{"@id": "http://ex.org/c", "http://ex.org/p": {"@id": "http://ex.org/d"}}]}"#;
    let r = publish(&c, &url, "application/ld+json", jsonld.into()).await;
    assert_eq!(offsets(r).await, [1]);
    let remote = r#"{"@context": "http://example.org/context.jsonld", "@id": "http://ex.org/e", "name": "x"}"#;
    let r = publish(&c, &url, "application/ld+json", remote.into()).await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    // The answer names the context and why, not the parser's "No LoadDocumentCallback".
    let e = r.json::<serde_json::Value>().await.unwrap()["error"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        e.contains("http://example.org/context.jsonld")
            && e.contains("remote JSON-LD contexts are not fetched"),
        "{e}"
    );
    let bad = "<rdf:RDF xmlns:rdf=\"http://www.w3.org/1999/02/22-rdf-syntax-ns#\"><rdf:Description";
    let r = publish(&c, &url, "application/rdf+xml", bad.into()).await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    // RDF/XML errors tell their line and column (the end of the tag at fault).
    let bad = "<?xml version=\"1.0\"?>\n<rdf:RDF xmlns:rdf=\"http://www.w3.org/1999/02/22-rdf-syntax-ns#\">\n  <rdf:Description rdf:about=\"bad iri\"/>\n</rdf:RDF>\n";
    let r = publish(&c, &url, "application/rdf+xml", bad.into()).await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let e = r.json::<serde_json::Value>().await.unwrap()["error"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        e.starts_with(
            "syntax error at line 3 column 41 (byte offset 128): error while parsing IRI 'bad iri'"
        ),
        "{e}"
    );
    assert_eq!(describe(&c, &base, "x").await["next_offset"], 2);

    let text = get_text(&c, &format!("{url}?follow=false"), NQ).await;
    let st = jelly::nquads::parse_document(&text).unwrap();
    assert_eq!(st.len(), 3, "{text}");
    assert_eq!(st[0].subject, iri("http://ex.org/a"));
    assert_eq!(st[0].object, Term::simple_literal("one"));
    assert!(
        st.iter()
            .any(|s| s.subject == iri("http://ex.org/c") && s.graph == Some(iri("http://ex.org/b"))),
        "{text}"
    );
    srv.shutdown().await.unwrap();
}

/// Text streams mark each item with a `# offset N` comment (RDF parsers skip it), so
/// a text subscriber can resume after the last item it read: no gap, no duplicate.
#[tokio::test]
async fn text_streams_carry_offsets_for_resuming() {
    let srv = start().await;
    let c = client();
    let base = srv.url();
    let body = jelly_stream(&sample_frames(6, 0), StreamOptions::small());
    publish(&c, &format!("{base}/topics/o/items"), JELLY, body).await;
    let comments = |text: &str| -> Vec<u64> {
        text.lines()
            .filter_map(|l| l.strip_prefix("# offset "))
            .map(|v| v.parse().unwrap())
            .collect()
    };
    for format in ["nquads", "trig"] {
        let text = c
            .get(format!(
                "{base}/topics/o/items?follow=false&format={format}"
            ))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert_eq!(comments(&text), [0, 1, 2, 3, 4, 5], "{format}");
    }
    // A follower that read items 0..=2 and lost its connection resumes at 3.
    let first = c
        .get(format!("{base}/topics/o/items?follow=false&format=nquads"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let cut = first.find("# offset 3").unwrap();
    let (read, _) = first.split_at(cut);
    let last = *comments(read).last().unwrap();
    let rest = c
        .get(format!(
            "{base}/topics/o/items?follow=false&format=nquads&from={}",
            last + 1
        ))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(comments(&rest), [3, 4, 5]);
    let mut all = jelly::nquads::parse_document(read).unwrap();
    all.extend(jelly::nquads::parse_document(&rest).unwrap());
    assert_eq!(all, jelly::nquads::parse_document(&first).unwrap());
    // Long-poll pages carry them too; SSE events carry their offset as the event id
    // and no comment.
    let page = c
        .get(format!("{base}/topics/o/poll?from=4&format=nquads"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(comments(&page), [4, 5]);
    let sse = c
        .get(format!(
            "{base}/topics/o/sse?follow=false&from=5&format=nquads"
        ))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!sse.contains("# offset"), "{sse}");
    srv.shutdown().await.unwrap();
}

/// A topic's own `retention_ms` reaches its file log: on a slow topic, items older
/// than the limit go (the next append starts a new segment, and the old one is
/// deleted once its newest item is past the limit), and reading them is a 410.
#[tokio::test]
async fn topic_retention_ms_drops_old_items_of_a_slow_topic() {
    let dir = std::env::temp_dir().join(format!("jelly-http-ret-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.clone();
    let srv = start_with(move |c| {
        c.log = jelly_server::config::LogKind::File;
        c.data = d;
        c.durability = "none".into();
    })
    .await;
    let c = client();
    let base = srv.url();
    let r = c
        .put(format!("{base}/topics/aging"))
        .body(r#"{"physical":"triples","retention_ms":300}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let url = format!("{base}/topics/aging/items");
    let item = |i: usize| jelly_stream(&sample_frames(1, i), StreamOptions::small());
    assert_eq!(offsets(publish(&c, &url, JELLY, item(0)).await).await, [0]);
    assert_eq!(offsets(publish(&c, &url, JELLY, item(1)).await).await, [1]);
    tokio::time::sleep(Duration::from_millis(400)).await;
    // Item 2 starts a new segment (item 0 is past the limit), and items 0 and 1 go.
    assert_eq!(offsets(publish(&c, &url, JELLY, item(2)).await).await, [2]);
    let d = describe(&c, &base, "aging").await;
    assert_eq!(d["first_offset"], 2, "{d}");
    assert_eq!(d["next_offset"], 3, "{d}");
    let r = c
        .get(format!("{base}/topics/aging/poll?from=0"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::GONE);
    srv.shutdown().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Terms that would change the text a subscriber gets (a language tag or an IRI with a
/// newline, a blank node label with spaces): the first two are refused at publish,
/// with nothing appended; a label, which Jelly allows to be any string, is written in
/// an escaped form, so no text output holds more statements than were published.
#[tokio::test]
async fn terms_cannot_inject_statements_into_text_subscriptions() {
    let srv = start().await;
    let c = client();
    let base = srv.url();
    let lit = |lang: &str| Statement {
        object: Term::Literal(jelly::Literal {
            lex: "x".into(),
            kind: jelly::OwnedLiteralKind::Lang(lang.into()),
        }),
        ..triple("http://ex.org/s", "http://ex.org/p", "http://ex.org/o")
    };
    let r = c
        .put(format!("{base}/topics/inj"))
        .json(&serde_json::json!({"physical": "triples"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let good = jelly_stream(&[vec![lit("en-GB")]], StreamOptions::small());
    assert_eq!(
        offsets(publish(&c, &format!("{base}/topics/inj/items"), JELLY, good).await).await,
        [0]
    );
    let forged = "en .\n<http://evil/s> <http://evil/p> \"pwned\" .\n#";
    for (what, st) in [
        ("language tag", lit(forged)),
        (
            "IRI",
            triple(
                "http://ex.org/s",
                "http://ex.org/p",
                "http://e/o> .\n<http://evil/s",
            ),
        ),
    ] {
        let body = jelly_stream(&[vec![st]], StreamOptions::small());
        let r = publish(&c, &format!("{base}/topics/inj/items"), JELLY, body.clone()).await;
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{what}");
        let e: Value = r.json().await.unwrap();
        let msg = e["error"].as_str().unwrap();
        assert!(
            msg.contains("invalid language tag") || msg.contains("which an IRI cannot contain"),
            "{what}: {msg}"
        );
        let r = c
            .post(format!("{base}/topics/inj/items?stream=true"))
            .header("content-type", JELLY)
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{what}, streaming");
    }
    assert_eq!(describe(&c, &base, "inj").await["next_offset"], 1);

    let label = "a b\n<http://evil/s> <http://evil/p> <http://evil/o> .";
    let bnode = Statement {
        subject: Term::BlankNode(label.into()),
        ..triple("", "http://ex.org/p", "http://ex.org/o")
    };
    let body = jelly_stream(&[vec![bnode]], StreamOptions::small());
    assert_eq!(
        offsets(publish(&c, &format!("{base}/topics/inj/items"), JELLY, body).await).await,
        [1]
    );
    for format in ["nquads", "ntriples", "trig", "turtle"] {
        let text = get_text(
            &c,
            &format!("{base}/topics/inj/items?follow=false&format={format}"),
            "*/*",
        )
        .await;
        assert!(!text.contains("evil"), "{format}: {text}");
        assert!(text.contains("_:e-6120"), "{format}: {text}");
        assert!(text.contains("\"x\"@en-GB"), "{format}: {text}");
    }
    srv.shutdown().await.unwrap();
}

/// Triple terms nested thousands deep aborted the server (the text parsers recurse
/// once per level): now refused with 400 before any parser runs, in every text syntax
/// that has them, and the server goes on. So is a deeply nested `ask` filter.
#[tokio::test]
async fn deeply_nested_text_and_queries_are_refused_not_fatal() {
    let srv = start().await;
    let c = client();
    let base = srv.url();
    let n = 5_000;
    let nested = format!(
        "<http://e/s> <http://e/p> {}<http://e/o>{} .\n",
        "<<( <http://e/s> <http://e/p> ".repeat(n),
        " )>>".repeat(n)
    );
    for ct in [
        NQ,
        "application/n-triples",
        "text/turtle",
        "application/trig",
    ] {
        let r = publish(
            &c,
            &format!("{base}/topics/deep/items"),
            ct,
            nested.clone().into_bytes(),
        )
        .await;
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{ct}");
        let e: Value = r.json().await.unwrap();
        let m = e["error"].as_str().unwrap();
        assert!(
            m.contains("nested deeper than 100") && m.contains("line 1"),
            "{ct}: {m}"
        );
    }
    // Up to the limit is fine (a topic that takes triple terms).
    let r = c
        .put(format!("{base}/topics/deep"))
        .json(&serde_json::json!({"rdf_star": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let ok = format!(
        "<http://e/s> <http://e/p> {}<http://e/o>{} .\n",
        "<<( <http://e/s> <http://e/p> ".repeat(100),
        " )>>".repeat(100)
    );
    assert_eq!(
        offsets(
            publish(
                &c,
                &format!("{base}/topics/deep/items"),
                NQ,
                ok.into_bytes()
            )
            .await
        )
        .await,
        [0]
    );
    let q = format!("ASK {{ {{}} {}}}", "UNION {} ".repeat(1700));
    let url = format!(
        "{base}/topics/deep/poll?ask={}",
        q.replace('{', "%7B")
            .replace('}', "%7D")
            .replace(' ', "%20")
    );
    let r = c.get(url).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["parameter"], "ask", "{e}");
    // Invalid UTF-8 is located in the body as sent, its byte-order mark counted.
    let r = publish(
        &c,
        &format!("{base}/topics/deep/items"),
        NQ,
        b"\xEF\xBB\xBF<http://e/s> <http://e/p> \"a\" .\n<http://e/s> <http://e/p> \"\xff\" .\n"
            .to_vec(),
    )
    .await;
    let e: Value = r.json().await.unwrap();
    assert_eq!(
        e["error"], "invalid UTF-8 at line 2 (byte offset 62)",
        "{e}"
    );
    assert!(
        get_text(&c, &format!("{base}/health"), "*/*")
            .await
            .contains("ok")
    );
    srv.shutdown().await.unwrap();
}

/// RDF/XML "billion laughs": nine nested entity declarations of ten references each
/// took the server to 12 GB. Refused with 400 before the parser expands anything;
/// ordinary entities (`&ex;` in attribute values) still work.
#[tokio::test]
async fn rdf_xml_entity_bombs_are_refused() {
    let srv = start().await;
    let c = client();
    let base = srv.url();
    let mut lol = String::from("<?xml version=\"1.0\"?>\n<!DOCTYPE rdf:RDF [<!ENTITY l0 \"lol\">");
    for i in 1..10 {
        lol += &format!("<!ENTITY l{i} \"{}\">", format!("&l{};", i - 1).repeat(10));
    }
    lol += "]>\n<rdf:RDF xmlns:rdf=\"http://www.w3.org/1999/02/22-rdf-syntax-ns#\">\
            <rdf:Description rdf:about=\"http://e/s\"><rdf:value>&l9;</rdf:value>\
            </rdf:Description></rdf:RDF>\n";
    let r = publish(
        &c,
        &format!("{base}/topics/x/items"),
        "application/rdf+xml",
        lol.into_bytes(),
    )
    .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let e: Value = r.json().await.unwrap();
    assert!(
        e["error"].as_str().unwrap().contains("expansion bomb"),
        "{e}"
    );
    // 64,000 nested elements took 32 s of parser CPU: refused at 256 levels.
    let n = 5_000;
    let deep = format!(
        "<rdf:RDF xmlns:rdf=\"http://www.w3.org/1999/02/22-rdf-syntax-ns#\">\
         <rdf:Description rdf:about=\"http://e/s\">{}{}</rdf:Description></rdf:RDF>",
        "<rdf:value rdf:parseType=\"Resource\">".repeat(n),
        "</rdf:value>".repeat(n)
    );
    let r = publish(
        &c,
        &format!("{base}/topics/x/items"),
        "application/rdf+xml",
        deep.into_bytes(),
    )
    .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let e: Value = r.json().await.unwrap();
    assert!(
        e["error"]
            .as_str()
            .unwrap()
            .contains("nested deeper than 256"),
        "{e}"
    );
    let ok = "<?xml version=\"1.0\"?>\n<!DOCTYPE rdf:RDF [<!ENTITY ex \"http://ex.org/\">]>\n\
              <rdf:RDF xmlns:rdf=\"http://www.w3.org/1999/02/22-rdf-syntax-ns#\">\
              <rdf:Description rdf:about=\"&ex;s\"><rdf:value>v</rdf:value></rdf:Description>\
              </rdf:RDF>\n";
    let r = publish(
        &c,
        &format!("{base}/topics/x/items"),
        "application/rdf+xml",
        ok.into(),
    )
    .await;
    assert_eq!(offsets(r).await, [0]);
    let text = get_text(
        &c,
        &format!("{base}/topics/x/items?follow=false&format=nquads"),
        "*/*",
    )
    .await;
    assert!(text.contains("<http://ex.org/s>"), "{text}");
    srv.shutdown().await.unwrap();
}

/// Start positions are decimal digits: `+1` (which Rust's number parser takes) and
/// other signs or spaces, inside or around, are refused with 400, naming the forms
/// (as a spaced value of any other parameter is).
#[tokio::test]
async fn from_numbers_are_digits_only() {
    let srv = start().await;
    let c = client();
    let base = srv.url();
    let body = jelly_stream(
        &vec![vec![triple("http://e/s", "http://e/p", "http://e/o")]; 3],
        StreamOptions::small(),
    );
    publish(&c, &format!("{base}/topics/f/items"), JELLY, body).await;
    for bad in [
        "%2B1",
        "-1",
        "ts:%2B5",
        "last:%2B1",
        "1%201",
        "0x1",
        "",
        "%202%20",
        "%202",
        "latest%20",
    ] {
        let r = c
            .get(format!("{base}/topics/f/poll?from={bad}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "from={bad}");
        let e: Value = r.json().await.unwrap();
        assert!(
            e["error"].as_str().unwrap().contains("bad `from` value"),
            "{bad}: {e}"
        );
    }
    for good in ["1", "last:1", "ts:0", "2"] {
        let r = c
            .get(format!(
                "{base}/topics/f/poll?from={}",
                good.replace(' ', "%20")
            ))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "from={good}");
    }
    srv.shutdown().await.unwrap();
}

#[tokio::test]
async fn compressed_publish_bodies_are_read_decompressed_within_the_limits() {
    use std::io::Write as _;
    let srv = start_with(|c| c.max_body_bytes = 1 << 20).await;
    let c = client();
    let base = srv.url();
    let url = format!("{base}/topics/z/items");
    let nq = "<http://ex.org/s> <http://ex.org/p> <http://ex.org/o> .\n";
    let gz = |data: &[u8]| {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    };
    let post = |coding: &'static str, ct: &'static str, body: Vec<u8>, url: String| {
        let c = c.clone();
        async move {
            c.post(url)
                .header("content-type", ct)
                .header("content-encoding", coding)
                .body(body)
                .send()
                .await
                .unwrap()
        }
    };
    // gzip, zstd and br bodies; a streaming Jelly body in zstd.
    let r = post("gzip", NQ, gz(nq.as_bytes()), url.clone()).await;
    assert_eq!(offsets(r).await, [0]);
    let r = post(
        "zstd",
        NQ,
        zstd::encode_all(nq.as_bytes(), 1).unwrap(),
        url.clone(),
    )
    .await;
    assert_eq!(offsets(r).await, [1]);
    let mut br = Vec::new();
    brotli::BrotliCompress(&mut nq.as_bytes(), &mut br, &Default::default()).unwrap();
    let r = post("br", NQ, br, url.clone()).await;
    assert_eq!(offsets(r).await, [2]);
    // A gzip body of two members is read whole (as gzip -d does); codings are
    // case-insensitive, `x-gzip` is gzip, and `identity` adds nothing.
    let two = format!("{nq}<http://ex.org/s2> <http://ex.org/p> <http://ex.org/o> .\n");
    let mut members = gz(nq.as_bytes());
    members.extend(gz(&two.as_bytes()[nq.len()..]));
    for coding in ["gzip", "GZIP, identity", "x-gzip"] {
        let r = post(coding, NQ, members.clone(), format!("{url}?split=none")).await;
        assert_eq!(r.status(), StatusCode::OK, "{coding}");
        let o = offsets(r).await;
        let text = get_text(&c, &format!("{url}?follow=false&from={}", o[0]), NQ).await;
        assert_eq!(
            jelly::nquads::parse_document(&text).unwrap().len(),
            2,
            "{coding}"
        );
    }
    let jelly = jelly_stream(&sample_frames(3, 0), StreamOptions::small());
    let r = post(
        "zstd",
        JELLY,
        zstd::encode_all(&jelly[..], 1).unwrap(),
        format!("{url}?stream=true"),
    )
    .await;
    assert_eq!(r.status(), StatusCode::OK);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["items"], 3, "{v}");
    let text = get_text(&c, &format!("{url}?follow=false&from=0"), NQ).await;
    assert_eq!(
        jelly::nquads::parse_document(&text).unwrap().len(),
        3 + 3 * 2 + 3 * 2
    );

    // An unknown coding (415), a body that is not what its label says (400), and a
    // body that decompresses past max_body_bytes (413): nothing appended.
    let r = post("compress", NQ, nq.as_bytes().to_vec(), url.clone()).await;
    assert_eq!(r.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let v: Value = r.json().await.unwrap();
    assert!(v["error"].as_str().unwrap().contains("compress"), "{v}");
    let r = post("gzip", NQ, nq.as_bytes().to_vec(), url.clone()).await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    // Bytes after the compressed data are an error, not ignored; the error says how
    // much came out before it and how far into the body it lies.
    let mut trailing = gz(nq.as_bytes());
    let len = trailing.len() + 7;
    trailing.extend_from_slice(b"garbage");
    let r = post("gzip", NQ, trailing, url.clone()).await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let v: Value = r.json().await.unwrap();
    let want = format!(
        "the gzip coding breaks after {} decompressed bytes, within the first {len} bytes",
        nq.len()
    );
    assert!(v["error"].as_str().unwrap().contains(&want), "{v}");
    let mut cut = zstd::encode_all(nq.as_bytes(), 1).unwrap();
    cut.truncate(cut.len() - 3);
    let r = post("zstd", NQ, cut, url.clone()).await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let v: Value = r.json().await.unwrap();
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("the zstd coding breaks"),
        "{v}"
    );
    // More than one coding, or one given twice: a JSON 415.
    for coding in ["gzip, br", "gzip, gzip"] {
        let r = post(coding, NQ, gz(nq.as_bytes()), url.clone()).await;
        assert_eq!(r.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE, "{coding}");
        let v: Value = r.json().await.unwrap();
        assert!(
            v["error"].as_str().unwrap().contains("more than one"),
            "{v}"
        );
    }
    let mut big = String::new();
    while big.len() <= 2 << 20 {
        big.push_str(nq);
    }
    let r = post("gzip", NQ, gz(big.as_bytes()), url.clone()).await;
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(describe(&c, &base, "z").await["next_offset"], 9);
    // Topic options may come compressed too.
    let r = c
        .put(format!("{base}/topics/zt"))
        .header("content-encoding", "gzip")
        .body(gz(br#"{"physical":"triples"}"#))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    assert_eq!(
        describe(&c, &base, "zt").await["options"]["physical"],
        "triples"
    );
    srv.shutdown().await.unwrap();
}
