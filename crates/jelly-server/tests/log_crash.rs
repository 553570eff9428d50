//! kill -9 crash test: a child process appends with fsync and prints every
//! acknowledged offset; the parent SIGKILLs it mid-stream, reopens the log and checks
//! that every acknowledged item is there, once, in order, intact.
//!
//! The child is this test binary re-executed with an environment variable set, running
//! only `crash_child`, which does nothing in a normal test run.

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use bytes::Bytes;
use jelly_server::item::{Item, NewItem};
use jelly_server::log::{Clock, FileLog, FileLogOptions, Log, ReadLimits};

const CHILD_DIR: &str = "JELLY_LOG_CRASH_CHILD_DIR";
const CHILD_RUN: &str = "JELLY_LOG_CRASH_CHILD_RUN";
const APPENDERS: u64 = 4;

fn options() -> FileLogOptions {
    FileLogOptions {
        // Small segments, so that kills also land around rollovers.
        segment_bytes: 16 << 10,
        index_interval_bytes: 1024,
        ..FileLogOptions::default()
    }
}

/// The item with id `id`: its frame and header name the id, its size varies.
fn payload(id: u64) -> NewItem {
    let mut frame = format!("crash-item-{id}|").into_bytes();
    let n = 40 + (id.wrapping_mul(2_654_435_761) % 700) as usize;
    frame.extend((0..n).map(|k| (k as u64 ^ id) as u8));
    NewItem {
        frame: Bytes::from(frame),
        statements: (id % 1000) as u32,
        source: format!("appender-{}", (id >> 32) & 0xff),
        headers: vec![("id".into(), id.to_string())],
    }
}

/// The id an item claims to be, if its whole content is exactly that item.
fn check_item(it: &Item) -> Result<u64, String> {
    let id: u64 = it
        .headers
        .first()
        .and_then(|(k, v)| (k == "id").then(|| v.parse().ok()).flatten())
        .ok_or_else(|| format!("offset {}: no id header", it.offset))?;
    let want = payload(id);
    if it.frame != want.frame
        || it.statements != want.statements
        || it.source != want.source
        || it.headers != want.headers
    {
        return Err(format!("offset {}: content is not item {id}", it.offset));
    }
    Ok(id)
}

