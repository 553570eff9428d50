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
    /// Parses the message body; unknown fields are skipped. `requested_options` given
    /// more than once are merged, as protobuf merges an embedded message field that
    /// repeats (its fields set later win): their bytes, joined, are one message.
    pub fn decode(bytes: &[u8]) -> Result<Subscribe, WireError> {
        let mut r = Reader::new(bytes);
        let mut s = Subscribe::default();
        let mut options: Option<Vec<u8>> = None;
        while let Some((field, wt)) = r.tag()? {
            match (field, wt) {
                (f::TOPIC, WireType::Len) => s.topic = r.str()?.to_owned(),
                (f::REQUESTED_OPTIONS, WireType::Len) => options
                    .get_or_insert_with(Vec::new)
                    .extend_from_slice(r.bytes()?),
                (_, wt) => r.skip(wt)?,
            }
        }
        if let Some(bytes) = options {
            s.requested_options = Some(StreamOptions::decode_from(Reader::new(&bytes))?);
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

    /// `requested_options` sent twice are merged field by field, later ones winning,
    /// as protobuf reads a repeated embedded message (only the last was kept).
    #[test]
    fn repeated_requested_options_are_merged() {
        let first = StreamOptions::small().with_physical_type(PhysicalType::Triples);
        let mut later = Vec::new();
        // max_name_table_size (field 9, a varint) = 16, nothing else.
        later.extend_from_slice(&[0x48, 0x10]);
        let mut body = Vec::new();
        put_str_field_nonempty(&mut body, f::TOPIC, "t");
        put_bytes_field(&mut body, f::REQUESTED_OPTIONS, &first.encode_to_vec());
        put_bytes_field(&mut body, f::REQUESTED_OPTIONS, &later);
        let got = Subscribe::decode(&body).unwrap().requested_options.unwrap();
        assert_eq!(got.physical_type, PhysicalType::Triples);
        assert_eq!(got.max_name_table_size, 16);
        assert_eq!(got.max_prefix_table_size, first.max_prefix_table_size);
        assert_eq!(got.max_datatype_table_size, first.max_datatype_table_size);
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
