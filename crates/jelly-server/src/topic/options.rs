//! A topic's options: its physical type, Jelly table sizes and retention.

use jelly::{LogicalType, PhysicalType, StreamOptions};
use serde::{Deserialize, Serialize};

/// Physical stream type of a topic's items.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Physical {
    Triples,
    #[default]
    Quads,
}

impl Physical {
    pub fn jelly(self) -> PhysicalType {
        match self {
            Physical::Triples => PhysicalType::Triples,
            Physical::Quads => PhysicalType::Quads,
        }
    }
}

/// A logical type given as a name (`"graphs"`), a number in a string (`"3"`) or a JSON
/// number (`3`), kept as text (`logical_type` reads both).
pub(crate) fn name_or_number<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum NameOrNumber {
        Name(String),
        Number(u64),
    }
    Ok(Option::<NameOrNumber>::deserialize(d)?.map(|v| match v {
        NameOrNumber::Name(s) => s,
        NameOrNumber::Number(n) => n.to_string(),
    }))
}

/// Options of a topic: given when it is created; only retention can change later
/// ([`Registry::alter`](crate::topic::Registry::alter)).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TopicOptions {
    /// `triples` (named graphs are refused) or `quads`.
    pub physical: Physical,
    /// Logical stream type name (`graphs`, `datasets`, `named-graphs`, `flat-quads`, …).
    /// Default: `graphs` for triples topics, `datasets` for quads topics (one item is one frame).
    /// Given as a name or as the RDF-STaX number (a JSON string or number).
    #[serde(deserialize_with = "name_or_number")]
    pub logical: Option<String>,
    /// Allow RDF-star quoted triples in items.
    pub rdf_star: bool,
    /// Allow generalized statements in items.
    pub generalized: bool,
    /// Keep at most this many items (memory log only).
    pub retention_items: u64,
    /// Keep at most about this many bytes (0 = no limit). The server's default is 0
    /// with the file log and [`crate::config::MEMORY_RETENTION_BYTES`] with the
    /// memory log.
    pub retention_bytes: u64,
    /// Drop items older than this, in milliseconds (0 = no limit).
    pub retention_ms: u64,
}

impl Default for TopicOptions {
    fn default() -> Self {
        TopicOptions {
            physical: Physical::Quads,
            logical: None,
            rdf_star: false,
            generalized: false,
            retention_items: 1_000_000,
            retention_bytes: 0,
            retention_ms: 0,
        }
    }
}

/// The fields of a JSON object in their order, refusing anything but an object and a
/// field given twice (which a map would silently reduce to its last value).
fn object_fields(body: &[u8]) -> Result<Vec<(String, serde_json::Value)>, String> {
    struct Fields(Vec<(String, serde_json::Value)>);
    impl<'de> Deserialize<'de> for Fields {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Fields, D::Error> {
            struct Visit;
            impl<'de> serde::de::Visitor<'de> for Visit {
                type Value = Fields;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("a JSON object")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut map: A,
                ) -> Result<Fields, A::Error> {
                    let mut out: Vec<(String, serde_json::Value)> = Vec::new();
                    while let Some((k, v)) = map.next_entry::<String, serde_json::Value>()? {
                        if out.iter().any(|(seen, _)| *seen == k) {
                            return Err(serde::de::Error::custom(format!(
                                "field `{k}` is given twice"
                            )));
                        }
                        out.push((k, v));
                    }
                    Ok(Fields(out))
                }
            }
            d.deserialize_map(Visit)
        }
    }
    serde_json::from_slice::<Fields>(body)
        .map(|f| f.0)
        .map_err(|e| match e.classify() {
            serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
                format!("not JSON: {e}")
            }
            _ => e.to_string(),
        })
}

impl TopicOptions {
    /// Options read from a JSON object (a topic's creation): the fields it gives over
    /// `base` (the server's `[topic_defaults]`), the others as in `base`. Unknown
    /// fields, wrong types, a field given twice and anything but an object are refused.
    ///
    /// ```
    /// use jelly_server::topic::{Physical, TopicOptions};
    /// let base = TopicOptions { physical: Physical::Triples, retention_bytes: 1000, ..TopicOptions::default() };
    /// let o = TopicOptions::from_json_over(br#"{"rdf_star": true}"#, &base).unwrap();
    /// assert_eq!((o.physical, o.retention_bytes, o.rdf_star), (Physical::Triples, 1000, true));
    /// assert!(TopicOptions::from_json_over(br#"["triples"]"#, &base).is_err());
    /// assert!(TopicOptions::from_json_over(br#"{"rdf_star": true, "rdf_star": false}"#, &base).is_err());
    /// ```
    pub fn from_json_over(body: &[u8], base: &TopicOptions) -> Result<TopicOptions, String> {
        let fields = object_fields(body)?;
        let mut merged = match serde_json::to_value(base) {
            Ok(serde_json::Value::Object(m)) => m,
            _ => serde_json::Map::new(),
        };
        merged.extend(fields);
        serde_json::from_value(serde_json::Value::Object(merged)).map_err(|e| e.to_string())
    }

