//! A bound on pauses inside one WebSocket message from a publisher.
//!
//! A WebSocket publisher may be quiet for hours between messages, so the socket has no
//! idle limit (its pings find dead peers). Inside a message it is different: the
//! WebSocket layer buffers a message until it is whole (up to the item limit, 16 MiB by
//! default), so a client that sent all of a message but its last fragment, or its last
//! byte, would hold that memory for as long as it answers pings. tungstenite keeps the
//! partial message to itself, so [`FramePace`] sits under it, on the upgraded byte
//! stream: it follows the frame headers as the bytes pass and fails the read with
//! [`PausedInsideMessage`] when a started message receives nothing for
//! `body_read_timeout_ms`, as an atomic HTTP publish whose body pauses that long is
//! answered 408 and a gRPC publish stalled inside a message ends with
//! `DEADLINE_EXCEEDED` ([`crate::grpc::message_pace`]).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use crate::pause_timer::PauseTimer;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Longest frame header (RFC 6455 §5.2): 2 bytes, an 8-byte length, a 4-byte mask key.
const MAX_HEADER: usize = 14;

/// Where the bytes from the client are in the WebSocket framing (RFC 6455 §5.2).
#[derive(Debug, Default)]
struct Framing {
    /// The frame header seen so far (0 bytes between frames).
    header: [u8; MAX_HEADER],
    header_len: usize,
    /// Payload bytes of the current frame still to come.
    payload_left: u64,
    /// A data frame without FIN came, and its message's final frame has not: control
    /// frames (pings) between fragments do not end the message.
    fragmented: bool,
}

impl Framing {
    /// The size of the header that starts with `h` (at least 2 bytes of it).
    fn header_size(h: &[u8]) -> usize {
        let length = match h[1] & 0x7f {
            126 => 2,
            127 => 8,
            _ => 0,
        };
        let mask = if h[1] & 0x80 != 0 { 4 } else { 0 };
        2 + length + mask
    }

    /// Follows the framing over `data`, the next bytes from the client.
    fn follow(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            if self.payload_left > 0 {
                let n =
                    usize::try_from(self.payload_left).map_or(data.len(), |l| l.min(data.len()));
                self.payload_left -= n as u64;
                data = &data[n..];
                continue;
            }
            let need = if self.header_len < 2 {
                2
            } else {
                Self::header_size(&self.header)
            };
            let n = (need - self.header_len).min(data.len());
            self.header[self.header_len..self.header_len + n].copy_from_slice(&data[..n]);
            self.header_len += n;
            data = &data[n..];
            if self.header_len >= 2 && self.header_len == Self::header_size(&self.header) {
                let h = &self.header;
                self.payload_left = match h[1] & 0x7f {
                    126 => u64::from(u16::from_be_bytes([h[2], h[3]])),
                    127 => u64::from_be_bytes([h[2], h[3], h[4], h[5], h[6], h[7], h[8], h[9]]),
                    len => u64::from(len),
                };
                // Opcodes 0-7 are data frames (continuation, text, binary, reserved);
                // 8-15 control frames, which may come between a message's fragments.
                if h[0] & 0x0f < 8 {
                    self.fragmented = h[0] & 0x80 == 0;
                }
                self.header_len = 0;
            }
        }
    }

    /// Whether a message has started and is not whole yet.
    fn inside_message(&self) -> bool {
        self.header_len > 0 || self.payload_left > 0 || self.fragmented
    }

    /// What of the message is still to come, for the error.
    fn missing(&self) -> Missing {
        if self.payload_left > 0 {
            Missing::Payload(self.payload_left)
        } else if self.header_len > 0 {
            Missing::Header
        } else {
            Missing::Fragments
        }
    }
}

/// What a stalled message was still waiting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missing {
    /// The rest of a frame's payload: this many bytes.
    Payload(u64),
    /// The rest of a frame's header.
    Header,
    /// The message's next fragment (its frames so far had no FIN).
    Fragments,
}

/// The read error of a [`FramePace`] whose message paused too long (an
/// [`io::ErrorKind::TimedOut`] error that holds this).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the message stopped for {} ms (body_read_timeout_ms) {}; nothing of it was appended",
    pause.as_millis(),
    match missing {
        Missing::Payload(n) => format!("with {n} byte(s) of its frame still to come"),
        Missing::Header => "inside a frame header".to_string(),
        Missing::Fragments => "before its final fragment".to_string(),
    }
)]
pub struct PausedInsideMessage {
    /// The pause allowed.
    pub pause: Duration,
    /// What the message was waiting for.
    pub missing: Missing,
}

impl PausedInsideMessage {
    /// The pause error behind a read error of the WebSocket layer, if it is one.
    pub fn find(e: &tokio_tungstenite::tungstenite::Error) -> Option<PausedInsideMessage> {
        match e {
            tokio_tungstenite::tungstenite::Error::Io(io) => io
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<PausedInsideMessage>())
                .copied(),
            _ => None,
        }
    }
}

