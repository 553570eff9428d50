//! Starting and stopping the server.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use std::time::Duration;

use crate::accept::{self, Acceptor};
use crate::auth::Auth;
use crate::config::ServerConfig;
use crate::conn_limit::ConnLimiter;
use crate::fanout::{Fanout, RingLimits};
use crate::http::{AppState, Shared, router};
use crate::log::ReadLimits;
use crate::metrics::Metrics;
use crate::topic::Registry;

/// How often the memory log's expired items are dropped on every topic (see
/// [`sweep_memory_topics`]).
const MEMORY_SWEEP_INTERVAL: Duration = Duration::from_secs(1);

/// A running server.
pub struct Server {
    addr: SocketAddr,
    /// Serving TLS (the URL is `https://`).
    tls: bool,
    state: AppState,
    shutdown: watch::Sender<bool>,
    task: JoinHandle<io::Result<()>>,
    /// The mirror tasks ([`crate::mirror`]).
    mirrors: Vec<JoinHandle<()>>,
}

impl Server {
    /// Opens the topics (recovering file logs), binds `config.listen`, starts
    /// serving in the background and starts the mirrors. A bad `[auth]`, `[tls]` or
    /// `[[mirror]]` section is an `InvalidInput` error.
    pub async fn start(config: ServerConfig) -> io::Result<Server> {
        // For the mirrors' HTTP clients (and any other in this process).
        crate::tls::install_crypto_provider();
        config
            .check()
            .map_err(|m| io::Error::new(io::ErrorKind::InvalidInput, m))?;
        let invalid =
            |e: &dyn std::fmt::Display| io::Error::new(io::ErrorKind::InvalidInput, e.to_string());
        let auth = match &config.auth {
            Some(a) => Auth::from_config(a).map_err(|e| invalid(&e))?,
            None => Auth::open(),
        };
        let tls = match &config.tls {
            Some(t) => Some(crate::tls::acceptor(t).map_err(|e| invalid(&e))?),
            None => None,
        };
        let cert_validity = config
            .tls
            .as_ref()
            .and_then(crate::tls::certificate_validity);
        if let (Some(t), Some(v)) = (&config.tls, &cert_validity) {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64);
            if let Some(w) = v.warning(now) {
                tracing::warn!("the TLS certificate in {} {w}", t.cert.display());
            }
        }
        // Before anything starts: a bad `ca` file is a configuration error.
        let mirror_clients = config
            .mirrors
            .iter()
            .map(|m| crate::mirror::client(m).map_err(|e| invalid(&e)))
            .collect::<io::Result<Vec<_>>>()?;
        let c = config.clone();
        let topics = tokio::task::spawn_blocking(move || Registry::open(&c))
            .await
            .map_err(io::Error::other)?
            .map_err(io::Error::other)?;
        let listener = accept::bind(config.listen, config.reuse_port)
            .map_err(|e| io::Error::new(e.kind(), format!("listen on {}: {e}", config.listen)))?;
        let addr = listener.local_addr()?;
        let (tx, rx) = watch::channel(false);
        let limiter = ConnLimiter::new(config.max_connections_per_ip);
        let metrics = Arc::new(Metrics::default());
        if let Some(v) = &cert_validity {
            metrics
                .tls_certificate_not_after
                .store(v.not_after, std::sync::atomic::Ordering::Relaxed);
        }
        let fanout = Fanout::new(
            RingLimits {
                max_blocks: config.fanout_ring_blocks.max(1),
                max_bytes: config.fanout_ring_bytes,
            },
            ReadLimits {
                max_items: config.delivery_batch_items.max(1),
                max_bytes: 4 << 20,
            },
            Duration::from_secs(config.sse_keepalive_secs.max(1)),
            rx.clone(),
            metrics.clone(),
        );
        let config_publish_memory = config.publish_memory_bytes();
        let config_max_body = config.max_body_bytes;
        let state: AppState = Arc::new(Shared {
            topics,
            config,
            auth,
            metrics: metrics.clone(),
            fanout,
            shutdown: rx.clone(),
            publish_memory: crate::publish_memory::PublishMemory::new(config_publish_memory),
            large_ingests: tokio::sync::Semaphore::new(crate::publish_memory::large_ingests(
                config_publish_memory,
                config_max_body,
            )),
        });
        let acceptor = Acceptor {
            app: router(state.clone()),
            tls,
            limiter,
            metrics,
            timeouts: accept::Timeouts {
                header_read: state.config.header_read_timeout(),
                http2_keepalive: state.config.http2_keepalive(),
                tcp_keepalive: state.config.tcp_keepalive(),
                send: state.config.send_timeout(),
                shutdown_grace: state.config.shutdown_grace(),
            },
            http2: accept::Http2Limits {
                max_concurrent_streams: state.config.http2_max_concurrent_streams,
            },
        };
        let tls = acceptor.tls.is_some();
        if state.config.log == crate::config::LogKind::Memory {
            tokio::spawn(sweep_memory_topics(state.clone(), rx.clone()));
        }
        let task = tokio::spawn(accept::serve(listener, acceptor, rx));
        tracing::info!(%addr, tls, "listening");
        let mut mirrors = Vec::new();
        for (m, client) in state.config.mirrors.iter().zip(mirror_clients) {
            mirrors.extend(crate::mirror::spawn(
                state.clone(),
                m.clone(),
                client,
                tx.subscribe(),
            ));
        }
        Ok(Server {
            addr,
            tls,
            state,
            shutdown: tx,
            task,
            mirrors,
        })
    }

    /// The address it listens on (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://<addr>`, or `https://<addr>` with TLS.
    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// The shared state (topics, metrics).
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// A receiver that turns true when shutdown begins (for background tasks).
    pub fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    /// Stops accepting connections, ends live subscriptions and mirrors (each
    /// stores what it has received first) and waits for the in-flight requests.
    pub async fn shutdown(self) -> io::Result<()> {
        self.shutdown.send_replace(true);
        for m in self.mirrors {
            if let Err(e) = m.await {
                tracing::error!(error = %e, "mirror task failed");
            }
        }
        match self.task.await {
            Ok(r) => r,
            Err(e) => Err(io::Error::other(e)),
        }
    }

    /// Serves until `signal` completes, then shuts down gracefully.
    pub async fn run_until(self, signal: impl Future<Output = ()>) -> io::Result<()> {
        signal.await;
        tracing::info!("shutting down");
        self.shutdown().await
    }
}

