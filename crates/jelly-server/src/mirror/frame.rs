//! A delivered frame back into a stored item: the inverse of splice delivery.
//!
//! In splice mode (see [`crate::deliver`]) an upstream sends each stored frame as it
//! is, without the options row after the first frame, with the item's metadata
//! (`offset`, `ts`, `source`, `h:<name>`) appended as `metadata` fields. Stored
//! frames hold no metadata of their own, so the stored bytes are recovered exactly:
//! the options row, then the frame's rows up to the first metadata field. No
//! statement is decoded; only the top level of the frame is walked.

use bytes::{Bytes, BytesMut};
use jelly::splice::options_row_len;
use jelly_proto::fields::{frame, row};
use jelly_proto::wire::{Reader, WireError, WireType};

use crate::item::Item;

/// Why a delivered frame could not be turned back into an item.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("the first frame of the stream has no options row")]
    NoOptions,
    #[error("malformed frame: {0}")]
    Wire(#[from] WireError),
    #[error("a row after the frame's metadata")]
    RowAfterMetadata,
    #[error("unexpected field {0} in a frame")]
    UnexpectedField(u32),
    #[error("metadata `{0}` is missing")]
    Missing(&'static str),
    #[error("metadata `{key}` is not {what}")]
    BadValue { key: String, what: &'static str },
    #[error("a frame carries other stream options than the stream's first")]
    OptionsChanged,
}

/// Turns the frames of one upstream subscription back into items. Keeps the options
/// row of the first frame for the frames after it.
#[derive(Debug, Default)]
pub struct Unsplicer {
    options_row: Option<Bytes>,
}

impl Unsplicer {
    /// A fresh stream (its first frame must carry the options row).
    pub fn new() -> Unsplicer {
        Unsplicer::default()
    }

    /// The stored item of one delivered frame.
    pub fn item(&mut self, delivered: Bytes) -> Result<Item, FrameError> {
        let (options, body) = match options_row_len(&delivered) {
            Some(n) => {
                let options = delivered.slice(..n);
                // A splice stream sends its options once; the same row again is
                // harmless, other options would make items its readers refuse.
                if self.options_row.as_ref().is_some_and(|o| *o != options) {
                    return Err(FrameError::OptionsChanged);
                }
                self.options_row = Some(options.clone());
                (options, delivered.slice(n..))
            }
            None => (
                self.options_row.clone().ok_or(FrameError::NoOptions)?,
                delivered,
            ),
        };
        let mut r = Reader::new(&body);
        let mut rows_end = 0;
        let mut statements = 0u32;
        let mut in_metadata = false;
        let mut offset = None;
        let mut timestamp = None;
        let mut source = String::new();
        let mut headers = Vec::new();
        while let Some((field, wt)) = r.tag()? {
            match (field, wt) {
                (frame::ROWS, WireType::Len) => {
                    if in_metadata {
                        return Err(FrameError::RowAfterMetadata);
                    }
                    let mut rd = r.message()?;
                    if let Some((row::TRIPLE | row::QUAD, _)) = rd.tag()? {
                        statements = statements.saturating_add(1);
                    }
                    rows_end = r.offset();
                }
                (frame::METADATA, WireType::Len) => {
                    in_metadata = true;
                    let (key, value) = map_entry(r.message()?)?;
                    let text = || {
                        std::str::from_utf8(value).map_err(|_| FrameError::BadValue {
                            key: key.to_string(),
                            what: "UTF-8",
                        })
                    };
                    let number = || {
                        text()?.parse::<u64>().map_err(|_| FrameError::BadValue {
                            key: key.to_string(),
                            what: "a number",
                        })
                    };
                    match key {
                        "offset" => offset = Some(number()?),
                        "ts" => timestamp = Some(number()?),
                        "source" => source = text()?.to_string(),
                        k => {
                            if let Some(name) = k.strip_prefix("h:") {
                                headers.push((name.to_string(), text()?.to_string()));
                            }
                            // Other keys are not item metadata of ours: ignored.
                        }
                    }
                }
                (f, _) => return Err(FrameError::UnexpectedField(f)),
            }
        }
        let mut stored = BytesMut::with_capacity(options.len() + rows_end);
        stored.extend_from_slice(&options);
        stored.extend_from_slice(&body[..rows_end]);
        Ok(Item {
            offset: offset.ok_or(FrameError::Missing("offset"))?,
            timestamp_ms: timestamp.ok_or(FrameError::Missing("ts"))?,
            frame: stored.freeze(),
            statements,
            source,
            headers,
        })
    }
}

/// Key and value of one `metadata` map entry (unknown fields are skipped).
fn map_entry(mut r: Reader<'_>) -> Result<(&str, &[u8]), FrameError> {
    let mut key = "";
    let mut value: &[u8] = &[];
    while let Some((field, wt)) = r.tag()? {
        match (field, wt) {
            (frame::MAP_KEY, WireType::Len) => key = r.str()?,
            (frame::MAP_VALUE, WireType::Len) => value = r.bytes()?,
            (_, wt) => r.skip(wt)?,
        }
    }
    Ok((key, value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deliver::Delivery;
    use crate::deliver::OutFormat;
    use jelly::{Encoder, EncoderConfig, StatementRef, StreamOptions, TermRef};

    fn stored(i: u64, n: usize) -> Bytes {
        let mut enc = Encoder::with_config(
            StreamOptions::big(),
            EncoderConfig {
                spliceable: true,
                ..EncoderConfig::default()
            },
        )
        .unwrap();
        for k in 0..n {
            let o = format!("http://ex.org/o{i}-{k}");
            enc.add(StatementRef::triple(
                TermRef::Iri("http://ex.org/s"),
                TermRef::Iri("http://ex.org/p"),
                TermRef::Iri(&o),
            ))
            .unwrap();
        }
        Bytes::from(enc.finish_frame())
    }

    fn item(i: u64) -> Item {
        Item {
            offset: 40 + i,
            timestamp_ms: 1_700_000_000_000 + i,
            frame: stored(i, 1 + i as usize % 3),
            statements: 1 + i as u32 % 3,
            source: if i == 1 {
                String::new()
            } else {
                format!("pub-{i}")
            },
            headers: (0..i % 3)
                .map(|k| (format!("k{k}"), format!("v{i}")))
                .collect(),
        }
    }

    #[test]
    fn splice_delivery_round_trips_to_the_stored_items() {
        let items: Vec<Item> = (0..5).map(item).collect();
        let mut d = Delivery::new(OutFormat::Jelly, false);
        let mut u = Unsplicer::new();
        for it in &items {
            let mut out = Vec::new();
            d.write_item(it, &mut out).unwrap();
            assert_eq!(&u.item(Bytes::from(out)).unwrap(), it);
        }
    }

    #[test]
    fn refusals() {
        let mut d = Delivery::new(OutFormat::Jelly, false);
        let mut first = Vec::new();
        d.write_item(&item(0), &mut first).unwrap();
        let mut second = Vec::new();
        d.write_item(&item(1), &mut second).unwrap();
        // Without the first frame, the second has no options row.
        assert_eq!(
            Unsplicer::new().item(Bytes::from(second.clone())),
            Err(FrameError::NoOptions)
        );
        let mut u = Unsplicer::new();
        u.item(Bytes::from(first)).unwrap();
        // Cut inside the metadata.
        let cut = Bytes::from(second[..second.len() - 2].to_vec());
        assert!(matches!(u.item(cut), Err(FrameError::Wire(_))));
        // A row after the metadata.
        let mut late_row = second.clone();
        late_row.extend_from_slice(&stored(9, 1)[..]);
        assert_eq!(
            u.item(Bytes::from(late_row)),
            Err(FrameError::RowAfterMetadata)
        );
        // No metadata at all.
        assert_eq!(u.item(stored(3, 1)), Err(FrameError::Missing("offset")));
        // A non-numeric offset.
        let mut bad = stored(3, 1).to_vec();
        jelly::splice::push_metadata(&mut bad, "offset", b"x1");
        assert!(matches!(
            u.item(Bytes::from(bad)),
            Err(FrameError::BadValue { .. })
        ));
        // A later frame with other stream options than the first.
        let mut enc = Encoder::new(StreamOptions::small()).unwrap();
        enc.add(StatementRef::triple(
            TermRef::Iri("http://ex.org/s"),
            TermRef::Iri("http://ex.org/p"),
            TermRef::Iri("http://ex.org/o"),
        ))
        .unwrap();
        let mut other = enc.finish_frame();
        jelly::splice::push_metadata(&mut other, "offset", b"42");
        jelly::splice::push_metadata(&mut other, "ts", b"1");
        assert_eq!(u.item(Bytes::from(other)), Err(FrameError::OptionsChanged));
    }
}
