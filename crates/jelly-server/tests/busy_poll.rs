//! Busy polling that stops while the server is idle (`busy_poll_idle_ms`): a real
//! server on a busy-polling runtime stops polling, and stops using CPU, when nothing
//! happens, and polls again once items arrive. In a binary of its own, because the
//! activity it watches is per process.

use std::time::{Duration, Instant};

use jelly_server::runtime::{build, poller_sleeping};
use jelly_server::{Server, ServerConfig};

/// CPU time of this process (user and system) from `/proc/self/stat`, in clock ticks.
fn cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // Fields after the command name (which may hold spaces) end with `)`.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after `) `.
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// Waits up to 10 s for `cond`.
async fn eventually(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[test]
fn busy_polling_sleeps_while_idle_and_resumes_with_items() {
    let config = ServerConfig {
        busy_poll: true,
        busy_poll_idle_ms: 300,
        ..ServerConfig::ephemeral()
    };
    let rt = build(&config).unwrap();
    rt.block_on(async move {
        let srv = Server::start(config).await.unwrap();
        let url = format!("{}/topics/t/items", srv.url());
        let c = reqwest::Client::new();
        let publish = || async {
            let r = c
                .post(&url)
                .header("content-type", "application/n-triples")
                .body("<http://ex.org/s> <http://ex.org/p> \"1\" .\n")
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200);
        };

        // Nothing to do: it stops polling, and the process (whose only busy thread
        // would be the poller) uses little CPU over half a second.
        eventually("the poller sleeps when idle", poller_sleeping).await;
        let ticks = cpu_ticks();
        tokio::time::sleep(Duration::from_millis(500)).await;
        let used = cpu_ticks() - ticks;
        // Ticks are 10 ms; a poller spinning all along would use about 50.
        assert!(used < 20, "{used} ticks of CPU in 50 ticks of idle time");
        assert!(poller_sleeping());

        // Items less than 300 ms apart keep it polling, on one connection (so not
        // by being accepted) for well over 300 ms: the appends do.
        publish().await;
        eventually("an append wakes the poller", || !poller_sleeping()).await;
        let mut last = Instant::now();
        for _ in 0..40 {
            tokio::time::sleep(Duration::from_millis(20)).await;
            // Before the next publish, so that it is not the one waking it. (On a
            // machine so loaded that a 20 ms pause took 200 ms, it may have slept
            // meanwhile, as it should.)
            if last.elapsed() < Duration::from_millis(200) {
                assert!(!poller_sleeping(), "polling stopped while items flowed");
            }
            publish().await;
            last = Instant::now();
        }

        // And after them it sleeps again.
        eventually("the poller sleeps after the items", poller_sleeping).await;
        srv.shutdown().await.unwrap();
    });
}
