//! Security on real loopback sockets: TLS with a test CA made at test time (verified
//! by reqwest, curl and a tonic client), bearer tokens and rights on every endpoint,
//! the per-address connection limit, and SO_REUSEPORT.

mod support;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::http::uri::PathAndQuery;
use bytes::Bytes;
use futures_util::SinkExt as _;
use jelly::{
    Decoder, Encoder, FramePolicy, JellyWriterBuilder, PhysicalType, Statement, StreamOptions,
};
use jelly_server::grpc::codec::JellyCodec;
use jelly_server::grpc::messages::{Frame, Received, Subscribe};
use jelly_server::grpc::{PUBLISH_PATH, SUBSCRIBE_PATH};
use jelly_server::{Server, ServerConfig};
use reqwest::{Method, StatusCode};
use serde_json::Value;
use support::{DecodedFrame, triple};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpSocket, TcpStream};
use tokio_tungstenite::connect_async;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::{self, Message};
use tonic::transport::{Certificate, Channel, ClientTlsConfig};
use tonic::{Code, Request};

const NQ: &str = "application/n-quads";
const JELLY: &str = "application/x-jelly-rdf";
/// Guard against a hung test (never asserted on).
const LIMIT: Duration = Duration::from_secs(20);

// ---------------------------------------------------------------------------------
// A test PKI: a CA and a server certificate for localhost and 127.0.0.1.

/// PEM files in a fresh temporary directory (removed on drop).
struct Pki {
    dir: PathBuf,
    ca_pem: String,
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn temp_dir() -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let d = std::env::temp_dir().join(format!(
        "jelly-security-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn new_ca(name: &str) -> rcgen::CertifiedIssuer<'static, rcgen::KeyPair> {
    let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    p.distinguished_name
        .push(rcgen::DnType::CommonName, name.to_string());
    p.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
    ];
    rcgen::CertifiedIssuer::self_signed(p, rcgen::KeyPair::generate().unwrap()).unwrap()
}

fn pki() -> Pki {
    let ca = new_ca("jellyfish test CA");
    let key = rcgen::KeyPair::generate().unwrap();
    let mut p =
        rcgen::CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .unwrap();
    p.distinguished_name
        .push(rcgen::DnType::CommonName, "localhost");
    let cert = p.signed_by(&key, &ca).unwrap();
    let dir = temp_dir();
    let pki = Pki {
        ca_pem: ca.pem(),
        ca: dir.join("ca.pem"),
        cert: dir.join("cert.pem"),
        key: dir.join("key.pem"),
        dir,
    };
    std::fs::write(&pki.ca, &pki.ca_pem).unwrap();
    std::fs::write(&pki.cert, cert.pem()).unwrap();
    std::fs::write(&pki.key, key.serialize_pem()).unwrap();
    pki
}

async fn start_tls(pki: &Pki, f: impl FnOnce(&mut ServerConfig)) -> Server {
    let mut c = ServerConfig::ephemeral();
    c.tls = Some(jelly_server::tls::TlsConfig {
        cert: pki.cert.clone(),
        key: pki.key.clone(),
    });
    f(&mut c);
    Server::start(c).await.unwrap()
}

/// A rustls client configuration that trusts only `ca_pem`.
fn client_tls(ca_pem: &str, alpn: &[&[u8]]) -> rustls::ClientConfig {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject as _;
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut c = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    c.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    c
}

/// A real HTTPS client: hyper (HTTP/2 when ALPN picks it, else HTTP/1.1) over
/// tokio-rustls, verifying the server against the roots of `tls`.
struct HttpsClient {
    connector: tokio_rustls::TlsConnector,
}

/// An answer: protocol version, status, body.
type Answer = (hyper::Version, u16, String);

impl HttpsClient {
    fn new(ca_pem: &str, alpn: &[&[u8]]) -> HttpsClient {
        HttpsClient {
            connector: tokio_rustls::TlsConnector::from(Arc::new(client_tls(ca_pem, alpn))),
        }
    }

