//! How long a reader has waited inside a message: the clock behind the pause limits
//! of gRPC publish bodies (`grpc::message_pace`) and WebSocket publishes
//! (`http::ws_pace`). Each follows its own framing; both end a message that receives
//! nothing for `body_read_timeout_ms`, and neither a pause between messages.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

/// A timer armed while a read waits inside a message, cleared when bytes come or
/// the reader is between messages.
#[derive(Debug, Default)]
pub struct PauseTimer(Option<Pin<Box<tokio::time::Sleep>>>);

impl PauseTimer {
    /// Bytes came: the pause, if any, is over.
    pub fn reset(&mut self) {
        self.0 = None;
    }

    /// The read is pending: `Ready` once it has waited `pause` inside a message
    /// (`inside`), and the timer is cleared then; `Pending` otherwise, with the
    /// waker registered while inside.
    pub fn poll_expired(
        &mut self,
        cx: &mut Context<'_>,
        inside: bool,
        pause: Duration,
    ) -> Poll<()> {
        if !inside {
            self.0 = None;
            return Poll::Pending;
        }
        let timer = self
            .0
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(pause)));
        ready!(timer.as_mut().poll(cx));
        self.0 = None;
        Poll::Ready(())
    }
}
