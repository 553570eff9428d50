//! `jelly serve`, `jelly publish` and `jelly subscribe` as processes, on loopback.

mod cli_support;

use std::process::{Command, Stdio};
use std::time::Duration;

use cli_support::serve::{ServeProc, temp_dir};
use cli_support::{jelly, ok, usage_error};
use jelly::{Event, JellyReader};

/// The output of `child` once it exits; kills it and fails the test if it runs longer
/// than `limit` (a follower that went on reading instead of stopping).
fn wait_at_most(mut child: std::process::Child, limit: Duration) -> std::process::Output {
    let t0 = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "still running after {limit:?}; stdout: {}; stderr: {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// `jelly ARGS` as a child process with its output piped (a live follower).
fn spawn_jelly(args: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_jelly"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn serve_publish_subscribe_round_trip() {
    let dir = temp_dir("rt");
    let srv = ServeProc::start(&dir.join("data"));
    let trig = dir.join("data.trig");
    std::fs::write(
        &trig,
        "@prefix ex: <http://ex.org/> .\nex:a ex:p ex:b .\nex:g1 { ex:a ex:p ex:c . }\nex:g2 { ex:a ex:p ex:d . }\n",
    )
    .unwrap();
    let trig = trig.to_str().unwrap();
    let url = srv.url.clone();
    let s = url.as_str();

    let r = ok(
        &[
            "publish",
            "t",
            trig,
            "--split-graph",
            "--server",
            s,
            "--source",
            "cli",
            "--header",
            "unit=celsius",
        ],
        None,
    );
    assert_eq!(r.out().trim(), r#"{"offsets":[0,1,2],"topic":"t"}"#);
    assert!(
        r.stderr.contains(": 3 items published to `t`"),
        "{}",
        r.stderr
    );
    let r = ok(
        &["publish", "t", "-", "--server", s],
        Some(b"<http://ex.org/x> <http://ex.org/p> \"stdin\" .\n"),
    );
    assert!(r.out().contains("[3]"), "{}", r.out());
    assert!(
        r.stderr.contains(": 1 item published to `t`"),
        "{}",
        r.stderr
    );
    // `--split-graph` over a mix of TriG and Jelly files: the TriG file is split by
    // graph, the Jelly file is one item per frame (the server refuses split=graph on
    // Jelly, so the CLI does not send it there).
    let jelly_file = dir.join("data.jelly");
    let jelly_file = jelly_file.to_str().unwrap();
    ok(&["rdf", "to-jelly", trig, "-o", jelly_file], None);
    let r = ok(
        &[
            "publish",
            "mix",
            trig,
            jelly_file,
            "--split-graph",
            "--server",
            s,
        ],
        None,
    );
    let out = r.out();
    assert!(out.contains("[0,1,2]") && out.contains("[3]"), "{out}");
    // Bad data: exit 1 with the server's reason, nothing appended.
    let r = jelly(
        &["publish", "t", "-", "--server", s],
        Some(b"<http://ex.org/x> <http://ex.org/p> .\n"),
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("400"), "{}", r.stderr);
    // Several files, one refused: the error says which were published before it.
    let good = dir.join("good.nt");
    std::fs::write(&good, "<http://ex.org/x> <http://ex.org/p> \"ok\" .\n").unwrap();
    let bad = dir.join("bad.nt");
    std::fs::write(&bad, "<http://ex.org/x> <http://ex.org/p> .\n").unwrap();
    let (good, bad) = (good.to_str().unwrap(), bad.to_str().unwrap());
    let r = jelly(&["publish", "other", good, bad, good, "--server", s], None);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("1 earlier file(s) published; 2 not published"),
        "{}",
        r.stderr
    );
    // A file that is not there, or header flags that cannot be sent: exit 2 before
    // anything is sent (`other` still holds only the one good file).
    let missing = dir.join("missing.nt");
    let missing = missing.to_str().unwrap();
    let unknown_format = dir.join("b.xyz");
    std::fs::write(&unknown_format, "x").unwrap();
    let unknown_format = unknown_format.to_str().unwrap();
    for args in [
        vec!["publish", "other", good, missing, "--server", s],
        vec!["publish", "other", good, unknown_format, "--server", s],
        vec!["publish", "other", good, "--header", "=v", "--server", s],
        vec![
            "publish", "other", good, "--header", "a=1", "--header", "A=2", "--server", s,
        ],
    ] {
        let r = jelly(&args, None);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
    }
    let r = ok(&["topics", "describe", "other", "--server", s], None);
    assert!(r.out().contains("\"next_offset\": 1,"), "{}", r.out());
    // Turtle on standard input without --in-format: the error says how stdin is read.
    let r = jelly(
        &["publish", "other", "-", "--server", s],
        Some(b"@prefix ex: <http://ex.org/> .\nex:a ex:p ex:b .\n"),
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("--in-format"), "{}", r.stderr);

    // Everything so far, as N-Quads.
    let r = ok(
        &["subscribe", "t", "--server", s, "--no-follow", "-q"],
        None,
    );
    let st = jelly::nquads::parse_document(&r.out()).unwrap();
    assert_eq!(st.len(), 4);
    assert_eq!(st[3].object, jelly::Term::simple_literal("stdin"));

    // As Jelly: one frame per item with its metadata.
    let out = dir.join("sub.jelly");
    ok(
        &[
            "subscribe",
            "t",
            "--server",
            s,
            "--no-follow",
            "--format",
            "jelly",
            "--to",
            out.to_str().unwrap(),
        ],
        None,
    );
    let bytes = std::fs::read(&out).unwrap();
    let mut rd = JellyReader::new(&bytes[..]);
    let mut offsets = Vec::new();
    while let Some(mut f) = rd.next_frame().unwrap() {
        let meta = f.metadata().unwrap();
        let get = |k: &str| {
            meta.iter()
                .find(|(mk, _)| *mk == k)
                .map(|(_, v)| v.to_vec())
        };
        offsets.push(String::from_utf8(get("offset").unwrap()).unwrap());
        if offsets.len() <= 3 {
            assert_eq!(get("source").unwrap(), b"cli");
            assert_eq!(get("h:unit").unwrap(), b"celsius");
        }
        while f
            .next_event()
            .unwrap()
            .is_some_and(|e| !matches!(e, Event::GraphEnd))
        {}
    }
    assert_eq!(offsets, ["0", "1", "2", "3"]);

    // From an offset, bounded.
    let r = ok(
        &[
            "subscribe",
            "t",
            "--server",
            s,
            "--from",
            "2",
            "--max-items",
            "1",
            "--format",
            "trig",
        ],
        None,
    );
    assert!(r.out().contains("<http://ex.org/g2>"), "{}", r.out());

    // Live: a follower started first sees an item published afterwards.
    let follower = spawn_jelly(&[
        "subscribe",
        "t",
        "--server",
        s,
        "--from",
        "latest",
        "--max-items",
        "1",
        "-q",
    ]);
    std::thread::sleep(Duration::from_millis(300));
    ok(
        &["publish", "t", "-", "--server", s, "-q"],
        Some(b"<http://ex.org/x> <http://ex.org/p> \"live\" .\n"),
    );
    let out = follower.wait_with_output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"live\""));

    // A follower of a topic that does not exist yet waits for its first publish.
    let follower = spawn_jelly(&[
        "subscribe",
        "later",
        "--server",
        s,
        "--from",
        "earliest",
        "--max-items",
        "1",
    ]);
    std::thread::sleep(Duration::from_millis(1500));
    ok(
        &["publish", "later", "-", "--server", s, "-q"],
        Some(b"<http://ex.org/x> <http://ex.org/p> \"first\" .\n"),
    );
    let out = follower.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("waiting for its first publish"), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"first\""));

    // With --no-follow, an unknown topic is an error: exit 1.
    let r = jelly(&["subscribe", "nope", "--server", s, "--no-follow"], None);
    assert_eq!(r.code, 1, "{}", r.stderr);
    // The refusal names the topic and the server.
    assert!(
        r.stderr.contains(&format!("topic `nope` on {s}: 404")),
        "{}",
        r.stderr
    );

    // SIGHUP (a "reload" to many servers) is logged and ignored: the server goes on.
    let st = std::process::Command::new("kill")
        .args(["-HUP", &srv.child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    std::thread::sleep(Duration::from_millis(300));
    ok(&["topics", "list", "--server", s], None);
    // https:// for this plain server: the error says what is likely wrong.
    let https = s.replace("http://", "https://");
    let r = jelly(&["topics", "list", "--server", &https], None);
    assert_ne!(r.code, 0);
    assert!(
        r.stderr.contains("is the server plain http://?"),
        "{}",
        r.stderr
    );

    assert_eq!(srv.stop(), 0);
    // Nobody listening: exit 2 (after the retry budget).
    let r = jelly(
        &["subscribe", "t", "--server", s, "--retry-secs", "0", "-q"],
        None,
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("no success within --retry-secs 0 s"),
        "{}",
        r.stderr
    );
    // With a budget of 2 s the waits are 250 ms, 500 ms, 1 s and what is left of the
    // 2 s: they add up to at most the budget (before, the last was a whole 2 s more).
    let r = jelly(
        &["subscribe", "t", "--server", s, "--retry-secs", "2"],
        None,
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("retrying in 250ms"), "{}", r.stderr);
    let waited: f64 = r
        .stderr
        .lines()
        .filter_map(|l| l.split("retrying in ").nth(1))
        .map(seconds_of)
        .sum();
    assert!(waited > 1.0 && waited <= 2.0, "{waited} s: {}", r.stderr);
    assert!(
        r.stderr.contains("no success within --retry-secs 2 s"),
        "{}",
        r.stderr
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Seconds in a `Duration`'s debug form (`250ms`, `1s`, `249.5ms`, `1.2µs`).
fn seconds_of(d: &str) -> f64 {
    let unit_at = d
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(d.len());
    let (n, unit) = d.split_at(unit_at);
    let n: f64 = n.parse().unwrap_or_else(|_| panic!("not a duration: {d}"));
    n * match unit.trim() {
        "s" => 1.0,
        "ms" => 1e-3,
        "µs" => 1e-6,
        "ns" => 1e-9,
        u => panic!("unit {u} in {d}"),
    }
}

/// A Jelly stream of `n` frames, frame `i` one triple with object `ex:o{i}`.
fn jelly_stream(n: usize) -> Vec<u8> {
    let mut body = Vec::new();
    let mut w = jelly::JellyWriterBuilder::new(jelly::StreamOptions::small())
        .frame_policy(jelly::FramePolicy::Manual)
        .build(&mut body)
        .unwrap();
    for i in 0..n {
        let o = format!("http://ex.org/o{i}");
        w.add(jelly::StatementRef::triple(
            jelly::TermRef::Iri("http://ex.org/s"),
            jelly::TermRef::Iri("http://ex.org/p"),
            jelly::TermRef::Iri(&o),
        ))
        .unwrap();
        w.flush_frame().unwrap();
    }
    w.finish().unwrap();
    body
}

#[test]
fn a_streaming_publish_cut_by_the_server_says_what_may_be_stored() {
    use std::io::Write as _;
    let dir = temp_dir("cut");
    let mut srv = ServeProc::start(&dir.join("data"));
    let s = srv.url.clone();
    let body = jelly_stream(1);
    let mut child = Command::new(env!("CARGO_BIN_EXE_jelly"))
        .args(["publish", "cut", "-", "--jelly", "--stream", "--server", &s])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&body).unwrap();
    stdin.flush().unwrap();
    // The first item is in the topic: the request is under way.
    let t0 = std::time::Instant::now();
    loop {
        let r = jelly(
            &["subscribe", "cut", "--server", &s, "--no-follow", "-q"],
            None,
        );
        if r.code == 0 && !r.out().is_empty() {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "no item: {}",
            r.stderr
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    srv.kill9();
    drop(stdin);
    let out = wait_at_most(child, Duration::from_secs(30));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("broke off") && stderr.contains("may have been appended"),
        "{stderr}"
    );
    assert!(!stderr.contains("cannot reach"), "{stderr}");
}

#[test]
fn a_server_whose_stderr_is_closed_goes_on_serving() {
    use std::io::BufRead as _;
    let dir = temp_dir("stderr");
    let mut child = Command::new(env!("CARGO_BIN_EXE_jelly"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--log-level",
            "debug",
            "--data",
        ])
        .arg(dir.join("data"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    // Killed however the test ends (a failed assertion must not leave it running).
    let mut child = KillOnDrop(child);
    let mut lines = std::io::BufReader::new(stderr).lines();
    let url = loop {
        let line = lines.next().expect("a listening line").unwrap();
        if let Some(u) = line.strip_prefix("jelly serve: listening on ") {
            break u.trim().to_string();
        }
    };
    // Nobody reads the server's log any more: each line it writes fails (EPIPE).
    drop(lines);
    for i in 0..3 {
        let nt = format!("<http://ex.org/s> <http://ex.org/p> \"{i}\" .\n");
        // The first publish creates the topic (an INFO line), each appends (DEBUG).
        let r = jelly(
            &["publish", "t", "-", "--server", &url, "--in-format", "nt"],
            Some(nt.as_bytes()),
        );
        assert_eq!(r.code, 0, "publish {i}: {}", r.stderr);
    }
    let r = ok(
        &["subscribe", "t", "--server", &url, "--no-follow", "-q"],
        None,
    );
    assert_eq!(jelly::nquads::parse_document(&r.out()).unwrap().len(), 3);
    assert!(
        child.0.try_wait().unwrap().is_none(),
        "the server is still running"
    );
}

/// A child process killed (and reaped) when dropped.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The peak resident memory (`VmHWM`) of a running process, in KiB.
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn publish_sends_compressed_files_as_stored_in_bounded_memory() {
    use std::io::Write as _;
    let dir = temp_dir("gzpub");
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let config = dir.join("serve.toml");
    std::fs::write(&config, "max_body_bytes = 33554432\n").unwrap();
    let srv = ServeProc::start_with(&data, &["--config", config.to_str().unwrap()]);
    let s = srv.url.clone();

    // Small files, gzip and zstd: published as sent, the server inflates them.
    let nt = "<http://ex.org/s> <http://ex.org/p> \"v\" .\n<http://ex.org/s> <http://ex.org/p> \"w\" .\n";
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(nt.as_bytes()).unwrap();
    std::fs::write(dir.join("a.nt.gz"), gz.finish().unwrap()).unwrap();
    std::fs::write(
        dir.join("b.nt.zst"),
        zstd::encode_all(nt.as_bytes(), 1).unwrap(),
    )
    .unwrap();
    let a = dir.join("a.nt.gz");
    let b = dir.join("b.nt.zst");
    let r = ok(
        &[
            "publish",
            "z",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
            "--server",
            &s,
        ],
        None,
    );
    assert_eq!(r.out().lines().count(), 2, "{}", r.out());
    let r = ok(
        &["subscribe", "z", "--server", &s, "--no-follow", "-q"],
        None,
    );
    assert_eq!(jelly::nquads::parse_document(&r.out()).unwrap().len(), 4);

    // 256 MiB of N-Triples as 256 gzip members of 1 MiB each (a small file): the
    // client must not inflate it into memory to send it. The server stops at its
    // 32 MiB body limit.
    let line = "<http://ex.org/s> <http://ex.org/p> \"0123456789abcdef0123456789\" .\n";
    let mut mib = String::new();
    while mib.len() < (1 << 20) {
        mib.push_str(line);
    }
    let mut member = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    member.write_all(mib.as_bytes()).unwrap();
    let member = member.finish().unwrap();
    let big = dir.join("big.nt.gz");
    let mut f = std::fs::File::create(&big).unwrap();
    for _ in 0..256 {
        f.write_all(&member).unwrap();
    }
    drop(f);
    let child = spawn_jelly(&["publish", "big", big.to_str().unwrap(), "--server", &s]);
    let pid = child.id();
    let mut child = Some(child);
    let mut peak = 0;
    let t0 = std::time::Instant::now();
    while let Some(c) = child.as_mut() {
        if let Some(k) = peak_rss_kib(pid) {
            peak = peak.max(k);
        }
        if c.try_wait().unwrap().is_some() || t0.elapsed() > Duration::from_secs(120) {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let out = wait_at_most(child.take().unwrap(), Duration::from_secs(5));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("413") && stderr.contains("big.nt.gz"),
        "{stderr}"
    );
    assert!(peak > 0, "no memory reading of the client");
    assert!(
        peak < 96 * 1024,
        "the client peaked at {peak} KiB: it read the input whole"
    );
}

#[test]
fn publish_stream_sends_jelly_as_one_streaming_request() {
    let dir = temp_dir("stream");
    let srv = ServeProc::start(&dir.join("data"));
    let s = srv.url.clone();
    let body = jelly_stream(3);
    let r = ok(
        &["publish", "st", "-", "--jelly", "--stream", "--server", &s],
        Some(&body),
    );
    let v: serde_json::Value = serde_json::from_str(r.out().trim()).unwrap();
    assert_eq!(v["items"], 3, "{}", r.out());
    assert_eq!(v["last_offset"], 2);

    // A bad frame after a good one: exit 1, the error names the frame, item 3 kept.
    let mut bad = body[..].to_vec();
    bad.extend_from_slice(&[3, 0x0a, 0x7f, 0x01]);
    let r = jelly(
        &["publish", "st", "-", "--jelly", "--stream", "--server", &s],
        Some(&bad),
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("frame 3"), "{}", r.stderr);
    let r = ok(
        &["subscribe", "st", "--server", &s, "--no-follow", "-q"],
        None,
    );
    assert_eq!(jelly::nquads::parse_document(&r.out()).unwrap().len(), 6);

    // --stream needs Jelly input.
    let r = jelly(
        &["publish", "st", "-", "--stream", "--server", &s],
        Some(b""),
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    drop(srv);
}

/// Where each frame of a delimited stream ends.
fn frame_ends(stream: &[u8]) -> Vec<usize> {
    let mut ends = jelly_cli::stream_body::FrameEnds::default();
    let mut out = Vec::new();
    for (i, b) in stream.iter().enumerate() {
        ends.advance(std::slice::from_ref(b), false);
        if ends.at_end() {
            out.push(i + 1);
        }
    }
    out
}

/// Waits until topic `t` holds `n` items.
fn wait_for_items(s: &str, t: &str, n: usize) {
    let t0 = std::time::Instant::now();
    loop {
        let r = jelly(&["subscribe", t, "--server", s, "--no-follow", "-q"], None);
        let have = jelly::nquads::parse_document(&r.out()).map_or(0, |st| st.len());
        if r.code == 0 && have >= n {
            assert_eq!(have, n, "more items than sent");
            return;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "{have} of {n} items: {}",
            r.stderr
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Ctrl-C on a streaming publish ends the request after the frame in flight, prints
/// the server's answer with the offsets of what it appended, and exits 130.
#[test]
fn an_interrupted_streaming_publish_prints_what_was_published() {
    use std::io::Write as _;
    let dir = temp_dir("stream-int");
    let srv = ServeProc::start(&dir.join("data"));
    let s = srv.url.clone();
    let body = jelly_stream(5);
    let ends = frame_ends(&body);
    assert_eq!(ends.len(), 5);
    let start = |topic: &str| {
        Command::new(env!("CARGO_BIN_EXE_jelly"))
            .args(["publish", topic, "-", "--jelly", "--stream", "--server", &s])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let interrupt = |child: &std::process::Child| {
        let st = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(st.success());
    };

    // Interrupted inside frame 3: the rest of that frame still goes, frame 4 not.
    let mut child = start("a");
    let mut stdin = child.stdin.take().unwrap();
    let mid = (ends[2] + ends[3]) / 2;
    stdin.write_all(&body[..mid]).unwrap();
    stdin.flush().unwrap();
    wait_for_items(&s, "a", 3);
    interrupt(&child);
    std::thread::sleep(Duration::from_millis(200));
    // The rest of frame 3 and all of frame 4 in one write; stdin stays open.
    stdin.write_all(&body[mid..]).unwrap();
    stdin.flush().unwrap();
    let out = wait_at_most(child, Duration::from_secs(30));
    drop(stdin);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (v["items"].as_u64(), v["last_offset"].as_u64()),
        (Some(4), Some(3))
    );
    assert!(
        stderr.contains("interrupted; 4 items published to `a`"),
        "{stderr}"
    );
    wait_for_items(&s, "a", 4);

    // Interrupted inside frame 1 whose rest never comes: after the grace period the
    // body ends inside it; frame 0's item stays, and the answer says so.
    let mut child = start("b");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&body[..ends[0] + 2]).unwrap();
    stdin.flush().unwrap();
    wait_for_items(&s, "b", 1);
    interrupt(&child);
    let out = wait_at_most(child, Duration::from_secs(30));
    drop(stdin);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        stderr.contains("interrupted; 1 item published to `b` (offsets [[0,0]])")
            && stderr.contains("ended inside the frame"),
        "{stderr}"
    );
    wait_for_items(&s, "b", 1);
    drop(srv);
}

/// A CA, and a certificate it signed for localhost and 127.0.0.1: (ca, cert, key) PEM.
fn test_pki() -> (String, String, String) {
    let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    p.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign];
    // Names of their own: with rcgen's one default name, OpenSSL takes the leaf for
    // self-signed.
    p.distinguished_name
        .push(rcgen::DnType::CommonName, "jelly CLI test CA");
    let ca = rcgen::CertifiedIssuer::self_signed(p, rcgen::KeyPair::generate().unwrap()).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let mut p =
        rcgen::CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    p.distinguished_name
        .push(rcgen::DnType::CommonName, "localhost");
    let cert = p.signed_by(&key, &ca).unwrap();
    (ca.pem(), cert.pem(), key.serialize_pem())
}

#[test]
fn serve_with_tls_and_tokens_from_flags() {
    let dir = temp_dir("tls");
    let (ca, cert, key) = test_pki();
    let (ca_path, cert_path, key_path) = (
        dir.join("ca.pem"),
        dir.join("cert.pem"),
        dir.join("key.pem"),
    );
    std::fs::write(&ca_path, ca).unwrap();
    std::fs::write(&cert_path, cert).unwrap();
    std::fs::write(&key_path, key).unwrap();
    let tokens = dir.join("tokens.toml");
    std::fs::write(
        &tokens,
        "tokens = [ { token = \"cli-secret\", subscribe = [\"*\"], publish = [\"t\"] } ]\n",
    )
    .unwrap();
    let srv = ServeProc::start_with(
        &dir.join("data"),
        &[
            "--tls-cert",
            cert_path.to_str().unwrap(),
            "--tls-key",
            key_path.to_str().unwrap(),
            "--auth-tokens",
            tokens.to_str().unwrap(),
            "--max-connections-per-ip",
            "50",
        ],
    );
    assert!(srv.url.starts_with("https://127.0.0.1:"), "{}", srv.url);
    let curl = |extra: &[&str]| {
        let out = Command::new("curl")
            .args([
                "-sS",
                "--max-time",
                "20",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
            ])
            .args(["--cacert", ca_path.to_str().unwrap()])
            .args(extra)
            .arg(format!("{}/topics", srv.url))
            .output()
            .expect("curl is needed by this test: install it (apt-get install curl)");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(curl(&["-H", "Authorization: Bearer cli-secret"]), "200");
    assert_eq!(curl(&[]), "401");

    // The CLI clients over HTTPS: trusting the test CA with --cacert, with the token.
    let ca = ca_path.to_str().unwrap();
    let nq = "<http://ex/s> <http://ex/p> \"tls\" .\n";
    let publish = |extra: &[&str]| {
        let mut args = vec!["publish", "t", "--server", &srv.url, "--in-format", "nq"];
        args.extend_from_slice(extra);
        jelly(&args, Some(nq.as_bytes()))
    };
    let r = publish(&["--token", "cli-secret"]);
    assert_ne!(r.code, 0, "the test CA is not trusted without --cacert");
    assert!(r.stderr.contains("certificate"), "{}", r.stderr);
    assert!(
        r.stderr.contains("--cacert"),
        "publish names the way out: {}",
        r.stderr
    );
    let r = publish(&["--token", "cli-secret", "--cacert", ca]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = ok(
        &[
            "subscribe",
            "t",
            "--server",
            &srv.url,
            "--no-follow",
            "--token",
            "cli-secret",
            "--cacert",
            ca,
        ],
        None,
    );
    assert_eq!(r.out(), nq);
    // Without the CA, subscribe stops at once (exit 2): retrying cannot fix a
    // certificate.
    let r = jelly(
        &[
            "subscribe",
            "t",
            "--server",
            &srv.url,
            "--token",
            "cli-secret",
        ],
        None,
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("--cacert"), "{}", r.stderr);
    assert!(!r.stderr.contains("retrying"), "{}", r.stderr);
    // A repeater of the TLS server, trusting its CA, with the token.
    let edge = ServeProc::start_with(
        &dir.join("edge"),
        &[
            "--mirror",
            &format!("{}/topics/t=copy", srv.url),
            "--mirror-ca",
            ca,
            "--mirror-token",
            "cli-secret",
        ],
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let r = jelly(
            &["subscribe", "copy", "--server", &edge.url, "--no-follow"],
            None,
        );
        if r.code == 0 && r.out() == nq {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the mirror did not copy the item: {} {}",
            r.out(),
            r.stderr
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(edge.stop(), 0);
    // A file that holds no certificate is a usage error naming it.
    let r = publish(&["--cacert", key_path.to_str().unwrap()]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("key.pem"), "{}", r.stderr);
    assert_eq!(srv.stop(), 0);

    // A missing key file is a usage error that names the file.
    usage_error(
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--tls-cert",
            cert_path.to_str().unwrap(),
            "--tls-key",
            "/nonexistent/key.pem",
        ],
        "/nonexistent/key.pem",
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// `jelly publish` and `jelly subscribe` against a server with `[auth]`: refused
/// without a token (401, exit 1, nothing appended) or with one lacking the right (403),
/// accepted with `--token` or `$JELLY_TOKEN`.
#[test]
fn publish_and_subscribe_send_a_bearer_token() {
    let dir = temp_dir("tokens");
    let tokens = dir.join("tokens.toml");
    std::fs::write(
        &tokens,
        "tokens = [\n  { token = \"writer-secret\", publish = [\"t\"] },\n  { token = \"reader-secret\", subscribe = [\"*\"] },\n]\n",
    )
    .unwrap();
    let srv = ServeProc::start_with(
        &dir.join("data"),
        &["--auth-tokens", tokens.to_str().unwrap()],
    );
    let nq = "<http://ex/s> <http://ex/p> \"1\" .\n";
    let publish = |extra: &[&str]| {
        let mut args = vec!["publish", "t", "--server", &srv.url, "--in-format", "nq"];
        args.extend_from_slice(extra);
        jelly(&args, Some(nq.as_bytes()))
    };
    let r = publish(&[]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("401"), "{}", r.stderr);
    let r = publish(&["--token", "reader-secret"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("403"), "{}", r.stderr);
    let r = publish(&["--token", "writer-secret"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // A token the server could never know is refused here, before any request.
    for bad in ["sécret", "two words"] {
        let r = publish(&["--token", bad]);
        assert_eq!(r.code, 2, "{bad}: {}", r.stderr);
        assert!(r.stderr.contains("visible ASCII"), "{bad}: {}", r.stderr);
    }

    let subscribe = |token_env: Option<&str>, extra: &[&str]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_jelly"));
        cmd.args(["subscribe", "t", "--server", &srv.url, "--no-follow"])
            .args(extra)
            .env_remove("JELLY_TOKEN")
            .stdin(Stdio::null());
        if let Some(t) = token_env {
            cmd.env("JELLY_TOKEN", t);
        }
        cmd.output().unwrap()
    };
    let out = subscribe(None, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("401"));
    let out = subscribe(Some("writer-secret"), &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("403"));
    for out in [
        subscribe(Some("reader-secret"), &[]),
        subscribe(Some("wrong"), &["--token", "reader-secret"]),
    ] {
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout), nq, "one item, once");
    }
    assert_eq!(srv.stop(), 0);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn busy_poll_server_and_subscriber_deliver_live_items_and_stop_cleanly() {
    let dir = temp_dir("busy");
    let srv = ServeProc::start_with(&dir.join("data"), &["--busy-poll"]);
    let s = srv.url.clone();
    let publish = |i: usize, word: &str| {
        let body = format!("<http://ex.org/x> <http://ex.org/p> \"{word}\" .\n");
        let r = ok(
            &["publish", "t", "-", "--server", &s],
            Some(body.as_bytes()),
        );
        assert!(r.out().contains(&format!("[{i}]")), "{}", r.out());
    };
    publish(0, "one");
    // A polling follower gets the first item from the log, then the next two live.
    let follower = spawn_jelly(&[
        "subscribe",
        "t",
        "--server",
        &s,
        "--from",
        "earliest",
        "--max-items",
        "3",
        "--busy-poll",
        "-q",
    ]);
    for (i, word) in [(1, "two"), (2, "three")] {
        std::thread::sleep(Duration::from_millis(200));
        publish(i, word);
    }
    let out = follower.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let st = jelly::nquads::parse_document(&String::from_utf8_lossy(&out.stdout)).unwrap();
    let words: Vec<_> = st.iter().map(|q| q.object.clone()).collect();
    assert_eq!(
        words,
        ["one", "two", "three"].map(jelly::Term::simple_literal)
    );
    // The polling worker does not keep a SIGTERM from stopping the server gracefully.
    assert_eq!(srv.stop(), 0);
    // More than one worker thread cannot poll: a usage error (exit 2) that says so.
    usage_error(
        &[
            "serve",
            "--busy-poll",
            "--worker-threads",
            "2",
            "--listen",
            "127.0.0.1:0",
        ],
        "busy_poll",
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Publishes one statement whose object is the literal `i` to `topic` with
/// `jelly publish`, so that a follower's output shows which items it got.
fn publish_value(url: &str, topic: &str, i: u32) {
    let line = format!("<http://ex.org/s> <http://ex.org/p> \"{i}\" .\n");
    ok(
        &["publish", topic, "-", "--server", url, "-q"],
        Some(line.as_bytes()),
    );
}

/// A follower whose server dies under it (kill -9) says the stream was cut, not
/// reqwest's "error decoding response body", and resumes once the server is back.
#[test]
fn a_follower_cut_off_by_a_crash_says_so_and_resumes() {
    let dir = temp_dir("cut");
    let data = dir.join("data");
    let mut srv = ServeProc::start(&data);
    let url = srv.url.clone();
    let addr = url.trim_start_matches("http://").to_string();
    let publish = |i: u32| publish_value(&url, "c", i);
    publish(0);
    let follower = spawn_jelly(&[
        "subscribe",
        "c",
        "--server",
        &url,
        "--from",
        "earliest",
        "--max-items",
        "2",
        "--retry-secs",
        "30",
    ]);
    std::thread::sleep(Duration::from_millis(700));
    srv.kill9();
    let srv = ServeProc::try_start_with(&data, &addr, &[]).expect("restart on the same address");
    publish(1);
    let out = wait_at_most(follower, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("the stream was cut: "), "{stderr}");
    assert!(!stderr.contains("error decoding response body"), "{stderr}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 2, "{text}");
    assert_eq!(srv.stop(), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The back-off between reconnections starts over for each outage: after a
/// reconnection that delivered items, the next cut is retried after 250 ms again,
/// not after the doubled wait the previous outage had reached.
#[test]
fn each_outage_starts_its_back_off_over() {
    let dir = temp_dir("backoff");
    let data = dir.join("data");
    let mut srv = ServeProc::start(&data);
    let url = srv.url.clone();
    let addr = url.trim_start_matches("http://").to_string();
    let publish = |i: u32| publish_value(&url, "b", i);
    publish(0);
    let follower = spawn_jelly(&[
        "subscribe",
        "b",
        "--server",
        &url,
        "--from",
        "earliest",
        "--max-items",
        "3",
        "--retry-secs",
        "60",
    ]);
    std::thread::sleep(Duration::from_millis(700));
    // First outage: waits of 250, 500 and 1000 ms, then one of 2000 ms.
    srv.kill9();
    std::thread::sleep(Duration::from_millis(2000));
    let mut srv =
        ServeProc::try_start_with(&data, &addr, &[]).expect("restart on the same address");
    publish(1);
    // Until the follower is back and has item 1 (its position is 2).
    let back = (0..300).any(|_| {
        let r = ok(&["topics", "describe", "b", "--server", &url], None);
        let d: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
        let at_2 = d["subscribers"]
            .as_array()
            .is_some_and(|subs| subs.iter().any(|s| s["position"] == 2));
        if !at_2 {
            std::thread::sleep(Duration::from_millis(100));
        }
        at_2
    });
    assert!(back, "the follower did not come back");
    srv.kill9();
    std::thread::sleep(Duration::from_millis(1000));
    let srv = ServeProc::try_start_with(&data, &addr, &[]).expect("restart on the same address");
    publish(2);
    let out = wait_at_most(follower, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let waits: Vec<&str> = stderr
        .lines()
        .filter_map(|l| l.split("retrying in ").nth(1))
        .collect();
    // Each outage's first wait (a crash cuts the stream: no orderly end resets it).
    let firsts = waits.iter().filter(|w| **w == "250ms").count();
    assert_eq!(firsts, 2, "{waits:?}: {stderr}");
    assert_eq!(String::from_utf8(out.stdout).unwrap().lines().count(), 3);
    assert_eq!(srv.stop(), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `jelly subscribe` follows a topic across a server restart on the same address:
/// it reconnects on its own and goes on from the offset after the last item it
/// wrote, with no gap and no duplicate.
#[test]
fn subscribe_resumes_by_itself_across_a_server_restart() {
    let dir = temp_dir("resume");
    let data = dir.join("data");
    let srv = ServeProc::start(&data);
    let url = srv.url.clone();
    let addr = url.trim_start_matches("http://").to_string();
    let publish = |url: &str, i: u32| publish_value(url, "r", i);
    for i in 0..3 {
        publish(&url, i);
    }
    let follower = spawn_jelly(&[
        "subscribe",
        "r",
        "--server",
        &url,
        "--from",
        "earliest",
        "--max-items",
        "6",
        "--retry-secs",
        "30",
    ]);
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(srv.stop(), 0);
    std::thread::sleep(Duration::from_millis(300));
    let srv = ServeProc::try_start_with(&data, &addr, &[]).expect("restart on the same address");
    for i in 3..6 {
        publish(&url, i);
    }
    let out = follower.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("retrying") || stderr.contains("reconnecting"),
        "{stderr}"
    );
    let st = jelly::nquads::parse_document(&String::from_utf8(out.stdout).unwrap()).unwrap();
    let values: Vec<String> = st
        .iter()
        .map(|s| match &s.object {
            jelly::Term::Literal(l) => l.lex.clone(),
            t => panic!("{t}"),
        })
        .collect();
    assert_eq!(values, ["0", "1", "2", "3", "4", "5"]);
    assert_eq!(srv.stop(), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The statement counts of the first three items of the demo topic, each checked to
/// carry the demo's source id.
fn demo_item_sizes(srv: &ServeProc, dir: &std::path::Path) -> Vec<usize> {
    let out = dir.join("demo.jelly");
    ok(
        &[
            "subscribe",
            "weather",
            "--server",
            &srv.url,
            "--from",
            "earliest",
            "--max-items",
            "3",
            "--format",
            "jelly",
            "--to",
            out.to_str().unwrap(),
            "-q",
        ],
        None,
    );
    let bytes = std::fs::read(&out).unwrap();
    let mut rd = JellyReader::new(&bytes[..]);
    let mut sizes = Vec::new();
    while let Some(mut f) = rd.next_frame().unwrap() {
        let meta = f.metadata().unwrap();
        let source = meta.iter().find(|(k, _)| *k == "source").unwrap().1;
        assert_eq!(source, b"demo:iot-assist-weather");
        let mut n = 0;
        while let Some(ev) = f.next_event().unwrap() {
            if matches!(ev, Event::Statement(_)) {
                n += 1;
            }
        }
        sizes.push(n);
    }
    sizes
}

/// `jelly serve --demo` replays the weather dataset as a live topic: items in the
/// order and sizes of the recorded stream, with the demo's source id, and a bounded
/// log.
#[test]
fn serve_demo_publishes_the_weather_stream() {
    let dataset = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/datasets/iot-assist-weather");
    let counts: Vec<usize> = std::fs::read_to_string(dataset.join("frames.txt"))
        .expect("shared/datasets beside the checkout")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .take(3)
        .map(|l| l.parse().unwrap())
        .collect();
    // The built-in demo data (no --demo-data, from any folder) starts as the dataset does.
    let builtin = temp_dir("demo-builtin");
    let srv = ServeProc::start_with(&builtin.join("data"), &["--demo", "--demo-rate", "50"]);
    assert_eq!(demo_item_sizes(&srv, &builtin), counts);
    // The README's filter example selects what it says: 43 of the first 100 items.
    let readme = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"),
    )
    .unwrap();
    let query = readme
        .split("--data-urlencode 'ask=")
        .nth(1)
        .and_then(|rest| rest.split('\'').next())
        .expect("the README's ask example");
    let t0 = std::time::Instant::now();
    let selected = loop {
        let out = Command::new("curl")
            .args(["-sfG", "-D", "-", "-o", "/dev/null"])
            .arg(format!(
                "{}/topics/weather/poll?from=0&max_items=100&format=nquads",
                srv.url
            ))
            .args(["--data-urlencode", &format!("ask={query}")])
            .output()
            .expect("curl is needed by this test: install it (apt-get install curl)");
        let head = String::from_utf8_lossy(&out.stdout).to_ascii_lowercase();
        let header = |name: &str| {
            head.lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|v| v.trim().to_string())
        };
        if header("x-jelly-next-offset:").as_deref() == Some("100") {
            break header("x-jelly-items:");
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the demo did not reach 100 items: {head}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(selected.as_deref(), Some("43"));
    drop(srv);
    let dir = temp_dir("demo");
    let start_demo = || {
        ServeProc::start_with(
            &dir.join("data"),
            &[
                "--demo",
                "--demo-data",
                dataset.to_str().unwrap(),
                "--demo-rate",
                "50",
            ],
        )
    };
    let srv = start_demo();
    assert_eq!(demo_item_sizes(&srv, &dir), counts);
    // The demo topic is a triples topic whose log is bounded.
    let r = ok(
        &[
            "subscribe",
            "weather",
            "--server",
            &srv.url,
            "--from",
            "0",
            "--max-items",
            "1",
            "--format",
            "ntriples",
            "-q",
        ],
        None,
    );
    assert!(!r.out().is_empty());
    let described: serde_json::Value = serde_json::from_str(
        &std::process::Command::new("curl")
            .args(["-sf", &format!("{}/topics/weather", srv.url)])
            .output()
            .map(|o| String::from_utf8(o.stdout).unwrap())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(described["options"]["physical"], "triples", "{described}");
    assert!(
        described["options"]["retention_bytes"].as_u64().unwrap() > 0,
        "{described}"
    );
    // A retention changed while it runs holds, and the demo goes on after a restart.
    let altered = ok(
        &[
            "topics",
            "alter",
            "weather",
            "--retention-bytes",
            "123456789",
            "--server",
            &srv.url,
        ],
        None,
    );
    let altered: serde_json::Value = serde_json::from_slice(&altered.stdout).unwrap();
    assert_eq!(srv.stop(), 0);
    let srv = start_demo();
    let describe = || -> serde_json::Value {
        serde_json::from_slice(
            &ok(
                &["topics", "describe", "weather", "--server", &srv.url],
                None,
            )
            .stdout,
        )
        .unwrap()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let before = altered["next_offset"].as_u64().unwrap();
    while describe()["next_offset"].as_u64().unwrap() <= before + 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the demo did not resume: {}",
            describe()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(describe()["options"]["retention_bytes"], 123_456_789);
    assert_eq!(srv.stop(), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn subscribe_stops_with_an_error_when_its_topic_is_deleted() {
    // Resuming at its offset in a topic created again under the same name (whose
    // offsets start over at 0) would skip or mix items, so the follower stops.
    let dir = temp_dir("deleted");
    let srv = ServeProc::start(&dir.join("data"));
    let url = srv.url.clone();
    let line = "<http://ex.org/s> <http://ex.org/p> \"0\" .\n<http://ex.org/s> <http://ex.org/p> \"1\" .\n";
    ok(
        &["publish", "d", "-", "--server", &url, "-q"],
        Some(line.as_bytes()),
    );
    let follower = spawn_jelly(&[
        "subscribe",
        "d",
        "--server",
        &url,
        "--from",
        "earliest",
        "--max-items",
        "10",
    ]);
    // One that has received nothing yet (it waits for new items) must stop too.
    let waiting = spawn_jelly(&[
        "subscribe",
        "d",
        "--server",
        &url,
        "--from",
        "latest",
        "--max-items",
        "10",
    ]);
    std::thread::sleep(Duration::from_millis(700));
    let out = Command::new("curl")
        .args(["-sS", "-X", "DELETE", &format!("{url}/topics/d")])
        .output()
        .expect("curl is needed by this test: install it (apt-get install curl)");
    let body = String::from_utf8_lossy(&out.stdout);
    assert!(body.contains("\"deleted\":true"), "{body}");
    // Published again at once, before the follower reconnects: a new topic of the same
    // name, whose offsets start over. The follower must not read on in it.
    for i in 0..3 {
        let line = format!("<http://ex.org/s> <http://ex.org/p> \"new{i}\" .\n");
        ok(
            &["publish", "d", "-", "--server", &url, "-q"],
            Some(line.as_bytes()),
        );
    }
    let out = wait_at_most(follower, Duration::from_secs(30));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    // The server's reason depends on whether the follower reconnected before the
    // publishes above made the topic again (a busy machine can reorder them): the
    // topic is not there yet, or it is there under a new id. Both must stop it.
    assert!(
        stderr.contains("topic `d` is gone after its item 0 (deleted")
            && stderr.contains("not resuming")
            && (stderr.contains("was deleted") || stderr.contains("topic `d` does not exist")),
        "{stderr}"
    );
    // What it had is written, and nothing of the new topic.
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 2, "{text}");
    assert!(!text.contains("new"), "{text}");
    let out = wait_at_most(waiting, Duration::from_secs(30));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("topic `d` is gone before any item arrived"),
        "{stderr}"
    );
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(srv.stop(), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn subscribe_refuses_turtle_and_trig_for_topics_they_cannot_carry() {
    let dir = temp_dir("star_ttl");
    let srv = ServeProc::start(&dir.join("data"));
    let url = srv.url.clone();
    for (topic, options, line, reason) in [
        (
            "star",
            r#"{"physical":"triples","rdf_star":true}"#,
            "<< <http://ex.org/a> <http://ex.org/b> <http://ex.org/c> >> <http://ex.org/saidBy> <http://ex.org/bob> .\n",
            "RDF-star",
        ),
        (
            "gen",
            r#"{"physical":"triples","generalized":true}"#,
            "\"lit\" <http://ex.org/p> <http://ex.org/o> .\n",
            "generalized",
        ),
    ] {
        ok(
            &[
                "topics",
                "create",
                topic,
                "--options",
                options,
                "--server",
                &url,
            ],
            None,
        );
        ok(
            &["publish", topic, "-", "--server", &url, "-q"],
            Some(line.as_bytes()),
        );
        let subscribe = |format| {
            jelly(
                &[
                    "subscribe",
                    topic,
                    "--server",
                    &url,
                    "--no-follow",
                    "--format",
                    format,
                ],
                None,
            )
        };
        for format in ["ttl", "trig"] {
            let r = subscribe(format);
            assert_eq!(r.code, 2, "{topic} {format}: {}", r.stderr);
            assert!(r.stderr.contains(reason), "{topic} {format}: {}", r.stderr);
            assert!(r.stderr.contains("--format nt"), "{}", r.stderr);
            assert!(r.stdout.is_empty(), "{topic} {format}");
        }
        let r = subscribe("nt");
        assert_eq!(r.code, 0, "{}", r.stderr);
        let text = String::from_utf8_lossy(&r.stdout);
        assert!(text.contains(line.trim_end()), "{topic}: {text}");
    }
    assert_eq!(srv.stop(), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn deleting_an_unavailable_topic_says_so() {
    let dir = temp_dir("unavail");
    let data = dir.join("data");
    let srv = ServeProc::start(&data);
    let s = srv.url.clone();
    for i in 0..2 {
        let nt = format!("<http://ex.org/s> <http://ex.org/p> \"{i}\" .\n");
        ok(
            &["publish", "t", "-", "--server", &s, "--in-format", "nt"],
            Some(nt.as_bytes()),
        );
    }
    assert_eq!(srv.stop(), 0);
    // A damaged first record with a whole one after it: not a torn tail, so the
    // topic is unavailable after the restart.
    let seg = data.join("t").join("log").join("00000000000000000000.seg");
    let mut bytes = std::fs::read(&seg).unwrap();
    bytes[20] ^= 0xff;
    std::fs::write(&seg, bytes).unwrap();
    let srv = ServeProc::start(&data);
    let r = ok(&["topics", "delete", "t", "--server", &srv.url], None);
    assert!(r.stderr.contains("it was unavailable"), "{}", r.stderr);
    assert!(!r.stderr.contains("no items"), "{}", r.stderr);
}

#[test]
fn topics_lists_describes_creates_alters_and_deletes() {
    let dir = temp_dir("topics");
    let srv = ServeProc::start(&dir.join("data"));
    let url = srv.url.clone();
    let topics = |args: &[&str]| {
        let mut v = vec!["topics"];
        v.extend_from_slice(args);
        v.extend_from_slice(&["--server", &url]);
        jelly(&v, None)
    };
    // Nothing yet: the header alone.
    let r = topics(&["list"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.out().trim(), "TOPIC  FIRST  NEXT  ITEMS  SUBSCRIBERS");

    let opts = r#"{"physical":"triples"}"#;
    let r = topics(&["create", "r", "--options", opts]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(v["name"], "r");
    assert_eq!(v["options"]["physical"], "triples");
    assert!(r.stderr.contains("`r` created"), "{}", r.stderr);
    let r = topics(&["create", "r", "--options", opts]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("exists with these options"),
        "{}",
        r.stderr
    );
    // Other options: refused by the server (exit 1), with its reason.
    let r = topics(&["create", "r", "--options", r#"{"physical":"quads"}"#]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("409") && r.stderr.contains("other options"),
        "{}",
        r.stderr
    );
    usage_error(
        &[
            "topics",
            "create",
            "x",
            "--options",
            "{nope",
            "--server",
            &url,
        ],
        "--options is not JSON",
    );
    usage_error(
        &["topics", "describe", "a/b", "--server", &url],
        "invalid topic name `a/b`",
    );

    ok(
        &["publish", "r", "-", "--server", &url, "-q"],
        Some(b"<http://ex.org/s> <http://ex.org/p> \"0\" .\n"),
    );
    let r = topics(&["list"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let lines: Vec<String> = r.out().lines().map(str::to_string).collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    let cols: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(cols, ["r", "0", "1", "1", "0"]);
    let r = topics(&["list", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(v["topics"][0]["next_offset"], 1);
    let r = topics(&["describe", "r"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(v["items"], 1);

    // Retention changes in place; the other options stay.
    let r = topics(&[
        "alter",
        "r",
        "--retention-ms",
        "3600000",
        "--retention-bytes",
        "0",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(v["options"]["retention_ms"], 3_600_000);
    assert_eq!(v["options"]["physical"], "triples");
    assert!(
        r.stderr.contains("`r` changed; it holds offsets 0 to 0"),
        "{}",
        r.stderr
    );
    let r = topics(&["describe", "r"]);
    let v: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(v["options"]["retention_ms"], 3_600_000);
    let r = topics(&["alter", "r", "--retention-items", "0"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("400") && r.stderr.contains("retention_items must be at least 1"),
        "{}",
        r.stderr
    );
    usage_error(
        &["topics", "alter", "r", "--server", &url],
        "nothing to change",
    );

    let r = topics(&["delete", "r"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(v["deleted"], true);
    assert_eq!(v["next_offset"], 1);
    assert!(
        r.stderr.contains("`r` deleted (it held offsets 0 to 0)"),
        "{}",
        r.stderr
    );
    let r = topics(&["delete", "r"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("topic `r` does not exist"),
        "{}",
        r.stderr
    );
    let r = topics(&["describe", "r"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(!dir.join("data/r").exists());
    assert_eq!(srv.stop(), 0);

    // A server that is not there: exit 2, naming it.
    let r = topics(&["list"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("cannot reach"), "{}", r.stderr);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--set` changes any key of the config file from the command line.
#[test]
fn serve_set_overrides_config_keys() {
    let dir = temp_dir("serve-set");
    let srv = ServeProc::start_with(
        &dir.join("data"),
        &[
            "--set",
            "topic_defaults.physical=triples",
            "--set",
            "max_topics=1",
        ],
    );
    let url = srv.url.clone();
    let nt = b"<http://ex.org/s> <http://ex.org/p> \"0\" .\n";
    ok(&["publish", "a", "-", "--server", &url, "-q"], Some(nt));
    let r = jelly(&["topics", "describe", "a", "--server", &url], None);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(v["options"]["physical"], "triples", "{v}");
    // One topic at most: a second name is refused (a server-side limit, not bad data:
    // exit 2, as `jelly publish --help` says).
    let r = jelly(&["publish", "b", "-", "--server", &url, "-q"], Some(nt));
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("max_topics"), "{}", r.stderr);
    // `topics create` answers the same limit the same way (`jelly topics --help`).
    let r = jelly(&["topics", "create", "c", "--server", &url], None);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("507") && r.stderr.contains("max_topics"),
        "{}",
        r.stderr
    );
    assert_eq!(srv.stop(), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A follower of a quiet topic, started at `latest`, keeps following across a server
/// restart that comes after more than `--retry-secs` of quiet (the budget starts when
/// the connection is lost), and misses no item published after it started (`latest`
/// is resolved once, at the first connection).
#[test]
fn a_quiet_follower_from_latest_survives_a_restart() {
    let dir = temp_dir("quiet-latest");
    let data = dir.join("data");
    let srv = ServeProc::start(&data);
    let url = srv.url.clone();
    let addr = url.trim_start_matches("http://").to_string();
    let publish = |i: u32| publish_value(&url, "q", i);
    publish(0);
    let follower = spawn_jelly(&[
        "subscribe",
        "q",
        "--server",
        &url,
        "--from",
        "latest",
        "--max-items",
        "2",
        "--retry-secs",
        "2",
    ]);
    // Quiet for longer than the retry budget, then the server goes away and comes back.
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(srv.stop(), 0);
    let srv = ServeProc::try_start_with(&data, &addr, &[]).expect("restart on the same address");
    publish(1);
    publish(2);
    let out = follower.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("\"1\"") && text.contains("\"2\""), "{text}");
    assert!(!text.contains("\"0\""), "{text}");
    assert_eq!(srv.stop(), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A one-connection HTTP server that answers every request with `answer`.
fn fake_server(answer: &'static [u8]) -> String {
    use std::io::{Read as _, Write as _};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in l.incoming().flatten().take(50) {
            let mut conn = conn;
            let mut head = [0u8; 4096];
            let _ = conn.read(&mut head);
            let _ = conn.write_all(answer);
        }
    });
    format!("http://{addr}")
}

/// A server that redirects every request but `GET /health` there with a 302, and
/// answers that with a 200 of JSON.
fn redirecting_server() -> String {
    use std::io::{Read as _, Write as _};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in l.incoming().flatten().take(50) {
            let mut conn = conn;
            let mut head = [0u8; 4096];
            let n = conn.read(&mut head).unwrap_or(0);
            let answer: &[u8] = if head[..n].starts_with(b"GET /health ") {
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 15\r\n\r\n{\"status\":\"ok\"}"
            } else {
                b"HTTP/1.1 302 Found\r\nlocation: /health\r\ncontent-length: 0\r\n\r\n"
            };
            let _ = conn.write_all(answer);
        }
    });
    format!("http://{addr}")
}

/// Servers that misbehave get clear errors, never a hang, a silent success or a
/// huge allocation: a frame length of 2^40, a 200 that is not Jelly, a redirect that
/// would turn a publish into a GET; and names that are not topic names are refused
/// before anything is sent.
#[test]
fn misbehaving_servers_and_bad_topic_names() {
    let huge = fake_server(
        b"HTTP/1.1 200 OK\r\ncontent-type: application/x-jelly-rdf\r\ncontent-length: 12\r\n\r\n\x80\x80\x80\x80\x80\x20\0\0\0\0\0\0",
    );
    let r = jelly(&["subscribe", "t", "--no-follow", "--server", &huge], None);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("over the limit"), "{}", r.stderr);
    let text =
        fake_server(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 2\r\n\r\nOK");
    let r = jelly(&["subscribe", "t", "--no-follow", "--server", &text], None);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("not a Jelly stream"), "{}", r.stderr);
    let moved =
        fake_server(b"HTTP/1.1 302 Found\r\nlocation: /health\r\ncontent-length: 0\r\n\r\n");
    let r = jelly(
        &["publish", "t", "-", "--in-format", "nq", "--server", &moved],
        Some(b"<http://e/s> <http://e/p> <http://e/o> .\n"),
    );
    assert_ne!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("302"), "{}", r.stderr);
    // Nor is a topic's creation, change or deletion sent on after a 302 (where a POST
    // would become a GET, and a PUT or DELETE go to another resource): it is reported.
    let moved = redirecting_server();
    for args in [
        &["topics", "create", "t", "--server", &moved][..],
        &["topics", "delete", "t", "--server", &moved],
        &[
            "topics",
            "alter",
            "t",
            "--retention-ms",
            "5",
            "--server",
            &moved,
        ],
    ] {
        let r = jelly(args, None);
        assert_ne!(r.code, 0, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains("302"), "{args:?}: {}", r.stderr);
    }
    for verb in ["publish", "subscribe"] {
        let r = jelly(&[verb, "t/items?from=0", "--server", &text], Some(b""));
        assert_eq!(r.code, 2, "{verb}: {}", r.stderr);
        assert!(r.stderr.contains("topic name"), "{verb}: {}", r.stderr);
    }
}

/// Ctrl-C (or SIGTERM) stops a follower cleanly: a compressed output file is
/// finished (its trailer written) and holds every item received.
#[test]
fn an_interrupted_follower_finishes_its_compressed_output() {
    use std::io::Read as _;
    let dir = temp_dir("sub-interrupt");
    let srv = ServeProc::start(&dir.join("data"));
    let url = srv.url.clone();
    for i in 0..3 {
        publish_value(&url, "z", i);
    }
    for signal in ["-INT", "-TERM"] {
        let out = dir.join(format!("out{signal}.nq.gz"));
        let mut follower = Command::new(env!("CARGO_BIN_EXE_jelly"))
            .args([
                "subscribe",
                "z",
                "--server",
                &url,
                "--from",
                "earliest",
                "-o",
            ])
            .arg(&out)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Until the three items are in (the file grows as they are written).
        let t0 = std::time::Instant::now();
        while std::fs::metadata(&out).map_or(0, |m| m.len()) < 40 {
            assert!(t0.elapsed() < Duration::from_secs(20), "no output");
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(300));
        let st = Command::new("kill")
            .args([signal, &follower.id().to_string()])
            .status()
            .unwrap();
        assert!(st.success());
        let status = follower.wait().unwrap();
        assert_eq!(status.code(), Some(0), "{signal}");
        let mut text = String::new();
        flate2::read::MultiGzDecoder::new(std::fs::File::open(&out).unwrap())
            .read_to_string(&mut text)
            .expect("a whole gzip file");
        assert_eq!(text.lines().count(), 3, "{signal}: {text}");
    }
    assert_eq!(srv.stop(), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `subscribe --append` goes on where an earlier run stopped: a Jelly file stays one
/// decodable stream whose items run on without a gap or a repeat (a last frame cut
/// off mid-write is cut back and fetched again), compressed files included; a text
/// file needs --from, and a file of another topic's options is refused untouched.
#[test]
fn subscribe_append_continues_the_file_where_it_stopped() {
    let dir = temp_dir("append");
    let srv = ServeProc::start(&dir.join("data"));
    let url = srv.url.clone();
    let pred = |i: u32| match i {
        0 => "q",
        4 => "r",
        _ => "p",
    };
    let publish = |topic: &str, from: u32, to: u32| {
        for i in from..to {
            // Items 0 and 4 have predicates of their own: a run that starts later lays
            // its tables out unlike the file's, and goes back to an earlier entry.
            let p = pred(i);
            let nt = format!("<http://ex.org/s{i}> <http://ex.org/{p}> \"{i}\" .\n");
            ok(
                &[
                    "publish",
                    topic,
                    "-",
                    "--server",
                    &url,
                    "-q",
                    "--in-format",
                    "nt",
                ],
                Some(nt.as_bytes()),
            );
        }
    };
    let subscribe = |file: &str, max: &str, extra: &[&str]| {
        let mut args = vec![
            "subscribe",
            "a",
            "--server",
            &url,
            "--no-follow",
            "--max-items",
            max,
            "--to",
            file,
        ];
        args.extend_from_slice(extra);
        jelly(&args, None)
    };
    // Items as (offset, the object's value), decoding the file as one stream.
    let items = |path: &std::path::Path| {
        let bytes = std::fs::read(path).unwrap();
        let mut rd = JellyReader::new(&bytes[..]);
        let mut seen = Vec::new();
        while let Some(mut f) = rd.next_frame().unwrap() {
            let meta = f.metadata().unwrap();
            let off = meta.iter().find(|(k, _)| *k == "offset").unwrap().1;
            let off: u64 = std::str::from_utf8(off).unwrap().parse().unwrap();
            while let Some(ev) = f.next_event().unwrap() {
                if let Event::Statement(st) = ev {
                    seen.push((
                        off,
                        format!("{} {} {}", st.subject, st.predicate, st.object),
                    ));
                }
            }
        }
        seen
    };
    let want = |n: u64| -> Vec<(u64, String)> {
        (0..n)
            .map(|i| {
                let p = pred(i as u32);
                (
                    i,
                    format!("<http://ex.org/s{i}> <http://ex.org/{p}> \"{i}\""),
                )
            })
            .collect()
    };
    publish("a", 0, 10);

    let file = dir.join("a.jelly");
    let f = file.to_str().unwrap();
    let r = subscribe(f, "3", &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = subscribe(f, "4", &["--append"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(items(&file), want(7));
    // The last frame cut off mid-write: cut back to the frame before, and fetched again.
    let len = std::fs::metadata(&file).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&file)
        .unwrap()
        .set_len(len - 3)
        .unwrap();
    let r = subscribe(f, "3", &["--append"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("cut back to byte"), "{}", r.stderr);
    assert_eq!(items(&file), want(9));
    // The whole file reads as one stream with other readers too.
    let nq = ok(&["rdf", "from-jelly", f], None);
    assert_eq!(nq.out().lines().count(), 9);

    // gzip: a new member per run.
    let gz = dir.join("a.jelly.gz");
    let g = gz.to_str().unwrap();
    for _ in 0..3 {
        let r = subscribe(g, "3", &["--append"]);
        assert_eq!(r.code, 0, "{}", r.stderr);
    }
    let plain = ok(&["rdf", "from-jelly", g, "--out-format", "nq"], None);
    assert_eq!(plain.out().lines().count(), 9, "{}", plain.out());

    // A text file does not say where it stopped: --from is asked for.
    let text = dir.join("a.nq");
    let t = text.to_str().unwrap();
    assert_eq!(subscribe(t, "2", &[]).code, 0);
    let before = std::fs::read(&text).unwrap();
    let r = subscribe(t, "2", &["--append"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("to an N-Quads file that is not empty needs --from"),
        "{}",
        r.stderr
    );
    assert_eq!(std::fs::read(&text).unwrap(), before);
    let r = subscribe(t, "2", &["--append", "--from", "2"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let values: Vec<String> = String::from_utf8(std::fs::read(&text).unwrap())
        .unwrap()
        .lines()
        .map(|l| l.split('"').nth(1).unwrap().to_string())
        .collect();
    assert_eq!(values, ["0", "1", "2", "3"]);

    // A text file whose last line was cut off is refused, also with --from.
    let mut torn = std::fs::read(&text).unwrap();
    torn.truncate(torn.len() - 5);
    std::fs::write(&text, &torn).unwrap();
    let r = subscribe(t, "2", &["--append", "--from", "4"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("line break"), "{}", r.stderr);
    assert_eq!(std::fs::read(&text).unwrap(), torn);

    // Another topic's items: refused, the file untouched.
    ok(
        &[
            "topics",
            "create",
            "t",
            "--server",
            &url,
            "--options",
            r#"{"physical":"triples"}"#,
        ],
        None,
    );
    publish("t", 0, 2);
    let sub_t = |file: &str| {
        jelly(
            &[
                "subscribe",
                "t",
                "--server",
                &url,
                "--no-follow",
                "--to",
                file,
                "--append",
                "--from",
                "earliest",
            ],
            None,
        )
    };
    for path in [&file, &gz] {
        let before = std::fs::read(path).unwrap();
        let r = sub_t(path.to_str().unwrap());
        assert_eq!(r.code, 2, "{}", r.stderr);
        assert!(
            r.stderr.contains("holds items of topic `a`"),
            "{}",
            r.stderr
        );
        assert_eq!(std::fs::read(path).unwrap(), before);
    }
    // A stream of other options (no topic in it): refused at the first item, the
    // file untouched, compressed or not.
    let nt = dir.join("x.nt");
    std::fs::write(
        &nt,
        "<http://ex.org/x> <http://ex.org/y> <http://ex.org/z> .\n",
    )
    .unwrap();
    for name in ["other.jelly", "other.jelly.gz"] {
        let other = dir.join(name);
        ok(
            &[
                "rdf",
                "to-jelly",
                nt.to_str().unwrap(),
                "-o",
                other.to_str().unwrap(),
            ],
            None,
        );
        let before = std::fs::read(&other).unwrap();
        let r = sub_t(other.to_str().unwrap());
        assert_eq!(r.code, 2, "{}", r.stderr);
        assert!(r.stderr.contains("other options"), "{}", r.stderr);
        assert_eq!(std::fs::read(&other).unwrap(), before, "{name}");
    }

    // One subscriber per file: a second one appending at the same time is refused.
    // The first is running once it has written the item the file lacks (item 9).
    let len = std::fs::metadata(&file).unwrap().len();
    let live = spawn_jelly(&["subscribe", "a", "--server", &url, "--to", f, "--append"]);
    let t0 = std::time::Instant::now();
    while std::fs::metadata(&file).unwrap().len() == len {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the follower wrote nothing"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let r = subscribe(f, "1", &["--append"]);
    let _ = Command::new("kill")
        .args(["-INT", &live.id().to_string()])
        .status();
    let out = wait_at_most(live, Duration::from_secs(30));
    let live_err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(r.code, 2, "{} / the first: {live_err}", r.stderr);
    assert!(
        r.stderr.contains("another command is appending"),
        "{}",
        r.stderr
    );
    assert!(out.status.success(), "{live_err}");
    assert_eq!(items(&file), want(10));

    // The topic deleted and created again (offsets from 0 again): the file's topic id
    // does not match, and the run ends with an error instead of mixing two topics.
    let held = items(&file).len();
    ok(&["topics", "delete", "a", "--server", &url], None);
    publish("a", 0, 12);
    let before = std::fs::read(&file).unwrap();
    let r = subscribe(f, "3", &["--append"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(r.stderr.contains("was deleted"), "{}", r.stderr);
    assert_eq!(std::fs::read(&file).unwrap(), before);
    assert_eq!(items(&file).len(), held);
    // Without --to, or with stdout, there is nothing to append to.
    usage_error(&["subscribe", "a", "--append"], "--to");
    usage_error(&["subscribe", "a", "--append", "--to", "-"], "stdout");
    assert_eq!(srv.stop(), 0);
}

/// `publish` takes the formats its help offers: an `.n3` file (or `--in-format n3`)
/// that is RDF goes as Turtle; N3's own syntax is refused by the server with its line.
#[test]
fn publish_sends_n3_as_turtle() {
    let dir = temp_dir("n3");
    let srv = ServeProc::start(&dir.join("data"));
    let n3 = dir.join("doc.n3");
    std::fs::write(
        &n3,
        "@prefix e: <http://ex.org/> .\ne:s e:p ( 1 2 ), [ e:q \"x\" ] .\n",
    )
    .unwrap();
    let r = ok(
        &[
            "publish",
            "n",
            n3.to_str().unwrap(),
            "--server",
            &srv.url,
            "-q",
        ],
        None,
    );
    assert!(r.out().contains("\"offsets\":[0]"), "{}", r.out());
    let r = ok(
        &[
            "publish",
            "n",
            "-",
            "--in-format",
            "n3",
            "--server",
            &srv.url,
            "-q",
        ],
        Some(b"<http://ex.org/a> <http://ex.org/b> <http://ex.org/c> .\n"),
    );
    assert!(r.out().contains("\"offsets\":[1]"), "{}", r.out());
    let rule = dir.join("rule.n3");
    std::fs::write(
        &rule,
        "{ ?x <http://ex.org/p> ?y } => { ?y <http://ex.org/p> ?x } .\n",
    )
    .unwrap();
    let r = jelly(
        &["publish", "n", rule.to_str().unwrap(), "--server", &srv.url],
        None,
    );
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("line 1") || r.stderr.contains("1:"),
        "{}",
        r.stderr
    );
    let sub = ok(
        &["subscribe", "n", "--server", &srv.url, "--no-follow", "-q"],
        None,
    );
    // The list and the blank node of the first document are there, and the second.
    assert!(
        sub.out()
            .contains("http://www.w3.org/1999/02/22-rdf-syntax-ns#first"),
        "{}",
        sub.out()
    );
    assert!(sub.out().contains("<http://ex.org/c>"), "{}", sub.out());
    assert_eq!(srv.stop(), 0);
}

/// `jelly subscribe --to FILE` replaces FILE only once there is something to write:
/// a run that fails first (an unknown topic, a server that is down, a format the topic
/// cannot take) leaves an existing file as it was; a run that succeeds with no item
/// leaves it empty, as before.
#[test]
fn subscribe_to_a_file_leaves_it_alone_when_the_run_fails_first() {
    let dir = temp_dir("keep_to");
    let srv = ServeProc::start(&dir.join("data"));
    let s = srv.url.clone();
    ok(
        &[
            "topics",
            "create",
            "star",
            "--options",
            r#"{"physical":"triples","rdf_star":true}"#,
            "--server",
            &s,
        ],
        None,
    );
    ok(
        &[
            "publish",
            "star",
            "-",
            "--server",
            &s,
            "-q",
            "--in-format",
            "nt",
        ],
        Some(b"<http://ex.org/a> <http://ex.org/p> \"x\" .\n"),
    );
    let kept = b"kept: written by an earlier run\n";
    for (name, args, code) in [
        (
            "unknown.nq",
            vec!["subscribe", "nope", "--server", &s, "--no-follow"],
            1,
        ),
        (
            "down.jelly",
            vec![
                "subscribe",
                "star",
                "--server",
                "http://127.0.0.1:9",
                "--retry-secs",
                "0",
            ],
            2,
        ),
        (
            "star.trig",
            vec![
                "subscribe",
                "star",
                "--server",
                &s,
                "--no-follow",
                "--format",
                "trig",
            ],
            2,
        ),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, kept).unwrap();
        let mut args = args;
        let p = path.to_str().unwrap().to_string();
        args.extend(["--to", &p]);
        let r = jelly(&args, None);
        assert_eq!(r.code, code, "{name}: {}", r.stderr);
        assert_eq!(std::fs::read(&path).unwrap(), kept, "{name}: {}", r.stderr);
    }
    // Success: replaced, with the items; with none, empty.
    let out = dir.join("out.nt");
    std::fs::write(&out, kept).unwrap();
    let o = out.to_str().unwrap();
    ok(
        &[
            "subscribe",
            "star",
            "--server",
            &s,
            "--no-follow",
            "-q",
            "--to",
            o,
        ],
        None,
    );
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("\"x\"") && !text.contains("kept"), "{text}");
    std::fs::write(&out, kept).unwrap();
    ok(
        &[
            "subscribe",
            "star",
            "--server",
            &s,
            "--no-follow",
            "-q",
            "--from",
            "latest",
            "--to",
            o,
        ],
        None,
    );
    assert_eq!(std::fs::read(&out).unwrap(), b"", "a run with no item");
    // Following a topic that does not exist yet, stopped by Ctrl-C before any item:
    // the file is left as it was.
    std::fs::write(&out, kept).unwrap();
    let mut child = spawn_jelly(&["subscribe", "later", "--server", &s, "--to", o]);
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("waiting") {
        line.clear();
        assert!(
            std::io::BufRead::read_line(&mut err, &mut line).unwrap() > 0,
            "subscribe ended before it waited for the topic"
        );
    }
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success()
    );
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "interrupted follow");
    assert_eq!(
        std::fs::read(&out).unwrap(),
        kept,
        "an interrupted run before any item"
    );
    // A file that cannot be written is refused at once (exit 2), not at the first item.
    // (A file sysfs will not make, even for root.)
    let r = jelly(
        &[
            "subscribe",
            "star",
            "--server",
            &s,
            "--no-follow",
            "--to",
            "/sys/x.nt",
        ],
        None,
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("/sys/x.nt"), "{}", r.stderr);
    assert_eq!(srv.stop(), 0);
    let _ = std::fs::remove_dir_all(&dir);
}
