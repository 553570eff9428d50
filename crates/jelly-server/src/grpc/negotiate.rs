//! `SubscribeRdf`'s `requested_options`: what a subscription's stream looks like, by
//! the compatibility rules of the streaming specification.
//!
//! The server's stream is compatible with a request when: the physical types are
//! equal; `rdf_star` and `generalized_statements` are equal or false in the stream;
//! the stream's three table sizes and its version are at most the requested ones.
//! `stream_name` and `logical_type` may differ (the topic's logical type is kept).
//!
//! This server goes further than refusing: when the client asks for smaller tables
//! than the topic's items use, it re-encodes ([`JellyMode::Compact`]) with the
//! client's sizes instead of failing. A request it cannot satisfy gets a reason,
//! which the service sends as `INVALID_ARGUMENT`.

use jelly::StreamOptions;
use jelly::options::VERSION_1_0;

use crate::deliver::JellyMode;

/// How a subscription will be served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Negotiated {
    /// Splice the stored items, or re-encode them.
    pub mode: JellyMode,
    /// The options of the stream the client will get (for [`JellyMode::Compact`], the
    /// encoder's; for splicing, the topic's).
    pub options: StreamOptions,
}

/// The version tag a stream with these options carries (an unset version is
/// written as the lowest tag, 1: subscriptions use no namespace declarations).
fn effective_version(o: &StreamOptions) -> u32 {
    if o.version == 0 {
        VERSION_1_0
    } else {
        o.version
    }
}

/// Decides how to serve a subscriber whose topic's items have `topic` options and
/// who asked for `requested` (none: the topic's stream as it is). `topic_name` is
/// for messages only.
pub fn negotiate(
    topic_name: &str,
    topic: &StreamOptions,
    requested: Option<&StreamOptions>,
) -> Result<Negotiated, String> {
    let splice = Negotiated {
        mode: JellyMode::Splice,
        options: topic.clone(),
    };
    let Some(req) = requested else {
        return Ok(splice);
    };
    if req.physical_type != topic.physical_type {
        return Err(format!(
            "requested physical type {}, but topic `{topic_name}` holds {} (the physical type must be equal)",
            req.physical_type.name().to_ascii_uppercase(),
            topic.physical_type.name().to_ascii_uppercase()
        ));
    }
    if topic.rdf_star && !req.rdf_star {
        return Err(format!(
            "topic `{topic_name}` allows RDF-star, so its stream sets rdf_star; request rdf_star=true"
        ));
    }
    if topic.generalized_statements && !req.generalized_statements {
        return Err(format!(
            "topic `{topic_name}` allows generalized statements, so its stream sets \
             generalized_statements; request generalized_statements=true"
        ));
    }
    if req.max_name_table_size < 8 {
        return Err(format!(
            "requested name table size {} is below the minimum of 8",
            req.max_name_table_size
        ));
    }
    // A request without a version (0, which no stream may carry) accepts any.
    let version = effective_version(topic);
    if req.version != 0 && version > req.version {
        return Err(format!(
            "the stream uses protocol version {version}; the request allows at most {}",
            req.version
        ));
    }
    let fits = topic.max_name_table_size <= req.max_name_table_size
        && topic.max_prefix_table_size <= req.max_prefix_table_size
        && topic.max_datatype_table_size <= req.max_datatype_table_size;
    if fits {
        return Ok(splice);
    }
    let mut options = topic.clone();
    options.max_name_table_size = topic.max_name_table_size.min(req.max_name_table_size);
    options.max_prefix_table_size = topic.max_prefix_table_size.min(req.max_prefix_table_size);
    options.max_datatype_table_size = topic
        .max_datatype_table_size
        .min(req.max_datatype_table_size);
    Ok(Negotiated {
        mode: JellyMode::Compact,
        options,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use jelly::PhysicalType;

    fn topic() -> StreamOptions {
        StreamOptions::big().with_physical_type(PhysicalType::Quads)
    }

    #[test]
    fn no_request_or_bigger_tables_splice() {
        let t = topic();
        assert_eq!(negotiate("t", &t, None).unwrap().mode, JellyMode::Splice);
        let req = StreamOptions::with_tables(5000, 200, 40).with_physical_type(PhysicalType::Quads);
        let n = negotiate("t", &t, Some(&req)).unwrap();
        assert_eq!(n.mode, JellyMode::Splice);
        assert_eq!(n.options, t);
        assert!(
            n.options
                .is_compatible_with_request(&StreamOptions { version: 1, ..req })
        );
    }

    #[test]
    fn smaller_tables_compact_with_the_smaller_sizes() {
        let t = topic();
        let req = StreamOptions::with_tables(64, 500, 0)
            .with_physical_type(PhysicalType::Quads)
            .with_rdf_star(true);
        let n = negotiate("t", &t, Some(&req)).unwrap();
        assert_eq!(n.mode, JellyMode::Compact);
        assert_eq!(
            (
                n.options.max_name_table_size,
                n.options.max_prefix_table_size,
                n.options.max_datatype_table_size
            ),
            (64, 150, 0)
        );
        assert!(
            !n.options.rdf_star,
            "false is compatible with a request for true"
        );
        let mut out = n.options.clone();
        out.version = 1;
        assert!(out.is_compatible_with_request(&StreamOptions { version: 1, ..req }));
    }

    #[test]
    fn refusals() {
        let t = topic().with_rdf_star(true);
        let base = StreamOptions::big()
            .with_physical_type(PhysicalType::Quads)
            .with_rdf_star(true);
        let bad = [
            base.clone().with_physical_type(PhysicalType::Triples),
            base.clone().with_physical_type(PhysicalType::Graphs),
            base.clone().with_rdf_star(false),
            StreamOptions {
                max_name_table_size: 7,
                ..base.clone()
            },
        ];
        for req in &bad {
            assert!(negotiate("t", &t, Some(req)).is_err(), "{req:?}");
        }
        let g = topic().with_generalized_statements(true);
        assert!(negotiate("t", &g, Some(&base)).is_err());
        assert!(
            negotiate(
                "t",
                &g,
                Some(&base.clone().with_generalized_statements(true))
            )
            .is_ok()
        );
    }

    #[test]
    fn version_must_not_exceed_the_request() {
        let t = StreamOptions {
            version: 2,
            ..topic()
        };
        let req = StreamOptions {
            version: 1,
            ..topic()
        };
        let e = negotiate("t", &t, Some(&req)).unwrap_err();
        assert!(e.contains("version 2"), "{e}");
        // Version 1 streams satisfy any stated version; an unset one accepts any.
        assert!(negotiate("t", &topic(), Some(&req)).is_ok());
        assert!(negotiate("t", &t, Some(&topic())).is_ok());
    }
}
