//! # jelly-server
//!
//! The jellyfish stream server. Publishers send RDF items (one item is one Jelly
//! frame: a graph, a dataset, or a batch of statements); the server appends them to a
//! durable per-topic log and serves them to subscribers live or from any offset.
//!
//! Layers, lowest first:
//! - [`item`]: what the log stores — a self-contained Jelly frame plus metadata.
//! - [`log`]: the [`log::Log`] trait and its implementations (in-memory, file).
//! - [`topic`]: the registry of named topics, their options, counters and subscribers.
//! - [`ingest`]: a publish body → self-contained items (decoded and checked whole first);
//!   `JellyIngest` for long-lived publisher streams (streaming POST, WebSocket);
//!   [`publish_memory`] bounds what atomic publishes in progress hold, server-wide.
//! - [`deliver`]: stored items → one subscriber's stream (one encoder per subscription).
//! - [`filter`]: per-subscription item filters (source, IRI prefix, pattern, SPARQL ASK).
//! - [`compress`]: content codings, with batches compressed once and shared by all
//!   subscribers (stitched per subscriber into one valid stream).
//! - [`fanout`]: live subscriptions that want the same bytes share them: each batch is
//!   written and compressed once per group ([`compress`], [`filter`]).
//! - [`http`]: the axum routes (HTTP, SSE, WebSocket); [`server`] starts and stops them;
//!   [`config`], [`metrics`].
//! - [`mirror`]: repeaters — a topic copied from another jellyfish server, same offsets.
//! - Security: [`auth`] (bearer tokens, rights per topic), [`tls`] (rustls),
//!   [`conn_limit`] (connections per client address); [`accept`] is the accept loop
//!   that applies them. [`exec`] runs hyper's HTTP/2 stream tasks.
//! - [`demo`]: the `jelly serve --demo` publisher.
//!
//! The design is written down in `docs/server-design.md`, the API in `docs/http-api.md`.

pub mod accept;
pub mod auth;
pub mod compress;
pub mod config;
pub mod conn_limit;
pub mod deliver;
pub mod demo;
pub mod error_chain;
pub mod exec;
pub mod fanout;
pub mod filter;
pub mod grpc;
pub mod http;
pub mod ingest;
pub mod item;
pub mod log;
pub mod metrics;
pub mod mirror;
pub(crate) mod pause_timer;
pub mod position;
pub mod publish_memory;
pub mod runtime;
pub mod server;
pub mod tls;
pub mod topic;

pub use config::ServerConfig;
pub use server::Server;
