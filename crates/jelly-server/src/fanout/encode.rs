//! Writing a batch of items in a group's format and framing: used once per batch by
//! the group (shared bytes) and by a subscriber reading privately (catch-up).

use bytes::{BufMut as _, Bytes};

use super::key::{Framing, GroupKey};
use crate::compress::{self, Block, Encoding};
use crate::deliver::{Batch, DeliverError, Delivery, OutFormat, sse_event};
use crate::item::Item;

/// A batch's bytes, ready for subscribers.
#[derive(Debug)]
pub enum Wire {
    /// An independently compressed block of an HTTP body ([`Framing::Stream`],
    /// [`Framing::Sse`]); each subscriber passes it through its own stitcher.
    Stream(Block),
    /// Buffers sent as they are: one WebSocket message per item, or the gRPC
    /// length-prefixed messages of the batch as one buffer.
    Messages(Vec<Bytes>),
}

impl Wire {
    /// Bytes held.
    pub fn len(&self) -> usize {
        match self {
            Wire::Stream(b) => b.data.len(),
            Wire::Messages(m) => m.iter().map(Bytes::len).sum(),
        }
    }

    /// Holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Writes items one by one, then the whole batch as a [`Wire`].
pub struct BatchEncoder {
    format: OutFormat,
    framing: Framing,
    encoding: Encoding,
    delivery: Delivery,
    raw: Vec<u8>,
    ends: Vec<usize>,
}

impl BatchEncoder {
    /// A batch of `key`'s stream. `with_options`: Jelly splice output whose first item
    /// carries the options row (a subscriber's first item); otherwise items go out
    /// without it (SSE events always keep it, so each decodes alone).
    pub fn new(key: &GroupKey, with_options: bool) -> BatchEncoder {
        let mut delivery = Delivery::new(key.format, key.framing.delimited());
        if key.framing.marks_text_offsets() {
            delivery = delivery.with_offset_comments();
        }
        if key.format == OutFormat::Jelly {
            if key.framing == Framing::Sse {
                delivery = delivery.options_in_every_item();
            } else if !with_options {
                delivery = delivery.options_sent();
            }
        }
        BatchEncoder {
            format: key.format,
            framing: key.framing,
            encoding: key.encoding,
            delivery,
            raw: Vec::new(),
            ends: Vec::new(),
        }
    }

    /// Bytes of output written so far (before compression).
    pub fn written(&self) -> usize {
        self.raw.len()
    }

    /// Appends one item. On an error nothing of the item is kept.
    pub fn push(&mut self, item: &Item) -> Result<(), DeliverError> {
        let before = self.raw.len();
        let r = self.write(item);
        if r.is_err() {
            self.raw.truncate(before);
        } else {
            self.ends.push(self.raw.len());
        }
        r
    }

    fn write(&mut self, item: &Item) -> Result<(), DeliverError> {
        match self.framing {
            Framing::Stream | Framing::Messages => self.delivery.write_item(item, &mut self.raw),
            Framing::Sse => {
                let mut body = Vec::new();
                self.delivery.write_item(item, &mut body)?;
                sse_event(item.offset, self.format, &body, &mut self.raw);
                Ok(())
            }
            Framing::Grpc if self.encoding.grpc_name().is_none() => {
                // Uncompressed: the message goes straight into the batch (no copy of the
                // item through a buffer of its own).
                let delivery = &mut self.delivery;
                grpc_message_in_place(
                    &mut self.raw,
                    item.frame.len() + ITEM_METADATA_ROOM,
                    |out| delivery.write_item(item, out),
                )
            }
            Framing::Grpc => {
                let mut body = Vec::with_capacity(item.frame.len() + ITEM_METADATA_ROOM);
                self.delivery.write_item(item, &mut body)?;
                grpc_message(self.encoding, &body, &mut self.raw);
                Ok(())
            }
        }
    }

    /// Items written so far.
    pub fn items(&self) -> usize {
        self.ends.len()
    }

    /// Uncompressed bytes written so far.
    pub fn raw_len(&self) -> usize {
        self.raw.len()
    }

    /// The batch's bytes (compressed once for the stream framings).
    pub fn finish(self) -> Wire {
        match self.framing {
            Framing::Stream | Framing::Sse => Wire::Stream(block(self.encoding, self.raw)),
            Framing::Messages => {
                let raw = Bytes::from(self.raw);
                Wire::Messages(Batch::parts(&raw, &self.ends).collect())
            }
            Framing::Grpc => Wire::Messages(vec![Bytes::from(self.raw)]),
        }
    }
}

/// One block of an HTTP body. Identity keeps the bytes without a copy.
pub fn block(encoding: Encoding, raw: Vec<u8>) -> Block {
    if encoding == Encoding::Identity {
        Block {
            raw_len: raw.len() as u64,
            crc32: crc32fast::hash(&raw),
            data: Bytes::from(raw),
        }
    } else {
        compress::compress_block(encoding, &raw)
    }
}

/// Bytes before a gRPC message's payload: the compressed-flag and the length.
const GRPC_PREFIX_LEN: usize = 5;

/// Room reserved for the metadata a delivered item gets (its offset; a source and
/// headers rarely add more than this).
const ITEM_METADATA_ROOM: usize = 64;

/// Appends one gRPC message: a flag byte (1: compressed with the call's
/// `grpc-encoding`), a big-endian u32 length, then the payload.
pub fn grpc_message(encoding: Encoding, body: &[u8], out: &mut Vec<u8>) {
    if encoding.grpc_name().is_some() {
        let payload = compress::compress_grpc_message(encoding, body);
        out.put_u8(1);
        out.put_u32(payload.len() as u32);
        out.extend_from_slice(&payload);
    } else {
        let copied: Result<(), std::convert::Infallible> =
            grpc_message_in_place(out, body.len(), |out| {
                out.extend_from_slice(body);
                Ok(())
            });
        let Ok(()) = copied;
    }
}

/// Appends one uncompressed gRPC message whose payload `write` appends to `out` itself:
/// a zero flag byte, the big-endian u32 length (filled in once the payload is there),
/// then the payload. `room` is reserved for the payload first, so `out` is not
/// reallocated (and copied) while it is written.
fn grpc_message_in_place<E>(
    out: &mut Vec<u8>,
    room: usize,
    write: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
) -> Result<(), E> {
    let at = out.len();
    out.reserve(GRPC_PREFIX_LEN + room);
    out.extend_from_slice(&[0; GRPC_PREFIX_LEN]);
    write(out)?;
    let len = (out.len() - at - GRPC_PREFIX_LEN) as u32;
    out[at + 1..at + GRPC_PREFIX_LEN].copy_from_slice(&len.to_be_bytes());
    Ok(())
}
