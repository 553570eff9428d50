//! Items: the unit of publishing, storage and delivery.

use bytes::Bytes;

/// An item to append: the server assigns its offset and timestamp.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewItem {
    /// A self-contained Jelly-RDF stream holding exactly one frame: an options row,
    /// the lookup entries the frame needs (tables start empty) and its statement rows.
    /// Any item can therefore be decoded on its own, whatever came before it.
    pub frame: Bytes,
    /// Number of statements in the frame (kept for metrics and page sizing).
    pub statements: u32,
    /// Who published it (a client-chosen source id; may be empty).
    pub source: String,
    /// Headers the publisher attached (small key/value pairs).
    pub headers: Vec<(String, String)>,
}

/// A stored item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// Position in the topic's log, starting at 0, without gaps.
    pub offset: u64,
    /// Server time of the append, in milliseconds since the Unix epoch.
    pub timestamp_ms: u64,
    pub frame: Bytes,
    pub statements: u32,
    pub source: String,
    pub headers: Vec<(String, String)>,
}

impl NewItem {
    /// Bytes the item takes, frame and metadata (see [`Item::held_bytes`]).
    pub fn held_bytes(&self) -> usize {
        self.frame.len() + metadata_bytes(&self.source, &self.headers)
    }
}

impl Item {
    /// Bytes this item holds in memory beyond its fixed fields: its frame and its
    /// metadata (a publisher's source and headers are stored with every item, so
    /// caches that count frames alone could hold far more than they say).
    pub fn held_bytes(&self) -> usize {
        self.frame.len() + metadata_bytes(&self.source, &self.headers)
    }
}

/// Bytes of an item's metadata: its source and its headers, names and values.
///
/// ```
/// let headers = vec![("k".to_string(), "vv".to_string())];
/// assert_eq!(jelly_server::item::metadata_bytes("s1", &headers), 5);
/// ```
pub fn metadata_bytes(source: &str, headers: &[(String, String)]) -> usize {
    source.len()
        + headers
            .iter()
            .map(|(k, v)| k.len() + v.len())
            .sum::<usize>()
}
