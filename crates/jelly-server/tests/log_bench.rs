//! Append throughput of the file log with 1, 8 and 64 concurrent appenders, under
//! fsync (group commit) and without. Prints numbers, asserts none about speed:
//!
//! ```text
//! cargo test --release -p jelly-server --test log_bench -- --ignored --nocapture
//! ```
//! `JELLY_LOG_BENCH_DIR` picks the directory (default: the system temp dir).

use std::fs;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use jelly_server::item::NewItem;
use jelly_server::log::{Durability, FileLog, FileLogOptions, Log};

const RUN_FOR: Duration = Duration::from_secs(2);
const FRAME_BYTES: usize = 1024;

async fn run(durability: Durability, appenders: usize) -> (u64, f64) {
    let base = std::env::var_os("JELLY_LOG_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let dir = base.join(format!(
        "jelly-log-bench-{}-{durability}-{appenders}",
        std::process::id()
    ));
    let _ = fs::remove_dir_all(&dir);
    let opts = FileLogOptions {
        durability,
        ..FileLogOptions::default()
    };
    let log = Arc::new(FileLog::open(&dir, opts).unwrap());
    let item = NewItem {
        frame: Bytes::from(vec![0x5a; FRAME_BYTES]),
        statements: 10,
        source: "bench".into(),
        headers: vec![],
    };
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..appenders {
        let log = log.clone();
        let item = item.clone();
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while start.elapsed() < RUN_FOR {
                log.append(vec![item.clone()]).await.unwrap();
                n += 1;
            }
            n
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    let secs = start.elapsed().as_secs_f64();
    assert_eq!(log.next_offset(), total);
    drop(log);
    let _ = fs::remove_dir_all(&dir);
    (total, total as f64 / secs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run with --ignored --nocapture"]
async fn append_throughput() {
    println!("single-item appends, {FRAME_BYTES}-byte frames, {RUN_FOR:?} per row");
    println!(
        "{:<10} {:>10} {:>12} {:>14}",
        "policy", "appenders", "appends", "appends/s"
    );
    for durability in [Durability::Fsync, Durability::None] {
        for appenders in [1, 8, 64] {
            let (n, rate) = run(durability, appenders).await;
            println!(
                "{:<10} {appenders:>10} {n:>12} {rate:>14.0}",
                durability.to_string()
            );
        }
    }
}
