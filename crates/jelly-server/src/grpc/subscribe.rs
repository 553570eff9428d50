//! `SubscribeRdf`: a topic's items as a stream of `RdfStreamFrame` messages, one item
//! per message, following new items until the client goes away or the server stops.
//!
//! The response is built here rather than by tonic, so that its length-prefixed
//! messages (compressed with the negotiated `grpc-encoding`) are written once per
//! fan-out group and shared by its subscribers: tonic would compress each message
//! again for every call. Spliced subscriptions are served by a fan-out group;
//! re-encoded (compact) ones by their own reader.

use std::convert::Infallible;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::{Stream, StreamExt as _};
use http_body::Frame as BodyFrame;
use http_body_util::{BodyExt as _, StreamBody};
use tonic::Status;
use tonic::metadata::{MetadataMap, MetadataValue};

use super::inflate::MessageCoding;
use super::messages::Subscribe;
use super::negotiate::negotiate;
use super::{FROM_METADATA, TOPIC_ID_METADATA, WINDOW_METADATA, ascii_metadata};
use crate::compress::Encoding;
use crate::deliver::{Batch, Delivery, EndReason, Follow, JellyMode, OutFormat, Wrapping};
use crate::fanout::encode::grpc_message;
use crate::fanout::{Framing, GroupKey, MAX_WINDOW_MS, Step, Subscription};
use crate::filter::FilterParams;
use crate::http::AppState;
use crate::log::ReadLimits;
use crate::position::{FromError, resolve_from};

/// Largest `RdfStreamSubscribe` message accepted (compressed or not).
/// Largest request message: an `RdfStreamSubscribe` is a topic name (at most 200
/// bytes) and a few stream options, so this leaves ample room while an unauthorized
/// or hostile caller cannot make the server hold megabytes per call.
const MAX_REQUEST_BYTES: usize = 64 << 10;

fn from_error(e: FromError) -> Status {
    match e {
        FromError::Bad(_) => Status::invalid_argument(format!("{FROM_METADATA}: {e}")),
        FromError::Gone { .. } | FromError::PastEnd { .. } => Status::out_of_range(e.to_string()),
        FromError::Unavailable(m) => Status::unavailable(m),
    }
}

/// Serves one `SubscribeRdf` call: errors before the stream starts are a
/// trailers-only response.
pub async fn serve(s: AppState, req: Request) -> Response {
    match subscribe(s, req).await {
        Ok(r) => r,
        Err(status) => status.into_http::<Body>().into_response(),
    }
}

/// The buffer window asked for in `x-jelly-window-ms` (default 0).
fn window(md: &MetadataMap) -> Result<u64, Status> {
    match ascii_metadata(md, WINDOW_METADATA)? {
        None => Ok(0),
        // Digits only, as `x-jelly-from` takes them (no sign, no spaces).
        Some(v) => match crate::position::number(&v) {
            Some(w) if w <= MAX_WINDOW_MS => Ok(w),
            _ => Err(Status::invalid_argument(format!(
                "{WINDOW_METADATA}: `{v}` is not a number of milliseconds from 0 to {MAX_WINDOW_MS}"
            ))),
        },
    }
}

