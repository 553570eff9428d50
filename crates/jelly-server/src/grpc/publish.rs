//! `PublishRdf`: one publisher's Jelly stream, a frame per message, appended to a
//! topic as it arrives. The official service has no topic field on publish, so the
//! topic comes from the request metadata `x-jelly-topic`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};

use jelly::{PhysicalType, StreamOptions};
use jelly_proto::fields::{frame as ff, row as rf};
use jelly_proto::wire::{Reader, WireType};
use tonic::metadata::{MetadataMap, MetadataValue};
use tonic::{Code, Request, Response, Status, Streaming};

use super::messages::{Frame, Received};
use super::{SOURCE_METADATA, TOPIC_METADATA, ascii_metadata};
use crate::http::AppState;
use crate::ingest::{IngestError, JellyIngest, PublishMeta};
use crate::item::NewItem;
use crate::log::LogError;
use crate::topic::{Physical, Topic, TopicOptions, valid_name};

/// Most items appended in one batch.
const BATCH_ITEMS: usize = 256;
/// Most bytes (of item frames) appended in one batch.
const BATCH_BYTES: usize = 4 << 20;
/// Prefix of the metadata keys stored with each item as headers (as over HTTP).
const HEADER_PREFIX: &str = "x-jelly-header-";

/// The `PublishRdf` handler, as the service tonic calls.
#[derive(Clone)]
pub struct PublishService(pub AppState);

impl tower_service::Service<Request<Streaming<Frame>>> for PublishService {
    type Response = Response<Received>;
    type Error = Status;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Status>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Streaming<Frame>>) -> Self::Future {
        let s = self.0.clone();
        Box::pin(async move {
            s.metrics.requests_publish.fetch_add(1, Ordering::Relaxed);
            let mut p = Publish::new(&s, req.metadata())?;
            let r = p.run(&s, req.into_inner()).await;
            if r.is_err() && p.accepted == 0 {
                s.metrics.publish_rejected.fetch_add(1, Ordering::Relaxed);
            }
            r
        })
    }
}

/// The options row that must start a publisher's first frame.
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

/// Refuses publisher options the topic cannot take, before any statement is read.
/// (Table sizes, the version and the physical type's validity are checked by the
/// decoder.)
pub fn check_publisher_options(
    topic_name: &str,
    p: &StreamOptions,
    topic: &TopicOptions,
) -> Result<(), String> {
    if topic.physical == Physical::Triples
        && matches!(p.physical_type, PhysicalType::Quads | PhysicalType::Graphs)
    {
        return Err(format!(
            "topic `{topic_name}` holds triples; a {} publisher stream cannot be appended to it \
             (create the topic with physical=quads)",
            p.physical_type.name().to_ascii_uppercase()
        ));
    }
    if p.rdf_star && !topic.rdf_star {
        return Err(format!(
            "the stream sets rdf_star, but topic `{topic_name}` does not allow RDF-star"
        ));
    }
    if p.generalized_statements && !topic.generalized {
        return Err(format!(
            "the stream sets generalized_statements, but topic `{topic_name}` does not allow \
             generalized statements"
        ));
    }
    Ok(())
}

/// One publish call.
struct Publish {
    name: String,
    /// The topic's options (or the defaults, until it is created on the first append).
    options: TopicOptions,
    topic: Option<Arc<Topic>>,
    ingest: JellyIngest,
    pending: Vec<NewItem>,
    pending_bytes: usize,
    /// Frames received.
    frames: u64,
    /// Items appended.
    accepted: u64,
    first_offset: Option<u64>,
    last_offset: Option<u64>,
}

