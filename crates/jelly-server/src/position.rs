//! Start positions of subscriptions: `earliest`, `latest`, `<offset>`, `ts:<ms>` and
//! `last:<n>`, shared by the HTTP `from` parameter and the gRPC `x-jelly-from` metadata.

use crate::topic::Topic;

/// Why a start position could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum FromError {
    /// Not one of the accepted forms.
    #[error("bad `from` value `{0}`: use earliest, latest, an offset, ts:<ms> or last:<n>")]
    Bad(String),
    /// An offset below the first retained one.
    #[error("offset {requested} is no longer retained; the first retained offset is {first}")]
    Gone { requested: u64, first: u64 },
    /// An offset past the end of the topic.
    #[error("offset {requested} is past the end of the topic (next offset {next})")]
    PastEnd { requested: u64, next: u64 },
    /// The log could not answer (timestamp lookup).
    #[error("{0}")]
    Unavailable(String),
}

/// A number written in decimal digits only (Rust's parser also takes a leading `+`),
/// as start positions and the server's other numbers in text are read.
///
/// ```
/// use jelly_server::position::number;
/// assert_eq!(number("17"), Some(17));
/// assert_eq!(number("+17"), None);
/// assert_eq!(number(" 17"), None);
/// ```
pub fn number(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Resolves a start position (`from`, or `default` when absent) to an offset of `t`,
/// checking it against retention and the end of the log.
pub async fn resolve_from(t: &Topic, from: Option<&str>, default: &str) -> Result<u64, FromError> {
    // Not trimmed: a value with spaces is refused, as every other parameter's is.
    let from = from.unwrap_or(default);
    let first = t.log.first_offset();
    let next = t.log.next_offset();
    let bad = || FromError::Bad(from.to_string());
    let offset = match from {
        "earliest" => first,
        "latest" => next,
        f => {
            if let Some(ms) = f.strip_prefix("ts:") {
                let ms = number(ms).ok_or_else(bad)?;
                t.log
                    .offset_for_timestamp(ms)
                    .await
                    .map_err(|e| FromError::Unavailable(e.to_string()))?
            } else if let Some(n) = f.strip_prefix("last:") {
                let n = number(n).ok_or_else(bad)?;
                next.saturating_sub(n).max(first)
            } else {
                let o = number(f).ok_or_else(bad)?;
                if o < first {
                    return Err(FromError::Gone {
                        requested: o,
                        first,
                    });
                }
                if o > next {
                    return Err(FromError::PastEnd { requested: o, next });
                }
                o
            }
        }
    };
    Ok(offset)
}
