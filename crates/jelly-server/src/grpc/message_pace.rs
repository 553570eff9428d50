//! A bound on pauses inside one gRPC message of a publish call.
//!
//! A publish stream may be quiet for hours between messages (a sensor that reports
//! rarely), so the call has no idle limit. Inside a message it is different: the
//! server buffers the message until it is whole (up to the item limit, 16 MiB by
//! default), so a client that sends all of a message but its last byte would hold
//! that memory for as long as it answers pings. [`MessagePace`] follows the 5-byte
//! message prefixes as the body passes and ends the body with `DEADLINE_EXCEEDED`
//! when a started message receives nothing for `body_read_timeout_ms`, as an atomic
//! HTTP publish whose body pauses that long is answered 408. The messages before it
//! are appended as usual.

use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use crate::pause_timer::PauseTimer;

use bytes::Bytes;
use http_body::{Body, Frame};
use tonic::Status;

use super::{BoxError, MESSAGE_PREFIX as PREFIX};

/// A request body of gRPC messages whose messages may each pause at most `pause`.
///
/// ```
/// use http_body_util::{BodyExt, Full};
/// use jelly_server::grpc::message_pace::MessagePace;
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// // A whole message (flag 0, length 2, two bytes) passes as it is.
/// let body = Full::new(bytes::Bytes::from_static(&[0, 0, 0, 0, 2, 8, 1]));
/// let paced = MessagePace::new(body, std::time::Duration::from_secs(1));
/// assert_eq!(paced.collect().await.unwrap().to_bytes().len(), 7);
/// # });
/// ```
pub struct MessagePace<B> {
    inner: B,
    pause: Duration,
    /// Prefix bytes of the next message seen so far (0 between messages).
    prefix: [u8; PREFIX],
    prefix_len: usize,
    /// Payload bytes of the current message still to come.
    payload_left: usize,
    /// Armed while a started message waits for more bytes.
    timer: PauseTimer,
    failed: bool,
}

impl<B> MessagePace<B> {
    /// Wraps `inner`; a message that receives nothing for `pause` ends the body.
    pub fn new(inner: B, pause: Duration) -> Self {
        MessagePace {
            inner,
            pause,
            prefix: [0; PREFIX],
            prefix_len: 0,
            payload_left: 0,
            timer: PauseTimer::default(),
            failed: false,
        }
    }

    /// Whether a message has started and is not whole yet.
    fn inside_message(&self) -> bool {
        self.prefix_len > 0 || self.payload_left > 0
    }

    /// Follows the message framing over `data`.
    fn follow(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            if self.payload_left > 0 {
                let n = self.payload_left.min(data.len());
                self.payload_left -= n;
                data = &data[n..];
                continue;
            }
            let n = (PREFIX - self.prefix_len).min(data.len());
            self.prefix[self.prefix_len..self.prefix_len + n].copy_from_slice(&data[..n]);
            self.prefix_len += n;
            data = &data[n..];
            if self.prefix_len == PREFIX {
                let p = self.prefix;
                self.payload_left = u32::from_be_bytes([p[1], p[2], p[3], p[4]]) as usize;
                self.prefix_len = 0;
            }
        }
    }
}

impl<B> Body for MessagePace<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        if this.failed {
            return Poll::Ready(None);
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                this.timer.reset();
                if let Some(data) = frame.data_ref() {
                    this.follow(data);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => {
                let (inside, pause) = (this.inside_message(), this.pause);
                ready!(this.timer.poll_expired(cx, inside, pause));
                this.failed = true;
                // The call's error names the message (frame) and what was appended.
                let status = Status::deadline_exceeded(format!(
                    "the message stopped for {} ms with {} byte(s) of it still to come \
                     (body_read_timeout_ms)",
                    pause.as_millis(),
                    if this.payload_left > 0 {
                        this.payload_left
                    } else {
                        PREFIX - this.prefix_len
                    }
                ));
                Poll::Ready(Some(Err(Box::new(status))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.failed || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_framing_is_followed_across_pieces() {
        let mut p = MessagePace::new(http_body_util::Empty::<Bytes>::new(), Duration::ZERO);
        // Two messages (3 and 0 bytes), cut at every place.
        let stream = [0u8, 0, 0, 0, 3, 1, 2, 3, 0, 0, 0, 0, 0];
        for cut in 0..stream.len() {
            p.follow(&stream[..cut]);
            let inside = p.inside_message();
            p.follow(&stream[cut..]);
            assert!(!p.inside_message(), "cut at {cut}");
            assert_eq!(inside, cut != 0 && cut != 8, "cut at {cut}");
        }
    }
}
