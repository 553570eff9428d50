//! The WebSocket upgrade, completed here rather than by axum's `WebSocketUpgrade`.
//!
//! axum checks the handshake (RFC 6455 §4.2.1 over HTTP/1.1, RFC 8441 over HTTP/2),
//! but its `on_upgrade` builds the WebSocket over the upgraded connection itself, and
//! a publisher's socket needs [`FramePace`] between the two: tungstenite keeps a
//! partial message to itself, so only the byte stream shows a client stalled inside
//! one. [`Handshake`] runs axum's checks (same refusals, same 426 answer) and keeps
//! the connection's upgrade; [`Handshake::upgrade`] answers as axum would (101 with
//! `Sec-WebSocket-Accept`, or 200 over HTTP/2) and builds the socket on its own task.

use std::future::Future;
use std::time::Duration;

use axum::body::Body;
use axum::extract::FromRequestParts;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::ws::rejection::{ConnectionNotUpgradable, WebSocketUpgradeRejection};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, Version, header};
use axum::response::Response;
use hyper::upgrade::{OnUpgrade, Upgraded};
use hyper_util::rt::TokioIo;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};

use super::ws_pace::FramePace;

/// A WebSocket of this server: tungstenite over the upgraded connection, whose
/// messages from the peer may pause as [`FramePace`] allows.
pub type Socket = WebSocketStream<FramePace<TokioIo<Upgraded>>>;

/// A checked WebSocket handshake, not answered yet.
pub struct Handshake {
    /// The client's `Sec-WebSocket-Key` (HTTP/1.1; `None` over HTTP/2).
    key: Option<HeaderValue>,
    on_upgrade: OnUpgrade,
}

impl<S: Send + Sync> FromRequestParts<S> for Handshake {
    type Rejection = WebSocketUpgradeRejection;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        // Taken before axum's extractor removes it from the request (a clone shares
        // the one upgrade; axum's copy is dropped unused: only its checks count).
        let on_upgrade = parts.extensions.get::<OnUpgrade>().cloned();
        let _checked = WebSocketUpgrade::from_request_parts(parts, state).await?;
        let key = if parts.version <= Version::HTTP_11 {
            parts.headers.get(header::SEC_WEBSOCKET_KEY).cloned()
        } else {
            None
        };
        Ok(Handshake {
            key,
            on_upgrade: on_upgrade.ok_or_else(ConnectionNotUpgradable::default)?,
        })
    }
}

impl Handshake {
    /// Answers the handshake and runs `session` on the socket once the connection is
    /// upgraded (on a task of its own). `pause` bounds pauses inside a message from
    /// the peer (`None`: no bound).
    pub fn upgrade<F, Fut>(
        self,
        config: WebSocketConfig,
        pause: Option<Duration>,
        session: F,
    ) -> Response
    where
        F: FnOnce(Socket) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let on_upgrade = self.on_upgrade;
        tokio::spawn(async move {
            // A client that went away before the upgrade: nothing to serve.
            let Ok(upgraded) = on_upgrade.await else {
                return;
            };
            let io = FramePace::new(TokioIo::new(upgraded), pause);
            let socket = WebSocketStream::from_raw_socket(io, Role::Server, Some(config)).await;
            session(socket).await;
        });
        let mut r = Response::new(Body::empty());
        if let Some(key) = self.key {
            // HTTP/1.1 (RFC 6455 §4.2.2). Over HTTP/2 (RFC 8441 §5) a 200 accepts.
            *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
            let h = r.headers_mut();
            h.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
            h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
            // Base64: always a valid header value.
            if let Ok(accept) = HeaderValue::try_from(derive_accept_key(key.as_bytes())) {
                h.insert(header::SEC_WEBSOCKET_ACCEPT, accept);
            }
        }
        r
    }
}