impl Publish {
    fn new(s: &AppState, md: &MetadataMap) -> Result<Publish, Status> {
        let name = ascii_metadata(md, TOPIC_METADATA)?.ok_or_else(|| {
            Status::invalid_argument(format!(
                "missing request metadata `{TOPIC_METADATA}` (the topic to publish to)"
            ))
        })?;
        if !valid_name(&name) {
            return Err(Status::invalid_argument(
                crate::topic::TopicError::BadName(name).to_string(),
            ));
        }
        let source = ascii_metadata(md, SOURCE_METADATA)?.unwrap_or_default();
        let mut headers = Vec::new();
        for kv in md.iter() {
            if let tonic::metadata::KeyAndValueRef::Ascii(k, v) = kv
                && let Some(h) = k.as_str().strip_prefix(HEADER_PREFIX)
                && !h.is_empty()
            {
                let v = v.to_str().map_err(|_| {
                    Status::invalid_argument(format!("metadata {k} is not visible ASCII"))
                })?;
                headers.push((h.to_string(), v.to_string()));
            }
        }
        let meta = PublishMeta {
            source,
            headers,
            ..PublishMeta::default()
        };
        let topic = s.topics.get(&name);
        if topic.is_none() && !s.config.auto_create_topics {
            return Err(Status::not_found(format!(
                "topic `{name}` does not exist (create it first: auto-creation is off)"
            )));
        }
        let options = match &topic {
            Some(t) => t.options.clone(),
            None => s.config.topic_defaults.clone(),
        };
        Ok(Publish {
            ingest: JellyIngest::new(&options, meta, s.config.max_item_bytes),
            name,
            options,
            topic,
            pending: Vec::new(),
            pending_bytes: 0,
            frames: 0,
            accepted: 0,
            first_offset: None,
            last_offset: None,
        })
    }

    async fn run(
        &mut self,
        s: &AppState,
        mut stream: Streaming<Frame>,
    ) -> Result<Response<Received>, Status> {
        let mut shutdown = s.shutdown.clone();
        loop {
            // Append what is pending whenever the client has nothing more right now,
            // so items become visible without waiting for a full batch.
            let next = tokio::select! {
                biased;
                m = stream.message() => m,
                _ = async { drop(shutdown.wait_for(|v| *v).await) } => {
                    self.flush(s).await?;
                    let st = Status::unavailable("the server is shutting down");
                    return Err(self.failed(st, None));
                }
                _ = std::future::ready(()), if !self.pending.is_empty() => {
                    self.flush(s).await?;
                    continue;
                }
            };
            let frame = match next {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(st) => {
                    self.flush(s).await?;
                    let st = if st.code() == Code::OutOfRange {
                        // tonic's answer to a message over the size limit.
                        Status::resource_exhausted(st.message().to_string())
                    } else {
                        st
                    };
                    return Err(self.failed(st, Some(self.frames)));
                }
            };
            if let Err(st) = self.frame(&frame.0) {
                self.flush(s).await?;
                return Err(self.failed(st, Some(self.frames - 1)));
            }
            if self.pending.len() >= BATCH_ITEMS || self.pending_bytes >= BATCH_BYTES {
                self.flush(s).await?;
            }
        }
        if self.frames == 0 {
            return Err(Status::invalid_argument(
                "the stream holds no frame (it must have at least one, starting with the stream options)",
            ));
        }
        self.flush(s).await?;
        tracing::debug!(topic = %self.name, items = self.accepted, "published over gRPC");
        let mut r = Response::new(Received);
        self.put_offsets(r.metadata_mut());
        Ok(r)
    }

    /// Decodes one frame into the pending batch.
    fn frame(&mut self, bytes: &[u8]) -> Result<(), Status> {
        let index = self.frames;
        self.frames += 1;
        if index == 0 {
            let o = first_frame_options(bytes).map_err(Status::invalid_argument)?;
            check_publisher_options(&self.name, &o, &self.options)
                .map_err(Status::invalid_argument)?;
        }
        match self.ingest.frame(bytes) {
            Ok(Some(item)) => {
                self.pending_bytes += item.frame.len();
                self.pending.push(item);
                Ok(())
            }
            Ok(None) => Ok(()),
            Err(e) => {
                let code = match e {
                    IngestError::TooLarge { .. } => Code::ResourceExhausted,
                    IngestError::Invalid(_) | IngestError::NotAllowed(_) => Code::InvalidArgument,
                };
                Err(Status::new(code, e.to_string()))
            }
        }
    }

