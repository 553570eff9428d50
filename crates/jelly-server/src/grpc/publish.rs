//! `PublishRdf`: one publisher's Jelly stream, a frame per message, appended to a
//! topic as it arrives. The official service has no topic field on publish, so the
//! topic comes from the request metadata `x-jelly-topic`.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};

use axum::http::StatusCode;
use bytes::Bytes;
use jelly::StreamOptions;
use jelly_proto::fields::{frame as ff, row as rf};
use jelly_proto::wire::{Reader, WireType};
use tonic::metadata::{MetadataMap, MetadataValue};
use tonic::{Code, Request, Response, Status, Streaming};

use super::messages::{Frame, Received};
use super::{SOURCE_METADATA, TOPIC_METADATA, ascii_metadata};
use crate::accept::ConnectionHeld;
use crate::http::AppState;
use crate::http::publish::publish_slot;
use crate::http::publish_stream::{FrameError, StreamPublisher};
use crate::ingest::{HeaderRefusal, PublishMeta};

/// The `PublishRdf` handler, as the service tonic calls, with the call's
/// `grpc-timeout` ([`super::deadline`]) and its connection (for
/// `max_publishes_per_connection`).
#[derive(Clone)]
pub struct PublishService(
    pub AppState,
    pub Option<std::time::Duration>,
    pub Option<ConnectionHeld>,
);

impl tower_service::Service<Request<Streaming<Frame>>> for PublishService {
    type Response = Response<Received>;
    type Error = Status;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Status>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Streaming<Frame>>) -> Self::Future {
        let s = self.0.clone();
        let timeout = self.1;
        let held = self.2.clone();
        Box::pin(async move {
            s.metrics.requests_publish.fetch_add(1, Ordering::Relaxed);
            let mut p = Publish::new(&s, req.metadata())?;
            // Held until the call ends (taken after the rights check, so that a caller
            // without them is told that first).
            let _slot = publish_slot(&s, held.as_ref()).map_err(|m| {
                s.metrics.publish_rejected.fetch_add(1, Ordering::Relaxed);
                Status::resource_exhausted(m)
            })?;
            let r = p.run(&s, req.into_inner(), timeout).await;
            if r.is_err() && p.p.accepted == 0 {
                s.metrics.publish_rejected.fetch_add(1, Ordering::Relaxed);
            }
            r
        })
    }
}

/// The options row that must start a stream's first frame (a mirror checks its
/// upstream's with it).
pub fn first_frame_options(frame: &[u8]) -> Result<StreamOptions, String> {
    const MISSING: &str = "the first frame must begin with a stream options row";
    let malformed = |e| format!("malformed frame: {e}");
    let mut r = Reader::new(frame);
    while let Some((field, wt)) = r.tag().map_err(malformed)? {
        if field != ff::ROWS || wt != WireType::Len {
            r.skip(wt).map_err(malformed)?;
            continue;
        }
        let mut row = r.message().map_err(malformed)?;
        return match row.tag().map_err(malformed)? {
            Some((rf::OPTIONS, WireType::Len)) => {
                StreamOptions::decode_from(row.message().map_err(malformed)?).map_err(malformed)
            }
            _ => Err(MISSING.into()),
        };
    }
    Err(MISSING.into())
}

/// One publish call: the stream publisher shared with the streaming HTTP POST and
/// WebSocket publish, plus what gRPC adds (its status codes and metadata).
struct Publish {
    p: StreamPublisher,
    /// Frames received.
    frames: u64,
    /// Bytes received: where the next frame starts in the publisher's stream.
    bytes: u64,
}

/// The gRPC code for an HTTP status of the shared publish path.
fn code_of(status: StatusCode) -> Code {
    match status {
        StatusCode::NOT_FOUND => Code::NotFound,
        StatusCode::CONFLICT => Code::Aborted,
        StatusCode::PAYLOAD_TOO_LARGE | StatusCode::INSUFFICIENT_STORAGE => Code::ResourceExhausted,
        s if s.is_server_error() => Code::Unavailable,
        _ => Code::InvalidArgument,
    }
}

fn status_of(e: FrameError) -> Status {
    Status::new(code_of(e.status), e.message)
}

