//! The request body of `jelly publish`: the input forwarded as it is read, in bounded
//! memory; for `--stream`, one that can end early at a frame boundary.
//!
//! A streaming publish is one long request whose items the server appends as their
//! frames arrive. Stopped by Ctrl-C, the command used to exit at once: the server kept
//! the whole frames it had, but the user never learned their offsets. Now the first
//! signal ends the body after the frame in flight (the server then answers as for any
//! finished stream, with the offsets it gave), and the command prints that answer
//! before it exits as the signal would.

use std::io::Read;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use crate::io::RawInput;

/// How long an interrupted stream waits for the rest of the frame in flight before it
/// ends the body inside it (the server then keeps the frames before it).
pub const FRAME_GRACE: Duration = Duration::from_secs(2);

/// Where the frames of a delimited Jelly stream end, for its bytes seen a chunk at a
/// time (each frame is a varint length, then that many bytes).
///
/// ```
/// use jelly_cli::stream_body::FrameEnds;
/// let mut ends = FrameEnds::default();
/// // A 2-byte frame, then the first byte of a 3-byte one.
/// assert_eq!(ends.advance(&[2, 0xAA, 0xBB, 3, 0xCC], false), 5);
/// assert!(!ends.at_end());
/// // Stopping at the next end: two more bytes finish the frame; the rest is left.
/// assert_eq!(ends.advance(&[0xDD, 0xEE, 1, 0xFF], true), 2);
/// assert!(ends.at_end());
/// ```
#[derive(Debug, Default, Clone)]
pub struct FrameEnds {
    /// Bytes of the current frame still to come.
    left: u64,
    /// A length prefix being read: its value so far and the shift of its next byte.
    prefix: Option<(u64, u32)>,
}

impl FrameEnds {
    /// Whether the bytes seen so far end at a frame boundary.
    pub fn at_end(&self) -> bool {
        self.left == 0 && self.prefix.is_none()
    }

    /// Passes over `bytes` and returns how many of them were taken: all of them, or
    /// with `stop_at_end` only those up to the first frame boundary (none if the bytes
    /// seen before already end at one).
    pub fn advance(&mut self, bytes: &[u8], stop_at_end: bool) -> usize {
        let mut i = 0;
        while i < bytes.len() {
            if stop_at_end && self.at_end() {
                return i;
            }
            if self.left > 0 {
                let take = self.left.min((bytes.len() - i) as u64);
                self.left -= take;
                i += take as usize;
                continue;
            }
            let b = bytes[i];
            i += 1;
            let (value, shift) = self.prefix.unwrap_or((0, 0));
            // A prefix longer than a varint's ten bytes is the server's to refuse; the
            // value only has to stay defined here.
            let value = value | u64::from(b & 0x7f).checked_shl(shift).unwrap_or(0);
            if b & 0x80 != 0 {
                self.prefix = Some((value, shift.saturating_add(7)));
            } else {
                self.prefix = None;
                self.left = value;
            }
        }
        i
    }
}

/// A request body that forwards `input` as it is read (a reader thread feeds a small
/// channel, so at most a few chunks are held).
pub fn forward(input: RawInput) -> reqwest::Body {
    let rx = read_ahead(input);
    reqwest::Body::wrap_stream(futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|chunk| (chunk, rx))
    }))
}

/// A request body that forwards the delimited Jelly stream `input` as it is read,
/// and ends at the next frame boundary once `interrupt` holds a value (or, after
/// [`FRAME_GRACE`] without the rest of the frame in flight, inside it).
pub fn forward_until(input: RawInput, interrupt: watch::Receiver<Option<u8>>) -> reqwest::Body {
    let state = Cut {
        rx: read_ahead(input),
        ends: FrameEnds::default(),
        interrupt,
        deadline: None,
    };
    reqwest::Body::wrap_stream(futures_util::stream::unfold(state, |mut s| async move {
        s.next().await.map(|chunk| (chunk, s))
    }))
}

/// The state of [`forward_until`]'s body.
struct Cut {
    rx: mpsc::Receiver<std::io::Result<Vec<u8>>>,
    ends: FrameEnds,
    interrupt: watch::Receiver<Option<u8>>,
    /// Set once interrupted: when to give up waiting for the frame in flight.
    deadline: Option<tokio::time::Instant>,
}

