//! gRPC interop with grpcio (gRPC's C core, from Python): `bench/py/grpc_peer.py`
//! publishes frames that pyjelly encoded, and subscribes to frames that pyjelly then
//! decodes — a third gRPC implementation beside tonic and grpc-java, with its own HTTP/2
//! stack, flow control and message compression: grpcio offers gzip in
//! `grpc-accept-encoding` on every call, so the server's messages to it are gzipped, and
//! `--gzip` makes it compress what it publishes.
//!
//! The peer's python is found through `JELLY_PYTHON`, or set up by `bench/py/setup.sh`.
//! If neither works the tests fail, unless `JELLY_SKIP_INTEROP=1` is set: then they are
//! skipped with a message.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use jelly::Statement;
use jelly_server::{Server, ServerConfig};

mod support;
use support::{nanopub_lines, parse_nquads, publish_nquads_items};

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The venv python with pyjelly and grpcio, located or set up once.
fn python() -> Option<&'static Path> {
    static PY: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let r = PY.get_or_init(|| {
        let p = match std::env::var_os("JELLY_PYTHON").filter(|v| !v.is_empty()) {
            Some(p) => PathBuf::from(p),
            None => {
                let out = std::process::Command::new("bash")
                    .arg(repo_root().join("bench/py/setup.sh"))
                    .output()
                    .map_err(|e| format!("cannot run bench/py/setup.sh: {e}"))?;
                if !out.status.success() {
                    return Err(format!(
                        "bench/py/setup.sh failed ({}):\n{}",
                        out.status,
                        String::from_utf8_lossy(&out.stderr).trim()
                    ));
                }
                PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
            }
        };
        let ok = std::process::Command::new(&p)
            .args(["-c", "import grpc, pyjelly"])
            .status()
            .map_err(|e| format!("cannot run {}: {e}", p.display()))?;
        if ok.success() {
            Ok(p)
        } else {
            Err(format!("{} cannot import grpc and pyjelly", p.display()))
        }
    });
    match r {
        Ok(p) => Some(p.as_path()),
        Err(e) if std::env::var("JELLY_SKIP_INTEROP").is_ok_and(|v| v == "1") => {
            eprintln!("skipping grpcio interop: {e}");
            None
        }
        Err(e) => {
            panic!("grpcio peer unavailable: {e}\n(set JELLY_SKIP_INTEROP=1 to skip interop tests)")
        }
    }
}