/// Drops the expired items of every memory topic every [`MEMORY_SWEEP_INTERVAL`],
/// until shutdown. A memory log drops them by itself only when it is appended to or
/// read, so an idle topic under `retention_ms` would hold their memory for ever. One
/// task serves every topic; a topic with nothing expired costs one look at its oldest
/// item.
async fn sweep_memory_topics(state: AppState, mut shutdown: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(MEMORY_SWEEP_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => state.topics.drop_expired_items(),
            _ = crate::http::wait_shutdown(&mut shutdown) => return,
        }
    }
}

/// Completes on SIGINT (Ctrl-C) or SIGTERM. SIGHUP, which many servers take as "reload",
/// is caught and logged rather than left to kill the process without a graceful
/// shutdown: this server reads its certificates and tokens only at start.
pub async fn termination_signal() {
    #[cfg(unix)]
    if let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        tokio::spawn(async move {
            while hup.recv().await.is_some() {
                tracing::warn!(
                    "SIGHUP ignored: configuration, certificates and tokens are read at start; restart to reload (SIGTERM stops gracefully)"
                );
            }
        });
    }
    interrupt_or_terminate().await;
}

/// Completes on SIGINT (Ctrl-C) or SIGTERM (for a client that stops cleanly on them).
pub async fn interrupt_or_terminate() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}
