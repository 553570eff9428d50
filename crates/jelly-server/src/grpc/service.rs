//! Routing: `RdfStreamService`'s methods as axum routes, so gRPC shares the HTTP
//! listener. Requests on the service's paths go to tonic; any other request with
//! `content-type: application/grpc…` gets `UNIMPLEMENTED` (see `unimplemented`).

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use tonic::Status;
use tonic::codec::CompressionEncoding;
use tonic::server::Grpc;

use super::codec::JellyCodec;
use super::inflate::{Inflating, MessageCoding};
use super::message_pace::MessagePace;
use super::messages::{Frame, Received};
use super::publish::PublishService;
use crate::http::AppState;

/// The fully qualified service name.
pub const SERVICE_NAME: &str = "eu.ostrzyciel.jelly.core.proto.v1.RdfStreamService";
/// Path of `SubscribeRdf`.
pub const SUBSCRIBE_PATH: &str = "/eu.ostrzyciel.jelly.core.proto.v1.RdfStreamService/SubscribeRdf";
/// Path of `PublishRdf`.
pub const PUBLISH_PATH: &str = "/eu.ostrzyciel.jelly.core.proto.v1.RdfStreamService/PublishRdf";

/// The metadata key naming the encoding of a call's messages.
const GRPC_ENCODING: &str = "grpc-encoding";
/// The metadata key naming the encodings the server reads.
pub const ACCEPT_ENCODING_METADATA: &str = "grpc-accept-encoding";
/// The encodings both methods read and SubscribeRdf can send.
pub const ACCEPTED_ENCODINGS: &str = "gzip,zstd";

/// Smallest message size limit (gRPC's customary 4 MiB).
const MIN_MESSAGE_LIMIT: usize = 4 << 20;

/// The service's routes (to merge into the HTTP router).
pub fn routes() -> Router<AppState> {
    Router::new()
        .route(SUBSCRIBE_PATH, post(subscribe_rdf))
        .route(PUBLISH_PATH, post(publish_rdf))
}

/// True for a gRPC request in protobuf: `application/grpc` or `application/grpc+proto`
/// (parameters after `;` allowed). Not `+json`, nor gRPC-Web, whose bodies this server
/// would read as protobuf and whose clients cannot read the status in HTTP/2 trailers.
pub fn is_grpc(req: &Request) -> bool {
    req.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(grpc_content_type)
}

fn grpc_content_type(ct: &str) -> bool {
    let media = ct.split(';').next().unwrap_or("").trim();
    media.eq_ignore_ascii_case("application/grpc")
        || media.eq_ignore_ascii_case("application/grpc+proto")
}

/// The answer to a gRPC request for a method this server does not have.
pub fn unimplemented(path: &str) -> Response {
    Status::unimplemented(format!("no gRPC method {path}"))
        .into_http::<Body>()
        .into_response()
}

fn not_grpc() -> Response {
    (
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        axum::Json(serde_json::json!({
            "error": "this is a gRPC method: send content-type application/grpc (or application/grpc+proto) over HTTP/2; gRPC-Web and JSON are not served"
        })),
    )
        .into_response()
}

/// Largest message accepted from a client: a frame that makes an item of at most
/// `max_item_bytes`, or at least gRPC's usual 4 MiB.
fn message_limit(s: &AppState) -> usize {
    s.config.max_item_bytes.max(MIN_MESSAGE_LIMIT)
}

async fn subscribe_rdf(State(s): State<AppState>, req: Request) -> Response {
    if !is_grpc(&req) {
        return not_grpc();
    }
    super::subscribe::serve(s, req).await
}

async fn publish_rdf(State(s): State<AppState>, req: Request) -> Response {
    if !is_grpc(&req) {
        return not_grpc();
    }
    let timeout = match super::deadline::timeout(req.headers()) {
        Ok(t) => t,
        Err(st) => return st.into_http::<Body>().into_response(),
    };
    let limit = message_limit(&s);
    let mut grpc = Grpc::new(JellyCodec::<Received, Frame>::new())
        .max_decoding_message_size(limit)
        .accept_compressed(CompressionEncoding::Gzip)
        .accept_compressed(CompressionEncoding::Zstd);
    let coding = req
        .headers()
        .get(GRPC_ENCODING)
        .and_then(|v| v.to_str().ok())
        .and_then(MessageCoding::of);
    let held = req
        .extensions()
        .get::<crate::accept::ConnectionHeld>()
        .cloned();
    // A started message may pause at most as long as an atomic publish's body.
    let pause = s.config.body_read_timeout().unwrap_or(Duration::MAX);
    let service = PublishService(s, timeout, held);
    let (mut parts, body) = req.into_parts();
    let body = MessagePace::new(body, pause);
    let r = match coding {
        // Compressed messages are decompressed here, strictly (tonic ignores bytes
        // after a message's gzip data), and tonic reads them as plain messages. The
        // size limit holds for each message both ways. Other encodings are left to
        // tonic, which refuses them.
        Some(coding) => {
            parts.headers.remove(GRPC_ENCODING);
            let req = Request::from_parts(parts, Inflating::new(body, coding, limit));
            grpc.client_streaming(service, req).await
        }
        None => {
            grpc.client_streaming(service, Request::from_parts(parts, body))
                .await
        }
    };
    let mut r = r.map(Body::new);
    // Tells clients which encodings they may compress messages with (tonic reads
    // them but does not say so on a client-streaming answer).
    r.headers_mut()
        .entry(ACCEPT_ENCODING_METADATA)
        .or_insert(HeaderValue::from_static(ACCEPTED_ENCODINGS));
    r
}

#[cfg(test)]
mod tests {
    /// Protobuf gRPC only: other `application/grpc…` types are not read as protobuf.
    #[test]
    fn grpc_content_types_are_protobuf_ones() {
        for ok in [
            "application/grpc",
            "application/grpc+proto",
            "application/GRPC",
            "application/grpc; charset=utf-8",
        ] {
            assert!(super::grpc_content_type(ok), "{ok}");
        }
        for no in [
            "application/grpcx",
            "application/grpc+json",
            "application/grpc-web",
            "application/grpc-web-text",
            "application/json",
            "",
        ] {
            assert!(!super::grpc_content_type(no), "{no}");
        }
    }
}