    /// The logical type (explicit, or the default for the physical type).
    pub fn logical_type(&self) -> Result<LogicalType, String> {
        match &self.logical {
            None => Ok(match self.physical {
                Physical::Triples => LogicalType::GRAPHS,
                Physical::Quads => LogicalType::DATASETS,
            }),
            Some(s) => LogicalType::parse(s).ok_or_else(|| {
                format!(
                    "unknown logical type `{s}` (flat-triples, flat-quads, graphs, datasets, \
                     subject-graphs, named-graphs, timestamped-named-graphs, or a number)"
                )
            }),
        }
    }

    /// Checks the options; returns a reason when they are unusable.
    pub fn validate(&self) -> Result<(), String> {
        let lt = self.logical_type()?;
        // RDF-STaX numbers a subtype with its base type as the last digit (14 is a
        // kind of 4); a base beyond the four types is no type at all.
        if lt.base().0 > LogicalType::DATASETS.0 {
            return Err(format!(
                "unknown logical type {}: its base type {} is none of 1 (flat-triples), \
                 2 (flat-quads), 3 (graphs), 4 (datasets)",
                lt.0,
                lt.base().0
            ));
        }
        if !lt.fits(self.physical.jelly()) {
            return Err(format!(
                "logical type {} does not fit physical type {}",
                lt.name(),
                self.physical.jelly().name()
            ));
        }
        if self.retention_items == 0 {
            return Err("retention_items must be at least 1".into());
        }
        Ok(())
    }

    /// Stream options of the topic's items and of its subscriptions' Jelly streams.
    pub fn stream_options(&self) -> StreamOptions {
        StreamOptions::big()
            .with_physical_type(self.physical.jelly())
            .with_logical_type(self.logical_type().unwrap_or_default())
            .with_rdf_star(self.rdf_star)
            .with_generalized_statements(self.generalized)
    }

    /// These options with the retention limits `change` gives (the others unchanged).
    pub fn with_retention(&self, change: &RetentionChange) -> TopicOptions {
        let mut o = self.clone();
        if let Some(v) = change.retention_items {
            o.retention_items = v;
        }
        if let Some(v) = change.retention_bytes {
            o.retention_bytes = v;
        }
        if let Some(v) = change.retention_ms {
            o.retention_ms = v;
        }
        o
    }

    /// Whether items (and subscribers' streams) under `other` are as under these: the
    /// same stream options. Retention may differ.
    pub fn same_items(&self, other: &TopicOptions) -> bool {
        self.stream_options() == other.stream_options()
    }

    /// Whether `other` describes the same topic: the same items and the same retention.
    /// A logical type given by name or number, or left to its default, counts as the
    /// same type, so that options read back from a description match.
    pub fn same_as(&self, other: &TopicOptions) -> bool {
        self.same_items(other)
            && self.retention_items == other.retention_items
            && self.retention_bytes == other.retention_bytes
            && self.retention_ms == other.retention_ms
    }

