//! Compressed request messages (`grpc-encoding` gzip or zstd), read strictly: a
//! message must be compressed data and nothing else, as HTTP request bodies must
//! (`crate::http::body_coding`). tonic's own decompression reads the first gzip
//! member of a message and ignores whatever follows it, so bytes after the gzip data
//! (junk, or a second member whose statements would be lost without a word) would be
//! accepted; `PublishRdf` therefore decompresses with [`Inflating`] before tonic sees
//! the messages.

use std::io::Read;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use http_body::{Body, Frame};
use tonic::Status;

use super::{BoxError, MESSAGE_PREFIX as PREFIX};

/// The message encodings read here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageCoding {
    Gzip,
    Zstd,
}

impl MessageCoding {
    /// The coding of a `grpc-encoding` value, if it is one read here.
    pub fn of(name: &str) -> Option<MessageCoding> {
        match name {
            "gzip" => Some(MessageCoding::Gzip),
            "zstd" => Some(MessageCoding::Zstd),
            _ => None,
        }
    }

    /// Its name in `grpc-encoding`.
    pub fn name(self) -> &'static str {
        match self {
            MessageCoding::Gzip => "gzip",
            MessageCoding::Zstd => "zstd",
        }
    }

    /// Decompresses one message: at most `limit` bytes (more is `RESOURCE_EXHAUSTED`);
    /// data that is not in the coding, cut short, or followed by anything else
    /// (several gzip members are read, as `gzip -d` reads them) is
    /// `INVALID_ARGUMENT`.
    pub fn decompress(self, payload: &[u8], limit: usize) -> Result<Vec<u8>, Status> {
        let bad = |e: std::io::Error| {
            Status::invalid_argument(format!(
                "cannot decompress the {} message: {e}",
                self.name()
            ))
        };
        let most = limit as u64 + 1;
        let mut out = Vec::new();
        match self {
            MessageCoding::Gzip => {
                let mut rest = payload;
                loop {
                    let mut member = flate2::bufread::GzDecoder::new(rest);
                    let room = most - out.len() as u64;
                    (&mut member)
                        .take(room)
                        .read_to_end(&mut out)
                        .map_err(bad)?;
                    if out.len() > limit {
                        break;
                    }
                    // The bufread decoder consumes exactly its member.
                    rest = member.into_inner();
                    if rest.is_empty() {
                        break;
                    }
                    if !rest.starts_with(&[0x1f, 0x8b]) {
                        return Err(Status::invalid_argument(format!(
                            "the gzip message has {} byte(s) after its gzip data that are \
                             not gzip data",
                            rest.len()
                        )));
                    }
                }
            }
            MessageCoding::Zstd => {
                // Reads every frame; bytes after them that are no frame are an error.
                zstd::stream::read::Decoder::with_buffer(payload)
                    .and_then(|d| d.take(most).read_to_end(&mut out))
                    .map_err(bad)?;
            }
        }
        if out.len() > limit {
            return Err(Status::resource_exhausted(format!(
                "the message is over {limit} bytes decompressed"
            )));
        }
        Ok(out)
    }
}

/// A request body of gRPC messages with the compressed ones decompressed
/// ([`MessageCoding::decompress`]) and passed on uncompressed (flag 0); the request's
/// `grpc-encoding` must then be removed, so that tonic reads them as they are. A
/// message that cannot be decompressed ends the body with its error (a [`Status`],
/// which tonic answers with as it is), after the messages before it. Uncompressed
/// messages (and whatever tonic refuses itself: a bad flag, a stream cut inside a
/// message) pass through unchanged, as they arrive.
pub struct Inflating<B> {
    inner: B,
    coding: MessageCoding,
    /// The largest message, compressed or decompressed.
    limit: usize,
    buf: BytesMut,
    /// Bytes of an uncompressed message still to pass through as they come.
    passing: usize,
    /// The inner body has ended (or sent its trailers, kept here meanwhile).
    ended: bool,
    trailers: Option<Frame<Bytes>>,
    /// An error was given: nothing more follows.
    failed: bool,
}

impl<B> Inflating<B> {
    pub fn new(inner: B, coding: MessageCoding, limit: usize) -> Self {
        Inflating {
            inner,
            coding,
            limit,
            buf: BytesMut::new(),
            passing: 0,
            ended: false,
            trailers: None,
            failed: false,
        }
    }

    /// The next bytes to hand on from the buffer, if there are any yet.
    fn next_out(&mut self) -> Result<Option<Bytes>, Status> {
        if self.passing > 0 {
            if self.buf.is_empty() {
                return Ok(None);
            }
            let n = self.passing.min(self.buf.len());
            self.passing -= n;
            return Ok(Some(self.buf.split_to(n).freeze()));
        }
        if self.buf.len() < PREFIX {
            return Ok(None);
        }
        let len = u32::from_be_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]]) as usize;
        if self.buf[0] != 1 {
            // Not compressed (or a bad flag, which tonic refuses): on as it comes.
            self.passing = PREFIX + len;
            return self.next_out();
        }
        // As tonic refuses any message announced over the limit, before reading it.
        if len > self.limit {
            return Err(Status::resource_exhausted(format!(
                "a compressed message of {len} bytes is over the limit of {} bytes",
                self.limit
            )));
        }
        if self.buf.len() < PREFIX + len {
            return Ok(None);
        }
        let message = self.buf.split_to(PREFIX + len);
        let out = self.coding.decompress(&message[PREFIX..], self.limit)?;
        let mut framed = BytesMut::with_capacity(PREFIX + out.len());
        framed.put_u8(0);
        // At most `limit`, which fits: tonic's limits are `usize` but the prefix is u32;
        // a larger one is refused by tonic as over its limit either way.
        framed.put_u32(u32::try_from(out.len()).unwrap_or(u32::MAX));
        framed.put_slice(&out);
        Ok(Some(framed.freeze()))
    }
}