impl Cut {
    async fn next(&mut self) -> Option<std::io::Result<Vec<u8>>> {
        loop {
            if self.deadline.is_none() && self.interrupt.borrow().is_some() {
                self.deadline = Some(tokio::time::Instant::now() + FRAME_GRACE);
            }
            let Some(deadline) = self.deadline else {
                tokio::select! {
                    chunk = self.rx.recv() => {
                        if let Some(Ok(c)) = &chunk {
                            self.ends.advance(c, false);
                        }
                        return chunk;
                    }
                    // A closed sender (the command is ending anyway) is no signal.
                    changed = self.interrupt.changed() => {
                        if changed.is_err() {
                            std::future::pending::<()>().await;
                        }
                        continue;
                    }
                }
            };
            if self.ends.at_end() {
                return None;
            }
            tokio::select! {
                chunk = self.rx.recv() => match chunk {
                    Some(Ok(mut c)) => {
                        let n = self.ends.advance(&c, true);
                        c.truncate(n);
                        return Some(Ok(c));
                    }
                    other => return other,
                },
                () = tokio::time::sleep_until(deadline) => return None,
            }
        }
    }
}

/// Reads `input` on a thread of its own into a channel of a few chunks.
fn read_ahead(input: RawInput) -> mpsc::Receiver<std::io::Result<Vec<u8>>> {
    let (tx, rx) = mpsc::channel::<std::io::Result<Vec<u8>>>(4);
    std::thread::spawn(move || {
        let RawInput { head, mut rest, .. } = input;
        if !head.is_empty() && tx.blocking_send(Ok(head)).is_err() {
            return;
        }
        let mut buf = vec![0u8; 64 << 10];
        loop {
            match rest.read(&mut buf) {
                Ok(0) => return,
                Ok(n) => {
                    if tx.blocking_send(Ok(buf[..n].to_vec())).is_err() {
                        return;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let _ = tx.blocking_send(Err(e));
                    return;
                }
            }
        }
    });
    rx
}

#[cfg(test)]
mod tests {
    use super::FrameEnds;

    /// A stream of frames of the given lengths (contents: the frame's index).
    fn stream(lengths: &[usize]) -> (Vec<u8>, Vec<usize>) {
        let mut out = Vec::new();
        let mut ends = Vec::new();
        for (i, &len) in lengths.iter().enumerate() {
            let mut n = len as u64;
            loop {
                let b = (n & 0x7f) as u8;
                n >>= 7;
                if n == 0 {
                    out.push(b);
                    break;
                }
                out.push(b | 0x80);
            }
            out.extend(std::iter::repeat_n(i as u8, len));
            ends.push(out.len());
        }
        (out, ends)
    }

    #[test]
    fn an_interrupted_stream_is_cut_at_the_next_frame_end_in_any_chunking() {
        // Two-byte prefixes (200, 300) and empty frames too.
        let (bytes, ends) = stream(&[3, 0, 200, 1, 300, 0]);
        for chunk in [1, 2, 3, 7, 64, bytes.len()] {
            for k in 0..=bytes.len() {
                // The first k bytes went out in chunks, then the interrupt came.
                let mut fe = FrameEnds::default();
                for c in bytes[..k].chunks(chunk) {
                    assert_eq!(fe.advance(c, false), c.len());
                }
                let mut cut = k;
                for c in bytes[k..].chunks(chunk) {
                    let n = fe.advance(c, true);
                    cut += n;
                    if n < c.len() {
                        break;
                    }
                }
                let want = if k == 0 {
                    0
                } else {
                    *ends.iter().find(|&&e| e >= k).unwrap_or(&bytes.len())
                };
                assert_eq!(cut, want, "chunks of {chunk}, interrupted after {k} bytes");
                assert!(fe.at_end());
            }
        }
    }

    #[test]
    fn stopping_inside_a_prefix_waits_for_the_whole_frame() {
        let (bytes, _) = stream(&[300]);
        let mut fe = FrameEnds::default();
        // Interrupted after the first byte of the two-byte length prefix.
        assert_eq!(fe.advance(&bytes[..1], false), 1);
        assert!(!fe.at_end());
        assert_eq!(fe.advance(&bytes[1..], true), bytes.len() - 1);
        assert!(fe.at_end());
    }

    #[test]
    fn an_overlong_prefix_does_not_overflow() {
        let mut fe = FrameEnds::default();
        assert_eq!(fe.advance(&[0xFF; 40], false), 40);
        assert!(!fe.at_end());
    }
}
