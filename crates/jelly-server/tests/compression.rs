//! Compressed subscriptions on real loopback sockets, decoded by real clients: reqwest
//! (gzip, zstd, brotli), curl `--compressed`, a tonic gRPC client (gzip, zstd), and
//! by hand with single-member decoders. A subscriber joining in the middle of a
//! shared compressed stream decodes correctly from its offset.

mod support;

use std::io::Read as _;
use std::process::Stdio;
use std::time::Duration;

use axum::http::uri::PathAndQuery;
use jelly::{Decoder, Statement};
use jelly_server::grpc::SUBSCRIBE_PATH;
use jelly_server::grpc::codec::JellyCodec;
use jelly_server::grpc::messages::{Frame, Subscribe};
use jelly_server::{Server, ServerConfig};
use support::{DecodedFrame, frames, metric, wait_delivered};
use tonic::codec::CompressionEncoding;

async fn start() -> Server {
    Server::start(ServerConfig::ephemeral()).await.unwrap()
}

fn plain_client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_gzip()
        .no_zstd()
        .no_brotli()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap()
}

/// A reqwest client that accepts (and decodes) only `enc`.
fn decoding_client(enc: &str) -> reqwest::Client {
    let b = reqwest::Client::builder()
        .no_gzip()
        .no_zstd()
        .no_brotli()
        .timeout(Duration::from_secs(60));
    match enc {
        "gzip" => b.gzip(true),
        "zstd" => b.zstd(true),
        "br" => b.brotli(true),
        _ => unreachable!(),
    }
    .build()
    .unwrap()
}

fn nquads(first: usize, n: usize) -> String {
    let mut s = String::new();
    for i in first..first + n {
        for j in 0..6 {
            s.push_str(&format!(
                "<http://example.org/item/{i}> <http://example.org/p/{j}> \"value {i} {j}\" <http://example.org/g/{i}> .\n"
            ));
        }
    }
    s
}

async fn publish(c: &reqwest::Client, srv: &Server, first: usize, n: usize) {
    let r = c
        .post(format!("{}/topics/t/items?split=graph", srv.url()))
        .header("content-type", "application/n-quads")
        .body(nquads(first, n))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "publish: {}", r.status());
}

async fn everything(c: &reqwest::Client, srv: &Server) -> Vec<(u64, Vec<Statement>)> {
    let r = c
        .get(format!("{}/topics/t/items?follow=false", srv.url()))
        .send()
        .await
        .unwrap();
    frames(&r.bytes().await.unwrap())
}

/// The curl tests need curl with the decoders they use; without them they fail.
fn require_curl(feature: &str) {
    let out = std::process::Command::new("curl")
        .arg("--version")
        .output()
        .expect("curl is needed by this test: install it (apt-get install curl)");
    let v = String::from_utf8_lossy(&out.stdout).to_lowercase();
    let features = v.lines().find(|l| l.starts_with("features:")).unwrap_or("");
    let name = match feature {
        "gzip" => "libz",
        "br" => "brotli",
        other => other,
    };
    assert!(
        features.split_whitespace().any(|f| f == name),
        "this curl cannot decode {feature} (features: {features})"
    );
}