    /// One request on a new connection; `Err` says where it failed.
    async fn send(
        &self,
        addr: SocketAddr,
        method: &str,
        path: &str,
        body: Option<(&str, String)>,
    ) -> Result<Answer, String> {
        use http_body_util::{BodyExt as _, Full};
        use hyper_util::rt::{TokioExecutor, TokioIo};
        let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let tls = self
            .connector
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS handshake: {e}"))?;
        let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
        let mut req = hyper::Request::builder()
            .method(method)
            .uri(format!("https://localhost:{}{path}", addr.port()));
        if !h2 {
            req = req.header("host", format!("localhost:{}", addr.port()));
        }
        let req = match body {
            Some((ct, b)) => req
                .header("content-type", ct)
                .body(Full::new(Bytes::from(b))),
            None => req.body(Full::new(Bytes::new())),
        }
        .unwrap();
        let io = TokioIo::new(tls);
        let resp = if h2 {
            let (mut send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                .await
                .map_err(|e| e.to_string())?;
            tokio::spawn(conn);
            send.send_request(req).await
        } else {
            let (mut send, conn) = hyper::client::conn::http1::handshake(io)
                .await
                .map_err(|e| e.to_string())?;
            tokio::spawn(conn);
            send.send_request(req).await
        }
        .map_err(|e| e.to_string())?;
        let version = resp.version();
        let status = resp.status().as_u16();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&body.to_bytes()).into_owned();
        Ok((version, status, text))
    }
}

fn nquad(i: usize) -> String {
    format!("<http://ex.org/s{i}> <http://ex.org/p> <http://ex.org/o{i}> .\n")
}

// ---------------------------------------------------------------------------------
// TLS

#[tokio::test]
async fn https_with_a_test_ca_publish_and_subscribe() {
    let pki = pki();
    let srv = start_tls(&pki, |_| {}).await;
    let base = srv.url();
    assert!(base.starts_with("https://127.0.0.1:"), "{base}");

    // HTTP/2 (chosen by ALPN) and HTTP/1.1, both verifying the test CA.
    let addr = srv.local_addr();
    for (alpn, version, i) in [
        (
            &[b"h2".as_slice(), b"http/1.1"][..],
            hyper::Version::HTTP_2,
            0,
        ),
        (&[b"http/1.1".as_slice()][..], hyper::Version::HTTP_11, 1),
    ] {
        let client = HttpsClient::new(&pki.ca_pem, alpn);
        let (v, status, body) = client
            .send(addr, "POST", "/topics/tls/items", Some((NQ, nquad(i))))
            .await
            .unwrap();
        assert_eq!((v, status), (version, 200), "{body}");
        let (v, status, body) = client
            .send(
                addr,
                "GET",
                "/topics/tls/items?follow=false&format=nquads",
                None,
            )
            .await
            .unwrap();
        assert_eq!((v, status), (version, 200));
        assert!(body.contains(&format!("<http://ex.org/o{i}>")), "{body}");
    }

    // A client that trusts another CA fails the handshake and gets no answer.
    let other = new_ca("some other CA");
    let stranger = HttpsClient::new(&other.pem(), &[b"h2", b"http/1.1"]);
    let e = stranger
        .send(addr, "GET", "/health", None)
        .await
        .unwrap_err();
    assert!(e.starts_with("TLS handshake"), "{e}");
    // Plain HTTP to the TLS port is answered in plain HTTP: a 400 that names the
    // mistake, not a TLS alert the client would show as garbage.
    let plain = reqwest::Client::builder().timeout(LIMIT).build().unwrap();
    let url = format!("http://{addr}/health");
    let r = plain.get(url).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let v: Value = r.json().await.unwrap();
    assert!(v["error"].as_str().unwrap().contains("use https://"), "{v}");
    // The server counted the failed handshakes (they end on their own task).
    let m = &srv.state().metrics;
    let t0 = std::time::Instant::now();
    while m.tls_handshakes_failed.load(Ordering::Relaxed) < 2 && t0.elapsed() < LIMIT {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(m.tls_handshakes_failed.load(Ordering::Relaxed) >= 2);

    // Shutdown ends a live subscription over TLS, which gets what was there.
    let live = tokio::spawn(async move {
        HttpsClient::new(&pki.ca_pem, &[b"h2"])
            .send(addr, "GET", "/topics/tls/items?format=nquads", None)
            .await
    });
    let t0 = std::time::Instant::now();
    while srv
        .state()
        .topics
        .get("tls")
        .unwrap()
        .subscribers()
        .is_empty()
    {
        assert!(t0.elapsed() < LIMIT, "the live subscription did not start");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::timeout(LIMIT, srv.shutdown())
        .await
        .unwrap()
        .unwrap();
    let (_, status, body) = live.await.unwrap().unwrap();
    assert_eq!(status, 200);
    assert!(body.contains("<http://ex.org/o0>") && body.contains("<http://ex.org/o1>"));
}

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

/// Runs curl without blocking the runtime (the server runs on the same thread).
async fn curl(args: &[&str]) -> std::process::Output {
    tokio::process::Command::new("curl")
        .args(["-sS", "--max-time", "20"])
        .args(args)
        .output()
        .await
        .unwrap()
}

#[tokio::test]
async fn curl_verifies_the_test_ca_and_sends_a_token() {
    require_curl();
    let pki = pki();
    let srv = start_tls(&pki, |c| {
        c.auth = Some(
            toml::from_str(
                "tokens = [ { token = \"curl-secret\", publish = [\"c\"], subscribe = [\"c\"] } ]",
            )
            .unwrap(),
        );
    })
    .await;
    let base = srv.url();
    let ca = pki.ca.to_str().unwrap();
    let url = format!("{base}/topics/c/items");
    let out = curl(&[
        "--cacert",
        ca,
        "-H",
        "Authorization: Bearer curl-secret",
        "-H",
        "Content-Type: application/n-quads",
        "--data-binary",
        &nquad(7),
        "-w",
        "\n%{http_code} %{http_version}",
        &url,
    ])
    .await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text} {:?}", out.stderr);
    assert!(text.ends_with("\n200 2"), "publish over h2: {text}");
    let out = curl(&[
        "--cacert",
        ca,
        "-H",
        "Authorization: Bearer curl-secret",
        &format!("{url}?follow=false&format=nquads"),
    ])
    .await;
    assert!(String::from_utf8_lossy(&out.stdout).contains("<http://ex.org/o7>"));
    // Without a token: 401.
    let out = curl(&[
        "--cacert",
        ca,
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        &url,
    ])
    .await;
    assert_eq!(String::from_utf8_lossy(&out.stdout), "401");
    // Without the test CA curl refuses the server (60: peer certificate not trusted).
    let out = curl(&[&format!("{base}/health")]).await;
    assert_eq!(out.status.code(), Some(60), "{:?}", out);
    srv.shutdown().await.unwrap();
}

fn triples_frames(range: std::ops::Range<usize>) -> Vec<Bytes> {
    let mut enc =
        Encoder::new(StreamOptions::small().with_physical_type(PhysicalType::Triples)).unwrap();
    range
        .map(|i| {
            enc.add(statement(i).as_ref()).unwrap();
            Bytes::from(enc.finish_frame())
        })
        .collect()
}

fn statement(i: usize) -> Statement {
    triple(
        &format!("http://ex.org/s{i}"),
        "http://ex.org/p",
        &format!("http://ex.org/o{i}"),
    )
}

async fn grpc_publish(
    ch: &Channel,
    topic: &str,
    token: Option<&str>,
    frames: Vec<Bytes>,
) -> Result<(), tonic::Status> {
    let mut g = tonic::client::Grpc::new(ch.clone());
    g.ready().await.unwrap();
    let mut r = Request::new(futures_util::stream::iter(frames.into_iter().map(Frame)));
    r.metadata_mut()
        .insert("x-jelly-topic", topic.parse().unwrap());
    if let Some(t) = token {
        r.metadata_mut()
            .insert("authorization", format!("Bearer {t}").parse().unwrap());
    }
    g.client_streaming(
        r,
        PathAndQuery::from_static(PUBLISH_PATH),
        JellyCodec::<Frame, Received>::new(),
    )
    .await
    .map(drop)
}

async fn grpc_subscribe(
    ch: &Channel,
    topic: &str,
    token: Option<&str>,
) -> Result<tonic::Streaming<Frame>, tonic::Status> {
    let mut g = tonic::client::Grpc::new(ch.clone());
    g.ready().await.unwrap();
    let mut r = Request::new(Subscribe {
        topic: topic.to_string(),
        requested_options: None,
    });
    if let Some(t) = token {
        r.metadata_mut()
            .insert("authorization", format!("Bearer {t}").parse().unwrap());
    }
    g.server_streaming(
        r,
        PathAndQuery::from_static(SUBSCRIBE_PATH),
        JellyCodec::<Subscribe, Frame>::new(),
    )
    .await
    .map(tonic::Response::into_inner)
}

#[tokio::test]
async fn grpc_over_tls_with_a_test_ca() {
    let pki = pki();
    let srv = start_tls(&pki, |_| {}).await;
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(&pki.ca_pem))
        .domain_name("localhost");
    let ch = Channel::from_shared(srv.url())
        .unwrap()
        .tls_config(tls)
        .unwrap()
        .connect()
        .await
        .unwrap();
    grpc_publish(&ch, "g", None, triples_frames(0..3))
        .await
        .unwrap();
    let mut stream = grpc_subscribe(&ch, "g", None).await.unwrap();
    let mut dec = Decoder::default();
    for i in 0..3 {
        let f = tokio::time::timeout(LIMIT, stream.message())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let got = DecodedFrame::decode(&mut dec, &f.0);
        assert_eq!(got.offset(), i as u64);
        // A triple in a quads topic comes back in the default graph.
        assert_eq!(got.statements.len(), 1);
        assert_eq!(got.statements[0].object, statement(i).object);
    }
    // A channel that trusts another CA cannot connect.
    let other = new_ca("some other CA");
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(other.pem()))
        .domain_name("localhost");
    let r = Channel::from_shared(srv.url())
        .unwrap()
        .tls_config(tls)
        .unwrap()
        .connect()
        .await;
    assert!(r.is_err());
    drop(stream);
    srv.shutdown().await.unwrap();
}