/// Reads the call's one request message (decompressing it with the request's
/// `grpc-encoding`).
async fn read_request(headers: &HeaderMap, body: Body) -> Result<Subscribe, Status> {
    let bytes = http_body_util::Limited::new(body, MAX_REQUEST_BYTES + 5)
        .collect()
        .await
        .map_err(|e| {
            if e.is::<http_body_util::LengthLimitError>() {
                Status::resource_exhausted(format!(
                    "the request message is over {MAX_REQUEST_BYTES} bytes"
                ))
            } else {
                Status::invalid_argument(format!("cannot read the request: {e}"))
            }
        })?
        .to_bytes();
    if bytes.len() < 5 {
        return Err(Status::invalid_argument(
            "the request holds no RdfStreamSubscribe message",
        ));
    }
    let len = u32::from_be_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]) as usize;
    let Some(payload) = bytes.get(5..5 + len) else {
        return Err(Status::invalid_argument(format!(
            "the request message is cut short: {len} bytes announced, {} sent",
            bytes.len() - 5
        )));
    };
    if bytes.len() > 5 + len {
        return Err(Status::invalid_argument(format!(
            "SubscribeRdf takes one request message; {} more byte(s) follow it",
            bytes.len() - 5 - len
        )));
    }
    let msg = match bytes[0] {
        0 => payload.to_vec(),
        1 => {
            let Some(enc) = headers.get("grpc-encoding") else {
                return Err(Status::invalid_argument(
                    "the request message is flagged compressed, but the call has no grpc-encoding",
                ));
            };
            let enc = enc.to_str().unwrap_or("(not ASCII)");
            match MessageCoding::of(enc) {
                // Strictly: bytes after the compressed data are refused, as for
                // PublishRdf and HTTP request bodies.
                Some(c) => c.decompress(payload, MAX_REQUEST_BYTES).map_err(|e| {
                    Status::new(e.code(), format!("the request message: {}", e.message()))
                })?,
                None if enc == "identity" => {
                    return Err(Status::invalid_argument(
                        "the request message is flagged compressed, but the call's grpc-encoding is identity",
                    ));
                }
                None => {
                    return Err(Status::unimplemented(format!(
                        "request compressed with `{enc}`; this server reads gzip and zstd"
                    )));
                }
            }
        }
        f => {
            return Err(Status::invalid_argument(format!(
                "bad compressed-flag {f} in the request message"
            )));
        }
    };
    Subscribe::decode(&msg)
        .map_err(|e| Status::invalid_argument(format!("malformed RdfStreamSubscribe: {e}")))
}

