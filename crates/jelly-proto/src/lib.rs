//! Wire layer of the Jelly protocol.
//!
//! Jelly messages are protobuf (proto3). This crate holds a small hand-rolled
//! protobuf reader and writer ([`wire`]) plus the field numbers of the messages in
//! `rdf.proto`, `patch.proto` and `grpc.proto` ([`fields`]). The `.proto` files in
//! `proto/` are our own transcription of the field numbers from the specification.
//!
//! A hand-rolled reader lets the codec borrow strings straight out of the input
//! buffer instead of allocating an owned message tree per frame.
//!
//! ```
//! use jelly_proto::wire::{Reader, WireType, put_varint};
//! let mut buf = Vec::new();
//! put_varint(&mut buf, (1 << 3) | 0); // field 1, varint
//! put_varint(&mut buf, 300);
//! let mut r = Reader::new(&buf);
//! let (field, wt) = r.tag().unwrap().unwrap();
//! assert_eq!((field, wt), (1, WireType::Varint));
//! assert_eq!(r.varint().unwrap(), 300);
//! ```

pub mod fields;
pub mod wire;