// ---------------------------------------------------------------------------------
// Tokens and rights

const PUB: &str = "pub-secret";
const SUB: &str = "sub-secret";
const ADMIN: &str = "admin-secret";
const WRONG: &str = "not-a-token";

/// Tokens: `PUB` publishes to `t`, `SUB` subscribes to `t` (given as a SHA-256),
/// `ADMIN` may do anything; with `anonymous`, anyone may subscribe to `public-*`.
fn auth_config(anonymous: bool) -> jelly_server::auth::AuthConfig {
    let anonymous = if anonymous {
        "anonymous_subscribe = [\"public-*\"]"
    } else {
        ""
    };
    let sub_sha256 = {
        let d = ring::digest::digest(&ring::digest::SHA256, SUB.as_bytes());
        d.as_ref()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    toml::from_str(&format!(
        r#"
        {anonymous}
        tokens = [
          {{ name = "publisher", token = "{PUB}", publish = ["t"] }},
          {{ name = "reader", token_sha256 = "{sub_sha256}", subscribe = ["t"] }},
          {{ token = "{ADMIN}", admin = true }},
        ]
        "#
    ))
    .unwrap()
}

async fn start_with_auth(anonymous: bool) -> Server {
    let mut c = ServerConfig::ephemeral();
    c.auth = Some(auth_config(anonymous));
    c.sse_keepalive_secs = 1;
    Server::start(c).await.unwrap()
}

/// One endpoint of the table.
#[derive(Clone, Copy)]
enum Call {
    /// An HTTP request: method, path, content type and body.
    Http(&'static str, &'static str, Option<&'static str>, Body),
    /// A WebSocket upgrade of this path.
    Ws(&'static str),
    GrpcSubscribe,
    GrpcPublish,
}

#[derive(Clone, Copy)]
enum Body {
    None,
    NQuads,
    JellyStream,
}

/// What a call got: an HTTP status (101 for an accepted WebSocket upgrade) or a
/// gRPC code, with the `WWW-Authenticate` header of an HTTP answer.
#[derive(Debug, PartialEq)]
enum Outcome {
    Http(u16, Option<String>),
    Grpc(Code),
}

fn jelly_stream() -> Vec<u8> {
    let mut buf = Vec::new();
    let mut w = JellyWriterBuilder::new(StreamOptions::small())
        .frame_policy(FramePolicy::Manual)
        .build(&mut buf)
        .unwrap();
    w.add(statement(100).as_ref()).unwrap();
    w.flush_frame().unwrap();
    w.finish().unwrap();
    buf
}

struct Caller {
    srv_addr: SocketAddr,
    base: String,
    http: reqwest::Client,
    grpc: Channel,
}

impl Caller {
    async fn new(srv: &Server) -> Caller {
        Caller {
            srv_addr: srv.local_addr(),
            base: srv.url(),
            http: reqwest::Client::builder().timeout(LIMIT).build().unwrap(),
            grpc: Channel::from_shared(srv.url())
                .unwrap()
                .connect()
                .await
                .unwrap(),
        }
    }

    async fn call(&self, call: Call, token: Option<&str>) -> Outcome {
        match call {
            Call::Http(method, path, ct, body) => {
                let method: Method = method.parse().unwrap();
                let mut r = self.http.request(method, format!("{}{path}", self.base));
                if let Some(t) = token {
                    r = r.bearer_auth(t);
                }
                if let Some(ct) = ct {
                    r = r.header("content-type", ct);
                }
                r = match body {
                    Body::None => r,
                    Body::NQuads => r.body(nquad(1)),
                    Body::JellyStream => r.body(jelly_stream()),
                };
                let resp = r.send().await.unwrap();
                let challenge = resp
                    .headers()
                    .get("www-authenticate")
                    .map(|v| v.to_str().unwrap().to_string());
                Outcome::Http(resp.status().as_u16(), challenge)
            }
            Call::Ws(path) => {
                let mut req = format!("ws://{}{path}", self.srv_addr)
                    .into_client_request()
                    .unwrap();
                if let Some(t) = token {
                    req.headers_mut()
                        .insert("authorization", format!("Bearer {t}").parse().unwrap());
                }
                ws_outcome(req).await
            }
            Call::GrpcSubscribe => match grpc_subscribe(&self.grpc, "t", token).await {
                Ok(_) => Outcome::Grpc(Code::Ok),
                Err(st) => Outcome::Grpc(st.code()),
            },
            Call::GrpcPublish => {
                match grpc_publish(&self.grpc, "t", token, triples_frames(200..201)).await {
                    Ok(()) => Outcome::Grpc(Code::Ok),
                    Err(st) => Outcome::Grpc(st.code()),
                }
            }
        }
    }
}

async fn ws_outcome(req: tungstenite::handshake::client::Request) -> Outcome {
    match connect_async(req).await {
        Ok((mut ws, resp)) => {
            let _ = ws.close(None).await;
            Outcome::Http(resp.status().as_u16(), None)
        }
        Err(tungstenite::Error::Http(resp)) => Outcome::Http(
            resp.status().as_u16(),
            resp.headers()
                .get("www-authenticate")
                .map(|v| v.to_str().unwrap().to_string()),
        ),
        Err(e) => panic!("WebSocket connect failed: {e}"),
    }
}

fn unauthenticated(call: Call, o: &Outcome) -> bool {
    match (call, o) {
        (Call::GrpcSubscribe | Call::GrpcPublish, Outcome::Grpc(c)) => *c == Code::Unauthenticated,
        (_, Outcome::Http(401, Some(challenge))) => challenge.starts_with("Bearer"),
        _ => false,
    }
}

fn forbidden(call: Call, o: &Outcome) -> bool {
    match (call, o) {
        (Call::GrpcSubscribe | Call::GrpcPublish, Outcome::Grpc(c)) => *c == Code::PermissionDenied,
        (_, Outcome::Http(s, _)) => *s == 403,
        _ => false,
    }
}

fn next_offset(srv: &Server, topic: &str) -> u64 {
    srv.state()
        .topics
        .get(topic)
        .map(|t| t.log.next_offset())
        .unwrap_or(0)
}

#[tokio::test]
async fn every_endpoint_enforces_rights() {
    let srv = start_with_auth(false).await;
    let c = Caller::new(&srv).await;
    // The topics exist, so refusals cannot be "not found".
    for name in ["t"] {
        let r = c
            .call(
                Call::Http("PUT", leak(format!("/topics/{name}")), None, Body::None),
                Some(ADMIN),
            )
            .await;
        assert_eq!(r, Outcome::Http(201, None));
    }

    // Endpoint, the token with the right, a token without it, and the answer to the right one.
    let table: &[(&str, Call, &str, &str, Outcome)] = &[
        (
            "list topics",
            Call::Http("GET", "/topics", None, Body::None),
            SUB,
            PUB,
            Outcome::Http(200, None),
        ),
        (
            "describe",
            Call::Http("GET", "/topics/t", None, Body::None),
            SUB,
            PUB,
            Outcome::Http(200, None),
        ),
        (
            "create",
            Call::Http("PUT", "/topics/made", None, Body::None),
            ADMIN,
            PUB,
            Outcome::Http(201, None),
        ),
        (
            "publish",
            Call::Http("POST", "/topics/t/items", Some(NQ), Body::NQuads),
            PUB,
            SUB,
            Outcome::Http(200, None),
        ),
        (
            "publish ?stream=true",
            Call::Http(
                "POST",
                "/topics/t/items?stream=true",
                Some(JELLY),
                Body::JellyStream,
            ),
            PUB,
            SUB,
            Outcome::Http(200, None),
        ),
        (
            "subscribe (stream)",
            Call::Http("GET", "/topics/t/items?follow=false", None, Body::None),
            SUB,
            PUB,
            Outcome::Http(200, None),
        ),
        (
            "long-poll",
            Call::Http("GET", "/topics/t/poll", None, Body::None),
            SUB,
            PUB,
            Outcome::Http(200, None),
        ),
        (
            "SSE",
            Call::Http("GET", "/topics/t/sse?follow=false", None, Body::None),
            SUB,
            PUB,
            Outcome::Http(200, None),
        ),
        (
            "metrics",
            Call::Http("GET", "/metrics", None, Body::None),
            ADMIN,
            SUB,
            Outcome::Http(200, None),
        ),
        (
            "WebSocket subscribe",
            Call::Ws("/topics/t/ws?follow=false"),
            SUB,
            PUB,
            Outcome::Http(101, None),
        ),
        (
            "WebSocket publish",
            Call::Ws("/topics/t/ws/publish"),
            PUB,
            SUB,
            Outcome::Http(101, None),
        ),
        (
            "gRPC SubscribeRdf",
            Call::GrpcSubscribe,
            SUB,
            PUB,
            Outcome::Grpc(Code::Ok),
        ),
        (
            "gRPC PublishRdf",
            Call::GrpcPublish,
            PUB,
            SUB,
            Outcome::Grpc(Code::Ok),
        ),
    ];
    for (name, call, good, bad, ok) in table {
        let before = next_offset(&srv, "t");
        for (who, token) in [("no token", None), ("a wrong token", Some(WRONG))] {
            let o = c.call(*call, token).await;
            assert!(unauthenticated(*call, &o), "{name} with {who}: {o:?}");
        }
        let o = c.call(*call, Some(bad)).await;
        assert!(
            forbidden(*call, &o),
            "{name} with a token without the right: {o:?}"
        );
        assert_eq!(
            next_offset(&srv, "t"),
            before,
            "{name}: a refused request appended"
        );
        assert!(srv.state().topics.get("made").is_none() || *name != "create");
        let o = c.call(*call, Some(good)).await;
        assert_eq!(&o, ok, "{name} with the right token");
        // The admin token may do everything.
        if !matches!(call, Call::Http("PUT", ..)) {
            let o = c.call(*call, Some(ADMIN)).await;
            assert_eq!(&o, ok, "{name} with the admin token");
        }
    }
    assert!(
        next_offset(&srv, "t") >= 4,
        "the allowed publishes appended"
    );
    // /health stays open.
    let o = c
        .call(Call::Http("GET", "/health", None, Body::None), None)
        .await;
    assert_eq!(o, Outcome::Http(200, None));
    let m = &srv.state().metrics;
    assert!(m.auth_unauthenticated.load(Ordering::Relaxed) >= 26);
    assert!(m.auth_forbidden.load(Ordering::Relaxed) >= 13);
    srv.shutdown().await.unwrap();
}

/// A `'static` path for the table's calls.
fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

#[tokio::test]
async fn listings_rights_anonymous_and_query_tokens() {
    let srv = start_with_auth(true).await;
    let c = Caller::new(&srv).await;
    let http = &c.http;
    let base = &c.base;
    for name in ["t", "u", "public-x"] {
        let r = http
            .put(format!("{base}/topics/{name}"))
            .bearer_auth(ADMIN)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::CREATED);
    }
    let names = |v: Value| -> Vec<String> {
        v["topics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    };
    let list = |token: Option<&'static str>| {
        let mut r = http.get(format!("{base}/topics"));
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        async move { r.send().await.unwrap().json::<Value>().await.unwrap() }
    };
    // Listings show what the caller may read: a token's rights add to the anonymous
    // ones.
    assert_eq!(names(list(Some(SUB)).await), ["public-x", "t"]);
    let r = get_with(
        http,
        &format!("{base}/topics/public-x/items?follow=false"),
        PUB,
    )
    .await;
    assert_eq!(
        r.status(),
        StatusCode::OK,
        "a publish-only token reads public topics"
    );
    // A method no route takes is 405 with `Allow`, for anyone: no right would help.
    for token in [None, Some(SUB)] {
        let mut r = http.post(format!("{base}/topics"));
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        let r = r.send().await.unwrap();
        assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED, "{token:?}");
        assert!(r.headers().contains_key("allow"));
    }
    assert_eq!(names(list(Some(ADMIN)).await), ["public-x", "t", "u"]);
    assert_eq!(names(list(None).await), ["public-x"]);

    // Anonymous callers read public topics, nothing else, and publish nowhere.
    let get = |path: String, token: Option<&'static str>| {
        let mut r = http.get(format!("{base}{path}"));
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        async move { r.send().await.unwrap() }
    };
    let r = get("/topics/public-x/items?follow=false".into(), None).await;
    assert_eq!(r.status(), StatusCode::OK);
    let r = get("/topics/u/items?follow=false".into(), None).await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["right"], "subscribe");
    assert!(e["error"].as_str().unwrap().contains("bearer token"), "{e}");
    let r = http
        .post(format!("{base}/topics/public-x/items"))
        .header("content-type", NQ)
        .body(nquad(1))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(next_offset(&srv, "public-x"), 0);

    // Rights come before existence: no probing for topic names.
    let r = get("/topics/nowhere".into(), None).await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let r = get("/topics/nowhere".into(), Some(SUB)).await;
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let e: Value = r.json().await.unwrap();
    assert!(
        e["error"].as_str().unwrap().contains("token `reader`"),
        "{e}"
    );
    assert!(!e.to_string().contains(SUB), "the token is not echoed: {e}");
    let r = get("/topics/nowhere".into(), Some(ADMIN)).await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    // A publish right on a missing topic creates it on first publish.
    let r = http
        .post(format!("{base}/topics/t/items"))
        .bearer_auth(PUB)
        .header("content-type", NQ)
        .body(nquad(2))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    // A malformed Authorization header is a 401 with invalid_request.
    let r = http
        .get(format!("{base}/topics/t"))
        .header("authorization", format!("Basic {SUB}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let ch = r.headers()["www-authenticate"].to_str().unwrap();
    assert!(ch.contains("invalid_request"), "{ch}");
    // So are two Authorization headers, even if one is good: a proxy in front may
    // act on the other one.
    let r = http
        .get(format!("{base}/topics/t"))
        .header("authorization", format!("Bearer {SUB}"))
        .header("authorization", "Bearer nope")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let e: Value = r.json().await.unwrap();
    assert!(
        e["error"].as_str().unwrap().contains("more than one"),
        "{e}"
    );

    // ?access_token= on SSE and WebSocket routes (browsers cannot set headers there),
    // and nowhere else.
    let r = get(
        format!("/topics/t/sse?follow=false&access_token={SUB}"),
        None,
    )
    .await;
    assert_eq!(r.status(), StatusCode::OK);
    let r = get(
        format!("/topics/t/sse?follow=false&access_token={WRONG}"),
        None,
    )
    .await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let r = get(
        format!("/topics/t/items?follow=false&access_token={SUB}"),
        None,
    )
    .await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let ws = |path: String| {
        let req = format!("ws://{}{path}", srv.local_addr())
            .into_client_request()
            .unwrap();
        ws_outcome(req)
    };
    let o = ws(format!("/topics/t/ws?follow=false&access_token={SUB}")).await;
    assert_eq!(o, Outcome::Http(101, None));
    let o = ws(format!("/topics/t/ws?follow=false&access_token={PUB}")).await;
    assert_eq!(
        o,
        Outcome::Http(
            403,
            Some("Bearer realm=\"jellyfish\", error=\"insufficient_scope\"".into())
        )
    );
    // WebSocket publish with a query token: the item is acknowledged and appended.
    let before = next_offset(&srv, "t");
    let req = format!(
        "ws://{}/topics/t/ws/publish?access_token={PUB}",
        srv.local_addr()
    )
    .into_client_request()
    .unwrap();
    let (mut publ, _) = connect_async(req).await.unwrap();
    publ.send(Message::Text(nquad(3).into())).await.unwrap();
    let ack = loop {
        match tokio::time::timeout(LIMIT, futures_util::StreamExt::next(&mut publ))
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            Message::Text(t) => break serde_json::from_str::<Value>(&t).unwrap(),
            _ => continue,
        }
    };
    assert_eq!(ack["offset"], before, "{ack}");
    assert_eq!(next_offset(&srv, "t"), before + 1);
    let _ = publ.close(None).await;

    // Changing a topic's retention needs admin too; refused changes change nothing.
    for (token, status) in [
        (Some(PUB), StatusCode::FORBIDDEN),
        (Some(SUB), StatusCode::FORBIDDEN),
        (None, StatusCode::UNAUTHORIZED),
        (Some(ADMIN), StatusCode::OK),
    ] {
        let mut r = http
            .patch(format!("{base}/topics/t"))
            .body(r#"{"retention_items": 77}"#);
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        let r = r.send().await.unwrap();
        assert_eq!(r.status(), status, "{token:?}");
        let items = srv
            .state()
            .topics
            .get("t")
            .unwrap()
            .options()
            .retention_items;
        assert_eq!(items == 77, status == StatusCode::OK, "{token:?}");
    }

    // Deleting a topic needs admin: a publisher or subscriber of it is refused (403),
    // a caller without a token is asked for one (401), and the topic stays.
    for (token, status) in [
        (Some(PUB), StatusCode::FORBIDDEN),
        (Some(SUB), StatusCode::FORBIDDEN),
        (None, StatusCode::UNAUTHORIZED),
        (Some(ADMIN), StatusCode::OK),
    ] {
        let mut r = http.delete(format!("{base}/topics/t"));
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        let r = r.send().await.unwrap();
        assert_eq!(r.status(), status, "{token:?}");
        assert_eq!(
            srv.state().topics.get("t").is_some(),
            status != StatusCode::OK,
            "{token:?}"
        );
    }
    srv.shutdown().await.unwrap();
}

#[tokio::test]
async fn public_metrics_and_token_file() {
    let dir = temp_dir();
    let file = dir.join("tokens.toml");
    std::fs::write(
        &file,
        "tokens = [ { name = \"from-file\", token = \"file-secret\", subscribe = [\"*\"] } ]\n",
    )
    .unwrap();
    let mut c = ServerConfig::ephemeral();
    c.auth = Some(
        toml::from_str(&format!(
            "public_metrics = true\ntoken_file = {:?}",
            file.to_str().unwrap()
        ))
        .unwrap(),
    );
    let srv = Server::start(c).await.unwrap();
    let http = reqwest::Client::new();
    let base = srv.url();
    let r = http.get(format!("{base}/metrics")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let r = http
        .get(format!("{base}/topics"))
        .bearer_auth("file-secret")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let r = http.get(format!("{base}/topics")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    srv.shutdown().await.unwrap();

    // A broken token file stops the start, naming the file.
    std::fs::write(&file, "tokens = [ { token = \"x\", publish = [\"a*b\"] } ]").unwrap();
    let mut c = ServerConfig::ephemeral();
    c.auth = Some(toml::from_str(&format!("token_file = {:?}", file.to_str().unwrap())).unwrap());
    let e = Server::start(c).await.err().unwrap();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    assert!(e.to_string().contains("`*`"), "{e}");
    // So does a pattern no topic name can match (topic names have no `/`).
    std::fs::write(
        &file,
        "tokens = [ { token = \"x\", publish = [\"sensors/*\"] } ]",
    )
    .unwrap();
    let mut c = ServerConfig::ephemeral();
    c.auth = Some(toml::from_str(&format!("token_file = {:?}", file.to_str().unwrap())).unwrap());
    let e = Server::start(c).await.err().unwrap();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    assert!(
        e.to_string().contains("sensors/*") && e.to_string().contains("never match"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

// ---------------------------------------------------------------------------------
// Connection limits and SO_REUSEPORT

/// Connects from `source` (any loopback address) to `to`.
async fn connect_from(source: &str, to: SocketAddr) -> TcpStream {
    let s = TcpSocket::new_v4().unwrap();
    s.bind(format!("{source}:0").parse().unwrap()).unwrap();
    s.connect(to).await.unwrap()
}

/// Sends `GET /health` on a raw connection (keep-alive) and returns the status line,
/// or `None` if the server closed the connection without an answer.
async fn health_over(tcp: &mut TcpStream) -> Option<String> {
    let req = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
    if tcp.write_all(req).await.is_err() {
        return None;
    }
    let mut buf = vec![0u8; 4096];
    let mut got = Vec::new();
    loop {
        let n = match tokio::time::timeout(LIMIT, tcp.read(&mut buf))
            .await
            .unwrap()
        {
            Ok(0) | Err(_) => return None,
            Ok(n) => n,
        };
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got);
        // The body is small JSON ending in `}`.
        if text.contains("\r\n\r\n") && text.trim_end().ends_with('}') {
            return text.lines().next().map(str::to_string);
        }
    }
}

#[tokio::test]
async fn connections_per_address_are_limited() {
    let mut c = ServerConfig::ephemeral();
    c.max_connections_per_ip = 3;
    let srv = Server::start(c).await.unwrap();
    let addr = srv.local_addr();
    let mut held = Vec::new();
    for _ in 0..3 {
        let mut tcp = connect_from("127.0.0.1", addr).await;
        assert_eq!(
            health_over(&mut tcp).await.as_deref(),
            Some("HTTP/1.1 200 OK")
        );
        held.push(tcp);
    }
    // A fourth from the same address is closed without an answer ...
    let mut fourth = connect_from("127.0.0.1", addr).await;
    assert_eq!(health_over(&mut fourth).await, None);
    let m = &srv.state().metrics;
    assert_eq!(m.connections_refused.load(Ordering::Relaxed), 1);
    // ... while another address is served.
    let mut other = connect_from("127.0.0.2", addr).await;
    assert_eq!(
        health_over(&mut other).await.as_deref(),
        Some("HTTP/1.1 200 OK")
    );
    // The held connections still work; closing one frees its place.
    assert!(health_over(&mut held[0]).await.is_some());
    drop(held.pop());
    let t0 = std::time::Instant::now();
    loop {
        let mut tcp = connect_from("127.0.0.1", addr).await;
        if health_over(&mut tcp).await.is_some() {
            break;
        }
        assert!(
            t0.elapsed() < LIMIT,
            "the closed connection's place was not freed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let metrics = support::metrics_text(&reqwest::Client::new(), &srv.url()).await;
    assert!(
        metrics.contains("jelly_connections_refused_total "),
        "{metrics}"
    );
    drop(held);
    srv.shutdown().await.unwrap();
}

#[tokio::test]
async fn reuse_port_lets_two_servers_share_a_port() {
    let mut c = ServerConfig::ephemeral();
    c.reuse_port = true;
    let a = Server::start(c.clone()).await.unwrap();
    c.listen = a.local_addr();
    let b = Server::start(c.clone()).await.unwrap();
    assert_eq!(a.local_addr(), b.local_addr());
    // Without reuse_port the port is taken.
    c.reuse_port = false;
    let e = Server::start(c).await.err().unwrap();
    assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse);

    // The kernel spreads new connections over both: only `a` has topic `here`.
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(LIMIT)
        .build()
        .unwrap();
    let r = http
        .put(format!("{}/topics/here", a.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let (mut on_a, mut on_b) = (0, 0);
    for _ in 0..64 {
        let r = http
            .get(format!("{}/topics/here", a.url()))
            .send()
            .await
            .unwrap();
        match r.status() {
            StatusCode::OK => on_a += 1,
            StatusCode::NOT_FOUND => on_b += 1,
            s => panic!("{s}"),
        }
        if on_a > 0 && on_b > 0 {
            break;
        }
    }
    assert!(on_a > 0 && on_b > 0, "a: {on_a}, b: {on_b}");
    // One stops; the other keeps serving the port.
    a.shutdown().await.unwrap();
    let r = http
        .get(format!("{}/health", b.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    b.shutdown().await.unwrap();
}

// ---------------------------------------------------------------------------------
// Every route has its right

/// `(METHOD, path)` of every `.route(path, get(..).post(..))` in the router's source
/// (the HTTP routes and the gRPC service's).
fn routes_in_source() -> Vec<(String, String)> {
    let src = [
        include_str!("../src/http/mod.rs"),
        include_str!("../src/grpc/service.rs"),
    ]
    .concat();
    let mut out = Vec::new();
    for call in src.split(".route(").skip(1) {
        let call = call.trim_start();
        let (path, rest) = if let Some(lit) = call.strip_prefix('"') {
            lit.split_once('"').unwrap()
        } else {
            let (name, rest) = call.split_once(',').unwrap();
            let path = match name {
                "SUBSCRIBE_PATH" => SUBSCRIBE_PATH,
                "PUBLISH_PATH" => PUBLISH_PATH,
                other => panic!("route path constant {other} unknown to this test"),
            };
            (path, rest)
        };
        // The handlers: up to the next route, merge or layer.
        let end = [".route(", ".merge(", ".route_layer(", ".fallback("]
            .iter()
            .filter_map(|m| rest.find(m))
            .min()
            .unwrap_or(rest.len());
        for m in ["get", "post", "put", "delete", "patch"] {
            let pat = format!("{m}(");
            for (k, _) in rest[..end].match_indices(&pat) {
                let before = rest[..k].chars().last();
                if before.is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == ':')) {
                    out.push((m.to_uppercase(), path.to_string()));
                }
            }
        }
    }
    out
}

/// A new route falls to "admin only" in `auth::need_of` until it is given its right:
/// this test names the route so that is a decision, not an accident.
#[test]
fn every_route_has_a_right() {
    use jelly_server::auth::{Need, need_of};
    let routes = routes_in_source();
    assert!(routes.len() >= 13, "parsed too few routes: {routes:?}");
    for (method, path) in routes {
        let need = need_of(&method.parse().unwrap(), &path);
        let admin_only =
            matches!(method.as_str(), "PUT" | "PATCH" | "DELETE") && path == "/topics/{name}";
        assert_eq!(
            need == Need::Admin,
            admin_only,
            "{method} {path}: {need:?} (give it its right in auth::need_of)"
        );
        // A routed method is never taken for one the router refuses (it would then
        // run unchecked).
        assert_ne!(need, Need::NoSuchMethod, "{method} {path}");
    }
    // A method no route takes gets the router's 405, not a refusal naming a right.
    for (method, path) in [("POST", "/topics"), ("DELETE", "/topics/{name}/items")] {
        assert_eq!(need_of(&method.parse().unwrap(), path), Need::NoSuchMethod);
    }
}

// ---------------------------------------------------------------------------------
// Mirrors of an HTTPS upstream with tokens.

/// A mirror follows an `https://` upstream signed by a private CA (its `ca` file) with
/// a token of the subscribe right; a second mirror of the same upstream without the CA
/// copies nothing and reports the certificate error.
#[tokio::test]
async fn a_mirror_follows_an_https_upstream_with_its_ca_and_token() {
    let pki = pki();
    let upstream = start_tls(&pki, |c| c.auth = Some(auth_config(false))).await;
    let base = upstream.url();
    assert!(base.starts_with("https://"), "{base}");
    let mirror = |local: &str, ca: Option<PathBuf>| {
        let mut m =
            jelly_server::config::MirrorConfig::from_topic_url(&format!("{base}/topics/t={local}"))
                .unwrap();
        m.token = Some(SUB.to_string());
        m.ca = ca;
        m
    };
    let mut c = ServerConfig::ephemeral();
    c.mirrors = vec![
        mirror("copy", Some(pki.ca.clone())),
        mirror("untrusted", None),
    ];
    let downstream = Server::start(c).await.unwrap();

    let publisher = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(pki.ca_pem.as_bytes()).unwrap())
        .timeout(LIMIT)
        .build()
        .unwrap();
    for i in 0..3 {
        let r = publisher
            .post(format!("{base}/topics/t/items"))
            .bearer_auth(PUB)
            .header("content-type", NQ)
            .body(nquad(i))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{}", r.text().await.unwrap());
    }
    let next = |topic: &str| {
        downstream
            .state()
            .topics
            .get(topic)
            .map(|t| t.log.next_offset())
    };
    let start = std::time::Instant::now();
    while next("copy") != Some(3) {
        assert!(
            start.elapsed() < LIMIT,
            "the mirror copied {:?} items",
            next("copy")
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Byte for byte what the upstream stored.
    let up = upstream.state().topics.get("t").unwrap();
    let down = downstream.state().topics.get("copy").unwrap();
    let limits = jelly_server::log::ReadLimits::default();
    let (a, b) = (
        up.log.read(0, limits).await.unwrap(),
        down.log.read(0, limits).await.unwrap(),
    );
    assert_eq!(a.len(), 3);
    for (x, y) in a.iter().zip(&b) {
        assert_eq!((x.offset, &x.frame), (y.offset, &y.frame));
    }
    // The other mirror trusts only the system's roots: refused by the handshake.
    let http = reqwest::Client::new();
    let error = loop {
        let d = support::get_json(&http, &format!("{}/topics/untrusted", downstream.url())).await;
        if let Some(e) = d["mirror"]["last_error"].as_str() {
            break e.to_string();
        }
        assert!(start.elapsed() < LIMIT, "no error reported: {d}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(error.contains("certificate"), "{error}");
    assert!(next("untrusted").unwrap_or(0) == 0);
    downstream.shutdown().await.unwrap();
    upstream.shutdown().await.unwrap();
}

async fn get_with(http: &reqwest::Client, url: &str, token: &str) -> reqwest::Response {
    http.get(url).bearer_auth(token).send().await.unwrap()
}

/// The `grpc-status` (and message) of a raw SubscribeRdf call whose request body is
/// `body`; `None` if no answer came within `wait`.
async fn raw_subscribe<B>(
    srv: &Server,
    token: Option<&str>,
    body: B,
    wait: Duration,
) -> Option<(String, String)>
where
    B: http_body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let auth = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("authorization", a.as_str())).collect();
    let all = support::raw_grpc(srv.local_addr(), SUBSCRIBE_PATH, &headers, body, wait).await?;
    let get = |k: &str| {
        all.get(k)
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default()
    };
    // grpc-message is percent-encoded; spaces are all these tests need back.
    Some((get("grpc-status"), get("grpc-message").replace("%20", " ")))
}

/// SubscribeRdf is refused on its token before its request message is read (the
/// topic is in the message, but a caller with no token, an unknown one or one with no
/// subscribe right anywhere is answered at once), an authorized caller whose message
/// does not come is answered at `header_read_timeout_ms`, and the message is small.
#[tokio::test]
async fn grpc_subscribe_refuses_before_reading_and_bounds_the_request() {
    use http_body_util::{Full, StreamBody};
    let mut c = ServerConfig::ephemeral();
    c.auth = Some(auth_config(false));
    c.header_read_timeout_ms = 400;
    let srv = Server::start(c).await.unwrap();
    let never = || {
        StreamBody::new(futures_util::stream::pending::<
            Result<http_body::Frame<Bytes>, std::convert::Infallible>,
        >())
    };
    for (token, code) in [(None, "16"), (Some("unknown"), "16"), (Some(PUB), "7")] {
        let got = raw_subscribe(&srv, token, never(), Duration::from_millis(300))
            .await
            .unwrap_or_else(|| panic!("{token:?}: no answer before the request was read"));
        assert_eq!(got.0, code, "{token:?}: {got:?}");
    }
    let got = raw_subscribe(&srv, Some(SUB), never(), Duration::from_secs(5))
        .await
        .expect("an answer at header_read_timeout_ms");
    assert_eq!(got.0, "4", "{got:?}");
    assert!(got.1.contains("did not arrive within 400 ms"), "{got:?}");
    // A message far larger than any RdfStreamSubscribe is refused without being held.
    let mut big = vec![0u8];
    big.extend_from_slice(&(1u32 << 20).to_be_bytes());
    big.extend(std::iter::repeat_n(0u8, 1 << 20));
    let got = raw_subscribe(
        &srv,
        Some(SUB),
        Full::new(Bytes::from(big)),
        Duration::from_secs(5),
    )
    .await
    .expect("an answer");
    assert_eq!(got.0, "8", "{got:?}");
    assert!(got.1.contains("over 65536 bytes"), "{got:?}");
    srv.shutdown().await.unwrap();
}

/// Certificate and key files that cannot be used are refused at start with the
/// reason in words, naming the files.
#[test]
fn tls_files_that_cannot_be_used_are_named_with_the_reason() {
    let pki = pki();
    let err = |cert: &std::path::Path, key: &std::path::Path| {
        jelly_server::tls::acceptor(&jelly_server::tls::TlsConfig {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
        })
        .err()
        .expect("refused")
        .to_string()
    };
    assert!(
        jelly_server::tls::acceptor(&jelly_server::tls::TlsConfig {
            cert: pki.cert.clone(),
            key: pki.key.clone(),
        })
        .is_ok()
    );
    // A key of another pair.
    let other = pki.dir.join("other.key");
    std::fs::write(&other, rcgen::KeyPair::generate().unwrap().serialize_pem()).unwrap();
    let e = err(&pki.cert, &other);
    assert!(
        e.contains("does not belong") && e.contains("other.key") && e.contains("cert.pem"),
        "{e}"
    );
    // The chain in the wrong order (the CA first).
    let wrong = pki.dir.join("wrong-order.pem");
    let leaf = std::fs::read_to_string(&pki.cert).unwrap();
    std::fs::write(&wrong, format!("{}{leaf}", pki.ca_pem)).unwrap();
    assert!(err(&wrong, &pki.key).contains("must start with the server's own"));
    // A certificate file cut short.
    let cut = pki.dir.join("cut.pem");
    std::fs::write(&cut, &leaf[..leaf.len() / 2]).unwrap();
    let e = err(&cut, &pki.key);
    assert!(
        e.contains("cut.pem") && e.contains("-----END CERTIFICATE-----"),
        "{e}"
    );
    // A key file without a key.
    let e = err(&pki.cert, &pki.cert);
    assert!(e.contains("no private key"), "{e}");
}

/// The server's certificate validity: its `notAfter` is a `/metrics` gauge (for alerts;
/// certificates are read at start only), and an expired or not-yet-valid one is said
/// (the server still starts: the operator may be replacing it).
#[tokio::test]
async fn certificate_validity_is_a_gauge_and_expiry_is_warned() {
    let pki = pki();
    let v = jelly_server::tls::certificate_validity(&jelly_server::tls::TlsConfig {
        cert: pki.cert.clone(),
        key: pki.key.clone(),
    })
    .expect("the test certificate parses");
    let srv = start_tls(&pki, |_| {}).await;
    let client = HttpsClient::new(&pki.ca_pem, &[b"h2"]);
    let (_, status, metrics) = client
        .send(srv.local_addr(), "GET", "/metrics", None)
        .await
        .unwrap();
    assert_eq!(status, 200);
    let line = format!("jelly_tls_certificate_not_after_seconds {}", v.not_after);
    assert!(
        metrics.lines().any(|l| l == line),
        "{line} not in:\n{metrics}"
    );
    srv.shutdown().await.unwrap();
    // Without TLS there is no such gauge.
    let plain = Server::start(ServerConfig::ephemeral()).await.unwrap();
    let text = reqwest::get(format!("{}/metrics", plain.url()))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!text.contains("jelly_tls_certificate_not_after"), "{text}");
    plain.shutdown().await.unwrap();

    // A certificate valid in 2020 only.
    let ca = new_ca("jellyfish old CA");
    let key = rcgen::KeyPair::generate().unwrap();
    let mut p = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    p.not_before = rcgen::date_time_ymd(2020, 1, 1);
    p.not_after = rcgen::date_time_ymd(2021, 1, 1);
    let old = p.signed_by(&key, &ca).unwrap();
    let v = jelly_server::tls::Validity::of_der(old.der()).unwrap();
    assert_eq!((v.not_before, v.not_after), (1_577_836_800, 1_609_459_200));
    let now = 1_609_459_200 + 10 * 86_400;
    let w = v.warning(now).unwrap();
    assert!(
        w.contains("expired on Jan  1 00:00:00 2021") && w.contains("10 day(s) ago"),
        "{w}"
    );
    let w = v.warning(1_577_836_800 - 1).unwrap();
    assert!(w.contains("not valid before Jan  1 00:00:00 2020"), "{w}");
    let w = v.warning(1_609_459_200 - 3 * 86_400 - 5).unwrap();
    assert!(w.contains("expires on") && w.contains("in 3 day(s)"), "{w}");
    assert_eq!(v.warning(1_609_459_200 - 15 * 86_400), None);
    // It is still served (a warning, not a refusal).
    let dir = temp_dir();
    std::fs::write(dir.join("old.pem"), old.pem()).unwrap();
    std::fs::write(dir.join("old.key"), key.serialize_pem()).unwrap();
    let mut c = ServerConfig::ephemeral();
    c.tls = Some(jelly_server::tls::TlsConfig {
        cert: dir.join("old.pem"),
        key: dir.join("old.key"),
    });
    let srv = Server::start(c).await.unwrap();
    srv.shutdown().await.unwrap();
}
