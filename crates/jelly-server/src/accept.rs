//! The accept loop: binds the listener (optionally with `SO_REUSEPORT`), applies the
//! per-address connection limit, runs the TLS handshake when configured, and serves
//! each connection with hyper (HTTP/1.1 and HTTP/2, upgrades for WebSocket).
//!
//! Slow clients: a connection must deliver its first request's head within
//! [`Timeouts::header_read`], and on HTTP/1 every later one too (hyper's header read
//! timeout, which also bounds an idle keep-alive connection); otherwise it is closed
//! without an answer. A connection with no request open (its answers' bodies over)
//! for that long is closed too, gracefully: for HTTP/2, which hyper leaves without an
//! idle limit, this is the only bound. HTTP/2 connections are pinged when quiet
//! ([`Timeouts::http2_keepalive`]) and closed when the peer does not answer; every
//! connection also gets TCP keepalive probes ([`Timeouts::tcp_keepalive`]), which
//! drop a peer that vanished without closing even on a quiet HTTP/1 stream, and a
//! bound on unacknowledged data ([`Timeouts::send`]) for one that vanished in the
//! middle of a busy stream. Bodies are the handlers' business (`http::publish`
//! bounds pauses in an atomic publish).
//!
//! Shutdown: when the stop signal turns true, the listener closes, every connection
//! is told to finish gracefully (HTTP/1: after the request in flight; HTTP/2: GOAWAY),
//! and [`serve`] returns once all of them have ended. Live subscriptions end by
//! themselves on the same signal (see `deliver::Follow`).

use std::io;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

use crate::conn_limit::{ConnLimiter, ConnPermit};
use crate::exec::StreamExecutor;
use crate::metrics::Metrics;

/// Pending connections the kernel queues for the listener (capped by
/// `net.core.somaxconn`). Thousands of subscribers reconnecting at once overflowed
/// 1024 in the fan-out benchmark, costing each dropped SYN a retransmit (1 s and more).
const BACKLOG: u32 = 4096;
/// Longest TLS handshake; a client that takes longer is dropped.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest wait for the answer to an HTTP/2 keep-alive PING (hyper's default): long
/// enough for a loaded peer on a slow link, short enough to free a dead peer's
/// resources within a minute or two.
const HTTP2_PING_TIMEOUT: Duration = Duration::from_secs(20);

/// The largest HTTP/2 header list a request may send (h2's default is 16 KiB, which
/// item metadata alone may fill).
const HTTP2_MAX_HEADER_LIST_BYTES: u32 = 64 << 10;

/// Binds `addr`; with `reuse_port`, other sockets (other servers) may bind it too
/// and the kernel spreads the connections among them.
pub fn bind(addr: SocketAddr, reuse_port: bool) -> io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    // As tokio's TcpListener::bind: a restarted server can bind over TIME_WAIT.
    #[cfg(unix)]
    socket.set_reuseaddr(true)?;
    if reuse_port {
        set_reuse_port(&socket)?;
    }
    socket.bind(addr)?;
    socket.listen(BACKLOG)
}

#[cfg(all(
    unix,
    not(any(target_os = "solaris", target_os = "illumos", target_os = "cygwin"))
))]
fn set_reuse_port(socket: &TcpSocket) -> io::Result<()> {
    socket.set_reuseport(true)
}

#[cfg(not(all(
    unix,
    not(any(target_os = "solaris", target_os = "illumos", target_os = "cygwin"))
)))]
fn set_reuse_port(_socket: &TcpSocket) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "reuse_port (SO_REUSEPORT) is not available on this platform",
    ))
}

/// What every connection needs.
pub struct Acceptor {
    pub app: Router,
    pub tls: Option<TlsAcceptor>,
    pub limiter: Arc<ConnLimiter>,
    pub metrics: Arc<Metrics>,
    pub timeouts: Timeouts,
    pub http2: Http2Limits,
}

/// Connection timeouts (`None`: no limit); see the module docs.
#[derive(Debug, Clone, Copy, Default)]
pub struct Timeouts {
    /// The first request's head on any connection, and every request head on HTTP/1.
    pub header_read: Option<Duration>,
    /// HTTP/2: PING a connection quiet for this long.
    pub http2_keepalive: Option<Duration>,
    /// TCP keepalive probes on a connection quiet for this long (every protocol).
    pub tcp_keepalive: Option<Duration>,
    /// Linux: sent data unacknowledged this long drops the connection
    /// (`TCP_USER_TIMEOUT`, see `set_send_timeout`).
    pub send: Option<Duration>,
    /// After shutdown begins, a connection still open this long is closed.
    pub shutdown_grace: Option<Duration>,
}

