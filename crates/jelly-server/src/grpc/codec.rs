//! A `tonic` codec over our own protobuf wire code (no prost, no generated code).
//!
//! gRPC hands a codec the bytes of exactly one message; [`JellyCodec`] turns them into
//! a [`WireMessage`] and back. The same codec serves the server and (in tests and
//! clients) the client side: `JellyCodec<Encode, Decode>`.

use std::marker::PhantomData;

use bytes::{BufMut, Bytes};
use tonic::Status;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};

/// A protobuf message that writes and reads its own wire form.
pub trait WireMessage: Sized + Send + 'static {
    /// Appends the message body (no length prefix) to `out`.
    fn encode_to(&self, out: &mut impl BufMut);

    /// Parses a message body. Errors become the call's status (`INVALID_ARGUMENT`
    /// for malformed input).
    fn decode_from(bytes: Bytes) -> Result<Self, Status>;
}

/// Encodes `E` and decodes `D` with their [`WireMessage`] implementations.
pub struct JellyCodec<E, D> {
    _types: PhantomData<fn(E) -> D>,
}

impl<E, D> JellyCodec<E, D> {
    /// A new codec.
    pub fn new() -> Self {
        JellyCodec {
            _types: PhantomData,
        }
    }
}

impl<E, D> Default for JellyCodec<E, D> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E: WireMessage, D: WireMessage> Codec for JellyCodec<E, D> {
    type Encode = E;
    type Decode = D;
    type Encoder = MessageEncoder<E>;
    type Decoder = MessageDecoder<D>;

    fn encoder(&mut self) -> Self::Encoder {
        MessageEncoder { _type: PhantomData }
    }

    fn decoder(&mut self) -> Self::Decoder {
        MessageDecoder { _type: PhantomData }
    }
}

/// The encoding half of [`JellyCodec`].
pub struct MessageEncoder<E> {
    _type: PhantomData<fn(E)>,
}

impl<E: WireMessage> Encoder for MessageEncoder<E> {
    type Item = E;
    type Error = Status;

    fn encode(&mut self, item: E, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        item.encode_to(dst);
        Ok(())
    }
}

/// The decoding half of [`JellyCodec`].
pub struct MessageDecoder<D> {
    _type: PhantomData<fn() -> D>,
}

impl<D: WireMessage> Decoder for MessageDecoder<D> {
    type Item = D;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<D>, Status> {
        use bytes::Buf as _;
        let bytes = src.copy_to_bytes(src.remaining());
        D::decode_from(bytes).map(Some)
    }
}