    /// How the options `asked` for differ from these, field by field, for the error
    /// of a create that clashes with an existing topic: "physical is quads, not
    /// triples; retention_ms is 0, not 5". A logical type given by name, by number or
    /// left to its default is compared as the type it stands for, as in [`Self::same_as`].
    pub fn differences(&self, asked: &TopicOptions) -> String {
        fn physical(o: &TopicOptions) -> String {
            match o.physical {
                Physical::Triples => "triples".into(),
                Physical::Quads => "quads".into(),
            }
        }
        fn logical(o: &TopicOptions) -> String {
            match o.logical_type() {
                Ok(t) => t.name().to_string(),
                Err(_) => o.logical.clone().unwrap_or_default(),
            }
        }
        type Field = (&'static str, fn(&TopicOptions) -> String);
        let fields: [Field; 7] = [
            ("physical", physical),
            ("logical", logical),
            ("rdf_star", |o| o.rdf_star.to_string()),
            ("generalized", |o| o.generalized.to_string()),
            ("retention_items", |o| o.retention_items.to_string()),
            ("retention_bytes", |o| o.retention_bytes.to_string()),
            ("retention_ms", |o| o.retention_ms.to_string()),
        ];
        let mut out = Vec::new();
        for (name, value) in fields {
            let (has, wants) = (value(self), value(asked));
            if has != wants {
                out.push(format!("{name} is {has}, not {wants}"));
            }
        }
        out.join("; ")
    }

    /// What a memory log keeps: items, bytes and age.
    pub(super) fn memory_retention(&self) -> crate::log::MemoryRetention {
        crate::log::MemoryRetention {
            items: self.retention_items.min(usize::MAX as u64) as usize,
            bytes: self.retention_bytes_limit(),
            age: self.retention_age(),
        }
    }

    /// The size limit of a log, if there is one.
    pub(super) fn retention_bytes_limit(&self) -> Option<u64> {
        (self.retention_bytes > 0).then_some(self.retention_bytes)
    }

    /// The age limit of a log, if there is one.
    pub(super) fn retention_age(&self) -> Option<std::time::Duration> {
        (self.retention_ms > 0).then(|| std::time::Duration::from_millis(self.retention_ms))
    }
}

/// A change of a live topic's options ([`Registry::alter`](crate::topic::Registry::alter)). Only retention can
/// change: the other options shape the topic's items and its subscribers' streams, so
/// they are fixed when it is created. They may be given (a description's `options`
/// sent back) as long as they are the topic's. An absent field stays as it is.
///
/// ```
/// use jelly_server::topic::{RetentionChange, TopicOptions};
/// let change = RetentionChange::from_json(br#"{"retention_ms": 60000}"#).unwrap();
/// let options = TopicOptions::default().with_retention(&change);
/// assert_eq!(options.retention_ms, 60_000);
/// let refused = RetentionChange::from_json(br#"{"retention_ms": "1h"}"#).unwrap_err();
/// assert!(refused.contains("`retention_ms` must be"));
/// let quads = TopicOptions::default();
/// let same = RetentionChange::from_json(br#"{"physical": "quads", "retention_ms": 5}"#);
/// assert!(same.unwrap().check_fixed(&quads).is_ok());
/// let other = RetentionChange::from_json(br#"{"physical": "triples", "retention_ms": 5}"#);
/// assert!(other.unwrap().check_fixed(&quads).unwrap_err().contains("`physical` is fixed"));
/// let alone = RetentionChange::from_json(br#"{"rdf_star": true}"#).unwrap_err();
/// assert!(alone.contains("`rdf_star` is fixed"));
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RetentionChange {
    pub retention_items: Option<u64>,
    pub retention_bytes: Option<u64>,
    pub retention_ms: Option<u64>,
    /// Fixed options given with the change, which must be the topic's.
    pub fixed: Vec<(String, serde_json::Value)>,
}

impl RetentionChange {
    /// Reads a change from a JSON object; the error names the field that is wrong.
    pub fn from_json(body: &[u8]) -> Result<RetentionChange, String> {
        let fields = object_fields(body)?;
        let mut change = RetentionChange::default();
        for (key, v) in &fields {
            let slot = match key.as_str() {
                "retention_items" => &mut change.retention_items,
                "retention_bytes" => &mut change.retention_bytes,
                "retention_ms" => &mut change.retention_ms,
                "physical" | "logical" | "rdf_star" | "generalized" => {
                    change.fixed.push((key.clone(), v.clone()));
                    continue;
                }
                _ => {
                    return Err(format!(
                        "unknown field `{key}` (retention_items, retention_bytes or retention_ms)"
                    ));
                }
            };
            *slot =
                Some(v.as_u64().ok_or_else(|| {
                    format!("`{key}` must be a whole number of at least 0, not {v}")
                })?);
        }
        if (
            change.retention_items,
            change.retention_bytes,
            change.retention_ms,
        ) == (None, None, None)
        {
            if let Some((key, _)) = change.fixed.first() {
                return Err(format!(
                    "nothing to change: `{key}` is fixed when a topic is created; only \
                     retention_items, retention_bytes and retention_ms can change"
                ));
            }
            return Err(
                "nothing to change: give retention_items, retention_bytes or retention_ms".into(),
            );
        }
        Ok(change)
    }

    /// Checks that the fixed options given with the change are those of `current`.
    pub fn check_fixed(&self, current: &TopicOptions) -> Result<(), String> {
        for (key, given) in &self.fixed {
            let same = match key.as_str() {
                "physical" => serde_json::to_value(current.physical).ok().as_ref() == Some(given),
                "logical" => {
                    let name = match given {
                        serde_json::Value::String(s) => Some(s.clone()),
                        serde_json::Value::Number(n) => Some(n.to_string()),
                        _ => None,
                    };
                    name.and_then(|n| LogicalType::parse(&n)) == current.logical_type().ok()
                }
                "rdf_star" => given.as_bool() == Some(current.rdf_star),
                "generalized" => given.as_bool() == Some(current.generalized),
                _ => false,
            };
            if !same {
                let now = match key.as_str() {
                    "logical" => current
                        .logical_type()
                        .map_or_else(|_| "?".into(), |l| l.name().to_string()),
                    _ => serde_json::to_value(current)
                        .ok()
                        .and_then(|v| v.get(key).map(ToString::to_string))
                        .unwrap_or_default(),
                };
                return Err(format!(
                    "`{key}` is fixed when a topic is created (it is {now}, not {given}); only \
                     retention_items, retention_bytes and retention_ms can change"
                ));
            }
        }
        Ok(())
    }
}
