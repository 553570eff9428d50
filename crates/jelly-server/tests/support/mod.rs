//! Helpers shared by the server's integration tests.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use jelly_server::Server;

use jelly::{
    Decoder, Event, FramePolicy, JellyReader, JellyWriterBuilder, Statement, StreamOptions, Term,
};

/// A delimited Jelly stream with one frame per group, with tables carried over (so
/// later frames depend on earlier ones: lookup entries, IRI deltas, repeated terms).
pub fn jelly_stream(frames: &[Vec<Statement>], opts: StreamOptions) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut w = JellyWriterBuilder::new(opts)
        .frame_policy(FramePolicy::Manual)
        .build(&mut buf)
        .unwrap();
    for f in frames {
        for st in f {
            w.add(st.as_ref()).unwrap();
        }
        w.flush_frame().unwrap();
    }
    w.finish().unwrap();
    buf
}

pub fn iri(s: &str) -> Term {
    Term::Iri(s.to_string())
}

pub fn triple(s: &str, p: &str, o: &str) -> Statement {
    Statement {
        subject: iri(s),
        predicate: iri(p),
        object: iri(o),
        graph: None,
    }
}

/// One delivered frame, decoded: its metadata (values as UTF-8) and its statements.
#[derive(Debug)]
pub struct DecodedFrame {
    pub meta: HashMap<String, String>,
    pub statements: Vec<Statement>,
}

impl DecodedFrame {
    /// Decodes one bare frame message with `dec` (the subscription's one decoder).
    pub fn decode(dec: &mut Decoder, bytes: &[u8]) -> DecodedFrame {
        let mut cur = dec.frame(bytes);
        let meta = cur
            .metadata()
            .unwrap()
            .into_iter()
            .map(|(k, v)| (k.to_string(), String::from_utf8(v.to_vec()).unwrap()))
            .collect();
        let mut statements = Vec::new();
        while let Some(ev) = cur.next_event().unwrap() {
            if let Event::Statement(s) = ev {
                statements.push(s.to_owned());
            }
        }
        DecodedFrame { meta, statements }
    }

    /// The item's offset (its `offset` metadata).
    pub fn offset(&self) -> u64 {
        self.meta["offset"].parse().unwrap()
    }
}

/// The frames of a delimited Jelly stream, decoded with one decoder as a client would:
/// each frame's `offset` metadata and its statements.
pub fn frames(bytes: &[u8]) -> Vec<(u64, Vec<Statement>)> {
    let mut rd = JellyReader::new(bytes);
    let mut out = Vec::new();
    while let Some(mut f) = rd.next_frame().unwrap() {
        let mut st = Vec::new();
        while let Some(ev) = f.next_event().unwrap() {
            if let Event::Statement(s) = ev {
                st.push(s.to_owned());
            }
        }
        let meta = f.metadata().unwrap();
        let (_, v) = meta.iter().find(|(k, _)| *k == "offset").unwrap();
        out.push((std::str::from_utf8(v).unwrap().parse().unwrap(), st));
    }
    out
}

/// A client with a timeout, so that a test that goes wrong fails instead of hanging.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
}

/// A server with the durable file log in `data`, on an ephemeral port.
pub async fn start_file(data: &Path) -> Server {
    let c = jelly_server::ServerConfig {
        log: jelly_server::config::LogKind::File,
        data: data.to_path_buf(),
        ..jelly_server::ServerConfig::ephemeral()
    };
    Server::start(c).await.unwrap()
}

/// The answer of a GET.
pub async fn get(c: &reqwest::Client, url: &str) -> reqwest::Response {
    c.get(url).send().await.unwrap()
}

/// The JSON answer of a GET (describe a topic, list topics, …).
pub async fn get_json(c: &reqwest::Client, url: &str) -> serde_json::Value {
    c.get(url).send().await.unwrap().json().await.unwrap()
}

/// The body of a GET of `url` that accepts `accept`, as text.
pub async fn get_text(c: &reqwest::Client, url: &str, accept: &str) -> String {
    c.get(url)
        .header("accept", accept)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// The `/metrics` text of the server at `base` (its URL).
pub async fn metrics_text(c: &reqwest::Client, base: &str) -> String {
    get_text(c, &format!("{base}/metrics"), "text/plain").await
}

/// A server-wide metric's value from `/metrics` (a series without labels).
pub async fn metric(c: &reqwest::Client, srv: &Server, name: &str) -> u64 {
    let text = metrics_text(c, &srv.url()).await;
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("metric {name} not found in\n{text}"))
}

