//! The tokio runtime `jelly serve` runs on, and what its threads do when idle.
//!
//! By default the worker threads sleep in the kernel (`epoll_wait`) when there is
//! nothing to do, and a new request wakes one of them. On a machine that is idle
//! between sparse items, that wake-up is slow: the CPU has to leave its idle state (on
//! a VM, the hypervisor has to resume the halted vCPU) and the caches have gone cold.
//! On the 2-vCPU VM of `BENCHMARKS.md` §5 this puts a floor of about 124 µs under a
//! relay that does no work at all, at 10 ms between items, against 45 µs at 1 ms.
//!
//! Busy polling (`busy_poll = true`, `jelly serve --busy-poll`) trades one CPU for
//! that latency: the server runs on a single worker thread that never sleeps. A task
//! on it yields in a loop, and each time it yields the worker polls its I/O driver
//! with a zero timeout before running it again, so a request that arrives is seen at
//! once by a thread that is already running. The thread uses a whole CPU at all
//! times, even with no traffic; throughput is bounded by one worker thread. Blocking
//! work (file system calls under `fsync`) still runs on tokio's blocking pool. What it
//! gains and costs on the benchmark VM: `docs/server-design.md`, "Busy polling".
//!
//! It is one thread because tokio lets only one worker at a time poll the I/O
//! driver: with several workers, an idle one would hold the driver in a sleeping
//! `epoll_wait` and take the wake-ups away from the polling one.

use std::io;

use crate::config::ServerConfig;

/// Builds the multi-thread runtime of `config`: `worker_threads` workers (0: one per
/// CPU), or with `busy_poll` one worker that polls for I/O without sleeping.
///
/// ```
/// let mut config = jelly_server::ServerConfig::ephemeral();
/// config.busy_poll = true;
/// let rt = jelly_server::runtime::build(&config).unwrap();
/// assert_eq!(rt.metrics().num_workers(), 1);
/// assert_eq!(rt.block_on(async { 6 * 7 }), 42);
/// ```
pub fn build(config: &ServerConfig) -> io::Result<tokio::runtime::Runtime> {
    let mut b = tokio::runtime::Builder::new_multi_thread();
    if config.busy_poll {
        b.worker_threads(1);
    } else if config.worker_threads > 0 {
        b.worker_threads(config.worker_threads);
    }
    let rt = b.enable_all().build()?;
    if config.busy_poll {
        rt.spawn(poll_without_sleeping());
    }
    Ok(rt)
}

/// Keeps the runtime thread it runs on from sleeping, for as long as the runtime
/// lives: it yields in a loop, and the scheduler polls its I/O driver and timers
/// (with a zero timeout) before it runs a yielded task again. Each turn also yields
/// the CPU to the kernel (`sched_yield`), so that a thread woken on the same CPU runs
/// at once rather than after the poller's time slice.
///
/// Spawn it once on a current-thread runtime, or on a multi-thread runtime of one
/// worker (see the module documentation for why not more).
///
/// ```
/// let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
/// rt.spawn(jelly_server::runtime::poll_without_sleeping());
/// // Timers and I/O still complete while it spins.
/// rt.block_on(async { tokio::time::sleep(std::time::Duration::from_millis(5)).await });
/// ```
pub async fn poll_without_sleeping() {
    loop {
        tokio::task::yield_now().await;
        std::thread::yield_now();
    }
}
