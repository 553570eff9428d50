//! gRPC interop with Jelly-JVM: the Java client in `bench/jvm-grpc` (Jelly-JVM's
//! encoder and decoder over grpc-java) publishes to and subscribes from a real server.
//!
//! The client jar is found through `JELLY_JVM_GRPC_JAR`, or built by
//! `bench/jvm-grpc/build.sh` (Java 17 and Maven). If neither works the tests fail,
//! unless `JELLY_SKIP_INTEROP=1` is set: then they are skipped with a message.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use jelly_server::{Server, ServerConfig};

mod support;
use support::{nanopub_lines, parse_nquads, publish_nquads_items};

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn skip_requested() -> bool {
    std::env::var("JELLY_SKIP_INTEROP").is_ok_and(|v| v == "1")
}

/// The client jar, located or built once.
fn jar() -> Option<&'static Path> {
    static JAR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let r = JAR.get_or_init(|| {
        if let Some(p) = std::env::var_os("JELLY_JVM_GRPC_JAR").filter(|v| !v.is_empty()) {
            let p = PathBuf::from(p);
            return if p.is_file() {
                Ok(p)
            } else {
                Err(format!("JELLY_JVM_GRPC_JAR: {} is not a file", p.display()))
            };
        }
        let out = std::process::Command::new("bash")
            .arg(repo_root().join("bench/jvm-grpc/build.sh"))
            .current_dir(repo_root())
            .output()
            .map_err(|e| format!("cannot run bench/jvm-grpc/build.sh: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "bench/jvm-grpc/build.sh failed ({}):\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let path = String::from_utf8_lossy(&out.stdout)
            .lines()
            .last()
            .unwrap_or("")
            .trim()
            .to_string();
        let p = PathBuf::from(path);
        if p.is_file() {
            Ok(p)
        } else {
            Err(format!("build.sh printed no jar path ({})", p.display()))
        }
    });
    match r {
        Ok(p) => Some(p.as_path()),
        Err(e) if skip_requested() => {
            eprintln!("skipping Jelly-JVM gRPC interop: {e}");
            None
        }
        Err(e) => panic!(
            "Jelly-JVM gRPC client unavailable: {e}\n(set JELLY_SKIP_INTEROP=1 to skip interop tests)"
        ),
    }
}

/// Runs the client; returns (stdout, stderr), failing the test on a non-zero exit.
async fn run(jar: &Path, args: &[&str]) -> (String, String) {
    let out = tokio::process::Command::new("java")
        .arg("-jar")
        .arg(jar)
        .args(args)
        .output()
        .await
        .expect("cannot run java");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(
        out.status.success(),
        "java {args:?} failed ({}):\n{stderr}",
        out.status
    );
    (stdout, stderr)
}

async fn start() -> Server {
    Server::start(ServerConfig::ephemeral()).await.unwrap()
}

#[tokio::test]
async fn jvm_publishes_over_grpc() {
    let Some(jar) = jar() else { return };
    let s = start().await;
    let dir = std::env::temp_dir().join(format!("jelly-grpc-interop-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("in.nq");
    let text = nanopub_lines(300);
    std::fs::write(&input, &text).unwrap();
    let addr = s.local_addr().to_string();
    let (stdout, _) = run(
        jar,
        &["publish", &addr, "jvm-in", input.to_str().unwrap(), "50"],
    )
    .await;
    assert_eq!(stdout.trim(), "items=6 first=0 last=5 frames=6");
    let body = reqwest::get(format!(
        "{}/topics/jvm-in/items?follow=false&format=nquads",
        s.url()
    ))
    .await
    .unwrap()
    .text()
    .await
    .unwrap();
    assert_eq!(parse_nquads(&body), parse_nquads(&text));
    let _ = std::fs::remove_dir_all(&dir);
    s.shutdown().await.unwrap();
}

#[tokio::test]
async fn jvm_subscribes_over_grpc() {
    let Some(jar) = jar() else { return };
    let s = start().await;
    let text = nanopub_lines(300);
    publish_nquads_items(&s, "jvm-out", &text, 50).await;
    let addr = s.local_addr().to_string();
    let want = parse_nquads(&text);
    // The topic's stream as it is (spliced), then re-encoded with small tables.
    for extra in [&[][..], &["16", "4", "2"][..]] {
        let mut args = vec!["subscribe", &addr, "jvm-out", "6"];
        args.extend_from_slice(extra);
        let (stdout, stderr) = run(jar, &args).await;
        assert!(
            stderr.contains("offsets=0,1,2,3,4,5"),
            "{extra:?}: {stderr}"
        );
        assert_eq!(parse_nquads(&stdout), want, "{extra:?}");
    }
    s.shutdown().await.unwrap();
}
