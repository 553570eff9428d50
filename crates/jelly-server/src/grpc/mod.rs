//! The gRPC front-end: the official Jelly `RdfStreamService` (`grpc.proto`), served on
//! the HTTP listener (HTTP/2, also cleartext with prior knowledge) next to the HTTP API.
//!
//! - [`codec`]: a `tonic` codec over our own wire code (no prost, no generated code).
//! - [`messages`]: `RdfStreamFrame`, `RdfStreamSubscribe`, `RdfStreamReceived`.
//! - [`negotiate`]: `requested_options` against the topic's stream.
//! - [`subscribe`]: `SubscribeRdf`; [`publish`]: `PublishRdf`.
//! - [`service`]: the routes that hand `application/grpc` requests to tonic.
//! - [`deadline`]: the client's `grpc-timeout`.
//! - [`inflate`]: compressed request messages, read strictly.
//!
//! Extensions carried in request metadata (the official messages have no fields for
//! them): `x-jelly-topic` (publish: the topic), `x-jelly-source` and
//! `x-jelly-header-<name>` (publish: stored with each item), `x-jelly-from`
//! (subscribe: the start position, as the HTTP `from` parameter), `x-jelly-window-ms`
//! (subscribe: the buffer window), and the subscribe filters `x-jelly-source`,
//! `x-jelly-prefix`, `x-jelly-pattern`, `x-jelly-ask` (see [`crate::filter`]).
//! `SubscribeRdf` answers in the `grpc-encoding` (gzip or zstd) the client accepts,
//! compressed once per fan-out group. `docs/grpc-api.md` describes the API.

pub mod codec;
pub mod deadline;
pub mod inflate;
pub mod message_pace;
pub mod messages;
pub mod negotiate;
pub mod publish;
pub mod service;
pub mod subscribe;

use tonic::Status;
use tonic::metadata::MetadataMap;

pub use service::{PUBLISH_PATH, SERVICE_NAME, SUBSCRIBE_PATH, routes};

/// Length of the prefix of a gRPC message: a compressed flag and a big-endian `u32`
/// length (read by [`inflate`] and [`message_pace`] as request bodies pass).
pub(crate) const MESSAGE_PREFIX: usize = 5;

/// The error of the request bodies that wrap a call's body.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Request metadata naming the topic of a `PublishRdf` call.
pub const TOPIC_METADATA: &str = "x-jelly-topic";
/// Request metadata with the publisher's source id.
pub const SOURCE_METADATA: &str = "x-jelly-source";
/// Request metadata with a `SubscribeRdf` start position (default `earliest`).
pub const FROM_METADATA: &str = "x-jelly-from";
/// Request metadata with a `SubscribeRdf` buffer window in milliseconds (default 0).
pub const WINDOW_METADATA: &str = "x-jelly-window-ms";
/// `SubscribeRdf`: in the request, the id of the topic read before (a different one,
/// after the topic was deleted and created again, is `NOT_FOUND`); in the response,
/// the topic's id.
pub const TOPIC_ID_METADATA: &str = "x-jelly-topic-id";

/// An ASCII metadata value, if present.
pub(crate) fn ascii_metadata(md: &MetadataMap, key: &str) -> Result<Option<String>, Status> {
    // Given twice, which one the client meant is not known (HTTP's query parameters
    // given twice are refused too).
    if md.get_all(key).iter().nth(1).is_some() {
        return Err(Status::invalid_argument(format!(
            "metadata {key} is given more than once"
        )));
    }
    // Its binary form is no other way to give it: refused rather than ignored.
    if md.get_bin(format!("{key}-bin")).is_some() {
        return Err(Status::invalid_argument(format!(
            "metadata {key}-bin is binary; {key} is text (send it without -bin)"
        )));
    }
    match md.get(key) {
        None => Ok(None),
        Some(v) => v
            .to_str()
            .map(|s| Some(s.to_string()))
            .map_err(|_| Status::invalid_argument(format!("metadata {key} is not visible ASCII"))),
    }
}

#[cfg(test)]
mod metadata_tests {
    use super::*;

    #[test]
    fn metadata_given_twice_is_refused() {
        let mut md = MetadataMap::new();
        md.append(FROM_METADATA, "3".parse().unwrap());
        assert_eq!(
            ascii_metadata(&md, FROM_METADATA).unwrap().as_deref(),
            Some("3")
        );
        md.append(FROM_METADATA, "latest".parse().unwrap());
        let e = ascii_metadata(&md, FROM_METADATA).unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert!(e.message().contains("more than once"), "{}", e.message());
    }

    #[test]
    fn a_binary_form_of_a_text_key_is_refused() {
        let mut md = MetadataMap::new();
        md.insert_bin(
            "x-jelly-source-bin",
            tonic::metadata::MetadataValue::from_bytes(b"\xff"),
        );
        let e = ascii_metadata(&md, SOURCE_METADATA).unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert!(
            e.message().contains("x-jelly-source-bin is binary"),
            "{}",
            e.message()
        );
        assert_eq!(ascii_metadata(&md, FROM_METADATA).unwrap(), None);
    }
}