/// The byte stream under a WebSocket, whose messages from the peer may each pause at
/// most `pause` (`None`: no limit, the bytes pass untouched). Writes pass through.
pub struct FramePace<T> {
    inner: T,
    pause: Option<Duration>,
    framing: Framing,
    /// Armed while a started message waits for more bytes.
    timer: PauseTimer,
}

impl<T> FramePace<T> {
    /// Wraps `inner`; a message that receives nothing for `pause` fails the read.
    pub fn new(inner: T, pause: Option<Duration>) -> Self {
        FramePace {
            inner,
            pause,
            framing: Framing::default(),
            timer: PauseTimer::default(),
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for FramePace<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let Some(pause) = this.pause else {
            return Pin::new(&mut this.inner).poll_read(cx, buf);
        };
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                this.timer.reset();
                this.framing.follow(&buf.filled()[before..]);
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => {
                let inside = this.framing.inside_message();
                ready!(this.timer.poll_expired(cx, inside, pause));
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    PausedInsideMessage {
                        pause,
                        missing: this.framing.missing(),
                    },
                )))
            }
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for FramePace<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A masked client frame: `fin`, `opcode`, a payload of `len` bytes.
    fn frame(fin: bool, opcode: u8, len: usize) -> Vec<u8> {
        let mut f = vec![if fin { 0x80 } else { 0 } | opcode];
        match len {
            0..=125 => f.push(0x80 | len as u8),
            126..=0xffff => {
                f.push(0x80 | 126);
                f.extend_from_slice(&(len as u16).to_be_bytes());
            }
            _ => {
                f.push(0x80 | 127);
                f.extend_from_slice(&(len as u64).to_be_bytes());
            }
        }
        f.extend_from_slice(&[1, 2, 3, 4]);
        f.extend(std::iter::repeat_n(7, len));
        f
    }

    #[test]
    fn the_framing_is_followed_across_pieces() {
        // A whole message, then one in two fragments with a ping between them, then
        // messages with 16- and 64-bit lengths.
        let parts = [
            frame(true, 2, 3),
            frame(false, 2, 5),
            frame(true, 9, 0),
            frame(true, 0, 2),
            frame(true, 1, 300),
            frame(true, 2, 70_000),
        ];
        // Where each message ends: between messages the stream is not inside one.
        let mut ends = Vec::new();
        let mut stream = Vec::new();
        for (i, p) in parts.iter().enumerate() {
            stream.extend_from_slice(p);
            if i != 1 && i != 2 {
                ends.push(stream.len());
            }
        }
        for cut in 0..stream.len() {
            let mut f = Framing::default();
            f.follow(&stream[..cut]);
            let inside = f.inside_message();
            f.follow(&stream[cut..]);
            assert!(!f.inside_message(), "cut at {cut}");
            assert_eq!(inside, cut != 0 && !ends.contains(&cut), "cut at {cut}");
        }
    }

    #[test]
    fn what_is_missing_is_named() {
        let mut f = Framing::default();
        f.follow(&frame(true, 2, 10)[..8]);
        assert_eq!(f.missing(), Missing::Payload(8));
        let mut f = Framing::default();
        f.follow(&frame(true, 2, 10)[..3]);
        assert_eq!(f.missing(), Missing::Header);
        let mut f = Framing::default();
        f.follow(&frame(false, 2, 10));
        assert_eq!(f.missing(), Missing::Fragments);
    }

    #[tokio::test]
    async fn a_pause_inside_a_message_fails_the_read_and_one_between_messages_does_not() {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let pause = Duration::from_millis(100);
        let (mut client, server) = tokio::io::duplex(1 << 10);
        let mut paced = FramePace::new(server, Some(pause));
        let mut buf = [0u8; 1 << 10];
        // Between messages: a read waits for as long as it takes.
        let whole = frame(true, 2, 3);
        client.write_all(&whole).await.unwrap();
        assert_eq!(paced.read(&mut buf).await.unwrap(), whole.len());
        let idle = tokio::time::timeout(pause * 5, paced.read(&mut buf)).await;
        assert!(
            idle.is_err(),
            "an idle socket between messages is not failed"
        );
        // Inside a message (the first fragment without FIN): failed after the pause.
        let fragment = frame(false, 2, 3);
        client.write_all(&fragment).await.unwrap();
        assert_eq!(paced.read(&mut buf).await.unwrap(), fragment.len());
        let e = paced.read(&mut buf).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        let paused = e.get_ref().unwrap().downcast_ref::<PausedInsideMessage>();
        assert_eq!(
            paused,
            Some(&PausedInsideMessage {
                pause,
                missing: Missing::Fragments
            })
        );
        assert!(e.to_string().contains("before its final fragment"), "{e}");
    }
}