/// Waits until `subscribers` subscribers of `topic` have been handed everything published.
pub async fn wait_delivered(srv: &Server, topic: &str, subscribers: usize) {
    let t = srv.state().topics.get(topic).unwrap();
    for _ in 0..3000 {
        let next = t.log.next_offset();
        let subs = t.subscribers();
        if subs.len() >= subscribers
            && subs
                .iter()
                .all(|s| s.position.load(std::sync::atomic::Ordering::Relaxed) >= next)
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("subscribers of {topic} did not get everything");
}

/// The metadata of every frame of a delimited Jelly stream (values as UTF-8), in order.
pub fn frames_with_metadata(bytes: &[u8]) -> Vec<HashMap<String, String>> {
    let mut rd = JellyReader::new(bytes);
    let mut out = Vec::new();
    while let Some(mut f) = rd.next_frame().unwrap() {
        while f.next_event().unwrap().is_some() {}
        let meta = f.metadata().unwrap();
        out.push(
            meta.iter()
                .map(|(k, v)| (k.to_string(), String::from_utf8(v.to_vec()).unwrap()))
                .collect(),
        );
    }
    out
}

/// A fresh temporary directory (`jelly-{tag}-{pid}-{n}` in the system's), removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let p = std::env::temp_dir().join(format!(
            "jelly-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        TempDir(p)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A delimited stream split into its frames (each with its length prefix), so a
/// test can send them one at a time.
pub fn split_delimited(stream: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < stream.len() {
        let (mut len, mut shift, mut j) = (0usize, 0, i);
        loop {
            let b = stream[j];
            len |= ((b & 0x7f) as usize) << shift;
            j += 1;
            if b < 0x80 {
                break;
            }
            shift += 7;
        }
        out.push(stream[i..j + len].to_vec());
        i = j + len;
    }
    out
}

/// A plain-text gRPC channel to the server at `base` (its URL).
pub async fn grpc_channel(base: &str) -> tonic::transport::Channel {
    tonic::transport::Channel::from_shared(base.to_string())
        .unwrap()
        .connect()
        .await
        .unwrap()
}

/// A `SubscribeRdf` call on `topic` of the server at `base`, with ASCII request
/// metadata `md` and binary metadata `bin` (`…-bin` keys).
pub async fn grpc_subscribe(
    base: &str,
    topic: &str,
    md: &[(&'static str, &str)],
    bin: &[(&'static str, &str)],
) -> Result<tonic::Streaming<jelly_server::grpc::messages::Frame>, tonic::Status> {
    use jelly_server::grpc::codec::JellyCodec;
    use jelly_server::grpc::messages::{Frame, Subscribe};
    let mut g = tonic::client::Grpc::new(grpc_channel(base).await);
    g.ready().await.unwrap();
    let mut r = tonic::Request::new(Subscribe {
        topic: topic.to_string(),
        requested_options: None,
    });
    for (k, v) in md {
        r.metadata_mut().insert(*k, v.parse().unwrap());
    }
    for (k, v) in bin {
        r.metadata_mut()
            .insert_bin(*k, tonic::metadata::MetadataValue::from_bytes(v.as_bytes()));
    }
    g.server_streaming(
        r,
        axum::http::uri::PathAndQuery::from_static(jelly_server::grpc::SUBSCRIBE_PATH),
        JellyCodec::<Subscribe, Frame>::new(),
    )
    .await
    .map(tonic::Response::into_inner)
}

/// The response headers and trailers (merged) of one raw gRPC call on its own HTTP/2
/// connection to `addr`, whose request body is `body`; `None` if the whole answer did
/// not come within `wait`. For requests no gRPC client would send (a body that never
/// ends, a bad compressed flag, odd metadata).
pub async fn raw_grpc<B>(
    addr: std::net::SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
    body: B,
    wait: Duration,
) -> Option<axum::http::HeaderMap>
where
    B: http_body::Body<Data = bytes::Bytes> + Send + Unpin + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    use http_body_util::BodyExt as _;
    use hyper_util::rt::{TokioExecutor, TokioIo};
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut send, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
            .await
            .unwrap();
    tokio::spawn(conn);
    let mut req = hyper::Request::builder()
        .method("POST")
        .uri(format!("http://{addr}{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let answer = async {
        let resp = send.send_request(req.body(body).unwrap()).await.unwrap();
        let mut all = resp.headers().clone();
        // A trailers-only answer has its status in the headers; otherwise it follows
        // the messages.
        if all.get("grpc-status").is_none() {
            let collected = resp.into_body().collect().await.unwrap();
            all.extend(collected.trailers().cloned().unwrap_or_default());
        }
        all
    };
    tokio::time::timeout(wait, answer).await.ok()
}

/// Opens a WebSocket by hand on `s`, a socket connected to `srv`, so that frames a
/// client library would never send can be written on it; returns the socket after
/// the 101 answer.
pub async fn raw_ws_upgrade(
    mut s: tokio::net::TcpStream,
    srv: &Server,
    path: &str,
) -> tokio::net::TcpStream {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: {}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        srv.local_addr()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut b = [0u8; 1];
        assert_eq!(
            s.read(&mut b).await.unwrap(),
            1,
            "connection ended in the answer"
        );
        head.push(b[0]);
    }
    assert!(
        head.starts_with(b"HTTP/1.1 101"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    s
}

/// N-Quads text parsed line by line (blank and comment lines skipped).
pub fn parse_nquads(text: &str) -> Vec<Statement> {
    text.lines()
        .enumerate()
        .filter_map(|(i, l)| jelly::nquads::parse_line(l, i + 1).unwrap())
        .collect()
}

/// The first `n` lines of the nanopubs dataset (quads in named graphs, many
/// namespaces and datatypes, no blank nodes), one per line.
pub fn nanopub_lines(n: usize) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/datasets/nanopubs-fair-pkd/nanopubs-fair-pkd.nq");
    let text = std::fs::read_to_string(path).unwrap();
    let mut out = String::new();
    for l in text.lines().take(n) {
        out.push_str(l);
        out.push('\n');
    }
    out
}

/// Publishes the lines of `text` to `topic` over HTTP, `per_item` lines per item (one
/// atomic N-Quads POST each).
pub async fn publish_nquads_items(srv: &Server, topic: &str, text: &str, per_item: usize) {
    let lines: Vec<&str> = text.lines().collect();
    let http = reqwest::Client::new();
    for chunk in lines.chunks(per_item) {
        let r = http
            .post(format!("{}/topics/{topic}/items", srv.url()))
            .header("content-type", "application/n-quads")
            .body(chunk.join("\n"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), reqwest::StatusCode::OK);
    }
}