/// The child: appends forever from several tasks, printing `ACK <offset> <id>` after
/// each acknowledged append.
#[test]
fn crash_child() {
    let Ok(dir) = std::env::var(CHILD_DIR) else {
        return;
    };
    let run: u64 = std::env::var(CHILD_RUN).unwrap().parse().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let log = Arc::new(FileLog::open(&dir, options()).unwrap());
        let out = Arc::new(Mutex::new(std::io::stdout()));
        {
            let mut o = out.lock().unwrap();
            writeln!(o, "READY {}", log.next_offset()).unwrap();
            o.flush().unwrap();
        }
        let mut tasks = Vec::new();
        for t in 0..APPENDERS {
            let log = log.clone();
            let out = out.clone();
            tasks.push(tokio::spawn(async move {
                for seq in 0u64.. {
                    let n = 1 + (seq + t) % 3;
                    let ids: Vec<u64> = (0..n)
                        .map(|j| (run << 40) | (t << 32) | (seq * 4 + j))
                        .collect();
                    let offsets = log
                        .append(ids.iter().map(|&id| payload(id)).collect())
                        .await
                        .unwrap();
                    let mut line = String::new();
                    for (o, id) in offsets.iter().zip(&ids) {
                        line.push_str(&format!("ACK {o} {id}\n"));
                    }
                    let mut o = out.lock().unwrap();
                    o.write_all(line.as_bytes()).unwrap();
                    o.flush().unwrap();
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    });
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn temp_dir() -> TempDir {
    static N: AtomicU64 = AtomicU64::new(0);
    let p = std::env::temp_dir().join(format!(
        "jelly-log-crash-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = fs::remove_dir_all(&p);
    fs::create_dir_all(&p).unwrap();
    TempDir(p)
}

enum Line {
    Ready(u64),
    Ack(u64, u64),
}

fn parse_line(l: &str) -> Option<Line> {
    let mut w = l.split(' ');
    match w.next()? {
        "READY" => Some(Line::Ready(w.next()?.parse().ok()?)),
        "ACK" => Some(Line::Ack(w.next()?.parse().ok()?, w.next()?.parse().ok()?)),
        _ => None,
    }
}

fn disk_bytes(dir: &Path) -> u64 {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum()
}

/// Reopens the log and reads it whole, checking every item against the
/// acknowledgements; returns the end offset and the bytes kept.
fn verify(dir: &Path, acked: &BTreeMap<u64, u64>) -> (u64, u64) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let log = FileLog::open(dir, options()).unwrap();
        assert_eq!(log.first_offset(), 0);
        let mut seen_ids = HashSet::new();
        let mut next = 0u64;
        loop {
            let page = log.read(next, ReadLimits::default()).await.unwrap();
            if page.is_empty() {
                break;
            }
            for it in page {
                assert_eq!(it.offset, next, "offsets are dense and in order");
                let id = check_item(&it).unwrap_or_else(|e| panic!("torn or wrong item: {e}"));
                assert!(seen_ids.insert(id), "item {id} stored twice");
                if let Some(&want) = acked.get(&it.offset) {
                    assert_eq!(id, want, "offset {} holds another item", it.offset);
                }
                next += 1;
            }
        }
        assert_eq!(next, log.next_offset());
        if let Some((&last, _)) = acked.last_key_value() {
            assert!(
                next > last,
                "acknowledged offset {last} lost: the log ends at {next}"
            );
        }
        (next, log.size_bytes())
    })
}

#[test]
fn kill_9_loses_no_acknowledged_item() {
    let dir = temp_dir();
    let exe = std::env::current_exe().unwrap();
    let mut acked: BTreeMap<u64, u64> = BTreeMap::new();
    // Kill after this many acknowledgements in each round; the log carries over.
    for (run, kill_after) in [
        (1u64, 25usize),
        (2, 400),
        (3, 3),
        (4, 150),
        (5, 60),
        (6, 1000),
        (7, 1),
        (8, 250),
    ] {
        let mut child = Command::new(&exe)
            .args(["crash_child", "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD_DIR, &dir.0)
            .env(CHILD_RUN, run.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut acks = 0;
        let mut record = |line: &str, acks: &mut usize| match parse_line(line) {
            Some(Line::Ack(offset, id)) => {
                assert!(
                    acked.insert(offset, id).is_none(),
                    "offset {offset} acknowledged twice"
                );
                *acks += 1;
            }
            Some(Line::Ready(next)) => {
                // Reopening after the previous kill kept every acknowledged item.
                let need = acked.last_key_value().map_or(0, |(o, _)| o + 1);
                assert!(next >= need, "child starts at {next}, acks reach {need}");
            }
            None => {}
        };
        while acks < kill_after {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => record(&line, &mut acks),
                Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("child stopped acknowledging after {acks} acks (round {run})");
                }
            }
        }
        // SIGKILL on Unix: no destructor, no final fsync.
        child.kill().unwrap();
        let status = child.wait().unwrap();
        assert!(!status.success());
        // Acks the child printed before it died count as well.
        while let Ok(line) = rx.recv_timeout(Duration::from_secs(10)) {
            record(&line, &mut acks);
        }
        reader.join().unwrap();
        assert!(acks >= kill_after);
        let on_disk = disk_bytes(&dir.0);
        let (end, kept) = verify(&dir.0, &acked);
        eprintln!(
            "round {run}: {acks} acks, log ends at {end}, torn tail cut: {} bytes",
            on_disk - kept
        );
    }
}

const TS_CHILD_DIR: &str = "JELLY_LOG_CRASH_TS_CHILD_DIR";
/// Where the child's clock starts (ms).
const TS_START_MS: u64 = 5_000_000_000;

/// The child of `kill_9_keeps_the_newest_timestamp_of_an_emptied_log`: appends two
/// items, lets age retention delete both, prints `EMPTIED <newest timestamp>` and
/// waits to be killed.
#[test]
fn crash_ts_child() {
    let Ok(dir) = std::env::var(TS_CHILD_DIR) else {
        return;
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let now = Arc::new(AtomicU64::new(TS_START_MS));
        let read = now.clone();
        let opts = FileLogOptions {
            clock: Clock::from_fn(move || read.load(Ordering::SeqCst)),
            ..options()
        };
        let log = FileLog::open(&dir, opts).unwrap();
        for id in 0..2 {
            log.append(vec![payload(id)]).await.unwrap();
            now.fetch_add(1000, Ordering::SeqCst);
        }
        let items = log.read(0, ReadLimits::default()).await.unwrap();
        let newest = items.last().unwrap().timestamp_ms;
        now.fetch_add(60_000, Ordering::SeqCst);
        log.set_retention(None, Some(Duration::from_secs(10)));
        assert_eq!((log.first_offset(), log.next_offset()), (2, 2));
        println!("EMPTIED {newest}");
        std::io::stdout().flush().unwrap();
        std::thread::sleep(Duration::from_secs(600));
    });
}

/// A log emptied by age retention keeps its newest timestamp through a `kill -9`:
/// restarted with the clock an hour behind, it stamps its next item no earlier.
#[test]
fn kill_9_keeps_the_newest_timestamp_of_an_emptied_log() {
    let dir = temp_dir();
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(&exe)
        .args([
            "crash_ts_child",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(TS_CHILD_DIR, &dir.0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    // The harness's "test crash_ts_child ... " may begin the same line.
    let newest = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .find_map(|l| {
            let (_, t) = l.split_once("EMPTIED ")?;
            t.trim().parse::<u64>().ok()
        });
    // SIGKILL on Unix: no destructor, no final fsync.
    child.kill().unwrap();
    let _ = child.wait();
    let newest = newest.expect("the child emptied its log");
    assert_eq!(newest, TS_START_MS + 1000);

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let opts = FileLogOptions {
            clock: Clock::from_fn(|| TS_START_MS - 3_600_000),
            ..options()
        };
        let log = FileLog::open(&dir.0, opts).unwrap();
        assert_eq!((log.first_offset(), log.next_offset()), (2, 2));
        log.append(vec![payload(2)]).await.unwrap();
        let items = log.read(2, ReadLimits::default()).await.unwrap();
        assert!(
            items[0].timestamp_ms >= newest,
            "offset 2 stamped {}, before offset 1's {newest}",
            items[0].timestamp_ms
        );
        assert_eq!(log.offset_for_timestamp(newest).await.unwrap(), 2);
    });
}
