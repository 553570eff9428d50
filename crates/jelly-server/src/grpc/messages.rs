//! The messages of `grpc.proto`: `RdfStreamFrame` (kept as its bytes),
//! `RdfStreamSubscribe` and the empty `RdfStreamReceived`.

use bytes::{BufMut, Bytes};
use jelly::StreamOptions;
use jelly_proto::fields::subscribe as f;
use jelly_proto::wire::{Reader, WireError, WireType, put_bytes_field, put_str_field_nonempty};
use tonic::Status;

use super::codec::WireMessage;

/// An `RdfStreamFrame`, as the bytes of one non-delimited frame message. It is
/// decoded (and checked) by whoever consumes it, not by the codec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame(pub Bytes);

impl WireMessage for Frame {
    fn encode_to(&self, out: &mut impl BufMut) {
        out.put_slice(&self.0);
    }

    fn decode_from(bytes: Bytes) -> Result<Self, Status> {
        Ok(Frame(bytes))
    }
}

/// `RdfStreamSubscribe { string topic = 1; RdfStreamOptions requested_options = 2; }`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Subscribe {
    /// The topic (any UTF-8 string, possibly empty).
    pub topic: String,
    /// The stream options the client asks for, if it sent any.
    pub requested_options: Option<StreamOptions>,
}

impl Subscribe {
    /// Parses the message body; unknown fields are skipped.
    pub fn decode(bytes: &[u8]) -> Result<Subscribe, WireError> {
        let mut r = Reader::new(bytes);
        let mut s = Subscribe::default();
        while let Some((field, wt)) = r.tag()? {
            match (field, wt) {
                (f::TOPIC, WireType::Len) => s.topic = r.str()?.to_owned(),
                (f::REQUESTED_OPTIONS, WireType::Len) => {
                    s.requested_options = Some(StreamOptions::decode_from(r.message()?)?)
                }
                (_, wt) => r.skip(wt)?,
            }
        }
        Ok(s)
    }

    /// The message body.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.topic.len() + 40);
        put_str_field_nonempty(&mut out, f::TOPIC, &self.topic);
        if let Some(o) = &self.requested_options {
            put_bytes_field(&mut out, f::REQUESTED_OPTIONS, &o.encode_to_vec());
        }
        out
    }
}

impl WireMessage for Subscribe {
    fn encode_to(&self, out: &mut impl BufMut) {
        out.put_slice(&self.encode());
    }

    fn decode_from(bytes: Bytes) -> Result<Self, Status> {
        Subscribe::decode(&bytes)
            .map_err(|e| Status::invalid_argument(format!("malformed RdfStreamSubscribe: {e}")))
    }
}

/// `RdfStreamReceived {}`: the answer to a publish. Fields sent by a newer peer are
/// ignored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Received;

impl WireMessage for Received {
    fn encode_to(&self, _out: &mut impl BufMut) {}

    fn decode_from(_bytes: Bytes) -> Result<Self, Status> {
        Ok(Received)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jelly::PhysicalType;

    #[test]
    fn subscribe_round_trip() {
        let s = Subscribe {
            topic: "wéather".into(),
            requested_options: Some(StreamOptions::small().with_physical_type(PhysicalType::Quads)),
        };
        assert_eq!(Subscribe::decode(&s.encode()).unwrap(), s);
        let empty = Subscribe::default();
        assert!(empty.encode().is_empty());
        assert_eq!(Subscribe::decode(&[]).unwrap(), empty);
    }

    #[test]
    fn subscribe_skips_unknown_and_rejects_garbage() {
        // field 7 varint 1, then topic "t"
        let s = Subscribe::decode(&[0x38, 0x01, 0x0a, 0x01, b't']).unwrap();
        assert_eq!(s.topic, "t");
        assert!(Subscribe::decode(&[0x0a, 0x05, b't']).is_err(), "truncated");
        assert!(Subscribe::decode(&[0x0a, 0x01, 0xff]).is_err(), "bad UTF-8");
        let status =
            <Subscribe as WireMessage>::decode_from(Bytes::from_static(&[0x0a])).unwrap_err();
        assert_eq!(status.code(), tonic::Code::InvalidArgument);
    }
}