/// Connection limits of HTTP/2 (see `ServerConfig::http2_max_concurrent_streams`).
#[derive(Debug, Clone, Copy)]
pub struct Http2Limits {
    /// Streams open at once on one connection.
    pub max_concurrent_streams: u32,
}

/// Turns on TCP keepalive: probes after `idle` of quiet, 4 of them `idle / 4` apart
/// (at least 1 s), so a vanished peer is dropped after about twice `idle`
/// ([`crate::config::keepalive_give_up_ms`]).
fn set_tcp_keepalive(tcp: &TcpStream, idle: Duration) -> io::Result<()> {
    let interval = (idle / 4).max(Duration::from_secs(1));
    let ka = socket2::TcpKeepalive::new()
        .with_time(idle)
        .with_interval(interval)
        .with_retries(4);
    socket2::SockRef::from(tcp).set_tcp_keepalive(&ka)
}

/// Bounds how long sent data may stay unacknowledged (`TCP_USER_TIMEOUT`, Linux only;
/// elsewhere nothing is set).
///
/// Keepalive probes are only sent while nothing is in flight, and a peer that
/// vanished in the middle of a stream leaves sent data unacknowledged: without this,
/// the kernel retransmits for about 15 minutes before it gives up, holding the
/// subscription and its slot of `max_connections_per_ip`. Linux applies it to
/// zero-window probes too: a peer that reads nothing for that long (its receive
/// buffer full) is dropped as well, as a send timeout would (nginx's
/// `send_timeout`); a subscriber resumes from its offset, and the log, not the
/// connection, holds what it has not read. With keepalive on, Linux also ends
/// unanswered probing once this much time has passed, when that is sooner.
#[cfg_attr(
    not(any(target_os = "linux", target_os = "android")),
    allow(unused_variables)
)]
fn set_send_timeout(tcp: &TcpStream, timeout: Duration) -> io::Result<()> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    socket2::SockRef::from(tcp).set_tcp_user_timeout(Some(timeout))?;
    Ok(())
}

/// Accepts and serves connections until `stop` turns true, then waits for the open
/// connections to finish.
pub async fn serve(
    listener: TcpListener,
    acceptor: Acceptor,
    mut stop: watch::Receiver<bool>,
) -> io::Result<()> {
    let acceptor = Arc::new(acceptor);
    // Each connection holds a receiver; `closed()` completes when all are gone.
    let (all_closed_tx, all_closed_rx) = watch::channel(());
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = stop.wait_for(|s| *s) => break,
        };
        let (tcp, peer) = match accepted {
            Ok(a) => {
                crate::runtime::note_activity();
                a
            }
            Err(e) if is_connection_error(&e) => continue,
            Err(e) => {
                // Out of file descriptors, most likely: wait for some to be freed
                // rather than spin.
                tracing::error!(error = %e, "accept failed");
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(1)) => continue,
                    _ = stop.wait_for(|s| *s) => break,
                }
            }
        };
        let m = &acceptor.metrics;
        let Some(permit) = acceptor.limiter.try_acquire(peer.ip()) else {
            m.connections_refused.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(%peer, "connection refused: too many from this address");
            drop(tcp);
            continue;
        };
        m.connections_accepted.fetch_add(1, Ordering::Relaxed);
        // No Nagle: small writes (HTTP/2 window updates, one small item) must leave
        // at once, not wait for the peer's delayed ACK.
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
        }
        if let Some(idle) = acceptor.timeouts.tcp_keepalive
            && let Err(e) = set_tcp_keepalive(&tcp, idle)
        {
            tracing::debug!(error = %e, "cannot set TCP keepalive");
        }
        if let Some(timeout) = acceptor.timeouts.send
            && let Err(e) = set_send_timeout(&tcp, timeout)
        {
            tracing::debug!(error = %e, "cannot set TCP_USER_TIMEOUT");
        }
        let conn = Connection {
            acceptor: acceptor.clone(),
            peer,
            hold: Arc::new(ConnectionHold {
                _permit: permit,
                _open: OpenGauge::new(acceptor.metrics.clone()),
                _closed: all_closed_rx.clone(),
                publishes: AtomicUsize::new(0),
                open_requests: AtomicUsize::new(0),
                became_idle: tokio::sync::Notify::new(),
            }),
        };
        tokio::spawn(conn.run(tcp, stop.clone()));
    }
    drop(listener);
    drop(all_closed_rx);
    all_closed_tx.closed().await;
    Ok(())
}

