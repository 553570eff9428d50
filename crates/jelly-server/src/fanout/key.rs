//! What makes two subscriptions share their bytes: the [`GroupKey`].

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use crate::compress::Encoding;
use crate::deliver::OutFormat;
use crate::filter::ItemFilter;

/// How a group's output is cut and wrapped for its subscribers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Framing {
    /// One HTTP body: delimited Jelly frames or text, back to back, compressed as one
    /// `Content-Encoding` stream (independent blocks stitched per subscriber).
    Stream,
    /// Server-sent events, one per item (Jelly events keep their options row), in one
    /// HTTP body like [`Framing::Stream`].
    Sse,
    /// One message per item (WebSocket): bare Jelly frames or text.
    Messages,
    /// gRPC length-prefixed `RdfStreamFrame` messages, built once with their 5-byte
    /// prefix; with a `grpc-encoding`, each message is compressed once.
    Grpc,
}

impl Framing {
    /// Jelly frames carry a length prefix (the HTTP stream).
    pub fn delimited(self) -> bool {
        self == Framing::Stream
    }

    /// Text items start with a `# offset N` comment line
    /// ([`crate::deliver::Delivery::with_offset_comments`]): everywhere but SSE, whose
    /// events carry the offset as their id (and gRPC, which sends only Jelly).
    pub fn marks_text_offsets(self) -> bool {
        matches!(self, Framing::Stream | Framing::Messages)
    }

    /// Short name (subscriber kinds in metrics).
    pub fn name(self) -> &'static str {
        match self {
            Framing::Stream => "stream",
            Framing::Sse => "sse",
            Framing::Messages => "ws",
            Framing::Grpc => "grpc",
        }
    }
}

/// Everything that decides the bytes of a subscription after its first item: equal
/// keys get the same bytes, encoded (and compressed) once.
#[derive(Clone)]
pub struct GroupKey {
    pub topic: String,
    pub format: OutFormat,
    pub framing: Framing,
    /// Items that fail the filter are left out (the group still moves past them).
    pub filter: Option<Arc<ItemFilter>>,
    /// `Content-Encoding` ([`Framing::Stream`], [`Framing::Sse`]) or `grpc-encoding`
    /// ([`Framing::Grpc`]); identity for WebSocket.
    pub encoding: Encoding,
    /// Items are gathered for this long before a block is written (0: every read).
    pub window_ms: u64,
}

impl GroupKey {
    /// The key of unfiltered, uncompressed output without a window.
    pub fn new(topic: &str, format: OutFormat, framing: Framing) -> GroupKey {
        GroupKey {
            topic: topic.to_string(),
            format,
            framing,
            filter: None,
            encoding: Encoding::Identity,
            window_ms: 0,
        }
    }

    fn filter_key(&self) -> Option<&str> {
        self.filter.as_deref().map(ItemFilter::key)
    }
}

impl PartialEq for GroupKey {
    fn eq(&self, o: &Self) -> bool {
        self.topic == o.topic
            && self.format == o.format
            && self.framing == o.framing
            && self.filter_key() == o.filter_key()
            && self.encoding == o.encoding
            && self.window_ms == o.window_ms
    }
}

impl Eq for GroupKey {}

impl Hash for GroupKey {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.topic.hash(h);
        self.format.name().hash(h);
        self.framing.hash(h);
        self.filter_key().hash(h);
        self.encoding.hash(h);
        self.window_ms.hash(h);
    }
}

impl std::fmt::Debug for GroupKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupKey")
            .field("topic", &self.topic)
            .field("format", &self.format.name())
            .field("framing", &self.framing)
            .field("filter", &self.filter_key())
            .field("encoding", &self.encoding)
            .field("window_ms", &self.window_ms)
            .finish()
    }
}