async fn subscribe(s: AppState, req: Request) -> Result<Response, Status> {
    let (parts, body) = req.into_parts();
    let md = MetadataMap::from_headers(parts.headers.clone());
    // Refusals come before anything else: the token, and some subscribe right at all,
    // before the request is read (its topic is checked once it is).
    let caller = crate::auth::check_grpc_subscriber(&s, &md)?;
    let from = ascii_metadata(&md, FROM_METADATA)?;
    let topic_id = ascii_metadata(&md, TOPIC_ID_METADATA)?;
    if topic_id.as_deref() == Some("") {
        return Err(Status::invalid_argument(format!(
            "{TOPIC_ID_METADATA}: {}",
            crate::topic::EMPTY_TOPIC_ID
        )));
    }
    let window = window(&md)?;
    let filter = FilterParams::from_grpc_metadata(&md)
        .and_then(|p| p.build())
        .map_err(|e| Status::invalid_argument(e.to_string()))?;
    let encoding = Encoding::from_grpc(
        crate::http::header_list(
            &parts.headers,
            axum::http::HeaderName::from_static("grpc-accept-encoding"),
        )
        .as_deref(),
    );
    let timeout = super::deadline::timeout(&parts.headers)?;
    // Clients send the one small message with the call: one that has not arrived by
    // `header_read_timeout_ms` is a stalled or hostile client, like a slow request head.
    let read_limit = match s.config.header_read_timeout_ms {
        0 => None,
        ms => Some(std::time::Duration::from_millis(ms)),
    };
    // The sooner of the two; the call's own deadline answers as such.
    let (limit, own_deadline) = match (timeout, read_limit) {
        (Some(t), Some(l)) if l < t => (Some(l), false),
        (Some(t), _) => (Some(t), true),
        (None, l) => (l, false),
    };
    let msg = match limit {
        None => read_request(&parts.headers, body).await?,
        Some(l) => tokio::time::timeout(l, read_request(&parts.headers, body))
            .await
            .map_err(|_| {
                if own_deadline {
                    super::deadline::exceeded(l)
                } else {
                    Status::deadline_exceeded(format!(
                        "the RdfStreamSubscribe message did not arrive within {} ms",
                        l.as_millis()
                    ))
                }
            })??,
    };
    crate::auth::check_grpc_caller(&s, &caller, &msg.topic, crate::auth::Right::Subscribe)?;
    s.topics
        .check_available(&msg.topic)
        .map_err(|e| Status::unavailable(e.to_string()))?;
    if !crate::topic::valid_name(&msg.topic) {
        return Err(Status::invalid_argument(
            crate::topic::TopicError::BadName(msg.topic.clone()).to_string(),
        ));
    }
    let t = s
        .topics
        .get(&msg.topic)
        .ok_or_else(|| Status::not_found(format!("topic `{}` does not exist", msg.topic)))?;
    t.check_id(topic_id.as_deref())
        .map_err(|e| Status::not_found(e.to_string()))?;
    let id = HeaderValue::from_str(&t.id).unwrap_or_else(|_| HeaderValue::from_static(""));
    let topic_options = t.options().stream_options();
    let n = negotiate(&t.name, &topic_options, msg.requested_options.as_ref())
        .map_err(Status::invalid_argument)?;
    let start = resolve_from(&t, from.as_deref(), "earliest")
        .await
        .map_err(from_error)?;
    let compact = n.mode == JellyMode::Compact;
    tracing::debug!(start, compact, ?encoding, "gRPC subscription");
    let body = if compact {
        let delivery = Delivery::try_jelly(n.mode, n.options, false).map_err(|e| {
            Status::invalid_argument(format!("cannot encode with the requested options: {e}"))
        })?;
        let guard = t.subscribe("grpc", "jelly", start);
        let batch = ReadLimits {
            max_items: s.config.delivery_batch_items.max(1),
            max_bytes: 4 << 20,
        };
        let follow = Follow::new(
            t,
            guard,
            start,
            None,
            delivery,
            Wrapping::Raw,
            batch,
            s.shutdown.clone(),
            std::time::Duration::from_secs(s.config.sse_keepalive_secs.max(1)),
            s.metrics.clone(),
        )
        .with_filter(filter)
        .with_window(std::time::Duration::from_millis(window));
        Body::new(StreamBody::new(until(
            private_body(follow, encoding),
            timeout,
        )))
    } else {
        let key = GroupKey {
            filter,
            encoding,
            window_ms: window,
            ..GroupKey::new(&t.name, OutFormat::Jelly, Framing::Grpc)
        };
        let sub = s.fanout.subscribe(t, key, "grpc", start);
        Body::new(StreamBody::new(until(shared_body(sub), timeout)))
    };
    let mut r = Response::new(body);
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    if let Some(name) = encoding.grpc_name() {
        h.insert("grpc-encoding", HeaderValue::from_static(name));
    }
    h.insert(
        super::service::ACCEPT_ENCODING_METADATA,
        HeaderValue::from_static(super::service::ACCEPTED_ENCODINGS),
    );
    h.insert("x-jelly-start-offset", HeaderValue::from(start));
    h.insert(TOPIC_ID_METADATA, id);
    Ok(r)
}

type FrameResult = Result<BodyFrame<Bytes>, Infallible>;

/// The trailers that end a call.
fn trailers(status: Status) -> FrameResult {
    let mut h = HeaderMap::new();
    if status.add_header(&mut h).is_err() {
        h.insert("grpc-status", HeaderValue::from_static("13"));
    }
    Ok(BodyFrame::trailers(h))
}

/// `body`, ended with `DEADLINE_EXCEEDED` once `timeout` (the call's `grpc-timeout`)
/// has passed, unless it ended before.
fn until(
    body: impl Stream<Item = FrameResult> + Send + 'static,
    timeout: Option<std::time::Duration>,
) -> impl Stream<Item = FrameResult> + Send + 'static {
    let Some(t) = timeout else {
        return futures_util::future::Either::Left(body);
    };
    let expiry = Box::pin(tokio::time::sleep(t));
    let body = Box::pin(body);
    futures_util::future::Either::Right(futures_util::stream::unfold(
        Some((body, expiry)),
        move |state| async move {
            let (mut body, mut expiry) = state?;
            tokio::select! {
                biased;
                _ = &mut expiry => Some((trailers(super::deadline::exceeded(t)), None)),
                frame = body.next() => frame.map(|f| (f, Some((body, expiry)))),
            }
        },
    ))
}

