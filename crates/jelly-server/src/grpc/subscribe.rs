//! `SubscribeRdf`: a topic's items as a stream of `RdfStreamFrame` messages, one item
//! per message, following new items until the client goes away or the server stops.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::Stream;
use tonic::metadata::MetadataValue;
use tonic::{Request, Response, Status};

use super::messages::{Frame, Subscribe};
use super::negotiate::negotiate;
use super::{FROM_METADATA, ascii_metadata};
use crate::deliver::{Batch, Delivery, EndReason, Follow, JellyMode, Wrapping};
use crate::filter::FilterParams;
use crate::http::AppState;
use crate::log::ReadLimits;
use crate::position::{FromError, resolve_from};

/// The response stream of one subscription.
pub type FrameStream = Pin<Box<dyn Stream<Item = Result<Frame, Status>> + Send>>;

/// The `SubscribeRdf` handler, as the service tonic calls.
#[derive(Clone)]
pub struct SubscribeService(pub AppState);

impl tower_service::Service<Request<Subscribe>> for SubscribeService {
    type Response = Response<FrameStream>;
    type Error = Status;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Status>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Subscribe>) -> Self::Future {
        let s = self.0.clone();
        Box::pin(subscribe(s, req))
    }
}

fn from_error(e: FromError) -> Status {
    match e {
        FromError::Bad(_) => Status::invalid_argument(format!("{FROM_METADATA}: {e}")),
        FromError::Gone { .. } | FromError::PastEnd { .. } => Status::out_of_range(e.to_string()),
        FromError::Unavailable(m) => Status::unavailable(m),
    }
}

async fn subscribe(s: AppState, req: Request<Subscribe>) -> Result<Response<FrameStream>, Status> {
    let from = ascii_metadata(req.metadata(), FROM_METADATA)?;
    let filter = FilterParams::from_grpc_metadata(req.metadata())
        .and_then(|p| p.build())
        .map_err(|e| Status::invalid_argument(e.to_string()))?;
    let msg = req.into_inner();
    let t = s
        .topics
        .get(&msg.topic)
        .ok_or_else(|| Status::not_found(format!("topic `{}` does not exist", msg.topic)))?;
    let topic_options = t.options.stream_options();
    let n = negotiate(&t.name, &topic_options, msg.requested_options.as_ref())
        .map_err(Status::invalid_argument)?;
    let start = resolve_from(&t, from.as_deref(), "earliest")
        .await
        .map_err(from_error)?;
    let compact = n.mode == JellyMode::Compact;
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
        Duration::from_secs(s.config.sse_keepalive_secs.max(1)),
        s.metrics.clone(),
    )
    .with_filter(filter);
    tracing::debug!(start, compact, "gRPC subscription");
    let mut r = Response::new(frames(follow, compact));
    r.metadata_mut()
        .insert("x-jelly-start-offset", MetadataValue::from(start));
    Ok(r)
}

/// What the stream still has to do.
struct State {
    follow: Follow,
    queue: VecDeque<Frame>,
    /// The stream re-encodes with the client's options (delivery errors are the
    /// request's fault, not the server's).
    compact: bool,
    done: bool,
}

/// The subscription as a stream of frames; it ends with a status saying why.
fn frames(follow: Follow, compact: bool) -> FrameStream {
    let state = State {
        follow,
        queue: VecDeque::new(),
        compact,
        done: false,
    };
    Box::pin(futures_util::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(f) = st.queue.pop_front() {
                return Some((Ok(f), st));
            }
            if st.done {
                return None;
            }
            match st.follow.next_batch().await {
                Batch::Items { data, ends } => {
                    st.queue.extend(Batch::parts(&data, &ends).map(Frame));
                }
                Batch::KeepAlive => {}
                Batch::End(reason) => {
                    st.done = true;
                    let next = st.follow.next;
                    return Some((Err(end_status(reason, next, st.compact)), st));
                }
            }
        }
    }))
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
        EndReason::Closed | EndReason::Reached => {
            Status::unavailable(format!("the topic's log was closed; {resume}"))
        }
    };
    status
        .metadata_mut()
        .insert("x-jelly-next-offset", MetadataValue::from(next));
    status
}
