//! # jelly-server
//!
//! The jellyfish stream server. Publishers send RDF items (one item is one Jelly
//! frame: a graph, a dataset, or a batch of statements); the server appends them to a
//! durable per-topic log and serves them to subscribers live or from any offset.
//!
//! Layers, lowest first:
//! - [`item`]: what the log stores — a self-contained Jelly frame plus metadata.
//! - [`log`]: the [`log::Log`] trait and its implementations (in-memory, file).
//!
//! The design is written down in `docs/server-design.md`.

pub mod item;
pub mod log;
