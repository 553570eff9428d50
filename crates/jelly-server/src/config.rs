//! Server configuration: embedded defaults, optionally overridden by a TOML file and
//! then by command-line flags.
//!
//! ```toml
//! listen = "127.0.0.1:8686"
//! data = "./data"
//! log = "file"              # or "memory" (lost on restart)
//! durability = "fsync"      # fsync | interval:<ms> | none
//! segment_bytes = 67108864
//! max_body_bytes = 67108864
//! max_item_bytes = 16777216
//!
//! [topic_defaults]
//! physical = "quads"        # triples | quads
//! logical = "datasets"      # flat-triples, flat-quads, graphs, datasets, named-graphs, …
//! retention_items = 1000000
//! ```

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;

use crate::topic::TopicOptions;

/// Which log implementation backs topics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum LogKind {
    /// Durable segment files under the data directory (the default).
    #[default]
    File,
    /// In memory: lost on restart (tests, demos).
    Memory,
}

/// Everything `jelly serve` can be told.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Address to listen on (port 0 picks a free port).
    pub listen: SocketAddr,
    /// Directory of the durable logs (one sub-directory per topic).
    pub data: PathBuf,
    /// Log implementation of the topics.
    pub log: LogKind,
    /// File log: `fsync` (default), `interval:<ms>` or `none`.
    pub durability: String,
    /// File log: size at which a new segment starts.
    pub segment_bytes: u64,
    /// Largest accepted request body, in bytes.
    pub max_body_bytes: usize,
    /// Largest accepted item (its self-contained Jelly frame), in bytes.
    pub max_item_bytes: usize,
    /// Create a topic on its first publish (otherwise `PUT /topics/{name}` first).
    pub auto_create_topics: bool,
    /// Options of topics created without explicit options.
    pub topic_defaults: TopicOptions,
    /// Items per read while delivering (bounds the memory of one subscription step).
    pub delivery_batch_items: usize,
    /// Seconds between SSE keep-alive comments.
    pub sse_keepalive_secs: u64,
    /// Fan-out: most blocks a group keeps for subscribers that lag behind it.
    pub fanout_ring_blocks: usize,
    /// Fan-out: most bytes of blocks a group keeps (the newest block is always kept).
    pub fanout_ring_bytes: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 8686)),
            data: PathBuf::from("./data"),
            log: LogKind::File,
            durability: "fsync".into(),
            segment_bytes: 64 << 20,
            max_body_bytes: 64 << 20,
            max_item_bytes: 16 << 20,
            auto_create_topics: true,
            topic_defaults: TopicOptions::default(),
            delivery_batch_items: 256,
            sse_keepalive_secs: 15,
            fanout_ring_blocks: 256,
            fanout_ring_bytes: 4 << 20,
        }
    }
}

/// A configuration file that could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parse { path: String, message: String },
}

impl ServerConfig {
    /// A configuration for tests: memory log, port 0 on loopback.
    pub fn ephemeral() -> Self {
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            log: LogKind::Memory,
            ..Default::default()
        }
    }

    /// Parses TOML text (missing keys keep their defaults).
    pub fn from_toml(text: &str, path: &str) -> Result<Self, ConfigError> {
        let c: ServerConfig = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_string(),
            message: e.to_string(),
        })?;
        c.durability().map_err(|m| ConfigError::Parse {
            path: path.to_string(),
            message: m,
        })?;
        Ok(c)
    }

    /// The file log's durability policy.
    pub fn durability(&self) -> Result<crate::log::Durability, String> {
        self.durability.parse()
    }

    /// Reads a TOML file.
    pub fn from_file(path: &std::path::Path) -> Result<Self, ConfigError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: p.clone(),
            source,
        })?;
        Self::from_toml(&text, &p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_overrides_defaults() {
        let c = ServerConfig::from_toml(
            "listen = \"0.0.0.0:9000\"\nmax_body_bytes = 10\n[topic_defaults]\nphysical = \"triples\"\nretention_items = 5\n",
            "x.toml",
        )
        .unwrap();
        assert_eq!(c.listen.port(), 9000);
        assert_eq!(c.max_body_bytes, 10);
        assert_eq!(c.max_item_bytes, 16 << 20);
        assert_eq!(c.topic_defaults.physical, crate::topic::Physical::Triples);
        assert_eq!(c.topic_defaults.retention_items, 5);
        assert!(ServerConfig::from_toml("nope = 1", "x.toml").is_err());
    }
}
