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
//! that latency: the server runs on a single worker thread that does not sleep while
//! items flow (below). A task on it yields in a loop, and each time it yields the
//! worker polls its I/O driver with a zero timeout before running it again, so a
//! request that arrives is seen at once by a thread that is already running. The
//! thread uses a whole CPU while it polls; throughput is bounded by one worker
//! thread. Blocking work (file system calls under `fsync`) still runs on tokio's
//! blocking pool. What it gains and costs on the benchmark VM:
//! `docs/server-design.md`, "Busy polling".
//!
//! It is one thread because tokio lets only one worker at a time poll the I/O
//! driver: with several workers, an idle one would hold the driver in a sleeping
//! `epoll_wait` and take the wake-ups away from the polling one.
//!
//! The polling stops while the server is idle: after `busy_poll_idle_ms` (default
//! 10 s) without an append or a new connection ([`note_activity`]) the worker sleeps
//! like any other until the next one, and polls again from then on. So items less
//! than that apart are all handled by a polling thread, and a server with nothing to
//! do costs no CPU; but an item that comes after a longer quiet spell pays the
//! wake-up, as without busy polling. `busy_poll_idle_ms = 0` polls at all times.

use std::io;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

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
        match config.busy_poll_idle() {
            Some(idle) => rt.spawn(poll_until_idle(idle)),
            None => rt.spawn(poll_without_sleeping()),
        };
    }
    Ok(rt)
}

/// When the server last did something that busy polling should stay awake for, and
/// how many pollers sleep. One per process (a process runs one server; where tests run
/// several, one's activity keeps every poller awake): [`note_activity`] is called deep
/// in the topics and the accept loop, which do not know the runtime they run on.
struct Activity {
    /// Nanoseconds since `start` at the latest [`note_activity`].
    last_ns: AtomicU64,
    start: Instant,
    /// [`poll_until_idle`] loops asleep for lack of activity; [`note_activity`] wakes
    /// them all.
    sleeping: AtomicUsize,
    wake: Notify,
}

fn activity() -> &'static Activity {
    static ACTIVITY: OnceLock<Activity> = OnceLock::new();
    ACTIVITY.get_or_init(|| Activity {
        last_ns: AtomicU64::new(0),
        start: Instant::now(),
        sleeping: AtomicUsize::new(0),
        wake: Notify::new(),
    })
}

impl Activity {
    fn now_ns(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Whether there was no activity in the last `idle_ns`.
    fn idle_for(&self, idle_ns: u64) -> bool {
        self.now_ns()
            .saturating_sub(self.last_ns.load(Ordering::SeqCst))
            >= idle_ns
    }
}

/// Notes that the server did something (an append, a new connection): busy pollers
/// that went to sleep for lack of activity ([`poll_until_idle`]) poll again. Cheap
/// (a clock read and two atomic operations); call it from any thread.
///
/// ```
/// jelly_server::runtime::note_activity();
/// assert!(!jelly_server::runtime::poller_sleeping());
/// ```
pub fn note_activity() {
    let a = activity();
    a.last_ns.store(a.now_ns(), Ordering::SeqCst);
    if a.sleeping.load(Ordering::SeqCst) > 0 {
        a.wake.notify_waiters();
    }
}

/// Whether a [`poll_until_idle`] loop is asleep for lack of activity.
pub fn poller_sleeping() -> bool {
    activity().sleeping.load(Ordering::SeqCst) > 0
}

/// [`poll_without_sleeping`] while there was activity ([`note_activity`]) in the last
/// `idle`; after that it waits (the worker sleeps in `epoll_wait` like a normal one)
/// until the next activity, then polls again. Spawn it as [`poll_without_sleeping`].
///
/// ```
/// use std::time::Duration;
/// let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
/// rt.spawn(jelly_server::runtime::poll_until_idle(Duration::from_millis(20)));
/// rt.block_on(async { tokio::time::sleep(Duration::from_millis(5)).await });
/// ```
pub async fn poll_until_idle(idle: Duration) {
    let a = activity();
    let idle_ns = u64::try_from(idle.as_nanos()).unwrap_or(u64::MAX);
    loop {
        tokio::task::yield_now().await;
        std::thread::yield_now();
        if !a.idle_for(idle_ns) {
            continue;
        }
        // Registered as a waiter, then counted, then idle checked once more: a
        // `note_activity` in between either is seen by that check or sees the count
        // and wakes the registered waiter (all its atomics are `SeqCst`).
        let woken = a.wake.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        a.sleeping.fetch_add(1, Ordering::SeqCst);
        if a.idle_for(idle_ns) {
            tracing::trace!("busy polling: idle, sleeping until the next activity");
            woken.await;
            tracing::trace!("busy polling: active again");
        }
        a.sleeping.fetch_sub(1, Ordering::SeqCst);
    }
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