/// A shared subscription's body: the group's framed messages, then trailers.
fn shared_body(sub: Subscription) -> impl Stream<Item = FrameResult> + Send + 'static {
    futures_util::stream::unfold(
        (Some(sub), std::collections::VecDeque::<Bytes>::new()),
        |(sub, mut queue)| async move {
            let mut sub = sub?;
            loop {
                if let Some(b) = queue.pop_front() {
                    return Some((Ok(BodyFrame::data(b)), (Some(sub), queue)));
                }
                match sub.next_step().await {
                    Step::Data(d) => queue.extend(d),
                    Step::KeepAlive => {}
                    Step::End(reason) => {
                        let next = sub.next_offset();
                        return Some((trailers(end_status(reason, next, false)), (None, queue)));
                    }
                }
            }
        },
    )
}

/// A private (compact) subscription's body: each item one message, compressed for
/// this call alone.
fn private_body(
    follow: Follow,
    encoding: Encoding,
) -> impl Stream<Item = FrameResult> + Send + 'static {
    futures_util::stream::unfold(Some(follow), move |f| async move {
        let mut f = f?;
        loop {
            match f.next_batch().await {
                Batch::Items { data, ends } => {
                    let mut out = Vec::with_capacity(data.len() + 5 * ends.len());
                    for part in Batch::parts(&data, &ends) {
                        grpc_message(encoding, &part, &mut out);
                    }
                    return Some((Ok(BodyFrame::data(Bytes::from(out))), Some(f)));
                }
                Batch::KeepAlive => {}
                Batch::End(reason) => {
                    let next = f.next;
                    return Some((trailers(end_status(reason, next, true)), None));
                }
            }
        }
    })
}

/// The status that ends a subscription.
fn end_status(reason: EndReason, next: u64, compact: bool) -> Status {
    let resume = format!("resume with x-jelly-from: {next}");
    let mut status = match reason {
        EndReason::Shutdown => {
            Status::unavailable(format!("the server is shutting down; {resume}"))
        }
        EndReason::Truncated { requested, first } => Status::out_of_range(format!(
            "the subscriber fell behind retention: offset {requested} is gone, the first retained offset is {first}"
        )),
        EndReason::DeliverFailed(e) if compact => Status::invalid_argument(format!(
            "{e} (the item cannot be encoded with the requested options)"
        )),
        EndReason::DeliverFailed(e) => Status::internal(e.to_string()),
        EndReason::ReadFailed(m) => Status::unavailable(format!("log read failed: {m}; {resume}")),
        EndReason::Deleted => Status::not_found("the topic was deleted"),
        EndReason::Closed | EndReason::Reached => {
            Status::unavailable(format!("the topic's log was closed; {resume}"))
        }
    };
    status
        .metadata_mut()
        .insert("x-jelly-next-offset", MetadataValue::from(next));
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The window is digits only: no sign, no spaces around it.
    #[test]
    fn the_window_metadata_is_digits_only() {
        let with = |v: &str| {
            let mut md = MetadataMap::new();
            md.insert(WINDOW_METADATA, v.parse().unwrap());
            window(&md)
        };
        assert_eq!(window(&MetadataMap::new()).unwrap(), 0);
        assert_eq!(with("250").unwrap(), 250);
        for bad in ["+5", "-1", "5 5", "0x10", "60001"] {
            let e = with(bad).unwrap_err();
            assert_eq!(e.code(), tonic::Code::InvalidArgument, "{bad}");
        }
    }
}
