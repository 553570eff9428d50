//! The executor of hyper's HTTP/2 stream tasks: a task that wakes itself while it is
//! being polled is polled again at once, on the same thread, instead of being handed
//! back to the runtime.
//!
//! Why: hyper's HTTP/2 server runs every request's response body in a task of its
//! own, and for every DATA chunk it sends, h2 grants the stream send capacity and
//! wakes that same task from inside its poll. Tokio treats a task woken during its
//! own poll as a yield: it goes to the back of the run queue, and the scheduler wakes
//! an idle worker thread to come and steal it (a `futex` wake and often an
//! inter-processor interrupt on a halted vCPU). With gRPC subscribers that happened
//! once per delivered item: one item woke both runtime threads, and consecutive items
//! were served by alternating threads, each with cold caches. Polling again right away
//! does what the runtime would have done a moment later, without involving another
//! thread. See `docs/server-design.md` ("Threads and wake-ups").

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

/// Spawns futures on the current tokio runtime, each wrapped in [`Repoll`]. Use it as
/// hyper's executor (it is what runs hyper's per-stream HTTP/2 tasks).
#[derive(Debug, Clone, Copy, Default)]
pub struct StreamExecutor;

impl<F> hyper::rt::Executor<F> for StreamExecutor
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, fut: F) {
        tokio::spawn(Repoll::new(fut));
    }
}

/// Most polls of the inner future within one poll of [`Repoll`]. A future that keeps
/// waking itself is then handed back to the runtime, so it cannot starve the
/// runtime's other tasks.
const MAX_POLLS: usize = 4;

/// Not being polled.
const IDLE: u8 = 0;
/// Being polled.
const POLLING: u8 = 1;
/// Woken while being polled: poll again.
const WOKEN: u8 = 2;

/// A future that is polled again at once when it wakes itself during its poll (up to
/// `MAX_POLLS` times), instead of being rescheduled by the runtime. Wake-ups that
/// come while it is not being polled go to the runtime as usual.
pub struct Repoll<F> {
    fut: Pin<Box<F>>,
    wake: Arc<WakeState>,
    /// The waker handed to the inner future (made once).
    waker: Waker,
}

impl<F: Future> Repoll<F> {
    /// Wraps `fut`.
    pub fn new(fut: F) -> Repoll<F> {
        let wake = Arc::new(WakeState {
            state: AtomicU8::new(IDLE),
            outer: Mutex::new(None),
        });
        Repoll {
            fut: Box::pin(fut),
            waker: Waker::from(wake.clone()),
            wake,
        }
    }
}

impl<F: Future> Future for Repoll<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.wake.set_outer(cx.waker());
        let this = &mut *self;
        let mut inner = Context::from_waker(&this.waker);
        for _ in 0..MAX_POLLS {
            this.wake.state.store(POLLING, Ordering::Release);
            let r = this.fut.as_mut().poll(&mut inner);
            let woken = this.wake.state.swap(IDLE, Ordering::AcqRel) == WOKEN;
            if r.is_ready() || !woken {
                return r;
            }
        }
        // Still waking itself: let the runtime run the others first.
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// The state behind [`Repoll`]'s waker.
struct WakeState {
    /// [`IDLE`], [`POLLING`] or [`WOKEN`].
    state: AtomicU8,
    /// The runtime's waker of the task, from its latest poll.
    outer: Mutex<Option<Waker>>,
}

impl WakeState {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Waker>> {
        self.outer.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps the runtime's waker of the current poll.
    fn set_outer(&self, waker: &Waker) {
        let mut outer = self.lock();
        if !outer.as_ref().is_some_and(|w| w.will_wake(waker)) {
            *outer = Some(waker.clone());
        }
    }
}

impl Wake for WakeState {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // During a poll (from any thread), the poll is repeated when it returns. A wake
        // that comes after the swap to IDLE goes to the runtime: none is lost.
        match self
            .state
            .compare_exchange(POLLING, WOKEN, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => {}
            Err(WOKEN) => {}
            Err(_) => {
                if let Some(w) = self.lock().as_ref() {
                    w.wake_by_ref();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    /// Wakes itself on its first `wakes` polls, then is ready.
    struct SelfWaking {
        wakes: usize,
        polls: Arc<AtomicUsize>,
    }

    impl Future for SelfWaking {
        type Output = usize;
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<usize> {
            let n = self.polls.fetch_add(1, Ordering::Relaxed) + 1;
            if self.wakes == 0 {
                return Poll::Ready(n);
            }
            self.wakes -= 1;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }

    /// Counts the wakes of the runtime's waker.
    struct Counter(AtomicUsize);
    impl Wake for Counter {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A runtime waker that counts its wakes, and a future that wakes itself `wakes`
    /// times (with its poll counter), wrapped in [`Repoll`].
    fn counted(wakes: usize) -> (Arc<Counter>, Waker, Arc<AtomicUsize>, Repoll<SelfWaking>) {
        let outer = Arc::new(Counter(AtomicUsize::new(0)));
        let waker = Waker::from(outer.clone());
        let polls = Arc::new(AtomicUsize::new(0));
        let f = Repoll::new(SelfWaking {
            wakes,
            polls: polls.clone(),
        });
        (outer, waker, polls, f)
    }

    #[test]
    fn a_self_wake_is_polled_again_without_the_runtime() {
        let (outer, waker, _polls, mut f) = counted(2);
        let mut cx = Context::from_waker(&waker);
        assert_eq!(Pin::new(&mut f).poll(&mut cx), Poll::Ready(3));
        assert_eq!(outer.0.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_future_that_keeps_waking_itself_goes_back_to_the_runtime() {
        let (outer, waker, polls, mut f) = counted(MAX_POLLS + 1);
        let mut cx = Context::from_waker(&waker);
        assert!(Pin::new(&mut f).poll(&mut cx).is_pending());
        assert_eq!(polls.load(Ordering::Relaxed), MAX_POLLS);
        // The wake is not lost: the runtime is told.
        assert_eq!(outer.0.load(Ordering::Relaxed), 1);
        assert_eq!(Pin::new(&mut f).poll(&mut cx), Poll::Ready(MAX_POLLS + 2));
    }

    #[test]
    fn a_wake_between_polls_reaches_the_runtime() {
        let outer = Arc::new(Counter(AtomicUsize::new(0)));
        let waker = Waker::from(outer.clone());
        let mut cx = Context::from_waker(&waker);
        let (tx, mut rx) = tokio::sync::oneshot::channel::<u8>();
        let mut f = Repoll::new(std::future::poll_fn(move |cx| Pin::new(&mut rx).poll(cx)));
        assert!(Pin::new(&mut f).poll(&mut cx).is_pending());
        tx.send(7).unwrap();
        assert_eq!(outer.0.load(Ordering::Relaxed), 1);
        assert_eq!(Pin::new(&mut f).poll(&mut cx), Poll::Ready(Ok(7)));
    }
}