    /// Appends the pending items.
    async fn flush(&mut self, s: &AppState) -> Result<(), Status> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let topic = match &self.topic {
            Some(t) => t.clone(),
            None => {
                let t = s.topics.for_publish(&self.name).map_err(|e| {
                    let st = match e {
                        crate::topic::TopicError::NotFound(_) => Status::not_found(e.to_string()),
                        e => Status::unavailable(e.to_string()),
                    };
                    self.failed(st, None)
                })?;
                if t.options != self.options {
                    let st = Status::aborted(format!(
                        "topic `{}` was created concurrently with other options; publish again",
                        self.name
                    ));
                    return Err(self.failed(st, None));
                }
                self.topic = Some(t.clone());
                t
            }
        };
        let items = std::mem::take(&mut self.pending);
        self.pending_bytes = 0;
        // Appended on this task: a hand-off to another task would cost a thread
        // wake-up on the way to the subscribers (about 50 µs of p50 latency here),
        // and overlapping the next batch's decoding with it gained no throughput.
        let r = topic.append(items, &s.metrics).await;
        self.record(r)
    }

    /// Records the offsets of a finished append, or turns its error into the status.
    fn record(&mut self, r: Result<Vec<u64>, LogError>) -> Result<(), Status> {
        let offsets = r.map_err(|e| {
            let st = match e {
                LogError::ItemTooLarge { .. } => Status::resource_exhausted(e.to_string()),
                e => Status::unavailable(format!("append failed: {e}")),
            };
            self.failed(st, None)
        })?;
        if let (Some(&first), Some(&last)) = (offsets.first(), offsets.last()) {
            self.first_offset.get_or_insert(first);
            self.last_offset = Some(last);
            self.accepted += offsets.len() as u64;
        }
        Ok(())
    }

    fn put_offsets(&self, md: &mut MetadataMap) {
        md.insert("x-jelly-items", MetadataValue::from(self.accepted));
        if let (Some(first), Some(last)) = (self.first_offset, self.last_offset) {
            md.insert("x-jelly-first-offset", MetadataValue::from(first));
            md.insert("x-jelly-last-offset", MetadataValue::from(last));
        }
    }

    /// An error status that says which frame failed (if one did) and how many
    /// items were appended before it.
    fn failed(&self, st: Status, frame: Option<u64>) -> Status {
        let at = match frame {
            Some(i) => format!("frame {i} (counting from 0): "),
            None => String::new(),
        };
        let kept = match self.accepted {
            0 => "nothing was appended".to_string(),
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

    #[test]
    fn publisher_options_against_topic() {
        let triples = TopicOptions {
            physical: Physical::Triples,
            ..TopicOptions::default()
        };
        let q = StreamOptions::small().with_physical_type(PhysicalType::Quads);
        let g = StreamOptions::small().with_physical_type(PhysicalType::Graphs);
        let t = StreamOptions::small().with_physical_type(PhysicalType::Triples);
        assert!(check_publisher_options("x", &q, &triples).is_err());
        assert!(check_publisher_options("x", &g, &triples).is_err());
        assert!(check_publisher_options("x", &t, &triples).is_ok());
        let quads = TopicOptions::default();
        assert!(check_publisher_options("x", &t, &quads).is_ok());
        assert!(check_publisher_options("x", &q.clone().with_rdf_star(true), &quads).is_err());
        assert!(
            check_publisher_options("x", &q.clone().with_generalized_statements(true), &quads)
                .is_err()
        );
        let star = TopicOptions {
            rdf_star: true,
            generalized: true,
            ..TopicOptions::default()
        };
        assert!(
            check_publisher_options(
                "x",
                &q.with_rdf_star(true).with_generalized_statements(true),
                &star
            )
            .is_ok()
        );
    }
}
