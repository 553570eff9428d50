//! Starting and stopping the server.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::serve::ListenerExt as _;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::ServerConfig;
use crate::http::{AppState, Shared, router};
use crate::metrics::Metrics;
use crate::topic::Registry;

/// A running server.
pub struct Server {
    addr: SocketAddr,
    state: AppState,
    shutdown: watch::Sender<bool>,
    task: JoinHandle<io::Result<()>>,
    /// The mirror tasks ([`crate::mirror`]).
    mirrors: Vec<JoinHandle<()>>,
}

impl Server {
    /// Opens the topics (recovering file logs), binds `config.listen`, starts
    /// serving in the background and starts the mirrors.
    pub async fn start(config: ServerConfig) -> io::Result<Server> {
        config
            .check()
            .map_err(|m| io::Error::new(io::ErrorKind::InvalidInput, m))?;
        let c = config.clone();
        let topics = tokio::task::spawn_blocking(move || Registry::open(&c))
            .await
            .map_err(io::Error::other)?
            .map_err(io::Error::other)?;
        let listener = tokio::net::TcpListener::bind(config.listen).await?;
        let addr = listener.local_addr()?;
        let (tx, rx) = watch::channel(false);
        let state: AppState = Arc::new(Shared {
            topics,
            config,
            metrics: Arc::new(Metrics::default()),
            shutdown: rx.clone(),
        });
        let app = router(state.clone());
        let mut stop = rx;
        let task = tokio::spawn(async move {
            // No Nagle: small writes (HTTP/2 window updates, one small item) must leave
            // at once, not wait for the peer's delayed ACK.
            let listener = listener.tap_io(|tcp| {
                if let Err(e) = tcp.set_nodelay(true) {
                    tracing::debug!(error = %e, "cannot set TCP_NODELAY");
                }
            });
            axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stop.wait_for(|s| *s).await;
                })
                .await
        });
        tracing::info!(%addr, "listening");
        let mut mirrors = Vec::new();
        if !state.config.mirrors.is_empty() {
            let client = crate::mirror::client().map_err(io::Error::other)?;
            for m in &state.config.mirrors {
                mirrors.extend(crate::mirror::spawn(
                    state.clone(),
                    m.clone(),
                    client.clone(),
                    tx.subscribe(),
                ));
            }
        }
        Ok(Server {
            addr,
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

    /// `http://<addr>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
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

/// Completes on SIGINT (Ctrl-C) or SIGTERM.
pub async fn termination_signal() {
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