impl<B> Body for Inflating<B>
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
        loop {
            if this.failed {
                return Poll::Ready(None);
            }
            match this.next_out() {
                Ok(Some(bytes)) => return Poll::Ready(Some(Ok(Frame::data(bytes)))),
                Ok(None) => {}
                Err(status) => {
                    this.failed = true;
                    return Poll::Ready(Some(Err(Box::new(status))));
                }
            }
            if this.ended {
                // A message cut short: handed on as it is, for tonic to report.
                if this.buf.has_remaining() {
                    let rest = this.buf.split().freeze();
                    return Poll::Ready(Some(Ok(Frame::data(rest))));
                }
                return Poll::Ready(this.trailers.take().map(Ok));
            }
            match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => this.buf.extend_from_slice(&data),
                    Err(trailers) => {
                        this.ended = true;
                        this.trailers = Some(trailers);
                    }
                },
                Some(Err(e)) => {
                    this.failed = true;
                    return Poll::Ready(Some(Err(e.into())));
                }
                None => this.ended = true,
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.failed || (self.ended && self.buf.is_empty() && self.trailers.is_none())
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use http_body_util::BodyExt;

    use super::*;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn message(flag: u8, payload: &[u8]) -> Vec<u8> {
        let mut m = vec![flag];
        m.extend((payload.len() as u32).to_be_bytes());
        m.extend(payload);
        m
    }

    #[test]
    fn gzip_data_must_be_all_of_the_message() {
        let g = MessageCoding::Gzip;
        assert_eq!(g.decompress(&gzip(b"frame"), 100).unwrap(), b"frame");
        // Several members are read whole.
        let two = [gzip(b"fr"), gzip(b"ame")].concat();
        assert_eq!(g.decompress(&two, 100).unwrap(), b"frame");
        // Junk after the data is refused, naming how much.
        let junk = [gzip(b"frame"), b"JUNK".to_vec()].concat();
        let e = g.decompress(&junk, 100).unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert!(e.message().contains("4 byte(s) after its gzip data"), "{e}");
        // Cut short, or no gzip at all.
        let whole = gzip(b"frame");
        let cut = &whole[..whole.len() - 4];
        assert_eq!(
            g.decompress(cut, 100).unwrap_err().code(),
            tonic::Code::InvalidArgument
        );
        assert!(g.decompress(b"frame", 100).is_err());
        // Over the limit, decompressed.
        let e = g.decompress(&gzip(&[7; 1000]), 999).unwrap_err();
        assert_eq!(e.code(), tonic::Code::ResourceExhausted);
        assert_eq!(g.decompress(&gzip(&[7; 1000]), 1000).unwrap().len(), 1000);
    }

    #[test]
    fn zstd_data_must_be_all_of_the_message() {
        let z = MessageCoding::Zstd;
        let data = zstd::encode_all(&b"frame"[..], 1).unwrap();
        assert_eq!(z.decompress(&data, 100).unwrap(), b"frame");
        let junk = [data, b"JUNK".to_vec()].concat();
        assert_eq!(
            z.decompress(&junk, 100).unwrap_err().code(),
            tonic::Code::InvalidArgument
        );
    }

    /// Compressed messages come out decompressed, uncompressed ones as they were,
    /// and a bad one ends the body with its status after the messages before it.
    #[tokio::test]
    async fn the_body_passes_messages_on_decompressed() {
        let input = [
            message(1, &gzip(b"one")),
            message(0, b"two"),
            message(1, &[gzip(b"three"), b"!".to_vec()].concat()),
            message(1, &gzip(b"four")),
        ]
        .concat();
        // Arriving a few bytes at a time.
        let chunks: Vec<Result<Frame<Bytes>, std::convert::Infallible>> = input
            .chunks(3)
            .map(|c| Ok(Frame::data(Bytes::copy_from_slice(c))))
            .collect();
        let body = http_body_util::StreamBody::new(futures_util::stream::iter(chunks));
        let mut body = Inflating::new(body, MessageCoding::Gzip, 100);
        let mut out = Vec::new();
        let err = loop {
            match body.frame().await {
                Some(Ok(f)) => out.extend(f.into_data().unwrap()),
                Some(Err(e)) => break e,
                None => panic!("ended without an error"),
            }
        };
        assert_eq!(out, [message(0, b"one"), message(0, b"two")].concat());
        let status = tonic::Status::from_error(err);
        assert_eq!(status.code(), tonic::Code::InvalidArgument);
        assert!(status.message().contains("after its gzip data"), "{status}");
        assert!(body.frame().await.is_none());
    }
}