/// Runs a peer script; returns (exit code, stdout, stderr).
async fn run(py: &Path, script: &str, args: &[&str]) -> (i32, String, String) {
    let out = tokio::process::Command::new(py)
        .arg(repo_root().join("bench/py").join(script))
        .args(args)
        .output()
        .await
        .expect("cannot run the python peer");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs a peer script that must succeed; returns (stdout, stderr).
async fn run_ok(py: &Path, script: &str, args: &[&str]) -> (String, String) {
    let (code, stdout, stderr) = run(py, script, args).await;
    assert_eq!(code, 0, "{script} {args:?}:\n{stderr}");
    (stdout, stderr)
}

struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("jelly-grpcio-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }

    fn path(&self, f: &str) -> String {
        self.0.join(f).to_string_lossy().into_owned()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The topic's items as N-Quads, read over HTTP.
async fn topic_statements(s: &Server, topic: &str) -> Vec<Statement> {
    let body = reqwest::get(format!(
        "{}/topics/{topic}/items?follow=false&format=nquads",
        s.url()
    ))
    .await
    .unwrap()
    .text()
    .await
    .unwrap();
    parse_nquads(&body)
}

/// pyjelly encodes 300 quads into frames of at most 100 rows; grpcio publishes them,
/// plainly and gzip-compressed; the topic holds exactly those quads, once per call.
#[tokio::test]
async fn grpcio_publishes_pyjelly_frames() {
    let Some(py) = python() else { return };
    let s = Server::start(ServerConfig::ephemeral()).await.unwrap();
    let d = Scratch::new("pub");
    let text = nanopub_lines(300);
    std::fs::write(d.path("in.nq"), &text).unwrap();
    run_ok(
        py,
        "pyjelly_peer.py",
        &[
            "to-jelly",
            &d.path("in.nq"),
            &d.path("in.jelly"),
            "--rows-per-frame",
            "100",
            "--physical",
            "quads",
        ],
    )
    .await;
    let addr = s.local_addr().to_string();
    let (plain, _) = run_ok(
        py,
        "grpc_peer.py",
        &["publish", &addr, "py-in", &d.path("in.jelly")],
    )
    .await;
    let frames = plain
        .trim()
        .rsplit_once("frames=")
        .map(|(_, n)| n.to_string())
        .unwrap();
    let n: u64 = frames.parse().unwrap();
    assert!(n >= 3, "{plain}");
    assert_eq!(
        plain.trim(),
        format!("items={n} first=0 last={} frames={n}", n - 1)
    );
    let (gz, _) = run_ok(
        py,
        "grpc_peer.py",
        &["publish", &addr, "py-in", &d.path("in.jelly"), "--gzip"],
    )
    .await;
    assert_eq!(
        gz.trim(),
        format!("items={n} first={n} last={} frames={n}", 2 * n - 1)
    );
    let want = parse_nquads(&text);
    let mut twice = want.clone();
    twice.extend(want);
    assert_eq!(topic_statements(&s, "py-in").await, twice);
    s.shutdown().await.unwrap();
}

/// grpcio subscribes (the server may compress: grpcio offers gzip) from the start, from
/// an offset, and with small requested tables (re-encoded); pyjelly decodes each
/// stream to the statements that were published, with the items' offsets in order.
#[tokio::test]
async fn grpcio_subscribes_and_pyjelly_decodes() {
    let Some(py) = python() else { return };
    let s = Server::start(ServerConfig::ephemeral()).await.unwrap();
    let d = Scratch::new("sub");
    let text = nanopub_lines(300);
    publish_nquads_items(&s, "py-out", &text, 50).await;
    let lines: Vec<&str> = text.lines().collect();
    let addr = s.local_addr().to_string();
    let cases: [(&[&str], &str, std::ops::Range<usize>); 4] = [
        (&[], "0,1,2,3,4,5", 0..6),
        (&["--gzip"], "0,1,2,3,4,5", 0..6),
        (&["--from", "4"], "4,5", 4..6),
        (&["--requested-small"], "0,1,2,3,4,5", 0..6),
    ];
    for (extra, offsets, items) in cases {
        let out = d.path("out.jelly");
        let n = items.len().to_string();
        let mut args = vec!["subscribe", &addr, "py-out", &out, &n];
        args.extend_from_slice(extra);
        let (_, stderr) = run_ok(py, "grpc_peer.py", &args).await;
        assert!(
            stderr.contains(&format!("offsets={offsets}")),
            "{extra:?}: {stderr}"
        );
        run_ok(
            py,
            "pyjelly_peer.py",
            &["from-jelly", &out, &d.path("out.nq")],
        )
        .await;
        let got = parse_nquads(&std::fs::read_to_string(d.path("out.nq")).unwrap());
        let want = parse_nquads(&lines[items.start * 50..items.end * 50].join("\n"));
        assert_eq!(got, want, "{extra:?}");
    }
    s.shutdown().await.unwrap();
}

/// Refusals reach grpcio as statuses with a reason, and change nothing: a malformed
/// frame, an invalid topic name, an unknown topic to follow.
#[tokio::test]
async fn grpcio_gets_clear_refusals() {
    let Some(py) = python() else { return };
    let s = Server::start(ServerConfig::ephemeral()).await.unwrap();
    let d = Scratch::new("bad");
    let addr = s.local_addr().to_string();
    // One good statement first, so the log has something to keep intact.
    let r = reqwest::Client::new()
        .post(format!("{}/topics/py-bad/items", s.url()))
        .header("content-type", "application/n-quads")
        .body("<http://ex.org/s> <http://ex.org/p> <http://ex.org/o> .\n")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), reqwest::StatusCode::OK);
    let before = topic_statements(&s, "py-bad").await;
    // A frame of 5 bytes whose row holds field number 0.
    std::fs::write(d.path("bad.jelly"), b"\x05\x0a\x03\x0a\x01\x00").unwrap();
    let (code, _, stderr) = run(
        py,
        "grpc_peer.py",
        &["publish", &addr, "py-bad", &d.path("bad.jelly")],
    )
    .await;
    assert_eq!(code, 3, "{stderr}");
    assert!(
        stderr.contains("code=INVALID_ARGUMENT") && stderr.contains("frame 0"),
        "{stderr}"
    );
    assert_eq!(topic_statements(&s, "py-bad").await, before);

    let (code, _, stderr) = run(
        py,
        "grpc_peer.py",
        &["publish", &addr, "bad topic", &d.path("bad.jelly")],
    )
    .await;
    assert_eq!(code, 3, "{stderr}");
    assert!(
        stderr.contains("code=INVALID_ARGUMENT") && stderr.contains("invalid topic name"),
        "{stderr}"
    );

    let (code, _, stderr) = run(
        py,
        "grpc_peer.py",
        &["subscribe", &addr, "no-such", &d.path("o.jelly"), "1"],
    )
    .await;
    assert_eq!(code, 3, "{stderr}");
    assert!(
        stderr.contains("code=NOT_FOUND") && stderr.contains("no-such"),
        "{stderr}"
    );
    s.shutdown().await.unwrap();
}