/// Errors of one connection that leave the listener fine.
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// Counts a connection in the open-connections gauge while it lives.
struct OpenGauge(Arc<Metrics>);

impl OpenGauge {
    fn new(m: Arc<Metrics>) -> OpenGauge {
        m.connections_open.fetch_add(1, Ordering::Relaxed);
        OpenGauge(m)
    }
}

impl Drop for OpenGauge {
    fn drop(&mut self) {
        self.0.connections_open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Answers a plain HTTP request made to the TLS listener with a 400 that says so,
/// then closes; the error is what the handshake failure is logged as.
async fn plain_http_to_tls(mut tcp: TcpStream) -> std::io::Error {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    // The request head, read so that closing does not reset the connection under the
    // answer (a small request has arrived by now; a larger one is cut short anyway).
    let mut head = [0u8; 8192];
    let _ = tokio::time::timeout(Duration::from_millis(50), tcp.read(&mut head)).await;
    const BODY: &str = "{\"error\":\"this port speaks TLS: use https://\"}";
    let answer = format!(
        "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{BODY}",
        BODY.len()
    );
    let _ = tcp.write_all(answer.as_bytes()).await;
    let _ = tcp.shutdown().await;
    std::io::Error::other("a plain HTTP request on the TLS listener")
}

/// What an accepted connection holds while it is open: its place in the per-address
/// limit, its count in the open-connections gauge, and the shutdown's wait for it.
/// Shared: a connection upgraded to a WebSocket is no longer served by hyper, so the
/// WebSocket's task takes a share (from the request's extensions, [`ConnectionHeld`])
/// and the connection counts until that ends too.
struct ConnectionHold {
    _permit: ConnPermit,
    _open: OpenGauge,
    _closed: watch::Receiver<()>,
    /// Publishes in progress on the connection (see [`ConnectionHeld::try_publish`]).
    publishes: AtomicUsize,
    /// Requests whose answer is not over yet (see [`RequestOpen`]).
    open_requests: AtomicUsize,
    /// Told when `open_requests` falls to 0, to start the idle deadline.
    became_idle: tokio::sync::Notify,
}

/// A share of an accepted connection's `ConnectionHold`, in every request's
/// extensions; whoever keeps the socket after the request (a WebSocket upgrade) keeps
/// this as long.
#[derive(Clone)]
pub struct ConnectionHeld(Arc<ConnectionHold>);

impl ConnectionHeld {
    /// A place among the publishes in progress on this connection, unless `max` of
    /// them (0: no limit) already hold one. Each publish buffers up to a message or a
    /// body, and HTTP/2 runs up to `http2_max_concurrent_streams` (200) requests at
    /// once on one connection, so without this one connection could hold 200 times
    /// what an HTTP/1 connection can.
    pub fn try_publish(&self, max: usize) -> Option<PublishSlot> {
        let n = &self.0.publishes;
        let mut now = n.load(Ordering::Relaxed);
        loop {
            if max != 0 && now >= max {
                return None;
            }
            match n.compare_exchange_weak(now, now + 1, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Some(PublishSlot(self.0.clone())),
                Err(seen) => now = seen,
            }
        }
    }
}

/// A publish's place on its connection ([`ConnectionHeld::try_publish`]), given back
/// when dropped. It also keeps the connection counted, as [`ConnectionHeld`] does.
pub struct PublishSlot(Arc<ConnectionHold>);

impl Drop for PublishSlot {
    fn drop(&mut self) {
        self.0.publishes.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One accepted connection and what it holds until it ends.
struct Connection {
    acceptor: Arc<Acceptor>,
    peer: SocketAddr,
    hold: Arc<ConnectionHold>,
}

impl Connection {
    async fn run(self, tcp: TcpStream, mut stop: watch::Receiver<bool>) {
        let Some(tls) = self.acceptor.tls.clone() else {
            return self.serve_http(tcp, stop).await;
        };
        let handshake = tokio::select! {
            r = tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, async {
                // A TLS client opens with a handshake record (0x16). A letter is a plain
                // HTTP request head: answer it in plain HTTP, as a wrong scheme, rather
                // than with a TLS alert its client cannot show.
                let mut first = [0u8; 1];
                if matches!(tcp.peek(&mut first).await, Ok(1) if first[0].is_ascii_uppercase()) {
                    return Err(plain_http_to_tls(tcp).await);
                }
                tls.accept(tcp).await
            }) => r,
            _ = stop.wait_for(|s| *s) => return,
        };
        match handshake {
            Ok(Ok(stream)) => self.serve_http(stream, stop).await,
            Ok(Err(e)) => {
                self.acceptor
                    .metrics
                    .tls_handshakes_failed
                    .fetch_add(1, Ordering::Relaxed);
                tracing::debug!(peer = %self.peer, error = %e, "TLS handshake failed");
            }
            Err(_) => {
                self.acceptor
                    .metrics
                    .tls_handshakes_failed
                    .fetch_add(1, Ordering::Relaxed);
                tracing::debug!(peer = %self.peer, "TLS handshake timed out");
            }
        }
    }

    async fn serve_http<I>(&self, io: I, mut stop: watch::Receiver<bool>)
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let timeouts = self.acceptor.timeouts;
        let requested = Arc::new(AtomicBool::new(false));
        let service = FirstRequest {
            inner: TowerToHyperService::new(self.acceptor.app.clone()),
            requested: requested.clone(),
            held: ConnectionHeld(self.hold.clone()),
        };
        // HTTP/2 streams run as tasks of their own; see `exec` for why not plain
        // `tokio::spawn`.
        let mut builder = Builder::new(StreamExecutor);
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(timeouts.header_read);
        builder
            .http2()
            // The extended CONNECT protocol: WebSocket over HTTP/2 (RFC 8441).
            .enable_connect_protocol()
            .timer(TokioTimer::new())
            .keep_alive_interval(timeouts.http2_keepalive)
            .keep_alive_timeout(HTTP2_PING_TIMEOUT)
            .max_concurrent_streams(self.acceptor.http2.max_concurrent_streams)
            // Above the 16 KiB of item metadata a request may carry, so that more is
            // refused by the server's own check, with its reason (gRPC
            // `INVALID_ARGUMENT`, HTTP 431 with JSON), not by h2 (a bare 431 or a reset).
            .max_header_list_size(HTTP2_MAX_HEADER_LIST_BYTES);
        let mut conn = pin!(builder.serve_connection_with_upgrades(TokioIo::new(io), service));
        // hyper's HTTP/1 header timeout only starts once the protocol is known, and
        // the auto builder waits for as many bytes as it needs to tell HTTP/1 from
        // HTTP/2 without a limit; an HTTP/2 client may also never open a stream. So
        // the first request's head has a deadline of its own.
        let first = tokio::time::sleep(timeouts.header_read.unwrap_or(Duration::MAX));
        let mut first = pin!(first);
        let mut awaiting_first = timeouts.header_read.is_some();
        let mut stopping = false;
        // Armed when shutdown begins: the end of the connection's grace.
        let grace = tokio::time::sleep(Duration::MAX);
        let mut grace = pin!(grace);
        // Armed when the last open request ends: an HTTP/2 connection idle (no stream
        // open) for the header timeout is closed as an idle HTTP/1 keep-alive
        // connection is (hyper has no idle limit for HTTP/2), with a GOAWAY, so that
        // it cannot hold its descriptor for ever by answering pings.
        let idle = tokio::time::sleep(Duration::MAX);
        let mut idle = pin!(idle);
        let mut idle_armed = false;
        let mut idle_closing = false;
        loop {
            let watch_idle = timeouts.header_read.is_some() && !stopping && !idle_closing;
            tokio::select! {
                () = self.hold.became_idle.notified(), if watch_idle => {
                    if let Some(t) = timeouts.header_read
                        && self.hold.open_requests.load(Ordering::Acquire) == 0
                    {
                        idle.as_mut().reset(tokio::time::Instant::now() + t);
                        idle_armed = true;
                    }
                }
                () = idle.as_mut(), if idle_armed && watch_idle => {
                    idle_armed = false;
                    if self.hold.open_requests.load(Ordering::Acquire) == 0 {
                        tracing::debug!(peer = %self.peer, "idle for the header read timeout: closing");
                        idle_closing = true;
                        conn.as_mut().graceful_shutdown();
                    }
                }
                r = conn.as_mut() => {
                    if let Err(e) = r {
                        if is_header_timeout(e.as_ref()) {
                            self.timed_out();
                        }
                        tracing::trace!(peer = %self.peer, error = %e, "connection ended with an error");
                    }
                    break;
                }
                _ = stop.wait_for(|s| *s), if !stopping => {
                    stopping = true;
                    conn.as_mut().graceful_shutdown();
                    if let Some(g) = timeouts.shutdown_grace {
                        grace.as_mut().reset(tokio::time::Instant::now() + g);
                    }
                }
                () = grace.as_mut(), if stopping && timeouts.shutdown_grace.is_some() => {
                    tracing::debug!(peer = %self.peer, "shutdown grace over: closing the connection");
                    break;
                }
                () = first.as_mut(), if awaiting_first => {
                    awaiting_first = false;
                    if !requested.load(Ordering::Relaxed) {
                        self.timed_out();
                        tracing::debug!(peer = %self.peer, "no request within the header read timeout: closing");
                        break;
                    }
                }
            }
        }
    }

    /// Counts a connection closed for being too slow with a request's head.
    fn timed_out(&self) {
        self.acceptor
            .metrics
            .connections_timed_out
            .fetch_add(1, Ordering::Relaxed);
    }
}

/// Whether a connection error is hyper's HTTP/1 header read timeout.
fn is_header_timeout(e: &(dyn std::error::Error + 'static)) -> bool {
    e.downcast_ref::<hyper::Error>()
        .is_some_and(hyper::Error::is_timeout)
}

/// The connection's service, noting that a request has arrived (for the first
/// request's deadline in `serve_http`).
struct FirstRequest<S> {
    inner: S,
    requested: Arc<AtomicBool>,
    /// Given to every request (see [`ConnectionHeld`]).
    held: ConnectionHeld,
}

impl<S, B, RB> hyper::service::Service<hyper::Request<B>> for FirstRequest<S>
where
    S: hyper::service::Service<hyper::Request<B>, Response = hyper::Response<RB>>,
    S::Future: Send + 'static,
{
    type Response = hyper::Response<OpenBody<RB>>;
    type Error = S::Error;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send>,
    >;

    fn call(&self, mut req: hyper::Request<B>) -> Self::Future {
        self.requested.store(true, Ordering::Relaxed);
        req.extensions_mut().insert(self.held.clone());
        // Counted from here until the answer's body is over (or the request is
        // dropped unanswered), so that a connection is idle only between requests.
        let open = RequestOpen::new(&self.held.0);
        let answer = self.inner.call(req);
        Box::pin(async move {
            let res = answer.await?;
            Ok(res.map(|body| OpenBody { body, _open: open }))
        })
    }
}

/// A request in progress on its connection: counted in
/// [`ConnectionHold::open_requests`] until dropped (with the answer's body).
struct RequestOpen(Arc<ConnectionHold>);

impl RequestOpen {
    fn new(hold: &Arc<ConnectionHold>) -> RequestOpen {
        hold.open_requests.fetch_add(1, Ordering::AcqRel);
        RequestOpen(hold.clone())
    }
}

impl Drop for RequestOpen {
    fn drop(&mut self) {
        if self.0.open_requests.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.became_idle.notify_one();
        }
    }
}

/// An answer's body, which keeps its request counted as open until it is over.
pub struct OpenBody<B> {
    body: B,
    _open: RequestOpen,
}

impl<B: http_body::Body + Unpin> http_body::Body for OpenBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keepalive and the send timeout are set apart: each as configured, and by
    /// default (`send_timeout_ms` not given) a peer gone quiet and one gone in the
    /// middle of a stream are both dropped after about twice `idle`.
    #[tokio::test]
    async fn keepalive_and_send_timeout_are_set_as_configured() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = || async {
            let client = tokio::net::TcpStream::connect(addr).await.unwrap();
            (client, listener.accept().await.unwrap().0)
        };
        let (_client, server) = accepted().await;
        let c = crate::ServerConfig::default();
        set_tcp_keepalive(&server, c.tcp_keepalive().unwrap()).unwrap();
        set_send_timeout(&server, c.send_timeout().unwrap()).unwrap();
        let sock = socket2::SockRef::from(&server);
        assert!(sock.keepalive().unwrap());
        assert_eq!(sock.tcp_keepalive_time().unwrap(), Duration::from_secs(60));
        assert_eq!(
            sock.tcp_keepalive_interval().unwrap(),
            Duration::from_secs(15)
        );
        #[cfg(target_os = "linux")]
        assert_eq!(
            sock.tcp_user_timeout().unwrap(),
            Some(Duration::from_secs(120))
        );
        // A send timeout of its own, without keepalive.
        let (_client, server) = accepted().await;
        set_send_timeout(&server, Duration::from_secs(7)).unwrap();
        let sock = socket2::SockRef::from(&server);
        assert!(!sock.keepalive().unwrap());
        #[cfg(target_os = "linux")]
        assert_eq!(
            sock.tcp_user_timeout().unwrap(),
            Some(Duration::from_secs(7))
        );
        // Keepalive without a send timeout.
        let (_client, server) = accepted().await;
        set_tcp_keepalive(&server, Duration::from_secs(60)).unwrap();
        #[cfg(target_os = "linux")]
        assert_eq!(
            socket2::SockRef::from(&server).tcp_user_timeout().unwrap(),
            None
        );
    }
}