/// A curl subscriber writing the (decoded) body and the response headers to files.
fn curl(url: &str, enc: &str, dir: &std::path::Path, name: &str) -> tokio::process::Child {
    tokio::process::Command::new("curl")
        .args(["-sS", "-N", "--compressed", "-H"])
        .arg(format!("accept-encoding: {enc}"))
        .arg("-D")
        .arg(dir.join(format!("{name}.headers")))
        .arg("-o")
        .arg(dir.join(format!("{name}.body")))
        .arg(url)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// Decodes a whole body by hand: one gzip member, or zstd frames.
fn decode_by_hand(enc: &str, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    match enc {
        "gzip" => {
            let mut d = flate2::read::GzDecoder::new(body);
            d.read_to_end(&mut out).unwrap();
            // A single member covers the whole body.
            let mut rest = Vec::new();
            d.into_inner().read_to_end(&mut rest).unwrap();
            assert!(rest.is_empty(), "one gzip member, nothing after it");
        }
        "zstd" => out = zstd::stream::decode_all(body).unwrap(),
        _ => unreachable!(),
    }
    out
}

#[tokio::test]
async fn each_encoding_decodes_with_real_clients_also_for_a_joiner_mid_stream() {
    let dir = std::env::temp_dir().join(format!("jelly-compression-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for enc in ["gzip", "zstd", "br"] {
        require_curl(enc);
        let srv = start().await;
        let plain = plain_client();
        let put = plain
            .put(format!("{}/topics/t", srv.url()))
            .json(&serde_json::json!({}))
            .send()
            .await
            .unwrap();
        assert!(put.status().is_success());
        let url = |from: &str| format!("{}/topics/t/items?from={from}", srv.url());

        // From the start: by hand, reqwest, curl.
        let raw = plain
            .get(url("latest"))
            .header("accept-encoding", enc)
            .send()
            .await
            .unwrap();
        assert_eq!(raw.headers()["content-encoding"], enc);
        assert_eq!(raw.headers()["vary"], "accept, accept-encoding");
        let decoded = decoding_client(enc)
            .get(url("latest"))
            .send()
            .await
            .unwrap();
        let mut c1 = curl(&url("latest"), enc, &dir, &format!("{enc}-start"));
        wait_subscribers(&srv, 3).await;
        publish(&plain, &srv, 0, 10).await;
        wait_delivered(&srv, "t", 3).await;

        // Joiners in the middle of the shared compressed stream.
        let raw_join = plain
            .get(url("5"))
            .header("accept-encoding", enc)
            .send()
            .await
            .unwrap();
        assert_eq!(raw_join.headers()["content-encoding"], enc);
        let decoded_join = decoding_client(enc).get(url("5")).send().await.unwrap();
        let mut c2 = curl(&url("5"), enc, &dir, &format!("{enc}-join"));
        wait_subscribers(&srv, 6).await;
        publish(&plain, &srv, 10, 10).await;
        publish(&plain, &srv, 20, 5).await;
        wait_delivered(&srv, "t", 6).await;
        assert_eq!(
            metric(&plain, &srv, "jelly_fanout_groups").await,
            1,
            "{enc}: all share one group"
        );
        let all = everything(&plain, &srv).await;
        assert_eq!(all.len(), 25);

        // A long-poll page is compressed too.
        let page = decoding_client(enc)
            .get(format!("{}/topics/t/poll?from=3&max_items=4", srv.url()))
            .send()
            .await
            .unwrap();
        assert_eq!(frames(&page.bytes().await.unwrap()), all[3..7].to_vec());
        let page = plain
            .get(format!("{}/topics/t/poll?from=3&max_items=4", srv.url()))
            .header("accept-encoding", enc)
            .send()
            .await
            .unwrap();
        assert_eq!(page.headers()["content-encoding"], enc);
        if enc != "br" {
            let body = page.bytes().await.unwrap();
            assert_eq!(frames(&decode_by_hand(enc, &body)), all[3..7].to_vec());
        }

        // The streams end (with the encoding's trailer) when the server stops.
        srv.shutdown().await.unwrap();
        let got_decoded = decoded.bytes().await.unwrap();
        assert_eq!(frames(&got_decoded), all, "{enc}: reqwest");
        let got_join = decoded_join.bytes().await.unwrap();
        assert_eq!(
            frames(&got_join),
            all[5..].to_vec(),
            "{enc}: reqwest joiner"
        );
        let raw_body = raw.bytes().await.unwrap();
        let raw_join_body = raw_join.bytes().await.unwrap();
        assert_ne!(frames_len_hint(&raw_body), 0);
        if enc != "br" {
            assert_eq!(
                frames(&decode_by_hand(enc, &raw_body)),
                all,
                "{enc}: by hand"
            );
            assert_eq!(
                frames(&decode_by_hand(enc, &raw_join_body)),
                all[5..].to_vec(),
                "{enc}: joiner by hand"
            );
        }
        for (child, name, want) in [(&mut c1, "start", &all[..]), (&mut c2, "join", &all[5..])] {
            let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
                .await
                .expect("curl ends with the stream")
                .unwrap();
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                use tokio::io::AsyncReadExt as _;
                e.read_to_string(&mut err).await.unwrap();
            }
            assert!(status.success(), "{enc} {name}: curl failed: {err}");
            let headers =
                std::fs::read_to_string(dir.join(format!("{enc}-{name}.headers"))).unwrap();
            assert!(
                headers
                    .to_lowercase()
                    .contains(&format!("content-encoding: {enc}")),
                "{enc} {name}: {headers}"
            );
            let body = std::fs::read(dir.join(format!("{enc}-{name}.body"))).unwrap();
            assert_eq!(frames(&body), want.to_vec(), "{enc} {name}: curl");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Some bytes arrived (the compressed body is not empty).
fn frames_len_hint(b: &[u8]) -> usize {
    b.len()
}

async fn wait_subscribers(srv: &Server, n: usize) {
    let t = srv.state().topics.get("t").unwrap();
    for _ in 0..1000 {
        if t.subscribers().len() >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{n} subscribers did not come");
}

/// A tonic `SubscribeRdf` call that accepts `enc`, from `from`.
async fn grpc_subscribe(
    srv: &Server,
    enc: CompressionEncoding,
    from: &str,
    compress_request: bool,
) -> tonic::Response<tonic::Streaming<Frame>> {
    let mut g =
        tonic::client::Grpc::new(support::grpc_channel(&srv.url()).await).accept_compressed(enc);
    if compress_request {
        g = g.send_compressed(enc);
    }
    g.ready().await.unwrap();
    let mut r = tonic::Request::new(Subscribe {
        topic: "t".into(),
        requested_options: None,
    });
    r.metadata_mut()
        .insert("x-jelly-from", from.parse().unwrap());
    g.server_streaming(
        r,
        PathAndQuery::from_static(SUBSCRIBE_PATH),
        JellyCodec::<Subscribe, Frame>::new(),
    )
    .await
    .unwrap()
}

/// A `SubscribeRdf` call with the given metadata.
async fn grpc_call(
    srv: &Server,
    enc: CompressionEncoding,
    md: &[(&'static str, &str)],
) -> Result<tonic::Response<tonic::Streaming<Frame>>, tonic::Status> {
    let mut g =
        tonic::client::Grpc::new(support::grpc_channel(&srv.url()).await).accept_compressed(enc);
    g.ready().await.unwrap();
    let mut r = tonic::Request::new(Subscribe {
        topic: "t".into(),
        requested_options: None,
    });
    for (k, v) in md {
        r.metadata_mut().insert(*k, v.parse().unwrap());
    }
    g.server_streaming(
        r,
        PathAndQuery::from_static(SUBSCRIBE_PATH),
        JellyCodec::<Subscribe, Frame>::new(),
    )
    .await
}

/// Decodes `n` messages of a call with one decoder: their offsets and statements.
async fn take(s: &mut tonic::Streaming<Frame>, n: usize) -> Vec<(u64, Vec<Statement>)> {
    let mut dec = Decoder::default();
    let mut out = Vec::new();
    for _ in 0..n {
        let f = tokio::time::timeout(Duration::from_secs(30), s.message())
            .await
            .expect("a frame in time")
            .unwrap()
            .expect("the stream goes on");
        let d = DecodedFrame::decode(&mut dec, &f.0);
        out.push((d.offset(), d.statements));
    }
    out
}

#[tokio::test]
async fn grpc_subscribers_get_gzip_and_zstd_messages_compressed_once() {
    for (enc, name) in [
        (CompressionEncoding::Gzip, "gzip"),
        (CompressionEncoding::Zstd, "zstd"),
    ] {
        let srv = start().await;
        let plain = plain_client();
        publish(&plain, &srv, 0, 10).await;
        let a = grpc_subscribe(&srv, enc, "earliest", false).await;
        assert_eq!(a.metadata().get("grpc-encoding").unwrap(), name);
        let mut a = a.into_inner();
        let mut b = grpc_subscribe(&srv, enc, "latest", true).await.into_inner();
        publish(&plain, &srv, 10, 10).await;
        let all = everything(&plain, &srv).await;
        assert_eq!(take(&mut a, 20).await, all, "{name}: from the start");
        assert_eq!(
            take(&mut b, 10).await,
            all[10..].to_vec(),
            "{name}: from the head"
        );
        // A joiner in the middle of the shared stream.
        let mut c = grpc_subscribe(&srv, enc, "15", false).await.into_inner();
        publish(&plain, &srv, 20, 3).await;
        let all = everything(&plain, &srv).await;
        assert_eq!(take(&mut c, 8).await, all[15..].to_vec(), "{name}: joiner");
        assert_eq!(
            metric(&plain, &srv, "jelly_fanout_groups").await,
            1,
            "{name}: one group"
        );
        // Another window is another group; a bad one is refused before the stream.
        let mut w = grpc_call(
            &srv,
            enc,
            &[("x-jelly-from", "20"), ("x-jelly-window-ms", "50")],
        )
        .await
        .unwrap()
        .into_inner();
        assert_eq!(
            take(&mut w, 3).await,
            all[20..].to_vec(),
            "{name}: windowed"
        );
        assert_eq!(
            metric(&plain, &srv, "jelly_fanout_groups").await,
            2,
            "{name}: a second group"
        );
        let bad = grpc_call(&srv, enc, &[("x-jelly-window-ms", "soon")])
            .await
            .unwrap_err();
        assert_eq!(bad.code(), tonic::Code::InvalidArgument);
        assert!(
            bad.message().contains("x-jelly-window-ms"),
            "{}",
            bad.message()
        );
        drop((a, b, c, w));
        srv.shutdown().await.unwrap();
    }
}

/// `Accept-Encoding` and `Accept` sent on several lines count as one list (RFC 9110
/// §5.3), as they would on one line.
#[tokio::test]
async fn header_lists_on_several_lines_are_one_list() {
    let srv = start().await;
    let c = plain_client();
    publish(&c, &srv, 0, 2).await;
    let get = |path: &'static str, name: &'static str, lines: &'static [&'static str]| {
        let c = c.clone();
        let url = format!("{}{path}", srv.url());
        async move {
            let mut h = reqwest::header::HeaderMap::new();
            for l in lines {
                h.append(name, reqwest::header::HeaderValue::from_static(l));
            }
            c.get(url).headers(h).send().await.unwrap()
        }
    };
    for path in ["/topics/t/items?follow=false", "/topics/t/poll?wait_ms=0"] {
        let r = get(path, "accept-encoding", &["gzip;q=0.2", "br"]).await;
        assert_eq!(r.headers()["content-encoding"], "br", "{path}");
        let r = get(path, "accept-encoding", &["identity", "gzip"]).await;
        assert_eq!(r.headers()["content-encoding"], "gzip", "{path}");
        let r = get(
            path,
            "accept",
            &["application/n-quads;q=0.1", "application/trig"],
        )
        .await;
        assert!(
            r.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("application/trig"),
            "{path}: {:?}",
            r.headers()["content-type"]
        );
    }
    srv.shutdown().await.unwrap();
}

/// `bytes_out` counts what a compressed response sends: the body's bytes, but for the
/// few of the compressed stream's header and trailer. A bounded replay (compressed on
/// its own, not by a fan-out group) counted the uncompressed text.
#[tokio::test]
async fn bytes_out_counts_compressed_bytes_as_sent() {
    let srv = start().await;
    let c = plain_client();
    publish(&c, &srv, 0, 40).await;
    for path in [
        "items?follow=false&format=nquads",
        "poll?format=nquads&max_items=100",
        "sse?follow=false",
    ] {
        let before = metric(&c, &srv, "jelly_bytes_out_total").await;
        let body = c
            .get(format!("{}/topics/t/{path}", srv.url()))
            .header("accept-encoding", "gzip")
            .send()
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        let counted = metric(&c, &srv, "jelly_bytes_out_total").await - before;
        let sent = body.len() as u64;
        let text = decode_by_hand("gzip", &body);
        assert!(text.len() as u64 > 3 * sent, "{path}: compressed well");
        assert!(
            counted <= sent && counted + 64 >= sent,
            "{path}: counted {counted} of {sent} bytes sent ({} uncompressed)",
            text.len()
        );
    }
}