impl Publish {
    fn new(s: &AppState, md: &MetadataMap) -> Result<Publish, Status> {
        let name = ascii_metadata(md, TOPIC_METADATA)?.ok_or_else(|| {
            Status::invalid_argument(format!(
                "missing request metadata `{TOPIC_METADATA}` (the topic to publish to)"
            ))
        })?;
        crate::auth::check_grpc(s, md, &name, crate::auth::Right::Publish)?;
        let source = ascii_metadata(md, SOURCE_METADATA)?.unwrap_or_default();
        let mut meta = PublishMeta {
            source,
            ..PublishMeta::default()
        };
        for kv in md.iter() {
            // Headers are text, as over HTTP: a binary (`-bin`) one is refused rather
            // than dropped without a word.
            if let tonic::metadata::KeyAndValueRef::Binary(k, _) = kv
                && k.as_str().starts_with(PublishMeta::HEADER_PREFIX)
            {
                return Err(Status::invalid_argument(format!(
                    "metadata {k} is binary; item headers are text (x-jelly-header-<name> \
                     without -bin)"
                )));
            }
            if let tonic::metadata::KeyAndValueRef::Ascii(k, v) = kv
                && let Some(h) = k.as_str().strip_prefix(PublishMeta::HEADER_PREFIX)
            {
                let v = v.to_str().map_err(|_| {
                    Status::invalid_argument(format!("metadata {k} is not visible ASCII"))
                })?;
                meta.add_header(h, v).map_err(|r| {
                    Status::invalid_argument(match r {
                        HeaderRefusal::NoName => format!(
                            "metadata {k} has no name after the prefix (x-jelly-header-<name>)"
                        ),
                        HeaderRefusal::Twice => format!("metadata {k} is given more than once"),
                    })
                })?;
            }
        }
        meta.check_size().map_err(Status::invalid_argument)?;
        let p = StreamPublisher::new(s, &name, meta).map_err(|e| status_of(FrameError::from(e)))?;
        Ok(Publish {
            p,
            frames: 0,
            bytes: 0,
        })
    }

    async fn run(
        &mut self,
        s: &AppState,
        mut stream: Streaming<Frame>,
        timeout: Option<std::time::Duration>,
    ) -> Result<Response<Received>, Status> {
        let mut shutdown = s.shutdown.clone();
        // One timer for the call (far off without a timeout; that branch is then off).
        let expiry = tokio::time::sleep(timeout.unwrap_or(std::time::Duration::from_secs(1 << 40)));
        tokio::pin!(expiry);
        loop {
            // Append what is pending whenever the client has nothing more right now,
            // so items become visible without waiting for a full batch.
            let next = tokio::select! {
                biased;
                // First: a client that sends without pause still meets its deadline.
                _ = &mut expiry, if timeout.is_some() => {
                    self.flush().await?;
                    let st = super::deadline::exceeded(timeout.unwrap_or_default());
                    return Err(self.failed(st, None));
                }
                m = stream.message() => m,
                _ = async { drop(shutdown.wait_for(|v| *v).await) } => {
                    self.flush().await?;
                    let st = Status::unavailable("the server is shutting down");
                    return Err(self.failed(st, None));
                }
                _ = std::future::ready(()), if self.p.pending() > 0 => {
                    self.flush().await?;
                    continue;
                }
            };
            let frame = match next {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(st) => {
                    self.flush().await?;
                    let st = match st.code() {
                        // tonic's answer to a message over the size limit.
                        Code::OutOfRange => Status::resource_exhausted(st.message().to_string()),
                        // tonic reports a request stream it cannot read (cut inside a
                        // message, a compressed flag without `grpc-encoding`, a bad
                        // flag) as INTERNAL; it is the client's input that is wrong.
                        Code::Internal | Code::Unknown => Status::invalid_argument(format!(
                            "cannot read the request stream: {}",
                            st.message()
                        )),
                        _ => st,
                    };
                    return Err(self.failed(st, Some(self.frames)));
                }
            };
            if let Err(st) = self.frame(frame.0).await {
                self.flush().await?;
                return Err(self.failed(st, Some(self.frames - 1)));
            }
            if self.p.should_flush() {
                self.flush().await?;
            }
        }
        if self.frames == 0 {
            return Err(Status::invalid_argument(
                "the stream holds no frame (it must have at least one, starting with the stream options)",
            ));
        }
        self.flush().await?;
        if self.p.accepted == 0 {
            // As the HTTP streaming publish answers: a stream of no statements is a
            // mistake (an options row alone, or empty frames), not a publish of nothing.
            return Err(Status::invalid_argument(format!(
                "the stream holds no statements ({} frame(s) read); nothing was appended",
                self.frames
            )));
        }
        tracing::debug!(topic = %self.p.name(), items = self.p.accepted, "published over gRPC");
        let mut r = Response::new(Received);
        self.put_offsets(r.metadata_mut());
        Ok(r)
    }

    /// Decodes one frame into the pending batch.
    async fn frame(&mut self, bytes: Bytes) -> Result<(), Status> {
        self.frames += 1;
        // The stream is decoded by the path HTTP and WebSocket share, which checks its
        // options as they do: the first row must be the options row (a frame without
        // rows before it is taken), and a QUADS or GRAPHS stream into a triples topic,
        // or one that declares `rdf_star` or `generalized_statements`, is refused at
        // the first statement the topic cannot hold (a named graph, a quoted triple).
        // Many writers declare more than they use.
        let at = self.bytes;
        self.bytes += bytes.len() as u64;
        self.p.frame(bytes, at).await.map(drop).map_err(status_of)
    }

    /// Appends the pending items, on this task: a hand-off to another task would cost
    /// a thread wake-up on the way to the subscribers (about 50 µs of p50 latency
    /// here), and overlapping the next batch's decoding with it gained no throughput.
    async fn flush(&mut self) -> Result<(), Status> {
        match self.p.flush().await {
            Ok(_) => Ok(()),
            Err(e) => Err(self.failed(status_of(e), None)),
        }
    }

    fn put_offsets(&self, md: &mut MetadataMap) {
        md.insert("x-jelly-items", MetadataValue::from(self.p.accepted));
        if let (Some(first), Some(last)) = (self.p.ranges.first(), self.p.ranges.last()) {
            md.insert("x-jelly-first-offset", MetadataValue::from(first));
            md.insert("x-jelly-last-offset", MetadataValue::from(last));
            // Ranges: other publishers' items may lie between this stream's batches.
            // Cut at 4 KiB, so the trailer stays well under clients' header limits.
            if let Ok(v) = MetadataValue::try_from(self.p.ranges.to_header(4096)) {
                md.insert("x-jelly-offset-ranges", v);
            }
        }
    }

    /// An error status that says which frame failed (if one did) and how many
    /// items were appended before it.
    fn failed(&self, st: Status, frame: Option<u64>) -> Status {
        let at = match frame {
            Some(i) => format!("frame {i} (counting from 0): "),
            None => String::new(),
        };
        let kept = match self.p.accepted {
            0 => "nothing was appended".to_string(),
            n if st.code() == tonic::Code::NotFound => {
                format!(
                    "{n} item(s) from earlier frames were appended before the topic was deleted"
                )
            }
            n => format!("{n} item(s) from earlier frames were appended and stay"),
        };
        let mut out = Status::new(st.code(), format!("{at}{}; {kept}", st.message()));
        self.put_offsets(out.metadata_mut());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jelly::PhysicalType;

    #[test]
    fn options_row_must_come_first() {
        let o = StreamOptions::small().with_physical_type(PhysicalType::Quads);
        let mut enc = jelly::Encoder::new(o.clone()).unwrap();
        enc.add(jelly::StatementRef::quad(
            jelly::TermRef::Iri("http://e/s"),
            jelly::TermRef::Iri("http://e/p"),
            jelly::TermRef::Iri("http://e/o"),
            jelly::TermRef::Iri("http://e/g"),
        ))
        .unwrap();
        let frame = enc.finish_frame();
        let got = first_frame_options(&frame).unwrap();
        assert_eq!(got.physical_type, PhysicalType::Quads);
        assert_eq!(got.max_name_table_size, 128);
        // A second frame starts with a statement, not options.
        enc.add(jelly::StatementRef::quad(
            jelly::TermRef::Iri("http://e/s"),
            jelly::TermRef::Iri("http://e/p"),
            jelly::TermRef::Iri("http://e/o2"),
            jelly::TermRef::Iri("http://e/g"),
        ))
        .unwrap();
        let second = enc.finish_frame();
        assert!(
            first_frame_options(&second)
                .unwrap_err()
                .contains("options row")
        );
        assert!(first_frame_options(&[]).is_err());
        assert!(
            first_frame_options(&[0x0a, 0x10, 0x0a])
                .unwrap_err()
                .contains("malformed")
        );
    }
}
